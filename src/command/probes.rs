//! Probes that let the backend run and record calls: `trace`, `count`.

use super::args::{parse_limits, stacks_arg};
use super::check::{misrouted, short};
use super::{Command, Entry};
use anyhow::{Result, anyhow, bail};

pub static ENTRIES: &[&Entry] = &[&TRACE, &COUNT];

pub static TRACE: Entry = Entry {
    name: "trace",
    aliases: &[],
    usage: "trace FUNC [ARGEXPR...] [--for D] [--count N] [--stacks N] [--quiet]",
    summary: "record every call of FUNC with the values of ARGEXPRs at its entry",
    help: "The backend runs; each call of FUNC is recorded with the values of the ARGEXPRs \
           (expressions in FUNC's scope, one word each) at its entry, printed as a line and \
           written as a 'trace' capture event; the end lists each ARGEXPR's most frequent \
           values. --stacks N adds the innermost N frames (0 to 64) of each call, --quiet prints \
           only the summary. It ends at Ctrl-C, after --for D or after --count N calls.\n\n\
           In a script, FUNC must be in the binary and the ARGEXPRs are type-checked in it.",
    examples: &["trace LockRelationOid relid lockmode --for 5s"],
    parse: parse_trace,
    check: |ctx, cmd| {
        let Command::Trace { function, args, .. } = cmd else {
            return Err(misrouted("trace", cmd));
        };
        ctx.function_must_exist(function)?;
        for a in args {
            ctx.typecheck_in(Some(function), a)
                .map_err(|e| anyhow!("trace argument '{}': {e}", short(a)))?;
        }
        Ok(())
    },
};

fn parse_trace(rest: &str) -> Result<Command> {
    let mut words = Vec::new();
    let mut stacks = 0usize;
    let mut quiet = false;
    let mut limits = Vec::new();
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--stacks" => stacks = stacks_arg("trace", it.next())?,
            "--quiet" => quiet = true,
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
    Ok(Command::Trace {
        function,
        args: words,
        duration,
        count,
        stacks,
        quiet,
    })
}

pub static COUNT: Entry = Entry {
    name: "count",
    aliases: &[],
    usage: "count FUNC... [--by-phase] [--ptrace] [--for D]",
    summary: "count calls of functions until Ctrl-C or --for, by phase with --by-phase",
    help: "The backend runs; the calls of each FUNC are counted until Ctrl-C or --for D, then \
           printed and written as 'count' capture events. --by-phase splits them into \
           planning (inside standard_planner), execution (inside standard_Executor*) and \
           other (a ptrace stop per call: phases need the stops).\n\n\
           By default each location is a kernel uprobe counting event (perf_event_open on \
           the uprobe PMU): the backend is never stopped, and the kernel removes the probes \
           if pgdbg dies. Needs perf_event_open (root, or CAP_PERFMON in a container); where \
           the kernel refuses it, one line says why and the calls are counted with ptrace \
           stops instead. --ptrace: a ptrace stop per call (an int3 breakpoint) anyway. \
           (--perf, the uprobes' old option, is accepted.)\n\n\
           In a script, each FUNC must be in the binary.",
    examples: &[
        "count ReadBufferExtended --by-phase --for 10s",
        "count standard_ExecutorStart --for 10s",
        "count standard_ExecutorStart --ptrace --for 10s",
    ],
    parse: parse_count,
    check: |ctx, cmd| {
        let Command::Count { functions, .. } = cmd else {
            return Err(misrouted("count", cmd));
        };
        for f in functions {
            ctx.function_must_exist(f)?;
        }
        Ok(())
    },
};

fn parse_count(rest: &str) -> Result<Command> {
    let mut functions = Vec::new();
    let mut by_phase = false;
    let mut perf = false;
    let mut ptrace = false;
    let mut limits = Vec::new();
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--by-phase" => by_phase = true,
            "--perf" => perf = true,
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
        bail!("count needs one or more functions: count FUNC... [--by-phase] [--ptrace] [--for D]");
    }
    if perf && (by_phase || ptrace) {
        bail!(
            "count --perf (kernel uprobes) counts calls only: --by-phase and --ptrace need ptrace stops (without --perf)"
        );
    }
    Ok(Command::Count {
        functions,
        by_phase,
        duration,
        ptrace: ptrace || by_phase,
    })
}
