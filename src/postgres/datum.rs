//! PostgreSQL values read from memory, never by a call into the backend:
//! a varlena's header (inline with a 4-byte or 1-byte header, compressed,
//! or a TOAST pointer), and a `Datum` shown as SQL's output function shows
//! it (`print DATUM::TYPE`): integers, bool, oid, float4/8 as PostgreSQL 12
//! and later print them, name, text, numeric decoded from its on-disk
//! form, date, timestamp and timestamptz (ISO, UTC).  The layouts of
//! NumericData and NameData come from DWARF; the varlena header and the
//! numeric header bits are PostgreSQL's storage format.

use crate::debuginfo::types::{Type, TypeSource, size_of, strip};
use anyhow::{Result, anyhow, bail};

/// Reads the backend's memory.
pub type Read<'a> = &'a dyn Fn(u64, &mut [u8]) -> Result<()>;

/// The types `print EXPR::TYPE` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlType {
    Int2,
    Int4,
    Int8,
    Bool,
    Float4,
    Float8,
    Oid,
    Name,
    Text,
    Numeric,
    Timestamp,
    Timestamptz,
    Date,
}

/// The names `::` takes, as in SQL (with SQL's aliases).
const NAMES: &[(&str, SqlType)] = &[
    ("int2", SqlType::Int2),
    ("smallint", SqlType::Int2),
    ("int4", SqlType::Int4),
    ("int", SqlType::Int4),
    ("integer", SqlType::Int4),
    ("int8", SqlType::Int8),
    ("bigint", SqlType::Int8),
    ("bool", SqlType::Bool),
    ("boolean", SqlType::Bool),
    ("float4", SqlType::Float4),
    ("real", SqlType::Float4),
    ("float8", SqlType::Float8),
    ("oid", SqlType::Oid),
    ("name", SqlType::Name),
    ("text", SqlType::Text),
    ("numeric", SqlType::Numeric),
    ("timestamp", SqlType::Timestamp),
    ("timestamptz", SqlType::Timestamptz),
    ("date", SqlType::Date),
];

/// The list of type names for messages and help.
pub const TYPE_LIST: &str = "int2, int4, int8, bool, float4, float8, oid, name, text, numeric, \
                             timestamp, timestamptz, date";

impl SqlType {
    pub fn named(s: &str) -> Option<SqlType> {
        let s = s.trim().to_ascii_lowercase();
        NAMES.iter().find(|(n, _)| *n == s).map(|(_, t)| *t)
    }
}

/// `EXPR::TYPE` split at its last `::` outside quotes and brackets: the
/// expression and the type (None: no `::`).  An unknown type is an error.
pub fn split_cast(expr: &str) -> Result<(&str, Option<SqlType>)> {
    let b = expr.as_bytes();
    let at = crate::expr::parse::top_level_chars(expr)
        .filter(|&(i, c, top)| top && c == ':' && b.get(i + 1) == Some(&b':'))
        .map(|(i, _, _)| i)
        .last();
    let Some(i) = at else {
        return Ok((expr, None));
    };
    let (e, t) = (expr[..i].trim(), expr[i + 2..].trim());
    if e.is_empty() {
        bail!(
            "'::{}' needs an expression before it, e.g. print fcinfo->args[0].value::int4",
            crate::shown::shown(t)
        );
    }
    match SqlType::named(t) {
        Some(ty) => Ok((e, Some(ty))),
        None => bail!(
            "unknown type '{}' after '::': print knows {TYPE_LIST}",
            crate::shown::shown(t)
        ),
    }
}

/// What a varlena's header says.
#[derive(Debug, PartialEq, Eq)]
pub enum Varlena {
    /// Inline and not compressed: the header's size (4 or 1), the data's
    /// whole length, and its first bytes (at most as many as asked for).
    Inline {
        header: usize,
        len: usize,
        data: Vec<u8>,
    },
    /// Compressed inline (a 4-byte header): its stored size.
    Compressed { size: usize },
    /// A TOAST pointer (a 1-byte header of 0x01): the value is elsewhere.
    External,
}

