//! `plan --progress`: how far a running query has got, node by node.
//!
//! The plan text comes once from the backend's own `ExplainPrintPlan` (as
//! `plan` makes it); pgdbg then walks the plan state tree in the order
//! `ExplainNode` prints it and, every `--every`, reads (without calling
//! anything) each node's rows so far, the block position of sequential
//! scans (`rs_cblock` of `rs_nblocks`, or a parallel scan's shared
//! `phs_nallocated` of `phs_nblocks`), the node function on the stack, and
//! the statement's elapsed time (`MyBEEntry->st_activity_start_timestamp`,
//! pg_stat_activity's query_start).
//!
//! Rows: a statement run without instrumentation has none to read.  pgdbg
//! then installs row counting into the running tree, which is safe to do
//! for *rows only*:
//!
//! * one zeroed array of `Instrumentation` is allocated with
//!   `MemoryContextAllocZero(estate->es_query_cxt, ...)` (a guarded call at
//!   a safe stop): the query's own memory, freed with it even if pgdbg dies;
//!   zeroed is exactly `InstrAlloc(n, INSTRUMENT_ROWS)`: `need_timer`,
//!   `need_bufusage`, `need_walusage` false, so `InstrStartNode` does
//!   nothing and `InstrStopNode`/`InstrEndLoop` only add counters (the
//!   "called without start"/"called twice" checks are all under
//!   `need_timer`, the only ones that could raise an ERROR mid-node);
//! * each node's `instrument` is set, then a node already past its first
//!   call (`ExecProcNode` equal to its `ExecProcNodeReal`, neither
//!   `ExecProcNodeFirst` nor `ExecProcNodeInstr`) gets `ExecProcNode = ExecProcNodeInstr`, the
//!   backend's own wrapper, exactly what `ExecProcNodeFirst` would have
//!   chosen had the node been instrumented from the start; a call already
//!   under way finishes uncounted; nodes that count themselves (Hash,
//!   bitmap scans) test `instrument` as they go;
//! * rows are "counted since" the moment of installation; nothing of it is
//!   undone at the end: it is the query's memory and the backend's code,
//!   valid until the executor frees the tree, and the result is unchanged.
//!
//! Refused (no installation, rows not shown) when the tree already has
//! instrumentation (then it is only read), when the functions are not in
//! the binary, or at an unsafe stop.  The stop is also never inside a
//! Gather's shared-memory setup (`ExecInitParallelPlan`: the nodes' parts
//! are sized by whether they are instrumented, see `not_now`) nor the
//! statement's own `standard_ExecutorEnd`: the backend runs on a little.
//!
//! ExplainNode ends the loop of every instrumented node it prints
//! (`InstrEndLoop`, even without ANALYZE); the plan text is made with the
//! nodes' `Instrumentation` saved before and written back after (by
//! `explain::explain`, for `plan` as well), so a
//! statement's own EXPLAIN ANALYZE keeps its loops.  Parallel workers' own
//! nodes: the same counting installed into each worker's tree from a
//! second attach (`progress/workers.rs`), shown under the leader's node
//! per worker; a parallel seq scan's block progress is the whole scan's.

use super::backend::{Backend, Outcome, ProbeHandler, Ran, probe_outcome};
use super::explain::{self, ExplainOpts};
use crate::capture::{Event, ProgressNode};
use anyhow::{Result, bail};
use std::time::Duration;

mod counting;
mod workers;
use counting::{Counting, install_rows_counting, rows_loops};
pub use workers::WorkerRows;
use workers::Workers;

pub use super::planstate::Node;
use super::planstate::{Layouts, walk};

