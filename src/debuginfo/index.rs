//! The name index of a binary's DWARF: every function with all its locations
//! (out-of-line copies including gcc clones, and every inlined instance),
//! global variables and named types.  Built in one pass over .debug_info
//! (two threads) and cached on disk by build-id, so a second attach to the
//! same build reads a small file instead of walking the DWARF again.

use super::{Dwarf, R};
use anyhow::{Result, anyhow};
use gimli::{AttributeValue, DwTag, constants as dw};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;

/// Bump when the layout of `Index` changes.
const FORMAT: u32 = 3;

/// One place where a function's code starts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FuncLoc {
    /// Link-time address (add the load bias for a runtime address).
    pub addr: u64,
    /// An inlined instance (DW_TAG_inlined_subroutine) rather than an
    /// out-of-line copy.
    pub inlined: bool,
    /// .debug_info offset of the concrete DIE.
    pub die: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct GlobalVar {
    pub addr: u64,
    pub die: u64,
}

#[derive(Serialize, Deserialize, Default)]
pub struct Index {
    pub format: u32,
    pub build_id: String,
    pub functions: HashMap<String, Vec<FuncLoc>>,
    pub globals: HashMap<String, GlobalVar>,
    /// "struct X", "union X", "enum X" for tagged definitions, plain names
    /// for typedefs and base types.
    pub types: HashMap<String, u64>,
    /// .debug_info offsets of every unit header, ascending.
    pub units: Vec<u64>,
}

impl Index {
    pub fn cache_path(build_id: &str) -> Option<PathBuf> {
        let dir = match std::env::var_os("PGDBG_INDEX_CACHE") {
            Some(d) => PathBuf::from(d),
            None => {
                let base = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache"))
                    })?;
                base.join("pgdbg").join("index")
            }
        };
        Some(dir.join(format!("{build_id}.idx")))
    }

    pub fn load_cached(build_id: &str) -> Option<Index> {
        let p = Self::cache_path(build_id)?;
        let data = std::fs::read(&p).ok()?;
        let idx: Index = bincode::deserialize(&data).ok()?;
        if idx.format == FORMAT && idx.build_id == build_id {
            Some(idx)
        } else {
            None
        }
    }

    pub fn store_cached(&self) {
        if self.build_id.is_empty() {
            return;
        }
        if let Some(p) = Self::cache_path(&self.build_id) {
            if let Some(d) = p.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            if let Ok(data) = bincode::serialize(self) {
                let tmp = p.with_extension(format!("tmp{}", std::process::id()));
                if std::fs::write(&tmp, data).is_ok() {
                    let _ = std::fs::rename(&tmp, &p);
                }
            }
        }
    }

    /// Walk all units.  `entry_of` maps a function's ranges to its entry for
    /// functions split into hot/cold parts (chosen by the caller from the
    /// ELF symbols).
    pub fn build(
        dwarf: &Dwarf,
        build_id: &str,
        entry_of: &(dyn Fn(&[u64]) -> u64 + Sync),
    ) -> Result<Index> {
        let mut headers = Vec::new();
        let mut it = dwarf.units();
        while let Some(h) = it
            .next()
            .map_err(|e| anyhow!("bad DWARF unit header: {e}"))?
        {
            headers.push(h);
        }
        let units: Vec<u64> = headers
            .iter()
            .filter_map(|h| h.debug_info_offset().map(|o| o.0 as u64))
            .collect();
        // Split the units over two threads by size.
        let total: u64 = headers
            .iter()
            .map(|h| h.length_including_self() as u64)
            .sum();
        let mut split = headers.len();
        let mut acc = 0u64;
        for (i, h) in headers.iter().enumerate() {
            acc += h.length_including_self() as u64;
            if acc * 2 >= total {
                split = i + 1;
                break;
            }
        }
        let (a, b) = headers.split_at(split);
        let (ra, rb) = std::thread::scope(|s| {
            let ha = s.spawn(|| scan_units(dwarf, a, entry_of));
            let rb = scan_units(dwarf, b, entry_of);
            (ha.join().expect("index thread panicked"), rb)
        });
        let mut raw = ra?;
        raw.merge(rb?);
        let mut idx = raw.finish();
        idx.format = FORMAT;
        idx.build_id = build_id.to_string();
        idx.units = units;
        Ok(idx)
    }
}

