//! C-like expressions as gdb's `print` takes them: identifiers, `->`, `.`,
//! `*`, `&`, `[i]`, casts to named types, arithmetic and comparisons,
//! `$reg` and `$N` history.

use anyhow::{Result, bail};

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Int(u64),
    Float(f64),
    Str(String),
    Ident(String),
    /// `$rip`, `$sp`, ...
    Reg(String),
    /// `$N` (value history), `$` (last)
    History(Option<usize>),
    Member(Box<Expr>, String),
    Arrow(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Deref(Box<Expr>),
    AddrOf(Box<Expr>),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    BitNot(Box<Expr>),
    Cast(TypeSpec, Box<Expr>),
    Sizeof(Box<SizeofArg>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum SizeofArg {
    Type(TypeSpec),
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TypeSpec {
    /// "CachedPlanSource", "struct Foo", "unsigned long"
    pub base: String,
    pub pointers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    BitAnd,
    BitOr,
    BitXor,
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(u64),
    Float(f64),
    Str(String),
    Ident(String),
    Dollar(String),
    P(&'static str),
}

const PUNCT: &[&str] = &[
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "%", "<", ">", "&",
    "|", "^", "!", "~", "(", ")", "[", "]", ".",
];

fn lex(s: &str) -> Result<Vec<Tok>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            if c == '0' && i + 1 < b.len() && (b[i + 1] == b'x' || b[i + 1] == b'X') {
                i += 2;
                while i < b.len() && (b[i] as char).is_ascii_hexdigit() {
                    i += 1;
                }
                let v = u64::from_str_radix(&s[start + 2..i], 16)
                    .map_err(|_| anyhow::anyhow!("bad number '{}'", &s[start..i]))?;
                out.push(Tok::Int(v));
            } else {
                while i < b.len()
                    && ((b[i] as char).is_ascii_digit()
                        || b[i] == b'.'
                        || b[i] == b'e'
                        || b[i] == b'E')
                {
                    if (b[i] == b'e' || b[i] == b'E')
                        && i + 1 < b.len()
                        && (b[i + 1] == b'-' || b[i + 1] == b'+')
                    {
                        i += 1;
                    }
                    i += 1;
                }
                let t = &s[start..i];
                if t.contains('.') || t.contains('e') || t.contains('E') {
                    out.push(Tok::Float(
                        t.parse().map_err(|_| anyhow::anyhow!("bad number '{t}'"))?,
                    ));
                } else {
                    out.push(Tok::Int(
                        t.parse().map_err(|_| anyhow::anyhow!("bad number '{t}'"))?,
                    ));
                }
            }
            // integer suffixes
            while i < b.len() && matches!(b[i], b'u' | b'U' | b'l' | b'L') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
            continue;
        }
        if c == '$' {
            let start = i + 1;
            i += 1;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Dollar(s[start..i].to_string()));
            continue;
        }
        if c == '"' {
            let mut v = String::new();
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                    v.push(match b[i] {
                        b'n' => '\n',
                        b't' => '\t',
                        x => x as char,
                    });
                } else {
                    v.push(b[i] as char);
                }
                i += 1;
            }
            if i >= b.len() {
                bail!("unterminated string in expression");
            }
            i += 1;
            out.push(Tok::Str(v));
            continue;
        }
        if c == '\'' && i + 2 < b.len() && b[i + 2] == b'\'' {
            out.push(Tok::Int(b[i + 1] as u64));
            i += 3;
            continue;
        }
        let mut matched = false;
        for p in PUNCT {
            if s[i..].starts_with(p) {
                out.push(Tok::P(p));
                i += p.len();
                matched = true;
                break;
            }
        }
        if !matched {
            bail!("unexpected character '{c}' in expression");
        }
    }
    Ok(out)
}

const BASE_TYPE_WORDS: &[&str] = &[
    "unsigned", "signed", "int", "long", "short", "char", "double", "float", "void", "_Bool",
    "bool",
];

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    is_type: &'a dyn Fn(&str) -> bool,
}

/// Parse `s`.  `is_type` tells whether an identifier names a type (for casts).
pub fn parse(s: &str, is_type: &dyn Fn(&str) -> bool) -> Result<Expr> {
    let toks = lex(s)?;
    if toks.is_empty() {
        bail!("expression expected");
    }
    let mut p = Parser {
        toks,
        pos: 0,
        is_type,
    };
    let e = p.expr(0)?;
    if p.pos < p.toks.len() {
        bail!("unexpected '{}' in expression", p.describe(p.pos));
    }
    Ok(e)
}

