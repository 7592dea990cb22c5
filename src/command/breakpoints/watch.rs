//! Watchpoints in the x86-64 debug registers: `watch`, `rwatch`, `awatch`;
//! and `set var`, a write of the backend's data.

use super::super::WatchKind;
use super::super::check::{CheckCtx, no_check, run_args, short};
use super::super::{Command, Entry, Invocation, Needs};
use super::split_condition;
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};

const WATCH_HELP: &str = "EXPR is an lvalue (a global, a member through a pointer, an array \
     element): its bytes are watched in the CPU's four debug registers (shared with waits trace \
     --ptrace), which stop the backend right after the instruction that touched them, as gdb's \
     hardware watchpoints do. As gdb, an object is split into aligned pieces of 1, 2, 4 or 8 \
     bytes, one register each (a 16-byte struct takes two); one that needs more registers than \
     are free is refused. The address is taken once, when it is set (gdb's watch -location): a \
     pointer on the way is not watched. A frame's local (of the selected frame: see 'frame', \
     'up') is watched until that frame returns: there the backend stops and the watchpoint is \
     deleted, as gdb does (a frame left by an ERROR's longjmp is seen at the next stop); it is \
     a perf breakpoint, which the kernel removes when pgdbg ends, however it ends; a read of it \
     during a single step is not seen (a write is, by its value); an address of the stack in \
     no frame is refused. Numbered with the breakpoints: info breakpoints, delete, disable, \
     enable, condition, ignore and commands take them. With 'if EXPR' it \
     stops only when EXPR is non-zero.\n\n\
     In a script, EXPR is type-checked before attaching.";

pub static WATCH: Entry = Entry {
    name: "watch",
    aliases: &[],
    usage: "watch EXPR [if COND]",
    summary: "stop after the backend writes a new value into EXPR (a debug register)",
    help: WATCH_HELP,
    examples: &["watch CurrentMemoryContext", "watch MyProc->waitStatus"],
    parse: |rest| parse_watch("watch", rest).map(|_| Invocation::command(&WATCH, rest)),
    needs: Needs::Stop,
    check: check_watch,
    run: Some(|h, rest| run_watch(h, "watch", WatchKind::Write, rest)),
};

pub static RWATCH: Entry = Entry {
    name: "rwatch",
    aliases: &[],
    usage: "rwatch EXPR [if COND]",
    summary: "stop after the backend reads EXPR (a debug register)",
    help: "Like 'watch', for reads: x86-64 has no read-only debug register, so, as gdb does, \
           it watches reads and writes and a hit that changed the value is taken for a write \
           (no stop). A stop shows \"Value = ...\".",
    examples: &["rwatch xactStartTimestamp"],
    parse: |rest| parse_watch("rwatch", rest).map(|_| Invocation::command(&RWATCH, rest)),
    needs: Needs::Stop,
    check: check_watch,
    run: Some(|h, rest| run_watch(h, "rwatch", WatchKind::Read, rest)),
};

pub static AWATCH: Entry = Entry {
    name: "awatch",
    aliases: &[],
    usage: "awatch EXPR [if COND]",
    summary: "stop after the backend reads or writes EXPR (a debug register)",
    help: "Like 'watch', for reads and writes: a stop shows \"Old value = ...\" and \"New value \
           = ...\" when the value changed, \"Value = ...\" when it did not, as gdb does.",
    examples: &["awatch xactStartTimestamp"],
    parse: |rest| parse_watch("awatch", rest).map(|_| Invocation::command(&AWATCH, rest)),
    needs: Needs::Stop,
    check: check_watch,
    run: Some(|h, rest| run_watch(h, "awatch", WatchKind::Access, rest)),
};

/// `watch EXPR [if COND]`: EXPR and COND (`-l`/`-location` accepted: it
/// is what pgdbg does anyway).
fn parse_watch(name: &str, rest: &str) -> Result<(String, Option<String>)> {
    let rest = rest.trim();
    let rest = ["-location ", "-l "]
        .iter()
        .find_map(|p| rest.strip_prefix(p))
        .unwrap_or(rest)
        .trim();
    let (expr, cond) = split_condition(rest);
    if expr.is_empty() {
        bail!("{name} needs an expression: {name} EXPR, e.g. {name} CurrentMemoryContext");
    }
    if cond.as_deref() == Some("") {
        bail!("{name} {expr} if: the condition is missing");
    }
    Ok((expr.to_string(), cond))
}

fn run_watch(
    h: &mut dyn super::super::Host,
    name: &str,
    kind: WatchKind,
    rest: &str,
) -> Result<Outcome> {
    let (expr, cond) = parse_watch(name, rest)?;
    Ok(Outcome::shows(h.add_watchpoint(
        &expr,
        kind,
        cond.as_deref(),
    )?))
}

