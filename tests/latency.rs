//! `latency FUNC` on real PostgreSQL 15 and 18: entry and return uprobes
//! time each call of pg_sleep within the time the statement itself
//! measures (clock_timestamp() - statement_timestamp(), taken after the
//! call in the same statement); a call left by an ERROR (statement_timeout
//! inside pg_sleep: longjmp, no return) is counted as such, not timed; the
//! backend is never stopped while timing; pgdbg killed with SIGKILL while
//! it times leaves the backend's code as the binary has it.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufReader, Read};
use std::time::Duration;

/// The statement's own time, in ns, measured inside it after pg_sleep
/// returned (the subquery is not flattened: OFFSET 0).
const TIMED_SLEEP: &str = "select (extract(epoch from clock_timestamp() - statement_timestamp()) \
                           * 1e9)::int8 from (select pg_sleep(0.05) offset 0) s";

fn timed_pg_sleep(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-latency-{}-{major}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&cap);
    // the catalog entries cached first
    a.query_one_i64(TIMED_SLEEP);
    let ((text, own), ev) = latency_during(pid, &cap, "latency pg_sleep --for 3s", || {
        (0..10)
            .map(|_| a.query_one_i64(TIMED_SLEEP) as u64)
            .collect::<Vec<u64>>()
    });
    assert_eq!(ev.len(), 1, "{text}");
    let e = &ev[0];
    let n = |k: &str| e[k].as_u64().unwrap_or_else(|| panic!("{k} in {e}"));
    assert_eq!(e["function"], "pg_sleep");
    assert_eq!(n("calls"), 10, "{text}");
    assert_eq!(n("no_return"), 0, "{text}");
    assert_eq!(n("nested"), 0, "{text}");
    assert_eq!(n("running_at_start") + n("running_at_end"), 0, "{text}");
    // each call within its statement's own time: at most all of it, and
    // at least all of it but the parse, plan and start around the call
    let (lo, hi) = (*own.iter().min().unwrap(), *own.iter().max().unwrap());
    let slack = 10_000_000;
    assert!(n("min_ns") >= 50_000_000, "{text}");
    assert!(
        n("max_ns") <= hi,
        "max {} > statement {hi}:\n{text}",
        n("max_ns")
    );
    assert!(
        n("min_ns") + slack >= lo,
        "min {} vs {lo}:\n{text}",
        n("min_ns")
    );
    let sum: u64 = own.iter().sum();
    assert!(
        n("total_ns") <= sum && n("total_ns") + 10 * slack >= sum,
        "total {} vs statements {sum}:\n{text}",
        n("total_ns")
    );
    assert!(n("p50_ns") >= n("min_ns") && n("p99_ns") <= n("max_ns"));
    let hist: u64 = e["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(hist, 10);
    // the text: the row, the histogram, the call with no return, no stop
    let row = text
        .lines()
        .find(|l| l.starts_with("pg_sleep "))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(row.split_whitespace().nth(1), Some("10"), "{row}");
    assert!(text.contains("32768 -> 65535"), "{text}");
    assert!(
        text.contains("the backend was not stopped while timing"),
        "{text}"
    );
    // the report reads the event back
    let (code, rep, err) = pgdbg(&["report", &cap.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    let row = rep
        .lines()
        .skip_while(|l| !l.contains("Function latency"))
        .find(|l| l.trim_start().starts_with("pg_sleep "))
        .unwrap_or_else(|| panic!("{rep}"));
    assert_eq!(row.split_whitespace().nth(1), Some("10"), "{rep}");
    // a call that an ERROR leaves (statement_timeout inside pg_sleep:
    // longjmp, no return): counted, not timed; the next calls are timed
    let _ = std::fs::remove_file(&cap);
    let ((text, ()), ev) = latency_during(pid, &cap, "latency pg_sleep --for 3s", || {
        a.exec("set statement_timeout = 100");
        let err =
            a.c.as_mut()
                .unwrap()
                .simple_query("select pg_sleep(5)")
                .expect_err("statement_timeout cancels pg_sleep");
        assert!(format!("{err:?}").contains("statement timeout"), "{err:?}");
        a.exec("reset statement_timeout");
        a.query_one_i64(TIMED_SLEEP);
        a.query_one_i64(TIMED_SLEEP);
    });
    let e = &ev[0];
    assert_eq!(e["calls"], 2, "{text}");
    assert_eq!(e["no_return"], 1, "{text}");
    assert!(e["max_ns"].as_u64().unwrap() < 1_000_000_000, "{text}");
    assert!(text.contains("1 call never returned"), "{text}");
    // --json: the same fields as one document
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "latency pg_sleep --for 2s --json",
    ]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(&mut out, "latency: ", Duration::from_secs(60));
    a.query_one_i64(TIMED_SLEEP);
    let mut doc = String::new();
    out.read_to_string(&mut doc).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap_or_else(|e| panic!("{e}: {doc}"));
    assert_eq!(v["functions"][0]["function"], "pg_sleep", "{doc}");
    assert_eq!(v["functions"][0]["calls"], 1, "{doc}");
    assert_eq!(v["stops"], 0, "{doc}");
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.query_one_i64("select 7"), 7);
    let _ = std::fs::remove_file(&cap);
    cl.assert_no_crash();
}

