//! What a `List` and a `Bitmapset` hold, read from memory by their DWARF
//! layouts: shared by `pprint`'s printer and by `print`'s note after a
//! `List *` or `Bitmapset *`.  An error is the text shown in its place
//! (`<not a List at 0x...: length -3>`).

use super::{Mem, find_member};
use crate::debuginfo::types::{Type, TypeRef, TypeSource, size_of, strip};

/// A List's length and the first cells' values.
pub struct ListCells {
    pub length: usize,
    /// The address of the first cell.
    pub elements: u64,
    /// The cell member read (`ptr_value`, `int_value`, ...) and its type.
    pub value_ty: TypeRef,
    /// The first cells' values: each value's address and its bytes.
    pub values: Vec<(u64, Vec<u8>)>,
}

impl ListCells {
    /// A value as a little-endian word (a pointer, or an int/oid/xid).
    pub fn word(v: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        let n = v.len().min(8);
        w[..n].copy_from_slice(&v[..n]);
        u64::from_le_bytes(w)
    }
}

/// The cell member of a List tagged `tag` ("T_IntList" -> int_value ...).
pub fn cell_member(tag: &str) -> &'static str {
    match tag {
        "T_IntList" => "int_value",
        "T_OidList" => "oid_value",
        "T_XidList" => "xid_value",
        _ => "ptr_value",
    }
}

/// The List at `addr` (tagged `tag`), with at most `max` values read.
/// The layout of 13 to 18: `length` cells in the array `elements`, each a
/// union ListCell (ptr_value, int_value, oid_value, xid_value).
pub fn read_list(
    ts: &dyn TypeSource,
    mem: Mem<'_>,
    list: &Type,
    addr: u64,
    tag: &str,
    max: usize,
) -> Result<ListCells, String> {
    let Type::Struct { size, members, .. } = list else {
        return Err(format!("<no struct List in the debug info ({addr:#x})>"));
    };
    let mut bytes = vec![0u8; *size as usize];
    mem(addr, &mut bytes).map_err(|_| format!("<cannot read a List at {addr:#x}>"))?;
    let member = |n: &str| members.iter().find(|m| m.name.as_deref() == Some(n));
    let word = |off: u64, n: usize| {
        let o = off as usize;
        bytes.get(o..o + n).map(ListCells::word).unwrap_or_default()
    };
    let (Some(len), Some(el)) = (member("length"), member("elements")) else {
        return Err(format!(
            "<a List without length and elements at {addr:#x}: a layout pprint does not know>"
        ));
    };
    let length = word(len.offset, 4) as i32;
    if !(0..=100_000_000).contains(&length) {
        return Err(format!("<not a List at {addr:#x}: length {length}>"));
    }
    let Type::Pointer {
        target: Some(cell_ty),
    } = &*strip(ts, &el.ty)
    else {
        return Err(format!("<List.elements is not a pointer at {addr:#x}>"));
    };
    let cs = size_of(ts, cell_ty).max(1) as usize;
    let elements = word(el.offset, 8);
    let want = cell_member(tag);
    let Some((voff, vty)) = find_member(ts, cell_ty, want, 0) else {
        return Err(format!("<ListCell without {want} at {addr:#x}>"));
    };
    let vsize = (size_of(ts, &vty) as usize).clamp(1, 8);
    let shown = (length as usize).min(max);
    let mut cells = vec![0u8; shown * cs];
    if shown > 0 {
        mem(elements, &mut cells)
            .map_err(|_| format!("<cannot read {shown} cells at {elements:#x}>"))?;
    }
    let values = (0..shown)
        .filter_map(|k| {
            let o = k * cs + voff as usize;
            cells
                .get(o..o + vsize)
                .map(|v| (elements + o as u64, v.to_vec()))
        })
        .collect();
    Ok(ListCells {
        length: length as usize,
        elements,
        value_ty: vty,
        values,
    })
}

/// The members of the Bitmapset at `p` (`bms` the struct Bitmapset).
pub fn bitmapset_members(mem: Mem<'_>, bms: &Type, p: u64) -> Result<Vec<usize>, String> {
    let Type::Struct { members, .. } = bms else {
        return Err(format!("{p:#x}"));
    };
    let off = |n: &str| members.iter().find(|m| m.name.as_deref() == Some(n));
    let (Some(nw), Some(words)) = (off("nwords"), off("words")) else {
        return Err(format!("{p:#x}"));
    };
    let cannot = || format!("<cannot read a Bitmapset at {p:#x}>");
    let mut nb = [0u8; 4];
    mem(p + nw.offset, &mut nb).map_err(|_| cannot())?;
    let n = i32::from_le_bytes(nb);
    if !(0..=4096).contains(&n) {
        return Err(format!("<not a Bitmapset at {p:#x}: nwords {n}>"));
    }
    let mut w = vec![0u8; n as usize * 8];
    mem(p + words.offset, &mut w).map_err(|_| cannot())?;
    let mut out = Vec::new();
    for (i, c) in w.chunks(8).enumerate() {
        let mut x = ListCells::word(c);
        while x != 0 {
            out.push(i * 64 + x.trailing_zeros() as usize);
            x &= x - 1;
        }
    }
    Ok(out)
}
