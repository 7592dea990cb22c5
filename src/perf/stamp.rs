//! `--by-statement`'s parts the profiles hold: each sample's or off-CPU
//! interval's time, kept by the recorder when the profile is split by
//! statement afterwards (`bystatement.rs`), and the rows the split gives,
//! which each profile's table and JSON show.

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

/// A profile's split by statement: whose statements and what the shares
/// are of, and the rows (in JSON `by_statement_heading` and
/// `by_statement`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ByStatement {
    #[serde(rename = "by_statement_heading")]
    pub heading: String,
    #[serde(rename = "by_statement")]
    pub rows: Vec<StatementRow>,
}

impl ByStatement {
    /// The table's section: each statement's share, its time on and off
    /// a CPU, and where that went most.
    pub fn section(&self) -> String {
        section(&self.heading, &self.rows)
    }
}

fn section(heading: &str, rows: &[StatementRow]) -> String {
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
