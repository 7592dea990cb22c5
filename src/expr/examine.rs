//! `x/NFU ADDR`: memory as gdb's examine command prints it, a line per
//! 8 bytes, halfwords or 4 words or 2 giants (one string per line for
//! `/s`), each line headed by its address and symbol:
//! `0x55d0c0a0 <MyProcPid>:\t0x00001a2b\t...`.

use super::eval::EvalEnv;
use super::format::{PRINT_ELEMENTS, char_lit, quote};
use anyhow::{Result, bail};

/// The formats `x` takes (gdb's, without `i`).
pub const FORMATS: &str = "xduotacfsi";
/// The units: bytes, halfwords, words, giants.
pub const UNITS: &str = "bhwg";

/// What a bare `x` (or `x/N`, `x ADDR`) takes from the last one: gdb's
/// remembered format, unit, count and next address.
#[derive(Clone, Debug)]
pub struct Last {
    pub format: char,
    pub unit: char,
    pub count: usize,
    pub next: Option<u64>,
}

impl Default for Last {
    fn default() -> Last {
        Last {
            format: 'x',
            unit: 'w',
            count: 1,
            next: None,
        }
    }
}

/// `/NFU` (without the slash): the count, format and unit given, each
/// optional; letters in any order after the count, as gdb takes them.
pub fn parse_spec(spec: &str) -> Result<(Option<usize>, Option<char>, Option<char>)> {
    let digits: String = spec.chars().take_while(|c| c.is_ascii_digit()).collect();
    let count = if digits.is_empty() {
        None
    } else {
        match digits.parse::<usize>() {
            Ok(n) if n > 0 && n <= 65536 => Some(n),
            _ => bail!("x/{spec}: the count must be from 1 to 65536"),
        }
    };
    let (mut format, mut unit) = (None, None);
    for c in spec[digits.len()..].chars() {
        if FORMATS.contains(c) && format.is_none() {
            format = Some(c);
        } else if UNITS.contains(c) && unit.is_none() {
            unit = Some(c);
        } else {
            bail!(
                "x/{spec}: unknown format or unit '{c}': formats are x d u o t a c f s i, \
                 units b h w g (e.g. x/8xb &MyProcPid)",
                c = crate::shown::shown(&c.to_string())
            );
        }
    }
    Ok((count, format, unit))
}

/// The unit a format takes when none is given: `a` a pointer, `c` and
/// `s` a byte, `f` a double unless the last unit was a word (gdb's rule).
pub fn default_unit(format: char, last_unit: char) -> char {
    match format {
        'a' => 'g',
        'c' | 's' => 'b',
        'f' if !matches!(last_unit, 'w' | 'g') => 'g',
        _ => last_unit,
    }
}

fn unit_size(unit: char) -> usize {
    match unit {
        'b' => 1,
        'h' => 2,
        'w' => 4,
        _ => 8,
    }
}

/// `0x55d0c0a0 <MyProcPid+8>`: an address with the symbol covering it.
fn label(env: &dyn EvalEnv, a: u64) -> String {
    match env.symbol_for(a).or_else(|| env.data_symbol_for(a)) {
        Some(s) => format!("{a:#x} <{s}>"),
        None => format!("{a:#x}"),
    }
}

/// `count` units of `unit` at `addr` in `format`: the text, and the
/// address after the last one (where a bare `x` goes on).
pub fn examine(
    env: &dyn EvalEnv,
    addr: u64,
    count: usize,
    format: char,
    unit: char,
) -> Result<(String, u64)> {
    if format == 's' {
        return strings(env, addr, count);
    }
    let size = unit_size(unit);
    let mut bytes = vec![0u8; count * size];
    if env.read_mem(addr, &mut bytes).is_err() {
        bail!("Cannot access memory at address {addr:#x}");
    }
    let per_line = match (format, size) {
        (_, 1 | 2) => 8,
        (_, 4) => 4,
        _ => 2,
    };
    let mut lines = Vec::new();
    for (l, chunk) in bytes.chunks(per_line * size).enumerate() {
        let at = addr + (l * per_line * size) as u64;
        let mut line = format!("{}:", label(env, at));
        for one in chunk.chunks(size) {
            line.push('\t');
            line.push_str(&unit_value(env, one, format));
        }
        lines.push(line);
    }
    Ok((lines.join("\n"), addr + (count * size) as u64))
}

/// One unit's bytes in `format`.
fn unit_value(env: &dyn EvalEnv, b: &[u8], format: char) -> String {
    let size = b.len();
    let mut a8 = [0u8; 8];
    a8[..size].copy_from_slice(b);
    let u = u64::from_le_bytes(a8);
    let shift = 64 - 8 * size as u32;
    let i = ((u << shift) as i64) >> shift;
    match format {
        'x' => format!("0x{u:0w$x}", w = 2 * size),
        'd' => i.to_string(),
        'u' => u.to_string(),
        'o' if u == 0 => "0".into(),
        'o' => format!("0{u:o}"),
        't' => format!("{u:0w$b}", w = 8 * size),
        'c' => format!("{} {}", b[0] as i8, char_lit(b[0])),
        'a' => match env.symbol_for(u).or_else(|| env.data_symbol_for(u)) {
            Some(s) if u != 0 => format!("{u:#x} <{s}>"),
            _ => format!("{u:#x}"),
        },
        'f' if size == 4 => float_g(f32::from_bits(u as u32) as f64, 9),
        'f' if size == 8 => float_g(f64::from_bits(u), 17),
        // a float of a byte or halfword: its integer value, as gdb prints
        _ => i.to_string(),
    }
}