/// Why this stop is no place to read and instrument statement `qd`, if
/// it is not:
///
/// * inside `ExecInitParallelPlan`, a Gather (Merge) first asks each node
///   below it how much shared memory it needs (`ExecParallelEstimate`),
///   then creates the segment and lets each node take its part
///   (`ExecParallelInitializeDSM`); Hash, Sort, Agg, Memoize, Incremental
///   Sort, Bitmap Index Scan (and on 18 Index Scan, Index Only Scan,
///   Bitmap Heap Scan) ask for room for their workers' statistics only
///   when their `instrument` is set.  Set in between, the two disagree: an
///   "out of shared memory" ERROR, or on 18 an index scan's shared
///   descriptor written past its chunk over another one;
/// * inside `qd`'s own `standard_ExecutorEnd` (a DO block's statement,
///   found through SPI's frame): its tree is being ended and its memory
///   freed.
pub fn not_now(s: &mut dyn Backend, qd: u64) -> Result<Option<String>> {
    if let Some(f) = s
        .frame_functions()?
        .into_iter()
        .find(|f| PARALLEL_SETUP.contains(&f.as_str()))
    {
        return Ok(Some(format!(
            "stopped in {f}, where a Gather sizes its workers' shared memory by which nodes are instrumented"
        )));
    }
    for (_, _, v) in s.frame_params(&["standard_ExecutorEnd"], "queryDesc")? {
        if v.map(|v| v == qd).unwrap_or(true) {
            return Ok(Some(
                "stopped in the statement's standard_ExecutorEnd: it is ending".into(),
            ));
        }
    }
    Ok(None)
}

/// The functions of a parallel plan's shared-memory setup (see `not_now`).
const PARALLEL_SETUP: &[&str] = &[
    "ExecInitParallelPlan",
    "ExecParallelEstimate",
    "ExecParallelInitializeDSM",
    "InitializeParallelDSM",
];

/// What one read of a node tells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeNow {
    pub rows: Option<f64>,
    pub loops: Option<f64>,
    /// (blocks done, blocks of the relation)
    pub blocks: Option<(u64, u64)>,
    /// The parallel workers' rows of this node, per worker number.
    pub workers: Vec<WorkerRows>,
}

/// The statement being watched and how to read it.
pub struct Progress {
    qd: u64,
    l: Layouts,
    pub nodes: Vec<Node>,
    /// The EXPLAIN text, one entry per line; `Some(i)`: the line of node i.
    lines: Vec<(String, Option<usize>)>,
    /// Rows are counted (the tree had or got instrumentation).
    pub counting: bool,
    /// Why rows are not shown, or since when they are counted.
    pub rows_note: String,
    start_ts: Option<i64>,
    ends: Vec<u64>,
    aborts: Vec<u64>,
    pub ended: Option<String>,
    /// Output of the last poll, for after_poll.
    pending: Option<String>,
    every: Duration,
    pub reports: u64,
    /// Each report's numbers (tests and the summary).
    pub last: Vec<NodeNow>,
    /// The leader's parallel workers (`workers.rs`).
    workers: Workers,
    /// The tree has a Gather (Merge): workers are looked for.
    parallel: bool,
}

/// Microseconds between 2000-01-01 (PostgreSQL's epoch) and 1970-01-01.
const PG_EPOCH_US: i64 = 946_684_800 * 1_000_000;

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

fn hhmmss(unix_us: i64) -> String {
    let s = (unix_us / 1_000_000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02} UTC", s / 3600, (s / 60) % 60, s % 60)
}

