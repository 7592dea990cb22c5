//! `plan --progress`: the parallel workers' own nodes.
//!
//! A Gather's workers run the part of the plan below it in processes of
//! their own ("postgres: parallel worker for PID N"), each with its own
//! plan state tree; their rows reach the leader's Gather, not the
//! leader's nodes below it.  At each report pgdbg looks for the leader's
//! workers (/proc: the postmaster's children whose title names the
//! leader) and, for each one not seen before, with the leader running:
//!
//! * attaches to it from the same pgdbg (`Backend::attach_sibling`: a
//!   second traced process with its own guardian and group stop), lets it
//!   run a little until it stops at a safe point inside its part of the
//!   plan (`standard_ExecutorRun` on the stack: its nodes were given their
//!   shared-memory parts by `ExecParallelInitializeWorker` before, which is
//!   where an `instrument` set would have asked for parts that do not
//!   exist), finds its `QueryDesc` (`ParallelQueryMain`'s local, else the
//!   outermost `standard_ExecutorRun`'s argument), walks its tree and maps
//!   each node to the leader's by `plan_node_id`;
//! * installs the same rows-only counting as in the leader
//!   (`install_rows_counting`: an array allocated in the worker's own
//!   `es_query_cxt`, freed with its statement), never where the worker's
//!   tree has instrumentation already (the leader's EXPLAIN ANALYZE: then
//!   it is only read);
//! * detaches at once (every way out).  Nothing is left to undo: the
//!   counters are the worker's query memory and `ExecProcNodeInstr` its own
//!   code.
//!
//! Why this cannot make a worker write out of bounds or raise an ERROR at
//! its end: the worker reports its nodes' instrumentation
//! (`ExecParallelReportInstrumentation`, which would look each node up in
//! the shared area and `elog(ERROR)` on one not found) only when the
//! leader asked for instrumentation at the Gather's start
//! (`estate->es_instrument`, never set by pgdbg), and then every worker
//! node is instrumented from its start and pgdbg installs nothing.  The
//! per-node shared statistics (Hash, Sort, Agg, Memoize, and on 18 index
//! and bitmap scans) are looked up only in `ExecParallelInitializeWorker`,
//! already past; at their end the nodes write there only when that lookup
//! set their pointer.  `ExecShutdownHash` allocates its statistics in the
//! current context (the worker's query memory) when `instrument` is set.
//!
//! Reading needs no stop: the counters are read with `process_vm_readv`
//! (`Backend::read_untraced`), each time after checking the process is the
//! same (its start time) and its `QueryDesc` still has the tree (its
//! `standard_ExecutorEnd` clears `planstate`); a worker whose statement
//! ended keeps the counts of its last read.  Counts are summed per worker
//! number, like EXPLAIN ANALYZE does over a Gather's rescans.

use super::{Counting, Layouts, Node, hhmmss, install_rows_counting, now_us, rows_loops, walk};
use crate::postgres::backend::{Backend, Sibling};
use crate::postgres::call;
use anyhow::Result;
use std::collections::BTreeMap;
use std::time::Duration;

/// What is known of one worker process.
struct Proc {
    pid: i32,
    start: Option<u64>,
    /// `ParallelWorkerNumber`.
    number: i32,
    /// Its statement's `QueryDesc`, tree root and `EState`: still its
    /// statement while `qd->planstate == root`.
    qd: u64,
    root: u64,
    /// (node of the leader, the worker node's `Instrumentation`).
    counters: Vec<(usize, u64)>,
    /// Per node of the leader: the last (rows, loops) read.
    last: BTreeMap<usize, (f64, f64)>,
    /// Its statement or the process ended: `last` stays.
    ended: bool,
    /// Its tree had instrumentation of its own (only read).
    own: bool,
}

/// The leader's workers, as far as `plan --progress` counts them.
pub(super) struct Workers {
    leader: i32,
    /// The leader's PID in its own PID namespace: the one its workers'
    /// titles name (a container's PID when the server runs in one).
    leader_ns: i32,
    procs: Vec<Proc>,
    /// Processes seen already (counted, refused, or ended), by PID and start.
    seen: Vec<(i32, Option<u64>)>,
    /// Not counted: (PID, why), said once each in the next report.
    notes: Vec<String>,
    /// Retries left per PID still looked at (no safe point found yet).
    retries: BTreeMap<i32, u32>,
    /// When the first worker's counting was installed.
    since: Option<String>,
}

/// A worker's rows of one node of the leader, summed per worker number.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRows {
    pub number: i32,
    pub rows: f64,
    pub loops: f64,
    /// Every process of that number has ended (counts of its last read).
    pub ended: bool,
}

