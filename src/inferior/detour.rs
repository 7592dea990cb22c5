//! Detours: a `jmp` written over the first instructions of a function, to
//! code of ours in pages mapped into the target, which then runs the
//! displaced instructions and jumps back.  Unlike an int3, a detour costs
//! the target no stop: the code it jumps to runs inside the target at full
//! speed (see `recorder.rs`), and if pgdbg dies without cleaning up
//! (SIGKILL) the target goes on working, since the jump leads to valid
//! code.  Nothing here knows about PostgreSQL.
//!
//! Safety rules kept here:
//! * the displaced instructions are decoded (iced-x86) and must be plain
//!   (no branch, nothing relative to rip), so they run the same anywhere;
//! * no branch of the function's own code may land inside the bytes the
//!   `jmp` overwrites (the function is disassembled to check);
//! * pages are mapped and unmapped by system calls the target makes itself
//!   (`inject_syscall`: at the ELF entry point, which never runs again,
//!   with every register restored afterwards; with a signal frame on the
//!   target's stack whose `rt_sigreturn` restores it by itself should
//!   every pgdbg process die meanwhile (sigframe.rs), or `syscall; int3`
//!   in the group stop where that frame is refused);
//! * removal puts the original bytes back first, steps the target out of
//!   our code if it is inside it, and unmaps the pages only when no word
//!   of the stack points into them (a signal handler that interrupted our
//!   code would return there); otherwise they stay mapped, harmlessly.

use super::{Target, procfs, sigframe};
use crate::arch::fragments::{self, SYSCALL_INT3_LEN};
use anyhow::{Context, Result, anyhow, bail};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic};
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;

/// Injected system calls so far, for PGDBG_PAUSE_AT's `syscall-injected-N`.
static INJECTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Injected system calls so far by number, for PGDBG_PAUSE_AT's
/// `syscall-injected-nrNR-K` (the K-th system call number NR).
static INJECTED_BY_NR: std::sync::Mutex<Vec<(i64, usize)>> = std::sync::Mutex::new(Vec::new());

/// Which injected system call this is, for PGDBG_PAUSE_AT.
#[derive(Clone, Copy)]
struct Nth {
    /// among all (`syscall-injected-N`)
    all: usize,
    nr: i64,
    /// among those of number `nr` (`syscall-injected-nrNR-K`)
    of_nr: usize,
}

impl Nth {
    fn next(nr: i64) -> Nth {
        let all = INJECTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut v = INJECTED_BY_NR.lock().unwrap_or_else(|e| e.into_inner());
        let of_nr = match v.iter_mut().find(|(n, _)| *n == nr) {
            Some((_, k)) => {
                *k += 1;
                *k
            }
            None => {
                v.push((nr, 1));
                1
            }
        };
        Nth { all, nr, of_nr }
    }

    /// `{stage}-N` and `{stage}-nrNR-K`.
    fn pause(self, stage: &str) {
        if crate::config::get().pause_at.is_some() {
            crate::config::pause_for_tests_nth(stage, self.all);
            crate::config::pause_for_tests(&format!("{stage}-nr{}-{}", self.nr, self.of_nr));
        }
    }
}

// struct ptrace_syscall_info's `op` (include/uapi/linux/ptrace.h): what
// the stop is, read with PTRACE_GET_SYSCALL_INFO (Linux 5.3).
const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;
const PTRACE_SYSCALL_INFO_NONE: u8 = 0;
const PTRACE_SYSCALL_INFO_ENTRY: u8 = 1;
const PTRACE_SYSCALL_INFO_EXIT: u8 = 2;
// include/uapi/linux/ptrace.h: the blocked mask of a stopped tracee
const PTRACE_GETSIGMASK: libc::c_uint = 0x420a;
const PTRACE_SETSIGMASK: libc::c_uint = 0x420b;

/// The `op` of a stopped tracee's PTRACE_GET_SYSCALL_INFO (None: refused).
fn syscall_stop_op(pid: i32) -> Option<u8> {
    // op (u8), pad, arch (u32), ip, sp (u64), then the union: 88 bytes
    let mut buf = [0u64; 11];
    // SAFETY: the kernel writes at most the size given into `buf`.
    let r = unsafe {
        libc::ptrace(
            PTRACE_GET_SYSCALL_INFO,
            pid,
            std::mem::size_of_val(&buf) as *mut libc::c_void,
            buf.as_mut_ptr() as *mut libc::c_void,
        )
    };
    (r > 0).then(|| buf[0].to_le_bytes()[0])
}

/// The signals blocked while an injected system call runs with its frame:
/// all but those the kernel forces on a fault of the thread itself (a
/// blocked one has its action reset to the default and is unblocked:
/// `force_sig_info_to_task`), SIGTRAP above all: a trap flag a single
/// step left set traps in the trailer, for the SIGTRAP handler to take.
pub(super) const BLOCKED_FOR_A_CALL: u64 = !(bit(libc::SIGILL)
    | bit(libc::SIGTRAP)
    | bit(libc::SIGBUS)
    | bit(libc::SIGFPE)
    | bit(libc::SIGSEGV)
    | bit(libc::SIGSYS));

const fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

