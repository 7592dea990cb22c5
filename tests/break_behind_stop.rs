//! A breakpoint put on the instruction just behind the stop (a one-byte
//! `push` that has run, rip one past it), then pgdbg killed at that stop:
//! alone (its guardian restores the backend), or with its guardian (the
//! backend's own SIGCONT handler, or `pgdbg rescue`, restores it).  None
//! of them may take rip one past that int3 for its trap and rewind: the
//! `push` would run twice, the function would return to a wrong address
//! and the backend crash.  The statement must end with its right answer,
//! the code be the file's, the cluster not restart.

use common::ex::gdb;
use common::*;
use pgdbg_testbed as common;
use std::time::Duration;

const FUNCTION: &str = "standard_ExecutorStart";

/// The offset in `function` of its first one-byte `push %rbp` or `push
/// %rbx` whose next instruction starts one byte later, from gdb's
/// disassembly of the file.
fn one_byte_push(bin: &std::path::Path, function: &str) -> u64 {
    let out = gdb(bin, &[&format!("disassemble {function}")]);
    let offsets: Vec<(u64, String)> = out
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once("<+")?;
            let (off, insn) = rest.split_once(">:")?;
            Some((off.parse().ok()?, insn.trim().to_string()))
        })
        .collect();
    offsets
        .windows(2)
        .find(|w| {
            w[1].0 == w[0].0 + 1
                && w[0].1.starts_with("push")
                && (w[0].1.ends_with("%rbp") || w[0].1.ends_with("%rbx"))
        })
        .map(|w| w[0].0)
        .unwrap_or_else(|| panic!("no one-byte push in {function}:\n{out}"))
}

#[derive(Clone, Copy, PartialEq)]
enum Death {
    /// pgdbg alone: its guardian restores.
    Alone,
    /// pgdbg and its guardian: a SIGCONT lets the backend's handler restore.
    TogetherThenSigcont,
    /// pgdbg and its guardian: `pgdbg rescue` restores.
    TogetherThenRescue,
}

fn break_behind_the_stop(major: u32, death: Death) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let k = one_byte_push(&bin, FUNCTION);
    let mut a = cl.connect();
    let pid = a.pid();
    let want = a.query_one_i64("select count(*) from pg_class where relkind = 'r'");
    let after = format!("break *{FUNCTION}+{}", k + 1);
    let behind = format!("break *{FUNCTION}+{k}");
    let mut p = Pgdbg::spawn_attached_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            &after,
            "--ex",
            "continue",
            "--ex",
            &behind,
            "--ex",
            "info breakpoints",
        ],
        pid,
        &[("PGDBG_PAUSE_AT", "detach"), ("PGDBG_PAUSE_MS", "60000")],
    );
    wait_armed(pid, FUNCTION);
    let h = a.spawn_text("select count(*) from pg_class where relkind = 'r'");
    wait_for_stderr(&mut p, "paused at detach", Duration::from_secs(60));
    // stopped one past the push, with an int3 on it
    let g = guardians_of(pid);
    assert_eq!(g.len(), 1, "one guardian of {pid}: {g:?}");
    match death {
        Death::Alone => {
            // SAFETY: kill(2) of the pgdbg this test started.
            unsafe { libc::kill(p.pid(), libc::SIGKILL) };
        }
        Death::TogetherThenSigcont | Death::TogetherThenRescue => {
            // SAFETY: kill(2) of the guardian and the pgdbg this test started.
            unsafe {
                libc::kill(g[0], libc::SIGKILL);
                libc::kill(p.pid(), libc::SIGKILL);
            }
        }
    }
    wait_until(
        "pgdbg and its guardian to let go",
        Duration::from_secs(20),
        || tracer_pid(pid) == 0 && guardians_of(pid).is_empty(),
    );
    match death {
        Death::Alone => {}
        Death::TogetherThenSigcont => {
            // SAFETY: kill(2) of a backend of the test's own cluster.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
        }
        Death::TogetherThenRescue => {
            let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
            assert_eq!(code, 0, "rescue: {out}\n{err}");
        }
    }
    let r = a.rejoin(h);
    assert!(r.is_ok(), "the statement failed: {r:?}");
    assert_eq!(
        a.query_one_i64("select count(*) from pg_class where relkind = 'r'"),
        want
    );
    wait_until("the code to be the file's", Duration::from_secs(10), || {
        code_matches_file(pid, &bin, FUNCTION, 64)
    });
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    cl.assert_no_crash();
}

#[test]
fn break_behind_the_stop_guardian_15() {
    break_behind_the_stop(15, Death::Alone);
}

#[test]
fn break_behind_the_stop_sigcont_handler_15() {
    break_behind_the_stop(15, Death::TogetherThenSigcont);
}

#[test]
fn break_behind_the_stop_rescue_15() {
    break_behind_the_stop(15, Death::TogetherThenRescue);
}

#[test]
fn break_behind_the_stop_guardian_18() {
    break_behind_the_stop(18, Death::Alone);
}
