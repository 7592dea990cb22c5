//! `plan --next --analyze`: the EXPLAIN ANALYZE of the next statement a
//! backend executes, on a stock server with nothing loaded (what
//! auto_explain does, for one backend, without LOAD or a restart).
//!
//! How, and why it is safe (every step is the backend's own code path, the
//! one EXPLAIN ANALYZE and auto_explain take):
//!
//! 1. A breakpoint at the entry of `standard_ExecutorStart(queryDesc,
//!    eflags)`.  There `queryDesc->estate` is still NULL: no plan state
//!    tree exists yet.  The one field pgdbg writes is
//!    `queryDesc->instrument_options` (an `int` of the statement's own
//!    QueryDesc), with the bits of the server's `InstrumentOption` enum
//!    (read from DWARF) that `ExplainOnePlan` would set.  The backend reads
//!    that field exactly once, a few lines later (`estate->es_instrument =
//!    queryDesc->instrument_options`), and builds the instrumentation
//!    itself (`InstrAlloc` in the query's memory context, freed with it;
//!    the parallel workers get it through the same shared state EXPLAIN
//!    ANALYZE uses).  When the field is not 0 (the session runs EXPLAIN
//!    ANALYZE itself, or auto_explain asked), pgdbg writes nothing and uses
//!    what is there.
//! 2. The original value is put back when `standard_ExecutorStart` returns
//!    (a breakpoint on its return address, matched by the stack pointer),
//!    while the caller still holds the QueryDesc: from then on the backend's
//!    memory is as it was, except for the instrumentation the executor
//!    made.  Refused before anything is written: a QueryDesc already
//!    started, a field or enumerator the debug info does not describe.
//! 3. The statement runs at full speed (no stop, except nested statements'
//!    `standard_ExecutorEnd` entries, checked and passed).
//! 4. At the entry of `standard_ExecutorEnd` for that QueryDesc (same
//!    address, same PlannedStmt, `es_instrument` as written; after
//!    ExecutorFinish, before anything is freed) the text is produced by
//!    guarded inferior calls (`postgres::call`: refused in a critical
//!    section, with LWLocks held, in an aborted transaction; interrupts
//!    held off; an ERROR trapped; a private memory context deleted after):
//!    `NewExplainState`, `ExplainBeginOutput`, `ExplainPrintPlan` (which
//!    calls `InstrEndLoop` on each node, as EXPLAIN ANALYZE does before
//!    ExecutorEnd), `ExplainPrintTriggers`, `ExplainPrintJITSummary`,
//!    `ExplainPropertyFloat("Execution Time")`, `ExplainEndOutput`.
//! 5. A statement that fails never reaches ExecutorEnd: breakpoints on
//!    `AbortTransaction`/`AbortSubTransaction` whose stack pointer is above
//!    the one of the executor start (the error unwound past it) end the
//!    wait; nothing is written then.
//!
//! Every breakpoint is pgdbg's internal one: `run_probes` removes them on
//! every way out (done, Ctrl-C, a deadline, an error), `detach` and the
//! guardian remove them if pgdbg dies.  A way out between steps 1 and 2
//! (Ctrl-C, a user breakpoint, `--for`, an error, SIGTERM) puts the field
//! back at once while that QueryDesc is alive (`put_back`: the backend is
//! still inside that `standard_ExecutorStart`), before the executor reads
//! it if it has not yet.  If pgdbg is killed (SIGKILL) between steps 1
//! and 2, the statement runs instrumented (slower, same result) and the
//! field stays set in a QueryDesc that nothing reads again and that is
//! freed with its statement.

use super::backend::{Backend, Outcome, ProbeEnd, ProbeHandler, Ran, probe_outcome};
use super::call::BackendCalls;
use super::explain::{self, value};
use crate::capture::Event;
use crate::debuginfo::types::{Type, TypeSource, strip};
use crate::infcall::Arg;
use anyhow::{Result, anyhow, bail};
use std::time::{Duration, Instant};
mod condition;
mod text;
pub use condition::{Clause, Op, Subject, parse_condition};
pub use text::{EsFlags, explain_analyze};