/// How often one worker is looked at for a safe point before it is given up.
const TRIES: u32 = 5;

/// Frames of the worker's outer statement: `ParallelQueryMain` calls its
/// executor directly (`ExecutorRun` may be inlined or a tail call).
const WORKER_MAIN: &str = "ParallelQueryMain";

impl Workers {
    pub(super) fn new(leader: i32) -> Workers {
        Workers {
            leader,
            leader_ns: crate::inferior::procfs::ns_pid(leader),
            procs: Vec::new(),
            seen: Vec::new(),
            notes: Vec::new(),
            retries: BTreeMap::new(),
            since: None,
        }
    }

    /// The processes whose title says they are this leader's workers.
    fn find(&self) -> Vec<i32> {
        let Some(pm) = crate::inferior::procfs::status(self.leader)
            .ok()
            .map(|s| s.ppid)
        else {
            return Vec::new();
        };
        crate::inferior::procfs::children_of(pm)
            .into_iter()
            .filter(|p| crate::postgres::parallel_leader_from_title(*p) == Some(self.leader_ns))
            .collect()
    }

    /// Count the workers not seen yet (with the leader running).  Never
    /// fails: a worker that cannot be counted is said in a note, one that
    /// ends meanwhile is passed over quietly.
    pub(super) fn refresh(&mut self, s: &mut dyn Backend, l: &Layouts, leader: &[Node]) {
        for pid in self.find() {
            if s.stop_requested() {
                return;
            }
            let start = crate::inferior::procfs::start_time(pid);
            if self.seen.contains(&(pid, start)) {
                continue;
            }
            match self.count_one(s, l, leader, pid, start) {
                Outcome::Counted(p) => {
                    self.since.get_or_insert_with(|| hhmmss(now_us()));
                    self.seen.push((pid, start));
                    self.procs.push(p);
                }
                Outcome::Later(why) => {
                    let left = self.retries.entry(pid).or_insert(TRIES);
                    *left = left.saturating_sub(1);
                    if *left == 0 {
                        self.seen.push((pid, start));
                        self.notes
                            .push(format!("parallel worker PID {pid} not counted: {why}"));
                    }
                }
                Outcome::Refused(why) => {
                    self.seen.push((pid, start));
                    self.notes
                        .push(format!("parallel worker PID {pid} not counted: {why}"));
                }
                Outcome::Gone => self.seen.push((pid, start)),
            }
        }
    }

    /// Attach to `pid`, count it, detach (every way out).
    fn count_one(
        &mut self,
        s: &mut dyn Backend,
        l: &Layouts,
        leader: &[Node],
        pid: i32,
        start: Option<u64>,
    ) -> Outcome {
        let mut w = match s.attach_sibling(pid) {
            Ok(w) => w,
            Err(e) => {
                return if gone(pid, start) {
                    Outcome::Gone
                } else {
                    Outcome::Refused(format!("{e:#}"))
                };
            }
        };
        // traced now, its PID cannot be reused until it is let go: it must
        // still be the process found (same start time) and still this
        // leader's worker, else nothing is written into it
        if start.is_none()
            || crate::inferior::procfs::start_time(pid) != start
            || crate::postgres::parallel_leader_from_title(pid) != Some(self.leader_ns)
        {
            let _ = w.detach();
            return Outcome::Gone;
        }
        let r = install_in_worker(&mut *w, l, leader);
        let detached = w.detach();
        let ended = gone(pid, start);
        match (r, detached) {
            _ if ended => Outcome::Gone,
            (_, Err(e)) => Outcome::Refused(format!("detach: {e:#}")),
            (Ok(Ok(mut p)), Ok(())) => {
                p.start = start;
                Outcome::Counted(p)
            }
            (Ok(Err(later)), Ok(())) => later,
            (Err(e), Ok(())) => Outcome::Refused(format!("{e:#}")),
        }
    }

    /// Read every counted worker now (memory reads only, none stopped).
    pub(super) fn read(&mut self, s: &dyn Backend, l: &Layouts) {
        let ps_off = s
            .layout("QueryDesc")
            .ok()
            .and_then(|q| q.offset("planstate").ok());
        for p in self.procs.iter_mut().filter(|p| !p.ended) {
            match read_proc(s, l, ps_off, p) {
                Some(now) => {
                    for (i, (r, lo)) in now {
                        let e = p.last.entry(i).or_insert((0.0, 0.0));
                        // never backwards (a torn read of a running counter)
                        *e = (e.0.max(r), e.1.max(lo));
                    }
                }
                None => p.ended = true,
            }
        }
    }

