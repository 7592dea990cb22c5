//! Reading memory and debug info without touching the backend: `x`,
//! `ptype`, `whatis`, `info symbol`, `info line`, `disassemble`.

use super::check::{CheckCtx, run_args};
use super::{Entry, Invocation, Needs};
use crate::postgres::backend::Outcome;
use anyhow::{Result, bail};

pub static ENTRIES: &[&Entry] = &[
    &X,
    &PTYPE,
    &WHATIS,
    &INFO_SYMBOL,
    &INFO_LINE,
    &INFO_FUNCTIONS,
    &INFO_VARIABLES,
    &INFO_TYPES,
    &DISASSEMBLE,
];

pub static X: Entry = Entry {
    name: "x",
    aliases: &[],
    usage: "x[/NFU] [ADDR-EXPR]",
    summary: "examine memory: N units of U at an address, in format F",
    help: "ADDR-EXPR is a C expression: a pointer or an integer is the address; an array, a \
           function or a struct is examined where it lies. N counts units (default 1). F is a \
           format: x hex, d decimal, u unsigned, o octal, t binary, a address with its symbol, \
           c character, f float, s string (one NUL-terminated string per unit), i instructions \
           (=> marks the selected frame's pc). U is a unit: b bytes, h halfwords (2), w words (4), g giants (8).\n\n\
           Each line starts with its address and the symbol around it, as gdb prints it. The \
           format, unit and count are remembered: a bare 'x' goes on after the last unit shown, \
           'x ADDR' uses the last format and unit. Memory is read while the backend runs (no \
           stop) unless ADDR-EXPR names a local or a register.",
    examples: &[
        "x/4xb &MyProcPid",
        "x/2a &MyProc",
        "x/s debug_query_string",
        "x/3i $pc",
        "x",
    ],
    parse: |rest| parse_x(rest).map(|_| Invocation::command(&X, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| match parse_x(run_args("x", cmd)?)?.expr {
        Some(e) => ctx.typecheck(&e),
        None => Ok(()),
    },
    run: Some(|h, rest| {
        let a = parse_x(rest)?;
        let text = h.examine(a.count, a.format, a.unit, a.expr.as_deref())?;
        Ok(Outcome::shows(text))
    }),
};

/// `x/NFU [EXPR]`'s line, parsed: what is not given comes from the last `x`.
#[derive(Debug, PartialEq)]
pub struct ExamineArgs {
    pub count: Option<usize>,
    pub format: Option<char>,
    pub unit: Option<char>,
    pub expr: Option<String>,
}

pub fn parse_x(rest: &str) -> Result<ExamineArgs> {
    {
        let (spec, expr) = match rest.strip_prefix('/') {
            Some(r) => {
                let (f, e) = r.split_at(r.find(char::is_whitespace).unwrap_or(r.len()));
                (f, e.trim())
            }
            None => ("", rest.trim()),
        };
        let (count, format, unit) = crate::expr::examine::parse_spec(spec)?;
        if format == Some('s') && unit.is_some_and(|u| u != 'b') {
            bail!("x/{spec}: strings are of bytes only (x/s or x/sb)");
        }
        Ok(ExamineArgs {
            count,
            format,
            unit,
            expr: (!expr.is_empty()).then(|| expr.to_string()),
        })
    }
}

pub static PTYPE: Entry = Entry {
    name: "ptype",
    aliases: &[],
    usage: "ptype EXPR|TYPE",
    summary: "the C declaration of a type or of an expression's type, struct expanded",
    help: "With a type name (PlannedStmt, struct PGPROC, List *) or an expression (MyProc, \
           *MyProc, standard_ExecutorRun): its type with typedefs resolved down to the base \
           type, a struct, union or enum expanded one level (its members keep their own \
           typedef names), as gdb prints it. Nothing of the backend is read for a type name.",
    examples: &["ptype PlannedStmt", "ptype struct PGPROC", "ptype MyProc"],
    parse: |rest| type_arg(rest, "ptype").map(|_| Invocation::command(&PTYPE, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| check_type_or_expr(ctx, &type_arg(run_args("ptype", cmd)?, "ptype")?),
    run: Some(|h, rest| Ok(Outcome::shows(h.ptype(&type_arg(rest, "ptype")?)?))),
};

pub static WHATIS: Entry = Entry {
    name: "whatis",
    aliases: &[],
    usage: "whatis EXPR|TYPE",
    summary: "the type of an expression as declared (a type name: one typedef unrolled)",
    help: "With an expression: its type as written in the source (whatis MyProc is PGPROC *). \
           With a type name: one level of typedef unrolled (whatis PlannedStmt is struct \
           PlannedStmt); ptype goes all the way and expands structs.",
    examples: &["whatis MyProc", "whatis PlannedStmt"],
    parse: |rest| type_arg(rest, "whatis").map(|_| Invocation::command(&WHATIS, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| check_type_or_expr(ctx, &type_arg(run_args("whatis", cmd)?, "whatis")?),
    run: Some(|h, rest| Ok(Outcome::shows(h.whatis(&type_arg(rest, "whatis")?)?))),
};

pub static INFO_SYMBOL: Entry = Entry {
    name: "info symbol",
    aliases: &[],
    usage: "info symbol ADDR-EXPR",
    summary: "the symbol and section an address is in (symbol + offset in section .text)",
    help: "ADDR-EXPR is a C expression giving an address (&standard_ExecutorRun, $pc, a \
           pointer, 0x55d0c0a0). Prints 'SYMBOL + OFFSET in section NAME', with 'of LIBRARY' for \
           an address in a shared library, or that no symbol matches.",
    examples: &["info symbol &standard_ExecutorRun", "info symbol MyProc"],
    parse: |rest| {
        if rest.trim().is_empty() {
            bail!("info symbol needs an address, e.g. info symbol &standard_ExecutorRun");
        }
        Ok(Invocation::command(&INFO_SYMBOL, rest.trim()))
    },
    needs: Needs::Memory,
    check: |ctx, cmd| ctx.typecheck(run_args("info symbol", cmd)?),
    run: Some(|h, e| Ok(Outcome::shows(h.info_symbol(e)?))),
};

pub static INFO_LINE: Entry = Entry {
    name: "info line",
    aliases: &[],
    usage: "info line FUNCTION|FILE:LINE",
    summary: "the code addresses of a source line (where a function's first line starts)",
    help: "Prints 'Line N of \"FILE\" starts at address A <f+o> and ends at B <f+p>.' from the \
           line table: for FUNCTION the line of its entry, for FILE:LINE that line (or, when it \
           has no code, the address it would be at). Reads the debug info only.",
    examples: &["info line standard_ExecutorRun", "info line execMain.c:330"],
    parse: |rest| {
        let r = rest.trim();
        if r.is_empty() {
            bail!("info line needs FUNCTION or FILE:LINE, e.g. info line standard_ExecutorRun");
        }
        Ok(Invocation::command(&INFO_LINE, r))
    },
    needs: Needs::Nothing,
    check: |ctx, cmd| ctx.location(run_args("info line", cmd)?),
    run: Some(|h, spec| Ok(Outcome::shows(h.info_line(spec)?))),
};

pub static DISASSEMBLE: Entry = Entry {
    name: "disassemble",
    aliases: &[],
    usage: "disassemble [/r] [/s] [FUNCTION|ADDR-EXPR | START,END | START,+LENGTH]",
    summary: "machine code as gdb dumps it: a function or an address range (AT&T syntax)",
    help: "Without an argument: the function of the selected frame's pc (the backend is stopped \
           for it). With an expression (GetCachedPlan, $pc, 0x55d0c0a0): the whole function \
           around that address, each of its parts under 'Address range A to B:' when gcc split \
           it (a .cold part). With START,END or START,+LENGTH: the instructions from START up to \
           END, each named <function+offset>. Lines are 'ADDRESS <+OFFSET>:' and the \
           instruction in AT&T syntax as gdb prints it, '=> ' marking the pc of the selected \
           frame when the backend is stopped there.\n\n\
           /r adds each instruction's bytes, /s the source lines from the line table (the file \
           from the unit's compilation directory). The code is read as the program has it: \
           where pgdbg placed a breakpoint or the plan-cache recorder's jump, the bytes they \
           replaced. Memory is read while the backend runs (no stop) unless the argument is \
           missing or names a local or a register.",
    examples: &[
        "disassemble GetCachedPlan",
        "disassemble /r ExecScan",
        "disassemble /s GetCachedPlan",
        "disassemble &standard_ExecutorRun,+32",
        "disassemble",
    ],
    parse: |rest| parse_disassemble(rest).map(|_| Invocation::command(&DISASSEMBLE, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| match &parse_disassemble(run_args("disassemble", cmd)?)?.2 {
        None => Ok(()),
        Some(s) => match crate::expr::disasm::split_range(s) {
            Some((a, b, _)) => {
                if a.is_empty() || b.is_empty() {
                    bail!("disassemble {s}: give START,END or START,+LENGTH");
                }
                ctx.typecheck(a)?;
                ctx.typecheck(b)
            }
            None => ctx.typecheck(s),
        },
    },
    run: Some(|h, rest| {
        let (raw, source, spec) = parse_disassemble(rest)?;
        Ok(Outcome::shows(h.disassemble(
            raw,
            source,
            spec.as_deref(),
        )?))
    }),
};

/// What `info functions|variables` lists.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SymbolKind {
    Functions,
    Variables,
}

/// A regular expression of `info functions|variables`, compiled (the
/// check before attaching and the command use the same).
pub fn symbol_regex(r: &str) -> Result<regex::Regex> {
    regex::Regex::new(r).map_err(|e| {
        let why = e.to_string();
        let last = why.lines().last().unwrap_or("").trim().to_string();
        anyhow::anyhow!("invalid regular expression \"{r}\": {last}")
    })
}

/// `info functions|variables [REGEX]`: the regular expression (None:
/// all), checked.
pub fn symbols_regex_arg(rest: &str) -> Result<Option<String>> {
    let r = rest.trim();
    if !r.is_empty() {
        symbol_regex(r)?;
    }
    Ok((!r.is_empty()).then(|| r.to_string()))
}

pub static INFO_FUNCTIONS: Entry = Entry {
    name: "info functions",
    aliases: &[],
    usage: "info functions [REGEX]",
    summary: "functions matching REGEX, by file, then symbols without debug info",
    help: "Lists, as gdb does, under 'File NAME:' each function defined there whose name \
           matches the regular expression (all of them without one) as 'LINE:<TAB>declaration;' \
           ('static' for a function of one file), then under 'Non-debugging symbols:' the \
           matching ELF function symbols no debug info describes (gcc's .cold and .isra parts, \
           PLT entries) with their addresses. Reads the debug info only.",
    examples: &["info functions ^GetCachedPlan$", "info functions ^ExecScan"],
    parse: |rest| symbols_regex_arg(rest).map(|_| Invocation::command(&INFO_FUNCTIONS, rest)),
    needs: Needs::Nothing,
    check: |_, cmd| run_args("info functions", cmd).map(|_| ()),
    run: Some(|h, rest| {
        let regex = symbols_regex_arg(rest)?;
        Ok(Outcome::shows(
            h.info_symbols(SymbolKind::Functions, regex.as_deref())?,
        ))
    }),
};

pub static INFO_VARIABLES: Entry = Entry {
    name: "info variables",
    aliases: &[],
    usage: "info variables [REGEX]",
    summary: "global and static variables matching REGEX, by file, then plain symbols",
    help: "Lists, as gdb does, under 'File NAME:' each global or file-level static variable \
           defined there whose name matches the regular expression (all without one) as \
           'LINE:<TAB>declaration;', then under 'Non-debugging symbols:' the matching ELF data \
           symbols no debug info describes. Reads the debug info only.",
    examples: &["info variables ^MyProcPid$", "info variables ^debug_query"],
    parse: |rest| symbols_regex_arg(rest).map(|_| Invocation::command(&INFO_VARIABLES, rest)),
    needs: Needs::Nothing,
    check: |_, cmd| run_args("info variables", cmd).map(|_| ()),
    run: Some(|h, rest| {
        let regex = symbols_regex_arg(rest)?;
        Ok(Outcome::shows(
            h.info_symbols(SymbolKind::Variables, regex.as_deref())?,
        ))
    }),
};

pub static INFO_TYPES: Entry = Entry {
    name: "info types",
    aliases: &[],
    usage: "info types [REGEX]",
    summary: "types (structs, unions, enums, typedefs) matching REGEX, by file",
    help: "Lists, as gdb does, under 'File NAME:' each type defined there whose name matches \
           the regular expression (all of them without one), by name, as 'LINE:<TAB>struct \
           Plan;' or 'LINE:<TAB>typedef struct nameData NameData;' (a base type without a line). \
           A struct and a typedef of one name in one file are listed once (the one declared \
           first). Each type is under the file that declares it (gdb 13 also repeats a few \
           under some units' own files). The types of the server's binary and of the libraries \
           it has mapped (a dwz-compressed one's supplementary file included). Reads the debug \
           info only.",
    examples: &["info types ^Plan$", "info types Bitmapset"],
    parse: |rest| symbols_regex_arg(rest).map(|_| Invocation::command(&INFO_TYPES, rest)),
    needs: Needs::Nothing,
    check: |_, cmd| run_args("info types", cmd).map(|_| ()),
    run: Some(|h, rest| {
        let regex = symbols_regex_arg(rest)?;
        Ok(Outcome::shows(h.info_types(regex.as_deref())?))
    }),
};

/// `[/r] [/s] [SPEC]`: gdb's modifiers, alone (`/r /s`) or together (`/rs`).
/// (`/r`: each instruction's bytes, `/s`: the source lines with the code,
/// the location or range; None: the function of the selected frame's pc).
pub fn parse_disassemble(rest: &str) -> Result<(bool, bool, Option<String>)> {
    let (mut raw, mut source) = (false, false);
    let mut r = rest.trim();
    while let Some(m) = r.strip_prefix('/') {
        let end = m.find(char::is_whitespace).unwrap_or(m.len());
        if end == 0 {
            bail!("disassemble: a modifier follows '/': /r (bytes) or /s (source lines)");
        }
        for c in m[..end].chars() {
            match c {
                'r' => raw = true,
                's' => source = true,
                c => bail!(
                    "disassemble: unknown modifier '/{c}': use /r (bytes) or /s (source lines)"
                ),
            }
        }
        r = m[end..].trim_start();
    }
    Ok((raw, source, (!r.is_empty()).then(|| r.to_string())))
}

fn type_arg(rest: &str, name: &str) -> Result<String> {
    let r = rest.trim();
    if r.is_empty() {
        bail!("{name} needs an expression or a type name, e.g. {name} MyProc");
    }
    Ok(r.to_string())
}

/// A type name (`PlannedStmt`, `struct PGPROC *`): its base name and the
/// number of `*` after it; None when `text` is not written as one.
pub fn type_words(text: &str) -> Option<(&str, usize)> {
    let base = text.trim_end_matches(|c: char| c == '*' || c.is_whitespace());
    let stars = text[base.len()..].matches('*').count();
    let ok = !base.is_empty()
        && base
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ');
    ok.then_some((base, stars))
}

fn check_type_or_expr(ctx: &CheckCtx, text: &str) -> Result<()> {
    if let Some((base, _)) = type_words(text)
        && crate::debuginfo::types::TypeSource::type_by_name(ctx.di, base).is_some()
    {
        return Ok(());
    }
    ctx.typecheck(text)
}
