//! What the kernel does with a tracee held in a job-control group stop when
//! its tracer dies (tests/fixtures/group_stop.c), the facts pgdbg's guardian
//! is built on: in each case (the tracer dies while the target runs, at an
//! unhandled int3 stop, during a single-step, during a call it injected)
//! the target ends in state T, untraced, and runs no user instruction until
//! someone seizes it; rip is one past an int3 whose stop was not handled,
//! on the instruction a single-step had not run yet, inside the injected
//! call; a call can be run to its return int3 with PTRACE_CONT while the
//! group stays stopped; after PTRACE_DETACH the target stays stopped until
//! SIGCONT, then finishes normally.

use common::*;
use pgdbg_testbed as common;

fn run(mode: &str) -> String {
    let out = std::process::Command::new(c_fixture("group_stop"))
        .arg(mode)
        .output()
        .expect("run the fixture");
    let so = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "group_stop {mode}: {}\n{so}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

fn has(out: &str, line: &str) -> bool {
    out.lines().any(|l| l == line)
}

#[test]
fn a_group_stopped_tracee_stops_when_its_tracer_dies() {
    for mode in ["run", "int3", "step", "call"] {
        let o = run(mode);
        assert!(has(&o, "state=T"), "{mode}: {o}");
        assert!(has(&o, "ran_after_stop=0"), "{mode}: {o}");
        assert!(has(&o, "seize_stop=event sig=19"), "{mode}: {o}");
        assert!(has(&o, "state_after_detach=T"), "{mode}: {o}");
        assert!(has(&o, "target_exit=status 0"), "{mode}: {o}");
        match mode {
            // the stop's SIGTRAP is gone: rip stays one past the int3
            "int3" => assert!(has(&o, "rip=int3+1"), "{o}"),
            // the step ran or not (a race with the tracer's death; when
            // it ran, its SIGTRAP may have reached the target's handler),
            // no trap flag is left behind either way
            "step" => assert!(
                has(&o, "rip=step_at+0 tf=0 trap_pending=0")
                    || o.lines().any(|l| l.starts_with("rip=step_at+1 tf=0")
                        || l.starts_with("rip=on_trap tf=0")),
                "{o}"
            ),
            "call" => {
                assert!(has(&o, "rip_in_call=1"), "{o}");
                assert!(has(&o, "returned=1 rax=42"), "{o}");
                assert!(has(&o, "runs_after_sigcont=1"), "{o}");
            }
            _ => assert!(has(&o, "runs_after_sigcont=1"), "{o}"),
        }
    }
}

fn run_release(mode: &str) -> String {
    let out = std::process::Command::new(c_fixture("pipe_release"))
        .arg(mode)
        .output()
        .expect("run the fixture");
    let so = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "pipe_release {mode}: {}\n{so}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

/// The kernel fact the backend's own release is built on
/// (src/inferior/selfrelease.rs): the last writer of a pipe going away
/// sends the read end's owner the signal set with F_SETSIG (SIGCONT here),
/// with si_code POLL_IN and si_fd the read end; it ends a job-control
/// stop, and a group stop a dead tracer left at an int3 (where the
/// handler sees rip one past the int3: the stop's SIGTRAP was dropped).
#[test]
fn the_last_writer_of_a_pipe_ends_the_stop_of_its_reader() {
    for mode in ["stopped", "int3"] {
        let o = run_release(mode);
        assert!(has(&o, "handler_ran=1"), "{mode}: {o}");
        assert!(has(&o, "si_code=POLL_IN"), "{mode}: {o}");
        assert!(has(&o, "si_fd_ok=1"), "{mode}: {o}");
        assert!(has(&o, "target_exit=status 0"), "{mode}: {o}");
        match mode {
            "stopped" => assert!(has(&o, "state=T"), "{o}"),
            _ => assert!(has(&o, "rip=int3+1"), "{o}"),
        }
    }
}
