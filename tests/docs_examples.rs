//! The examples of docs/*.md, run as written against a real PostgreSQL 15,
//! as tests/readme_recipes.rs runs the README's: each `$ pgdbg ...` command
//! and each `(pgdbg) ` prompt session of the documents (their PID, data
//! directory and durations replaced by this test's) runs in the situation
//! the document describes, and every output line shown must have a line
//! of the same shape in pgdbg's output, except the few named below whose
//! content depends on the machine or on a workload the test does not make
//! (which function a sample lands in, a lock manager's contention).  An
//! example the test does not know fails it.  commands.md (generated, see
//! tests/docs.rs) and benchmarks.md (measured figures) are left out.

use common::recipes::{
    Recipe, args_of, assert_all_run, check, check_names_aside, poke_until_exit, recipes, run,
    spawn, spawn_with_input, wait_said,
};
use common::running::LOOP;
use common::*;
use pgdbg_testbed as common;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// The documents whose examples this test runs.
const DOCS: &[&str] = &[
    "docs/usage.md",
    "docs/containers.md",
    "docs/troubleshooting.md",
    "docs/safety.md",
    "docs/binaries.md",
    "docs/testing.md",
    "docs/internals.md",
];

const MD5_LOOP: &str = "select count(distinct md5(v||g)) from mediumtab, generate_series(1,4) g;";
const SLEEPY_SCAN: &str = "select count(*) from (select n from mediumtab where n % 50 = 0 offset 0) s where pg_sleep(0.0005) is not null;";

/// The documents' PID (4711) and data directory replaced by the test's,
/// and their long durations shortened (the output's shape is the same).
fn doc_args(command: &str, pid: i32, dir: &Path) -> Vec<String> {
    args_of(
        command,
        &[
            ("4711", &pid.to_string()),
            ("/var/lib/postgresql/15/main", dir.to_str().unwrap()),
            ("--for 60s", "--for 8s"),
            ("--for 10s", "--for 2s"),
        ],
    )
}

