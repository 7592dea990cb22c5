//! The backend ends its own stop when every pgdbg process is gone.
//!
//! pgdbg holds the backend in a group stop (hold.rs) and the guardian ends
//! it when pgdbg dies; with pgdbg and its guardian killed together nothing
//! would.  So, once the SIGTRAP handler's pages exist (traphandler.rs), the
//! backend gets the read end of a pipe whose only writers are pgdbg and its
//! guardian, with `O_ASYNC`, `F_SETOWN` = the backend and `F_SETSIG` =
//! SIGCONT.  Nobody writes into it.  When the last writer's file is
//! released (every pgdbg process dead, whatever killed it), the kernel's
//! `pipe_release` sends the owner SIGCONT (`si_code` POLL_IN, `si_fd` the
//! read end): the group stop ends at once (tests/fixtures/pipe_release.c,
//! a delay of well under a millisecond), tracer or not.
//!
//! Set up with injected system calls: `pipe2` in the backend, its write end
//! copied into pgdbg (`pidfd_getfd`, close-on-exec) and into the guardian
//! (which takes it from the backend the same way when pgdbg asks it to),
//! the backend's own write end closed, then `fcntl` × 3 on the read end,
//! `F_SETFL` last.  Both ends are recorded in the guardian's table first.
//!
//! The SIGCONT handler (raw code in the handler's code page, every signal
//! but SIGTRAP blocked while it runs: signals.rs
//! `BLOCKED_IN_HANDLERS`), installed only where the backend's SIGCONT
//! action is the default one (PostgreSQL installs none), the action found
//! kept in the data page and put back at detach.  It acts only on our
//! pipe's signal (`si_code` POLL_IN, `si_fd` ours); then, in the
//! interrupted context:
//! * `rip - 1` one of our int3s (the table, the return or error traps of a
//!   call record), its byte still 0xcc, and (`rip`, `rsp`) not where pgdbg
//!   resumed the backend on purpose (recorded here before such a resume):
//!   a trap pgdbg had not rewound (the kernel dropped its SIGTRAP).  `rip`
//!   goes back onto the int3, which traps again, untraced, into the SIGTRAP
//!   handler (it restores the byte, or repairs a call);
//! * data words changed around calls (callrepair.rs) with no call record
//!   and the registers the backend's own (`NOT_OWN` 0, `rsp` the one the
//!   series saved: before its first call's registers are written; or the
//!   entry of another handler of the backend's whose frame holds that
//!   `rsp` and the saved `rip`: a lower-numbered signal that came while
//!   it was held, delivered just before this one): it puts them back from
//!   their slots (before that handler runs), empties the slots, and the
//!   backend runs on as below; a call running or at its return trap puts them back at
//!   that trap, and one the SIGTRAP handler has repaired (its trap may be
//!   taken before the SIGCONT) did; slots found with another `rsp` (left
//!   over where a restore failed) stop it again;
//! * a call's registers being written or put back (`NOT_OWN` bit 0, no
//!   mark yet or any more: `rsp` the call's return slot or just above it,
//!   or the saved registers' own), or a call record whose call neither
//!   runs nor is at its return trap with the saved registers' own `rsp`:
//!   it runs the SIGTRAP handler's call repair (callrepair.rs) on this
//!   context, as at the call's return trap (the saved registers and XSAVE
//!   image, the data words, the call's int3s put back; `MARK` REPAIRED),
//!   and the backend runs on as below from where pgdbg had stopped it;
//! * `rip` in a system call injected with its signal frame (the trailer's
//!   eight bytes at AT_ENTRY, sigframe.rs; `NOT_OWN` 0, as pgdbg leaves
//!   bit 1 clear for it when no other bit is set): it runs on as below,
//!   and the trailer's `rt_sigreturn` puts the backend's context back.
//!   Only where the call's signal mask is not in place (pgdbg died
//!   between the registers and PTRACE_SETSIGMASK, or the mask could not
//!   be set): while the call runs SIGCONT is blocked (detour.rs,
//!   `BLOCKED_FOR_A_CALL`), so the handler runs after the `rt_sigreturn`,
//!   in the backend's own context (the last case below);
//! * `rip` in an injected system call's code at AT_ENTRY, registers not
//!   the backend's own other than a call's (`NOT_OWN`: a system call, a
//!   record of data words that is not whole, a call record that cannot
//!   repair), or a call's context that is none of the above (another
//!   handler's frame delivered first): it stops the backend again
//!   (SIGSTOP to itself), the state it was left in before (`pgdbg rescue`
//!   repairs it);
//! * anything else: it returns and the backend runs on, with the signals
//!   pgdbg held back for it (`SIGS`: during a call series or at an event
//!   stop) sent
//!   to itself first, SIGCONT and the stop signals left out: a
//!   `statement_timeout`'s SIGALRM still fires.  PostgreSQL's handlers set
//!   flags (and a latch), and a call in flight has interrupts held off
//!   (`InterruptHoldoffCount`) until its repair puts the counter back.  A
//!   stop it makes again keeps `SIGS` for `pgdbg rescue`.
//!
//! While pgdbg or the guardian traces the backend the pipe has a writer,
//! so no such signal comes; anyone else's SIGCONT they see is not
//! delivered to the handler (its effect, ending the stop, happened when it
//! was sent; with the default action it is discarded the same).  Every
//! detach closes the read end first, before the action and the pages go.

