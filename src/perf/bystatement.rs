//! `profile --by-statement`: the samples and off-CPU intervals of a
//! profile split by the statement that ran when each was taken.  The
//! recorder keeps each one's time ([`Stamp`]); which statement ran at a
//! time is the caller's knowledge ([`Owners`]: PostgreSQL's, read from the
//! backend's pg_stat_activity entry while it runs), asked once the
//! recording has ended.  An off-CPU interval belongs to the statement of
//! its switch-out: the backend cannot change its statement while it is
//! off a CPU.

use super::offcpu::{NO_WAIT_EVENT, WaitLabels, wait_frame, wait_label};
use super::profile::{KERNEL_PC, Symbolizer};
use std::collections::HashMap;

/// One sample or off-CPU interval with its time (CLOCK_MONOTONIC ns).
#[derive(Clone, Debug)]
pub struct Stamp {
    pub time: u64,
    /// Samples (1) in an on-CPU profile, else ns.
    pub weight: u64,
    pub on_cpu: bool,
    /// The innermost user pc (0: none).
    pub leaf: u64,
    /// Off a CPU: the wait-event word at the switch-out (None: not read).
    pub wait: Option<u32>,
    /// What it is when no stack or wait event says it.
    pub note: Option<&'static str>,
}

impl Stamp {
    /// The innermost user pc of a stack (`pcs` innermost first).
    pub fn leaf_of(pcs: &[u64]) -> u64 {
        pcs.iter().copied().find(|&p| p != KERNEL_PC).unwrap_or(0)
    }
}

/// Who ran when: `of(time)` is an index into `labels` (and `details`,
/// what the JSON document carries for it).
pub struct Owners<'a> {
    pub of: &'a dyn Fn(u64) -> usize,
    pub labels: Vec<String>,
    pub details: Vec<serde_json::Value>,
    /// What the owners are, for the section's heading.
    pub heading: String,
}

/// One statement's part of the profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StatementRow {
    /// The statement (query id, text) or the state (idle, unknown).
    pub statement: serde_json::Value,
    #[serde(skip)]
    pub label: String,
    /// Its share of the profile's weight (0..1).
    pub share: f64,
    pub on_cpu_samples: u64,
    pub on_cpu_ms: f64,
    pub off_cpu_ms: f64,
    pub off_cpu_intervals: u64,
    /// Where its weight went most: the innermost function on a CPU, the
    /// wait event (or the function, with none) off it; share of its own.
    pub top: Vec<(String, f64)>,
}

/// Split `stamps` by `owners`; `sample_ms` is an on-CPU sample's time (a
/// profile's 1/HZ), `waits` names the wait events.
pub fn split(
    stamps: &[Stamp],
    owners: &Owners,
    sym: &mut Symbolizer,
    waits: &WaitLabels,
    sample_ms: f64,
) -> Vec<StatementRow> {
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
    out
}

/// The table's section: each statement's share, its time on and off a
/// CPU, and where that went most.
pub fn section(heading: &str, rows: &[StatementRow]) -> String {
    let mut out = format!("{heading}\n{:>6}  statement\n", "share");
    for r in rows {
        out.push_str(&format!("{:>5.1}%  {}\n", r.share * 100.0, r.label));
        let mut parts = Vec::new();
        if r.on_cpu_samples > 0 {
            parts.push(format!("on CPU {:.1} ms", r.on_cpu_ms));
        }
        if r.off_cpu_intervals > 0 {
            parts.push(format!("off CPU {:.1} ms", r.off_cpu_ms));
        }
        let top: Vec<String> = r
            .top
            .iter()
            .map(|(w, s)| format!("{w} {:.0}%", s * 100.0))
            .collect();
        out.push_str(&format!(
            "{:>6}  {}; {}\n",
            "",
            parts.join(", "),
            top.join(", ")
        ));
    }
    out
}