fn prec(op: &str) -> Option<(u8, BinOp)> {
    Some(match op {
        "||" => (1, BinOp::Or),
        "&&" => (2, BinOp::And),
        "|" => (3, BinOp::BitOr),
        "^" => (4, BinOp::BitXor),
        "&" => (5, BinOp::BitAnd),
        "==" => (6, BinOp::Eq),
        "!=" => (6, BinOp::Ne),
        "<" => (7, BinOp::Lt),
        ">" => (7, BinOp::Gt),
        "<=" => (7, BinOp::Le),
        ">=" => (7, BinOp::Ge),
        "<<" => (8, BinOp::Shl),
        ">>" => (8, BinOp::Shr),
        "+" => (9, BinOp::Add),
        "-" => (9, BinOp::Sub),
        "*" => (10, BinOp::Mul),
        "/" => (10, BinOp::Div),
        "%" => (10, BinOp::Rem),
        _ => return None,
    })
}

impl Parser<'_> {
    fn describe(&self, i: usize) -> String {
        match self.toks.get(i) {
            Some(Tok::Int(v)) => v.to_string(),
            Some(Tok::Float(v)) => v.to_string(),
            Some(Tok::Str(s)) => format!("\"{s}\""),
            Some(Tok::Ident(s)) => s.clone(),
            Some(Tok::Dollar(s)) => format!("${s}"),
            Some(Tok::P(p)) => p.to_string(),
            None => "end of expression".into(),
        }
    }

    fn peek_p(&self, p: &str) -> bool {
        matches!(self.toks.get(self.pos), Some(Tok::P(x)) if *x == p)
    }

    fn eat_p(&mut self, p: &str) -> bool {
        if self.peek_p(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_p(&mut self, p: &str) -> Result<()> {
        if self.eat_p(p) {
            Ok(())
        } else {
            bail!("expected '{p}' but found '{}'", self.describe(self.pos))
        }
    }

    fn expr(&mut self, min: u8) -> Result<Expr> {
        let mut lhs = self.unary()?;
        while let Some(Tok::P(p)) = self.toks.get(self.pos) {
            let Some(op) = prec(p) else { break };
            if op.0 < min {
                break;
            }
            self.pos += 1;
            let rhs = self.expr(op.0 + 1)?;
            lhs = Expr::Binary(op.1, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    /// Try to read a type name starting at the current token; restores the
    /// position when there is none.
    fn type_spec(&mut self) -> Option<TypeSpec> {
        let save = self.pos;
        let mut words: Vec<String> = Vec::new();
        if let Some(Tok::Ident(w)) = self.toks.get(self.pos) {
            if w == "struct" || w == "union" || w == "enum" {
                if let Some(Tok::Ident(n)) = self.toks.get(self.pos + 1) {
                    words.push(format!("{w} {n}"));
                    self.pos += 2;
                }
            } else if BASE_TYPE_WORDS.contains(&w.as_str()) {
                while let Some(Tok::Ident(w)) = self.toks.get(self.pos) {
                    if BASE_TYPE_WORDS.contains(&w.as_str()) {
                        words.push(w.clone());
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
            } else if (self.is_type)(w) {
                words.push(w.clone());
                self.pos += 1;
            }
        }
        if words.is_empty() {
            self.pos = save;
            return None;
        }
        // "const" qualifiers are accepted and ignored
        let mut pointers = 0;
        loop {
            if self.eat_p("*") {
                pointers += 1;
            } else if matches!(self.toks.get(self.pos), Some(Tok::Ident(w)) if w == "const") {
                self.pos += 1;
            } else {
                break;
            }
        }
        Some(TypeSpec {
            base: words.join(" "),
            pointers,
        })
    }

    fn unary(&mut self) -> Result<Expr> {
        if self.eat_p("*") {
            return Ok(Expr::Deref(Box::new(self.unary()?)));
        }
        if self.eat_p("&") {
            return Ok(Expr::AddrOf(Box::new(self.unary()?)));
        }
        if self.eat_p("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if self.eat_p("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat_p("~") {
            return Ok(Expr::BitNot(Box::new(self.unary()?)));
        }
        if matches!(self.toks.get(self.pos), Some(Tok::Ident(w)) if w == "sizeof") {
            self.pos += 1;
            if self.peek_p("(") {
                let save = self.pos;
                self.pos += 1;
                if let Some(t) = self.type_spec()
                    && self.eat_p(")")
                {
                    return Ok(Expr::Sizeof(Box::new(SizeofArg::Type(t))));
                }
                self.pos = save;
            }
            let e = self.unary()?;
            return Ok(Expr::Sizeof(Box::new(SizeofArg::Expr(e))));
        }
        if self.peek_p("(") {
            let save = self.pos;
            self.pos += 1;
            if let Some(t) = self.type_spec()
                && self.eat_p(")")
            {
                let inner = self.unary()?;
                return Ok(Expr::Cast(t, Box::new(inner)));
            }
            self.pos = save;
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr> {
        let mut e = self.primary()?;
        loop {
            if self.eat_p("->") {
                e = Expr::Arrow(Box::new(e), self.ident()?);
            } else if self.eat_p(".") {
                e = Expr::Member(Box::new(e), self.ident()?);
            } else if self.eat_p("[") {
                let i = self.expr(0)?;
                self.expect_p("]")?;
                e = Expr::Index(Box::new(e), Box::new(i));
            } else {
                break;
            }
        }
        Ok(e)
    }

    fn ident(&mut self) -> Result<String> {
        match self.toks.get(self.pos) {
            Some(Tok::Ident(s)) => {
                self.pos += 1;
                Ok(s.clone())
            }
            _ => bail!(
                "expected a field name but found '{}'",
                self.describe(self.pos)
            ),
        }
    }

    fn primary(&mut self) -> Result<Expr> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        Ok(match t {
            Some(Tok::Int(v)) => Expr::Int(v),
            Some(Tok::Float(v)) => Expr::Float(v),
            Some(Tok::Str(s)) => Expr::Str(s),
            Some(Tok::Ident(s)) => Expr::Ident(s),
            Some(Tok::Dollar(s)) => {
                if s.is_empty() {
                    Expr::History(None)
                } else if let Ok(n) = s.parse::<usize>() {
                    Expr::History(Some(n))
                } else {
                    Expr::Reg(s)
                }
            }
            Some(Tok::P("(")) => {
                let e = self.expr(0)?;
                self.expect_p(")")?;
                e
            }
            _ => {
                self.pos -= 1;
                bail!("unexpected '{}' in expression", self.describe(self.pos))
            }
        })
    }
}

/// Identifiers an expression refers to (for checking scripts before attach).
pub fn identifiers(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Ident(s) => out.push(s.clone()),
        Expr::Member(a, _) | Expr::Arrow(a, _) => identifiers(a, out),
        Expr::Deref(a)
        | Expr::AddrOf(a)
        | Expr::Neg(a)
        | Expr::Not(a)
        | Expr::BitNot(a)
        | Expr::Cast(_, a) => identifiers(a, out),
        Expr::Index(a, b) | Expr::Binary(_, a, b) => {
            identifiers(a, out);
            identifiers(b, out);
        }
        Expr::Sizeof(a) => {
            if let SizeofArg::Expr(e) = &**a {
                identifiers(e, out)
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Expr {
        parse(s, &|n| n == "CachedPlanSource").unwrap()
    }

    #[test]
    fn arrows_and_members() {
        assert_eq!(
            p("plansource->generic_cost"),
            Expr::Arrow(
                Box::new(Expr::Ident("plansource".into())),
                "generic_cost".into()
            )
        );
        assert_eq!(
            p("*my_wait_event_info"),
            Expr::Deref(Box::new(Expr::Ident("my_wait_event_info".into())))
        );
    }

    #[test]
    fn precedence() {
        let e = p("a->x / b->y + 1");
        match e {
            Expr::Binary(BinOp::Add, l, _) => assert!(matches!(*l, Expr::Binary(BinOp::Div, _, _))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn casts() {
        assert_eq!(
            p("(CachedPlanSource *) 0x10"),
            Expr::Cast(
                TypeSpec {
                    base: "CachedPlanSource".into(),
                    pointers: 1
                },
                Box::new(Expr::Int(16))
            )
        );
        // not a type: a parenthesised expression
        assert_eq!(p("(x)"), Expr::Ident("x".into()));
        assert!(
            matches!(p("(unsigned long) 3"), Expr::Cast(TypeSpec { ref base, pointers: 0 }, _) if base == "unsigned long")
        );
    }

    #[test]
    fn errors_are_clear() {
        let e = parse("a->", &|_| false).unwrap_err().to_string();
        assert!(e.contains("expected a field name"), "{e}");
        let e = parse("a @ b", &|_| false).unwrap_err().to_string();
        assert!(e.contains("unexpected character '@'"), "{e}");
    }
}
