//! The plan-cache inspector: every custom/generic plan decision a backend
//! makes, with the costs PostgreSQL compared and why it chose.
//!
//! How the choice is learned: a breakpoint on `GetCachedPlan` (exported, so
//! always out of line) reads the `CachedPlanSource` as it is before the
//! decision; a one-shot breakpoint on the return address reads it again and
//! compares the returned `CachedPlan *` with `plansource->gplan`.  The
//! choice reported is the one PostgreSQL made, once per execution, even on
//! the 6th execution where `choose_custom_plan` runs twice.  All struct
//! layouts come from DWARF (`Layout`), one memory read per struct.
//!
//! That is `--stops`.  By default (14+) the choice is learned from the
//! plansource's counters instead (`num_custom_plans` / `num_generic_plans`
//! move by one when GetCachedPlan has chosen), so only the entry is needed,
//! and the entries are recorded in-process (`inferior::recorder`: a detour
//! at GetCachedPlan copies the plansource's counters and costs into a ring
//! buffer, read 50 to 200 times a second), so the backend never stops for a
//! decision; `--fast=stop` (or when no detour can be placed) stops at each
//! entry instead, and 13 (no `num_generic_plans`) gets `--stops`.
//!
//! | file | holds |
//! | --- | --- |
//! | `mod.rs` | the layouts, the probe and its state, what both modes share (names, query texts, the report of a decision), `ProbeHandler` |
//! | `decide.rs` | the decision logic, pure: counters settled into choices, lost executions, the reason and the text of a decision |
//! | `stop.rs` | the stop modes: entry and return breakpoints (`--stops`); `--fast=stop` |
//! | `ring.rs` | the in-process recorder mode (the default): install, drain, report |
//! | `chain.rs` | which plansource each sighting of an address is (the counters' exact steps): which texts may be read, which calls are told from their entry |
//! | `testkit.rs` | the unit tests' plansources on a fake backend |

use super::backend::{Backend, ProbeHandler};
use crate::debuginfo::layout::Layout;
use crate::inferior::foreign::ForeignInt3;
use crate::inferior::jumpover::TakenOver;
use crate::inferior::recorder::Recorder;
use anyhow::{Result, bail};
use std::collections::HashMap;

mod chain;
mod decide;
mod ring;
mod stop;
#[cfg(test)]
mod testkit;

use decide::prepare_name_in;
pub use decide::{decision_event, format_decision, label};
use ring::RING_POLL;

/// How `plancache` learns each decision of GetCachedPlan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlanCacheMode {
    /// The default (`--fast` is its old name): an in-process recorder, no
    /// stop; one stop per decision when it cannot be placed, two on a
    /// server without `num_generic_plans` (13).
    #[default]
    InProcess,
    /// `--fast=stop`: one ptrace stop per decision.
    OneStop,
    /// `--stops` (or `--ptrace`): two ptrace stops per decision, with the
    /// planning charge of each custom plan.
    Stops,
}

/// `CACHEDPLANSOURCE_MAGIC` from plancache.h: a sanity check that the
/// pointer really is a CachedPlanSource (not an offset).
const CACHEDPLANSOURCE_MAGIC: i64 = 195726186;

/// Layouts and addresses the inspector needs, resolved once per session.
pub struct PlanCacheLayouts {
    cps: Layout,
    cplan: Layout,
    list: Option<Layout>,
    pstmt: Layout,
    entries: Vec<u64>,
    prepared_queries: Option<u64>,
    hash: Option<super::dynahash::HashLayouts>,
    prep: Option<Layout>,
    plan_cache_mode: Option<(u64, Vec<(String, i64)>)>,
    cpu_operator_cost: Option<u64>,
}

