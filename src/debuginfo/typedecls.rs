//! Every type a unit defines at its top level (structs, unions, enums,
//! typedefs, base types) with where it is declared: what `info types`
//! lists.  A walk over all units' top-level DIEs, made when asked.

use super::*;
use code::normalised_path;

/// What a type's DIE is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TypeDeclKind {
    Struct,
    Union,
    Enum,
    Typedef,
    Base,
}

/// A type defined at a unit's top level.
#[derive(Clone, Debug)]
pub struct TypeDecl {
    pub name: String,
    pub kind: TypeDeclKind,
    /// .debug_info offset of the DIE.
    pub die: u64,
    /// The file as gdb names it (a unit's main file by its DW_AT_name,
    /// another by its line-table directory and name, a relative directory
    /// left relative) and the line (0: none, a base type's,
    /// placed in the unit's main file).
    pub file: String,
    pub line: u32,
}

impl DebugInfo {
    /// The named types of every unit whose names `keep` accepts.
    pub fn type_decls(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<TypeDecl>> {
        use gimli::constants as dw;
        let mut out = Vec::new();
        for &uoff in &self.index.units {
            let Ok(unit) = self.unit_at(uoff) else {
                continue;
            };
            let uref = gimli::UnitRef::new(super::index::file_dwarf(&self.dwarf, &unit), &unit);
            let str_of = |v: Option<R>| v.map(|s| String::from_utf8_lossy(s.slice()).into_owned());
            let cu_name = str_of(unit.name);
            let comp = str_of(unit.comp_dir).unwrap_or_default();
            let main_full = cu_name.as_ref().map(|n| {
                if n.starts_with('/') {
                    n.clone()
                } else {
                    format!("{comp}/{n}")
                }
            });
            let shown = |full: &str| -> String {
                match (&cu_name, &main_full) {
                    (Some(n), Some(m)) if normalised_path(m) == normalised_path(full) => n.clone(),
                    _ => full.to_string(),
                }
            };
            let mut tree = unit.entries_tree(None).map_err(|e| anyhow!("{e}"))?;
            let root = tree.root().map_err(|e| anyhow!("{e}"))?;
            let mut children = root.children();
            while let Some(child) = children.next().map_err(|e| anyhow!("{e}"))? {
                let e = child.entry();
                let kind = match e.tag() {
                    dw::DW_TAG_structure_type => TypeDeclKind::Struct,
                    dw::DW_TAG_union_type => TypeDeclKind::Union,
                    dw::DW_TAG_enumeration_type => TypeDeclKind::Enum,
                    dw::DW_TAG_typedef => TypeDeclKind::Typedef,
                    dw::DW_TAG_base_type => TypeDeclKind::Base,
                    _ => continue,
                };
                if let Some(AttributeValue::Flag(true)) = e.attr_value(dw::DW_AT_declaration) {
                    continue;
                }
                let Some(mut name) = e
                    .attr_value(dw::DW_AT_name)
                    .and_then(|v| uref.attr_string(v).ok())
                    .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
                else {
                    continue;
                };
                if kind == TypeDeclKind::Base {
                    // gdb's names: `unsigned long` for DWARF's `long unsigned int`
                    name = super::types::gdb_spelling(&name).to_string();
                }
                if !keep(&name) {
                    continue;
                }
                let line = match e.attr_value(dw::DW_AT_decl_line) {
                    Some(AttributeValue::Udata(l)) => l as u32,
                    Some(AttributeValue::Data1(l)) => l as u32,
                    Some(AttributeValue::Data2(l)) => l as u32,
                    Some(AttributeValue::Data4(l)) => l,
                    _ => 0,
                };
                let fidx = match e.attr_value(dw::DW_AT_decl_file) {
                    Some(AttributeValue::FileIndex(i) | AttributeValue::Udata(i)) => Some(i),
                    Some(AttributeValue::Data1(i)) => Some(i as u64),
                    Some(AttributeValue::Data2(i)) => Some(i as u64),
                    Some(AttributeValue::Data4(i)) => Some(i as u64),
                    _ => None,
                };
                // the file's full path (to know the unit's main file), and
                // its name as gdb shows it (a relative directory kept)
                let paths = fidx.and_then(|i| {
                    let header = unit.line_program.as_ref()?.header();
                    let fe = header.file(i)?;
                    Some((
                        self.file_path(uref, header, fe)?,
                        self.file_path_from(uref, header, fe, false)?,
                    ))
                });
                let file = match (paths, &main_full) {
                    (Some((full, name)), _) => match shown(&full) {
                        s if s == full => name,
                        s => s,
                    },
                    (None, Some(m)) => shown(m),
                    (None, None) => continue,
                };
                let die = super::index::die_offset(&self.dwarf, &unit, e.offset());
                out.push(TypeDecl {
                    name,
                    kind,
                    die,
                    file,
                    line,
                });
            }
        }
        Ok(out)
    }
}
