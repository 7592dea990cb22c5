//! `pgdbg report CAPTURE`: turn a capture file (JSON lines written by
//! `attach --capture`) into the tables a performance engineer reads: plan
//! choices per prepared statement, waits per event with percentiles,
//! statement times, wait-sample profiles, probe counts and traced
//! arguments; or, with `--folded` / `--flamegraph`, the recorded stacks.
//!
//! Parsing ([`parse_capture`], `scan.rs`), aggregating ([`build`],
//! `aggregate.rs`) and rendering ([`render_text`], [`text_report`],
//! `render.rs`) are pure, so tests call them without files; this file holds
//! the report's types and `run`.

pub mod flame;

use crate::capture::{CAPTURE_FORMAT, Event as CaptureEvent, Line};
use anyhow::{Result, anyhow, bail};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;

mod aggregate;
mod render;
mod scan;
pub use aggregate::{Aggregator, build};
use render::to_json;
pub use render::{json_report, render_text, text_report};
pub use scan::{load, parse_capture, read, scan_capture};

pub use flame::StackKind;

/// Report on a capture file
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Capture file written by `pgdbg attach PID --capture FILE`
    pub capture: PathBuf,
    /// Write a flame graph (SVG) of the recorded stacks to OUT.svg
    #[arg(long, value_name = "OUT.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Print the recorded stacks as folded lines (`root;...;leaf WEIGHT`,
    /// flamegraph.pl's input) instead of the tables
    #[arg(long, conflicts_with = "json")]
    pub folded: bool,
    /// Print the report as one JSON document instead of the tables
    #[arg(long)]
    pub json: bool,
    /// Which stacks to fold: `waits` (wait stacks, weighted by µs waited)
    /// or `trace` (traced calls, one per call); default: waits when the
    /// capture has wait stacks, else trace
    #[arg(long, value_enum, value_name = "KIND")]
    pub stacks: Option<StackKind>,
}

/// One line of a capture file.
#[derive(Debug, Clone)]
pub struct Event {
    /// 1-based line number in the file.
    pub line: usize,
    pub ts: f64,
    pub pid: i64,
    /// The backend's PID in its own PID namespace (a container's), when
    /// not `pid`.
    pub ns_pid: Option<i64>,
    /// What happened: [`capture::Event::Other`](crate::capture::Event::Other)
    /// for an event this pgdbg does not know (counted in the header, in
    /// no table), or whose fields it cannot read (see
    /// [`Scanned::unreadable`]).
    pub event: crate::capture::Event,
}

/// How a capture's reading ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    /// Events read.
    pub events: usize,
    /// The number of the last line when it was incomplete (no newline at
    /// the end, and not a whole JSON value: a writer killed mid-line, or
    /// a full disk); it is ignored.
    pub incomplete_last: Option<usize>,
    /// Events of a known kind whose fields do not have the types pgdbg
    /// writes (a hand-edited line): counted, in no table.
    pub unreadable: usize,
    /// The line of the first of them.
    pub first_unreadable: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct Header {
    pub file: String,
    pub events: usize,
    pub backends: usize,
    pub first_ts: f64,
    pub last_ts: f64,
    pub span_s: f64,
    pub exited: usize,
    /// Backends in another PID namespace (a container): host PID and the
    /// PID there (`pg_stat_activity.pid` inside).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub namespace_pids: Vec<NsPid>,
}

/// A backend's host PID and its PID in its own namespace.
#[derive(Debug, Serialize)]
pub struct NsPid {
    pub pid: i64,
    pub ns_pid: i64,
}

#[derive(Debug, Serialize)]
pub struct PlanRow {
    pub statement: String,
    pub query: String,
    pub executions: u64,
    pub custom: u64,
    pub generic: u64,
    pub switches: u64,
    pub generic_cost_min: Option<f64>,
    pub generic_cost_max: Option<f64>,
    pub avg_custom_cost_min: Option<f64>,
    pub avg_custom_cost_max: Option<f64>,
    pub last_reason: String,
}

