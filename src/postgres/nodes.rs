//! PostgreSQL's node trees read from memory (`pprint`): the `NodeTag` at a
//! node's start names its struct (enum `NodeTag`'s `T_Foo` is struct
//! `Foo`, both from DWARF), each field is printed by its DWARF type, a
//! `List` is iterated by its own layout (the array `elements` of 13 to 18), all in the shape of PostgreSQL's
//! `nodeToString` (`{SEQSCAN :startup_cost 0 ... :targetlist (...)}`).
//! Nothing is called in the backend: one read per node (its whole struct)
//! and one per list's cells.
//!
//! Here: the entry points (`pprint`, `dynamic_tag`), the limits, and the
//! node types as DWARF gives them (tags, the struct of a tag, node-headed
//! structs, members inside unions); the printer that walks a tree in
//! nodes/printer.rs.

pub mod cells;
pub mod notes;
mod printer;

use super::backend::Backend;
use crate::debuginfo::types::{Type, TypeRef, TypeSource, strip};
use crate::expr::eval::Scalar;
use crate::expr::parse::parse_in;
use anyhow::{Result, bail};
use std::collections::HashMap;
use std::fmt::Write;

pub use printer::render;

/// How much of a tree `pprint` shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Nodes nested deeper than this are shown as `{NAME ...}`.
    pub depth: usize,
    /// At most this many elements of a list (and bytes of a string / 8).
    pub width: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            depth: 32,
            width: 100,
        }
    }
}

/// At most this many lines of output: a tree bigger than that is cut.
const MAX_LINES: usize = 100_000;

/// `pprint EXPR`: the node tree EXPR (a pointer) points to.
pub fn pprint(b: &mut dyn Backend, expr: &str, lim: Limits) -> Result<String> {
    let e = parse_in(expr, b.di())?;
    let (sc, ty) = b.eval_scalar(&e)?;
    let di = b.di();
    if !matches!(&*strip(di, &ty), Type::Pointer { .. }) {
        bail!(
            "pprint: '{}' is a {}, not a pointer: give a Node * (or Plan *, List *, Query * ...), \
             e.g. pprint queryDesc->plannedstmt",
            crate::shown::shown(expr),
            crate::debuginfo::types::type_name(di, &ty)
        );
    }
    let addr = match sc {
        Scalar::I(i) => i as u64,
        Scalar::U(u) => u,
        Scalar::F(_) => bail!("pprint: '{}' is not a pointer", crate::shown::shown(expr)),
    };
    let read = |a: u64, buf: &mut [u8]| b.read(a, buf);
    render(di, &read, addr, lim)
}

/// Reads the backend's memory: `Backend::read`.
pub type Mem<'a> = &'a dyn Fn(u64, &mut [u8]) -> Result<()>;

/// `print`'s note for a pointer to a node: the NodeTag at `ptr` when `ty`
/// is a pointer to a struct that starts with one (Node *, Plan *, Expr *,
/// List * ...), e.g. "T_SeqScan"; None otherwise, or when what `ptr`
/// points to is not a known tag.
pub fn dynamic_tag(b: &dyn Backend, ty: &TypeRef, ptr: u64) -> Option<String> {
    if ptr == 0 {
        return None;
    }
    let di = b.di();
    let Type::Pointer { target: Some(t) } = &*strip(di, ty) else {
        return None;
    };
    if !node_headed(di, t) {
        return None;
    }
    let tag = b.read_i32(ptr).ok()? as i64;
    let Type::Enum { values, .. } = &*strip(di, &di.type_by_name("NodeTag")?) else {
        return None;
    };
    values
        .iter()
        .find(|(_, v)| *v == tag)
        .map(|(n, _)| n.clone())
}

/// The NodeTag names by value, from the binary's enum NodeTag.
pub fn node_tags(di: &dyn TypeSource) -> Result<HashMap<i64, String>> {
    let Some(t) = di.type_by_name("NodeTag") else {
        bail!(
            "no enum NodeTag in this binary's debug info: pprint needs PostgreSQL's DWARF \
             (install its debug symbols)"
        );
    };
    match &*strip(di, &t) {
        Type::Enum { values, .. } if !values.is_empty() => Ok(values
            .iter()
            .map(|(n, v)| (*v, n.clone()))
            .collect::<HashMap<_, _>>()),
        _ => bail!("NodeTag in this binary's debug info is not an enum: pprint cannot name nodes"),
    }
}

/// The name nodeToString writes for tag `T_Foo`: FOO.
pub fn out_name(tag: &str) -> String {
    tag.strip_prefix("T_").unwrap_or(tag).to_uppercase()
}

/// The struct a tag's node is: `T_Foo` is struct Foo; the value nodes of
/// 13-14 (T_Integer, T_String, ...) share struct Value; the list tags
/// share List.
fn struct_name(tag: &str) -> Vec<String> {
    let base = tag.strip_prefix("T_").unwrap_or(tag);
    match base {
        "IntList" | "OidList" | "XidList" => vec!["List".into()],
        "Integer" | "Float" | "String" | "BitString" | "Boolean" | "Null" => {
            vec![base.to_string(), "Value".into()]
        }
        _ => vec![base.to_string()],
    }
}

