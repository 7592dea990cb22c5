//! pgdbg and its guardian killed together (`pkill -9 -f pgdbg`, a cgroup
//! or OOM kill of both): a backend is held stopped only while pgdbg's death
//! could harm it running (its int3s armed, a call in flight), everything
//! else runs on; what is left is flagged by `pgdbg ps` and restored by
//! `pgdbg rescue PID`, or before the next `pgdbg attach PID`, from the
//! record pgdbg keeps in /dev/shm.
//!
//! A held backend ends its stop itself when pgdbg and its guardian are
//! both gone (tests/self_release.rs); the tests here that need it left
//! held (the rescue, `kill -CONT`) run pgdbg with that turned off
//! (`PGDBG_NO_SELF_RELEASE`), the state a backend is left in when the
//! pipe cannot be set up.

use common::*;
use pgdbg_testbed as common;
use std::time::Duration;

/// pgdbg without the backend's own release: it stays held.
const HELD: &[(&str, &str)] = &[("PGDBG_NO_SELF_RELEASE", "1")];

/// Plan-cache lookups (a query plpgsql runs through SPI, not a simple
/// expression) and int3 hits, as many as the test needs and then an end.
const LOOP: &str = "do $$ begin for i in 1..300000 loop perform count(*) from pg_class where oid = i; perform pg_backend_pid(); end loop; end $$";

/// SIGKILL to pgdbg's guardian and to pgdbg (`kill_with_guardian`).
fn kill_both(p: &Pgdbg, backend: i32) {
    kill_with_guardian(p.pid(), backend);
}

fn stopped(pid: i32) -> bool {
    let s = proc_state(pid);
    s.starts_with('T') || s.starts_with('t')
}

/// The words a call series changed are back (`InterruptHoldoffCount`
/// above all: still raised, no interrupt would ever be served): a 300 ms
/// statement timeout fires, before any ERROR has reset the counters; then
/// an ERROR (`pg_re_throw`, where a call had an int3) is reported and the
/// session goes on.
fn timeout_fires_and_errors_go_on(a: &mut Client, when: &str) {
    let t = std::time::Instant::now();
    let r =
        a.c.as_mut()
            .unwrap()
            .batch_execute("set statement_timeout = '300ms'; select pg_sleep(5)");
    let took = t.elapsed();
    assert!(
        r.as_ref()
            .err()
            .is_some_and(|e| format!("{e:?}").contains("statement timeout"))
            && took < Duration::from_secs(3),
        "{when}, a statement timeout must fire: {r:?} after {took:?}"
    );
    a.exec("set statement_timeout = 0");
    assert!(a.c.as_mut().unwrap().batch_execute("select 1/0").is_err());
    assert_eq!(a.query_one_i64("select 6 * 7"), 42);
}

fn records_of(pid: i32) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("pgdbg-backend-{pid}-")))
        .collect()
}

fn ps_line(cl: &Cluster, pid: i32) -> String {
    let (code, out, err) = pgdbg(&["ps", "--cluster", cl.dir.to_str().unwrap()]);
    assert_eq!(code, 0, "pgdbg ps: {err}");
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
        .unwrap_or_else(|| panic!("backend {pid} not in pgdbg ps:\n{out}"))
        .to_string()
}

