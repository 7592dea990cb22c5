//! `plan --next --analyze` and `plan --progress`: the entry points (the
//! work is in `postgres::analyze` and `postgres::progress`).

use super::plan::{plan_applies, safe_running_query};
use crate::postgres::analyze::{AnalyzeOpts, plan_next_analyze};
use crate::postgres::backend::{Backend, Outcome};
use crate::postgres::progress::not_now;
use anyhow::{Result, bail};
use std::time::Duration;

/// `plan --next --analyze ...`
pub fn plan_analyze(s: &mut dyn Backend, o: &AnalyzeOpts) -> Result<Outcome> {
    plan_applies(s, false)?;
    plan_next_analyze(s, o)
}

/// `plan --progress [--every D] [--for D]`
pub fn plan_progress(
    s: &mut dyn Backend,
    every: Duration,
    duration: Option<Duration>,
) -> Result<Outcome> {
    plan_applies(s, false)?;
    let qd = settled_running_query(s)?;
    crate::postgres::progress::plan_progress(s, qd, every, duration)
}

/// A safe stop in the running statement where its tree can be read and
/// instrumented (not inside a Gather's shared-memory setup nor the
/// statement's end, see `progress::not_now`): the backend runs a little
/// until it is.  Still not after the retries: that stop, which
/// `Progress::start` refuses with the reason.
fn settled_running_query(s: &mut dyn Backend) -> Result<u64> {
    for attempt in 0..50 {
        let (_, qd) = safe_running_query(s)?;
        if attempt == 49 || not_now(s, qd)?.is_none() {
            return Ok(qd);
        }
        if let Some(text) = s.run_briefly(Duration::from_millis(2))? {
            bail!("the backend stopped while looking for a safe point:{text}");
        }
    }
    unreachable!()
}
