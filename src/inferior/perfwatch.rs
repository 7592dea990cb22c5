//! Watchpoints on a frame's locals as perf breakpoint events on the
//! backend's thread (`PERF_TYPE_BREAKPOINT`, a sample per access, `sigtrap`:
//! the kernel sends the thread a SIGTRAP with `si_code` TRAP_PERF and the
//! event's `sig_data` at each hit, which pgdbg takes as a watchpoint stop).
//!
//! Why not a debug register through ptrace, as for globals: a register
//! stays armed in the thread until it execs or exits, whatever happens to
//! pgdbg, and a local's stack word is reused by every frame once its frame
//! has returned, glibc's code that blocks every signal (`posix_spawn` for
//! `COPY ... PROGRAM`, `pthread_create`) included, where the kernel would
//! force the trap to its default action and kill the backend.  A perf
//! breakpoint lives as long as its file: pgdbg alone holds it (close-on-exec,
//! never passed to the guardian), so the kernel takes the breakpoint out of
//! the backend when pgdbg ends, SIGKILL included.  Its SIGTRAP is sent, not
//! forced (`send_sig_perf`): one the backend has blocked waits, it never
//! kills; one pending when pgdbg dies goes to pgdbg's SIGTRAP handler
//! (traphandler.rs), which lets it through, and the guardian removes that
//! handler only once pgdbg has exited (its files closed).
//!
//! Slots: the hits come back as `Stop::HardwareBreak` with bit `FIRST + k`
//! set for event `k`, beside the debug registers' DR6 bits 0-3.  The kernel
//! shares the thread's four breakpoint slots between these events and
//! ptrace's registers; one that ptrace has used stays reserved until the
//! thread exits, so an event may find none free (ENOSPC), said as such.
//! A hit during a single step is lost (its SIGTRAP coalesces with the
//! step's): the session compares the watched bytes after each step.

use super::{Target, procfs};
use anyhow::{Result, bail};
use std::os::fd::OwnedFd;

/// The stop bit of event 0.
pub const FIRST: usize = 32;
/// Events at most (the thread's breakpoint slots).
pub const MAX: usize = 4;

/// `si_code` of a SIGTRAP a perf event sent (include/uapi/asm-generic/
/// siginfo.h).
pub const TRAP_PERF: i32 = 6;
/// Where `si_perf_data` lies in a siginfo: `_sigfault`'s `si_addr` at 16,
/// then the union whose `_perf._data` comes first.
pub const SIGINFO_PERF_DATA: usize = 24;

/// A tag for `sig_data`: pgdbg's mark in the high bits, a generation in
/// bits 8-31, the event's index in the low ones (a SIGTRAP with another
/// sig_data is not an open event's).
const TAG: u64 = 0x7067_6462_0000_0000; // "pgdb"

impl Target {
    /// A perf breakpoint for `owner`, opened by `open` with the `sig_data`
    /// its traps are to carry (the perf room's `open_trap_watch` on this
    /// thread: this layer knows no perf events), kept here; its slot
    /// (`FIRST + k`).
    pub fn claim_perf_watch(
        &mut self,
        owner: &str,
        open: impl FnOnce(u64) -> Result<OwnedFd>,
    ) -> Result<usize> {
        let Some(k) = self.perf_watches.iter().position(Option::is_none) else {
            bail!("no hardware breakpoint left for {owner}: {MAX} in use by watchpoints on locals");
        };
        // under our SIGTRAP handler: a hit pending when pgdbg dies goes to
        // it (claim_watch says why)
        self.ensure_trap_handler();
        if self.guardian()?.is_some() && !self.trap.as_ref().is_some_and(|h| h.is_installed()) {
            bail!(
                "no SIGTRAP handler could be placed in the backend: a watchpoint's trap pending if pgdbg died would kill it"
            );
        }
        // a generation in bits 8-31: a late trap of a closed event is not
        // taken for the next one in its slot
        self.perf_generation = (self.perf_generation + 1) & 0xff_ffff;
        let sig_data = TAG | (self.perf_generation << 8) | k as u64;
        let fd = open(sig_data)?;
        self.perf_watches[k] = Some((owner.to_string(), fd, sig_data));
        Ok(FIRST + k)
    }

