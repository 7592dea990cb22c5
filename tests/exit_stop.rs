//! The exit stop (src/inferior/exiting.rs: `plancache` reads its ring one
//! last time when the backend ends) harms nothing.  pgdbg is paused in it
//! (PGDBG_PAUSE_AT=exit-stop), the backend held there, and then: pgdbg
//! dies alone (its guardian present), or with its guardian (the kernel
//! alone lets the backend go), or the backend gets a SIGKILL and pgdbg is
//! told to end.  Each time the backend's exit completes and reaches the
//! postmaster, which reaps it: no crash, no backend left, the server
//! answers.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufRead, BufReader};
use std::process::ChildStdout;
use std::time::{Duration, Instant};

/// A session watched by `plancache` runs a prepared statement and
/// closes: pgdbg is paused with the backend in its exit stop (stdout kept
/// open: pgdbg still writes to it).
fn held_in_exit_stop(cl: &Cluster) -> (i32, Pgdbg, BufReader<ChildStdout>) {
    let mut c = cl.connect();
    let pid = c.pid();
    let mut p = Pgdbg::spawn_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plancache --for 120s",
        ],
        &[("PGDBG_PAUSE_AT", "exit-stop"), ("PGDBG_PAUSE_MS", "60000")],
    );
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let mut head = String::new();
    while !head.contains("plancache: watching") {
        assert!(out.read_line(&mut head).unwrap() > 0, "pgdbg ended: {head}");
    }
    c.exec("prepare held_p as select $1::int + 1");
    for i in 0..3 {
        c.exec(&format!("execute held_p({i})"));
    }
    drop(c);
    wait_paused(&mut p, "exit-stop");
    // held: stopped under ptrace ("t (tracing stop)")
    assert!(proc_state(pid).starts_with('t'), "{}", proc_state(pid));
    (pid, p, out)
}

/// The backend's end reached the postmaster: reaped (no /proc entry),
/// not a crash, and the server answers without it.
fn reaped(cl: &Cluster, pid: i32, since: Instant, what: &str) {
    wait_until(
        "the postmaster to reap the backend",
        Duration::from_secs(20),
        || !std::path::Path::new(&format!("/proc/{pid}")).exists(),
    );
    eprintln!("{what}: backend {pid} reaped {:?} after", since.elapsed());
    let mut c = cl.connect();
    let n = c.query_one_i64(&format!(
        "select count(*) from pg_stat_activity where pid = {pid}"
    ));
    assert_eq!(n, 0);
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill(2) of a process this test started or its backend.
    unsafe { libc::kill(pid, sig) };
}

fn let_go_when_pgdbg_dies_alone(major: u32) {
    let cl = Cluster::start(major);
    let (pid, mut p, _out) = held_in_exit_stop(&cl);
    let t0 = Instant::now();
    kill(p.pid(), libc::SIGKILL);
    let _ = p.child.wait();
    reaped(&cl, pid, t0, "pgdbg killed alone");
    wait_until("its guardian to end", Duration::from_secs(20), || {
        guardians_of(pid).is_empty()
    });
    cl.assert_no_crash();
}

fn let_go_when_pgdbg_and_guardian_die(major: u32) {
    let cl = Cluster::start(major);
    let (pid, mut p, _out) = held_in_exit_stop(&cl);
    let g = guardians_of(pid);
    let t0 = Instant::now();
    kill(p.pid(), libc::SIGKILL);
    for &g in &g {
        kill(g, libc::SIGKILL);
    }
    let _ = p.child.wait();
    reaped(&cl, pid, t0, "pgdbg and its guardian killed");
    cl.assert_no_crash();
}

