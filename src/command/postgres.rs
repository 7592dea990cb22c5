//! PostgreSQL's own questions: `plan`, `plancache`, `wait`, `waits sample`,
//! `waits trace`.

use super::analyze::PlanArgs;
use super::args::{parse_limits, stacks_arg};
use super::check::{no_check, run_args};
use super::{Command, Entry, Invocation, Needs, PlanCacheMode};
use crate::postgres::backend::Outcome;
use crate::postgres::commands as pg;
use anyhow::{Result, anyhow, bail};
use std::time::Duration;

pub static ENTRIES: &[&Entry] = &[
    &PLAN,
    &PPRINT,
    &PLANCACHE,
    &WAIT,
    &WAITS,
    &WAITS_SAMPLE,
    &WAITS_TRACE,
];

pub static PLAN: Entry = Entry {
    name: "plan",
    aliases: &[],
    usage: "plan [--next [--analyze]] [--progress] [--format text|json|yaml|xml] [--verbose] [--costs off]",
    summary: "EXPLAIN the query the backend runs, computed inside the backend",
    help: "The plan of the running query, by the backend's own ExplainPrintPlan in a private \
           memory context; --next waits for the next query to start. Inside a DO block or a \
           procedure, the nested statement that runs. --format, --verbose and --costs are \
           EXPLAIN's options.\n\n\
           Refused like call while the transaction is aborted, on processes that never run \
           queries (the checkpointer, ...) and on parallel workers (it names the leader to \
           attach to).\n\n\
           plan --next --analyze [--buffers] [--wal] [--timing off] [--nested] [--count N] \
           [--for D] [--if EXPR]: EXPLAIN ANALYZE of the next statement, with nothing loaded \
           in the server: the first statement whose executor starts (for select f(), the call \
           itself); with --nested, the first one started inside another statement (the SQL \
           of a PL/pgSQL function or DO block, in the order the function runs it). At the executor's start pgdbg sets the statement's own \
           QueryDesc.instrument_options as EXPLAIN ANALYZE would (--buffers, --wal, --timing \
           off are EXPLAIN's options) and puts the field back once the executor has read it; \
           the statement runs at full speed; at the executor's end, before anything is freed, \
           the backend's ExplainPrintPlan prints actual rows, loops, times (parallel workers \
           included). Execution Time is measured by pgdbg from the executor's start to its end. \
           --count N statements (default 1), --for D, --if 'duration > 200ms' (shown only when \
           slower; also queryid == N, joined by &&): an auto_explain for one backend. \
           Ended early (Ctrl-C, a breakpoint, --for) while the executor starts, the field is \
           put back then.\n\n\
           plan --progress [--every D] [--for D]: the running statement's plan, every --every (default 1s) until it \
           ends, --for D or Ctrl-C, each node with its rows so far and loops, sequential \
           scans with blocks scanned of the relation's blocks, the node function executing \
           now and the elapsed time. A statement run without instrumentation gets row \
           counting installed (rows only, in the query's own memory: \"counted since\"); \
           parallel workers' own nodes are not read.",
    examples: &[
        "plan",
        "plan --next --format json --costs off",
        "plan --next --analyze --buffers",
        "plan --next --analyze --nested --count 3",
        "plan --next --analyze --count 10 --if duration > 200ms",
        "plan --progress --every 2s --for 1m",
    ],
    parse: |rest| parse_plan(rest).map(|_| Invocation::command(&PLAN, rest)),
    needs: Needs::Varies(plan_needs),
    check: no_check,
    run: Some(|b, rest| match parse_plan(rest)? {
        PlanArgs::Plan {
            next,
            format,
            verbose,
            costs,
        } => {
            let opts = crate::postgres::explain::ExplainOpts {
                format,
                verbose,
                costs,
            };
            pg::plan(b, next, &opts)
        }
        PlanArgs::Analyze(o) => pg::plan_analyze(b, &o),
        PlanArgs::Progress { every, duration } => pg::plan_progress(b, every, duration),
    }),
};

