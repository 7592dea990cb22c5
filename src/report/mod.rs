//! `pgdbg report CAPTURE`: turn a capture file (JSON lines written by
//! `attach --capture`) into the tables a performance engineer reads: plan
//! choices per prepared statement, waits per event with percentiles,
//! statement times, wait-sample profiles, probe counts and traced
//! arguments; or, with `--folded` / `--flamegraph`, the recorded stacks.
//!
//! Parsing ([`parse_capture`]) and rendering ([`build`], [`render_text`],
//! [`text_report`]) are pure, so tests call them without files.

pub mod flame;

use crate::capture::{CAPTURE_FORMAT, Event as CaptureEvent, Line};
use anyhow::{Result, anyhow, bail};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;

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

/// Read a capture line by line from `r`, handing each event to `sink`
/// (nothing is kept: memory does not grow with the capture). `name` is
/// used in errors (`name:LINE: ...`). Blank lines are skipped; every
/// other line must be a JSON object with `event` (string), `ts` (number)
/// and `pid` (integer), except an incomplete last line (see
/// [`Scanned::incomplete_last`]). An `attach` event of a capture format
/// newer than [`CAPTURE_FORMAT`] is an error; one without a format is
/// format 1.
pub fn scan_capture(
    name: &str,
    mut r: impl std::io::BufRead,
    mut sink: impl FnMut(Event),
) -> Result<Scanned> {
    let mut buf = Vec::with_capacity(4096);
    let mut n = 0;
    let mut events = 0;
    let mut unreadable = 0;
    let mut first_unreadable = None;
    loop {
        buf.clear();
        let got = match r.read_until(b'\n', &mut buf) {
            Ok(g) => g,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => bail!("cannot read capture {name}: {e}"),
        };
        if got == 0 {
            break;
        }
        n += 1;
        let complete = buf.last() == Some(&b'\n');
        let mut bytes = &buf[..];
        if complete {
            bytes = &bytes[..bytes.len() - 1];
            bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        }
        let incomplete = Scanned {
            events,
            incomplete_last: Some(n),
            unreadable,
            first_unreadable,
        };
        let line = match std::str::from_utf8(bytes) {
            Ok(l) => l,
            // cut inside a multi-byte character
            Err(_) if !complete => return Ok(incomplete),
            Err(_) => bail!("{name}:{n}: not UTF-8 text"),
        };
        if line.trim().is_empty() {
            continue;
        }
        let parsed = match serde_json::from_str::<Line>(line) {
            Ok(l) => l,
            Err(_) => match untyped_line(name, n, line, complete)? {
                Some(l) => {
                    unreadable += 1;
                    first_unreadable.get_or_insert(n);
                    l
                }
                None => return Ok(incomplete),
            },
        };
        if let CaptureEvent::Attach { format, .. } = &parsed.event {
            check_format(name, n, (*format).into())?;
        }
        events += 1;
        sink(Event {
            line: n,
            ts: parsed.ts,
            pid: parsed.pid,
            event: parsed.event,
        });
    }
    Ok(Scanned {
        events,
        incomplete_last: None,
        unreadable,
        first_unreadable,
    })
}

/// A newer pgdbg's capture format is refused (its events may mean other
/// things).
fn check_format(name: &str, n: usize, format: u64) -> Result<()> {
    if format > CAPTURE_FORMAT as u64 {
        bail!(
            "{name}:{n}: the capture is in format {format}, written by a newer pgdbg (this one reads format {CAPTURE_FORMAT}): report it with that pgdbg"
        );
    }
    Ok(())
}

