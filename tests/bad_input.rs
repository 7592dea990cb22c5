//! Bad input: one clear line on stderr naming the problem and what to do, a
//! non-zero exit, and the target untouched.

use common::*;
use pgdbg_testbed as common;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The backend was never stopped or traced and still answers.
fn assert_untouched(c: &mut Client, pid: i32) {
    assert_eq!(tracer_pid(pid), 0);
    assert!(
        !proc_state(pid).starts_with('t'),
        "backend is in a tracing stop"
    );
    assert_eq!(c.pid(), pid);
}

#[test]
fn pid_missing_or_not_a_number_or_absent() {
    let (code, _, err) = pgdbg(&["attach"]);
    assert_one_line_error(code, &err, "needs the PID of a backend");
    let (code, _, err) = pgdbg(&["attach", "abc"]);
    assert_one_line_error(code, &err, "'abc' is not a PID");
    // a PID no process has
    let mut free = 4_000_000;
    while std::path::Path::new(&format!("/proc/{free}")).exists() {
        free -= 1;
    }
    let (code, _, err) = pgdbg(&["attach", &free.to_string()]);
    assert_one_line_error(code, &err, &format!("no process with PID {free}"));
    let (code, _, err) = pgdbg(&["attach", "12", "--no-such-flag"]);
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// PID 1 is no backend, whoever asks: as root (where a container may hide
/// even root's view of /proc/1/exe) the answer is not "run as root".
#[test]
fn pid_1_is_not_a_backend() {
    let (code, _, err) = pgdbg(&["attach", "1"]);
    assert_one_line_error(code, &err, "process 1 (");
    assert!(err.contains("is not a PostgreSQL process"), "{err}");
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(!err.contains("as root"), "root told to run as root: {err}");
    }
    assert_eq!(tracer_pid(1), 0);
}

/// The same PID twice: attached once, said in one line.
#[test]
fn same_pid_twice_is_attached_once() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let p = pid.to_string();
    let (code, out, err) = pgdbg(&["attach", &p, &p, "--ex", "print MyProcPid"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "pgdbg: PID {pid} is given more than once: attaching to it once"
        )),
        "{err}"
    );
    assert!(err.contains("running the script on 1 backend;"), "{err}");
    assert_eq!(
        out.matches(&format!("$1 = {pid}")).count(),
        1,
        "one worker: {out}"
    );
    assert_untouched(&mut a, pid);
    cl.assert_no_crash();
}

#[test]
fn not_postgres_and_postmaster_and_permission_and_traced() {
    // not a PostgreSQL process
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let spid = sleeper.id() as i32;
    let (code, _, err) = pgdbg(&["attach", &spid.to_string()]);
    assert_one_line_error(code, &err, "is not a PostgreSQL process");
    assert_eq!(tracer_pid(spid), 0);
    let _ = sleeper.kill();
    let _ = sleeper.wait();

    let cl = Cluster::start(15);
    // the postmaster
    let (code, _, err) = pgdbg(&["attach", &cl.postmaster_pid.to_string()]);
    assert_one_line_error(code, &err, "is the postmaster, not a backend");
    assert_eq!(tracer_pid(cl.postmaster_pid), 0);

    let mut a = cl.connect();
    let pid = a.pid();

    // no permission: an unprivileged user may not trace the server's backend
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(pgdbg_bin())
        .args(["attach", &pid.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_one_line_error(out.status.code().unwrap_or(-1), &err, "no permission");
    assert_untouched(&mut a, pid);

    // already traced by another debugger (a first pgdbg waiting at a breakpoint)
    let script = write_script("holder", &["break choose_custom_plan", "continue"]);
    let holder = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "--script",
        script.to_str().unwrap(),
    ]);
    wait_until("first pgdbg to attach", Duration::from_secs(30), || {
        tracer_pid(pid) != 0
    });
    let (code, _, err) = pgdbg(&["attach", &pid.to_string()]);
    assert_one_line_error(
        code,
        &err,
        &format!("already traced by PID {} (pgdbg)", holder.pid()),
    );
    unsafe {
        libc::kill(holder.pid(), libc::SIGTERM);
    }
    let (code, _, _) = holder.wait(Duration::from_secs(30));
    assert_eq!(code, 143);
    assert_untouched(&mut a, pid);
    cl.assert_no_crash();
}

