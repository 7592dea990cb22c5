//! `waits trace --perf` on real PostgreSQL 15 and 18: a perf write-breakpoint
//! event on the wait-event word (no ptrace stop per wait) reports exactly the
//! waits a client's known statements make (ClientRead between statements,
//! Timeout: PgSleep inside pg_sleep) with their durations and stacks, as
//! capture events; it works on a backend that ptrace-mode tracing watched
//! before; pgdbg killed with SIGKILL while it traces leaves the backend
//! serving queries.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufReader, Read};
use std::time::Duration;

/// Start `waits trace ... --capture CAP` on `pid` and return once it
/// says it is tracing (the event is armed before that line).
fn start_trace(
    pid: i32,
    cmd: &str,
    cap: &std::path::Path,
) -> (Pgdbg, BufReader<std::process::ChildStdout>, String) {
    start_waits_trace(pid, cmd, Some(cap))
}

fn finish(p: Pgdbg, mut out: BufReader<std::process::ChildStdout>) -> (i32, String, String) {
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    (code, rest, err)
}

fn exact_waits_of_known_statements(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-waits-perf-{}-{major}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&cap);
    // the catalog entries of the statements below cached first (their
    // first run reads pages: IO waits)
    a.simple_text("select pg_sleep(0.01)::text");
    a.query_one_i64("select 1");
    let (p, out, head) = start_trace(pid, "waits trace --for 6s --stacks 6", &cap);
    // as root the kernel copies each statement's text at its start (pgdbg
    // mounts tracefs where it is not mounted)
    assert!(
        !head.contains("statement texts read by pgdbg"),
        "texts not copied by the kernel: {head}"
    );
    // 40 statements 10 ms apart (a ClientRead wait before each), 5 of them
    // pg_sleep(0.05) (a Timeout: PgSleep wait inside), then idle
    for i in 0..40 {
        if i % 8 == 0 {
            a.simple_text("select pg_sleep(0.05)::text");
        } else {
            a.query_one_i64(&format!("select {i}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (code, text, err) = finish(p, out);
    assert_eq!(code, 0, "{err}");
    let waits = read_events(&cap, "wait");
    let reads: Vec<_> = waits
        .iter()
        .filter(|w| w["wait_event"] == "ClientRead")
        .collect();
    let sleeps: Vec<_> = waits
        .iter()
        .filter(|w| w["wait_event"] == "PgSleep")
        .collect();
    // the wait in progress when tracing began, one before each statement
    // after the first and the idle one at the end: 41 (a latch wakeup while
    // idle would add one)
    assert!(
        (41..=43).contains(&reads.len()),
        "{} ClientRead waits, expected 41:\n{text}",
        reads.len()
    );
    assert!(
        (5..=7).contains(&sleeps.len()),
        "{} PgSleep waits:\n{text}",
        sleeps.len()
    );
    let slept: u64 = sleeps
        .iter()
        .map(|w| w["duration_ns"].as_u64().unwrap())
        .sum();
    assert!(
        (5 * 50_000_000..5 * 500_000_000).contains(&slept),
        "PgSleep total {slept} ns"
    );
    // the client's 10 ms pauses are ClientRead waits of at least ~10 ms
    let long = reads
        .iter()
        .filter(|w| w["duration_ns"].as_u64().unwrap() >= 9_000_000)
        .count();
    assert!(
        long >= 38,
        "{long} ClientRead waits of 9 ms or more:\n{text}"
    );
    assert_eq!(
        waits.len(),
        reads.len() + sleeps.len(),
        "no other waits:\n{text}"
    );
    // stacks: where the backend waits for its client
    let st: Vec<&str> = reads[5]["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(st.contains(&"secure_read"), "{st:?}");
    assert!(text.contains("Client: ClientRead"), "{text}");
    // statement times from the executor's uprobes: each of the 40
    // statements once, with its own text (copied by the kernel at the
    // executor's start, however short the statement), the pg_sleep ones at
    // least 50 ms
    let stmts = read_events(&cap, "statement");
    let sleeping: Vec<_> = stmts
        .iter()
        .filter(|e| e["query"] == "select pg_sleep(0.05)::text")
        .collect();
    assert_eq!(stmts.len(), 40, "{stmts:?}\n{text}");
    assert_eq!(sleeping.len(), 5, "{stmts:?}");
    for e in &sleeping {
        let d = e["duration_ns"].as_u64().unwrap();
        assert!((50_000_000..1_000_000_000).contains(&d), "{e}");
    }
    let others: Vec<&str> = stmts
        .iter()
        .filter(|e| e["query"] != "select pg_sleep(0.05)::text")
        .map(|e| {
            assert!(e["duration_ns"].as_u64().unwrap() < 50_000_000, "{e}");
            e["query"].as_str().unwrap()
        })
        .collect();
    let sent: Vec<String> = (0..40)
        .filter(|i| i % 8 != 0)
        .map(|i| format!("select {i}"))
        .collect();
    assert_eq!(others, sent, "each statement's own text, in order");
    assert!(text.contains("Statements:"), "{text}");
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.query_one_i64("select 7"), 7);
    let _ = std::fs::remove_file(&cap);
    cl.assert_no_crash();
}

#[test]
fn waits_trace_perf_exact_on_known_statements() {
    for m in majors() {
        exact_waits_of_known_statements(m);
    }
}

/// The ptrace mode (debug registers) first, then --perf on the same
/// backend: the ptrace mode leaves no kernel breakpoint slot taken that
/// the perf event would need.
#[test]
fn waits_trace_perf_after_ptrace_mode() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "waits trace --ptrace --for 1s --quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    for _ in 0..3 {
        let (code, out, err) = pgdbg(&[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "waits trace --perf --for 1s --quiet",
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("Wait events summary"), "{out}");
    }
    assert_eq!(a.query_one_i64("select 1"), 1);
    cl.assert_no_crash();
}

/// SIGKILL while the perf event traces: the kernel closes the watch and
/// detaches; the keeper closes the statements' uprobe (which it opened)
/// and removes pgdbg's tracefs definition; the backend runs on and serves
/// queries, repeatedly.
#[test]
fn waits_trace_perf_killed() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-waits-perf-kill-{}.jsonl",
        std::process::id()
    ));
    for _ in 0..5 {
        let (mut p, _out, _) = start_trace(pid, "waits trace --perf --uprobes --quiet", &cap);
        for i in 0..20 {
            assert_eq!(a.query_one_i64(&format!("select {i}")), i);
        }
        let k = p.child.id();
        let defs = tracefs_definitions_of(k).len();
        assert!(defs >= 1, "pgdbg {k}'s definitions");
        let keepers = keepers_of(k as i32);
        assert!(
            keepers.len() == 1 && perf_fds(keepers[0]) == defs,
            "the keeper holds the statements' uprobes: {keepers:?}"
        );
        p.child.kill().unwrap();
        p.child.wait().unwrap();
        wait_until("the backend untraced", Duration::from_secs(10), || {
            tracer_pid(pid) == 0
        });
        wait_until("the keeper to end", Duration::from_secs(10), || {
            keepers_of(k as i32).is_empty()
        });
        assert_eq!(
            tracefs_definitions_of(k),
            Vec::<String>::new(),
            "left by {k}"
        );
        for i in 0..20 {
            assert_eq!(a.query_one_i64(&format!("select {i} + 1")), i + 1);
        }
    }
    // the keeper killed too: the definition stays listed (inert: no event
    // is open on it, nothing is placed in the backend) until the next
    // pgdbg removes it
    let (mut p, _out, _) = start_trace(pid, "waits trace --perf --uprobes --quiet", &cap);
    let k = p.child.id();
    let keepers = keepers_of(k as i32);
    assert_eq!(keepers.len(), 1);
    unsafe { libc::kill(keepers[0], libc::SIGKILL) };
    p.child.kill().unwrap();
    p.child.wait().unwrap();
    wait_until("the keeper to end", Duration::from_secs(10), || {
        keepers_of(k as i32).is_empty()
    });
    assert!(
        !tracefs_definitions_of(k).is_empty(),
        "pgdbg {k}'s definitions stay"
    );
    let (p, out, _) = start_trace(pid, "waits trace --perf --uprobes --quiet --for 1s", &cap);
    let (code, _, err) = finish(p, out);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        tracefs_definitions_of(k),
        Vec::<String>::new(),
        "removed by the next pgdbg"
    );
    let _ = std::fs::remove_file(&cap);
    cl.assert_no_crash();
}