/// A line that does not read into a [`Line`]: the error naming what is
/// wrong with it (not JSON, no `event`, `ts` or `pid`), or None when it is
/// an incomplete last line, or, when only its fields are not what pgdbg
/// writes, the line as an event of no table ([`CaptureEvent::Other`]).
fn untyped_line(name: &str, n: usize, line: &str, complete: bool) -> Result<Option<Line>> {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(_) if !complete => return Ok(None),
        Err(e) => {
            // serde_json counts lines of this one line: keep the column.
            let why = e.to_string();
            let why = why.split(" at line ").next().unwrap_or(&why).to_string();
            bail!(
                "{name}:{n}: not a valid JSON line: {why} at column {}",
                e.column()
            );
        }
    };
    let Some(obj) = v.as_object() else {
        bail!("{name}:{n}: not a capture event (a JSON object was expected)");
    };
    let kind = obj
        .get("event")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("{name}:{n}: not a capture event (no \"event\" string)"))?
        .to_string();
    let ts = obj
        .get("ts")
        .and_then(Value::as_f64)
        .ok_or_else(|| anyhow!("{name}:{n}: event without a numeric \"ts\""))?;
    let pid = obj
        .get("pid")
        .and_then(Value::as_i64)
        .ok_or_else(|| anyhow!("{name}:{n}: event without an integer \"pid\""))?;
    if kind == "attach"
        && let Some(f) = obj.get("format").and_then(Value::as_u64)
    {
        check_format(name, n, f)?;
    }
    Ok(Some(Line {
        ts,
        pid,
        event: CaptureEvent::Other,
    }))
}

/// Parse a capture's text into its events (see [`scan_capture`]; an
/// incomplete last line is left out).
pub fn parse_capture(name: &str, text: &str) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    scan_capture(name, text.as_bytes(), |e| out.push(e))?;
    Ok(out)
}

// ---------------------------------------------------------------------
// Report content (also the JSON document)