use super::Target;
use anyhow::{Result, anyhow, bail};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
mod handler;
mod install;
pub use handler::{emit, holds_our_code};

/// Where the SIGCONT handler's code starts in the code page (after the
/// SIGTRAP handler's restorer).
pub const CODE: u64 = 0x440;
/// In the data page (offsets from the mapping's base, the data page being
/// its second page): our read end's descriptor + 1 (0: none).
pub(super) const FD: u64 = 4096 + 0x800;
/// Where pgdbg last resumed the backend one past an int3 of ours on
/// purpose: rip, rsp (rip 0: none).
pub(super) const RES_RIP: u64 = 4096 + 0x808;
pub(super) const RES_RSP: u64 = 4096 + 0x810;
/// The SIGCONT action found at install (kernel sigaction, 4 words).
const OLD: u64 = 4096 + 0x818;
/// Scratch: pipe2's two descriptors; then a sigaction to install.
const PIPE: u64 = 4096 + 0x840;
const ACT: u64 = 4096 + 0x848;
/// How often the handler let the backend run on (0: never): the records
/// of pgdbg's guardian are old then, never replayed (guardian.rs).
pub(super) const RELEASED: u64 = 4096 + 0x868;
/// Nonzero while the registers (or the xstate) are not the backend's own:
/// bit 0 a call of pgdbg's (set before its registers are first written,
/// cleared once the saved ones are back), bit 1 an injected system call
/// (written before the guardian's record of it, cleared after it).  Bit 2:
/// the data words a call series changes are not all in the SIGTRAP
/// handler's slots (callrepair.rs): none is put back by a handler.  Bit
/// 3: the call's record cannot repair it (not written whole).
pub(super) const NOT_OWN: u64 = 4096 + 0x870;
/// The signals pgdbg holds back for the backend (bit N-1 for signal N),
/// as the guardian's record has them: the handler sends them before it
/// lets the backend run on, and empties the word.
pub(super) const SIGS: u64 = 4096 + 0x878;
pub(super) const END: u64 = SIGS + 8;
const _: () = assert!(ACT + 32 <= RELEASED && END <= 2 * 4096);

const POLL_IN: i32 = 1;
/// Signals the handler never sends from `SIGS` (bit N-1 for signal N).
const NOT_SENT: u64 = 1 << (libc::SIGCONT - 1)
    | 1 << (libc::SIGSTOP - 1)
    | 1 << (libc::SIGTSTP - 1)
    | 1 << (libc::SIGTTIN - 1)
    | 1 << (libc::SIGTTOU - 1);
