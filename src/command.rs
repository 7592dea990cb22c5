//! The command language shared by the REPL and script files: gdb's names
//! and abbreviations where they fit.

use crate::expr::format::Radix;
use anyhow::{Result, bail};

/// How `plancache --fast` learns each entry of GetCachedPlan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fast {
    /// An in-process recorder (no stop; one stop per decision when it
    /// cannot be placed).
    InProcess,
    /// One ptrace stop per decision.
    Stop,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Break {
        location: String,
        temporary: bool,
        /// `break LOC if EXPR`: stop only when EXPR is non-zero.
        condition: Option<String>,
    },
    /// `condition N [EXPR]`: set (or remove) breakpoint N's condition.
    Condition {
        id: u32,
        expr: Option<String>,
    },
    /// `commands [N]` opens a block (ended by `end`) run at each hit of
    /// breakpoint N (the last one set by default).  The parser returns
    /// this with an empty body; `script::assemble` fills it in.
    Commands {
        id: Option<u32>,
        body: Vec<Command>,
        /// The body's lines as written (for `info breakpoints`).
        text: Vec<String>,
    },
    /// `end` closes a `commands` block.
    End,
    /// `silent` as a block's first command: no "Breakpoint N, ..." line.
    Silent,
    /// `printf "FORMAT", EXPR...`
    Printf {
        format: String,
        args: Vec<String>,
    },
    /// `trace FUNC [ARGEXPR...] [--for D] [--count N] [--stacks N] [--quiet]`
    Trace {
        function: String,
        args: Vec<String>,
        duration: Option<std::time::Duration>,
        count: Option<u64>,
        stacks: usize,
        quiet: bool,
    },
    /// `count FUNC... [--by-phase] [--for D]`
    Count {
        functions: Vec<String>,
        by_phase: bool,
        duration: Option<std::time::Duration>,
    },
    Delete(Vec<u32>),
    InfoBreakpoints,
    Continue,
    Print {
        radix: Radix,
        expr: String,
    },
    Backtrace(Option<usize>),
    Frame(Option<usize>),
    Up(usize),
    Down(usize),
    Info,
    InfoAddress(String),
    InfoLocals,
    InfoArgs,
    InfoRegisters,
    InfoFrame,
    Echo(String),
    /// Watch plan-cache decisions.
    PlanCache {
        duration: Option<std::time::Duration>,
        count: Option<u64>,
        /// `--fast` / `--fast=stop`
        fast: Option<Fast>,
    },
    /// `call FUNC(ARGS)`
    Call(String),
    /// `plan [--next] [--format F] [--verbose] [--costs off]`
    Plan {
        next: bool,
        format: String,
        verbose: bool,
        costs: bool,
    },
    /// `wait`: the current wait event
    Wait,
    /// `waits sample [--hz N] [--for D]`
    WaitsSample {
        hz: f64,
        duration: Option<std::time::Duration>,
    },
    /// `waits trace [--for D] [--stacks N] [--quiet]`
    WaitsTrace {
        duration: Option<std::time::Duration>,
        stacks: usize,
        quiet: bool,
    },
    Detach,
    Quit,
    Help(Option<String>),
    Nothing,
}