fn check_watch(ctx: &CheckCtx, cmd: &Command) -> Result<()> {
    let name = cmd.entry().map_or("watch", |e| e.name);
    let (expr, cond) = parse_watch(name, run_args(name, cmd)?)?;
    ctx.typecheck_in(None, &expr)
        .map_err(|e| anyhow!("{name} '{}': {e:#}", short(&expr)))?;
    if let Some(c) = &cond {
        ctx.typecheck_in(None, c)
            .map_err(|e| anyhow!("condition '{}': {e:#}", short(c)))?;
    }
    Ok(())
}

/// `watch`, `rwatch` or `awatch`: a command that sets a watchpoint.
pub fn sets_watchpoint(cmd: &Command) -> bool {
    [&WATCH, &RWATCH, &AWATCH].into_iter().any(|e| cmd.is(e))
}

const SET_VAR_HELP: &str = "Writes EXPR, converted to LVALUE's type as C assigns, over \
     LVALUE in the backend's memory, as gdb does (nothing is printed). Integers, enums, bools, \
     pointers and floats take a number (or an expression); a char array takes a string literal, \
     the rest of the array zeroed. Refused, nothing written: LVALUE in code or in a read-only \
     mapping, or a type it cannot convert (a struct, a 16-byte float). The write is an event of \
     the capture (set_var: the old and the new value). It is not undone at detach: the \
     backend keeps the value, as with gdb.";

pub static SET: Entry = Entry {
    name: "set",
    aliases: &[],
    usage: "set var LVALUE = EXPR",
    summary: "change the backend's data: set var LVALUE = EXPR",
    help: "'set var LVALUE = EXPR' (or 'set variable') writes a value into the backend's memory.",
    examples: &[],
    parse: |_| bail!("set needs a subcommand: set var LVALUE = EXPR"),
    needs: Needs::Nothing,
    check: no_check,
    run: None,
};

pub static SET_VAR: Entry = Entry {
    name: "set var",
    aliases: &["variable"],
    usage: "set var LVALUE = EXPR",
    summary: "write EXPR into LVALUE in the backend's memory",
    help: SET_VAR_HELP,
    examples: &[
        "set var work_mem = 12345",
        "set variable debug_query_string = 0",
    ],
    parse: |rest| parse_set_var(rest).map(|_| Invocation::command(&SET_VAR, rest)),
    needs: Needs::Stop,
    check: |ctx, cmd| {
        let (l, r) = parse_set_var(run_args("set var", cmd)?)?;
        ctx.typecheck(l)
            .map_err(|e| anyhow!("set var '{}': {e:#}", short(l)))?;
        if !r.trim_start().starts_with('"') {
            ctx.typecheck(r)
                .map_err(|e| anyhow!("set var {l} = '{}': {e:#}", short(r)))?;
        }
        Ok(())
    },
    run: Some(|h, rest| {
        let (l, r) = parse_set_var(rest)?;
        Ok(Outcome::shows(h.set_var(l, r)?))
    }),
};

/// `set var LVALUE = EXPR`: the two sides.
pub fn parse_set_var(rest: &str) -> Result<(&str, &str)> {
    split_assignment(rest)
        .ok_or_else(|| anyhow!("set var needs an assignment: set var LVALUE = EXPR"))
}

/// `LVALUE = EXPR` split at its assignment (an `=` that is not part of
/// `==`, `!=`, `<=`, `>=`, outside quotes).
pub fn split_assignment(line: &str) -> Option<(&str, &str)> {
    let b = line.as_bytes();
    let mut quote = None;
    for i in 0..b.len() {
        let c = b[i];
        match quote {
            Some(q) if c == q && (i == 0 || b[i - 1] != b'\\') => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'='
                && b.get(i + 1) != Some(&b'=')
                && !matches!(b.get(i.wrapping_sub(1)), Some(b'=' | b'!' | b'<' | b'>')) =>
            {
                let (l, r) = (line[..i].trim(), line[i + 1..].trim());
                return (!l.is_empty() && !r.is_empty()).then_some((l, r));
            }
            None => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_split_at_their_equals_sign() {
        assert_eq!(
            split_assignment("work_mem = 12345"),
            Some(("work_mem", "12345"))
        );
        assert_eq!(split_assignment("a[i==1] = b"), Some(("a[i==1]", "b")));
        assert_eq!(split_assignment("x = y == 2"), Some(("x", "y == 2")));
        assert_eq!(split_assignment("s = \"a=b\""), Some(("s", "\"a=b\"")));
        assert_eq!(split_assignment("x == 2"), None);
        assert_eq!(split_assignment("x <= 2"), None);
        assert_eq!(split_assignment("x ="), None);
    }
}
