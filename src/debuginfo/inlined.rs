//! A function's instances as address ranges: each inlined instance
//! (`DW_TAG_inlined_subroutine` whose `DW_AT_abstract_origin` is the
//! function) and each out-of-line copy, with all its ranges.  Read
//! straight from .debug_info: the index keeps one location per entry
//! address, and two instances may share one.

use super::DebugInfo;
use super::index::{die_offset, global_ref};
use gimli::constants as dw;
use std::collections::HashSet;

/// One instance of a function.
#[derive(Clone, Debug)]
pub struct Instance {
    /// The function's name (one of those asked for).
    pub name: String,
    /// .debug_info offset of the concrete DIE.
    pub die: u64,
    pub inlined: bool,
    /// Link-time ranges, end exclusive.
    pub ranges: Vec<(u64, u64)>,
}

/// An instance whose origin's name is not known yet: (origin, die,
/// inlined, ranges).
type Pending = (u64, u64, bool, Vec<(u64, u64)>);

impl DebugInfo {
    /// Every instance of the functions `names` with code (none without
    /// DWARF), in .debug_info order.
    pub fn instances(&self, names: &[&str]) -> Vec<Instance> {
        let mut named: std::collections::HashMap<u64, String> = Default::default();
        let mut pending: Vec<Pending> = Vec::new();
        let mut units = self.dwarf.units();
        while let Ok(Some(h)) = units.next() {
            let Ok(unit) = self.dwarf.unit(h) else {
                continue;
            };
            let mut cursor = unit.entries();
            while let Ok(Some(e)) = cursor.next_dfs() {
                let tag = e.tag();
                if tag != dw::DW_TAG_subprogram && tag != dw::DW_TAG_inlined_subroutine {
                    continue;
                }
                let off = die_offset(&self.dwarf, &unit, e.offset());
                if let Some(v) = e.attr_value(dw::DW_AT_name)
                    && let Ok(s) = self.dwarf.attr_string(&unit, v)
                    && let Some(n) = names.iter().find(|n| n.as_bytes() == s.slice())
                {
                    named.insert(off, n.to_string());
                }
                let Some(origin) = e
                    .attr_value(dw::DW_AT_abstract_origin)
                    .and_then(|v| global_ref(&self.dwarf, &unit, v))
                else {
                    continue;
                };
                let mut ranges = Vec::new();
                if let Ok(mut r) = self.dwarf.die_ranges(&unit, e) {
                    while let Ok(Some(range)) = r.next() {
                        if range.begin < range.end && range.begin != 0 {
                            ranges.push((range.begin, range.end));
                        }
                    }
                }
                pending.push((origin, off, tag == dw::DW_TAG_inlined_subroutine, ranges));
            }
        }
        let mut unnamed: HashSet<u64> = HashSet::new();
        let mut out = Vec::new();
        for (origin, die, inlined, ranges) in pending {
            let name = match named.get(&origin) {
                Some(n) => n.clone(),
                None if unnamed.contains(&origin) => continue,
                None => match self.die_name(origin) {
                    Some(n) if names.contains(&n.as_str()) => {
                        named.insert(origin, n.clone());
                        n
                    }
                    _ => {
                        unnamed.insert(origin);
                        continue;
                    }
                },
            };
            out.push(Instance {
                name,
                die,
                inlined,
                ranges,
            });
        }
        out
    }
}