/// (name, aliases, usage, one-line description)
pub const COMMANDS: &[(&str, &[&str], &str, &str)] = &[
    (
        "break",
        &["b", "br"],
        "break FUNCTION | FILE:LINE | *ADDRESS [if EXPR]",
        "stop when the backend reaches FUNCTION (every out-of-line copy and inlined instance); with 'if', only when EXPR is non-zero",
    ),
    (
        "tbreak",
        &[],
        "tbreak LOCATION [if EXPR]",
        "like break, deleted after its first hit",
    ),
    (
        "condition",
        &[],
        "condition N [EXPR]",
        "stop at breakpoint N only when EXPR is non-zero (no EXPR: always)",
    ),
    (
        "commands",
        &[],
        "commands [N] ... end",
        "commands to run at each hit of breakpoint N (default: the last one), one per line, closed by 'end'; 'silent' first hides the stop line, 'continue' last resumes",
    ),
    ("end", &[], "end", "close a commands block"),
    (
        "silent",
        &[],
        "silent",
        "(first line of a commands block) do not print the stop line",
    ),
    (
        "printf",
        &[],
        "printf \"FORMAT\", EXPR...",
        "formatted output of expressions, C style: %d %u %ld %x %f %g %s (char *) %c %p %%",
    ),
    (
        "trace",
        &[],
        "trace FUNC [ARGEXPR...] [--for D] [--count N] [--stacks N] [--quiet]",
        "record every call of FUNC with the values of ARGEXPRs at entry (trace LockRelationOid relid lockmode); capture events 'trace'",
    ),
    (
        "count",
        &[],
        "count FUNC... [--by-phase] [--for D]",
        "count calls of FUNCs until Ctrl-C or --for; --by-phase splits them into planning, execution and other",
    ),
    (
        "delete",
        &["d"],
        "delete [N...]",
        "delete breakpoints N (all without arguments)",
    ),
    (
        "continue",
        &["c", "cont"],
        "continue",
        "run the backend until the next breakpoint (Ctrl-C stops it)",
    ),
    (
        "print",
        &["p", "inspect"],
        "print[/x|/d] EXPR",
        "evaluate a C expression at the current stop: plansource->generic_cost, *MyProc, ...",
    ),
    (
        "backtrace",
        &["bt", "where"],
        "backtrace [N]",
        "show the call stack (inlined frames included)",
    ),
    (
        "frame",
        &["f"],
        "frame [N]",
        "select frame N (or show the selected frame)",
    ),
    ("up", &[], "up [N]", "select the caller's frame"),
    ("down", &[], "down [N]", "select the callee's frame"),
    (
        "info",
        &["i"],
        "info [breakpoints|locals|args|registers|frame|address SYM]",
        "pid, PostgreSQL version, binary, build-id, debug info, state; or the named table",
    ),
    (
        "plancache",
        &[],
        "plancache [--for DURATION] [--count N] [--fast[=stop]]",
        "report every custom/generic plan choice with its costs and reason, until Ctrl-C, --for 10s or --count N (two stops per decision); --fast (14+): the choice from the plansource's counters, recorded inside the backend with no stop (a jump at GetCachedPlan's entry to a ring buffer pgdbg reads 50 to 200 times a second; no planning charge); --fast=stop: one stop per decision instead",
    ),
    (
        "call",
        &[],
        "call FUNC(ARGS)",
        "call a function inside the backend (integer, pointer, double args, checked against its prototype), e.g. call pgstat_get_wait_event(0x0100003d); refused while the backend's transaction is aborted or half-ended (ROLLBACK first), except functions harmless there (pgstat_get_wait_event, pgstat_get_wait_event_type, IsTransactionState, ...)",
    ),
    (
        "plan",
        &[],
        "plan [--next] [--format text|json|yaml|xml] [--verbose] [--costs off]",
        "EXPLAIN the query the backend runs (--next: the next one to start; inside a DO block: its nested statement), computed inside the backend; refused like call in an aborted transaction",
    ),
    (
        "wait",
        &[],
        "wait",
        "what the backend waits on now, as pg_stat_activity names it (Client: ClientRead, Lock: relation, ...)",
    ),
    (
        "waits",
        &[],
        "waits sample [--hz N] [--for DURATION] | waits trace [--for DURATION] [--stacks N] [--quiet]",
        "let the backend run and sample its wait event N times a second (default 100) without stopping it; print a profile",
    ),
    ("echo", &[], "echo TEXT", "print TEXT (for scripts)"),
    (
        "detach",
        &[],
        "detach",
        "restore the backend exactly as it was and let it run",
    ),
    (
        "quit",
        &["q", "exit"],
        "quit",
        "detach and exit (also Ctrl-D)",
    ),
    (
        "help",
        &["h", "?"],
        "help [COMMAND]",
        "list commands, or explain one",
    ),
];

pub fn command_names() -> Vec<&'static str> {
    COMMANDS.iter().map(|c| c.0).collect()
}

fn canonical(word: &str) -> Option<&'static str> {
    for (name, aliases, _, _) in COMMANDS {
        if *name == word || aliases.contains(&word) {
            return Some(name);
        }
    }
    // unique prefix (gdb accepts "cont", "back", ...)
    let cands: Vec<&str> = COMMANDS
        .iter()
        .map(|c| c.0)
        .filter(|n| n.starts_with(word) && word.len() >= 2)
        .collect();
    if cands.len() == 1 {
        Some(cands[0])
    } else {
        None
    }
}

