//! `waits trace`'s statement times from in-process recorders at the
//! executor's start and end (its default), on real PostgreSQL 15 and 18:
//! the same statements, texts, waits and attributions as the kernel
//! uprobes give (`--uprobes`) for the same known workload, in time order
//! with the perf event's waits (a wait inside a statement is that
//! statement's, a wait for the client is none's); afterwards the entries'
//! code and the executable mappings as found.  pgdbg killed alone: its
//! guardian takes the recorders out; killed with its guardian: the
//! backend serves on through the jumps left, until the next attach takes
//! them out (from the record, or, the record lost, from the jumps).

use common::*;
use pgdbg_testbed as common;
use std::io::Read;
use std::time::Duration;

const START: &str = "standard_ExecutorStart";
const END: &str = "standard_ExecutorEnd";
const SLEEP: &str = "select pg_sleep(0.05)::text";

/// `waits trace` (with `opts`) on the client's backend while it runs 24
/// known statements: the head (what was said before tracing), the rest of
/// the output, the wait events and the statement events captured.
fn traced(
    a: &mut Client,
    opts: &str,
) -> (
    String,
    String,
    Vec<serde_json::Value>,
    Vec<serde_json::Value>,
) {
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-waits-marks-{}-{pid}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&cap);
    let cmd = format!("waits trace --for 4s --quiet{opts}");
    let (p, mut out, head) = start_waits_trace(pid, &cmd, Some(&cap));
    for i in 0..24 {
        if i % 6 == 0 {
            a.simple_text(SLEEP);
        } else {
            assert_eq!(a.query_one_i64(&format!("select {i} + 0")), i);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{head}{rest}{err}");
    let waits = read_events(&cap, "wait");
    let stmts = read_events(&cap, "statement");
    let _ = std::fs::remove_file(&cap);
    (head, format!("{rest}{err}"), waits, stmts)
}

/// Each wait's event and the statement it was charged to, in order.
fn attributed(waits: &[serde_json::Value]) -> Vec<(String, Option<String>)> {
    waits
        .iter()
        .map(|w| {
            (
                w["wait_event"].as_str().unwrap().to_string(),
                w["query"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn same_as_uprobes(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    // the statements' catalog entries cached (their first run reads pages)
    a.simple_text(SLEEP);
    a.query_one_i64("select 1 + 0");
    let maps_before = anon_exec_maps(pid);
    let (head, rest, waits, stmts) = traced(&mut a, "");
    assert!(
        head.contains("in-process recorder"),
        "statement times not from in-process recorders:\n{head}"
    );
    for f in [START, END] {
        assert!(code_matches_file(pid, &bin, f, 16), "{f}'s code after");
    }
    assert_eq!(anon_exec_maps(pid), maps_before, "pages left mapped");
    let (uhead, urest, uwaits, ustmts) = traced(&mut a, " --uprobes");
    assert!(!uhead.contains("in-process"), "{uhead}");
    // the statements: 24, each with its own text, in order, the same
    let texts = |st: &[serde_json::Value]| -> Vec<String> {
        st.iter()
            .map(|e| e["query"].as_str().unwrap().to_string())
            .collect()
    };
    let sent: Vec<String> = (0..24)
        .map(|i| match i % 6 {
            0 => SLEEP.to_string(),
            _ => format!("select {i} + 0"),
        })
        .collect();
    assert_eq!(texts(&stmts), sent, "in-process:\n{head}{rest}");
    assert_eq!(texts(&ustmts), sent, "uprobes:\n{uhead}{urest}");
    for e in stmts.iter().filter(|e| e["query"] == SLEEP) {
        let d = e["duration_ns"].as_u64().unwrap();
        assert!((50_000_000..1_000_000_000).contains(&d), "{e}");
    }
    // the waits, and the statement each is charged to: PgSleep inside
    // its statement, ClientRead outside any (merged in time order with
    // the perf event's stores); the same either way, but for the number
    // of waits for the client (a latch wakeup while idle adds one)
    let (mine, theirs) = (attributed(&waits), attributed(&uwaits));
    let workload = |w: &[(String, Option<String>)]| -> Vec<(String, Option<String>)> {
        w.iter().filter(|x| x.0 != "ClientRead").cloned().collect()
    };
    assert_eq!(workload(&mine), workload(&theirs), "{rest}\n---\n{urest}");
    assert_eq!(
        workload(&mine),
        vec![("PgSleep".to_string(), Some(SLEEP.to_string())); 4],
        "{rest}"
    );
    for (e, q) in mine.iter().chain(&theirs) {
        if e == "ClientRead" {
            assert_eq!(q, &None, "a wait for the client charged to a statement");
        }
    }
    let reads = |w: &[(String, Option<String>)]| w.iter().filter(|x| x.0 == "ClientRead").count();
    assert!((24..=26).contains(&reads(&mine)), "{rest}");
    assert_eq!(a.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn waits_marks_same_as_uprobes_15() {
    same_as_uprobes(15);
}

#[test]
fn waits_marks_same_as_uprobes_18() {
    same_as_uprobes(18);
}

/// `waits trace` started on the client's backend until its recorders are
/// in; then `kill` (pgdbg's PID) kills what it kills.  The backend serves
/// 20 statements afterwards.  Returns pgdbg's PID.
fn kill_while_tracing(a: &mut Client, kill: impl FnOnce(i32)) -> i32 {
    let pid = a.pid();
    let (mut p, _out, head) = start_waits_trace(pid, "waits trace --for 60s --quiet", None);
    assert!(head.contains("in-process recorder"), "{head}");
    for i in 0..10 {
        assert_eq!(a.query_one_i64(&format!("select {i}")), i);
    }
    let ppid = p.pid();
    kill(ppid);
    let _ = p.child.kill();
    let _ = p.child.wait();
    for i in 0..20 {
        assert_eq!(a.query_one_i64(&format!("select {i} + 1")), i + 1);
    }
    assert!(
        !proc_state(pid).starts_with(['T', 't']),
        "{}",
        proc_state(pid)
    );
    ppid
}

fn killed(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let maps_before = anon_exec_maps(pid);
    let restored = |pid: i32| {
        [START, END]
            .iter()
            .all(|f| code_matches_file(pid, &bin, f, 16))
    };
    // pgdbg alone: its guardian takes the jumps out
    kill_while_tracing(&mut a, |p| unsafe {
        libc::kill(p, libc::SIGKILL);
    });
    wait_until("the guardian to restore", Duration::from_secs(20), || {
        tracer_pid(pid) == 0 && restored(pid)
    });
    // with its guardian: the jumps stay, the backend serves through them;
    // the next attach takes them out, from the record left
    let ppid = kill_while_tracing(&mut a, |p| kill_with_guardian(p, pid));
    assert!(!restored(pid), "the jump left behind is gone");
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "--ex",
        "waits trace --for 1s --quiet",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains(&format!("left by pgdbg (PID {ppid}): restored")),
        "{out}\n{err}"
    );
    assert!(restored(pid), "{out}\n{err}");
    // again, the record lost too: the next `waits trace` finds the jumps
    // at the executor's entries and takes them out before placing its own
    kill_while_tracing(&mut a, |p| kill_with_guardian(p, pid));
    remove_guardian_record(pid);
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "--ex",
        "waits trace --for 1s --quiet --uprobes",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains(
            "waits trace: removed the in-process counter or recorder an earlier pgdbg left at"
        ),
        "{out}\n{err}"
    );
    assert!(restored(pid), "{out}\n{err}");
    assert_eq!(anon_exec_maps(pid), maps_before, "pages left mapped");
    assert!(!catches_sigtrap(pid), "the SIGTRAP action was not put back");
    assert_eq!(a.query_one_i64("select 42"), 42);
    cl.assert_no_crash();
}

#[test]
fn waits_marks_killed_15() {
    killed(15);
}

#[test]
fn waits_marks_killed_18() {
    killed(18);
}

/// Another tool's kernel uprobe (perf probe, bpftrace: opened here as
/// they open it) on standard_ExecutorStart while `waits trace` records
/// there: pgdbg undoes its jump when the backend traps on it, the
/// statements before are timed, the output says the later ones are not
/// and why, the uprobe counts its hits, and afterwards the code is the
/// file's with no page of pgdbg's left.
#[test]
fn waits_marks_taken_over_by_a_uprobe_15() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let (_, offset) = symbol_in_file(&exe, START);
    a.query_one_i64("select 1");
    let maps_before = anon_exec_maps(pid);
    let (p, mut out, head) = start_waits_trace(pid, "waits trace --for 6s --quiet", None);
    assert!(
        head.contains("in-process recorder at standard_ExecutorStart"),
        "{head}"
    );
    for i in 0..5 {
        assert_eq!(a.query_one_i64(&format!("select {i} + 100")), i + 100);
    }
    let u = pgdbg::perf::UprobeCounter::open(&exe, offset, pid).unwrap();
    for i in 0..5 {
        assert_eq!(a.query_one_i64(&format!("select {i} + 200")), i + 200);
    }
    assert_eq!(
        u.count().unwrap(),
        5,
        "the other tool's uprobe saw each call"
    );
    drop(u);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{rest}\n{err}");
    assert!(
        rest.contains(
            "another tool (a kernel uprobe, or a patcher) took over the in-process recorder's jump at standard_ExecutorStart"
        ),
        "{rest}"
    );
    for i in 0..5 {
        assert!(rest.contains(&format!("select {i} + 100")), "{rest}");
    }
    assert!(!rest.contains("+ 200"), "{rest}");
    assert!(code_matches_file(pid, &bin, START, 16));
    assert_eq!(anon_exec_maps(pid), maps_before, "pages left mapped");
    assert_eq!(a.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}
