//! The target process: ptrace attach/detach, the wait loop, registers and
//! memory.  Nothing in here knows about PostgreSQL or DWARF.
//!
//! Invariants kept by this layer:
//! * attach is `PTRACE_SEIZE` + `PTRACE_INTERRUPT`: no SIGSTOP is ever left
//!   pending in the target;
//! * a running target is stopped with `PTRACE_INTERRUPT`, never with a signal
//!   (for a backend SIGINT is a query cancel);
//! * signals the target receives are passed straight through unless they are
//!   faults the user must see;
//! * after a breakpoint trap `rip` is rewound to the breakpoint address before
//!   the stop is reported, so a stop never leaves `rip` in the middle of an
//!   instruction.

mod callrepair;
pub mod detour;
pub mod foreign;
pub mod guardian;
mod hold;
pub mod jumpover;
mod memory;
pub mod newchild;
pub mod outside;
pub mod permission;
pub mod procevents;
pub mod procfs;
pub mod recorder;
pub mod regs;
mod selfrelease;
pub mod signals;
mod stepping;
pub mod traphandler;
mod wait;
pub mod xstate;

use anyhow::{Context, Result, anyhow, bail};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::{BTreeMap, VecDeque};
use std::io::IoSliceMut;

pub use foreign::{ForeignInt3, foreign};
pub use memory::read_untraced;
pub use regs::Registers;

const INT3: u8 = 0xcc;
use signals::{SI_KERNEL, TRAP_BRKPT, TRAP_HWBKPT, TRAP_TRACE};

/// Why the target stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// An int3 we inserted was hit; `rip` has been rewound to `addr`.
    Breakpoint { addr: u64 },
    /// A hardware debug register fired (DR6 low bits).
    HardwareBreak { dr6: u64 },
    /// Stopped by `interrupt()` (user Ctrl-C or a tool request).
    Interrupted,
    /// A signal the user should see (a fault); it will be delivered on the
    /// next resume unless discarded.
    Signal(Signal),
    /// The target exited with a status.
    Exited(i32),
    /// The target was killed by a signal.
    Killed(Signal),
    /// pgdbg itself was asked to terminate (SIGTERM/SIGHUP) while waiting;
    /// the target is stopped and must be detached.
    ToolTerminating,
}

