//! `printf "FORMAT", EXPR...`: C-style formatting of evaluated values.

use crate::expr::eval::{EvalEnv, Scalar, Value, scalar};
use crate::expr::format::read_string;
use anyhow::{Result, bail};

/// Format `values` by `format` (conversions as checked by
/// `command::printf_conversions`: flags, width and precision are kept).
pub fn printf(env: &dyn EvalEnv, format: &str, values: &[Value]) -> Result<String> {
    let mut out = String::new();
    let mut it = format.chars().peekable();
    let mut args = values.iter();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if it.peek() == Some(&'%') {
            it.next();
            out.push('%');
            continue;
        }
        // flags, width, precision, length, conversion
        let mut flags = String::new();
        while let Some(&f) = it.peek() {
            if matches!(f, '-' | '0' | '+' | ' ' | '#') {
                flags.push(f);
                it.next();
            } else {
                break;
            }
        }
        let mut width = String::new();
        while let Some(&d) = it.peek().filter(|d| d.is_ascii_digit()) {
            width.push(d);
            it.next();
        }
        let mut precision: Option<usize> = None;
        if it.peek() == Some(&'.') {
            it.next();
            let mut p = String::new();
            while let Some(&d) = it.peek().filter(|d| d.is_ascii_digit()) {
                p.push(d);
                it.next();
            }
            precision = Some(p.parse().unwrap_or(0));
        }
        while matches!(it.peek(), Some('l' | 'h' | 'z' | 'j')) {
            it.next();
        }
        let Some(conv) = it.next() else {
            bail!("printf: the format ends inside a conversion");
        };
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
        let body = if (flags.contains('#')) && matches!(conv, 'x' | 'X') {
            format!("0x{body}")
        } else {
            body
        };
        let w: usize = width.parse().unwrap_or(0);
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
