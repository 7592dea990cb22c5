//! Layout packs: what pgdbg needs from DWARF, extracted once from a debug
//! build of a PostgreSQL major and used for stripped binaries of the same
//! major (struct layouts are fixed per major on x86-64 Linux; addresses
//! come from the stripped binary's own `.dynsym`).  The project's packs
//! live in `symbols/` and are compiled into pgdbg.

use super::DebugInfo;
use super::elf::ElfImage;
use super::types::{Encoding, Member, Type, TypeRef, TypeSource, strip};
use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Bump when the layout of `Pack` changes.
pub const PACK_FORMAT: u32 = 1;

/// What a pack records: named by the layer that knows the program
/// (`postgres::packs`), so this module stays free of PostgreSQL names.
pub struct PackSpec {
    /// Structs (and unions) to record.
    pub structs: &'static [&'static str],
    /// Structs without which a pack is refused as incomplete.
    pub required: &'static [&'static str],
    /// Globals whose types are recorded (addresses come from `.dynsym`).
    pub globals: &'static [&'static str],
    /// (setting, option table): enum option tables recorded by name.
    pub guc_enums: &'static [(&'static str, &'static str)],
    /// Enum types recorded by their (typedef) names, with every
    /// enumerator.
    pub enums: &'static [&'static str],
}

/// Finds the pack of a binary that has no DWARF (`file`: one the user
/// named).  Implemented where the program is known (`postgres::packs`).
pub trait PackSource {
    fn pack_for(
        &self,
        binary: &ElfImage,
        real_path: &std::path::Path,
        build_id: &str,
        file: Option<&std::path::Path>,
    ) -> Result<Pack>;
}

