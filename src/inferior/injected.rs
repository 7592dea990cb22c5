//! System calls the target makes itself, injected by pgdbg: at the ELF
//! entry point (AT_ENTRY: `_start`, which never runs again), with every
//! register restored afterwards.  With a signal frame on the target's
//! stack whose `rt_sigreturn` restores it by itself should every pgdbg
//! process die meanwhile (sigframe.rs), or `syscall; int3` in the group
//! stop (hold.rs) where that frame is refused.  Detours (detour.rs) map
//! and unmap their pages with them; the SIGTRAP and SIGCONT handlers set
//! their actions with them.

use super::{Target, procfs, sigframe};
use crate::arch::fragments::{self, SYSCALL_INT3_LEN};
use anyhow::{Result, anyhow, bail};
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
pub(super) fn blocked_mask(pid: i32) -> Result<u64> {
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

const _: () = assert!(SYSCALL_INT3_LEN <= sigframe::TRAILER_LEN);

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
        if !self.state.is_stopped() {
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
        if !self.state.is_stopped() {
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
        let s = if self.state.is_gone() {
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
        let w = if self.state.is_gone() || s.is_err() {
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
        if !self.state.is_gone() {
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
                    self.mark_event_stop();
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

    /// A stop of an injected system call's run other than the one it runs
    /// to (`run_to_syscall_exit_stop`, `run_until_trap_at`): the end of the
    /// process, a pass-through signal kept for later, the SIGILL of a jump
    /// a uprobe took over, queued before this system call (dropped: the
    /// jump is undone already, and the registers put back afterwards
    /// resume at the instruction that trapped), an interrupt's stop; any
    /// other signal ends the call with an error.
    fn other_stop_during_syscall(&mut self, st: WaitStatus) -> Result<()> {
        match st {
            WaitStatus::Exited(_, _) | WaitStatus::Signaled(_, _, _) => {
                self.mark_gone();
                bail!("process {} ended during a system call of pgdbg", self.pid);
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
        Ok(())
    }

    /// `run_to_syscall_exit`'s stops up to the exit stop: rax there.
    fn run_to_syscall_exit_stop(&mut self, at: u64) -> Result<u64> {
        let mut stale_traps = 0;
        let mut entered = false;
        loop {
            ptrace::syscall(self.pid, None).map_err(|e| anyhow!("cannot resume ({e})"))?;
            self.set_running();
            match self.waitpid_blocking()? {
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
                other => self.other_stop_during_syscall(other)?,
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
        let w = if self.state.is_gone() {
            Ok(())
        } else {
            self.write(at, &saved_code)
        };
        let s = if self.state.is_gone() {
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
                other => self.other_stop_during_syscall(other)?,
            }
        }
    }
}