/// C's `%.{digits}g`, which gdb's `x/f` prints with (9 digits for a
/// float, 17 for a double): `1.5`, `1e+20`, `1.0000000000000001e-05`.
fn float_g(v: f64, digits: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // the exponent after rounding to `digits` significant digits
    let sci = format!("{:.*e}", digits - 1, v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= digits as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.abs())
    } else {
        let decimals = (digits as i32 - 1 - exp).max(0) as usize;
        trim(&format!("{v:.decimals$}"))
    }
}

/// `x/s`: `count` NUL-terminated strings from `addr`, one per line (at
/// most PRINT_ELEMENTS characters each, then `...`; the next goes on
/// after them).
fn strings(env: &dyn EvalEnv, addr: u64, count: usize) -> Result<(String, u64)> {
    let mut a = addr;
    let mut lines = Vec::new();
    for _ in 0..count {
        let start = a;
        let mut text = Vec::new();
        let mut ended = false;
        while text.len() < PRINT_ELEMENTS {
            let mut c = [0u8; 1];
            if env.read_mem(a, &mut c).is_err() {
                if lines.is_empty() && text.is_empty() {
                    bail!("Cannot access memory at address {a:#x}");
                }
                lines.push(format!(
                    "{}:\t<error: Cannot access memory at address {a:#x}>",
                    label(env, start)
                ));
                return Ok((lines.join("\n"), a));
            }
            a += 1;
            if c[0] == 0 {
                ended = true;
                break;
            }
            text.push(c[0]);
        }
        let dots = if ended { "" } else { "..." };
        lines.push(format!("{}:\t{}{dots}", label(env, start), quote(&text)));
    }
    Ok((lines.join("\n"), a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::testenv::Env;

    #[test]
    fn specs_parse_as_gdb_reads_them() {
        assert_eq!(parse_spec("4xb").unwrap(), (Some(4), Some('x'), Some('b')));
        assert_eq!(parse_spec("gx").unwrap(), (None, Some('x'), Some('g')));
        assert_eq!(parse_spec("8").unwrap(), (Some(8), None, None));
        let e = parse_spec("4q").unwrap_err().to_string();
        assert!(e.contains("unknown format or unit 'q'"), "{e}");
        assert!(parse_spec("0x").is_err());
        assert_eq!(parse_spec("2i").unwrap(), (Some(2), Some('i'), None));
    }

    #[test]
    fn units_print_in_each_format() {
        let env = Env;
        assert_eq!(unit_value(&env, &[1, 0, 0, 0], 'x'), "0x00000001");
        assert_eq!(unit_value(&env, &[0xff, 0xff], 'd'), "-1");
        assert_eq!(unit_value(&env, &[0xff, 0xff], 'u'), "65535");
        assert_eq!(unit_value(&env, &[8], 'o'), "010");
        assert_eq!(unit_value(&env, &[0], 'o'), "0");
        assert_eq!(unit_value(&env, &[5], 't'), "00000101");
        assert_eq!(unit_value(&env, &[97], 'c'), "97 'a'");
        assert_eq!(unit_value(&env, &1.5f64.to_le_bytes(), 'f'), "1.5");
        // C's %.17g (%.9g for a float), as gdb prints them
        assert_eq!(float_g(1e20, 17), "1e+20");
        assert_eq!(float_g(1e-5, 17), "1.0000000000000001e-05");
        assert_eq!(float_g(0.0001, 17), "0.0001");
        assert_eq!(float_g(1e16, 17), "10000000000000000");
        assert_eq!(float_g(123456789012345678.0, 17), "1.2345678901234568e+17");
        assert_eq!(float_g(1e20f32 as f64, 9), "1.00000002e+20");
        assert_eq!(float_g(f64::from_bits(3022), 17), "1.4930663817322471e-320");
        assert_eq!(unit_value(&env, &[0; 8], 'a'), "0x0");
    }

    #[test]
    fn lines_hold_gdbs_number_of_units() {
        let env = Env;
        let (text, next) = examine(&env, 0x10000, 10, 'x', 'b').unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("0x10000:\t0x"), "{text}");
        assert_eq!(lines[0].matches('\t').count(), 8);
        assert!(lines[1].starts_with("0x10008:"), "{text}");
        assert_eq!(next, 0x1000a);
        let e = examine(&env, 0x10, 1, 'x', 'w').unwrap_err().to_string();
        assert_eq!(e, "Cannot access memory at address 0x10");
    }
}