    /// Close the event in slot `slot` (`claim_perf_watch`): the kernel
    /// takes its breakpoint out.  A hit it sent meanwhile is drained while
    /// the backend is stopped (a SIGTRAP that is no longer anyone's).
    pub(super) fn release_perf_watch(&mut self, slot: usize) -> Result<()> {
        let Some(k) = slot.checked_sub(FIRST).filter(|k| *k < MAX) else {
            return Ok(());
        };
        if self.perf_watches[k].take().is_none() {
            return Ok(());
        }
        if self.perf_watches.iter().all(Option::is_none)
            && !self.state.is_gone()
            && self.state.is_stopped()
            && !self.debugregs_dirty
        {
            self.drain_sigtrap()?;
        }
        Ok(())
    }

    /// Every event closed (detach, the handler removed).
    pub(super) fn close_perf_watches(&mut self) -> Vec<String> {
        self.perf_watches
            .iter_mut()
            .filter_map(Option::take)
            .map(|(owner, _, _)| owner)
            .collect()
    }

    /// The event `sig_data` names, when it is one of ours still open: its
    /// stop bit.
    pub(super) fn perf_watch_bit(&self, sig_data: u64) -> Option<u64> {
        let k = (sig_data & 0xff) as usize;
        self.perf_watches
            .get(k)
            .and_then(Option::as_ref)
            .filter(|w| w.2 == sig_data)
            .map(|_| 1u64 << (FIRST + k))
    }

    /// Every watch slot armed now: debug registers (0-3) and open perf
    /// events (`FIRST + k`).
    pub fn armed_watch_slots(&self) -> Vec<usize> {
        let regs = self
            .watch_owners()
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_some())
            .map(|(s, _)| s);
        let perf = self
            .perf_watches
            .iter()
            .enumerate()
            .filter(|(_, w)| w.is_some())
            .map(|(k, _)| FIRST + k);
        regs.chain(perf).collect()
    }

    /// The owners of the open events, by slot.
    pub fn perf_watch_owners(&self) -> Vec<String> {
        self.perf_watches
            .iter()
            .flatten()
            .map(|(o, _, _)| o.clone())
            .collect()
    }
}

/// Whether the thread `pid`'s SIGTRAP is one a perf event sent: its
/// siginfo's `si_code` and `si_perf_data` (PTRACE_GETSIGINFO's 128 bytes).
pub(super) fn sigtrap_perf_data(pid: i32) -> Option<u64> {
    let mut buf = [0u8; 128];
    // SAFETY: the kernel writes a siginfo (128 bytes) into `buf`.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETSIGINFO,
            pid,
            0usize,
            buf.as_mut_ptr() as *mut libc::c_void,
        )
    };
    if r != 0 {
        return None;
    }
    let code = i32::from_le_bytes(buf[8..12].try_into().ok()?);
    (code == TRAP_PERF).then(|| {
        u64::from_le_bytes(
            buf[SIGINFO_PERF_DATA..SIGINFO_PERF_DATA + 8]
                .try_into()
                .expect("8 bytes"),
        )
    })
}

/// Whether process `pid` has ended with every thread: gone, or a zombie
/// with no thread left but its leader (whose own end, first, makes it a
/// zombie while other threads still hold its files).
pub fn ended(pid: i32) -> bool {
    matches!(procfs::state(pid), None | Some('Z' | 'X')) && !exiting(pid)
}

/// Whether process `pid` is ending: its leader a zombie, other threads
/// (and its files, perf events included) still there.
pub fn exiting(pid: i32) -> bool {
    matches!(procfs::state(pid), Some('Z' | 'X'))
        && std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|d| d.count() > 1)
}

/// How long a dying pgdbg's last threads are waited for (`wait_exit`):
/// each must be scheduled to end, which on a loaded machine takes tens of
/// milliseconds; a thread stuck longer (uninterruptible I/O) is taken as
/// alive.
pub const EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits, at most `EXIT_WAIT`, while process `pid` is `exiting`: its
/// files (perf breakpoints) close with its last thread.
pub fn wait_exit(pid: i32) {
    let t = std::time::Instant::now();
    while exiting(pid) && t.elapsed() < EXIT_WAIT {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