/// `plancache` (the in-process recorder: a jump and pages, no int3): killed
/// together, pgdbg leaves the backend running, never stopped; the recorder
/// is flagged and removed by `pgdbg rescue`.
fn recorder_runs_on(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut a = cl.connect();
    let pid = a.pid();
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plancache --for 300s",
        ],
        pid,
    );
    let h = a.spawn_text(LOOP);
    wait_armed(pid, "GetCachedPlan");
    kill_both(&p, pid);
    // never held: it runs on at once (checked over a second, sampled)
    for _ in 0..50 {
        assert!(
            !stopped(pid),
            "backend {pid} stopped after pgdbg and its guardian were killed: {}",
            proc_state(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = a.rejoin(h);
    assert!(r.is_ok(), "the loop failed: {r:?}");
    assert_eq!(records_of(pid).len(), 1, "pgdbg's record of {pid}");
    let line = ps_line(&cl, pid);
    assert!(
        line.contains(&format!("left by a killed pgdbg (PID {})", p.pid()))
            && line.contains(&format!("pgdbg rescue {pid}")),
        "{line}"
    );
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {err}");
    assert!(
        out.contains("restored") && out.contains("1 jump(s)"),
        "rescue said: {out}"
    );
    assert!(
        code_matches_file(pid, &bin, "GetCachedPlan", 16),
        "GetCachedPlan's bytes differ from the file after the rescue"
    );
    assert!(
        records_of(pid).is_empty(),
        "record left: {:?}",
        records_of(pid)
    );
    assert!(
        !ps_line(&cl, pid).contains("pgdbg"),
        "{}",
        ps_line(&cl, pid)
    );
    // a second rescue finds nothing to do
    let (code, out, _) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0);
    assert!(out.contains("needs no rescue"), "{out}");
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    cl.assert_no_crash();
}

#[test]
fn killed_together_recorder_runs_on_15() {
    recorder_runs_on(15);
}

#[test]
fn killed_together_recorder_runs_on_18() {
    recorder_runs_on(18);
}

/// A breakpoint hit in a loop (`commands silent continue`): killed
/// together, pgdbg leaves the backend held (a trap may not be rewound
/// yet); `pgdbg ps` says so, and `pgdbg rescue` (or the next attach)
/// restores it: the loop runs to its end, the code bytes are the file's,
/// no SIGTRAP handler is left.
fn hot_break(major: u32, by_attach: bool) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut a = cl.connect();
    let pid = a.pid();
    let maps_before = anon_exec_maps(pid);
    let script = write_script(
        &format!("killed-together-{major}-{by_attach}"),
        &[
            "break pg_backend_pid",
            "commands",
            "silent",
            "continue",
            "end",
            "continue",
        ],
    );
    let p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            script.to_str().unwrap(),
        ],
        pid,
        HELD,
    );
    let h = a.spawn_text(LOOP);
    wait_armed(pid, "pg_backend_pid");
    std::thread::sleep(Duration::from_millis(300));
    kill_both(&p, pid);
    wait_until(
        "the backend to be held stopped",
        Duration::from_secs(5),
        || stopped(pid),
    );
    let line = ps_line(&cl, pid);
    assert!(
        line.contains("left by a killed pgdbg") && line.contains(&format!("pgdbg rescue {pid}")),
        "{line}"
    );
    if by_attach {
        let (code, out, err) =
            pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "info breakpoints"]);
        assert_eq!(code, 0, "attach after the kill: {err}");
        assert!(
            err.contains(&format!(
                "backend {pid}, left by pgdbg (PID {}): restored 1 breakpoint byte(s)",
                p.pid()
            )),
            "attach said: {err}\n{out}"
        );
    } else {
        let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
        assert_eq!(code, 0, "rescue: {err}");
        assert!(
            out.contains("restored 1 breakpoint byte(s)") && out.contains("the SIGTRAP handler"),
            "rescue said: {out}"
        );
    }
    let r = a.rejoin(h);
    assert!(r.is_ok(), "the loop failed: {r:?}");
    assert!(!stopped(pid), "{}", proc_state(pid));
    assert!(
        code_matches_file(pid, &bin, "pg_backend_pid", 32),
        "pg_backend_pid's bytes differ from the file"
    );
    assert!(!catches_sigtrap(pid), "the SIGTRAP action was not put back");
    assert_eq!(
        anon_exec_maps(pid),
        maps_before,
        "the handler's pages are still mapped"
    );
    assert!(
        records_of(pid).is_empty(),
        "record left: {:?}",
        records_of(pid)
    );
    cl.assert_no_crash();
}

#[test]
fn killed_together_breakpoint_rescued_15() {
    hot_break(15, false);
}

#[test]
fn killed_together_breakpoint_rescued_at_attach_18() {
    hot_break(18, true);
}

/// `call pg_usleep(...)` in flight: killed together, the backend is held;
/// the rescue finishes the call from the saved registers and puts them
/// back: the session goes on.
fn call_in_flight(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let idle = syscall_nr(pid);
    let p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "call pg_usleep(3000000)",
        ],
        pid,
        HELD,
    );
    // the call sleeps: select, nanosleep, clock_nanosleep or pselect6
    wait_until("the call to sleep", Duration::from_secs(20), || {
        matches!(syscall_nr(pid), Some(23 | 35 | 230 | 270))
    });
    assert_ne!(syscall_nr(pid), idle);
    kill_both(&p, pid);
    wait_until(
        "the backend to be held stopped",
        Duration::from_secs(5),
        || stopped(pid),
    );
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {err}");
    assert!(
        out.contains("restored") && out.contains("call"),
        "rescue said: {out}"
    );
    assert!(!stopped(pid), "{}", proc_state(pid));
    assert_eq!(
        a.query_one_i64("select 41 + 1"),
        42,
        "the session answers after the rescue"
    );
    assert!(
        records_of(pid).is_empty(),
        "record left: {:?}",
        records_of(pid)
    );
    cl.assert_no_crash();
}