/// What `plan --next --analyze` was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyzeOpts {
    pub format: String,
    pub verbose: bool,
    pub costs: bool,
    pub buffers: bool,
    pub wal: bool,
    pub timing: bool,
    /// `--if`: all must hold for a statement to be shown.
    pub cond: Vec<Clause>,
    /// Statements to show (`--count`; default 1).
    pub count: u64,
    /// `--for`
    pub duration: Option<Duration>,
    /// `--nested`: only statements started inside another one (the SQL of
    /// a PL/pgSQL function, a DO block, SPI), not the top-level statement.
    pub nested: bool,
}

impl Default for AnalyzeOpts {
    fn default() -> Self {
        AnalyzeOpts {
            format: "text".into(),
            verbose: false,
            costs: true,
            buffers: false,
            wal: false,
            timing: true,
            cond: Vec::new(),
            count: 1,
            duration: None,
            nested: false,
        }
    }
}

/// The enumerators of the server's `InstrumentOption` (DWARF).
fn instrument_enum(s: &dyn Backend) -> Result<Vec<(String, i64)>> {
    let ty = s
        .di()
        .type_by_name("InstrumentOption")
        .or_else(|| s.di().type_by_name("enum InstrumentOption"))
        .ok_or_else(|| {
        anyhow!(
            "the debug info has no InstrumentOption enum: plan --analyze needs the server's DWARF (install its debug symbols, or --debug-file)"
        )
    })?;
    match &*strip(s.di(), &ty) {
        Type::Enum { values, .. } => Ok(values.clone()),
        _ => bail!("InstrumentOption is not an enum in this build's debug info"),
    }
}

fn enum_bit(values: &[(String, i64)], n: &str) -> Result<u32> {
    values
        .iter()
        .find(|(name, _)| name == n)
        .map(|(_, v)| *v as u32)
        .ok_or_else(|| anyhow!("this server's InstrumentOption has no {n}"))
}

/// The `InstrumentOption` bits EXPLAIN ANALYZE would ask for, from the
/// server's own enum (DWARF): ROWS or TIMER, BUFFERS, WAL.
pub fn instrument_bits(s: &dyn Backend, o: &AnalyzeOpts) -> Result<u32> {
    let values = instrument_enum(s)?;
    let mut bits = if o.timing {
        enum_bit(&values, "INSTRUMENT_TIMER")?
    } else {
        enum_bit(&values, "INSTRUMENT_ROWS")?
    };
    if o.buffers {
        bits |= enum_bit(&values, "INSTRUMENT_BUFFERS")?;
    }
    if o.wal {
        bits |= enum_bit(&values, "INSTRUMENT_WAL")?;
    }
    Ok(bits)
}

/// Offsets of the fields this needs (DWARF or a layout pack).
struct Fields {
    qd_instrument: u64,
    qd_plannedstmt: u64,
    qd_estate: u64,
    es_instrument: u64,
    ps_queryid: Option<u64>,
}