impl Progress {
    /// At a safe stop inside the running statement `qd`: the plan text, the
    /// tree, and row counting installed where it can be.
    pub fn start(s: &mut dyn Backend, qd: u64, every: Duration) -> Result<Progress> {
        let l = Layouts::of(s)?;
        if let Some(why) = not_now(s, qd)? {
            bail!("{why}; run plan --progress again");
        }
        let qd_l = s.layout("QueryDesc")?;
        let root = s.read_u64(qd + qd_l.offset("planstate")?)?;
        let estate = s.read_u64(qd + qd_l.offset("estate")?)?;
        if root == 0 || estate == 0 {
            bail!("the statement's executor has not built its plan state yet: try again");
        }
        let timeout = s.call_timeout();
        let mut nodes = Vec::new();
        walk(s, &l, root, &mut nodes, 0)?;
        // ExplainNode ends the loop of every instrumented node it prints
        // (InstrEndLoop, even without ANALYZE): on a running tree that
        // would add a loop to each running node of the statement's own
        // EXPLAIN ANALYZE (or of counting installed earlier); the counters
        // are put back as they were once the plan text is made
        // (explain::explain puts them back)
        let text = explain::explain(s, qd, &ExplainOpts::default(), timeout)?;
        // node lines are the ones with an estimate, in ExplainNode's order
        let mut k = 0;
        let mut lines: Vec<(String, Option<usize>)> = text
            .lines()
            .map(|t| {
                let node = t.contains("  (cost=").then(|| {
                    k += 1;
                    k - 1
                });
                (t.to_string(), node)
            })
            .collect();
        if k != nodes.len() {
            // not the order pgdbg expects (an invisible Gather, ...): show
            // the tree pgdbg walked instead of the text
            lines = nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.tag.trim_end_matches("State").to_string(), Some(i)))
                .collect();
        }
        let mut p = Progress {
            qd,
            l,
            nodes,
            lines,
            counting: false,
            rows_note: String::new(),
            start_ts: None,
            ends: s.function_addrs("standard_ExecutorEnd"),
            aborts: [
                s.function_addrs("AbortTransaction"),
                s.function_addrs("AbortSubTransaction"),
            ]
            .concat(),
            ended: None,
            pending: None,
            every,
            reports: 0,
            last: Vec::new(),
            workers: Workers::new(s.pid()),
            parallel: false,
        };
        p.parallel = p
            .nodes
            .iter()
            .any(|n| n.tag == "GatherState" || n.tag == "GatherMergeState");
        p.start_ts = p.statement_start(s);
        p.install_counting(s, estate)?;
        Ok(p)
    }

    fn statement_start(&self, s: &dyn Backend) -> Option<i64> {
        let be = s.read_u64(s.global_addr("MyBEEntry")?).ok()?;
        if be == 0 {
            return None;
        }
        let l = s.layout("PgBackendStatus").ok()?;
        let t = s
            .read_u64(be + l.offset("st_activity_start_timestamp").ok()?)
            .ok()? as i64;
        (t != 0).then_some(t + PG_EPOCH_US)
    }

    /// Rows-only instrumentation into the running tree (see the module text).
    fn install_counting(&mut self, s: &mut dyn Backend, estate: u64) -> Result<()> {
        match install_rows_counting(s, &self.l, &self.nodes, estate)? {
            Counting::Own => {
                self.counting = true;
                self.rows_note = "rows from the statement's own instrumentation".into();
            }
            Counting::Earlier => {
                self.counting = true;
                self.rows_note =
                    "rows counted since an earlier plan --progress (its counting stays until the statement ends)"
                        .into();
            }
            Counting::Partial => {
                self.rows_note = "rows not shown: the tree is partly instrumented".into();
            }
            Counting::Missing(why) => self.rows_note = format!("rows not shown: {why}"),
            Counting::Installed(_) => {
                self.counting = true;
                self.rows_note = format!("rows counted since {}", hhmmss(now_us()));
            }
        }
        Ok(())
    }

    /// Read every node now (memory reads only).
    fn read_nodes(&self, s: &dyn Backend) -> Vec<NodeNow> {
        let instr_off = self.l.ps.offset("instrument").ok();
        self.nodes
            .iter()
            .map(|n| {
                let mut now = NodeNow::default();
                if self.counting
                    && let Some(io) = instr_off
                    && let Ok(ia) = s.read_u64(n.addr + io)
                    && ia != 0
                    && let Ok(b) = s.read_bytes(ia, self.l.instr.size as usize)
                {
                    let (rows, loops) = rows_loops(&self.l, &b);
                    now.rows = Some(rows);
                    now.loops = Some(loops);
                }
                if n.tag == "SeqScanState" {
                    now.blocks = seqscan_blocks(s, n.addr);
                }
                now
            })
            .collect()
    }

    /// The executor node functions on the stack, innermost first
    /// (`ExecScan <- MultiExecHash <- ExecHashJoin`).
    fn executing(&self, s: &mut dyn Backend) -> Option<String> {
        let stack = s.quick_stack(48);
        let mut names: Vec<String> = Vec::new();
        for fr in &stack {
            let name = fr.split('+').next().unwrap_or("");
            let base = name.split('.').next().unwrap_or(name);
            let node_fn = (base.starts_with("Exec") || base.starts_with("MultiExec"))
                && !base.starts_with("ExecProcNode")
                && !base.starts_with("ExecInterpExpr")
                && !base.starts_with("ExecEval")
                && !base.starts_with("ExecScanFetch")
                && base != "ExecutePlan"
                && base != "ExecutorRun";
            if node_fn && names.last().map(String::as_str) != Some(base) {
                names.push(base.to_string());
            }
            if names.len() == 4 || base == "standard_ExecutorRun" {
                break;
            }
        }
        (!names.is_empty()).then(|| names.join(" <- "))
    }

    fn report(&mut self, s: &mut dyn Backend) -> String {
        let mut now = self.read_nodes(s);
        self.workers.read(s, &self.l);
        for (i, n) in now.iter_mut().enumerate() {
            n.workers = self.workers.rows_of(i);
        }
        let exec = self.executing(s);
        let exec_capture = exec.clone();
        let elapsed_s = self.start_ts.map(|t| (now_us() - t) as f64 / 1e6);
        let elapsed = elapsed_s
            .map(|t| format!("{t:.1}s"))
            .unwrap_or_else(|| "?".into());
        let mut out = format!(
            "-- progress at {} (elapsed {elapsed}; {}{}){}\n",
            hhmmss(now_us()),
            self.rows_note,
            self.workers.summary(),
            exec.map(|e| format!("; executing now: {e}"))
                .unwrap_or_default()
        );
        for note in self.workers.take_notes() {
            out.push_str(&format!("-- {note}\n"));
        }
        for (text, node) in &self.lines {
            out.push_str(text);
            let mut worker_lines = String::new();
            if let Some(i) = node
                && let Some(n) = now.get(*i)
            {
                let mut ann = Vec::new();
                if let (Some(r), Some(l)) = (n.rows, n.loops) {
                    if n.workers.is_empty() {
                        ann.push(format!("rows so far={r:.0} loops={l:.0}"));
                    } else {
                        let total: f64 = r + n.workers.iter().map(|w| w.rows).sum::<f64>();
                        ann.push(format!(
                            "rows so far={r:.0} loops={l:.0} in the leader, total {total:.0} with {} worker{}",
                            n.workers.len(),
                            if n.workers.len() == 1 { "" } else { "s" }
                        ));
                    }
                }
                // like EXPLAIN ANALYZE VERBOSE: under the node, one line per worker
                let indent = match text.find("->") {
                    Some(p) => p + 6,
                    None => text.len() - text.trim_start().len() + 2,
                };
                for w in &n.workers {
                    worker_lines.push_str(&format!(
                        "\n{:indent$}Worker {}: rows so far={:.0} loops={:.0}{}",
                        "",
                        w.number,
                        w.rows,
                        w.loops,
                        if w.ended {
                            " (ended: counts of its last read)"
                        } else {
                            ""
                        }
                    ));
                }
                if let Some((d, t)) = n.blocks {
                    ann.push(format!(
                        "blocks {d} of {t} ({:.1}%)",
                        if t > 0 {
                            d as f64 * 100.0 / t as f64
                        } else {
                            0.0
                        }
                    ));
                }
                if !ann.is_empty() {
                    out.push_str(&format!("  [{}]", ann.join(", ")));
                }
            }
            out.push_str(&worker_lines);
            out.push('\n');
        }
        if s.capturing() {
            let e = self.event(&now, exec_capture, elapsed_s);
            s.emit_event(e, None);
        }
        self.last = now;
        self.reports += 1;
        out.trim_end().to_string()
    }
}