    /// Per worker number, the rows of the leader's node `i`.
    pub(super) fn rows_of(&self, i: usize) -> Vec<WorkerRows> {
        let mut by: BTreeMap<i32, WorkerRows> = BTreeMap::new();
        for p in &self.procs {
            let Some(&(r, lo)) = p.last.get(&i) else {
                continue;
            };
            let e = by.entry(p.number).or_insert(WorkerRows {
                number: p.number,
                rows: 0.0,
                loops: 0.0,
                ended: true,
            });
            e.rows += r;
            e.loops += lo;
            e.ended &= p.ended;
        }
        by.into_values().collect()
    }

    /// The report's words on the workers (empty when there are none).
    pub(super) fn summary(&self) -> String {
        if self.procs.is_empty() {
            return String::new();
        }
        let running = self.procs.iter().filter(|p| !p.ended).count();
        let own = self.procs.iter().all(|p| p.own);
        format!(
            "; parallel workers: {} counted{}, {running} running",
            self.procs.len(),
            if own {
                " (their own instrumentation)".to_string()
            } else {
                self.since
                    .as_ref()
                    .map(|t| format!(" since {t}"))
                    .unwrap_or_default()
            }
        )
    }

    /// Notes not said yet.
    pub(super) fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}

enum Outcome {
    Counted(Proc),
    /// No safe point this time: looked at again at the next report.
    Later(String),
    Refused(String),
    Gone,
}

/// One worker's counters now, per node of the leader; None when the
/// process or its statement has ended (the counters may be freed).
fn read_proc(
    s: &dyn Backend,
    l: &Layouts,
    ps_off: Option<u64>,
    p: &Proc,
) -> Option<Vec<(usize, (f64, f64))>> {
    let same_statement = || {
        let o = ps_off?;
        let mut b = [0u8; 8];
        s.read_untraced(p.pid, p.qd + o, &mut b).ok()?;
        (u64::from_le_bytes(b) == p.root).then_some(())
    };
    if crate::inferior::procfs::start_time(p.pid) != p.start {
        return None;
    }
    same_statement()?;
    let mut now = Vec::new();
    for &(i, a) in &p.counters {
        let mut b = vec![0u8; l.instr.size as usize];
        s.read_untraced(p.pid, a, &mut b).ok()?;
        now.push((i, rows_loops(l, &b)));
    }
    // still its statement after the reads: they were its counters
    same_statement()?;
    Some(now)
}

/// The process has exited (or its PID now names another one).
fn gone(pid: i32, start: Option<u64>) -> bool {
    crate::inferior::procfs::start_time(pid) != start || start.is_none()
}

/// Inside the attached worker `w`: find its statement at a safe stop and
/// install counting (or take its own instrumentation).  Ok(Err(..)): not
/// now, or never, with why.
fn install_in_worker(
    w: &mut dyn Sibling,
    l: &Layouts,
    leader: &[Node],
) -> Result<std::result::Result<Proc, Outcome>> {
    let w: &mut dyn Backend = w;
    // a parallel worker has its number from its start (-1 in any other
    // backend): checked before anything is written into it
    let number = match w.global_addr("ParallelWorkerNumber") {
        Some(a) => w.read_i32(a)?,
        None => -1,
    };
    if number < 0 && w.global_addr("ParallelWorkerNumber").is_some() {
        return Ok(Err(Outcome::Refused(format!(
            "it is not a parallel worker (ParallelWorkerNumber is {number})"
        ))));
    }
    let Some(qd) = settle(w)? else {
        return Ok(Err(Outcome::Later(
            "no safe stop inside its part of the plan".into(),
        )));
    };
    let qd_l = w.layout("QueryDesc")?;
    let root = w.read_u64(qd + qd_l.offset("planstate")?)?;
    let estate = w.read_u64(qd + qd_l.offset("estate")?)?;
    if root == 0 || estate == 0 {
        return Ok(Err(Outcome::Later("its executor has no plan state".into())));
    }
    let mut nodes = Vec::new();
    walk(w, l, root, &mut nodes, 0)?;
    let mut map = Vec::new();
    for n in &nodes {
        let Some(i) = n
            .plan_id
            .and_then(|id| leader.iter().position(|m| m.plan_id == Some(id)))
        else {
            return Ok(Err(Outcome::Refused(format!(
                "its {} (plan node {:?}) is not a node of the leader's statement",
                n.tag, n.plan_id
            ))));
        };
        map.push(i);
    }
    // the leader asked its workers for instrumentation (EXPLAIN ANALYZE):
    // then each node has its own from the start; never added to
    let es_l = w.layout("EState")?;
    let es_instrument = es_l
        .offset("es_instrument")
        .ok()
        .map(|o| w.read_i32(estate + o))
        .transpose()?
        .unwrap_or(0);
    let instr_off = l.ps.offset("instrument")?;
    let (own, counters) = match install_if_plain(w, l, &nodes, estate, es_instrument)? {
        Ok(Counting::Own | Counting::Earlier) => {
            let mut c = Vec::new();
            for (n, &i) in nodes.iter().zip(&map) {
                c.push((i, w.read_u64(n.addr + instr_off)?));
            }
            (true, c)
        }
        Ok(Counting::Installed(arr)) => (
            false,
            map.iter()
                .enumerate()
                .map(|(k, &i)| (i, arr + k as u64 * l.instr.size))
                .collect(),
        ),
        Ok(Counting::Partial) => {
            return Ok(Err(Outcome::Refused(
                "its tree is partly instrumented".into(),
            )));
        }
        Ok(Counting::Missing(why)) | Err(why) => return Ok(Err(Outcome::Refused(why))),
    };
    Ok(Ok(Proc {
        pid: w.pid(),
        start: None,
        number,
        qd,
        root,
        counters,
        last: BTreeMap::new(),
        ended: false,
        own,
    }))
}