#[test]
fn killed_together_call_in_flight_rescued_15() {
    call_in_flight(15);
}

#[test]
fn killed_together_call_in_flight_rescued_18() {
    call_in_flight(18);
}

/// Sends SIGCONT to `pid`, as the person who finds it stopped would.
fn sigcont(pid: i32) {
    // SAFETY: kill(2) of a backend of the test's own cluster.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
}

/// `call pg_usleep(...)` in flight, pgdbg and its guardian killed together,
/// and nobody rescues: `kill -CONT` lets the call return to its return
/// int3, where pgdbg's SIGTRAP handler puts back the registers, the FP/SSE
/// state and the words the call series changed from the record pgdbg kept
/// in the handler's page: the session goes on as before the call, the
/// code bytes are the file's.  A later `pgdbg rescue` finds the call
/// undone and only removes the handler.
fn call_in_flight_repairs_itself(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut a = cl.connect();
    let pid = a.pid();
    // the system call it waits for its client in (read while it sleeps)
    wait_until("the backend to wait", Duration::from_secs(10), || {
        syscall_nr(pid).is_some()
    });
    let idle = syscall_nr(pid);
    let p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "call pg_usleep(2000000)",
        ],
        pid,
        HELD,
    );
    wait_until("the call to sleep", Duration::from_secs(20), || {
        matches!(syscall_nr(pid), Some(23 | 35 | 230 | 270))
    });
    assert_ne!(syscall_nr(pid), idle);
    kill_both(&p, pid);
    wait_until(
        "the backend to be held stopped",
        Duration::from_secs(5),
        || stopped(pid),
    );
    sigcont(pid);
    // the call sleeps its last part, returns, and the backend is back
    // where it was: idle in its client read, answering
    let t0 = std::time::Instant::now();
    while (stopped(pid) || syscall_nr(pid) != idle) && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !stopped(pid) && syscall_nr(pid) == idle,
        "backend {pid} after kill -CONT: state {}, system call {:?} (idle: {idle:?}); log:\n{}",
        proc_state(pid),
        std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default(),
        cl.log()
    );
    assert_eq!(
        a.query_one_i64("select 41 + 1"),
        42,
        "the session answers after kill -CONT"
    );
    timeout_fires_and_errors_go_on(&mut a, "after the self-repair");
    for sym in ["_start", "pg_re_throw", "pg_usleep"] {
        assert!(
            code_matches_file(pid, &bin, sym, 16),
            "{sym}'s bytes differ from the file after the self-repair"
        );
    }
    cl.assert_no_crash();
    // what is left (the handler, the record in /dev/shm) goes at the
    // rescue, which does not replay the call's old registers
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {err}");
    assert!(out.contains("undone the call itself"), "rescue said: {out}");
    assert!(!catches_sigtrap(pid), "the SIGTRAP action was not put back");
    assert!(records_of(pid).is_empty(), "{:?}", records_of(pid));
    assert_eq!(a.query_one_i64("select 40 + 2"), 42);
    cl.assert_no_crash();
}

#[test]
fn killed_together_call_in_flight_repairs_itself_15() {
    call_in_flight_repairs_itself(15);
}

#[test]
fn killed_together_call_in_flight_repairs_itself_18() {
    call_in_flight_repairs_itself(18);
}