impl Progress {
    /// The capture's `progress` event of a report.
    fn event(&self, now: &[NodeNow], executing: Option<String>, elapsed_s: Option<f64>) -> Event {
        let nodes = self
            .lines
            .iter()
            .filter_map(|(text, node)| {
                let n = now.get((*node)?)?;
                let rows = n
                    .rows
                    .map(|r| r + n.workers.iter().map(|w| w.rows).sum::<f64>());
                Some(ProgressNode {
                    blocks: n.blocks.map(|b| b.0),
                    blocks_total: n.blocks.map(|b| b.1),
                    loops: n.loops,
                    node: text.trim().trim_start_matches("->").trim().to_string(),
                    rows,
                })
            })
            .collect();
        Event::Progress {
            elapsed_s,
            executing,
            nodes,
        }
    }
}

/// Blocks scanned of a SeqScan's relation: a parallel scan's shared
/// counter, else the position of the serial scan from its start block.
fn seqscan_blocks(s: &dyn Backend, node: u64) -> Option<(u64, u64)> {
    let ss = s.layout("ScanState").ok()?;
    let ss_off = s.layout("SeqScanState").ok()?.offset("ss").unwrap_or(0);
    let desc = s
        .read_u64(node + ss_off + ss.offset("ss_currentScanDesc").ok()?)
        .ok()?;
    if desc == 0 {
        return None;
    }
    let hs = s.layout("HeapScanDescData").ok()?;
    let base = s.layout("TableScanDescData").ok()?;
    let base_off = hs.offset("rs_base").unwrap_or(0);
    let par = s
        .read_u64(desc + base_off + base.offset("rs_parallel").ok()?)
        .ok()?;
    if par != 0 {
        let pb = s.layout("ParallelBlockTableScanDescData").ok()?;
        let n = s.read_i32(par + pb.offset("phs_nblocks").ok()?).ok()? as u32 as u64;
        let done = s.read_u64(par + pb.offset("phs_nallocated").ok()?).ok()?;
        return Some((done.min(n), n));
    }
    let n = s.read_i32(desc + hs.offset("rs_nblocks").ok()?).ok()? as u32 as u64;
    let start = s.read_i32(desc + hs.offset("rs_startblock").ok()?).ok()? as u32 as u64;
    let cur = s.read_i32(desc + hs.offset("rs_cblock").ok()?).ok()? as u32 as u64;
    let inited = hs
        .offset("rs_inited")
        .ok()
        .and_then(|o| s.read_bytes(desc + o, 1).ok())
        .map(|b| b[0] != 0)
        .unwrap_or(true);
    if n == 0 || !inited || cur >= n {
        return Some((if inited && n > 0 { n } else { 0 }, n));
    }
    Some((((cur + n - start) % n) + 1, n))
}