/// A C type, as much as pgdbg needs: named structs are referenced by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PackType {
    Void,
    Base {
        name: String,
        size: u64,
        enc: String,
    },
    Pointer {
        to: Box<PackType>,
    },
    Named {
        name: String,
    },
    Array {
        elem: Box<PackType>,
        count: Option<u64>,
    },
    Enum {
        name: Option<String>,
        size: u64,
        values: BTreeMap<String, i64>,
    },
    Function,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PackField {
    pub name: String,
    pub offset: u64,
    #[serde(rename = "type")]
    pub ty: PackType,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PackStruct {
    pub size: u64,
    pub union: bool,
    pub fields: Vec<PackField>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Pack {
    pub format: u32,
    pub major: u32,
    /// PG_VERSION_STR of the build the pack came from.
    pub version: String,
    pub structs: BTreeMap<String, PackStruct>,
    pub globals: BTreeMap<String, PackType>,
    pub guc_enums: BTreeMap<String, Vec<(String, i64)>>,
    /// Enum types by name (absent from packs written before they were
    /// recorded: none known then).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub enums: BTreeMap<String, PackType>,
}

impl Pack {
    /// Parse a pack; `required` structs must be in it.
    pub fn parse(text: &str, origin: &str, required: &[&str]) -> Result<Pack> {
        let p: Pack = serde_json::from_str(text).map_err(|e| {
            anyhow!(
                "layout pack {origin} is corrupted ({e}): regenerate it with pgdbg symbols extract"
            )
        })?;
        if p.format != PACK_FORMAT {
            bail!(
                "layout pack {origin} has format {} but this pgdbg reads format {PACK_FORMAT}: regenerate it with pgdbg symbols extract",
                p.format
            );
        }
        for s in required {
            if !p.structs.contains_key(*s) {
                bail!(
                    "layout pack {origin} is incomplete (no {s}): regenerate it with pgdbg symbols extract"
                );
            }
        }
        Ok(p)
    }

    pub fn load_file(path: &std::path::Path, required: &[&str]) -> Result<Pack> {
        let t = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read layout pack {}", path.display()))?;
        Self::parse(&t, &path.display().to_string(), required)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serializable") + "\n"
    }

    // ------------------------------------------------------------ extract

    /// Extract what `spec` names from a binary with DWARF, as the pack of
    /// `major` (`version`: the build's version string).
    pub fn extract(di: &DebugInfo, spec: &PackSpec, major: u32, version: String) -> Result<Pack> {
        let mut structs = BTreeMap::new();
        for name in spec.structs {
            let Some(t) = di
                .type_by_name(name)
                .or_else(|| di.type_by_name(&format!("struct {name}")))
            else {
                continue;
            };
            if let Type::Struct {
                kw,
                size,
                members,
                declaration: false,
                ..
            } = &*strip(di, &t)
            {
                let fields = members
                    .iter()
                    .filter(|m| m.bits.is_none())
                    .filter_map(|m| {
                        Some(PackField {
                            name: m.name.clone()?,
                            offset: m.offset,
                            ty: to_pack(di, &m.ty, 0),
                        })
                    })
                    .collect();
                structs.insert(
                    name.to_string(),
                    PackStruct {
                        size: *size,
                        union: *kw == "union",
                        fields,
                    },
                );
            }
        }
        let mut globals = BTreeMap::new();
        for g in spec.globals {
            if let Some((_, Some(t))) = di.global(g) {
                globals.insert(g.to_string(), to_pack(di, &t, 0));
            }
        }
        let mut guc_enums = BTreeMap::new();
        for (guc, table) in spec.guc_enums {
            if let Some((addr, _)) = di.global(table) {
                let opts = read_enum_table(&di.binary, addr)?;
                if !opts.is_empty() {
                    guc_enums.insert(guc.to_string(), opts);
                }
            }
        }
        let mut enums = BTreeMap::new();
        for name in spec.enums {
            if let Some(t) = di.type_by_name(name)
                && let e @ PackType::Enum { .. } = to_pack(di, &t, 0)
            {
                enums.insert(name.to_string(), e);
            }
        }
        Ok(Pack {
            format: PACK_FORMAT,
            major,
            version,
            structs,
            globals,
            guc_enums,
            enums,
        })
    }

    // ------------------------------------------------------------- types

    pub fn type_of_global(&self, name: &str) -> Option<TypeRef> {
        self.globals.get(name).map(from_pack)
    }

    /// An enum type recorded by name.
    pub fn enum_type(&self, name: &str) -> Option<TypeRef> {
        self.enums.get(name).map(from_pack)
    }

    /// A struct (or typedef-named struct) from the pack as a pgdbg type.
    pub fn struct_type(&self, name: &str) -> Option<TypeRef> {
        let name = name.strip_prefix("struct ").unwrap_or(name);
        let s = self.structs.get(name)?;
        Some(TypeRef::Synth(Rc::new(Type::Struct {
            kw: if s.union { "union" } else { "struct" },
            name: Some(name.to_string()),
            size: s.size,
            members: s
                .fields
                .iter()
                .map(|f| Member {
                    name: Some(f.name.clone()),
                    ty: from_pack(&f.ty),
                    offset: f.offset,
                    bits: None,
                })
                .collect(),
            declaration: false,
        })))
    }
}

fn enc_name(e: Encoding) -> &'static str {
    match e {
        Encoding::Signed => "signed",
        Encoding::Unsigned => "unsigned",
        Encoding::SignedChar => "signed_char",
        Encoding::UnsignedChar => "unsigned_char",
        Encoding::Bool => "bool",
        Encoding::Float => "float",
    }
}

fn enc_of(s: &str) -> Encoding {
    match s {
        "unsigned" => Encoding::Unsigned,
        "signed_char" => Encoding::SignedChar,
        "unsigned_char" => Encoding::UnsignedChar,
        "bool" => Encoding::Bool,
        "float" => Encoding::Float,
        _ => Encoding::Signed,
    }
}

/// DWARF type -> pack type; structs become references by name.
fn to_pack(ts: &dyn TypeSource, t: &TypeRef, depth: u32) -> PackType {
    if depth > 8 {
        return PackType::Void;
    }
    let ty = ts.resolve(t);
    match &*ty {
        Type::Void => PackType::Void,
        Type::Base { name, size, enc } => PackType::Base {
            name: name.clone(),
            size: *size,
            enc: enc_name(*enc).into(),
        },
        Type::Pointer { target } => PackType::Pointer {
            to: Box::new(match target {
                Some(t) => to_pack(ts, t, depth + 1),
                None => PackType::Void,
            }),
        },
        Type::Typedef { name, target } => {
            // keep typedefs of structs by the struct's name when known
            match target {
                Some(tt) => match &*strip(ts, tt) {
                    Type::Struct { name: Some(sn), .. } => PackType::Named { name: sn.clone() },
                    Type::Struct { name: None, .. } => PackType::Named { name: name.clone() },
                    _ => to_pack(ts, tt, depth + 1),
                },
                None => PackType::Void,
            }
        }
        Type::Qualified { target, .. } => match target {
            Some(t) => to_pack(ts, t, depth + 1),
            None => PackType::Void,
        },
        Type::Struct { name, .. } => PackType::Named {
            name: name.clone().unwrap_or_default(),
        },
        Type::Enum {
            name, size, values, ..
        } => PackType::Enum {
            name: name.clone(),
            size: *size,
            values: values.iter().cloned().collect(),
        },
        Type::Array { elem, count } => PackType::Array {
            elem: Box::new(to_pack(ts, elem, depth + 1)),
            count: *count,
        },
        Type::Function { .. } => PackType::Function,
    }
}

/// Pack type -> pgdbg type (named structs resolved lazily by name).
pub fn from_pack(p: &PackType) -> TypeRef {
    TypeRef::Synth(Rc::new(match p {
        PackType::Void => Type::Void,
        PackType::Base { name, size, enc } => Type::Base {
            name: name.clone(),
            size: *size,
            enc: enc_of(enc),
        },
        PackType::Pointer { to } => Type::Pointer {
            target: match &**to {
                PackType::Void => None,
                other => Some(from_pack(other)),
            },
        },
        PackType::Named { name } => return TypeRef::Named(name.clone()),
        PackType::Array { elem, count } => Type::Array {
            elem: from_pack(elem),
            count: *count,
        },
        PackType::Enum { name, size, values } => Type::Enum {
            name: name.clone(),
            size: *size,
            signed: values.values().any(|v| *v < 0),
            values: values.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        },
        PackType::Function => Type::Function {
            ret: None,
            params: None,
            variadic: false,
        },
    }))
}

/// Read a static `config_enum_entry` array from the binary file: the name
/// pointers are R_X86_64_RELATIVE relocations (PIE), the values plain data.
fn read_enum_table(img: &ElfImage, addr: u64) -> Result<Vec<(String, i64)>> {
    use object::{Object, ObjectSection};
    let mut relocs: BTreeMap<u64, u64> = BTreeMap::new();
    if let Some(it) = img.file.dynamic_relocations() {
        for (off, r) in it {
            if let object::RelocationFlags::Elf { r_type } = r.flags()
                && r_type == object::elf::R_X86_64_RELATIVE
            {
                relocs.insert(off, r.addend() as u64);
            }
        }
    }
    let read_at = |vaddr: u64, len: usize| -> Option<Vec<u8>> {
        for s in img.file.sections() {
            if vaddr >= s.address() && vaddr + len as u64 <= s.address() + s.size() {
                let d = s.data().ok()?;
                let o = (vaddr - s.address()) as usize;
                return d.get(o..o + len).map(|x| x.to_vec());
            }
        }
        None
    };
    let mut out = Vec::new();
    // config_enum_entry: {const char *name; int val; bool hidden} = 16 bytes
    for i in 0..32u64 {
        let e = addr + i * 16;
        let name_ptr = match relocs.get(&e) {
            Some(p) => *p,
            None => u64::from_le_bytes(
                read_at(e, 8)
                    .ok_or_else(|| anyhow!("bad enum table"))?
                    .try_into()
                    .unwrap(),
            ),
        };
        if name_ptr == 0 {
            break;
        }
        let val = i32::from_le_bytes(
            read_at(e + 8, 4)
                .ok_or_else(|| anyhow!("bad enum table"))?
                .try_into()
                .unwrap(),
        );
        let hidden = read_at(e + 12, 1).map(|b| b[0] != 0).unwrap_or(false);
        let mut name = Vec::new();
        let mut a = name_ptr;
        while name.len() < 64 {
            let b = read_at(a, 1).ok_or_else(|| anyhow!("bad enum name"))?;
            if b[0] == 0 {
                break;
            }
            name.push(b[0]);
            a += 1;
        }
        if !hidden {
            out.push((String::from_utf8_lossy(&name).into_owned(), val as i64));
        }
    }
    Ok(out)
}