/// Per-thread results before cross-unit references are resolved.
#[derive(Default)]
struct RawIndex {
    /// DIE offset -> name, for named subprograms and variables.
    names: HashMap<u64, String>,
    /// unnamed DIE -> the DIE it refers to (abstract_origin/specification).
    refs: HashMap<u64, u64>,
    /// (named-or-ref DIE, loc)
    funcs: Vec<(u64, FuncLoc)>,
    /// (named-or-ref DIE, var)
    vars: Vec<(u64, GlobalVar)>,
    types: HashMap<String, u64>,
}

impl RawIndex {
    fn merge(&mut self, o: RawIndex) {
        self.names.extend(o.names);
        self.refs.extend(o.refs);
        self.funcs.extend(o.funcs);
        self.vars.extend(o.vars);
        for (k, v) in o.types {
            self.types.entry(k).or_insert(v);
        }
    }

    fn name_of(&self, mut die: u64) -> Option<&String> {
        for _ in 0..8 {
            if let Some(n) = self.names.get(&die) {
                return Some(n);
            }
            die = *self.refs.get(&die)?;
        }
        None
    }

    fn finish(self) -> Index {
        let mut idx = Index {
            types: self.types.clone(),
            ..Default::default()
        };
        for (key, loc) in &self.funcs {
            if let Some(n) = self.name_of(*key) {
                let v = idx.functions.entry(n.clone()).or_default();
                if !v.iter().any(|l| l.addr == loc.addr) {
                    v.push(loc.clone());
                }
            }
        }
        for v in idx.functions.values_mut() {
            v.sort_by_key(|l| (l.inlined, l.addr));
        }
        for (key, var) in &self.vars {
            if let Some(n) = self.name_of(*key) {
                idx.globals.entry(n.clone()).or_insert_with(|| var.clone());
            }
        }
        idx
    }
}

fn scan_units(
    dwarf: &Dwarf,
    headers: &[gimli::UnitHeader<R>],
    entry_of: &(dyn Fn(&[u64]) -> u64 + Sync),
) -> Result<RawIndex> {
    let mut raw = RawIndex::default();
    for h in headers {
        let unit = match dwarf.unit(*h) {
            Ok(u) => u,
            Err(_) => continue,
        };
        scan_unit(dwarf, &unit, &mut raw, entry_of)?;
    }
    Ok(raw)
}

pub fn global_ref(unit: &gimli::Unit<R>, v: AttributeValue<R>) -> Option<u64> {
    match v {
        AttributeValue::UnitRef(o) => o.to_debug_info_offset(&unit.header).map(|x| x.0 as u64),
        AttributeValue::DebugInfoRef(o) => Some(o.0 as u64),
        _ => None,
    }
}

pub fn die_offset(unit: &gimli::Unit<R>, o: gimli::UnitOffset<usize>) -> u64 {
    o.to_debug_info_offset(&unit.header)
        .map(|x| x.0 as u64)
        .unwrap_or(0)
}