impl Fields {
    fn new(s: &dyn Backend) -> Result<Fields> {
        let qd = s.layout("QueryDesc")?;
        let es = s.layout("EState")?;
        let ps = s.layout("PlannedStmt")?;
        Ok(Fields {
            qd_instrument: qd.offset("instrument_options")?,
            qd_plannedstmt: qd.offset("plannedstmt")?,
            qd_estate: qd.offset("estate")?,
            es_instrument: es.offset("es_instrument")?,
            ps_queryid: ps.offset("queryId").ok(),
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Started {
    qd: u64,
    plannedstmt: u64,
    /// instrument_options as found.
    original: i32,
    /// What the executor will use.
    effective: i32,
    /// standard_ExecutorStart's return (address, stack pointer after the
    /// return) while pgdbg's value is in the field.
    restore_at: Option<(u64, u64)>,
    /// Stack pointer at standard_ExecutorStart's entry.
    entry_sp: u64,
    queryid: i64,
    /// Run by an outer statement or a DO block (SPI), from the stack.
    nested: bool,
    t0: Instant,
}

/// The probe: executor start, its return, executor end, aborts.
pub struct AnalyzeProbe<'o> {
    o: &'o AnalyzeOpts,
    bits: u32,
    f: Fields,
    starts: Vec<u64>,
    ends: Vec<u64>,
    aborts: Vec<u64>,
    started: Option<Started>,
    /// Statements shown.
    pub shown: u64,
    /// Statements analyzed but not shown (their `--if` did not hold).
    pub skipped: u64,
    /// Statements that failed before their end.
    pub failed: u64,
    /// A problem that ends the command (the backend already restored).
    pub fatal: Option<anyhow::Error>,
}

fn entry_addrs(s: &dyn Backend, name: &str) -> Vec<u64> {
    s.function_addrs(name)
}

impl<'o> AnalyzeProbe<'o> {
    pub fn new(s: &dyn Backend, o: &'o AnalyzeOpts) -> Result<AnalyzeProbe<'o>> {
        let bits = instrument_bits(s, o)?;
        let f = Fields::new(s)?;
        // the functions the end needs, before anything is armed
        for name in [
            "NewExplainState",
            "ExplainBeginOutput",
            "ExplainPrintPlan",
            "ExplainEndOutput",
            "ExplainPropertyFloat",
        ] {
            super::call::function_address(s, name)?;
        }
        let starts = entry_addrs(s, "standard_ExecutorStart");
        let ends = entry_addrs(s, "standard_ExecutorEnd");
        if starts.is_empty() || ends.is_empty() {
            bail!(
                "standard_ExecutorStart/standard_ExecutorEnd have no out-of-line copy in this binary"
            );
        }
        let mut aborts = entry_addrs(s, "AbortTransaction");
        aborts.extend(entry_addrs(s, "AbortSubTransaction"));
        Ok(AnalyzeProbe {
            o,
            bits,
            f,
            starts,
            ends,
            aborts,
            started: None,
            shown: 0,
            skipped: 0,
            failed: 0,
            fatal: None,
        })
    }

    /// Arm the executor-start breakpoints (waiting for the next statement).
    pub fn arm(&mut self, s: &mut dyn Backend) -> Result<()> {
        for &a in &self.starts {
            s.arm_internal(a)?;
        }
        Ok(())
    }

    fn queryid_clauses_hold(&self, queryid: i64) -> bool {
        self.o
            .cond
            .iter()
            .filter(|c| c.subject == Subject::QueryId)
            .all(|c| c.holds(queryid))
    }

    fn on_start(&mut self, s: &mut dyn Backend) -> Result<()> {
        let regs = s.registers()?;
        let qd = regs.rdi;
        if qd == 0 {
            return Ok(());
        }
        let plannedstmt = s.read_u64(qd + self.f.qd_plannedstmt)?;
        let estate = s.read_u64(qd + self.f.qd_estate)?;
        let original = s.read_i32(qd + self.f.qd_instrument)?;
        if plannedstmt == 0 || estate != 0 {
            // not a QueryDesc about to start: leave it alone
            return Ok(());
        }
        let queryid = match self.f.ps_queryid {
            Some(o) => s.read_u64(plannedstmt + o)? as i64,
            None => 0,
        };
        if !self.queryid_clauses_hold(queryid) {
            return Ok(());
        }
        let ret = s.read_u64(regs.rsp)?;
        // ELF symbols of the physical frames (cheap): an outer executor or
        // SPI below this one makes it a nested statement
        let nested = s.quick_stack(64).iter().any(|f| {
            let name = f.split('+').next().unwrap_or("");
            matches!(
                name.split('.').next().unwrap_or(name),
                "standard_ExecutorRun" | "ExecutorRun" | "_SPI_pquery" | "_SPI_execute_plan"
            )
        });
        if self.o.nested && !nested {
            // --nested: the top-level statement is left alone; the first
            // statement its executor starts inside it is the one
            return Ok(());
        }
        let mut restore_at = None;
        let effective = if original == 0 {
            // arm the restore point first: nothing is written if it cannot be
            s.arm_internal(ret)?;
            if let Err(e) = s.write_own_field(qd + self.f.qd_instrument, &self.bits.to_le_bytes()) {
                s.disarm_internal(ret)?;
                return Err(e);
            }
            restore_at = Some((ret, regs.rsp + 8));
            self.bits as i32
        } else {
            original
        };
        // recorded before anything else can fail: every way out after this
        // (`put_back`) knows the field is pgdbg's
        self.started = Some(Started {
            qd,
            plannedstmt,
            original,
            effective,
            restore_at,
            entry_sp: regs.rsp,
            queryid,
            nested,
            t0: Instant::now(),
        });
        for &a in &self.starts.clone() {
            s.disarm_internal(a)?;
        }
        for &a in self.ends.iter().chain(self.aborts.iter()) {
            s.arm_internal(a)?;
        }
        Ok(())
    }

    /// After `run_probes` ended with pgdbg's value still in the statement's
    /// `instrument_options` (Ctrl-C, a user breakpoint, `--for`, an error
    /// or SIGTERM between `standard_ExecutorStart`'s entry and its return):
    /// the field is put back while that QueryDesc is certainly alive (the
    /// backend stopped inside that `standard_ExecutorStart`, whose
    /// `queryDesc` is it, or right at its return); after an error unwound
    /// past it the QueryDesc belongs to memory the abort frees, and
    /// nothing is written.  Returns a line for the user.
    fn put_back(&mut self, s: &mut dyn Backend) -> Result<Option<String>> {
        let Some(st) = self.started.as_mut() else {
            return Ok(None);
        };
        let Some((ret, ret_sp)) = st.restore_at else {
            return Ok(None);
        };
        let regs = s.registers()?;
        let at_return = regs.rip == ret && regs.rsp == ret_sp;
        let inside = regs.rsp < ret_sp
            && s.frame_params(&["standard_ExecutorStart"], "queryDesc")?
                .iter()
                .any(|(_, _, v)| {
                    v.as_ref()
                        .map(|v| *v == st.qd)
                        .unwrap_or(regs.rsp <= st.entry_sp)
                });
        if !(at_return || inside) {
            st.restore_at = None;
            return Ok(Some(
                "plan --analyze: the statement left its executor start by an error: its QueryDesc, freed with it, kept the instrumentation request".into(),
            ));
        }
        s.write_own_field(st.qd + self.f.qd_instrument, &st.original.to_le_bytes())?;
        st.restore_at = None;
        let estate = s.read_u64(st.qd + self.f.qd_estate)?;
        let read = estate != 0 && s.read_i32(estate + self.f.es_instrument)? == st.effective;
        Ok(Some(if read {
            "plan --analyze: stopped inside the statement's executor start: instrument_options put back; the executor had already read it, so this statement runs instrumented (its EXPLAIN ANALYZE is not shown)".into()
        } else {
            "plan --analyze: stopped inside the statement's executor start: instrument_options put back before the executor read it (the statement runs without instrumentation)".into()
        }))
    }

    /// standard_ExecutorStart returned: put the field back.
    fn on_return(&mut self, s: &mut dyn Backend, st: &mut Started) -> Result<()> {
        if let Some((addr, _)) = st.restore_at {
            s.write_own_field(st.qd + self.f.qd_instrument, &st.original.to_le_bytes())?;
            st.restore_at = None;
            s.disarm_internal(addr)?;
        }
        Ok(())
    }

    /// Back to waiting for the next statement, or done.
    fn next_statement(&mut self, s: &mut dyn Backend, st: &Started) -> Result<()> {
        if let Some((addr, _)) = st.restore_at {
            s.disarm_internal(addr)?;
        }
        for &a in &self.ends.clone() {
            s.disarm_internal(a)?;
        }
        for &a in &self.aborts.clone() {
            s.disarm_internal(a)?;
        }
        self.started = None;
        if self.shown < self.o.count {
            self.arm(s)?;
        }
        Ok(())
    }

    fn on_end(&mut self, s: &mut dyn Backend, st: Started) -> Result<()> {
        let elapsed = st.t0.elapsed();
        let regs = s.registers()?;
        if regs.rdi != st.qd {
            self.started = Some(st);
            return Ok(()); // a nested statement's end
        }
        let plannedstmt = s.read_u64(st.qd + self.f.qd_plannedstmt)?;
        let estate = s.read_u64(st.qd + self.f.qd_estate)?;
        let instr = if estate != 0 {
            s.read_i32(estate + self.f.es_instrument)?
        } else {
            0
        };
        if plannedstmt != st.plannedstmt || estate == 0 || instr != st.effective {
            // another statement's QueryDesc at the same address
            self.started = Some(st);
            return Ok(());
        }
        // standard_ExecutorStart's return was not seen (it cannot be
        // missed on a normal return; a safety net): the QueryDesc is
        // ExecutorEnd's argument, alive, so put the field back now
        let mut st = st;
        if let Some((addr, _)) = st.restore_at.take() {
            s.write_own_field(st.qd + self.f.qd_instrument, &st.original.to_le_bytes())?;
            s.disarm_internal(addr)?;
        }
        let micros = elapsed.as_micros() as i64;
        let show = self
            .o
            .cond
            .iter()
            .filter(|c| c.subject == Subject::Duration)
            .all(|c| c.holds(micros));
        if show {
            let block = match self.produce(s, st.qd, &st, elapsed) {
                Ok(b) => b,
                Err(e) => format!("plan --analyze: no EXPLAIN ANALYZE for this statement: {e:#}"),
            };
            // printed now, not when the last of --count N has ended
            s.say(&block);
            self.shown += 1;
        } else {
            self.skipped += 1;
        }
        self.next_statement(s, &st)
    }

    fn produce(
        &mut self,
        s: &mut dyn Backend,
        qd: u64,
        st: &Started,
        elapsed: Duration,
    ) -> Result<String> {
        let query = explain::source_text(s, qd);
        let nested = st.nested;
        let flags = EsFlags::from_options(s, st.effective as u32)?;
        let timeout = s.call_timeout();
        let text = explain_analyze(s, qd, self.o, &flags, elapsed, timeout)?;
        s.emit_event(
            Event::Plan {
                format: self.o.format.clone(),
                nested,
                query: query.clone(),
                text: text.clone(),
            },
            None,
        );
        let one = query.split_whitespace().collect::<Vec<_>>().join(" ");
        let one: String = one.chars().take(200).collect();
        let mut head = if nested {
            format!("-- nested statement (SPI/plpgsql): {one}\n")
        } else {
            format!("-- {one}\n")
        };
        if st.original != 0 {
            head.push_str(
                "-- (the session had asked for instrumentation itself; shown with its options)\n",
            );
        }
        if st.queryid != 0 && self.o.verbose {
            head.push_str(&format!("-- queryid {}\n", st.queryid));
        }
        Ok(format!("{head}{text}"))
    }

    fn on_abort(&mut self, s: &mut dyn Backend, st: Started) -> Result<()> {
        let regs = s.registers()?;
        if regs.rsp <= st.entry_sp {
            // an error caught inside the statement (a subtransaction of a
            // function it calls): the statement goes on
            self.started = Some(st);
            return Ok(());
        }
        self.failed += 1;
        s.say(&format!(
            "plan --analyze: the statement failed (ERROR) before its end: no EXPLAIN ANALYZE{}",
            if st.restore_at.is_some() {
                "; its QueryDesc, freed with the failed statement, kept the instrumentation request"
            } else {
                ""
            }
        ));
        // nothing is written after an error: the QueryDesc belongs to
        // memory the abort is about to free
        let mut st = st;
        if let Some((addr, _)) = st.restore_at.take() {
            s.disarm_internal(addr)?;
        }
        self.next_statement(s, &st)
    }
}

impl ProbeHandler for AnalyzeProbe<'_> {
    fn on_stop(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()> {
        let res = (|| -> Result<()> {
            match self.started {
                None if self.starts.contains(&addr) => self.on_start(s),
                None => Ok(()),
                Some(mut st) => {
                    if let Some((ret, sp)) = st.restore_at
                        && addr == ret
                    {
                        if s.registers()?.rsp == sp {
                            self.on_return(s, &mut st)?;
                            self.started = Some(st);
                        }
                        return Ok(());
                    }
                    if self.ends.contains(&addr) {
                        self.on_end(s, st)
                    } else if self.aborts.contains(&addr) {
                        self.on_abort(s, st)
                    } else {
                        Ok(())
                    }
                }
            }
        })();
        if let Err(e) = res {
            // stop here; run_probes removes the breakpoints
            self.fatal = Some(e);
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.fatal.is_some() || (self.started.is_none() && self.shown >= self.o.count)
    }
}

/// `plan --next --analyze`: wait for the next statement(s), print their
/// EXPLAIN ANALYZE.  The summary and the stop's report, as a probe
/// command's end (`probe_outcome`).
pub fn plan_next_analyze(s: &mut dyn Backend, o: &AnalyzeOpts) -> Result<Outcome> {
    let mut probe = AnalyzeProbe::new(s, o)?;
    // The call series at the statement's end first unwinds the stack
    // (`call::unsafe_reason`): the first unwinding of a session loads the
    // debug info's line and inlining tables (about 110 ms measured on 15),
    // which would be paid inside the analyzed statement.  Paid here
    // instead, at the stop the command starts from.
    let _ = s.frame_functions();
    probe.arm(s)?;
    let res = s.run_probes(&mut probe, o.duration);
    // every way out: the field as found (unless the backend is gone)
    let gone = matches!(
        res,
        Ok(Ran {
            end: ProbeEnd::TargetGone,
            ..
        })
    );
    let put_back = if gone { Ok(None) } else { probe.put_back(s) };
    let put_back = match put_back {
        Ok(line) => line,
        Err(e) => {
            let e = e.context("plan --analyze could not put instrument_options back");
            return Err(match res {
                Err(first) => first.context(format!("{e:#}")),
                Ok(_) => e,
            });
        }
    };
    if let Some(line) = &put_back {
        s.say(line);
    }
    let Ran { end, text } = res?;
    if let Some(e) = probe.fatal.take() {
        return Err(e.context("plan --analyze stopped (breakpoints removed)"));
    }
    let mut summary = String::new();
    if end != ProbeEnd::Done || !o.cond.is_empty() || o.count > 1 {
        summary = format!(
            "plan --analyze: {} statement{} shown",
            probe.shown,
            if probe.shown == 1 { "" } else { "s" }
        );
        if probe.skipped > 0 {
            summary.push_str(&format!(", {} below the --if condition", probe.skipped));
        }
        if probe.failed > 0 {
            summary.push_str(&format!(", {} failed", probe.failed));
        }
        if probe.started.is_some() {
            summary.push_str("; the statement being analyzed had not ended");
        }
    }
    Ok(probe_outcome(
        s,
        end,
        format!("{summary}{text}"),
        String::new(),
    ))
}
