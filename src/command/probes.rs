//! Probes that let the backend run and record calls: `trace`, `count`.

use super::Host;
use super::args::{parse_limits, stacks_arg};
use super::check::{run_args, short};
use super::{Entry, Invocation, Needs};
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};
use std::time::Duration;

pub static ENTRIES: &[&Entry] = &[&TRACE, &COUNT, &LATENCY];

pub static TRACE: Entry = Entry {
    name: "trace",
    aliases: &[],
    usage: "trace FUNC [ARGEXPR...] [--for D] [--count N] [--stacks N] [--quiet] [--perf]",
    summary: "record every call of FUNC with the values of ARGEXPRs at its entry",
    help: "The backend runs; each call of FUNC is recorded with the values of the ARGEXPRs \
           (expressions in FUNC's scope, one word each) at its entry, printed as a line and \
           written as a 'trace' capture event; the end lists each ARGEXPR's most frequent \
           values. --stacks N adds the innermost N frames (0 to 64) of each call, --quiet prints \
           only the summary. It ends at Ctrl-C, after --for D or after --count N calls.\n\n\
           --perf: each location is a kernel uprobe (a perf event of the uprobe PMU) whose \
           records carry the registers: the backend is never stopped for a call, and the calls \
           are printed when tracing ends. Each ARGEXPR must then be an argument of FUNC that a \
           register holds where FUNC is entered (integers, enums, pointers shown as addresses); \
           an expression, a struct, a string, an argument passed on the stack or --stacks needs \
           memory at the call, and is traced with ptrace stops instead, saying why.\n\n\
           In a script, FUNC must be in the binary and the ARGEXPRs are type-checked in it.",
    examples: &[
        "trace LockRelationOid relid lockmode --for 5s",
        "trace LockRelationOid relid lockmode --perf --for 5s",
    ],
    parse: |rest| parse_trace(rest).map(|_| Invocation::command(&TRACE, rest)),
    needs: Needs::Runs,
    check: |ctx, cmd| {
        let TraceArgs { function, args, .. } = parse_trace(run_args("trace", cmd)?)?;
        ctx.function_must_exist(&function)?;
        for a in &args {
            ctx.typecheck_in(Some(&function), a)
                .map_err(|e| anyhow!("trace argument '{}': {e:#}", short(a)))?;
        }
        Ok(())
    },
    run: Some(run_trace),
};

/// `trace`'s line, parsed.
#[derive(Debug, PartialEq)]
pub struct TraceArgs {
    pub function: String,
    pub args: Vec<String>,
    pub duration: Option<Duration>,
    pub count: Option<u64>,
    pub stacks: usize,
    pub quiet: bool,
    /// kernel uprobes with the argument registers instead of ptrace stops
    pub perf: bool,
}

fn run_trace(b: &mut dyn Host, rest: &str) -> Result<Outcome> {
    let a = parse_trace(rest)?;
    let run = if a.perf {
        crate::probes::trace_perf::trace_perf
    } else {
        crate::probes::trace
    };
    run(
        b,
        &a.function,
        &a.args,
        a.duration,
        a.count,
        a.stacks,
        a.quiet,
    )
}

pub fn parse_trace(rest: &str) -> Result<TraceArgs> {
    let mut words = Vec::new();
    let mut stacks = 0usize;
    let mut quiet = false;
    let mut perf = false;
    let mut limits = Vec::new();
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--stacks" => stacks = stacks_arg("trace", it.next())?,
            "--quiet" => quiet = true,
            "--perf" | "--uprobes" => perf = true,
            "--for" | "--count" => {
                limits.push(w.to_string());
                limits.push(it.next().unwrap_or("").to_string());
            }
            w if w.starts_with("--") => limits.push(w.to_string()),
            w => words.push(w.to_string()),
        }
    }
    let (duration, count) = parse_limits(&limits.join(" "), "trace")?;
    if words.is_empty() {
        bail!(
            "trace needs a function: trace FUNC [ARGEXPR...], e.g. trace LockRelationOid relid lockmode"
        );
    }
    let function = words.remove(0);
    Ok(TraceArgs {
        function,
        args: words,
        duration,
        count,
        stacks,
        quiet,
        perf,
    })
}