#[test]
fn script_errors_are_reported_before_attaching() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let cases: &[(&[&str], &str)] = &[
        (
            &["break nosuchfunction"],
            ":1: no function \"nosuchfunction\"",
        ),
        (
            &["# comment", "brk choose_custom_plan"],
            ":2: unknown command 'brk'",
        ),
        (
            &["break choose_custom_plan", "continue", "print plansource->"],
            ":3: expected a field name",
        ),
        (
            &["print (", "continue"],
            ":1: unexpected 'end of expression'",
        ),
        (&["frame x"], ":1: frame takes a number"),
        (
            &["break choose_custom_plann"],
            "did you mean choose_custom_plan?",
        ),
    ];
    for (i, (lines, needle)) in cases.iter().enumerate() {
        let script = write_script(&format!("bad{i}"), lines);
        let (code, out, err) = pgdbg(&[
            "attach",
            &pid.to_string(),
            "--script",
            script.to_str().unwrap(),
        ]);
        assert_one_line_error(code, &err, needle);
        assert!(
            err.contains(script.to_str().unwrap()),
            "the error names the file: {err}"
        );
        assert!(out.is_empty(), "{out}");
        assert_untouched(&mut a, pid);
    }
    // a missing script file
    let (code, _, err) = pgdbg(&["attach", &pid.to_string(), "--script", "/nonexistent/x.gdb"]);
    assert_one_line_error(code, &err, "cannot read script /nonexistent/x.gdb");
    assert_untouched(&mut a, pid);
}

/// A runtime error in a script (an unknown variable at the stop) names the
/// line, stops the script, and detaches cleanly.
#[test]
fn runtime_error_in_script_detaches() {
    let cl = Cluster::start(15);
    cl.seed(&["mediumtab"]);
    let mut a = session_after_six(&cl);
    let pid = a.pid();
    let script = write_script(
        "runtime",
        &[
            "break choose_custom_plan",
            "continue",
            "print no_such_variable",
            "print 1",
        ],
    );
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "--script",
            script.to_str().unwrap(),
        ],
        pid,
    );
    let h = a.spawn_text("execute s1(10,30)");
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_ne!(code, 0);
    assert!(
        err.contains(":3: no symbol \"no_such_variable\" in the current context"),
        "{err}"
    );
    assert!(
        !out.contains("$1 = 1"),
        "the script must stop at the error: {out}"
    );
    a.rejoin(h)
        .expect("the statement completes after the error");
    assert_untouched(&mut a, pid);
    cl.assert_no_crash();
}

/// A postgres binary without debug info (a stripped copy of the 15 build,
/// running a real cluster): a one-line error naming the build-id and the
/// fix; with --debug-file pointing at the unstripped binary it works.
#[test]
fn no_debug_info_names_build_id_and_fix() {
    let mut cl = Cluster::start(15);
    let prefix = pg_prefix(15);
    // restart the cluster's server from a stripped (--strip-debug) copy
    let root = std::env::temp_dir().join(format!("pgdbg-stripped-{}", std::process::id()));
    let stripped = cl.restart_from_stripped_copy(&prefix, &root, "--strip-debug");
    let mut a = cl.connect();
    let pid = a.pid();
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(),
        stripped
    );
    // Without layout packs (PGDBG_NO_PACKS=1; with them pgdbg would fall
    // back to the 15 pack, see tests/stripped.rs):
    let out = Command::new(pgdbg_bin())
        .args(["attach", &pid.to_string()])
        .env("PGDBG_NO_PACKS", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (code, err) = (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_one_line_error(code, &err, "no debug info for");
    assert!(err.contains("build-id "), "{err}");
    assert!(err.contains("--debug-file"), "{err}");
    assert_untouched(&mut a, pid);

    // The fix the message names works.
    let script = write_script("debugfile", &["print MyProcPid", "info", "detach"]);
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "--debug-file",
        prefix.join("bin/postgres").to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("$1 = {pid}")), "{out}");
    assert!(out.contains("(--debug-file)"), "{out}");
    assert_untouched(&mut a, pid);

    // A debug file of another build is refused.
    let other = pg_prefix(18).join("bin/postgres");
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "--debug-file",
        other.to_str().unwrap(),
    ]);
    assert_one_line_error(code, &err, "is for build-id");
    assert_untouched(&mut a, pid);
    drop(a);
    // stop the server while the stripped binary still exists
    cl.stop_stripped();
    let _ = std::fs::remove_dir_all(&root);
}