pub static PPRINT: Entry = Entry {
    name: "pprint",
    aliases: &[],
    usage: "pprint [--depth N] [--width N] EXPR",
    summary: "print a PostgreSQL node tree (Node *, Plan *, List *...) as nodeToString",
    help: "EXPR is a C expression giving a pointer to a node (queryDesc->plannedstmt, parse, \
           (Node *) plan). Each node's NodeTag names its struct (T_SeqScan is struct SeqScan, \
           from the debug info), whose fields are printed by their DWARF types as PostgreSQL's \
           nodeToString writes them: {SEQSCAN :startup_cost 0 ... :targetlist (...)}, the \
           superclass's fields (Plan's in a SeqScan) first, lists as ( ... ), integer and OID \
           lists as (i 1 2) and (o 16384), Bitmapsets as (b 1 3), strings quoted, enums by \
           name, NULL as <>, a Const's value by reference with its text when inline. A pointer to anything that is not a node is shown as its address.\n\n\
           Only memory is read: nothing runs in the backend (unlike calling pprint() there, \
           which allocates and writes to the server log), so it is safe anywhere, and costs \
           no stop unless EXPR names a local or a register. --depth N (default 32) shows \
           nodes nested deeper as {NAME ...}; --width N (default 100) shows the first N \
           elements of a list. A pointer back to a node above is shown as a cycle.\n\n\
           In a script, EXPR is type-checked before attaching.",
    examples: &[
        "pprint queryDesc->plannedstmt",
        "pprint --depth 3 parse",
        "pprint --width 5 queryDesc->plannedstmt->rtable",
    ],
    parse: |rest| parse_pprint(rest).map(|_| Invocation::command(&PPRINT, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| ctx.typecheck(&parse_pprint(run_args("pprint", cmd)?)?.1),
    run: Some(|b, rest| {
        let (lim, expr) = parse_pprint(rest)?;
        Ok(Outcome::shows(crate::postgres::nodes::pprint(
            b, &expr, lim,
        )?))
    }),
};

/// `pprint [--depth N] [--width N] EXPR`: the limits and the expression.
pub fn parse_pprint(rest: &str) -> Result<(crate::postgres::nodes::Limits, String)> {
    let mut lim = crate::postgres::nodes::Limits::default();
    let mut r = rest.trim();
    while let Some(o) = r.strip_prefix("--") {
        let (opt, tail) = o.split_at(o.find(char::is_whitespace).unwrap_or(o.len()));
        let tail = tail.trim_start();
        let (val, after) = tail.split_at(tail.find(char::is_whitespace).unwrap_or(tail.len()));
        let n: usize = match val.parse() {
            Ok(n) if n > 0 => n,
            _ => bail!(
                "pprint --{opt} needs a positive number, e.g. pprint --{opt} 5 parse",
                opt = crate::shown::shown(opt)
            ),
        };
        match opt {
            "depth" => lim.depth = n,
            "width" => lim.width = n,
            _ => bail!(
                "pprint: unknown option '--{opt}' (use --depth N or --width N)",
                opt = crate::shown::shown(opt)
            ),
        }
        r = after.trim_start();
    }
    if r.is_empty() {
        bail!("pprint needs an expression, e.g. pprint queryDesc->plannedstmt");
    }
    Ok((lim, r.to_string()))
}

pub fn parse_plan(rest: &str) -> Result<PlanArgs> {
    if super::analyze::wants_progress(rest) {
        return super::analyze::parse_plan_progress(rest);
    }
    if super::analyze::wants_analyze(rest) {
        return super::analyze::parse_plan_analyze(rest);
    }
    let (mut next, mut format, mut verbose, mut costs) = (false, "text".to_string(), false, true);
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--next" => next = true,
            "--verbose" => verbose = true,
            "--format" => {
                format = it.next().unwrap_or("").to_lowercase();
                if !["text", "json", "yaml", "xml"].contains(&format.as_str()) {
                    bail!("plan --format takes text, json, yaml or xml");
                }
            }
            "--costs" => match it.next() {
                Some("off") | Some("false") => costs = false,
                Some("on") | Some("true") => costs = true,
                _ => bail!("plan --costs takes on or off"),
            },
            other => bail!(
                "plan: unknown option '{other}' (use --next, --format F, --verbose, --costs off)"
            ),
        }
    }
    Ok(PlanArgs::Plan {
        next,
        format,
        verbose,
        costs,
    })
}