#[derive(Debug, Serialize)]
pub struct Header {
    pub file: String,
    pub events: usize,
    pub backends: usize,
    pub first_ts: f64,
    pub last_ts: f64,
    pub span_s: f64,
    pub exited: usize,
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
    pub wait_samples: Vec<SampleRow>,
    pub probe_counts: Vec<ProbeRow>,
    pub traced_args: Vec<TracedArg>,
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

fn min_max(acc: &mut Option<(f64, f64)>, x: Option<f64>) {
    if let Some(x) = x {
        *acc = Some(match *acc {
            None => (x, x),
            Some((lo, hi)) => (lo.min(x), hi.max(x)),
        });
    }
}

fn durations(mut ns: Vec<u64>) -> Durations {
    ns.sort_unstable();
    let total: u64 = ns.iter().sum();
    let n = ns.len() as u64;
    Durations {
        count: n,
        total_ms: ns_to_ms(total),
        avg_ms: total as f64 / n as f64 / 1e6,
        p50_ms: ns_to_ms(percentile(&ns, 50)),
        p99_ms: ns_to_ms(percentile(&ns, 99)),
        max_ms: ns_to_ms(*ns.last().unwrap()),
    }
}

/// A wait's (type, name), "?" for a missing one; a wait pgdbg could not
/// name (`unresolved` in the event) is typed "unresolved" and named by
/// its raw wait_event_info.
fn wait_key(
    wait_event_type: &Option<String>,
    wait_event: &Option<String>,
    unresolved: &Option<String>,
) -> (String, String) {
    let t = match (wait_event_type, unresolved) {
        (Some(t), _) => t.clone(),
        (None, Some(_)) => "unresolved".into(),
        (None, None) => "?".into(),
    };
    (t, wait_event.clone().unwrap_or_else(|| "?".into()))
}

/// How a traced argument's value is shown: numbers as they are, strings
/// quoted (JSON escapes keep the table on one line, and "5" stays apart
/// from 5).
fn arg_value_text(v: &Value) -> String {
    v.to_string()
}

/// Order of values with equal counts: numbers by value, then the rest
/// by their text.
fn cmp_values(a: &str, b: &str) -> std::cmp::Ordering {
    let num = |s: &str| s.parse::<f64>().ok().filter(|_| !s.starts_with('"'));
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y).then_with(|| a.cmp(b)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// Accumulated plan choices of one (statement, query).
#[derive(Default)]
struct PlanAcc {
    executions: u64,
    custom: u64,
    generic: u64,
    switches: u64,
    gcost: Option<(f64, f64)>,
    acost: Option<(f64, f64)>,
    last_reason: String,
}

/// Accumulated calls of one probed function.
#[derive(Default)]
struct ProbeAcc {
    calls: u64,
    phases: Option<[u64; 3]>,
    pids: BTreeSet<i64>,
}

/// The report, built one event at a time ([`Aggregator::add`]): what it
/// keeps grows with the number of distinct statements, wait events,
/// functions and argument values, and with one duration per wait and
/// statement (for the percentiles), never with the events themselves.
#[derive(Default)]
pub struct Aggregator {
    events: usize,
    pids: BTreeSet<i64>,
    /// (first, last) timestamp.
    span: Option<(f64, f64)>,
    exited: usize,
    plans: HashMap<(String, String), PlanAcc>,
    last_choice: HashMap<(i64, String, String), String>,
    /// Durations (ns) per wait event and per statement.
    waits: HashMap<(String, String), Vec<u64>>,
    stmts: HashMap<String, Vec<u64>>,
    samples: HashMap<(String, String), u64>,
    /// (source rank: count, trace, break; function) -> calls.
    probes: HashMap<(u8, String), ProbeAcc>,
    args: BTreeMap<(String, String), HashMap<String, u64>>,
}

impl Aggregator {
    pub fn new() -> Aggregator {
        Aggregator::default()
    }

    /// Count one event.
    pub fn add(&mut self, e: &Event) {
        self.events += 1;
        self.pids.insert(e.pid);
        self.span = Some(match self.span {
            None => (e.ts, e.ts),
            Some((lo, hi)) => (lo.min(e.ts), hi.max(e.ts)),
        });
        match &e.event {
            CaptureEvent::Exit { .. } => self.exited += 1,
            CaptureEvent::PlanChoice {
                statement,
                query,
                choice,
                generic_cost,
                avg_custom_cost,
                reason,
                ..
            } => {
                let stmt = statement.clone().unwrap_or_else(|| "-".into());
                let key = (stmt, shorten_query(query));
                let acc = self.plans.entry(key.clone()).or_default();
                acc.executions += 1;
                match choice.as_str() {
                    "custom" => acc.custom += 1,
                    "generic" => acc.generic += 1,
                    _ => {}
                }
                let prev = self
                    .last_choice
                    .insert((e.pid, key.0, key.1), choice.clone());
                if prev.is_some_and(|p| p != *choice) {
                    acc.switches += 1;
                }
                min_max(&mut acc.gcost, *generic_cost);
                min_max(&mut acc.acost, *avg_custom_cost);
                acc.last_reason = reason.clone();
            }
            CaptureEvent::Wait {
                duration_ns,
                unresolved,
                wait_event,
                wait_event_type,
                ..
            } => {
                let key = wait_key(wait_event_type, wait_event, unresolved);
                self.waits.entry(key).or_default().push(*duration_ns);
            }
            CaptureEvent::Statement { duration_ns, query } => {
                self.stmts
                    .entry(shorten_query(query))
                    .or_default()
                    .push(*duration_ns);
            }
            CaptureEvent::WaitSamples { profile, .. } => {
                for p in profile {
                    let key = wait_key(&p.wait_event_type, &p.wait_event, &p.unresolved);
                    *self.samples.entry(key).or_default() += p.samples;
                }
            }
            CaptureEvent::Count {
                calls,
                function,
                phases,
                ..
            } => {
                let acc = self.probes.entry((0, function.clone())).or_default();
                acc.calls += calls;
                acc.pids.insert(e.pid);
                if let Some(ph) = phases {
                    let sums = acc.phases.get_or_insert([0; 3]);
                    sums[0] += ph.planning;
                    sums[1] += ph.execution;
                    sums[2] += ph.other;
                }
            }
            CaptureEvent::Trace { args, function, .. } => {
                for (name, val) in args {
                    *self
                        .args
                        .entry((function.clone(), name.clone()))
                        .or_default()
                        .entry(arg_value_text(val))
                        .or_default() += 1;
                }
                let acc = self.probes.entry((1, function.clone())).or_default();
                acc.calls += 1;
                acc.pids.insert(e.pid);
            }
            CaptureEvent::Stop {
                reason, function, ..
            } if reason == "breakpoint" => {
                let f = function.clone().flatten().unwrap_or_else(|| "?".into());
                let acc = self.probes.entry((2, f)).or_default();
                acc.calls += 1;
                acc.pids.insert(e.pid);
            }
            _ => {}
        }
    }

    /// Events counted so far.
    pub fn events(&self) -> usize {
        self.events
    }

    /// The report (`file` is the name in the header).
    pub fn finish(self, file: &str) -> Report {
        let (first_ts, last_ts) = self.span.unwrap_or((0.0, 0.0));
        let header = Header {
            file: file.to_string(),
            events: self.events,
            backends: self.pids.len(),
            first_ts,
            last_ts,
            span_s: last_ts - first_ts,
            exited: self.exited,
        };

        let mut plan_choices: Vec<PlanRow> = self
            .plans
            .into_iter()
            .map(|((statement, query), a)| PlanRow {
                statement,
                query,
                executions: a.executions,
                custom: a.custom,
                generic: a.generic,
                switches: a.switches,
                generic_cost_min: a.gcost.map(|c| c.0),
                generic_cost_max: a.gcost.map(|c| c.1),
                avg_custom_cost_min: a.acost.map(|c| c.0),
                avg_custom_cost_max: a.acost.map(|c| c.1),
                last_reason: a.last_reason,
            })
            .collect();
        plan_choices.sort_by(|a, b| {
            b.executions
                .cmp(&a.executions)
                .then_with(|| a.statement.cmp(&b.statement))
                .then_with(|| a.query.cmp(&b.query))
        });

        let mut wait_rows: Vec<WaitRow> = self
            .waits
            .into_iter()
            .map(|((t, ev), ns)| WaitRow {
                wait_event_type: t,
                wait_event: ev,
                d: durations(ns),
            })
            .collect();
        wait_rows.sort_by(|a, b| {
            b.d.total_ms.total_cmp(&a.d.total_ms).then_with(|| {
                (&a.wait_event_type, &a.wait_event).cmp(&(&b.wait_event_type, &b.wait_event))
            })
        });

        let mut statements: Vec<StatementRow> = self
            .stmts
            .into_iter()
            .map(|(query, ns)| StatementRow {
                query,
                d: durations(ns),
            })
            .collect();
        statements.sort_by(|a, b| {
            b.d.total_ms
                .total_cmp(&a.d.total_ms)
                .then_with(|| a.query.cmp(&b.query))
        });

        let total_samples: u64 = self.samples.values().sum();
        let mut wait_samples: Vec<SampleRow> = self
            .samples
            .into_iter()
            .map(|((t, ev), n)| SampleRow {
                wait_event_type: t,
                wait_event: ev,
                samples: n,
                share_pct: if total_samples == 0 {
                    0.0
                } else {
                    n as f64 * 100.0 / total_samples as f64
                },
            })
            .collect();
        wait_samples.sort_by(|a, b| {
            b.samples.cmp(&a.samples).then_with(|| {
                (&a.wait_event_type, &a.wait_event).cmp(&(&b.wait_event_type, &b.wait_event))
            })
        });

        let mut probe_rows: Vec<(u8, ProbeRow)> = self
            .probes
            .into_iter()
            .map(|((rank, function), a)| {
                (
                    rank,
                    ProbeRow {
                        function,
                        source: ["count", "trace", "break"][rank as usize].to_string(),
                        calls: a.calls,
                        planning: a.phases.map(|p| p[0]),
                        execution: a.phases.map(|p| p[1]),
                        other: a.phases.map(|p| p[2]),
                        backends: a.pids.len(),
                    },
                )
            })
            .collect();
        probe_rows.sort_by(|(ra, a), (rb, b)| {
            ra.cmp(rb)
                .then_with(|| b.calls.cmp(&a.calls))
                .then_with(|| a.function.cmp(&b.function))
        });

        let traced_args = self
            .args
            .into_iter()
            .map(|((function, argument), counts)| {
                let distinct = counts.len();
                let total: u64 = counts.values().sum();
                let mut all: Vec<(String, u64)> = counts.into_iter().collect();
                all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| cmp_values(&a.0, &b.0)));
                all.truncate(TOP_VALUES);
                let shown: u64 = all.iter().map(|a| a.1).sum();
                TracedArg {
                    function,
                    argument,
                    distinct,
                    top: all
                        .into_iter()
                        .map(|(value, count)| ArgValue { value, count })
                        .collect(),
                    others: total - shown,
                }
            })
            .collect();

        Report {
            header,
            plan_choices,
            waits: wait_rows,
            statements,
            wait_samples,
            probe_counts: probe_rows.into_iter().map(|(_, r)| r).collect(),
            traced_args,
        }
    }
}

