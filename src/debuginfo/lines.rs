//! Source lines (addr2line): the frames at a pc, inlined ones included,
//! line ranges and sequences, the addresses of a file's line.

use super::*;

impl DebugInfo {
    pub(super) fn a2l(&self) -> &addr2line::Context<R> {
        self.a2l.get_or_init(|| {
            addr2line::Context::from_arc_dwarf(self.dwarf.clone()).unwrap_or_else(|_| {
                addr2line::Context::from_dwarf(self.empty_dwarf()).expect("empty dwarf")
            })
        })
    }

    pub(super) fn empty_dwarf(&self) -> Dwarf {
        gimli::Dwarf::load(|_| -> Result<R> {
            Ok(gimli::EndianSlice::new(&[], gimli::LittleEndian))
        })
        .unwrap()
    }

    /// Source frames at a link-time pc, innermost (inlined) first.
    pub fn frames_at(&self, pc: u64) -> Vec<SourceFrame> {
        if let Some(v) = self.frames_cache.borrow().get(&pc) {
            return v.clone();
        }
        let v = self.frames_at_uncached(pc);
        bounded_insert(&mut self.frames_cache.borrow_mut(), pc, v.clone());
        v
    }

    pub(super) fn frames_at_uncached(&self, pc: u64) -> Vec<SourceFrame> {
        let mut out = Vec::new();
        let ctx = self.a2l();
        let unit_off = match ctx.find_dwarf_and_unit(pc).skip_all_loads() {
            Some(u) => u.header.debug_info_offset().map(|o| o.0 as u64),
            None => None,
        };
        if let Ok(mut it) = ctx.find_frames(pc).skip_all_loads() {
            while let Ok(Some(f)) = it.next() {
                let function = f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok().map(|s| s.into_owned()));
                let (file, line) = match &f.location {
                    Some(l) => (l.file.map(|s| s.to_string()), l.line),
                    None => (None, None),
                };
                let die = match (f.dw_die_offset, unit_off) {
                    (Some(d), Some(u)) => Some(u + d.0 as u64),
                    _ => None,
                };
                out.push(SourceFrame {
                    function,
                    file,
                    line,
                    die,
                    inlined: false,
                });
            }
        }
        let n = out.len();
        for (i, f) in out.iter_mut().enumerate() {
            f.inlined = i + 1 < n;
        }
        // Several line rows can start at one address (the `{` of a function
        // and its first statement); like gdb, report the last one.
        if let Some(first) = out.first_mut()
            && let Some((file, line)) = self.last_row_at(pc)
        {
            first.file = Some(file);
            first.line = Some(line);
        }
        out
    }

    /// The last is_stmt line-table row at exactly `pc`, if any.
    pub(super) fn last_row_at(&self, pc: u64) -> Option<(String, u32)> {
        let ctx = self.a2l();
        let unit = ctx.find_dwarf_and_unit(pc).skip_all_loads()?;
        let prog = unit.line_program.clone()?;
        let mut rows = prog.rows();
        let mut found: Option<(u64, u32)> = None;
        let mut seen_exact = 0;
        while let Ok(Some((header, row))) = rows.next_row() {
            if row.end_sequence() || row.address() != pc || !row.is_stmt() {
                continue;
            }
            let _ = header;
            seen_exact += 1;
            if let Some(l) = row.line() {
                found = Some((row.file_index(), l.get() as u32));
            }
        }
        if seen_exact < 2 {
            return None;
        }
        let (fidx, line) = found?;
        let header = rows.header();
        let fe = header.file(fidx)?;
        Some((self.file_path(unit, header, fe)?, line))
    }

    /// The full name of a line table's file: its directory (the unit's
    /// compilation directory before a relative one) and its name.
    pub(super) fn file_path(
        &self,
        unit: gimli::UnitRef<'_, R>,
        header: &gimli::LineProgramHeader<R>,
        fe: &gimli::FileEntry<R>,
    ) -> Option<String> {
        self.file_path_from(unit, header, fe, true)
    }

    /// A line-table file's path; with `in_comp_dir` false a relative
    /// directory is left relative, as gdb shows a file's name
    /// (`../../../src/include/catalog/pg_cast_d.h`, a header generated in
    /// the build tree).
    pub(super) fn file_path_from(
        &self,
        unit: gimli::UnitRef<'_, R>,
        header: &gimli::LineProgramHeader<R>,
        fe: &gimli::FileEntry<R>,
        in_comp_dir: bool,
    ) -> Option<String> {
        let name = unit.attr_string(fe.path_name()).ok()?;
        let name = String::from_utf8_lossy(name.slice()).into_owned();
        let path = if name.starts_with('/') {
            name
        } else {
            let dir = fe
                .directory(header)
                .and_then(|d| unit.attr_string(d).ok())
                .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
                .unwrap_or_default();
            let dir = if dir.starts_with('/') || !in_comp_dir {
                dir
            } else {
                let comp = unit
                    .comp_dir
                    .map(|c| String::from_utf8_lossy(c.slice()).into_owned())
                    .unwrap_or_default();
                format!("{comp}/{dir}")
            };
            format!("{dir}/{name}")
        };
        Some(path)
    }

    /// The line-table range around link-time `pc`: from the last row at
    /// or before it to the next row at a higher address in the same
    /// sequence (gdb's `info line` range).
    pub fn line_range_at(&self, pc: u64) -> Option<(u64, u64)> {
        let ctx = self.a2l();
        let unit = ctx.find_dwarf_and_unit(pc).skip_all_loads()?;
        let prog = unit.line_program.clone()?;
        let mut rows = prog.rows();
        let mut prev: Option<u64> = None;
        while let Ok(Some((_, row))) = rows.next_row() {
            let a = row.address();
            if let Some(p) = prev
                && p <= pc
                && pc < a
            {
                return Some((p, a));
            }
            prev = if row.end_sequence() { None } else { Some(a) };
        }
        None
    }

    /// The line-table sequence holding link-time `pc`, for source-line
    /// stepping (`next`, `step`): its rows in address order and the
    /// sequence's end address.  None where no sequence covers `pc`.
    pub fn line_sequence(&self, pc: u64) -> Option<LineSequence> {
        let ctx = self.a2l();
        let unit = ctx.find_dwarf_and_unit(pc).skip_all_loads()?;
        let prog = unit.line_program.clone()?;
        let mut rows = prog.rows();
        let mut cur: Vec<LineRow> = Vec::new();
        while let Ok(Some((_, row))) = rows.next_row() {
            let a = row.address();
            if row.end_sequence() {
                if cur.first().is_some_and(|f| f.addr <= pc) && pc < a {
                    return Some(LineSequence { rows: cur, end: a });
                }
                cur.clear();
                continue;
            }
            cur.push(LineRow {
                addr: a,
                file: row.file_index(),
                line: row.line().map_or(0, |l| l.get() as u32),
                is_stmt: row.is_stmt(),
            });
        }
        None
    }

    /// file:line of a link-time address.
    pub fn location_at(&self, pc: u64) -> Option<(String, u32)> {
        if let Some(x) = self.last_row_at(pc) {
            return Some(x);
        }
        let l = self.a2l().find_location(pc).ok()??;
        Some((l.file?.to_string(), l.line?))
    }

    /// Addresses of the statements at FILE:LINE (file matched by suffix).
    /// When no row has exactly that line, the next line with code is used.
    pub fn line_addresses(&self, file: &str, line: u32) -> Result<Vec<(u64, String, u32)>> {
        let mut best: Option<u32> = None;
        // the last line with code in a matching file (None: no such file)
        let mut last_line: Option<(String, u32)> = None;
        let mut hits: Vec<(u64, String, u32)> = Vec::new();
        let mut it = self.dwarf.units();
        while let Ok(Some(h)) = it.next() {
            let unit = match self.dwarf.unit(h) {
                Ok(u) => u,
                Err(_) => continue,
            };
            let prog = match &unit.line_program {
                Some(p) => p.clone(),
                None => continue,
            };
            // Which file indices match?
            let header = prog.header().clone();
            let mut matching = Vec::new();
            for (i, fe) in header.file_names().iter().enumerate() {
                let name = self
                    .dwarf
                    .attr_string(&unit, fe.path_name())
                    .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
                    .unwrap_or_default();
                let dir = fe
                    .directory(&header)
                    .and_then(|d| self.dwarf.attr_string(&unit, d).ok())
                    .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
                    .unwrap_or_default();
                let full = format!("{dir}/{name}");
                if full.ends_with(&format!("/{file}")) || name == file {
                    let idx = if header.version() >= 5 {
                        i as u64
                    } else {
                        i as u64 + 1
                    };
                    matching.push((idx, name));
                }
            }
            if matching.is_empty() {
                continue;
            }
            let mut rows = prog.rows();
            while let Ok(Some((_, row))) = rows.next_row() {
                if !row.is_stmt() || row.end_sequence() {
                    continue;
                }
                let Some(l) = row.line() else { continue };
                let l = l.get() as u32;
                let Some((_, fname)) = matching.iter().find(|(i, _)| *i == row.file_index()) else {
                    continue;
                };
                if last_line.as_ref().is_none_or(|(_, m)| l > *m) {
                    last_line = Some((fname.clone(), l));
                }
                if l < line {
                    continue;
                }
                match best {
                    Some(b) if l > b => continue,
                    Some(b) if l < b => hits.clear(),
                    _ => {}
                }
                best = Some(l);
                if !hits.iter().any(|(a, _, _)| *a == row.address()) {
                    hits.push((row.address(), fname.clone(), l));
                }
            }
        }
        if hits.is_empty()
            && let Some((fname, last)) = last_line
        {
            bail!("{file}:{line} is past the last line with code in {fname} (line {last})");
        }
        // Keep one address per function (the lowest), like gdb's locations.
        hits.sort();
        let mut out: Vec<(u64, String, u32)> = Vec::new();
        for h in hits {
            let f = self.frames_at(h.0).first().and_then(|f| f.die);
            if out
                .iter()
                .any(|o| self.frames_at(o.0).first().and_then(|f| f.die) == f && f.is_some())
            {
                continue;
            }
            out.push(h);
        }
        Ok(out)
    }
}
