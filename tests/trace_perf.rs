//! `trace FUNC ARG... --perf` on real PostgreSQL 15 and 18: the arguments
//! come from the registers kernel uprobes sample at the entry, the backend
//! never stopped: for the same statements, the same calls with the same
//! values as the ptrace mode (LockRelationOid's relation OIDs are the
//! tables' OIDs in pg_class); an argument that needs memory is traced
//! with ptrace stops, saying why; pgdbg killed with SIGKILL leaves the
//! backend's code as the binary has it.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufReader, Read};
use std::time::Duration;

const TABLES: [&str; 3] = ["tp_a", "tp_b", "tp_c"];

/// `cmd` (with --capture) on `pid` while `work` runs: its output and the (relid, lockmode) of each `trace` event.
fn traced(pid: i32, cmd: &str, work: impl FnOnce()) -> (String, Vec<(String, String)>) {
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-trace-perf-{}-{pid}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&cap);
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--capture",
        &cap.display().to_string(),
        "--ex",
        cmd,
    ]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let mut text = read_until(&mut out, "trace: LockRelationOid", Duration::from_secs(60));
    work();
    out.read_to_string(&mut text).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let calls = read_events(&cap, "trace")
        .iter()
        .map(|e| {
            assert_eq!(e["function"], "LockRelationOid");
            (
                e["args"]["relid"].to_string(),
                e["args"]["lockmode"].to_string(),
            )
        })
        .collect();
    let _ = std::fs::remove_file(&cap);
    (text, calls)
}

fn same_calls_as_ptrace(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    for t in TABLES {
        a.exec(&format!("create table if not exists {t} (x int)"));
    }
    let pid = a.pid();
    let oids: Vec<String> = TABLES
        .iter()
        .map(|t| a.query_one_text(&format!("select '{t}'::regclass::oid::text")))
        .collect();
    let mut work = || {
        for t in TABLES {
            assert_eq!(a.query_one_i64(&format!("select count(*) from {t}")), 0);
        }
    };
    // the relation cache warm: the same calls in both runs
    work();
    let cmd = "trace LockRelationOid relid lockmode --for 3s";
    let (ptext, pcalls) = traced(pid, cmd, &mut work);
    let (text, calls) = traced(pid, &format!("{cmd} --perf"), &mut work);
    assert_eq!(calls, pcalls, "--perf:\n{text}\nptrace:\n{ptext}");
    for oid in &oids {
        assert!(
            calls.contains(&(oid.clone(), "1".to_string())),
            "{oid} AccessShareLock:\n{text}"
        );
    }
    // the same lines as the ptrace mode
    let lines = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("LockRelationOid("))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(lines(&text), lines(&ptext));
    assert!(
        text.contains("the backend was not stopped while tracing"),
        "{text}"
    );
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

#[test]
fn trace_perf_same_calls_as_ptrace_all_majors() {
    for m in majors() {
        same_calls_as_ptrace(m);
    }
}

/// An ARGEXPR that reads memory: one line says why, and the ptrace mode
/// traces it; `--count N` ends a --perf trace after N calls.
#[test]
fn trace_perf_falls_back_and_counts() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let (text, calls) = traced(
        pid,
        "trace LockRelationOid relid+1 --perf --count 1",
        || {
            a.query_one_i64("select count(*) from pg_class where false");
        },
    );
    assert!(
        text.contains("'relid+1' is an expression") && text.contains("ptrace stop per call"),
        "{text}"
    );
    assert!(text.contains("trace: 1 call of LockRelationOid"), "{text}");
    assert_eq!(calls.len(), 1, "{text}");
    assert!(text.contains("LockRelationOid(relid+1="), "{text}");
    let (text, calls) = traced(
        pid,
        "trace LockRelationOid relid lockmode --perf --count 2",
        || {
            for _ in 0..3 {
                a.query_one_i64("select count(*) from pg_class where false");
            }
        },
    );
    assert_eq!(calls.len(), 2, "{text}");
    assert!(text.contains("trace: 2 calls of LockRelationOid"), "{text}");
    assert_eq!(a.query_one_i64("select 3"), 3);
    cl.assert_no_crash();
}

/// SIGKILL while the uprobes trace: the kernel removes them.
#[test]
fn trace_perf_killed_leaves_code_as_found() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    for _ in 0..5 {
        let mut p = Pgdbg::spawn(&[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "trace LockRelationOid relid --perf --quiet",
        ]);
        let mut out = BufReader::new(p.child.stdout.take().unwrap());
        read_until(&mut out, "trace: LockRelationOid", Duration::from_secs(60));
        assert!(!code_matches_file(pid, &bin, "LockRelationOid", 1));
        for i in 0..20 {
            assert_eq!(a.query_one_i64(&format!("select {i}")), i);
        }
        p.child.kill().unwrap();
        p.child.wait().unwrap();
        wait_until("the probe removed", Duration::from_secs(10), || {
            code_matches_file(pid, &bin, "LockRelationOid", 16)
        });
        wait_until("the backend untraced", Duration::from_secs(10), || {
            tracer_pid(pid) == 0
        });
        assert_eq!(a.query_one_i64("select 5"), 5);
    }
    cl.assert_no_crash();
}
