//! Values printed the way gdb prints them: `{magic = 195726186, ...}`,
//! `(CachedPlanSource *) 0x55d5c1e3c1a8`, `0x55... "select ..."`, enum
//! names, doubles in their shortest exact form.

use super::eval::{EvalEnv, ValLoc, Value, bytes_of, member_value, scalar_from};
use crate::debuginfo::types::{Encoding, Type, TypeRef, size_of, strip, type_name};

/// Elements of arrays and characters of strings printed before "...".
pub const PRINT_ELEMENTS: usize = 200;

/// Output radix override (`print/x`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Radix {
    Natural,
    Hex,
    Decimal,
    /// `/o`
    Octal,
    /// `/t`
    Binary,
    /// `/u`
    Unsigned,
    /// `/c`: an integer as its value and character
    Char,
}

impl Radix {
    /// The radix of a format letter of `print/F`: x d u o t c.
    pub fn from_letter(f: &str) -> Option<Radix> {
        Some(match f {
            "x" => Radix::Hex,
            "d" => Radix::Decimal,
            "o" => Radix::Octal,
            "t" => Radix::Binary,
            "u" => Radix::Unsigned,
            "c" => Radix::Char,
            _ => return None,
        })
    }
}

/// An integer of `size` bytes in a radix other than its natural one
/// (None: the natural one, or /d of a signed integer), as gdb prints it:
/// `0x1f`, `037`, `11111`, `31`, `65 'A'`.
fn in_radix(v: i64, size: u64, radix: Radix) -> Option<String> {
    let u = v as u64 & mask(size);
    Some(match radix {
        Radix::Hex => format!("{u:#x}"),
        Radix::Octal if u == 0 => "0".into(),
        Radix::Octal => format!("0{u:o}"),
        Radix::Binary => format!("{u:b}"),
        Radix::Unsigned => u.to_string(),
        Radix::Char => format!("{} {}", v as u8 as i8, char_lit(v as u8)),
        Radix::Natural | Radix::Decimal => return None,
    })
}

pub fn format_value(env: &dyn EvalEnv, v: &Value, radix: Radix) -> String {
    let t = strip(env, &v.ty);
    match &*t {
        Type::Pointer { target } => {
            let inner = format_inner(env, v, radix, 0);
            // gdb omits the type for strings: `$1 = 0x55... "select ..."`
            let is_string = radix == Radix::Natural
                && target.as_ref().is_some_and(|t| {
                    matches!(
                        &*strip(env, t),
                        Type::Base {
                            enc: Encoding::SignedChar | Encoding::UnsignedChar,
                            size: 1,
                            ..
                        }
                    )
                });
            if is_string || radix != Radix::Natural {
                inner
            } else {
                format!("({}) {inner}", type_name(env, &v.ty))
            }
        }
        Type::Function { .. } => match v.loc {
            ValLoc::Memory(a) => format!(
                "{{{}}} {a:#x}{}",
                type_name(env, &v.ty),
                env.symbol_for(a)
                    .map(|s| format!(" <{s}>"))
                    .unwrap_or_default()
            ),
            _ => "<function>".into(),
        },
        _ => format_inner(env, v, radix, 0),
    }
}

fn format_inner(env: &dyn EvalEnv, v: &Value, radix: Radix, depth: usize) -> String {
    if let ValLoc::Unavailable(why) = &v.loc {
        return format!("<{why}>");
    }
    let bytes = match bytes_of(env, v) {
        Ok(b) => b,
        Err(_) => {
            return match v.loc {
                ValLoc::Memory(a) => format!("<error: Cannot access memory at address {a:#x}>"),
                _ => "<error>".into(),
            };
        }
    };
    format_bytes(env, &v.ty, &bytes, v.loc.clone(), radix, depth)
}

