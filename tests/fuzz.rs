//! Fuzzing of everything pgdbg reads that a person or a file supplies: the
//! command and script language (`commands` blocks, `${NAME}`), C
//! expressions and printf formats (parsed, type-checked and evaluated over
//! a fixture's DWARF with memory of random bytes), layout packs, capture
//! files given to `pgdbg report`, and ELF/DWARF of mutated binaries.
//!
//! A small deterministic mutation fuzzer (seeded xorshift: runs on the
//! stable toolchain, no libFuzzer): structure-aware generators from the
//! language's words plus byte mutations of real inputs.  In-process targets
//! assert that no input panics (`catch_unwind`) and that each input ends
//! quickly; whole-program targets run the pgdbg binary as a child and
//! assert one line on stderr, no "panicked", no exit 101 and no hang.
//!
//! Default run: a few seconds per target.  `PGDBG_FUZZ_SECS=N` gives each
//! target N seconds (scripts/fuzz runs them long), `PGDBG_FUZZ_SEED=N`
//! changes the seed (printed when a target fails, to replay it).
//! Inputs that once failed are replayed first by `regressions_*` tests.

use common::*;
use pgdbg::debuginfo::types::TypeSource;
use pgdbg::expr::format::Radix;
use pgdbg_testbed as common;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------
// the fuzzer

struct Rng(u64);