/// fcntl's F_SETSIG (include/uapi/asm-generic/fcntl.h; not in the libc crate).
const F_SETSIG: i32 = 10;
/// `siginfo_t`: `si_code` (int) at 8 (after `si_signo`, `si_errno`); for
/// SIGPOLL `si_band` (long) at 16, `si_fd` (int) at 24.
const SIGINFO_CODE: i32 = 8;
const SIGINFO_FD: i32 = 24;
/// Another handler's frame below the saved registers' rsp (`putback`):
/// at least its return address and ucontext up to `rip` (8 + `uc_rip` +
/// 8 bytes, `nest_min`; a real one is over a kilobyte, and the red zone's
/// 128 bytes come first), at most 64 KiB below it.
const NEST_MAX: i32 = 64 * 1024;
fn nest_min(l: &Layout) -> u32 {
    8 + l.uc_rip + 8
}

/// Words of the SIGTRAP handler's mapping the SIGCONT handler reads, as
/// offsets from its base (traphandler.rs and callrepair.rs own them).
pub struct Layout {
    /// The address of the table's active half.
    pub sel: u64,
    /// AT_ENTRY, where injected system calls run.
    pub entry: u64,
    /// Entries in a half of the table (each: address in bits 0-47).
    pub cap: u32,
    /// A call's record: its return address (> 1: in flight), its
    /// return-address slot, its error traps (zero-ended), its data words
    /// (slots of 3 words, the first nonzero when used).
    pub mark: u64,
    pub sp: u64,
    pub int3s: u64,
    pub dataw: u64,
    pub data_slots: u32,
    /// `ucontext_t` offsets of rip and rsp.
    pub uc_rip: u32,
    pub uc_rsp: u32,
    /// The call record's saved `rsp` and `rip` (the backend's own before
    /// the call, `rip` as it resumes: see `callrepair::as_resumed`).
    pub gregs_rsp: u64,
    pub gregs_rip: u64,
    /// The SIGTRAP handler's call repair, from the base: entered with r11
    /// = base + 4096 and rdx = the ucontext, it puts the data words, the
    /// saved registers and XSAVE image (into the context) and the call's
    /// int3s back, `MARK` = REPAIRED, and returns (callrepair.rs).
    pub repair: u64,
    /// The SIGTRAP handler's restorer (`rt_sigreturn`), shared.
    pub restorer: u64,
}

/// The pipe and the SIGCONT action set up in a backend.
#[derive(Debug, Clone, Default)]
pub struct Release {
    /// The read end in the backend (armed once `F_SETFL` succeeded).
    pub rfd: Option<i32>,
    /// The backend's own write end, until it is closed.
    pub wfd: Option<i32>,
    /// Our SIGCONT action is (or may be) in place; the old one is in the
    /// data page.
    pub action: bool,
    /// pgdbg's own write end (None in the guardian and `pgdbg rescue`).
    pub mine: Option<Arc<OwnedFd>>,
    /// A resume point is written in the data page (not all zeros).
    resume_set: bool,
    /// What `NOT_OWN` and `SIGS` hold now (written when they change;
    /// `u64::MAX`: not known, the page is read).
    not_own: u64,
    sigs: u64,
    /// The read end no longer signals (a word above could not be
    /// written): the words do not matter any more.
    disarmed: bool,
    /// That is being done (an injected `fcntl`).
    disarming: bool,
}

impl Release {
    /// The read end is being disarmed (its own injected `fcntl`).
    pub fn disarming(&self) -> bool {
        self.disarming
    }

    /// The record's word (guardian.rs): read end + 1, write end + 1 << 32,
    /// bit 63 the action.
    pub fn word(&self) -> u64 {
        let f = |x: Option<i32>| x.map(|v| v as u64 + 1).unwrap_or(0) & 0x7fff_ffff;
        f(self.rfd) | f(self.wfd) << 32 | (self.action as u64) << 63
    }

    pub fn from_word(w: u64) -> Option<Release> {
        let f = |x: u64| (x != 0).then(|| (x - 1) as i32);
        let r = Release {
            rfd: f(w & 0x7fff_ffff),
            wfd: f((w >> 32) & 0x7fff_ffff),
            action: w >> 63 != 0,
            mine: None,
            resume_set: true,
            not_own: u64::MAX,
            sigs: u64::MAX,
            disarmed: false,
            disarming: false,
        };
        (r.rfd.is_some() || r.wfd.is_some() || r.action).then_some(r)
    }
}

