//! `info functions` and `info variables`: the debug info's functions and
//! global or static variables whose names match a regular expression,
//! grouped by file as gdb lists them (`LINE:\tDECLARATION;`), then the
//! ELF symbols that have no debug info.
use super::*;
use crate::command::SymbolKind;
use crate::expr::ctype;
use std::collections::BTreeMap;

impl Session {
    pub fn info_symbols(&self, kind: SymbolKind, regex: Option<&str>) -> Result<String> {
        let re = match regex {
            Some(r) => Some(crate::command::symbol_regex(r)?),
            None => None,
        };
        let matches = |n: &str| re.as_ref().is_none_or(|re| re.is_match(n));
        let what = match kind {
            SymbolKind::Functions => "functions",
            SymbolKind::Variables => "variables",
        };
        let mut out = match regex {
            Some(r) => format!("All {what} matching regular expression \"{r}\":"),
            None => format!("All defined {what}:"),
        };
        // file -> (static, name, line, declaration): gdb lists a file's
        // global symbols first, then its static ones, each by name
        let mut files: BTreeMap<String, Vec<(bool, String, u32, String)>> = BTreeMap::new();
        let mut add = |name: &str, addr: u64, die: u64, ty: Option<TypeRef>| {
            let Some((file, line)) = self.di.decl_at(die) else {
                return;
            };
            let decl = match ty {
                Some(t) => ctype::declare(self, &t, name),
                None => format!("void {name}"),
            };
            let is_static = !self.di.is_external(die);
            let stat = if is_static { "static " } else { "" };
            let shown = self.di.display_file_name(addr, &file);
            files.entry(shown).or_default().push((
                is_static,
                name.to_string(),
                line,
                format!("{stat}{decl};"),
            ));
        };
        match kind {
            SymbolKind::Functions => {
                for (name, locs) in &self.di.index.functions {
                    if !matches(name) {
                        continue;
                    }
                    for l in locs.iter().filter(|l| !l.inlined && l.die != 0) {
                        add(name, l.addr, l.die, self.di.function_type(l.die));
                    }
                }
            }
            SymbolKind::Variables => {
                for (name, g) in &self.di.index.globals {
                    if !matches(name) {
                        continue;
                    }
                    add(name, g.addr, g.die, self.di.die_type(g.die));
                }
            }
        }
        for (file, mut syms) in files {
            syms.sort();
            syms.dedup();
            out.push_str(&format!("\n\nFile {file}:"));
            for (_, _, line, decl) in syms {
                out.push_str(&format!("\n{line}:\t{decl}"));
            }
        }
        // the ELF symbols of this kind that no debug info describes: a
        // function outside every unit's code (a .cold part is inside its
        // unit), a variable by a name the debug info does not have
        let want_func = kind == SymbolKind::Functions;
        let described = |s: &crate::debuginfo::elf::ElfSymbol| match kind {
            SymbolKind::Functions => self.di.unit_covers(s.addr),
            SymbolKind::Variables => self.di.index.globals.contains_key(&s.name),
        };
        let mut plain: Vec<(u64, &str)> = self
            .di
            .symbols
            .iter()
            .filter(|s| s.is_func == want_func && matches(&s.name) && !described(s))
            .map(|s| (s.addr + self.bias, s.name.as_str()))
            .collect();
        plain.sort();
        plain.dedup();
        if !plain.is_empty() {
            out.push_str("\n\nNon-debugging symbols:");
            for (a, n) in plain {
                out.push_str(&format!("\n0x{a:016x}  {n}"));
            }
        }
        Ok(out)
    }
}

impl Session {
    /// `info types [REGEX]`: gdb's list, by file (sorted by name), each
    /// type once per file and name: `LINE:\tstruct Plan;`, `LINE:\ttypedef
    /// struct nameData NameData;`, a base type as `\tchar` with no line.
    pub fn info_types(&self, regex: Option<&str>) -> Result<String> {
        use crate::debuginfo::TypeDeclKind as K;
        let re = match regex {
            Some(r) => Some(crate::command::symbol_regex(r)?),
            None => None,
        };
        if self.di.pack.is_some() {
            bail!("info types needs the binary's DWARF; this one has a layout pack only");
        }
        // every object's types, as gdb lists every objfile's: the main
        // binary's and the mapped libraries' (a library's from its dwz
        // supplementary file too)
        let mut decls = Vec::new();
        for (di, tag) in self.all_debug_infos() {
            if di.pack.is_some() {
                continue;
            }
            let keep = |n: &str| re.as_ref().is_none_or(|re| re.is_match(n));
            decls.extend(
                di.type_decls(&keep)?
                    .into_iter()
                    .map(|d| (d, di.clone(), tag)),
            );
        }
        // file -> name -> (line, declaration): gdb keeps one symbol per
        // file and name (a struct and its typedef of one name: the one
        // declared first)
        let mut files: BTreeMap<String, BTreeMap<String, (u32, String)>> = BTreeMap::new();
        for (d, di, tag) in decls {
            let text = match d.kind {
                K::Struct => format!("struct {};", d.name),
                K::Union => format!("union {};", d.name),
                K::Enum => format!("enum {};", d.name),
                K::Base => d.name.clone(),
                K::Typedef => {
                    let target = {
                        // gdb names the target with its own typedefs resolved
                        // (`typedef unsigned long Datum;`), not inside it
                        let mut t = di.die_type(d.die).map(|t| Self::tagged_type(t, tag));
                        for _ in 0..16 {
                            match t.as_ref().map(|r| self.resolve(r)).as_deref() {
                                Some(crate::debuginfo::types::Type::Typedef { target, .. }) => {
                                    t = target.clone()
                                }
                                _ => break,
                            }
                        }
                        match t {
                            Some(t) => crate::debuginfo::types::type_name(self, &t),
                            None => "void".into(),
                        }
                    };
                    format!("typedef {target} {};", d.name)
                }
            };
            let names = files.entry(d.file).or_default();
            match names.get(&d.name) {
                Some((l, _)) if *l <= d.line => {}
                _ => {
                    names.insert(d.name, (d.line, text));
                }
            }
        }
        let mut out = match regex {
            Some(r) => format!("All types matching regular expression \"{r}\":"),
            None => "All defined types:".to_string(),
        };
        for (file, names) in files {
            out.push_str(&format!("\n\nFile {file}:"));
            for (_, (line, text)) in names {
                if line == 0 {
                    out.push_str(&format!("\n\t{text}"));
                } else {
                    out.push_str(&format!("\n{line}:\t{text}"));
                }
            }
        }
        Ok(out)
    }
}
