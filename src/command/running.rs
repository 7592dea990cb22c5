//! Running and leaving: `continue`, `detach`, `quit`.

use super::check::no_check;
use super::{Command, Entry, Invocation, Needs};
use crate::postgres::backend::Flow;

pub static ENTRIES: &[&Entry] = &[&CONTINUE, &INTERRUPT, &DETACH, &QUIT];

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
    run: Some(|h, _| Ok((h.detach()?, Flow::Quit))),
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
    run: Some(|h, _| Ok((h.detach()?, Flow::Quit))),
};
