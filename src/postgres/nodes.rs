//! PostgreSQL's node trees read from memory (`pprint`): the `NodeTag` at a
//! node's start names its struct (enum `NodeTag`'s `T_Foo` is struct
//! `Foo`, both from DWARF), each field is printed by its DWARF type, a
//! `List` is iterated by its own layout (the array `elements` of 13 to 18), all in the shape of PostgreSQL's
//! `nodeToString` (`{SEQSCAN :startup_cost 0 ... :targetlist (...)}`).
//! Nothing is called in the backend: one read per node (its whole struct)
//! and one per list's cells.

use super::backend::Backend;
use crate::debuginfo::types::{Encoding, Member, Type, TypeRef, TypeSource, size_of, strip};
use crate::expr::eval::{Scalar, scalar_from};
use crate::expr::parse::parse_in;
use anyhow::{Result, bail};
use std::collections::HashMap;
use std::fmt::Write;
use std::rc::Rc;

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

/// The tree at `addr` as pprint shows it, over types `ts` and memory
/// `mem`.
pub fn render(ts: &dyn TypeSource, mem: Mem<'_>, addr: u64, lim: Limits) -> Result<String> {
    let mut p = Printer {
        ts,
        mem,
        tags: node_tags(ts)?,
        lim,
        out: String::new(),
        path: Vec::new(),
        lines: 0,
        structs: HashMap::new(),
    };
    p.node(addr, 0, 0);
    if p.lines >= MAX_LINES {
        let _ = write!(
            p.out,
            "\n... cut at {MAX_LINES} lines (use --depth or --width)"
        );
    }
    Ok(p.out)
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

struct Printer<'a> {
    ts: &'a dyn TypeSource,
    mem: Mem<'a>,
    tags: HashMap<i64, String>,
    lim: Limits,
    out: String,
    /// The nodes from the root to the one printed (a pointer back up is a
    /// cycle: PlanState's plan, EState's ...).
    path: Vec<u64>,
    lines: usize,
    /// struct name -> its type (None: not in the debug info).
    structs: HashMap<String, Option<Rc<Type>>>,
}