#[test]
fn docs_examples_on_15() {
    let all: Vec<Recipe> = DOCS
        .iter()
        .flat_map(|d| recipes(d, &["$ ", "(pgdbg) "]))
        .collect();
    let find = |file: &str, key: &str| -> &Recipe {
        all.iter()
            .find(|r| r.source == file && r.command.contains(key))
            .unwrap_or_else(|| panic!("{file} has no example with {key:?}"))
    };
    let mut done = BTreeSet::new();
    let cluster = Cluster::start(15);
    cluster.seed(&["mediumtab"]);
    let tmp = std::env::temp_dir().join(format!("pgdbg-docs-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();

    // binaries.md: a pending breakpoint in plpgsql.so, at the prompt (its
    // commands piped), armed when a DO block loads the library
    let mut b = cluster.connect();
    let bpid = b.pid();
    let brk = find("docs/binaries.md", "break exec_stmt_execsql");
    let cont = all
        .iter()
        .find(|r| r.source == "docs/binaries.md" && r.command == "continue")
        .expect("binaries.md's continue");
    let log = tmp.join("pending.out");
    let input = format!("{}\n{}\n", brk.command, cont.command);
    let child = spawn_with_input(&["attach".into(), bpid.to_string()], &tmp, &log, &input);
    wait_said(&log, "pending until a library defines it");
    let (code, out) = poke_until_exit(child, &log, || {
        let h = b.spawn_text("do $$ declare x int; begin select 1 into x; end $$");
        b.rejoin(h).unwrap();
    });
    assert_eq!(code, 0, "{out}");
    check(brk, &out, &[]);
    check(cont, &out, &[]);
    done.insert(brk.key());
    done.insert(cont.key());
    drop(b);

    let mut s = cluster.connect();
    let pid = s.pid();
    s.exec("set max_parallel_workers_per_gather = 0");

    // usage.md: plancache of a statement that keeps its custom plan (a
    // range the generic plan overestimates) and of one that goes generic
    let r = find("docs/usage.md", "plancache --for");
    s.exec("prepare s1(int) as select count(*) from mediumtab where n > $1;");
    s.exec("prepare s2(int) as select v from mediumtab where n = $1;");
    let log = tmp.join("plancache.out");
    let child = spawn(&doc_args(&r.command, pid, &cluster.dir), &tmp, &log);
    wait_said(&log, "plancache: watching");
    for i in 1..=7 {
        s.simple_text(&format!("execute s1({})", 999_990 + i));
        s.simple_text(&format!("execute s2({i})"));
    }
    let (code, out) = poke_until_exit(child, &log, || {});
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    done.insert(r.key());

    // usage.md: plan and wait of a running statement, and wait of every
    // backend of the cluster
    let h = s.spawn_text(MD5_LOOP);
    cluster.wait_active(&[pid], "count(distinct md5");
    for key in ["--ex plan --ex wait", "wait --cluster"] {
        let r = find("docs/usage.md", key);
        let (code, out) = run(&doc_args(&r.command, pid, &cluster.dir), &tmp);
        assert_eq!(code, 0, "{out}");
        assert!(!out.trim().is_empty(), "`{}` printed nothing", r.command);
        if r.command.contains("--json") {
            for line in out.lines() {
                serde_json::from_str::<serde_json::Value>(line)
                    .unwrap_or_else(|e| panic!("`{}`: {e}: {line}", r.command));
            }
        }
        check(r, &out, &[]);
        done.insert(r.key());
    }
    cluster.cancel(&[pid]);
    let _ = s.rejoin(h);

    // usage.md: waits trace with stacks of a slow scan (the document's
    // lock manager waits need 1000 partitions and many backends)
    let h = s.spawn_text(SLEEPY_SCAN);
    cluster.wait_active(&[pid], "pg_sleep(0.0005)");
    let r = find("docs/usage.md", "waits trace --for");
    let (code, out) = run(&doc_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["LockManager"]);
    check_names_aside(r, &out, &["LockManager"]);
    done.insert(r.key());

    // usage.md: a capture of three backends' waits, one of which exits
    // meanwhile, and its report
    let mut idle = cluster.connect();
    let mut leaving = Some(cluster.connect());
    let capture = tmp.join("out.jsonl");
    let script = repo().join("scripts/examples/lockmanager-waits.pgdbg");
    let args: Vec<String> = [
        "attach",
        "--cluster",
        cluster.dir.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--for",
        "4s",
        "--capture",
        capture.to_str().unwrap(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let log = tmp.join("capture.out");
    let child = spawn(&args, &tmp, &log);
    wait_until("three backends attached", Duration::from_secs(60), || {
        capture.exists() && read_events(&capture, "attach").len() >= 3
    });
    let (code, out) = poke_until_exit(child, &log, || {
        leaving = None;
        idle.simple_text("select 1");
    });
    assert_eq!(code, 0, "{out}");
    cluster.cancel(&[pid]);
    let _ = s.rejoin(h);
    let r = find("docs/usage.md", "report out.jsonl");
    let (code, out) = run(&doc_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    let names = ["DataFileRead", "LockManager"]; // by the cache, the workload
    check(r, &out, &names);
    check_names_aside(r, &out, &names);
    done.insert(r.key());
    let r = find("docs/usage.md", "--flamegraph waits.svg");
    let (code, out) = run(&doc_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    assert!(tmp.join("waits.svg").exists());
    done.insert(r.key());

    // usage.md: CPU profiles of a PL/pgSQL loop
    let h = s.spawn_text(LOOP);
    cluster.wait_active(&[pid], common::running::LOOP_SHOWS);
    let r = find("docs/usage.md", "--for 10s --hz 999");
    let (code, out) = run(&doc_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    let names = [
        "ExecInterpExpr",
        "exec_eval_expr",
        "exec_stmts",
        "plpgsql_param_eval_var",
    ]; // where samples land
    check(r, &out, &names);
    check_names_aside(r, &out, &names);
    done.insert(r.key());
    let r = find("docs/usage.md", "--wall");
    let (code, out) = run(&doc_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    assert!(tmp.join("wall.json").exists() && tmp.join("wall.pb.gz").exists());
    done.insert(r.key());
    cluster.cancel(&[pid]);
    let _ = s.rejoin(h);

    // usage.md: the system calls of a backend in pg_sleep
    let h = s.spawn_text("select pg_sleep(0.5) from generate_series(1, 40)");
    cluster.wait_active(&[pid], "pg_sleep(0.5)");
    let r = find("docs/usage.md", "--syscalls --for");
    let (code, out) = run(&doc_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    done.insert(r.key());
    // (the example waits on an extension lock; this backend sleeps)
    let r = find("docs/usage.md", "--off-cpu --for 4s --rows 3");
    let (code, out) = run(&doc_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["Lock:extend", "off CPU"]);
    assert!(out.contains("Timeout:PgSleep"), "{out}");
    done.insert(r.key());
    cluster.cancel(&[pid]);
    let _ = s.rejoin(h);

    assert_all_run(&all, &done);
    let _ = std::fs::remove_dir_all(&tmp);
    cluster.assert_no_crash();
}
