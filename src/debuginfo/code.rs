//! Functions as address ranges, and addresses named as gdb names them
//! (`disassemble`): the DWARF subprogram around an address with all its
//! ranges (gcc's hot and cold parts), its entry the start of the first.

use super::DebugInfo;

impl DebugInfo {
    /// The function around link-time `addr`: its name and its address
    /// ranges (link-time, end exclusive) in the order its DWARF lists them
    /// (the entry's range first); an ELF function symbol's range when no
    /// DWARF subprogram covers it.
    pub fn function_ranges_at(&self, addr: u64) -> Option<(String, Vec<(u64, u64)>)> {
        if let Some(outer) = self.frames_at(addr).pop()
            && let (Some(name), Some(die)) = (outer.function, outer.die)
            && let Ok(Some(ranges)) = self.with_die(die, |u, e| {
                let mut r = self.dwarf.die_ranges(u, e).ok()?;
                let mut out = Vec::new();
                while let Ok(Some(range)) = r.next() {
                    if range.begin < range.end {
                        out.push((range.begin, range.end));
                    }
                }
                out.iter()
                    .any(|&(b, e)| b <= addr && addr < e)
                    .then_some(out)
            })
        {
            return Some((name, ranges));
        }
        let (s, _) = self.symbol_at(addr)?;
        (s.is_func && s.size > 0).then(|| (s.name.clone(), vec![(s.addr, s.addr + s.size)]))
    }

    /// Where gdb (13) says an inlined call (its `inlined_subroutine` DIE
    /// `die`) begins: the start of its one range, or the lowest start of
    /// its ranges (as gdb reads them: sorted); link-time.  `next` and `step` stop at its call
    /// site only when they reach this address.
    pub fn inline_entry(&self, die: u64) -> Option<u64> {
        self.with_die(die, |u, e| {
            if let Some(v) = e.attr_value(gimli::constants::DW_AT_low_pc)
                && let Ok(Some(a)) = self.dwarf.attr_address(u, v)
            {
                return Some(a);
            }
            let mut r = self.dwarf.die_ranges(u, e).ok()?;
            let mut lowest: Option<u64> = None;
            while let Ok(Some(range)) = r.next() {
                if range.begin < range.end {
                    lowest = Some(lowest.map_or(range.begin, |l| l.min(range.begin)));
                }
            }
            lowest
        })
        .ok()
        .flatten()
    }

    /// Whether link-time `addr` enters the inlined call `die`: in one of
    /// its ranges, `addr - 1` in none (gdb's `block_starting_point_at`,
    /// by which a stop there is shown at the call site).
    pub fn enters_inline(&self, die: u64, addr: u64) -> bool {
        self.with_die(die, |u, e| {
            let mut r = self.dwarf.die_ranges(u, e).ok()?;
            let (mut at, mut before) = (false, false);
            while let Ok(Some(range)) = r.next() {
                at |= range.begin <= addr && addr < range.end;
                before |= range.begin < addr && addr <= range.end;
            }
            Some(at && !before)
        })
        .ok()
        .flatten()
        .unwrap_or(false)
    }

    /// gdb's `<symbol+offset>` of link-time `addr`: in code, the function
    /// around it and the offset from its entry (negative in a cold part
    /// placed before it), unless `prefer_function` is false and an ELF
    /// symbol starts at `addr` itself (`f.cold`); elsewhere the ELF symbol
    /// covering it.
    pub fn symbolic(&self, addr: u64, prefer_function: bool) -> Option<(String, i64)> {
        let elf = self.symbol_at(addr);
        if let Some((name, ranges)) = self.function_ranges_at(addr)
            && let Some(&(entry, _)) = ranges.first()
        {
            match elf {
                Some((s, 0)) if !prefer_function && entry != addr => {
                    return Some((s.name.clone(), 0));
                }
                _ => return Some((name, addr as i64 - entry as i64)),
            }
        }
        if let Some((name, start)) = self.binary.plt_symbol_at(addr) {
            return Some((name, (addr - start) as i64));
        }
        elf.map(|(s, off)| (s.name.clone(), off as i64))
    }
}

