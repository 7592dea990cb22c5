//! `profile --by-statement`: the samples and off-CPU intervals of a
//! profile split by the statement that ran when each was taken.  The
//! recorder keeps each one's time ([`Stamp`]); which statement ran at a
//! time is the caller's knowledge ([`Owners`]: PostgreSQL's, read from the
//! backend's pg_stat_activity entry while it runs), asked once the
//! recording has ended.  An off-CPU interval belongs to the statement of
//! its switch-out: the backend cannot change its statement while it is
//! off a CPU.

use super::offcpu::{NO_WAIT_EVENT, WaitLabels, wait_frame, wait_label};
use super::profile::Symbolizer;
pub use super::stamp::{ByStatement, Stamp, StatementRow};
use std::collections::HashMap;

/// Who ran when: `of(time)` is an index into `labels` (and `details`,
/// what the JSON document carries for it).
pub struct Owners<'a> {
    pub of: &'a dyn Fn(u64) -> usize,
    pub labels: Vec<String>,
    pub details: Vec<serde_json::Value>,
    /// What the owners are, for the section's heading.
    pub heading: String,
}

/// Split `stamps` by `owners` (under their heading); `sample_ms` is an
/// on-CPU sample's time (a profile's 1/HZ), `waits` names the wait events.
pub fn split(
    stamps: &[Stamp],
    owners: &Owners,
    sym: &mut Symbolizer,
    waits: &WaitLabels,
    sample_ms: f64,
) -> ByStatement {
    let total: u64 = stamps.iter().map(|s| s.weight).sum();
    let mut rows: HashMap<usize, (StatementRow, HashMap<String, u64>, u64)> = HashMap::new();
    for s in stamps {
        let o = (owners.of)(s.time);
        let (row, parts, w) = rows.entry(o).or_insert_with(|| {
            (
                StatementRow {
                    statement: owners.details.get(o).cloned().unwrap_or_default(),
                    label: owners.labels.get(o).cloned().unwrap_or_default(),
                    share: 0.0,
                    on_cpu_samples: 0,
                    on_cpu_ms: 0.0,
                    off_cpu_ms: 0.0,
                    off_cpu_intervals: 0,
                    top: Vec::new(),
                },
                HashMap::new(),
                0,
            )
        });
        let mut function = || {
            if s.leaf == 0 {
                "[unknown]".to_string()
            } else {
                // the pc sampled itself, not a return address
                sym.names(s.leaf, true).swap_remove(0)
            }
        };
        let what = if let Some(n) = s.note {
            row.off_cpu_ms += s.weight as f64 / 1e6;
            row.off_cpu_intervals += 1;
            n.to_string()
        } else if s.on_cpu {
            row.on_cpu_samples += 1;
            row.on_cpu_ms += if s.weight == 1 {
                sample_ms
            } else {
                s.weight as f64 / 1e6
            };
            function()
        } else {
            row.off_cpu_ms += s.weight as f64 / 1e6;
            row.off_cpu_intervals += 1;
            match wait_label(waits, s.wait) {
                l if l == NO_WAIT_EVENT => format!("{} (off CPU)", function()),
                l => wait_frame(&l),
            }
        };
        *parts.entry(what).or_insert(0) += s.weight;
        *w += s.weight;
    }
    let mut out: Vec<StatementRow> = rows
        .into_values()
        .map(|(mut row, parts, w)| {
            row.share = w as f64 / total.max(1) as f64;
            let mut parts: Vec<(String, u64)> = parts.into_iter().collect();
            parts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            row.top = parts
                .into_iter()
                .take(3)
                .map(|(p, n)| (p, n as f64 / w.max(1) as f64))
                .collect();
            row
        })
        .collect();
    out.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.label.cmp(&b.label)));
    ByStatement {
        heading: owners.heading.clone(),
        rows: out,
    }
}