impl PlanCacheLayouts {
    pub fn new(s: &dyn Backend) -> Result<PlanCacheLayouts> {
        let entries = s.function_addrs("GetCachedPlan");
        if entries.is_empty() {
            bail!("GetCachedPlan is not in this postgres binary: cannot watch the plan cache");
        }
        // The GUC is an `int`; its names come from the server's own GUC
        // table (`plan_cache_mode_options`: "auto", "force_generic_plan",
        // ...), read from the backend's memory.
        let plan_cache_mode = s.global_addr("plan_cache_mode").map(|a| {
            let values = s
                .global_addr("plan_cache_mode_options")
                .and_then(|opts| read_enum_options(s, opts).ok())
                .or_else(|| s.di().pack_guc_enum("plan_cache_mode"))
                .unwrap_or_default();
            (a, values)
        });
        Ok(PlanCacheLayouts {
            cps: s.layout("CachedPlanSource")?,
            cplan: s.layout("CachedPlan")?,
            list: s
                .layout("List")
                .ok()
                .filter(|l| l.has("elements") && l.has("length")),
            pstmt: s.layout("PlannedStmt")?,
            entries,
            prepared_queries: s.global_addr("prepared_queries"),
            hash: super::dynahash::HashLayouts::of(s).ok(),
            prep: s.layout("PreparedStatement").ok(),
            plan_cache_mode,
            cpu_operator_cost: s.global_addr("cpu_operator_cost"),
        })
    }
}

/// Whose an int3 that is not pgdbg's can be, as its message says it.
fn foreign_what(f: &ForeignInt3) -> &'static str {
    if f.file_read {
        "an int3 that is not pgdbg's (a kernel uprobe from perf/bpftrace/another pgdbg, or another debugger)"
    } else {
        "a 0xcc byte that cannot be told from someone's int3"
    }
}

/// What plancache says when another program changed the code under its
/// recorder's jump (`TakenOver::Changed`).
const CHANGED_LINE: &str = "plancache: another program changed the code under pgdbg's recorder at GetCachedPlan: pgdbg writes nothing there (no breakpoint either) and leaves its recorder's pages mapped in the backend (that code may lead into them); no decision is seen from now on";

/// Take the recorder out, saying so when its pages stay mapped, and why.
fn remove_recorder(s: &mut dyn Backend, r: Recorder) -> Result<()> {
    let changed = r.taken_over == Some(TakenOver::Changed);
    if !s.remove_recorder(r)? {
        s.say(if changed {
            CHANGED_LINE
        } else {
            "plancache: the recorder's pages stay mapped in the backend (its stack points into them); they are never run again"
        });
    }
    Ok(())
}

fn read(s: &dyn Backend, addr: u64, len: u64) -> Result<Vec<u8>> {
    s.read_bytes(addr, len as usize)
}

fn read_cstring(s: &dyn Backend, addr: u64, max: usize) -> String {
    String::from_utf8_lossy(&read_cbytes(s, addr, max)).into_owned()
}

/// The bytes of a NUL-terminated string, at most `max` of them.
fn read_cbytes(s: &dyn Backend, addr: u64, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut a = addr;
    while out.len() < max {
        let n = (4096 - (a as usize & 4095)).min(64).min(max - out.len());
        let Ok(b) = read(s, a, n as u64) else { break };
        if let Some(p) = b.iter().position(|&c| c == 0) {
            out.extend_from_slice(&b[..p]);
            break;
        }
        out.extend_from_slice(&b);
        a += n as u64;
    }
    out
}

/// A statement's text as read: it must be UTF-8 (a cut at `max` may split
/// the last character, which is dropped).  Anything else is not a
/// statement's text (memory reused since), never printed.
fn statement_text(b: &[u8]) -> std::result::Result<String, TextLost> {
    match std::str::from_utf8(b) {
        Ok(t) => Ok(t.to_string()),
        Err(e) if e.error_len().is_none() && b.len() >= QUERY_MAX => {
            Ok(String::from_utf8_lossy(&b[..e.valid_up_to()]).into_owned())
        }
        Err(_) => Err(TextLost::NotText),
    }
}

/// How much of a statement's text is read.
const QUERY_MAX: usize = 1024;

/// Why a decision's statement text is not reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextLost {
    /// A one-shot statement's text belongs to its caller and is freed with
    /// the plansource right after the call: gone when the ring is read.
    OneShot,
    /// The plansource was freed (its memory perhaps reused) before the
    /// ring was read.
    Freed,
    /// What its `query_string` points to is not text.
    NotText,
}