impl DebugInfo {
    /// The line-table rows at link-time addresses in `[lo, hi)`, in address
    /// order (rows at one address in the table's order): address, full
    /// file name, line.
    pub fn line_rows(&self, lo: u64, hi: u64) -> Vec<(u64, String, u32)> {
        let ctx = self.a2l();
        let Some(unit) = ctx.find_dwarf_and_unit(lo).skip_all_loads() else {
            return Vec::new();
        };
        let Some(prog) = unit.line_program.clone() else {
            return Vec::new();
        };
        let mut rows = prog.rows();
        let mut out = Vec::new();
        while let Ok(Some((header, row))) = rows.next_row() {
            let a = row.address();
            if row.end_sequence() || a < lo || a >= hi {
                continue;
            }
            let (Some(line), Some(fe)) = (row.line(), header.file(row.file_index())) else {
                continue;
            };
            if let Some(path) = self.file_path(unit, header, fe) {
                out.push((a, path, line.get() as u32));
            }
        }
        out.sort_by_key(|r| r.0);
        out
    }

    /// The name gdb shows for a source file of the unit around link-time
    /// `addr`: the unit's own name as compiled (`DW_AT_name`, often
    /// relative) for its main file, else the full name.
    pub fn display_file_name(&self, addr: u64, full: &str) -> String {
        let ctx = self.a2l();
        if let Some(unit) = ctx.find_dwarf_and_unit(addr).skip_all_loads()
            && let Some(name) = unit.name
        {
            let name = String::from_utf8_lossy(name.slice()).into_owned();
            let comp = unit
                .comp_dir
                .map(|c| String::from_utf8_lossy(c.slice()).into_owned())
                .unwrap_or_default();
            let joined = if name.starts_with('/') {
                name.clone()
            } else {
                format!("{comp}/{name}")
            };
            if normalised_path(&joined) == normalised_path(full) {
                return name;
            }
        }
        full.to_string()
    }
}

/// A path without `.` components and with `dir/..` folded.
pub fn normalised_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let s = parts.join("/");
    if p.starts_with('/') {
        format!("/{s}")
    } else {
        s
    }
}

impl DebugInfo {
    /// Where the function or variable of DIE `die` is declared: the full
    /// name of its file and its line (through its abstract origin or
    /// specification).
    pub fn decl_at(&self, die: u64) -> Option<(String, u32)> {
        use gimli::{AttributeValue, constants as dw};
        self.follow_origin(die, |u, e| {
            let line = match e.attr_value(dw::DW_AT_decl_line)? {
                AttributeValue::Udata(l) => l as u32,
                AttributeValue::Data1(l) => l as u32,
                AttributeValue::Data2(l) => l as u32,
                AttributeValue::Data4(l) => l,
                _ => return None,
            };
            let idx = match e.attr_value(dw::DW_AT_decl_file)? {
                AttributeValue::FileIndex(i) | AttributeValue::Udata(i) => i,
                AttributeValue::Data1(i) => i as u64,
                AttributeValue::Data2(i) => i as u64,
                AttributeValue::Data4(i) => i as u64,
                _ => return None,
            };
            let header = u.line_program.as_ref()?.header();
            let fe = header.file(idx)?;
            let file = self.file_path(gimli::UnitRef::new(&self.dwarf, u), header, fe)?;
            Some((file, line))
        })
    }
}

impl DebugInfo {
    /// Whether the function or variable of DIE `die` is visible outside
    /// its file (`DW_AT_external`; not: a `static` one).
    pub fn is_external(&self, die: u64) -> bool {
        self.follow_origin(die, |_, e| {
            e.attr_value(gimli::constants::DW_AT_external)
                .map(|v| matches!(v, gimli::AttributeValue::Flag(true)))
        })
        .unwrap_or(false)
    }
}

impl DebugInfo {
    /// Whether a unit's code ranges cover link-time `addr` (its functions'
    /// cold parts included).
    pub fn unit_covers(&self, addr: u64) -> bool {
        self.a2l()
            .find_dwarf_and_unit(addr)
            .skip_all_loads()
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_are_folded() {
        assert_eq!(
            super::normalised_path("/b/src/backend/../backend/./executor/x.c"),
            "/b/src/backend/executor/x.c"
        );
        assert_eq!(super::normalised_path("a//b/"), "a/b");
    }
}
