//! The decision logic, pure: what a plansource's counters say of an
//! execution (`settle`, with the accounting of executions the ring lost),
//! the decision as reported (`decide`, `choice_reason`) and its text and
//! capture event.  Unit-tested on a fake backend (`testkit`).

use super::{CACHEDPLANSOURCE_MAGIC, Decision, Pending, PlanCacheProbe, Settled};
use crate::capture::Event;
use crate::postgres::backend::{Backend, ProbeHandler};
use anyhow::Result;

impl PlanCacheProbe {
    /// Report the pending executions whose choice `afters` (the state of
    /// each one's plansource now, in `pending`'s order; None: gone) shows;
    /// keep those still running.
    pub(super) fn settle_pending(
        &mut self,
        s: &mut dyn Backend,
        afters: Vec<Option<Vec<u8>>>,
    ) -> Result<()> {
        let mut keep = Vec::new();
        for (p, after) in std::mem::take(&mut self.pending).into_iter().zip(afters) {
            if self.done() {
                keep.push(p);
                continue;
            }
            let Some(after) = after else {
                continue; // gone
            };
            let (dc, dg) = self.counters_moved(&p.before, &after);
            match self.settle(&p.before, &after) {
                Settled::Running => keep.push(p),
                Settled::Done { generic, after } => {
                    // a stop's execution (no ring record: `next` None) whose
                    // plansource moved by more than one: executions in
                    // between ran with no stop seen; said, never folded
                    let unseen = if p.next.is_none() { dc + dg - 1 } else { 0 };
                    self.report(s, &p, &after, generic, None)?;
                    if unseen > 0 {
                        self.lost += unseen as u64;
                        s.say(&format!(
                            "plancache: {unseen} decision{} not seen (GetCachedPlan ran with no stop of pgdbg's)",
                            if unseen == 1 { "" } else { "s" }
                        ));
                    }
                }
                Settled::Ambiguous => self.lost += 1,
                Settled::Gone => {}
            }
        }
        self.pending = keep;
        Ok(())
    }

    /// Make `after` the plansource one decision past `before`: the moved
    /// counter one up (`dc`/`dg`: how far each really moved) and, unless
    /// `total_known`, total_custom_cost unknown (NaN, reported as null).
    pub(super) fn one_step_past(
        &self,
        before: &[u8],
        after: &mut [u8],
        dc: i64,
        dg: i64,
        total_known: bool,
    ) {
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

    /// How much num_custom_plans and num_generic_plans grew.
    pub(super) fn counters_moved(&self, before: &[u8], after: &[u8]) -> (i64, i64) {
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
    pub(super) fn settle(&self, before: &[u8], after: &[u8]) -> Settled {
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

    /// `plan`: the CachedPlan GetCachedPlan returned (None in --fast mode,
    /// where the choice comes from the counters and the planning charge is
    /// not known).
    pub(super) fn decide(
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
        let query = match &p.text {
            Some(t) => t.clone(),
            None => self.query_text(s, p.plansource, &p.before),
        };
        Ok(Decision {
            ts: p.ts,
            statement: None,
            query_unavailable: query.as_ref().err().copied(),
            query_start: query
                .is_err()
                .then(|| p.start.as_ref().map(|t| text_start(&t.bytes)))
                .flatten(),
            query: query.unwrap_or_default(),
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
pub(super) fn choice_reason(
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

/// Without the prepared_queries hash (no DWARF: it is static), an
/// SQL-level PREPARE still names itself in its text: the NAME of the one
/// `PREPARE NAME AS` / `PREPARE NAME (` in it.
pub(super) fn prepare_name_in(query: &str) -> Option<String> {
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

/// The valid UTF-8 start of a text cut at some byte.
fn text_start(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(t) => t.to_string(),
        Err(e) => String::from_utf8_lossy(&b[..e.valid_up_to()]).into_owned(),
    }
}

pub fn label(d: &Decision) -> String {
    match (&d.statement, &d.query_start) {
        (Some(n), _) => n.clone(),
        // the start copied at the call: what the label shows of any text
        (None, Some(q)) if d.query_unavailable.is_some() => {
            let q: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
            format!(
                "<unnamed> \"{}...\"",
                q.chars().take(50).collect::<String>()
            )
        }
        (None, _) if d.query_unavailable.is_some() => format!(
            "<unnamed> (statement text not available: {})",
            d.query_unavailable.map(|w| w.why()).unwrap_or_default()
        ),
        (None, _) => {
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
        query: d.query_unavailable.is_none().then(|| d.query.clone()),
        query_unavailable: d.query_unavailable.map(|w| w.code().to_string()),
        query_start: d.query_start.clone(),
        reason: d.reason.into(),
        statement: d.statement.clone(),
        total_custom_cost: Some(d.total_custom_cost),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;

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
            text: None,
            start: None,
            named: true,
            next: None,
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
