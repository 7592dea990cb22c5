//! A backend attached at its fork (forks.rs) is let run until it is
//! ready for its first command: its state (MyProc, the wait-event word,
//! the database) exists only from there, and a script armed before
//! would read the postmaster's.  An execute breakpoint in a debug
//! register at `ReadyForQuery` (nothing written into its code), cleared
//! at the first hit: the backend is stopped there, before it reads the
//! client's first statement.  Killed together with its guardian
//! meanwhile, this worker leaves the debug register armed: the backend
//! releases itself and each hit passes through our SIGTRAP handler until
//! `pgdbg rescue` (docs/safety.md).

use crate::arch::debugregs;
use crate::debuginfo::DebugInfo;
use crate::inferior::{Stop, Target};
use anyhow::{Result, anyhow};

/// `until`: the end of `--for`, if any (the run ends there too).
pub fn run_to_first_command(
    t: &mut Target,
    di: &DebugInfo,
    pid: i32,
    until: Option<std::time::Instant>,
) -> Result<()> {
    let bias = super::modules::compute_bias(pid, di)?;
    let addr = super::locations::resolve_location(di, bias, "ReadyForQuery")?
        .first()
        .map(|l| l.addr)
        .ok_or_else(|| anyhow!("ReadyForQuery not found in the debug info"))?;
    if crate::runtime::must_stop() {
        return Err(anyhow!("stopped before its first command"));
    }
    // bounded: the server's default authentication_timeout (60 s) and a
    // margin, or the end of --for if sooner; a client that never
    // authenticates is let go then
    let mut bound = std::time::Duration::from_secs(65);
    if let Some(u) = until {
        bound = bound.min(u.saturating_duration_since(std::time::Instant::now()));
    }
    if bound.is_zero() {
        return Err(anyhow!("--for ended before its first command"));
    }
    let _deadline = crate::runtime::Deadline::arm(bound);
    t.set_debugreg(0, addr)?;
    let dr7 = debugregs::dr7_with(0, 0, debugregs::Kind::Execute, 1).map_err(|e| anyhow!(e))?;
    t.set_debugreg(debugregs::DR7, dr7)?;
    let r = loop {
        if t.is_gone() {
            break Err(anyhow!("backend {pid} ended before its first command"));
        }
        t.resume()?;
        match t.wait(&crate::runtime::Hooks)? {
            Stop::HardwareBreak { dr6 } if dr6 & 1 != 0 => break Ok(()),
            Stop::Exited(_) | Stop::Killed(_) => {
                break Err(anyhow!("backend {pid} ended before its first command"));
            }
            Stop::ToolTerminating => break Err(anyhow!("stopped before its first command")),
            Stop::Interrupted
                if crate::runtime::must_stop()
                    || crate::runtime::sigint_seen()
                    || crate::runtime::deadline_hit() =>
            {
                break Err(anyhow!("stopped before its first command"));
            }
            _ => {}
        }
    };
    if !t.is_gone() {
        t.set_debugreg(debugregs::DR7, 0)?;
        t.set_debugreg(0, 0)?;
    }
    r
}
