//! The in-process recorder mode (`plancache --fast`): a detour at
//! GetCachedPlan's entry copies the plansource's counters and costs into a
//! ring buffer inside the backend (`inferior::recorder`), drained at each
//! poll (`snapshot_ring`, the backend stopped) and reported while it runs
//! again (`report_ring`).

use super::chain::{Link, Live};
use super::{CACHEDPLANSOURCE_MAGIC, Pending, PlanCacheProbe, Settled, TextLost, read};
use crate::inferior::recorder::{Record, RecordSpec, TextSpec, TextStart};
use crate::postgres::backend::{Backend, ProbeHandler};
use anyhow::{Result, bail};

/// The CachedPlanSource fields the in-process recorder copies: all that
/// `decide` and `flush_fast_read` read.
pub(super) const RECORDED_FIELDS: &[&str] = &[
    "magic",
    "query_string",
    "num_custom_plans",
    "num_generic_plans",
    "total_custom_cost",
    "generic_cost",
    "is_oneshot",
    "cursor_options",
];

/// Bytes of a statement's text the recorder copies at each call.
pub(super) const TEXT_START: u64 = 80;

/// How often the in-process recorder's ring is read (a quarter of it
/// while it fills fast).
pub(super) const RING_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// parsenodes.h's CURSOR_OPT_GENERIC_PLAN and CURSOR_OPT_CUSTOM_PLAN in
/// PostgreSQL 14 to 18 (13 has other values; the ring needs 14+).
const CURSOR_OPT_GENERIC_PLAN: i64 = 0x0200;
const CURSOR_OPT_CUSTOM_PLAN: i64 = 0x0400;

/// A record taken from the ring, with its time, its link to the next
/// sighting of its plansource, its text (None: not known yet) and whether
/// its name may be looked up.
pub(super) struct Polled {
    r: Record,
    ts: f64,
    next: Link,
    text: Option<std::result::Result<String, TextLost>>,
    named: bool,
}

