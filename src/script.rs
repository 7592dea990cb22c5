//! Script files (`--script`, `--ex`, capture scripts): the REPL's commands,
//! one per line, plus `commands N ... end` blocks.  Everything is checked
//! before the target is touched: command syntax, break locations and
//! traced functions, and expressions type-checked in the scope of the
//! function they will be evaluated in (a condition of `break F if E` and
//! the prints of its `commands` block in F's parameters and locals).

use crate::command::check::plain_function;
use crate::command::{self, CheckCtx, Command};
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
fn assemble_lines(where_: &str, text: &str) -> Result<(Script, Vec<Vec<usize>>)> {
    let mut out: Script = Vec::new();
    let mut body_lines: Vec<Vec<usize>> = Vec::new();
    // the open block: (its line, its id, its body)
    let mut open: Option<(usize, Option<u32>, Vec<Command>)> = None;
    let mut lines: Vec<String> = Vec::new();
    let mut numbers: Vec<usize> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let cmd = command::parse(line).map_err(|e| anyhow!("{where_}:{n}: {e}"))?;
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

/// Replace `${NAME}` by the value of `--define NAME=VALUE`; an undefined
/// name is an error at its line.
pub fn substitute(where_: &str, text: &str, defines: &[(String, String)]) -> Result<String> {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(p) = rest.find("${") {
            out.push_str(&rest[..p]);
            let Some(e) = rest[p..].find('}') else {
                bail!("{where_}:{}: '${{' without a closing '}}'", i + 1);
            };
            let name = &rest[p + 2..p + e];
            match defines.iter().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => bail!(
                    "{where_}:{}: ${{{name}}} is not defined: give --define {name}=VALUE",
                    i + 1
                ),
            }
            rest = &rest[p + e + 1..];
        }
        out.push_str(rest);
        out.push('\n');
    }
    Ok(out)
}

/// Parse and check a whole script against the binary's debug info.
pub fn check(where_: &str, text: &str, di: &DebugInfo) -> Result<Script> {
    check_after(where_, text, di, &mut Vec::new())
}

/// `check` of a text that runs after others (`--ex` after `--script`):
/// `scopes` holds the function of each breakpoint they set, by number
/// (None: not a plain function), and gets this text's breakpoints added.
/// Each command is checked by its registry entry; a `commands` block's
/// commands in the scope of its breakpoint's function.
pub fn check_after(
    where_: &str,
    text: &str,
    di: &DebugInfo,
    scopes: &mut Vec<Option<String>>,
) -> Result<Script> {
    let (script, body_lines) = assemble_lines(where_, text)?;
    for ((n, _, cmd), body_lines) in script.iter().zip(&body_lines) {
        let ctx = CheckCtx {
            di,
            scope: None,
            breakpoints: Some(scopes),
            locate,
        };
        command::check(&ctx, cmd).map_err(|e| anyhow!("{where_}:{n}: {e}"))?;
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
                    command::check(&ctx, c).map_err(|e| anyhow!("{where_}:{line}: {e}"))?;
                }
            }
            // checked above; a breakpoint's function is noted for the
            // lines that follow
            c => {
                if let Some(location) = command::break_location(c) {
                    scopes.push(plain_function(&location));
                }
            }
        }
    }
    Ok(script)
}

/// A break location resolves (the checks' `CheckCtx::locate`).
/// A function no object of the binary has may be one of a library of the
/// server's installation (`plpgsql:exec_stmt_execsql`, or just the name):
/// resolved when the backend has loaded it.
fn locate(di: &DebugInfo, spec: &str) -> Result<()> {
    use crate::debuginfo::library::{library_lookup, library_matches, split_library_spec};
    let err = match crate::session::resolve_location(di, 0, spec) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    let (lib, func) = match split_library_spec(spec) {
        Some((l, f)) => (Some(l), f),
        None => (None, spec.trim()),
    };
    if crate::command::check::plain_function(func).is_some() {
        let (found, unknown) = library_lookup(func);
        // a stripped library whose DWARF only debuginfod has: known at attach
        if unknown
            || found
                .iter()
                .any(|p| lib.is_none_or(|l| library_matches(l, p)))
        {
            return Ok(());
        }
    }
    if let Some(l) = lib {
        use crate::debuginfo::library::{installation_libraries, some_names};
        let installed = installation_libraries();
        // (an installation whose directories are unknown: nothing to say)
        if !installed.is_empty() && !installed.iter().any(|p| library_matches(l, p)) {
            let names: Vec<String> = installed
                .iter()
                .filter_map(|p| p.file_stem().map(|f| f.to_string_lossy().into_owned()))
                .collect();
            let dirs = crate::debuginfo::library::server_library_dirs();
            let dir = dirs
                .first()
                .map(|d| d.display().to_string())
                .unwrap_or_default();
            bail!(
                "no library \"{l}\" in this server's installation ({})",
                some_names(&names, &format!("{dir} has"), &format!("see {dir}")),
                l = crate::shown::shown(l)
            );
        }
        bail!(
            "no function \"{func}\" in a library \"{l}\" of this server's installation",
            func = crate::shown::shown(func),
            l = crate::shown::shown(l)
        );
    }
    Err(err)
}