impl ProbeHandler for Progress {
    fn on_stop(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()> {
        let regs = s.registers()?;
        if self.ends.contains(&addr) && regs.rdi == self.qd {
            self.ended = Some("the statement ended".into());
        } else if self.aborts.contains(&addr) {
            self.ended = Some("the transaction aborted (ERROR): the statement ended".into());
        }
        Ok(())
    }
    fn done(&self) -> bool {
        self.ended.is_some()
    }
    fn poll_every(&self) -> Option<Duration> {
        Some(self.every)
    }
    fn on_poll(&mut self, s: &mut dyn Backend) -> Result<()> {
        if self.ended.is_none() {
            self.pending = Some(self.report(s));
        }
        Ok(())
    }
    fn after_poll(&mut self, s: &mut dyn Backend) -> Result<()> {
        if let Some(t) = self.pending.take() {
            s.say(&t);
        }
        // the leader runs meanwhile: new workers are counted from the
        // next report on
        if self.parallel && self.ended.is_none() {
            self.workers.refresh(s, &self.l, &self.nodes);
        }
        Ok(())
    }
}

/// `plan --progress`: report every `every` until the statement ends,
/// `limit`, or Ctrl-C.  The backend is stopped at a safe point inside
/// statement `qd`.
pub fn plan_progress(
    s: &mut dyn Backend,
    qd: u64,
    every: Duration,
    limit: Option<Duration>,
) -> Result<Outcome> {
    let mut p = Progress::start(s, qd, every)?;
    let mut first = p.report(s);
    if p.parallel {
        first.push_str(
            "\n-- parallel workers: looked for while the backend runs on; their rows show from the next report",
        );
    }
    s.say(&first);
    for &a in p.ends.clone().iter().chain(p.aborts.clone().iter()) {
        s.arm_internal(a)?;
    }
    let Ran { end, text } = s.run_probes(&mut p, limit)?;
    let summary = format!(
        "plan --progress: {} report{}{}",
        p.reports,
        if p.reports == 1 { "" } else { "s" },
        p.ended
            .as_ref()
            .map(|e| format!("; {e}"))
            .unwrap_or_default()
    );
    Ok(probe_outcome(
        s,
        end,
        format!("{summary}{text}"),
        String::new(),
    ))
}