impl TextLost {
    /// The capture event's `query_unavailable`.
    pub fn code(self) -> &'static str {
        match self {
            TextLost::OneShot => "one_shot_freed",
            TextLost::Freed => "plansource_freed",
            TextLost::NotText => "not_text",
        }
    }

    /// The printed marker's words.
    pub fn why(self) -> &'static str {
        match self {
            TextLost::OneShot => {
                "a one-shot statement's text is freed right after its call; --fast=stop reads it at the call"
            }
            TextLost::Freed => {
                "its plan source was freed, its memory perhaps reused, before its text was read"
            }
            TextLost::NotText => "its query_string no longer holds text",
        }
    }
}

/// A GUC's `config_enum_entry` array: (name, value) until the NULL name.
fn read_enum_options(s: &dyn Backend, addr: u64) -> Result<Vec<(String, i64)>> {
    let l = s.layout("config_enum_entry")?;
    let mut out = Vec::new();
    for i in 0..32 {
        let b = read(s, addr + i * l.size, l.size)?;
        let name = l.ptr(&b, "name").unwrap_or(0);
        if name == 0 {
            break;
        }
        let hidden = l.boolean(&b, "hidden").unwrap_or(false);
        if !hidden {
            out.push((read_cstring(s, name, 64), l.int(&b, "val").unwrap_or(-1)));
        }
    }
    Ok(out)
}

/// One decision, as reported.
#[derive(Debug, Clone)]
pub struct Decision {
    /// When GetCachedPlan was entered, if known better than "now".
    pub ts: Option<f64>,
    pub statement: Option<String>,
    /// Empty when `query_unavailable`.
    pub query: String,
    /// Why the text is not known.
    pub query_unavailable: Option<TextLost>,
    /// Then its first bytes, as copied at the call (in-process recording).
    pub query_start: Option<String>,
    pub execution: i64,
    pub generic: bool,
    pub generic_cost: Option<f64>,
    pub avg_custom_cost: Option<f64>,
    pub total_custom_cost: f64,
    pub num_custom_plans: i64,
    pub num_generic_plans: Option<i64>,
    pub custom_plan_cost: Option<f64>,
    pub planning_cost: Option<f64>,
    pub plan_cache_mode: String,
    pub reason: &'static str,
}

struct Pending {
    plansource: u64,
    bound_params: u64,
    ret: u64,
    ret_rsp: u64,
    before: Vec<u8>,
    /// plan_cache_mode at the entry (recorded in-process)
    mode: Option<i32>,
    ts: Option<f64>,
    /// The statement's text, read when the recorder's ring was (None: read
    /// it at the report, the backend stopped at the call).
    text: Option<std::result::Result<String, TextLost>>,
    /// The text's start as the in-process recorder copied it at the call.
    start: Option<crate::inferior::recorder::TextStart>,
    /// Its prepared statement's name may be looked up (its plansource is
    /// the one at its address when the names are read).
    named: bool,
    /// In-process recording: how the plansource at the call relates to the
    /// next sighting of its address (see `chain::Link`).
    next: Option<chain::Link>,
}

/// An execution's choice as its plansource's counters tell it.
enum Settled {
    /// Not chosen yet (GetCachedPlan still running, or left by an ERROR).
    Running,
    /// Chosen; `after`: the plansource one decision later.
    Done { generic: bool, after: Vec<u8> },
    /// Both counters moved (calls lost in between): unknown.
    Ambiguous,
    /// The plansource is no longer there.
    Gone,
}

