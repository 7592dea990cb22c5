//! Entry points of the PostgreSQL commands: argument handling and output;
//! what they know about PostgreSQL is in `crate::postgres`.
use super::*;
use crate::capture::events::WaitSample;

impl Session {
    /// `call FUNC(ARGS)`: run a function inside the backend, gdb style.
    pub(crate) fn call_function(&mut self, text: &str) -> Result<String> {
        use crate::expr::eval::Scalar;
        use crate::infcall::Arg;
        use crate::postgres::call::{
            BackendCalls, Called, Given, HARMLESS_IN_ANY_TRANSACTION, Prepared,
        };
        let open = text
            .find('(')
            .ok_or_else(|| anyhow!("call needs FUNC(ARGS)"))?;
        let name = text[..open].trim();
        let inner = text[open + 1..text.len() - 1].trim();
        let addr = crate::postgres::call::function_address(self, name)?;
        let _ = self.frames()?;
        // Values now; string literals are copied into the backend once the
        // call frame exists.
        let mut given = Vec::new();
        for a in crate::command::split_args(inner) {
            let di = self.di.clone();
            let is_type = |n: &str| di.type_by_name(n).is_some();
            let e = parse::parse(&a, &is_type)?;
            if let crate::expr::parse::Expr::Str(text) = e {
                given.push(Given::Str(text));
                continue;
            }
            let v = eval(self, &e)?;
            let is_ptr = matches!(
                &*crate::debuginfo::types::strip(&*self.di, &v.ty),
                crate::debuginfo::types::Type::Pointer { .. }
                    | crate::debuginfo::types::Type::Array { .. }
                    | crate::debuginfo::types::Type::Function { .. }
            );
            given.push(match crate::expr::eval::scalar(self, &v)? {
                Scalar::F(f) => Given::Float(f),
                Scalar::I(i) if is_ptr => Given::Ptr(i as u64),
                Scalar::U(u) if is_ptr => Given::Ptr(u),
                Scalar::I(i) => Given::Int(i as u64),
                Scalar::U(u) => Given::Int(u),
            });
        }
        // count and types against the DWARF prototype, before anything is
        // changed in the backend
        let specs = crate::postgres::call::prepare_args(self, name, given)?;
        crate::postgres::call::check_outside_transaction(self, name)?;
        let ret_ty = self
            .di
            .function_locations(name)
            .iter()
            .find(|l| !l.inlined && l.die != 0)
            .and_then(|l| self.di.die_type(l.die));
        let timeout = self.call_timeout;
        // Functions harmless in any transaction state skip that check (an
        // aborted transaction refuses every other call).
        let mut calls = if HARMLESS_IN_ANY_TRANSACTION.contains(&name) {
            BackendCalls::open_harmless(self, timeout)?
        } else {
            BackendCalls::open(self, timeout, false)?
        };
        let mut args = Vec::new();
        for sp in specs {
            args.push(match sp {
                Prepared::Arg(a) => a,
                Prepared::Str(text) => Arg::Int(calls.push_cstr(&text)?),
            });
        }
        let res = calls.call_addr(addr, &args);
        let close = calls.close();
        let res = res?;
        close?;
        let r = match res {
            Called::Value(r) => r,
            Called::Error(e) => {
                self.emit(Event::Call {
                    error: Some(e.clone()),
                    function: name.to_string(),
                    text: None,
                    value: None,
                });
                bail!(
                    "ERROR inside the backend: {e} (the call was unwound; the backend's state is restored)"
                )
            }
        };
        let Some(ty) = ret_ty else {
            return Ok(String::new()); // void
        };
        let is_float = matches!(
            &*crate::debuginfo::types::strip(&*self.di, &ty),
            crate::debuginfo::types::Type::Base {
                enc: crate::debuginfo::types::Encoding::Float,
                ..
            }
        );
        let bytes = if is_float {
            r.xmm0.to_le_bytes()
        } else {
            r.rax.to_le_bytes()
        };
        let size = size_of(&*self.di, &ty).clamp(1, 8) as usize;
        let v = Value {
            ty,
            loc: ValLoc::Bytes(bytes[..size].to_vec()),
        };
        let text = format_value(self, &v, Radix::Natural);
        let json = to_json(self, &v);
        self.history.borrow_mut().push(v);
        let n = self.history.borrow().len();
        self.emit(Event::Call {
            error: None,
            function: name.to_string(),
            text: Some(text.clone()),
            value: Some(json),
        });
        Ok(format!("${n} = {text}"))
    }

