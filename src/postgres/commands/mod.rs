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
//! | `waits.rs` | `wait`, `waits sample`, `waits trace` |
//! | `plancache.rs` | `plancache` (both modes) |

mod call;
mod plan;
mod plancache;
mod waits;

pub use call::call;
pub use plan::{plan, plan_applies, query_desc_at_executor_entry, safe_running_query};
pub use plancache::plancache;
pub use waits::{wait_now, waits_sample, waits_trace};

/// A statement's text on one line, cut at 100 characters.
fn one_line(s: &str) -> String {
    let t: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.chars().count() > 100 {
        format!("{}...", t.chars().take(100).collect::<String>())
    } else {
        t
    }
}

/// How a command that ran the backend ends, from how `run_probes` ended
/// (all but `plancache`, whose end also depends on the stop).
fn flow_of(end: super::ProbeEnd) -> super::backend::Flow {
    use super::ProbeEnd;
    use super::backend::Flow;
    match end {
        ProbeEnd::TargetGone => Flow::TargetGone,
        ProbeEnd::Terminating => Flow::Terminate,
        _ => Flow::Continue,
    }
}
