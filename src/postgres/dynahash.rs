//! A dynahash table (`HTAB`) read from the backend's memory: the entries
//! of a backend-local hash such as the relcache's `RelationIdCache` or the
//! prepared statements' `prepared_queries`.  The layouts of `HTAB`,
//! `HASHHDR` and `HASHELEMENT` come from DWARF (they are private to
//! dynahash.c, so a stripped binary's layout pack has none of them).
//!
//! Read-only and bounded: at most 2^20 buckets and `max_entries` entries,
//! and a chain that loops is cut, so a table read while the backend runs
//! (and changes it) gives a partial answer, never a hang.

use super::backend::Backend;
use crate::debuginfo::layout::Layout;
use anyhow::{Result, anyhow};

/// The layouts a walk needs, looked up once.
pub struct HashLayouts {
    htab: Layout,
    hdr: Layout,
    elem: Layout,
}

impl HashLayouts {
    pub fn of(s: &dyn Backend) -> Result<HashLayouts> {
        Ok(HashLayouts {
            htab: s.layout("HTAB")?,
            hdr: s.layout("HASHHDR")?,
            elem: s.layout("HASHELEMENT")?,
        })
    }

    /// The address of each entry (the key first, as dynahash lays an
    /// entry out) of the table at `htab`, at most `max_entries`.
    pub fn entries(&self, s: &dyn Backend, htab: u64, max_entries: usize) -> Result<Vec<u64>> {
        let hb = s.read_bytes(htab, self.htab.size as usize)?;
        let hctl = self
            .htab
            .ptr(&hb, "hctl")
            .ok_or_else(|| anyhow!("HTAB.hctl"))?;
        let dir = self
            .htab
            .ptr(&hb, "dir")
            .ok_or_else(|| anyhow!("HTAB.dir"))?;
        let ssize = (self.htab.int(&hb, "ssize").unwrap_or(256).max(1) as u64).next_power_of_two();
        let sshift = self.htab.int(&hb, "sshift").unwrap_or(8).clamp(0, 62) as u64;
        let hdrb = s.read_bytes(hctl, self.hdr.size as usize)?;
        let max_bucket = self.hdr.int(&hdrb, "max_bucket").unwrap_or(0).max(0) as u64;
        let link_off = self.elem.offset("link")?;
        // an entry follows MAXALIGN(sizeof(HASHELEMENT)); MAXALIGN is 8 on x86-64
        let entry_off = self.elem.size.div_ceil(8) * 8;
        let mut out = Vec::new();
        let mut seg_addr = 0;
        let mut seg = Vec::new();
        for b in 0..=max_bucket.min(1 << 20) {
            let sa = s.read_u64(dir + (b >> sshift) * 8)?;
            if sa == 0 {
                continue;
            }
            if sa != seg_addr {
                // one read per segment of bucket heads
                seg = s.read_bytes(sa, (ssize * 8) as usize)?;
                seg_addr = sa;
            }
            let i = ((b & (ssize - 1)) * 8) as usize;
            let mut e = u64::from_le_bytes(seg[i..i + 8].try_into().unwrap_or([0; 8]));
            let mut chain = 0;
            while e != 0 && chain < 10_000 {
                if out.len() >= max_entries {
                    return Ok(out);
                }
                out.push(e + entry_off);
                e = s.read_u64(e + link_off)?;
                chain += 1;
            }
        }
        Ok(out)
    }
}
