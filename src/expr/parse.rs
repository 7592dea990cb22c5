//! C-like expressions as gdb's `print` takes them: identifiers, `->`, `.`,
//! `*`, `&`, `[i]`, casts to named types, arithmetic and comparisons,
//! `$reg` and `$N` history.

use anyhow::{Result, bail};
mod lex;
use lex::{Tok, lex};

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
    /// `a@n`: gdb's artificial array of n objects from a's address
    At,
}

/// The deepest nesting an expression may have: parentheses, unary
/// operators, casts and the height of the parsed tree (a chain of `->`,
/// `[i]` or binary operators).  Parsing, type-checking, evaluating and
/// dropping an expression recurse over it, so a bound keeps a pasted
/// monster (15 000 parentheses) from overflowing pgdbg's stack while the
/// backend is stopped at a breakpoint.
pub const MAX_DEPTH: usize = 256;

fn too_deep() -> anyhow::Error {
    anyhow::anyhow!("expression nested too deeply (more than {MAX_DEPTH} levels)")
}

const BASE_TYPE_WORDS: &[&str] = &[
    "unsigned", "signed", "int", "long", "short", "char", "double", "float", "void", "_Bool",
    "bool",
];

/// The closest known type name to an unknown one, if any.
type SimilarType<'a> = dyn Fn(&str) -> Option<String> + 'a;

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    is_type: &'a dyn Fn(&str) -> bool,
    /// A similar type name for "no type named X" (when known).
    similar_type: Option<&'a SimilarType<'a>>,
    /// Active recursion levels (parentheses, unary operators, casts).
    nest: usize,
}

/// An expression and the height of its tree (a leaf is 1).
type Node = (Expr, usize);

/// Parse `s`.  `is_type` tells whether an identifier names a type (for casts).
pub fn parse(s: &str, is_type: &dyn Fn(&str) -> bool) -> Result<Expr> {
    parse_inner(s, is_type, None)
}

/// `parse` with the types of `di`, and a suggestion when a cast names a
/// type it does not have.
pub fn parse_in(s: &str, di: &crate::debuginfo::DebugInfo) -> Result<Expr> {
    use crate::debuginfo::types::TypeSource;
    parse_inner(
        s,
        &|t| di.type_by_name(t).is_some(),
        Some(&|t| similar_type(di, t)),
    )
}

/// Parse with type names known to `is_type` (the session's: a library's
/// types too).
pub fn parse_with(s: &str, is_type: &dyn Fn(&str) -> bool) -> Result<Expr> {
    parse_inner(s, is_type, None)
}

fn parse_inner(
    s: &str,
    is_type: &dyn Fn(&str) -> bool,
    similar_type: Option<&SimilarType<'_>>,
) -> Result<Expr> {
    let toks = lex(s)?;
    if toks.is_empty() {
        bail!("expression expected");
    }
    let mut p = Parser {
        toks,
        pos: 0,
        is_type,
        similar_type,
        nest: 0,
    };
    let (e, _) = p.expr(0)?;
    if p.pos < p.toks.len() {
        bail!("unexpected '{}' in expression", p.describe(p.pos));
    }
    Ok(e)
}

/// The type name of `di` closest to `name` (case-insensitive edit distance
/// of at most 3), for "did you mean ...?".
pub fn similar_type(di: &crate::debuginfo::DebugInfo, name: &str) -> Option<String> {
    let lname: Vec<char> = name.to_lowercase().chars().collect();
    let mut best: Option<(usize, &String)> = None;
    for k in di.index.types.keys() {
        if k.contains(' ') || k.chars().count().abs_diff(lname.len()) > 3 {
            continue;
        }
        let kl: Vec<char> = k.to_lowercase().chars().collect();
        let d = edit_distance(&lname, &kl);
        if d <= 3 && best.is_none_or(|(bd, bk)| d < bd || (d == bd && k < bk)) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k.clone())
}

fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let c = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + c);
        }
        prev = cur;
    }
    prev[b.len()]
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
        // gdb's: `@` binds tighter than shifts, looser than + and -
        "@" => (9, BinOp::At),
        "+" => (10, BinOp::Add),
        "-" => (10, BinOp::Sub),
        "*" => (11, BinOp::Mul),
        "/" => (11, BinOp::Div),
        "%" => (11, BinOp::Rem),
        _ => return None,
    })
}

/// A node over children of height `h`: refused past `MAX_DEPTH`.
fn node(e: Expr, h: usize) -> Result<Node> {
    if h + 1 > MAX_DEPTH {
        return Err(too_deep());
    }
    Ok((e, h + 1))
}

impl Parser<'_> {
    /// Token `i` as an error quotes it (control characters escaped).
    fn describe(&self, i: usize) -> String {
        match self.toks.get(i) {
            Some(Tok::Int(v)) => v.to_string(),
            Some(Tok::Float(v)) => v.to_string(),
            Some(Tok::Str(s)) => format!("\"{}\"", crate::shown::shown(s)),
            Some(Tok::Ident(s)) => crate::shown::shown(s).into_owned(),
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

    fn expr(&mut self, min: u8) -> Result<Node> {
        let (mut lhs, mut h) = self.unary()?;
        while let Some(Tok::P(p)) = self.toks.get(self.pos) {
            let Some(op) = prec(p) else { break };
            if op.0 < min {
                break;
            }
            self.pos += 1;
            let (rhs, rh) = self.expr(op.0 + 1)?;
            (lhs, h) = node(Expr::Binary(op.1, Box::new(lhs), Box::new(rhs)), h.max(rh))?;
        }
        Ok((lhs, h))
    }

    /// `const` and `*`s after a type's name: the number of pointers.
    fn pointers(&mut self) -> Result<usize> {
        let mut pointers = 0;
        loop {
            if self.eat_p("*") {
                pointers += 1;
                if pointers > MAX_DEPTH {
                    return Err(too_deep());
                }
            } else if matches!(self.toks.get(self.pos), Some(Tok::Ident(w)) if w == "const") {
                self.pos += 1;
            } else {
                break;
            }
        }
        Ok(pointers)
    }

    /// Try to read a type name starting at the current token; restores the
    /// position when there is none.
    fn type_spec(&mut self) -> Result<Option<TypeSpec>> {
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
            return Ok(None);
        }
        // "const" qualifiers are accepted and ignored
        let pointers = self.pointers()?;
        Ok(Some(TypeSpec {
            base: words.join(" "),
            pointers,
        }))
    }

    /// At `(` NAME [`*`...] `)` where NAME is not a type: when what follows
    /// cannot continue an expression (`(NoSuchType)1`, `(NoSuchType *)p`),
    /// it is a cast to a type the debug info does not have; say so rather
    /// than "unexpected '1'".
    fn unknown_cast(&mut self) -> Result<()> {
        let save = self.pos;
        let Some(Tok::Ident(name)) = self.toks.get(self.pos + 1).cloned() else {
            return Ok(());
        };
        self.pos += 2;
        let pointers = self.pointers()?;
        let closed = self.eat_p(")");
        let operand_follows = matches!(
            self.toks.get(self.pos),
            Some(Tok::Int(_) | Tok::Float(_) | Tok::Str(_) | Tok::Ident(_) | Tok::Dollar(_))
                | Some(Tok::P("(" | "!" | "~"))
        );
        self.pos = save;
        if closed && (pointers > 0 || operand_follows) {
            let hint = self
                .similar_type
                .and_then(|f| f(&name))
                .map(|s| format!(" (did you mean {s}?)"))
                .unwrap_or_default();
            bail!(
                "no type named '{name}' in the debug info{hint}",
                name = crate::shown::shown(&name)
            );
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<Node> {
        self.nest += 1;
        if self.nest > MAX_DEPTH {
            return Err(too_deep());
        }
        let r = self.unary_inner();
        self.nest -= 1;
        r
    }

    fn unary_inner(&mut self) -> Result<Node> {
        if self.eat_p("*") {
            let (e, h) = self.unary()?;
            return node(Expr::Deref(Box::new(e)), h);
        }
        if self.eat_p("&") {
            let (e, h) = self.unary()?;
            return node(Expr::AddrOf(Box::new(e)), h);
        }
        if self.eat_p("-") {
            let (e, h) = self.unary()?;
            return node(Expr::Neg(Box::new(e)), h);
        }
        if self.eat_p("!") {
            let (e, h) = self.unary()?;
            return node(Expr::Not(Box::new(e)), h);
        }
        if self.eat_p("~") {
            let (e, h) = self.unary()?;
            return node(Expr::BitNot(Box::new(e)), h);
        }
        if matches!(self.toks.get(self.pos), Some(Tok::Ident(w)) if w == "sizeof") {
            self.pos += 1;
            if self.peek_p("(") {
                let save = self.pos;
                self.pos += 1;
                if let Some(t) = self.type_spec()?
                    && self.eat_p(")")
                {
                    return node(Expr::Sizeof(Box::new(SizeofArg::Type(t))), 0);
                }
                self.pos = save;
            }
            let (e, h) = self.unary()?;
            return node(Expr::Sizeof(Box::new(SizeofArg::Expr(e))), h);
        }
        if self.peek_p("(") {
            let save = self.pos;
            self.pos += 1;
            if let Some(t) = self.type_spec()?
                && self.eat_p(")")
            {
                let (inner, h) = self.unary()?;
                return node(Expr::Cast(t, Box::new(inner)), h);
            }
            self.pos = save;
            self.unknown_cast()?;
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Node> {
        let (mut e, mut h) = self.primary()?;
        loop {
            if self.eat_p("->") {
                (e, h) = node(Expr::Arrow(Box::new(e), self.ident()?), h)?;
            } else if self.eat_p(".") {
                (e, h) = node(Expr::Member(Box::new(e), self.ident()?), h)?;
            } else if self.eat_p("[") {
                let (i, ih) = self.expr(0)?;
                self.expect_p("]")?;
                (e, h) = node(Expr::Index(Box::new(e), Box::new(i)), h.max(ih))?;
            } else {
                break;
            }
        }
        Ok((e, h))
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

    fn primary(&mut self) -> Result<Node> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        Ok(match t {
            Some(Tok::Int(v)) => (Expr::Int(v), 1),
            Some(Tok::Float(v)) => (Expr::Float(v), 1),
            Some(Tok::Str(s)) => (Expr::Str(s), 1),
            Some(Tok::Ident(s)) => (Expr::Ident(s), 1),
            Some(Tok::Dollar(s)) => {
                let e = if s.is_empty() {
                    Expr::History(None)
                } else if let Ok(n) = s.parse::<usize>() {
                    Expr::History(Some(n))
                } else {
                    Expr::Reg(s)
                };
                (e, 1)
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

/// Each character of `s` with its byte index and whether it stands at the
/// top level (not inside (), [] or quotes; a bracket or quote itself is
/// not at the top level).
pub fn top_level_chars(s: &str) -> impl Iterator<Item = (usize, char, bool)> + '_ {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    s.char_indices().map(move |(i, c)| {
        let top = match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                false
            }
            (Some(_), _) => false,
            (None, '"' | '\'') => {
                quote = Some(c);
                false
            }
            (None, '(' | '[') => {
                depth += 1;
                false
            }
            (None, ')' | ']') => {
                depth -= 1;
                false
            }
            (None, _) => depth == 0,
        };
        (i, c, top)
    })
}

/// Split expressions at top-level commas (not inside (), [] or quotes).
pub fn split_args(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for (_, c, top) in top_level_chars(s) {
        if top && c == ',' {
            out.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests;
