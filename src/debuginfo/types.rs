//! C types read from DWARF: base types, pointers, structs/unions with member
//! offsets and bitfields, enums, typedefs, arrays, functions.  Types refer
//! to each other lazily (by DIE offset) so recursive structs cost nothing
//! until a member is followed.

use std::rc::Rc;

/// A reference to a type: a DIE in .debug_info, or a type pgdbg made up
/// (a pointer created by `&`, a literal's `long`, a cast's `T *`).
#[derive(Clone, Debug)]
pub enum TypeRef {
    Die(u64),
    Synth(Rc<Type>),
    /// A struct known by name (layout packs), resolved when followed.
    Named(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Signed,
    Unsigned,
    SignedChar,
    UnsignedChar,
    Bool,
    Float,
}

#[derive(Clone, Debug)]
pub struct Member {
    pub name: Option<String>,
    pub ty: TypeRef,
    /// Byte offset of the member (of its storage unit for bitfields).
    pub offset: u64,
    /// For bitfields: (bit offset from the start of the struct, bit size).
    pub bits: Option<(u64, u64)>,
}

#[derive(Clone, Debug)]
pub enum Type {
    Void,
    Base {
        name: String,
        size: u64,
        enc: Encoding,
    },
    Pointer {
        target: Option<TypeRef>,
    },
    Struct {
        kw: &'static str,
        name: Option<String>,
        size: u64,
        members: Vec<Member>,
        /// An incomplete declaration (`struct X;`); resolve by name.
        declaration: bool,
    },
    Enum {
        name: Option<String>,
        size: u64,
        signed: bool,
        values: Vec<(String, i64)>,
    },
    Typedef {
        name: String,
        target: Option<TypeRef>,
    },
    Array {
        elem: TypeRef,
        count: Option<u64>,
    },
    Function {
        ret: Option<TypeRef>,
        /// The parameters' types (None: not known, or not prototyped), and
        /// whether `...` follows them.
        params: Option<Vec<TypeRef>>,
        variadic: bool,
    },
    /// const/volatile/restrict/atomic wrapper.
    Qualified {
        kw: &'static str,
        target: Option<TypeRef>,
    },
}

impl Type {
    pub fn long() -> TypeRef {
        TypeRef::Synth(Rc::new(Type::Base {
            name: "long".into(),
            size: 8,
            enc: Encoding::Signed,
        }))
    }
    pub fn ulong() -> TypeRef {
        TypeRef::Synth(Rc::new(Type::Base {
            name: "unsigned long".into(),
            size: 8,
            enc: Encoding::Unsigned,
        }))
    }
    pub fn int() -> TypeRef {
        TypeRef::Synth(Rc::new(Type::Base {
            name: "int".into(),
            size: 4,
            enc: Encoding::Signed,
        }))
    }
    pub fn double() -> TypeRef {
        TypeRef::Synth(Rc::new(Type::Base {
            name: "double".into(),
            size: 8,
            enc: Encoding::Float,
        }))
    }
    pub fn bool_() -> TypeRef {
        TypeRef::Synth(Rc::new(Type::Base {
            name: "bool".into(),
            size: 1,
            enc: Encoding::Bool,
        }))
    }
    pub fn char_() -> TypeRef {
        TypeRef::Synth(Rc::new(Type::Base {
            name: "char".into(),
            size: 1,
            enc: Encoding::SignedChar,
        }))
    }
    pub fn pointer_to(t: Option<TypeRef>) -> TypeRef {
        TypeRef::Synth(Rc::new(Type::Pointer { target: t }))
    }
    pub fn void() -> TypeRef {
        TypeRef::Synth(Rc::new(Type::Void))
    }
}

/// What the debug info offers to resolve types; implemented by `DebugInfo`.
pub trait TypeSource {
    fn resolve(&self, t: &TypeRef) -> Rc<Type>;
    /// Look up a type by C spelling: "CachedPlanSource", "struct Foo", "int".
    fn type_by_name(&self, name: &str) -> Option<TypeRef>;
}

/// Strip typedefs and qualifiers, and complete struct declarations.
pub fn strip(ts: &dyn TypeSource, t: &TypeRef) -> Rc<Type> {
    let mut cur = ts.resolve(t);
    for _ in 0..32 {
        let next = match &*cur {
            Type::Typedef { target, .. } | Type::Qualified { target, .. } => match target {
                Some(t) => ts.resolve(t),
                None => return Rc::new(Type::Void),
            },
            Type::Struct {
                kw,
                name: Some(n),
                declaration: true,
                ..
            } => match ts.type_by_name(&format!("{kw} {n}")) {
                Some(t) => {
                    let r = ts.resolve(&t);
                    if matches!(
                        &*r,
                        Type::Struct {
                            declaration: true,
                            ..
                        }
                    ) {
                        return r;
                    }
                    r
                }
                None => return cur,
            },
            _ => return cur,
        };
        cur = next;
    }
    cur
}

/// Size in bytes of a type.  Arrays of arrays are followed in a loop, at
/// most 64 deep (a malformed self-containing array type gives 0).
pub fn size_of(ts: &dyn TypeSource, t: &TypeRef) -> u64 {
    let mut mult: u64 = 1;
    let mut cur = strip(ts, t);
    for _ in 0..64 {
        let one = match &*cur {
            Type::Void => 1,
            Type::Base { size, .. } => *size,
            Type::Pointer { .. } => 8,
            Type::Struct { size, .. } => *size,
            Type::Enum { size, .. } => *size,
            Type::Array { elem, count } => {
                mult = mult.saturating_mul(count.unwrap_or(0));
                cur = strip(ts, elem);
                continue;
            }
            Type::Function { .. } => 1,
            Type::Typedef { .. } | Type::Qualified { .. } => 0,
        };
        return mult.saturating_mul(one);
    }
    0
}

/// The C spelling of a type, gdb style: "CachedPlanSource *", "int",
/// "struct PlannedStmt", "char [64]".
pub fn type_name(ts: &dyn TypeSource, t: &TypeRef) -> String {
    let (base, suffix) = name_parts(ts, t, 0);
    if suffix.is_empty() {
        base
    } else if base.ends_with('*') {
        format!("{base}{suffix}")
    } else {
        format!("{base} {suffix}")
    }
}

fn name_parts(ts: &dyn TypeSource, t: &TypeRef, depth: u32) -> (String, String) {
    if depth > 16 {
        return ("?".into(), String::new());
    }
    let ty = ts.resolve(t);
    match &*ty {
        Type::Void => ("void".into(), String::new()),
        Type::Base { name, .. } => (gdb_spelling(name).to_string(), String::new()),
        Type::Typedef { name, .. } => (name.clone(), String::new()),
        Type::Struct { kw, name, .. } => (
            format!("{kw} {}", name.clone().unwrap_or_else(|| "{...}".into())),
            String::new(),
        ),
        Type::Enum { name, .. } => (
            format!("enum {}", name.clone().unwrap_or_else(|| "{...}".into())),
            String::new(),
        ),
        Type::Qualified { kw, target } => {
            let (b, s) = match target {
                Some(t) => name_parts(ts, t, depth + 1),
                None => ("void".into(), String::new()),
            };
            if s.is_empty() {
                (format!("{kw} {b}"), s)
            } else {
                (b, format!("{s} {kw}"))
            }
        }
        Type::Pointer { target } => {
            let (b, s) = match target {
                Some(t) => name_parts(ts, t, depth + 1),
                None => ("void".into(), String::new()),
            };
            if s.starts_with('[') || s.starts_with('(') {
                (b, format!("(*){s}"))
            } else {
                (b, format!("*{s}"))
            }
        }
        Type::Array { elem, count } => {
            let (b, s) = name_parts(ts, elem, depth + 1);
            let c = count.map(|c| c.to_string()).unwrap_or_default();
            (b, format!("{s}[{c}]"))
        }
        Type::Function {
            ret,
            params,
            variadic,
        } => {
            // the return type whole (`List *`), then the parameters: a
            // pointer to it is gdb's `List *(*)(PlannerInfo *, ...)`
            let b = match ret {
                Some(t) => {
                    let (b, s) = name_parts(ts, t, depth + 1);
                    if s.is_empty() { b } else { format!("{b} {s}") }
                }
                None => "void".into(),
            };
            (b, parameter_list(ts, params, *variadic))
        }
    }
}

/// A function's parameters as C writes them: `(QueryDesc *, int)`,
/// `(void)` for none, `(const char *, ...)`, `()` when not prototyped
/// (gdb's spelling).
pub fn parameter_list(
    ts: &dyn TypeSource,
    params: &Option<Vec<TypeRef>>,
    variadic: bool,
) -> String {
    let Some(ps) = params else {
        return "()".into();
    };
    let mut names: Vec<String> = ps.iter().map(|p| type_name(ts, p)).collect();
    if variadic {
        names.push("...".into());
    }
    if names.is_empty() {
        return "(void)".into();
    }
    format!("({})", names.join(", "))
}

/// A base type's name as gdb spells it: gcc's DWARF says `long unsigned
/// int`, gdb (and C programmers) `unsigned long`.
pub fn gdb_spelling(name: &str) -> &str {
    match name {
        "long int" => "long",
        "long unsigned int" => "unsigned long",
        "short int" => "short",
        "short unsigned int" => "unsigned short",
        "long long int" => "long long",
        "long long unsigned int" => "unsigned long long",
        other => other,
    }
}
