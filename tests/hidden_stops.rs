//! No stop of the backend that pgdbg does not own up to, on real
//! PostgreSQL 15 and 18, with a backend that runs a statement in a loop:
//!
//! - the end of `latency` and `count` of 30 and of 200 functions: the
//!   kernel's uprobes are removed (about 80 ms each) while the backend
//!   runs; its longest stop, sampled from /proc/PID/stat every 5 ms from
//!   the command's first line to pgdbg's exit, is under 50 ms, which is
//!   what "the backend was not stopped while timing" says;
//! - someone else's SIGSTOP and SIGCONT 1 s later while `count`,
//!   `latency` and `waits trace` run for 4 s: the command runs its full
//!   time, says in one line that the backend was stopped by SIGSTOP, and
//!   exits 0; the backend runs afterwards; a SIGSTOP that still holds at
//!   the command's end is said so and left in place until its SIGCONT;
//! - an inferior call made while someone else's SIGSTOP holds (made to
//!   land inside pg_sleep's system call, where a call is safe): it runs,
//!   and the backend stays stopped (pgdbg sends no SIGCONT of its own);
//! - without the keeper, the tracefs definitions of `waits trace --perf`
//!   are removed before pgdbg exits.

// scripts/test: alone (the backend's longest stop, sampled every 5 ms, is held to 50 ms: another
// test binary on the same two cores would stretch it)

use common::*;
use pgdbg_testbed as common;
use std::io::{BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A statement that runs the executor over and over until cancelled.
const LOOP: &str = "do $$ begin loop perform count(*) from pg_class c join pg_attribute a \
                    on a.attrelid = c.oid; end loop; end $$";

/// A loop that spends its time sleeping in pg_sleep: a stop lands where
/// no LWLock or critical section is held, so an inferior call there is
/// never refused as unsafe (with `LOOP`, a SIGSTOP inside a buffer lock
/// made `call` refuse, and the test depend on where it landed).
const SLEEPING_LOOP: &str = "do $$ begin loop perform pg_sleep(0.001); end loop; end $$";

/// Executor functions called by every statement of `LOOP`, then the other
/// global functions of the binary whose name starts with Exec (from its
/// symbol table), `n` in all.
fn functions(bin: &std::path::Path, n: usize) -> Vec<String> {
    let hot = [
        "ExecutorStart",
        "standard_ExecutorStart",
        "ExecutorRun",
        "standard_ExecutorRun",
        "ExecutorFinish",
        "standard_ExecutorFinish",
        "ExecutorEnd",
        "standard_ExecutorEnd",
        "ExecInitNode",
        "ExecEndNode",
        "ExecAssignExprContext",
        "ExecInitExpr",
        "ExecReadyExpr",
        "ExecBuildProjectionInfo",
        "ExecConditionalAssignProjectionInfo",
        "ExecInitScanTupleSlot",
        "ExecInitResultTupleSlotTL",
        "ExecOpenScanRelation",
        "ExecScan",
        "ExecCloseRangeTableRelations",
        "ExecResetTupleTable",
        "ExecInitAgg",
        "ExecEndAgg",
        "ExecInitHashJoin",
        "ExecEndHashJoin",
        "ExecInitHash",
        "ExecEndHash",
        "ExecInitSeqScan",
        "ExecEndSeqScan",
        "ExecHashTableCreate",
    ];
    let out = std::process::Command::new("nm")
        .arg("--defined-only")
        .arg(bin)
        .output()
        .expect("nm");
    let text = String::from_utf8_lossy(&out.stdout);
    let global: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (_, kind, name) = (w.next()?, w.next()?, w.next()?);
            (kind == "T").then_some(name)
        })
        .collect();
    let mut v: Vec<String> = hot
        .iter()
        .filter(|f| global.contains(f))
        .map(|f| f.to_string())
        .collect();
    let mut rest: Vec<&str> = global
        .iter()
        .copied()
        .filter(|f| f.starts_with("Exec") && !v.iter().any(|h| h == f))
        .collect();
    rest.sort();
    rest.dedup();
    v.extend(rest.into_iter().map(String::from));
    v.truncate(n);
    assert_eq!(v.len(), n, "{n} Exec functions in {}", bin.display());
    v
}