/// Whether a type is a struct whose first member is `NodeTag type` (or a
/// struct that begins so: Plan in SeqScan's Scan).
fn node_headed(ts: &dyn TypeSource, t: &TypeRef) -> bool {
    let mut cur = strip(ts, t);
    for _ in 0..8 {
        let Type::Struct { members, .. } = &*cur else {
            return false;
        };
        let Some(m) = members.first() else {
            return false;
        };
        if m.offset != 0 || m.bits.is_some() {
            return false;
        }
        if is_nodetag(ts, &m.ty) {
            return true;
        }
        cur = strip(ts, &m.ty);
    }
    false
}

fn is_nodetag(ts: &dyn TypeSource, t: &TypeRef) -> bool {
    matches!(&*ts.resolve(t), Type::Typedef { name, .. } if name == "NodeTag")
}

fn struct_named(t: &Type) -> Option<&str> {
    match t {
        Type::Struct { name: Some(n), .. } => Some(n),
        _ => None,
    }
}

/// Member `name` of a struct or union (looked for inside unnamed or named
/// unions too): its offset and type.
fn find_member(ts: &dyn TypeSource, t: &TypeRef, name: &str, n: usize) -> Option<(u64, TypeRef)> {
    if n > 4 {
        return None;
    }
    let Type::Struct { members, .. } = &*strip(ts, t) else {
        return None;
    };
    for m in members {
        if m.name.as_deref() == Some(name) {
            return Some((m.offset, m.ty.clone()));
        }
    }
    members
        .iter()
        .find_map(|m| find_member(ts, &m.ty, name, n + 1).map(|(o, t)| (m.offset + o, t)))
}