/// Set the blocked signal mask of stopped thread `pid`
/// (PTRACE_SETSIGMASK; the kernel leaves SIGKILL and SIGSTOP out).
pub(super) fn set_blocked_mask(pid: i32, m: u64) -> Result<()> {
    // SAFETY: the kernel reads 8 bytes (the size given) from `m`.
    let r = unsafe {
        libc::ptrace(
            PTRACE_SETSIGMASK,
            pid,
            8usize as *mut libc::c_void,
            &m as *const u64 as *mut libc::c_void,
        )
    };
    if r < 0 {
        bail!("PTRACE_SETSIGMASK: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// The blocked signal mask of stopped thread `pid` (PTRACE_GETSIGMASK:
/// the kernel's 64-bit sigset, what a signal frame's `uc_sigmask` holds).
fn blocked_mask(pid: i32) -> Result<u64> {
    let mut m = 0u64;
    // SAFETY: the kernel writes 8 bytes (the size given) into `m`.
    let r = unsafe {
        libc::ptrace(
            PTRACE_GETSIGMASK,
            pid,
            8usize as *mut libc::c_void,
            &mut m as *mut u64 as *mut libc::c_void,
        )
    };
    if r < 0 {
        bail!("PTRACE_GETSIGMASK: {}", std::io::Error::last_os_error());
    }
    Ok(m)
}

/// Length of `jmp rel32`.
pub const JMP_LEN: usize = fragments::JMP_REL32_LEN;
const PAGE: u64 = 4096;
/// How far a `rel32` reaches, with a margin.
const REACH: u64 = (1 << 31) - (1 << 24);

/// A detour in place.
#[derive(Debug, Clone)]
pub struct Detour {
    pub site: u64,
    /// The original bytes under the jump (whole instructions).
    pub orig: Vec<u8>,
    /// Our code: mapping start and length.
    pub code: (u64, u64),
    /// Our data pages: mapping start and length.
    pub data: (u64, u64),
    /// Where the jump leads (in `code`); None for a detour adopted from an
    /// earlier pgdbg, whose jump is taken as found.
    pub entry: Option<u64>,
    /// Whether a resume at any instruction boundary inside the jump traps
    /// at once (`jumpover::jump_traps`).
    pub traps_inside: bool,
    /// Reserved landing pages (one page each, all trapping filler): where
    /// the jump leads, outside the code page, with a uprobe's int3 or the
    /// file's byte inside its `rel32` (`jumpover::landings`).
    pub landings: Vec<u64>,
    /// Set once someone else's uprobe took the jump over (`jumpover.rs`):
    /// the jump is gone, the pages wait for removal.
    pub taken_over: Option<super::jumpover::TakenOver>,
}

/// How many bytes at `site` a detour displaces: whole instructions covering
/// at least `JMP_LEN` bytes, each of which must run unchanged at another
/// address.  `code` holds the bytes at `site` (at least 32).  `bodies` is
/// the function's code (address, bytes): none of its branches may land
/// strictly inside the displaced bytes.
pub fn displaced_len(site: u64, code: &[u8], bodies: &[(u64, Vec<u8>)]) -> Result<usize> {
    let mut dec = Decoder::with_ip(64, code, site, DecoderOptions::NONE);
    let mut len = 0usize;
    while len < JMP_LEN {
        if !dec.can_decode() {
            bail!("cannot decode the instructions at {site:#x}");
        }
        let ins = dec.decode();
        if ins.is_invalid() {
            bail!("invalid instruction at {:#x}", ins.ip());
        }
        if ins.flow_control() != FlowControl::Next || ins.is_ip_rel_memory_operand() {
            bail!(
                "the instruction at {:#x} ({:?}) cannot be moved",
                ins.ip(),
                ins.mnemonic()
            );
        }
        len += ins.len();
    }
    let (lo, hi) = (site + 1, site + len as u64);
    for (addr, bytes) in bodies {
        let mut dec = Decoder::with_ip(64, bytes, *addr, DecoderOptions::NONE);
        for ins in &mut dec {
            let target = match ins.flow_control() {
                FlowControl::UnconditionalBranch
                | FlowControl::ConditionalBranch
                | FlowControl::Call => ins.near_branch_target(),
                _ => 0,
            };
            if (lo..hi).contains(&target) {
                bail!(
                    "the code at {:#x} branches into the first instructions ({target:#x})",
                    ins.ip()
                );
            }
        }
    }
    Ok(len)
}

/// The offset of an `int3` among the first instructions at `site` that a
/// detour would displace (where [`displaced_len`] stops on it), if any.
/// Only such an int3 can be someone else's probe that made the decode fail;
/// a 0xcc inside another instruction's bytes is part of that instruction.
pub fn int3_in_displaced(site: u64, code: &[u8]) -> Option<usize> {
    let mut dec = Decoder::with_ip(64, code, site, DecoderOptions::NONE);
    let mut off = 0usize;
    while off < JMP_LEN && dec.can_decode() {
        let ins = dec.decode();
        if ins.is_invalid() {
            return None;
        }
        if ins.mnemonic() == Mnemonic::Int3 {
            return Some(off);
        }
        off += ins.len();
    }
    None
}

// `inject_held` borrows the first bytes of those `inject_syscall` saved
const _: () = assert!(SYSCALL_INT3_LEN <= sigframe::TRAILER_LEN);

/// `jmp rel32` from `from` to `to` (refused out of reach).
pub fn jmp(from: u64, to: u64) -> Result<[u8; JMP_LEN]> {
    fragments::jmp_rel32(from, to)
}

/// Free address ranges of `len` bytes within jump reach of `near`, nearest
/// first.  The space above the heap (brk grows there) and below the stack
/// is left alone; one guard page is kept under the next mapping.
fn gaps_near(maps: &[procfs::Mapping], near: u64, len: u64) -> Vec<u64> {
    let mut m: Vec<&procfs::Mapping> = maps.iter().collect();
    m.sort_by_key(|x| x.start);
    let mut out = Vec::new();
    let mut prev_end = 0x10000u64; // mmap_min_addr
    let mut prev_is_heap = false;
    for x in &m {
        let next_is_stack = x.path.as_ref().is_some_and(|p| p.as_os_str() == "[stack]");
        if !prev_is_heap && !next_is_stack && x.start >= prev_end + len + 2 * PAGE {
            let a = x.start - len - PAGE;
            if a.abs_diff(near) < REACH && (a + len).abs_diff(near) < REACH {
                out.push(a);
            }
        }
        prev_end = prev_end.max(x.end);
        prev_is_heap = x.path.as_ref().is_some_and(|p| p.as_os_str() == "[heap]");
    }
    out.sort_by_key(|a| a.abs_diff(near));
    out
}

impl Target {
    /// Make the target run one system call and return its result (a
    /// negative errno on failure).  The target must be stopped; all its
    /// registers (including `orig_rax`, so an interrupted system call
    /// restarts as it would have) and the borrowed code bytes are restored.
    /// Signals arriving meanwhile are kept for the next resume.
    ///
    /// Two ways, both at the ELF entry point (AT_ENTRY: `_start`, which
    /// never runs again):
    /// * with a signal frame (sigframe.rs), wherever it can be exact: the
    ///   code is `syscall; xor eax, eax; mov al, 15; syscall`, the frame
    ///   on the backend's stack holds its saved state; pgdbg resumes it
    ///   to the system call's exit stop (PTRACE_SYSCALL) and puts the
    ///   registers back itself.  A death of every pgdbg process at any
    ///   instant leaves a backend that finishes the call and returns to
    ///   its own context through `rt_sigreturn`: no group stop is needed
    ///   for it;
    /// * otherwise `syscall; int3`, run to the int3, in the group stop
    ///   (hold.rs), as before.
    pub fn inject_syscall(&mut self, nr: i64, args: [u64; 6]) -> Result<i64> {
        if self.gone || !self.stopped {
            bail!("internal: inject_syscall needs a stopped target");
        }
        let at = procfs::auxv_entry(self.pid())
            .ok_or_else(|| anyhow!("no AT_ENTRY in /proc/{}/auxv", self.pid()))?;
        let len = sigframe::TRAILER_LEN as u64;
        if (at..at + len).any(|a| self.inserted.contains_key(&a)) {
            bail!("a breakpoint sits on the entry point");
        }
        let mut saved_code = [0u8; sigframe::TRAILER_LEN];
        self.read(at, &mut saved_code)?;
        self.check_no_foreign_int3(at, &saved_code)?;
        let n = Nth::next(nr);
        // The group stop first, if something needs it (int3s, debug
        // registers, a call or data words in flight: hold.rs): entering it
        // may change the registers (a trap queued at an int3 of pgdbg's is
        // rewound, hold.rs), so the frame and the guardian's record are
        // built after it, from one reading of the registers, XSAVE image
        // and mask (`trailer_frame`).  The other way holds anyway.
        if self.hold_needed() {
            self.hold_for_change()?;
        }
        if self.gone || !self.stopped {
            bail!("process {} ended before a system call of pgdbg", self.pid);
        }
        super::log::debug(&format!(
            "system call {} (number {nr}) injected, hold: {:?}",
            n.all, self.hold
        ));
        match self.trailer_frame() {
            Ok(snapshot) => self.inject_with_trailer(nr, args, at, saved_code, snapshot, n),
            Err(why) => {
                super::log::debug(&format!(
                    "system call {nr} injected in the group stop, without a signal frame: {why:#}"
                ));
                let mut code = [0u8; SYSCALL_INT3_LEN];
                code.copy_from_slice(&saved_code[..SYSCALL_INT3_LEN]);
                self.inject_held(nr, args, at, code, n)
            }
        }
    }

    /// The signal frame for the stopped target's state and the registers
    /// it was built from (the state to put back), or why there is none
    /// (sigframe.rs: refused wherever it could not be exact).  Called once
    /// the hold, if any, is taken: nothing changes the state after.
    fn trailer_frame(&mut self) -> Result<(sigframe::Frame, super::Registers)> {
        if crate::config::get().no_syscall_trailer {
            bail!("PGDBG_NO_SYSCALL_TRAILER is set");
        }
        // an interrupt of pgdbg's whose stop has not been seen: the one
        // this path sends at the exit stop would merge with it
        if self.stale_interrupts > 0 || self.interrupts_outstanding > 0 {
            bail!("an interrupt of pgdbg's is still in flight");
        }
        let pid = self.pid();
        // stopped at a system call's entry or exit (a stop the frame's
        // `orig_ax` -1 would change the meaning of): not a stop pgdbg
        // makes, refused as unexpected
        match syscall_stop_op(pid) {
            Some(PTRACE_SYSCALL_INFO_NONE) => {}
            Some(op) => bail!("stopped at a system call stop (op {op})"),
            None => bail!("PTRACE_GET_SYSCALL_INFO is not available"),
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|e| anyhow!("cannot read /proc/{pid}/status ({e})"))?;
        // a user shadow stack: rt_sigreturn would check the frame against
        // a restore token that is not there (SIGSEGV)
        if status.lines().any(|l| {
            l.strip_prefix("x86_Thread_features:")
                .is_some_and(|v| v.split_whitespace().any(|f| f == "shstk"))
        }) {
            bail!("the backend has a shadow stack");
        }
        let saved = self.regs()?;
        let x = super::xstate::XState::save(pid)?;
        let sigmask = blocked_mask(pid)?;
        let maps = procfs::maps(pid)?;
        let rsp = saved.rsp;
        let m = maps
            .iter()
            .find(|m| m.start < rsp && rsp <= m.end)
            .ok_or_else(|| anyhow!("rsp {rsp:#x} is in no mapping"))?;
        if !m.perms.starts_with("rw") || !m.perms.ends_with('p') {
            bail!("rsp {rsp:#x} is in a mapping with permissions {}", m.perms);
        }
        // only the main thread's stack: an alternate signal stack or a
        // stack of the backend's own making lies inside a larger mapping
        // (the heap, an anonymous one) whose memory below its own end
        // belongs to something else, which the frame would overwrite
        if !m.is_special("[stack]") {
            let what = match (&m.path, &m.special) {
                (Some(p), _) => p.display().to_string(),
                (None, Some(s)) => s.clone(),
                (None, None) => "an anonymous mapping".into(),
            };
            bail!("rsp {rsp:#x} is not in the main stack ({what})");
        }
        let frame = sigframe::plan(
            &saved,
            sigmask,
            x.bytes(),
            x.xfeatures,
            (m.start, m.end),
            super::xstate::uncompacted_size,
        )?;
        Ok((frame, saved))
    }

    /// The system call through the signal frame (see `inject_syscall`).
    /// Order of the writes: the record, the frame (below the red zone: no
    /// live data of the backend's there), the code, the registers; back:
    /// the registers, then the code.  A death between any two leaves the
    /// backend in its own context (its own registers with the code only
    /// borrowed, never run) or in the injected one (which restores itself).
    fn inject_with_trailer(
        &mut self,
        nr: i64,
        args: [u64; 6],
        at: u64,
        saved_code: [u8; sigframe::TRAILER_LEN],
        (frame, saved): (sigframe::Frame, super::Registers),
        n: Nth,
    ) -> Result<i64> {
        // `saved` is the state `frame` was built from (`trailer_frame`,
        // after the hold): the record, the frame and the registers put
        // back all agree
        self.note_syscall_in_flight(&saved, at, &saved_code, true)?;
        let frame_mask = frame.mask;
        if let Err(e) = self.write(frame.at, &frame.bytes) {
            self.forget_syscall_in_flight();
            return Err(e.context("cannot write the signal frame of a system call"));
        }
        if let Err(e) = self.write(at, sigframe::trailer()) {
            // a word-by-word write may have half happened
            if self.write(at, &saved_code).is_ok() {
                self.forget_syscall_in_flight();
            }
            return Err(e);
        }
        let mut r = saved;
        r.rax = nr as u64;
        r.rdi = args[0];
        r.rsi = args[1];
        r.rdx = args[2];
        r.r10 = args[3];
        r.r8 = args[4];
        r.r9 = args[5];
        r.rip = at;
        r.rsp = frame.rsp;
        r.orig_rax = u64::MAX; // no syscall restart at the new rip
        // Signals blocked while the call runs (BLOCKED_FOR_A_CALL), once
        // the registers are the injected ones (the frame's mask puts the backend's back if
        // every pgdbg process dies from then on): one that comes meanwhile
        // stays pending in the kernel, never taken into pgdbg's memory
        // where a death would lose it.  Not blocked: kept by pgdbg as
        // before (logged).
        let mut blocked = false;
        let res = self.set_regs(&r).and_then(|_| {
            match set_blocked_mask(self.pid(), BLOCKED_FOR_A_CALL) {
                Ok(()) => blocked = true,
                Err(e) => super::log::debug(&format!("signals not blocked: {e:#}")),
            }
            n.pause("syscall-injected");
            self.run_to_syscall_exit(at, n)
        });
        // the mask, then the registers: the code goes back only once
        // nothing can run it (a death before the registers are back runs
        // the trailer, which restores the mask whatever it is)
        let s = if self.gone {
            Ok(())
        } else {
            (if blocked {
                set_blocked_mask(self.pid(), frame_mask)
            } else {
                Ok(())
            })
            .and_then(|_| self.set_regs(&saved))
            .and_then(|_| self.check_regs_read_back(&saved))
        };
        let w = if self.gone || s.is_err() {
            // registers not put back: the code stays, so that the backend,
            // whatever its registers, runs the trailer (the frame restores)
            Ok(())
        } else {
            self.write(at, &saved_code)
        };
        if w.is_ok() && s.is_ok() {
            self.forget_syscall_in_flight();
        }
        let rax = res?;
        s?;
        w?;
        Ok(rax as i64)
    }

    /// Resume the target into the injected system call and on to its exit
    /// stop (PTRACE_SYSCALL, entry and exit told apart by
    /// PTRACE_GET_SYSCALL_INFO); pass-through signals are kept for later.
    /// Returns rax there.  The target is then moved on to an interrupt
    /// stop (PTRACE_INTERRUPT, PTRACE_CONT: taken before it returns to
    /// user mode) at the same instruction: from a system call's exit stop
    /// the kernel would not restart an interrupted system call of the
    /// registers pgdbg puts back (it restarts only on its way through
    /// signal handling), from an interrupt stop it does, as after the int3
    /// of the other way.
    fn run_to_syscall_exit(&mut self, at: u64, n: Nth) -> Result<u64> {
        // System call stops are told from a SIGTRAP only with
        // PTRACE_O_TRACESYSGOOD (their status is SIGTRAP | 0x80, and only
        // then does PTRACE_GET_SYSCALL_INFO say entry or exit): set for
        // this run only (pgdbg seizes with no options and makes no other
        // system call stops; a death meanwhile leaves no tracer to care)
        ptrace::setoptions(self.pid, self.ptrace_options(true))
            .map_err(|e| anyhow!("PTRACE_SETOPTIONS ({e})"))?;
        let res = self.run_to_syscall_exit_stop(at);
        if !self.gone {
            let off = ptrace::setoptions(self.pid, self.ptrace_options(false))
                .map_err(|e| anyhow!("PTRACE_SETOPTIONS ({e})"));
            if res.is_ok() {
                off?;
            }
        }
        let rax = res?;
        n.pause("syscall-exit");
        // on to an interrupt stop (see above); this interrupt is not
        // counted among pgdbg's (its stop is taken here)
        ptrace::interrupt(self.pid).map_err(|e| anyhow!("PTRACE_INTERRUPT ({e})"))?;
        loop {
            ptrace::cont(self.pid, None).map_err(|e| anyhow!("cannot resume ({e})"))?;
            self.set_running();
            match self.waitpid_blocking()? {
                WaitStatus::Exited(_, _) | WaitStatus::Signaled(_, _, _) => {
                    self.mark_gone();
                    bail!("process {} ended during a system call of pgdbg", self.pid);
                }
                // the interrupt's stop: SIGTRAP, or the stop signal when
                // the group is stopped (held: `do_jobctl_trap` in
                // kernel/signal.c reports it so); no other interrupt of
                // pgdbg's is in flight (`trailer_frame`), so it is this one
                WaitStatus::PtraceEvent(_, _, ev) if ev == libc::PTRACE_EVENT_STOP => {
                    self.mark_stopped();
                    self.event_stop = true;
                    let r = self.regs()?;
                    if r.rip != at + sigframe::AFTER_SYSCALL {
                        bail!(
                            "the backend left the system call of pgdbg (at {:#x})",
                            r.rip
                        );
                    }
                    return Ok(rax);
                }
                WaitStatus::PtraceEvent(_, sig, _) => {
                    self.mark_stopped();
                    self.interrupt_stop_seen(sig);
                }
                WaitStatus::Stopped(_, sig) => {
                    // not expected before the interrupt's stop (the kernel
                    // takes it before any signal): kept, never lost
                    self.mark_stopped();
                    if sig != Signal::SIGTRAP {
                        self.defer(sig);
                    }
                }
                _ => self.mark_stopped(),
            }
        }
    }

    /// `run_to_syscall_exit`'s stops up to the exit stop: rax there.
    fn run_to_syscall_exit_stop(&mut self, at: u64) -> Result<u64> {
        let mut stale_traps = 0;
        let mut entered = false;
        loop {
            ptrace::syscall(self.pid, None).map_err(|e| anyhow!("cannot resume ({e})"))?;
            self.set_running();
            match self.waitpid_blocking()? {
                WaitStatus::Exited(_, _) | WaitStatus::Signaled(_, _, _) => {
                    self.mark_gone();
                    bail!("process {} ended during a system call of pgdbg", self.pid);
                }
                WaitStatus::PtraceSyscall(_) => {
                    self.mark_stopped();
                    match syscall_stop_op(self.pid()) {
                        Some(PTRACE_SYSCALL_INFO_ENTRY) if !entered => entered = true,
                        Some(PTRACE_SYSCALL_INFO_EXIT) if entered => {
                            let r = self.regs()?;
                            if r.rip != at + sigframe::AFTER_SYSCALL {
                                bail!(
                                    "the system call of pgdbg ended at {:#x}, not {:#x}",
                                    r.rip,
                                    at + sigframe::AFTER_SYSCALL
                                );
                            }
                            return Ok(r.rax);
                        }
                        op => bail!("unexpected system call stop {op:?} (entered: {entered})"),
                    }
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    // a SIGTRAP queued before (a watchpoint that fired as
                    // the target stopped): stale, dropped, never delivered
                    self.mark_stopped();
                    stale_traps += 1;
                    if stale_traps > 8 {
                        bail!("unexpected traps during a system call");
                    }
                }
                WaitStatus::Stopped(_, sig) if super::signals::pass_through(sig) => {
                    self.mark_stopped();
                    self.defer(sig);
                }
                WaitStatus::Stopped(_, sig) => {
                    self.mark_stopped();
                    if !self.fault_in_taken_over_jump(sig)? {
                        bail!("signal {sig:?} during a system call of pgdbg");
                    }
                }
                WaitStatus::PtraceEvent(_, sig, _) => {
                    self.mark_stopped();
                    self.interrupt_stop_seen(sig);
                }
                _ => self.mark_stopped(),
            }
        }
    }

    /// The system call the other way: `syscall; int3` in the group stop.
    fn inject_held(
        &mut self,
        nr: i64,
        args: [u64; 6],
        at: u64,
        saved_code: [u8; SYSCALL_INT3_LEN],
        n: Nth,
    ) -> Result<i64> {
        let code = fragments::syscall_int3()?;
        self.hold_for_change()?;
        let saved = self.regs()?;
        self.note_syscall_in_flight(&saved, at, &saved_code, false)?;
        self.write(at, &code)?; // syscall; int3
        let mut r = saved;
        r.rax = nr as u64;
        r.rdi = args[0];
        r.rsi = args[1];
        r.rdx = args[2];
        r.r10 = args[3];
        r.r8 = args[4];
        r.r9 = args[5];
        r.rip = at;
        r.orig_rax = u64::MAX; // no syscall restart at the new rip
        let res = self.set_regs(&r).and_then(|_| {
            n.pause("syscall-injected");
            // (the int3 is the last byte: rip stops past it)
            self.run_until_trap_at(at + SYSCALL_INT3_LEN as u64)
        });
        let w = if self.gone {
            Ok(())
        } else {
            self.write(at, &saved_code)
        };
        let s = if self.gone {
            Ok(())
        } else {
            self.set_regs(&saved)
                .and_then(|_| self.check_regs_read_back(&saved))
        };
        if w.is_ok() && s.is_ok() {
            self.forget_syscall_in_flight();
        }
        let rax = res?;
        w?;
        s?;
        Ok(rax as i64)
    }

    /// Resume until a SIGTRAP with `rip == addr` (an int3 of ours just
    /// before it); pass-through signals are kept for later.
    fn run_until_trap_at(&mut self, addr: u64) -> Result<u64> {
        let mut stale_traps = 0;
        loop {
            ptrace::cont(self.pid, None).map_err(|e| anyhow!("cannot resume ({e})"))?;
            self.set_running();
            match self.waitpid_blocking()? {
                WaitStatus::Exited(_, _) | WaitStatus::Signaled(_, _, _) => {
                    self.mark_gone();
                    bail!("process {} ended during a system call of pgdbg", self.pid);
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.mark_stopped();
                    let r = self.regs()?;
                    if r.rip == addr {
                        return Ok(r.rax);
                    }
                    // a SIGTRAP queued before (a watchpoint that fired as
                    // the target stopped): only `syscall; int3` runs here,
                    // so it is stale; dropped, never delivered
                    stale_traps += 1;
                    if stale_traps > 8 {
                        bail!("unexpected traps at {:#x} during a system call", r.rip);
                    }
                }
                WaitStatus::Stopped(_, sig) if super::signals::pass_through(sig) => {
                    self.mark_stopped();
                    self.defer(sig);
                }
                WaitStatus::Stopped(_, sig) => {
                    self.mark_stopped();
                    // the SIGILL of a jump a uprobe took over, queued
                    // before this system call: dropped (the jump is undone
                    // already, and the registers put back afterwards
                    // resume at the instruction that trapped)
                    if !self.fault_in_taken_over_jump(sig)? {
                        bail!("signal {sig:?} during a system call of pgdbg");
                    }
                }
                WaitStatus::PtraceEvent(_, sig, _) => {
                    self.mark_stopped();
                    self.interrupt_stop_seen(sig);
                }
                _ => self.mark_stopped(),
            }
        }
    }

    /// Map `len` bytes of anonymous private memory in the target, within
    /// `rel32` reach of `near` when given.
    pub fn map_pages(&mut self, near: Option<u64>, len: u64, prot: i32) -> Result<u64> {
        let len = len.div_ceil(PAGE) * PAGE;
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        let mmap = |t: &mut Target, addr: u64, extra: u64| {
            t.inject_syscall(
                libc::SYS_mmap,
                [addr, len, prot as u64, flags | extra, u64::MAX, 0],
            )
        };
        let Some(near) = near else {
            let r = mmap(self, 0, 0)?;
            if r < 0 {
                bail!("mmap in the target failed (errno {})", -r);
            }
            return Ok(r as u64);
        };
        let maps = procfs::maps(self.pid())?;
        for a in gaps_near(&maps, near, len).into_iter().take(8) {
            let r = mmap(self, a, libc::MAP_FIXED_NOREPLACE as u64)?;
            if r as u64 == a {
                return Ok(a);
            }
            if r > 0 {
                // a kernel without MAP_FIXED_NOREPLACE put it elsewhere
                self.unmap_pages(r as u64, len)?;
            }
        }
        bail!("no free address space within jump reach of {near:#x}")
    }

    /// Map one anonymous private page at exactly `addr`, never over
    /// anything mapped (MAP_FIXED_NOREPLACE); None when it cannot go there.
    pub(super) fn map_page_at(&mut self, addr: u64, prot: i32) -> Result<Option<u64>> {
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
        let r = self.inject_syscall(
            libc::SYS_mmap,
            [addr, PAGE, prot as u64, flags, u64::MAX, 0],
        )?;
        if r as u64 == addr {
            return Ok(Some(addr));
        }
        if r > 0 {
            // a kernel without MAP_FIXED_NOREPLACE put it elsewhere
            self.unmap_pages(r as u64, PAGE)?;
        }
        Ok(None)
    }

    pub fn unmap_pages(&mut self, addr: u64, len: u64) -> Result<()> {
        let r = self.inject_syscall(libc::SYS_munmap, [addr, len, 0, 0, 0, 0])?;
        if r < 0 {
            bail!("munmap in the target failed (errno {})", -r);
        }
        Ok(())
    }

    /// Write a detour at `site` (a function's entry): `len` bytes of whole
    /// instructions (`displaced_len`) are replaced by a jump to
    /// `pages.entry` in the code page `pages.code`, which must be mapped,
    /// as must the reserved landing pages (`map_jump_page`); `body` is
    /// what runs there before the displaced instructions and the jump back
    /// (both appended here).
    pub fn install_detour(
        &mut self,
        site: u64,
        len: usize,
        body: &[u8],
        pages: &super::jumpover::JumpPages,
        data: (u64, u64),
    ) -> Result<()> {
        let (code, entry) = ((pages.code, PAGE), pages.entry);
        if self.gone || !self.stopped {
            bail!("internal: install_detour needs a stopped target");
        }
        // A SIGILL of an earlier jump's still queued is taken now, while
        // its entry in `undone_jumps` is known; then no entry there can
        // match a SIGILL to come (the bytes each one covers are original
        // again, or this jump's, whose own entry is made if it is taken
        // over), so they all go: none is left to drop a SIGILL of the
        // code's own, or of this jump under another entry's bytes.
        self.drain_sigill()?;
        if self.gone {
            bail!("the backend exited");
        }
        // (kept while one is still queued: the drain gives up after a few
        // rounds, and an entry must not go before its SIGILL is taken)
        if !self.sigill_pending() {
            self.undone_jumps.clear();
        }
        if self.detours.iter().any(|d| d.site == site) {
            bail!("a detour is already at {site:#x}");
        }
        let range = site..site + len as u64;
        if self.inserted.keys().any(|a| range.contains(a)) {
            bail!("a breakpoint is set at {site:#x}: delete it first");
        }
        let rip = self.regs()?.rip;
        if rip > site && rip < site + len as u64 {
            bail!("the target is stopped inside the instructions to displace");
        }
        // nor may a signal frame return there (a handler running now)
        if self.stack_points_into((site + 1, len as u64 - 1))? {
            bail!("the stack holds an address inside the instructions to displace");
        }
        let mut orig = vec![0u8; len];
        self.read(site, &mut orig)?;
        // run from our page and put back at removal: no one else's int3
        self.check_no_foreign_int3(site, &orig)?;
        let mut text = body.to_vec();
        text.extend_from_slice(&orig);
        let back_from = entry + text.len() as u64;
        text.extend_from_slice(&jmp(back_from, site + len as u64)?);
        if entry < code.0 || entry + text.len() as u64 > code.0 + code.1 {
            bail!("internal: detour code does not fit its page");
        }
        let to_code = jmp(site, entry)?;
        // what the jump is followed by, for whether it traps when entered
        // past its first byte (`jumpover::jump_traps`)
        let after = self.after_jump(site, &orig);
        let d = Detour {
            site,
            orig: orig.clone(),
            code,
            data,
            entry: Some(entry),
            traps_inside: super::jumpover::jump_traps(orig[0], &to_code[1..], &after),
            landings: pages.landings.clone(),
            taken_over: None,
        };
        // a jump that may not trap could run its rel32 as code under
        // someone's uprobe (`jumpover.rs`): no detour rather than that
        if !d.traps_inside {
            bail!("the jump at {site:#x} would not trap if another tool's uprobe landed on it");
        }
        if let Some(g) = self.guardian()? {
            g.note_detour(&d)?;
        }
        // The rest of the code pages: an opcode invalid in 64-bit mode
        // (`jumpover::UD64`), never zeros (`00 00` is `add [rax], al`): a
        // jump that lands wide of `entry` (a uprobe's int3 in its rel32)
        // traps at once with nothing done.
        let mut page = vec![super::jumpover::UD64[0]; code.1 as usize];
        let off = (entry - code.0) as usize;
        page[off..off + text.len()].copy_from_slice(&text);
        self.write(code.0, &page)?;
        if let Err(e) = self.write(site, &to_code) {
            // a word-by-word write may have half happened
            if self.write(site, &orig).is_ok()
                && let Some(g) = &mut self.guardian
            {
                g.forget_detour(site);
            }
            return Err(e);
        }
        self.detours.push(d);
        Ok(())
    }

    /// Take charge of a detour found in the target (left by an earlier
    /// pgdbg that was killed), so that `remove_detour` undoes it.
    pub fn adopt_detour(&mut self, d: Detour) {
        if !self.has_detour(d.site) {
            self.detours.push(d);
        }
    }

    pub fn has_detour(&self, site: u64) -> bool {
        self.detours.iter().any(|d| d.site == site)
    }

    /// Undo the detour at `site`: the original bytes back, the target out of
    /// our code, our pages unmapped when nothing can return into them.
    /// Returns false when the pages had to stay mapped.
    pub fn remove_detour(&mut self, site: u64) -> Result<bool> {
        let Some(i) = self.detours.iter().position(|d| d.site == site) else {
            return Ok(true);
        };
        if self.gone {
            self.detours.clear();
            return Ok(true);
        }
        if !self.stopped {
            self.ensure_stopped()?;
            if self.gone {
                self.detours.clear();
                return Ok(true);
            }
        }
        // A SIGILL of the jump still queued (its trap, raised as pgdbg
        // stopped the backend) is taken first, while the detour and its
        // undone jump are known: dropped, and the backend rewound if it
        // stopped on the filler.  Left queued, nothing here could tell it
        // from the code's own once the detour is forgotten; delivered, it
        // would kill the backend.
        self.drain_sigill()?;
        if self.gone {
            self.detours.clear();
            return Ok(true);
        }
        // someone's uprobe over the jump: its bytes are the original ones
        // again already but for the uprobes' int3s
        // (`jumpover::detour_taken_over`)
        let taken_over = self.detour_taken_over(site)?;
        let d = self.detours[i].clone();
        if taken_over == Some(super::jumpover::TakenOver::Changed) {
            // Someone else changed the jump in a way that is no uprobe's
            // (another patcher's code there now, perhaps leading into our
            // page): nothing is written there, and the pages stay mapped,
            // since their code may still be run.  The guardian forgot the
            // detour already (it must not write there either).
            self.detours.remove(i);
            super::log::debug(&format!(
                "detour at {site:#x}: the code there was changed by someone else; left as found, its pages mapped"
            ));
            return Ok(false);
        }
        if taken_over.is_none() {
            // forgotten only once the original bytes are back
            self.write(d.site, &d.orig)
                .context("cannot restore the code under a detour")?;
        }
        // stopped on the filler of the code page or of a landing page,
        // where the jump led with a uprobe's int3 (or the file's byte) in
        // its rel32: back to the site (no step there);
        // before the detour is forgotten, so that a failure leaves it known
        self.rewind_wild_landing()?;
        self.detours.remove(i);
        if let Some(g) = &mut self.guardian {
            g.forget_detour(d.site);
        }
        let in_code = |a: u64| a >= d.code.0 && a < d.code.0 + d.code.1;
        if in_code(self.regs()?.rip) {
            // single-steps follow: the trap flag is set while each runs,
            // and a tracer's death then would leave it set (only a detach
            // clears it): held, the guardian or a rescue detaches
            self.hold_for_change()?;
        }
        // our code runs forward but for a recorder's copy of a text (a loop
        // of 7 instructions per byte, 120 bytes at most): a few hundred
        // steps take the target out of it
        let mut steps = 0;
        while in_code(self.regs()?.rip) {
            if steps == 4000 {
                bail!("the target does not leave the detour code");
            }
            if let Some(stop) = self.single_step_raw()? {
                if self.gone {
                    return Ok(true);
                }
                bail!("the target stopped in the detour code: {stop:?}");
            }
            steps += 1;
        }
        // The reserved landing pages: no jump leads there any more (the
        // original bytes are back, or only a uprobe's int3 with them), and
        // the target is not on one (rewound above).  Each is left mapped,
        // harmlessly (filler, read and execute), if the target is stopped
        // on it all the same or its stack points into it.
        let rip = self.regs()?.rip;
        // one read of the stack for all the pages (the target is stopped
        // meanwhile; the unmaps below restore rsp and write nothing above it)
        let stack = self.stack_words()?;
        let points_into = |(start, len): (u64, u64)| match &stack {
            None => true, // unknown stack: keep the pages
            Some(words) => words.iter().any(|&v| v >= start && v < start + len),
        };
        // A landing page holds trapping filler only: nothing is ever called
        // from it, so the one word of the stack that can refer to it is the
        // saved rip of code that trapped there, a landing address itself;
        // any other word in its range is stale data (found once in 40 runs
        // of tests/foreign_uprobe.rs), no reason to keep the page.  A
        // detour adopted from an earlier pgdbg (no known entry) keeps the
        // whole-page test.
        let exact = d
            .entry
            .map(|e| super::jumpover::landings(d.site, e, &d.orig));
        let refers_to = |p: u64| match (&stack, &exact) {
            (Some(words), Some(ls)) => words
                .iter()
                .any(|v| (p..p + PAGE).contains(v) && ls.contains(v)),
            _ => points_into((p, PAGE)),
        };
        let mut kept = false;
        for &p in &d.landings {
            if (p..p + PAGE).contains(&rip) || refers_to(p) {
                kept = true;
            } else {
                self.unmap_pages(p, PAGE)?;
            }
        }
        if kept {
            let words: Vec<String> = stack
                .iter()
                .flatten()
                .filter(|v| d.landings.iter().any(|p| (*p..p + PAGE).contains(*v)))
                .map(|v| format!("{v:#x}"))
                .collect();
            super::log::debug(&format!(
                "a landing page left mapped: the target is on it (rip {rip:#x}) or its stack points into it ({})",
                words.join(" ")
            ));
        }
        let code_kept = points_into(d.code);
        if code_kept {
            super::log::debug("detour pages left mapped: the stack points into them");
        } else {
            self.unmap_pages(d.code.0, d.code.1)?;
            self.unmap_pages(d.data.0, d.data.1)?;
        }
        // the detour is forgotten and some of its pages are gone (the
        // address may be someone else's next), on every path from here:
        // an entry for this jump could only misread a later SIGILL there,
        // and none of its own is queued now (taken above, or by the
        // unmap's own resumes, which drop it); one still pending keeps it
        if !self.sigill_pending() {
            self.undone_jumps.retain(|x| x.site != site);
        }
        Ok(!kept && !code_kept)
    }

    /// Put a detour's original bytes over its jump in `buf`, the target's
    /// bytes at `addr` (a jump someone else's uprobe took over is gone
    /// from the code already).
    pub(super) fn hide_detours(&self, addr: u64, buf: &mut [u8]) {
        let end = addr + buf.len() as u64;
        for d in self.detours.iter().filter(|d| d.taken_over.is_none()) {
            for (i, &b) in d.orig.iter().enumerate() {
                let a = d.site + i as u64;
                if a >= addr && a < end {
                    buf[(a - addr) as usize] = b;
                }
            }
        }
    }

    /// Whether an address is among the bytes a detour replaced.
    pub fn in_detour(&self, addr: u64) -> bool {
        self.detours
            .iter()
            .any(|d| addr >= d.site && addr < d.site + d.orig.len() as u64)
    }

    /// Whether any word between rsp and the top of its stack mapping holds
    /// an address in `range` (start, length): a saved rip of an interrupted
    /// detour.
    pub(super) fn stack_points_into(&self, range: (u64, u64)) -> Result<bool> {
        Ok(match self.stack_words()? {
            None => true, // unknown stack: keep the pages
            Some(words) => words.iter().any(|&v| v >= range.0 && v < range.0 + range.1),
        })
    }

    /// The words between rsp and the top of its stack mapping (None: rsp
    /// is in no mapping, so nothing can be said).
    pub(super) fn stack_words(&self) -> Result<Option<Vec<u64>>> {
        let rsp = self.regs()?.rsp;
        let maps = procfs::maps(self.pid())?;
        let Some(m) = maps.iter().find(|m| m.start <= rsp && rsp < m.end) else {
            return Ok(None);
        };
        let from = rsp & !7;
        let mut buf = vec![0u8; (m.end - from) as usize];
        self.read(from, &mut buf)?;
        Ok(Some(
            buf.chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
                .collect(),
        ))
    }

    /// Undo every detour (detach, drop).
    pub(super) fn remove_all_detours(&mut self) -> Result<()> {
        let mut first = Ok(());
        let sites: Vec<u64> = self.detours.iter().map(|d| d.site).collect();
        for s in sites {
            if let Err(e) = self.remove_detour(s)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prologue_pushes_and_moves_are_displaced_whole() {
        // push r15; push r14; mov r14, rcx; push r13 (GetCachedPlan, gcc 12 -O2)
        let mut code = vec![0x41, 0x57, 0x41, 0x56, 0x49, 0x89, 0xce, 0x41, 0x55];
        code.resize(32, 0x90);
        assert_eq!(displaced_len(0x1000, &code, &[]).unwrap(), 7);
        // a branch of the function into the displaced bytes forbids it
        let body = vec![(0x1100, vec![0xe9, 0xff, 0xfe, 0xff, 0xff])]; // jmp 0x1004
        assert!(displaced_len(0x1000, &code, &body).is_err());
        // to the entry itself is fine
        let body = vec![(0x1100, vec![0xe9, 0xfb, 0xfe, 0xff, 0xff])]; // jmp 0x1000
        assert_eq!(displaced_len(0x1000, &code, &body).unwrap(), 7);
        // rip-relative or branching first instructions are refused
        let mut lea = vec![0x48, 0x8d, 0x05, 0, 0, 0, 0]; // lea rax, [rip+0]
        lea.resize(32, 0x90);
        assert!(displaced_len(0x1000, &lea, &[]).is_err());
        let mut call = vec![0xe8, 0, 0, 0, 0];
        call.resize(32, 0x90);
        assert!(displaced_len(0x1000, &call, &[]).is_err());
    }

    #[test]
    fn jumps_encode_relative_to_their_end() {
        assert_eq!(jmp(0x1000, 0x1005).unwrap(), [0xe9, 0, 0, 0, 0]);
        assert_eq!(jmp(0x1000, 0x1000).unwrap(), [0xe9, 0xfb, 0xff, 0xff, 0xff]);
        assert!(jmp(0x1000, 0x1_0000_1000).is_err());
    }

    #[test]
    fn gaps_skip_heap_and_stack_neighbourhoods() {
        let m = |start: u64, end: u64, path: &str| procfs::Mapping {
            start,
            end,
            perms: "r-xp".into(),
            offset: 0,
            path: (!path.is_empty()).then(|| path.into()),
            ..Default::default()
        };
        let maps = vec![
            m(0x400000, 0x500000, "/bin/postgres"),
            m(0x600000, 0x700000, "[heap]"),
            m(0x7f0000000000, 0x7f0000100000, "[stack]"),
        ];
        let g = gaps_near(&maps, 0x450000, 0x2000);
        // below the binary only: not above the heap, not under the stack
        assert_eq!(g, vec![0x400000 - 0x2000 - PAGE, 0x600000 - 0x2000 - PAGE]);
    }
}
