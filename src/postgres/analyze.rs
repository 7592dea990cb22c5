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

use super::backend::{Backend, ProbeEnd, ProbeHandler};
use super::call::BackendCalls;
use super::explain::{self, value};
use crate::capture::Event;
use crate::debuginfo::types::{Type, TypeSource, strip};
use crate::infcall::Arg;
use anyhow::{Result, anyhow, bail};
use std::time::{Duration, Instant};

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

/// What a `--if` clause compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// The statement's execution time, in microseconds (known at its end).
    Duration,
    /// `PlannedStmt.queryId` (known at its start).
    QueryId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

/// One `--if` comparison: `duration > 200ms`, `queryid == -862731299`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clause {
    pub subject: Subject,
    pub op: Op,
    /// Microseconds for a duration; the value for a queryId.
    pub value: i64,
}

impl Clause {
    fn holds(&self, v: i64) -> bool {
        match self.op {
            Op::Gt => v > self.value,
            Op::Ge => v >= self.value,
            Op::Lt => v < self.value,
            Op::Le => v <= self.value,
            Op::Eq => v == self.value,
            Op::Ne => v != self.value,
        }
    }
}

/// Parse `--if`'s expression: clauses `duration OP TIME` (TIME with a unit:
/// us, ms, s) or `queryid OP INTEGER`, joined by `&&`.
pub fn parse_condition(text: &str) -> Result<Vec<Clause>> {
    let text = text.trim().trim_matches(|c| c == '\'' || c == '"').trim();
    if text.is_empty() {
        bail!(
            "plan --if needs a condition: duration > 200ms, queryid == N, joined by && (e.g. --if 'duration > 200ms')"
        );
    }
    let mut out = Vec::new();
    for part in text.split("&&") {
        let part = part.trim();
        let ops = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ];
        let Some((pos, sym, op)) = ops
            .iter()
            .find_map(|(sym, op)| part.find(sym).map(|p| (p, *sym, *op)))
        else {
            bail!(
                "plan --if: '{part}' is not a comparison: use duration > 200ms or queryid == N (operators > >= < <= == !=)"
            );
        };
        let (lhs, rhs) = (part[..pos].trim(), part[pos + sym.len()..].trim());
        let clause = match lhs.to_lowercase().as_str() {
            "duration" => Clause {
                subject: Subject::Duration,
                op,
                value: parse_micros(rhs)?,
            },
            "queryid" | "query_id" => Clause {
                subject: Subject::QueryId,
                op,
                value: rhs.parse::<i64>().map_err(|_| {
                    anyhow!(
                        "plan --if: queryid compares with an integer, not '{rhs}'",
                        rhs = crate::shown::shown(rhs)
                    )
                })?,
            },
            other => bail!(
                "plan --if: unknown name '{other}': use duration (the statement's execution time) or queryid"
            ),
        };
        out.push(clause);
    }
    Ok(out)
}

fn parse_micros(t: &str) -> Result<i64> {
    let t = t.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let v: f64 = num.parse().map_err(|_| {
        anyhow!(
            "plan --if: '{t}' is not a duration (e.g. 200ms, 1.5s, 500us)",
            t = crate::shown::shown(t)
        )
    })?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "" => bail!(
            "plan --if: the duration '{t}' needs a unit: us, ms or s",
            t = crate::shown::shown(t)
        ),
        other => bail!(
            "plan --if: unknown time unit '{other}' (us, ms or s)",
            other = crate::shown::shown(other)
        ),
    };
    Ok((v * scale).round() as i64)
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

/// ExplainState flags for the options the executor ran with.
pub struct EsFlags {
    pub timing: bool,
    pub buffers: bool,
    pub wal: bool,
}

impl EsFlags {
    /// What the executor measured (`effective` bits): what to print.
    fn from_options(s: &dyn Backend, effective: u32) -> Result<EsFlags> {
        let values = instrument_enum(s)?;
        let has = |n: &str| -> Result<bool> { Ok(effective & enum_bit(&values, n)? != 0) };
        Ok(EsFlags {
            timing: has("INSTRUMENT_TIMER")?,
            buffers: has("INSTRUMENT_BUFFERS")?,
            wal: has("INSTRUMENT_WAL")?,
        })
    }
}

/// The EXPLAIN ANALYZE text of an executed QueryDesc (before
/// ExecutorEnd), made inside the backend as `ExplainOnePlan` makes it,
/// with `elapsed` as its "Execution Time".
pub fn explain_analyze(
    s: &mut dyn Backend,
    qd: u64,
    o: &AnalyzeOpts,
    flags: &EsFlags,
    elapsed: Duration,
    timeout: Duration,
) -> Result<String> {
    let printer = explain::PlanPrinter::new(
        s,
        &o.format,
        &[
            ("analyze", true, true),
            ("verbose", o.verbose, false),
            ("costs", o.costs, false),
            ("timing", flags.timing, true),
            ("buffers", flags.buffers, true),
            ("wal", flags.wal, false),
            ("summary", true, false),
        ],
    )?;
    let f = |name: &str| super::call::function_address(s, name);
    let prop_float = f("ExplainPropertyFloat")?;
    let triggers = f("ExplainPrintTriggers").ok();
    let jit = f("ExplainPrintJITSummary").ok();
    let mut calls = BackendCalls::open(s, timeout, true)?;
    // after the plan, what ExplainOnePlan prints: triggers, JIT, the time
    let text = printer.print(&mut calls, qd, |calls, es| {
        if let Some(t) = triggers {
            value(
                calls.call_addr(t, &[Arg::Int(es), Arg::Int(qd)])?,
                "ExplainPrintTriggers",
            )?;
        }
        if let (Some(j), true) = (jit, o.costs) {
            value(
                calls.call_addr(j, &[Arg::Int(es), Arg::Int(qd)])?,
                "ExplainPrintJITSummary",
            )?;
        }
        let label = calls.push_cstr("Execution Time")?;
        let unit = calls.push_cstr("ms")?;
        value(
            calls.call_addr(
                prop_float,
                &[
                    Arg::Int(label),
                    Arg::Int(unit),
                    Arg::Double(elapsed.as_secs_f64() * 1000.0),
                    Arg::Int(3),
                    Arg::Int(es),
                ],
            )?,
            "ExplainPropertyFloat",
        )?;
        Ok(())
    })?;
    calls.close()?;
    Ok(text)
}

/// `plan --next --analyze`: wait for the next statement(s), print their
/// EXPLAIN ANALYZE.  Returns (summary, how run_probes ended).
pub fn plan_next_analyze(s: &mut dyn Backend, o: &AnalyzeOpts) -> Result<(String, ProbeEnd)> {
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
    let gone = matches!(res, Ok((ProbeEnd::TargetGone, _)));
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
    let (end, text) = res?;
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
    Ok((format!("{summary}{text}"), end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse() {
        let c = parse_condition("'duration > 200ms'").unwrap();
        assert_eq!(
            c,
            vec![Clause {
                subject: Subject::Duration,
                op: Op::Gt,
                value: 200_000
            }]
        );
        let c = parse_condition("queryid == -5 && duration >= 1.5s").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].subject, Subject::QueryId);
        assert_eq!(c[0].value, -5);
        assert_eq!(c[1].op, Op::Ge);
        assert_eq!(c[1].value, 1_500_000);
        assert!(c[1].holds(1_500_000) && !c[1].holds(1_499_999));
        for bad in [
            "",
            "duration > 200",
            "speed > 1ms",
            "duration 200ms",
            "queryid == x",
        ] {
            assert!(parse_condition(bad).is_err(), "{bad}");
        }
    }
}
