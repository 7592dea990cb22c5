//! Entry points of the PostgreSQL commands (`call`, `plan`, `wait`,
//! `waits`, `plancache`): argument handling, output and the capture
//! events.  Each takes the backend as a `&mut dyn Backend` (the session
//! passes itself), so nothing here sees ptrace or `Session`; what the
//! commands know about PostgreSQL is in the sibling modules.
//!
//! | file | holds |
//! | --- | --- |
//! | `call.rs` | `call FUNC(ARGS)` |
//! | `plan.rs` | `plan` (and `--next`): the running statement, the safe stop to explain it |
//! | `analyze.rs` | `plan --next --analyze`, `plan --progress` |
//! | `waits.rs` | `wait`, `waits sample`, `waits trace --ptrace` |
//! | `waits_perf.rs` | `waits trace` by default (a perf write-breakpoint event, no stops) |
//! | `waits_marks.rs` | its statement times from in-process recorders at the executor |
//! | `plancache.rs` | `plancache` (both modes) |

mod analyze;
mod call;
mod plan;
mod plancache;
mod waits;
mod waits_marks;
pub(crate) mod waits_perf;

pub use analyze::{plan_analyze, plan_progress};
pub use call::call;
pub use plan::{plan, plan_applies, query_desc_at_executor_entry, safe_running_query};
pub use plancache::plancache;
pub use waits::{wait_now, waits_sample, waits_trace};
pub use waits_perf::waits_trace_perf;

/// A statement's text on one line, cut at 100 characters.
fn one_line(s: &str) -> String {
    let t: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.chars().count() > 100 {
        format!("{}...", t.chars().take(100).collect::<String>())
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use crate::inferior::Stop;
    use crate::postgres::ProbeEnd;
    use crate::postgres::backend::fake::FakeBackend;
    use crate::postgres::backend::{Flow, probe_outcome};

    #[test]
    fn how_a_probe_command_ends() {
        let mut s = FakeBackend::new();
        let out = |s: &FakeBackend, end| probe_outcome(s, end, "sum".into(), "\nstop".into());
        for (end, flow) in [
            (ProbeEnd::Done, Flow::Continue),
            (ProbeEnd::Deadline, Flow::Continue),
            (ProbeEnd::Stopped, Flow::Continue),
            (ProbeEnd::TargetGone, Flow::TargetGone),
            (ProbeEnd::Terminating, Flow::Terminate),
        ] {
            assert_eq!(Flow::from(end), flow);
            assert_eq!(out(&s, end).flow, flow);
        }
        // the stop's report follows the summary, unless Ctrl-C (an
        // interrupt) ended the probe; a deadline or --count says nothing
        assert_eq!(out(&s, ProbeEnd::Deadline).text, "sum");
        assert_eq!(out(&s, ProbeEnd::TargetGone).text, "sum\nstop");
        s.stop = Some(Stop::Breakpoint { addr: 1 });
        assert_eq!(out(&s, ProbeEnd::Stopped).text, "sum\nstop");
        s.stop = Some(Stop::Interrupted);
        assert_eq!(out(&s, ProbeEnd::Stopped).text, "sum");
        assert_eq!(out(&s, ProbeEnd::Terminating).text, "sum");
    }
}
