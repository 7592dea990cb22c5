//! C declarations of DWARF types, as gdb's `ptype` and `whatis` print
//! them: `struct Plan *planTree`, `char *(*fn)(int)`, a struct expanded
//! one level with its members' declarations, an enum with its values.

use crate::debuginfo::types::{Type, TypeRef, TypeSource, gdb_spelling, parameter_list, type_name};

/// Nesting allowed in one declaration (a malformed self-referring type
/// stops here instead of recursing without end).
const MAX_DEPTH: usize = 24;

/// What `ptype` prints after `type = `: typedefs resolved down to the
/// base type, a struct, union or enum there expanded one level (its
/// members keep their typedef names), the declarator kept:
/// `struct PGPROC {\n    SHM_QUEUE links;\n ...\n} *`.
pub fn ptype(ts: &dyn TypeSource, t: &TypeRef) -> String {
    declaration(ts, t, String::new(), true, 0, 0)
}

/// What `whatis` prints after `type = `: the type's name as written;
/// `unroll` (the argument was a type name) goes through one typedef,
/// as gdb does (`whatis PlannedStmt` is `struct PlannedStmt`).
pub fn whatis(ts: &dyn TypeSource, t: &TypeRef, unroll: bool) -> String {
    if unroll
        && let Type::Typedef {
            target: Some(target),
            ..
        } = &*ts.resolve(t)
    {
        return type_name(ts, target);
    }
    type_name(ts, t)
}

/// The declaration of `name` with type `t`, typedef names kept, as gdb's
/// `info functions` and `info variables` print them:
/// `CachedPlan *GetCachedPlan(CachedPlanSource *, ParamListInfo)`.
pub fn declare(ts: &dyn TypeSource, t: &TypeRef, name: &str) -> String {
    declaration(ts, t, name.to_string(), false, 0, 0)
}

/// `base inner`, gdb's spacing: `struct Plan *planTree`, `char [64]`.
fn join(base: &str, inner: &str) -> String {
    let inner = inner.trim();
    if inner.is_empty() {
        base.to_string()
    } else {
        format!("{base} {inner}")
    }
}

/// The declaration of `inner` (a name, or the declarator built so far) of
/// type `t`.  `expand`: resolve typedefs and expand the struct, union or
/// enum reached (the top of `ptype`); anonymous ones are expanded always.
fn declaration(
    ts: &dyn TypeSource,
    t: &TypeRef,
    inner: String,
    expand: bool,
    indent: usize,
    depth: usize,
) -> String {
    if depth > MAX_DEPTH {
        return join("?", &inner);
    }
    let ty = ts.resolve(t);
    let next = |t: &Option<TypeRef>, inner: String| match t {
        Some(t) => declaration(ts, t, inner, expand, indent, depth + 1),
        None => join("void", &inner),
    };
    match &*ty {
        Type::Void => join("void", &inner),
        Type::Base { name, .. } => join(gdb_spelling(name), &inner),
        Type::Pointer { target } => {
            // a pointer to an array or function needs parentheses
            let paren = target.as_ref().is_some_and(|tt| {
                matches!(&*ts.resolve(tt), Type::Array { .. } | Type::Function { .. })
            });
            let inner = if paren {
                format!("(*{})", inner.trim())
            } else if inner.starts_with(' ') {
                // a qualified pointer: `* const p`
                format!("* {}", inner.trim())
            } else {
                format!("*{inner}")
            };
            next(target, inner)
        }
        Type::Array { elem, count } => {
            let c = count.map(|c| c.to_string()).unwrap_or_default();
            declaration(ts, elem, format!("{inner}[{c}]"), expand, indent, depth + 1)
        }
        Type::Function {
            ret,
            params,
            variadic,
        } => {
            let list = parameter_list(ts, params, *variadic);
            let inner = if inner.trim().is_empty() {
                list
            } else {
                format!("{inner}{list}")
            };
            next(ret, inner)
        }
        Type::Qualified { kw, target } => {
            let on_pointer = target
                .as_ref()
                .is_some_and(|tt| matches!(&*ts.resolve(tt), Type::Pointer { .. }));
            if on_pointer {
                // `char * const p`: the qualifier follows the star
                next(target, format!(" {kw} {}", inner.trim_start()))
            } else {
                format!("{kw} {}", next(target, inner))
            }
        }
        Type::Typedef { name, target } => {
            if expand {
                next(target, inner)
            } else {
                join(name, &inner)
            }
        }
        Type::Struct { kw, name, .. } => {
            if expand || name.is_none() {
                let body = struct_body(ts, &ty, indent, depth);
                join(&body, &inner)
            } else {
                join(&format!("{kw} {}", name.as_deref().unwrap_or("")), &inner)
            }
        }
        Type::Enum { name, values, .. } => {
            if expand || name.is_none() {
                join(&enum_body(name.as_deref(), values), &inner)
            } else {
                join(&format!("enum {}", name.as_deref().unwrap_or("")), &inner)
            }
        }
    }
}

