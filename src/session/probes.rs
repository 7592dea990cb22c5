//! pgdbg's own breakpoints and watchpoints (probes), and the loop that
//! runs the target through their hits without stopping the user.
use super::*;

impl Session {
    /// Arm one of pgdbg's own breakpoints (used by probes such as
    /// `plancache`); counted, so nested users share an address.
    pub fn arm_internal(&mut self, addr: u64) -> Result<()> {
        if !self.internal.contains_key(&addr) {
            self.follow_library_of(addr)?;
            // no entry left behind when the int3 is refused
            self.insert_int3(addr)?;
        }
        *self.internal.entry(addr).or_insert(0) += 1;
        Ok(())
    }

    pub fn disarm_internal(&mut self, addr: u64) -> Result<()> {
        if let Some(n) = self.internal.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                self.internal.remove(&addr);
                // kept where a user breakpoint or the dynamic linker's
                // hook (library loads) has its int3 too
                self.release_int3(addr)?;
            }
        }
        Ok(())
    }

    pub fn is_internal(&self, addr: u64) -> bool {
        self.internal.contains_key(&addr)
    }

    pub(crate) fn disarm_all_internal(&mut self) -> Result<()> {
        let addrs: Vec<u64> = self.internal.keys().copied().collect();
        self.internal.clear();
        for a in addrs {
            self.release_int3(a)?;
        }
        Ok(())
    }

    /// Arm a 4-byte write watchpoint at `addr` in a free debug register
    /// (the user's watchpoints may hold others), released at the end of
    /// the probe loop.
    pub fn watch_word(&mut self, addr: u64) -> Result<()> {
        if let Some(old) = self.probe_watch.take() {
            self.target.release_watch(old)?;
        }
        let slot =
            self.target
                .claim_watch("waits trace", addr, crate::arch::debugregs::Kind::Write, 4)?;
        self.probe_watch = Some(slot);
        Ok(())
    }

    /// Physical frames as `function+offset` (ELF symbols only, no DWARF):
    /// cheap enough to take at every traced wait.
    pub fn quick_stack(&mut self, n: usize) -> Vec<String> {
        let Ok(regs) = self.target.regs() else {
            return Vec::new();
        };
        let mut cur = FrameRegs::from_regs(&regs);
        let mut out = Vec::new();
        for i in 0..n {
            let pc = cur.pc();
            if pc == 0 {
                break;
            }
            let lookup = if i == 0 { pc } else { pc - 1 };
            self.modules.cover(lookup);
            let Some(m) = self.module_for(lookup) else {
                out.push(format!("{pc:#x}"));
                break;
            };
            let name = if m.bias == self.bias {
                self.di
                    .symbol_at(lookup - self.bias)
                    .map(|(s, off)| format!("{}+{}", s.name, off + (pc - lookup)))
            } else {
                m.symbol(lookup)
                    .map(|(s, off)| format!("{s}+{}", off + (pc - lookup)))
            };
            out.push(name.unwrap_or_else(|| format!("{pc:#x}")));
            match self.unwind_one(&cur, lookup) {
                Some(caller) => cur = caller,
                None => break,
            }
        }
        out
    }

    /// The caller's registers of a physical frame (CFI only), or None at
    /// the outermost frame.
    pub(crate) fn unwind_one(&self, cur: &FrameRegs, lookup: u64) -> Option<FrameRegs> {
        let m = self.module_for(lookup)?;
        let tables = if m.bias == self.bias {
            Some(&self.di.main_unwind)
        } else {
            m.tables()
        };
        let target = &self.target;
        let read_u64 = |a: u64| target.read_u64(a).ok();
        let (caller, _) = tables?.step(cur, lookup - m.bias, &read_u64)?;
        (caller.pc() != 0 && caller.sp() > cur.sp()).then_some(caller)
    }

    /// Where the physical function of the current stop returns to: (return
    /// address, stack pointer after the return, i.e. its CFA).  While the
    /// function runs, the stack pointer stays below that.
    pub fn return_point(&self) -> Option<(u64, u64)> {
        let regs = self.target.regs().ok()?;
        let cur = FrameRegs::from_regs(&regs);
        let caller = self.unwind_one(&cur, cur.pc())?;
        // only ever a code address of a mapped module gets an int3
        self.module_for(caller.pc())?;
        Some((caller.pc(), caller.sp()))
    }

    /// Frames of the current stop with the innermost frame of `function`
    /// selected (an inlined callee starting at the same address is skipped).
    /// Only the innermost few frames are unwound (probes run this at every
    /// hit).
    pub fn select_function_frame(&mut self, function: &str) -> Result<()> {
        // LIB:FUNCTION names FUNCTION's frames
        let function =
            crate::debuginfo::library::split_library_spec(function).map_or(function, |(_, f)| f);
        let frames = self.unwind(4)?;
        let i = frames
            .iter()
            .position(|f| f.function.as_deref() == Some(function))
            .unwrap_or(0);
        let st = self.stop_state();
        st.frames = Some(frames);
        st.selected = i;
        Ok(())
    }

    /// Run the target, calling `h` at each stop on an internal breakpoint,
    /// until `h` is done, `limit` passes, Ctrl-C, a user breakpoint, or the
    /// target's end.  Internal breakpoints are all removed afterwards.
    pub fn run_probes(
        &mut self,
        h: &mut dyn ProbeHandler,
        limit: Option<std::time::Duration>,
    ) -> Result<Ran> {
        let deadline = limit.map(runtime::Deadline::arm);
        // Run on the backend's CPU while probing: a stopped backend and
        // pgdbg never compete for it, and every stop/resume becomes a local
        // context switch instead of a cross-CPU wake-up (about 5x cheaper
        // per stop on the 2-CPU machines measured; PGDBG_NO_PIN=1 disables).
        // A polling probe (the in-process recorder) stops the backend only
        // 50 times a second: its work is better done on another CPU.
        let pinned = if !crate::config::get().no_pin && h.poll_every().is_none() {
            procfs::last_cpu(self.pid).and_then(procfs::pin_to_cpu)
        } else {
            None
        };
        // a recorder's last records (an in-process counter's last count)
        // are read at the backend's exit stop (inferior/exiting.rs);
        // without it they are lost, nothing worse
        let exit_stops = h.reads_at_exit()
            && self
                .target
                .set_exit_stops(true)
                .map_err(|e| crate::inferior::log::debug(&format!("no exit stop: {e:#}")))
                .is_ok();
        let res = self.probe_loop(h, pinned.as_ref());
        if let Some(old) = &pinned {
            procfs::restore_affinity(old);
        }
        drop(deadline);
        // stopped here; else (not cleared) the detach clears it (the
        // tracer's option), and every wait until then lets an exit stop go
        let c = if exit_stops && !self.target.is_gone() {
            self.target.set_exit_stops(false)
        } else {
            Ok(())
        };
        let cleanup = if self.target.is_gone() {
            self.internal.clear();
            self.probe_watch = None;
            Ok(())
        } else {
            // all, even when one fails
            let a = self.disarm_all_internal();
            let b = match self.probe_watch.take() {
                Some(slot) => self.target.release_watch(slot),
                None => Ok(()),
            };
            a.and(b).and(c)
        };
        // frames a probe cached (a few, for its arguments) are not the stop's
        self.stop.forget();
        self.say_lost_int3s();
        self.say_dropped_watches();
        let r = res?;
        cleanup?;
        Ok(r)
    }

    /// One line per int3 of pgdbg's that someone else took out while it
    /// was armed (found at its removal): what the probe counted or showed
    /// misses the hits after that, and says so.
    pub(crate) fn say_lost_int3s(&mut self) {
        for addr in self.target.take_lost_int3s() {
            let at = match EvalEnv::symbol_for(self, addr) {
                Some(name) => format!("{name} ({addr:#x})"),
                None => format!("{addr:#x}"),
            };
            self.say(&format!(
                "pgdbg: its breakpoint at {at} was found removed by someone else (the code's byte written back over its int3: a kernel uprobe's removal at that place of the same file, by any process, or another debugger); its hits after that were not seen"
            ));
        }
    }

    /// `unpin`: pgdbg's CPU affinity before it was pinned to the
    /// backend's CPU, given back before the probe's digest at the deadline
    /// (the backend runs then: the digest is not to share its CPU).
    pub(crate) fn probe_loop(
        &mut self,
        h: &mut dyn ProbeHandler,
        unpin: Option<&libc::cpu_set_t>,
    ) -> Result<Ran> {
        let ticker = h.poll_every().map(runtime::Ticker::start);
        let poll_hooks = runtime::PollHooks {
            exit: h.reads_at_exit(),
            ..Default::default()
        };
        let hooks: &dyn crate::inferior::WaitHooks = if ticker.is_some() {
            &poll_hooks
        } else if h.reads_at_exit() {
            &runtime::ExitHooks
        } else {
            &runtime::Hooks
        };
        // resumed already (after a poll), the next stop is only waited for
        let mut running = false;
        // the probe's end at the deadline has run (`at_deadline`)
        let ended = std::cell::Cell::new(false);
        loop {
            self.hit = None;
            let stop = if running {
                running = false;
                let done = h.done();
                let hooks = EndAtDeadline::new(hooks, h, unpin, &ended);
                if done || runtime::deadline_hit() {
                    hooks.end_if_due();
                    self.target.interrupt()?;
                }
                self.target.wait(&hooks)?
            } else {
                if h.done() {
                    return Ok(Ran::new(ProbeEnd::Done, String::new()));
                }
                if runtime::deadline_hit() {
                    return Ok(Ran::new(ProbeEnd::Deadline, String::new()));
                }
                if runtime::sigint_seen() {
                    // Ctrl-C whose interrupt lost the race against a hit
                    runtime::take_interrupt();
                    let text = self.report_stop(Stop::Interrupted)?.text;
                    return Ok(Ran::new(ProbeEnd::Stopped, text));
                }
                if let Some(gone) = self.step_over_here()? {
                    return Ok(gone);
                }
                self.target
                    .cont_and_wait(&EndAtDeadline::new(hooks, h, unpin, &ended))?
            };
            match stop {
                Stop::Interrupted
                    if ticker.is_some() && !poll_hooks.user.get() && !runtime::deadline_hit() =>
                {
                    // The tick stopped the backend on one of the probe's
                    // int3s, in place before this poll: the int3 has run
                    // with its trap still queued (rewound, wait.rs; that
                    // trap taken first) or is the next instruction
                    // (another tool's uprobe just before it returns
                    // there).  That is the int3's hit, which the step over
                    // below would pass unseen: taken as one, the poll left
                    // to the next tick.  (An int3 the poll itself arms at
                    // rip: after the poll, below.)
                    if !h.done()
                        && let Some(addr) = self.internal_int3_at_rip()?
                    {
                        if let Err(end) = self.target.take_queued_trap_here()? {
                            let text = self.report_stop(end)?.text;
                            return Ok(Ran::new(ProbeEnd::TargetGone, text));
                        }
                        self.last_stop = Some(Stop::Breakpoint { addr });
                        if self.bps.scope_uses(addr)
                            && let Some(text) = self.end_left_scopes(false)?
                        {
                            return Ok(Ran::new(ProbeEnd::Stopped, text));
                        }
                        h.on_stop(self, addr)?;
                        continue;
                    }
                    self.last_stop = Some(stop);
                    let rip = self.target.regs()?.rip;
                    let int3_before = self.target.breakpoint_inserted(rip);
                    h.on_poll(self)?;
                    // the probe may want its reads more or less often now
                    if let (Some(t), Some(every)) = (&ticker, h.poll_every()) {
                        t.set_period(every);
                    }
                    if h.done() {
                        continue;
                    }
                    // An int3 the poll armed where the backend is, the
                    // backend not moved by the poll: it is at one of the
                    // probe's stop points in its own code, a call no
                    // recorder saw (the one the poll removed could not
                    // run: another tool's uprobe took its jump over).
                    // Left to trap: a hit, after the poll's report.  (One
                    // the poll moved the backend onto, out of a recorder
                    // that recorded the call, is stepped over.)
                    let trap_here = !int3_before
                        && self.target.regs()?.rip == rip
                        && self.internal_int3_at_rip()?.is_some();
                    if !trap_here && let Some(gone) = self.step_over_here()? {
                        return Ok(gone);
                    }
                    self.target.resume()?;
                    running = true;
                    if let Err(e) = h.after_poll(self) {
                        // callers expect a stopped target
                        let _ = self.target.ensure_stopped();
                        return Err(e);
                    }
                }
                Stop::Breakpoint { addr } if self.bps.scope_uses(addr) && !self.bps.uses(addr) => {
                    // where a watched local's frame returns: the probe
                    // ends there when the frame is gone
                    self.last_stop = Some(stop);
                    if let Some(text) = self.end_left_scopes(false)? {
                        return Ok(Ran::new(ProbeEnd::Stopped, text));
                    }
                    if self.internal.contains_key(&addr) {
                        h.on_stop(self, addr)?;
                    }
                }
                Stop::Breakpoint { addr }
                    if self.internal.contains_key(&addr) && !self.bps.uses(addr) =>
                {
                    self.last_stop = Some(stop);
                    h.on_stop(self, addr)?;
                }
                Stop::HardwareBreak { dr6 } => {
                    self.last_stop = Some(stop.clone());
                    // the probe's own slot, told as slot 0 (the one bit
                    // it knows)
                    if let Some(slot) = self.probe_watch
                        && dr6 & (1 << slot) != 0
                    {
                        h.on_watch(self, 1)?;
                    }
                    // a user watchpoint ends the probe when it stops
                    if self.fired_user_watch(dr6)
                        && let Some(ran) = self.judge_watch(dr6, false)?
                    {
                        return Ok(ran);
                    }
                }
                Stop::Exiting => return self.exit_stop(h),
                Stop::Breakpoint { addr } if self.is_library_hook(addr) => {
                    self.last_stop = Some(stop);
                    self.on_library_event()?;
                }
                Stop::Interrupted if runtime::deadline_hit() => {
                    self.last_stop = Some(stop);
                    return Ok(Ran::new(ProbeEnd::Deadline, String::new()));
                }
                Stop::Breakpoint { addr } if self.bps.uses(addr) => {
                    // a user breakpoint ends the probe only if its condition holds
                    self.last_stop = Some(stop.clone());
                    let (passing, note) = self.conditions_at(addr);
                    if passing.is_empty() {
                        if self.internal.contains_key(&addr) {
                            h.on_stop(self, addr)?;
                        }
                        continue;
                    }
                    self.set_passing(passing);
                    let text = self.report_stop(stop)?.text;
                    return Ok(Ran::new(ProbeEnd::Stopped, format!("{text}{note}")));
                }
                other => return self.report_stop(other),
            }
        }
    }

    /// At an interrupt's stop: the probe's own int3 at rip, if there is
    /// one and no user breakpoint shares it.
    fn internal_int3_at_rip(&mut self) -> Result<Option<u64>> {
        let rip = self.target.regs()?.rip;
        Ok((self.internal.contains_key(&rip)
            && self.target.breakpoint_inserted(rip)
            && !self.bps.uses(rip))
        .then_some(rip))
    }

    /// The backend's exit stop: the probe's last reads, then the backend
    /// is let go at once (whatever they gave) and its end reported.
    fn exit_stop(&mut self, h: &mut dyn ProbeHandler) -> Result<Ran> {
        let t0 = std::time::Instant::now();
        let read = h.on_exit(self);
        crate::config::pause_for_tests("exit-stop");
        let end = self.target.finish_exit()?;
        crate::inferior::log::debug(&format!(
            "exit stop: held {} us for the probe's last reads",
            t0.elapsed().as_micros()
        ));
        if let Err(e) = read {
            self.say(&format!(
                "the backend's memory could not be read at its exit: {e:#}"
            ));
        }
        self.report_stop(end)
    }
}