fn pidfd_getfd(pid: i32, fd: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) / pidfd_getfd(2); each fd is owned at once.
    unsafe {
        let p = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        if p < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let pidfd = OwnedFd::from_raw_fd(p as i32);
        let f = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
        if f < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(f as i32))
    }
}

/// The write end `fd` of backend `pid`, copied into this process (the
/// guardian's side of the hand-over).
pub fn take_write_end(pid: i32, fd: i32) -> std::io::Result<OwnedFd> {
    pidfd_getfd(pid, fd)
}

impl Target {
    fn release_base(&self) -> Option<u64> {
        self.trap.as_ref().map(|h| h.base)
    }

    fn note_release(&mut self) {
        let w = self
            .trap
            .as_ref()
            .and_then(|h| h.release.as_ref())
            .map(|r| r.word())
            .unwrap_or(0);
        if let Some(g) = &mut self.guardian {
            g.note_release(w);
        }
    }

    fn set_release(&mut self, f: impl FnOnce(&mut Release)) {
        if let Some(h) = &mut self.trap {
            f(h.release.get_or_insert_with(Release::default));
        }
        self.note_release();
    }

    /// Whether our SIGCONT handler may be in place: a SIGCONT seen while
    /// tracing is not delivered (module comment).
    pub(super) fn sigcont_to_handler(&self) -> bool {
        self.trap
            .as_ref()
            .and_then(|h| h.release.as_ref())
            .is_some_and(|r| r.action)
    }