/// Samples of a process's state every 5 ms on a thread.
struct StateSampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(Instant, char)>>,
}

impl StateSampler {
    fn start(pid: i32) -> StateSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut v = Vec::new();
            while !st.load(Ordering::Relaxed) {
                let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let c = s
                    .rfind(')')
                    .and_then(|i| s[i + 1..].trim_start().chars().next())
                    .unwrap_or('?');
                v.push((Instant::now(), c));
                std::thread::sleep(Duration::from_millis(5));
            }
            v
        });
        StateSampler { stop, handle }
    }

    /// The longest stretch of samples in state t or T from `from` on (from
    /// the first such sample to the first sample after it that is not).
    fn longest_stop(self, from: Instant) -> Duration {
        self.stop.store(true, Ordering::Relaxed);
        let v = self.handle.join().unwrap();
        let mut longest = Duration::ZERO;
        let mut since: Option<Instant> = None;
        for (t, c) in v.into_iter().filter(|(t, _)| *t >= from) {
            match (c == 't' || c == 'T', since) {
                (true, None) => since = Some(t),
                (false, Some(s)) => {
                    longest = longest.max(t - s);
                    since = None;
                }
                _ => {}
            }
        }
        if let Some(s) = since {
            longest = longest.max(s.elapsed());
        }
        longest
    }
}

/// `cmd` (`latency ...` or `count ...`, which says `first` when it is
/// under way) on a backend running `LOOP`: pgdbg's exit status, its
/// output after that line, and the backend's longest stop from that line
/// until 300 ms after pgdbg's exit.
fn longest_stop_of(cl: &Cluster, cmd: &str, first: &str) -> (i32, String, String, Duration) {
    let mut a = cl.connect();
    let pid = a.pid();
    let looping = a.spawn_text(LOOP);
    cl.wait_active(&[pid], "perform count");
    let sampler = StateSampler::start(pid);
    let mut p = Pgdbg::spawn(&["attach", &pid.to_string(), "-q", "--ex", cmd]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(&mut out, first, Duration::from_secs(120));
    let from = Instant::now();
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(300));
    let longest = sampler.longest_stop(from);
    cl.cancel(&[pid]);
    assert!(a.rejoin(looping).is_err(), "the loop ends by the cancel");
    (code, text, err, longest)
}

fn ends_without_stop(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    // what the probes recorded is read and digested while the backend
    // runs on (a profile's symbolizing took 270 ms of a stop, latency's
    // pairing 30-60 ms): the stop that ends the command is ptrace's only
    let mut runs = vec![(
        "profile --for 2s".to_string(),
        "profile".to_string(),
        "profile: ",
    )];
    for n in [30, 200] {
        let fs = functions(&bin, n).join(" ");
        // (count of 30 or 200 functions says first, in a line of its own,
        // that it counts with kernel uprobes instead of in-process; the
        // line that follows their opening says "no stops")
        for (cmd, first) in [("latency", "latency: "), ("count", "no stops")] {
            runs.push((
                format!("{cmd} {fs} --for 2s"),
                format!("{cmd} of {n} functions"),
                first,
            ));
        }
    }
    for (line, what, first) in runs {
        let (code, text, err, longest) = longest_stop_of(&cl, &line, first);
        assert_eq!(code, 0, "{what}: {err}");
        eprintln!("{major}: {what}: longest stop {longest:?}");
        assert!(
            longest < Duration::from_millis(50),
            "{major}: {what}: the backend was stopped for {longest:?} at the end\n{text}"
        );
        if line.starts_with("latency") {
            // what the summary says is what was measured: no stop of
            // pgdbg's own; a signal the backend got meanwhile (a sinval
            // catch-up under load, say) passes through a stop, said as such
            assert!(
                text.contains("the backend was not stopped while timing")
                    || (text.contains("while timing: signals or library loads")
                        && !text.contains("the backend was stopped for")),
                "{text}"
            );
        }
    }
    cl.assert_no_crash();
}

#[test]
fn probes_end_without_stopping_the_backend_all_majors() {
    for m in majors() {
        ends_without_stop(m);
    }
}