/// The varlena at `addr`, with at most `max` bytes of its data read.
pub fn read_varlena(read: Read<'_>, addr: u64, max: usize) -> Result<Varlena> {
    let mut h = [0u8; 1];
    read(addr, &mut h)?;
    let h0 = h[0];
    if h0 == 0x01 {
        return Ok(Varlena::External);
    }
    let (header, total) = if h0 & 0x01 == 0x01 {
        // a 1-byte header: the length (with the header) in its upper 7 bits
        (1usize, (h0 >> 1) as usize)
    } else {
        let mut w = [0u8; 4];
        read(addr, &mut w)?;
        let total = ((u32::from_le_bytes(w) >> 2) & 0x3FFF_FFFF) as usize;
        if h0 & 0x03 == 0x02 {
            return Ok(Varlena::Compressed { size: total });
        }
        (4, total)
    };
    if total < header {
        bail!("not a varlena at {addr:#x}: its length {total} is shorter than its header");
    }
    let len = total - header;
    let mut data = vec![0u8; len.min(max)];
    read(addr + header as u64, &mut data)?;
    Ok(Varlena::Inline { header, len, data })
}

/// A varlena's text as `print` shows it after a `text *`: the quoted
/// characters (cut after `max` bytes), or what keeps it from being shown.
pub fn varlena_note(read: Read<'_>, addr: u64, max: usize) -> String {
    match read_varlena(read, addr, max) {
        Ok(Varlena::Inline { len, data, .. }) => {
            let mut s = crate::expr::format::quote(&data);
            if len > data.len() {
                s.push_str("...");
            }
            s
        }
        Ok(Varlena::Compressed { size }) => format!("<compressed varlena, {size} bytes>"),
        Ok(Varlena::External) => "<external (TOAST pointer): not read>".into(),
        Err(_) => format!("<error: Cannot access memory at address {addr:#x}>"),
    }
}

/// How much of a text or name `::text` shows.
const MAX_TEXT: usize = 65536;

/// `datum` (a Datum's bits) as SQL's `::text` shows a value of type `ty`
/// (a text's or name's control characters escaped: `\n`, `\x1b`).
pub fn format_datum(
    ts: &dyn TypeSource,
    read: Read<'_>,
    ty: SqlType,
    datum: u64,
) -> Result<String> {
    let by_ref = |what: &str| -> Result<u64> {
        if datum < 4096 {
            bail!("{datum:#x} is not a pointer to a {what} (a {what} Datum points to its value)");
        }
        Ok(datum)
    };
    Ok(match ty {
        SqlType::Int2 => (datum as i16).to_string(),
        SqlType::Int4 => (datum as i32).to_string(),
        SqlType::Oid => (datum as u32).to_string(),
        SqlType::Bool => (if datum != 0 { "true" } else { "false" }).into(),
        SqlType::Int8 | SqlType::Float8 | SqlType::Timestamp | SqlType::Timestamptz => {
            let datum_size = ts
                .type_by_name("Datum")
                .map(|t| size_of(ts, &t))
                .unwrap_or(8);
            if datum_size != 8 {
                bail!("a {datum_size}-byte Datum holds 8-byte values by reference: not supported");
            }
            match ty {
                SqlType::Int8 => (datum as i64).to_string(),
                SqlType::Float8 => float8_text(f64::from_bits(datum)),
                SqlType::Timestamp => timestamp_text(datum as i64, false),
                _ => timestamp_text(datum as i64, true),
            }
        }
        SqlType::Float4 => float4_text(f32::from_bits(datum as u32)),
        SqlType::Date => date_text(datum as i32),
        SqlType::Name => {
            let p = by_ref("name")?;
            let len = ts
                .type_by_name("NameData")
                .map(|t| size_of(ts, &t) as usize)
                .filter(|n| *n > 0)
                .ok_or_else(|| anyhow!("no NameData in the debug info"))?;
            let s = crate::postgres::backend::read_cstr_with(read, p, len)
                .map_err(|e| anyhow!("cannot read a name at {p:#x}: {e:#}"))?;
            crate::shown::shown(&String::from_utf8_lossy(&s)).into_owned()
        }
        SqlType::Text => {
            let p = by_ref("text")?;
            match read_varlena(read, p, MAX_TEXT)
                .map_err(|e| anyhow!("cannot read a text at {p:#x}: {e:#}"))?
            {
                Varlena::Inline { len, data, .. } => {
                    let mut s = crate::shown::shown(&String::from_utf8_lossy(&data)).into_owned();
                    if len > data.len() {
                        s.push_str("...");
                    }
                    s
                }
                Varlena::Compressed { size } => {
                    bail!(
                        "the text at {p:#x} is compressed ({size} bytes): pgdbg does not decompress"
                    )
                }
                Varlena::External => {
                    bail!("the text at {p:#x} is a TOAST pointer: its value is stored elsewhere")
                }
            }
        }
        SqlType::Numeric => {
            let p = by_ref("numeric")?;
            numeric_at(ts, read, p)?
        }
    })
}