/// A call that has ended, then pgdbg and its guardian killed together (a
/// `plancache` running after it, which leaves the backend running): the
/// record in the handler's page was cleared when pgdbg put the registers
/// back, so nothing acts on it: the backend was never held, answers, an
/// ERROR in it goes the usual way, and the rescue finds no call.
fn call_ended_then_killed(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut a = cl.connect();
    let pid = a.pid();
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "call pg_usleep(1000)",
            "--ex",
            "plancache --for 300s",
        ],
        pid,
    );
    let h = a.spawn_text(LOOP);
    std::thread::sleep(Duration::from_secs(5));
    let mut p = p;
    if let Ok(Some(st)) = p.child.try_wait() {
        let mut e = String::new();
        use std::io::Read;
        p.child
            .stderr
            .as_mut()
            .unwrap()
            .read_to_string(&mut e)
            .unwrap();
        let mut o = String::new();
        p.child
            .stdout
            .as_mut()
            .unwrap()
            .read_to_string(&mut o)
            .unwrap();
        panic!("pgdbg ended {st:?}: {e}\n{o}");
    }
    wait_armed(pid, "GetCachedPlan");
    kill_both(&p, pid);
    for _ in 0..25 {
        assert!(!stopped(pid), "held: {}", proc_state(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = a.rejoin(h);
    assert!(r.is_ok(), "the loop failed: {r:?}");
    assert!(a.c.as_mut().unwrap().batch_execute("select 1/0").is_err());
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    for sym in ["_start", "pg_re_throw"] {
        assert!(code_matches_file(pid, &bin, sym, 16), "{sym}'s bytes");
    }
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {err}");
    assert!(
        out.contains("restored") && !out.contains("call"),
        "rescue said: {out}"
    );
    assert_eq!(a.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn killed_together_after_a_call_15() {
    call_ended_then_killed(15);
}

#[test]
fn killed_together_after_a_call_18() {
    call_ended_then_killed(18);
}

/// pgdbg and its guardian killed together at each point of a call
/// series where the backend's registers are its own or a call's that has
/// not started or has returned (`PGDBG_PAUSE_AT`): `series`, its words
/// changed (`InterruptHoldoffCount` raised, `CurrentMemoryContext`, the
/// error stacks) before the first call; `call-setup`, before the first
/// call's registers are written; `call-restore`, after the last call
/// returned, before the saved registers are put back.  The backend ends
/// its stop itself at once, and its SIGCONT handler puts the words back
/// (and, with a call's registers, the saved registers and FP state, as
/// the call's return trap would): the session goes on as before it
/// answers, a `statement_timeout` fires (interrupts are no longer held
/// off), an ERROR goes the usual way; the rescue removes what is left.
fn killed_together_paused_at(major: u32, at: &str) {
    killed_together_paused_with(major, at, None);
}

/// The same, with `signal` sent to the backend while pgdbg is paused
/// (held stopped, the signal stays pending): when pgdbg and its guardian
/// are gone it is delivered with the pipe's SIGCONT, and first when its
/// number is lower (a statement_timeout's SIGALRM, a SIGUSR1): its
/// handler's frame lies between the backend's registers and the SIGCONT
/// handler's.
fn killed_together_paused_with(major: u32, at: &str, signal: Option<i32>) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut a = cl.connect();
    let pid = a.pid();
    wait_until("the backend to wait", Duration::from_secs(10), || {
        syscall_nr(pid).is_some()
    });
    let idle = syscall_nr(pid);
    let mut p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "call pg_usleep(1000)",
        ],
        pid,
        &[("PGDBG_PAUSE_AT", at), ("PGDBG_PAUSE_MS", "60000")],
    );
    wait_paused(&mut p, at);
    assert!(
        stopped(pid),
        "held while the series runs: {}",
        proc_state(pid)
    );
    if let Some(sig) = signal {
        // SAFETY: kill(2) of a backend of the test's own cluster.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        wait_until("the signal to be pending", Duration::from_secs(5), || {
            signal_pending(pid, sig)
        });
    }
    kill_both(&p, pid);
    // not stopped again: back in its client read within a second
    let t0 = std::time::Instant::now();
    while (stopped(pid) || syscall_nr(pid) != idle) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !stopped(pid) && syscall_nr(pid) == idle && t0.elapsed() < Duration::from_secs(1),
        "backend {pid} {:?} after pgdbg and its guardian were killed at {at} (signal {signal:?} pending): state {}, system call {:?} (idle: {idle:?}), /proc/PID/syscall {}",
        t0.elapsed(),
        proc_state(pid),
        syscall_nr(pid),
        std::fs::read_to_string(format!("/proc/{pid}/syscall"))
            .unwrap_or_default()
            .trim(),
    );
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    timeout_fires_and_errors_go_on(&mut a, &format!("killed at {at}, the words put back"));
    // floating point as before (the saved XSAVE image put back)
    assert_eq!(
        a.query_one_i64("select (sqrt(2.0::float8) * 1e6)::int8"),
        1414214
    );
    cl.assert_no_crash();
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {out}{err}");
    for sym in ["_start", "pg_re_throw", "pg_usleep"] {
        assert!(
            code_matches_file(pid, &bin, sym, 16),
            "{sym}'s bytes differ from the file after the rescue"
        );
    }
    assert!(records_of(pid).is_empty(), "{:?}", records_of(pid));
    assert_eq!(a.query_one_i64("select 40 + 2"), 42);
    cl.assert_no_crash();
}

#[test]
fn killed_together_series_before_its_first_call_15() {
    killed_together_paused_at(15, "series");
}

#[test]
fn killed_together_series_before_its_first_call_18() {
    killed_together_paused_at(18, "series");
}

#[test]
fn killed_together_call_registers_being_written_15() {
    killed_together_paused_at(15, "call-setup");
}

