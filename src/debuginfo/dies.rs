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
        let header = self
            .dwarf
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset(uoff as usize))
            .map_err(|e| anyhow!("{e}"))?;
        let unit = Rc::new(self.dwarf.unit(header).map_err(|e| anyhow!("{e}"))?);
        self.units.borrow_mut().insert(uoff, unit.clone());
        Ok(unit)
    }

    /// Run `f` on the DIE at a .debug_info offset.
    pub fn with_die<T>(
        &self,
        off: u64,
        f: impl FnOnce(&gimli::Unit<R>, &gimli::DebuggingInformationEntry<R>) -> T,
    ) -> Result<T> {
        let unit = self.unit_for_offset(off)?;
        let uo = gimli::DebugInfoOffset(off as usize)
            .to_unit_offset(&unit.header)
            .ok_or_else(|| anyhow!("bad DIE offset {off:#x}"))?;
        let die = unit.entry(uo).map_err(|e| anyhow!("{e}"))?;
        Ok(f(&unit, &die))
    }

    pub(super) fn attr_str(&self, unit: &gimli::Unit<R>, v: AttributeValue<R>) -> Option<String> {
        self.dwarf
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
                .and_then(|v| super::index::type_ref(u, v))
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
                        .and_then(|v| global_ref(u, v));
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
