//! Running and leaving: `continue`, the stepping commands (`finish`,
//! `next`, `step`, `stepi`, `nexti`, `until`, `advance`), `detach`,
//! `quit`.

use super::check::{CheckCtx, no_check, run_args};
use super::{Command, Entry, Invocation, LineStep, Needs};
use crate::postgres::backend::Outcome;
use anyhow::{Result, bail};

pub static ENTRIES: &[&Entry] = &[
    &CONTINUE, &FINISH, &NEXT, &STEP, &NEXTI, &STEPI, &UNTIL, &ADVANCE, &INTERRUPT, &DETACH, &QUIT,
];

/// What every stepping command's help ends with: what it writes into the
/// backend, and where it runs.
macro_rules! stepping_note {
    () => {
        "\n\nThe backend must be stopped (a breakpoint hit, 'interrupt'): a running one is not \
         stopped for it. Calls are run through with a temporary breakpoint at the return \
         address, checked against the frame's stack pointer (a recursive call returning there \
         does not stop it) and removed on every way out (the stop, Ctrl-C, an error, the \
         backend's exit; the guardian if pgdbg is killed); single steps write nothing into the \
         backend. An ERROR raised meanwhile (its longjmp, seen at pg_re_throw, out of the \
         stepped frame) stops the backend where control lands, and pgdbg says so; 'continue' \
         then lets PostgreSQL handle the error. Signals the backend gets while it runs are \
         passed through; those that arrive during a single step are delivered at the next run. \
         A breakpoint hit meanwhile stops it, as in gdb."
    };
}

/// `[N]`: how many times (1 by default).
fn count_arg(name: &str, rest: &str) -> Result<u64> {
    let r = rest.trim();
    if r.is_empty() {
        return Ok(1);
    }
    match r.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!(
            "{name}: '{}' is not a count: give a positive number of times, e.g. '{name} 3'",
            crate::shown::shown(r)
        ),
    }
}

fn check_location(ctx: &CheckCtx, cmd: &Command) -> Result<()> {
    let name = cmd.entry().map_or("advance", |e| e.name);
    let args = run_args(name, cmd)?.trim();
    if args.is_empty() {
        if name == "until" {
            return Ok(());
        }
        bail!("{name} needs a location: {name} FUNCTION | FILE:LINE | *ADDRESS");
    }
    ctx.location(args)
}

pub static FINISH: Entry = Entry {
    name: "finish",
    aliases: &["fin"],
    usage: "finish",
    summary: "run until the selected frame returns; show the caller and the value",
    help: concat!(
        "As gdb's 'finish': says 'Run till exit from #N ...', runs the backend until the \
         selected frame returns to its caller, shows where (the caller's line) and 'Value \
         returned is $N = ...', read from rax (rdx), xmm0 or the memory rax points to by the \
         function's DWARF return type (nothing for void; a function of a shared library shows \
         no value). The value is kept in the value history. Out of an inlined frame it is \
         refused for now ('up' to the function it is inlined into).",
        stepping_note!()
    ),
    examples: &["finish"],
    parse: |rest| {
        if !rest.trim().is_empty() {
            bail!(
                "finish takes no argument (it finishes the selected frame: 'up' selects another)"
            );
        }
        Ok(Invocation::command(&FINISH, rest))
    },
    needs: Needs::RunState,
    check: no_check,
    run: Some(|h, _| h.finish()),
};

pub static NEXT: Entry = Entry {
    name: "next",
    aliases: &["n"],
    usage: "next [N]",
    summary: "run to the next source line of this function, over calls",
    help: concat!(
        "As gdb's 'next': single-steps the current source line (gdb's step range, from the \
         DWARF line table) and stops at the start of another line of the same function, or of \
         its caller once it returns. Calls, and the bodies of functions inlined into this one, \
         are run through. Shows the line, with the function when it changed.",
        stepping_note!()
    ),
    examples: &["next", "next 3"],
    parse: |rest| count_arg("next", rest).map(|_| Invocation::command(&NEXT, rest)),
    needs: Needs::RunState,
    check: no_check,
    run: Some(|h, rest| h.step_lines(LineStep::Next, count_arg("next", rest)?)),
};

pub static STEP: Entry = Entry {
    name: "step",
    aliases: &["s"],
    usage: "step [N]",
    summary: "run to the next source line, into called functions with line info",
    help: concat!(
        "As gdb's 'step': like 'next', but a call into a function with line info (the postgres \
         binary, a library with DWARF) is entered, stopping at its first line after the \
         prologue; one without (a PLT stub, libc) is run through. Entering code inlined into \
         the current function stops at its first instruction there, in the inlined function.",
        stepping_note!()
    ),
    examples: &["step", "step 2"],
    parse: |rest| count_arg("step", rest).map(|_| Invocation::command(&STEP, rest)),
    needs: Needs::RunState,
    check: no_check,
    run: Some(|h, rest| h.step_lines(LineStep::Step, count_arg("step", rest)?)),
};

pub static NEXTI: Entry = Entry {
    name: "nexti",
    aliases: &["ni"],
    usage: "nexti [N]",
    summary: "execute one machine instruction, a call run through to its return",
    help: concat!(
        "As gdb's 'nexti': one instruction; a call instruction runs until the call returns. A \
         system call instruction runs to the next instruction with a temporary breakpoint too \
         (it may block; Ctrl-C stops it). Shows the address and line, with the function when \
         it changed.",
        stepping_note!()
    ),
    examples: &["nexti", "ni 4"],
    parse: |rest| count_arg("nexti", rest).map(|_| Invocation::command(&NEXTI, rest)),
    needs: Needs::RunState,
    check: no_check,
    run: Some(|h, rest| h.step_instructions(true, count_arg("nexti", rest)?)),
};

