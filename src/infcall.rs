//! Inferior calls: run a function inside the stopped target, following
//! gdb's amd64 procedure.
//!
//! * all registers are saved, including the whole xstate (FP/SSE/AVX/AVX-512/
//!   AMX, sized by the kernel: `inferior::xstate`), `orig_rax`, the FS/GS bases
//!   and armed debug registers; a save that is not whole refuses the call
//!   before anything changed; `orig_rax = -1` while calling so an
//!   interrupted system call is not restarted at the injected pc; debug
//!   registers are disarmed while the call runs; everything is put back at
//!   the end and read back to check it;
//! * the call runs on the target's own stack, below the red zone, 16-byte
//!   aligned (`rsp % 16 == 8` at function entry), with a scratch area above
//!   the frames for data the calls need (strings, out-parameters);
//! * the return address is the ELF entry point (`_start`, never executed
//!   again), where an int3 waits;
//! * the target's other breakpoints are lifted during calls;
//! * a timeout (or Ctrl-C) interrupts a call that does not return, a fault
//!   inside the call abandons it, signals the target lives on are passed
//!   through; `traps` are extra addresses (e.g. an error handler) that end a
//!   call as `CallOutcome::Trapped`.
//!
//! No PostgreSQL knowledge here: `postgres::call` adds the backend guards.

use crate::arch::abi;
use crate::inferior::xstate::XState;
use crate::inferior::{Registers, Stop, Target};
use crate::runtime;
use anyhow::{Result, anyhow, bail};
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub enum Arg {
    Int(u64),
    Double(f64),
}

#[derive(Debug, Clone, Copy)]
pub struct CallResult {
    pub rax: u64,
    pub xmm0: f64,
}

#[derive(Debug, Clone)]
pub enum CallOutcome {
    Returned(CallResult),
    /// Stopped at one of the trap addresses (registers at the trap).
    Trapped {
        addr: u64,
        regs: Registers,
    },
    /// Did not return in time (or Ctrl-C): abandoned.
    TimedOut,
    /// A fault (SIGSEGV...) inside the call: abandoned, signal discarded.
    Faulted(String),
}

/// A series of calls with the target's state saved once and restored at
/// `finish` (or on drop).
pub struct CallFrame<'t> {
    target: &'t mut Target,
    saved_regs: Registers,
    saved_xstate: XState,
    /// DR0-3 and DR7 when a watchpoint was armed: disarmed during calls.
    saved_debugregs: Option<[u64; 5]>,
    lifted: Vec<u64>,
    ret_addr: u64,
    inserted_ret: bool,
    traps: Vec<u64>,
    scratch_top: u64,
    scratch_next: u64,
    stack_top: u64,
    finished: bool,
    pub timeout: Duration,
    /// Signals that were waiting for delivery: kept away from the calls.
    held_signals: Option<(
        Option<nix::sys::signal::Signal>,
        std::collections::VecDeque<nix::sys::signal::Signal>,
    )>,
    /// Stack pointer of the call in progress (for `resume`).
    call_sp: u64,
}