/// A statement's text longer than what the kernel copies (256 bytes) is
/// read whole from the backend when pgdbg reads the record, if it still
/// starts with the copied bytes (else the copy is shown, ending "..."): a
/// statement of 4090 bytes (where a `:string` copy once overran the
/// kernel's one-page buffer) is timed with its text.
#[test]
fn waits_trace_perf_long_statement_text() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-waits-perf-long-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&cap);
    let head = "select length('";
    let tail = "')";
    let long = format!("{head}{}{tail}", "x".repeat(4090 - head.len() - tail.len()));
    assert_eq!(long.len(), 4090);
    let (p, out, _) = start_trace(pid, "waits trace --for 3s --quiet", &cap);
    assert_eq!(a.query_one_i64(&long), 4090 - 17);
    // pgdbg reads the rings every 5 ms: the long text is still there
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(a.query_one_i64("select 5"), 5);
    let (code, text, err) = finish(p, out);
    assert_eq!(code, 0, "{err}");
    let qs: Vec<String> = read_events(&cap, "statement")
        .iter()
        .map(|e| e["query"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(qs.len(), 2, "{qs:?}\n{text}");
    let cut = format!("{}...", &long[..256]);
    assert!(qs[0] == long || qs[0] == cut, "{}\n{text}", qs[0]);
    assert_eq!(qs[1], "select 5");
    let _ = std::fs::remove_file(&cap);
    cl.assert_no_crash();
}

/// The count of `Timeout: PgSleep` waits in a `waits trace` summary.
fn pg_sleeps(summary: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("Timeout: PgSleep")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// A backend that exits while `waits trace` runs has its waits reported
/// up to its end, the same summary (each event's count, the number of
/// waits, the statements) as the same statements make in a backend that
/// stays, and is said to have ended.
#[test]
fn waits_trace_perf_backend_that_exits() {
    const N: u64 = 20;
    let cl = Cluster::start(15);
    let cap = std::env::temp_dir().join(format!("pgdbg-waits-exit-{}.jsonl", std::process::id()));
    let sleep = "select pg_sleep(0.01)::text";
    // a backend that stays (its waits are named by asking it: the names
    // are then known for the same build)
    let mut a = cl.connect();
    a.simple_text(sleep);
    let (p, out, _) = start_trace(a.pid(), "waits trace --for 10s --quiet", &cap);
    for _ in 0..N {
        a.simple_text(sleep);
    }
    let (_, stayed, err) = finish(p, out);
    assert_eq!(pg_sleeps(&stayed), N, "{stayed}\n{err}");
    // the same statements in a backend that then closes its connection
    let mut b = cl.connect();
    b.simple_text(sleep);
    let pid = b.pid();
    let (p, out, _) = start_trace(pid, "waits trace --for 60s --quiet", &cap);
    for _ in 0..N {
        b.simple_text(sleep);
    }
    drop(b);
    let (_, ended, err) = finish(p, out);
    assert_eq!(pg_sleeps(&ended), N, "{ended}\n{err}");
    // the whole summary, but for the waits for the client's next message
    // (their number is the client's timing): each event's count, the
    // number of waits, each statement's count
    assert_eq!(
        waits_counts(&ended).workload(),
        waits_counts(&stayed).workload(),
        "the same statements, a backend that ended vs one that stays:\n{ended}\n---\n{stayed}"
    );
    // and the sleeps' time, the workload's (N x 10 ms, and what a busy
    // machine adds)
    for t in [&ended, &stayed] {
        let ms = wait_total_ms(t, "Timeout: PgSleep");
        assert!(
            ms >= N as f64 * 10.0 * 0.99 && ms < N as f64 * 10.0 * 3.0,
            "{ms} ms of pg_sleep for {N} sleeps of 10 ms:\n{t}"
        );
    }
    assert!(
        ended.contains(&format!("backend {pid} ended after")),
        "{ended}"
    );
    assert!(!ended.contains("not reported"), "{ended}");
    let _ = std::fs::remove_file(&cap);
    cl.assert_no_crash();
}
