//! pgdbg and its guardian killed together (both PIDs SIGKILLed at once)
//! while pgdbg holds the backend in its group stop: the backend ends the
//! stop itself (the pipe whose last writer died, our SIGCONT handler:
//! src/inferior/selfrelease.rs), without `kill -CONT` or `pgdbg rescue`:
//! it runs on, answers, crashes nothing, its `statement_timeout` fires;
//! `pgdbg rescue` then removes what is left (int3 bytes, the handlers,
//! the pipe's read end) and the code bytes are the file's.

use common::*;
use pgdbg_testbed as common;
use std::time::Duration;

const LOOP: &str = "do $$ begin for i in 1..300000 loop perform count(*) from pg_class where oid = i; perform pg_backend_pid(); end loop; end $$";

fn stopped(pid: i32) -> bool {
    let s = proc_state(pid);
    s.starts_with('T') || s.starts_with('t')
}

/// SIGKILL to the guardian and to pgdbg, back to back: pgdbg, the tracer,
/// is the last writer of the pipe to go.  Returns when both have closed
/// every file (the pipe's write ends): pgdbg reaped, the guardian gone.
fn kill_both(p: &mut Pgdbg, backend: i32) {
    let g = guardians_of(backend);
    assert_eq!(g.len(), 1, "one guardian of {backend}: {g:?}");
    // SAFETY: kill(2) of the pgdbg this test started and of its guardian.
    unsafe {
        libc::kill(g[0], libc::SIGKILL);
        libc::kill(p.pid(), libc::SIGKILL);
    }
    p.child.wait().unwrap();
    wait_files_closed(g[0]);
}

/// Process `pid` (not the test's child) has closed its files: its /proc
/// entry gone, or a zombie (exit_files is done before that).
fn wait_files_closed(pid: i32) {
    wait_until("the guardian to end", Duration::from_secs(10), || {
        let s = proc_state(pid);
        s.is_empty() || s.starts_with('Z')
    });
}

