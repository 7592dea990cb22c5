//! Failed writes of the capture file or of standard output (issue 20, row
//! 6) stop the running command with one line naming the file and the OS
//! error and a non-zero exit, the backend restored and detached; a
//! capture that cannot be opened says why; a new capture file is 0600
//! (issue 18: captures hold query texts and parameter values).

use common::*;
use pgdbg_testbed as common;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Exit status of pgdbg after a failed write (EX_IOERR).
const OUTPUT_FAILED_EXIT: i32 = 74;

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-caperr-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// A statement loop in the backend: one executor start per iteration.
const LOOP: &str = "do $$ begin for i in 1..20000 loop execute 'select ' || i || ' as a_column_name_to_make_the_line_longer'; end loop; end $$";

/// The backend is as it was: untraced, standard_ExecutorStart's code
/// bytes equal the file's, and it still answers queries.
fn assert_restored(cl: &Cluster, c: &mut Client, pid: i32) {
    assert_eq!(tracer_pid(pid), 0, "backend {pid} still traced");
    assert!(
        code_matches_file(pid, &cl.postgres_binary(), "standard_ExecutorStart", 16),
        "int3 left in backend {pid}"
    );
    assert_eq!(c.query_one_i64("select 6"), 6);
}

/// pgdbg with a maximum file size of `limit` bytes (RLIMIT_FSIZE, SIGXFSZ
/// ignored): a write past it fails with EFBIG, "File too large", after
/// the capture has received what fits.  stdout to `out`.
fn spawn_with_fsize(args: &[&str], limit: u64, out: &std::path::Path) -> Pgdbg {
    let f = std::fs::File::create(out).unwrap();
    let mut cmd = Command::new(pgdbg_bin());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(f))
        .stderr(Stdio::piped());
    // SAFETY: setrlimit and signal are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // the soft limit: pgdbg's own files hit it; the hard one stays
            // (pgdbg raises its soft limit to it only to size the shared
            // table of its guardian)
            let rl = libc::rlimit {
                rlim_cur: limit,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    Pgdbg {
        child: cmd.spawn().expect("spawn pgdbg"),
    }
}

fn wait_for_output(file: &std::path::Path, needle: &str) {
    wait_until(needle, Duration::from_secs(60), || {
        std::fs::read_to_string(file).is_ok_and(|s| s.contains(needle))
    });
}

// ------------------------------------------------------------ /dev/full

/// `--capture /dev/full`: the first event (attach) cannot be written; the
/// script stops at once (not after its --for), one line says why, exit
/// 74, the backend untouched.
fn capture_to_a_full_device(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let t0 = Instant::now();
    let p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "trace standard_ExecutorStart --for 20s",
        "--capture",
        "/dev/full",
    ]);
    let h = c.spawn_text(LOOP);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    let took = t0.elapsed();
    assert_eq!(code, OUTPUT_FAILED_EXIT, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(
        err,
        "pgdbg: writing capture /dev/full failed: No space left on device (os error 28); the backend was restored and detached\n"
    );
    assert!(took < Duration::from_secs(15), "stopped after {took:?}");
    assert!(c.rejoin(h).is_ok());
    assert_restored(&cl, &mut c, pid);
    cl.assert_no_crash();
}

#[test]
fn capture_to_a_full_device_15() {
    capture_to_a_full_device(15);
}

#[test]
fn capture_to_a_full_device_18() {
    capture_to_a_full_device(18);
}

// ------------------------------------------------- a write fails mid-way

/// The capture fills up while `trace` runs (a 64 KiB file size limit):
/// the probe stops at the failed write, long before its --for, with one
/// line naming the file and the error; the breakpoints are removed; the
/// capture holds the events written before, its last line possibly cut
/// (which `pgdbg report` reads, saying so).
fn capture_fails_during_a_probe(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let cap = temp(&format!("efbig-{major}.jsonl"));
    let out = temp(&format!("efbig-{major}.out"));
    let p = spawn_with_fsize(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "trace standard_ExecutorStart queryDesc->sourceText --for 30s",
            "--capture",
            cap.to_str().unwrap(),
        ],
        64 << 10,
        &out,
    );
    wait_for_output(&out, "trace: standard_ExecutorStart");
    let t0 = Instant::now();
    let h = c.spawn_text(LOOP);
    let (code, _, err) = p.wait(Duration::from_secs(60));
    let took = t0.elapsed();
    assert_eq!(code, OUTPUT_FAILED_EXIT, "stderr:\n{err}");
    assert_eq!(
        err,
        format!(
            "pgdbg: writing capture {} failed: File too large (os error 27); the backend was restored and detached\n",
            cap.display()
        )
    );
    assert!(took < Duration::from_secs(20), "stopped after {took:?}");
    assert!(c.rejoin(h).is_ok());
    assert_restored(&cl, &mut c, pid);
    // the events that fit: a few hundred traced calls
    let size = std::fs::metadata(&cap).unwrap().len();
    assert!(size <= 64 << 10, "{size}");
    let traced = read_events(&cap, "trace").len();
    assert!(traced > 100, "{traced} trace events");
    let (code, report, err) = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(report.contains("standard_ExecutorStart  trace"), "{report}");
    // a cut last line is said; one cut just before its newline is whole
    // JSON and is used as it is
    let data = std::fs::read(&cap).unwrap();
    let last = data.rsplit(|b| *b == b'\n').next().unwrap_or(&[]);
    if !data.ends_with(b"\n") && serde_json::from_slice::<serde_json::Value>(last).is_err() {
        assert!(
            err.contains("is incomplete (a writer was killed?): ignored"),
            "{err}"
        );
    }
    let _ = std::fs::remove_file(&cap);
    let _ = std::fs::remove_file(&out);
    cl.assert_no_crash();
}

