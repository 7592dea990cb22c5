//! Looking at the stopped backend: `print`, `printf`, `echo`, `call`,
//! `backtrace`, `frame`, `up`, `down`, `info address|locals|args|registers|frame`,
//! `display`, `undisplay`, `info display` (`data/display.rs`).

use super::check::{CheckCtx, no_check, run_args, short};
use super::{Command, Entry, Invocation, Needs, args::num_arg, args::split_args};
use crate::expr::format::Radix;
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};

mod display;
mod frame_function;

pub use display::{DISPLAY, INFO_DISPLAY, UNDISPLAY};

pub static ENTRIES: &[&Entry] = &[
    &PRINT,
    &PRINTF,
    &ECHO,
    &CALL,
    &BACKTRACE,
    &FRAME,
    &FRAME_FUNCTION,
    &UP,
    &DOWN,
    &INFO_ADDRESS,
    &INFO_LOCALS,
    &INFO_ARGS,
    &INFO_REGISTERS,
    &INFO_FRAME,
    &DISPLAY,
    &UNDISPLAY,
    &INFO_DISPLAY,
];

pub static PRINT: Entry = Entry {
    name: "print",
    aliases: &["p", "inspect"],
    usage: "print[/x|/d|/u|/o|/t|/c] EXPR | print DATUM::TYPE",
    summary: "evaluate a C expression at the current stop",
    help: "EXPR is C over the backend's memory and DWARF types: locals and parameters of the \
           selected frame, globals, enumerators (SysCache[RELOID], node->type == T_SeqScan), ->, \
           ., *, &, [i], casts, arithmetic, registers ($rip) and earlier results ($1); printed \
           like gdb. /x prints integers and pointers in hex, /d in \
           decimal, /u unsigned, /o octal, /t binary, /c as characters. EXPR@N is gdb's \
           artificial array: N objects from EXPR's address (p *list->elements@list->length, \
           p arr[0]@4). A pointer to a PostgreSQL node (Node *, Plan *, List *...) is followed \
           by the NodeTag it points to, its dynamic type: (Plan *) 0x55d0c0a0 [T_SeqScan] \
           (pprint shows the tree). A List * adds its length and elements, up to 200 (each \
           node's tag; an IntList's integers, an OidList's OIDs): (List *) 0x55d0c0b8 [T_List] \
           of length 2 = {0x55d0c0c8 [T_TargetEntry], 0x55d0c0f0 [T_TargetEntry]}; a \
           Bitmapset * its members: (Bitmapset *) 0x55d0c1a0 = {8, 9}. An Oid that the \
           backend's relcache holds is followed by its relation's name, read from the relcache: \
           16384 (relation pgbench_accounts); an Oid it does not hold gets no name. A text * \
           (any varlena: bytea *, VarChar *...) is followed by its characters when it is inline \
           and not compressed (else by what it is: compressed, TOAST pointer); a NameData prints \
           as its string.\n\n\
           EXPR::TYPE reads the Datum EXPR is as SQL's TYPE and prints it as SELECT v::text \
           does, from memory only (nothing runs in the backend): int2, int4, int8, bool, float4, \
           float8, oid, name, text, numeric, timestamp, timestamptz, date (and SQL's aliases: \
           integer, bigint, real...). name, text and numeric are pointers to their value (a \
           compressed or TOASTed text is refused, not guessed); dates and timestamps are in \
           DateStyle ISO, a timestamptz in UTC (+00) whatever the session's TimeZone.\n\n\
           In a script, EXPR is type-checked before attaching (inside a commands block, in the \
           breakpoint's function).",
    examples: &[
        "print plansource->generic_cost",
        "p/x MyProc->pid",
        "p MyProc->fpRelId[0]@4",
        "p *activeSearchPath->elements@activeSearchPath->length",
        "p fcinfo->args[0].value::numeric",
        "p slot->tts_values[2]::timestamptz",
        "p estate->es_plannedstmt->relationOids",
    ],
    parse: |rest| parse_print(rest).map(|_| Invocation::command(&PRINT, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| {
        let (_, expr) = parse_print(run_args("print", cmd)?)?;
        ctx.typecheck(crate::postgres::datum::split_cast(&expr)?.0)
    },
    run: Some(|h, rest| {
        let (radix, expr) = parse_print(rest)?;
        Ok(Outcome::shows(h.print(&expr, radix)?))
    }),
};

/// `print[/F] EXPR`: the radix and the expression.
pub fn parse_print(rest: &str) -> Result<(Radix, String)> {
    {
        let (radix, expr) = if let Some(r) = rest.strip_prefix('/') {
            let (f, e) = r.split_at(r.find(char::is_whitespace).unwrap_or(r.len()));
            let radix = match Radix::from_letter(f) {
                Some(r) => r,
                None => bail!(
                    "unknown print format '/{f}': use /x (hex), /d (decimal), /u (unsigned), \
                     /o (octal), /t (binary) or /c (character)",
                    f = crate::shown::shown(f)
                ),
            };
            (radix, e.trim())
        } else {
            (Radix::Natural, rest)
        };
        if expr.is_empty() {
            bail!("print needs an expression, e.g. print plansource->generic_cost");
        }
        if crate::postgres::datum::split_cast(expr)?.1.is_some() && radix != Radix::Natural {
            bail!("print: a format (/x ...) and '::TYPE' do not go together");
        }
        Ok((radix, expr.to_string()))
    }
}

pub static PRINTF: Entry = Entry {
    name: "printf",
    aliases: &[],
    usage: "printf \"FORMAT\", EXPR...",
    summary: "formatted output of expressions, C style: %d %u %ld %x %f %g %s %c %p %%",
    help: "FORMAT takes C's conversions %d %u %ld %x %f %g %s (a char *) %c %p and %%, with \
           flags, widths and precisions, and the escapes \\n \\t \\\" \\\\; there must be one \
           EXPR per conversion.\n\n\
           In a script, each EXPR is type-checked like print's.",
    examples: &[
        "printf \"%s: %d custom plans\\n\", plansource->query_string, \
                 plansource->num_custom_plans",
    ],
    parse: |rest| parse_printf(rest).map(|_| Invocation::command(&PRINTF, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| {
        let (_, args) = parse_printf(run_args("printf", cmd)?)?;
        for a in &args {
            ctx.typecheck(a)
                .map_err(|e| anyhow!("printf argument '{}': {e:#}", short(a)))?;
        }
        Ok(())
    },
    run: Some(|h, rest| {
        let (format, args) = parse_printf(rest)?;
        Ok(Outcome::shows(h.printf(&format, &args)?))
    }),
};

/// `"FORMAT", EXPR, EXPR` -> (FORMAT with escapes resolved, [EXPR...]).
pub fn parse_printf(rest: &str) -> Result<(String, Vec<String>)> {
    let usage = "printf needs a quoted format: printf \"%d rows\\n\", expr";
    let mut chars = rest.trim().chars();
    if chars.next() != Some('"') {
        bail!("{usage}");
    }
    let mut format = String::new();
    let mut closed = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                closed = true;
                break;
            }
            '\\' => match chars.next() {
                Some('n') => format.push('\n'),
                Some('t') => format.push('\t'),
                Some('"') => format.push('"'),
                Some('\\') => format.push('\\'),
                Some(o) => bail!("printf: unknown escape '\\{o}' in the format"),
                None => break,
            },
            c => format.push(c),
        }
    }
    if !closed {
        bail!("printf: the format string is not closed with '\"'");
    }
    let tail = chars.as_str().trim();
    let args = if tail.is_empty() {
        Vec::new()
    } else {
        let Some(t) = tail.strip_prefix(',') else {
            bail!(
                "printf: expected ',' after the format, not '{tail}'",
                tail = crate::shown::shown(tail)
            );
        };
        split_args(t)
    };
    let wanted = printf_conversions(&format)?.len();
    if wanted != args.len() {
        bail!(
            "printf: the format has {wanted} conversion{} but {} argument{} given",
            if wanted == 1 { "" } else { "s" },
            args.len(),
            if args.len() == 1 { " is" } else { "s are" }
        );
    }
    Ok((format, args))
}

/// The conversions of a printf format, e.g. ["d", "x", "s"] (their
/// widths and precisions checked too: at most
/// `printf::MAX_WIDTH`).
pub fn printf_conversions(format: &str) -> Result<Vec<String>> {
    Ok(crate::expr::printf::conversions(format)?
        .into_iter()
        .map(String::from)
        .collect())
}

pub static ECHO: Entry = Entry {
    name: "echo",
    aliases: &[],
    usage: "echo TEXT",
    summary: "print TEXT (for scripts)",
    help: "Prints TEXT as it is; \\n in it is a line break.",
    examples: &["echo plan choices:"],
    parse: |rest| Ok(Invocation::command(&ECHO, rest)),
    needs: Needs::Nothing,
    check: no_check,
    run: Some(|_, rest| Ok(Outcome::shows(rest.replace("\\n", "\n")))),
};

pub static CALL: Entry = Entry {
    name: "call",
    aliases: &[],
    usage: "call FUNC(ARGS)",
    summary: "call a function inside the backend and print what it returns",
    help: "The arguments (integers, pointers, doubles, strings) are checked against the \
           function's prototype from the debug info; an integer given to a double is converted \
           as C would. A call that has not returned after --call-timeout (default 5s) is \
           abandoned.\n\n\
           Refused while the backend's transaction is aborted or half-ended (ROLLBACK first), \
           except for functions harmless there (pgstat_get_wait_event, \
           pgstat_get_wait_event_type, IsTransactionState, ...).",
    examples: &["call pgstat_get_wait_event(0x0100003d)"],
    parse: |rest| {
        if !(rest.contains('(') && rest.ends_with(')')) {
            bail!("call needs FUNC(ARGS), e.g. call pgstat_get_wait_event(0x0100003d)");
        }
        Ok(Invocation::command(&CALL, rest))
    },
    // the prototype is checked when the call is made
    needs: Needs::Stop,
    check: no_check,
    run: Some(|b, text| Ok(Outcome::shows(crate::postgres::commands::call(b, text)?))),
};

pub static BACKTRACE: Entry = Entry {
    name: "backtrace",
    aliases: &["bt", "where"],
    usage: "backtrace [N]",
    summary: "show the call stack (inlined frames included)",
    help: "One line per frame, innermost first: function+offset, arguments and file:line, \
           unwound with the binary's and libc's call frame information; a function inlined into \
           another is a frame of its own. N shows the innermost N frames only; 'backtrace full' \
           is the same as 'backtrace'.",
    examples: &["bt", "backtrace 5"],
    parse: |rest| parse_backtrace(rest).map(|_| Invocation::command(&BACKTRACE, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, rest| Ok(Outcome::shows(h.backtrace(parse_backtrace(rest)?)?))),
};

/// `backtrace [full] [N]`: how many frames (None: all).
pub fn parse_backtrace(rest: &str) -> Result<Option<usize>> {
    num_arg(rest.trim_start_matches("full").trim(), "backtrace")
}

/// `frame`, `up`, `down` or `frame function`: a command that selects
/// another frame (a `commands` block's later expressions are not in the
/// breakpoint's function then).
pub fn selects_frame(cmd: &Command) -> bool {
    [&FRAME, &UP, &DOWN, &FRAME_FUNCTION]
        .into_iter()
        .any(|e| cmd.is(e))
}

pub static FRAME: Entry = Entry {
    name: "frame",
    aliases: &["f"],
    usage: "frame [N]",
    summary: "select frame N (or show the selected frame)",
    help: "Frame 0 is the innermost, as numbered by backtrace. print, info locals, info args, \
           info registers and info frame work in the selected frame.",
    examples: &["frame 1", "frame"],
    parse: |rest| num_arg(rest, "frame").map(|_| Invocation::command(&FRAME, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, rest| {
        let n = match num_arg(rest, "frame")? {
            Some(n) => n,
            None => h.selected(),
        };
        Ok(Outcome::shows(h.select_frame(n)?))
    }),
};

pub static FRAME_FUNCTION: Entry = Entry {
    name: "frame function",
    aliases: &[],
    usage: "frame function NAME",
    summary: "select the innermost frame of function NAME",
    help: "As gdb's: the innermost frame, numbered as backtrace numbers them (inlined frames \
           included), whose function is NAME is selected and shown like 'frame N'; no such \
           frame is an error that says so.\n\n\
           In a script, NAME must be a function of the binary.",
    examples: &["frame function exec_simple_query"],
    parse: |rest| {
        frame_function::function_arg(rest).map(|_| Invocation::command(&FRAME_FUNCTION, rest))
    },
    needs: Needs::Stop,
    check: |ctx, cmd| {
        let rest = run_args("frame function", cmd)?;
        ctx.function_must_exist(frame_function::function_arg(rest)?)
    },
    run: Some(frame_function::frame_function),
};

pub static UP: Entry = Entry {
    name: "up",
    aliases: &[],
    usage: "up [N]",
    summary: "select the caller's frame (N frames up)",
    help: "Selects the frame N levels (default 1) above the selected one, towards main.",
    examples: &["up", "up 2"],
    parse: |rest| num_arg(rest, "up").map(|_| Invocation::command(&UP, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, rest| {
        let n = num_arg(rest, "up")?.unwrap_or(1);
        let len = h.frame_count()?;
        let sel = h.selected();
        let t = (sel + n).min(len.saturating_sub(1));
        if t == sel && n > 0 {
            bail!("initial frame selected; you cannot go up");
        }
        Ok(Outcome::shows(h.select_frame(t)?))
    }),
};

pub static DOWN: Entry = Entry {
    name: "down",
    aliases: &[],
    usage: "down [N]",
    summary: "select the callee's frame (N frames down)",
    help: "Selects the frame N levels (default 1) below the selected one, towards frame 0.",
    examples: &["down", "down 2"],
    parse: |rest| num_arg(rest, "down").map(|_| Invocation::command(&DOWN, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, rest| {
        let n = num_arg(rest, "down")?.unwrap_or(1);
        let sel = h.selected();
        if sel == 0 {
            bail!("bottom (innermost) frame selected; you cannot go down");
        }
        let t = sel.saturating_sub(n);
        Ok(Outcome::shows(h.select_frame(t)?))
    }),
};

pub static INFO_ADDRESS: Entry = Entry {
    name: "info address",
    aliases: &["addr"],
    usage: "info address SYM",
    summary: "where a function (all its copies, inlined ones counted) or a global lives",
    help: "For a function, the addresses of its out-of-line copies and the number of places it \
           is inlined; for a global, its address.\n\n\
           In a script, SYM must be in the binary.",
    examples: &["info address choose_custom_plan", "info address MyProc"],
    parse: |arg| {
        if arg.is_empty() {
            bail!("info address needs a symbol name");
        }
        Ok(Invocation::command(&INFO_ADDRESS, arg))
    },
    needs: Needs::Stop,
    check: |ctx: &CheckCtx, cmd| {
        let sym = run_args("info address", cmd)?;
        if ctx.di.function_locations(sym).is_empty() && ctx.di.global(sym).is_none() {
            bail!(
                "no symbol \"{sym}\" in this postgres binary",
                sym = crate::shown::shown(sym)
            )
        }
        Ok(())
    },
    run: Some(|h, sym| Ok(Outcome::shows(h.info_address(sym)?))),
};

pub static INFO_LOCALS: Entry = Entry {
    name: "info locals",
    aliases: &[],
    usage: "info locals",
    summary: "the local variables of the selected frame, with their values",
    help: "One line per local variable of the selected frame's function, printed like print's.",
    examples: &["info locals"],
    parse: |rest| Ok(Invocation::command(&INFO_LOCALS, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::shows(h.info_vars(false)?))),
};

pub static INFO_ARGS: Entry = Entry {
    name: "info args",
    aliases: &[],
    usage: "info args",
    summary: "the arguments of the selected frame, with their values",
    help: "One line per parameter of the selected frame's function, printed like print's.",
    examples: &["info args"],
    parse: |rest| Ok(Invocation::command(&INFO_ARGS, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::shows(h.info_vars(true)?))),
};

pub static INFO_REGISTERS: Entry = Entry {
    name: "info registers",
    aliases: &["r", "reg"],
    usage: "info registers",
    summary: "the general registers in the selected frame",
    help: "rax to r15 and rip, in hex and as signed integers, as they were in the selected frame \
           (\"<not saved>\" where the unwinder cannot know a caller's value).",
    examples: &["info registers"],
    parse: |rest| Ok(Invocation::command(&INFO_REGISTERS, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::shows(h.info_registers()?))),
};

pub static INFO_FRAME: Entry = Entry {
    name: "info frame",
    aliases: &["f"],
    usage: "info frame",
    summary: "the selected frame: its level, frame address, rip, function and line",
    help: "The selected frame's level, canonical frame address, rip, function and file:line, \
           and whether it is a physical frame or a function inlined into the frame above.",
    examples: &["info frame"],
    parse: |rest| Ok(Invocation::command(&INFO_FRAME, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::shows(h.info_frame()?))),
};
