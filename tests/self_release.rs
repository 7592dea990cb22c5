//! pgdbg and its guardian killed together (both PIDs SIGKILLed at once)
//! while pgdbg holds the backend in its group stop: the backend ends the
//! stop itself (the pipe whose last writer died, our SIGCONT handler:
//! src/inferior/selfrelease.rs), without `kill -CONT` or `pgdbg rescue`:
//! it runs on, answers, crashes nothing, its `statement_timeout` fires;
//! `pgdbg rescue` then removes what is left (int3 bytes, the handlers,
//! the pipe's read end) and the code bytes are the file's.

mod common;
use common::*;
use std::time::Duration;

const LOOP: &str = "do $$ begin for i in 1..300000 loop perform count(*) from pg_class where oid = i; perform pg_backend_pid(); end loop; end $$";

fn stopped(pid: i32) -> bool {
    let s = proc_state(pid);
    s.starts_with('T') || s.starts_with('t')
}

/// SIGKILL to the guardian and to pgdbg, back to back: pgdbg, the tracer,
/// is the last writer of the pipe to go.
fn kill_both(p: &Pgdbg, backend: i32) {
    let g = guardians_of(backend);
    assert_eq!(g.len(), 1, "one guardian of {backend}: {g:?}");
    unsafe {
        libc::kill(g[0], libc::SIGKILL);
        libc::kill(p.pid(), libc::SIGKILL);
    }
    wait_until(
        "pgdbg and its guardian to end",
        Duration::from_secs(10),
        || tracer_pid(backend) == 0 && guardians_of(backend).is_empty(),
    );
}

/// Not stopped within 2 s of the kill, and still not stopped over the
/// next half second (sampled): nobody sent SIGCONT.
fn assert_runs_on(pid: i32, cl: &Cluster) {
    let t0 = std::time::Instant::now();
    while stopped(pid) && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..25 {
        assert!(
            !stopped(pid),
            "backend {pid} stopped after pgdbg and its guardian were killed: {}; log:\n{}",
            proc_state(pid),
            cl.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pipes(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().starts_with("pipe:"))
        .count()
}

/// The session's statement_timeout still fires (no signal of it lost, no
/// interrupts held off), and the session goes on after it.
fn timeout_fires(a: &mut Client) {
    a.exec("set statement_timeout = '200ms'");
    let e =
        a.c.as_mut()
            .unwrap()
            .batch_execute("select pg_sleep(10)")
            .expect_err("statement_timeout did not fire");
    assert!(
        format!("{e:?}").contains("statement timeout"),
        "not the timeout: {e:?}"
    );
    a.exec("reset statement_timeout");
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
}

/// What the rescue finds left and removes: no SIGTRAP or SIGCONT action,
/// no pipe, no record, and the bytes of `syms` are the file's.
fn rescue_removes_leftovers(cl: &Cluster, pid: i32, pipes_before: usize, syms: &[&str]) {
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {err}");
    // the handler let the backend go on (counted in its page)
    assert!(
        out.contains("restored") && out.contains("ended its stop itself"),
        "rescue said: {out}"
    );
    assert!(
        !caught(pid, libc::SIGTRAP),
        "the SIGTRAP action was not put back"
    );
    assert!(
        !caught(pid, libc::SIGCONT),
        "the SIGCONT action was not put back"
    );
    assert_eq!(
        pipes(pid),
        pipes_before,
        "the pipe's read end is still open"
    );
    let bin = cl.postgres_binary();
    for sym in syms {
        assert!(
            code_matches_file(pid, &bin, sym, 32),
            "{sym}'s bytes differ from the file after the rescue"
        );
    }
    assert!(!stopped(pid), "{}", proc_state(pid));
}

/// A breakpoint hit in a loop (`commands silent continue`) under a
/// workload in the traced session.
fn hot_break(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let mut other = cl.connect();
    let pid = a.pid();
    let pipes_before = pipes(pid);
    let script = write_script(
        &format!("self-release-{major}"),
        &[
            "break pg_backend_pid",
            "commands",
            "silent",
            "continue",
            "end",
            "continue",
        ],
    );
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            script.to_str().unwrap(),
        ],
        pid,
    );
    let h = a.spawn_text(LOOP);
    wait_armed(pid, "pg_backend_pid");
    assert!(caught(pid, libc::SIGCONT), "no SIGCONT handler installed");
    std::thread::sleep(Duration::from_millis(300));
    kill_both(&p, pid);
    assert_runs_on(pid, &cl);
    let r = a.rejoin(h);
    assert!(r.is_ok(), "the loop failed: {r:?}");
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    timeout_fires(&mut a);
    assert_eq!(other.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
    rescue_removes_leftovers(&cl, pid, pipes_before, &["pg_backend_pid", "_start"]);
    assert_eq!(a.query_one_i64("select 40 + 2"), 42);
    cl.assert_no_crash();
}

#[test]
fn self_release_breakpoint_loop_15() {
    hot_break(15);
}

#[test]
fn self_release_breakpoint_loop_18() {
    hot_break(18);
}

/// `call pg_usleep(2000000)` in flight: the call runs to its return trap,
/// where the SIGTRAP handler undoes it; the session goes on.
fn call_in_flight(major: u32) {
    if amx_enabled() {
        // no self-repair of a call where XCR0 has AMX (docs/safety.md):
        // the handler stops such a backend again for `pgdbg rescue`
        eprintln!("skipped: XCR0 has AMX, where a call in flight is not repaired by the backend");
        return;
    }
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let mut other = cl.connect();
    let pid = a.pid();
    let pipes_before = pipes(pid);
    wait_until("the backend to wait", Duration::from_secs(10), || {
        syscall_nr(pid).is_some()
    });
    let idle = syscall_nr(pid);
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "call pg_usleep(2000000)",
        ],
        pid,
    );
    wait_until("the call to sleep", Duration::from_secs(20), || {
        matches!(syscall_nr(pid), Some(23 | 35 | 230 | 270))
    });
    assert!(caught(pid, libc::SIGCONT), "no SIGCONT handler installed");
    kill_both(&p, pid);
    assert_runs_on(pid, &cl);
    wait_until(
        "the backend to be idle again",
        Duration::from_secs(30),
        || !stopped(pid) && syscall_nr(pid) == idle,
    );
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    assert!(a.c.as_mut().unwrap().batch_execute("select 1/0").is_err());
    timeout_fires(&mut a);
    assert_eq!(other.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
    rescue_removes_leftovers(
        &cl,
        pid,
        pipes_before,
        &["_start", "pg_re_throw", "pg_usleep"],
    );
    assert_eq!(a.query_one_i64("select 40 + 2"), 42);
    cl.assert_no_crash();
}

#[test]
fn self_release_call_in_flight_15() {
    call_in_flight(15);
}

#[test]
fn self_release_call_in_flight_18() {
    call_in_flight(18);
}
