//! Breakpoints: `break`, `tbreak`, `condition`, `commands` ... `end`,
//! `silent`, `delete`, `enable`, `disable`, `ignore` (`manage.rs`),
//! `info breakpoints`, `save breakpoints` (`save.rs`).

use super::check::{CheckCtx, misrouted, no_check, plain_function, run_args, short};
use super::{Command, Entry, Invocation, Needs, args::num_arg};
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};
use manage::BpNum;
pub use manage::{DISABLE, ENABLE, IGNORE};
pub use save::{SAVE, SAVE_BREAKPOINTS};

mod manage;
mod save;
mod watch;
pub use watch::{AWATCH, RWATCH, SET, SET_VAR, WATCH};

pub static ENTRIES: &[&Entry] = &[
    &BREAK,
    &TBREAK,
    &CONDITION,
    &COMMANDS,
    &END,
    &SILENT,
    &DELETE,
    &ENABLE,
    &DISABLE,
    &IGNORE,
    &INFO_BREAKPOINTS,
    &WATCH,
    &RWATCH,
    &AWATCH,
    &SET,
    &SET_VAR,
    &SAVE,
    &SAVE_BREAKPOINTS,
];

pub static BREAK: Entry = Entry {
    name: "break",
    aliases: &["b", "br"],
    usage: "break FUNCTION | FILE:LINE | *ADDRESS [if EXPR]",
    summary: "stop where the backend reaches a function, a source line or an address",
    help: "A breakpoint on every location of FUNCTION: its out-of-line copies, gcc's clones \
           (.isra, .part, ...) and its inlined instances (\"3 locations, 2 inlined\"). With \
           'if EXPR', the backend stops only when EXPR, evaluated at the hit in the function's \
           scope, is non-zero; a false condition resumes it without a word.\n\n\
           In a script, the location and the condition are checked before attaching.",
    examples: &[
        "break choose_custom_plan",
        "break standard_ExecutorRun if queryDesc->plannedstmt->queryId == 42",
    ],
    parse: |rest| parse_break("break", rest).map(|_| Invocation::command(&BREAK, rest)),
    needs: Needs::Stop,
    check: check_break,
    run: Some(|h, rest| {
        let b = parse_break("break", rest)?;
        let text = h.add_breakpoint(&b.location, false, b.condition.as_deref())?;
        Ok(Outcome::shows(text))
    }),
};

pub static TBREAK: Entry = Entry {
    name: "tbreak",
    aliases: &[],
    usage: "tbreak LOCATION [if EXPR]",
    summary: "like break, deleted after its first hit",
    help: "A breakpoint like 'break' (the same locations and conditions) that is deleted when \
           it is hit the first time.",
    examples: &["tbreak exec_simple_query"],
    parse: |rest| parse_break("tbreak", rest).map(|_| Invocation::command(&TBREAK, rest)),
    needs: Needs::Stop,
    check: check_break,
    run: Some(|h, rest| {
        let b = parse_break("tbreak", rest)?;
        let text = h.add_breakpoint(&b.location, true, b.condition.as_deref())?;
        Ok(Outcome::shows(text))
    }),
};

/// `break`'s (or `tbreak`'s) line, parsed.
#[derive(Debug, PartialEq)]
pub struct BreakArgs {
    pub location: String,
    /// `break LOC if EXPR`: stop only when EXPR is non-zero.
    pub condition: Option<String>,
}

/// The location of a `break` or `tbreak` command (None: another command).
pub fn break_location(cmd: &Command) -> Option<String> {
    // a watchpoint's condition is in the global scope
    if watch::sets_watchpoint(cmd) {
        return Some(String::new());
    }
    let name = [&BREAK, &TBREAK].into_iter().find(|e| cmd.is(e))?.name;
    Some(parse_break(name, run_args(name, cmd).ok()?).ok()?.location)
}

/// `break`, `tbreak` or `delete`: a command that sets or deletes
/// breakpoints (refused in a `commands` block).
pub fn changes_breakpoints(cmd: &Command) -> bool {
    [&BREAK, &TBREAK, &DELETE].into_iter().any(|e| cmd.is(e)) || watch::sets_watchpoint(cmd)
}