pub struct PlanCacheProbe {
    l: PlanCacheLayouts,
    pending: Vec<Pending>,
    names: HashMap<u64, Option<String>>,
    /// query text by (plansource, query_string pointer)
    queries: HashMap<(u64, u64), String>,
    count_limit: Option<u64>,
    /// One stop per decision: no return breakpoint (see `flush_fast`).
    fast: bool,
    pub decisions: u64,
    pub generic: u64,
    /// Executions seen per plansource (for 13, which has no
    /// num_generic_plans).
    generic_seen: HashMap<u64, i64>,
    bad_magic_warned: bool,
    /// plan_cache_mode as read with the other data of this stop.
    mode_now: Option<i32>,
    /// Where the entry breakpoints are: GetCachedPlan's entries, or in
    /// --fast mode a point a little further where only registers have
    /// changed (see `Target::register_only_point`).
    points: Vec<u64>,
    /// --fast: try the in-process recorder first.
    want_ring: bool,
    recorder: Option<Recorder>,
    /// The ring held many records at the last poll (a busy statement, a
    /// plpgsql loop): it is read 4 times as often (`poll_every`).
    busy_ring: bool,
    /// Decisions the ring had no room for.
    pub lost: u64,
    /// Not reported yet.
    new_lost: u64,
    /// Taken from the ring at the last poll, with their times.
    polled: Vec<ring::Polled>,
    /// Each plansource's state when the ring was last read, as long as no
    /// call was dropped since.
    seen: HashMap<u64, Vec<u8>>,
    /// The text's start copied at the first call of the plansource there
    /// then, while it is known to be the same one.
    starts: HashMap<u64, crate::inferior::recorder::TextStart>,
    /// Recorded calls whose choice the counters could not tell (the calls
    /// between them dropped, or the plansource freed before it showed
    /// when the costs decided).
    pub undecided: u64,
    /// The plansources' state at the last poll.
    snapshot: HashMap<u64, Vec<u8>>,
    /// The recorder was given up at this poll (`ring_to_stops`): its last
    /// records are still to be reported.
    ring_tail: bool,
    /// The ring was read at the backend's exit stop (`read_at_exit`):
    /// `polled` holds its last records.
    exit_read: bool,
    /// The backend ended while its ring recorded: whether its last records
    /// were read (`end_note`).
    pub ended: Option<bool>,
}

impl PlanCacheLayouts {
    /// Whether decisions can be told from the plansource's counters
    /// (`num_generic_plans`, PostgreSQL 14+).
    pub fn has_generic_counter(&self) -> bool {
        self.cps.has("num_generic_plans")
    }
}

impl PlanCacheProbe {
    /// `fast`: learn choices from the counters (one stop per decision, or
    /// none with `ring`).
    pub fn new(
        l: PlanCacheLayouts,
        count_limit: Option<u64>,
        fast: bool,
        ring: bool,
    ) -> Result<PlanCacheProbe> {
        if fast && !l.cps.has("num_generic_plans") {
            bail!(
                "plancache without stops needs CachedPlanSource.num_generic_plans (PostgreSQL 14+); use plancache --stops"
            );
        }
        let mut p = Self::new_inner(l, count_limit, fast);
        p.want_ring = fast && ring;
        Ok(p)
    }

    fn new_inner(l: PlanCacheLayouts, count_limit: Option<u64>, fast: bool) -> PlanCacheProbe {
        PlanCacheProbe {
            l,
            pending: Vec::new(),
            names: HashMap::new(),
            queries: HashMap::new(),
            count_limit,
            fast,
            decisions: 0,
            generic: 0,
            generic_seen: HashMap::new(),
            bad_magic_warned: false,
            mode_now: None,
            points: Vec::new(),
            want_ring: false,
            recorder: None,
            busy_ring: false,
            lost: 0,
            new_lost: 0,
            polled: Vec::new(),
            seen: HashMap::new(),
            starts: HashMap::new(),
            undecided: 0,
            snapshot: HashMap::new(),
            ring_tail: false,
            exit_read: false,
            ended: None,
        }
    }

    /// Whether decisions are recorded in-process (no stops).
    pub fn in_process(&self) -> bool {
        self.recorder.is_some()
    }

    /// The query text of a plansource (`before`: its struct), cached by
    /// plansource and `query_string` (the cache entries of a plansource
    /// whose memory may be another's are dropped: see chain.rs).
    fn query_text(
        &mut self,
        s: &dyn Backend,
        plansource: u64,
        before: &[u8],
    ) -> std::result::Result<String, TextLost> {
        let query_ptr = self.l.cps.ptr(before, "query_string").unwrap_or(0);
        if let Some(q) = self.queries.get(&(plansource, query_ptr)) {
            return Ok(q.clone());
        }
        let q = if query_ptr != 0 {
            statement_text(&read_cbytes(s, query_ptr, QUERY_MAX))?
        } else {
            String::new()
        };
        self.queries.insert((plansource, query_ptr), q.clone());
        Ok(q)
    }