/// Counting installed only into a tree without any instrumentation whose
/// statement asked for none.
fn install_if_plain(
    w: &mut dyn Backend,
    l: &Layouts,
    nodes: &[Node],
    estate: u64,
    es_instrument: i32,
) -> Result<std::result::Result<Counting, String>> {
    let instr_off = l.ps.offset("instrument")?;
    let mut have = 0;
    for n in nodes {
        if w.read_u64(n.addr + instr_off)? != 0 {
            have += 1;
        }
    }
    if have == 0 && es_instrument != 0 {
        return Ok(Err(format!(
            "its statement asks for instrumentation (es_instrument {es_instrument:#x}) that its nodes do not have"
        )));
    }
    Ok(Ok(install_rows_counting(w, l, nodes, estate)?))
}

/// Let the worker run a little until it stops at a safe point inside its
/// part of the plan; its `QueryDesc` then, None when it did not.
fn settle(w: &mut dyn Backend) -> Result<Option<u64>> {
    for attempt in 0..40u64 {
        if attempt > 0 {
            if w.stop_requested() {
                return Ok(None);
            }
            if w.run_briefly(Duration::from_millis(1 + attempt % 5))?
                .is_some()
                || w.is_gone()
            {
                return Ok(None);
            }
        }
        let frames = w.frame_functions()?;
        if !frames.iter().any(|f| f == "standard_ExecutorRun") {
            continue;
        }
        if call::unsafe_reason(w)?.is_some() {
            continue;
        }
        if let Some(qd) = worker_query_desc(w)? {
            return Ok(Some(qd));
        }
    }
    Ok(None)
}

/// The worker's own statement: `ParallelQueryMain`'s `queryDesc`, else
/// the outermost `standard_ExecutorRun`'s (inner ones are statements of
/// functions the plan calls).
fn worker_query_desc(w: &mut dyn Backend) -> Result<Option<u64>> {
    if let Some(qd) = w
        .frame_values(&[WORKER_MAIN], "queryDesc")?
        .into_iter()
        .find_map(|(_, _, v)| v.ok().filter(|v| *v != 0))
    {
        return Ok(Some(qd));
    }
    Ok(w.frame_params(&["standard_ExecutorRun"], "queryDesc")?
        .into_iter()
        .rev()
        .find_map(|(_, _, v)| v.ok().filter(|v| *v != 0)))
}

#[cfg(test)]
mod tests {
    //! Reading workers' counters on a fake backend: a worker whose
    //! statement or process ends between two reads is marked ended with
    //! the counts of its last read, never an error; counts never go back
    //! and are summed per worker number.
    use super::*;
    use crate::debuginfo::layout::FieldKind::{Float, Pointer, Signed};
    use crate::postgres::backend::fake::{FakeBackend, layout};

    const QD: u64 = 0x1000;
    const ROOT: u64 = 0x2000;
    const C0: u64 = 0x3000;
    const C1: u64 = 0x4000;