fn escape(s: &[u8]) -> String {
    let mut o = String::new();
    for &c in s {
        match c {
            b'"' => o.push_str("\\\""),
            b'\\' => o.push_str("\\\\"),
            b'\n' => o.push_str("\\n"),
            c if c.is_ascii_graphic() || c == b' ' => o.push(c as char),
            c => {
                let _ = write!(o, "\\{c:03o}");
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::types::Member;
    use std::rc::Rc;

    #[test]
    fn names_from_tags() {
        assert_eq!(out_name("T_SeqScan"), "SEQSCAN");
        assert_eq!(out_name("T_PlannedStmt"), "PLANNEDSTMT");
        assert_eq!(struct_name("T_OidList"), ["List"]);
        assert_eq!(struct_name("T_String"), ["String", "Value"]);
        assert_eq!(struct_name("T_TargetEntry"), ["TargetEntry"]);
    }

    #[test]
    fn escapes() {
        assert_eq!(escape(b"a\"b\n\x01"), "a\\\"b\\n\\001");
    }

    // ---- a tree over made-up types (the layout of 13+) and memory

    fn syn(t: Type) -> TypeRef {
        TypeRef::Synth(Rc::new(t))
    }

    fn m(name: &str, ty: TypeRef, offset: u64) -> Member {
        Member {
            name: Some(name.into()),
            ty,
            offset,
            bits: None,
        }
    }

    fn st(kw: &'static str, name: &str, size: u64, members: Vec<Member>) -> TypeRef {
        syn(Type::Struct {
            kw,
            name: Some(name.into()),
            size,
            members,
            declaration: false,
        })
    }

    struct Types(HashMap<String, TypeRef>);

    impl TypeSource for Types {
        fn resolve(&self, t: &TypeRef) -> Rc<Type> {
            match t {
                TypeRef::Synth(t) => t.clone(),
                TypeRef::Named(n) => self.resolve(&self.0[n]),
                TypeRef::Die(_) => Rc::new(Type::Void),
            }
        }
        fn type_by_name(&self, name: &str) -> Option<TypeRef> {
            self.0.get(name).cloned()
        }
    }

    fn types() -> Types {
        let tag = syn(Type::Typedef {
            name: "NodeTag".into(),
            target: Some(syn(Type::Enum {
                name: None,
                size: 4,
                signed: false,
                values: ["T_List", "T_IntList", "T_Var", "T_SeqScan", "T_Plan"]
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.to_string(), i as i64 + 1))
                    .collect(),
            })),
        });
        let int = Type::int();
        let ptr = |t: TypeRef| Type::pointer_to(Some(t));
        let cell = st(
            "union",
            "ListCell",
            8,
            vec![
                m("ptr_value", Type::pointer_to(None), 0),
                m("int_value", int.clone(), 0),
            ],
        );
        let list = st(
            "struct",
            "List",
            24,
            vec![
                m("type", tag.clone(), 0),
                m("length", int.clone(), 4),
                m("max_length", int.clone(), 8),
                m("elements", ptr(cell), 16),
            ],
        );
        let expr = st("struct", "Expr", 4, vec![m("type", tag.clone(), 0)]);
        let var = st(
            "struct",
            "Var",
            12,
            vec![
                m("xpr", expr, 0),
                m("varno", int.clone(), 4),
                m("varattno", int.clone(), 8),
            ],
        );
        let bms = st(
            "struct",
            "Bitmapset",
            8,
            vec![
                m("nwords", int.clone(), 0),
                m(
                    "words",
                    syn(Type::Array {
                        elem: Type::ulong(),
                        count: None,
                    }),
                    8,
                ),
            ],
        );
        let plan = st(
            "struct",
            "Plan",
            40,
            vec![
                m("type", tag.clone(), 0),
                m("startup_cost", Type::double(), 8),
                m("targetlist", ptr(list.clone()), 16),
                m("lefttree", ptr(TypeRef::Named("Plan".into())), 24),
                m("extParam", ptr(bms.clone()), 32),
            ],
        );
        let scan = st(
            "struct",
            "Scan",
            48,
            vec![m("plan", plan.clone(), 0), m("scanrelid", int.clone(), 40)],
        );
        let seqscan = st("struct", "SeqScan", 48, vec![m("scan", scan, 0)]);
        Types(HashMap::from([
            ("NodeTag".into(), tag),
            ("List".into(), list),
            ("Var".into(), var),
            ("Bitmapset".into(), bms),
            ("Plan".into(), plan),
            ("SeqScan".into(), seqscan),
        ]))
    }

    fn le(parts: &[u64], sizes: &[usize]) -> Vec<u8> {
        let mut v = Vec::new();
        for (p, s) in parts.iter().zip(sizes) {
            v.extend_from_slice(&p.to_le_bytes()[..*s]);
        }
        v
    }

    /// A SeqScan whose targetlist has two Vars, whose lefttree is itself
    /// (a cycle), with a Bitmapset; and an IntList.
    fn memory() -> HashMap<u64, Vec<u8>> {
        let mut mem = HashMap::new();
        let (scan, list, cells, v1, v2, bms, ints, icells) = (
            0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 0x8000,
        );
        let mut s = le(&[4, 0], &[4, 4]);
        s.extend(1.5f64.to_le_bytes());
        s.extend(le(&[list, scan, bms, 7], &[8, 8, 8, 8]));
        mem.insert(scan, s);
        mem.insert(list, le(&[1, 2, 2, cells], &[4, 4, 8, 8]));
        mem.insert(cells, le(&[v1, v2], &[8, 8]));
        mem.insert(v1, le(&[3, 1, 1], &[4, 4, 4]));
        mem.insert(v2, le(&[3, 1, 2], &[4, 4, 4]));
        mem.insert(bms, le(&[1, 0, 0b1010], &[4, 4, 8]));
        mem.insert(ints, le(&[2, 3, 3, icells], &[4, 4, 8, 8]));
        mem.insert(icells, le(&[5, 6, 7], &[8, 8, 8]));
        mem.insert(0x9000, le(&[99], &[4]));
        mem
    }

    fn show(addr: u64, lim: Limits) -> String {
        let mem = memory();
        let read = |a: u64, buf: &mut [u8]| -> Result<()> {
            for (start, bytes) in &mem {
                if a >= *start && a + buf.len() as u64 <= start + bytes.len() as u64 {
                    let o = (a - start) as usize;
                    buf.copy_from_slice(&bytes[o..o + buf.len()]);
                    return Ok(());
                }
            }
            bail!("Cannot access memory at address {a:#x}")
        };
        render(&types(), &read, addr, lim).unwrap()
    }

    #[test]
    fn a_tree_in_node_to_string_shape() {
        let out = show(0x1000, Limits::default());
        assert_eq!(
            out,
            "{SEQSCAN\n  :startup_cost 1.5\n  :targetlist (\n    {VAR\n      :varno 1\n      \
             :varattno 1}\n    {VAR\n      :varno 1\n      :varattno 2}\n  )\n  \
             :lefttree {SEQSCAN <cycle: 0x1000 is above>}\n  :extParam (b 1 3)\n  \
             :scanrelid 7}"
        );
    }

    #[test]
    fn limits_and_int_lists() {
        let out = show(0x1000, Limits { depth: 1, width: 1 });
        assert!(
            out.contains("{VAR ...} (0x4000, deeper than --depth)"),
            "{out}"
        );
        assert!(out.contains("\n    ... 1 more\n  )"), "{out}");
        assert!(!out.contains("0x5000"), "{out}");
        assert_eq!(show(0x7000, Limits::default()), "(i 5 6 7)");
        assert_eq!(
            show(0x7000, Limits { depth: 1, width: 2 }),
            "(i 5 6 ... 1 more)"
        );
        assert_eq!(show(0, Limits::default()), "<>");
        assert_eq!(
            show(0x10, Limits::default()),
            "<cannot read a node at 0x10>"
        );
        assert_eq!(
            show(0x9000, Limits::default()),
            "<not a node at 0x9000: NodeTag 99>"
        );
    }
}