/// `cmd` (`--for 4s`) on a backend running `LOOP`, with `kill -STOP` of
/// the backend 1 s after `first` and `kill -CONT` 1 s later: (elapsed
/// from `first` to pgdbg's exit, exit status, output, stderr).
fn foreign_stop_during(cl: &Cluster, cmd: &str, first: &str) -> (Duration, i32, String, String) {
    let mut a = cl.connect();
    let pid = a.pid();
    let looping = a.spawn_text(LOOP);
    cl.wait_active(&[pid], "perform count");
    let mut p = Pgdbg::spawn(&["attach", &pid.to_string(), "-q", "--ex", cmd]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(&mut out, first, Duration::from_secs(60));
    let t0 = Instant::now();
    let rest = std::thread::spawn(move || {
        let mut text = String::new();
        out.read_to_string(&mut text).unwrap();
        text
    });
    std::thread::sleep(Duration::from_secs(1));
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(1));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let text = rest.join().unwrap();
    let elapsed = t0.elapsed();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    // the backend runs on, untraced
    wait_until("the backend untraced", Duration::from_secs(10), || {
        tracer_pid(pid) == 0
    });
    wait_until("the backend running", Duration::from_secs(10), || {
        !proc_state(pid).starts_with(['T', 't'])
    });
    cl.cancel(&[pid]);
    assert!(a.rejoin(looping).is_err(), "the loop ends by the cancel");
    (elapsed, code, text, err)
}

fn foreign_stop_ridden_out(major: u32) {
    let cl = Cluster::start(major);
    for (cmd, first) in [
        ("count ExecutorStart --for 4s", "count: "),
        ("latency ExecutorStart --for 4s", "latency: "),
        ("waits trace --for 4s", "waits: tracing backend"),
    ] {
        let (elapsed, code, text, err) = foreign_stop_during(&cl, cmd, first);
        eprintln!("{major}: {cmd}: {elapsed:?}, status {code}");
        assert_eq!(code, 0, "{cmd}: {err}\n{text}");
        assert!(
            elapsed >= Duration::from_millis(3900),
            "{major}: {cmd} ended after {elapsed:?} of 4 s:\n{text}\n{err}"
        );
        let said: Vec<&str> = text
            .lines()
            .chain(err.lines())
            .filter(|l| l.contains("stopped by SIGSTOP from process"))
            .collect();
        assert_eq!(said.len(), 1, "{major}: {cmd}:\n{text}\n{err}");
        eprintln!("{major}: {cmd}: {}", said[0]);
        assert!(said[0].contains("not by pgdbg"), "{}", said[0]);
        assert!(!text.contains("Program stopped"), "{major}: {cmd}:\n{text}");
    }
    cl.assert_no_crash();
}

