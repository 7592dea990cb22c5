//! Struct layouts taken from DWARF once and then used to decode raw bytes:
//! one `process_vm_readv` of a whole struct, fields picked out by name.
//! This is how the PostgreSQL layer reads `CachedPlanSource` and friends
//! without hard-coding a single offset.

use super::types::{Encoding, Type, TypeRef, TypeSource, size_of, strip};
use anyhow::{Result, anyhow};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    Signed,
    Unsigned,
    Float,
    Bool,
    Pointer,
    Enum,
    Other,
}

#[derive(Clone, Debug)]
pub struct Field {
    pub offset: u64,
    pub size: u64,
    pub kind: FieldKind,
    pub ty: TypeRef,
}

#[derive(Clone, Debug)]
pub struct Layout {
    pub name: String,
    pub size: u64,
    pub fields: HashMap<String, Field>,
}

fn kind_of(ts: &dyn TypeSource, t: &TypeRef) -> FieldKind {
    match &*strip(ts, t) {
        Type::Base { enc, .. } => match enc {
            Encoding::Signed | Encoding::SignedChar => FieldKind::Signed,
            Encoding::Unsigned | Encoding::UnsignedChar => FieldKind::Unsigned,
            Encoding::Float => FieldKind::Float,
            Encoding::Bool => FieldKind::Bool,
        },
        Type::Pointer { .. } => FieldKind::Pointer,
        Type::Enum { .. } => FieldKind::Enum,
        _ => FieldKind::Other,
    }
}

impl Layout {
    /// The layout of a struct type named `name` ("CachedPlanSource" or
    /// "struct HTAB").  Bitfields are skipped.
    pub fn of(ts: &dyn TypeSource, name: &str) -> Result<Layout> {
        let t = ts
            .type_by_name(name)
            .or_else(|| ts.type_by_name(&format!("struct {name}")))
            .ok_or_else(|| anyhow!("type {name} is not in the debug info"))?;
        Self::of_type(ts, name, &t)
    }

    pub fn of_type(ts: &dyn TypeSource, name: &str, t: &TypeRef) -> Result<Layout> {
        let st = strip(ts, t);
        let (size, members) = match &*st {
            Type::Struct {
                size,
                members,
                declaration: false,
                ..
            } => (*size, members.clone()),
            _ => return Err(anyhow!("{name} is not a complete struct in the debug info")),
        };
        let mut fields = HashMap::new();
        for m in members {
            if m.bits.is_some() {
                continue;
            }
            if let Some(n) = &m.name {
                fields.insert(
                    n.clone(),
                    Field {
                        offset: m.offset,
                        size: size_of(ts, &m.ty),
                        kind: kind_of(ts, &m.ty),
                        ty: m.ty.clone(),
                    },
                );
            }
        }
        Ok(Layout {
            name: name.to_string(),
            size,
            fields,
        })
    }

    pub fn has(&self, f: &str) -> bool {
        self.fields.contains_key(f)
    }

    pub fn field(&self, f: &str) -> Result<&Field> {
        self.fields
            .get(f)
            .ok_or_else(|| anyhow!("{} has no field {f} in this build's debug info", self.name))
    }

    pub fn offset(&self, f: &str) -> Result<u64> {
        Ok(self.field(f)?.offset)
    }

    fn raw<'a>(&self, b: &'a [u8], f: &str) -> Option<(&'a [u8], &Field)> {
        let fl = self.fields.get(f)?;
        let s = fl.offset as usize;
        let e = s + fl.size as usize;
        if e > b.len() {
            return None;
        }
        Some((&b[s..e], fl))
    }

    /// An integer, pointer, bool or enum field as i64 (None when absent).
    pub fn int(&self, b: &[u8], f: &str) -> Option<i64> {
        let (raw, fl) = self.raw(b, f)?;
        let mut x = [0u8; 8];
        let n = raw.len().min(8);
        x[..n].copy_from_slice(&raw[..n]);
        let v = u64::from_le_bytes(x);
        Some(match fl.kind {
            FieldKind::Signed | FieldKind::Enum if n < 8 => {
                let sh = 64 - 8 * n as u32;
                ((v << sh) as i64) >> sh
            }
            _ => v as i64,
        })
    }

    pub fn ptr(&self, b: &[u8], f: &str) -> Option<u64> {
        self.int(b, f).map(|v| v as u64)
    }

    pub fn float(&self, b: &[u8], f: &str) -> Option<f64> {
        let (raw, fl) = self.raw(b, f)?;
        if fl.kind != FieldKind::Float {
            return None;
        }
        Some(match raw.len() {
            4 => f32::from_le_bytes(raw.try_into().ok()?) as f64,
            8 => f64::from_le_bytes(raw.try_into().ok()?),
            _ => return None,
        })
    }

    pub fn boolean(&self, b: &[u8], f: &str) -> Option<bool> {
        self.int(b, f).map(|v| v != 0)
    }
}