/// Aggregate parsed events into the report.
pub fn build(file: &str, events: &[Event]) -> Report {
    let mut a = Aggregator::new();
    for e in events {
        a.add(e);
    }
    a.finish(file)
}

// ---------------------------------------------------------------------
// Text

/// A fixed-width table: columns separated by two spaces, numbers right
/// aligned, no trailing blanks.
struct Table {
    head: Vec<&'static str>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(cols: &[(&'static str, bool)]) -> Table {
        Table {
            head: cols.iter().map(|c| c.0).collect(),
            right: cols.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.head.len());
        self.rows.push(cells);
    }

    fn render(&self, out: &mut String) {
        let width = |s: &str| s.chars().count();
        let mut w: Vec<usize> = self.head.iter().map(|h| width(h)).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(width(c));
            }
        }
        let head: Vec<String> = self.head.iter().map(|h| h.to_string()).collect();
        for cells in std::iter::once(&head).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(w[i] - width(c));
                if self.right[i] {
                    line.push_str(&pad);
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    line.push_str(&pad);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

fn cost_range(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo == hi => fmt_cost(lo),
        (Some(lo), Some(hi)) => format!("{}..{}", fmt_cost(lo), fmt_cost(hi)),
        _ => "-".into(),
    }
}

fn opt_num(x: Option<u64>) -> String {
    x.map(|n| n.to_string()).unwrap_or_default()
}