pub static COUNT: Entry = Entry {
    name: "count",
    aliases: &[],
    usage: "count FUNC... [--by-phase] [--uprobes|--ptrace] [--for D]",
    summary: "count calls of functions until Ctrl-C or --for, by phase with --by-phase",
    help: "The backend runs; the calls of each FUNC are counted until Ctrl-C or --for D, then \
           printed and written as 'count' capture events.\n\n\
           By default the counting is done inside the backend: a jump at the entry of each \
           copy of each FUNC leads to four instructions of pgdbg's (in a page it maps in the \
           backend) that add one to a counter there, then back. The backend is never stopped \
           and no kernel probe is used; pgdbg reads the counters while it runs and takes the \
           jumps out at the end. At most 16 entries at once. Where a FUNC has an inlined call \
           or an entry a jump cannot replace, one line says why and kernel uprobes count \
           instead.\n\n\
           --uprobes: a kernel uprobe counting event per location (perf_event_open on the \
           uprobe PMU), also no stop, removed by the kernel if pgdbg dies. Needs \
           perf_event_open (root, or CAP_PERFMON in a container); where the kernel refuses \
           it, one line says why and the calls are counted with ptrace stops instead. \
           --ptrace: a ptrace stop per call (an int3 breakpoint). (--perf, the uprobes' old \
           option, is accepted.)\n\n\
           --by-phase splits the counts into planning (inside standard_planner), execution \
           (inside standard_Executor*) and other: a ptrace stop per call; with --uprobes, \
           kernel uprobes on the counted functions and entry and return uprobes on the phase \
           functions, whose records carry the stack pointer: the same counts, no stop.\n\n\
           In a script, each FUNC must be in the binary.",
    examples: &[
        "count standard_ExecutorStart --for 10s",
        "count ReadBufferExtended --by-phase --for 10s",
        "count standard_ExecutorStart --uprobes --for 10s",
        "count standard_ExecutorStart --ptrace --for 10s",
        "count ReadBufferExtended --by-phase --uprobes --for 10s",
    ],
    parse: |rest| parse_count(rest).map(|_| Invocation::command(&COUNT, rest)),
    needs: Needs::Runs,
    check: |ctx, cmd| {
        for f in &parse_count(run_args("count", cmd)?)?.functions {
            ctx.function_must_exist(f)?;
        }
        Ok(())
    },
    run: Some(run_count),
};

/// `count`'s line, parsed.
#[derive(Debug, PartialEq)]
pub struct CountArgs {
    pub functions: Vec<String>,
    pub by_phase: bool,
    pub duration: Option<Duration>,
    /// `--ptrace`: a ptrace stop per call instead of kernel uprobes
    /// (also what `--by-phase` needs)
    pub ptrace: bool,
    /// `--uprobes` (or its old name `--perf`): kernel uprobes, not the
    /// in-process counters
    pub uprobes: bool,
}

fn run_count(b: &mut dyn Host, rest: &str) -> Result<Outcome> {
    let CountArgs {
        functions,
        by_phase,
        duration,
        ptrace,
        uprobes,
    } = parse_count(rest)?;
    // in-process counters (plain counts), kernel uprobes where they cannot
    // go, a ptrace stop per call where the kernel refuses those
    let fast = if ptrace {
        None
    } else {
        let r = if by_phase {
            crate::probes::phases_perf::count_by_phase_perf(b, &functions, duration)
        } else if uprobes {
            crate::probes::count_perf(b, &functions, duration)
        } else {
            match crate::probes::counters::count_in_process(b, &functions, duration) {
                Err(e) if crate::probes::counters::not_here(&e).is_some() => {
                    b.say(&format!("{e}; counting with kernel uprobes instead"));
                    crate::probes::count_perf(b, &functions, duration)
                }
                r => r,
            }
        };
        match r {
            Ok(r) => Some(r),
            Err(e) => match crate::perf::refused(&e) {
                Some(r) => {
                    b.say(&format!(
                        "{r}; counting with a ptrace stop per call instead"
                    ));
                    None
                }
                None => return Err(e),
            },
        }
    };
    match fast {
        Some(r) => Ok(r),
        None => crate::probes::count(b, &functions, by_phase, duration),
    }
}

/// A script that is one `count FUNC... [--for D]` line and nothing else
/// (no `--by-phase`, no `--ptrace`): its functions and limit.  Such a
/// script is what `attach --cluster` can serve with inherited uprobes.
pub fn count_only(
    script: &crate::command::lines::Script,
) -> Option<(Vec<String>, Option<Duration>)> {
    let [(_, _, cmd)] = script.as_slice() else {
        return None;
    };
    if !cmd.is(&COUNT) {
        return None;
    }
    let a = parse_count(run_args("count", cmd).ok()?).ok()?;
    (!a.by_phase && !a.ptrace).then_some((a.functions, a.duration))
}