fn num_arg(rest: &str, what: &str) -> Result<Option<usize>> {
    if rest.is_empty() {
        return Ok(None);
    }
    match rest.parse::<usize>() {
        Ok(n) => Ok(Some(n)),
        Err(_) => bail!("{what} takes a number, not '{rest}'"),
    }
}

/// `line` without its comment: `#` starts one anywhere outside a string
/// (`"..."`) or character (`'#'`) literal.
pub fn strip_comment(line: &str) -> &str {
    let cs: Vec<(usize, char)> = line.char_indices().collect();
    let mut i = 0;
    while i < cs.len() {
        match cs[i].1 {
            '#' => return &line[..cs[i].0],
            '"' => {
                i += 1;
                while i < cs.len() && cs[i].1 != '"' {
                    if cs[i].1 == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '\'' => {
                // a character literal: 'c' or '\c'
                let at = |k: usize| cs.get(i + k).map(|x| x.1);
                if at(1) == Some('\\') && at(3) == Some('\'') {
                    i += 3;
                } else if at(1).is_some() && at(2) == Some('\'') {
                    i += 2;
                }
            }
            _ => {}
        }
        i += 1;
    }
    line
}

pub fn parse(line: &str) -> Result<Command> {
    let line = strip_comment(line).trim();
    if line.is_empty() {
        return Ok(Command::Nothing);
    }
    // print/x
    let (word, rest) = match line.find(|c: char| c.is_whitespace() || c == '/') {
        Some(i) => (&line[..i], line[i..].trim_start()),
        None => (line, ""),
    };
    let name = match canonical(word) {
        Some(n) => n,
        None => bail!("unknown command '{word}': type 'help' for the list of commands"),
    };
    Ok(match name {
        "break" | "tbreak" => {
            let (location, condition) = split_condition(rest);
            if location.is_empty() {
                bail!(
                    "{name} needs a location: {name} FUNCTION, {name} FILE:LINE or {name} *ADDRESS"
                );
            }
            if condition.as_deref() == Some("") {
                bail!("{name} {location} if: the condition is missing");
            }
            Command::Break {
                location: location.to_string(),
                temporary: name == "tbreak",
                condition,
            }
        }
        "condition" => {
            let (n, e) = rest.split_at(rest.find(char::is_whitespace).unwrap_or(rest.len()));
            let id = n.parse::<u32>().map_err(|_| {
                anyhow::anyhow!("condition needs a breakpoint number: condition N EXPR")
            })?;
            let e = e.trim();
            Command::Condition {
                id,
                expr: (!e.is_empty()).then(|| e.to_string()),
            }
        }
        "commands" => Command::Commands {
            id: num_arg(rest, "commands")?.map(|n| n as u32),
            body: Vec::new(),
            text: Vec::new(),
        },
        "end" => Command::End,
        "silent" => Command::Silent,
        "printf" => {
            let (format, args) = parse_printf(rest)?;
            Command::Printf { format, args }
        }
        "trace" => {
            let mut words = Vec::new();
            let mut stacks = 0usize;
            let mut quiet = false;
            let mut limits = Vec::new();
            let mut it = rest.split_whitespace();
            while let Some(w) = it.next() {
                match w {
                    "--stacks" => {
                        let v = it.next().unwrap_or("");
                        stacks = v
                            .parse::<usize>()
                            .ok()
                            .filter(|n| *n <= 64)
                            .ok_or_else(|| {
                                anyhow::anyhow!("trace: --stacks takes 0 to 64 frames, not '{v}'")
                            })?;
                    }
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
            Command::Trace {
                function,
                args: words,
                duration,
                count,
                stacks,
                quiet,
            }
        }
        "count" => {
            let mut functions = Vec::new();
            let mut by_phase = false;
            let mut limits = Vec::new();
            let mut it = rest.split_whitespace();
            while let Some(w) = it.next() {
                match w {
                    "--by-phase" => by_phase = true,
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
                bail!("count needs one or more functions: count FUNC... [--by-phase] [--for D]");
            }
            Command::Count {
                functions,
                by_phase,
                duration,
            }
        }
        "delete" => {
            let rest = rest.strip_prefix("breakpoints").unwrap_or(rest).trim();
            let mut ids = Vec::new();
            for w in rest.split_whitespace() {
                match w.parse::<u32>() {
                    Ok(n) => ids.push(n),
                    Err(_) => bail!("delete takes breakpoint numbers, not '{w}'"),
                }
            }
            Command::Delete(ids)
        }
        "continue" => Command::Continue,
        "print" => {
            let (radix, expr) = if let Some(r) = rest.strip_prefix('/') {
                let (f, e) = r.split_at(r.find(char::is_whitespace).unwrap_or(r.len()));
                let radix = match f {
                    "x" => Radix::Hex,
                    "d" => Radix::Decimal,
                    _ => bail!("unknown print format '/{f}': use /x or /d"),
                };
                (radix, e.trim())
            } else {
                (Radix::Natural, rest)
            };
            if expr.is_empty() {
                bail!("print needs an expression, e.g. print plansource->generic_cost");
            }
            Command::Print {
                radix,
                expr: expr.to_string(),
            }
        }
        "backtrace" => {
            let r = rest.trim_start_matches("full").trim();
            Command::Backtrace(num_arg(r, "backtrace")?)
        }
        "frame" => Command::Frame(num_arg(rest, "frame")?),
        "up" => Command::Up(num_arg(rest, "up")?.unwrap_or(1)),
        "down" => Command::Down(num_arg(rest, "down")?.unwrap_or(1)),
        "info" => {
            let (what, arg) = match rest.find(char::is_whitespace) {
                Some(i) => (&rest[..i], rest[i..].trim()),
                None => (rest, ""),
            };
            match what {
                "" | "target" | "process" | "program" | "inferior" => Command::Info,
                "breakpoints" | "break" | "b" | "br" => Command::InfoBreakpoints,
                "locals" => Command::InfoLocals,
                "args" => Command::InfoArgs,
                "registers" | "r" | "reg" => Command::InfoRegisters,
                "frame" | "f" => Command::InfoFrame,
                "address" | "addr" => {
                    if arg.is_empty() {
                        bail!("info address needs a symbol name");
                    }
                    Command::InfoAddress(arg.to_string())
                }
                other => bail!(
                    "unknown info subcommand '{other}': try info, info breakpoints, info locals, info args, info registers, info frame, info address SYM"
                ),
            }
        }
        "echo" => Command::Echo(rest.replace("\\n", "\n")),
        "call" => {
            if !(rest.contains('(') && rest.ends_with(')')) {
                bail!("call needs FUNC(ARGS), e.g. call pgstat_get_wait_event(0x0100003d)");
            }
            Command::Call(rest.to_string())
        }
        "plan" => {
            let (mut next, mut format, mut verbose, mut costs) =
                (false, "text".to_string(), false, true);
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
            Command::Plan {
                next,
                format,
                verbose,
                costs,
            }
        }
        "wait" => {
            if !rest.is_empty() {
                bail!("wait takes no arguments (did you mean 'waits sample'?)");
            }
            Command::Wait
        }
        "waits" => {
            let sub = rest.split_whitespace().next().unwrap_or("");
            if sub == "trace" {
                let mut stacks = 0usize;
                let mut quiet = false;
                let mut others = Vec::new();
                let mut it = rest["trace".len()..].split_whitespace();
                while let Some(w) = it.next() {
                    match w {
                        "--stacks" => {
                            let v = it.next().unwrap_or("");
                            stacks =
                                v.parse::<usize>()
                                    .ok()
                                    .filter(|n| *n <= 64)
                                    .ok_or_else(|| {
                                        anyhow::anyhow!(
                                            "waits trace: --stacks takes 0 to 64 frames, not '{v}'"
                                        )
                                    })?;
                        }
                        "--quiet" => quiet = true,
                        other => others.push(other),
                    }
                }
                let (duration, count) = parse_limits(&others.join(" "), "waits trace")?;
                if count.is_some() {
                    bail!("waits trace takes --for DURATION, not --count");
                }
                return Ok(Command::WaitsTrace {
                    duration,
                    stacks,
                    quiet,
                });
            }
            if sub != "sample" {
                bail!("waits needs a subcommand: waits sample [--hz N] [--for DURATION]");
            }
            let opts = rest["sample".len()..].trim();
            // --hz N, then the common limits
            let mut hz = 100.0;
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
                            anyhow::anyhow!(
                                "waits sample: --hz takes a rate from 1 to 20000, not '{v}'"
                            )
                        })?;
                } else {
                    others.push(w);
                }
            }
            let (duration, count) = parse_limits(&others.join(" "), "waits sample")?;
            if count.is_some() {
                bail!("waits sample takes --for DURATION, not --count");
            }
            Command::WaitsSample { hz, duration }
        }
        "plancache" => {
            let mut fast = None;
            let mut others: Vec<&str> = Vec::new();
            for w in rest.split_whitespace() {
                match w {
                    "--fast" | "--fast=ring" => fast = Some(Fast::InProcess),
                    "--fast=stop" => fast = Some(Fast::Stop),
                    w if w.starts_with("--fast=") => {
                        bail!(
                            "plancache: bad {w} (--fast, or --fast=stop for one stop per decision)"
                        )
                    }
                    w => others.push(w),
                }
            }
            let (duration, count) = parse_limits(&others.join(" "), "plancache")?;
            Command::PlanCache {
                duration,
                count,
                fast,
            }
        }
        "detach" => Command::Detach,
        "quit" => Command::Quit,
        "help" => Command::Help(if rest.is_empty() {
            None
        } else {
            Some(rest.to_string())
        }),
        _ => unreachable!(),
    })
}

/// `LOC if EXPR` -> (LOC, Some(EXPR)); `Some("")` when EXPR is missing.
fn split_condition(rest: &str) -> (&str, Option<String>) {
    if let Some(i) = rest.find(" if ") {
        return (rest[..i].trim(), Some(rest[i + 4..].trim().to_string()));
    }
    if let Some(l) = rest.strip_suffix(" if") {
        return (l.trim(), Some(String::new()));
    }
    if let Some(e) = rest.strip_prefix("if ") {
        return ("", Some(e.trim().to_string()));
    }
    (rest, None)
}

/// `"FORMAT", EXPR, EXPR` -> (FORMAT with escapes resolved, [EXPR...]).
fn parse_printf(rest: &str) -> Result<(String, Vec<String>)> {
    let usage = "printf needs a quoted format: printf \"%d rows\\n\", expr";
    let mut chars = rest.trim().chars();
    if chars.next() != Some('"') {
        bail!("{usage}");
    }
    let mut format = String::new();
    let mut closed = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                closed = true;
                break;
            }
            '\\' => match chars.next() {
                Some('n') => format.push('\n'),
                Some('t') => format.push('\t'),
                Some('"') => format.push('"'),
                Some('\\') => format.push('\\'),
                Some(o) => bail!("printf: unknown escape '\\{o}' in the format"),
                None => break,
            },
            c => format.push(c),
        }
    }
    if !closed {
        bail!("printf: the format string is not closed with '\"'");
    }
    let tail = chars.as_str().trim();
    let args = if tail.is_empty() {
        Vec::new()
    } else {
        let Some(t) = tail.strip_prefix(',') else {
            bail!("printf: expected ',' after the format, not '{tail}'");
        };
        split_args(t)
    };
    let wanted = printf_conversions(&format)?.len();
    if wanted != args.len() {
        bail!(
            "printf: the format has {wanted} conversion{} but {} argument{} given",
            if wanted == 1 { "" } else { "s" },
            args.len(),
            if args.len() == 1 { " is" } else { "s are" }
        );
    }
    Ok((format, args))
}