    /// pgdbg resumes the backend at `rip` with `rsp`, one past an int3 of
    /// its own, on purpose (hold.rs): the handler must not rewind there.
    /// `rip` 0: no such resume holds any more.
    /// An error: the handler may act on the point before (the caller
    /// does not resume there).
    pub(super) fn note_release_resume(&mut self, rip: u64, rsp: u64) -> Result<()> {
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        let base = h.base;
        let Some(r) = &mut h.release else {
            return Ok(());
        };
        if r.disarmed || (rip == 0 && !r.resume_set) {
            return Ok(());
        }
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&rip.to_le_bytes());
        b[8..].copy_from_slice(&rsp.to_le_bytes());
        self.write(base + RES_RIP, &b)
            .map_err(|e| anyhow!("resume point not written for the SIGCONT handler: {e:#}"))?;
        if let Some(r) = self.trap.as_mut().and_then(|h| h.release.as_mut()) {
            r.resume_set = rip != 0;
        }
        Ok(())
    }

    /// A word of the data page the handler reads, written when it
    /// changes; what is known of it follows only a write that succeeded
    /// (a failed one is tried again at the next change).
    fn note_release_word(
        &mut self,
        at: u64,
        v: u64,
        old: fn(&mut Release) -> &mut u64,
    ) -> Result<()> {
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        let base = h.base;
        let Some(r) = &mut h.release else {
            return Ok(());
        };
        if r.disarmed || *old(r) == v {
            return Ok(());
        }
        self.write(base + at, &v.to_le_bytes())
            .map_err(|e| anyhow!("a word of the SIGCONT handler not written: {e:#}"))?;
        if let Some(r) = self.trap.as_mut().and_then(|h| h.release.as_mut()) {
            *old(r) = v;
        }
        Ok(())
    }

    /// A call (bit 0) or an injected system call (bit 1) of pgdbg's is in
    /// flight or no longer: before the registers change, after they are
    /// back.  An error on `on`: the call or system call must not start.
    pub(super) fn note_release_not_own(&mut self, bit: u64, on: bool) -> Result<()> {
        let Some((base, cached)) = self
            .trap
            .as_ref()
            .and_then(|h| Some((h.base, h.release.as_ref()?.not_own)))
        else {
            return Ok(());
        };
        let cur = if cached == u64::MAX {
            // not known (the guardian's Target): the page's, which keeps
            // what pgdbg had set
            let mut b = [0u8; 8];
            self.read(base + NOT_OWN, &mut b)?;
            let cur = u64::from_le_bytes(b);
            if let Some(r) = self.trap.as_mut().and_then(|h| h.release.as_mut()) {
                r.not_own = cur;
            }
            cur
        } else {
            cached
        };
        let v = if on { cur | bit } else { cur & !bit };
        self.note_release_word(NOT_OWN, v, |r| &mut r.not_own)
    }

    /// Whether `NOT_OWN` is known to hold exactly `v` (false where it is
    /// not known: the guardian's Target before it read the page).  No
    /// pipe: true for 0 (the handler does not exist, nothing to tell it).
    pub(super) fn release_not_own_is(&self, v: u64) -> bool {
        match self.trap.as_ref().and_then(|h| h.release.as_ref()) {
            None => v == 0,
            Some(r) => r.not_own == v,
        }
    }

    /// Whether the SIGCONT handler sees NOT_OWN `bit` set, or cannot act
    /// (no pipe armed, or disarmed).
    pub(super) fn release_sees(&self, bit: u64) -> bool {
        match self.trap.as_ref().and_then(|h| h.release.as_ref()) {
            None => true,
            Some(r) => {
                r.rfd.is_none() || r.disarmed || (r.not_own != u64::MAX && r.not_own & bit != 0)
            }
        }
    }

    /// The signals pgdbg holds back now (the guardian's record has the
    /// same mask).
    pub(super) fn note_release_signals(&mut self, mask: u64) -> Result<()> {
        self.note_release_word(SIGS, mask, |r| &mut r.sigs)
    }

    /// A word the handler reads could not be written (`why`) where the
    /// change cannot be refused: the read end stops signalling (`F_SETFL`
    /// without `O_ASYNC`, one injected `fcntl`), so that a death of pgdbg
    /// and its guardian leaves the backend stopped, as without the pipe.
    /// Only at a stop; an error when that is not possible.
    pub(super) fn disarm_self_release(&mut self, why: anyhow::Error) -> Result<()> {
        let Some(r) = self.trap.as_ref().and_then(|h| h.release.as_ref()) else {
            return Ok(());
        };
        if r.disarmed {
            return Ok(());
        }
        let Some(rfd) = r.rfd.filter(|_| !r.disarming && self.state.is_stopped()) else {
            return Err(why);
        };
        let set = |t: &mut Target, f: fn(&mut Release)| {
            if let Some(r) = t.trap.as_mut().and_then(|h| h.release.as_mut()) {
                f(r);
            }
        };
        set(self, |r| r.disarming = true);
        let res = self.inject_syscall(
            libc::SYS_fcntl,
            [
                rfd as u64,
                libc::F_SETFL as u64,
                libc::O_NONBLOCK as u64,
                0,
                0,
                0,
            ],
        );
        set(self, |r| r.disarming = false);
        match res {
            Ok(0) => {
                set(self, |r| r.disarmed = true);
                super::log::debug(&format!("the backend no longer releases itself: {why:#}"));
                Ok(())
            }
            Ok(e) => Err(why.context(format!("fcntl in the backend failed (errno {})", -e))),
            Err(e) => Err(why.context(format!("{e:#}"))),
        }
    }

    /// After a restore that failed, when the backend is let go: the
    /// handler must not stop it again for words of pgdbg's (the guardian's
    /// SIGCONT lets it run, as it did before the pipe).
    pub(super) fn release_words_cleared(&mut self) {
        let Some(base) = self
            .trap
            .as_ref()
            .filter(|h| h.release.is_some())
            .map(|h| h.base)
        else {
            return;
        };
        // (not the call record: a call still running when the restore
        // failed is repaired at its return trap from it; a stale one repairs
        // nothing, the backend never executes that return address)
        for at in [SIGS, NOT_OWN] {
            if let Err(e) = self.write(base + at, &0u64.to_le_bytes()) {
                super::log::debug(&format!("a word of the SIGCONT handler not cleared: {e:#}"));
            }
        }
        // nor does it put old data words back
        self.clear_repair_data_slots_unless_in_call();
    }
}