pub fn parse_count(rest: &str) -> Result<CountArgs> {
    let mut functions = Vec::new();
    let mut by_phase = false;
    let mut perf = false;
    let mut ptrace = false;
    let mut limits = Vec::new();
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--by-phase" => by_phase = true,
            "--perf" | "--uprobes" => perf = true,
            "--ptrace" => ptrace = true,
            "--for" => {
                limits.push(w.to_string());
                limits.push(it.next().unwrap_or("").to_string());
            }
            w if w.starts_with("--") => limits.push(w.to_string()),
            w => functions.push(w.to_string()),
        }
    }
    let (duration, count) = parse_limits(&limits.join(" "), "count")?;
    if count.is_some() {
        bail!("count takes --for DURATION, not --count");
    }
    if functions.is_empty() {
        bail!(
            "count needs one or more functions: count FUNC... [--by-phase] [--uprobes|--ptrace] [--for D]"
        );
    }
    if perf && ptrace {
        bail!(
            "count: --uprobes (kernel uprobes) and --ptrace (a stop per call) exclude each other"
        );
    }
    Ok(CountArgs {
        functions,
        by_phase,
        duration,
        // by phase: ptrace stops unless --uprobes asks for the uprobes
        ptrace: ptrace || (by_phase && !perf),
        uprobes: perf,
    })
}

pub static LATENCY: Entry = Entry {
    name: "latency",
    aliases: &["funclatency"],
    usage: "latency FUNC... [--for D] [--json] [--perf]",
    summary: "time in functions, entry to return: calls, avg, p50, p99, max, histogram",
    help: "The backend runs, never stopped for a call: each FUNC gets a kernel uprobe at its \
           entry and a return probe (perf events of the uprobe PMU) whose records carry the time \
           and the stack pointer. Until Ctrl-C or --for D; then, per function: calls, total, \
           avg, p50, p99 and max time from entry to return, a log2 histogram of microseconds \
           (as bcc's funclatency draws it) and a 'latency' capture event; --json prints one \
           JSON document instead (the events' fields per function, the stops and lost records).\n\n\
           A return is paired with its own call by the stack pointer: recursive calls are each \
           timed from their entry to their return (inner calls included) and counted as nested; \
           calls left by an ERROR (longjmp: no return) are counted as 'no return' and not timed, \
           as are calls running when timing began or ended. Inlined copies of FUNC have no \
           return of their own and are not timed (said so).\n\n\
           --perf is accepted and is the only mode. Needs perf_event_open (root, or CAP_PERFMON \
           in a container); the kernel removes the probes if pgdbg dies.\n\n\
           In a script, each FUNC must be in the binary.",
    examples: &[
        "latency pg_sleep --for 10s",
        "latency LockRelationOid LWLockAcquire --for 5s --perf",
    ],
    parse: |rest| parse_latency(rest).map(|_| Invocation::command(&LATENCY, rest)),
    needs: Needs::Runs,
    check: |ctx, cmd| {
        for f in &parse_latency(run_args("latency", cmd)?)?.functions {
            ctx.function_must_exist(f)?;
        }
        Ok(())
    },
    run: Some(|b, rest| {
        let a = parse_latency(rest)?;
        crate::probes::latency::latency(b, &a.functions, a.duration, a.json)
    }),
};

/// `latency`'s line, parsed.
#[derive(Debug, PartialEq)]
pub struct LatencyArgs {
    pub functions: Vec<String>,
    pub duration: Option<Duration>,
    /// the summary as one JSON document
    pub json: bool,
}

pub fn parse_latency(rest: &str) -> Result<LatencyArgs> {
    let mut functions = Vec::new();
    let mut limits = Vec::new();
    let mut json = false;
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--perf" => {}
            "--json" => json = true,
            "--for" => {
                limits.push(w.to_string());
                limits.push(it.next().unwrap_or("").to_string());
            }
            w if w.starts_with("--") => limits.push(w.to_string()),
            w => functions.push(w.to_string()),
        }
    }
    let (duration, count) = parse_limits(&limits.join(" "), "latency")?;
    if count.is_some() {
        bail!("latency takes --for DURATION, not --count");
    }
    if functions.is_empty() {
        bail!(
            "latency needs one or more functions: latency FUNC... [--for D], e.g. latency pg_sleep --for 10s"
        );
    }
    Ok(LatencyArgs {
        functions,
        duration,
        json,
    })
}