fn format_bytes(
    env: &dyn EvalEnv,
    ty: &TypeRef,
    b: &[u8],
    loc: ValLoc,
    radix: Radix,
    depth: usize,
) -> String {
    let t = strip(env, ty);
    if depth > 8 {
        return "{...}".into();
    }
    match &*t {
        Type::Void => "void".into(),
        Type::Base { enc, size, .. } => {
            let s = match scalar_from(env, ty, b) {
                Some(s) => s,
                None => return "<unsupported>".into(),
            };
            match (enc, radix) {
                (Encoding::Float, _) => {
                    let f = s.as_f64();
                    fmt_float(f, *size)
                }
                (_, r) if let Some(t) = in_radix(s.as_i64(), *size, r) => t,
                (Encoding::Bool, _) => match s.as_i64() {
                    0 => "false".into(),
                    1 => "true".into(),
                    n => n.to_string(),
                },
                (Encoding::SignedChar | Encoding::UnsignedChar, Radix::Natural) => {
                    let c = s.as_i64();
                    format!("{c} {}", char_lit(c as u8))
                }
                (Encoding::Unsigned | Encoding::UnsignedChar, _) => {
                    (s.as_i64() as u64 & mask(*size)).to_string()
                }
                _ => s.as_i64().to_string(),
            }
        }
        Type::Enum { values, size, .. } => {
            let s = scalar_from(env, ty, b).map(|s| s.as_i64()).unwrap_or(0);
            if let Some(t) = in_radix(s, *size, radix) {
                return t;
            }
            if radix == Radix::Decimal {
                // gdb's p/d of an enum: its value, not its name
                return s.to_string();
            }
            match values.iter().find(|(_, v)| *v == s) {
                Some((n, _)) => n.clone(),
                None => {
                    // flags: A | B
                    let mut rest = s;
                    let mut parts = Vec::new();
                    for (n, v) in values {
                        if *v != 0 && v & (v - 1) == 0 && rest & v == *v {
                            parts.push(n.clone());
                            rest &= !v;
                        }
                    }
                    if !parts.is_empty() && rest == 0 {
                        format!("({})", parts.join(" | "))
                    } else {
                        s.to_string()
                    }
                }
            }
        }
        Type::Pointer { target } => {
            let mut a8 = [0u8; 8];
            let n = b.len().min(8);
            a8[..n].copy_from_slice(&b[..n]);
            let a = u64::from_le_bytes(a8);
            if let Some(t) = in_radix(a as i64, 8, radix) {
                return t;
            }
            if a == 0 {
                return "0x0".into();
            }
            if let Some(tt) = target {
                let inner = strip(env, tt);
                match &*inner {
                    Type::Base {
                        enc: Encoding::SignedChar | Encoding::UnsignedChar,
                        size: 1,
                        ..
                    } if radix == Radix::Natural => {
                        return format!("{a:#x} {}", read_string(env, a));
                    }
                    Type::Function { .. } => {
                        return format!(
                            "{a:#x}{}",
                            env.symbol_for(a)
                                .map(|s| format!(" <{s}>"))
                                .unwrap_or_default()
                        );
                    }
                    _ => {}
                }
            }
            match env.data_symbol_for(a) {
                Some(sym) => format!("{a:#x} <{sym}>"),
                None => format!("{a:#x}"),
            }
        }
        Type::Struct {
            members,
            declaration,
            ..
        } => {
            if *declaration {
                return "<incomplete type>".into();
            }
            let whole = Value {
                ty: ty.clone(),
                loc: ValLoc::Bytes(b.to_vec()),
            };
            let mut parts = Vec::new();
            for m in members {
                let mv = match member_value(env, &whole, m) {
                    Ok(v) => v,
                    Err(_) => continue,
                };
                let mb = match &mv.loc {
                    ValLoc::Bytes(x) => x.clone(),
                    _ => continue,
                };
                let mloc = match loc {
                    ValLoc::Memory(a) => ValLoc::Memory(a + m.offset),
                    _ => ValLoc::Bytes(mb.clone()),
                };
                let s = format_bytes(env, &m.ty, &mb, mloc, radix, depth + 1);
                match &m.name {
                    Some(n) => parts.push(format!("{n} = {s}")),
                    None => parts.push(s),
                }
            }
            format!("{{{}}}", parts.join(", "))
        }
        Type::Array { elem, count } => {
            let esize = size_of(env, elem) as usize;
            let et = strip(env, elem);
            // a flexible array member (`ListCell initial_elements[]`): gdb
            // shows where it starts, as a pointer (with the text for chars)
            if let (None, &ValLoc::Memory(a)) = (count, &loc) {
                if let Some(t) = in_radix(a as i64, 8, radix) {
                    return t;
                }
                if let Type::Base {
                    enc: Encoding::SignedChar | Encoding::UnsignedChar,
                    size: 1,
                    ..
                } = &*et
                    && radix == Radix::Natural
                {
                    return format!("{a:#x} {}", read_string(env, a));
                }
                return format!("{a:#x}");
            }
            let n = count.unwrap_or(0) as usize;
            if let Type::Base {
                enc: Encoding::SignedChar | Encoding::UnsignedChar,
                size: 1,
                ..
            } = &*et
                && radix == Radix::Natural
            {
                return char_array(&b[..n.min(b.len())]);
            }
            if esize == 0 {
                return "{}".into();
            }
            let mut parts = Vec::new();
            let shown = n.min(PRINT_ELEMENTS);
            // gdb-style "<repeats N times>" for runs of identical elements
            let mut i = 0;
            while i < shown {
                let s0 = i * esize;
                if s0 + esize > b.len() {
                    break;
                }
                let cur = &b[s0..s0 + esize];
                let mut j = i + 1;
                while j < n && (j + 1) * esize <= b.len() && &b[j * esize..(j + 1) * esize] == cur {
                    j += 1;
                }
                let eloc = match loc {
                    ValLoc::Memory(a) => ValLoc::Memory(a + s0 as u64),
                    _ => ValLoc::Bytes(cur.to_vec()),
                };
                let s = format_bytes(env, elem, cur, eloc, radix, depth + 1);
                if j - i >= 10 {
                    parts.push(format!("{s} <repeats {} times>", j - i));
                    i = j;
                } else {
                    parts.push(s);
                    i += 1;
                }
            }
            let mut out = format!("{{{}", parts.join(", "));
            if n > PRINT_ELEMENTS {
                out.push_str("...");
            }
            out.push('}');
            out
        }
        Type::Function { .. } => "<function>".into(),
        Type::Typedef { .. } | Type::Qualified { .. } => "<?>".into(),
    }
}

