//! C types read from DWARF DIEs, and `DebugInfo` as a `TypeSource`.
use super::*;
use index::{global_ref, type_ref};
use types::{Encoding, Member};

impl DebugInfo {
    fn read_type(&self, off: u64) -> Result<Type> {
        let unit = self.unit_for_offset(off)?;
        let uo = index::unit_offset(&unit, off).ok_or_else(|| anyhow!("bad type offset"))?;
        let mut tree = unit.entries_tree(Some(uo)).map_err(|e| anyhow!("{e}"))?;
        let root = tree.root().map_err(|e| anyhow!("{e}"))?;
        let e = root.entry().clone();
        let u = &*unit;
        let name = e
            .attr_value(dw::DW_AT_name)
            .and_then(|v| self.attr_str(u, v));
        let size = e
            .attr_value(dw::DW_AT_byte_size)
            .and_then(|v| v.udata_value())
            .unwrap_or(0);
        let target = e
            .attr_value(dw::DW_AT_type)
            .and_then(|v| type_ref(&self.dwarf, u, v));
        let ty = match e.tag() {
            dw::DW_TAG_base_type => {
                let enc = match e.attr_value(dw::DW_AT_encoding) {
                    Some(AttributeValue::Encoding(x)) => x,
                    _ => gimli::DW_ATE_signed,
                };
                let enc = match enc {
                    gimli::DW_ATE_unsigned => Encoding::Unsigned,
                    gimli::DW_ATE_signed_char => Encoding::SignedChar,
                    gimli::DW_ATE_unsigned_char => Encoding::UnsignedChar,
                    gimli::DW_ATE_boolean => Encoding::Bool,
                    gimli::DW_ATE_float => Encoding::Float,
                    _ => Encoding::Signed,
                };
                Type::Base {
                    name: name.unwrap_or_else(|| "?".into()),
                    size,
                    enc,
                }
            }
            dw::DW_TAG_pointer_type | dw::DW_TAG_reference_type => Type::Pointer { target },
            dw::DW_TAG_typedef => Type::Typedef {
                name: name.unwrap_or_default(),
                target,
            },
            dw::DW_TAG_const_type => Type::Qualified {
                kw: "const",
                target,
            },
            dw::DW_TAG_volatile_type => Type::Qualified {
                kw: "volatile",
                target,
            },
            dw::DW_TAG_restrict_type => Type::Qualified {
                kw: "restrict",
                target,
            },
            dw::DW_TAG_atomic_type => Type::Qualified {
                kw: "_Atomic",
                target,
            },
            dw::DW_TAG_subroutine_type => {
                let (params, variadic) = self.parameters(u, &e, root.children())?;
                Type::Function {
                    ret: target,
                    params,
                    variadic,
                }
            }
            dw::DW_TAG_structure_type | dw::DW_TAG_union_type | dw::DW_TAG_class_type => {
                let kw = if e.tag() == dw::DW_TAG_union_type {
                    "union"
                } else {
                    "struct"
                };
                let declaration = e.attr_value(dw::DW_AT_declaration).is_some();
                let mut members = Vec::new();
                let mut children = root.children();
                while let Some(child) = children.next().map_err(|e| anyhow!("{e}"))? {
                    let c = child.entry();
                    if c.tag() != dw::DW_TAG_member {
                        continue;
                    }
                    let mname = c
                        .attr_value(dw::DW_AT_name)
                        .and_then(|v| self.attr_str(u, v));
                    let mty = match c
                        .attr_value(dw::DW_AT_type)
                        .and_then(|v| type_ref(&self.dwarf, u, v))
                    {
                        Some(t) => t,
                        None => continue,
                    };
                    let off = match c.attr_value(dw::DW_AT_data_member_location) {
                        Some(v) => v.udata_value().unwrap_or(0),
                        None => 0,
                    };
                    let bit_size = c
                        .attr_value(dw::DW_AT_bit_size)
                        .and_then(|v| v.udata_value());
                    let bits = bit_size.map(|bs| {
                        let dbo = c
                            .attr_value(dw::DW_AT_data_bit_offset)
                            .and_then(|v| v.udata_value())
                            .unwrap_or(off * 8);
                        (dbo, bs)
                    });
                    members.push(Member {
                        name: mname,
                        ty: mty,
                        offset: bits.map(|(b, _)| b / 8).unwrap_or(off),
                        bits,
                    });
                }
                Type::Struct {
                    kw,
                    name,
                    size,
                    members,
                    declaration,
                }
            }
            dw::DW_TAG_enumeration_type => {
                let mut values = Vec::new();
                let mut children = root.children();
                let mut signed = false;
                if let Some(TypeRef::Die(t)) = &target
                    && let Type::Base { enc, .. } = self.read_type(*t)?
                {
                    signed = enc == Encoding::Signed;
                }
                while let Some(child) = children.next().map_err(|e| anyhow!("{e}"))? {
                    let c = child.entry();
                    if c.tag() != dw::DW_TAG_enumerator {
                        continue;
                    }
                    let n = c
                        .attr_value(dw::DW_AT_name)
                        .and_then(|v| self.attr_str(u, v))
                        .unwrap_or_default();
                    let v = match c.attr_value(dw::DW_AT_const_value) {
                        Some(AttributeValue::Sdata(x)) => x,
                        Some(AttributeValue::Udata(x)) => x as i64,
                        Some(AttributeValue::Data1(x)) => x as i64,
                        Some(AttributeValue::Data2(x)) => x as i64,
                        Some(AttributeValue::Data4(x)) => x as i32 as i64,
                        Some(AttributeValue::Data8(x)) => x as i64,
                        _ => 0,
                    };
                    values.push((n, v));
                }
                Type::Enum {
                    name,
                    size: if size == 0 { 4 } else { size },
                    signed,
                    values,
                }
            }
            dw::DW_TAG_array_type => {
                let mut count = None;
                let mut dims = Vec::new();
                let mut children = root.children();
                while let Some(child) = children.next().map_err(|e| anyhow!("{e}"))? {
                    let c = child.entry();
                    if c.tag() == dw::DW_TAG_subrange_type {
                        let n = if let Some(v) =
                            c.attr_value(dw::DW_AT_count).and_then(|v| v.udata_value())
                        {
                            Some(v)
                        } else {
                            c.attr_value(dw::DW_AT_upper_bound)
                                .and_then(|v| v.udata_value())
                                .map(|ub| ub + 1)
                        };
                        dims.push(n);
                    }
                }
                if let Some(first) = dims.first() {
                    count = *first;
                }
                let elem = target.ok_or_else(|| anyhow!("array without element type"))?;
                // Multi-dimensional: nest inner dimensions as synthetic arrays.
                let mut inner = elem;
                for d in dims.iter().skip(1).rev() {
                    inner = TypeRef::Synth(Rc::new(Type::Array {
                        elem: inner,
                        count: *d,
                    }));
                }
                Type::Array { elem: inner, count }
            }
            _ => Type::Void,
        };
        Ok(ty)
    }
}