#[test]
fn capture_fails_during_a_probe_15() {
    capture_fails_during_a_probe(15);
}

#[test]
fn capture_fails_during_a_probe_18() {
    capture_fails_during_a_probe(18);
}

// ------------------------------------------------------ closed stdout

/// Standard output is a pipe nobody reads any more (`| head` that ended):
/// the first line of probe output fails with EPIPE (SIGPIPE is ignored),
/// which ends `trace` at once, restores the backend, and says so.
fn closed_stdout_ends_the_session(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "trace standard_ExecutorStart --for 20s",
    ]);
    drop(p.child.stdout.take());
    let t0 = Instant::now();
    let h = c.spawn_text(LOOP);
    let (code, _, err) = p.wait(Duration::from_secs(60));
    let took = t0.elapsed();
    assert_eq!(code, OUTPUT_FAILED_EXIT, "stderr:\n{err}");
    assert_eq!(
        err,
        "pgdbg: writing standard output failed: Broken pipe (os error 32); the backend was restored and detached\n"
    );
    assert!(took < Duration::from_secs(15), "stopped after {took:?}");
    assert!(c.rejoin(h).is_ok());
    assert_restored(&cl, &mut c, pid);
    cl.assert_no_crash();
}

#[test]
fn closed_stdout_ends_the_session_15() {
    closed_stdout_ends_the_session(15);
}

#[test]
fn closed_stdout_ends_the_session_18() {
    closed_stdout_ends_the_session(18);
}

// ------------------------------------------------- several backends

/// Workers share one capture: when one worker's write fails (the busy
/// backend's trace fills the 64 KiB limit), it says so and the supervisor
/// stops the other workers (whose backend is idle, so they would
/// otherwise wait for --for); every backend is restored; exit 74.
fn worker_capture_error_stops_every_worker(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut busy = cl.connect();
    let mut idle = cl.connect();
    let (pb, pi) = (busy.pid(), idle.pid());
    let cap = temp(&format!("multi-{major}.jsonl"));
    let out = temp(&format!("multi-{major}.out"));
    let p = spawn_with_fsize(
        &[
            "attach",
            &pb.to_string(),
            &pi.to_string(),
            "-q",
            "--ex",
            "trace standard_ExecutorStart queryDesc->sourceText --for 40s",
            "--capture",
            cap.to_str().unwrap(),
        ],
        64 << 10,
        &out,
    );
    wait_until("both attached", Duration::from_secs(60), || {
        tracer_pid(pb) != 0 && tracer_pid(pi) != 0
    });
    wait_until("both traces armed", Duration::from_secs(60), || {
        std::fs::read_to_string(&out)
            .is_ok_and(|s| s.matches("trace: standard_ExecutorStart").count() == 2)
    });
    let t0 = Instant::now();
    let h = busy.spawn_text(LOOP);
    let (code, _, err) = p.wait(Duration::from_secs(90));
    let took = t0.elapsed();
    assert_eq!(code, OUTPUT_FAILED_EXIT, "stderr:\n{err}");
    let line = format!(
        "[{pb}] pgdbg: writing capture {} failed: File too large (os error 27); the backend was restored and detached",
        cap.display()
    );
    assert!(err.lines().any(|l| l == line), "no {line:?} in:\n{err}");
    assert!(took < Duration::from_secs(25), "stopped after {took:?}");
    assert!(busy.rejoin(h).is_ok());
    assert_restored(&cl, &mut busy, pb);
    assert_restored(&cl, &mut idle, pi);
    let _ = std::fs::remove_file(&cap);
    let _ = std::fs::remove_file(&out);
    cl.assert_no_crash();
}

#[test]
fn worker_capture_error_stops_every_worker_15() {
    worker_capture_error_stops_every_worker(15);
}

#[test]
fn worker_capture_error_stops_every_worker_18() {
    worker_capture_error_stops_every_worker(18);
}

// --------------------------------------------- open errors, file mode

