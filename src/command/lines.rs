//! A file of commands as a list: one command per line, `commands N ...
//! end` blocks folded into one `Command::Commands` each.  Scripts
//! (`script.rs`, checked before attaching) and `source FILE` read files
//! through it.

use super::check::plain_function;
use super::{self as command, CheckCtx, Command};
use crate::debuginfo::DebugInfo;
use anyhow::{Result, anyhow, bail};

/// A parsed script: (line number, text, command).
pub type Script = Vec<(usize, String, Command)>;

/// Parse lines into commands, folding `commands ... end` blocks into one
/// `Command::Commands` each.  `where_` names the source in errors
/// ("FILE:LINE: ...").
pub fn assemble(where_: &str, text: &str) -> Result<Script> {
    Ok(assemble_lines(where_, text)?.0)
}

/// `assemble`, with the line number of each command of each entry's
/// `commands` block (empty for other entries), for errors that name the
/// line of the command that has them.
pub fn assemble_lines(where_: &str, text: &str) -> Result<(Script, Vec<Vec<usize>>)> {
    let mut out: Script = Vec::new();
    let mut body_lines: Vec<Vec<usize>> = Vec::new();
    // the open block: (its line, its id, its body)
    let mut open: Option<(usize, Option<u32>, Vec<Command>)> = None;
    let mut lines: Vec<String> = Vec::new();
    let mut numbers: Vec<usize> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let cmd = command::parse(line).map_err(|e| anyhow!("{where_}:{n}: {e:#}"))?;
        let line = command::strip_comment(line);
        match (&mut open, cmd) {
            (_, Command::Nothing) => {}
            (None, Command::Commands { id, .. }) => {
                open = Some((n, id, Vec::new()));
                lines.clear();
                numbers.clear();
            }
            (Some(_), Command::Commands { .. }) => {
                bail!(
                    "{where_}:{n}: 'commands' inside a commands block: close the first one with 'end'"
                )
            }
            (None, Command::End) => {
                bail!("{where_}:{n}: 'end' without 'commands'")
            }
            (None, Command::Silent) => {
                bail!("{where_}:{n}: 'silent' belongs at the start of a commands block")
            }
            (Some((start, id, body)), Command::End) => {
                let c = Command::Commands {
                    id: *id,
                    body: std::mem::take(body),
                    text: std::mem::take(&mut lines),
                };
                out.push((*start, format!("commands (line {start}-{n})"), c));
                body_lines.push(std::mem::take(&mut numbers));
                open = None;
            }
            (Some((_, _, body)), Command::Silent) if !body.is_empty() => {
                bail!("{where_}:{n}: 'silent' must be the first command of the block")
            }
            (Some((_, _, body)), Command::Silent) => {
                body.push(Command::Silent);
                lines.push("silent".into());
                numbers.push(n);
            }
            (Some(_), c) if command::changes_breakpoints(&c) => {
                bail!("{where_}:{n}: breakpoints cannot be set or deleted from a commands block")
            }
            // (its lines would run on after a `continue` of the file's,
            // with the backend running)
            (Some(_), c) if c.is(&command::source::SOURCE) => {
                bail!(
                    "{where_}:{n}: 'source' cannot run from a commands block: put the file's commands in the block"
                )
            }
            (Some((_, _, body)), c) => {
                body.push(c);
                lines.push(line.trim().to_string());
                numbers.push(n);
            }
            (None, c) => {
                out.push((n, line.trim().to_string(), c));
                body_lines.push(Vec::new());
            }
        }
    }
    if let Some((start, _, _)) = open {
        bail!("{where_}:{start}: 'commands' block is not closed with 'end'");
    }
    Ok((out, body_lines))
}

