//! The checks made before attaching (`--script`, `--ex`): break locations
//! and traced functions resolved, expressions type-checked in the scope of
//! the function they will be evaluated in.  Each command's check is in its
//! registry entry; this file holds what they share: [`CheckCtx`] and the
//! type-only evaluation.

use super::Command;
use crate::debuginfo::types::{Type, TypeRef, TypeSource};
use crate::debuginfo::{DebugInfo, VarInfo};
use crate::expr::eval::{EvalEnv, ValLoc, Value, ValueError, eval, value_error};
use crate::expr::parse::{BinOp, Expr, SizeofArg};
use anyhow::{Result, anyhow, bail};
use std::rc::Rc;

/// What a check knows before attaching.
pub struct CheckCtx<'a> {
    pub di: &'a DebugInfo,
    /// The function the command will run in, when known (inside the
    /// `commands` block of a breakpoint on a function).
    pub scope: Option<&'a str>,
    /// The function of each breakpoint the script set before this command,
    /// by number (None: not a plain function).  None inside a `commands`
    /// block, which runs after the script has set them all.
    pub breakpoints: Option<&'a [Option<String>]>,
    /// Resolve a break location (FUNCTION, FILE:LINE, *ADDRESS), with
    /// gdb's suggestion when it names nothing.
    pub locate: fn(&DebugInfo, &str) -> Result<()>,
}

impl CheckCtx<'_> {
    /// `expr` type-checked in the command's scope.
    pub fn typecheck(&self, expr: &str) -> Result<()> {
        typecheck(self.di, self.scope, expr)
    }

    /// `expr` type-checked in `function`'s scope.
    pub fn typecheck_in(&self, function: Option<&str>, expr: &str) -> Result<()> {
        typecheck(self.di, function, expr)
    }

    pub fn location(&self, spec: &str) -> Result<()> {
        (self.locate)(self.di, spec)
    }

    /// A function the binary has (by name, with gdb's suggestion otherwise).
    pub fn function_must_exist(&self, name: &str) -> Result<()> {
        if plain_function(name).is_none()
            && crate::debuginfo::library::split_library_spec(name).is_none()
        {
            bail!(
                "'{name}' is not a function name",
                name = crate::shown::shown(name)
            );
        }
        self.location(name)
    }

    /// The scope of breakpoint `id` (None: the last one set), if the
    /// script has set it by now.
    pub fn breakpoint_scope(&self, id: Option<u32>) -> Option<Option<&str>> {
        let bps = self.breakpoints?;
        let idx = match id {
            Some(i) => (i as usize).wrapping_sub(1),
            None => bps.len().wrapping_sub(1),
        };
        bps.get(idx).map(|s| s.as_deref())
    }
}

/// The check of a command nothing can be known about before attaching.
pub fn no_check(_: &CheckCtx, _: &Command) -> Result<()> {
    Ok(())
}

/// An entry's check given another entry's command: a registry bug (the
/// unit tests rule it out).
pub fn misrouted(entry: &str, cmd: &Command) -> anyhow::Error {
    anyhow!("internal error: the check of '{entry}' was given {cmd:?}")
}

/// The rest of the line of `entry`'s command, which its entry runs
/// (`Command::Run`); any other command: a registry bug.
pub fn run_args<'a>(entry: &str, cmd: &'a Command) -> Result<&'a str> {
    match cmd {
        Command::Run(i) => Ok(&i.args),
        _ => Err(misrouted(entry, cmd)),
    }
}

/// `choose_custom_plan` -> Some; `file.c:12`, `*0x...` -> None.
pub fn plain_function(spec: &str) -> Option<String> {
    let s = spec.trim();
    (!s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'))
    .then(|| s.to_string())
}

/// An expression as quoted in an error: a pasted monster is cut to its
/// first 60 characters, its control characters escaped.
pub fn short(e: &str) -> String {
    if e.chars().count() <= 80 {
        return crate::shown::shown(e).into_owned();
    }
    let cut: String = e.chars().take(60).collect();
    format!("{}...", crate::shown::shown(&cut))
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
        // a name whose type cannot be known before attaching checks nothing
        Err(err) if unknown_before_attaching(&err) => Ok(()),
        Err(err) => match value_error(&err) {
            // value-dependent failures are not type errors
            Some(ValueError::DivisionByZero | ValueError::NoHistory(_)) => Ok(()),
            // `*l->elements@l->length`: a count read from memory is 0 here;
            // only a count known now (`x@0`, `x@-1`) is refused before attaching
            Some(ValueError::AtCount(_)) if !at_counts_constant(&e) => Ok(()),
            _ => Err(err),
        },
    }
}

/// Whether every `@` count in `e` is known without reading the backend
/// (literals, sizeof, casts and arithmetic of them).
fn at_counts_constant(e: &Expr) -> bool {
    fn constant(e: &Expr) -> bool {
        match e {
            Expr::Int(_) | Expr::Float(_) | Expr::Sizeof(_) => true,
            Expr::Neg(x) | Expr::Not(x) | Expr::BitNot(x) | Expr::Cast(_, x) => constant(x),
            Expr::Binary(op, a, b) => *op != BinOp::At && constant(a) && constant(b),
            _ => false,
        }
    }
    match e {
        Expr::Binary(BinOp::At, a, n) => constant(n) && at_counts_constant(a),
        Expr::Binary(_, a, b) | Expr::Index(a, b) => at_counts_constant(a) && at_counts_constant(b),
        Expr::Member(x, _)
        | Expr::Arrow(x, _)
        | Expr::Deref(x)
        | Expr::AddrOf(x)
        | Expr::Neg(x)
        | Expr::Not(x)
        | Expr::BitNot(x)
        | Expr::Cast(_, x) => at_counts_constant(x),
        Expr::Sizeof(a) => match &**a {
            SizeofArg::Expr(x) => at_counts_constant(x),
            SizeofArg::Type(_) => true,
        },
        _ => true,
    }
}

/// Marks an evaluation that met a name of unknown type (not an error):
/// a local of wherever the backend will be stopped.
#[derive(Debug, thiserror::Error)]
#[error("pgdbg: unknown before attaching")]
pub struct UnknownBeforeAttaching;

fn unknown_before_attaching(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<UnknownBeforeAttaching>())
}

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
            return Err(UnknownBeforeAttaching.into());
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
    fn enumerator(&self, name: &str) -> Option<(TypeRef, i64)> {
        self.di.enumerator(name)
    }
}

#[cfg(test)]
mod tests {
    use super::at_counts_constant;
    use crate::expr::parse::parse;

    #[test]
    fn at_counts_known_before_attaching() {
        let c = |s: &str| at_counts_constant(&parse(s, &|_| false).unwrap());
        assert!(c("x@0"));
        assert!(c("a[0]@-(1)"));
        assert!(c("p->f[0]@(2 * 3)"));
        assert!(c("x + 1"));
        assert!(!c("*l->elements@l->length"));
        assert!(!c("a[0]@n"));
        assert!(!c("(a@2)[0]@n"));
        assert!(!c("a@(n@2)"));
    }
}
