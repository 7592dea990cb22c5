//! `pgdbg attach --cluster`: each new backend is stopped at its fork and
//! held until its worker has armed the script, so that even a session of
//! one short statement is observed from its first statement; and every
//! backend is left running, untraced.

mod common;
use common::*;
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-forks-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// N sessions of one statement each (`psql -c`, a new backend each, a
/// few milliseconds long), one after the other, under a cluster-wide
/// `count`: every backend's count is in the capture and counts its one
/// statement.  (Looking for new backends every 100 ms saw almost none.)
fn each_short_session_counted(major: u32) {
    const N: usize = 30;
    let cl = Cluster::start(major);
    let cap = temp(&format!("short-{major}.jsonl"));
    let out = temp(&format!("short-{major}.out"));
    let script = write_script(
        &format!("short-sessions-{major}"),
        &["count standard_ExecutorStart"],
    );
    let mut p = Pgdbg::spawn_to_file(
        &[
            "attach",
            "--cluster",
            cl.dir.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--for",
            "600s",
            "--capture",
            cap.to_str().unwrap(),
        ],
        &out,
    );
    let mut err = stderr_reader(&mut p);
    let banner = read_until(&mut err, "running the script", Duration::from_secs(60));
    assert!(
        !banner.contains("looked for every 100 ms"),
        "process events refused here: {banner}"
    );
    let psql = cl.bin.join("psql");
    let mut pids = Vec::new();
    for _ in 0..N {
        // psql connects, then reads its statement: it comes 50 ms after
        // the connection (a client's think time).  Stopping the backend at
        // its fork takes well under a millisecond, but on a loaded machine
        // pgdbg's thread may wait that long for a CPU, and a whole session
        // of `psql -c` lasts a few; looking every 100 ms and attaching in
        // 70 ms or more sees none of these first statements.
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "(sleep 0.05; echo 'select pg_backend_pid();') | {} -h {} -U postgres -X -At postgres",
                psql.display(),
                cl.dir.display()
            ))
            .output()
            .expect("run psql");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let pid: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        pids.push(pid);
    }
    // Ctrl-C: the workers end their scripts and detach
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let (code, _, _) = p.wait(Duration::from_secs(120));
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let ev: Vec<serde_json::Value> = std::fs::read_to_string(&cap)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("capture lines are JSON"))
        .collect();
    let counted = |pid: i32| {
        ev.iter()
            .find(|e| e["event"] == "count" && e["pid"] == pid)
            .and_then(|e| e["calls"].as_u64())
    };
    let missed: Vec<(i32, Option<u64>)> = pids
        .iter()
        .map(|p| (*p, counted(*p)))
        .filter(|(_, n)| n.unwrap_or(0) < 1)
        .collect();
    assert!(
        missed.is_empty(),
        "{} of {N} sessions not counted from their first statement: {missed:?}\n{banner}{rest}\n{text}",
        missed.len()
    );
    assert!(code == 0 || code == 130, "exit {code}: {rest}");
    assert!(
        rest.contains("held stopped from just after their fork"),
        "{rest}"
    );
    // nothing left traced or stopped: the backends of the sessions are
    // gone, the cluster's other processes run untraced
    for pid in children(cl.postmaster_pid) {
        assert_eq!(tracer_pid(pid), 0, "process {pid} left traced");
        assert!(
            !proc_state(pid).starts_with('T'),
            "process {pid} left stopped"
        );
    }
    let mut c = cl.connect();
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

#[test]
fn cluster_counts_each_short_session_from_its_first_statement_15() {
    each_short_session_counted(15);
}

#[test]
fn cluster_counts_each_short_session_from_its_first_statement_18() {
    each_short_session_counted(18);
}
