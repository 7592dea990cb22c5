//! ELF symbols: a function's code locations, the symbol or code range at
//! an address, gcc's clone names.

use super::*;

impl DebugInfo {
    /// All code locations of a function (link-time): DWARF out-of-line
    /// copies and inlined instances, or ELF symbols (`name`, `name.isra.0`,
    /// ...) when DWARF does not know it.
    pub fn function_locations(&self, name: &str) -> Vec<FuncLoc> {
        if let Some(v) = self.index.functions.get(name) {
            return v.clone();
        }
        let mut out = Vec::new();
        for s in &self.symbols {
            if s.is_func && (s.name == name || is_entry_clone_of(&s.name, name)) {
                out.push(FuncLoc {
                    addr: s.addr,
                    inlined: false,
                    die: 0,
                });
            }
        }
        out
    }

    /// The ELF symbol covering `addr` (link-time), with the offset into it.
    pub fn symbol_at(&self, addr: u64) -> Option<(&ElfSymbol, u64)> {
        symbol_at(&self.symbols, addr)
    }

    /// The function code containing link-time `addr`: (name, start, end)
    /// of the ELF function symbol covering it (a `.cold` part has its own),
    /// else of the DWARF range of the subprogram around it.
    pub fn code_range_at(&self, addr: u64) -> Option<(String, u64, u64)> {
        let i = match self.symbols.binary_search_by(|s| s.addr.cmp(&addr)) {
            Ok(i) => {
                // the last of the symbols at exactly addr
                let mut i = i;
                while i + 1 < self.symbols.len() && self.symbols[i + 1].addr == addr {
                    i += 1;
                }
                Some(i)
            }
            Err(0) => None,
            Err(i) => Some(i - 1),
        };
        if let Some(i) = i {
            // functions do not overlap: the nearest sized function symbol
            // at or below addr covers it, or none does
            for s in self.symbols[..=i].iter().rev() {
                if !s.is_func || s.size == 0 {
                    continue;
                }
                if addr < s.addr + s.size {
                    return Some((s.name.clone(), s.addr, s.addr + s.size));
                }
                break;
            }
        }
        let outer = self.frames_at(addr).pop()?;
        let (start, end) = self
            .with_die(outer.die?, |u, e| {
                let mut r = self.dwarf.die_ranges(u, e).ok()?;
                while let Ok(Some(range)) = r.next() {
                    if addr >= range.begin && addr < range.end {
                        return Some((range.begin, range.end));
                    }
                }
                None
            })
            .ok()??;
        Some((outer.function?, start, end))
    }

    /// A data symbol covering link-time `addr` (`saved_plan_list`, `ActivePortal+8`).
    pub fn data_symbol_at(&self, addr: u64) -> Option<String> {
        let i = match self.symbols.binary_search_by(|s| s.addr.cmp(&addr)) {
            Ok(i) => i,
            Err(0) => return None,
            Err(i) => i - 1,
        };
        let s = &self.symbols[i];
        if s.is_func || addr >= s.addr + s.size.max(1) {
            return None;
        }
        let off = addr - s.addr;
        Some(if off == 0 {
            s.name.clone()
        } else {
            format!("{}+{off}", s.name)
        })
    }

    pub fn function_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.index.functions.keys().cloned().collect();
        v.extend(self.index.globals.keys().cloned());
        v.sort();
        v.dedup();
        v
    }
}

pub fn symbol_at(symbols: &[ElfSymbol], addr: u64) -> Option<(&ElfSymbol, u64)> {
    let i = match symbols.binary_search_by(|s| s.addr.cmp(&addr)) {
        Ok(i) => i,
        Err(0) => return None,
        Err(i) => i - 1,
    };
    // Prefer a function symbol at that address whose size covers addr.
    let mut j = i;
    loop {
        let s = &symbols[j];
        if s.is_func && (addr < s.addr + s.size.max(1) || s.size == 0) {
            return Some((s, addr - s.addr));
        }
        if j == 0 || symbols[j - 1].addr != s.addr {
            break;
        }
        j -= 1;
    }
    let s = &symbols[i];
    if addr < s.addr + s.size.max(1) {
        Some((s, addr - s.addr))
    } else {
        None
    }
}

/// gcc clone names: foo.isra.0, foo.part.0, foo.constprop.0, foo.lto_priv.0,
/// foo.cold.
pub fn is_clone_of(sym: &str, name: &str) -> bool {
    sym.len() > name.len() + 1 && sym.starts_with(name) && sym.as_bytes()[name.len()] == b'.'
}

/// A clone of `name` that is a function entry: not gcc's `name.cold` (or
/// `name.part.0.cold`), the split-off cold code a function jumps into in
/// its middle, where no argument is in its register.
pub fn is_entry_clone_of(sym: &str, name: &str) -> bool {
    is_clone_of(sym, name) && !sym[name.len() + 1..].split('.').any(|p| p == "cold")
}

#[cfg(test)]
mod clone_tests {
    use super::{is_clone_of, is_entry_clone_of};

    #[test]
    fn cold_parts_are_clones_but_not_entries() {
        assert!(is_entry_clone_of(
            "exec_simple_query.isra.0",
            "exec_simple_query"
        ));
        assert!(is_entry_clone_of("ExecInitNode.part.0", "ExecInitNode"));
        assert!(is_entry_clone_of("foo.constprop.0", "foo"));
        assert!(is_clone_of(
            "standard_ExecutorStart.cold",
            "standard_ExecutorStart"
        ));
        assert!(!is_entry_clone_of(
            "standard_ExecutorStart.cold",
            "standard_ExecutorStart"
        ));
        assert!(!is_entry_clone_of("foo.part.0.cold", "foo"));
        assert!(!is_entry_clone_of("foobar", "foo"));
        assert!(!is_entry_clone_of("foo", "foo"));
    }
}