#[test]
fn killed_together_call_registers_being_written_18() {
    killed_together_paused_at(18, "call-setup");
}

#[test]
fn killed_together_call_registers_being_put_back_15() {
    killed_together_paused_at(15, "call-restore");
}

#[test]
fn killed_together_call_registers_being_put_back_18() {
    killed_together_paused_at(18, "call-restore");
}

/// Whether `sig` is pending for `pid` (its own or its group's).
fn signal_pending(pid: i32, sig: i32) -> bool {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    st.lines()
        .filter(|l| l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .any(|m| m & (1 << (sig - 1)) != 0)
}

// Killed inside the loop that records the words (`data-word-N`: N of
// them recorded, none changed yet; the soak's two backends left stopped
// had 3 and 2 of 6 in the guardian's table).

#[test]
fn killed_together_series_recording_its_words_15() {
    killed_together_paused_at(15, "data-word-2");
}

#[test]
fn killed_together_series_recording_its_words_18() {
    killed_together_paused_at(18, "data-word-3");
}

// With a signal that came while the backend was held (what the soak's
// statement_timeout sends every 300 ms): its handler's frame is below the
// SIGCONT handler's, which puts the words back all the same.

#[test]
fn killed_together_series_signal_pending_15() {
    killed_together_paused_with(15, "series", Some(libc::SIGALRM));
}

#[test]
fn killed_together_series_signal_pending_18() {
    killed_together_paused_with(18, "series", Some(libc::SIGALRM));
}

#[test]
fn killed_together_series_recording_its_words_signal_pending_18() {
    killed_together_paused_with(18, "data-word-2", Some(libc::SIGUSR1));
}

/// pgdbg and its guardian killed at a signal's delivery stop, after pgdbg
/// saw it and before its resume handed the signal back (PGDBG_PAUSE_AT
/// `signal-seen-SIGALRM`): the `statement_timeout`'s SIGALRM is not lost
/// (before 2026-12-05 `waitpid` took it from the kernel, and nothing sent
/// it again where nothing held the backend: the statement ran on to its
/// end). Nothing armed, the backend is not held and runs on at once; with
/// a breakpoint armed (never hit), it is held and ends its stop itself
/// (the pipe, our SIGCONT handler, under the SIGALRM handler's frame).
fn killed_at_a_signals_delivery_stop(major: u32, armed: bool) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let mut args = vec!["attach".to_string(), pid.to_string(), "-q".into()];
    if armed {
        args.extend(["--ex".into(), "break pg_backend_pid".into()]);
    }
    args.extend(["--ex".into(), "continue".into()]);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let mut p = Pgdbg::spawn_attached_env(
        &args,
        pid,
        &[
            ("PGDBG_PAUSE_AT", "signal-seen-SIGALRM"),
            ("PGDBG_PAUSE_MS", "60000"),
        ],
    );
    let t0 = std::time::Instant::now();
    let h = a.spawn_text("set statement_timeout = '1s'; select pg_sleep(6)");
    wait_paused(&mut p, "signal-seen-SIGALRM");
    // at the delivery stop: traced, stopped, the SIGALRM not pending any
    // more (dequeued for the stop)
    assert!(stopped(pid), "{}", proc_state(pid));
    for g in guardians_of(pid) {
        // SAFETY: kill(2) of pgdbg's guardian, a child of this test's pgdbg.
        unsafe { libc::kill(g, libc::SIGKILL) };
    }
    // SAFETY: kill(2) of the pgdbg this test started.
    unsafe { libc::kill(p.pid(), libc::SIGKILL) };
    wait_until("pgdbg to end", Duration::from_secs(10), || {
        tracer_pid(pid) == 0 && guardians_of(pid).is_empty()
    });
    let r = a.rejoin(h);
    let took = t0.elapsed();
    assert!(
        r.as_ref()
            .err()
            .is_some_and(|e| e.contains("statement timeout"))
            && took < Duration::from_secs(5),
        "killed at the SIGALRM's delivery stop, the statement timeout must still fire: {r:?} after {took:?}"
    );
    assert!(!stopped(pid), "{}", proc_state(pid));
    assert_eq!(a.query_one_i64("select 40 + 2"), 42);
    if armed {
        let bin = cl.postgres_binary();
        let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
        assert_eq!(code, 0, "rescue: {out}{err}");
        assert!(code_matches_file(pid, &bin, "pg_backend_pid", 16));
        assert!(records_of(pid).is_empty(), "{:?}", records_of(pid));
        assert_eq!(a.query_one_i64("select pg_backend_pid()"), pid as i64);
    }
    cl.assert_no_crash();
}