impl PlanCacheProbe {
    /// Put the in-process recorder on GetCachedPlan's entry.
    pub(super) fn install_recorder(&mut self, s: &mut dyn Backend) -> Result<()> {
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
            capacity: crate::inferior::recorder::CAPACITY,
            global32: self.l.plan_cache_mode.as_ref().map(|(a, _)| *a),
            fields,
            struct_size: self.l.cps.size,
            // the text's start, copied at the call: the whole text when it
            // is short, the label's words when it is not; at a plansource's
            // first call only (its counters zero: an unnamed or one-shot
            // statement's only call), its later calls have it from there
            // (`take_records`), a prepared statement's cost no more
            text: Some(TextSpec {
                pointer: self.l.cps.offset("query_string")?,
                guard: Some((self.l.cps.offset("magic")?, CACHEDPLANSOURCE_MAGIC as u32)),
                unless: ["num_custom_plans", "num_generic_plans"]
                    .iter()
                    .map(|f| self.l.cps.field(f).map(|x| (x.offset, x.size)))
                    .collect::<Result<_>>()?,
                max: TEXT_START,
            }),
        };
        self.recorder = Some(s.install_recorder(entry, spec, &bodies)?);
        Ok(())
    }

    /// While the backend is stopped: take what the recorder holds, the
    /// plansources' state now, and the names and texts of plansources not
    /// seen before (memory reads only; `after_poll` does the rest once the
    /// backend runs again).
    pub(super) fn snapshot_ring(&mut self, s: &mut dyn Backend) -> Result<()> {
        let Some(rec) = self.recorder.as_mut() else {
            return Ok(());
        };
        let (records, dropped) = s.drain_recorder(rec)?;
        let times = rec.wall_times(&records);
        // a busy statement (a plpgsql loop): read the ring 4 times as often
        self.busy_ring =
            records.len() as u64 > crate::inferior::recorder::CAPACITY / 16 || dropped > 0;
        self.take_records(s, records.into_iter().zip(times).collect(), dropped)
    }

    /// The backend is in its exit stop: the ring's last records and the
    /// plansources' state at its end (every execution is over), read as
    /// at a poll; reported by `finish`, once the backend is gone.
    pub(super) fn read_at_exit(&mut self, s: &mut dyn Backend) -> Result<()> {
        if self.recorder.is_none() {
            return Ok(());
        }
        self.snapshot_ring(s)?;
        self.exit_read = true;
        Ok(())
    }

    /// How the summary says that the backend ended while its ring
    /// recorded (`ended`), empty if it did not.
    pub fn end_note(&self, pid: i32) -> String {
        match self.ended {
            Some(true) => format!(
                "; backend {pid} ended: its ring was read at its exit, every decision it recorded is reported"
            ),
            Some(false) => format!(
                "; backend {pid} ended before its ring could be read a last time (no exit stop): the decisions it recorded after the last read (at most {} ms before) are not known",
                RING_POLL.as_millis()
            ),
            None => String::new(),
        }
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
        if dropped > 0 {
            // calls missing: no earlier state can vouch for a plansource
            self.seen.clear();
            self.starts.clear();
        }
        let mut sources: Vec<u64> = self.pending.iter().map(|p| p.plansource).collect();
        for (r, _) in &records {
            if !sources.contains(&r.rdi) {
                sources.push(r.rdi);
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
        // Which plansource each sighting is, and so which texts can be read
        // now: only where the plansource a call saw is the one there now.
        let chains = self.chains(&records, dropped == 0);
        for (ps, c) in &chains.addresses {
            if !c.continuous {
                // what was cached for this address may be another's
                self.queries.retain(|(p, _), _| p != ps);
                self.names.remove(ps);
            }
        }
        let mut fresh = Vec::new();
        // A short text is whole in the record (as it was at the call); a
        // longer one is read where its plansource is the one there now, and
        // only if it starts as the record's copy does.
        let mut read_text =
            |me: &mut Self, ps: u64, fields: &[u8], start: Option<&TextStart>, live: Live| {
                if live == Live::Yes {
                    let qp = me.l.cps.ptr(fields, "query_string").unwrap_or(0);
                    if !me.queries.contains_key(&(ps, qp)) && !fresh.contains(&ps) {
                        fresh.push(ps);
                    }
                }
                if let Some(t) = start.filter(|t| t.complete) {
                    return Some(super::statement_text(&t.bytes));
                }
                match live {
                    Live::Yes => Some(me.query_text(s, ps, fields).and_then(|q| match start {
                        Some(t) if !q.as_bytes().starts_with(&t.bytes) => Err(TextLost::Freed),
                        _ => Ok(q),
                    })),
                    Live::No if me.l.cps.boolean(fields, "is_oneshot") == Some(true) => {
                        Some(Err(TextLost::OneShot))
                    }
                    Live::No => Some(Err(TextLost::Freed)),
                    Live::NotYet => None,
                }
            };
        // A text is copied at its plansource's first call only: the later
        // calls of the same plansource take that copy.
        let mut records = records;
        let mut last: std::collections::HashMap<u64, (Link, Option<TextStart>)> = chains
            .addresses
            .iter()
            .map(|(ps, c)| {
                // only along exact links (none where the ring dropped calls)
                let start = match self.pending.iter().find(|p| p.plansource == *ps) {
                    Some(p) if dropped == 0 => p.start.clone(),
                    _ => self.starts.get(ps).cloned(),
                };
                (*ps, (c.pending_next, start))
            })
            .collect();
        for ((r, _), (next, _)) in records.iter_mut().zip(&chains.records) {
            let (into, before) = last.remove(&r.rdi).unwrap_or((Link::Other, None));
            if r.text.is_none() && into == Link::Same && dropped == 0 {
                r.text = before;
            }
            last.insert(r.rdi, (*next, r.text.clone()));
        }
        for (ps, (to_now, start)) in last {
            match start {
                Some(t) if to_now == Link::Same => self.starts.insert(ps, t),
                _ => self.starts.remove(&ps),
            };
        }
        let mut pendings = std::mem::take(&mut self.pending);
        for p in &mut pendings {
            let Some(c) = chains.addresses.get(&p.plansource) else {
                continue;
            };
            p.next = Some(c.pending_next);
            if p.text.is_none() {
                let (before, start) = (p.before.clone(), p.start.clone());
                p.text = read_text(self, p.plansource, &before, start.as_ref(), c.pending_live);
                p.named = c.pending_live == Live::Yes;
            }
        }
        self.pending = pendings;
        let mut texts = Vec::with_capacity(records.len());
        for ((r, _), (next, live)) in records.iter().zip(&chains.records) {
            let text = read_text(self, r.rdi, &r.fields, r.text.as_ref(), *live);
            texts.push((*next, text, *live == Live::Yes));
        }
        if !fresh.is_empty() {
            // first sight of these statements: one scan of the prepared
            // statements for all of their names
            let named = self.scan_prepared(s).unwrap_or_default();
            for ps in fresh {
                let name = named.iter().find(|(p, _)| *p == ps).map(|(_, n)| n.clone());
                self.names.insert(ps, name);
            }
        }
        for (a, b) in &self.snapshot {
            self.seen.insert(*a, b.clone());
        }
        self.seen
            .retain(|a, _| self.snapshot.contains_key(a) || !chains.addresses.contains_key(a));
        self.polled.extend(
            records
                .into_iter()
                .zip(texts)
                .map(|((r, ts), (next, text, named))| Polled {
                    r,
                    ts,
                    next,
                    text,
                    named,
                }),
        );
        Ok(())
    }

    /// Report the decisions `snapshot_ring` found complete: a call's choice
    /// shows in the counters its plansource has at its next call, or had at
    /// the snapshot; a call whose plansource was freed before (an unnamed
    /// statement replaced by the next one) is told from what it saw at its
    /// entry (`decide_at_entry`).  Needs no access to the backend (names
    /// and texts were read with the records), so it runs while the backend
    /// does.  `over`: no call is running any more (the backend's exit, the
    /// end of the watch): a first call whose plansource cannot be told from
    /// a fresh one there is told from its entry too.
    pub(super) fn report_ring(&mut self, s: &mut dyn Backend, over: bool) -> Result<()> {
        if self.new_lost > 0 {
            let n = std::mem::take(&mut self.new_lost);
            self.lost += n;
            s.say(&format!(
                "plancache: {n} decision{} not recorded (the ring was full)",
                if n == 1 { "" } else { "s" }
            ));
        }
        for Polled {
            r,
            ts,
            next,
            text,
            named,
        } in std::mem::take(&mut self.polled)
        {
            if self.done() {
                break;
            }
            if let Some(i) = self.pending.iter().position(|p| p.plansource == r.rdi) {
                let p = self.pending.remove(i);
                if p.next == Some(Link::Other) {
                    self.decide_at_entry(s, &p)?;
                } else {
                    match self.settle(&p.before, &r.fields) {
                        Settled::Done { generic, after } => {
                            self.report(s, &p, &after, generic, None)?
                        }
                        // unmoved: that execution ended in an ERROR
                        Settled::Running | Settled::Gone => {}
                        Settled::Ambiguous => self.undecided += 1,
                    }
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
                start: r.text,
                text,
                named,
                next: Some(next),
            };
            if self.l.cps.boolean(&p.before, "is_oneshot") == Some(true) {
                // always a custom plan, and the plansource is freed right
                // after (its address often reused by the next one)
                if !self.done() {
                    self.report_oneshot(s, &p)?;
                }
                continue;
            }
            self.pending.push(p);
        }
        // statements left by an ERROR never move their counters
        if self.pending.len() > 1024 {
            self.pending.drain(..self.pending.len() - 1024);
        }
        // the last call of each plansource: its counters at the snapshot
        // (not in the snapshot: gone, DEALLOCATE); one whose plansource is
        // another's now is told from its entry
        let mut snapshot = std::mem::take(&mut self.snapshot);
        let mut keep = Vec::new();
        for mut p in std::mem::take(&mut self.pending) {
            if self.done() {
                keep.push(p);
                continue;
            }
            match p.next {
                Some(Link::Other) => self.decide_at_entry(s, &p)?,
                Some(Link::Unknown) if over => {
                    p.text.get_or_insert(Err(TextLost::Freed));
                    self.decide_at_entry(s, &p)?
                }
                _ => keep.push(p),
            }
        }
        self.pending = keep;
        let afters = self
            .pending
            .iter()
            .map(|p| snapshot.remove(&p.plansource))
            .collect();
        self.settle_pending(s, afters)
    }

    /// The choice of a call whose plansource's counters cannot show it (the
    /// plansource was freed first), from what choose_custom_plan looks at
    /// that the call's record holds: no parameters, plan_cache_mode, the
    /// cursor options, fewer than 5 custom plans.  Past those the costs
    /// decide, which the record does not have: counted as not known.
    fn decide_at_entry(&mut self, s: &mut dyn Backend, p: &Pending) -> Result<()> {
        let l = &self.l.cps;
        let opts = l.int(&p.before, "cursor_options").unwrap_or(0);
        let mode = self.plan_cache_mode(s, p.mode);
        let generic = if p.bound_params == 0 || mode == "force_generic_plan" {
            Some(true)
        } else if mode == "force_custom_plan" {
            Some(false)
        } else if opts & CURSOR_OPT_GENERIC_PLAN != 0 {
            Some(true)
        } else if opts & CURSOR_OPT_CUSTOM_PLAN != 0
            || l.int(&p.before, "num_custom_plans").unwrap_or(0) < 5
        {
            Some(false)
        } else {
            None
        };
        let Some(generic) = generic else {
            self.undecided += 1;
            return Ok(());
        };
        let mut after = p.before.clone();
        // a custom plan's cost is not known; a generic one leaves the total
        self.one_step_past(
            &p.before,
            &mut after,
            i64::from(!generic),
            i64::from(generic),
            generic,
        );
        self.report(s, p, &after, generic, None)
    }

    /// A one-shot statement's decision, known at entry: a custom plan.
    pub(super) fn report_oneshot(&mut self, s: &mut dyn Backend, p: &Pending) -> Result<()> {
        let mut after = p.before.clone();
        // its cost is not in the counters' view (the plansource goes away)
        self.one_step_past(&p.before, &mut after, 1, 0, false);
        self.report(s, p, &after, false, None)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;

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
        probe.report_ring(&mut s, false).unwrap();
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
        probe.report_ring(&mut s, false).unwrap();
        assert_eq!(
            s.lines,
            vec![
                "plancache: 3 decisions not recorded (the ring was full)",
                // one decision past r2: the 7th custom plan, 8th execution
                "s1 #8: custom plan  avg custom 10 < generic 20",
            ]
        );
        // 3 dropped by the ring, 1 whose choice is not known
        assert_eq!((probe.decisions, probe.lost, probe.undecided), (1, 3, 1));
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
    fn ring_tells_freed_statements_from_their_entry_and_keeps_running_ones() {
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
        probe.report_ring(&mut s, false).unwrap();
        // P's and P3's calls: their choice by the rules their records show
        // (parameters, fewer than 5 custom plans), their texts not read
        let freed = format!(
            "<unnamed> (statement text not available: {}) #1: custom plan  fewer than 5 custom plans so far (0); generic not built yet",
            TextLost::Freed.why()
        );
        assert_eq!(s.lines, vec![freed.clone(), freed], "{:?}", s.lines);
        assert_eq!((probe.decisions, probe.lost, probe.undecided), (2, 0, 0));
        let ev = choices(&s);
        assert!(ev.iter().all(|e| e["query"].is_null()
            && e["query_unavailable"] == "plansource_freed"
            && e["custom_plan_cost"].is_null()));
        s.lines.clear();
        let pending: Vec<u64> = probe.pending.iter().map(|p| p.plansource).collect();
        assert_eq!(pending, vec![P2]);
        // its text is read once its plansource is known to be the one there
        assert!(probe.pending[0].text.is_none());
        // at the next poll P2 has chosen: reported from the snapshot alone
        s.map(P2, b.custom(7.5).bytes(&l));
        probe.take_records(&s, Vec::new(), 0).unwrap();
        probe.report_ring(&mut s, false).unwrap();
        assert_eq!(
            s.lines,
            vec![
                "<unnamed> \"SELECT count(*) FROM t WHERE b = $1\" #1: custom plan  fewer than 5 custom plans so far (0); generic not built yet"
            ]
        );
        assert_eq!(choices(&s).last().unwrap()["custom_plan_cost"], 7.5);
        assert!(probe.pending.is_empty());
    }

    /// Unnamed statements of the extended protocol (a driver's, pgbench
    /// -M extended): each Parse frees the last one and makes the next at
    /// the same address, its text at the same place, each called once
    /// with parameters.  Each call is reported, the text only where the
    /// plansource is known to be the one there when it is read, never
    /// another's (nor another's cached).
    #[test]
    fn ring_unnamed_statements_at_one_address() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        let fresh = Ps::new();
        let freed = format!(
            "<unnamed> (statement text not available: {}) #1: custom plan  fewer than 5 custom plans so far (0); generic not built yet",
            TextLost::Freed.why()
        );
        let told = |q: &str| {
            format!(
                "<unnamed> \"{q}\" #1: custom plan  fewer than 5 custom plans so far (0); generic not built yet"
            )
        };
        // A, B, C in one drain; C's call over when it is read
        s.map_str(QUERY, "SELECT 'c' || $1");
        s.map(P, fresh.custom(1.0).bytes(&l));
        let records = (0..3).map(|k| record(P, &fresh, &l, 0, k as f64)).collect();
        probe.take_records(&s, records, 0).unwrap();
        probe.report_ring(&mut s, false).unwrap();
        assert_eq!(
            s.lines,
            vec![freed.clone(), freed.clone(), told("SELECT 'c' || $1")]
        );
        s.lines.clear();
        // D called, read before its plan was chosen (or is that a fresh E?)
        s.map_str(QUERY, "SELECT 'd' || $1");
        s.map(P, fresh.bytes(&l));
        probe
            .take_records(&s, vec![record(P, &fresh, &l, 0, 3.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        assert!(s.lines.is_empty(), "{:?}", s.lines);
        // then D's call is over: D's own text, not C's cached one
        s.map(P, fresh.custom(1.0).bytes(&l));
        probe.take_records(&s, Vec::new(), 0).unwrap();
        probe.report_ring(&mut s, false).unwrap();
        assert_eq!(s.lines, vec![told("SELECT 'd' || $1")]);
        s.lines.clear();
        // F called and read as not over, then G made there, not called,
        // when the watch ends: F told from its entry, without a text
        s.map_str(QUERY, "SELECT 'f' || $1");
        s.map(P, fresh.bytes(&l));
        probe
            .take_records(&s, vec![record(P, &fresh, &l, 0, 4.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        s.map_str(QUERY, "SELECT 'g' || $1");
        probe.take_records(&s, Vec::new(), 0).unwrap();
        probe.report_ring(&mut s, true).unwrap();
        assert_eq!(s.lines, vec![freed]);
        assert_eq!((probe.decisions, probe.lost, probe.undecided), (5, 0, 0));
        assert!(probe.pending.is_empty());
        // and no statement without parameters is called custom: BEGIN
        // (no boundParams) replaced at once is the generic plan's
        let mut r = record(P, &fresh, &l, 0, 5.0);
        r.0.rsi = 0;
        s.lines.clear();
        probe
            .take_records(&s, vec![r, record(P, &fresh, &l, 0, 6.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        assert_eq!(s.lines.len(), 1, "{:?}", s.lines);
        assert!(
            s.lines[0].ends_with("#1: GENERIC plan  no parameters: the generic plan is as good"),
            "{:?}",
            s.lines
        );
    }

    /// With the text's start copied at each call: a short text is whole
    /// in the record, reported though its plansource was freed; a long one
    /// freed shows its start; a long one is read only if it starts as the
    /// call's copy.
    #[test]
    fn ring_texts_copied_at_the_call() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        let fresh = Ps::new();
        let long_a = format!("SELECT 'a', {} FROM t WHERE b = $1", "x, ".repeat(30));
        let long_b = format!("SELECT 'b', {} FROM t WHERE b = $1", "x, ".repeat(30));
        s.map_str(QUERY, &long_b);
        s.map(P, fresh.custom(1.0).bytes(&l));
        let records = vec![
            record_text(P, &fresh, &l, "SELECT $1::int + 1", 1.0),
            record_text(P, &fresh, &l, &long_a, 2.0),
            record_text(P, &fresh, &l, &long_b, 3.0),
        ];
        probe.take_records(&s, records, 0).unwrap();
        probe.report_ring(&mut s, false).unwrap();
        let tail = "#1: custom plan  fewer than 5 custom plans so far (0); generic not built yet";
        let start_a: String = long_a.chars().take(50).collect();
        let start_b: String = long_b.chars().take(50).collect();
        assert_eq!(
            s.lines,
            vec![
                format!("<unnamed> \"SELECT $1::int + 1\" {tail}"),
                format!("<unnamed> \"{start_a}...\" {tail}"),
                format!("<unnamed> \"{start_b}...\" {tail}"),
            ]
        );
        let ev = choices(&s);
        assert_eq!(ev[0]["query"], "SELECT $1::int + 1");
        assert!(ev[0].get("query_start").is_none());
        assert!(ev[1]["query"].is_null());
        assert_eq!(ev[1]["query_unavailable"], "plansource_freed");
        assert_eq!(ev[1]["query_start"], &long_a[..TEXT_START as usize]);
        assert_eq!(ev[2]["query"], long_b.as_str());
        // the text there does not start as the call's copy (which the
        // counters cannot tell): not its own
        let mut probe = ring_probe(None);
        s.map_str(QUERY, &long_a);
        probe
            .take_records(&s, vec![record_text(P, &fresh, &l, &long_b, 4.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        let ev = choices(&s);
        assert!(ev.last().unwrap()["query"].is_null(), "{ev:?}");
        assert_eq!(
            ev.last().unwrap()["query_start"],
            &long_b[..TEXT_START as usize]
        );
    }

    /// The text is copied at a plansource's first call only: its later
    /// calls, in the same read of the ring or later ones, take it from
    /// there while the counters say it is the same plansource, and not
    /// from another's.
    #[test]
    fn ring_later_calls_take_the_first_calls_text() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        let st = Ps::new();
        // an unnamed statement bound 3 times (the copy at the first), then
        // freed: the next one in its place, called once (copied too)
        s.map_str(QUERY, "SELECT 'next' || $1");
        s.map(P, st.custom(1.0).bytes(&l));
        let records = vec![
            record_text(P, &st, &l, "SELECT 'three times' || $1", 1.0),
            record(P, &st.custom(1.0), &l, 0, 2.0),
            record(P, &st.custom(1.0).custom(1.0), &l, 0, 3.0),
            record_text(P, &st, &l, "SELECT 'next' || $1", 4.0),
        ];
        probe.take_records(&s, records, 0).unwrap();
        probe.report_ring(&mut s, false).unwrap();
        let q: Vec<String> = choices(&s)
            .iter()
            .map(|e| e["query"].as_str().unwrap_or("-").to_string())
            .collect();
        assert_eq!(
            q,
            ["SELECT 'three times' || $1"; 3]
                .iter()
                .map(|x| x.to_string())
                .chain(["SELECT 'next' || $1".to_string()])
                .collect::<Vec<_>>()
        );
        // the next read: its second call (no copy) has its text; then a
        // third statement in its place without a copy: not given the text
        s.map(P, st.custom(1.0).custom(1.0).bytes(&l));
        probe
            .take_records(&s, vec![record(P, &st.custom(1.0), &l, 0, 5.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        s.map_str(QUERY, "SELECT 'third' || $1");
        s.map(P, st.custom(1.0).bytes(&l));
        probe
            .take_records(&s, vec![record(P, &st, &l, 0, 6.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        let ev = choices(&s);
        assert_eq!(ev[4]["query"], "SELECT 'next' || $1", "{ev:?}");
        assert_eq!(ev[4]["execution"], 2);
        // (read from its memory: the plansource there now, first seen here)
        assert_eq!(ev[5]["query"], "SELECT 'third' || $1", "{ev:?}");
        assert_eq!(ev.len(), 6);
    }

    /// Where the ring dropped calls the links are not exact: a copy is
    /// not handed on (the next record may be another plansource's whose
    /// first call, with its own copy, was dropped).
    #[test]
    fn ring_hands_no_copy_on_across_dropped_calls() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        let st = Ps::new();
        s.map_str(QUERY, "SELECT 'now' || $1");
        s.map(P, st.custom(1.0).custom(1.0).custom(1.0).bytes(&l));
        let records = vec![
            record_text(P, &st, &l, "SELECT 'before' || $1", 1.0),
            record(P, &st.custom(1.0).custom(1.0), &l, 0, 2.0),
        ];
        probe.take_records(&s, records, 1).unwrap();
        probe.report_ring(&mut s, false).unwrap();
        let ev = choices(&s);
        assert!(
            ev.iter()
                .all(|e| e["query"] != "SELECT 'before' || $1" || e["ts"] == 1.0),
            "{ev:?}"
        );
    }

    #[test]
    fn ring_reports_a_one_shot_statement_at_once_without_its_freed_text() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        // what its query_string points to when the ring is read: the next
        // statement's text, or garbage
        s.map_str(QUERY2, "SELECT 1");
        let st = Ps {
            query: QUERY2,
            oneshot: true,
            ..Ps::new()
        };
        probe
            .take_records(&s, vec![record(P, &st, &l, 0, 1.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        assert_eq!(
            s.lines,
            vec![format!(
                "<unnamed> (statement text not available: {}) #1: custom plan  one-shot statement, never cached",
                TextLost::OneShot.why()
            )]
        );
        let ev = choices(&s);
        assert_eq!(ev[0]["reason"], "one_shot");
        assert_eq!(ev[0]["num_custom_plans"], 1);
        assert!(ev[0]["query"].is_null());
        assert_eq!(ev[0]["query_unavailable"], "one_shot_freed");
        assert!(probe.pending.is_empty());
        assert!(probe.queries.is_empty());
    }

    #[test]
    fn ring_never_prints_a_freed_plansources_text() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        // P was seen with its text (cached)
        let a = Ps::new();
        s.map(P, a.custom(1.0).bytes(&l));
        probe
            .take_records(&s, vec![record(P, &a, &l, 0, 1.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        assert!(
            s.lines[0].starts_with("s1 #1: custom plan"),
            "{:?}",
            s.lines
        );
        s.lines.clear();
        // then freed, and a new plansource took its address with its text
        // at the same address (counters back to 0): the old one's later
        // call must not be told with the new text, nor the new one's with
        // the cached old text
        let old = a.custom(1.0);
        s.map_str(QUERY, "SELECT 'the new one'");
        s.map(P, Ps::new().custom(3.0).bytes(&l));
        probe.names.insert(P, None);
        probe
            .take_records(
                &s,
                vec![
                    record(P, &old, &l, 0, 2.0),
                    record(P, &Ps::new(), &l, 0, 3.0),
                ],
                0,
            )
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        let ev = choices(&s);
        let last = ev.last().unwrap();
        assert_eq!(last["query"], "SELECT 'the new one'", "{ev:?}");
        // the old one's call had not settled when its plansource went: not
        // reported at all, and nothing prints the old cached text for the
        // new plansource
        assert!(ev.iter().all(|e| e["query"] != S1 || e["execution"] == 1));
        // a query_string that no longer holds text: never printed
        let mut probe = ring_probe(None);
        s.map(QUERY2, vec![b'X', b'J', 0xff, b'_', 0xfe, b'U', 0]);
        let b = Ps {
            query: QUERY2,
            ..Ps::new()
        };
        s.map(P2, b.custom(1.0).bytes(&l));
        s.lines.clear();
        probe
            .take_records(&s, vec![record(P2, &b, &l, 0, 4.0)], 0)
            .unwrap();
        probe.report_ring(&mut s, false).unwrap();
        assert_eq!(
            s.lines,
            vec![format!(
                "<unnamed> (statement text not available: {}) #1: custom plan  fewer than 5 custom plans so far (0); generic not built yet",
                TextLost::NotText.why()
            )]
        );
        let ev = choices(&s);
        assert!(ev.last().unwrap()["query"].is_null());
        assert_eq!(ev.last().unwrap()["query_unavailable"], "not_text");
    }

    #[test]
    fn ring_read_at_the_exit_stop_is_reported_once_the_backend_is_gone() {
        let mut s = backend();
        let mut probe = ring_probe(None);
        let l = probe.l.cps.clone();
        let mut st = Ps::new();
        let mut records = Vec::new();
        for k in 0..3 {
            records.push(record(P, &st, &l, 0, k as f64));
            st = st.custom(1.0);
        }
        // at the exit stop: the last execution is over
        s.map(P, st.bytes(&l));
        probe.take_records(&s, records, 0).unwrap();
        probe.exit_read = true;
        // then its memory is gone with it: nothing more can be read
        s.mem.clear();
        s.gone = true;
        probe.finish(&mut s).unwrap();
        assert_eq!(probe.decisions, 3, "{:?}", s.lines);
        assert!(
            s.lines[2].starts_with("s1 #3: custom plan"),
            "{:?}",
            s.lines
        );
        assert_eq!(probe.ended, Some(true));
        assert_eq!(
            probe.end_note(42),
            "; backend 42 ended: its ring was read at its exit, every decision it recorded is reported"
        );
        // a second finish reports nothing again
        probe.finish(&mut s).unwrap();
        assert_eq!(s.lines.len(), 3);
        probe.ended = Some(false);
        assert!(probe.end_note(42).ends_with("are not known"));
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
        probe.report_ring(&mut s, false).unwrap();
        assert_eq!(probe.decisions, 2);
        assert!(probe.done());
        assert_eq!(s.lines.len(), 2);
        assert!(
            s.lines[1].starts_with("s1 #2: custom plan"),
            "{:?}",
            s.lines
        );
    }
}
