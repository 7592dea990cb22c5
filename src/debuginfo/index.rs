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

/// Bump when the layout of `Index` or of the cache file changes.
const FORMAT: u32 = 5;

/// First bytes of a cache file.
const MAGIC: &[u8; 8] = b"PGDBGIDX";

/// Why a cache file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheMiss {
    /// No cache file (or no cache directory), or one an older pgdbg wrote:
    /// built and stored now.
    Absent,
    /// A file that did not verify: the reason, for "did not verify (...)".
    Bad { path: PathBuf, reason: String },
}

impl CacheMiss {
    /// The line to show when the index had to be rebuilt because of a bad
    /// cache file.
    pub fn note(&self) -> Option<String> {
        match self {
            CacheMiss::Absent => None,
            CacheMiss::Bad { path, reason } => Some(format!(
                "index cache {} did not verify ({reason}); rebuilt",
                path.display()
            )),
        }
    }
}

/// 64-bit checksum of a cache file's content: every 8-byte word goes
/// through a bijective step (xor, odd multiply, rotate), so any change of
/// a single word always changes the sum.
pub fn checksum(parts: &[&[u8]]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut step = |w: u64| h = (h ^ w).wrapping_mul(K).rotate_left(29);
    for p in parts {
        step(p.len() as u64);
        let mut chunks = p.chunks_exact(8);
        for c in &mut chunks {
            step(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        step(u64::from_le_bytes(last));
    }
    h ^ (h >> 31)
}

/// A cache file: MAGIC, format (u32), build-id length (u32) and bytes,
/// payload length (u64), checksum of build-id and payload (u64), payload
/// (the bincode of `Index`).
fn encode(build_id: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(build_id.len() as u32).to_le_bytes());
    out.extend_from_slice(build_id.as_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(&[build_id.as_bytes(), payload]).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Before format 4 a cache file was the bare bincode of `Index`, which
/// starts with its format: that format, for such a file.
fn older_format(data: &[u8]) -> Option<u32> {
    let f = u32::from_le_bytes(data.get(..4)?.try_into().ok()?);
    (data.get(..8) != Some(MAGIC) && (1..FORMAT).contains(&f)).then_some(f)
}

/// The payload of a cache file for `build_id`, or why it does not verify.
fn decode<'a>(data: &'a [u8], build_id: &str) -> Result<&'a [u8], String> {
    fn take<'b>(d: &mut &'b [u8], n: usize) -> Result<&'b [u8], String> {
        if d.len() < n {
            return Err("truncated".into());
        }
        let (a, b) = d.split_at(n);
        *d = b;
        Ok(a)
    }
    let mut d = data;
    if take(&mut d, 8)? != MAGIC {
        return Err(match older_format(data) {
            Some(f) => format!("format {f} of an older pgdbg, without checksum"),
            None => "not a pgdbg index".into(),
        });
    }
    let format = u32::from_le_bytes(take(&mut d, 4)?.try_into().expect("4 bytes"));
    if format != FORMAT {
        return Err(format!("format {format}, this pgdbg writes {FORMAT}"));
    }
    let n = u32::from_le_bytes(take(&mut d, 4)?.try_into().expect("4 bytes")) as usize;
    let id = take(&mut d, n)?;
    if id != build_id.as_bytes() {
        return Err(format!(
            "build-id {}, the binary has {build_id}",
            String::from_utf8_lossy(id)
        ));
    }
    let len = u64::from_le_bytes(take(&mut d, 8)?.try_into().expect("8 bytes"));
    let sum = u64::from_le_bytes(take(&mut d, 8)?.try_into().expect("8 bytes"));
    if len != d.len() as u64 {
        return Err("truncated".into());
    }
    if checksum(&[id, d]) != sum {
        return Err("checksum".into());
    }
    Ok(d)
}

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
        let dir = match crate::config::get().index_cache.clone() {
            Some(d) => d,
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

    /// The cached index of `build_id`, verified (magic, format, build-id,
    /// length and checksum); otherwise why not.
    pub fn load_cached(build_id: &str) -> Result<Index, CacheMiss> {
        let p = Self::cache_path(build_id).ok_or(CacheMiss::Absent)?;
        let data = std::fs::read(&p).map_err(|_| CacheMiss::Absent)?;
        let bad = |reason: String| CacheMiss::Bad {
            path: p.clone(),
            reason,
        };
        let format = data
            .get(8..12)
            .filter(|_| data.starts_with(MAGIC))
            .map(|f| u32::from_le_bytes(f.try_into().expect("4 bytes")));
        if older_format(&data).is_some() || format.is_some_and(|f| (4..FORMAT).contains(&f)) {
            // an upgrade, not a damaged file: rebuilt without a word
            return Err(CacheMiss::Absent);
        }
        let payload = decode(&data, build_id).map_err(bad)?;
        let idx: Index =
            bincode::deserialize(payload).map_err(|e| bad(format!("undecodable: {e}")))?;
        if idx.format != FORMAT || idx.build_id != build_id {
            return Err(bad("contents of another build".into()));
        }
        Ok(idx)
    }

    pub fn store_cached(&self) {
        if self.build_id.is_empty() {
            return;
        }
        if let Some(p) = Self::cache_path(&self.build_id) {
            if let Some(d) = p.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            if let Ok(payload) = bincode::serialize(self) {
                let data = encode(&self.build_id, &payload);
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
        // the main file's units, then the supplementary file's (dwz: the
        // types and declarations its units share), tagged SUP_DIE
        let mut headers = Vec::new();
        for (file, tag) in std::iter::once((dwarf, 0)).chain(dwarf.sup().map(|s| (s, SUP_DIE))) {
            let mut it = file.units();
            while let Some(h) = it
                .next()
                .map_err(|e| anyhow!("bad DWARF unit header: {e}"))?
            {
                headers.push((tag, h));
            }
        }
        let units: Vec<u64> = headers
            .iter()
            .filter_map(|(tag, h)| h.debug_info_offset().map(|o| o.0 as u64 | tag))
            .collect();
        // Split the units over two threads by size.
        let total: u64 = headers
            .iter()
            .map(|(_, h)| h.length_including_self() as u64)
            .sum();
        let mut split = headers.len();
        let mut acc = 0u64;
        for (i, (_, h)) in headers.iter().enumerate() {
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
    headers: &[(u64, gimli::UnitHeader<R>)],
    entry_of: &(dyn Fn(&[u64]) -> u64 + Sync),
) -> Result<RawIndex> {
    let mut raw = RawIndex::default();
    for (tag, h) in headers {
        let file = match dwarf.sup() {
            Some(sup) if *tag == SUP_DIE => sup,
            _ => dwarf,
        };
        let unit = match file.unit(*h) {
            Ok(u) => u,
            Err(_) => continue,
        };
        scan_unit(dwarf, &unit, &mut raw, entry_of)?;
    }
    Ok(raw)
}

/// DIE offsets of the dwz supplementary file (`.gnu_debugaltlink`) are
/// its .debug_info offsets with this bit set; the main file's have it
/// clear.  Below the library tag of `session::libraries` (bit 44 up), so a
/// library's DIEs keep it.
pub const SUP_DIE: u64 = 1 << 43;

/// `unit` is one of the supplementary file's (`dwarf` is the main file's,
/// the supplementary one its `sup()`): its bytes are in that file's
/// .debug_info.
pub fn in_sup(dwarf: &Dwarf, unit: &gimli::Unit<R>) -> bool {
    use gimli::Section;
    let Some(sup) = dwarf.sup() else {
        return false;
    };
    let sec = sup.debug_info.reader().slice().as_ptr_range();
    let start = gimli::UnitOffset(unit.header.header_size());
    unit.header
        .range_from(start..)
        .is_ok_and(|r| sec.contains(&r.slice().as_ptr()))
}

/// The `Dwarf` whose sections `unit`'s attributes refer to: the
/// supplementary file's for its units, else the main file's (whose
/// `attr_string` reads DW_FORM_GNU_strp_alt / DW_FORM_strp_sup strings
/// from the supplementary file).
pub fn file_dwarf<'a>(dwarf: &'a Dwarf, unit: &gimli::Unit<R>) -> &'a Dwarf {
    match dwarf.sup() {
        Some(sup) if in_sup(dwarf, unit) => sup,
        _ => dwarf,
    }
}

fn file_tag(dwarf: &Dwarf, unit: &gimli::Unit<R>) -> u64 {
    if in_sup(dwarf, unit) { SUP_DIE } else { 0 }
}

/// The offset within its unit of the DIE at (tagged) offset `off`.
pub fn unit_offset(unit: &gimli::Unit<R>, off: u64) -> Option<gimli::UnitOffset<usize>> {
    gimli::DebugInfoOffset((off & !SUP_DIE) as usize).to_unit_offset(&unit.header)
}

/// The type a DW_AT_type value names: a DIE of this file or of the dwz
/// supplementary file; when that file was not found (said at load), a
/// placeholder that says so, never "no type".
pub fn type_ref(
    dwarf: &Dwarf,
    unit: &gimli::Unit<R>,
    v: AttributeValue<R>,
) -> Option<super::types::TypeRef> {
    use super::types::{Encoding, Type, TypeRef};
    if let AttributeValue::DebugInfoRefSup(_) = v
        && dwarf.sup().is_none()
    {
        return Some(TypeRef::Synth(std::rc::Rc::new(Type::Base {
            name: "<a type of the missing dwz supplementary file>".into(),
            size: 0,
            enc: Encoding::Signed,
        })));
    }
    global_ref(dwarf, unit, v).map(TypeRef::Die)
}

/// The (tagged) offset of the DIE a reference attribute of `unit` names:
/// within `unit`'s file, or (DW_FORM_GNU_ref_alt, DW_FORM_ref_sup4/8) in
/// the supplementary file.  `dwarf` is the main file's.
pub fn global_ref(dwarf: &Dwarf, unit: &gimli::Unit<R>, v: AttributeValue<R>) -> Option<u64> {
    match v {
        AttributeValue::UnitRef(o) => o
            .to_debug_info_offset(&unit.header)
            .map(|x| x.0 as u64 | file_tag(dwarf, unit)),
        AttributeValue::DebugInfoRef(o) => Some(o.0 as u64 | file_tag(dwarf, unit)),
        AttributeValue::DebugInfoRefSup(o) => dwarf.sup().map(|_| o.0 as u64 | SUP_DIE),
        _ => None,
    }
}

/// The (tagged) offset of a DIE of `unit`.  `dwarf` is the main file's.
pub fn die_offset(dwarf: &Dwarf, unit: &gimli::Unit<R>, o: gimli::UnitOffset<usize>) -> u64 {
    o.to_debug_info_offset(&unit.header)
        .map(|x| x.0 as u64 | file_tag(dwarf, unit))
        .unwrap_or(0)
}

fn scan_unit(
    dwarf: &Dwarf,
    unit: &gimli::Unit<R>,
    raw: &mut RawIndex,
    entry_of: &(dyn Fn(&[u64]) -> u64 + Sync),
) -> Result<()> {
    // (`dwarf`, the main file's, for references; `file`, the unit's own,
    // for its strings, addresses and ranges)
    let file = file_dwarf(dwarf, unit);
    let mut cursor = unit.entries();
    while let Some(e) = cursor
        .next_dfs()
        .map_err(|e| anyhow!("DWARF parse error: {e}"))?
    {
        let tag: DwTag = e.tag();
        let off = die_offset(dwarf, unit, e.offset());
        match tag {
            dw::DW_TAG_subprogram => {
                if let Some(n) = e.attr_value(dw::DW_AT_name) {
                    if let Ok(s) = file.attr_string(unit, n) {
                        raw.names
                            .insert(off, String::from_utf8_lossy(s.slice()).into_owned());
                    }
                } else if let Some(r) = e
                    .attr_value(dw::DW_AT_abstract_origin)
                    .or_else(|| e.attr_value(dw::DW_AT_specification))
                    .and_then(|v| global_ref(dwarf, unit, v))
                {
                    raw.refs.insert(off, r);
                }
                let addr = match e.attr_value(dw::DW_AT_low_pc) {
                    Some(v) => file.attr_address(unit, v).ok().flatten(),
                    None => match file.die_ranges(unit, e) {
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
                    .and_then(|v| global_ref(dwarf, unit, v))
                {
                    Some(o) => o,
                    None => continue,
                };
                let low = e
                    .attr_value(dw::DW_AT_low_pc)
                    .and_then(|v| file.attr_address(unit, v).ok().flatten());
                let entry = match e.attr_value(dw::DW_AT_entry_pc) {
                    Some(AttributeValue::Udata(off)) => low.map(|l| l + off),
                    Some(v) => file.attr_address(unit, v).ok().flatten(),
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
                    if let Ok(s) = file.attr_string(unit, n) {
                        raw.names
                            .insert(off, String::from_utf8_lossy(s.slice()).into_owned());
                    }
                } else if let Some(r) = e
                    .attr_value(dw::DW_AT_specification)
                    .and_then(|v| global_ref(dwarf, unit, v))
                {
                    raw.refs.insert(off, r);
                }
                if let Some(AttributeValue::Exprloc(expr)) = e.attr_value(dw::DW_AT_location)
                    && let Some(addr) = static_address(file, unit, expr)
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
                    .and_then(|n| file.attr_string(unit, n).ok())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_file_round_trip_and_corruption() {
        let payload: Vec<u8> = (0..1000u32).flat_map(|i| i.to_le_bytes()).collect();
        let f = encode("abcd", &payload);
        assert_eq!(decode(&f, "abcd").unwrap(), &payload[..]);
        assert_eq!(
            decode(&f, "abce").unwrap_err(),
            "build-id abcd, the binary has abce"
        );
        // any single byte changed in the payload or the checksum
        for i in (f.len() - payload.len() - 8..f.len()).step_by(97) {
            let mut g = f.clone();
            g[i] ^= 0x08;
            assert_eq!(decode(&g, "abcd").unwrap_err(), "checksum", "byte {i}");
        }
        assert_eq!(decode(&f[..f.len() - 1], "abcd").unwrap_err(), "truncated");
        assert_eq!(
            decode(b"garbage!", "abcd").unwrap_err(),
            "not a pgdbg index"
        );
        assert_eq!(
            decode(b"\x03\0\0\0\x28\0\0\0\0\0\0\0", "abcd").unwrap_err(),
            "format 3 of an older pgdbg, without checksum"
        );
        let mut old = f.clone();
        old[8] = 3;
        assert!(decode(&old, "abcd").unwrap_err().starts_with("format 3"));
    }
}
