//! Script files (`--script`, `--ex`, capture scripts): the REPL's commands,
//! one per line, plus `commands N ... end` blocks.  Everything is checked
//! before the target is touched: command syntax, break locations and
//! traced functions, and expressions type-checked in the scope of the
//! function they will be evaluated in (a condition of `break F if E` and
//! the prints of its `commands` block in F's parameters and locals).

use crate::command::{self, Command};
use crate::debuginfo::types::{Type, TypeRef, TypeSource};
use crate::debuginfo::{DebugInfo, VarInfo};
use crate::expr::eval::{EvalEnv, ValLoc, Value, eval};
use anyhow::{Result, anyhow, bail};
use std::rc::Rc;

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
            (Some(_), Command::Break { .. } | Command::Delete(_)) => {
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
pub fn check_after(
    where_: &str,
    text: &str,
    di: &DebugInfo,
    scopes: &mut Vec<Option<String>>,
) -> Result<Script> {
    let (script, body_lines) = assemble_lines(where_, text)?;
    for ((n, _, cmd), body_lines) in script.iter().zip(&body_lines) {
        let at = |e: anyhow::Error| anyhow!("{where_}:{n}: {e}");
        match cmd {
            Command::Break {
                location,
                condition,
                ..
            } => {
                crate::session::resolve_location(di, 0, location).map_err(at)?;
                let func = plain_function(location);
                if let Some(c) = condition {
                    typecheck(di, func.as_deref(), c)
                        .map_err(|e| anyhow!("{where_}:{n}: condition '{}': {e}", short(c)))?;
                }
                scopes.push(func);
            }
            Command::Condition { id, expr } => {
                let Some(scope) = scopes.get((*id as usize).wrapping_sub(1)) else {
                    bail!("{where_}:{n}: no breakpoint {id} at this point of the script");
                };
                if let Some(e) = expr {
                    typecheck(di, scope.as_deref(), e).map_err(at)?;
                }
            }
            Command::Commands { id, body, .. } => {
                let idx = match id {
                    Some(i) => (*i as usize).wrapping_sub(1),
                    None => scopes.len().wrapping_sub(1),
                };
                let Some(scope) = scopes.get(idx) else {
                    bail!(
                        "{where_}:{n}: commands needs a breakpoint set before it in the script{}",
                        id.map(|i| format!(" (there is no breakpoint {i})"))
                            .unwrap_or_default()
                    );
                };
                let mut scope = scope.as_deref();
                for (k, c) in body.iter().enumerate() {
                    if matches!(c, Command::Up(_) | Command::Down(_) | Command::Frame(_)) {
                        // another frame: its variables are not known here
                        scope = None;
                    }
                    // the error names the line of the command in the block
                    let line = body_lines.get(k).copied().unwrap_or(*n);
                    check_one(di, scope, c).map_err(|e| anyhow!("{where_}:{line}: {e}"))?;
                }
            }
            c => check_one(di, None, c).map_err(at)?,
        }
    }
    Ok(script)
}

/// Checks of one command; `scope` is the function it will run in, when
/// known (inside a commands block).
fn check_one(di: &DebugInfo, scope: Option<&str>, cmd: &Command) -> Result<()> {
    match cmd {
        Command::Print { expr, .. } => typecheck(di, scope, expr),
        Command::Printf { args, .. } => {
            for a in args {
                typecheck(di, scope, a)
                    .map_err(|e| anyhow!("printf argument '{}': {e}", short(a)))?;
            }
            Ok(())
        }
        Command::InfoAddress(sym)
            if di.function_locations(sym).is_empty() && di.global(sym).is_none() =>
        {
            bail!("no symbol \"{sym}\" in this postgres binary")
        }
        Command::Trace { function, args, .. } => {
            function_must_exist(di, function)?;
            for a in args {
                typecheck(di, Some(function), a)
                    .map_err(|e| anyhow!("trace argument '{}': {e}", short(a)))?;
            }
            Ok(())
        }
        Command::Count { functions, .. } => {
            for f in functions {
                function_must_exist(di, f)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// An expression as quoted in an error: a pasted monster is cut to its
/// first 60 characters.
fn short(e: &str) -> String {
    if e.chars().count() <= 80 {
        return e.to_string();
    }
    format!("{}...", e.chars().take(60).collect::<String>())
}

/// A function the binary has (by name, with gdb's suggestion otherwise).
pub fn function_must_exist(di: &DebugInfo, name: &str) -> Result<()> {
    if plain_function(name).is_none() {
        bail!("'{name}' is not a function name");
    }
    crate::session::resolve_location(di, 0, name).map(|_| ())
}

/// `choose_custom_plan` -> Some; `file.c:12`, `*0x...` -> None.
fn plain_function(spec: &str) -> Option<String> {
    let s = spec.trim();
    (!s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'))
    .then(|| s.to_string())
}

/// Parse `expr` and evaluate it over types only (every read gives zeros):
/// unknown names, members that do not exist, `->` on a non-pointer and bad
/// casts fail here, before attaching.  Variables are the parameters and
/// locals of `function` (at its first location) and the globals.
pub fn typecheck(di: &DebugInfo, function: Option<&str>, expr: &str) -> Result<()> {
    let e = crate::expr::parse::parse_in(expr, di)?;
    let scope = function.and_then(|f| scope_of(di, f));
    let env = TypeOnly {
        di,
        locals_known: scope.is_some() && di.pack.is_none(),
        vars: scope.unwrap_or_default(),
    };
    match eval(&env, &e) {
        Ok(_) => Ok(()),
        // value-dependent failures are not type errors, and a name whose
        // type cannot be known before attaching checks nothing
        Err(e)
            if ["division by zero", "history is empty", UNKNOWN]
                .iter()
                .any(|m| e.to_string().contains(m)) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Marks an evaluation that met a name of unknown type (not an error).
const UNKNOWN: &str = "pgdbg: unknown before attaching";

/// Parameters and locals of every location of a function with a DIE (the
/// copies of a static function in several files included); None when no
/// location has one.
fn scope_of(di: &DebugInfo, function: &str) -> Option<Vec<VarInfo>> {
    let mut vars = Vec::new();
    let mut found = false;
    for l in di
        .function_locations(function)
        .iter()
        .filter(|l| l.die != 0)
    {
        if let Ok((v, _)) = di.scope_vars(l.die, l.addr) {
            found = true;
            vars.extend(v);
        }
    }
    found.then_some(vars)
}

/// Where values of the type-only evaluation live: any address, since every
/// read gives zeros (locals must be in memory for `&x` and `x[i]`).
const NOWHERE: u64 = 0x1000;

/// An evaluation environment with types and no memory.
struct TypeOnly<'a> {
    di: &'a DebugInfo,
    vars: Vec<VarInfo>,
    /// False without DWARF or outside a function: unknown names may be
    /// locals we cannot see, so they are not reported.
    locals_known: bool,
}

impl TypeSource for TypeOnly<'_> {
    fn resolve(&self, t: &TypeRef) -> Rc<Type> {
        self.di.resolve(t)
    }
    fn type_by_name(&self, name: &str) -> Option<TypeRef> {
        self.di.type_by_name(name)
    }
}

impl EvalEnv for TypeOnly<'_> {
    fn variable(&self, name: &str) -> Result<Option<Value>> {
        if let Some(v) = self.vars.iter().rev().find(|v| v.name == name) {
            return Ok(Some(Value {
                ty: v.ty.clone().unwrap_or_else(Type::int),
                loc: ValLoc::Memory(NOWHERE),
            }));
        }
        if let Some((addr, ty)) = self.di.global(name) {
            return Ok(Some(Value {
                ty: ty.unwrap_or_else(Type::int),
                loc: ValLoc::Memory(addr),
            }));
        }
        if !self.locals_known {
            // a local of wherever the backend will be stopped: unknowable now
            bail!("{UNKNOWN}");
        }
        Ok(None)
    }
    fn function_address(&self, name: &str) -> Option<u64> {
        self.di.function_locations(name).first().map(|l| l.addr)
    }
    fn register(&self, _name: &str) -> Option<u64> {
        Some(0)
    }
    fn read_mem(&self, _addr: u64, buf: &mut [u8]) -> Result<()> {
        buf.fill(0);
        Ok(())
    }
    fn history(&self, _n: Option<usize>) -> Option<Value> {
        // `$1` is whatever was printed: unknowable now
        None
    }
    fn symbol_for(&self, _addr: u64) -> Option<String> {
        None
    }
}