/// The wait's hooks, and a probe's end at `--for`'s deadline, run while
/// the backend still runs, right before the wait stops it for the end
/// (`ProbeHandler::at_deadline`, once).
struct EndAtDeadline<'a> {
    hooks: &'a dyn crate::inferior::WaitHooks,
    probe: std::cell::RefCell<&'a mut dyn ProbeHandler>,
    unpin: Option<&'a libc::cpu_set_t>,
    ended: &'a std::cell::Cell<bool>,
}

impl<'a> EndAtDeadline<'a> {
    fn new(
        hooks: &'a dyn crate::inferior::WaitHooks,
        probe: &'a mut dyn ProbeHandler,
        unpin: Option<&'a libc::cpu_set_t>,
        ended: &'a std::cell::Cell<bool>,
    ) -> EndAtDeadline<'a> {
        EndAtDeadline {
            hooks,
            probe: std::cell::RefCell::new(probe),
            unpin,
            ended,
        }
    }

    /// The probe's end, if the deadline has passed and it has not run:
    /// pgdbg's own CPU affinity given back first (the backend runs
    /// meanwhile, and pgdbg pinned to its CPU would take that CPU from it).
    fn end_if_due(&self) {
        if runtime::deadline_hit() && !self.ended.replace(true) {
            if let Some(old) = self.unpin {
                procfs::restore_affinity(old);
            }
            self.probe.borrow_mut().at_deadline();
        }
    }
}

impl crate::inferior::WaitHooks for EndAtDeadline<'_> {
    fn user_interrupt(&self) -> bool {
        let stop = self.hooks.user_interrupt();
        if stop {
            self.end_if_due();
        }
        stop
    }
    fn terminate(&self) -> bool {
        self.hooks.terminate()
    }
    fn waiting(&self, blocked: bool) {
        self.hooks.waiting(blocked)
    }
    fn exit_stop(&self) -> bool {
        self.hooks.exit_stop()
    }
}
