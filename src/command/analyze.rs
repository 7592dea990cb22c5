//! `plan --next --analyze ...`: the options of EXPLAIN ANALYZE for another
//! session's next statement (the `plan` entry hands them over here).

use super::args::parse_limits;
use crate::postgres::analyze::{AnalyzeOpts, parse_condition};
use anyhow::{Result, bail};

/// `plan`'s line, parsed: one of its three forms.
#[derive(Debug, PartialEq)]
pub enum PlanArgs {
    /// `plan [--next] [--format F] [--verbose] [--costs off]`
    Plan {
        next: bool,
        format: String,
        verbose: bool,
        costs: bool,
    },
    /// `plan --next --analyze ...`: EXPLAIN ANALYZE of the next statement(s)
    Analyze(AnalyzeOpts),
    /// `plan --progress [--every D] [--for D]`: the running statement, node by node
    Progress {
        every: std::time::Duration,
        duration: Option<std::time::Duration>,
    },
}

/// Whether a `plan` line asks for the analyzing form.
pub fn wants_analyze(rest: &str) -> bool {
    let before_if = rest.split(" --if").next().unwrap_or(rest);
    before_if.split_whitespace().any(|w| w == "--analyze")
}

/// Whether a `plan` line asks for `--progress`.
pub fn wants_progress(rest: &str) -> bool {
    rest.split_whitespace().any(|w| w == "--progress")
}

/// `plan --progress [--every D] [--for D]`
pub fn parse_plan_progress(rest: &str) -> Result<PlanArgs> {
    let mut every = std::time::Duration::from_secs(1);
    let mut limits: Vec<&str> = Vec::new();
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--progress" => {}
            "--every" => {
                let v = it.next().unwrap_or("");
                every = super::parse_duration(v)?;
                if every < std::time::Duration::from_millis(10) {
                    bail!(
                        "plan --progress: --every takes at least 10ms, not '{v}'",
                        v = crate::shown::shown(v)
                    );
                }
            }
            "--for" => {
                limits.push(w);
                limits.push(it.next().unwrap_or(""));
            }
            other => bail!(
                "plan --progress: unknown option '{other}' (use --every D, --for D; it watches the running statement)"
            ),
        }
    }
    let (duration, _) = parse_limits(&limits.join(" "), "plan --progress")?;
    Ok(PlanArgs::Progress { every, duration })
}

/// `plan --next --analyze [--buffers] [--wal] [--timing off] [--format F]
/// [--verbose] [--costs off] [--nested] [--count N] [--for D] [--if EXPR]`
pub fn parse_plan_analyze(rest: &str) -> Result<PlanArgs> {
    // --if takes the rest of the line (an expression with spaces)
    let (opts_text, cond_text) = match rest.find("--if") {
        Some(i) => (&rest[..i], Some(&rest[i + 4..])),
        None => (rest, None),
    };
    let mut o = AnalyzeOpts::default();
    let mut next = false;
    let mut limits: Vec<&str> = Vec::new();
    let mut it = opts_text.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--next" => next = true,
            "--analyze" => {}
            "--verbose" => o.verbose = true,
            "--nested" => o.nested = true,
            "--buffers" => o.buffers = true,
            "--wal" => o.wal = true,
            "--format" => {
                o.format = it.next().unwrap_or("").to_lowercase();
                if !["text", "json", "yaml", "xml"].contains(&o.format.as_str()) {
                    bail!("plan --format takes text, json, yaml or xml");
                }
            }
            "--costs" | "--timing" => {
                let v = match it.next() {
                    Some("off") | Some("false") => false,
                    Some("on") | Some("true") => true,
                    _ => bail!("plan {w} takes on or off"),
                };
                if w == "--costs" {
                    o.costs = v;
                } else {
                    o.timing = v;
                }
            }
            "--for" | "--count" => {
                limits.push(w);
                limits.push(it.next().unwrap_or(""));
            }
            other => bail!(
                "plan --analyze: unknown option '{other}' (use --buffers, --wal, --timing off, --format F, --verbose, --costs off, --nested, --count N, --for D, --if EXPR)"
            ),
        }
    }
    if !next {
        bail!(
            "plan --analyze measures a statement from its start: use plan --next --analyze (it waits for the backend's next statement)"
        );
    }
    let (duration, count) = parse_limits(&limits.join(" "), "plan --analyze")?;
    o.duration = duration;
    o.count = count.unwrap_or(1);
    if let Some(c) = cond_text {
        o.cond = parse_condition(c)?;
    }
    Ok(PlanArgs::Analyze(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyze_options() {
        let PlanArgs::Analyze(o) =
            parse_plan_analyze("--next --analyze --buffers --timing off --format json").unwrap()
        else {
            panic!()
        };
        assert!(o.buffers && !o.timing && !o.wal && o.format == "json" && o.count == 1);
        assert!(!o.nested);
        let PlanArgs::Analyze(o) = parse_plan_analyze("--next --analyze --nested").unwrap() else {
            panic!()
        };
        assert!(o.nested);
        let PlanArgs::Analyze(o) =
            parse_plan_analyze("--next --analyze --count 3 --if 'duration > 20ms'").unwrap()
        else {
            panic!()
        };
        assert_eq!(o.count, 3);
        assert_eq!(o.cond.len(), 1);
        assert!(parse_plan_analyze("--analyze").is_err());
        assert!(parse_plan_analyze("--next --analyze --timing maybe").is_err());
        assert!(parse_plan_analyze("--next --analyze --if").is_err());
        assert!(wants_analyze("--next --analyze"));
        assert_eq!(
            parse_plan_progress("--progress --every 250ms --for 3s").unwrap(),
            PlanArgs::Progress {
                every: std::time::Duration::from_millis(250),
                duration: Some(std::time::Duration::from_secs(3))
            }
        );
        assert!(parse_plan_progress("--progress --every 1ms").is_err());
        assert!(parse_plan_progress("--progress --next").is_err());
        assert!(!wants_analyze("--next --if x --analyze"));
    }
}