fn scan_unit(
    dwarf: &Dwarf,
    unit: &gimli::Unit<R>,
    raw: &mut RawIndex,
    entry_of: &(dyn Fn(&[u64]) -> u64 + Sync),
) -> Result<()> {
    let mut cursor = unit.entries();
    while let Some(e) = cursor
        .next_dfs()
        .map_err(|e| anyhow!("DWARF parse error: {e}"))?
    {
        let tag: DwTag = e.tag();
        let off = die_offset(unit, e.offset());
        match tag {
            dw::DW_TAG_subprogram => {
                if let Some(n) = e.attr_value(dw::DW_AT_name) {
                    if let Ok(s) = dwarf.attr_string(unit, n) {
                        raw.names
                            .insert(off, String::from_utf8_lossy(s.slice()).into_owned());
                    }
                } else if let Some(r) = e
                    .attr_value(dw::DW_AT_abstract_origin)
                    .or_else(|| e.attr_value(dw::DW_AT_specification))
                    .and_then(|v| global_ref(unit, v))
                {
                    raw.refs.insert(off, r);
                }
                let addr = match e.attr_value(dw::DW_AT_low_pc) {
                    Some(v) => dwarf.attr_address(unit, v).ok().flatten(),
                    None => match dwarf.die_ranges(unit, e) {
                        Ok(ranges) => {
                            let starts: Vec<u64> =
                                ranges.filter_map(|r| r.ok()).map(|r| r.begin).collect();
                            if starts.is_empty() {
                                None
                            } else {
                                Some(entry_of(&starts))
                            }
                        }
                        Err(_) => None,
                    },
                };
                if let Some(addr) = addr
                    && addr != 0
                    && !unit.header.is_tombstone_address(addr)
                {
                    raw.funcs.push((
                        off,
                        FuncLoc {
                            addr,
                            inlined: false,
                            die: off,
                        },
                    ));
                }
            }
            dw::DW_TAG_inlined_subroutine => {
                let origin = match e
                    .attr_value(dw::DW_AT_abstract_origin)
                    .and_then(|v| global_ref(unit, v))
                {
                    Some(o) => o,
                    None => continue,
                };
                let low = e
                    .attr_value(dw::DW_AT_low_pc)
                    .and_then(|v| dwarf.attr_address(unit, v).ok().flatten());
                let entry = match e.attr_value(dw::DW_AT_entry_pc) {
                    Some(AttributeValue::Udata(off)) => low.map(|l| l + off),
                    Some(v) => dwarf.attr_address(unit, v).ok().flatten(),
                    None => None,
                };
                let addr = match entry.or(low) {
                    Some(a) => Some(a),
                    None => dwarf
                        .die_ranges(unit, e)
                        .ok()
                        .and_then(|mut r| r.next().ok().flatten())
                        .map(|r| r.begin),
                };
                if let Some(addr) = addr
                    && addr != 0
                    && !unit.header.is_tombstone_address(addr)
                {
                    raw.funcs.push((
                        origin,
                        FuncLoc {
                            addr,
                            inlined: true,
                            die: off,
                        },
                    ));
                }
            }
            dw::DW_TAG_variable if e.depth() == 1 => {
                if let Some(n) = e.attr_value(dw::DW_AT_name) {
                    if let Ok(s) = dwarf.attr_string(unit, n) {
                        raw.names
                            .insert(off, String::from_utf8_lossy(s.slice()).into_owned());
                    }
                } else if let Some(r) = e
                    .attr_value(dw::DW_AT_specification)
                    .and_then(|v| global_ref(unit, v))
                {
                    raw.refs.insert(off, r);
                }
                if let Some(AttributeValue::Exprloc(expr)) = e.attr_value(dw::DW_AT_location)
                    && let Some(addr) = static_address(dwarf, unit, expr)
                {
                    raw.vars.push((off, GlobalVar { addr, die: off }));
                }
            }
            dw::DW_TAG_structure_type
            | dw::DW_TAG_union_type
            | dw::DW_TAG_enumeration_type
            | dw::DW_TAG_typedef
            | dw::DW_TAG_base_type
                if e.depth() == 1 =>
            {
                if e.attr_value(dw::DW_AT_declaration).is_some() {
                    continue;
                }
                let name = match e
                    .attr_value(dw::DW_AT_name)
                    .and_then(|n| dwarf.attr_string(unit, n).ok())
                {
                    Some(s) => String::from_utf8_lossy(s.slice()).into_owned(),
                    None => continue,
                };
                let key = match tag {
                    dw::DW_TAG_structure_type => format!("struct {name}"),
                    dw::DW_TAG_union_type => format!("union {name}"),
                    dw::DW_TAG_enumeration_type => format!("enum {name}"),
                    _ => name,
                };
                raw.types.entry(key).or_insert(off);
            }
            _ => {}
        }
    }
    Ok(())
}

/// The address of a `DW_OP_addr X` / `DW_OP_addrx N` location.
fn static_address(dwarf: &Dwarf, unit: &gimli::Unit<R>, expr: gimli::Expression<R>) -> Option<u64> {
    let mut ops = expr.operations(unit.encoding());
    match ops.next().ok()? {
        Some(gimli::Operation::Address { address }) => Some(address),
        Some(gimli::Operation::AddressIndex { index }) => dwarf.address(unit, index).ok(),
        _ => None,
    }
}