/// Where a NumericData's fields are, from DWARF: relative to the end of
/// the varlena header, the long form's sign/dscale word, its weight and
/// its digits, the short form's digits.
struct NumericLayout {
    header: u64,
    weight: u64,
    long_digits: u64,
    short_digits: u64,
}

fn numeric_layout(ts: &dyn TypeSource) -> Result<NumericLayout> {
    let missing = || anyhow!("no NumericData layout in the debug info (numeric.c's types)");
    let members = |t: &crate::debuginfo::types::TypeRef| match &*strip(ts, t) {
        Type::Struct { members, .. } => Some(members.clone()),
        _ => None,
    };
    let field = |ms: &[crate::debuginfo::types::Member], n: &str| {
        ms.iter()
            .find(|m| m.name.as_deref() == Some(n))
            .map(|m| (m.offset, m.ty.clone()))
    };
    let nd = ts
        .type_by_name("NumericData")
        .or_else(|| ts.type_by_name("struct NumericData"))
        .ok_or_else(missing)?;
    let top = members(&nd).ok_or_else(missing)?;
    let (vl_len, _) = field(&top, "vl_len_").ok_or_else(missing)?;
    let (choice, cty) = field(&top, "choice").ok_or_else(missing)?;
    let choice_ms = members(&cty).ok_or_else(missing)?;
    let (lo, lty) = field(&choice_ms, "n_long").ok_or_else(missing)?;
    let (so, sty) = field(&choice_ms, "n_short").ok_or_else(missing)?;
    let long_ms = members(&lty).ok_or_else(missing)?;
    let short_ms = members(&sty).ok_or_else(missing)?;
    let (sd, _) = field(&long_ms, "n_sign_dscale").ok_or_else(missing)?;
    let (w, _) = field(&long_ms, "n_weight").ok_or_else(missing)?;
    let (ld, _) = field(&long_ms, "n_data").ok_or_else(missing)?;
    let (sdd, _) = field(&short_ms, "n_data").ok_or_else(missing)?;
    // the data after a varlena's 4-byte header starts at vl_len_ + 4
    let base = choice.checked_sub(vl_len + 4).ok_or_else(missing)?;
    Ok(NumericLayout {
        header: base + lo + sd,
        weight: base + lo + w,
        long_digits: base + lo + ld,
        short_digits: base + so + sdd,
    })
}

const NBASE: i64 = 10000;