/// The conversions of a printf format, e.g. ["d", "x", "s"] (their
/// widths and precisions checked too: at most
/// `printf::MAX_WIDTH`).
pub fn printf_conversions(format: &str) -> Result<Vec<String>> {
    Ok(crate::expr::printf::conversions(format)?
        .into_iter()
        .map(String::from)
        .collect())
}

/// Split expressions at top-level commas (not inside (), [] or quotes).
pub fn split_args(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut cur = String::new();
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// A duration: "10s", "500ms", "2m", "1h", or plain seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(std::time::Duration::from_secs_f64(v * mult)),
        _ => bail!("bad duration '{s}': use e.g. 10s, 500ms, 2m"),
    }
}

/// `--for DURATION` and `--count N` of probe commands.
fn parse_limits(rest: &str, cmd: &str) -> Result<(Option<std::time::Duration>, Option<u64>)> {
    let mut duration = None;
    let mut count = None;
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (w, None),
        };
        let mut value = |name: &str| -> Result<String> {
            match inline {
                Some(v) => Ok(v.to_string()),
                None => it
                    .next()
                    .map(|s| s.to_string())
                    .ok_or_else(|| anyhow::anyhow!("{cmd}: {name} needs a value")),
            }
        };
        match flag {
            "--for" => duration = Some(parse_duration(&value("--for")?)?),
            "--count" => {
                let v = value("--count")?;
                count = Some(v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    anyhow::anyhow!("{cmd}: --count takes a positive number, not '{v}'")
                })?);
            }
            other => bail!("{cmd}: unknown option '{other}' (use --for DURATION, --count N)"),
        }
    }
    Ok((duration, count))
}

