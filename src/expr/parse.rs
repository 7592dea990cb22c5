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
    /// `a@n`: gdb's artificial array of n objects from a's address
    At,
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
    "|", "^", "!", "~", "(", ")", "[", "]", ".", "@",
];

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

fn lex(s: &str) -> Result<Vec<Tok>> {
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

/// Split expressions at top-level commas (not inside (), [] or quotes).
pub fn split_args(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut cur = String::new();
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
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

    /// Run `f` on a thread with a small stack: an unbounded recursion
    /// overflows it and aborts the test process.
    fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    fn too_deep_msg() -> String {
        format!("expression nested too deeply (more than {MAX_DEPTH} levels)")
    }

    /// Row 1 of the hardening issue: 15 000 nested parentheses, 20 000
    /// leading '-', long chains of '*', '&', casts, '->', '[i]', binary
    /// operators: one clear error, no stack overflow.
    #[test]
    fn monster_expressions_are_refused_without_overflow() {
        let n = 20_000;
        let cases: Vec<String> = vec![
            format!("{}1{}", "(".repeat(15_000), ")".repeat(15_000)),
            format!("{}1", "-".repeat(n)),
            format!("{}x", "*".repeat(n)),
            format!("{}x", "& ".repeat(n)),
            format!("{}x", "!".repeat(n)),
            format!("{}x", "~".repeat(n)),
            format!("{}x", "- ".repeat(n)),
            format!("{}1", "(int)".repeat(n)),
            format!("{}1", "(long)-".repeat(n)),
            format!("{}x", "sizeof ".repeat(n)),
            format!("(int {})0", "*".repeat(n)),
            format!("x{}", "->a".repeat(n)),
            format!("x{}", ".a".repeat(n)),
            format!("x{}", "[0]".repeat(n)),
            format!("x{}", "[(0)]".repeat(n)),
            format!("1{}", "+1".repeat(n)),
            format!("1{}", "*2-3".repeat(n)),
            format!("x{}", " && y || z".repeat(n)),
            format!("{}1{}", "x[".repeat(n), "]".repeat(n)),
            format!("{}1{}", "(1+".repeat(n), ")".repeat(n)),
            format!("{}1{}", "-(".repeat(n), ")".repeat(n)),
        ];
        on_small_stack(move || {
            for c in &cases {
                let e = parse(c, &|t| t == "int" || t == "long").expect_err(&c[..40.min(c.len())]);
                assert_eq!(e.to_string(), too_deep_msg(), "{}", &c[..40]);
            }
        });
    }

    /// Just below the limit parses, and evaluates and drops on a small stack.
    #[test]
    fn deep_but_allowed_expressions_evaluate() {
        use crate::expr::eval::{eval, scalar};
        use crate::expr::testenv::Env;
        let d = MAX_DEPTH - 2;
        let cases: Vec<(String, i64)> = vec![
            (format!("{}7{}", "(".repeat(d), ")".repeat(d)), 7),
            (format!("{}7", "-".repeat(d)), 7),
            (format!("{}7", "- ".repeat(d + 1)), -7),
            (format!("1{}", "+1".repeat(d)), d as i64 + 1),
            (format!("{}7", "(long)".repeat(d)), 7),
            (
                format!("{}7{}", "-(".repeat(d / 2), ")".repeat(d / 2)),
                if (d / 2).is_multiple_of(2) { 7 } else { -7 },
            ),
            (
                format!("{}2{}", "(1+".repeat(d / 2), ")".repeat(d / 2)),
                2 + d as i64 / 2,
            ),
        ];
        on_small_stack(move || {
            for (c, want) in &cases {
                let e = parse(c, &|t| t == "long").unwrap_or_else(|e| panic!("{e}: {c}"));
                let v = eval(&Env, &e).unwrap();
                assert_eq!(scalar(&Env, &v).unwrap().as_i64(), *want, "{c}");
                let mut ids = Vec::new();
                identifiers(&e, &mut ids);
                let e2 = e.clone();
                assert_eq!(e, e2);
            }
        });
    }

    #[test]
    fn non_ascii_is_read_by_character() {
        assert_eq!(p("café"), Expr::Ident("café".into()));
        assert_eq!(
            p("ñ->größe"),
            Expr::Arrow(Box::new(Expr::Ident("ñ".into())), "größe".into())
        );
        let e = parse("a § b", &|_| false).unwrap_err().to_string();
        assert_eq!(e, "unexpected character '§' in expression");
        let e = parse("a → b", &|_| false).unwrap_err().to_string();
        assert_eq!(e, "unexpected character '→' in expression");
        assert_eq!(p("\"é\""), Expr::Str("é".into()));
        assert_eq!(p("'é'"), Expr::Int('é' as u64));
        assert_eq!(p("'\\n'"), Expr::Int(10));
        assert_eq!(p("'#'"), Expr::Int('#' as u64));
    }

    #[test]
    fn cast_to_an_unknown_type_names_it() {
        for s in [
            "(NoSuchType)1",
            "(NoSuchType) x",
            "(NoSuchType *)p",
            "(NoSuchType)(x)",
        ] {
            let e = parse(s, &|_| false).unwrap_err().to_string();
            assert_eq!(e, "no type named 'NoSuchType' in the debug info", "{s}");
        }
        let e = parse_inner(
            "(CachedPlanSorce *)p",
            &|_| false,
            Some(&|_| Some("CachedPlanSource".to_string())),
        )
        .unwrap_err()
        .to_string();
        assert!(e.ends_with("(did you mean CachedPlanSource?)"), "{e}");
        // still expressions: a parenthesised name before a binary operator
        assert!(matches!(p("(x) - 1"), Expr::Binary(BinOp::Sub, _, _)));
        assert!(matches!(p("(x) * y"), Expr::Binary(BinOp::Mul, _, _)));
        assert!(matches!(p("(x) & y"), Expr::Binary(BinOp::BitAnd, _, _)));
        assert_eq!(p("(x)"), Expr::Ident("x".into()));
    }

    #[test]
    fn errors_are_clear() {
        let e = parse("a->", &|_| false).unwrap_err().to_string();
        assert!(e.contains("expected a field name"), "{e}");
        let e = parse("a ` b", &|_| false).unwrap_err().to_string();
        assert!(e.contains("unexpected character '`'"), "{e}");
        assert!(matches!(
            parse("a[0]@n+1", &|_| false).unwrap(),
            Expr::Binary(BinOp::At, _, _)
        ));
    }
}