    fn layouts(s: &mut FakeBackend) -> Layouts {
        let qd = layout(
            "QueryDesc",
            &[("operation", 8, Signed), ("planstate", 8, Pointer)],
        );
        s.layouts.insert(qd.name.clone(), qd);
        Layouts {
            ps: layout(
                "PlanState",
                &[("type", 4, Signed), ("instrument", 8, Pointer)],
            ),
            list: layout("List", &[("length", 4, Signed), ("elements", 8, Pointer)]),
            instr: layout(
                "Instrumentation",
                &[
                    ("running", 1, Signed),
                    ("tuplecount", 8, Float),
                    ("ntuples", 8, Float),
                    ("nloops", 8, Float),
                ],
            ),
            plan: None,
            tags: Vec::new(),
        }
    }

    fn counter(l: &Layouts, running: bool, tuplecount: f64, ntuples: f64, nloops: f64) -> Vec<u8> {
        let mut b = vec![0u8; l.instr.size as usize];
        let mut put = |f: &str, v: f64| {
            let o = l.instr.offset(f).unwrap() as usize;
            b[o..o + 8].copy_from_slice(&v.to_le_bytes());
        };
        put("tuplecount", tuplecount);
        put("ntuples", ntuples);
        put("nloops", nloops);
        b[l.instr.offset("running").unwrap() as usize] = running as u8;
        b
    }

    /// A worker "process" (this test process: its start time is real).
    fn proc(number: i32, counters: Vec<(usize, u64)>) -> Proc {
        let pid = std::process::id() as i32;
        Proc {
            pid,
            start: crate::inferior::procfs::start_time(pid),
            number,
            qd: QD,
            root: ROOT,
            counters,
            last: BTreeMap::new(),
            ended: false,
            own: false,
        }
    }

    #[test]
    fn workers_that_end_keep_their_last_counts() {
        let mut s = FakeBackend::new();
        let l = layouts(&mut s);
        let mut qd = vec![0u8; 16];
        qd[8..16].copy_from_slice(&ROOT.to_le_bytes());
        s.map(QD, qd);
        s.map(C0, counter(&l, true, 5.0, 0.0, 0.0));
        s.map(C1, counter(&l, false, 0.0, 7.0, 1.0));
        let mut w = Workers::new(1);
        w.procs.push(proc(0, vec![(2, C0)]));
        w.procs.push(proc(1, vec![(2, C1)]));
        w.read(&s, &l);
        let rows = w.rows_of(2);
        assert_eq!(
            rows,
            vec![
                WorkerRows {
                    number: 0,
                    rows: 5.0,
                    loops: 1.0,
                    ended: false
                },
                WorkerRows {
                    number: 1,
                    rows: 7.0,
                    loops: 1.0,
                    ended: false
                },
            ]
        );
        assert!(w.rows_of(0).is_empty());
        assert_eq!(w.summary(), "; parallel workers: 2 counted, 2 running");
        // a torn read (lower) never moves a count back
        s.map(C0, counter(&l, true, 3.0, 0.0, 0.0));
        w.read(&s, &l);
        assert_eq!(w.rows_of(2)[0].rows, 5.0);
        // its statement ended (standard_ExecutorEnd cleared planstate) and
        // its memory went away: ended, last counts kept, no error
        s.map(C0, counter(&l, true, 9.0, 0.0, 0.0));
        s.poke(QD + 8, &0u64.to_le_bytes());
        s.unmap(C1);
        w.read(&s, &l);
        let rows = w.rows_of(2);
        assert_eq!((rows[0].rows, rows[0].ended), (5.0, true));
        assert_eq!((rows[1].rows, rows[1].ended), (7.0, true));
        assert_eq!(w.summary(), "; parallel workers: 2 counted, 0 running");
        // a later worker of the same number (a rescan) adds to it
        s.poke(QD + 8, &ROOT.to_le_bytes());
        s.map(C1, counter(&l, true, 4.0, 0.0, 0.0));
        w.procs.push(proc(0, vec![(2, C1)]));
        w.read(&s, &l);
        let rows = w.rows_of(2);
        assert_eq!(
            (rows[0].rows, rows[0].loops, rows[0].ended),
            (9.0, 2.0, false)
        );
    }

    #[test]
    fn a_process_that_is_gone_is_ended() {
        let mut s = FakeBackend::new();
        let l = layouts(&mut s);
        let mut w = Workers::new(1);
        let mut p = proc(0, vec![(0, C0)]);
        p.start = p.start.map(|t| t + 1);
        w.procs.push(p);
        w.read(&s, &l);
        assert!(w.procs[0].ended);
        assert!(w.rows_of(0).is_empty());
    }
}
