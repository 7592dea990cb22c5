//! `execute`: one parsed command run against the session.
use super::*;
use crate::postgres::commands as pg;

impl Session {
    /// Run one command; returns the text to show and whether the session
    /// should end.
    pub fn execute(&mut self, cmd: &Command) -> Result<(String, Flow)> {
        self.settle_uprobes(cmd);
        let res = self.execute_command(cmd);
        self.say_outside_stops(res)
    }

    fn execute_command(&mut self, cmd: &Command) -> Result<(String, Flow)> {
        Ok(match cmd {
            Command::Nothing => (String::new(), Flow::Continue),
            Command::Break {
                location,
                temporary,
                condition,
            } => (
                self.add_breakpoint(location, *temporary, condition.as_deref())?,
                Flow::Continue,
            ),
            Command::Condition { id, expr } => {
                if let Some(e) = expr {
                    let di = self.di.clone();
                    parse::parse_in(e, &di)?;
                }
                let b = self
                    .bps
                    .get_mut(*id)
                    .ok_or_else(|| anyhow!("No breakpoint number {id}."))?;
                b.condition = expr.clone();
                let msg = match expr {
                    Some(_) => String::new(),
                    None => format!("Breakpoint {id} now unconditional."),
                };
                (msg, Flow::Continue)
            }
            Command::Commands { id, body, text } => {
                let id = match id {
                    Some(i) => *i,
                    None => self.bps.list.last().map(|b| b.id).ok_or_else(|| {
                        anyhow!("No breakpoints specified: set one before 'commands'")
                    })?,
                };
                let b = self
                    .bps
                    .get_mut(id)
                    .ok_or_else(|| anyhow!("No breakpoint number {id}."))?;
                b.commands = body.clone();
                b.commands_text = text.clone();
                (String::new(), Flow::Continue)
            }
            Command::End | Command::Silent => {
                bail!("'end' and 'silent' only make sense in a commands block")
            }
            Command::Printf { format, args } => (self.printf(format, args)?, Flow::Continue),
            Command::Trace {
                function,
                args,
                duration,
                count,
                stacks,
                quiet,
                perf,
            } => {
                let run = if *perf {
                    crate::probes::trace_perf::trace_perf
                } else {
                    crate::probes::trace
                };
                let (end, summary, text) =
                    run(self, function, args, *duration, *count, *stacks, *quiet)?;
                self.probe_outcome(end, summary, text)
            }
            Command::Count {
                functions,
                by_phase,
                duration,
                ptrace,
            } => {
                let fast = if *ptrace {
                    None
                } else {
                    let r = if *by_phase {
                        crate::probes::phases_perf::count_by_phase_perf(self, functions, *duration)
                    } else {
                        crate::probes::count_perf(self, functions, *duration)
                    };
                    match r {
                        Ok(r) => Some(r),
                        Err(e) => match crate::perf::refused(&e) {
                            Some(r) => {
                                self.say(&format!(
                                    "{r}; counting with a ptrace stop per call instead"
                                ));
                                None
                            }
                            None => return Err(e),
                        },
                    }
                };
                let (end, summary, text) = match fast {
                    Some(r) => r,
                    None => crate::probes::count(self, functions, *by_phase, *duration)?,
                };
                self.probe_outcome(end, summary, text)
            }
            Command::Latency {
                functions,
                duration,
                json,
            } => {
                let (end, summary, text) =
                    crate::probes::latency::latency(self, functions, *duration, *json)?;
                self.probe_outcome(end, summary, text)
            }
            Command::Delete(ids) => (self.delete_breakpoints(ids)?, Flow::Continue),
            Command::InfoBreakpoints => (self.info_breakpoints(), Flow::Continue),
            Command::InfoSharedlibrary => (self.info_sharedlibrary(), Flow::Continue),
            Command::InfoSignals(sig) => (crate::inferior::signals::table(*sig), Flow::Continue),
            Command::Continue => self.continue_running()?,
            Command::Interrupt => self.interrupt()?,
            Command::Print { radix, expr } => (self.print(expr, *radix)?, Flow::Continue),
            Command::Backtrace(n) => (self.backtrace(*n)?, Flow::Continue),
            Command::Frame(n) => {
                let n = n.unwrap_or(self.selected());
                (self.select_frame(n)?, Flow::Continue)
            }
            Command::Up(n) => {
                let len = self.frames()?.len();
                let sel = self.selected();
                let t = (sel + n).min(len.saturating_sub(1));
                if t == sel && *n > 0 {
                    bail!("initial frame selected; you cannot go up");
                }
                (self.select_frame(t)?, Flow::Continue)
            }
            Command::Down(n) => {
                let sel = self.selected();
                if sel == 0 {
                    bail!("bottom (innermost) frame selected; you cannot go down");
                }
                let t = sel.saturating_sub(*n);
                (self.select_frame(t)?, Flow::Continue)
            }
            Command::Info => (self.info(), Flow::Continue),
            Command::InfoAddress(s) => (self.info_address(s)?, Flow::Continue),
            Command::InfoLocals => (self.info_vars(false)?, Flow::Continue),
            Command::InfoArgs => (self.info_vars(true)?, Flow::Continue),
            Command::InfoRegisters => (self.info_registers()?, Flow::Continue),
            Command::InfoFrame => {
                let _ = self.frames()?;
                let f = self
                    .selected_frame()
                    .cloned()
                    .ok_or_else(|| anyhow!("no frame"))?;
                (
                    format!(
                        "Stack level {}, frame at {}:\n rip = {:#x} in {}{}\n {}",
                        f.level,
                        f.cfa
                            .map(|c| format!("{c:#x}"))
                            .unwrap_or_else(|| "?".into()),
                        f.pc,
                        f.function.clone().unwrap_or_else(|| "??".into()),
                        match (&f.file, f.line) {
                            (Some(fl), Some(l)) => format!(" ({}:{l})", basename(fl)),
                            _ => String::new(),
                        },
                        if f.inlined {
                            "inlined into the frame above"
                        } else {
                            "physical frame"
                        }
                    ),
                    Flow::Continue,
                )
            }
            Command::Examine {
                count,
                format,
                unit,
                expr,
            } => (
                self.examine(*count, *format, *unit, expr.as_deref())?,
                Flow::Continue,
            ),
            Command::Ptype(t) => (self.ptype(t)?, Flow::Continue),
            Command::Whatis(t) => (self.whatis(t)?, Flow::Continue),
            Command::InfoSymbol(e) => (self.info_symbol(e)?, Flow::Continue),
            Command::InfoLine(spec) => (self.info_line(spec)?, Flow::Continue),
            Command::InfoSymbols { kind, regex } => {
                (self.info_symbols(*kind, regex.as_deref())?, Flow::Continue)
            }
            Command::List(spec) => (self.list(spec.as_deref())?, Flow::Continue),
            Command::Directory(d) => (self.directory(d.as_deref())?, Flow::Continue),
            Command::Disassemble { raw, source, spec } => (
                self.disassemble(*raw, *source, spec.as_deref())?,
                Flow::Continue,
            ),
            Command::Echo(t) => (t.clone(), Flow::Continue),
            Command::PlanCache {
                duration,
                count,
                mode,
            } => pg::plancache(self, *duration, *count, *mode)?,
            Command::Call(text) => (pg::call(self, text)?, Flow::Continue),
            Command::Wait => (pg::wait_now(self)?, Flow::Continue),
            Command::WaitsSample { hz, duration } => pg::waits_sample(self, *hz, *duration)?,
            Command::WaitsTrace {
                duration,
                stacks,
                quiet,
                ptrace: true,
                no_statements,
            } => pg::waits_trace(self, *duration, *stacks, *quiet, !*no_statements)?,
            Command::WaitsTrace {
                duration,
                stacks,
                quiet,
                ptrace: false,
                no_statements,
            } => match pg::waits_trace_perf(self, *duration, *stacks, *quiet, !*no_statements) {
                Err(e) if crate::perf::refused(&e).is_some() => {
                    self.say(&format!(
                        "{e}; tracing with a debug register and ptrace stops instead"
                    ));
                    pg::waits_trace(self, *duration, *stacks, *quiet, !*no_statements)?
                }
                r => r?,
            },
            Command::Plan {
                next,
                format,
                verbose,
                costs,
            } => {
                let opts = crate::postgres::explain::ExplainOpts {
                    format: format.clone(),
                    verbose: *verbose,
                    costs: *costs,
                };
                pg::plan(self, *next, &opts)?
            }
            Command::PlanAnalyze(o) => pg::plan_analyze(self, o)?,
            Command::PlanProgress { every, duration } => {
                pg::plan_progress(self, *every, *duration)?
            }
            Command::Profile(opts) => self.profile(opts)?,
            Command::Detach => (self.detach()?, Flow::Quit),
            Command::Quit => (self.detach()?, Flow::Quit),
            Command::Help(t) => (help_text(t.as_deref()), Flow::Continue),
        })
    }
}
