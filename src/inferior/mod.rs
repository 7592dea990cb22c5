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
pub mod counter;
mod detach;
pub mod detour;
mod exiting;
pub mod foreign;
pub mod gone;
pub mod guardian;
mod hold;
mod injected;
pub mod jumpover;
pub mod mappedfile;
mod memory;
pub mod newchild;
pub mod outside;
mod pending;
pub mod perfwatch;
pub mod permission;
pub mod procevents;
pub mod procfs;
pub mod recorder;
mod regaccess;
pub mod tscclock;

mod resume;
mod selfrelease;
mod sigframe;
pub mod signals;
mod state;
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

pub use crate::arch::regs::Registers;
pub use foreign::{ForeignInt3, foreign};
pub use gone::{Gone, gone};
pub use memory::read_untraced;

use crate::arch::INT3;
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
    /// The target is in its exit stop (PTRACE_EVENT_EXIT, only with
    /// `set_exit_stops` and hooks that ask for it): ending, its memory
    /// still readable.  Let it go at once with `finish_exit`.
    Exiting,
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
    /// Running, stopped (in which stop: a signal's delivery stop seen but
    /// not yet taken from the kernel, an event stop, the exit stop),
    /// detached or gone (with its end found at a reap, for the wait loop
    /// to report): changed only through state.rs.
    state: state::TraceState,
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
    /// Since when the target is stopped (None while it runs), and the time
    /// it spent stopped before that: what a command's stop cost it.
    stopped_since: Option<std::time::Instant>,
    stopped_before: std::time::Duration,
    /// Time the target ran pgdbg's inferior calls (not its own work).
    calls_time: std::time::Duration,
    /// How many times the target was let run: a stop's derived state (its
    /// frames) is valid while this has not moved.
    runs: u64,
    /// Debug registers we have modified (DR7 non-zero).
    debugregs_dirty: bool,
    /// Who holds each address slot (DR0-3) armed through `claim_watch`:
    /// a user watchpoint ("watchpoint 2"), `waits trace`'s word.
    dr_owners: [Option<String>; crate::arch::debugregs::SLOTS],
    /// Perf breakpoint events on locals (perfwatch.rs): owner and file,
    /// by index.
    perf_watches: [Option<(String, std::os::fd::OwnedFd, u64)>; perfwatch::MAX],
    /// The generation of the last one opened (perfwatch.rs `sig_data`).
    perf_generation: u64,
    /// A single step ran since `take_step_watch` (perf breakpoints' hits in
    /// it are told by the value: perfwatch.rs).
    stepped: bool,
    /// The slots (DR6 bits 0-3) that fired during single steps since the
    /// session last asked (`take_step_watch`): a step over an instruction
    /// that writes a watched address ends with the step's own SIGTRAP.
    step_dr6: u64,
    /// Registers of the current stop (valid while stopped).
    regs_cache: std::cell::Cell<Option<Registers>>,
    /// This stop is the signal-delivery stop of one of our int3s whose
    /// SIGTRAP still says "int3" (`si_code` SI_KERNEL/TRAP_BRKPT): the
    /// first register write re-labels it (traphandler.rs).  Cleared when
    /// the target runs.
    int3_sigtrap_live: bool,
    /// An int3 of ours that rip was put back onto while the SIGTRAP its
    /// execution queued for the thread was still pending (an interrupt's
    /// stop that could not take it, wait.rs): the next step over that
    /// int3 takes that SIGTRAP first (`step_over_breakpoint`).
    trap_queued_on_int3: Option<u64>,
    /// `sigtrap_stops` when `trap_queued_on_int3` was set: a SIGTRAP stop
    /// seen since (the backend ran after that trap's delivery, or it was
    /// that delivery) leaves the flag stale (pending.rs `queued_trap_flag`).
    trap_queued_since: u64,
    /// SIGTRAP stops seen (`take_status`).
    sigtrap_stops: u64,
    /// The int3 of ours whose own address is recorded as the resume point
    /// (`flag_queued_trap`: rip on it, the instruction before it run):
    /// forgotten once the step over leaves it, or at the next rewind.
    resume_point_on_int3: Option<u64>,
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
    /// Addresses where an int3 of pgdbg's was found gone at its removal
    /// (someone else wrote the code's byte back): the hits it should have
    /// reported may have been missed (`take_lost_int3s`).
    lost_int3s: Vec<u64>,
    /// Owners of the debug registers given back because the SIGTRAP
    /// handler was removed while they were armed (its table full): said
    /// by the session (`take_dropped_watches`).
    dropped_watches: Vec<String>,
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
    /// Someone else's job-control stop (outside.rs).
    outside: outside::Outside,
    /// PTRACE_O_TRACEEXIT is set (exiting.rs).
    exit_stops: bool,
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
                Errno::EPERM => permission::Refused(permission::seize_refused(pid.as_raw())).into(),
                Errno::ESRCH => Gone::NoProcessToSeize(pid.as_raw()).into(),
                e => anyhow!("cannot attach to process {pid}: {e}"),
            });
        }
        let mut t = Target {
            pid,
            inserted: BTreeMap::new(),
            deferred: VecDeque::new(),
            taken_signals: 0,
            // seized, not yet stopped (the interrupt below)
            state: state::TraceState::Running,
            delivering: 0,
            pending_fault: None,
            holding_signals: false,
            signal_word: None,
            interrupts_outstanding: 0,
            stale_interrupts: 0,
            stopped_since: None,
            stopped_before: std::time::Duration::ZERO,
            calls_time: std::time::Duration::ZERO,
            runs: 0,
            debugregs_dirty: false,
            dr_owners: Default::default(),
            perf_watches: Default::default(),
            perf_generation: 0,
            stepped: false,
            step_dr6: 0,
            regs_cache: std::cell::Cell::new(None),
            int3_sigtrap_live: false,
            trap_queued_on_int3: None,
            trap_queued_since: 0,
            sigtrap_stops: 0,
            resume_point_on_int3: None,
            code_cache: std::collections::HashMap::new(),
            // opened once the requests are made
            mem: None,
            detours: Vec::new(),
            undone_jumps: Vec::new(),
            lost_int3s: Vec::new(),
            dropped_watches: Vec::new(),
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
            outside: outside::Outside::default(),
            exit_stops: false,
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
            Stop::Exited(status) => {
                return Err(Gone::ExitedWhileAttaching {
                    pid: pid.as_raw(),
                    status,
                }
                .into());
            }
            Stop::Killed(s) => {
                return Err(Gone::KilledWhileAttaching {
                    pid: pid.as_raw(),
                    signal: format!("{s:?}"),
                }
                .into());
            }
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
        self.state.is_gone()
    }

    /// While stopped: whether it was killed meanwhile (SIGKILL ends a
    /// ptrace stop), waited for at once (never blocks): its parent hears
    /// of its end only once its tracer has waited for it.
    pub fn reap_if_killed(&mut self) -> bool {
        if !self.state.is_attached() {
            return self.state.is_gone();
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
        self.state.is_stopped()
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
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.state.is_attached() {
            let _ = self.detach();
        }
    }
}

/// Minimal debug logging, enabled with PGDBG_DEBUG=1.
pub mod log {
    pub fn debug(msg: &str) {
        if crate::config::get().debug {
            crate::runtime::sink().warn(format_args!("pgdbg-debug: {msg}"));
        }
    }
}