/// A SIGKILL to a backend that is already ending (it called exit) is
/// dropped by the kernel: the exit stop lasts until pgdbg lets it go,
/// which it does as soon as it is told to end; the backend was ending
/// normally, and the postmaster sees a normal exit.
fn backend_killed_there(major: u32) {
    let cl = Cluster::start(major);
    let (pid, p, out) = held_in_exit_stop(&cl);
    kill(pid, libc::SIGKILL);
    std::thread::sleep(Duration::from_millis(300));
    // the SIGKILL was dropped: still held in the exit stop
    let st = proc_state(pid);
    eprintln!("after SIGKILL in the exit stop: {st}");
    assert!(st.starts_with('t'), "{st}");
    let rest = std::thread::spawn(move || {
        let mut out = out;
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let t0 = Instant::now();
    kill(p.pid(), libc::SIGTERM);
    let (_, _, err) = p.wait(Duration::from_secs(30));
    reaped(&cl, pid, t0, "pgdbg told to end");
    let out = rest.join().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    // what its ring held at its exit is reported all the same
    assert_eq!(
        out.lines().filter(|l| l.starts_with("held_p #")).count(),
        3,
        "{out}\n{err}"
    );
    cl.assert_no_crash();
}

/// A backend SIGKILLed while it runs a workload (not in its exit stop)
/// stops there too (6.18): pgdbg reads, lets it go at once and says it
/// was killed; the postmaster sees the crash as without pgdbg and the
/// server accepts connections again.
fn backend_killed_while_running(major: u32) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let mut p = Pgdbg::spawn_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plancache --for 60s",
        ],
        &[("PGDBG_DEBUG", "1")],
    );
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let mut head = String::new();
    while !head.contains("plancache: watching") {
        assert!(out.read_line(&mut head).unwrap() > 0, "pgdbg ended: {head}");
    }
    c.exec("prepare loop_p as select $1::int + count(*) from pg_sleep(0.005)");
    let done = Arc::new(AtomicU64::new(0));
    let n = done.clone();
    let mut pc = c.c.take().unwrap();
    let workload = std::thread::spawn(move || {
        let mut i = 0u64;
        // until the backend is killed
        while pc.simple_query(&format!("execute loop_p({i})")).is_ok() {
            i += 1;
            n.store(i, Ordering::SeqCst);
        }
    });
    // running, under pgdbg: executions go on after it watches
    let seen = done.load(Ordering::SeqCst);
    wait_until("the workload to run", Duration::from_secs(20), || {
        done.load(Ordering::SeqCst) >= seen + 20
    });
    cl.wait_active(&[pid], "loop_p");
    assert!(tracer_pid(pid) != 0, "pgdbg is not attached");
    // both pipes read as pgdbg writes (its debug lines are many)
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let rest = drain(Box::new(out));
    let err = drain(Box::new(p.child.stderr.take().unwrap()));
    let t0 = Instant::now();
    kill(pid, libc::SIGKILL);
    wait_until("pgdbg to end", Duration::from_secs(60), || {
        p.child.try_wait().unwrap().is_some()
    });
    let (rest, err) = (rest.join().unwrap(), err.join().unwrap());
    workload.join().unwrap();
    let all = format!("{head}{rest}");
    assert!(
        all.contains(&format!("Backend {pid} was killed by signal SIGKILL.")),
        "{all}\n{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let held: u64 = err
        .lines()
        .find_map(|l| {
            let (_, r) = l.split_once("exit stop: held ")?;
            r.split_once(" us")?.0.parse().ok()
        })
        .unwrap_or_else(|| panic!("no exit stop in the debug lines:\n{err}"));
    eprintln!("killed while running: exit stop held {held} us");
    assert!(held < 1_000_000, "exit stop held {held} us");
    // the crash, as without pgdbg, and the restart
    wait_until(
        "the postmaster to log the crash",
        Duration::from_secs(30),
        || cl.log().contains("terminated by signal 9"),
    );
    wait_until(
        "the server to accept connections",
        Duration::from_secs(30),
        || {
            postgres::Client::connect(&cl.connstr(), postgres::NoTls)
                .and_then(|mut c| c.simple_query("select 1"))
                .is_ok()
        },
    );
    eprintln!("killed while running: server back {:?} after", t0.elapsed());
}

#[test]
fn exit_stop_of_a_backend_killed_while_running() {
    backend_killed_while_running(15);
    backend_killed_while_running(18);
}

#[test]
fn exit_stop_let_go_when_pgdbg_dies_alone() {
    let_go_when_pgdbg_dies_alone(15);
    let_go_when_pgdbg_dies_alone(18);
}

#[test]
fn exit_stop_let_go_when_pgdbg_and_guardian_die() {
    let_go_when_pgdbg_and_guardian_die(15);
    let_go_when_pgdbg_and_guardian_die(18);
}

#[test]
fn exit_stop_of_a_backend_killed_there() {
    backend_killed_there(15);
    backend_killed_there(18);
}