/// Not stopped once the pipe's last writer is gone, sampled over half a
/// second: nobody sent SIGCONT.
fn assert_runs_on(pid: i32, cl: &Cluster) {
    for _ in 0..25 {
        assert!(
            !stopped(pid),
            "backend {pid} stopped after pgdbg and its guardian were killed: {}",
            where_stopped(pid, cl)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The state, the system call line (its `pc` last) and the mapping that
/// holds `pc` of a stopped backend, and the server log.
fn where_stopped(pid: i32, cl: &Cluster) -> String {
    let sc = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let pc = sc
        .split_whitespace()
        .last()
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    let map = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .find(|l| {
            let (a, b) = l.split_once(' ').unwrap().0.split_once('-').unwrap();
            let (a, b) = (
                u64::from_str_radix(a, 16).unwrap(),
                u64::from_str_radix(b, 16).unwrap(),
            );
            a <= pc && pc < b
        })
        .unwrap_or("")
        .to_string();
    let sigs: Vec<String> = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("Sig") || l.starts_with("ShdPnd"))
        .map(str::to_string)
        .collect();
    format!(
        "{}; syscall {}; pc in {map}; {}; log:\n{}",
        proc_state(pid),
        sc.trim(),
        sigs.join(" "),
        cl.log()
    )
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
    let mut p = Pgdbg::spawn_attached(
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
    kill_both(&mut p, pid);
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
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let mut other = cl.connect();
    let pid = a.pid();
    let pipes_before = pipes(pid);
    wait_until("the backend to wait", Duration::from_secs(10), || {
        syscall_nr(pid).is_some()
    });
    let idle = syscall_nr(pid);
    let mut p = Pgdbg::spawn_attached(
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
    kill_both(&mut p, pid);
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

/// The system call `pid` sleeps in and its first argument (an epoll
/// set's descriptor for epoll_wait).
fn syscall_and_first_arg(pid: i32) -> Option<(i64, String)> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let mut it = line.split_whitespace();
    Some((it.next()?.parse().ok()?, it.next()?.to_string()))
}

/// `SigBlk` of /proc/PID/status: the signals `pid` blocks.
fn sig_blocked(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("SigBlk:").map(|v| v.trim().to_string()))
        .unwrap()
}

/// `call pg_usleep(10000000)` inside a running `select pg_sleep(120)`,
/// pgdbg killed alone: its guardian finishes the call and holds back a
/// query cancel (SIGINT) sent meanwhile, written into the handler's page
/// too; the guardian killed then: the backend's SIGCONT handler sends the
/// cancel itself as it lets the backend run on (not stopped again), the
/// call returns early (its sleep interrupted) to its return trap, where
/// the SIGTRAP handler undoes it (interrupts no longer held off), and the
/// cancel ends the statement, with nobody acting on the backend.  `pgdbg
/// rescue` then removes what is left and sends nothing again.
fn held_signal_sent_by_the_backend(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let mut other = cl.connect();
    let pid = a.pid();
    let pipes_before = pipes(pid);
    let h = a.spawn_text("select pg_sleep(120)");
    cl.wait_active(&[pid], "select pg_sleep(120)");
    let blocked = sig_blocked(pid);
    let mut p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--call-timeout",
            "60s",
            "--ex",
            "call pg_usleep(10000000)",
        ],
        pid,
    );
    // the call sleeps: select, nanosleep, clock_nanosleep or pselect6
    wait_call_in(&mut p, pid, "the call to sleep", &[23, 35, 230, 270]);
    assert!(caught(pid, libc::SIGCONT), "no SIGCONT handler installed");
    let g = kill_pgdbg_alone(&p, pid);
    // SAFETY: kill(2) of a backend of the test's own cluster.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let bit = 1u64 << (libc::SIGINT - 1);
    wait_until(
        "SIGINT to be recorded as held back",
        Duration::from_secs(20),
        || recorded_signals(pid).is_some_and(|m| m & bit != 0),
    );
    let t_kill = std::time::Instant::now();
    // SAFETY: kill(2) of the guardian this test's pgdbg started.
    unsafe { libc::kill(g, libc::SIGKILL) };
    wait_files_closed(g);
    // the cancel ends the statement well before the call's 10 s: nobody
    // sent it but the backend itself
    let r = a.rejoin(h);
    let took = t_kill.elapsed();
    assert!(
        r.as_ref()
            .is_err_and(|e| e.contains("canceling statement due to user request")),
        "the statement was not cancelled: {r:?}; {}",
        where_stopped(pid, &cl)
    );
    assert!(
        took < Duration::from_secs(8),
        "the cancel took {took:?}: the call slept on"
    );
    assert!(!stopped(pid), "{}", proc_state(pid));
    // interrupts are served again (the call's repair put the holdoff back)
    timeout_fires(&mut a);
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {err}");
    assert!(
        !out.contains("SIGINT sent again"),
        "the rescue sent the cancel a second time: {out}"
    );
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    assert_eq!(
        sig_blocked(pid),
        blocked,
        "the signal mask is not the backend's"
    );
    assert_eq!(other.query_one_i64("select 6 * 7"), 42);
    assert!(!caught(pid, libc::SIGTRAP) && !caught(pid, libc::SIGCONT));
    assert_eq!(
        pipes(pid),
        pipes_before,
        "the pipe's read end is still open"
    );
    let bin = cl.postgres_binary();
    for sym in ["_start", "pg_re_throw", "pg_usleep"] {
        assert!(
            code_matches_file(pid, &bin, sym, 32),
            "{sym}'s bytes differ from the file after the rescue"
        );
    }
    timeout_fires(&mut a);
    cl.assert_no_crash();
}

#[test]
fn self_release_held_signal_sent_by_the_backend_15() {
    held_signal_sent_by_the_backend(15);
}

#[test]
fn self_release_held_signal_sent_by_the_backend_18() {
    held_signal_sent_by_the_backend(18);
}

/// A call that sleeps 30 s whatever signal comes (`WaitLatch` on a timeout
/// alone: WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, no latch) in flight, pgdbg and
/// its guardian killed together: the backend lets itself go inside the
/// call, and `pgdbg rescue` at once, while the call still runs, finishes
/// it as without the release (its return trap kept), then puts the
/// registers back: the session answers, nothing crashes.
fn rescue_during_released_call(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let mut other = cl.connect();
    let pid = a.pid();
    let pipes_before = pipes(pid);
    wait_until("the backend to wait", Duration::from_secs(10), || {
        syscall_nr(pid).is_some()
    });
    let idle = syscall_and_first_arg(pid);
    let mut p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--call-timeout",
            "60s",
            "--ex",
            "call WaitLatch(0, 40, 30000, 0)",
        ],
        pid,
    );
    // the call's own wait: an epoll set that is not the session's
    let in_call = |pid: i32| {
        let now = syscall_and_first_arg(pid);
        now.as_ref()
            .is_some_and(|(n, _)| [232, 281, 441].contains(n))
            && now != idle
    };
    wait_until("the call to wait", Duration::from_secs(20), || {
        if let Ok(Some(st)) = p.child.try_wait() {
            panic!("pgdbg ended ({st}) before the call waited");
        }
        tracer_pid(pid) != 0 && !stopped(pid) && in_call(pid)
    });
    let t0 = std::time::Instant::now();
    assert!(caught(pid, libc::SIGCONT), "no SIGCONT handler installed");
    kill_both(&mut p, pid);
    assert_runs_on(pid, &cl);
    assert!(
        in_call(pid),
        "too slow: the 30 s call had ended {:?} after it began waiting",
        t0.elapsed()
    );
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {err}");
    // the call was still in flight by the handler's page: finished, not
    // taken for a backend that ran on with nothing to replay
    assert!(
        out.contains("restored") && out.contains("call") && !out.contains("ended its stop itself"),
        "rescue said: {out}"
    );
    assert!(!stopped(pid), "{}", proc_state(pid));
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    assert!(a.c.as_mut().unwrap().batch_execute("select 1/0").is_err());
    assert_eq!(other.query_one_i64("select 6 * 7"), 42);
    assert!(!caught(pid, libc::SIGTRAP) && !caught(pid, libc::SIGCONT));
    assert_eq!(
        pipes(pid),
        pipes_before,
        "the pipe's read end is still open"
    );
    let bin = cl.postgres_binary();
    for sym in ["_start", "pg_re_throw"] {
        assert!(
            code_matches_file(pid, &bin, sym, 32),
            "{sym}'s bytes differ from the file after the rescue"
        );
    }
    timeout_fires(&mut a);
    cl.assert_no_crash();
}

#[test]
fn self_release_rescue_during_released_call_15() {
    rescue_during_released_call(15);
}

#[test]
fn self_release_rescue_during_released_call_18() {
    rescue_during_released_call(18);
}