/// A char array as gdb prints it: the trailing NUL dropped, runs of more
/// than 10 equal bytes as `'c' <repeats N times>`, the rest quoted:
/// `"lbl", '\000' <repeats 12 times>`.
fn char_array(bytes: &[u8]) -> String {
    let truncated = bytes.len() > PRINT_ELEMENTS;
    let mut b = &bytes[..bytes.len().min(PRINT_ELEMENTS)];
    if !truncated && b.last() == Some(&0) {
        b = &b[..b.len() - 1];
    }
    if b.is_empty() {
        return "\"\"".into();
    }
    let mut parts: Vec<String> = Vec::new();
    let mut run_text: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let mut j = i + 1;
        while j < b.len() && b[j] == b[i] {
            j += 1;
        }
        if j - i > 10 {
            if !run_text.is_empty() {
                parts.push(quote_c(&run_text));
                run_text.clear();
            }
            parts.push(format!("{} <repeats {} times>", char_lit(b[i]), j - i));
        } else {
            run_text.extend_from_slice(&b[i..j]);
        }
        i = j;
    }
    if !run_text.is_empty() {
        parts.push(quote_c(&run_text));
    }
    let mut s = parts.join(", ");
    if truncated {
        s.push_str("...");
    }
    s
}

/// Quote bytes as a C string literal (octal escapes for control bytes).
fn quote_c(s: &[u8]) -> String {
    let mut out = String::from("\"");
    for &c in s {
        match c {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            32..=126 => out.push(c as char),
            _ => out.push_str(&format!("\\{c:03o}")),
        }
    }
    out.push('"');
    out
}

fn mask(size: u64) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size * 8)) - 1
    }
}

