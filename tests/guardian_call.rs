//! pgdbg SIGKILLed alone while an inferior call runs: its guardian finishes
//! the call as pgdbg would.  Signals that reach the backend meanwhile are
//! held back (none runs PostgreSQL's handlers inside the call), recorded in
//! the guardian's table before they are suppressed, and sent again once the
//! backend's registers are its own; a call that raises an ERROR is
//! abandoned after `FlushErrorState`, so PostgreSQL's error stack is not
//! left one entry deep.

use common::*;
use pgdbg_testbed as common;
use std::io::Read;
use std::time::Duration;

/// What the guardian said (pgdbg's stderr, which it inherited), once it
/// has ended.
fn guardian_said(mut p: Pgdbg, backend: i32) -> String {
    wait_until("the guardian to end", Duration::from_secs(60), || {
        guardians_of(backend).is_empty() && tracer_pid(backend) == 0
    });
    let _ = p.child.wait();
    let mut err = String::new();
    p.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

/// `call pg_usleep(...)` inside a running `select pg_sleep(120)`, pgdbg
/// killed: a SIGALRM and a query cancel (SIGINT) sent to the backend while
/// the guardian runs the call are held back: each recorded in the table
/// (pg_usleep, which returns early on any signal, sleeps on), then sent
/// once the call is over and the registers put back: the statement is
/// cancelled then, and the session goes on.
fn signals_held_during_call(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let h = a.spawn_text("select pg_sleep(120)");
    cl.wait_active(&[pid], "select pg_sleep(120)");
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
    // (pg_sleep itself waits in epoll_wait)
    wait_call_in(&mut p, pid, "the call to sleep", &[23, 35, 230, 270]);
    kill_pgdbg_alone(&p, pid);
    for (sig, name) in [(libc::SIGALRM, "SIGALRM"), (libc::SIGINT, "SIGINT")] {
        // SAFETY: kill(2) of a backend of the test's own cluster.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let bit = 1u64 << (sig - 1);
        wait_until(
            &format!("{name} to be recorded as held back"),
            Duration::from_secs(20),
            || recorded_signals(pid).is_some_and(|m| m & bit != 0),
        );
    }
    let said = guardian_said(p, pid);
    assert!(
        said.contains("call completed; SIGALRM SIGINT held back meanwhile, sent after"),
        "the guardian said: {said}"
    );
    // the cancel reached the statement after the call
    let r = a.rejoin(h);
    assert!(
        r.as_ref()
            .is_err_and(|e| e.contains("canceling statement due to user request")),
        "the statement was not cancelled: {r:?}"
    );
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    // statement_timeout fires as ever
    a.exec("set statement_timeout = '1s'");
    let r = a.c.as_mut().unwrap().batch_execute("select pg_sleep(60)");
    assert!(
        r.as_ref()
            .is_err_and(|e| format!("{e:?}").contains("statement timeout")),
        "{r:?}"
    );
    assert_eq!(a.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn guardian_holds_signals_during_call_15() {
    signals_held_during_call(15);
}

#[test]
fn guardian_holds_signals_during_call_18() {
    signals_held_during_call(18);
}

/// A call that raises an ERROR once the guardian runs it: `load_file` of a
/// FIFO blocks in dlopen's open(2) until the test writes a few bytes that
/// are no library (ERROR "could not load library").  The guardian abandons
/// the call at its error trap after `FlushErrorState`: the error stack is
/// empty again (`errordata_stack_depth` -1, not 0), the session goes on.
fn error_in_call_flushed(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let fifo = std::env::temp_dir().join(format!(
        "pgdbg-guardian-call-{}-{major}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&fifo);
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    // the server may run as another user than the test
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--call-timeout",
            "60s",
            "--ex",
            &format!("call load_file(\"{}\", 0)", fifo.display()),
        ],
        pid,
    );
    // dlopen opens the FIFO: open or openat, blocked until a writer comes
    wait_call_in(&mut p, pid, "the call to open the FIFO", &[2, 257]);
    kill_pgdbg_alone(&p, pid);
    std::fs::write(&fifo, b"not a shared library\n").unwrap();
    let said = guardian_said(p, pid);
    let _ = std::fs::remove_file(&fifo);
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "print errordata_stack_depth",
        "--ex",
        "print InterruptHoldoffCount",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        print_values(&out),
        vec!["-1", "0"],
        "error stack and holdoff as before the call; the guardian said: {said}"
    );
    assert!(
        said.contains("call abandoned at its error trap, error state flushed"),
        "the guardian said: {said}"
    );
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    assert!(a.c.as_mut().unwrap().batch_execute("select 1/0").is_err());
    assert_eq!(a.query_one_i64("select 6 * 7"), 42);
    let log = cl.log();
    for bad in ["errstart was not called", "ERRORDATA_STACK_SIZE"] {
        assert!(!log.contains(bad), "{bad} in the server log:\n{log}");
    }
    cl.assert_no_crash();
}

#[test]
fn guardian_flushes_error_of_abandoned_call_15() {
    error_in_call_flushed(15);
}

#[test]
fn guardian_flushes_error_of_abandoned_call_18() {
    error_in_call_flushed(18);
}
