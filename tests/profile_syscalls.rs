//! `profile --syscalls` on real PostgreSQL 15 and 18, side by side with
//! `perf trace -s -p PID` (Debian's linux-perf) on the same backend at the
//! same time, with workloads whose answer is known:
//!
//! - a loop of `pg_sleep(0.5)`: the backend sleeps in `WaitLatch`, one
//!   epoll_wait (select family) per sleep, so that call holds the time
//!   recorded within a few percent and each whole call lasts 0.5 s; perf
//!   names the same call first, with the same per-call time;
//! - commits with fsync on: each commit is a WAL write and an fdatasync,
//!   so fdatasync's calls are the rows committed while recorded (counted
//!   in the table around the recording) and perf sees both calls too.
//!
//! Neither backend is traced or stopped.  Bad options: one line, non-zero
//! exit.  Without perf the comparison fails saying so.

use common::running::*;
use common::*;
use pgdbg_testbed as common;
use serde_json::Value;
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The calls `perf trace` counts as waiting for an event or a timeout.
const SELECT_FAMILY: &[&str] = &[
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "select",
    "pselect6",
    "poll",
    "ppoll",
];

/// `perf trace -s -p PID -o OUT -- sleep SECS`, started now.
fn perf_trace(pid: i32, secs: u32, out: &std::path::Path) -> Child {
    common::ex::assert_perf_there("profile --syscalls with perf trace -s");
    Command::new("perf")
        .args(["trace", "-s", "-p", &pid.to_string(), "-o"])
        .arg(out)
        .args(["--", "sleep", &secs.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("perf trace")
}

/// The summary `perf trace -s` wrote: name -> (calls, total ms, avg ms,
/// max ms).
fn perf_summary(mut p: Child, out: &std::path::Path) -> HashMap<String, (u64, f64, f64, f64)> {
    let st = p.wait().unwrap();
    let mut err = String::new();
    use std::io::Read;
    let _ = p.stderr.take().unwrap().read_to_string(&mut err);
    assert!(st.success(), "perf trace failed: {err}");
    let text = std::fs::read_to_string(out).unwrap();
    let _ = std::fs::remove_file(out);
    eprintln!("perf trace -s:\n{text}");
    let mut m = HashMap::new();
    let mut table = false;
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first().is_some_and(|f| f.starts_with("-----")) {
            table = true;
            continue;
        }
        if table && w.len() >= 7 {
            let num = |i: usize| w[i].parse::<f64>().ok();
            if let (Some(c), Some(t), Some(a), Some(x)) = (num(1), num(3), num(5), num(6)) {
                m.insert(w[0].to_string(), (c as u64, t, a, x));
            }
        }
    }
    assert!(!m.is_empty(), "no summary from perf trace:\n{text}");
    m
}

/// `pgdbg profile PID --syscalls --for SECS --format json -q`, watching
/// that the backend is never traced nor stopped meanwhile.
fn syscalls_json(pid: i32, secs: u32) -> Value {
    let args = [
        "profile",
        &pid.to_string(),
        "--syscalls",
        "--for",
        &format!("{secs}s"),
        "--format",
        "json",
        "-q",
    ];
    let out = output_never_stopped(&args, pid, Duration::from_secs(2), "syscalls");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    eprintln!("pgdbg: {v}");
    v
}

fn row<'a>(p: &'a Value, name: &str) -> Option<&'a Value> {
    p["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["syscall"] == name)
}

fn sleep_loop(major: u32) {
    let cl = Cluster::start(major);
    let sleep = "select pg_sleep(0.5) from generate_series(1, 30)";
    let (mut a, pid, h) = cl.running(sleep, "pg_sleep(0.5)");
    let pout = std::env::temp_dir().join(format!("pgdbg-perf-trace-{pid}.txt"));
    let perf = perf_trace(pid, 5, &pout);
    std::thread::sleep(Duration::from_millis(300));
    let p = syscalls_json(pid, 4);
    let theirs = perf_summary(perf, &pout);
    cl.still_active(pid, "pg_sleep(0.5)");

    // the known answer: the sleep's call holds the window
    let top = &p["syscalls"][0];
    let name = top["syscall"].as_str().unwrap();
    assert!(SELECT_FAMILY.contains(&name), "top call {name}: {p}");
    let dur = p["duration_s"].as_f64().unwrap();
    let share = top["total_ms"].as_f64().unwrap() / 1e3 / dur;
    assert!(
        (0.97..=1.001).contains(&share),
        "{name} holds {share} of the {dur} s recorded: {p}"
    );
    // a whole sleep: its 500 ms timeout and the wake-up's latency
    let max = top["max_ms"].as_f64().unwrap();
    assert!((499.0..=575.0).contains(&max), "a whole sleep: {max} ms");
    let calls = top["calls"].as_u64().unwrap();
    assert!(
        (dur / 0.5 - 1.0..=dur / 0.5 + 2.0).contains(&(calls as f64)),
        "a call per sleep: {calls} in {dur} s"
    );

    // perf: the same call first, the same longest (whole) call; perf
    // counts the calls cut by its window too (a second apart from pgdbg's)
    let (pname, (pcalls, _, _, pmax)) = theirs
        .iter()
        .max_by(|a, b| a.1.1.total_cmp(&b.1.1))
        .unwrap();
    assert_eq!(pname, name, "perf trace's top call");
    assert!(
        (pmax - max).abs() < 0.02 * max,
        "perf's longest {pmax} ms, pgdbg's {max} ms"
    );
    assert!(*pcalls >= 5, "perf saw the sleeps: {pcalls}");

    assert_eq!(tracer_pid(pid), 0);
    let r = a.rejoin(h);
    assert!(r.is_ok(), "the sleeps end by themselves: {r:?}");
    cl.assert_no_crash();
}

