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
//! `--fast` (14+) learns the choice from the plansource's counters instead
//! (`num_custom_plans` / `num_generic_plans` move by one when
//! GetCachedPlan has chosen), so only the entry is needed.  By default it
//! records the entries in-process (`inferior::recorder`: a detour at
//! GetCachedPlan copies the plansource's counters and costs into a ring
//! buffer, read 50 to 200 times a second), so the backend never stops for a
//! decision; `--fast=stop` (or when no detour can be placed) stops at each
//! entry instead.

use super::backend::{Backend, ProbeHandler};
use crate::capture::Event;
use crate::debuginfo::layout::Layout;
use crate::inferior::recorder::{Record, RecordSpec, Recorder};
use anyhow::{Result, anyhow, bail};
use std::collections::HashMap;

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
    htab: Option<Layout>,
    hashhdr: Option<Layout>,
    hashelement: Option<Layout>,
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
            htab: s.layout("HTAB").ok(),
            hashhdr: s.layout("HASHHDR").ok(),
            hashelement: s.layout("HASHELEMENT").ok(),
            prep: s.layout("PreparedStatement").ok(),
            plan_cache_mode,
            cpu_operator_cost: s.global_addr("cpu_operator_cost"),
        })
    }
}

fn read(s: &dyn Backend, addr: u64, len: u64) -> Result<Vec<u8>> {
    s.read_bytes(addr, len as usize)
}

fn read_cstring(s: &dyn Backend, addr: u64, max: usize) -> String {
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
    String::from_utf8_lossy(&out).into_owned()
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
    pub query: String,
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
}

/// The CachedPlanSource fields the in-process recorder copies: all that
/// `decide` and `flush_fast_read` read.
const RECORDED_FIELDS: &[&str] = &[
    "magic",
    "query_string",
    "num_custom_plans",
    "num_generic_plans",
    "total_custom_cost",
    "generic_cost",
    "is_oneshot",
];

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

