//! DIEs by offset: their unit, name, type and abstract origin; globals.

use super::*;

impl DebugInfo {
    pub fn unit_for_offset(&self, off: u64) -> Result<Rc<gimli::Unit<R>>> {
        let i = match self.index.units.binary_search(&off) {
            Ok(i) => i,
            Err(0) => bail!("DIE offset {off:#x} before the first unit"),
            Err(i) => i - 1,
        };
        let uoff = self.index.units[i];
        if let Some(u) = self.units.borrow().get(&uoff) {
            return Ok(u.clone());
        }
        let unit = Rc::new(self.unit_at(uoff)?);
        self.units.borrow_mut().insert(uoff, unit.clone());
        Ok(unit)
    }

    /// The unit whose header is at (tagged) offset `uoff`: of the main
    /// file, or of the supplementary file for a `SUP_DIE` one.
    pub(super) fn unit_at(&self, uoff: u64) -> Result<gimli::Unit<R>> {
        let file = match self.dwarf.sup() {
            Some(sup) if uoff & index::SUP_DIE != 0 => sup,
            _ if uoff & index::SUP_DIE != 0 => bail!("no dwz supplementary file for DIE {uoff:#x}"),
            _ => &self.dwarf,
        };
        let header = file
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset((uoff & !index::SUP_DIE) as usize))
            .map_err(|e| anyhow!("{e}"))?;
        file.unit(header).map_err(|e| anyhow!("{e}"))
    }

    /// Run `f` on the DIE at a .debug_info offset.
    pub fn with_die<T>(
        &self,
        off: u64,
        f: impl FnOnce(&gimli::Unit<R>, &gimli::DebuggingInformationEntry<R>) -> T,
    ) -> Result<T> {
        let unit = self.unit_for_offset(off)?;
        let uo =
            index::unit_offset(&unit, off).ok_or_else(|| anyhow!("bad DIE offset {off:#x}"))?;
        let die = unit.entry(uo).map_err(|e| anyhow!("{e}"))?;
        Ok(f(&unit, &die))
    }

    pub(super) fn attr_str(&self, unit: &gimli::Unit<R>, v: AttributeValue<R>) -> Option<String> {
        index::file_dwarf(&self.dwarf, unit)
            .attr_string(unit, v)
            .ok()
            .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
    }

    /// Name of a DIE, following abstract_origin/specification.
    pub fn die_name(&self, off: u64) -> Option<String> {
        self.follow_origin(off, |u, e| {
            e.attr_value(dw::DW_AT_name)
                .and_then(|v| self.attr_str(u, v))
        })
    }

    /// Type of a variable/parameter/member DIE, following abstract_origin.
    pub fn die_type(&self, off: u64) -> Option<TypeRef> {
        self.follow_origin(off, |u, e| {
            e.attr_value(dw::DW_AT_type)
                .and_then(|v| super::index::type_ref(&self.dwarf, u, v))
        })
    }

    /// The first answer of `get` on the DIE at `off` or on the DIEs its
    /// DW_AT_abstract_origin / DW_AT_specification chain leads to.
    pub(super) fn follow_origin<T>(
        &self,
        off: u64,
        get: impl Fn(&gimli::Unit<R>, &gimli::DebuggingInformationEntry<R>) -> Option<T>,
    ) -> Option<T> {
        let mut cur = off;
        for _ in 0..4 {
            let (found, next) = self
                .with_die(cur, |u, e| {
                    let next = e
                        .attr_value(dw::DW_AT_abstract_origin)
                        .or_else(|| e.attr_value(dw::DW_AT_specification))
                        .and_then(|v| global_ref(&self.dwarf, u, v));
                    (get(u, e), next)
                })
                .ok()?;
            if found.is_some() {
                return found;
            }
            cur = next?;
        }
        None
    }

    /// A global variable: runtime-independent (link-time address, type).
    pub fn global(&self, name: &str) -> Option<(u64, Option<TypeRef>)> {
        if let Some(g) = self.index.globals.get(name) {
            return Some((g.addr, self.die_type(g.die)));
        }
        if let Some(p) = &self.pack {
            let addr = self
                .symbols
                .iter()
                .find(|s| !s.is_func && s.name == name)?
                .addr;
            return Some((addr, p.type_of_global(name)));
        }
        self.symbols
            .iter()
            .find(|s| !s.is_func && s.name == name)
            .map(|s| (s.addr, None))
    }
}