/// The numeric at `p` as numeric_out shows it.
fn numeric_at(ts: &dyn TypeSource, read: Read<'_>, p: u64) -> Result<String> {
    let lay = numeric_layout(ts)?;
    let (data, len) = match read_varlena(read, p, 4096)
        .map_err(|e| anyhow!("cannot read a numeric at {p:#x}: {e:#}"))?
    {
        Varlena::Inline { data, len, .. } => (data, len),
        Varlena::Compressed { .. } => {
            bail!("the numeric at {p:#x} is compressed: pgdbg does not decompress")
        }
        Varlena::External => bail!("the numeric at {p:#x} is a TOAST pointer: not read"),
    };
    if len > data.len() {
        bail!("not a numeric at {p:#x}: {len} bytes long");
    }
    let u16_at = |o: u64| -> Result<u16> {
        let o = o as usize;
        data.get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| anyhow!("not a numeric at {p:#x}: {len} bytes are too short"))
    };
    let head = u16_at(lay.header)?;
    let (neg, weight, dscale, digits_at) = match head & 0xC000 {
        0xC000 => {
            return Ok(match head & 0xF000 {
                0xC000 => "NaN".into(),
                0xD000 => "Infinity".into(),
                0xF000 => "-Infinity".into(),
                _ => bail!("not a numeric at {p:#x}: header {head:#06x}"),
            });
        }
        0x8000 => {
            let mut weight = (head & 0x003F) as i32;
            if head & 0x0040 != 0 {
                weight |= !0x3F;
            }
            let dscale = ((head & 0x1F80) >> 7) as i32;
            (head & 0x2000 != 0, weight, dscale, lay.short_digits)
        }
        sign => {
            let weight = u16_at(lay.weight)? as i16 as i32;
            (
                sign == 0x4000,
                weight,
                (head & 0x3FFF) as i32,
                lay.long_digits,
            )
        }
    };
    let n = data.len().saturating_sub(digits_at as usize) / 2;
    let mut digits = Vec::with_capacity(n);
    for k in 0..n {
        let d = u16_at(digits_at + 2 * k as u64)? as i16 as i64;
        if !(0..NBASE).contains(&d) {
            bail!("not a numeric at {p:#x}: digit {d} is outside 0..9999");
        }
        digits.push(d);
    }
    Ok(numeric_text(neg, weight, dscale, &digits))
}

/// numeric_out's text of a value: base-10000 `digits`, the first of
/// weight `weight`, `dscale` decimal digits after the point.
fn numeric_text(neg: bool, weight: i32, dscale: i32, digits: &[i64]) -> String {
    let dig = |d: i32| -> i64 {
        if d >= 0 && (d as usize) < digits.len() {
            digits[d as usize]
        } else {
            0
        }
    };
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    let mut d;
    if weight < 0 {
        d = weight + 1;
        s.push('0');
    } else {
        s.push_str(&dig(0).to_string());
        for k in 1..=weight {
            s.push_str(&format!("{:04}", dig(k)));
        }
        d = weight + 1;
    }
    if dscale > 0 {
        let mut frac = String::new();
        while (frac.len() as i32) < dscale {
            frac.push_str(&format!("{:04}", dig(d)));
            d += 1;
        }
        frac.truncate(dscale as usize);
        s.push('.');
        s.push_str(&frac);
    }
    s
}

/// float8out's text (extra_float_digits 1, PostgreSQL 12 on): the
/// shortest digits that read back, fixed for exponents -4 to 14,
/// `1e+100`-style otherwise.
pub fn float8_text(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    shortest(&format!("{f:e}"), 15)
}

/// float4out's text: as float8's, fixed for exponents -4 to 5.
pub fn float4_text(f: f32) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    shortest(&format!("{f:e}"), 6)
}

/// Rust's shortest `{:e}` (`-1.5e-7`) laid out as PostgreSQL's ryu
/// output: fixed notation when -4 <= exponent < `fixed_below`, else
/// `1.5e-07` (two exponent digits at least, with a sign).
fn shortest(e: &str, fixed_below: i32) -> String {
    let (mant, exp) = e.split_once('e').unwrap_or((e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mant) = match mant.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mant),
    };
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    if digits.chars().all(|c| c == '0') {
        return format!("{sign}0");
    }
    if (-4..fixed_below).contains(&exp) {
        let n = digits.len() as i32;
        let out = if exp < 0 {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else if exp + 1 >= n {
            format!("{digits}{}", "0".repeat((exp + 1 - n) as usize))
        } else {
            let (a, b) = digits.split_at((exp + 1) as usize);
            format!("{a}.{b}")
        };
        return format!("{sign}{out}");
    }
    let (first, rest) = digits.split_at(1);
    let dot = if rest.is_empty() {
        String::new()
    } else {
        format!(".{rest}")
    };
    let esign = if exp < 0 { '-' } else { '+' };
    format!("{sign}{first}{dot}e{esign}{:02}", exp.abs())
}