/// `plan`: a stop for the plan of the running query; with --next, --analyze
/// or --progress the backend runs while pgdbg waits for the statement or
/// reads its progress.
fn plan_needs(cmd: &Command) -> Needs {
    match run_args("plan", cmd).and_then(parse_plan) {
        Ok(PlanArgs::Plan { next: false, .. }) => Needs::Stop,
        _ => Needs::Runs,
    }
}

pub static PLANCACHE: Entry = Entry {
    name: "plancache",
    aliases: &[],
    usage: "plancache [--for DURATION] [--count N] [--stops | --fast=stop]",
    summary: "report every custom/generic plan choice with its costs and reason",
    help: "Each decision of GetCachedPlan: custom or generic plan, the costs it compared and \
           why, until Ctrl-C, --for 10s or --count N decisions.\n\n\
           By default (PostgreSQL 14+) the backend is never stopped: a jump at GetCachedPlan's \
           entry leads to an in-process recorder that copies the plansource's counters and \
           costs into a ring buffer pgdbg reads 50 to 200 times a second; the choice is the \
           counter that moved (no planning charge). Where the recorder cannot be placed, one \
           ptrace stop per decision instead; on PostgreSQL 13 (no num_generic_plans) two; \
           either is said in one line with the reason. --fast is the old name of this mode.\n\n\
           --stops (or --ptrace): two ptrace stops per decision, the exact choice from \
           GetCachedPlan's return value and the planning charge of each custom plan. \
           --fast=stop: one stop per decision.",
    examples: &[
        "plancache --for 60s",
        "plancache --count 100",
        "plancache --stops --for 10s",
    ],
    parse: |rest| parse_plancache(rest).map(|_| Invocation::command(&PLANCACHE, rest)),
    needs: Needs::Runs,
    check: no_check,
    run: Some(|b, rest| {
        let (duration, count, mode) = parse_plancache(rest)?;
        pg::plancache(b, duration, count, mode)
    }),
};

/// `plancache`'s line: its limits (--for, --count) and its mode.
pub fn parse_plancache(rest: &str) -> Result<(Option<Duration>, Option<u64>, PlanCacheMode)> {
    {
        let mut mode = PlanCacheMode::InProcess;
        let mut others: Vec<&str> = Vec::new();
        for w in rest.split_whitespace() {
            match w {
                "--fast" | "--fast=ring" => mode = PlanCacheMode::InProcess,
                "--fast=stop" => mode = PlanCacheMode::OneStop,
                "--stops" | "--ptrace" => mode = PlanCacheMode::Stops,
                w if w.starts_with("--fast=") => bail!(
                    "plancache: bad {w} (the in-process recorder is the default; --fast=stop for one stop per decision, --stops for two)"
                ),
                w => others.push(w),
            }
        }
        let (duration, count) = parse_limits(&others.join(" "), "plancache")?;
        Ok((duration, count, mode))
    }
}

pub static WAIT: Entry = Entry {
    name: "wait",
    aliases: &[],
    usage: "wait",
    summary: "what the backend waits on now, as pg_stat_activity names it",
    help: "The backend's wait event word, read without stopping it and named by the backend \
           itself (Client: ClientRead, Lock: relation, LWLock: LockManager, ...).",
    examples: &["wait"],
    parse: |rest| {
        if !rest.is_empty() {
            bail!("wait takes no arguments (did you mean 'waits sample'?)");
        }
        Ok(Invocation::command(&WAIT, rest))
    },
    needs: Needs::Memory,
    check: no_check,
    run: Some(|b, _| Ok(Outcome::shows(crate::postgres::commands::wait_now(b)?))),
};

/// `waits` alone: only its subcommands are commands.
pub static WAITS: Entry = Entry {
    name: "waits",
    aliases: &[],
    usage: "waits sample [--hz N] [--for D] [--by-statement]\n     \
            | waits trace [--for D] [--stacks N] [--quiet] [--ptrace]",
    summary: "the backend's wait events over time: waits sample, waits trace",
    help: "'waits sample' samples the wait event without stopping the backend; 'waits trace' \
           records every wait with its duration.",
    examples: &[],
    parse: |_| bail!("waits needs a subcommand: waits sample [--hz N] [--for DURATION]"),
    needs: Needs::Nothing,
    check: no_check,
    run: None,
};