/// `struct NAME {` members `}`, the members `indent + 4` in.
fn struct_body(ts: &dyn TypeSource, ty: &Type, indent: usize, depth: usize) -> String {
    let Type::Struct {
        kw,
        name,
        members,
        declaration: decl,
        ..
    } = ty
    else {
        return "?".into();
    };
    // an incomplete declaration: the complete type by its tag, if any
    if *decl
        && let Some(n) = name
        && let Some(full) = ts.type_by_name(&format!("{kw} {n}"))
    {
        let r = ts.resolve(&full);
        if matches!(
            &*r,
            Type::Struct {
                declaration: false,
                ..
            }
        ) {
            return struct_body(ts, &r, indent, depth + 1);
        }
    }
    let head = match name {
        Some(n) => format!("{kw} {n} {{"),
        None => format!("{kw} {{"),
    };
    let pad = " ".repeat(indent + 4);
    let mut out = head;
    if *decl {
        out.push_str(&format!("\n{pad}<incomplete type>"));
    } else if members.is_empty() {
        out.push_str(&format!("\n{pad}<no data fields>"));
    }
    for m in members {
        let mut line = declaration(
            ts,
            &m.ty,
            m.name.clone().unwrap_or_default(),
            false,
            indent + 4,
            depth + 1,
        );
        if let Some((_, bits)) = m.bits {
            line.push_str(&format!(" : {bits}"));
        }
        out.push_str(&format!("\n{pad}{line};"));
    }
    out.push_str(&format!("\n{}}}", " ".repeat(indent)));
    out
}

/// `enum NAME {A, B, C = 5}`: a value is written where it is not the
/// previous one plus one (the first: not 0), as gdb does.
fn enum_body(name: Option<&str>, values: &[(String, i64)]) -> String {
    let mut expected = 0i64;
    let parts: Vec<String> = values
        .iter()
        .map(|(n, v)| {
            let s = if *v == expected {
                n.clone()
            } else {
                format!("{n} = {v}")
            };
            expected = v.wrapping_add(1);
            s
        })
        .collect();
    match name {
        Some(n) => format!("enum {n} {{{}}}", parts.join(", ")),
        None => format!("enum {{{}}}", parts.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::types::Member;
    use crate::expr::testenv::Env;
    use std::rc::Rc;

    fn synth(t: Type) -> TypeRef {
        TypeRef::Synth(Rc::new(t))
    }

    #[test]
    fn declarators_read_as_c() {
        let env = Env;
        let plan = synth(Type::Struct {
            kw: "struct",
            name: Some("Plan".into()),
            size: 8,
            members: vec![],
            declaration: false,
        });
        let node = synth(Type::Typedef {
            name: "NodeTag".into(),
            target: Some(Type::int()),
        });
        let chars = synth(Type::Array {
            elem: Type::char_(),
            count: Some(64),
        });
        let fnptr = Type::pointer_to(Some(synth(Type::Function {
            ret: Some(Type::pointer_to(Some(Type::char_()))),
            params: Some(vec![Type::int()]),
            variadic: true,
        })));
        let cptr = synth(Type::Qualified {
            kw: "const",
            target: Some(Type::pointer_to(Some(synth(Type::Qualified {
                kw: "const",
                target: Some(Type::char_()),
            })))),
        });
        let s = synth(Type::Struct {
            kw: "struct",
            name: Some("S".into()),
            size: 100,
            members: vec![
                Member {
                    name: Some("type".into()),
                    ty: node.clone(),
                    offset: 0,
                    bits: None,
                },
                Member {
                    name: Some("planTree".into()),
                    ty: Type::pointer_to(Some(plan.clone())),
                    offset: 8,
                    bits: None,
                },
                Member {
                    name: Some("name".into()),
                    ty: chars,
                    offset: 16,
                    bits: None,
                },
                Member {
                    name: Some("fn".into()),
                    ty: fnptr,
                    offset: 80,
                    bits: None,
                },
                Member {
                    name: Some("flag".into()),
                    ty: Type::int(),
                    offset: 88,
                    bits: Some((704, 1)),
                },
                Member {
                    name: Some("p".into()),
                    ty: cptr,
                    offset: 92,
                    bits: None,
                },
            ],
            declaration: false,
        });
        let t = synth(Type::Typedef {
            name: "S".into(),
            target: Some(s),
        });
        assert_eq!(
            ptype(&env, &Type::pointer_to(Some(t.clone()))),
            "struct S {\n    NodeTag type;\n    struct Plan *planTree;\n    char name[64];\n    \
             char *(*fn)(int, ...);\n    int flag : 1;\n    const char * const p;\n} *"
        );
        assert_eq!(whatis(&env, &t, true), "struct S");
        assert_eq!(whatis(&env, &t, false), "S");
        assert_eq!(ptype(&env, &node), "int");
    }

    #[test]
    fn enums_write_values_that_do_not_follow() {
        let e = enum_body(
            Some("E"),
            &[("A".into(), 0), ("B".into(), 1), ("C".into(), 5)],
        );
        assert_eq!(e, "enum E {A, B, C = 5}");
    }
}
