//! From events to the report's tables: one pass over the events
//! (`Aggregator`), accumulating per statement, wait event and probe.

use super::*;

pub(super) fn min_max(acc: &mut Option<(f64, f64)>, x: Option<f64>) {
    if let Some(x) = x {
        *acc = Some(match *acc {
            None => (x, x),
            Some((lo, hi)) => (lo.min(x), hi.max(x)),
        });
    }
}

pub(super) fn durations(mut ns: Vec<u64>) -> Durations {
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
/// A sample's wait event as the report names it: a sample with no wait
/// event is on a CPU (or between waits).
fn sample_key(p: &crate::capture::events::WaitSample) -> (String, String) {
    if p.info == 0 && p.wait_event.is_none() {
        return ("(on CPU)".into(), String::new());
    }
    wait_key(&p.wait_event_type, &p.wait_event, &p.unresolved)
}

/// Rows by statement (most time first), then wait event (most first).
fn statement_waits(m: HashMap<(String, String, String), Vec<u64>>) -> Vec<StatementWaitRow> {
    let mut per: HashMap<String, u64> = HashMap::new();
    for ((q, _, _), ns) in &m {
        *per.entry(q.clone()).or_default() += ns.iter().sum::<u64>();
    }
    let mut rows: Vec<(u64, StatementWaitRow)> = m
        .into_iter()
        .map(|((q, t, e), ns)| {
            (
                per[&q],
                StatementWaitRow {
                    query: if q.is_empty() {
                        // no executor start seen before the wait
                        "(none seen: outside the executor, or begun before tracing)".into()
                    } else {
                        q
                    },
                    wait_event_type: t,
                    wait_event: e,
                    d: durations(ns),
                },
            )
        })
        .collect();
    rows.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.query.cmp(&b.1.query))
            .then_with(|| b.1.d.total_ms.total_cmp(&a.1.d.total_ms))
            .then_with(|| a.1.wait_event.cmp(&b.1.wait_event))
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

/// A statement (its text, its query id) and a wait event (type, name).
type StatementKey = ((String, Option<i64>), String, String);

/// Rows by statement (most samples first), then wait event (most first);
/// shares of all the samples split by statement.
fn statement_samples(m: HashMap<StatementKey, u64>) -> Vec<StatementSampleRow> {
    let total: u64 = m.values().sum();
    let mut per: HashMap<(String, Option<i64>), u64> = HashMap::new();
    for ((s, _, _), n) in &m {
        *per.entry(s.clone()).or_default() += n;
    }
    let mut rows: Vec<(u64, StatementSampleRow)> = m
        .into_iter()
        .map(|(((s, qid), t, e), n)| {
            (
                per[&(s.clone(), qid)],
                StatementSampleRow {
                    statement: s,
                    query_id: qid,
                    wait_event_type: t,
                    wait_event: e,
                    samples: n,
                    share_pct: n as f64 * 100.0 / total.max(1) as f64,
                },
            )
        })
        .collect();
    rows.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.statement.cmp(&b.1.statement))
            .then_with(|| b.1.samples.cmp(&a.1.samples))
            .then_with(|| a.1.wait_event.cmp(&b.1.wait_event))
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

pub(super) fn wait_key(
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
pub(super) fn arg_value_text(v: &Value) -> String {
    v.to_string()
}

/// Order of values with equal counts: numbers by value, then the rest
/// by their text.
pub(super) fn cmp_values(a: &str, b: &str) -> std::cmp::Ordering {
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
pub(super) struct PlanAcc {
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
pub(super) struct ProbeAcc {
    calls: u64,
    phases: Option<[u64; 3]>,
    pids: BTreeSet<i64>,
}

/// Accumulated `latency` events of one function.
#[derive(Default)]
pub(super) struct LatencyAcc {
    calls: u64,
    total_ns: u64,
    max_ns: u64,
    no_return: u64,
    /// (p50, p99) of the last event
    pcts: (u64, u64),
    runs: usize,
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
    /// Host PID -> PID in a container's namespace.
    ns_pids: BTreeMap<i64, i64>,
    /// (first, last) timestamp.
    span: Option<(f64, f64)>,
    exited: usize,
    plans: HashMap<(String, String), PlanAcc>,
    last_choice: HashMap<(i64, String, String), String>,
    /// Durations (ns) per wait event and per statement.
    waits: HashMap<(String, String), Vec<u64>>,
    stmts: HashMap<String, Vec<u64>>,
    /// Durations (ns) per statement and wait event (waits traced with
    /// their statement; "" outside the executor).
    stmt_waits: HashMap<(String, String, String), Vec<u64>>,
    /// Whether any wait carried its statement (statements were traced).
    waits_have_statements: bool,
    samples: HashMap<(String, String), u64>,
    /// Samples per statement (text, query id) and wait event (`waits
    /// sample --by-statement`).
    stmt_samples: HashMap<StatementKey, u64>,
    /// The first text seen of each query id.
    qid_text: HashMap<i64, String>,
    /// (source rank: count, trace, break; function) -> calls.
    probes: HashMap<(u8, String), ProbeAcc>,
    args: BTreeMap<(String, String), HashMap<String, u64>>,
    latency: BTreeMap<String, LatencyAcc>,
    /// `plan --progress` per backend: reports, the last one.
    progress: BTreeMap<i64, ProgressRow>,
}

impl Aggregator {
    pub fn new() -> Aggregator {
        Aggregator::default()
    }

    /// Count one event.
    pub fn add(&mut self, e: &Event) {
        self.events += 1;
        self.pids.insert(e.pid);
        if let Some(n) = e.ns_pid {
            self.ns_pids.insert(e.pid, n);
        }
        self.span = Some(match self.span {
            None => (e.ts, e.ts),
            Some((lo, hi)) => (lo.min(e.ts), hi.max(e.ts)),
        });
        match &e.event {
            CaptureEvent::Exit { .. } => self.exited += 1,
            CaptureEvent::PlanChoice {
                statement,
                query,
                query_start,
                choice,
                generic_cost,
                avg_custom_cost,
                reason,
                ..
            } => {
                let stmt = statement.clone().unwrap_or_else(|| "-".into());
                let key = (
                    stmt,
                    query
                        .as_deref()
                        .map(shorten_query)
                        // a text freed before it was read: its start, as
                        // copied at the call
                        .or_else(|| {
                            query_start.as_deref().map(|q| {
                                let s = shorten_query(q);
                                if s.ends_with("...") { s } else { s + "..." }
                            })
                        })
                        .unwrap_or_else(|| "(text not available)".into()),
                );
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
                query,
                ..
            } => {
                let key = wait_key(wait_event_type, wait_event, unresolved);
                let q = query.as_deref().map(shorten_query).unwrap_or_default();
                self.waits_have_statements |= query.is_some();
                self.stmt_waits
                    .entry((q, key.0.clone(), key.1.clone()))
                    .or_default()
                    .push(*duration_ns);
                self.waits.entry(key).or_default().push(*duration_ns);
            }
            CaptureEvent::Statement { duration_ns, query } => {
                self.stmts
                    .entry(shorten_query(query))
                    .or_default()
                    .push(*duration_ns);
            }
            CaptureEvent::WaitSamples {
                profile,
                by_statement,
                ..
            } => {
                for p in profile {
                    *self.samples.entry(sample_key(p)).or_default() += p.samples;
                }
                for st in by_statement {
                    // the text cut to the report's width, the query id
                    // apart; one query id is one statement, named by the
                    // first text seen
                    let mut name = shorten_query(st.query.as_deref().unwrap_or(&st.label));
                    if let Some(q) = st.query_id {
                        name = self.qid_text.entry(q).or_insert(name).clone();
                    }
                    for p in &st.profile {
                        let (t, e) = sample_key(p);
                        *self
                            .stmt_samples
                            .entry(((name.clone(), st.query_id), t, e))
                            .or_default() += p.samples;
                    }
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
            CaptureEvent::Latency {
                calls,
                function,
                max_ns,
                no_return,
                p50_ns,
                p99_ns,
                total_ns,
                ..
            } => {
                let acc = self.latency.entry(function.clone()).or_default();
                acc.calls += calls;
                acc.total_ns += total_ns;
                acc.max_ns = acc.max_ns.max(*max_ns);
                acc.no_return += no_return;
                acc.pcts = (*p50_ns, *p99_ns);
                acc.runs += 1;
                acc.pids.insert(e.pid);
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
            CaptureEvent::Progress {
                elapsed_s,
                executing,
                nodes,
            } => {
                let p = self.progress.entry(e.pid).or_insert_with(|| ProgressRow {
                    backend: e.pid,
                    ns_pid: e.ns_pid,
                    reports: 0,
                    elapsed_s: None,
                    executing: None,
                    nodes: Vec::new(),
                });
                p.reports += 1;
                p.elapsed_s = *elapsed_s;
                p.executing = executing.clone();
                p.nodes = nodes.clone();
            }
            CaptureEvent::Hits {
                function, count, ..
            } => {
                let f = function.clone().unwrap_or_else(|| "?".into());
                let acc = self.probes.entry((2, f)).or_default();
                acc.calls += count;
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
            namespace_pids: self
                .ns_pids
                .iter()
                .map(|(&pid, &ns_pid)| NsPid { pid, ns_pid })
                .collect(),
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

        let waits_by_statement = match self.waits_have_statements {
            true => statement_waits(self.stmt_waits),
            false => Vec::new(),
        };
        let wait_samples_by_statement = statement_samples(self.stmt_samples);

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
            waits_by_statement,
            wait_samples,
            wait_samples_by_statement,
            probe_counts: probe_rows.into_iter().map(|(_, r)| r).collect(),
            traced_args,
            latency: self
                .latency
                .into_iter()
                .map(|(function, a)| {
                    let once = a.runs == 1;
                    LatencyRow {
                        function,
                        calls: a.calls,
                        total_ms: ns_to_ms(a.total_ns),
                        avg_ms: if a.calls > 0 {
                            ns_to_ms(a.total_ns) / a.calls as f64
                        } else {
                            0.0
                        },
                        p50_ms: once.then(|| ns_to_ms(a.pcts.0)),
                        p99_ms: once.then(|| ns_to_ms(a.pcts.1)),
                        max_ms: ns_to_ms(a.max_ns),
                        no_return: a.no_return,
                        runs: a.runs,
                        backends: a.pids.len(),
                    }
                })
                .collect(),
            progress: self.progress.into_values().collect(),
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