/// Count and time statistics of a group of durations (waits, statements).
#[derive(Debug, Serialize)]
pub struct Durations {
    pub count: u64,
    pub total_ms: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Durations {
    /// The table cells: count, total, avg, p50, p99, max.
    fn cells(&self) -> Vec<String> {
        let mut v = vec![self.count.to_string()];
        v.extend(
            [
                self.total_ms,
                self.avg_ms,
                self.p50_ms,
                self.p99_ms,
                self.max_ms,
            ]
            .map(fmt_ms),
        );
        v
    }
    const HEADERS: [(&'static str, bool); 6] = [
        ("count", true),
        ("total ms", true),
        ("avg ms", true),
        ("p50 ms", true),
        ("p99 ms", true),
        ("max ms", true),
    ];
}

#[derive(Debug, Serialize)]
pub struct WaitRow {
    pub wait_event_type: String,
    pub wait_event: String,
    #[serde(flatten)]
    pub d: Durations,
}

#[derive(Debug, Serialize)]
pub struct StatementRow {
    pub query: String,
    #[serde(flatten)]
    pub d: Durations,
}

/// `waits trace` with statements: one statement's waits of one event.
#[derive(Debug, Serialize)]
pub struct StatementWaitRow {
    pub query: String,
    pub wait_event_type: String,
    pub wait_event: String,
    #[serde(flatten)]
    pub d: Durations,
}

/// `waits sample --by-statement`: one statement's samples of one event.
#[derive(Debug, Serialize)]
pub struct StatementSampleRow {
    /// The statement's text (cut to the report's width), or an idle
    /// state as `waits sample` named it.
    pub statement: String,
    pub query_id: Option<i64>,
    pub wait_event_type: String,
    pub wait_event: String,
    pub samples: u64,
    /// Of all the samples split by statement.
    pub share_pct: f64,
}

#[derive(Debug, Serialize)]
pub struct SampleRow {
    pub wait_event_type: String,
    pub wait_event: String,
    pub samples: u64,
    pub share_pct: f64,
}

#[derive(Debug, Serialize)]
pub struct ProbeRow {
    pub function: String,
    /// "count", "trace" or "break".
    pub source: String,
    pub calls: u64,
    pub planning: Option<u64>,
    pub execution: Option<u64>,
    pub other: Option<u64>,
    pub backends: usize,
}

/// `latency`: one function's calls, timed from entry to return.  Several
/// `latency` runs (or backends) add up; their percentiles cannot be
/// combined, so p50 and p99 are given only for a function timed once.
#[derive(Debug, Serialize)]
pub struct LatencyRow {
    pub function: String,
    pub calls: u64,
    pub total_ms: f64,
    pub avg_ms: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: f64,
    /// Calls left by an ERROR (no return), not timed.
    pub no_return: u64,
    /// `latency` events added up.
    pub runs: usize,
    pub backends: usize,
}

#[derive(Debug, Serialize)]
pub struct ArgValue {
    pub value: String,
    pub count: u64,
}

#[derive(Debug, Serialize)]
pub struct TracedArg {
    pub function: String,
    pub argument: String,
    /// Number of distinct values seen.
    pub distinct: usize,
    /// The top 10, by count then value.
    pub top: Vec<ArgValue>,
    /// Calls whose value is not in `top`.
    pub others: u64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub header: Header,
    pub plan_choices: Vec<PlanRow>,
    pub waits: Vec<WaitRow>,
    pub statements: Vec<StatementRow>,
    pub waits_by_statement: Vec<StatementWaitRow>,
    pub wait_samples: Vec<SampleRow>,
    pub wait_samples_by_statement: Vec<StatementSampleRow>,
    pub probe_counts: Vec<ProbeRow>,
    pub traced_args: Vec<TracedArg>,
    pub latency: Vec<LatencyRow>,
    pub progress: Vec<ProgressRow>,
}

/// `plan --progress` in one backend: its last report and how many there
/// were.
#[derive(Debug, Serialize)]
pub struct ProgressRow {
    pub backend: i64,
    /// The backend's PID in a container's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_pid: Option<i64>,
    pub reports: u64,
    pub elapsed_s: Option<f64>,
    pub executing: Option<String>,
    pub nodes: Vec<crate::capture::ProgressNode>,
}

/// Longest query text shown; longer ones end in "...".
pub const QUERY_WIDTH: usize = 60;

/// Values listed per traced argument.
pub const TOP_VALUES: usize = 10;

/// Query text on one line: whitespace runs become one space, and text
/// longer than [`QUERY_WIDTH`] characters is cut to that width, ending
/// in "...".
pub fn shorten_query(q: &str) -> String {
    let one: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= QUERY_WIDTH {
        return one;
    }
    let mut s: String = one.chars().take(QUERY_WIDTH - 3).collect();
    s.push_str("...");
    s
}

/// Nearest-rank percentile of an ascending slice (n >= 1): the element at
/// index ceil(p/100*n) - 1.
pub fn percentile(sorted: &[u64], p: u64) -> u64 {
    assert!(!sorted.is_empty());
    let n = sorted.len() as u64;
    let rank = (p * n).div_ceil(100).max(1);
    sorted[(rank - 1) as usize]
}

/// A cost with at most 4 decimals, trailing zeros trimmed: 226.435,
/// 8307.5, 15.8025, 100.
pub fn fmt_cost(c: f64) -> String {
    let s = format!("{c:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

fn fmt_ms(ms: f64) -> String {
    format!("{ms:.3}")
}

fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!("cannot write to standard output: {e}"))
        }
        _ => Ok(()),
    }
}

pub fn run(args: &ReportArgs) -> Result<i32> {
    let name = args.capture.display().to_string();
    let stacks = args.folded || args.flamegraph.is_some();
    if !stacks && args.stacks.is_some() {
        bail!("--stacks chooses the stacks of --folded or --flamegraph: add one of them");
    }
    // one pass over the file, feeding what the output needs
    let tables = args.json || !stacks;
    let mut agg = Aggregator::new();
    let mut folder = flame::Folder::new(args.stacks);
    read(&args.capture, |e| {
        if tables {
            agg.add(&e);
        }
        if stacks {
            folder.add(&e);
        }
    })?;
    if stacks {
        let folded = folder.finish(&name)?;
        if let Some(out) = &args.flamegraph {
            flame::write_svg(&folded, out)?;
            crate::runtime::sink().warn(format_args!(
                "pgdbg: wrote {}: flame graph of {} distinct {} stacks from {} {} events",
                out.display(),
                folded.lines.len(),
                folded.kind.name(),
                folded.events,
                folded.kind.event()
            ));
        }
        if args.folded {
            emit(&folded.text())?;
        }
        if args.json {
            emit(&format!("{:#}\n", to_json(agg.finish(&name))))?;
        }
        return Ok(0);
    }
    if args.json {
        emit(&format!("{:#}\n", to_json(agg.finish(&name))))?;
    } else {
        emit(&render_text(&agg.finish(&name)))?;
    }
    Ok(0)
}
