//! `source FILE`: the commands of a file run one after the other, as
//! `--script` runs them.  The whole file (and each file it sources) is
//! parsed and checked before its first line runs; a line that fails ends
//! the file there ("FILE:N: ..."), as gdb's `source` does.

use super::super::lines::{MAX_SOURCE_DEPTH, check_sourced};
use super::super::{Host, check::plain_function};
use crate::postgres::backend::{Flow, Outcome};
use anyhow::{Result, anyhow, bail};
use std::cell::Cell;

thread_local! {
    /// How many `source` commands are running, one inside the other.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// The file's name: the rest of the line (it may hold spaces).
pub fn file_arg(rest: &str) -> Result<&str> {
    let f = rest.trim();
    if f.is_empty() {
        bail!("source needs a file of pgdbg commands, e.g. source /tmp/breakpoints.gdb");
    }
    Ok(f)
}

/// `source FILE` over the session.
pub fn source(h: &mut dyn Host, rest: &str) -> Result<Outcome> {
    let path = file_arg(rest)?;
    let depth = DEPTH.get() + 1;
    if depth > MAX_SOURCE_DEPTH {
        bail!(
            "source {}: files source each other more than {MAX_SOURCE_DEPTH} deep (a file that \
             sources itself?): source it from fewer levels",
            crate::shown::shown(path)
        );
    }
    // the breakpoints set so far, by number, for the file's `condition N`
    // and `commands N` (a deleted one counts as set: its line then says so)
    let mut scopes: Vec<Option<String>> = vec![None; h.last_breakpoint().unwrap_or(0) as usize];
    for b in h.breakpoint_list() {
        if let Some(s) = scopes.get_mut(b.id as usize - 1) {
            *s = plain_function(&b.spec);
        }
    }
    // locations are resolved by `break` itself when its line runs
    let script = check_sourced(path, h.di(), &mut scopes, |_, _| Ok(()), depth)?;
    DEPTH.set(depth);
    let res = run_lines(h, path, script);
    DEPTH.set(depth - 1);
    res
}

fn run_lines(h: &mut dyn Host, path: &str, script: super::super::lines::Script) -> Result<Outcome> {
    for (n, _, cmd) in script {
        if crate::runtime::must_stop() || crate::runtime::sigint_seen() {
            bail!("source {path}: interrupted before line {n}");
        }
        let Outcome { text, flow } = h
            .execute_sourced(&cmd)
            .map_err(|e| anyhow!("{path}:{n}: {}", crate::runtime::one_line(&e)))?;
        if !text.is_empty() {
            h.say(text.strip_prefix('\n').unwrap_or(&text));
        }
        if flow != Flow::Continue {
            return Ok(Outcome::new("", flow));
        }
    }
    Ok(Outcome::nothing())
}
