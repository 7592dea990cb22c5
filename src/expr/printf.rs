//! `printf "FORMAT", EXPR...`: C-style formatting of evaluated values.

use crate::expr::eval::{EvalEnv, Scalar, Value, scalar};
use crate::expr::format::read_string;
use anyhow::{Result, bail};

/// Widest field and longest precision a conversion may ask for.
pub const MAX_WIDTH: usize = 4096;
/// Longest text one printf may produce.
pub const MAX_OUTPUT: usize = 1 << 20;

/// A conversion's flags, width, precision and conversion character, read
/// from `it` (just after the `%`).
struct Spec {
    flags: String,
    width: usize,
    precision: Option<usize>,
    conv: char,
}

/// Digits at `it` as a number of at most `MAX_WIDTH` (`what` names it in
/// the error).
fn number(it: &mut std::iter::Peekable<std::str::Chars<'_>>, what: &str) -> Result<Option<usize>> {
    let mut digits = String::new();
    while let Some(&d) = it.peek().filter(|d| d.is_ascii_digit()) {
        digits.push(d);
        it.next();
    }
    if digits.is_empty() {
        return Ok(None);
    }
    match digits.parse::<usize>() {
        Ok(n) if n <= MAX_WIDTH => Ok(Some(n)),
        _ => bail!("printf: {what} {digits} is too large (at most {MAX_WIDTH})"),
    }
}