pub static WAITS_SAMPLE: Entry = Entry {
    name: "waits sample",
    aliases: &[],
    usage: "waits sample [--hz N] [--for DURATION] [--by-statement]",
    summary: "a wait-event profile by sampling, without stopping the backend",
    help: "The backend runs; its wait event word is read N times a second (--hz, 1 to 20000, \
           default 100) without stopping it, until Ctrl-C or --for D. Prints the profile: each \
           wait event's share of the samples. --by-statement: also each statement's share and \
           its wait events (the statement that ran at each sample's time, read from the \
           backend's pg_stat_activity entry every millisecond: its query id, else its text; \
           idle states apart; \"unknown\" where the state changed between two reads and more \
           happened than that change).",
    examples: &[
        "waits sample --hz 1000 --for 10s",
        "waits sample --for 30s --by-statement",
    ],
    parse: |rest| parse_waits_sample(rest).map(|_| Invocation::command(&WAITS_SAMPLE, rest)),
    needs: Needs::Runs,
    check: no_check,
    run: Some(|b, rest| {
        let (hz, duration, by_statement) = parse_waits_sample(rest)?;
        pg::waits_sample(b, hz, duration, by_statement)
    }),
};

/// `waits sample`'s line: the rate, the duration and `--by-statement`.
pub fn parse_waits_sample(opts: &str) -> Result<(f64, Option<Duration>, bool)> {
    {
        let mut hz = 100.0;
        let mut by_statement = false;
        let mut others = Vec::new();
        let mut it = opts.split_whitespace();
        while let Some(w) = it.next() {
            if w == "--hz" {
                let v = it.next().unwrap_or("");
                hz = v
                    .parse::<f64>()
                    .ok()
                    .filter(|h| *h >= 1.0 && *h <= 20000.0)
                    .ok_or_else(|| {
                        anyhow!(
                            "waits sample: --hz takes a rate from 1 to 20000, not '{v}'",
                            v = crate::shown::shown(v)
                        )
                    })?;
            } else if w == "--by-statement" {
                by_statement = true;
            } else {
                others.push(w);
            }
        }
        let (duration, count) = parse_limits(&others.join(" "), "waits sample")?;
        if count.is_some() {
            bail!("waits sample takes --for DURATION, not --count");
        }
        Ok((hz, duration, by_statement))
    }
}