/// A traced process.
pub struct Target {
    pid: Pid,
    /// Addresses where an int3 is currently written, with the original byte.
    inserted: BTreeMap<u64, u8>,
    /// Signals that arrived while we could not deliver them (during a
    /// single-step); delivered on the next resume.
    deferred: VecDeque<Signal>,
    /// The deferred signals a caller took (`take_pending_signals`) and has
    /// not given back: held back all the same (a mask, bit N-1 for N).
    taken_signals: u64,
    /// The current stop is a signal's delivery stop seen but not yet taken
    /// from the kernel (wait.rs `take_status`): the kernel still holds
    /// the signal, and delivers it if pgdbg dies before resuming.
    unreaped: bool,
    /// A pass-through signal taken at its delivery stop (during a call of
    /// pgdbg's) and not yet handed back by the resume (a mask): recorded
    /// as held back until then.
    delivering: u64,
    /// A fault signal reported to the user, delivered on the next resume.
    pending_fault: Option<Signal>,
    /// Signals are held back, not delivered, until this is cleared (the
    /// guardian while it finishes a call in flight: inflight.rs): a
    /// pass-through signal is deferred at its delivery stop, and no
    /// resume carries a deferred one.
    holding_signals: bool,
    /// In the guardian: the table's word of held-back signals, which its
    /// Target (with no guardian of its own) keeps up to date (guardian.rs).
    signal_word: Option<guardian::SignalWord>,
    /// Number of PTRACE_INTERRUPTs whose event stop has not been seen.
    interrupts_outstanding: u32,
    /// Interrupts whose stop will still arrive after another stop was
    /// reported first; their event stops are swallowed.
    stale_interrupts: u32,
    /// Set once the target is gone (exited/killed); nothing to restore.
    gone: bool,
    /// Since when the target is stopped (None while it runs), and the time
    /// it spent stopped before that: what a command's stop cost it.
    stopped_since: Option<std::time::Instant>,
    stopped_before: std::time::Duration,
    /// Time the target ran pgdbg's inferior calls (not its own work).
    calls_time: std::time::Duration,
    /// Whether the target is currently stopped under ptrace.
    stopped: bool,
    /// How many times the target was let run: a stop's derived state (its
    /// frames) is valid while this has not moved.
    runs: u64,
    /// Debug registers we have modified (DR7 non-zero).
    debugregs_dirty: bool,
    attached: bool,
    /// Registers of the current stop (valid while stopped).
    regs_cache: std::cell::Cell<Option<Registers>>,
    /// This stop is the signal-delivery stop of one of our int3s whose
    /// SIGTRAP still says "int3" (`si_code` SI_KERNEL/TRAP_BRKPT): the
    /// first register write re-labels it (traphandler.rs).  Cleared when
    /// the target runs.
    int3_sigtrap_live: bool,
    /// The (original) first bytes of the instructions under our int3s, for
    /// step-over emulation without reading them at every hit.
    code_cache: std::collections::HashMap<u64, [u8; 4]>,
    /// /proc/PID/mem, for one-syscall writes (text pages included).
    mem: Option<std::fs::File>,
    /// Jumps to code of ours written over function entries (detour.rs).
    detours: Vec<detour::Detour>,
    /// Jumps undone because someone's uprobe took them over (jumpover.rs):
    /// a SIGILL the backend took inside one before is dropped even when it
    /// is reported after the detour's removal.
    undone_jumps: Vec<detour::Detour>,
    /// The process that restores the backend if pgdbg dies (guardian.rs),
    /// started before the first change.
    guardian: Option<guardian::Guardian>,
    /// Our SIGTRAP handler in the target (traphandler.rs), installed with
    /// the first int3 or debug register.
    trap: Option<traphandler::TrapHandler>,
    /// Installing it failed or is not wanted: not tried again.
    trap_refused: bool,
    /// The call in flight's record in the handler's page (callrepair.rs):
    /// left incomplete (the handler must not repair from it), the `MARK`
    /// and return slot last written, the data words' slots in use.
    trap_repair_off: bool,
    trap_repair_mark: u64,
    trap_repair_sp: u64,
    trap_repair_data: Vec<u64>,
    /// The series' data words are not all in the page's slots (more than
    /// it holds, or a write failed): the handler must not put back a part.
    trap_repair_data_off: bool,
    /// The return address of the call series in flight.
    trap_repair_ret: u64,
    /// Whether pgdbg holds the process in a group stop (hold.rs).
    hold: hold::Hold,
    /// The group stop cannot be had (the process has other threads, it
    /// failed once, or PGDBG_NO_GROUP_STOP): not tried again.
    hold_refused: bool,
    /// SIGSTOPs sent to stop the group again after someone's SIGCONT whose
    /// event stops are still to come (swallowed).
    rehold_pending: u32,
    /// The current stop is an event stop (PTRACE_EVENT_STOP), where no
    /// signal can be given with the resume.
    event_stop: bool,
    /// Someone else's job-control stop (outside.rs).
    outside: outside::Outside,
}

/// What the wait loop asks while the target runs (pgdbg's own signals,
/// deadlines, poll ticks): defined by the runtime room, below this one.
pub use crate::runtime::WaitHooks;

/// Hooks that never interrupt.
pub struct NoHooks;
impl WaitHooks for NoHooks {
    fn user_interrupt(&self) -> bool {
        false
    }
    fn terminate(&self) -> bool {
        false
    }
}

impl Target {
    /// Seize and stop `pid`.  The caller has already checked that the process
    /// exists and is a sensible target.
    pub fn attach(pid: i32) -> Result<Target> {
        Self::attach_with(pid, |_| {}, || {})
    }

    /// `attach`, with `requested` called once, right after the two
    /// requests of the seize (PTRACE_SEIZE, then PTRACE_INTERRUPT: the
    /// process cannot run another instruction of its own) or the first of
    /// them that failed: before any error is explained (which reads
    /// /proc), any file is opened, the Target is dropped or the stop is
    /// waited for.  A worker started ahead takes a new backend at a
    /// real-time priority only up to there (forks.rs).
    pub fn attach_then(pid: i32, requested: impl FnOnce()) -> Result<Target> {
        Self::attach_with(pid, |_| {}, requested)
    }

    /// `attach`, with `prepare` run on the target after the seize and
    /// before the first stop is waited for (the guardian hands over the
    /// breakpoints it restores, so a trap of one of them is recognized).
    pub(crate) fn attach_prepared(pid: i32, prepare: impl FnOnce(&mut Target)) -> Result<Target> {
        Self::attach_with(pid, prepare, || {})
    }