impl Printer<'_> {
    fn di(&self) -> &dyn TypeSource {
        self.ts
    }

    fn read_bytes(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        let mut b = vec![0u8; len];
        (self.mem)(addr, &mut b)?;
        Ok(b)
    }

    fn read_i32(&self, addr: u64) -> Result<i32> {
        let b = self.read_bytes(addr, 4)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn read_cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>> {
        super::backend::read_cstr_with(self.mem, addr, max)
    }

    /// A new line at `indent`.
    fn line(&mut self, indent: usize) -> bool {
        if self.lines >= MAX_LINES {
            return false;
        }
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.lines += 1;
        for _ in 0..indent {
            self.out.push(' ');
        }
        true
    }

    fn struct_type(&mut self, name: &str) -> Option<Rc<Type>> {
        if let Some(t) = self.structs.get(name) {
            return t.clone();
        }
        let di = self.ts;
        let t = di
            .type_by_name(name)
            .or_else(|| di.type_by_name(&format!("struct {name}")))
            .map(|t| strip(di, &t))
            .filter(|t| matches!(&**t, Type::Struct { size, .. } if *size > 0));
        self.structs.insert(name.to_string(), t.clone());
        t
    }

    /// The node at `addr`, written after what the current line holds
    /// (its fields on lines at `indent` + 2).
    fn node(&mut self, addr: u64, indent: usize, depth: usize) {
        if addr == 0 {
            self.out.push_str("<>");
            return;
        }
        let tag = match self.read_i32(addr) {
            Ok(t) => t,
            Err(_) => {
                let _ = write!(self.out, "<cannot read a node at {addr:#x}>");
                return;
            }
        };
        let Some(tag) = self.tags.get(&(tag as i64)).cloned() else {
            let _ = write!(self.out, "<not a node at {addr:#x}: NodeTag {tag}>");
            return;
        };
        let name = out_name(&tag);
        if self.path.contains(&addr) {
            let _ = write!(self.out, "{{{name} <cycle: {addr:#x} is above>}}");
            return;
        }
        if tag.ends_with("List") && struct_name(&tag) == ["List"] {
            self.list(addr, &tag, indent, depth);
            return;
        }
        if depth >= self.lim.depth {
            let _ = write!(self.out, "{{{name} ...}} ({addr:#x}, deeper than --depth)");
            return;
        }
        let ty = struct_name(&tag).iter().find_map(|n| self.struct_type(n));
        let Some(ty) = ty else {
            let _ = write!(
                self.out,
                "{{{name}}} ({addr:#x}: no struct for {tag} in the debug info)"
            );
            return;
        };
        let Type::Struct { size, members, .. } = &*ty else {
            return;
        };
        let Ok(bytes) = self.read_bytes(addr, *size as usize) else {
            let _ = write!(
                self.out,
                "{{{name} <cannot read {size} bytes at {addr:#x}>}}"
            );
            return;
        };
        let _ = write!(self.out, "{{{name}");
        self.path.push(addr);
        self.fields(members, &bytes, 0, addr, "", indent + 2, depth, true);
        self.path.pop();
        self.out.push('}');
    }

    /// The members of a struct at `base` (in `bytes` from offset `at`),
    /// each as `:prefix.name value` on a line of its own.
    #[allow(clippy::too_many_arguments)]
    fn fields(
        &mut self,
        members: &[Member],
        bytes: &[u8],
        at: u64,
        base: u64,
        prefix: &str,
        indent: usize,
        depth: usize,
        head: bool,
    ) {
        for (i, m) in members.iter().enumerate() {
            let Some(mname) = m.name.as_deref() else {
                continue;
            };
            let off = at + m.offset;
            // the node's own tag, and the superclass (Plan in Scan in
            // SeqScan) flattened as nodeToString does
            if head && i == 0 && m.offset == 0 {
                if is_nodetag(self.di(), &m.ty) {
                    continue;
                }
                if node_headed(self.di(), &m.ty)
                    && let Type::Struct { members: sub, .. } = &*strip(self.di(), &m.ty)
                {
                    let sub = sub.clone();
                    self.fields(&sub, bytes, off, base, prefix, indent, depth, true);
                    continue;
                }
            }
            let full = format!("{prefix}{mname}");
            let t = strip(self.di(), &m.ty);
            if let Type::Struct {
                kw: "struct",
                members: sub,
                ..
            } = &*t
                && !sub.is_empty()
                && prefix.matches('.').count() < 4
            {
                let sub = sub.clone();
                self.fields(
                    &sub,
                    bytes,
                    off,
                    base,
                    &format!("{full}."),
                    indent,
                    depth,
                    false,
                );
                continue;
            }
            if !self.line(indent) {
                return;
            }
            let _ = write!(self.out, ":{full} ");
            let end = (off + size_of(self.di(), &m.ty)) as usize;
            let Some(raw) = bytes.get(off as usize..end.min(bytes.len())) else {
                self.out.push_str("<outside the struct>");
                continue;
            };
            if let Some((boff, bsize)) = m.bits {
                let start = (at * 8 + boff) / 8;
                let mut w = [0u8; 8];
                for (k, x) in w.iter_mut().enumerate() {
                    *x = bytes.get(start as usize + k).copied().unwrap_or(0);
                }
                let v = (u64::from_le_bytes(w) >> ((at * 8 + boff) % 8))
                    & if bsize >= 64 {
                        u64::MAX
                    } else {
                        (1 << bsize) - 1
                    };
                let _ = write!(self.out, "{v}");
                continue;
            }
            let raw = raw.to_vec();
            if mname == "constvalue" && prefix.is_empty() {
                let p = u64::from_le_bytes(
                    raw.get(..8)
                        .and_then(|r| r.try_into().ok())
                        .unwrap_or([0; 8]),
                );
                if let Some(text) = self.const_datum(members, bytes, at, p) {
                    self.out.push_str(&text);
                    continue;
                }
            }
            self.value(&m.ty, &raw, base + off, indent, depth);
        }
    }

    /// A value of type `ty` whose bytes are `raw` (at `addr` in the backend).
    fn value(&mut self, ty: &TypeRef, raw: &[u8], addr: u64, indent: usize, depth: usize) {
        let t = strip(self.di(), ty);
        match &*t {
            Type::Base { enc, size, .. } => match (enc, scalar_from(self.di(), ty, raw)) {
                (Encoding::Bool, Some(s)) => {
                    self.out.push_str(if s.truthy() { "true" } else { "false" })
                }
                (Encoding::SignedChar | Encoding::UnsignedChar, Some(s)) if *size == 1 => {
                    let c = s.as_i64() as u8;
                    if c.is_ascii_graphic() {
                        self.out.push(c as char);
                    } else {
                        let _ = write!(self.out, "{}", s.as_i64());
                    }
                }
                (_, Some(Scalar::F(f))) => {
                    let _ = write!(self.out, "{f}");
                }
                (_, Some(Scalar::I(i))) => {
                    let _ = write!(self.out, "{i}");
                }
                (_, Some(Scalar::U(u))) => {
                    let _ = write!(self.out, "{u}");
                }
                (_, None) => self.out.push('?'),
            },
            Type::Enum { values, .. } => match scalar_from(self.di(), ty, raw) {
                Some(s) => match values.iter().find(|(_, v)| *v == s.as_i64()) {
                    Some((n, _)) => self.out.push_str(n),
                    None => {
                        let _ = write!(self.out, "{}", s.as_i64());
                    }
                },
                None => self.out.push('?'),
            },
            Type::Pointer { target } => {
                let mut w = [0u8; 8];
                let n = raw.len().min(8);
                w[..n].copy_from_slice(&raw[..n]);
                let p = u64::from_le_bytes(w);
                if p == 0 {
                    self.out.push_str("<>");
                    return;
                }
                let Some(target) = target else {
                    let _ = write!(self.out, "{p:#x}");
                    return;
                };
                let tt = strip(self.di(), target);
                match &*tt {
                    Type::Base {
                        enc: Encoding::SignedChar | Encoding::UnsignedChar,
                        size: 1,
                        ..
                    } => self.string(p),
                    Type::Struct { .. } if struct_named(&tt) == Some("Bitmapset") => {
                        self.bitmapset(p)
                    }
                    Type::Struct { .. } if node_headed(self.di(), target) => {
                        self.node(p, indent, depth + 1)
                    }
                    _ => {
                        let _ = write!(self.out, "{p:#x}");
                    }
                }
            }
            Type::Array { elem, count } => {
                let et = strip(self.di(), elem);
                let esize = size_of(self.di(), elem) as usize;
                match (&*et, count) {
                    (
                        Type::Base {
                            enc: Encoding::SignedChar | Encoding::UnsignedChar,
                            size: 1,
                            ..
                        },
                        _,
                    ) => {
                        let s = raw.split(|&c| c == 0).next().unwrap_or(&[]);
                        let _ = write!(self.out, "\"{}\"", escape(s));
                    }
                    (Type::Base { .. } | Type::Enum { .. } | Type::Pointer { .. }, Some(c))
                        if esize > 0 && *c > 0 =>
                    {
                        let shown = (*c as usize).min(self.lim.width);
                        self.out.push('[');
                        for k in 0..shown {
                            if k > 0 {
                                self.out.push(' ');
                            }
                            let Some(e) = raw.get(k * esize..(k + 1) * esize) else {
                                break;
                            };
                            let e = e.to_vec();
                            self.value(elem, &e, addr + (k * esize) as u64, indent, depth);
                        }
                        if shown < *c as usize {
                            let _ = write!(self.out, " ... {} more", *c as usize - shown);
                        }
                        self.out.push(']');
                    }
                    _ => {
                        let _ = write!(self.out, "<array at {addr:#x}>");
                    }
                }
            }
            Type::Struct { members, .. } => {
                // a union (or a struct too deep to flatten): its first member
                match members.first() {
                    Some(m) if m.offset == 0 => {
                        let m = m.clone();
                        let n = (size_of(self.di(), &m.ty) as usize).min(raw.len());
                        self.value(&m.ty, &raw[..n], addr, indent, depth)
                    }
                    _ => {
                        let _ = write!(self.out, "<struct at {addr:#x}>");
                    }
                }
            }
            _ => {
                let _ = write!(self.out, "<at {addr:#x}>");
            }
        }
    }

    /// A Const's value that is not passed by value (`p` points to it):
    /// its address and, for a varlena held inline or a C string, its
    /// bytes (quoted when printable); a null Const's is `<>`.  None: by
    /// value (printed as the integer it is).
    fn const_datum(&self, members: &[Member], bytes: &[u8], at: u64, p: u64) -> Option<String> {
        let field = |n: &str, len: usize| -> Option<i64> {
            let m = members.iter().find(|m| m.name.as_deref() == Some(n))?;
            let o = (at + m.offset) as usize;
            let b = bytes.get(o..o + len)?;
            Some(match len {
                1 => b[0] as i64,
                _ => i32::from_le_bytes(b.try_into().ok()?) as i64,
            })
        };
        if field("constisnull", 1)? != 0 {
            return Some("<>".into());
        }
        if field("constbyval", 1)? != 0 {
            return None;
        }
        let len = field("constlen", 4)?;
        let max = self.lim.width.max(1) * 8;
        let shown = |data: &[u8], total: usize| -> String {
            let cut = &data[..data.len().min(max)];
            let more = if total > cut.len() { "..." } else { "" };
            if cut.iter().all(|c| c.is_ascii_graphic() || *c == b' ') {
                format!("\"{}\"{more}", escape(cut))
            } else {
                format!("[{total} bytes]")
            }
        };
        let body = match len {
            -1 => match self.read_bytes(p, 4) {
                Err(_) => "<cannot read>".to_string(),
                // a 1-byte header: short inline (0x01 alone: a TOAST pointer)
                Ok(h) if h[0] & 1 == 1 && h[0] != 1 => {
                    let n = (h[0] >> 1) as usize;
                    let data = self
                        .read_bytes(p + 1, n.saturating_sub(1).min(max))
                        .unwrap_or_default();
                    shown(&data, n.saturating_sub(1))
                }
                Ok(h) if h[0] == 1 => "(TOAST pointer)".to_string(),
                // a 4-byte header: 00 plain, 10 compressed
                Ok(h) if h[0] & 3 == 0 => {
                    let n = (u32::from_le_bytes([h[0], h[1], h[2], h[3]]) >> 2) as usize;
                    let data = self
                        .read_bytes(p + 4, n.saturating_sub(4).min(max))
                        .unwrap_or_default();
                    shown(&data, n.saturating_sub(4))
                }
                Ok(_) => "(compressed)".to_string(),
            },
            -2 => match self.read_cstr(p, max) {
                Ok(s) => shown(&s, s.len()),
                Err(_) => "<cannot read>".to_string(),
            },
            n if n > 0 => format!("[{n} bytes]"),
            _ => return Some(format!("{p:#x}")),
        };
        Some(format!("{p:#x} {body}"))
    }

    fn string(&mut self, p: u64) {
        match self.read_cstr(p, self.lim.width.max(1) * 8) {
            Ok(s) => {
                let _ = write!(self.out, "\"{}\"", escape(&s));
            }
            Err(_) => {
                let _ = write!(self.out, "<cannot read a string at {p:#x}>");
            }
        }
    }

    /// `(b 1 5)`: the members of the Bitmapset at `p`.
    fn bitmapset(&mut self, p: u64) {
        let Some(Type::Struct { members, .. }) = self.struct_type("Bitmapset").as_deref().cloned()
        else {
            let _ = write!(self.out, "{p:#x}");
            return;
        };
        let off = |n: &str| members.iter().find(|m| m.name.as_deref() == Some(n));
        let (Some(nw), Some(words)) = (off("nwords"), off("words")) else {
            let _ = write!(self.out, "{p:#x}");
            return;
        };
        let Ok(n) = self.read_i32(p + nw.offset) else {
            let _ = write!(self.out, "<cannot read a Bitmapset at {p:#x}>");
            return;
        };
        if !(0..=4096).contains(&n) {
            let _ = write!(self.out, "<not a Bitmapset at {p:#x}: nwords {n}>");
            return;
        }
        let Ok(w) = self.read_bytes(p + words.offset, n as usize * 8) else {
            let _ = write!(self.out, "<cannot read a Bitmapset at {p:#x}>");
            return;
        };
        self.out.push_str("(b");
        for (i, c) in w.chunks(8).enumerate() {
            let mut x = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            while x != 0 {
                let bit = x.trailing_zeros() as usize;
                let _ = write!(self.out, " {}", i * 64 + bit);
                x &= x - 1;
            }
        }
        self.out.push(')');
    }

    /// A List of any tag: `(` its elements `)`; `(i 1 2)`, `(o ...)`,
    /// `(x ...)` for integers, OIDs and transaction ids.  The layout of
    /// 13 to 18: `length` cells in the array `elements`, each a union
    /// ListCell (ptr_value, int_value, oid_value, xid_value), all from
    /// DWARF.
    fn list(&mut self, addr: u64, tag: &str, indent: usize, depth: usize) {
        let Some(Type::Struct { size, members, .. }) = self.struct_type("List").as_deref().cloned()
        else {
            let _ = write!(self.out, "<no struct List in the debug info ({addr:#x})>");
            return;
        };
        let Ok(bytes) = self.read_bytes(addr, size as usize) else {
            let _ = write!(self.out, "<cannot read a List at {addr:#x}>");
            return;
        };
        let member = |n: &str| members.iter().find(|m| m.name.as_deref() == Some(n));
        let word = |m: &Member, n: usize| -> u64 {
            let mut w = [0u8; 8];
            let o = m.offset as usize;
            if let Some(s) = bytes.get(o..o + n) {
                w[..n].copy_from_slice(s);
            }
            u64::from_le_bytes(w)
        };
        let (Some(len), Some(el)) = (member("length"), member("elements")) else {
            let _ = write!(
                self.out,
                "<a List without length and elements at {addr:#x}: a layout pprint does not know>"
            );
            return;
        };
        let length = word(len, 4) as i32;
        if !(0..=100_000_000).contains(&length) {
            let _ = write!(self.out, "<not a List at {addr:#x}: length {length}>");
            return;
        }
        let Type::Pointer {
            target: Some(cell_ty),
        } = &*strip(self.di(), &el.ty)
        else {
            let _ = write!(self.out, "<List.elements is not a pointer at {addr:#x}>");
            return;
        };
        let cs = size_of(self.di(), cell_ty).max(1) as usize;
        let elements = word(el, 8);
        let want = match tag {
            "T_IntList" => "int_value",
            "T_OidList" => "oid_value",
            "T_XidList" => "xid_value",
            _ => "ptr_value",
        };
        let Some((voff, vty)) = find_member(self.di(), cell_ty, want, 0) else {
            let _ = write!(self.out, "<ListCell without {want} at {addr:#x}>");
            return;
        };
        let vsize = (size_of(self.di(), &vty) as usize).clamp(1, 8);
        let kind = match tag {
            "T_IntList" => "i ",
            "T_OidList" => "o ",
            "T_XidList" => "x ",
            _ => "",
        };
        // the cells shown, in one read
        let shown = (length as usize).min(self.lim.width);
        let Ok(cells) = self.read_bytes(elements, shown * cs) else {
            let _ = write!(self.out, "<cannot read {shown} cells at {elements:#x}>");
            return;
        };
        self.out.push('(');
        self.out.push_str(kind);
        self.path.push(addr);
        for k in 0..shown {
            let o = k * cs + voff as usize;
            let Some(v) = cells.get(o..o + vsize) else {
                break;
            };
            let v = v.to_vec();
            if kind.is_empty() {
                if !self.line(indent + 2) {
                    break;
                }
                let mut w = [0u8; 8];
                w[..vsize].copy_from_slice(&v);
                self.node(u64::from_le_bytes(w), indent + 2, depth);
            } else {
                if k > 0 {
                    self.out.push(' ');
                }
                self.value(&vty, &v, elements + o as u64, indent, depth);
            }
        }
        self.path.pop();
        if shown < length as usize {
            if kind.is_empty() {
                self.line(indent + 2);
            } else {
                self.out.push(' ');
            }
            let _ = write!(self.out, "... {} more", length as usize - shown);
        }
        if kind.is_empty() {
            self.line(indent);
        }
        self.out.push(')');
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