impl DebugInfo {
    /// The parameters' types of a subroutine type or subprogram DIE (None:
    /// not prototyped), and whether it takes `...`.
    fn parameters(
        &self,
        u: &gimli::Unit<R>,
        e: &gimli::DebuggingInformationEntry<R>,
        mut children: gimli::EntriesTreeIter<R>,
    ) -> Result<(Option<Vec<TypeRef>>, bool)> {
        let mut params = Vec::new();
        let mut variadic = false;
        while let Some(child) = children.next().map_err(|e| anyhow!("{e}"))? {
            let c = child.entry();
            match c.tag() {
                dw::DW_TAG_formal_parameter => {
                    if let Some(t) = c
                        .attr_value(dw::DW_AT_type)
                        .and_then(|v| type_ref(&self.dwarf, u, v))
                    {
                        params.push(t);
                    }
                }
                dw::DW_TAG_unspecified_parameters => variadic = true,
                _ => {}
            }
        }
        let prototyped = e.attr_value(dw::DW_AT_prototyped).is_some();
        Ok((
            (prototyped || !params.is_empty()).then_some(params),
            variadic,
        ))
    }

    /// The type of the function whose subprogram DIE is at `die` (an
    /// inlined or out-of-line instance: its abstract origin is followed),
    /// e.g. `void (QueryDesc *, ScanDirection, uint64, _Bool)`.
    pub fn function_type(&self, die: u64) -> Option<TypeRef> {
        let mut off = die;
        for _ in 0..4 {
            let unit = self.unit_for_offset(off).ok()?;
            let uo = index::unit_offset(&unit, off)?;
            let mut tree = unit.entries_tree(Some(uo)).ok()?;
            let root = tree.root().ok()?;
            let e = root.entry().clone();
            let origin = e
                .attr_value(dw::DW_AT_abstract_origin)
                .or_else(|| e.attr_value(dw::DW_AT_specification))
                .and_then(|v| global_ref(&self.dwarf, &unit, v));
            if let Some(o) = origin {
                off = o;
                continue;
            }
            let ret = e
                .attr_value(dw::DW_AT_type)
                .and_then(|v| type_ref(&self.dwarf, &unit, v));
            let (params, variadic) = self.parameters(&unit, &e, root.children()).ok()?;
            return Some(TypeRef::Synth(Rc::new(Type::Function {
                ret,
                params,
                variadic,
            })));
        }
        None
    }
}