#[test]
fn killed_together_at_a_signals_delivery_stop_15() {
    killed_at_a_signals_delivery_stop(15, false);
}

#[test]
fn killed_together_at_a_signals_delivery_stop_18() {
    killed_at_a_signals_delivery_stop(18, false);
}

#[test]
fn killed_together_at_a_signals_delivery_stop_armed_15() {
    killed_at_a_signals_delivery_stop(15, true);
}

#[test]
fn killed_together_at_a_signals_delivery_stop_armed_18() {
    killed_at_a_signals_delivery_stop(18, true);
}

/// pgdbg and its guardian killed at an injected system call of the
/// set-up of a breakpoint (a call's data words would hold the backend
/// already; PGDBG_PAUSE_AT `syscall-injected-N` / `syscall-exit-N`: the
/// N-th system call pgdbg makes the backend run, its registers written,
/// before the resume into it or at its exit stop).  The first ones map the
/// SIGTRAP handler's pages, before the SIGCONT pipe exists: nothing could
/// end a group stop then.  The system call runs with a signal frame on the
/// backend's stack (src/inferior/sigframe.rs) and no group stop: the
/// backend finishes it and returns to its own context by itself, back in
/// its client read within a second; the session answers, a
/// statement_timeout fires, floating point is as before; the rescue puts
/// `_start`'s bytes back.  (Before 2026-12-05, and with
/// PGDBG_NO_SYSCALL_TRAILER: left stopped, state T, until a rescue.)
fn killed_in_an_injected_syscall(major: u32, at: &str, env: &[(&str, &str)]) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut a = cl.connect();
    let pid = a.pid();
    wait_until("the backend to wait", Duration::from_secs(10), || {
        syscall_nr(pid).is_some()
    });
    let idle = syscall_nr(pid);
    let mut vars = vec![("PGDBG_PAUSE_AT", at), ("PGDBG_PAUSE_MS", "60000")];
    vars.extend_from_slice(env);
    let mut p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break pg_backend_pid",
        ],
        pid,
        &vars,
    );
    // a deadline: the test fails, never hangs, if the pause never comes
    wait_for_stderr(&mut p, &format!("paused at {at} "), Duration::from_secs(90));
    kill_both(&p, pid);
    let t0 = std::time::Instant::now();
    while (stopped(pid) || syscall_nr(pid) != idle) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !stopped(pid) && syscall_nr(pid) == idle && t0.elapsed() < Duration::from_secs(1),
        "backend {pid} {:?} after pgdbg and its guardian were killed at {at}: state {}, system call {:?} (idle: {idle:?})",
        t0.elapsed(),
        proc_state(pid),
        syscall_nr(pid),
    );
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    timeout_fires_and_errors_go_on(&mut a, &format!("killed at {at}"));
    assert_eq!(
        a.query_one_i64("select (sqrt(2.0::float8) * 1e6)::int8"),
        1414214
    );
    cl.assert_no_crash();
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {out}{err}");
    assert!(
        code_matches_file(pid, &bin, "_start", 16),
        "_start's bytes differ from the file after the rescue"
    );
    assert!(records_of(pid).is_empty(), "{:?}", records_of(pid));
    assert_eq!(a.query_one_i64("select 40 + 2"), 42);
    cl.assert_no_crash();
}

#[test]
fn killed_together_in_the_first_injected_syscall_15() {
    killed_in_an_injected_syscall(15, "syscall-injected-1", &[]);
}

#[test]
fn killed_together_in_the_first_injected_syscall_18() {
    killed_in_an_injected_syscall(18, "syscall-injected-1", &[]);
}

#[test]
fn killed_together_at_the_first_injected_syscalls_exit_18() {
    killed_in_an_injected_syscall(18, "syscall-exit-1", &[]);
}

/// Once the SIGCONT pipe is armed: at the exit stop of the set-up's last
/// system call, the third `fcntl` (F_SETFL O_ASYNC on the read end,
/// src/inferior/selfrelease/install.rs; no other `fcntl` is injected before
/// it), the backend at the trailer's second instruction.  The deaths close
/// the pipe, the SIGCONT handler sees the injected code at AT_ENTRY and
/// lets the backend run on, the frame restoring it.
#[test]
fn killed_together_at_the_arming_fcntls_exit_18() {
    let at = format!("syscall-exit-nr{}-3", libc::SYS_fcntl);
    killed_in_an_injected_syscall(18, &at, &[]);
}

