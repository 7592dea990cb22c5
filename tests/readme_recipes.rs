//! README.md's recipes, run as written against a real PostgreSQL 15: each
//! `$ pgdbg ...` command of the README (its PID and cluster directory
//! replaced by this test's) runs in the situation the README describes,
//! and every output line the README shows must have a line of the same
//! shape in pgdbg's output (numbers, addresses and column widths aside),
//! except the few named below whose content depends on the machine (which
//! function a sample lands in, whether a block was cached).  A recipe the
//! test does not know fails it, so the README cannot drift from pgdbg.

use common::recipes::{
    Recipe, args_of, assert_all_run, check, poke_until_exit, run, spawn, wait_said,
};
use common::*;
use pgdbg_testbed as common;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The README's recipes: its `$ pgdbg ...` commands.
fn readme_recipes() -> Vec<Recipe> {
    common::recipes::recipes("README.md", &["$ "])
}

/// The README's PID and `$PGDBG_CLUSTER` replaced by the test's.
fn readme_args(command: &str, pid: i32, dir: &Path) -> Vec<String> {
    args_of(
        command,
        &[
            ("5261", &pid.to_string()),
            ("$PGDBG_CLUSTER", dir.to_str().unwrap()),
        ],
    )
}

const MD5_LOOP: &str = "select count(distinct md5(v||g)) from mediumtab, generate_series(1,4) g;";
const SLEEPY_SCAN: &str = "select count(*) from (select n from mediumtab where n % 50 = 0 offset 0) s where pg_sleep(0.0005) is not null;";

#[test]
fn readme_recipes_on_15() {
    let cluster = Cluster::start(15);
    cluster.seed(&["mediumtab"]);
    let tmp = std::env::temp_dir().join(format!("pgdbg-readme-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut s = cluster.connect();
    let pid = s.pid();
    // the session of the README's examples
    s.exec("set max_parallel_workers_per_gather = 0");
    s.exec("prepare s2(int) as select v from mediumtab where n = $1;");
    s.exec(
        "create function bump(k int) returns int language plpgsql as $$ begin perform pg_sleep(0); return k + 1; end $$",
    );
    s.query_one_i64("select bump(0)"); // plpgsql.so loaded, as in the README
    let recipes = readme_recipes();
    let mut done = BTreeSet::new();
    let find = |key: &str| -> &Recipe {
        recipes
            .iter()
            .find(|r| r.command.contains(key))
            .unwrap_or_else(|| panic!("README has no `$ pgdbg` recipe with {key:?}"))
    };

    // pgdbg ps
    let r = find("pgdbg ps");
    let (code, out) = run(&readme_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["/bin/postgres -D"]);
    done.insert(r.key());

    // plancache: custom then generic
    let r = find("plancache --count");
    let log = tmp.join("plancache.out");
    let child = spawn(&readme_args(&r.command, pid, &cluster.dir), &tmp, &log);
    wait_said(&log, "plancache: watching");
    for i in 1..=7 {
        s.simple_text(&format!("execute s2({i})"));
    }
    let (code, out) = poke_until_exit(child, &log, || {});
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    done.insert(r.key());

    // plan and wait, then profile, of a running statement
    let h = s.spawn_text(MD5_LOOP);
    cluster.wait_active(&[pid], "count(distinct md5");
    let r = find("--ex plan --ex wait");
    let (code, out) = run(&readme_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["on CPU"]); // or the wait it is in at that instant
    done.insert(r.key());
    let r = find("pgdbg profile");
    let (code, out) = run(&readme_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["md5_calc", "datumGetSize", "ExecInterpExpr"]); // where samples land
    done.insert(r.key());
    cluster.cancel(&[pid]);
    let _ = s.rejoin(h);

    // plan --progress and waits trace of a slow scan
    let h = s.spawn_text(SLEEPY_SCAN);
    cluster.wait_active(&[pid], "pg_sleep(0.0005)");
    let r = find("plan --progress");
    let (code, out) = run(&readme_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["executing now"]);
    done.insert(r.key());
    let r = find("waits trace");
    let (code, out) = run(&readme_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["DataFileRead"]); // only when a block was not cached
    done.insert(r.key());
    cluster.cancel(&[pid]);
    let _ = s.rejoin(h);

    // plan --next --analyze of the next execute
    let r = find("plan --next --analyze");
    let log = tmp.join("analyze.out");
    let child = spawn(&readme_args(&r.command, pid, &cluster.dir), &tmp, &log);
    let (code, out) = poke_until_exit(child, &log, || {
        s.simple_text("execute s2(44)");
    });
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["Buffers:"]); // hits or reads, by the cache
    done.insert(r.key());

    // a breakpoint in PL/pgSQL
    let r = find("exec_stmt_perform");
    let log = tmp.join("break.out");
    let child = spawn(&readme_args(&r.command, pid, &cluster.dir), &tmp, &log);
    let (code, out) = poke_until_exit(child, &log, || {
        let h = s.spawn_text("select bump(41)");
        assert_eq!(s.rejoin(h).unwrap(), "42");
    });
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    done.insert(r.key());

    // many backends under pgbench, scripted, and the report
    let script = tmp.join("pb.sql");
    std::fs::write(
        &script,
        "\\set n random(1, 1000000)\nselect v from mediumtab where n = :n;\n",
    )
    .unwrap();
    let mut bench = Command::new(cluster.bin.join("pgbench"))
        .args(["-n", "-M", "prepared", "-c", "3", "-T", "60", "-f"])
        .arg(&script)
        .args([
            "-h",
            cluster.dir.to_str().unwrap(),
            "-U",
            "postgres",
            "postgres",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pgbench");
    wait_until("pgbench's clients", Duration::from_secs(30), || {
        cluster.connect().query_one_i64(
            "select count(*) from pg_stat_activity where application_name = 'pgbench' and query <> ''",
        ) == 3
    });
    let r = find("attach --cluster");
    let mut args = readme_args(&r.command, pid, &cluster.dir);
    for a in args.iter_mut().filter(|a| a.starts_with("scripts/")) {
        *a = repo().join(&*a).to_str().unwrap().to_string();
    }
    let (code, out) = run(&args, &tmp);
    let _ = bench.kill();
    let _ = bench.wait();
    assert_eq!(code, 0, "{out}");
    done.insert(r.key());
    let r = find("pgdbg report");
    let (code, out) = run(&readme_args(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    done.insert(r.key());

    assert_all_run(&recipes, &done);
    let _ = std::fs::remove_dir_all(&tmp);
    cluster.assert_no_crash();
}