    /// End of a watch: report what is complete and take the recorder out.
    pub fn finish(&mut self, s: &mut dyn Backend) -> Result<()> {
        if s.is_gone() {
            // its recorder went with it; what was read at its exit stop is
            // reported (with no access to it: names and texts were read)
            if self.recorder.take().is_some() || self.exit_read {
                self.ended = Some(self.exit_read);
            }
            return if std::mem::take(&mut self.exit_read) {
                self.report_ring(s, true)
            } else {
                Ok(())
            };
        }
        let polled = if self.recorder.is_some() {
            self.snapshot_ring(s)
                .and_then(|_| self.report_ring(s, true))
        } else if self.fast {
            self.flush_fast(s)
        } else {
            Ok(())
        };
        if let Some(r) = self.recorder.take() {
            remove_recorder(s, r)?;
        }
        polled
    }

    /// Arm the entry breakpoints.
    pub fn arm(&mut self, s: &mut dyn Backend) -> Result<()> {
        // a recorder an earlier pgdbg could not take out (SIGKILL)
        for &e in &self.l.entries.clone() {
            let Some(orig) = s.di().binary.bytes_at(e - s.bias(), 16) else {
                continue;
            };
            if s.remove_orphan_recorder(e, orig)? {
                s.say("plancache: removed the in-process recorder an earlier pgdbg left in this backend (killed with SIGKILL?)");
            }
        }
        // --fast reads only the argument registers at its stop: it may stop
        // past the pushes that start GetCachedPlan (no stack write to step
        // over there); the full mode needs the return address at rsp
        let points: Vec<u64> = self
            .l
            .entries
            .iter()
            .map(|&e| {
                if self.fast && !crate::config::get().entry_only {
                    s.register_only_point(e)
                } else {
                    e
                }
            })
            .collect();
        if self.want_ring {
            match self.install_recorder(s) {
                Ok(()) => return Ok(()),
                // an int3 that is not pgdbg's where a stop would go refuses
                // the stops as well: no fallback to announce
                Err(e)
                    if crate::inferior::foreign(&e).is_some_and(|f| points.contains(&f.addr)) =>
                {
                    return Err(e);
                }
                Err(e) => match crate::inferior::foreign(&e) {
                    // someone's uprobe on the entry: the stops go past it
                    Some(f) => s.say(&format!(
                        "plancache: {} is at {}: no in-process recorder there; stopping at each decision instead",
                        foreign_what(f),
                        f.name.clone().unwrap_or_else(|| format!("{:#x}", f.addr)),
                    )),
                    None => s.say(&format!(
                        "plancache: cannot record inside the backend ({e:#}); stopping at each decision instead"
                    )),
                },
            }
        }
        self.points = points;
        for &a in &self.points {
            s.arm_internal(a)?;
        }
        Ok(())
    }

    /// From the in-process recorder to a stop at each decision, in the
    /// middle of a watch: someone else's uprobe took the recorder's jump
    /// over (the jump is already undone, `inferior::jumpover`).  What the
    /// ring held was drained just before and is reported by the next
    /// `after_poll`; the recorder's pages are unmapped.
    fn ring_to_stops(&mut self, s: &mut dyn Backend) -> Result<()> {
        let Some(r) = self.recorder.take() else {
            return Ok(());
        };
        self.ring_tail = true;
        if r.taken_over == Some(TakenOver::Changed) {
            // someone else's code there now: not even a breakpoint goes
            // over it (its original byte would be theirs, written back
            // later over whatever they put there next)
            s.say(CHANGED_LINE);
            if s.remove_recorder(r)? {
                s.say("plancache: the recorder's pages are unmapped");
            }
            return Ok(());
        }
        s.say("plancache: another tool placed a uprobe on GetCachedPlan (perf, bpftrace): pgdbg's recorder there is removed; plancache goes on with a stop at each decision");
        remove_recorder(s, r)?;
        self.points = self
            .l
            .entries
            .iter()
            .map(|&e| s.register_only_point(e))
            .collect();
        for &a in &self.points.clone() {
            s.arm_internal(a)?;
        }
        Ok(())
    }