/// Days between 1970-01-01 and 2000-01-01 (PostgreSQL's epoch).
const PG_EPOCH_DAYS: i64 = 10957;

/// The proleptic Gregorian date of `days` after 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `YYYY-MM-DD` (with ` BC` for years before 1), and whether BC.
fn ymd(days_since_2000: i64) -> (String, bool) {
    let (y, m, d) = civil(days_since_2000 + PG_EPOCH_DAYS);
    let bc = y <= 0;
    let y = if bc { 1 - y } else { y };
    (format!("{y:04}-{m:02}-{d:02}"), bc)
}

/// date_out (DateStyle ISO): `YYYY-MM-DD`, `infinity`, `-infinity`.
pub fn date_text(v: i32) -> String {
    match v {
        i32::MIN => "-infinity".into(),
        i32::MAX => "infinity".into(),
        v => {
            let (s, bc) = ymd(v as i64);
            if bc { format!("{s} BC") } else { s }
        }
    }
}

/// timestamp_out / timestamptz_out (DateStyle ISO; timestamptz in UTC,
/// `+00`): `2024-01-02 03:04:05.5+00`, `infinity`, `-infinity`.
pub fn timestamp_text(us: i64, tz: bool) -> String {
    match us {
        i64::MIN => return "-infinity".into(),
        i64::MAX => return "infinity".into(),
        _ => {}
    }
    const DAY: i64 = 86_400_000_000;
    let days = us.div_euclid(DAY);
    let t = us.rem_euclid(DAY);
    let (date, bc) = ymd(days);
    let (h, mi, s, frac) = (
        t / 3_600_000_000,
        t / 60_000_000 % 60,
        t / 1_000_000 % 60,
        t % 1_000_000,
    );
    let mut out = format!("{date} {h:02}:{mi:02}:{s:02}");
    if frac != 0 {
        let f = format!("{frac:06}");
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
    if tz {
        out.push_str("+00");
    }
    if bc {
        out.push_str(" BC");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_postgresql_prints_them() {
        for (f, s) in [
            (1e-7, "1e-07"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (1e15, "1e+15"),
            (1e14, "100000000000000"),
            (0.0001, "0.0001"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (-0.0, "-0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(float8_text(f), s, "{f}");
        }
        assert_eq!(float4_text(1e6), "1e+06");
        assert_eq!(float4_text(123456.0), "123456");
        assert_eq!(float4_text(0.1), "0.1");
    }

    #[test]
    fn numerics_as_numeric_out() {
        assert_eq!(numeric_text(true, 0, 3, &[12, 3450]), "-12.345");
        assert_eq!(numeric_text(false, -1, 5, &[12]), "0.00120");
        assert_eq!(numeric_text(false, 5, 0, &[1]), "100000000000000000000");
        assert_eq!(numeric_text(false, 0, 0, &[]), "0");
        assert_eq!(numeric_text(false, 1, 2, &[1, 2]), "10002.00");
    }

    #[test]
    fn dates_and_times_as_iso() {
        assert_eq!(date_text(0), "2000-01-01");
        assert_eq!(date_text(-1), "1999-12-31");
        assert_eq!(date_text(i32::MAX), "infinity");
        // 0001-01-01 is 730119 days before 2000-01-01; the day before is 1 BC
        assert_eq!(date_text(-730119), "0001-01-01");
        assert_eq!(date_text(-730120), "0001-12-31 BC");
        assert_eq!(timestamp_text(1_500_000, true), "2000-01-01 00:00:01.5+00");
        assert_eq!(timestamp_text(-1, false), "1999-12-31 23:59:59.999999");
        assert_eq!(timestamp_text(i64::MIN, true), "-infinity");
    }

    #[test]
    fn casts_split_off() {
        assert_eq!(
            split_cast("fcinfo->args[0].value::int4").unwrap(),
            ("fcinfo->args[0].value", Some(SqlType::Int4))
        );
        assert_eq!(split_cast("a->b").unwrap(), ("a->b", None));
        assert!(
            split_cast("x::nosuchtype")
                .unwrap_err()
                .to_string()
                .contains("nosuchtype")
        );
        assert!(split_cast("::int4").is_err());
    }
}