impl Rng {
    fn new(salt: u64) -> Rng {
        let seed = std::env::var("PGDBG_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed_f00d_u64);
        Rng((seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn word(&mut self, xs: &[&'static str]) -> &'static str {
        xs[self.below(xs.len())]
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Seconds per target: `PGDBG_FUZZ_SECS`, else `default`.
fn budget(default: f64) -> Duration {
    let s = std::env::var("PGDBG_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(default);
    Duration::from_secs_f64(s)
}

/// Is the run a long one (scripts/fuzz)?
fn long_run() -> bool {
    std::env::var_os("PGDBG_FUZZ_SECS").is_some()
}

const INTERESTING: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "-1e308",
    "1e999",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999999999999",
    "4294967296",
    "0x7fffffffffffffff",
    "0xffffffffffffffff",
    "0x",
    "\"\"",
    "null",
    "true",
    "[]",
    "{}",
    "\u{0}",
    "é",
    "Ã",
    "\u{202e}",
    "%",
    "%%",
    "${",
    "}",
    "\\",
    "\"",
    "'",
];

/// Byte-level mutations, kept to valid UTF-8 when `text` (lossy).
fn mutate_bytes(r: &mut Rng, data: &mut Vec<u8>, dict: &[&str]) {
    let n = 1 + r.below(4);
    for _ in 0..n {
        let len = data.len();
        match r.below(9) {
            0 if len > 0 => {
                let i = r.below(len);
                data[i] ^= 1 << r.below(8);
            }
            1 if len > 0 => {
                let i = r.below(len);
                data[i] = r.next() as u8;
            }
            2 if len > 0 => {
                // delete a range
                let i = r.below(len);
                let l = 1 + r.below((len - i).min(16));
                data.drain(i..i + l);
            }
            3 if len > 0 => {
                // duplicate a range
                let i = r.below(len);
                let l = 1 + r.below((len - i).min(64));
                let chunk: Vec<u8> = data[i..i + l].to_vec();
                let at = r.below(len + 1);
                data.splice(at..at, chunk);
            }
            4 if len > 0 => {
                // truncate
                data.truncate(r.below(len));
            }
            5 | 6 => {
                // insert a dictionary word
                let w = if r.chance(2) {
                    *r.pick(dict)
                } else {
                    *r.pick(INTERESTING)
                };
                let at = r.below(len + 1);
                data.splice(at..at, w.bytes());
            }
            7 => {
                // replace a run of digits by an interesting number
                let digits: Vec<usize> = (0..len).filter(|&i| data[i].is_ascii_digit()).collect();
                if !digits.is_empty() {
                    let i = *r.pick(&digits);
                    let mut j = i;
                    while j < len && (data[j].is_ascii_digit() || data[j] == b'.') {
                        j += 1;
                    }
                    let w = *r.pick(INTERESTING);
                    data.splice(i..j, w.bytes());
                }
            }
            _ => {
                // repeat a byte (deep nesting, long runs)
                if len > 0 {
                    let i = r.below(len);
                    let b = data[i];
                    let m = if r.chance(8) { 5000 } else { 40 };
                    let k = 1 + r.below(m);
                    data.splice(i..i, std::iter::repeat_n(b, k));
                }
            }
        }
    }
}

fn mutate_text(r: &mut Rng, s: &str, dict: &[&str]) -> String {
    let mut b = s.as_bytes().to_vec();
    mutate_bytes(r, &mut b, dict);
    String::from_utf8_lossy(&b).into_owned()
}

/// Run `f` on `input`; a panic or a slow input fails the test naming the
/// target and the input (Debug-quoted, to paste into a regression test).
fn must_not_panic(target: &str, input: &str, f: impl FnOnce()) {
    let t = Instant::now();
    let res = catch_unwind(AssertUnwindSafe(f));
    let took = t.elapsed();
    if res.is_err() {
        panic!("fuzz target {target}: panic on input {input:?}");
    }
    assert!(
        took < Duration::from_secs(5),
        "fuzz target {target}: {took:?} (a hang?) on input {input:?}"
    );
}

/// Run in-process target `body` (one input per call) for its budget.
fn run_target(name: &str, secs: f64, mut body: impl FnMut(&mut Rng)) {
    let mut r = Rng::new(name.bytes().map(u64::from).sum());
    let limit = budget(secs);
    let start = Instant::now();
    let mut n = 0u64;
    // quiet the default hook: each panic is reported once, by must_not_panic
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let res = catch_unwind(AssertUnwindSafe(|| {
        while start.elapsed() < limit {
            body(&mut r);
            n += 1;
        }
    }));
    std::panic::set_hook(hook);
    if let Err(e) = res {
        std::panic::resume_unwind(e);
    }
    eprintln!(
        "fuzz {name}: {n} inputs in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(n > 0, "fuzz target {name} ran no input");
}

// ---------------------------------------------------------------------
// the command and script language

const COMMANDS: &[&str] = &[
    "break hot",
    "break hot if x > 3",
    "break inline.c:42",
    "break *0x401000",
    "break exec_simple_query if strlen(query_string) > 10",
    "tbreak main",
    "delete 1",
    "delete",
    "disable 2",
    "enable 1",
    "condition 1 g_counter == 2",
    "ignore 1 5",
    "commands",
    "commands 1",
    "commands 99999999999999999999",
    "silent",
    "end",
    "continue",
    "continue 3",
    "next",
    "step",
    "finish",
    "backtrace",
    "bt 5",
    "bt full",
    "frame 1",
    "up",
    "down 2",
    "print g_ptr->in.d",
    "print/x g_outer.arr[2]",
    "p (long) g_ptr->in.a",
    "print sizeof(struct outer)",
    "print *g_ptr",
    "print $1",
    "print $rip",
    "printf \"%d %s\\n\", g_ptr->tag, g_ptr->label",
    "printf \"%5.2f|%-8x|%%\\n\", g_ptr->in.d, 255",
    "echo hello\\n",
    "output g_counter",
    "x/8xb g_ptr",
    "x/4dw &g_outer",
    "x/s g_ptr->label",
    "info breakpoints",
    "info locals",
    "info args",
    "info registers",
    "info address hot",
    "info frame",
    "info symbol 0x401000",
    "ptype struct outer",
    "whatis g_ptr",
    "list hot",
    "set var g_counter = 3",
    "trace hot",
    "count hot --by-phase",
    "waits trace",
    "plancache",
    "plan --next",
    "call pg_sleep(0.01)",
    "detach",
    "quit",
    "help",
    "help break",
    "# a comment",
    "",
];

const WORDS: &[&str] = &[
    "break",
    "tbreak",
    "if",
    "commands",
    "end",
    "silent",
    "print",
    "printf",
    "print/x",
    "p/d",
    "x/",
    "info",
    "bt",
    "frame",
    "delete",
    "continue",
    "finish",
    "trace",
    "count",
    "--by-phase",
    "--for",
    "--next",
    "waits",
    "plan",
    "call",
    "detach",
    "*",
    "&",
    "->",
    ".",
    "[",
    "]",
    "(",
    ")",
    ",",
    "\"",
    "%s",
    "%d",
    "%*d",
    "%.99999999999f",
    "%lld",
    "%n",
    "${X}",
    "${",
    "#",
    "/",
    ":",
    "-",
    "0x",
    "g_ptr",
    "g_outer",
    "hot",
    "struct",
    "sizeof",
    "(char *)",
    "==",
    "&&",
    "?",
    ":",
];

fn gen_command(r: &mut Rng) -> String {
    let mut s = r.pick(COMMANDS).to_string();
    if r.chance(2) {
        s = mutate_text(r, &s, WORDS);
    }
    if r.chance(4) {
        // glue a few words on
        for _ in 0..r.below(6) {
            s.push(' ');
            s.push_str(r.word(WORDS));
        }
    }
    s
}

#[test]
fn fuzz_command_parse() {
    run_target("command_parse", 4.0, |r| {
        let line = gen_command(r);
        must_not_panic("command_parse", &line, || {
            let _ = pgdbg::command::parse(&line);
        });
    });
}

fn gen_script(r: &mut Rng) -> String {
    let mut lines = Vec::new();
    for _ in 0..1 + r.below(12) {
        if r.chance(5) {
            lines.push("commands".to_string());
            for _ in 0..r.below(4) {
                lines.push(gen_command(r));
            }
            if !r.chance(5) {
                lines.push("end".to_string());
            }
        } else {
            lines.push(gen_command(r));
        }
    }
    let mut text = lines.join("\n");
    if r.chance(3) {
        text = mutate_text(r, &text, WORDS);
    }
    text
}

fn defines(r: &mut Rng) -> Vec<(String, String)> {
    let names = ["X", "PID", "", "${X}", "A}", "é"];
    let values = ["1", "hot", "${X}", "", "}", "\n", "break hot"];
    (0..r.below(4))
        .map(|_| (r.pick(&names).to_string(), r.pick(&values).to_string()))
        .collect()
}

#[test]
fn fuzz_script_assemble_and_define() {
    run_target("script", 4.0, |r| {
        let text = gen_script(r);
        let defs = defines(r);
        must_not_panic("script", &format!("{text:?} with {defs:?}"), || {
            if let Ok(t) = pgdbg::script::substitute("s.gdb", &text, &defs) {
                let _ = pgdbg::script::assemble("s.gdb", &t);
            }
            let _ = pgdbg::script::assemble("s.gdb", &text);
        });
    });
}

// ---------------------------------------------------------------------
// C expressions and printf formats

const EXPR_ATOMS: &[&str] = &[
    "g_ptr",
    "g_outer",
    "g_inner",
    "g_counter",
    "g_stop",
    "g_ptr->in.d",
    "g_ptr->pin->name",
    "g_outer.arr",
    "g_ptr->label",
    "g_ptr->flags",
    "1",
    "0",
    "-1",
    "2.5",
    "1e308",
    "0xffffffffffffffff",
    "18446744073709551615",
    "9223372036854775807",
    "'a'",
    "'\\0'",
    "\"str\"",
    "$1",
    "$",
    "$$2",
    "$rip",
    "$rsp",
    "hot",
    "main",
    "nosuch",
];
const EXPR_UNARY: &[&str] = &[
    "-",
    "!",
    "~",
    "*",
    "&",
    "sizeof ",
    "(long)",
    "(char *)",
    "(struct outer *)",
    "(unsigned char)",
    "(double)",
    "(NoSuchType)",
];
const EXPR_BINARY: &[&str] = &[
    "+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "&&", "||", "==", "!=", "<", ">", "<=",
    ">=", "=",
];

fn gen_expr(r: &mut Rng, depth: usize) -> String {
    if depth == 0 || r.chance(3) {
        return r.pick(EXPR_ATOMS).to_string();
    }
    match r.below(7) {
        0 => format!("{}{}", r.pick(EXPR_UNARY), gen_expr(r, depth - 1)),
        1 => format!(
            "{} {} {}",
            gen_expr(r, depth - 1),
            r.pick(EXPR_BINARY),
            gen_expr(r, depth - 1)
        ),
        2 => format!("({})", gen_expr(r, depth - 1)),
        3 => format!("{}[{}]", gen_expr(r, depth - 1), gen_expr(r, depth - 1)),
        4 => format!(
            "{}{}{}",
            gen_expr(r, depth - 1),
            r.pick(&["->", "."]),
            r.pick(&["in", "d", "a", "name", "pin", "arr", "tag", "nosuch"])
        ),
        5 => format!(
            "{} ? {} : {}",
            gen_expr(r, depth - 1),
            gen_expr(r, depth - 1),
            gen_expr(r, depth - 1)
        ),
        _ => format!(
            "sizeof({})",
            r.pick(&["struct outer", "int", "long", "struct inner *", "char[3]"])
        ),
    }
}

fn gen_format(r: &mut Rng) -> String {
    let mut f = String::new();
    for _ in 0..r.below(6) {
        match r.below(4) {
            0 => {
                f.push_str(r.word(&["x=", " ", "\\n", "\\t", "\\\\", "\\\"", "\\x41", "\\0", "é"]))
            }
            _ => {
                f.push('%');
                for _ in 0..r.below(3) {
                    f.push(*r.pick(&['-', '+', ' ', '#', '0']));
                }
                if r.chance(2) {
                    f.push_str(r.word(&["5", "0", "99999999999", "18446744073709551616", "*"]));
                }
                if r.chance(3) {
                    f.push('.');
                    f.push_str(r.word(&["2", "", "4294967296", "1000000"]));
                }
                if r.chance(3) {
                    f.push_str(r.word(&["l", "ll", "h", "hh", "z", "L"]));
                }
                f.push(*r.pick(&[
                    'd', 'i', 'u', 'x', 'X', 'o', 'f', 'g', 'e', 's', 'c', 'p', '%', 'n', 'q',
                ]));
            }
        }
    }
    if r.chance(3) {
        f = mutate_text(r, &f, &["%", "%%", "\\", "*", "99999999999999"]);
    }
    f
}

/// An evaluation environment over a fixture's DWARF: its globals, with
/// memory that reads as pseudo-random bytes (pointers to anywhere, huge
/// lengths, no NUL) except a low page that faults.
struct FuzzEnv<'a> {
    di: &'a pgdbg::debuginfo::DebugInfo,
    salt: u64,
}

mod env_impl {
    use super::FuzzEnv;
    use anyhow::{Result, bail};
    use pgdbg::debuginfo::types::{Type, TypeRef, TypeSource};

    use pgdbg::expr::eval::{EvalEnv, ValLoc, Value};
    use std::rc::Rc;

    impl TypeSource for FuzzEnv<'_> {
        fn resolve(&self, t: &TypeRef) -> Rc<Type> {
            self.di.resolve(t)
        }
        fn type_by_name(&self, name: &str) -> Option<TypeRef> {
            self.di.type_by_name(name)
        }
    }

    impl EvalEnv for FuzzEnv<'_> {
        fn variable(&self, name: &str) -> Result<Option<Value>> {
            Ok(self.di.global(name).and_then(|(addr, ty)| {
                ty.map(|ty| Value {
                    ty,
                    loc: ValLoc::Memory(addr),
                })
            }))
        }
        fn function_address(&self, name: &str) -> Option<u64> {
            (name == "hot" || name == "main").then_some(0x401000)
        }
        fn register(&self, name: &str) -> Option<u64> {
            (name == "rip" || name == "rsp").then_some(self.salt)
        }
        fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
            if addr < 4096 || addr.checked_add(buf.len() as u64).is_none() {
                bail!("Cannot access memory at address {addr:#x}");
            }
            for (i, b) in buf.iter_mut().enumerate() {
                let x =
                    (addr.wrapping_add(i as u64) ^ self.salt).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                *b = (x >> 56) as u8;
            }
            Ok(())
        }
        fn history(&self, _n: Option<usize>) -> Option<Value> {
            None
        }
        fn symbol_for(&self, _addr: u64) -> Option<String> {
            None
        }
    }
}

fn fixture_debuginfo() -> pgdbg::debuginfo::DebugInfo {
    let bin = c_fixture("inline");
    // SAFETY (test setup): the index cache of this process only
    let cache = std::env::temp_dir().join(format!("pgdbg-fuzz-idx-{}", std::process::id()));
    unsafe { std::env::set_var("PGDBG_INDEX_CACHE", &cache) };
    pgdbg::debuginfo::DebugInfo::load(
        &bin,
        &bin,
        None,
        None,
        &pgdbg::postgres::packs::Packs,
        pgdbg::debuginfo::debuginfod::Fetch::Off,
    )
    .expect("loading the fixture's debug info")
}

#[test]
fn fuzz_expressions_parse_check_eval() {
    let di = fixture_debuginfo();
    let (mut parsed, mut evaluated) = (0u64, 0u64);
    run_target("expr", 6.0, |r| {
        let d = 1 + r.below(5);
        let mut e = gen_expr(r, d);
        if r.chance(3) {
            e = mutate_text(r, &e, EXPR_BINARY);
        }
        let salt = r.next();
        must_not_panic("expr", &e, || {
            let Ok(ast) = pgdbg::expr::parse::parse_in(&e, &di) else {
                return;
            };
            parsed += 1;
            // the type check of scripts (`print E` checked before attaching)
            let _ = pgdbg::command::parse(&format!("print {e}"));
            let env = FuzzEnv { di: &di, salt };
            if let Ok(v) = pgdbg::expr::eval::eval(&env, &ast) {
                evaluated += 1;
                let _ = pgdbg::expr::format::format_value(&env, &v, Radix::Natural);
                let _ = pgdbg::expr::format::to_json(&env, &v);
            }
        });
    });
    eprintln!("fuzz expr: {parsed} parsed, {evaluated} evaluated");
    assert!(
        evaluated > 0,
        "no generated expression evaluated: the generator is broken"
    );
}

#[test]
fn fuzz_printf_formats() {
    let di = fixture_debuginfo();
    run_target("printf", 4.0, |r| {
        let f = gen_format(r);
        let args: Vec<String> = (0..r.below(4)).map(|_| gen_expr(r, 2)).collect();
        let salt = r.next();
        let input = format!("printf \"{f}\", {}", args.join(", "));
        must_not_panic("printf", &input, || {
            let _ = pgdbg::expr::printf::conversions(&f);
            let _ = pgdbg::command::parse(&input);
            let env = FuzzEnv { di: &di, salt };
            let values: Vec<_> = args
                .iter()
                .filter_map(|a| pgdbg::expr::parse::parse_in(a, &di).ok())
                .filter_map(|ast| pgdbg::expr::eval::eval(&env, &ast).ok())
                .collect();
            let _ = pgdbg::expr::printf::printf(&env, &f, &values);
        });
    });
}

#[test]
fn fuzz_script_check_against_dwarf() {
    let di = fixture_debuginfo();
    run_target("script_check", 4.0, |r| {
        let text = gen_script(r);
        must_not_panic("script_check", &text, || {
            let _ = pgdbg::script::check("s.gdb", &text, &di);
        });
    });
}

// ---------------------------------------------------------------------
// layout packs

#[test]
fn fuzz_layout_packs() {
    let text = std::fs::read_to_string(repo().join("symbols/pg15.json")).unwrap();
    let pack = pgdbg::debuginfo::pack::Pack::parse(&text, "pg15.json", &[]).unwrap();
    let names: Vec<String> = pack.structs.keys().cloned().collect();
    let stripped = stripped_fixture();
    let dict: Vec<&str> = [
        "\"kind\":\"pointer\"",
        "\"kind\":\"named\"",
        "\"kind\":\"array\"",
        "\"size\":",
        "\"offset\":",
        "\"count\":",
        "{\"kind\":\"void\"}",
        "\"format\":1",
        "\"format\":2",
    ]
    .to_vec();
    run_target("pack", 5.0, |r| {
        // a slice of the big pack keeps each input small enough to mutate much
        let start = r.below(text.len());
        let mut t = if r.chance(4) {
            text.clone()
        } else {
            let mut s = start;
            while !text.is_char_boundary(s) {
                s -= 1;
            }
            let mut e = (s + 1 + r.below(4000)).min(text.len());
            while !text.is_char_boundary(e) {
                e -= 1;
            }
            format!("{{\"format\":1,{}", &text[s..e])
        };
        for _ in 0..1 + r.below(3) {
            t = mutate_text(r, &t, &dict);
        }
        let short = if t.len() > 300 {
            &t[..t.floor_char_boundary(300)]
        } else {
            &t
        };
        let req: Vec<&str> = names.iter().take(r.below(3)).map(|s| s.as_str()).collect();
        must_not_panic("pack", short, || {
            let Ok(p) = pgdbg::debuginfo::pack::Pack::parse(&t, "fuzz.json", &req) else {
                return;
            };
            let structs: Vec<String> = p.structs.keys().take(40).cloned().collect();
            let globals: Vec<String> = p.globals.keys().take(10).cloned().collect();
            let _ = p.to_json();
            // the pack as the types of a stripped binary
            let Ok(di) = pgdbg::debuginfo::DebugInfo::load(
                &stripped,
                &stripped,
                None,
                None,
                &OnePack(p),
                pgdbg::debuginfo::debuginfod::Fetch::Off,
            ) else {
                return;
            };
            let env = FuzzEnv {
                di: &di,
                salt: 0x7f00_0000_1000,
            };
            for n in structs.iter().chain(&globals) {
                for name in [n.clone(), format!("struct {n}")] {
                    if let Some(tr) = di.type_by_name(&name) {
                        let _ = pgdbg::debuginfo::types::size_of(&di, &tr);
                        let v = pgdbg::expr::eval::Value {
                            ty: tr,
                            loc: pgdbg::expr::eval::ValLoc::Memory(0x7f00_0000_1000),
                        };
                        let _ = pgdbg::expr::format::format_value(&env, &v, Radix::Natural);
                    }
                }
                if let Ok(ast) =
                    pgdbg::expr::parse::parse_in(&format!("*(struct {n} *) 0x10000"), &di)
                {
                    let _ = pgdbg::expr::eval::eval(&env, &ast);
                }
            }
        });
    });
}

/// A pack source that hands out one pack (the fuzzed one).
struct OnePack(pgdbg::debuginfo::pack::Pack);

impl pgdbg::debuginfo::pack::PackSource for OnePack {
    fn pack_for(
        &self,
        _binary: &pgdbg::debuginfo::elf::ElfImage,
        _real_path: &Path,
        _build_id: &str,
        _file: Option<&Path>,
    ) -> anyhow::Result<pgdbg::debuginfo::pack::Pack> {
        Ok(self.0.clone())
    }
}

/// The fixture without its DWARF (`strip --strip-debug`): loads with a pack.
fn stripped_fixture() -> PathBuf {
    let out = std::env::temp_dir().join(format!("pgdbg-fuzz-stripped-{}", std::process::id()));
    if !out.exists() {
        let st = Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&out)
            .arg(c_fixture("inline"))
            .status()
            .expect("strip");
        assert!(st.success(), "stripping the fixture failed");
    }
    out
}

// ---------------------------------------------------------------------
// captures for `pgdbg report`

fn capture_text() -> String {
    std::fs::read_to_string(repo().join("tests/data/report/capture.jsonl")).unwrap()
}

const CAPTURE_DICT: &[&str] = &[
    "\"ts\":",
    "\"pid\":",
    "\"event\":",
    "\"ms\":",
    "\"cost\":",
    "\"stack\":",
    "\"wait\":",
    "null",
    "[1,2]",
    "{\"a\":1}",
    "1e400",
    "-0",
    "\n",
    "\"event\":\"wait\"",
    "\"event\":\"plan\"",
    "\"event\":\"stmt\"",
    "\"event\":\"exit\"",
];

/// Replace the value of a random key of a random line by a wrong-typed or
/// extreme one (structure-aware: the lines stay JSON).
fn mutate_capture_json(r: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for _ in 0..1 + r.below(3) {
        let i = r.below(lines.len());
        let Ok(serde_json::Value::Object(mut o)) = serde_json::from_str(&lines[i]) else {
            continue;
        };
        let keys: Vec<String> = o.keys().cloned().collect();
        let k = r.pick(&keys).clone();
        let v: serde_json::Value = match r.below(10) {
            0 => serde_json::json!(null),
            1 => serde_json::json!(u64::MAX),
            2 => serde_json::json!(i64::MIN),
            3 => serde_json::json!(f64::MAX),
            4 => serde_json::json!(-1.0e300),
            5 => serde_json::json!("NaN"),
            6 => serde_json::json!([1, "x", null]),
            7 => serde_json::json!({"x": [[]]}),
            8 => serde_json::json!(-1),
            _ => serde_json::json!(""),
        };
        if r.chance(6) {
            o.remove(&k);
        } else {
            o.insert(k, v);
        }
        lines[i] = serde_json::Value::Object(o).to_string();
    }
    lines.join("\n") + "\n"
}

fn gen_capture(r: &mut Rng, base: &str) -> String {
    let mut t = if r.chance(2) {
        mutate_capture_json(r, base)
    } else {
        base.to_string()
    };
    if r.chance(2) {
        t = mutate_text(r, &t, CAPTURE_DICT);
    }
    t
}

#[test]
fn fuzz_report_in_process() {
    let base = capture_text();
    run_target("report", 5.0, |r| {
        let t = gen_capture(r, &base);
        must_not_panic("report", &t, || {
            let Ok(events) = pgdbg::report::parse_capture("c.jsonl", &t) else {
                return;
            };
            let rep = pgdbg::report::build("c.jsonl", &events);
            let _ = pgdbg::report::render_text(&rep);
            let _ = pgdbg::report::json_report("c.jsonl", &events);
            for kind in [None, Some(pgdbg::report::flame::StackKind::Trace)] {
                let _ = pgdbg::report::flame::fold("c.jsonl", &events, kind);
            }
        });
    });
}

// ---------------------------------------------------------------------
// whole-program targets: the pgdbg binary as a child

/// Run pgdbg with `args` under a time limit; an error is exactly one line
/// on stderr, never a panic (exit 101) or a hang.
fn run_child(target: &str, args: &[&str], input_note: &str, limit: Duration) -> (i32, String) {
    let idx = std::env::temp_dir().join(format!("pgdbg-fuzz-idx-child-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&idx);
    let mut child = Command::new(pgdbg_bin())
        .args(args)
        .env("PGDBG_INDEX_CACHE", &idx)
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pgdbg");
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "fuzz target {target}: pgdbg {args:?} still running after {limit:?} on {input_note}"
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let code = status.code().unwrap_or(-1);
    assert!(
        status.code().is_some(),
        "fuzz target {target}: pgdbg killed by {status} on {input_note}: {err}"
    );
    assert!(
        code != 101 && !err.contains("panicked"),
        "fuzz target {target}: pgdbg panicked on {input_note}: {err}"
    );
    if code != 0 {
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        // an incomplete last line is a warning line before the error
        let errors: Vec<&&str> = lines.iter().filter(|l| !l.contains("incomplete")).collect();
        assert!(
            errors.len() == 1 && errors[0].starts_with("pgdbg"),
            "fuzz target {target}: not one error line on {input_note}: {err:?}"
        );
    }
    (code, err)
}

fn keep(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pgdbg-fuzz-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn fuzz_report_command() {
    let base = capture_text();
    let dir = scratch("report");
    let mut r = Rng::new(7);
    let limit = budget(4.0);
    let start = Instant::now();
    let mut n = 0;
    let mut failed_inputs = 0;
    while start.elapsed() < limit || n < 10 {
        let t = gen_capture(&mut r, &base);
        let p = keep(&dir, "c.jsonl", t.as_bytes());
        let ps = p.to_str().unwrap();
        let mode: &[&str] = match r.below(4) {
            0 => &["--json"],
            1 => &["--folded"],
            _ => &[],
        };
        let mut args = vec!["report", ps];
        args.extend_from_slice(mode);
        let note = format!("capture {:?}", &t[..t.floor_char_boundary(2000)]);
        let (code, _) = run_child("report_command", &args, &note, Duration::from_secs(20));
        failed_inputs += (code != 0) as usize;
        n += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "fuzz report_command: {n} runs ({failed_inputs} refused with one line) in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// The file offsets of an ELF's section headers' interesting parts and
/// of the DWARF and CFI sections, for structure-aware mutations.
fn elf_regions(data: &[u8]) -> Vec<(usize, usize)> {
    use object::{Object, ObjectSection};
    let mut out = vec![(0, 64)];
    let file = object::File::parse(data).unwrap();
    for s in file.sections() {
        let name = s.name().unwrap_or("");
        let wanted = name.starts_with(".debug_")
            || name.starts_with(".eh_frame")
            || name == ".dynsym"
            || name == ".note.gnu.build-id"
            || name == ".gnu_debuglink";
        if wanted && let Some((off, len)) = s.file_range() {
            out.push((off as usize, len as usize));
        }
    }
    // section and program headers
    let shoff = u64::from_le_bytes(data[0x28..0x30].try_into().unwrap()) as usize;
    let shnum = u16::from_le_bytes(data[0x3c..0x3e].try_into().unwrap()) as usize;
    out.push((shoff, shnum * 64));
    let phoff = u64::from_le_bytes(data[0x20..0x28].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(data[0x38..0x3a].try_into().unwrap()) as usize;
    out.push((phoff, phnum * 56));
    out.retain(|&(o, l)| l > 0 && o + l <= data.len());
    out
}

fn mutate_elf(r: &mut Rng, data: &mut [u8], regions: &[(usize, usize)]) {
    let m = if r.chance(4) { 64 } else { 8 };
    for _ in 0..1 + r.below(m) {
        let (off, len) = *r.pick(regions);
        let i = off + r.below(len);
        match r.below(4) {
            0 => data[i] ^= 1 << r.below(8),
            1 => data[i] = r.next() as u8,
            2 => {
                // an extreme little-endian word
                let w: u64 = *r.pick(&[0, u64::MAX, u32::MAX as u64, 0x8000_0000, 1 << 40]);
                let end = (i + 8).min(data.len());
                data[i..end].copy_from_slice(&w.to_le_bytes()[..end - i]);
            }
            _ => data[i] = 0,
        }
    }
}

#[test]
fn fuzz_elf_dwarf_of_the_fixture() {
    let orig = std::fs::read(c_fixture("inline")).unwrap();
    let regions = elf_regions(&orig);
    let dir = scratch("elf");
    let mut r = Rng::new(11);
    let limit = budget(6.0);
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < limit || n < 10 {
        let mut data = orig.clone();
        mutate_elf(&mut r, &mut data, &regions);
        if r.chance(10) {
            data.truncate(r.below(data.len()));
        }
        let p = keep(&dir, "inline-mutated", &data);
        let (code, _) = run_child(
            "elf_fixture",
            &["symbols", "extract", p.to_str().unwrap(), "-o", "/dev/null"],
            &format!("mutated fixture {} (seed {n})", p.display()),
            Duration::from_secs(20),
        );
        // the fixture is no postgres: the pack cannot be complete
        assert_ne!(code, 0);
        n += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "fuzz elf_fixture: {n} mutated binaries in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn fuzz_elf_dwarf_of_postgres() {
    // only an existing build (scripts/test sets PGDBG_PG15): never build one here
    let bin =
        PathBuf::from(std::env::var_os("PGDBG_PG15").unwrap_or_default()).join("bin/postgres");
    let Ok(orig) = std::fs::read(&bin) else {
        eprintln!(
            "fuzz elf_postgres: skipped, no {} (set PGDBG_PG15)",
            bin.display()
        );
        return;
    };
    let regions = elf_regions(&orig);
    let dir = scratch("elfpg");
    let mut r = Rng::new(13);
    let runs = if long_run() { usize::MAX } else { 4 };
    let limit = budget(1.0);
    let start = Instant::now();
    let mut n = 0;
    while n < runs && (n < 4 || start.elapsed() < limit) {
        let mut data = orig.clone();
        mutate_elf(&mut r, &mut data, &regions);
        let p = keep(&dir, "postgres-mutated", &data);
        let (code, err) = run_child(
            "elf_postgres",
            &["symbols", "extract", p.to_str().unwrap(), "-o", "/dev/null"],
            &format!("mutated postgres {} (run {n})", p.display()),
            Duration::from_secs(120),
        );
        eprintln!("fuzz elf_postgres: run {n}: exit {code}: {}", err.trim());
        n += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "fuzz elf_postgres: {n} mutated binaries in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------
// fixed inputs: edge cases, and every input a fuzz run once failed on
// (none so far: add each one here, with the target it failed in)

#[test]
fn regressions_fixed_inputs() {
    let di = fixture_debuginfo();
    let deep = |open: &str, atom: &str, close: &str, n: usize| {
        format!("{}{atom}{}", open.repeat(n), close.repeat(n))
    };
    let exprs = [
        deep("(", "1", ")", 100_000),
        deep("-", "1", "", 100_000),
        deep("*", "g_ptr", "", 100_000),
        deep("(char *)", "0", "", 10_000),
        format!("g_outer.arr[{}]", u64::MAX),
        "g_outer.arr[-9223372036854775808]".into(),
        "sizeof(char[18446744073709551615])".into(),
        "1 / 0".into(),
        "1 % 0".into(),
        "-9223372036854775808 / -1".into(),
        "1 << 64".into(),
        "1e999".into(),
        "'".into(),
        "\"".into(),
        "$".into(),
        "$$99999999999999999999".into(),
        "Ã".into(),
    ];
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for e in &exprs {
        let note: String = e.chars().take(80).collect();
        must_not_panic("expr", &note, || {
            let _ = pgdbg::command::parse(&format!("print {e}"));
            if let Ok(ast) = pgdbg::expr::parse::parse_in(e, &di) {
                let env = FuzzEnv { di: &di, salt: 1 };
                if let Ok(v) = pgdbg::expr::eval::eval(&env, &ast) {
                    let _ = pgdbg::expr::format::format_value(&env, &v, Radix::Natural);
                }
            }
        });
    }
    for f in [
        "%99999999999999999999d",
        "%.18446744073709551616f",
        "%2147483648s",
        "%*d",
        "%",
        "%l",
        "%n",
        "\\",
        "\\x",
        "%-+ #0lld",
    ] {
        must_not_panic("printf", f, || {
            let _ = pgdbg::expr::printf::conversions(f);
            let _ = pgdbg::command::parse(&format!("printf \"{f}\", 1, g_ptr"));
            let env = FuzzEnv { di: &di, salt: 1 };
            let v = pgdbg::expr::parse::parse_in("g_counter", &di)
                .and_then(|a| pgdbg::expr::eval::eval(&env, &a))
                .unwrap();
            let _ = pgdbg::expr::printf::printf(&env, f, &[v.clone(), v]);
        });
    }
    for (text, defs) in [
        ("${", vec![]),
        ("${}", vec![(String::new(), "x".to_string())]),
        ("${X}${X}", vec![("X".into(), "${X}".into())]),
        ("commands\ncommands\nend", vec![]),
        ("end\n", vec![]),
        ("commands 18446744073709551616\nend", vec![]),
    ] {
        must_not_panic("script", text, || {
            if let Ok(t) = pgdbg::script::substitute("s", text, &defs) {
                let _ = pgdbg::script::check("s", &t, &di);
            }
        });
    }
    std::panic::set_hook(hook);
    // captures: the whole program
    let dir = scratch("regress");
    for (name, t) in [
        (
            "huge",
            "{\"event\":\"attach\",\"ts\":1e308,\"pid\":18446744073709551615}\n".to_string(),
        ),
        (
            "negative",
            "{\"event\":\"wait\",\"ts\":-1e308,\"pid\":-1,\"us\":-5}\n".into(),
        ),
        ("types", "{\"event\":[],\"ts\":\"1\",\"pid\":null}\n".into()),
        ("truncated", capture_text()[..1000].to_string()),
        ("nul", "\u{0}\n".into()),
    ] {
        let p = keep(&dir, name, t.as_bytes());
        run_child(
            "report_command",
            &["report", p.to_str().unwrap()],
            name,
            Duration::from_secs(20),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
