//! `plancache`: report plan choices until a limit, Ctrl-C or a stop.

use crate::capture::Event;
use crate::postgres::backend::{Backend, Outcome, Ran, probe_outcome};
use crate::postgres::plancache::{PlanCacheLayouts, PlanCacheMode, PlanCacheProbe};
use anyhow::Result;
use std::time::Duration;

/// `plancache`: by default the backend's own ring buffer records the
/// plansources' counters (no stops at all); `--fast=stop` stops once per
/// decision, `--stops` twice (with the planning charge).  A server without
/// `num_generic_plans` (13) is watched with two stops, said in one line.
pub fn plancache(
    s: &mut dyn Backend,
    duration: Option<Duration>,
    count: Option<u64>,
    mode: PlanCacheMode,
) -> Result<Outcome> {
    let layouts = PlanCacheLayouts::new(s)?;
    let mut mode = mode;
    if mode != PlanCacheMode::Stops && !layouts.has_generic_counter() {
        s.say(
            "plancache: this server's CachedPlanSource has no num_generic_plans (PostgreSQL 13): \
             decisions cannot be told from its counters, so two ptrace stops per decision instead",
        );
        mode = PlanCacheMode::Stops;
    }
    let mut probe = PlanCacheProbe::new(
        layouts,
        count,
        mode != PlanCacheMode::Stops,
        mode == PlanCacheMode::InProcess,
    )?;
    probe.arm(s)?;
    let limit = crate::runtime::limit_text(duration, count.map(|n| (n, "decisions")));
    let how = if probe.in_process() {
        " (recorded in-process, no stops)"
    } else {
        ""
    };
    s.say(&format!(
        "plancache: watching the plan cache of backend {}{limit}{how}",
        s.pid()
    ));
    let t0 = std::time::Instant::now();
    let res = s.run_probes(&mut probe, duration);
    // the decisions still unreported, and the recorder out, even after
    // an error (detach would take it out too)
    let finished = probe.finish(s);
    let Ran { end, text } = res?;
    finished?;
    let mut lost = if probe.lost > 0 {
        format!("; {} not recorded (ring full)", probe.lost)
    } else {
        String::new()
    };
    if probe.undecided > 0 {
        lost += &format!(
            "; {} recorded whose choice is not known (the costs decided and the plan source was \
             freed, or calls between were not recorded)",
            probe.undecided
        );
    }
    let summary = format!(
        "plancache: {} decision{} ({} custom, {} generic) in {:.1}s{lost}{}",
        probe.decisions,
        if probe.decisions == 1 { "" } else { "s" },
        probe.decisions - probe.generic,
        probe.generic,
        t0.elapsed().as_secs_f64(),
        probe.end_note(s.pid())
    );
    s.emit_event(
        Event::PlancacheEnd {
            decisions: probe.decisions,
            generic: probe.generic,
            lost: probe.lost,
            undecided: probe.undecided,
        },
        None,
    );
    Ok(probe_outcome(s, end, summary, text))
}