    fn attach_with(
        pid: i32,
        prepare: impl FnOnce(&mut Target),
        requested: impl FnOnce(),
    ) -> Result<Target> {
        // called once, on every path, as soon as the requests are made
        let mut requested = Some(requested);
        let mut requests_done = || {
            if let Some(f) = requested.take() {
                f();
            }
        };
        // a process found stopped stays stopped: never continued by pgdbg
        let found_stopped = hold::proc_state(pid) == Some('T');
        let pid = Pid::from_raw(pid);
        if let Err(e) = ptrace::seize(pid, ptrace::Options::empty()) {
            requests_done();
            return Err(match e {
                Errno::EPERM => anyhow!("{}", permission::seize_refused(pid.as_raw())),
                Errno::ESRCH => {
                    anyhow!("no process with PID {pid}: check the PID (pg_stat_activity.pid)")
                }
                e => anyhow!("cannot attach to process {pid}: {e}"),
            });
        }
        let mut t = Target {
            pid,
            inserted: BTreeMap::new(),
            deferred: VecDeque::new(),
            taken_signals: 0,
            unreaped: false,
            delivering: 0,
            pending_fault: None,
            holding_signals: false,
            signal_word: None,
            interrupts_outstanding: 0,
            stale_interrupts: 0,
            gone: false,
            stopped_since: None,
            stopped_before: std::time::Duration::ZERO,
            calls_time: std::time::Duration::ZERO,
            stopped: false,
            runs: 0,
            debugregs_dirty: false,
            attached: true,
            regs_cache: std::cell::Cell::new(None),
            int3_sigtrap_live: false,
            code_cache: std::collections::HashMap::new(),
            // opened once the requests are made
            mem: None,
            detours: Vec::new(),
            undone_jumps: Vec::new(),
            guardian: None,
            trap: None,
            trap_refused: false,
            trap_repair_off: false,
            trap_repair_data_off: false,
            trap_repair_mark: 0,
            trap_repair_sp: 0,
            trap_repair_data: Vec::new(),
            trap_repair_ret: 0,
            hold: if found_stopped {
                hold::Hold::Found
            } else {
                hold::Hold::No
            },
            hold_refused: false,
            rehold_pending: 0,
            event_stop: false,
            outside: outside::Outside::default(),
        };
        prepare(&mut t);
        let asked = t.interrupt();
        // (before a failure drops the Target, which waits for the stop)
        requests_done();
        asked?;
        t.mem = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{}/mem", pid.as_raw()))
            .ok();
        match t.wait(&NoHooks)? {
            Stop::Interrupted => {}
            Stop::Exited(c) => bail!("process {pid} exited (status {c}) while attaching"),
            Stop::Killed(s) => bail!("process {pid} was killed by {s:?} while attaching"),
            other => {
                // A fault at the moment of attach: keep it for delivery.
                log::debug(&format!("attach stop: {other:?}"));
            }
        }
        Ok(t)
    }

    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    pub fn is_gone(&self) -> bool {
        self.gone
    }

    /// While stopped: whether it was killed meanwhile (SIGKILL ends a
    /// ptrace stop), waited for at once (never blocks): its parent hears
    /// of its end only once its tracer has waited for it.
    pub fn reap_if_killed(&mut self) -> bool {
        if self.gone || !self.attached {
            return self.gone;
        }
        match waitpid(self.pid, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => {
                self.mark_gone();
                true
            }
            _ => false,
        }
    }

