//! Relation names the backend's relcache already holds, read from its
//! memory (`RelationIdCache`: reloid -> RelationData, whose `rd_rel` is its
//! pg_class row).  `print` of an `Oid` adds the name when the relcache maps
//! that OID to a relation: nothing is called, looked up in a catalog or
//! guessed, so an OID the relcache does not hold gets no name.

use super::backend::Backend;
use super::dynahash::HashLayouts;
use anyhow::Result;
use std::collections::HashMap;

/// At most this many relcache entries are read.
const MAX_ENTRIES: usize = 1 << 16;

/// reloid -> relname of every relcache entry with its pg_class row.
pub fn relation_names(s: &dyn Backend) -> Result<HashMap<u32, String>> {
    let Some(cache) = s.global_addr("RelationIdCache") else {
        anyhow::bail!("no RelationIdCache in the debug info");
    };
    let htab = s.read_u64(cache)?;
    let mut names = HashMap::new();
    if htab == 0 {
        return Ok(names);
    }
    let ent = s.layout("RelIdCacheEnt")?;
    let rel = s.layout("RelationData")?;
    let class = s.layout("FormData_pg_class")?;
    let (oid_off, desc_off) = (ent.offset("reloid")?, ent.offset("reldesc")?);
    let (rd_rel, relname) = (rel.offset("rd_rel")?, class.field("relname")?);
    for e in HashLayouts::of(s)?.entries(s, htab, MAX_ENTRIES)? {
        let oid = s.read_i32(e + oid_off)? as u32;
        let desc = s.read_u64(e + desc_off)?;
        if desc == 0 {
            continue;
        }
        let row = s.read_u64(desc + rd_rel)?;
        if row == 0 {
            continue;
        }
        let Ok(raw) = s.read_bytes(row + relname.offset, relname.size.clamp(1, 256) as usize)
        else {
            continue;
        };
        let name = raw.split(|&c| c == 0).next().unwrap_or(&[]);
        if !name.is_empty() {
            names.insert(oid, String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(names)
}

/// The relation name the relcache holds for `oid`, if any.
pub fn relation_name(s: &dyn Backend, oid: u32) -> Option<String> {
    if oid == 0 {
        return None;
    }
    relation_names(s).ok()?.remove(&oid)
}
