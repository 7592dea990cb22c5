//! Fast tier: a small C program compiled here with gcc -O2 -g exercises the
//! debugger core in seconds (inlined functions, nested structs, a global
//! pointer to a global, a process sleeping in a syscall).  These complement
//! the PostgreSQL tests; they do not replace them.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Fixture {
    child: Child,
}

impl Fixture {
    fn start(mode: &str) -> Fixture {
        let mut child = Command::new(c_fixture("inline"))
            .arg(mode)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("ready"), "{line}");
        Fixture { child }
    }
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(pid: i32, lines: &[&str]) -> (i32, String, String) {
    let script = write_script(&format!("fx{}", lines.len()), lines);
    pgdbg(&[
        "attach",
        &pid.to_string(),
        "--any-process",
        "-q",
        "--script",
        script.to_str().unwrap(),
    ])
}

#[test]
fn inlined_function_has_all_its_locations() {
    let mut fx = Fixture::start("sleep");
    let (code, out, err) = run(
        fx.pid(),
        &[
            "break hot",
            "info breakpoints",
            "info address hot",
            "detach",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Breakpoint 1 at hot"), "{out}");
    assert!(out.contains("3 locations, 2 inlined"), "{out}");
    assert!(
        out.contains("(inlined into f1)") && out.contains("(inlined into f2)"),
        "{out}"
    );
    assert!(
        out.contains("is a function at address") && out.contains("inlined at 2 places"),
        "{out}"
    );
    assert!(fx.alive());
    assert_eq!(tracer_pid(fx.pid()), 0);
}

#[test]
fn structs_globals_and_pointers_print_like_gdb() {
    let mut fx = Fixture::start("sleep");
    let exprs = [
        "g_ptr->in.d",
        "g_ptr->pin->name",
        "g_ptr->flags",
        "g_ptr->more",
        "g_outer.arr[2]",
        "g_ptr->c",
        "g_ptr->label",
        "*g_ptr->pin",
        "g_ptr->tag * 2 + 1",
        "&g_outer == g_ptr",
        "g_outer.in",
        "*g_ptr",
        "(long) g_ptr->in.a",
        "sizeof(struct outer)",
        "g_ptr->arr",
    ];
    let mut lines: Vec<String> = exprs.iter().map(|e| format!("print {e}")).collect();
    lines.push("detach".into());
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    let (code, out, err) = run(fx.pid(), &refs);
    assert_eq!(code, 0, "{err}");
    let ours = print_values(&out);
    let expected_literal = [
        "0.125",
        "0x", // pointer + string, checked below
        "5",
        "17",
        "30",
        "BLUE",
        "\"lbl\", '\\000' <repeats 12 times>",
        "{a = 7, d = 2.5, name = 0x",
        "85",
        "1",
        "{a = -3, d = 0.125, name = 0x",
        "{tag = 42, in = {a = -3, d = 0.125, name = 0x",
        "-3",
        "",
        "{10, 20, 30, 40}",
    ];
    assert!(ours[1].ends_with("\"inner one\""), "{}", ours[1]);
    for (i, e) in exprs.iter().enumerate() {
        if i == 6 || i == 13 {
            continue; // compared with gdb below
        }
        assert!(
            ours[i].starts_with(expected_literal[i]),
            "print {e}: got {}, want {}...",
            ours[i],
            expected_literal[i]
        );
    }
    // gdb, when installed, prints exactly the same
    let mut gdb = Command::new("gdb");
    gdb.args(["-nx", "-batch", "-p", &fx.pid().to_string()]);
    for e in &exprs {
        gdb.args(["-ex", &format!("print {e}")]);
    }
    if let Ok(g) = gdb.output() {
        let theirs = print_values(&String::from_utf8_lossy(&g.stdout));
        if theirs.len() == exprs.len() {
            for (i, e) in exprs.iter().enumerate() {
                assert_eq!(ours[i], theirs[i], "print {e}: pgdbg vs gdb");
            }
        }
    }
    assert!(fx.alive());
}

#[test]
fn interrupt_in_syscall_backtrace_through_libc() {
    let mut fx = Fixture::start("sleep");
    // let it get from printing "ready" into its nanosleep loop
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = run(fx.pid(), &["bt", "frame 1", "info locals", "detach"]);
    assert_eq!(code, 0, "{err}");
    let bt: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    assert!(bt.len() >= 3, "{out}");
    let wf = bt
        .iter()
        .position(|l| l.contains("wait_forever"))
        .unwrap_or_else(|| panic!("no wait_forever frame:\n{out}"));
    assert!(
        wf >= 1,
        "libc frames come first (the process sleeps in nanosleep):\n{out}"
    );
    assert!(bt[wf].contains("inline.c:"), "{}", bt[wf]);
    assert!(bt.iter().skip(wf).any(|l| l.contains("main")), "{out}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(fx.alive(), "the fixture must survive attach/detach");
    assert_eq!(tracer_pid(fx.pid()), 0);
    assert!(!proc_state(fx.pid()).starts_with('t'));
}

#[test]
fn breakpoint_in_inlined_copy_shows_inline_frames_and_params() {
    let mut fx = Fixture::start("spin");
    let (code, out, err) = run(
        fx.pid(),
        &[
            "break f2",
            "continue",
            "print v",
            "delete",
            "break hot",
            "continue",
            "bt 3",
            "print x",
            "continue",
            "continue",
            "info breakpoints",
            "detach",
        ],
    );
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains("Breakpoint 1, f2 (v="), "{out}");
    // the hot() stops: inlined frames name their caller
    let bt: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    assert!(bt[0].starts_with("#0  hot (x="), "{out}");
    assert!(bt[0].contains("inline.c:"), "{out}");
    assert!(
        bt[1].contains(" f1 (") || bt[1].contains(" f2 (") || bt[1].contains(" main"),
        "{out}"
    );
    assert!(out.contains("breakpoint already hit 3 times"), "{out}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(fx.alive(), "the fixture keeps running after detach");
}

/// `break FILE:LINE` resolves through the line table (here a line inside
/// f2, whose code is partly the inlined hot()).
#[test]
fn break_file_line() {
    let src = std::fs::read_to_string(repo().join("tests/fixtures/inline.c")).unwrap();
    let line = src
        .lines()
        .position(|l| l.contains("return hot(v * 2) - 1;"))
        .unwrap()
        + 1;
    let mut fx = Fixture::start("spin");
    let spec = format!("break inline.c:{line}");
    let (code, out, err) = run(fx.pid(), &[&spec, "continue", "bt 2", "detach"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains(&format!("inline.c:{line}")), "{out}");
    assert!(out.contains("Breakpoint 1, "), "{out}");
    assert!(
        out.contains(" f2 ("),
        "the stop is in f2 (or hot inlined into it): {out}"
    );
    assert!(fx.alive());
    // a line without code and a file that does not exist are clear errors
    let (code, _, err) = run(fx.pid(), &["break nosuchfile.c:10"]);
    assert_ne!(code, 0);
    assert!(err.contains("no code at nosuchfile.c:10"), "{err}");
}

/// `stepi` over a `pushfq` pushes the backend's flags, not the trap flag
/// of the step (a later `popf` would set it in the process after pgdbg
/// let go): the word it pushed, popped into rax by the next instruction,
/// has TF (bit 8) clear; the process runs on.
#[test]
fn stepi_over_pushf_pushes_no_trap_flag() {
    let mut fx = Fixture::start("pushf");
    let (code, out, err) = run(
        fx.pid(),
        &[
            "break pushf_probe",
            "continue",
            "stepi",
            "stepi",
            "print/x $rax & 0x100",
            "print/x $rsp",
            "delete",
            "detach",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("$1 = 0x0\n"),
        "TF in the pushed word:\n{out}\n{err}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        fx.alive(),
        "the process died after the detach:\n{out}\n{err}"
    );
}

/// tests/fixtures/syscall_trailer.c in `mode`, pgdbg attached (a
/// breakpoint set: the SIGTRAP handler's set-up injects system calls) and
/// paused at `at`, then pgdbg and its guardian SIGKILLed together: the
/// process is not left stopped (a system call injected with its signal
/// frame, src/inferior/sigframe.rs, restores it by itself) and every
/// general register, xmm/ymm register and its signal mask are as before;
/// an interrupted `read` restarts (it returns the byte written after), an
/// interrupted `nanosleep` returns EINTR, as after a signal handler.
/// With PGDBG_NO_SYSCALL_TRAILER (the way before): left stopped, state T.
fn trailer_killed_at(mode: &str, at: &str) {
    let mut child = Command::new(c_fixture("syscall_trailer"))
        .arg(mode)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready"), "{line}");
    let wfd: i32 = line.rsplit("wfd=").next().unwrap().trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "--any-process",
            "-q",
            "--ex",
            "break never_called",
        ],
        pid,
        &[("PGDBG_PAUSE_AT", at), ("PGDBG_PAUSE_MS", "60000")],
    );
    // a deadline: the test fails, never hangs, if the pause never comes
    wait_for_stderr(&mut p, &format!("paused at {at} "), Duration::from_secs(90));
    let g = guardians_of(pid);
    assert_eq!(g.len(), 1, "one guardian: {g:?}");
    // SAFETY: kill(2) of the guardian and the pgdbg this test started.
    unsafe {
        libc::kill(g[0], libc::SIGKILL);
        libc::kill(p.child.id() as i32, libc::SIGKILL);
    }
    wait_until(
        "pgdbg and its guardian to end",
        Duration::from_secs(10),
        || tracer_pid(pid) == 0 && guardians_of(pid).is_empty(),
    );
    std::thread::sleep(Duration::from_secs(1));
    let state = proc_state(pid);
    let left_stopped = state.starts_with('T') || state.starts_with('t');
    if left_stopped {
        let _ = child.kill();
    }
    assert!(!left_stopped, "{mode} at {at}: left stopped ({state})");
    match mode {
        "read" => std::fs::write(format!("/proc/{pid}/fd/{wfd}"), b"x").unwrap(),
        "spin" => unsafe {
            libc::kill(pid, libc::SIGUSR1);
        },
        _ => {}
    }
    let mut res = String::new();
    out.read_line(&mut res).unwrap();
    let _ = child.wait();
    let want_ret = match mode {
        "read" => "ret=1 ",
        "sleep" => "ret=-4 ",
        _ => "ret=0 ",
    };
    assert!(
        res.contains(want_ret) && res.contains("regs=0 vec=ok mask=ok"),
        "{mode} killed at {at}: {res}"
    );
}

#[test]
fn trailer_spin_killed_before_the_injected_syscall() {
    trailer_killed_at("spin", "syscall-injected-1");
}

#[test]
fn trailer_spin_killed_at_the_exit_stop() {
    trailer_killed_at("spin", "syscall-exit-1");
}

#[test]
fn trailer_read_killed_at_the_exit_stop_restarts() {
    trailer_killed_at("read", "syscall-exit-1");
}

#[test]
fn trailer_sleep_killed_before_the_injected_syscall_eintr() {
    trailer_killed_at("sleep", "syscall-injected-1");
}
