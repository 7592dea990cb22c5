//! What `call` checks before anything is changed in the backend: the
//! function's address, its prototype from DWARF, and the arguments as the
//! user wrote them checked and converted against it.

use super::*;

/// Resolve a function name to a runtime address for `call`.
pub fn function_address(s: &dyn Backend, name: &str) -> Result<u64> {
    func_addr(s, name).ok_or_else(|| {
        anyhow!(
            "no out-of-line function \"{name}\" to call in this binary",
            name = crate::shown::shown(name)
        )
    })
}

/// A function's parameters from DWARF: (name, type) each, and whether it
/// takes `...` after them.
#[derive(Debug, Clone)]
pub struct Prototype {
    pub params: Vec<(Option<String>, Option<TypeRef>)>,
    pub variadic: bool,
}

/// What one DIE of a function says: its parameter DIEs, `...`,
/// DW_AT_prototyped, and the DIE it refers to (abstract origin or
/// specification).
pub(super) fn subprogram_facts(
    s: &dyn Backend,
    off: u64,
) -> Option<(Vec<u64>, bool, bool, Option<u64>)> {
    use crate::debuginfo::index::{die_offset, global_ref};
    use gimli::constants as dw;
    let di = s.di();
    di.with_die(off, |u, e| {
        let next = e
            .attr_value(dw::DW_AT_abstract_origin)
            .or_else(|| e.attr_value(dw::DW_AT_specification))
            .and_then(|v| global_ref(&di.dwarf, u, v));
        let prototyped = matches!(
            e.attr_value(dw::DW_AT_prototyped),
            Some(gimli::AttributeValue::Flag(true))
        );
        let (mut params, mut variadic) = (Vec::new(), false);
        if let Ok(mut tree) = u.entries_tree(Some(e.offset()))
            && let Ok(root) = tree.root()
        {
            let mut children = root.children();
            while let Ok(Some(c)) = children.next() {
                match c.entry().tag() {
                    dw::DW_TAG_formal_parameter => {
                        params.push(die_offset(&di.dwarf, u, c.entry().offset()))
                    }
                    dw::DW_TAG_unspecified_parameters => variadic = true,
                    _ => {}
                }
            }
        }
        (params, variadic, prototyped, next)
    })
    .ok()
}

/// The prototype of `name` from DWARF (None without DWARF, or when the
/// debug info does not say: then no check is made).
pub fn prototype(s: &dyn Backend, name: &str) -> Option<Prototype> {
    let die = s
        .di()
        .function_locations(name)
        .iter()
        .find(|l| !l.inlined && l.die != 0)?
        .die;
    // the concrete copy, then its abstract origin / declaration: the last
    // one that lists parameters lists all of them
    let mut chain = Vec::new();
    let mut cur = Some(die);
    while let Some(off) = cur {
        if chain.len() >= 4 {
            break;
        }
        let facts = subprogram_facts(s, off)?;
        cur = facts.3;
        chain.push(facts);
    }
    let variadic = chain.iter().any(|f| f.1);
    let prototyped = chain.iter().any(|f| f.2);
    let with_params: Vec<&Vec<u64>> = chain
        .iter()
        .map(|f| &f.0)
        .filter(|p| !p.is_empty())
        .collect();
    let Some(params) = with_params.last() else {
        return (prototyped || variadic).then(|| Prototype {
            params: Vec::new(),
            variadic,
        });
    };
    let params = params
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            // a declaration's parameters may have no names: take the
            // definition's
            let name = s.di().die_name(p).or_else(|| {
                with_params
                    .iter()
                    .find_map(|ps| ps.get(i).and_then(|&q| s.di().die_name(q)))
            });
            (name, s.di().die_type(p))
        })
        .collect();
    Some(Prototype { params, variadic })
}

impl Prototype {
    fn param_text(s: &dyn Backend, p: &(Option<String>, Option<TypeRef>)) -> String {
        let ty =
            p.1.as_ref()
                .map(|t| type_name(s.di(), t))
                .unwrap_or_else(|| "?".into());
        match &p.0 {
            Some(n) if ty.ends_with('*') => format!("{ty}{n}"),
            Some(n) => format!("{ty} {n}"),
            None => ty,
        }
    }

