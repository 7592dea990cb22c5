//! Script files (`--script`, `--ex`, capture scripts): the REPL's commands,
//! one per line, plus `commands N ... end` blocks.  Everything is checked
//! before the target is touched: command syntax, break locations and
//! traced functions, and expressions type-checked in the scope of the
//! function they will be evaluated in (a condition of `break F if E` and
//! the prints of its `commands` block in F's parameters and locals).

use crate::debuginfo::DebugInfo;
use anyhow::{Result, bail};

pub use crate::command::lines::{Script, assemble};

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
/// commands in the scope of its breakpoint's function; a file `source`
/// reads, as if its lines were here.
pub fn check_after(
    where_: &str,
    text: &str,
    di: &DebugInfo,
    scopes: &mut Vec<Option<String>>,
) -> Result<Script> {
    crate::command::lines::check_after(where_, text, di, scopes, locate, 0)
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