    /// Changes each time the target runs (see `set_running`).
    pub fn run_count(&self) -> u64 {
        self.runs
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// The time the target has spent stopped under pgdbg, the current stop
    /// included: the difference over a command is the stop it cost.
    pub fn stopped_time(&self) -> std::time::Duration {
        self.stopped_before
            + self
                .stopped_since
                .map_or(std::time::Duration::ZERO, |t| t.elapsed())
    }

    /// The time the target did none of its own work because of pgdbg:
    /// stopped, or running pgdbg's inferior calls.  The difference over a
    /// command is what it cost the backend.
    pub fn lost_time(&self) -> std::time::Duration {
        self.stopped_time() + self.calls_time
    }

    /// Account for `d` spent running an inferior call.
    pub fn add_call_time(&mut self, d: std::time::Duration) {
        self.calls_time += d;
    }

    fn mark_stopped(&mut self) {
        self.stopped = true;
        self.stopped_since
            .get_or_insert_with(std::time::Instant::now);
    }

    /// Interrupt, unless an interrupt whose stop has not been seen is
    /// already pending (the kernel merges them: a second one would be
    /// counted but never stop the target); then adopt that one.
    fn interrupt_or_adopt(&mut self) -> Result<()> {
        if self.stale_interrupts > 0 {
            self.stale_interrupts -= 1;
            self.interrupts_outstanding += 1;
            return Ok(());
        }
        if self.interrupts_outstanding > 0 {
            self.adopt_relisten();
            return Ok(());
        }
        self.interrupt()
    }

    /// The event stop of one of our PTRACE_INTERRUPTs was seen while a
    /// loop of our own was waiting for something else: account for it.
    /// `sig` is what the event stop reports (outside.rs: SIGTRAP when no
    /// group stop is in effect): SIGTRAP with no interrupt of pgdbg's in
    /// flight is the kernel's notice of a SIGCONT, which ended any stop of
    /// someone else's and is no re-hold stop of pgdbg's either.
    fn interrupt_stop_seen(&mut self, sig: Signal) {
        if sig == Signal::SIGTRAP {
            self.outside_continued();
            if self.stale_interrupts == 0 && self.interrupts_outstanding == 0 {
                return;
            }
        }
        if self.stale_interrupts > 0 {
            self.stale_interrupts -= 1;
        } else if self.interrupts_outstanding > 0 {
            self.interrupts_outstanding -= 1;
        } else if self.rehold_pending > 0 {
            self.rehold_pending -= 1;
        }
    }

    /// Ask a running target to stop (PTRACE_INTERRUPT).
    pub fn interrupt(&mut self) -> Result<()> {
        if self.gone {
            return Ok(());
        }
        ptrace::interrupt(self.pid).context("PTRACE_INTERRUPT")?;
        self.interrupts_outstanding += 1;
        Ok(())
    }

    // ------------------------------------------------------------- registers

    pub fn regs(&self) -> Result<Registers> {
        if self.stopped
            && let Some(r) = self.regs_cache.get()
        {
            return Ok(r);
        }
        let r = ptrace::getregs(self.pid).map_err(|e| anyhow!("cannot read registers ({e})"))?;
        let r = Registers::from_user(&r);
        if self.stopped {
            self.regs_cache.set(Some(r));
        }
        Ok(r)
    }

    pub fn set_regs(&mut self, regs: &Registers) -> Result<()> {
        self.regs_cache.set(None);
        ptrace::setregs(self.pid, regs.to_user())
            .map_err(|e| anyhow!("cannot write registers ({e})"))?;
        if self.stopped {
            self.regs_cache.set(Some(*regs));
        }
        if self.int3_sigtrap_live {
            // after the write: `rip` on the int3 with the SIGTRAP still
            // saying int3 is a state the handler gets right, `rip` one past
            // it with the SIGTRAP re-labelled is not
            self.int3_sigtrap_live = false;
            self.defuse_pending_trap()?;
        }
        Ok(())
    }

    /// Read the registers from the kernel (not the cache) and check that
    /// what matters to the target's code equals `want`: every general
    /// register, rip, `orig_rax` (a restarted system call), the FS/GS bases
    /// (thread-local storage) and the arithmetic flags.
    pub fn check_regs_read_back(&self, want: &Registers) -> Result<()> {
        let r =
            ptrace::getregs(self.pid).map_err(|e| anyhow!("cannot read registers back ({e})"))?;
        let got = Registers::from_user(&r);
        const ARITH_FLAGS: u64 = 0xcd5; // CF PF AF ZF SF DF OF
        let mut a = got;
        let mut b = *want;
        for x in [&mut a, &mut b] {
            x.eflags &= ARITH_FLAGS;
            (x.cs, x.ss, x.ds, x.es, x.fs, x.gs) = (0, 0, 0, 0, 0, 0);
        }
        if a != b {
            bail!("the registers read back after writing them differ: {got:x?} (wanted {want:x?})");
        }
        Ok(())
    }

    pub fn fpregs(&self) -> Result<libc::user_fpregs_struct> {
        let mut fp: libc::user_fpregs_struct = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_GETFPREGS,
                self.pid.as_raw(),
                std::ptr::null_mut::<libc::c_void>(),
                &mut fp as *mut _ as *mut libc::c_void,
            )
        };
        if r < 0 {
            bail!("cannot read FP registers ({})", Errno::last());
        }
        Ok(fp)
    }

    pub fn set_fpregs(&mut self, fp: &libc::user_fpregs_struct) -> Result<()> {
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETFPREGS,
                self.pid.as_raw(),
                std::ptr::null_mut::<libc::c_void>(),
                fp as *const _ as *mut libc::c_void,
            )
        };
        if r < 0 {
            bail!("cannot write FP registers ({})", Errno::last());
        }
        Ok(())
    }

    /// Write debug register `n` (0-7).
    pub fn set_debugreg(&mut self, n: usize, value: u64) -> Result<()> {
        let off = debugreg_offset(n);
        if n == 7
            && value != 0
            && let Some(g) = self.guardian()?
        {
            g.note_debugregs(true);
        }
        if n == 7 && value != 0 {
            self.ensure_trap_handler();
            self.hold_for_change()?;
        }
        ptrace::write_user(self.pid, off as ptrace::AddressType, value as i64)
            .map_err(|e| anyhow!("cannot write debug register {n} ({e})"))?;
        if n == 7 {
            self.debugregs_dirty = value != 0;
            if value == 0
                && let Some(g) = &mut self.guardian
            {
                g.note_debugregs(false);
            }
        }
        Ok(())
    }

    /// Arm debug-register slot `slot` (0-3) as a write watchpoint of
    /// `len` bytes (1, 2, 4, 8; naturally aligned) at `addr`.  DR0-3 are
    /// written before DR7, as the hardware wants.
    pub fn set_write_watchpoint(&mut self, slot: usize, addr: u64, len: u64) -> Result<()> {
        if slot > 3 {
            bail!("only 4 hardware watchpoints exist");
        }
        if !addr.is_multiple_of(len) {
            bail!("a {len}-byte watchpoint must be {len}-byte aligned ({addr:#x} is not)");
        }
        let len_bits = match len {
            1 => 0b00,
            2 => 0b01,
            4 => 0b11,
            8 => 0b10,
            _ => bail!("watchpoint length must be 1, 2, 4 or 8"),
        };
        self.set_debugreg(slot, addr)?;
        let mut dr7 = self.debugreg(7).unwrap_or(0);
        let shift = 16 + slot * 4;
        dr7 &= !(0b1111u64 << shift);
        dr7 |= (0b01u64 | (len_bits << 2)) << shift; // RW = write
        dr7 |= 1 << (slot * 2); // local enable
        self.set_debugreg(7, dr7)?;
        Ok(())
    }

    /// Disable every watchpoint (DR7 first, then DR0-3).
    pub fn clear_watchpoints(&mut self) -> Result<()> {
        if !self.debugregs_dirty || self.gone {
            return Ok(());
        }
        self.set_debugreg(7, 0)?;
        // only the slots that hold an address: writing one that was never
        // used makes the kernel reserve a breakpoint slot for the thread
        // until it exits (perf and BPF watchpoints on the backend would
        // then find none free)
        for n in 0..4 {
            if self.debugreg(n).is_ok_and(|v| v != 0) {
                let _ = self.set_debugreg(n, 0);
            }
        }
        self.drain_sigtrap()
    }

    pub fn debugreg(&self, n: usize) -> Result<u64> {
        let off = debugreg_offset(n);
        let v = ptrace::read_user(self.pid, off as ptrace::AddressType)
            .map_err(|e| anyhow!("cannot read debug register {n} ({e})"))?;
        Ok(v as u64)
    }

    // -------------------------------------------------------------- running

    /// Resume the target (delivering any deferred signal) and wait for the
    /// next stop the user should see.  Breakpoint stepping is the caller's
    /// business: call `step_over_breakpoint` first when `rip` sits on one.
    pub fn cont_and_wait(&mut self, hooks: &dyn WaitHooks) -> Result<Stop> {
        self.resume()?;
        self.wait(hooks)
    }

    /// The signal to deliver with the next resume (a fault the user saw,
    /// else the first deferred one); any further deferred signals are
    /// re-sent to the target with kill(2).
    fn signal_to_deliver(&mut self) -> Option<Signal> {
        if self.holding_signals {
            // kept (and recorded) until the holder lets them go
            return None;
        }
        let sig = self
            .pending_fault
            .take()
            .or_else(|| self.deferred.pop_front());
        while let Some(s) = self.deferred.pop_front() {
            if s == Signal::SIGCONT && self.sigcont_to_handler() {
                // its effect came when it was sent (selfrelease.rs)
                continue;
            }
            // (someone's stop signal sent again is known for theirs when
            // it is reported: outside.rs)
            let _ = nix::sys::signal::kill(self.pid, s);
        }
        // (the record is cleared once the resume has carried the signal)
        if self.event_stop
            && let Some(s) = sig
        {
            // the kernel ignores a signal given with the resume from an
            // event stop (our interrupt, the group stop): queued again,
            // it is reported and passed through as usual
            if s != Signal::SIGCONT || !self.sigcont_to_handler() {
                let _ = nix::sys::signal::kill(self.pid, s);
            }
            return None;
        }
        if let Some(s) = sig {
            // delivered with the resume: someone's stop signal starts
            // their group stop without a signal-delivery stop of its own
            self.outside_delivered(s);
        }
        sig
    }

    /// Resume the target (delivering any deferred signal) without waiting;
    /// `wait` collects the next stop.
    pub fn resume(&mut self) -> Result<()> {
        self.before_resume();
        let sig = self.signal_to_deliver();
        if self.resume_into_outside_stop(sig)? {
            return Ok(());
        }
        self.rehold_before(sig);
        let sig = self.deliverable(sig);
        ptrace::cont(self.pid, sig)
            .map_err(|e| anyhow!("cannot resume process {} ({e})", self.pid))?;
        self.set_running();
        self.note_held_signals();
        Ok(())
    }

    /// `sig` as it may be delivered: a SIGCONT is not while our SIGCONT
    /// handler is in place (selfrelease.rs: its effect, ending the group
    /// stop, came when it was sent; the re-hold has seen it).
    fn deliverable(&self, sig: Option<Signal>) -> Option<Signal> {
        sig.filter(|s| *s != Signal::SIGCONT || !self.sigcont_to_handler())
    }

    /// Before the target runs: the group stop entered or left as what
    /// pgdbg has in the target needs (hold.rs).
    fn before_resume(&mut self) {
        self.update_hold();
    }

    fn siginfo_code(&self) -> Option<i32> {
        ptrace::getsiginfo(self.pid).ok().map(|si| si.si_code)
    }

    /// The target runs (or is gone): cached registers are stale, and so is
    /// whatever a caller derived from this stop (`run_count` moves on).
    fn set_running(&mut self) {
        self.runs = self.runs.wrapping_add(1);
        self.stopped = false;
        // a resume ended the stop `take_status` saw: nothing left to take
        self.unreaped = false;
        if let Some(t) = self.stopped_since.take() {
            self.stopped_before += t.elapsed();
        }
        self.regs_cache.set(None);
        self.int3_sigtrap_live = false;
        self.event_stop = false;
    }

    fn mark_gone(&mut self) {
        self.gone = true;
        self.set_running();
        self.attached = false;
        self.inserted.clear();
        self.trap = None;
        if let Some(g) = &mut self.guardian {
            g.forget_all();
        }
    }

    /// Make sure the target is stopped (interrupting it if it runs).
    pub fn ensure_stopped(&mut self) -> Result<Option<Stop>> {
        if self.stopped || self.gone {
            return Ok(None);
        }
        // an interrupt still in flight (its stop lost the race against an
        // earlier one) is adopted: the kernel would merge a second one into
        // it, and its stop, swallowed as stale, would leave this wait alone
        self.interrupt_or_adopt()?;
        let s = self.wait(&NoHooks)?;
        Ok(Some(s))
    }

    /// Take the signals waiting for delivery (a call must not receive
    /// them); give them back with `restore_pending_signals`.
    pub fn take_pending_signals(&mut self) -> (Option<Signal>, VecDeque<Signal>) {
        // still held back while the caller keeps them: still recorded
        self.taken_signals = signal_mask(&self.deferred);
        (
            self.pending_fault.take(),
            std::mem::take(&mut self.deferred),
        )
    }

    pub fn restore_pending_signals(&mut self, p: (Option<Signal>, VecDeque<Signal>)) {
        self.pending_fault = p.0;
        let mut d = p.1;
        d.extend(self.deferred.drain(..));
        self.deferred = d;
        self.taken_signals = 0;
        self.note_held_signals();
    }

    /// Hold `sig` back for the next resume; recorded for the guardian
    /// first, which sends it again if pgdbg dies before delivering it.
    fn defer(&mut self, sig: Signal) {
        self.outside_deferred(sig);
        // as the kernel does when they are sent: a SIGCONT discards the
        // stop signals not delivered yet, a stop signal the SIGCONTs;
        // delivered later in the other order, the backend would end
        // stopped although continued last (or the reverse)
        if sig == Signal::SIGCONT {
            self.deferred.retain(|s| !outside::is_stop_signal(*s));
        } else if outside::is_stop_signal(sig) {
            self.deferred.retain(|s| *s != Signal::SIGCONT);
        }
        self.deferred.push_back(sig);
        self.note_held_signals();
        // recorded: now the kernel's copy may go (wait.rs `take_status`)
        self.reap_seen_stop();
    }

    /// The signals held back now, with those a killed pgdbg held back
    /// (the guardian's record) until they are sent.
    fn held_signal_mask(&self) -> u64 {
        let before = self.signal_word.as_ref().map_or(0, |w| w.before);
        signal_mask(&self.deferred) | self.taken_signals | self.delivering | before
    }

    fn note_held_signals(&mut self) {
        let mask = signal_mask(&self.deferred) | self.taken_signals | self.delivering;
        // the handler's page first (selfrelease.rs: never released
        // without them); if that fails, the pipe no longer releases the
        // backend at all (a signal already held cannot be refused)
        if let Err(e) = self.note_release_signals(self.held_signal_mask())
            && let Err(e) = self.disarm_self_release(e)
        {
            log::debug(&format!("{e:#}"));
        }
        if let Some(g) = &mut self.guardian {
            g.note_signals(mask);
        }
        if let Some(w) = &self.signal_word {
            w.note(mask);
        }
    }

    /// Hold every signal back from now on (`on`), each recorded when it
    /// is deferred, or let them go again: the next resume or the detach
    /// delivers them (the first with it, the others sent with kill(2)).
    pub(super) fn hold_signals_back(&mut self, on: bool) {
        self.holding_signals = on;
    }

    /// The signals held back now, named (for a message).
    pub(super) fn held_signals(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for s in &self.deferred {
            if !v.iter().any(|n| n == s.as_str()) {
                v.push(s.as_str().to_string());
            }
        }
        v
    }

    /// Discard a fault signal instead of delivering it.
    pub fn discard_pending_fault(&mut self) {
        self.pending_fault = None;
    }

    /// Whether the kernel holds a SIGTRAP for the target that it has not
    /// delivered yet (/proc/PID/status SigPnd/ShdPnd).
    fn sigtrap_pending(&self) -> bool {
        self.signal_pending(Signal::SIGTRAP)
    }

    /// Whether the kernel holds `sig` for the target, not delivered yet.
    fn signal_pending(&self, sig: Signal) -> bool {
        let Ok(st) = std::fs::read_to_string(format!("/proc/{}/status", self.pid)) else {
            return false;
        };
        let bit = 1u64 << (sig as i32 - 1);
        st.lines().any(|l| {
            (l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
                && u64::from_str_radix(l.split_whitespace().nth(1).unwrap_or("0"), 16).unwrap_or(0)
                    & bit
                    != 0
        })
    }

    /// Consume a SIGTRAP the kernel still holds for the target (a
    /// watchpoint that fired as we stopped it): let it be reported to us
    /// and drop it, so it is not delivered after we detach.
    pub fn drain_sigtrap(&mut self) -> Result<()> {
        for _ in 0..8 {
            if self.gone || !self.stopped || !self.sigtrap_pending() {
                return Ok(());
            }
            self.cont_raw(None)?;
            match self.waitpid_blocking()? {
                WaitStatus::Exited(_, _) | WaitStatus::Signaled(_, _, _) => {
                    self.mark_gone();
                    return Ok(());
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.mark_stopped();
                    // rewind if it was one of our int3s after all
                    if let Some(bp) = self.int3_behind_rip()? {
                        self.int3_sigtrap_live = true;
                        self.rewind_to(bp)?;
                    }
                }
                WaitStatus::Stopped(_, sig) => {
                    self.mark_stopped();
                    // a jump's SIGILL (`jumpover.rs`) is dropped, not held
                    if !self.fault_in_taken_over_jump(sig)? {
                        self.defer(sig);
                    }
                }
                WaitStatus::PtraceEvent(_, sig, _) => {
                    self.mark_stopped();
                    self.event_stop = true;
                    self.interrupt_stop_seen(sig);
                }
                _ => self.mark_stopped(),
            }
        }
        Ok(())
    }

    /// Restore every code byte and debug register and detach.  Safe to call
    /// more than once and on a dead target.
    /// Let go without restoring anything (the guardian found another
    /// process under the PID): records dropped, a signal kept at attach
    /// delivered.
    pub(super) fn detach_untouched(&mut self) -> Result<()> {
        self.inserted.clear();
        self.debugregs_dirty = false;
        self.detours.clear();
        self.undone_jumps.clear();
        self.trap = None;
        if !self.attached || self.gone {
            return Ok(());
        }
        self.attached = false;
        let sig = self.signal_to_deliver();
        self.set_running();
        match ptrace::detach(self.pid, sig) {
            Ok(()) | Err(Errno::ESRCH) => {
                self.note_held_signals();
                self.release_hold();
                Ok(())
            }
            Err(e) => Err(anyhow!("cannot detach from process {} ({e})", self.pid)),
        }
    }

    pub fn detach(&mut self) -> Result<()> {
        if !self.attached || self.gone {
            self.attached = false;
            return Ok(());
        }
        if !self.stopped {
            self.ensure_stopped()?;
            if self.gone {
                return Ok(());
            }
        }
        let mut first_err: Option<anyhow::Error> = None;
        // A SIGTRAP still queued for one of our int3s: take it while the
        // breakpoint is known, so rip is rewound (drained again below).
        // Before any injected system call, which would swallow it.
        if let Some(bp) = self.int3_behind_rip()?
            && self.sigtrap_pending()
        {
            self.rewind_to(bp)?;
        }
        // then the pipe's read end (selfrelease.rs): a death of pgdbg
        // from here on leaves the backend stopped for the guardian
        if let Err(e) = self.remove_self_release() {
            first_err.get_or_insert(e);
        }
        if let Err(e) = self.remove_all_detours() {
            first_err.get_or_insert(e);
        }
        let addrs: Vec<u64> = self.inserted.keys().copied().collect();
        for a in addrs {
            // an int3 of ours is there, or the code it was in went away (a
            // library unloaded before pgdbg saw it, or pgdbg died first and
            // this is the guardian): then the old byte belongs to nothing
            // mapped now and is not written
            if self.byte_in_target(a) != Some(INT3) {
                log::debug(&format!(
                    "{a:#x}: no int3 there any more (unmapped or replaced); original byte not written"
                ));
                self.forget_breakpoint(a);
                continue;
            }
            if let Err(e) = self.remove_breakpoint(a) {
                first_err.get_or_insert(e);
            }
        }
        if self.debugregs_dirty {
            if let Err(e) = self.set_debugreg(7, 0) {
                first_err.get_or_insert(e);
            }
            for n in 0..4 {
                let _ = self.set_debugreg(n, 0);
            }
        }
        // so would a SIGILL of a jump a uprobe took over (`jumpover.rs`):
        // taken while the undone jumps are known, and dropped
        if let Err(e) = self.drain_sigill() {
            first_err.get_or_insert(e);
        }
        // a SIGTRAP the kernel still holds would kill the backend after
        // we leave: take it now
        if let Err(e) = self.drain_sigtrap() {
            first_err.get_or_insert(e);
        }
        // our SIGTRAP handler last: nothing of ours can trap any more
        if let Err(e) = self.remove_trap_handler() {
            first_err.get_or_insert(e);
        }
        self.deferred.retain(|s| *s != Signal::SIGTRAP);
        self.note_held_signals();
        if self.pending_fault == Some(Signal::SIGTRAP) {
            self.pending_fault = None;
        }
        let sig = self.signal_to_deliver();
        if self.gone {
            self.attached = false;
            return Ok(());
        }
        let detached = match ptrace::detach(self.pid, sig) {
            Ok(()) => true,
            Err(Errno::ESRCH) => {
                // not in a ptrace stop any more: killed meanwhile.  Its
                // parent hears of its end only once its tracer has waited
                // for it (a parallel worker's leader waits for that)
                let _ = waitpid(self.pid, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL));
                true
            }
            Err(e) => {
                first_err.get_or_insert(anyhow!("PTRACE_DETACH failed ({e})"));
                false
            }
        };
        self.attached = false;
        self.set_running();
        if detached {
            // the detach carried the held-back signal (the others were sent)
            self.note_held_signals();
        }
        // the group stop last, once untraced: the target runs on.  Not when
        // something was not restored: the backend then stays stopped, and
        // the guardian (not told all is clean, its pipe closed by finish
        // below) restores it and sends the SIGCONT
        if detached && first_err.is_none() {
            self.release_hold();
        }
        if let Some(g) = &mut self.guardian {
            // clean when everything was restored; else it tries again
            g.finish();
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.attached && !self.gone {
            let _ = self.detach();
        }
    }
}

/// Bit N-1 for each signal N.
fn signal_mask(sigs: &VecDeque<Signal>) -> u64 {
    sigs.iter().fold(0, |m, s| m | 1u64 << (*s as i32 - 1))
}

fn debugreg_offset(n: usize) -> usize {
    std::mem::offset_of!(libc::user, u_debugreg) + n * 8
}

/// Minimal debug logging, enabled with PGDBG_DEBUG=1.
pub mod log {
    pub fn debug(msg: &str) {
        if crate::config::get().debug {
            crate::errln!("pgdbg-debug: {msg}");
        }
    }
}
