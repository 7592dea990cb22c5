//! `plan --next --analyze` and `plan --progress`: the entry points (the
//! work is in `postgres::analyze` and `postgres::progress`).

use super::plan::{plan_applies, safe_running_query};
use crate::postgres::analyze::{AnalyzeOpts, plan_next_analyze};
use crate::postgres::backend::{Backend, Flow, probe_outcome};
use anyhow::Result;
use std::time::Duration;

/// `plan --next --analyze ...`
pub fn plan_analyze(s: &mut dyn Backend, o: &AnalyzeOpts) -> Result<(String, Flow)> {
    plan_applies(s, false)?;
    let (summary, end) = plan_next_analyze(s, o)?;
    Ok(probe_outcome(s, end, summary, String::new()))
}

/// `plan --progress [--every D] [--for D]`
pub fn plan_progress(
    s: &mut dyn Backend,
    every: Duration,
    duration: Option<Duration>,
) -> Result<(String, Flow)> {
    plan_applies(s, false)?;
    let (_, qd) = safe_running_query(s)?;
    let (summary, end) = crate::postgres::progress::plan_progress(s, qd, every, duration)?;
    Ok(probe_outcome(s, end, summary, String::new()))
}