/// Until pgdbg pauses at `at` (true) or ends without pausing there
/// (false: its stderr closed); fails, never hangs, after `limit`.
fn paused_or_ended(p: &mut Pgdbg, at: &str, limit: Duration) -> bool {
    use std::io::BufRead;
    use std::sync::mpsc::RecvTimeoutError;
    let err = p.child.stderr.take().expect("pgdbg's stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(err).lines() {
            let Ok(l) = l else { break };
            let _ = tx.send(l);
        }
    });
    let needle = format!("paused at {at} ");
    let t0 = std::time::Instant::now();
    let mut seen = String::new();
    loop {
        match rx.recv_timeout(limit.saturating_sub(t0.elapsed())) {
            Ok(l) if l.contains(&needle) => return true,
            Ok(l) => {
                seen.push_str(&l);
                seen.push('\n');
            }
            Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => {
                panic!("pgdbg neither paused at {at} nor ended within {limit:?}:\n{seen}")
            }
        }
    }
}

/// Every system call pgdbg injects for a breakpoint, from the attach to
/// the detach (stdin at its end: the set-up, then the teardown), at its
/// entry and at its exit stop, one kill of pgdbg and its guardian each,
/// in sessions of one cluster: the backend is back in its client read
/// within a second, not stopped, its session answers, a statement timeout
/// fires, and the rescue leaves `_start` as in the file.
fn killed_at_every_injected_syscall(major: u32, ex: &str) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut kills = 0;
    for stage in ["syscall-injected", "syscall-exit"] {
        for n in 1.. {
            let at = format!("{stage}-{n}");
            let mut a = cl.connect();
            let pid = a.pid();
            wait_until("the backend to wait", Duration::from_secs(10), || {
                syscall_nr(pid).is_some()
            });
            let idle = syscall_nr(pid);
            let mask = sigblk(pid);
            let mut p = Pgdbg::spawn_env(
                &["attach", &pid.to_string(), "-q", "--ex", ex],
                &[("PGDBG_PAUSE_AT", &at), ("PGDBG_PAUSE_MS", "60000")],
            );
            if !paused_or_ended(&mut p, &at, Duration::from_secs(90)) {
                let (code, _, _) = p.wait(Duration::from_secs(30));
                assert_eq!(code, 0, "pgdbg's run without a pause at {at}");
                assert!(n > 3, "only {} system calls injected", n - 1);
                break;
            }
            kill_both(&p, pid);
            kills += 1;
            let t0 = std::time::Instant::now();
            while (stopped(pid) || syscall_nr(pid) != idle) && t0.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(
                !stopped(pid) && syscall_nr(pid) == idle && t0.elapsed() < Duration::from_secs(1),
                "backend {pid} {:?} after pgdbg and its guardian were killed at {at}: state {}, system call {:?} (idle: {idle:?})",
                t0.elapsed(),
                proc_state(pid),
                syscall_nr(pid),
            );
            assert_eq!(sigblk(pid), mask, "the signal mask after a kill at {at}");
            assert_eq!(a.query_one_i64("select 41 + 1"), 42, "killed at {at}");
            timeout_fires_and_errors_go_on(&mut a, &format!("killed at {at}"));
            let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
            assert_eq!(code, 0, "rescue after {at}: {out}{err}");
            assert!(
                code_matches_file(pid, &bin, "_start", 16),
                "_start's bytes differ from the file after the rescue ({at})"
            );
            assert_eq!(a.query_one_i64("select 40 + 2"), 42, "killed at {at}");
            cl.assert_no_crash();
        }
    }
    eprintln!("{kills} kills");
}

#[test]
fn killed_together_at_every_injected_syscall_18() {
    killed_at_every_injected_syscall(18, "break pg_backend_pid");
}

#[test]
fn killed_together_at_every_injected_syscall_of_a_call_15() {
    killed_at_every_injected_syscall(15, "call GetCurrentTransactionNestLevel()");
}