pub static STEPI: Entry = Entry {
    name: "stepi",
    aliases: &["si"],
    usage: "stepi [N]",
    summary: "execute one machine instruction, into calls (N times)",
    help: concat!(
        "As gdb's 'stepi': one instruction (PTRACE_SINGLESTEP; over one of pgdbg's own \
         breakpoints, with the original byte put back for that instruction). A system call \
         instruction runs to the next instruction with a temporary breakpoint (it may block; \
         Ctrl-C stops it).",
        stepping_note!()
    ),
    examples: &["stepi", "si 10"],
    parse: |rest| count_arg("stepi", rest).map(|_| Invocation::command(&STEPI, rest)),
    needs: Needs::RunState,
    check: no_check,
    run: Some(|h, rest| h.step_instructions(false, count_arg("stepi", rest)?)),
};

pub static UNTIL: Entry = Entry {
    name: "until",
    aliases: &["u"],
    usage: "until [LOCATION]",
    summary: "run to a line past this one (past a loop), or to LOCATION in this frame",
    help: concat!(
        "As gdb's 'until'. Without LOCATION: like 'next', but a jump back (the end of a loop's \
         body) does not stop it, so it runs until a line after the loop. With LOCATION \
         (FUNCTION, FILE:LINE, *ADDRESS): runs until LOCATION is reached in the current frame \
         or an outer one (not in a deeper call), or until the current frame returns.",
        stepping_note!()
    ),
    examples: &["until", "until execMain.c:1700"],
    parse: |rest| Ok(Invocation::command(&UNTIL, rest)),
    needs: Needs::RunState,
    check: check_location,
    run: Some(|h, rest| {
        if rest.trim().is_empty() {
            h.step_lines(LineStep::Until, 1)
        } else {
            h.advance(rest.trim(), true)
        }
    }),
};

pub static ADVANCE: Entry = Entry {
    name: "advance",
    aliases: &[],
    usage: "advance LOCATION",
    summary: "run until LOCATION or until this frame returns",
    help: concat!(
        "As gdb's 'advance': a temporary breakpoint at LOCATION (any frame reaching it stops) \
         and at the current frame's return address (its frame only).",
        stepping_note!()
    ),
    examples: &["advance ExecScan", "advance execMain.c:1700"],
    parse: |rest| {
        if rest.trim().is_empty() {
            bail!("advance needs a location: advance FUNCTION | FILE:LINE | *ADDRESS");
        }
        Ok(Invocation::command(&ADVANCE, rest))
    },
    needs: Needs::RunState,
    check: check_location,
    run: Some(|h, rest| h.advance(rest.trim(), false)),
};

pub static CONTINUE: Entry = Entry {
    name: "continue",
    aliases: &["c", "cont"],
    usage: "continue",
    summary: "run the backend until the next breakpoint (Ctrl-C stops it)",
    help: "The backend runs until it hits a breakpoint whose condition holds, exits, or Ctrl-C \
           stops it (with PTRACE_INTERRUPT: the backend itself gets no SIGINT). Signals the \
           backend receives meanwhile are passed straight through. At a terminal's prompt the \
           backend runs while you type: 'continue' lets a stopped backend run again and the \
           prompt comes back at once; its next breakpoint hit is shown when it comes. In a \
           script, 'continue' waits for the next stop.",
    examples: &["continue", "c"],
    parse: |_| Ok(Command::Continue),
    needs: Needs::RunState,
    check: no_check,
    run: None,
};

pub static INTERRUPT: Entry = Entry {
    name: "interrupt",
    aliases: &[],
    usage: "interrupt",
    summary: "stop the backend that runs while the prompt waits, until 'continue'",
    help: "At the prompt the backend runs while pgdbg waits for a command: each command stops \
           it only for as long as it needs (microseconds for 'bt'; none for 'print' of globals, \
           'wait' or 'info'). 'interrupt' (or Ctrl-C at the prompt) stops it with \
           PTRACE_INTERRUPT, as a breakpoint hit does, and it stays stopped until 'continue' \
           or 'detach'. While it is stopped it holds whatever locks and buffer pins it holds: \
           other sessions that need them wait. In a script the backend is stopped already.",
    examples: &["interrupt"],
    parse: |rest| Ok(Invocation::command(&INTERRUPT, rest)),
    needs: Needs::RunState,
    check: no_check,
    run: Some(|h, _| h.interrupt()),
};

pub static DETACH: Entry = Entry {
    name: "detach",
    aliases: &[],
    usage: "detach",
    summary: "restore the backend exactly as it was and let it run",
    help: "Removes every breakpoint and debug register, restores the registers and lets the \
           backend go on as if pgdbg had never been there; pgdbg then exits. Errors, Ctrl-D, \
           SIGTERM, SIGHUP and a closed terminal detach the same way.",
    examples: &["detach"],
    parse: |rest| Ok(Invocation::command(&DETACH, rest)),
    needs: Needs::Detaches,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::quit(h.detach()?))),
};

pub static QUIT: Entry = Entry {
    name: "quit",
    aliases: &["q", "exit"],
    usage: "quit",
    summary: "detach and exit (also Ctrl-D)",
    help: "The same as 'detach': the backend is restored and runs on, and pgdbg exits.",
    examples: &["quit", "q"],
    parse: |rest| Ok(Invocation::command(&QUIT, rest)),
    needs: Needs::Detaches,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::quit(h.detach()?))),
};