    /// `plan`: EXPLAIN the running query (or, with --next, the next one).
    pub(crate) fn plan(
        &mut self,
        next: bool,
        opts: &crate::postgres::explain::ExplainOpts,
    ) -> Result<(String, Flow)> {
        use crate::postgres::explain;
        // a parallel worker stopped at its executor's entry (a breakpoint)
        // can show its part of the plan; otherwise it names its leader
        let at_entry = !next && self.query_desc_at_executor_entry()?.is_some();
        self.plan_applies(at_entry)?;
        if next && !PLAN_NEXT_SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
            crate::errln!(
                "plan --next: waiting for the next statement of backend {} to start (Ctrl-C ends the wait)",
                self.pid
            );
        }
        let (qd, nested) = if next {
            let entries: Vec<u64> = self
                .di
                .function_locations("standard_ExecutorRun")
                .iter()
                .filter(|l| !l.inlined)
                .map(|l| l.addr + self.bias)
                .collect();
            if entries.is_empty() {
                bail!("standard_ExecutorRun is not in this binary");
            }
            for &a in &entries {
                self.arm_internal(a)?;
            }
            let mut probe = OneStop::default();
            let (end, text) = self.run_probes(&mut probe, None)?;
            match end {
                ProbeEnd::Done => {}
                ProbeEnd::TargetGone => return Ok((text, Flow::TargetGone)),
                ProbeEnd::Terminating => return Ok((String::new(), Flow::Terminate)),
                _ => {
                    return Ok((
                        format!("plan --next: stopped before a statement started{text}"),
                        Flow::Continue,
                    ));
                }
            }
            let qd = self.target.regs()?.rdi;
            let nested = explain::active_query_desc(self)?
                .map(|(_, a)| a != qd)
                .unwrap_or(true);
            (qd, nested)
        } else if let Some(qd) = self.query_desc_at_executor_entry()? {
            // stopped by a breakpoint at standard_ExecutorRun (e.g. a
            // `commands` block): explain the statement it is about to run
            let nested = explain::active_query_desc(self)?
                .map(|(_, a)| a != qd)
                .unwrap_or(true);
            (qd, nested)
        } else {
            let (portal_qd, qd) = self.safe_running_query()?;
            let nested = !portal_qd
                || self
                    .frames()?
                    .iter()
                    .filter(|f| f.function.as_deref() == Some("standard_ExecutorRun"))
                    .count()
                    > 1;
            (qd, nested)
        };
        let query = explain::source_text(self, qd);
        let timeout = self.call_timeout;
        let text = explain::explain(self, qd, opts, timeout)?;
        self.emit(Event::Plan {
            format: opts.format.clone(),
            nested,
            query: query.clone(),
            text: text.clone(),
        });
        let head = if nested {
            format!("-- nested statement (SPI/plpgsql): {}\n", one_line(&query))
        } else {
            format!("-- {}\n", one_line(&query))
        };
        Ok((format!("{head}{text}"), Flow::Continue))
    }

    /// At the entry of standard_ExecutorRun/Finish/End (a breakpoint stop):
    /// their first argument, the QueryDesc with its plan state built.
    pub(crate) fn query_desc_at_executor_entry(&mut self) -> Result<Option<u64>> {
        let Some(Stop::Breakpoint { addr }) = self.last_stop else {
            return Ok(None);
        };
        let at_entry = [
            "standard_ExecutorRun",
            "standard_ExecutorFinish",
            "standard_ExecutorEnd",
        ]
        .iter()
        .flat_map(|f| self.di.function_locations(f))
        .any(|l| !l.inlined && l.addr + self.bias == addr);
        Ok(if at_entry {
            Some(self.target.regs()?.rdi)
        } else {
            None
        })
    }

    /// `plan` on a process that never runs a query of its own: one line
    /// saying what it is and where to look instead.
    pub(crate) fn plan_applies(&mut self, at_executor_entry: bool) -> Result<()> {
        if let Some(role) = self.kind.never_runs_queries() {
            bail!(
                "process {} is the {role}, which never runs queries: plan has nothing to show there; attach to a client backend (select pid, query from pg_stat_activity)",
                self.pid
            );
        }
        if self.kind.is_parallel_worker() && !at_executor_entry {
            let leader = crate::postgres::parallel_leader_from_title(self.pid).or_else(|| {
                let (a, _) = self.di.global("ParallelLeaderPid")?;
                let mut b = [0u8; 4];
                self.target.read(a + self.bias, &mut b).ok()?;
                Some(i32::from_le_bytes(b)).filter(|p| *p > 0)
            });
            match leader {
                Some(l) => bail!(
                    "process {} is a parallel worker of leader PID {l}: it runs part of the leader's plan; attach to the leader for the whole plan (pgdbg attach {l} --ex plan)",
                    self.pid
                ),
                None => bail!(
                    "process {} is a parallel worker: it runs part of its leader's plan; attach to the leader for the whole plan (pg_stat_activity.leader_pid)",
                    self.pid
                ),
            }
        }
        Ok(())
    }

    /// The statement the backend runs: (whether it is the active portal's,
    /// its QueryDesc), or why there is none (and whether waiting a little
    /// may find one: a utility statement such as DO or CALL between its
    /// nested statements).
    pub(crate) fn running_query_desc(
        &mut self,
    ) -> Result<std::result::Result<(bool, u64), (String, bool)>> {
        use crate::postgres::explain;
        if let Some((_, qd)) = explain::active_query_desc(self)? {
            return Ok(Ok((true, qd)));
        }
        // no QueryDesc in the portal: a utility statement (DO, CALL, ...)
        // may be running a nested statement through SPI; its QueryDesc is
        // the executor's argument on the stack
        let frames = self.frames()?.clone();
        let mut unreadable = None;
        for f in &frames {
            let func = f.function.as_deref().unwrap_or("");
            if !["standard_ExecutorRun", "ExecutorRun", "_SPI_pquery"].contains(&func) {
                continue;
            }
            let vars = self.frame_vars(f);
            let Some(v) = vars.iter().find(|v| v.is_param && v.name == "queryDesc") else {
                continue;
            };
            let val = self.var_value(f, v);
            match crate::expr::eval::scalar(self, &val) {
                Ok(sc) if sc.as_i64() != 0 => return Ok(Ok((false, sc.as_i64() as u64))),
                Ok(_) => {}
                Err(_) => {
                    unreadable.get_or_insert((f.level, func.to_string()));
                }
            }
        }
        if let Some((level, func)) = unreadable {
            return Ok(Err((
                format!(
                    "backend {} runs a nested statement (frame #{level}, {func}) whose queryDesc the debug info cannot locate at this point (optimized out): use plan --next to catch the next nested statement",
                    self.pid
                ),
                true,
            )));
        }
        let portal = self
            .di
            .global("ActivePortal")
            .and_then(|(a, _)| {
                let mut b = [0u8; 8];
                self.target.read(a + self.bias, &mut b).ok()?;
                Some(u64::from_le_bytes(b))
            })
            .unwrap_or(0);
        if portal != 0 {
            let text = self
                .di
                .global("debug_query_string")
                .and_then(|(a, _)| {
                    let mut b = [0u8; 8];
                    self.target.read(a + self.bias, &mut b).ok()?;
                    let p = u64::from_le_bytes(b);
                    if p == 0 {
                        return None;
                    }
                    let (t, _) = self.target.read_cstr(p, 200).ok()?;
                    Some(String::from_utf8_lossy(&t).into_owned())
                })
                .map(|t| format!(" ({})", one_line(&t)))
                .unwrap_or_default();
            return Ok(Err((
                format!(
                    "backend {} runs a utility statement{text}, which has no plan of its own, and no nested statement is executing at this moment (a DO block or procedure between statements): use plan --next to catch its next nested statement",
                    self.pid
                ),
                true,
            )));
        }
        Ok(Err((
            format!(
                "backend {} is not running a query (no active portal): use plan --next to catch the next one",
                self.pid
            ),
            false,
        )))
    }

    /// Interrupt the running query at a point where calling into the
    /// backend is safe (retrying a few times); returns (whether the
    /// statement is the active portal's, its queryDesc).
    pub(crate) fn safe_running_query(&mut self) -> Result<(bool, u64)> {
        use crate::postgres::call;
        for attempt in 0..200 {
            match self.running_query_desc()? {
                Err((why, retry)) if !retry || attempt == 199 => bail!("{why}"),
                Err(_) => {}
                Ok(found) => match call::unsafe_reason(self)? {
                    None => return Ok(found),
                    Some(why) if attempt == 199 => {
                        bail!("no safe point found in the running query: {why}")
                    }
                    Some(_) => {}
                },
            }
            // let it run a little, then look again
            let deadline = guard::Deadline::arm(std::time::Duration::from_millis(2 + attempt % 7));
            let regs = self.target.regs()?;
            if self.target.breakpoint_inserted(regs.rip) {
                self.target.step_over_breakpoint(regs.rip)?;
            }
            let stop = self.target.cont_and_wait(&guard::Hooks)?;
            drop(deadline);
            match stop {
                Stop::Interrupted | Stop::Breakpoint { .. } => {}
                other => {
                    let (_, text) = self.report_stop(other)?;
                    bail!("the backend stopped while looking for a safe point:{text}");
                }
            }
        }
        unreachable!()
    }

    /// `wait`: the wait event now.
    pub(crate) fn wait_now(&mut self) -> Result<String> {
        use crate::postgres::waits::{WaitNames, read_word, word_address};
        let addr = word_address(self)?;
        let info = read_word(self, addr)?;
        let mut names = WaitNames::load(&self.di.build_id);
        let mut note = String::new();
        if info != 0
            && !names.map.contains_key(&info)
            && let Some(e) = names.try_resolve(self, &[info])
        {
            note = format!(" (name not resolved: {e})");
        }
        self.emit(Event::wait_now(names.event_fields(info)));
        Ok(format!("{}  [{info:#010x}]{note}", names.label(info)))
    }

    /// `waits sample`: let the backend run and sample its wait-event word.
    pub(crate) fn waits_sample(
        &mut self,
        hz: f64,
        duration: Option<std::time::Duration>,
    ) -> Result<(String, Flow)> {
        use crate::postgres::waits::{Sampler, WaitNames, word_address};
        let addr = word_address(self)?;
        self.say(&format!(
            "waits: sampling backend {} at {hz} Hz{}",
            self.pid,
            match duration {
                Some(d) => format!(" for {:.1}s", d.as_secs_f64()),
                None => "; Ctrl-C stops".into(),
            }
        ));
        let t0 = std::time::Instant::now();
        let sampler = Sampler::start(self.pid, addr, hz);
        let mut probe = NoStop;
        let res = self.run_probes(&mut probe, duration);
        let (counts, total) = sampler.finish();
        let elapsed = t0.elapsed().as_secs_f64();
        let (end, text) = res?;
        let flow = match end {
            ProbeEnd::TargetGone => Flow::TargetGone,
            ProbeEnd::Terminating => Flow::Terminate,
            _ => Flow::Continue,
        };
        let mut names = WaitNames::load(&self.di.build_id);
        let keys: Vec<u32> = counts.keys().copied().collect();
        let mut note = String::new();
        if flow == Flow::Continue
            && let Some(e) = names.try_resolve(self, &keys)
        {
            note = format!("\n(names not resolved here: {e})");
        }
        let mut rows: Vec<(u32, u64)> = counts.into_iter().collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out = format!(
            "{:<16} {:<32} {:>9} {:>7}\n",
            "wait_event_type", "wait_event", "samples", "share"
        );
        let mut profile = Vec::new();
        for (info, n) in &rows {
            let (t, e) = names.describe(*info);
            let share = if total > 0 {
                *n as f64 * 100.0 / total as f64
            } else {
                0.0
            };
            out.push_str(&format!(
                "{:<16} {:<32} {:>9} {:>6.1}%\n",
                t.clone().unwrap_or_else(|| if *info == 0 {
                    "(on CPU)".into()
                } else {
                    "unresolved".into()
                }),
                e.clone().unwrap_or_default(),
                n,
                share
            ));
            profile.push(WaitSample::new(
                names.event_fields(*info),
                *n,
                share / 100.0,
            ));
        }
        out.push_str(&format!(
            "{total} samples in {elapsed:.1}s ({:.0}/s){note}{text}",
            total as f64 / elapsed.max(1e-9)
        ));
        self.emit(Event::WaitSamples {
            duration_s: elapsed,
            hz,
            profile,
            samples: total,
        });
        Ok((out, flow))
    }

    /// `waits trace`: every wait, via a hardware watchpoint on the word.
    pub(crate) fn waits_trace(
        &mut self,
        duration: Option<std::time::Duration>,
        stacks: usize,
        quiet: bool,
    ) -> Result<(String, Flow)> {
        use crate::postgres::waits::TraceProbe;
        let mut probe = TraceProbe::new(self, stacks, quiet)?;
        self.say(&format!(
            "waits: tracing backend {} (hardware watchpoint on its wait-event word){}",
            self.pid,
            match duration {
                Some(d) => format!(" for {:.1}s", d.as_secs_f64()),
                None => "; Ctrl-C stops".into(),
            }
        ));
        // run_probes disarms the breakpoints and clears the debug registers
        let res = self.run_probes(&mut probe, duration);
        let (end, text) = res?;
        let flow = match end {
            ProbeEnd::TargetGone => Flow::TargetGone,
            ProbeEnd::Terminating => Flow::Terminate,
            _ => Flow::Continue,
        };
        if flow == Flow::Continue {
            probe.close(self);
        } else if flow == Flow::Terminate {
            probe.abandon(self);
        }
        Ok((format!("{}{text}", probe.summary()), flow))
    }

    /// `plancache`: report plan choices until a limit, Ctrl-C or a stop.
    pub(crate) fn plancache(
        &mut self,
        duration: Option<std::time::Duration>,
        count: Option<u64>,
        fast: Option<crate::command::Fast>,
    ) -> Result<(String, Flow)> {
        use crate::command::Fast;
        use crate::postgres::plancache::{PlanCacheLayouts, PlanCacheProbe};
        let layouts = PlanCacheLayouts::new(self)?;
        let mut probe = PlanCacheProbe::new(
            layouts,
            count,
            fast.is_some(),
            fast == Some(Fast::InProcess),
        )?;
        probe.arm(self)?;
        let limit = match (duration, count) {
            (Some(d), _) => format!(" for {:.1}s", d.as_secs_f64()),
            (None, Some(n)) => format!(" for {n} decisions"),
            _ => "; Ctrl-C stops".into(),
        };
        let how = if probe.in_process() {
            " (recorded in-process, no stops)"
        } else {
            ""
        };
        self.say(&format!(
            "plancache: watching the plan cache of backend {}{limit}{how}",
            self.pid
        ));
        let t0 = std::time::Instant::now();
        let res = self.run_probes(&mut probe, duration);
        // the decisions still unreported, and the recorder out, even after
        // an error (detach would take it out too)
        let finished = probe.finish(self);
        let (end, text) = res?;
        finished?;
        let lost = if probe.lost > 0 {
            format!("; {} not recorded (ring full)", probe.lost)
        } else {
            String::new()
        };
        let summary = format!(
            "plancache: {} decision{} ({} custom, {} generic) in {:.1}s{lost}",
            probe.decisions,
            if probe.decisions == 1 { "" } else { "s" },
            probe.decisions - probe.generic,
            probe.generic,
            t0.elapsed().as_secs_f64()
        );
        self.emit(Event::PlancacheEnd {
            decisions: probe.decisions,
            generic: probe.generic,
            lost: probe.lost,
        });
        Ok(self.probe_outcome(end, summary, text))
    }
}
