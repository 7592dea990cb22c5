//! The lexer: an expression's text into tokens.

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Int(u64),
    Float(f64),
    Str(String),
    Ident(String),
    Dollar(String),
    P(&'static str),
}

const PUNCT: &[&str] = &[
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "%", "<", ">", "&",
    "|", "^", "!", "~", "(", ")", "[", "]", ".", "@",
];

/// `'x'`, `'\n'`: the character and the number of chars the literal takes
/// after its opening quote, when `cs[i..]` (just after the `'`) is one.
fn char_literal(cs: &[char], i: usize) -> Option<(char, usize)> {
    match (cs.get(i), cs.get(i + 1), cs.get(i + 2)) {
        (Some('\\'), Some(e), Some('\'')) => Some((
            match e {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                '0' => '\0',
                o => *o,
            },
            3,
        )),
        (Some(c), Some('\''), _) if *c != '\'' && *c != '\\' => Some((*c, 2)),
        _ => None,
    }
}

pub(super) fn lex(s: &str) -> Result<Vec<Tok>> {
    // by characters, not bytes: a non-ASCII character is one character in
    // identifiers, strings and error messages
    let cs: Vec<char> = s.chars().collect();
    let text = |a: usize, b: usize| -> String { cs[a..b].iter().collect() };
    let mut i = 0;
    let mut out = Vec::new();
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            if c == '0' && matches!(cs.get(i + 1), Some('x' | 'X')) {
                i += 2;
                while i < cs.len() && cs[i].is_ascii_hexdigit() {
                    i += 1;
                }
                let v = u64::from_str_radix(&text(start + 2, i), 16).map_err(|_| {
                    anyhow::anyhow!("bad number '{}'", crate::shown::shown(&text(start, i)))
                })?;
                out.push(Tok::Int(v));
            } else {
                while i < cs.len() && (cs[i].is_ascii_digit() || matches!(cs[i], '.' | 'e' | 'E')) {
                    if matches!(cs[i], 'e' | 'E') && matches!(cs.get(i + 1), Some('-' | '+')) {
                        i += 1;
                    }
                    i += 1;
                }
                let t = text(start, i);
                if t.contains('.') || t.contains('e') || t.contains('E') {
                    out.push(Tok::Float(t.parse().map_err(|_| {
                        anyhow::anyhow!("bad number '{t}'", t = crate::shown::shown(&t))
                    })?));
                } else {
                    out.push(Tok::Int(t.parse().map_err(|_| {
                        anyhow::anyhow!("bad number '{t}'", t = crate::shown::shown(&t))
                    })?));
                }
            }
            // integer suffixes
            while i < cs.len() && matches!(cs[i], 'u' | 'U' | 'l' | 'L') {
                i += 1;
            }
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(text(start, i)));
            continue;
        }
        if c == '$' {
            let start = i + 1;
            i += 1;
            while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            out.push(Tok::Dollar(text(start, i)));
            continue;
        }
        if c == '"' {
            let mut v = String::new();
            i += 1;
            while i < cs.len() && cs[i] != '"' {
                if cs[i] == '\\' && i + 1 < cs.len() {
                    i += 1;
                    v.push(match cs[i] {
                        'n' => '\n',
                        't' => '\t',
                        x => x,
                    });
                } else {
                    v.push(cs[i]);
                }
                i += 1;
            }
            if i >= cs.len() {
                bail!("unterminated string in expression");
            }
            i += 1;
            out.push(Tok::Str(v));
            continue;
        }
        if c == '\''
            && let Some((ch, len)) = char_literal(&cs, i + 1)
        {
            out.push(Tok::Int(ch as u64));
            i += 1 + len;
            continue;
        }
        let rest = text(i, cs.len().min(i + 2));
        match PUNCT.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                out.push(Tok::P(p));
                i += p.len();
            }
            None => bail!(
                "unexpected character '{c}' in expression",
                c = crate::shown::shown(&c.to_string())
            ),
        }
    }
    Ok(out)
}