/// Someone else's SIGSTOP that still holds when the command ends: said
/// so, and pgdbg leaves the backend stopped, untraced, until their
/// SIGCONT.
fn foreign_stop_kept(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let looping = a.spawn_text(SLEEPING_LOOP);
    cl.wait_active(&[pid], "perform pg_sleep");
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "count pg_sleep --for 2s",
    ]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(&mut out, "count: ", Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("the backend is stopped by SIGSTOP from process")
            && text.contains("it stays stopped until a SIGCONT"),
        "{major}:\n{text}\n{err}"
    );
    wait_until("the backend untraced", Duration::from_secs(10), || {
        tracer_pid(pid) == 0
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(proc_state(pid).starts_with('T'), "{}", proc_state(pid));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    wait_until("the backend running", Duration::from_secs(10), || {
        !proc_state(pid).starts_with(['T', 't'])
    });
    cl.cancel(&[pid]);
    assert!(a.rejoin(looping).is_err(), "the loop ends by the cancel");
    cl.assert_no_crash();
}

#[test]
fn foreign_sigstop_kept_after_the_command_all_majors() {
    for m in majors() {
        foreign_stop_kept(m);
    }
}

#[test]
fn foreign_sigstop_is_ridden_out_all_majors() {
    for m in majors() {
        foreign_stop_ridden_out(m);
    }
}

/// Someone else's SIGSTOP that holds when the next command makes an
/// inferior call: pgdbg takes its hold without a SIGSTOP of its own (one
/// would never be reported while the backend sits in their stop, and
/// pgdbg hung until their SIGCONT), runs the call to its end, and at the
/// command's end neither sends a SIGCONT nor lets the backend run: it
/// stays stopped, untraced, after pgdbg's exit until their SIGCONT.
fn call_in_foreign_stop(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let looping = a.spawn_text(SLEEPING_LOOP);
    cl.wait_active(&[pid], "perform pg_sleep");
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "count pg_sleep --for 2s",
        "--ex",
        "call pg_usleep(1000)",
        "--ex",
        "print 6*7",
    ]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(&mut out, "count: ", Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    stop_inside_a_system_call(pid);
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    // no SIGCONT before pgdbg's end: the call must not wait for one
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{major}:\n{text}\n{err}");
    assert!(
        text.contains("42"),
        "{major}: the commands after the call ran:\n{text}\n{err}"
    );
    assert!(
        text.contains("it stays stopped until a SIGCONT"),
        "{major}:\n{text}\n{err}"
    );
    wait_until("the backend untraced", Duration::from_secs(10), || {
        tracer_pid(pid) == 0
    });
    // stopped all along since their SIGSTOP (pgdbg's hold left without a
    // SIGCONT), and still after a while
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        proc_state(pid).starts_with('T'),
        "{major}: {}",
        proc_state(pid)
    );
    unsafe { libc::kill(pid, libc::SIGCONT) };
    wait_until("the backend running", Duration::from_secs(10), || {
        !proc_state(pid).starts_with(['T', 't'])
    });
    cl.cancel(&[pid]);
    assert!(a.rejoin(looping).is_err(), "the loop ends by the cancel");
    cl.assert_no_crash();
}

/// Someone else's SIGSTOP of `pid`, made to land inside a system call
/// (pg_sleep's wait): where a stop lands in user code (the allocator, a
/// buffer lock) `call` is rightly refused as unsafe, so a stop that is
/// not in a system call (/proc/PID/syscall reads `-1 ...`) is undone with
/// a SIGCONT and tried again; the loop sleeps almost all its time, so a
/// few tries at most are needed.
fn stop_inside_a_system_call(pid: i32) {
    for _ in 0..50 {
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        wait_until("the backend stopped", Duration::from_secs(10), || {
            proc_state(pid).starts_with(['T', 't'])
        });
        let sc = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        let nr: i64 = sc
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1);
        if nr >= 0 {
            return;
        }
        unsafe { libc::kill(pid, libc::SIGCONT) };
        std::thread::sleep(Duration::from_millis(30));
    }
    panic!("50 SIGSTOPs of a backend sleeping in pg_sleep: none landed inside a system call");
}

#[test]
fn call_in_foreign_sigstop_all_majors() {
    for m in majors() {
        call_in_foreign_stop(m);
    }
}

/// Without the keeper (PGDBG_NO_KEEPER=1: pgdbg holds its uprobes
/// itself), `waits trace --perf` defines uprobes in tracefs; their events
/// are closed in the background, and the definitions are removed after
/// them, before pgdbg exits (removed while an event was still open, the
/// kernel refused and they were left behind).
#[test]
fn tracefs_definitions_removed_without_keeper() {
    if !std::path::Path::new("/sys/kernel/tracing/uprobe_events").exists() {
        eprintln!("no tracefs: skipped");
        return;
    }
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let looping = a.spawn_text(LOOP);
    cl.wait_active(&[pid], "perform count");
    let child = std::process::Command::new(pgdbg_bin())
        .args([
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "waits trace --perf --uprobes --for 1s --quiet",
        ])
        .env("PGDBG_NO_KEEPER", "1")
        .env_remove("DEBUGINFOD_URLS")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn pgdbg");
    let k = child.id();
    let p = Pgdbg { child };
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Wait events summary"), "{out}\n{err}");
    let left = tracefs_definitions_of(k);
    assert!(left.is_empty(), "left behind by pgdbg {k}: {left:?}\n{err}");
    cl.cancel(&[pid]);
    assert!(a.rejoin(looping).is_err(), "the loop ends by the cancel");
    cl.assert_no_crash();
}