    fn plan_cache_mode(&self, s: &dyn Backend, recorded: Option<i32>) -> String {
        let Some((addr, values)) = &self.l.plan_cache_mode else {
            return "unknown".into();
        };
        let v = match recorded.or(self.mode_now) {
            Some(v) => v as i64,
            None => {
                let Ok(b) = read(s, *addr, 4) else {
                    return "unknown".into();
                };
                i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64
            }
        };
        match values.iter().find(|(_, x)| *x == v) {
            Some((n, _)) => n.clone(),
            None => v.to_string(),
        }
    }

    /// Name of the prepared statement owning `plansource` (SQL PREPARE or a
    /// named protocol-level statement), from the `prepared_queries` hash.
    fn statement_name(&mut self, s: &dyn Backend, plansource: u64) -> Option<String> {
        if let Some(n) = self.names.get(&plansource) {
            return n.clone();
        }
        if let Ok(map) = self.scan_prepared(s) {
            for (ps, name) in map {
                self.names.insert(ps, Some(name));
            }
        }
        self.names.entry(plansource).or_insert(None).clone()
    }

    fn scan_prepared(&self, s: &dyn Backend) -> Result<Vec<(u64, String)>> {
        let (Some(pq), Some(hash), Some(prep)) =
            (self.l.prepared_queries, &self.l.hash, &self.l.prep)
        else {
            bail!("no prepared statement hash in the debug info");
        };
        let h = s.read_u64(pq)?;
        if h == 0 {
            return Ok(Vec::new());
        }
        let name_off = prep.offset("stmt_name")?;
        let ps_off = prep.offset("plansource")?;
        let mut out = Vec::new();
        for entry in hash.entries(s, h, 1 << 20)? {
            let name = read_cstring(s, entry + name_off, 64);
            let ps = s.read_u64(entry + ps_off)?;
            out.push((ps, name));
        }
        Ok(out)
    }

    /// Cost of planning charged to a custom plan (cached_plan_cost's
    /// 1000 * cpu_operator_cost * (relations + 1) per statement).
    fn planning_cost(&self, s: &dyn Backend, cached_plan: u64) -> Option<f64> {
        let list = self.l.list.as_ref()?;
        let coc = f64::from_le_bytes(
            read(s, self.l.cpu_operator_cost?, 8)
                .ok()?
                .try_into()
                .ok()?,
        );
        let cp = read(s, cached_plan, self.l.cplan.size).ok()?;
        let stmts = self.l.cplan.ptr(&cp, "stmt_list")?;
        let rels = |lptr: u64| -> Option<i64> {
            if lptr == 0 {
                return Some(0);
            }
            let lb = read(s, lptr, list.size).ok()?;
            list.int(&lb, "length")
        };
        if stmts == 0 {
            return None;
        }
        let lb = read(s, stmts, list.size).ok()?;
        let n = list.int(&lb, "length")?;
        let elems = list.ptr(&lb, "elements")?;
        let mut total = 0.0;
        for i in 0..n.min(64) as u64 {
            let ps = s.read_u64(elems + i * 8).ok()?;
            let pb = read(s, ps, self.l.pstmt.size).ok()?;
            let rtable = self.l.pstmt.ptr(&pb, "rtable")?;
            total += 1000.0 * coc * (rels(rtable)? + 1) as f64;
        }
        Some(total)
    }

    fn report(
        &mut self,
        s: &mut dyn Backend,
        p: &Pending,
        after: &[u8],
        generic: bool,
        plan: Option<u64>,
    ) -> Result<()> {
        let mut d = self.decide(s, p, after, generic, plan)?;
        // a plansource freed before its text was read: its name went too
        // (what the address has now may be another statement's)
        d.statement = if p.named {
            self.statement_name(s, p.plansource)
        } else {
            None
        }
        .or_else(|| prepare_name_in(&d.query));
        self.decisions += 1;
        if d.generic {
            self.generic += 1;
        }
        s.say(&format_decision(&d));
        if s.capturing() {
            s.emit_event(decision_event(&d), d.ts);
        }
        Ok(())
    }
}