    /// "const char *s", "void", "const char *fmt, ..."
    pub fn text(&self, s: &dyn Backend) -> String {
        let mut v: Vec<String> = self.params.iter().map(|p| Self::param_text(s, p)).collect();
        if self.variadic {
            v.push("...".into());
        }
        if v.is_empty() {
            "void".into()
        } else {
            v.join(", ")
        }
    }
}

/// One argument of `call` as the user wrote it, evaluated.
#[derive(Debug, Clone)]
pub enum Given {
    /// A string literal (copied into the backend).
    Str(String),
    /// A value of pointer (or array, function) type.
    Ptr(u64),
    Int(u64),
    Float(f64),
}

impl Given {
    fn what(&self) -> String {
        match self {
            Given::Str(t) => format!("a string (\"{t}\")"),
            Given::Ptr(a) => format!("a pointer ({a:#x})"),
            Given::Int(i) => format!("an integer ({})", *i as i64),
            Given::Float(f) => format!("a double ({f})"),
        }
    }
}

/// An argument ready for the call: a value, or a string to copy into the
/// backend first.
#[derive(Debug, Clone)]
pub enum Prepared {
    Arg(Arg),
    Str(String),
}

/// Check `call name(given...)` against the DWARF prototype (count, and
/// types roughly: pointers, integers, floating point) and convert as C
/// would (an integer to a double parameter); one line naming the
/// prototype when it does not fit.  Without a prototype, no check.
pub fn prepare_args(s: &dyn Backend, name: &str, given: Vec<Given>) -> Result<Vec<Prepared>> {
    let plain = |g: Given| match g {
        Given::Str(t) => Prepared::Str(t),
        Given::Ptr(a) | Given::Int(a) => Prepared::Arg(Arg::Int(a)),
        Given::Float(f) => Prepared::Arg(Arg::Double(f)),
    };
    let Some(proto) = prototype(s, name) else {
        return Ok(given.into_iter().map(plain).collect());
    };
    let n = proto.params.len();
    let fits = if proto.variadic {
        given.len() >= n
    } else {
        given.len() == n
    };
    if !fits {
        let takes = match (n, proto.variadic) {
            (0, false) => "no arguments".to_string(),
            (1, false) => "1 argument".to_string(),
            (n, false) => format!("{n} arguments"),
            (1, true) => "at least 1 argument".to_string(),
            (n, true) => format!("at least {n} arguments"),
        };
        bail!(
            "{name} takes {takes} ({}), {} given",
            proto.text(s),
            given.len()
        );
    }
    let mut out = Vec::new();
    for (i, g) in given.into_iter().enumerate() {
        let Some(p) = proto.params.get(i) else {
            out.push(plain(g)); // after `...`: as given
            continue;
        };
        let Some(ty) = &p.1 else {
            out.push(plain(g));
            continue;
        };
        let bad = |wants: &str, g: &Given| {
            anyhow!(
                "argument {} of {name}({}) is {wants}: {} given",
                i + 1,
                proto.text(s),
                g.what()
            )
        };
        let size = size_of(s.di(), ty);
        let prepared = match &*strip(s.di(), ty) {
            Type::Pointer { .. } => match g {
                Given::Float(_) => return Err(bad("a pointer", &g)),
                g => plain(g),
            },
            Type::Base {
                enc: Encoding::Float,
                ..
            } => {
                let v = match g {
                    Given::Float(f) => f,
                    Given::Int(v) => v as i64 as f64,
                    g => return Err(bad("floating point", &g)),
                };
                match size {
                    // a float travels in the low 32 bits of its register
                    4 => Prepared::Arg(Arg::Double(f64::from_bits((v as f32).to_bits() as u64))),
                    8 => Prepared::Arg(Arg::Double(v)),
                    _ => bail!(
                        "argument {} of {name}({}) is a {size}-byte float: call cannot pass it",
                        i + 1,
                        proto.text(s)
                    ),
                }
            }
            Type::Base { .. } | Type::Enum { .. } => match g {
                Given::Float(f) => Prepared::Arg(Arg::Int(f as i64 as u64)),
                // a string where a pointer-sized integer (Datum, uintptr_t)
                // is expected passes its address, as in C with a cast
                Given::Str(_) if size < 8 => return Err(bad("an integer", &g)),
                g => plain(g),
            },
            _ => bail!(
                "argument {} of {name}({}) is passed by value as a {}: call cannot pass it",
                i + 1,
                proto.text(s),
                type_name(s.di(), ty)
            ),
        };
        out.push(prepared);
    }
    Ok(out)
}
