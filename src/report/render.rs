//! The report as text (aligned tables) or JSON.

use super::*;

/// A fixed-width table: columns separated by two spaces, numbers right
/// aligned, no trailing blanks.
pub(super) struct Table {
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

pub(super) fn cost_range(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo == hi => fmt_cost(lo),
        (Some(lo), Some(hi)) => format!("{}..{}", fmt_cost(lo), fmt_cost(hi)),
        _ => "-".into(),
    }
}

pub(super) fn opt_num(x: Option<u64>) -> String {
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
    if !h.namespace_pids.is_empty() {
        let each: Vec<String> = h
            .namespace_pids
            .iter()
            .map(|n| format!("{} (PID {} in its namespace)", n.pid, n.ns_pid))
            .collect();
        out.push_str(&format!(
            "Backends in another PID namespace: {}\n",
            each.join(", ")
        ));
    }

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
    if !r.waits_by_statement.is_empty() {
        let mut cols = vec![
            ("query", false),
            ("wait_event_type", false),
            ("wait_event", false),
        ];
        cols.extend(Durations::HEADERS);
        let mut t = Table::new(&cols);
        for w in &r.waits_by_statement {
            let mut row = vec![
                w.query.clone(),
                w.wait_event_type.clone(),
                w.wait_event.clone(),
            ];
            row.extend(w.d.cells());
            t.row(row);
        }
        sections.push(("Waits per statement", t));
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
    if !r.wait_samples_by_statement.is_empty() {
        let mut t = Table::new(&[
            ("statement", false),
            ("query_id", true),
            ("wait_event_type", false),
            ("wait_event", false),
            ("samples", true),
            ("share %", true),
        ]);
        for s in &r.wait_samples_by_statement {
            t.row(vec![
                s.statement.clone(),
                s.query_id.map(|q| q.to_string()).unwrap_or_default(),
                s.wait_event_type.clone(),
                s.wait_event.clone(),
                s.samples.to_string(),
                format!("{:.1}", s.share_pct),
            ]);
        }
        sections.push(("Wait samples per statement", t));
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
    if !r.latency.is_empty() {
        let mut t = Table::new(&[
            ("function", false),
            ("calls", true),
            ("total ms", true),
            ("avg ms", true),
            ("p50 ms", true),
            ("p99 ms", true),
            ("max ms", true),
            ("no return", true),
            ("backends", true),
        ]);
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |m| format!("{m:.3}"));
        for l in &r.latency {
            t.row(vec![
                l.function.clone(),
                l.calls.to_string(),
                ms(Some(l.total_ms)),
                ms(Some(l.avg_ms)),
                ms(l.p50_ms),
                ms(l.p99_ms),
                ms(Some(l.max_ms)),
                l.no_return.to_string(),
                l.backends.to_string(),
            ]);
        }
        sections.push(("Function latency", t));
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
    if !r.progress.is_empty() {
        let mut t = Table::new(&[
            ("backend", true),
            ("reports", true),
            ("elapsed", true),
            ("plan node", false),
            ("rows so far", true),
            ("loops", true),
            ("blocks", true),
        ]);
        let num = |x: Option<f64>| x.map(|v| format!("{v:.0}")).unwrap_or_default();
        for p in &r.progress {
            for (i, n) in p.nodes.iter().enumerate() {
                let first = i == 0;
                t.row(vec![
                    if first {
                        match p.ns_pid {
                            Some(n) => format!("{} (PID {n})", p.backend),
                            None => p.backend.to_string(),
                        }
                    } else {
                        String::new()
                    },
                    if first {
                        p.reports.to_string()
                    } else {
                        String::new()
                    },
                    match (first, p.elapsed_s) {
                        (true, Some(e)) => format!("{e:.1} s"),
                        _ => String::new(),
                    },
                    n.node.clone(),
                    num(n.rows),
                    num(n.loops),
                    match (n.blocks, n.blocks_total) {
                        (Some(d), Some(t)) => format!("{d} of {t}"),
                        _ => String::new(),
                    },
                ]);
            }
        }
        sections.push((
            "Statement progress (plan --progress: the last report of each backend)",
            t,
        ));
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

pub(super) fn to_json(r: Report) -> Value {
    serde_json::to_value(r).expect("report serializes")
}