/// The text report.
pub fn render_text(r: &Report) -> String {
    let h = &r.header;
    let mut out = format!(
        "Capture {}: {} event{} from {} backend{} over {:.3} s",
        h.file,
        h.events,
        if h.events == 1 { "" } else { "s" },
        h.backends,
        if h.backends == 1 { "" } else { "s" },
        h.span_s
    );
    if h.exited > 0 {
        out.push_str(&format!(", {} exited", h.exited));
    }
    out.push('\n');

    let mut sections: Vec<(&str, Table)> = Vec::new();
    if !r.plan_choices.is_empty() {
        let mut t = Table::new(&[
            ("statement", false),
            ("query", false),
            ("executions", true),
            ("custom", true),
            ("generic", true),
            ("switches", true),
            ("generic_cost", true),
            ("avg_custom_cost", true),
            ("last reason", false),
        ]);
        for p in &r.plan_choices {
            t.row(vec![
                p.statement.clone(),
                p.query.clone(),
                p.executions.to_string(),
                p.custom.to_string(),
                p.generic.to_string(),
                p.switches.to_string(),
                cost_range(p.generic_cost_min, p.generic_cost_max),
                cost_range(p.avg_custom_cost_min, p.avg_custom_cost_max),
                p.last_reason.clone(),
            ]);
        }
        sections.push(("Plan choices per statement", t));
    }
    if !r.waits.is_empty() {
        let mut cols = vec![("wait_event_type", false), ("wait_event", false)];
        cols.extend(Durations::HEADERS);
        let mut t = Table::new(&cols);
        for w in &r.waits {
            let mut row = vec![w.wait_event_type.clone(), w.wait_event.clone()];
            row.extend(w.d.cells());
            t.row(row);
        }
        sections.push(("Waits per event", t));
    }
    if !r.statements.is_empty() {
        let mut cols = vec![("query", false)];
        cols.extend(Durations::HEADERS);
        let mut t = Table::new(&cols);
        for s in &r.statements {
            let mut row = vec![s.query.clone()];
            row.extend(s.d.cells());
            t.row(row);
        }
        sections.push(("Statements", t));
    }
    if !r.wait_samples.is_empty() {
        let mut t = Table::new(&[
            ("wait_event_type", false),
            ("wait_event", false),
            ("samples", true),
            ("share %", true),
        ]);
        for s in &r.wait_samples {
            t.row(vec![
                s.wait_event_type.clone(),
                s.wait_event.clone(),
                s.samples.to_string(),
                format!("{:.1}", s.share_pct),
            ]);
        }
        sections.push(("Wait samples", t));
    }
    if !r.probe_counts.is_empty() {
        let mut t = Table::new(&[
            ("function", false),
            ("source", false),
            ("calls", true),
            ("planning", true),
            ("execution", true),
            ("other", true),
            ("backends", true),
        ]);
        for p in &r.probe_counts {
            t.row(vec![
                p.function.clone(),
                p.source.clone(),
                p.calls.to_string(),
                opt_num(p.planning),
                opt_num(p.execution),
                opt_num(p.other),
                p.backends.to_string(),
            ]);
        }
        sections.push(("Probe counts", t));
    }
    if !r.traced_args.is_empty() {
        let mut t = Table::new(&[
            ("function", false),
            ("argument", false),
            ("value", false),
            ("count", true),
        ]);
        let mut last_fn = "";
        for a in &r.traced_args {
            let mut first = true;
            for v in &a.top {
                // Function and argument only where they change.
                t.row(vec![
                    if a.function != last_fn {
                        a.function.clone()
                    } else {
                        String::new()
                    },
                    if first {
                        a.argument.clone()
                    } else {
                        String::new()
                    },
                    v.value.clone(),
                    v.count.to_string(),
                ]);
                last_fn = &a.function;
                first = false;
            }
            if a.others > 0 {
                t.row(vec![
                    String::new(),
                    String::new(),
                    format!("({} other values)", a.distinct - a.top.len()),
                    a.others.to_string(),
                ]);
            }
        }
        sections.push(("Traced arguments", t));
    }
    for (title, t) in sections {
        out.push('\n');
        out.push_str(title);
        out.push('\n');
        t.render(&mut out);
    }
    out
}

