//! What `print` adds after a `List *` or a `Bitmapset *`: the contents,
//! as gdb's pretty-printers show a container's
//! (`(List *) 0x... [T_IntList] of length 3 = {1, 2, 3}`), within
//! `print elements` (gdb's 200), read from memory.  An OidList's OIDs
//! that the relcache holds are followed by their relation's name, as a
//! lone `Oid` is.

use super::cells::{ListCells, bitmapset_members, read_list};
use super::{Mem, node_tags, struct_named};
use crate::debuginfo::types::{Type, TypeRef, TypeSource, strip};
use crate::expr::format::PRINT_ELEMENTS;
use std::fmt::Write;

/// The contents of what the pointer `p` to `target` points to, when it is
/// a List (tagged `tag`) or a Bitmapset; None for anything else.
pub fn contents(
    ts: &dyn TypeSource,
    mem: Mem<'_>,
    target: &TypeRef,
    p: u64,
    tag: Option<&str>,
    oid_name: &dyn Fn(u32) -> Option<String>,
) -> Option<String> {
    let t = strip(ts, target);
    match (struct_named(&t)?, tag) {
        ("Bitmapset", _) => Some(match bitmapset_members(mem, &t, p) {
            Ok(m) => format!("= {}", braces(m.iter().map(|x| x.to_string()), m.len())),
            Err(e) => e,
        }),
        (_, Some(tag @ ("T_List" | "T_IntList" | "T_OidList" | "T_XidList"))) => {
            let list = strip(ts, &ts.type_by_name("List")?);
            Some(match read_list(ts, mem, &list, p, tag, PRINT_ELEMENTS) {
                Ok(c) => list_text(ts, mem, &c, tag, oid_name),
                Err(e) => e,
            })
        }
        _ => None,
    }
}

/// `{a, b...}`: `shown` of `total` items, gdb's `...` when cut.
fn braces(items: impl Iterator<Item = String>, total: usize) -> String {
    let items: Vec<String> = items.take(PRINT_ELEMENTS).collect();
    let cut = if total > items.len() { "..." } else { "" };
    format!("{{{}{cut}}}", items.join(", "))
}

fn list_text(
    ts: &dyn TypeSource,
    mem: Mem<'_>,
    c: &ListCells,
    tag: &str,
    oid_name: &dyn Fn(u32) -> Option<String>,
) -> String {
    let signed = matches!(
        &*strip(ts, &c.value_ty),
        Type::Base { enc, .. } if matches!(enc, crate::debuginfo::types::Encoding::Signed)
    );
    let tags = if tag == "T_List" {
        node_tags(ts).ok()
    } else {
        None
    };
    let items = c.values.iter().map(|(_, v)| {
        let w = ListCells::word(v);
        match (tag, &tags) {
            ("T_List", Some(tags)) => {
                let mut s = format!("{w:#x}");
                let mut b = [0u8; 4];
                if w != 0
                    && mem(w, &mut b).is_ok()
                    && let Some(name) = tags.get(&(i32::from_le_bytes(b) as i64))
                {
                    let _ = write!(s, " [{name}]");
                }
                s
            }
            ("T_List", None) => format!("{w:#x}"),
            ("T_OidList", _) => match oid_name(w as u32) {
                Some(name) => format!("{w} (relation {name})"),
                None => w.to_string(),
            },
            _ if signed && v.len() == 4 => (w as u32 as i32).to_string(),
            _ => w.to_string(),
        }
    });
    format!("of length {} = {}", c.length, braces(items, c.length))
}