/// A signal that comes while an injected system call runs is not taken
/// into pgdbg's memory, where a death of every pgdbg process would lose
/// it: pgdbg blocks every signal for the call (the frame puts the
/// backend's mask back).  The session runs `pg_sleep(60)`; pgdbg attaches
/// with a breakpoint (PGDBG_PAUSE_AT at the first injected system call and
/// at its exit); at the first pause the test sends SIGINT (a cancel), at
/// the second it is still pending in the kernel; pgdbg and its guardian
/// are then killed: the statement is cancelled within seconds, not after
/// its minute (before 2026-12-05 pgdbg had taken the SIGINT at its
/// delivery stop, and it was lost with pgdbg).
fn signal_during_an_injected_syscall(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let h = a.spawn_text("select pg_sleep(60)");
    wait_until("the session to sleep", Duration::from_secs(10), || {
        let mut b = cl.connect();
        b.query_one_i64(&format!(
            "select count(*) from pg_stat_activity where pid = {pid} and wait_event = 'PgSleep'"
        )) == 1
    });
    let (inj, exit) = ("syscall-injected-1", "syscall-exit-1");
    let mut p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break pg_backend_pid",
        ],
        pid,
        &[
            // the first pause long enough for the signal to be sent, the
            // second until the kill
            ("PGDBG_PAUSE_AT", &format!("{inj}:5000,{exit}:60000")),
        ],
    );
    let err = p.child.stderr.take().expect("pgdbg's stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(err).lines() {
            let Ok(l) = l else { break };
            let _ = tx.send(l);
        }
    });
    let until = |needle: &str| loop {
        let l = rx
            .recv_timeout(Duration::from_secs(90))
            .unwrap_or_else(|e| panic!("no '{needle}' from pgdbg: {e}"));
        if l.contains(needle) {
            break;
        }
    };
    until(&format!("paused at {inj} "));
    // SAFETY: kill(2) of a backend of the test's own cluster.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    until(&format!("paused at {exit} "));
    assert!(
        signal_pending(pid, libc::SIGINT),
        "the SIGINT is no longer pending in the kernel at the system call's exit (taken by pgdbg)"
    );
    kill_both(&p, pid);
    let t0 = std::time::Instant::now();
    let r = a.rejoin(h);
    assert!(
        r.as_ref().is_err_and(|e| e.contains("canceling statement"))
            && t0.elapsed() < Duration::from_secs(20),
        "the cancel was lost: {r:?} after {:?}",
        t0.elapsed()
    );
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    timeout_fires_and_errors_go_on(&mut a, "killed in an injected system call with a signal");
    cl.assert_no_crash();
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {out}{err}");
}

#[test]
fn killed_together_with_a_signal_in_an_injected_syscall_15() {
    signal_during_an_injected_syscall(15);
}

#[test]
fn killed_together_with_a_signal_in_an_injected_syscall_18() {
    signal_during_an_injected_syscall(18);
}

fn sigblk(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SigBlk:").map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// pgdbg alone killed at an injected system call's exit (every signal
/// blocked for it), the backend held (a breakpoint in place): its
/// guardian puts the registers back and the backend's own signal mask,
/// read from the frame: the mask is as before the attach, and a statement
/// timeout fires.
fn guardian_at_an_injected_syscalls_exit(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    wait_until("the backend to wait", Duration::from_secs(10), || {
        syscall_nr(pid).is_some()
    });
    let before = sigblk(pid);
    // the recorder's first mmap (the second of all: the SIGTRAP handler's
    // pages are the first), made with the breakpoint in place: held, so
    // that the guardian finds the backend in the trailer
    let at = format!("syscall-exit-nr{}-2", libc::SYS_mmap);
    let mut p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break pg_backend_pid",
            "--ex",
            "plancache --for 60s",
        ],
        pid,
        &[("PGDBG_PAUSE_AT", &at), ("PGDBG_PAUSE_MS", "60000")],
    );
    wait_for_stderr(&mut p, &format!("paused at {at} "), Duration::from_secs(90));
    // blocked during the call: every signal but SIGKILL and SIGSTOP and
    // those a fault forces (SIGTRAP, SIGSEGV...)
    let forced = [
        libc::SIGILL,
        libc::SIGTRAP,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGSEGV,
        libc::SIGSYS,
        libc::SIGKILL,
        libc::SIGSTOP,
    ];
    let want = !forced.iter().fold(0u64, |m, s| m | 1 << (s - 1));
    assert_eq!(
        sigblk(pid),
        format!("{want:016x}"),
        "blocked during the call (before: {before})"
    );
    // SAFETY: kill(2) of the pgdbg this test started.
    unsafe { libc::kill(p.pid(), libc::SIGKILL) };
    wait_until("the guardian to finish", Duration::from_secs(20), || {
        tracer_pid(pid) == 0 && guardians_of(pid).is_empty()
    });
    wait_until("the backend to run", Duration::from_secs(5), || {
        !stopped(pid)
    });
    assert_eq!(
        sigblk(pid),
        before,
        "the backend's signal mask after the guardian"
    );
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    timeout_fires_and_errors_go_on(&mut a, "pgdbg killed at an injected system call's exit");
    cl.assert_no_crash();
}

#[test]
fn guardian_restores_the_mask_at_an_injected_syscalls_exit_18() {
    guardian_at_an_injected_syscalls_exit(18);
}