/// How often the in-process recorder's ring is read (a quarter of it
/// while it fills fast).
const RING_POLL: std::time::Duration = std::time::Duration::from_millis(20);

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
    /// Decisions the ring had no room for.
    pub lost: u64,
    /// Not reported yet.
    new_lost: u64,
    /// Taken from the ring at the last poll, with their times.
    polled: Vec<(Record, f64)>,
    /// The plansources' state at the last poll.
    snapshot: HashMap<u64, Vec<u8>>,
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
                "plancache --fast needs CachedPlanSource.num_generic_plans (PostgreSQL 14+); use plancache without --fast"
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
            lost: 0,
            new_lost: 0,
            polled: Vec::new(),
            snapshot: HashMap::new(),
        }
    }

    /// Whether decisions are recorded in-process (no stops).
    pub fn in_process(&self) -> bool {
        self.recorder.is_some()
    }

    /// Put the in-process recorder on GetCachedPlan's entry.
    fn install_recorder(&mut self, s: &mut dyn Backend) -> Result<()> {
        let [entry] = self.l.entries[..] else {
            bail!(
                "GetCachedPlan has {} out-of-line copies",
                self.l.entries.len()
            );
        };
        // the function's code (main part and .cold/.part pieces), to check
        // that nothing in it branches into the bytes the detour replaces
        let mut bodies = Vec::new();
        for sym in s.di().symbols.iter().filter(|x| {
            x.is_func
                && x.size > 0
                && (x.name == "GetCachedPlan" || x.name.starts_with("GetCachedPlan."))
        }) {
            let mut b = vec![0u8; sym.size.min(1 << 20) as usize];
            s.read(sym.addr + s.bias(), &mut b)?;
            bodies.push((sym.addr + s.bias(), b));
        }
        if !bodies.iter().any(|(a, _)| *a == entry) {
            bail!("no symbol gives GetCachedPlan's size");
        }
        let mut fields = Vec::new();
        for f in RECORDED_FIELDS {
            let fl = self.l.cps.field(f)?;
            fields.push((fl.offset, fl.size));
        }
        let spec = RecordSpec {
            global32: self.l.plan_cache_mode.as_ref().map(|(a, _)| *a),
            fields,
            struct_size: self.l.cps.size,
        };
        self.recorder = Some(s.install_recorder(entry, spec, &bodies)?);
        Ok(())
    }

    /// While the backend is stopped: take what the recorder holds, the
    /// plansources' state now, and the names and texts of plansources not
    /// seen before (memory reads only; `after_poll` does the rest once the
    /// backend runs again).
    fn snapshot_ring(&mut self, s: &mut dyn Backend) -> Result<()> {
        let Some(rec) = self.recorder.as_mut() else {
            return Ok(());
        };
        let (records, dropped) = s.drain_recorder(rec)?;
        let times = rec.wall_times(&records);
        // a busy statement (a plpgsql loop): read the ring 4 times as often
        crate::guard::set_poll_interval(
            if records.len() as u64 > crate::inferior::recorder::CAPACITY / 16 || dropped > 0 {
                RING_POLL / 4
            } else {
                RING_POLL
            },
        );
        self.take_records(s, records.into_iter().zip(times).collect(), dropped)
    }

    /// `snapshot_ring` once the ring is drained: the records (with their
    /// times) and the count of calls the ring dropped.
    fn take_records(
        &mut self,
        s: &dyn Backend,
        records: Vec<(Record, f64)>,
        dropped: u64,
    ) -> Result<()> {
        self.new_lost += dropped;
        let mut sources: Vec<u64> = self.pending.iter().map(|p| p.plansource).collect();
        let mut fresh = Vec::new();
        for (r, _) in &records {
            if !sources.contains(&r.rdi) {
                sources.push(r.rdi);
            }
            // first sight of this statement: its text, and below its name,
            // read now
            let qp = self.l.cps.ptr(&r.fields, "query_string").unwrap_or(0);
            if !self.queries.contains_key(&(r.rdi, qp)) {
                self.query_text(s, r.rdi, &r.fields);
                fresh.push(r.rdi);
            }
        }
        if !fresh.is_empty() {
            // one scan of the prepared statements for all of them
            let named = self.scan_prepared(s).unwrap_or_default();
            for ps in fresh {
                let name = named.iter().find(|(p, _)| *p == ps).map(|(_, n)| n.clone());
                self.names.insert(ps, name);
            }
        }
        let size = self.l.cps.size as usize;
        let mut bufs = vec![vec![0u8; size]; sources.len()];
        let all = {
            let mut ranges: Vec<(u64, &mut [u8])> = sources
                .iter()
                .zip(bufs.iter_mut())
                .map(|(a, b)| (*a, &mut b[..]))
                .collect();
            s.read_many(&mut ranges).is_ok()
        };
        self.snapshot.clear();
        for (a, b) in sources.into_iter().zip(bufs) {
            // one by one when some plansource is gone (DEALLOCATE)
            let b = if all { Ok(b) } else { read(s, a, size as u64) };
            if let Ok(b) = b {
                self.snapshot.insert(a, b);
            }
        }
        self.polled.extend(records);
        Ok(())
    }

    /// Report the decisions `snapshot_ring` found complete: a call's choice
    /// shows in the counters its plansource has at its next call, or had at
    /// the snapshot.  Needs no access to the backend (names and texts are
    /// cached), so it runs while the backend does.
    fn report_ring(&mut self, s: &mut dyn Backend) -> Result<()> {
        if self.new_lost > 0 {
            let n = std::mem::take(&mut self.new_lost);
            self.lost += n;
            s.say(&format!(
                "plancache: {n} decision{} not recorded (the ring was full)",
                if n == 1 { "" } else { "s" }
            ));
        }
        for (r, ts) in std::mem::take(&mut self.polled) {
            if self.done() {
                break;
            }
            if let Some(i) = self.pending.iter().position(|p| p.plansource == r.rdi) {
                let p = self.pending.remove(i);
                match self.settle(&p.before, &r.fields) {
                    Settled::Done { generic, after } => {
                        self.report(s, &p, &after, generic, None)?
                    }
                    // unmoved: that execution ended in an ERROR
                    Settled::Running | Settled::Gone => {}
                    Settled::Ambiguous => self.lost += 1,
                }
            }
            if self.l.cps.int(&r.fields, "magic") != Some(CACHEDPLANSOURCE_MAGIC) {
                continue;
            }
            let p = Pending {
                plansource: r.rdi,
                bound_params: r.rsi,
                ret: 0,
                ret_rsp: 0,
                before: r.fields,
                mode: Some(r.global32 as i32),
                ts: Some(ts),
            };
            if self.l.cps.boolean(&p.before, "is_oneshot") == Some(true) {
                // always a custom plan, and the plansource is freed right
                // after (its address often reused by the next one)
                self.report_oneshot(s, &p)?;
                continue;
            }
            self.pending.push(p);
        }
        // statements left by an ERROR never move their counters
        if self.pending.len() > 1024 {
            self.pending.drain(..self.pending.len() - 1024);
        }
        // the last call of each plansource: its counters at the snapshot
        // (not in the snapshot: gone, DEALLOCATE)
        let mut snapshot = std::mem::take(&mut self.snapshot);
        let afters = self
            .pending
            .iter()
            .map(|p| snapshot.remove(&p.plansource))
            .collect();
        self.settle_pending(s, afters)
    }

    /// Report the pending executions whose choice `afters` (the state of
    /// each one's plansource now, in `pending`'s order; None: gone) shows;
    /// keep those still running.
    fn settle_pending(&mut self, s: &mut dyn Backend, afters: Vec<Option<Vec<u8>>>) -> Result<()> {
        let mut keep = Vec::new();
        for (p, after) in std::mem::take(&mut self.pending).into_iter().zip(afters) {
            if self.done() {
                keep.push(p);
                continue;
            }
            let Some(after) = after else {
                continue; // gone
            };
            match self.settle(&p.before, &after) {
                Settled::Running => keep.push(p),
                Settled::Done { generic, after } => self.report(s, &p, &after, generic, None)?,
                Settled::Ambiguous => self.lost += 1,
                Settled::Gone => {}
            }
        }
        self.pending = keep;
        Ok(())
    }

    /// A one-shot statement's decision, known at entry: a custom plan.
    fn report_oneshot(&mut self, s: &mut dyn Backend, p: &Pending) -> Result<()> {
        let mut after = p.before.clone();
        // its cost is not in the counters' view (the plansource goes away)
        self.one_step_past(&p.before, &mut after, 1, 0, false);
        self.report(s, p, &after, false, None)
    }

    /// Make `after` the plansource one decision past `before`: the moved
    /// counter one up (`dc`/`dg`: how far each really moved) and, unless
    /// `total_known`, total_custom_cost unknown (NaN, reported as null).
    fn one_step_past(&self, before: &[u8], after: &mut [u8], dc: i64, dg: i64, total_known: bool) {
        let l = &self.l.cps;
        for (f, d) in [("num_custom_plans", dc), ("num_generic_plans", dg)] {
            let (Ok(fl), Some(v)) = (l.field(f), l.int(before, f)) else {
                continue;
            };
            let v = v + d.min(1);
            let (o, n) = (fl.offset as usize, fl.size as usize);
            after[o..o + n].copy_from_slice(&v.to_le_bytes()[..n]);
        }
        if let Ok(fl) = l.field("total_custom_cost")
            && fl.size == 8
            && !total_known
        {
            let o = fl.offset as usize;
            after[o..o + 8].copy_from_slice(&f64::NAN.to_le_bytes());
        }
    }

    /// The query text of a plansource (`before`: its struct), cached.
    fn query_text(&mut self, s: &dyn Backend, plansource: u64, before: &[u8]) -> String {
        let query_ptr = self.l.cps.ptr(before, "query_string").unwrap_or(0);
        if let Some(q) = self.queries.get(&(plansource, query_ptr)) {
            return q.clone();
        }
        let q = if query_ptr != 0 {
            read_cstring(s, query_ptr, 1024)
        } else {
            String::new()
        };
        self.queries.insert((plansource, query_ptr), q.clone());
        q
    }

    /// How much num_custom_plans and num_generic_plans grew.
    fn counters_moved(&self, before: &[u8], after: &[u8]) -> (i64, i64) {
        let l = &self.l.cps;
        let d = |f: &str| l.int(after, f).unwrap_or(0) - l.int(before, f).unwrap_or(0);
        (d("num_custom_plans"), d("num_generic_plans"))
    }

    /// What the counters say of the execution that started at `before`,
    /// seen at `after` (its plansource's next call, or later).  When the
    /// ring lost the calls in between, the counters moved by more than one:
    /// the choice is still known if they all went the same way (the
    /// counters of the decision are then put back to one step past
    /// `before`); if both moved it is not.
    fn settle(&self, before: &[u8], after: &[u8]) -> Settled {
        let l = &self.l.cps;
        // freed (DEALLOCATE) or reused for another statement since
        if l.int(after, "magic") != Some(CACHEDPLANSOURCE_MAGIC)
            || l.ptr(after, "query_string") != l.ptr(before, "query_string")
        {
            return Settled::Gone;
        }
        let (dc, dg) = self.counters_moved(before, after);
        let generic = match (dc, dg) {
            (0, 0) => return Settled::Running,
            (_, 0) if dc > 0 => false,
            (0, _) if dg > 0 => true,
            _ => return Settled::Ambiguous,
        };
        let mut after = after.to_vec();
        if dc + dg > 1 {
            // generic plans leave the total as it was; several custom
            // plans' costs cannot be told apart
            self.one_step_past(before, &mut after, dc, dg, dc == 0);
        }
        Settled::Done { generic, after }
    }

    /// End of a watch: report what is complete and take the recorder out.
    pub fn finish(&mut self, s: &mut dyn Backend) -> Result<()> {
        if s.is_gone() {
            self.recorder = None;
            return Ok(());
        }
        let polled = if self.recorder.is_some() {
            self.snapshot_ring(s).and_then(|_| self.report_ring(s))
        } else if self.fast {
            self.flush_fast(s)
        } else {
            Ok(())
        };
        if let Some(r) = self.recorder.take()
            && !s.remove_recorder(r)?
        {
            s.say("plancache: the recorder's pages stay mapped in the backend (its stack points into them); they are never run again");
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
        if self.want_ring {
            match self.install_recorder(s) {
                Ok(()) => return Ok(()),
                Err(e) => s.say(&format!(
                    "plancache: cannot record inside the backend ({e:#}); stopping at each decision instead"
                )),
            }
        }
        // --fast reads only the argument registers at its stop: it may stop
        // past the pushes that start GetCachedPlan (no stack write to step
        // over there); the full mode needs the return address at rsp
        self.points = self
            .l
            .entries
            .iter()
            .map(|&e| {
                if self.fast && std::env::var_os("PGDBG_ENTRY_ONLY").is_none() {
                    s.register_only_point(e)
                } else {
                    e
                }
            })
            .collect();
        for &a in &self.points {
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
        let (Some(pq), Some(htab), Some(hdr), Some(el), Some(prep)) = (
            self.l.prepared_queries,
            &self.l.htab,
            &self.l.hashhdr,
            &self.l.hashelement,
            &self.l.prep,
        ) else {
            bail!("no prepared statement hash in the debug info");
        };
        let h = s.read_u64(pq)?;
        if h == 0 {
            return Ok(Vec::new());
        }
        let hb = read(s, h, htab.size)?;
        let hctl = htab.ptr(&hb, "hctl").ok_or_else(|| anyhow!("HTAB.hctl"))?;
        let dir = htab.ptr(&hb, "dir").ok_or_else(|| anyhow!("HTAB.dir"))?;
        let ssize = htab.int(&hb, "ssize").unwrap_or(256).max(1) as u64;
        let sshift = htab.int(&hb, "sshift").unwrap_or(8) as u64;
        let hdrb = read(s, hctl, hdr.size)?;
        let max_bucket = hdr.int(&hdrb, "max_bucket").unwrap_or(0) as u64;
        let link_off = el.offset("link")?;
        // entries follow MAXALIGN(sizeof(HASHELEMENT))
        let entry_off = el.size.div_ceil(8) * 8;
        let name_off = prep.offset("stmt_name")?;
        let ps_off = prep.offset("plansource")?;
        let mut out = Vec::new();
        for b in 0..=max_bucket.min(1 << 20) {
            let seg = s.read_u64(dir + (b >> sshift) * 8)?;
            if seg == 0 {
                continue;
            }
            let mut e = s.read_u64(seg + (b & (ssize - 1)) * 8)?;
            let mut guard = 0;
            while e != 0 && guard < 10_000 {
                let entry = e + entry_off;
                let name = read_cstring(s, entry + name_off, 64);
                let ps = s.read_u64(entry + ps_off)?;
                out.push((ps, name));
                e = s.read_u64(e + link_off)?;
                guard += 1;
            }
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

    fn on_entry(&mut self, s: &mut dyn Backend) -> Result<()> {
        let r = s.registers()?;
        let plansource = r.rdi;
        // Frames of calls that returned (or were left by an ERROR's
        // longjmp) are stale.
        let mut i = 0;
        while i < self.pending.len() {
            // a frame at or above the stale call's own depth: it is gone
            if r.rsp + 8 >= self.pending[i].ret_rsp {
                let p = self.pending.remove(i);
                s.disarm_internal(p.ret)?;
            } else {
                i += 1;
            }
        }
        // one process_vm_readv: the CachedPlanSource and the return address
        let mut before = vec![0u8; self.l.cps.size as usize];
        let mut retb = [0u8; 8];
        s.read_many(&mut [(plansource, &mut before[..]), (r.rsp, &mut retb[..])])?;
        if self.l.cps.int(&before, "magic") != Some(CACHEDPLANSOURCE_MAGIC) {
            if !self.bad_magic_warned {
                self.bad_magic_warned = true;
                s.say("plancache: GetCachedPlan's argument does not look like a CachedPlanSource (bad magic); skipped");
            }
            return Ok(());
        }
        let ret = u64::from_le_bytes(retb);
        s.arm_internal(ret)?;
        self.pending.push(Pending {
            plansource,
            bound_params: r.rsi,
            ret,
            ret_rsp: r.rsp + 8,
            before,
            mode: None,
            ts: None,
        });
        Ok(())
    }

    fn on_return(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()> {
        let r = s.registers()?;
        let Some(i) = self
            .pending
            .iter()
            .rposition(|p| p.ret == addr && p.ret_rsp == r.rsp)
        else {
            return Ok(());
        };
        let p = self.pending.remove(i);
        s.disarm_internal(p.ret)?;
        let after = read(s, p.plansource, self.l.cps.size)?;
        let gplan = self.l.cps.ptr(&after, "gplan").unwrap_or(0);
        let generic = r.rax != 0 && r.rax == gplan;
        self.report(s, &p, &after, generic, Some(r.rax))
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
        d.statement = self
            .statement_name(s, p.plansource)
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

    /// --fast: report the pending executions whose counters moved (their
    /// GetCachedPlan has returned); the others are still running.
    pub fn flush_fast(&mut self, s: &mut dyn Backend) -> Result<()> {
        self.flush_fast_read(s, None)
    }

    /// `flush_fast` with the pending plansources already read (`after[i]`
    /// for `pending[i]`), when they were read together with other data.
    fn flush_fast_read(
        &mut self,
        s: &mut dyn Backend,
        mut pre: Option<Vec<Vec<u8>>>,
    ) -> Result<()> {
        let mut afters = Vec::with_capacity(self.pending.len());
        for (i, p) in self.pending.iter().enumerate() {
            afters.push(Some(match pre.as_mut() {
                Some(v) if i < v.len() => std::mem::take(&mut v[i]),
                _ => read(s, p.plansource, self.l.cps.size)?,
            }));
        }
        self.settle_pending(s, afters)?;
        // executions left by an ERROR never move their counters
        if self.pending.len() > 64 {
            self.pending.drain(..self.pending.len() - 64);
        }
        Ok(())
    }

    fn on_entry_fast(&mut self, s: &mut dyn Backend) -> Result<()> {
        let plansource = s.registers()?.rdi;
        // One process_vm_readv for the pending executions' plansources (to
        // report them), this one's, and plan_cache_mode.
        let size = self.l.cps.size as usize;
        let mut bufs = vec![vec![0u8; size]; self.pending.len() + 1];
        let mut mode = [0u8; 4];
        let read_all = {
            let mut ranges: Vec<(u64, &mut [u8])> = self
                .pending
                .iter()
                .map(|p| p.plansource)
                .chain(std::iter::once(plansource))
                .zip(bufs.iter_mut())
                .map(|(a, b)| (a, &mut b[..]))
                .collect();
            if let Some((a, _)) = &self.l.plan_cache_mode {
                ranges.push((*a, &mut mode[..]));
            }
            s.read_many(&mut ranges).is_ok()
        };
        let before = if read_all {
            self.mode_now = self
                .l
                .plan_cache_mode
                .as_ref()
                .map(|_| i32::from_le_bytes(mode));
            let before = bufs.pop().expect("one more than pending");
            self.flush_fast_read(s, Some(bufs))?;
            self.mode_now = None;
            before
        } else {
            // some address no longer readable: one by one
            self.flush_fast(s)?;
            read(s, plansource, self.l.cps.size)?
        };
        // an earlier execution of it that never moved the counters was left
        // by an ERROR: forget it, or both would be reported now
        self.pending.retain(|p| p.plansource != plansource);
        if self.l.cps.int(&before, "magic") != Some(CACHEDPLANSOURCE_MAGIC) {
            return Ok(());
        }
        self.pending.push(Pending {
            plansource,
            bound_params: s.registers()?.rsi,
            ret: 0,
            ret_rsp: 0,
            before,
            mode: None,
            ts: None,
        });
        Ok(())
    }

    /// `plan`: the CachedPlan GetCachedPlan returned (None in --fast mode,
    /// where the choice comes from the counters and the planning charge is
    /// not known).
    fn decide(
        &mut self,
        s: &dyn Backend,
        p: &Pending,
        after: &[u8],
        generic: bool,
        plan: Option<u64>,
    ) -> Result<Decision> {
        let l = &self.l.cps;
        let n_before = l.int(&p.before, "num_custom_plans").unwrap_or(0);
        let total_before = l.float(&p.before, "total_custom_cost").unwrap_or(0.0);
        let n_after = l.int(after, "num_custom_plans").unwrap_or(0);
        let total_after = l.float(after, "total_custom_cost").unwrap_or(0.0);
        let gen_cost = l.float(after, "generic_cost").filter(|c| *c >= 0.0);
        let avg = if n_before > 0 {
            Some(total_before / n_before as f64)
        } else {
            None
        };
        let num_generic = l.int(after, "num_generic_plans");
        if generic {
            *self.generic_seen.entry(p.plansource).or_insert(0) += 1;
        }
        let execution = n_after
            + num_generic.unwrap_or_else(|| *self.generic_seen.get(&p.plansource).unwrap_or(&0));
        let mode = self.plan_cache_mode(s, p.mode);
        let oneshot = l.boolean(&p.before, "is_oneshot").unwrap_or(false);
        let reason = choice_reason(
            oneshot,
            p.bound_params != 0,
            &mode,
            generic,
            n_before,
            gen_cost,
            avg,
        );
        let (custom_cost, planning) = if generic {
            (None, None)
        } else {
            (
                if n_after > n_before {
                    Some(total_after - total_before)
                } else {
                    None
                },
                plan.and_then(|pl| self.planning_cost(s, pl)),
            )
        };
        let query = self.query_text(s, p.plansource, &p.before);
        Ok(Decision {
            ts: p.ts,
            statement: None,
            query,
            execution,
            generic,
            generic_cost: gen_cost,
            avg_custom_cost: avg,
            total_custom_cost: total_after,
            num_custom_plans: n_after,
            num_generic_plans: num_generic,
            custom_plan_cost: custom_cost,
            planning_cost: planning,
            plan_cache_mode: mode,
            reason,
        })
    }
}

/// Why the plan cache chose as it did, from what GetCachedPlan and
/// choose_custom_plan look at: a one-shot statement is always planned
/// custom; a statement without parameters (no `boundParams`) is given the
/// generic plan; `plan_cache_mode` may force either; before 5 custom plans
/// the choice is custom; after that the cheaper of the generic cost and the
/// average custom cost (`n_before` custom plans) wins, and a choice against
/// those costs was made by the cursor options (CURSOR_OPT_GENERIC_PLAN /
/// CURSOR_OPT_CUSTOM_PLAN).
fn choice_reason(
    oneshot: bool,
    has_params: bool,
    mode: &str,
    generic: bool,
    n_before: i64,
    generic_cost: Option<f64>,
    avg_custom_cost: Option<f64>,
) -> &'static str {
    if oneshot {
        "one_shot"
    } else if !has_params && generic {
        "no_parameters"
    } else if mode == "force_generic_plan" || mode == "force_custom_plan" {
        "forced_by_plan_cache_mode"
    } else if !generic && n_before < 5 {
        "fewer_than_5_custom_plans"
    } else {
        match (generic_cost, avg_custom_cost) {
            (Some(g), Some(a)) if (g < a) == generic => "cost",
            _ => "cursor_options",
        }
    }
}

impl ProbeHandler for PlanCacheProbe {
    fn poll_every(&self) -> Option<std::time::Duration> {
        self.recorder.is_some().then_some(RING_POLL)
    }
    fn on_poll(&mut self, s: &mut dyn Backend) -> Result<()> {
        self.snapshot_ring(s)
    }
    fn after_poll(&mut self, s: &mut dyn Backend) -> Result<()> {
        self.report_ring(s)
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
}

/// Without the prepared_queries hash (no DWARF: it is static), an
/// SQL-level PREPARE still names itself in its text: the NAME of the one
/// `PREPARE NAME AS` / `PREPARE NAME (` in it.
fn prepare_name_in(query: &str) -> Option<String> {
    let w: Vec<&str> = query
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|x| !x.is_empty())
        .collect();
    let mut found = None;
    for i in 0..w.len().saturating_sub(1) {
        if w[i].eq_ignore_ascii_case("prepare") {
            let name = w[i + 1].split('(').next().unwrap_or("");
            let next_ok = w[i + 1].contains('(')
                || w.get(i + 2)
                    .is_some_and(|a| a.eq_ignore_ascii_case("as") || a.starts_with('('));
            if !name.is_empty() && next_ok {
                if found.is_some() {
                    return None; // ambiguous
                }
                found = Some(name.to_string());
            }
        }
    }
    found
}

fn fmt3(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

pub fn label(d: &Decision) -> String {
    match &d.statement {
        Some(n) => n.clone(),
        None => {
            let q: String = d.query.split_whitespace().collect::<Vec<_>>().join(" ");
            let q = if q.chars().count() > 50 {
                format!("{}...", q.chars().take(50).collect::<String>())
            } else {
                q
            };
            format!("<unnamed> \"{q}\"")
        }
    }
}

pub fn format_decision(d: &Decision) -> String {
    let who = format!("{} #{}", label(d), d.execution);
    let choice = if d.generic {
        "GENERIC plan"
    } else {
        "custom plan"
    };
    let gcost = d
        .generic_cost
        .map(fmt3)
        .unwrap_or_else(|| "not built yet".into());
    let avg = d
        .avg_custom_cost
        .map(fmt3)
        .unwrap_or_else(|| "none yet".into());
    let planning = d
        .planning_cost
        .map(|p| format!(" ({} planning)", fmt3(p)))
        .unwrap_or_default();
    let why = match d.reason {
        "cost" if d.generic => format!("generic {gcost} < avg custom {avg}"),
        "cost" => {
            let rel = match (d.avg_custom_cost, d.generic_cost) {
                (Some(a), Some(g)) if a < g => "<",
                _ => "<=",
            };
            format!("avg custom {avg}{planning} {rel} generic {gcost}")
        }
        "fewer_than_5_custom_plans" => format!(
            "fewer than 5 custom plans so far ({}); generic {gcost}",
            d.num_custom_plans - 1
        ),
        "forced_by_plan_cache_mode" => format!(
            "plan_cache_mode = {} (generic {gcost}, avg custom {avg})",
            d.plan_cache_mode
        ),
        "one_shot" => "one-shot statement, never cached".into(),
        "no_parameters" => "no parameters: the generic plan is as good".into(),
        _ => format!("cursor options (generic {gcost}, avg custom {avg})"),
    };
    format!("{who}: {choice}  {why}")
}

/// The `plan_choice` event of a decision (its time is `d.ts`).
pub fn decision_event(d: &Decision) -> Event {
    Event::PlanChoice {
        avg_custom_cost: d.avg_custom_cost,
        choice: if d.generic { "generic" } else { "custom" }.into(),
        custom_plan_cost: d.custom_plan_cost,
        execution: d.execution,
        generic_cost: d.generic_cost,
        num_custom_plans: Some(d.num_custom_plans),
        num_generic_plans: d.num_generic_plans,
        plan_cache_mode: d.plan_cache_mode.clone(),
        planning_cost: d.planning_cost,
        query: d.query.clone(),
        reason: d.reason.into(),
        statement: d.statement.clone(),
        total_custom_cost: Some(d.total_custom_cost),
    }
}

#[cfg(test)]
mod tests {
    //! The decision logic on a fake backend: plansources in an in-memory
    //! memory map, laid out by test layouts (offsets invented here, as a
    //! DWARF layout would give them), counters moved as GetCachedPlan
    //! moves them.
    use super::*;
    use crate::debuginfo::layout::FieldKind::{Bool, Float, Pointer, Signed};
    use crate::inferior::Registers;
    use crate::postgres::backend::fake::{FakeBackend, layout};

    /// Two CachedPlanSources.
    const P: u64 = 0x1000;
    const P2: u64 = 0x2000;
    /// Their query strings.
    const QUERY: u64 = 0x8000;
    const QUERY2: u64 = 0x8800;
    /// plan_cache_mode
    const MODE: u64 = 0x9000;
    /// A ParamListInfo (boundParams)
    const PARAMS: u64 = 0x7f00_0000;
    /// GetCachedPlan's entry, a return address in its caller, a stack.
    const ENTRY: u64 = 0x40_0000;
    const RET: u64 = 0x40_1234;
    const STACK: u64 = 0x7ffd_0000;
    /// A generic CachedPlan.
    const GPLAN: u64 = 0x5000;

    const S1: &str = "PREPARE s1 (int) AS SELECT * FROM t WHERE a = $1";

    fn cps_layout(num_generic_plans: bool) -> Layout {
        let mut f = vec![
            ("magic", 4, Signed),
            ("query_string", 8, Pointer),
            ("gplan", 8, Pointer),
            ("num_custom_plans", 8, Signed),
        ];
        if num_generic_plans {
            f.push(("num_generic_plans", 8, Signed));
        }
        f.extend([
            ("total_custom_cost", 8, Float),
            ("generic_cost", 8, Float),
            ("is_oneshot", 1, Bool),
        ]);
        layout("CachedPlanSource", &f)
    }

    fn layouts(cps: Layout) -> PlanCacheLayouts {
        PlanCacheLayouts {
            cps,
            cplan: layout("CachedPlan", &[("stmt_list", 8, Pointer)]),
            list: None,
            pstmt: layout("PlannedStmt", &[("rtable", 8, Pointer)]),
            entries: vec![ENTRY],
            prepared_queries: None,
            htab: None,
            hashhdr: None,
            hashelement: None,
            prep: None,
            plan_cache_mode: Some((
                MODE,
                vec![
                    ("auto".into(), 0),
                    ("force_generic_plan".into(), 1),
                    ("force_custom_plan".into(), 2),
                ],
            )),
            cpu_operator_cost: None,
        }
    }

    /// A CachedPlanSource's state.
    #[derive(Clone, Copy)]
    struct Ps {
        magic: i64,
        query: u64,
        gplan: u64,
        custom: i64,
        generic: i64,
        total: f64,
        generic_cost: f64,
        oneshot: bool,
    }

    impl Ps {
        fn new() -> Ps {
            Ps {
                magic: CACHEDPLANSOURCE_MAGIC,
                query: QUERY,
                gplan: 0,
                custom: 0,
                generic: 0,
                total: 0.0,
                // PostgreSQL's value until the generic plan is built
                generic_cost: -1.0,
                oneshot: false,
            }
        }

        fn bytes(&self, l: &Layout) -> Vec<u8> {
            let mut b = vec![0u8; l.size as usize];
            let fields: [(&str, [u8; 8]); 8] = [
                ("magic", self.magic.to_le_bytes()),
                ("query_string", self.query.to_le_bytes()),
                ("gplan", self.gplan.to_le_bytes()),
                ("num_custom_plans", self.custom.to_le_bytes()),
                ("num_generic_plans", self.generic.to_le_bytes()),
                ("total_custom_cost", self.total.to_le_bytes()),
                ("generic_cost", self.generic_cost.to_le_bytes()),
                ("is_oneshot", (self.oneshot as u64).to_le_bytes()),
            ];
            for (f, v) in fields {
                if let Ok(fl) = l.field(f) {
                    let (o, n) = (fl.offset as usize, fl.size as usize);
                    b[o..o + n].copy_from_slice(&v[..n]);
                }
            }
            b
        }

        /// What the in-process recorder copies of it: the recorded fields
        /// in place, zeros elsewhere.
        fn recorded(&self, l: &Layout) -> Vec<u8> {
            let full = self.bytes(l);
            let mut b = vec![0u8; full.len()];
            for f in RECORDED_FIELDS {
                if let Ok(fl) = l.field(f) {
                    let (o, n) = (fl.offset as usize, fl.size as usize);
                    b[o..o + n].copy_from_slice(&full[o..o + n]);
                }
            }
            b
        }

        /// GetCachedPlan chose a custom plan costing `cost`.
        fn custom(mut self, cost: f64) -> Ps {
            self.custom += 1;
            self.total += cost;
            self
        }

        /// GetCachedPlan chose the generic plan (built at `cost`).
        fn generic(mut self, cost: f64) -> Ps {
            self.generic += 1;
            self.generic_cost = cost;
            self.gplan = GPLAN;
            self
        }
    }

    fn record(ps: u64, st: &Ps, l: &Layout, mode: u32, ts: f64) -> (Record, f64) {
        (
            Record {
                seq: 0,
                tsc: 0,
                rdi: ps,
                rsi: PARAMS,
                global32: mode,
                fields: st.recorded(l),
            },
            ts,
        )
    }

    fn backend() -> FakeBackend {
        let mut s = FakeBackend::new();
        s.map_str(QUERY, S1);
        s.map_str(QUERY2, "SELECT count(*) FROM t WHERE b = $1");
        s.map(MODE, 0i32.to_le_bytes().to_vec());
        s
    }

    /// `plancache --fast` recording in-process (the ring's records are
    /// given by the test).
    fn ring_probe(count: Option<u64>) -> PlanCacheProbe {
        PlanCacheProbe::new(layouts(cps_layout(true)), count, true, true).unwrap()
    }

    fn choices(s: &FakeBackend) -> Vec<serde_json::Value> {
        s.events_named("plan_choice").into_iter().cloned().collect()
    }

    #[test]
    fn reasons_follow_the_plan_cache_rules() {
        let r = |oneshot, params, mode, generic, n, g, a| {
            choice_reason(oneshot, params, mode, generic, n, g, a)
        };
        // a one-shot statement, whatever else holds
        assert_eq!(
            r(true, true, "auto", false, 9, Some(1.0), Some(2.0)),
            "one_shot"
        );
        // no parameters: the generic plan, before any custom plan
        assert_eq!(
            r(false, false, "auto", true, 0, None, None),
            "no_parameters"
        );
        // ... but a custom plan without parameters is not that rule's doing
        assert_eq!(
            r(false, false, "force_custom_plan", false, 0, None, None),
            "forced_by_plan_cache_mode"
        );
        assert_eq!(
            r(false, true, "force_generic_plan", true, 0, None, None),
            "forced_by_plan_cache_mode"
        );
        for n in 0..5 {
            assert_eq!(
                r(false, true, "auto", false, n, Some(1.0), Some(100.0)),
                "fewer_than_5_custom_plans"
            );
        }
        // from the 6th execution on, the costs
        assert_eq!(
            r(false, true, "auto", true, 5, Some(5.0), Some(10.0)),
            "cost"
        );
        assert_eq!(
            r(false, true, "auto", false, 5, Some(20.0), Some(10.0)),
            "cost"
        );
        // a tie keeps the custom plan (generic only when strictly cheaper)
        assert_eq!(
            r(false, true, "auto", false, 7, Some(10.0), Some(10.0)),
            "cost"
        );
        assert_eq!(
            r(false, true, "auto", true, 7, Some(10.0), Some(10.0)),
            "cursor_options"
        );
        // a choice against the costs, or a generic plan before 5 custom
        // ones: the cursor options
        assert_eq!(
            r(false, true, "auto", false, 5, Some(5.0), Some(10.0)),
            "cursor_options"
        );
        assert_eq!(
            r(false, true, "auto", true, 2, None, Some(10.0)),
            "cursor_options"
        );
    }

    #[test]
    fn ring_reports_five_custom_plans_then_the_generic_one() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        let mut st = Ps::new();
        let mut records = Vec::new();
        for k in 0..7 {
            records.push(record(P, &st, &l, 0, 1000.0 + k as f64));
            st = if k < 5 {
                st.custom(10.0)
            } else {
                st.generic(5.0)
            };
        }
        s.map(P, st.bytes(&l)); // the plansource at the snapshot
        probe.take_records(&s, records, 0).unwrap();
        probe.report_ring(&mut s).unwrap();
        let mut want: Vec<String> = (1..=5)
            .map(|k| {
                format!(
                    "s1 #{k}: custom plan  fewer than 5 custom plans so far ({}); generic not built yet",
                    k - 1
                )
            })
            .collect();
        want.push("s1 #6: GENERIC plan  generic 5 < avg custom 10".into());
        want.push("s1 #7: GENERIC plan  generic 5 < avg custom 10".into());
        assert_eq!(s.lines, want);
        assert_eq!((probe.decisions, probe.generic, probe.lost), (7, 2, 0));
        assert!(probe.pending.is_empty());
        let ev = choices(&s);
        assert_eq!(ev.len(), 7);
        assert_eq!(ev[0]["statement"], "s1");
        assert_eq!(ev[0]["choice"], "custom");
        assert_eq!(ev[0]["custom_plan_cost"], 10.0);
        assert_eq!(ev[0]["ts"], 1000.0);
        assert_eq!(ev[4]["avg_custom_cost"], 10.0);
        assert_eq!(ev[5]["choice"], "generic");
        assert_eq!(ev[5]["reason"], "cost");
        assert_eq!(ev[5]["execution"], 6);
        assert_eq!(ev[5]["num_generic_plans"], 1);
        assert_eq!(ev[5]["plan_cache_mode"], "auto");
        assert_eq!(ev[5]["ts"], 1005.0);
        // the last one was settled by the snapshot
        assert_eq!(ev[6]["num_generic_plans"], 2);
    }

    #[test]
    fn ring_counts_what_it_cannot_tell() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        // generic plan built (cost 20) but the custom ones are cheaper
        let mut st = Ps::new();
        for _ in 0..5 {
            st = st.custom(10.0);
        }
        st.generic_cost = 20.0;
        let r1 = st;
        // the ring dropped calls: one custom and one generic plan between
        // r1 and r2 (which was which is unknown)
        let r2 = r1.custom(10.0).generic(20.0);
        // and two custom plans between r2 and r3: still all custom
        let r3 = r2.custom(10.0).custom(30.0);
        s.map(P, r3.bytes(&l)); // r3's execution still running
        let records = vec![
            record(P, &r1, &l, 0, 1.0),
            record(P, &r2, &l, 0, 2.0),
            record(P, &r3, &l, 0, 3.0),
        ];
        probe.take_records(&s, records, 3).unwrap();
        probe.report_ring(&mut s).unwrap();
        assert_eq!(
            s.lines,
            vec![
                "plancache: 3 decisions not recorded (the ring was full)",
                // one decision past r2: the 7th custom plan, 8th execution
                "s1 #8: custom plan  avg custom 10 < generic 20",
            ]
        );
        // 3 dropped by the ring, 1 ambiguous
        assert_eq!((probe.decisions, probe.lost), (1, 4));
        let ev = choices(&s);
        assert_eq!(ev[0]["num_custom_plans"], 7);
        assert_eq!(ev[0]["num_generic_plans"], 1);
        // several custom plans' costs cannot be told apart
        assert!(ev[0]["custom_plan_cost"].is_null());
        assert!(ev[0]["total_custom_cost"].is_null());
        // r3's execution has not chosen yet
        assert_eq!(probe.pending.len(), 1);
        assert_eq!(probe.pending[0].plansource, P);
    }

    #[test]
    fn ring_forgets_deallocated_statements_and_keeps_running_ones() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        let a = Ps::new();
        let b = Ps {
            query: QUERY2,
            ..Ps::new()
        };
        const P3: u64 = 0x3000;
        // P is DEALLOCATEd before the snapshot (unreadable: read_many
        // fails, the others are read one by one); P2 has not chosen yet;
        // P3's memory was reused for another statement
        s.map(P2, b.bytes(&l));
        s.map(
            P3,
            Ps {
                query: QUERY2,
                ..a.custom(1.0)
            }
            .bytes(&l),
        );
        let records = vec![
            record(P, &a, &l, 0, 1.0),
            record(P2, &b, &l, 0, 2.0),
            record(P3, &a, &l, 0, 3.0),
        ];
        probe.take_records(&s, records, 0).unwrap();
        assert!(!probe.snapshot.contains_key(&P));
        assert!(probe.snapshot.contains_key(&P2));
        probe.report_ring(&mut s).unwrap();
        assert!(s.lines.is_empty(), "{:?}", s.lines);
        assert_eq!((probe.decisions, probe.lost), (0, 0));
        let pending: Vec<u64> = probe.pending.iter().map(|p| p.plansource).collect();
        assert_eq!(pending, vec![P2]);
        // at the next poll P2 has chosen: reported from the snapshot alone
        s.map(P2, b.custom(7.5).bytes(&l));
        probe.take_records(&s, Vec::new(), 0).unwrap();
        probe.report_ring(&mut s).unwrap();
        assert_eq!(
            s.lines,
            vec![
                "<unnamed> \"SELECT count(*) FROM t WHERE b = $1\" #1: custom plan  fewer than 5 custom plans so far (0); generic not built yet"
            ]
        );
        assert_eq!(choices(&s)[0]["custom_plan_cost"], 7.5);
        assert!(probe.pending.is_empty());
    }

    #[test]
    fn ring_reports_a_one_shot_statement_at_once() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        s.map_str(QUERY2, "SELECT 1");
        let st = Ps {
            query: QUERY2,
            oneshot: true,
            ..Ps::new()
        };
        probe
            .take_records(&s, vec![record(P, &st, &l, 0, 1.0)], 0)
            .unwrap();
        probe.report_ring(&mut s).unwrap();
        assert_eq!(
            s.lines,
            vec!["<unnamed> \"SELECT 1\" #1: custom plan  one-shot statement, never cached"]
        );
        let ev = choices(&s);
        assert_eq!(ev[0]["reason"], "one_shot");
        assert_eq!(ev[0]["num_custom_plans"], 1);
        assert!(probe.pending.is_empty());
    }

    #[test]
    fn ring_stops_reporting_at_the_count() {
        let mut s = backend();
        let mut probe = ring_probe(Some(2));
        let l = probe.l.cps.clone();
        let mut st = Ps::new();
        let mut records = Vec::new();
        for k in 0..4 {
            records.push(record(P, &st, &l, 0, k as f64));
            st = st.custom(1.0);
        }
        s.map(P, st.bytes(&l));
        probe.take_records(&s, records, 0).unwrap();
        probe.report_ring(&mut s).unwrap();
        assert_eq!(probe.decisions, 2);
        assert!(probe.done());
        assert_eq!(s.lines.len(), 2);
        assert!(
            s.lines[1].starts_with("s1 #2: custom plan"),
            "{:?}",
            s.lines
        );
    }

    #[test]
    fn settle_pending_accounts_for_each_execution() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        let st = Ps::new().custom(1.0).custom(1.0);
        let pending = |ps: u64, before: &Ps| Pending {
            plansource: ps,
            bound_params: PARAMS,
            ret: 0,
            ret_rsp: 0,
            before: before.bytes(&l),
            mode: Some(0),
            ts: None,
        };
        probe.pending = vec![
            pending(P, &st),      // chose custom
            pending(P2, &st),     // both counters moved: lost
            pending(0x3000, &st), // gone
            pending(0x4000, &st), // still running
            pending(0x5000, &st), // chose generic
        ];
        let afters = vec![
            Some(st.custom(2.0).bytes(&l)),
            Some(st.custom(2.0).generic(1.0).bytes(&l)),
            None,
            Some(st.bytes(&l)),
            Some(st.generic(1.0).bytes(&l)),
        ];
        probe.settle_pending(&mut s, afters).unwrap();
        assert_eq!((probe.decisions, probe.generic, probe.lost), (2, 1, 1));
        let pending: Vec<u64> = probe.pending.iter().map(|p| p.plansource).collect();
        assert_eq!(pending, vec![0x4000]);
        let ev = choices(&s);
        assert_eq!(ev[0]["execution"], 3);
        assert_eq!(ev[0]["custom_plan_cost"], 2.0);
        // a generic plan before 5 custom ones: not the costs' doing
        assert_eq!(ev[1]["choice"], "generic");
        assert_eq!(ev[1]["reason"], "cursor_options");
    }

    /// Stopped at GetCachedPlan's entry for plansource `ps` (stack `sp`).
    fn at_entry(s: &mut FakeBackend, ps: u64, sp: u64) {
        s.regs = Registers {
            rdi: ps,
            rsi: PARAMS,
            rsp: sp,
            ..Default::default()
        };
        s.map(sp, RET.to_le_bytes().to_vec());
    }

    /// Stopped at the return address, GetCachedPlan having returned `plan`.
    fn at_return(s: &mut FakeBackend, sp: u64, plan: u64) {
        s.regs = Registers {
            rax: plan,
            rsp: sp + 8,
            ..Default::default()
        };
    }

    #[test]
    fn stops_learn_the_choice_from_the_returned_plan() {
        let mut s = backend();
        let l = cps_layout(true);
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, false, false).unwrap();
        probe.points = vec![ENTRY];
        let mut st = Ps::new();
        for _ in 0..5 {
            st = st.custom(10.0);
        }
        s.map(P, st.bytes(&l));
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(s.armed.get(&RET), Some(&1));
        // GetCachedPlan built the generic plan and returned it
        s.map(P, st.generic(5.0).bytes(&l));
        at_return(&mut s, STACK, GPLAN);
        probe.on_stop(&mut s, RET).unwrap();
        assert!(s.armed.is_empty(), "return breakpoint left: {:?}", s.armed);
        assert_eq!(
            s.lines,
            vec!["s1 #6: GENERIC plan  generic 5 < avg custom 10"]
        );
        // a return whose plan is not gplan: a custom plan
        let st = st.generic(5.0);
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        s.map(P, st.custom(12.0).bytes(&l));
        at_return(&mut s, STACK, 0x6000);
        probe.on_stop(&mut s, RET).unwrap();
        // custom although the generic plan is cheaper: the cursor options
        assert_eq!(
            s.lines[1],
            "s1 #7: custom plan  cursor options (generic 5, avg custom 10)"
        );
        let ev = choices(&s);
        assert_eq!(ev[1]["reason"], "cursor_options");
        assert_eq!(ev[1]["custom_plan_cost"], 12.0);
        assert_eq!(ev[1]["plan_cache_mode"], "auto");
    }

    #[test]
    fn stops_drop_executions_left_by_an_error_and_skip_bad_magic() {
        let mut s = backend();
        let l = cps_layout(true);
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, false, false).unwrap();
        probe.points = vec![ENTRY];
        s.map(P, Ps::new().bytes(&l));
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        // a nested GetCachedPlan (deeper on the stack) keeps the outer one
        at_entry(&mut s, P, STACK - 0x200);
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(probe.pending.len(), 2);
        assert_eq!(s.armed.get(&RET), Some(&2));
        // both calls were left by an ERROR's longjmp: the next entry at the
        // outer depth finds their frames gone
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(probe.pending.len(), 1);
        assert_eq!(s.armed.get(&RET), Some(&1));
        // not a CachedPlanSource: said once, nothing armed
        s.map(
            P2,
            Ps {
                magic: 7,
                ..Ps::new()
            }
            .bytes(&l),
        );
        for _ in 0..2 {
            at_entry(&mut s, P2, STACK - 0x400);
            probe.on_stop(&mut s, ENTRY).unwrap();
        }
        assert_eq!(
            s.lines,
            vec![
                "plancache: GetCachedPlan's argument does not look like a CachedPlanSource (bad magic); skipped"
            ]
        );
        assert_eq!(probe.pending.len(), 1);
        assert_eq!(s.armed.get(&RET), Some(&1));
        assert_eq!(probe.decisions, 0);
    }

    #[test]
    fn without_num_generic_plans_executions_count_the_generic_plans_seen() {
        // PostgreSQL 13: no num_generic_plans, so no --fast
        let l = cps_layout(false);
        let e = PlanCacheProbe::new(layouts(l.clone()), None, true, false)
            .err()
            .expect("--fast refused");
        assert!(
            e.to_string()
                .contains("needs CachedPlanSource.num_generic_plans (PostgreSQL 14+)")
        );
        let mut s = backend();
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, false, false).unwrap();
        probe.points = vec![ENTRY];
        let mut st = Ps::new();
        for _ in 0..5 {
            st = st.custom(10.0);
        }
        st = st.generic(5.0);
        for _ in 0..2 {
            s.map(P, st.bytes(&l));
            at_entry(&mut s, P, STACK);
            probe.on_stop(&mut s, ENTRY).unwrap();
            at_return(&mut s, STACK, GPLAN);
            probe.on_stop(&mut s, RET).unwrap();
        }
        assert_eq!(
            s.lines,
            vec![
                "s1 #6: GENERIC plan  generic 5 < avg custom 10",
                "s1 #7: GENERIC plan  generic 5 < avg custom 10",
            ]
        );
        assert!(choices(&s)[0]["num_generic_plans"].is_null());
    }

    #[test]
    fn fast_stops_settle_at_the_next_entry() {
        let mut s = backend();
        let l = cps_layout(true);
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, true, false).unwrap();
        probe.points = vec![ENTRY];
        let st = Ps::new();
        s.map(P, st.bytes(&l));
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert!(s.armed.is_empty(), "--fast arms no return breakpoint");
        // it chose a custom plan; plan_cache_mode was set meanwhile, read
        // with the plansources at the next entry
        let st = st.custom(3.0);
        s.map(P, st.bytes(&l));
        s.map(MODE, 2i32.to_le_bytes().to_vec());
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(
            s.lines,
            vec![
                "s1 #1: custom plan  plan_cache_mode = force_custom_plan (generic not built yet, avg custom none yet)"
            ]
        );
        // that execution raised an ERROR before choosing: the next entry of
        // the same plansource replaces it, nothing reported
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(s.lines.len(), 1);
        assert_eq!(probe.pending.len(), 1);
        s.map(P, st.custom(4.0).bytes(&l));
        probe.flush_fast(&mut s).unwrap();
        assert_eq!(s.lines.len(), 2);
        assert!(
            s.lines[1].starts_with("s1 #2: custom plan"),
            "{:?}",
            s.lines
        );
        assert_eq!(choices(&s)[1]["custom_plan_cost"], 4.0);
        assert_eq!(probe.decisions, 2);
    }

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

    #[test]
    fn prepare_names_come_from_the_text_when_unambiguous() {
        assert_eq!(prepare_name_in(S1).as_deref(), Some("s1"));
        assert_eq!(
            prepare_name_in("prepare q2(int) as select $1").as_deref(),
            Some("q2")
        );
        assert_eq!(prepare_name_in("SELECT 1"), None);
        assert_eq!(
            prepare_name_in("PREPARE a AS SELECT 1; PREPARE b AS SELECT 2"),
            None
        );
    }
}
