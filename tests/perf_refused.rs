//! Where the kernel refuses perf_event_open, the commands whose default is a
//! perf event say why in one line and run their ptrace mode instead, with
//! the same results; `profile`, which has no ptrace mode, refuses in one
//! line.  The refusal is the kernel's own: pgdbg runs under a seccomp
//! filter that makes perf_event_open fail with EPERM, as Docker's default
//! seccomp profile does in a container.

use common::*;
use pgdbg_testbed as common;
use pgdbg_testbed::seccomp;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// pgdbg with perf_event_open denied.
fn spawn_denied(args: &[&str]) -> Pgdbg {
    let mut cmd = Command::new(pgdbg_bin());
    cmd.args(args)
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    unsafe {
        cmd.pre_exec(|| seccomp::deny(&[libc::SYS_perf_event_open]));
    }
    Pgdbg {
        child: cmd.spawn().expect("spawn pgdbg"),
    }
}

/// Run `cmd` on `pid` with perf denied: `work` runs once `ready` is printed;
/// returns (exit code, whole stdout, stderr).
fn run_denied(
    pid: i32,
    cmd: &str,
    cap: &std::path::Path,
    ready: &str,
    work: impl FnOnce(),
) -> (i32, String, String) {
    let mut p = spawn_denied(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--capture",
        &cap.display().to_string(),
        "--ex",
        cmd,
    ]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let head = read_until(&mut out, ready, Duration::from_secs(60));
    work();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    (code, format!("{head}{rest}"), err)
}

/// The lines of `out` that say the perf event was refused.
fn refusal_lines(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.contains("perf_event_open refused"))
        .collect()
}

#[test]
fn perf_refused_falls_back_to_ptrace() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!("pgdbg-perf-refused-{}.jsonl", std::process::id()));
    a.simple_text("select pg_sleep(0.01)::text");

    // waits trace: the reason in one line, then the ptrace mode's waits and
    // statement times
    let _ = std::fs::remove_file(&cap);
    let (code, out, err) = run_denied(
        pid,
        "waits trace --for 3s",
        &cap,
        "waits: tracing backend",
        || {
            for i in 0..10 {
                if i % 5 == 0 {
                    a.simple_text("select pg_sleep(0.05)::text");
                } else {
                    assert_eq!(a.query_one_i64(&format!("select {i}")), i);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        },
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let r = refusal_lines(&out);
    assert_eq!(r.len(), 1, "{out}");
    assert!(
        r[0].starts_with("a write breakpoint event on process ")
            && r[0].contains("perf_event_open refused (Operation not permitted")
            && r[0].contains("seccomp")
            && r[0].ends_with("; tracing with a debug register and ptrace stops instead"),
        "{}",
        r[0]
    );
    assert!(
        out.contains("(hardware watchpoint on its wait-event word)"),
        "{out}"
    );
    let waits = read_events(&cap, "wait");
    let sleeps = waits
        .iter()
        .filter(|w| w["wait_event"] == "PgSleep")
        .count();
    let reads = waits
        .iter()
        .filter(|w| w["wait_event"] == "ClientRead")
        .count();
    assert_eq!(sleeps, 2, "{out}");
    assert!(
        (10..=12).contains(&reads),
        "{reads} ClientRead waits:\n{out}"
    );
    let stmts = read_events(&cap, "statement");
    assert_eq!(stmts.len(), 10, "{stmts:?}");
    assert!(out.contains("Statements:"), "{out}");

    // count: the reason in one line, then exact counts from ptrace stops
    let _ = std::fs::remove_file(&cap);
    let (code, out, err) = run_denied(
        pid,
        "count standard_ExecutorStart standard_ExecutorEnd --uprobes --for 3s",
        &cap,
        "count: ",
        || {
            for i in 0..37 {
                assert_eq!(a.query_one_i64(&format!("select {i}")), i);
            }
        },
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let r = refusal_lines(&out);
    assert_eq!(r.len(), 1, "{out}");
    assert!(
        r[0].starts_with("count: a kernel uprobe on process ")
            && r[0].ends_with("; counting with a ptrace stop per call instead"),
        "{}",
        r[0]
    );
    for f in ["standard_ExecutorStart", "standard_ExecutorEnd"] {
        let n: u64 = out
            .lines()
            .find_map(|l| l.strip_prefix(f).map(|r| r.trim().parse().unwrap()))
            .unwrap_or_else(|| panic!("no count of {f}:\n{out}"));
        assert_eq!(n, 37, "{out}");
    }

    // profile has no ptrace mode: one line, non-zero exit, nothing touched
    let p = spawn_denied(&["profile", &pid.to_string(), "-q", "--for", "1s"]);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_ne!(code, 0, "{out}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("perf_event_open refused"), "{err}");
    // so has profile --syscalls (its tracepoints are perf events too)
    let p = spawn_denied(&[
        "profile",
        &pid.to_string(),
        "--syscalls",
        "-q",
        "--for",
        "1s",
    ]);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_ne!(code, 0, "{out}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("profile --syscalls on process")
            && lines[0].contains("perf_event_open refused"),
        "{err}"
    );

    // --ptrace needs no perf event: no refusal line at all
    let mut p = spawn_denied(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "count standard_ExecutorStart --ptrace --for 1s",
    ]);
    let mut o = String::new();
    BufReader::new(p.child.stdout.take().unwrap())
        .lines()
        .for_each(|l| o.push_str(&format!("{}\n", l.unwrap())));
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert!(refusal_lines(&o).is_empty(), "{o}");

    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.query_one_i64("select 5"), 5);
    let _ = std::fs::remove_file(&cap);
    cl.assert_no_crash();
}