#[test]
fn syscalls_of_pg_sleep_15() {
    sleep_loop(15);
}

#[test]
fn syscalls_of_pg_sleep_18() {
    sleep_loop(18);
}

/// Rows in `t`, counted by another client.
fn rows(cl: &Cluster) -> i64 {
    cl.connect().query_one_i64("select count(*) from t")
}

#[test]
fn syscalls_of_commits_with_fsync_15() {
    let cl = Cluster::start_with(15, &["fsync=on"]);
    cl.connect().exec("create table t (i int)");
    let commits = "do $$ begin loop insert into t values (1); commit; end loop; end $$";
    let (a, pid, h) = cl.running(commits, "insert into t");
    let pout = std::env::temp_dir().join(format!("pgdbg-perf-trace-{pid}.txt"));

    // the rows committed from the recording's start line to its end; perf
    // started at that line for as long, so that both average (nearly) the
    // same calls: fdatasync's time drifts with the disk's load, and two
    // different windows differed by more than 30% on a busy machine
    let file = std::env::temp_dir().join(format!("pgdbg-syscalls-fsync-{pid}.json"));
    // rows before the recording can have started: every commit it sees
    // comes after (the line below is read a moment after it started, and
    // commits of that moment were counted by the recording only: 4 of
    // them beat the count once on a loaded machine)
    let first = rows(&cl);
    let args = [
        "profile",
        &pid.to_string(),
        "--syscalls",
        "--for",
        "3s",
        "--format",
        "json",
    ];
    let mut pg = Pgdbg::spawn_to_file(&args, &file);
    let mut err = stderr_reader(&mut pg);
    read_until(&mut err, "profile: recording", Duration::from_secs(30));
    let before = rows(&cl);
    let perf = perf_trace(pid, 3, &pout);
    let (code, _, e) = pg.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{e}");
    let end = rows(&cl);
    let committed = end - before;
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let _ = std::fs::remove_file(&file);
    eprintln!("pgdbg: {p}\n{committed} rows committed");
    let theirs = perf_summary(perf, &pout);

    let sync = row(&p, "fdatasync").unwrap_or_else(|| panic!("no fdatasync: {p}"));
    let n = sync["calls"].as_u64().unwrap() as i64;
    assert!(committed > 20, "the loop committed: {committed}");
    assert!(
        n <= end - first + 2 && n as f64 >= 0.9 * committed as f64,
        "an fdatasync per commit: {n} calls, {committed} rows committed while it recorded, {} \
         from before it started to after it ended",
        end - first
    );
    let writes = row(&p, "pwrite64").unwrap_or_else(|| panic!("no pwrite64: {p}"));
    assert!(
        writes["calls"].as_u64().unwrap() as i64 >= n - 2,
        "a WAL write per commit: {writes}"
    );
    assert_eq!(sync["errors"], 0);
    // perf sees the same calls, the same time per fdatasync within 30%,
    // each average without its one longest call: the two windows are not
    // the same seconds, and one flush stalled in only one of them (176 ms
    // among ~10000 of 0.2 ms, under CI's other tests) moved pgdbg's
    // average 9% on its own
    let (pn, ptotal, _, pmax) = theirs["fdatasync"];
    assert!(pn > 20 && theirs.contains_key("pwrite64"), "{theirs:?}");
    let pavg = (ptotal - pmax) / (pn - 1) as f64;
    let f = |k: &str| sync[k].as_f64().unwrap();
    let avg = (f("total_ms") - f("max_ms")) / (n - 1) as f64;
    assert!(
        (pavg - avg).abs() <= 0.3 * avg.max(pavg),
        "fdatasync without the longest call: perf {pavg} ms, pgdbg {avg} ms"
    );
    assert_eq!(tracer_pid(pid), 0);
    cl.end_by_cancel(a, pid, h);
}

#[test]
fn syscalls_bad_input_15() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let pid = c.pid().to_string();
    for (args, needle) in [
        (vec!["--syscalls", "--wall"], "--syscalls"),
        (vec!["--syscalls", "--flamegraph", "x.svg"], "--flamegraph"),
        (vec!["--syscalls", "--format", "folded"], "folded"),
        (vec!["--syscalls", "--pprof", "x.pb.gz"], "--pprof"),
    ] {
        let mut a = vec!["profile", &pid];
        a.extend(args);
        let (code, _, err) = pgdbg(&a);
        assert_one_line_error(code, &err, needle);
    }
    // in --ex commands: refused before attaching, in one line
    let l = common::ex::one_line_error(c.pid(), "profile --syscalls --speedscope x.json");
    assert!(l.contains("--syscalls records no stacks"), "{l}");
    assert_eq!(tracer_pid(c.pid()), 0);
    assert_eq!(c.query_one_i64("select 3"), 3);
}