impl TypeSource for DebugInfo {
    fn resolve(&self, t: &TypeRef) -> Rc<Type> {
        match t {
            TypeRef::Synth(t) => t.clone(),
            TypeRef::Named(n) => match self.type_by_name(n) {
                Some(TypeRef::Named(_)) | None => Rc::new(Type::Struct {
                    kw: "struct",
                    name: Some(n.clone()),
                    size: 0,
                    members: Vec::new(),
                    declaration: true,
                }),
                Some(t) => self.resolve(&t),
            },
            TypeRef::Die(off) => {
                if let Some(t) = self.type_cache.borrow().get(off) {
                    return t.clone();
                }
                let ty = Rc::new(self.read_type(*off).unwrap_or(Type::Void));
                self.type_cache.borrow_mut().insert(*off, ty.clone());
                ty
            }
        }
    }

    fn type_by_name(&self, name: &str) -> Option<TypeRef> {
        let name = name.trim();
        if let Some(p) = &self.pack {
            if let Some(t) = p.struct_type(name).or_else(|| p.enum_type(name)) {
                return Some(t);
            }
            let base = |n: &str, size: u64, enc: Encoding| {
                Some(TypeRef::Synth(Rc::new(Type::Base {
                    name: n.into(),
                    size,
                    enc,
                })))
            };
            return match name {
                "int" | "int32" => base("int", 4, Encoding::Signed),
                "long" | "int64" => base("long", 8, Encoding::Signed),
                "unsigned int" | "uint32" | "Oid" => base("unsigned int", 4, Encoding::Unsigned),
                "unsigned long" | "uint64" | "Size" => base("unsigned long", 8, Encoding::Unsigned),
                "char" => base("char", 1, Encoding::SignedChar),
                "double" => base("double", 8, Encoding::Float),
                "bool" => base("bool", 1, Encoding::Bool),
                _ => None,
            };
        }
        if let Some(o) = self.index.types.get(name) {
            return Some(TypeRef::Die(*o));
        }
        // C spellings of base types that DWARF names differently.
        let alias = match name {
            "long" | "long int" | "signed long" => "long int",
            "unsigned long" | "unsigned long int" => "long unsigned int",
            "unsigned" | "unsigned int" => "unsigned int",
            "short" => "short int",
            "unsigned short" => "short unsigned int",
            "long long" => "long long int",
            "unsigned long long" => "long long unsigned int",
            "unsigned char" => "unsigned char",
            "signed char" => "signed char",
            _ => return None,
        };
        self.index.types.get(alias).map(|o| TypeRef::Die(*o))
    }
}