/// Text report of parsed events (`file` is the name in the header).
pub fn text_report(file: &str, events: &[Event]) -> String {
    render_text(&build(file, events))
}

/// The JSON document of `--json`.
pub fn json_report(file: &str, events: &[Event]) -> Value {
    to_json(build(file, events))
}

// ---------------------------------------------------------------------
// Command

fn open_capture(path: &std::path::Path) -> Result<std::io::BufReader<std::fs::File>> {
    let f = std::fs::File::open(path)
        .map_err(|e| anyhow!("cannot read capture {}: {e}", path.display()))?;
    Ok(std::io::BufReader::with_capacity(1 << 16, f))
}

/// Read a capture file, handing each event to `sink`; errors are one line
/// naming the file. An incomplete last line is reported on stderr and
/// left out; a capture without events is an error.
pub fn read(path: &std::path::Path, sink: impl FnMut(Event)) -> Result<Scanned> {
    let name = path.display().to_string();
    let scanned = scan_capture(&name, open_capture(path)?, sink)?;
    if let Some(n) = scanned.incomplete_last {
        crate::errln!(
            "pgdbg: {name}: the last line (line {n}) is incomplete (a writer was killed?): ignored"
        );
    }
    if let Some(first) = scanned.first_unreadable {
        let n = scanned.unreadable;
        crate::errln!(
            "pgdbg: {name}: {n} event{} with fields of other types than pgdbg writes (first at line {first}) counted but left out of the tables",
            if n == 1 { "" } else { "s" }
        );
    }
    if scanned.events == 0 {
        bail!(
            "capture {name} is empty: no events (record some with: pgdbg attach PID --capture {name})"
        );
    }
    Ok(scanned)
}

/// Read and parse a whole capture file into memory (every event kept:
/// `run` streams instead).
pub fn load(path: &std::path::Path) -> Result<Vec<Event>> {
    let mut events = Vec::new();
    read(path, |e| events.push(e))?;
    Ok(events)
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
            crate::errln!(
                "pgdbg: wrote {}: flame graph of {} distinct {} stacks from {} {} events",
                out.display(),
                folded.lines.len(),
                folded.kind.name(),
                folded.events,
                folded.kind.event()
            );
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

fn to_json(r: Report) -> Value {
    serde_json::to_value(r).expect("report serializes")
}