impl<'t> CallFrame<'t> {
    /// Save the state of a stopped target.  `ret_addr` is where calls
    /// return to (the runtime ELF entry point); `traps` end a call early.
    pub fn begin(
        target: &'t mut Target,
        ret_addr: u64,
        traps: &[u64],
        timeout: Duration,
    ) -> Result<CallFrame<'t>> {
        if !target.is_stopped() || target.is_gone() {
            bail!("the backend must be stopped to call a function in it");
        }
        // the SIGTRAP handler first (its install injects system calls): its
        // page keeps the record from which a call repairs itself when
        // pgdbg and its guardian are both gone (inferior/callrepair.rs).
        // Before the group stop: its system calls return through a signal
        // frame (inferior/sigframe.rs) and need none, and until the pipe
        // that ends a stop when every pgdbg process is gone exists
        // (inferior/selfrelease/), a death would leave the backend stopped
        target.prepare_call_repair();
        target.hold_for_change()?;
        let saved_regs = target.regs()?;
        let saved_xstate = XState::save(target.pid())
            .map_err(|e| anyhow!("{e:#}; the backend was not changed"))?;
        let dr7 = target.debugreg(7)?;
        let saved_debugregs = if dr7 != 0 {
            let mut d = [0u64; 5];
            for (n, slot) in d.iter_mut().take(4).enumerate() {
                *slot = target.debugreg(n)?;
            }
            d[4] = dr7;
            // disarmed first: a call that writes a watched word must not
            // stop in it
            target.set_debugreg(7, 0)?;
            Some(d)
        } else {
            None
        };
        let held_signals = Some(target.take_pending_signals());
        // Lift every breakpoint so the call runs the original code.
        let lifted = target.inserted_addresses();
        for &a in &lifted {
            target.remove_breakpoint(a)?;
        }
        // for the guardian, before the registers change: if pgdbg dies
        // while the calls run, it finishes or abandons them and puts these
        // back (forgotten by `restore`, which dropping `f` runs)
        if let Err(e) =
            target.note_call_in_flight(&saved_regs, &saved_xstate, ret_addr, traps, timeout)
        {
            // no call: what was taken above goes back (the held-back
            // signals to be delivered, the breakpoints, the debug registers)
            if let Some(p) = held_signals {
                target.restore_pending_signals(p);
            }
            for &a in &lifted {
                if let Err(e) = target.insert_breakpoint(a) {
                    crate::inferior::log::debug(&format!("{e:#}"));
                }
            }
            if let Some(d) = saved_debugregs {
                for (n, v) in d.iter().take(4).enumerate() {
                    let _ = target.set_debugreg(n, *v);
                }
                let _ = target.set_debugreg(7, d[4]);
            }
            return Err(e);
        }
        let mut f = CallFrame {
            target,
            saved_regs,
            saved_xstate,
            saved_debugregs,
            lifted,
            ret_addr,
            inserted_ret: false,
            traps: traps.to_vec(),
            scratch_top: 0,
            scratch_next: 0,
            stack_top: 0,
            finished: false,
            timeout,
            held_signals,
            call_sp: 0,
        };
        f.target.insert_breakpoint(ret_addr)?;
        f.inserted_ret = true;
        for &t in traps {
            f.target.insert_breakpoint(t)?;
        }
        // red zone + as much margin; a 4 KiB scratch area; frames below it
        let base = (saved_regs.rsp - 2 * abi::RED_ZONE) & !(abi::STACK_ALIGN - 1);
        f.scratch_top = base;
        f.scratch_next = base - 4096;
        f.stack_top = (base - 4096 - 64) & !(abi::STACK_ALIGN - 1);
        Ok(f)
    }

    /// Copy bytes into the scratch area; returns their address.
    pub fn push_bytes(&mut self, data: &[u8]) -> Result<u64> {
        let len = (data.len() as u64 + 15) & !15;
        if self.scratch_next + len > self.scratch_top {
            bail!("scratch area full");
        }
        let a = self.scratch_next;
        self.target.write(a, data)?;
        self.scratch_next += len;
        Ok(a)
    }

    pub fn push_cstr(&mut self, s: &str) -> Result<u64> {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        self.push_bytes(&b)
    }

    pub fn target(&mut self) -> &mut Target {
        self.target
    }

    /// Call `func(args)`; integer/pointer args in rdi, rsi, rdx, rcx, r8,
    /// r9, doubles in xmm0-7.
    pub fn call(&mut self, func: u64, args: &[Arg]) -> Result<CallOutcome> {
        let ints: Vec<u64> = args
            .iter()
            .filter_map(|a| if let Arg::Int(v) = a { Some(*v) } else { None })
            .collect();
        let dbls: Vec<f64> = args
            .iter()
            .filter_map(|a| {
                if let Arg::Double(v) = a {
                    Some(*v)
                } else {
                    None
                }
            })
            .collect();
        if ints.len() > abi::INT_ARGS.len() || dbls.len() > abi::FLOAT_ARGS {
            bail!("too many arguments (at most 6 integer/pointer and 8 double)");
        }
        let mut r = self.saved_regs;
        let sp = self.stack_top - 8; // return address slot; sp % 16 == 8
        self.target.write(sp, &self.ret_addr.to_le_bytes())?;
        r.rsp = sp;
        r.rip = func;
        r.orig_rax = u64::MAX;
        r.rax = dbls.len() as u64;
        for (g, v) in abi::INT_ARGS.iter().zip(ints.iter()) {
            *r.get_mut(*g) = *v;
        }
        // from here the registers are the call's: the guardian would run
        // it to its return before putting the saved ones back; the
        // handler's record gets the return slot, then its mark
        self.target.note_call_return_slot(sp);
        self.target.call_registers_coming()?;
        crate::config::pause_for_tests("call-setup");
        self.target.call_in_flight_phase(true);
        self.target.set_regs(&r)?;
        self.target.call_regs_written();
        if !dbls.is_empty() {
            let mut fp = self.target.fpregs()?;
            for (i, d) in dbls.iter().enumerate() {
                let bits = d.to_bits();
                fp.xmm_space[i * 4] = bits as u32;
                fp.xmm_space[i * 4 + 1] = (bits >> 32) as u32;
            }
            self.target.set_fpregs(&fp)?;
        }
        self.call_sp = sp;
        self.wait_call()
    }

    /// Continue a call that stopped at a trap (e.g. an error the callee
    /// catches itself).
    pub fn resume(&mut self) -> Result<CallOutcome> {
        self.wait_call()
    }

    fn wait_call(&mut self) -> Result<CallOutcome> {
        let sp = self.call_sp;
        let deadline = runtime::Deadline::arm(self.timeout);
        let outcome = loop {
            let rip = self.target.regs()?.rip;
            if self.target.breakpoint_inserted(rip)
                && let Some(stop) = self.target.step_over_breakpoint(rip)?
            {
                match stop {
                    Stop::Signal(sig) => {
                        self.target.discard_pending_fault();
                        break CallOutcome::Faulted(format!("the call got signal {sig:?}"));
                    }
                    Stop::Exited(c) => bail!("the backend exited (status {c}) during the call"),
                    Stop::Killed(s) => bail!("the backend was killed by {s:?} during the call"),
                    _ => {}
                }
            }
            // the time the call ran (the stopped part the target counts)
            let (t0, s0) = (std::time::Instant::now(), self.target.stopped_time());
            let stop = self.target.cont_and_wait(&runtime::CallHooks);
            let stopped = self.target.stopped_time().saturating_sub(s0);
            self.target
                .add_call_time(t0.elapsed().saturating_sub(stopped));
            let stop = stop?;
            match stop {
                Stop::Breakpoint { addr } if addr == self.ret_addr => {
                    let regs = self.target.regs()?;
                    if regs.rsp == sp + 8 {
                        let fp = self.target.fpregs()?;
                        let xmm0 = f64::from_bits(
                            fp.xmm_space[0] as u64 | ((fp.xmm_space[1] as u64) << 32),
                        );
                        break CallOutcome::Returned(CallResult {
                            rax: regs.rax,
                            xmm0,
                        });
                    }
                    // A nested return through _start cannot happen; be safe.
                    break CallOutcome::Faulted("returned to an unexpected frame".into());
                }
                Stop::Breakpoint { addr } if self.traps.contains(&addr) => {
                    let regs = self.target.regs()?;
                    break CallOutcome::Trapped { addr, regs };
                }
                Stop::Breakpoint { addr } => {
                    break CallOutcome::Faulted(format!(
                        "stopped at an unexpected breakpoint {addr:#x}"
                    ));
                }
                Stop::Interrupted => break CallOutcome::TimedOut,
                Stop::Signal(sig) => {
                    self.target.discard_pending_fault();
                    break CallOutcome::Faulted(format!("the call got signal {sig:?}"));
                }
                Stop::HardwareBreak { .. } => continue,
                Stop::Exited(c) => bail!("the backend exited (status {c}) during the call"),
                Stop::Killed(s) => bail!("the backend was killed by {s:?} during the call"),
                Stop::ToolTerminating => break CallOutcome::TimedOut,
                // never asked for here (CallHooks): let go all the same
                Stop::Exiting => {
                    let end = self.target.finish_exit()?;
                    bail!("the backend ended during the call ({end:?})")
                }
            }
        };
        drop(deadline);
        Ok(outcome)
    }

    /// Put everything back: registers, xstate, breakpoints.
    pub fn finish(mut self) -> Result<()> {
        self.restore()
    }

    fn restore(&mut self) -> Result<()> {
        if self.finished || self.target.is_gone() {
            self.finished = true;
            return Ok(());
        }
        self.finished = true;
        let mut first: Option<anyhow::Error> = None;
        let mut keep = |r: Result<()>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        // from here the guardian only puts the saved registers back
        self.target.call_in_flight_phase(false);
        crate::config::pause_for_tests("call-restore");
        keep(self.target.set_regs(&self.saved_regs));
        keep(self.target.check_regs_read_back(&self.saved_regs));
        keep(self.saved_xstate.restore(self.target.pid()));
        self.target.forget_call_in_flight();
        if let Some(d) = self.saved_debugregs.take() {
            // DR0-3 before DR7, as the hardware wants
            for (n, v) in d.iter().take(4).enumerate() {
                keep(self.target.set_debugreg(n, *v));
            }
            keep(self.target.set_debugreg(7, d[4]));
            keep(match self.target.debugreg(7) {
                Ok(v) if v == d[4] => Ok(()),
                Ok(v) => Err(anyhow!(
                    "debug register 7 reads {v:#x} after the call, {:#x} before",
                    d[4]
                )),
                Err(e) => Err(e),
            });
        }
        for t in self.traps.clone() {
            keep(self.target.remove_breakpoint(t));
        }
        if self.inserted_ret {
            keep(self.target.remove_breakpoint(self.ret_addr));
        }
        for a in self.lifted.clone() {
            keep(self.target.insert_breakpoint(a));
        }
        if let Some(p) = self.held_signals.take() {
            self.target.restore_pending_signals(p);
        }
        match first {
            Some(e) => Err(anyhow!("restoring the backend after a call: {e:#}")),
            None => Ok(()),
        }
    }
}

impl Drop for CallFrame<'_> {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}