impl ProbeHandler for PlanCacheProbe {
    fn poll_every(&self) -> Option<std::time::Duration> {
        let every = if self.busy_ring {
            RING_POLL / 4
        } else {
            RING_POLL
        };
        self.recorder.is_some().then_some(every)
    }
    fn on_poll(&mut self, s: &mut dyn Backend) -> Result<()> {
        self.snapshot_ring(s)?;
        if self
            .recorder
            .as_ref()
            .is_some_and(|r| r.taken_over.is_some())
        {
            self.ring_to_stops(s)?;
        }
        Ok(())
    }
    fn after_poll(&mut self, s: &mut dyn Backend) -> Result<()> {
        // after `ring_to_stops`, once more for the ring's last records;
        // then the polls (the ticker runs on) leave the stops' pending
        // executions alone
        let tail = std::mem::take(&mut self.ring_tail);
        if self.recorder.is_some() || tail {
            self.report_ring(s, tail)
        } else {
            Ok(())
        }
    }
    fn on_stop(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()> {
        if self.points.contains(&addr) {
            if self.fast {
                self.on_entry_fast(s)
            } else {
                self.on_entry(s)
            }
        } else {
            self.on_return(s, addr)
        }
    }
    fn done(&self) -> bool {
        self.count_limit.is_some_and(|n| self.decisions >= n)
    }
    fn reads_at_exit(&self) -> bool {
        self.recorder.is_some()
    }
    fn on_exit(&mut self, s: &mut dyn Backend) -> Result<()> {
        self.read_at_exit(s)
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;

    #[test]
    fn layouts_read_the_plan_cache_mode_names_from_the_backend() {
        let mut s = backend();
        let e = PlanCacheLayouts::new(&s).err().expect("no GetCachedPlan");
        assert_eq!(
            e.to_string(),
            "GetCachedPlan is not in this postgres binary: cannot watch the plan cache"
        );
        s.functions.insert("GetCachedPlan".into(), vec![ENTRY]);
        for l in [
            cps_layout(true),
            layout("CachedPlan", &[("stmt_list", 8, Pointer)]),
            layout("PlannedStmt", &[("rtable", 8, Pointer)]),
        ] {
            s.layouts.insert(l.name.clone(), l);
        }
        let ce = layout(
            "config_enum_entry",
            &[
                ("name", 8, Pointer),
                ("val", 4, Signed),
                ("hidden", 1, Bool),
            ],
        );
        s.layouts.insert(ce.name.clone(), ce.clone());
        const OPTS: u64 = 0xa000;
        let entries = [
            ("auto", 0i64, false, 0xb000u64),
            ("force_generic_plan", 1, false, 0xb100),
            ("force_custom_plan", 2, false, 0xb200),
            ("an_alias", 2, true, 0xb300),
        ];
        let mut arr = vec![0u8; (ce.size * (entries.len() as u64 + 1)) as usize];
        for (i, (name, val, hidden, at)) in entries.iter().enumerate() {
            s.map_str(*at, name);
            let base = i * ce.size as usize;
            for (f, v) in [
                ("name", *at),
                ("val", *val as u64),
                ("hidden", *hidden as u64),
            ] {
                let fl = ce.field(f).unwrap();
                let o = base + fl.offset as usize;
                arr[o..o + fl.size as usize].copy_from_slice(&v.to_le_bytes()[..fl.size as usize]);
            }
        }
        s.map(OPTS, arr);
        s.globals.insert("plan_cache_mode".into(), MODE);
        s.globals.insert("plan_cache_mode_options".into(), OPTS);
        let pl = PlanCacheLayouts::new(&s).unwrap();
        assert_eq!(pl.entries, vec![ENTRY]);
        let (addr, values) = pl.plan_cache_mode.unwrap();
        assert_eq!(addr, MODE);
        assert_eq!(
            values,
            vec![
                ("auto".to_string(), 0),
                ("force_generic_plan".to_string(), 1),
                ("force_custom_plan".to_string(), 2),
            ]
        );
        assert!(pl.list.is_none() && pl.prepared_queries.is_none());
    }
}