pub fn help_text(topic: Option<&str>) -> String {
    match topic {
        None => {
            let mut s = String::from("Commands (gdb names and abbreviations work):\n");
            for (name, aliases, usage, desc) in COMMANDS {
                let al = if aliases.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", aliases.join(", "))
                };
                s.push_str(&format!("  {:<44} {desc}{al}\n", usage));
                let _ = name;
            }
            s.push_str(
                "\nExample (seed 000): break choose_custom_plan / continue / print plansource->generic_cost /\n\
                 print plansource->total_custom_cost / plansource->num_custom_plans / bt / detach\n\
                 Ctrl-C stops a running 'continue' without signalling the backend; Ctrl-D quits (detaching).",
            );
            s
        }
        Some(t) => match canonical(t.trim()) {
            Some(n) => {
                let (_, aliases, usage, desc) = COMMANDS.iter().find(|c| c.0 == n).expect("known");
                format!(
                    "{usage}\n  {desc}{}",
                    if aliases.is_empty() {
                        String::new()
                    } else {
                        format!("\n  aliases: {}", aliases.join(", "))
                    }
                )
            }
            None => format!("no command '{t}': type 'help' for the list"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_aliases() {
        assert_eq!(
            parse("b choose_custom_plan").unwrap(),
            Command::Break {
                location: "choose_custom_plan".into(),
                temporary: false,
                condition: None,
            }
        );
        assert_eq!(parse("c").unwrap(), Command::Continue);
        assert_eq!(parse("bt 5").unwrap(), Command::Backtrace(Some(5)));
        assert_eq!(
            parse("p/x MyProc->pid").unwrap(),
            Command::Print {
                radix: Radix::Hex,
                expr: "MyProc->pid".into()
            }
        );
        assert_eq!(parse("i b").unwrap(), Command::InfoBreakpoints);
        assert_eq!(parse("  # comment").unwrap(), Command::Nothing);
    }

    /// `#` starts a comment anywhere outside a string or character
    /// literal; `print/x`, `break *0x...` and `$1` are not comments.
    #[test]
    fn trailing_comments() {
        assert_eq!(
            parse("print 1 + 2   # three").unwrap(),
            Command::Print {
                radix: Radix::Natural,
                expr: "1 + 2".into()
            }
        );
        assert_eq!(
            parse("p/x $1# hex").unwrap(),
            Command::Print {
                radix: Radix::Hex,
                expr: "$1".into()
            }
        );
        assert_eq!(
            parse("break *0x55d5c1e3c1a8 # an address").unwrap(),
            Command::Break {
                location: "*0x55d5c1e3c1a8".into(),
                temporary: false,
                condition: None,
            }
        );
        assert_eq!(
            parse("break f if x == '#' # a char").unwrap(),
            Command::Break {
                location: "f".into(),
                temporary: false,
                condition: Some("x == '#'".into()),
            }
        );
        assert_eq!(
            parse(r#"printf "%#x # not a comment \" # still not\n", v # comment"#).unwrap(),
            Command::Printf {
                format: "%#x # not a comment \" # still not\n".into(),
                args: vec!["v".into()],
            }
        );
        assert_eq!(parse("continue # go on").unwrap(), Command::Continue);
        assert_eq!(parse("#").unwrap(), Command::Nothing);
        assert_eq!(strip_comment("print 'a' # x"), "print 'a' ");
        assert_eq!(strip_comment("print '\\'' # x"), "print '\\'' ");
        assert_eq!(strip_comment("echo don't # x"), "echo don't ");
        assert_eq!(
            strip_comment("print \"unclosed # x"),
            "print \"unclosed # x"
        );
        assert_eq!(strip_comment("print é # x"), "print é ");
    }

    #[test]
    fn errors_name_the_problem() {
        let e = parse("brk foo").unwrap_err().to_string();
        assert!(e.contains("unknown command 'brk'"), "{e}");
        let e = parse("break").unwrap_err().to_string();
        assert!(e.contains("needs a location"), "{e}");
        let e = parse("frame x").unwrap_err().to_string();
        assert!(e.contains("takes a number"), "{e}");
    }
}