/// `check` of a text that runs after others (`--ex` after `--script`),
/// `depth` files deep in `source` commands:
/// `scopes` holds the function of each breakpoint they set, by number
/// (None: not a plain function), and gets this text's breakpoints added.
/// Each command is checked by its registry entry; a `commands` block's
/// commands in the scope of its breakpoint's function.
pub fn check_after(
    where_: &str,
    text: &str,
    di: &DebugInfo,
    scopes: &mut Vec<Option<String>>,
    locate: fn(&DebugInfo, &str) -> Result<()>,
    depth: usize,
) -> Result<Script> {
    let (script, body_lines) = assemble_lines(where_, text)?;
    for ((n, _, cmd), body_lines) in script.iter().zip(&body_lines) {
        let ctx = CheckCtx {
            di,
            scope: None,
            breakpoints: Some(scopes),
            locate,
        };
        command::check(&ctx, cmd).map_err(|e| anyhow!("{where_}:{n}: {e:#}"))?;
        match cmd {
            Command::Commands { id, body, .. } => {
                let mut scope = ctx.breakpoint_scope(*id).flatten();
                for (k, c) in body.iter().enumerate() {
                    if command::selects_frame(c) {
                        // another frame: its variables are not known here
                        scope = None;
                    }
                    let ctx = CheckCtx {
                        di,
                        scope,
                        breakpoints: None,
                        locate,
                    };
                    // the error names the line of the command in the block
                    let line = body_lines.get(k).copied().unwrap_or(*n);
                    command::check(&ctx, c).map_err(|e| anyhow!("{where_}:{line}: {e:#}"))?;
                }
            }
            // checked above; a breakpoint's function is noted for the
            // lines that follow, a sourced file's lines are checked as if
            // they were here
            c => {
                if let Some(location) = command::break_location(c) {
                    scopes.push(plain_function(&location));
                }
                if let Some(path) = command::sourced_file(c) {
                    check_sourced(path, di, scopes, locate, depth + 1)
                        .map_err(|e| anyhow!("{where_}:{n}: {e:#}"))?;
                }
            }
        }
    }
    Ok(script)
}

/// `source FILE`'s file checked as the lines of the file that sources
/// it, `depth` files deep (refused past `MAX_SOURCE_DEPTH`).
pub fn check_sourced(
    path: &str,
    di: &DebugInfo,
    scopes: &mut Vec<Option<String>>,
    locate: fn(&DebugInfo, &str) -> Result<()>,
    depth: usize,
) -> Result<Script> {
    if depth > MAX_SOURCE_DEPTH {
        bail!(
            "source {}: files source each other more than {MAX_SOURCE_DEPTH} deep (a file that \
             sources itself?): source it from fewer levels",
            crate::shown::shown(path)
        );
    }
    let text = read_sourced(path)?;
    check_after(path, &text, di, scopes, locate, depth)
}

/// How deep `source` may nest: gdb has no limit of its own (Debian's gdb
/// 13.1 aborts at about 1000 nested files, out of file descriptors);
/// pgdbg refuses past this.
pub const MAX_SOURCE_DEPTH: usize = 64;

/// The text of the file `source FILE` reads.
pub fn read_sourced(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        anyhow!(
            "source: cannot read {}: {e}: give a readable file of pgdbg commands",
            crate::shown::shown(path)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A check's error keeps its cause in what the script's reader is
    /// shown (the line, the error, why).
    #[test]
    fn a_check_error_shows_its_cause() {
        let exe = std::env::current_exe().expect("the test binary");
        let di =
            DebugInfo::load_library(crate::debuginfo::elf::ElfImage::open(&exe).unwrap(), &exe)
                .expect("its ELF symbols");
        fn locate(_: &DebugInfo, spec: &str) -> Result<()> {
            Err(anyhow!("no such file").context(format!("cannot resolve {spec}")))
        }
        let text = "print 1\nbreak foo.c:12\n";
        let e = check_after("s.gdb", text, &di, &mut Vec::new(), locate, 0).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "s.gdb:2: cannot resolve foo.c:12: no such file"
        );
    }
}