pub static WAITS_TRACE: Entry = Entry {
    name: "waits trace",
    aliases: &[],
    usage: "waits trace [--for DURATION] [--stacks N] [--quiet] [--ptrace] [--no-statements] [--uprobes]",
    summary: "every wait with its duration (and stack), by a hardware watchpoint",
    help: "A hardware watchpoint on the backend's wait event word: every wait with its \
           duration (--stacks N: and the innermost N frames, 0 to 64), statement times \
           (standard_ExecutorStart to standard_ExecutorEnd) and a summary per wait event and \
           per statement at the end; --quiet prints only the summary. Until Ctrl-C or --for D.\n\n\
           By default the watchpoint is a perf event the kernel owns (a write breakpoint with \
           a sample per store) and the statement times come from in-process recorders at \
           the executor's start and end (a jump to a few dozen instructions of pgdbg's in \
           pages mapped in the backend, which copy the QueryDesc's address and the first \
           256 bytes of its text into a ring there; read while the backend runs): the backend \
           is never stopped, the value of each store is decoded from the store instruction, and the \
           waits are reported when tracing ends; a backend that ends while traced has its \
           waits and statements reported up to its end, named (the names of every wait the \
           build can report are asked of the backend when tracing starts, once per build, \
           and kept in ~/.cache/pgdbg/waitnames). Where a recorder cannot go (one line says \
           why), or with --uprobes, kernel uprobes time the statements: each statement's \
           text is copied by the kernel at the executor's start (a uprobe defined in \
           tracefs, mounted on /sys/kernel/tracing when it is not; without it, pgdbg reads \
           the texts as they arrive, at more cost to the backend). Needs perf_event_open \
           (root, or CAP_PERFMON in a container); where the kernel refuses it, one line says \
           why and the ptrace mode runs instead.\n\n\
           --ptrace: a debug register set through ptrace and breakpoints for the statement \
           times, the backend stopped at each wait's start and end; waits are printed as \
           they end. (--perf, the perf event's old option, is accepted.)\n\n\
           --uprobes: statement times from kernel uprobes, as above.\n\n\
           --no-statements: no statement times, nothing placed at the executor's start and \
           end.",
    examples: &[
        "waits trace --for 10s --stacks 7",
        "waits trace --for 10s --quiet",
        "waits trace --ptrace --for 10s",
    ],
    parse: |rest| parse_waits_trace(rest).map(|_| Invocation::command(&WAITS_TRACE, rest)),
    needs: Needs::Runs,
    check: no_check,
    run: Some(|b, rest| {
        let WaitsTraceArgs {
            duration,
            stacks,
            quiet,
            ptrace,
            no_statements,
            uprobes,
        } = parse_waits_trace(rest)?;
        if ptrace {
            return pg::waits_trace(b, duration, stacks, quiet, !no_statements);
        }
        match pg::waits_trace_perf(b, duration, stacks, quiet, !no_statements, uprobes) {
            Err(e) if crate::perf::refused(&e).is_some() => {
                // under --cluster the executor carries the cluster's
                // uprobes, where the breakpoints timing statements would go
                let statements = !no_statements && crate::perf::feed::feed().is_none();
                b.say(&format!(
                    "{e:#}; tracing with a debug register and ptrace stops instead{}",
                    if statements || no_statements {
                        ""
                    } else {
                        " (statements not timed: the cluster's uprobes are at the executor)"
                    }
                ));
                pg::waits_trace(b, duration, stacks, quiet, statements)
            }
            r => r,
        }
    }),
};

/// A script of one `waits trace` line that times statements with perf
/// events (not `--ptrace`, not `--no-statements`): under `--cluster`, the
/// statements of every backend are marked by uprobes opened once for the
/// cluster (cluster_marks.rs).
pub fn waits_trace_only(script: &crate::command::lines::Script) -> bool {
    let [(_, _, cmd)] = script.as_slice() else {
        return false;
    };
    cmd.is(&WAITS_TRACE)
        && run_args("waits trace", cmd)
            .and_then(parse_waits_trace)
            .is_ok_and(|a| !a.ptrace && !a.no_statements)
}

/// `waits trace`'s line, parsed.
#[derive(Debug, PartialEq)]
pub struct WaitsTraceArgs {
    pub duration: Option<Duration>,
    pub stacks: usize,
    pub quiet: bool,
    /// `--ptrace`: a debug register and ptrace stops instead of the
    /// perf write-breakpoint event
    pub ptrace: bool,
    /// `--no-statements`: no statement times (no uprobes or breakpoints
    /// at the executor's start and end)
    pub no_statements: bool,
    /// `--uprobes`: statement times from kernel uprobes, not in-process
    /// recorders
    pub uprobes: bool,
}

pub fn parse_waits_trace(opts: &str) -> Result<WaitsTraceArgs> {
    let mut stacks = 0usize;
    let mut quiet = false;
    let mut ptrace = false;
    let mut no_statements = false;
    let mut uprobes = false;
    let mut others = Vec::new();
    let mut it = opts.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--stacks" => stacks = stacks_arg("waits trace", it.next())?,
            "--quiet" => quiet = true,
            "--ptrace" => ptrace = true,
            "--perf" => ptrace = false,
            "--no-statements" => no_statements = true,
            "--uprobes" => uprobes = true,
            other => others.push(other),
        }
    }
    let (duration, count) = parse_limits(&others.join(" "), "waits trace")?;
    if count.is_some() {
        bail!("waits trace takes --for DURATION, not --count");
    }
    Ok(WaitsTraceArgs {
        duration,
        stacks,
        quiet,
        ptrace,
        no_statements,
        uprobes,
    })
}
