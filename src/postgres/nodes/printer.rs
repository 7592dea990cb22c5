//! The printer of a node tree (`render`): it walks the tree from the
//! root, reading each node's struct and each list's cells, and writes
//! every field by its DWARF type in nodeToString's shape, within the
//! depth, width and line limits; the node types it goes by are in
//! nodes.rs.

use super::cells::{ListCells, bitmapset_members, read_list};
use super::{
    Limits, MAX_LINES, Mem, escape, is_nodetag, node_headed, node_tags, out_name, struct_name,
    struct_named,
};
use crate::debuginfo::types::{Encoding, Member, Type, TypeRef, TypeSource, size_of, strip};
use crate::expr::eval::{Scalar, scalar_from};
use anyhow::Result;
use std::collections::HashMap;
use std::fmt::Write;
use std::rc::Rc;

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
        crate::postgres::backend::read_cstr_with(self.mem, addr, max)
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
            -1 => {
                use crate::postgres::datum::{Varlena, read_varlena};
                match read_varlena(self.mem, p, max) {
                    Err(_) => "<cannot read>".to_string(),
                    Ok(Varlena::Inline { len, data, .. }) => shown(&data, len),
                    Ok(Varlena::External) => "(TOAST pointer)".to_string(),
                    Ok(Varlena::Compressed { .. }) => "(compressed)".to_string(),
                }
            }
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
        let Some(bms) = self.struct_type("Bitmapset") else {
            let _ = write!(self.out, "{p:#x}");
            return;
        };
        match bitmapset_members(self.mem, &bms, p) {
            Ok(m) => {
                self.out.push_str("(b");
                for x in m {
                    let _ = write!(self.out, " {x}");
                }
                self.out.push(')');
            }
            Err(e) => self.out.push_str(&e),
        }
    }

    /// A List of any tag: `(` its elements `)`; `(i 1 2)`, `(o ...)`,
    /// `(x ...)` for integers, OIDs and transaction ids (cells.rs reads
    /// them).
    fn list(&mut self, addr: u64, tag: &str, indent: usize, depth: usize) {
        let Some(list) = self.struct_type("List") else {
            let _ = write!(self.out, "<no struct List in the debug info ({addr:#x})>");
            return;
        };
        let cells = match read_list(self.ts, self.mem, &list, addr, tag, self.lim.width) {
            Ok(c) => c,
            Err(e) => {
                self.out.push_str(&e);
                return;
            }
        };
        let kind = match tag {
            "T_IntList" => "i ",
            "T_OidList" => "o ",
            "T_XidList" => "x ",
            _ => "",
        };
        self.out.push('(');
        self.out.push_str(kind);
        self.path.push(addr);
        for (k, (at, v)) in cells.values.iter().enumerate() {
            if kind.is_empty() {
                if !self.line(indent + 2) {
                    break;
                }
                self.node(ListCells::word(v), indent + 2, depth);
            } else {
                if k > 0 {
                    self.out.push(' ');
                }
                self.value(&cells.value_ty, v, *at, indent, depth);
            }
        }
        self.path.pop();
        let shown = cells.values.len();
        if shown < cells.length {
            if kind.is_empty() {
                self.line(indent + 2);
            } else {
                self.out.push(' ');
            }
            let _ = write!(self.out, "... {} more", cells.length - shown);
        }
        if kind.is_empty() {
            self.line(indent);
        }
        self.out.push(')');
    }
}