/// pgdbg at the prompt with `lines` on its standard input (a pipe), then
/// `detach`: (exit status, stdout, stderr).
fn at_prompt(pid: i32, lines: &[&str]) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(pgdbg_bin())
        .args(["attach", &pid.to_string(), "-q"])
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    for l in lines.iter().chain(&["detach"]) {
        writeln!(input, "{l}").unwrap();
    }
    drop(input);
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(60), "pgdbg did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An option given twice (`--for 2s --for 5s` took the last value in
/// silence), control characters in what an error quotes (written raw,
/// they drive the terminal), and `break LIB:FUNC` with a library that does
/// not exist (said "no function ... in a library"): one line each, from
/// the command line, a script and the prompt, the backend untouched by
/// the refused ones.
fn small_input_errors(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let p = pid.to_string();
    let cases: &[(&str, &str)] = &[
        (
            "count standard_ExecutorStart --for 2s --for 5s",
            "count: option --for given twice: give it once",
        ),
        (
            "waits trace --for 1s --stacks 2 --stacks=3",
            "waits trace: option --stacks given twice",
        ),
        ("brk\x1b[2J", "unknown command 'brk\\x1b[2J'"),
        ("print My\x1b[31mProcPid", "unexpected character '\\x1b'"),
        (
            "break no\x07such\x1b[0m",
            "bad location 'no\\x07such\\x1b[0m'",
        ),
        (
            "trace standard_ExecutorStart --for 2\x1bs",
            "bad duration '2\\x1bs'",
        ),
        (
            "break nolib:f",
            "no library \"nolib\" in this server's installation (",
        ),
    ];
    for (i, (cmd, needle)) in cases.iter().enumerate() {
        let (code, out, err) = pgdbg(&["attach", &p, "--ex", cmd]);
        assert_one_line_error(code, &err, needle);
        assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
        assert!(out.is_empty(), "{out}");
        assert_untouched(&mut a, pid);
        let script = write_script(&format!("small{i}"), &[cmd]);
        let (code, _, err) = pgdbg(&["attach", &p, "--script", script.to_str().unwrap()]);
        assert_one_line_error(code, &err, &format!(":1: {needle}"));
        assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
        assert_untouched(&mut a, pid);
    }
    // at the prompt: each error one line on stdout, the session goes on
    let (code, out, err) = at_prompt(
        pid,
        &[
            "count standard_ExecutorStart --for 2s --for 5s",
            "brk\x1b[2J",
            "print My\x1b[31mProcPid",
            "break nolib:f",
        ],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(!out.contains('\x1b') && !err.contains('\x1b'), "{out:?}");
    for needle in [
        "count: option --for given twice: give it once".to_string(),
        "unknown command 'brk\\x1b[2J'".to_string(),
        "unexpected character '\\x1b'".to_string(),
        format!("no library \"nolib\" is loaded in backend {pid} (it has loaded: "),
    ] {
        assert!(out.contains(&needle), "{needle} not in:\n{out}");
    }
    assert_untouched(&mut a, pid);
    cl.assert_no_crash();
}

#[test]
fn small_input_errors_15() {
    small_input_errors(15);
}

#[test]
fn small_input_errors_18() {
    small_input_errors(18);
}

/// A zombie (a process that exited, its parent not reaping it) named
/// postgres: said to have exited, not blamed on ptrace permissions.
#[test]
fn zombie_is_said_to_have_exited() {
    let dir = std::env::temp_dir().join(format!("pgdbg-zombie-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // a process whose name is postgres: a copy of sleep(1) by that name
    let fake = dir.join("postgres");
    std::fs::copy("/bin/sleep", &fake).unwrap();
    // the shell starts `postgres 0` and becomes `sleep 60`, which never
    // reaps it
    let mut parent = Command::new("sh")
        .arg("-c")
        .arg(format!("{} 0 & exec sleep 60", fake.display()))
        .spawn()
        .unwrap();
    let ppid = parent.id() as i32;
    let mut zombie = 0;
    wait_until("the zombie", Duration::from_secs(30), || {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(st) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
                continue;
            };
            if st.contains("(postgres) Z") && st.contains(&format!(" Z {ppid} ")) {
                zombie = p;
                return true;
            }
        }
        false
    });
    let (code, _, err) = pgdbg(&["attach", &zombie.to_string()]);
    let _ = parent.kill();
    let _ = parent.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_one_line_error(
        code,
        &err,
        &format!("process {zombie} (postgres) has exited (a zombie"),
    );
    assert!(!err.contains("ptrace is restricted"), "{err}");
}

/// A process named postgres (a copy of the fixture `inline` by that
/// name, `exec` mode), and pgdbg attaching to it paused after its checks
/// and the load of its debug info, before the seize (PGDBG_PAUSE_AT=seize);
/// `change` acts on the process meanwhile; pgdbg's exit status and
/// standard error once it has ended.
fn changed_before_the_seize(
    key: &str,
    change: impl FnOnce(&mut std::process::Child),
) -> (i32, i32, String) {
    use std::io::{BufRead, BufReader, Read};
    let dir = std::env::temp_dir().join(format!("pgdbg-{key}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("postgres");
    std::fs::copy(c_fixture("inline"), &fake).unwrap();
    let mut child = Command::new(&fake)
        .arg("exec")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert!(ready.starts_with("ready"), "{ready}");
    let pid = child.id() as i32;
    let mut p = Pgdbg::spawn_env(
        &["attach", &pid.to_string(), "--any-process", "--ex", "info"],
        &[("PGDBG_PAUSE_AT", "seize"), ("PGDBG_PAUSE_MS", "3000")],
    );
    let mut err = stderr_reader(&mut p);
    let mut text = read_until(&mut err, "paused at seize", Duration::from_secs(60));
    change(&mut child);
    err.read_to_string(&mut text).unwrap();
    let code = p.wait(Duration::from_secs(60)).0;
    assert_eq!(tracer_pid(pid), 0, "process {pid} left traced");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    (pid, code, text)
}

/// The last line of pgdbg's standard error is its error, with `needle`.
fn assert_last_error(code: i32, err: &str, needle: &str) {
    assert_ne!(code, 0, "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("pgdbg: error: ") && last.contains(needle),
        "expected '{needle}' in the last line of:\n{err}"
    );
}

/// A process that runs another program (execs sleep) after pgdbg read its
/// exe and debug info: pgdbg says so and leaves it untraced, not attached
/// to a program it did not check.
#[test]
fn exec_before_the_seize_is_said() {
    let (pid, code, err) = changed_before_the_seize("exec", |child| {
        use std::io::Write;
        child.stdin.as_mut().unwrap().write_all(b"x").unwrap();
        let pid = child.id();
        wait_until("the exec", Duration::from_secs(30), || {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() == "sleep\n"
        });
    });
    assert_last_error(
        code,
        &err,
        &format!(
            "process {pid} (postgres) started another program (sleep) while pgdbg was attaching"
        ),
    );
}

/// A process that exits (a zombie: the test, its parent, does not reap
/// it) after pgdbg read its exe and debug info: the seize's EPERM is said
/// to be its end, not a security module's refusal.
#[test]
fn zombie_at_the_seize_is_said_to_have_exited() {
    let (pid, code, err) = changed_before_the_seize("zombie-seize", |child| {
        // SAFETY: plain kill(2) of our own child, left unreaped
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let pid = child.id() as i32;
        wait_until("the zombie", Duration::from_secs(30), || {
            proc_state(pid).starts_with('Z')
        });
    });
    assert_last_error(
        code,
        &err,
        &format!("process {pid} (postgres) has exited (a zombie"),
    );
    assert!(!err.contains("security module"), "{err}");
}

/// The PID of a backend that has exited: said in one line.
#[test]
fn backend_that_exited() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let pid = c.pid();
    drop(c);
    wait_until("the backend's exit", Duration::from_secs(30), || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    let (code, _, err) = pgdbg(&["attach", &pid.to_string()]);
    assert_one_line_error(code, &err, &format!("no process with PID {pid}"));
}