/// Shortest representation that reads back to the same double (what
/// PostgreSQL's own float8out prints with extra_float_digits = 1).
pub fn fmt_float(f: f64, size: u64) -> String {
    if size == 4 {
        let s = format!("{}", f as f32);
        return s;
    }
    if f.is_nan() {
        return "nan(0x8000000000000)".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format!("{f}")
}

pub(crate) fn char_lit(c: u8) -> String {
    match c {
        0 => "'\\000'".into(),
        b'\n' => "'\\n'".into(),
        b'\t' => "'\\t'".into(),
        b'\'' => "'\\''".into(),
        b'\\' => "'\\\\'".into(),
        32..=126 => format!("'{}'", c as char),
        _ => format!("'\\{c:03o}'"),
    }
}

pub fn quote(s: &[u8]) -> String {
    let mut out = String::from("\"");
    let text = String::from_utf8_lossy(s);
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 32 => out.push_str(&format!("\\{:03o}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `"text"` at a target address, or `<error: ...>`.
pub fn read_string(env: &dyn EvalEnv, addr: u64) -> String {
    let mut out = Vec::new();
    let mut a = addr;
    let mut truncated = true;
    while out.len() < PRINT_ELEMENTS {
        let page_left = 4096 - (a as usize & 4095);
        let n = page_left.min(PRINT_ELEMENTS - out.len()).min(64);
        let mut buf = vec![0u8; n];
        if env.read_mem(a, &mut buf).is_err() {
            if out.is_empty() {
                return format!("<error: Cannot access memory at address {addr:#x}>");
            }
            truncated = false;
            break;
        }
        if let Some(p) = buf.iter().position(|&c| c == 0) {
            out.extend_from_slice(&buf[..p]);
            truncated = false;
            break;
        }
        out.extend_from_slice(&buf);
        a += n as u64;
    }
    let mut s = quote(&out);
    if truncated {
        s.push_str("...");
    }
    s
}

/// A value as JSON for capture files: numbers stay numbers.
pub fn to_json(env: &dyn EvalEnv, v: &Value) -> serde_json::Value {
    let t = strip(env, &v.ty);
    if let ValLoc::Unavailable(w) = &v.loc {
        return serde_json::Value::String(format!("<{w}>"));
    }
    match &*t {
        Type::Base { .. } | Type::Enum { .. } => {
            if let Ok(b) = bytes_of(env, v)
                && let Some(s) = scalar_from(env, &v.ty, &b)
            {
                if let Type::Enum { .. } = &*t {
                    return serde_json::Value::String(format_value(env, v, Radix::Natural));
                }
                return match s {
                    super::eval::Scalar::F(f) => serde_json::json!(f),
                    super::eval::Scalar::I(i) => {
                        if let Type::Base {
                            enc: Encoding::Bool,
                            ..
                        } = &*t
                        {
                            serde_json::json!(i != 0)
                        } else {
                            serde_json::json!(i)
                        }
                    }
                    super::eval::Scalar::U(u) => serde_json::json!(u),
                };
            }
            serde_json::Value::String(format_value(env, v, Radix::Natural))
        }
        _ => serde_json::Value::String(format_value(env, v, Radix::Natural)),
    }
}

#[cfg(test)]
mod tests {
    use super::{Radix, format_value};
    use crate::debuginfo::types::{Member, Type, TypeRef};
    use crate::expr::eval::{ValLoc, Value};
    use crate::expr::testenv::Env;
    use std::rc::Rc;

    fn synth(t: Type) -> TypeRef {
        TypeRef::Synth(Rc::new(t))
    }

    /// `List`'s `ListCell initial_elements[]` and `varlena`'s `char
    /// vl_dat[]`: gdb shows where a flexible array member starts.
    #[test]
    fn flexible_array_member_as_gdb() {
        let flex = |elem| synth(Type::Array { elem, count: None });
        let s = synth(Type::Struct {
            kw: "struct",
            name: Some("L".into()),
            size: 8,
            members: vec![
                Member {
                    name: Some("n".into()),
                    ty: Type::int(),
                    offset: 0,
                    bits: None,
                },
                Member {
                    name: Some("cells".into()),
                    ty: flex(Type::int()),
                    offset: 8,
                    bits: None,
                },
            ],
            declaration: false,
        });
        let v = Value {
            ty: s,
            loc: ValLoc::Memory(0x10000),
        };
        let out = format_value(&Env, &v, Radix::Natural);
        assert!(out.ends_with(", cells = 0x10008}"), "{out}");
        let out = format_value(&Env, &v, Radix::Hex);
        assert!(out.ends_with(", cells = 0x10008}"), "{out}");
        let chars = Value {
            ty: flex(Type::char_()),
            loc: ValLoc::Memory(0x20000),
        };
        let out = format_value(&Env, &chars, Radix::Natural);
        assert!(out.starts_with("0x20000 \""), "{out}");
    }

    /// gdb's p/d of an enum is its value; p its name.
    #[test]
    fn enum_in_decimal_is_its_value() {
        let e = synth(Type::Enum {
            name: Some("SysCacheIdentifier".into()),
            size: 4,
            signed: false,
            values: vec![("AGGFNOID".into(), 0), ("RELOID".into(), 57)],
        });
        let v = Value {
            ty: e,
            loc: ValLoc::Bytes(57i32.to_le_bytes().to_vec()),
        };
        assert_eq!(format_value(&Env, &v, Radix::Natural), "RELOID");
        assert_eq!(format_value(&Env, &v, Radix::Decimal), "57");
        assert_eq!(format_value(&Env, &v, Radix::Hex), "0x39");
    }
}