fn spec(it: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<Spec> {
    let mut flags = String::new();
    while let Some(&f) = it.peek() {
        if matches!(f, '-' | '0' | '+' | ' ' | '#') {
            flags.push(f);
            it.next();
        } else {
            break;
        }
    }
    if it.peek() == Some(&'*') {
        bail!("printf: '*' widths are not supported: write the width in the format");
    }
    let width = number(it, "field width")?.unwrap_or(0);
    let mut precision: Option<usize> = None;
    if it.peek() == Some(&'.') {
        it.next();
        if it.peek() == Some(&'*') {
            bail!("printf: '.*' precisions are not supported: write the precision in the format");
        }
        precision = Some(number(it, "precision")?.unwrap_or(0));
    }
    while matches!(it.peek(), Some('l' | 'h' | 'z' | 'j' | 'L' | 'q' | 't')) {
        it.next();
    }
    let Some(conv) = it.next() else {
        bail!("printf: the format ends inside a conversion");
    };
    if !matches!(
        conv,
        'd' | 'i' | 'u' | 'x' | 'X' | 'o' | 'f' | 'g' | 'e' | 's' | 'c' | 'p'
    ) {
        bail!("printf: unsupported conversion '%{conv}' (use %d %u %x %f %g %s %c %p)");
    }
    Ok(Spec {
        flags,
        width,
        precision,
        conv,
    })
}

/// Check the conversions of `format` (widths and precisions included):
/// the conversion characters in order.
pub fn conversions(format: &str) -> Result<Vec<char>> {
    let mut out = Vec::new();
    let mut it = format.chars().peekable();
    while let Some(c) = it.next() {
        if c != '%' {
            continue;
        }
        if it.peek() == Some(&'%') {
            it.next();
            continue;
        }
        out.push(spec(&mut it)?.conv);
    }
    Ok(out)
}

/// Format `values` by `format` (conversions as checked by
/// `command::printf_conversions`: flags, width and precision are kept).
/// Widths and precisions above `MAX_WIDTH` and output above `MAX_OUTPUT`
/// are errors, never a panic.
pub fn printf(env: &dyn EvalEnv, format: &str, values: &[Value]) -> Result<String> {
    let mut out = String::new();
    let mut it = format.chars().peekable();
    let mut args = values.iter();
    while let Some(c) = it.next() {
        if out.len() > MAX_OUTPUT {
            bail!("printf: the output would be longer than {MAX_OUTPUT} bytes");
        }
        if c != '%' {
            out.push(c);
            continue;
        }
        if it.peek() == Some(&'%') {
            it.next();
            out.push('%');
            continue;
        }
        let Spec {
            flags,
            width: w,
            precision,
            conv,
        } = spec(&mut it)?;
        let Some(v) = args.next() else {
            bail!("printf: not enough arguments for the format");
        };
        let body = match conv {
            's' => {
                let s = scalar(env, v)?;
                let text = read_string(env, s.as_i64() as u64);
                // read_string quotes: printf prints the bare text
                let bare = text
                    .strip_prefix('"')
                    .and_then(|t| t.strip_suffix('"').or_else(|| t.strip_suffix("\"...")))
                    .map(unescape)
                    .unwrap_or(text);
                match precision {
                    Some(p) => bare.chars().take(p).collect(),
                    None => bare,
                }
            }
            'c' => char::from(scalar(env, v)?.as_i64() as u8).to_string(),
            'd' | 'i' => match scalar(env, v)? {
                Scalar::F(f) => format!("{}", f as i64),
                s => format!("{}", s.as_i64()),
            },
            'u' => format!("{}", scalar(env, v)?.as_i64() as u64),
            'x' => format!("{:x}", scalar(env, v)?.as_i64() as u64),
            'X' => format!("{:X}", scalar(env, v)?.as_i64() as u64),
            'o' => format!("{:o}", scalar(env, v)?.as_i64() as u64),
            'p' => format!("{:#x}", scalar(env, v)?.as_i64() as u64),
            'f' => format!("{:.*}", precision.unwrap_or(6), scalar(env, v)?.as_f64()),
            'e' => format!("{:.*e}", precision.unwrap_or(6), scalar(env, v)?.as_f64()),
            'g' => {
                let f = scalar(env, v)?.as_f64();
                crate::expr::format::fmt_float(f, 8)
            }
            other => bail!("printf: unsupported conversion '%{other}'"),
        };
        if body.len() > MAX_OUTPUT {
            bail!("printf: the output would be longer than {MAX_OUTPUT} bytes");
        }
        let body = if (flags.contains('#')) && matches!(conv, 'x' | 'X') {
            format!("0x{body}")
        } else {
            body
        };
        if body.chars().count() >= w {
            out.push_str(&body);
        } else if flags.contains('-') {
            out.push_str(&format!("{body:<w$}"));
        } else if flags.contains('0') && !matches!(conv, 's' | 'c') {
            let (sign, digits) = match body.strip_prefix('-') {
                Some(d) => ("-", d),
                None => ("", body.as_str()),
            };
            out.push_str(sign);
            out.push_str(&format!("{digits:0>0$}", w - sign.len()));
        } else {
            out.push_str(&format!("{body:>w$}"));
        }
    }
    if out.len() > MAX_OUTPUT {
        bail!("printf: the output would be longer than {MAX_OUTPUT} bytes");
    }
    Ok(out)
}

/// Undo `format::quote`'s escapes for printf's bare %s.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::types::Type;
    use crate::expr::eval::ValLoc;
    use crate::expr::testenv::Env;

    fn long(v: i64) -> Value {
        Value {
            ty: Type::long(),
            loc: ValLoc::Bytes(v.to_le_bytes().to_vec()),
        }
    }

    fn double(v: f64) -> Value {
        Value {
            ty: Type::double(),
            loc: ValLoc::Bytes(v.to_le_bytes().to_vec()),
        }
    }

    fn string_at(addr: u64) -> Value {
        Value {
            ty: Type::pointer_to(Some(Type::char_())),
            loc: ValLoc::Bytes(addr.to_le_bytes().to_vec()),
        }
    }

    /// Row 5 of the hardening issue: `printf "%999999999d\n", 1` panicked
    /// in the formatting machinery ("Formatting argument out of range").
    #[test]
    fn huge_width_or_precision_is_an_error_not_a_panic() {
        let cases = [
            (
                "%999999999d\n",
                "field width 999999999 is too large (at most 4096)",
            ),
            (
                "%.999999999f\n",
                "precision 999999999 is too large (at most 4096)",
            ),
            (
                "%99999999999999999999999x",
                "field width 99999999999999999999999 is too large",
            ),
            ("%4097s", "field width 4097 is too large"),
            ("%*d", "'*' widths are not supported"),
            ("%.*d", "'.*' precisions are not supported"),
        ];
        for (f, want) in cases {
            let e = printf(&Env, f, &[long(1)]).unwrap_err().to_string();
            assert!(e.starts_with("printf: ") && e.contains(want), "{f}: {e}");
            let e = conversions(f).unwrap_err().to_string();
            assert!(e.contains(want), "{f}: {e}");
        }
        // the largest width allowed works
        let s = printf(&Env, "%4096d|%-4096.4096f|", &[long(-42), double(1.5)]).unwrap();
        assert_eq!(s.len(), 4096 + 4096 + 2 + 2);
        assert!(s.starts_with(' ') && s[..4096].ends_with("-42"));
        assert_eq!(
            printf(&Env, "%05d|%-5d|%5s|", &[long(-42), long(7), string_at(0)])
                .unwrap()
                .len(),
            5 + 1 + 5 + 1 + "<error: Cannot access memory at address 0x0>".len() + 1
        );
    }

    #[test]
    fn a_format_of_only_a_newline_is_a_newline() {
        assert_eq!(printf(&Env, "\n", &[]).unwrap(), "\n");
        assert_eq!(printf(&Env, "%d%%\n", &[long(5)]).unwrap(), "5%\n");
    }

    /// A small deterministic PRNG (xorshift64*) for the fuzz-style test.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Many random formats (flags, widths and precisions of any length,
    /// length modifiers, any conversion character, stray '%', non-ASCII)
    /// over random values of every kind: printf and the format check
    /// return Ok or Err, never panic, and output stays bounded.
    #[test]
    fn random_formats_never_panic() {
        let pieces = [
            "%",
            "%%",
            "-",
            "0",
            "+",
            " ",
            "#",
            ".",
            "*",
            "l",
            "ll",
            "h",
            "hh",
            "z",
            "j",
            "L",
            "d",
            "i",
            "u",
            "x",
            "X",
            "o",
            "f",
            "g",
            "e",
            "s",
            "c",
            "p",
            "n",
            "q",
            "é",
            "\n",
            "abc",
            "9",
            "99",
            "4096",
            "4097",
            "65535",
            "65536",
            "999999999",
            "18446744073709551616",
        ];
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let mut ok = 0;
        for _ in 0..20_000 {
            let mut f = String::new();
            for _ in 0..rng.below(8) + 1 {
                f.push_str(pieces[rng.below(pieces.len() as u64) as usize]);
            }
            let mut vals = Vec::new();
            for _ in 0..rng.below(4) {
                vals.push(match rng.below(6) {
                    0 => long(rng.next() as i64),
                    1 => long([i64::MIN, i64::MAX, 0, -1][rng.below(4) as usize]),
                    2 => double(f64::from_bits(rng.next())),
                    3 => double(
                        [f64::NAN, f64::INFINITY, -0.0, 1e308, 5e-324][rng.below(5) as usize],
                    ),
                    4 => string_at(rng.next()),
                    _ => string_at(rng.below(8192)),
                });
            }
            let _ = conversions(&f);
            if let Ok(s) = printf(&Env, &f, &vals) {
                assert!(s.len() <= MAX_OUTPUT + 4 * MAX_WIDTH, "{f:?}");
                ok += 1;
            }
        }
        // the generator reaches the formatting paths, not only errors
        assert!(ok > 1000, "only {ok} formats formatted");
    }
}