/// A capture path that cannot be opened: one line naming it and the OS
/// reason, before anything is attached (one backend or several).
#[test]
fn unopenable_capture_names_the_os_reason() {
    let cl = Cluster::start_seeded(15);
    let mut c = cl.connect();
    let mut c2 = cl.connect();
    let (pid, pid2) = (c.pid().to_string(), c2.pid().to_string());
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    for (path, why) in [
        (dir, "Is a directory (os error 21)"),
        (
            "/nonexistent-pgdbg-dir/x.jsonl",
            "No such file or directory (os error 2)",
        ),
    ] {
        for pids in [vec![pid.as_str()], vec![pid.as_str(), pid2.as_str()]] {
            let mut args = vec!["attach"];
            args.extend(&pids);
            args.extend(["-q", "--ex", "wait", "--capture", path]);
            let (code, out, err) = pgdbg(&args);
            assert_ne!(code, 0, "{out}");
            assert_eq!(
                err,
                format!("pgdbg: error: cannot open capture file {path}: {why}\n"),
                "{pids:?}"
            );
        }
    }
    assert_eq!(tracer_pid(c.pid()), 0);
    assert_eq!(tracer_pid(c2.pid()), 0);
}

/// A capture file pgdbg creates is readable by its owner only; an
/// existing one keeps its mode.
#[test]
fn new_capture_file_is_0600() {
    let cl = Cluster::start_seeded(15);
    let mut c = cl.connect();
    let pid = c.pid().to_string();
    let cap = temp("mode.jsonl");
    // the usual umask, under which a default-mode file would be 0644
    // SAFETY: plain umask(2).
    unsafe { libc::umask(0o022) };
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid,
        "-q",
        "--ex",
        "wait",
        "--capture",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let mode = std::fs::metadata(&cap).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    assert_eq!(read_events(&cap, "wait_now").len(), 1);
    // the several-backends supervisor creates it too
    let _ = std::fs::remove_file(&cap);
    let mut c2 = cl.connect();
    let pid2 = c2.pid().to_string();
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid,
        &pid2,
        "-q",
        "--ex",
        "wait",
        "--capture",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let mode = std::fs::metadata(&cap).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    // an existing file: appended to, mode unchanged
    std::fs::set_permissions(&cap, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid,
        "-q",
        "--ex",
        "wait",
        "--capture",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let mode = std::fs::metadata(&cap).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "{mode:o}");
    assert_eq!(read_events(&cap, "wait_now").len(), 3);
    let _ = std::fs::remove_file(&cap);
}

// ------------------------------------------------------ a FIFO as capture

fn mkfifo(name: &str) -> PathBuf {
    let p = temp(name);
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: plain mkfifo(3) on a path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    p
}

/// A FIFO nobody reads: refused at once in one line, non-zero, before
/// anything is attached (one backend or several), instead of blocking
/// forever in open(2); with a reader, the events reach it.
fn capture_to_a_fifo(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut c = cl.connect();
    let mut c2 = cl.connect();
    let (pid, pid2) = (c.pid().to_string(), c2.pid().to_string());
    let fifo = mkfifo("fifo");
    let path = fifo.to_str().unwrap();
    for pids in [vec![pid.as_str()], vec![pid.as_str(), pid2.as_str()]] {
        let mut args = vec!["attach"];
        args.extend(&pids);
        args.extend(["-q", "--ex", "wait", "--capture", path]);
        let (code, out, err) = Pgdbg::spawn(&args).wait(Duration::from_secs(30));
        assert_ne!(code, 0, "{out}");
        assert_eq!(
            err,
            format!(
                "pgdbg: error: capture file {path} is a FIFO with no reader: start the reader first (e.g. cat {path} &)\n"
            ),
            "{pids:?}"
        );
        assert_eq!(tracer_pid(c.pid()), 0);
        assert_eq!(tracer_pid(c2.pid()), 0);
    }
    // with a reader (this test, opened before pgdbg starts: read-write, so
    // that it is there at once and never sees an end of file): the open
    // succeeds and the events arrive
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut rd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let p = Pgdbg::spawn(&["attach", &pid, "-q", "--ex", "wait", "--capture", path]);
    let mut got = Vec::new();
    let t0 = Instant::now();
    while !String::from_utf8_lossy(&got).contains(r#"{"event":"detach""#)
        && t0.elapsed() < Duration::from_secs(60)
    {
        let mut buf = [0u8; 4096];
        match rd.read(&mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let got = String::from_utf8_lossy(&got);
    assert!(got.contains(r#"{"event":"attach""#), "{got}");
    assert!(got.contains(r#"{"event":"detach""#), "{got}");
    assert_eq!(tracer_pid(c.pid()), 0);
    let _ = std::fs::remove_file(&fifo);
}

#[test]
fn capture_to_a_fifo_15() {
    capture_to_a_fifo(15);
}

#[test]
fn capture_to_a_fifo_18() {
    capture_to_a_fifo(18);
}