fn parse_break(name: &str, rest: &str) -> Result<BreakArgs> {
    let (location, condition) = split_condition(rest);
    if location.is_empty() {
        bail!("{name} needs a location: {name} FUNCTION, {name} FILE:LINE or {name} *ADDRESS");
    }
    if condition.as_deref() == Some("") {
        bail!("{name} {location} if: the condition is missing");
    }
    Ok(BreakArgs {
        location: location.to_string(),
        condition,
    })
}

/// `LOC if EXPR` -> (LOC, Some(EXPR)); `Some("")` when EXPR is missing.
pub(super) fn split_condition(rest: &str) -> (&str, Option<String>) {
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

/// The location resolves; the condition type-checks in the function's scope.
fn check_break(ctx: &CheckCtx, cmd: &Command) -> Result<()> {
    let name = cmd.entry().map_or("break", |e| e.name);
    let BreakArgs {
        location,
        condition,
    } = parse_break(name, run_args(name, cmd)?)?;
    ctx.location(&location)?;
    if let Some(c) = &condition {
        ctx.typecheck_in(plain_function(&location).as_deref(), c)
            .map_err(|e| anyhow!("condition '{}': {e:#}", short(c)))?;
    }
    Ok(())
}

pub static CONDITION: Entry = Entry {
    name: "condition",
    aliases: &[],
    usage: "condition N [EXPR]",
    summary: "stop at breakpoint N only when EXPR is non-zero (no EXPR: always)",
    help: "EXPR is evaluated at each hit of breakpoint N, in the scope of its function; when it \
           is zero the backend resumes without a word. Without EXPR, the condition is removed.\n\n\
           N may be $bpnum, the last breakpoint set (as 'save breakpoints' writes it).\n\n\
           In a script, breakpoint N must be set by an earlier line, and EXPR is type-checked in \
           its function.",
    examples: &[
        "condition 1 plansource->num_custom_plans >= 5",
        "condition 1",
    ],
    parse: |rest| parse_condition(rest).map(|_| Invocation::command(&CONDITION, rest)),
    needs: Needs::Nothing,
    check: |ctx, cmd| {
        let (id, expr) = parse_condition(run_args("condition", cmd)?)?;
        let (id, expr) = (&id, &expr);
        // inside a commands block the breakpoints are not known (it runs
        // after the script has set them all): no scope then
        let scope = match ctx.breakpoints {
            Some(_) => ctx
                .breakpoint_scope(id.in_script())
                .ok_or_else(|| match id {
                    BpNum::Num(i) => anyhow!("no breakpoint {i} at this point of the script"),
                    BpNum::Last => {
                        anyhow!("condition $bpnum: no breakpoint is set before this line")
                    }
                })?,
            None => None,
        };
        match expr {
            Some(e) => ctx.typecheck_in(scope, e),
            None => Ok(()),
        }
    },
    run: Some(|h, rest| {
        let (id, expr) = parse_condition(rest)?;
        let id = id.resolve(h)?;
        Ok(Outcome::shows(h.set_condition(id, expr.as_deref())?))
    }),
};

/// `condition N [EXPR]`: the breakpoint (N or `$bpnum`) and the
/// condition (None: removed).
pub fn parse_condition(rest: &str) -> Result<(BpNum, Option<String>)> {
    let (n, e) = rest.split_at(rest.find(char::is_whitespace).unwrap_or(rest.len()));
    let id = BpNum::parse(n)
        .ok_or_else(|| anyhow!("condition needs a breakpoint number: condition N EXPR"))?;
    let e = e.trim();
    Ok((id, (!e.is_empty()).then(|| e.to_string())))
}

pub static COMMANDS: Entry = Entry {
    name: "commands",
    aliases: &[],
    usage: "commands [N] ... end",
    summary: "commands run at each hit of breakpoint N (default: the last one set)",
    help: "The lines after 'commands', one command each up to a line saying 'end', run at every \
           hit of breakpoint N (default: the last one set). 'silent' as the first line hides \
           the stop line; 'continue' as the last one resumes the backend, so the block observes \
           without stopping. Breakpoints cannot be set or deleted inside a block. At the \
           prompt, the block is typed at '>' prompts.\n\n\
           In a script, breakpoint N must be set by an earlier line, and the block's commands \
           are checked in its function's scope.",
    examples: &[
        "commands 1",
        "commands\n  silent\n  printf \"%d custom plans\\n\", plansource->num_custom_plans\n  \
         continue\nend",
    ],
    parse: |rest| {
        Ok(Command::Commands {
            id: num_arg(rest, "commands")?.map(|n| n as u32),
            body: Vec::new(),
            text: Vec::new(),
        })
    },
    // the block's own commands are checked by `script::check_after`, each
    // by its entry, in the scope of the breakpoint's function
    needs: Needs::Nothing,
    check: |ctx, cmd| {
        let Command::Commands { id, .. } = cmd else {
            return Err(misrouted("commands", cmd));
        };
        if ctx.breakpoints.is_some() && ctx.breakpoint_scope(*id).is_none() {
            bail!(
                "commands needs a breakpoint set before it in the script{}",
                id.map(|i| format!(" (there is no breakpoint {i})"))
                    .unwrap_or_default()
            );
        }
        Ok(())
    },
    run: None,
};

pub static END: Entry = Entry {
    name: "end",
    aliases: &[],
    usage: "end",
    summary: "close a commands block",
    help: "Ends the block of commands opened by 'commands'.",
    examples: &["end"],
    parse: |_| Ok(Command::End),
    needs: Needs::Nothing,
    check: no_check,
    run: None,
};

pub static SILENT: Entry = Entry {
    name: "silent",
    aliases: &[],
    usage: "silent",
    summary: "(first line of a commands block) do not print the stop line",
    help: "As the first command of a 'commands' block: a hit prints no \"Breakpoint N, ...\" \
           line, only what the block prints.",
    examples: &["silent"],
    parse: |_| Ok(Command::Silent),
    needs: Needs::Nothing,
    check: no_check,
    run: None,
};

pub static DELETE: Entry = Entry {
    name: "delete",
    aliases: &["d"],
    usage: "delete [N...]",
    summary: "delete breakpoints N (all without arguments)",
    help: "Removes breakpoints N... from the backend (all of them without arguments); \
           'delete breakpoints N...' is the same.",
    examples: &["delete 1 2", "delete"],
    parse: |rest| parse_delete(rest).map(|_| Invocation::command(&DELETE, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, rest| Ok(Outcome::shows(h.delete_breakpoints(&parse_delete(rest)?)?))),
};

/// `delete [breakpoints] [N...]`: the numbers (none: all).
pub fn parse_delete(rest: &str) -> Result<Vec<u32>> {
    let rest = rest.strip_prefix("breakpoints").unwrap_or(rest).trim();
    let mut ids = Vec::new();
    for w in rest.split_whitespace() {
        match w.parse::<u32>() {
            Ok(n) => ids.push(n),
            Err(_) => bail!(
                "delete takes breakpoint numbers, not '{w}'",
                w = crate::shown::shown(w)
            ),
        }
    }
    Ok(ids)
}

pub static INFO_BREAKPOINTS: Entry = Entry {
    name: "info breakpoints",
    aliases: &["break", "b", "br"],
    usage: "info breakpoints",
    summary: "the breakpoints with their locations, conditions, commands and hit counts",
    help: "gdb's table: one row per breakpoint (and one per location of a breakpoint with \
           several): its number, whether it is deleted at its first hit, its address and where \
           that is; then its condition, its commands and how often it was hit.",
    examples: &["info breakpoints", "i b"],
    parse: |rest| Ok(Invocation::command(&INFO_BREAKPOINTS, rest)),
    needs: Needs::Nothing,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::shows(h.info_breakpoints()))),
};