/// `latency pg_sleep --for 3s` on `pid` while `work` runs: (the text after
/// the start line, what `work` returned) and the `latency` events.
fn latency_during<T>(
    pid: i32,
    cap: &std::path::Path,
    cmd: &str,
    work: impl FnOnce() -> T,
) -> ((String, T), Vec<serde_json::Value>) {
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
    read_until(&mut out, "latency: ", Duration::from_secs(60));
    let got = work();
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    ((text, got), read_events(cap, "latency"))
}

#[test]
fn latency_times_pg_sleep_all_majors() {
    for m in majors() {
        timed_pg_sleep(m);
    }
}

/// SIGKILL while the probes time calls (some of them in flight: their
/// return address is the kernel's): the kernel removes the probes and
/// restores the return addresses; the backend's code is the binary's
/// again and it serves queries, its sleep returning normally.
#[test]
fn latency_killed_leaves_code_as_found() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    for _ in 0..5 {
        let mut p = Pgdbg::spawn(&["attach", &pid.to_string(), "-q", "--ex", "latency pg_sleep"]);
        let mut out = BufReader::new(p.child.stdout.take().unwrap());
        read_until(&mut out, "latency: ", Duration::from_secs(60));
        assert!(!code_matches_file(pid, &bin, "pg_sleep", 1));
        // a call in flight when pgdbg dies
        let sleeper = a.spawn_text("select pg_sleep(0.5)::text");
        cl.wait_active(&[pid], "pg_sleep");
        std::thread::sleep(Duration::from_millis(100));
        p.child.kill().unwrap();
        p.child.wait().unwrap();
        assert_eq!(a.rejoin(sleeper), Ok(String::new()));
        wait_until("the probe removed", Duration::from_secs(10), || {
            code_matches_file(pid, &bin, "pg_sleep", 16)
        });
        wait_until("the backend untraced", Duration::from_secs(10), || {
            tracer_pid(pid) == 0
        });
        assert_eq!(a.query_one_i64("select 5"), 5);
    }
    cl.assert_no_crash();
}

/// A function whose first instruction the kernel would step out of line
/// (ExecutorEnd starts with a load of its hook) is timed from its entry
/// block's first emulated instruction (the `je` after the hook test, the
/// stack pointer still the entry's): every call paired with its return,
/// and so are those of standard_ExecutorEnd, which it tail-calls.
fn timed_from_a_moved_point(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    assert_entry_not_a_push(&bin, "ExecutorEnd");
    let mut a = cl.connect();
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-latency-moved-{}-{major}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&cap);
    a.query_one_i64(TIMED_SLEEP);
    // ExecutorEnd tail-calls standard_ExecutorEnd (a `jmp`): both return
    // from the same frame, both timed
    assert!(
        tail_calls(&bin, "ExecutorEnd", "standard_ExecutorEnd"),
        "this build's ExecutorEnd does not tail-call standard_ExecutorEnd"
    );
    let ((text, _), ev) = latency_during(
        pid,
        &cap,
        "latency ExecutorEnd standard_ExecutorEnd --for 3s",
        || {
            for _ in 0..10 {
                a.query_one_i64(TIMED_SLEEP);
            }
        },
    );
    assert_eq!(ev.len(), 2, "{text}");
    for e in &ev {
        let n = |k: &str| e[k].as_u64().unwrap_or_else(|| panic!("{k} in {e}"));
        assert_eq!(n("calls"), 10, "{text}");
        assert_eq!(n("no_return"), 0, "{text}");
        assert_eq!(n("running_at_start") + n("running_at_end"), 0, "{text}");
        // the end of a statement, not its 50 ms sleep
        assert!(n("min_ns") > 0 && n("max_ns") < 20_000_000, "{text}");
    }
    // the caller's calls contain the callee's
    let total = |f: &str| {
        ev.iter().find(|e| e["function"] == f).unwrap()["total_ns"]
            .as_u64()
            .unwrap()
    };
    assert!(
        total("ExecutorEnd") >= total("standard_ExecutorEnd"),
        "{text}"
    );
    assert_eq!(a.query_one_i64("select 7"), 7);
    let _ = std::fs::remove_file(&cap);
    cl.assert_no_crash();
}

/// Whether `from`'s first 64 bytes in `bin` hold a `jmp` to `to` (rel32
/// or rel8; a byte that merely looks like one is unlikely to land there).
fn tail_calls(bin: &std::path::Path, from: &str, to: &str) -> bool {
    use std::os::unix::fs::FileExt;
    let (va, off) = symbol_in_file(bin, from);
    let (target, _) = symbol_in_file(bin, to);
    let mut code = [0u8; 64];
    std::fs::File::open(bin)
        .unwrap()
        .read_exact_at(&mut code, off)
        .unwrap();
    let lands =
        |i: usize, len: usize, rel: i64| (va as i64 + (i + len) as i64 + rel) as u64 == target;
    (0..code.len() - 5).any(|i| match code[i] {
        0xe9 => lands(
            i,
            5,
            i32::from_le_bytes(code[i + 1..i + 5].try_into().unwrap()) as i64,
        ),
        0xeb => lands(i, 2, code[i + 1] as i8 as i64),
        _ => false,
    })
}

#[test]
fn latency_from_a_moved_probe_point_all_majors() {
    for m in majors() {
        timed_from_a_moved_point(m);
    }
}
