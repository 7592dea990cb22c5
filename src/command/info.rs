//! `info` (the process and pgdbg's view of it) and `help`, which reads
//! the whole registry.

mod auxv;
mod waitsites;

use super::check::no_check;
use super::{Entry, Invocation, Needs, REGISTRY, find, subcommands};
use crate::postgres::backend::Outcome;
use anyhow::bail;

pub static ENTRIES: &[&Entry] = &[
    &INFO,
    &INFO_SHAREDLIBRARY,
    &INFO_SIGNALS,
    &INFO_AUXV,
    &INFO_WAIT_SITES,
    &HELP,
];

pub static INFO_SHAREDLIBRARY: Entry = Entry {
    name: "info sharedlibrary",
    aliases: &["shared", "dll"],
    usage: "info sharedlibrary",
    summary: "the postgres binary and every shared library mapped into the backend",
    help: "One entry per object mapped into the backend: its address range, its path and where \
           its debug info came from (embedded, a build-id debug file, the .gnu_debuglink \
           target, debuginfod, or ELF symbols only). Functions of these libraries work like the \
           binary's: break, trace, count, print of their locals; LIB:FUNCTION picks one library \
           (break plpgsql:exec_stmt_execsql).",
    examples: &["info sharedlibrary"],
    parse: |rest| Ok(Invocation::command(&INFO_SHAREDLIBRARY, rest)),
    needs: Needs::Stop,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::shows(h.info_sharedlibrary()))),
};

pub static INFO_SIGNALS: Entry = Entry {
    name: "info signals",
    aliases: &["handle"],
    usage: "info signals [SIGNAL]",
    summary: "what pgdbg does with each signal the backend gets: stop, pass, hold back",
    help: "gdb's table: Stop (the backend stays stopped and pgdbg says so), Print, Pass to \
           program (the backend gets it) and the signal's description. The signals a backend \
           lives on (SIGUSR1, SIGALRM, SIGINT, SIGTERM, SIGHUP, SIGURG, ...) go straight \
           through without a stop; when pgdbg is killed during a call in the backend, its \
           guardian finishes the call and holds most of them back meanwhile, sending them after. SIGTRAP is pgdbg's own (its breakpoints \
           and watchpoints) and never passed. A fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, \
           SIGABRT) stops the backend and is delivered when it continues. The table is fixed: \
           pgdbg has no handle command.",
    examples: &["info signals", "info signals SIGUSR1"],
    parse: |rest| signal_arg(rest).map(|_| Invocation::command(&INFO_SIGNALS, rest)),
    needs: Needs::Nothing,
    check: no_check,
    run: Some(|_, rest| {
        let sig = signal_arg(rest)?;
        Ok(Outcome::shows(crate::inferior::signals::table(sig)))
    }),
};

pub static INFO_AUXV: Entry = Entry {
    name: "info auxv",
    aliases: &[],
    usage: "info auxv",
    summary: "the auxiliary vector the kernel gave the backend at exec, in gdb's table",
    help: "One line per entry of /proc/PID/auxv, as gdb shows it: the type's number, its name, \
           what it means and its value; a string's address (AT_EXECFN, AT_PLATFORM) with its \
           text read from the backend's memory. At the prompt the backend runs on while it \
           is read.",
    examples: &["info auxv"],
    parse: |rest| auxv::no_argument(rest).map(|_| Invocation::command(&INFO_AUXV, rest)),
    needs: Needs::Memory,
    check: no_check,
    run: Some(|b, rest| auxv::info_auxv(b, rest)),
};

pub static INFO_WAIT_SITES: Entry = Entry {
    name: "info wait-sites",
    aliases: &[],
    usage: "info wait-sites [-v | --json]",
    summary: "the binary's stores of the wait-event word, from its code and from DWARF",
    help: "The stores an in-process wait recorder would patch, read from the binary's file \
           (nothing is written into the backend): on 14+ each RIP-relative load of \
           my_wait_event_info followed by a 32-bit store through that register; on 13 the \
           stores to MyProc->wait_event_info. The summary says how many there are, in how many \
           functions, whether a 5-byte jump fits each store alone, with neighbouring plain \
           instructions or only by relocating the load..store span, whether a branch target \
           (jump tables included) lies inside a span, whether every reference to the pointer is \
           classified, and whether the set equals the stores inside DWARF's inlined instances of \
           pgstat_report_wait_start/end. A stripped binary gives the same sites.\n\n\
           -v lists one store per line: its address, function, source line, length, the value \
           (named when the wait names are cached) or register, its load and how a jump fits; \
           --json gives the same as one JSON object.",
    examples: &["info wait-sites", "info wait-sites -v"],
    parse: |rest| waitsites::parse_form(rest).map(|_| Invocation::command(&INFO_WAIT_SITES, rest)),
    needs: Needs::Nothing,
    check: no_check,
    run: Some(|b, rest| waitsites::info_wait_sites(b, rest)),
};

/// `info signals [SIGNAL]`: SIGNAL as SIGUSR1, USR1, usr1 or 10.
fn signal_arg(rest: &str) -> anyhow::Result<Option<nix::sys::signal::Signal>> {
    use nix::sys::signal::Signal;
    let w = rest.trim();
    if w.is_empty() {
        return Ok(None);
    }
    let up = w.to_ascii_uppercase();
    let sig = match w.parse::<i32>() {
        Ok(n) => Signal::try_from(n).ok(),
        Err(_) if up.starts_with("SIG") => up.parse().ok(),
        Err(_) => format!("SIG{up}").parse().ok(),
    };
    match sig {
        Some(s) => Ok(Some(s)),
        None => bail!(
            "info signals: unknown signal '{}': give a name like SIGUSR1 or a number",
            crate::shown::shown(w)
        ),
    }
}

pub static INFO: Entry = Entry {
    name: "info",
    aliases: &["i"],
    usage: "info [SUBCOMMAND [ARGS]]",
    summary: "the backend: pid, version, binary, debug info, state ('help info': more)",
    help: "Without a subcommand: the pid, the kind of process, the PostgreSQL version, the \
           binary, its build-id, where the debug info came from (and what is missing without \
           DWARF), the size of the index, the load bias and the state of the backend.",
    examples: &["info", "i"],
    parse: |rest| {
        let what = rest.split_whitespace().next().unwrap_or("");
        match what {
            "" | "target" | "process" | "program" | "inferior" => {
                Ok(Invocation::command(&INFO, rest))
            }
            other => {
                let names: Vec<&str> = subcommands(&INFO).iter().map(|e| e.name).collect();
                bail!(
                    "unknown info subcommand '{other}': try info, {}",
                    names.join(", ")
                )
            }
        }
    },
    needs: Needs::Nothing,
    check: no_check,
    run: Some(|h, _| Ok(Outcome::shows(h.info_target()))),
};

pub static HELP: Entry = Entry {
    name: "help",
    aliases: &["h", "?"],
    usage: "help [COMMAND]",
    summary: "list commands, or explain one",
    help: "Without COMMAND, one line per command; with it, what the command does, its options \
           and examples. COMMAND may be an abbreviation, or a subcommand like 'info locals'.",
    examples: &["help", "help break"],
    parse: |rest| Ok(Invocation::command(&HELP, rest)),
    needs: Needs::Nothing,
    check: no_check,
    run: Some(|_, rest| {
        let topic = Some(rest).filter(|t| !t.is_empty());
        Ok(Outcome::shows(help_text(topic)))
    }),
};

/// The width of the names column of `help`.
const NAMES: usize = 20;

/// The help text width (the listing and `help COMMAND` fit 100 columns).
const WIDTH: usize = 98;

/// `help`'s line for an entry: its names (a command's aliases too), then
/// its summary.
pub fn help_line(e: &Entry) -> String {
    let names = if e.aliases.is_empty() || e.name.contains(' ') {
        e.name.to_string()
    } else {
        format!("{}, {}", e.name, e.aliases.join(", "))
    };
    format!("  {names:<NAMES$} -- {}", e.summary)
}

/// `help` (the list) or `help COMMAND`.
pub fn help_text(topic: Option<&str>) -> String {
    let Some(t) = topic else {
        let mut s = String::from(
            "Commands (gdb's names and abbreviations work; 'help COMMAND' explains one):\n",
        );
        for (family, entries) in REGISTRY {
            s.push_str(&format!("\n{family}\n"));
            for e in *entries {
                s.push_str(&help_line(e));
                s.push('\n');
            }
        }
        s.push_str(
            "\nExample: why does a prepared statement get a custom plan? (EXECUTE it while \
             'continue' waits)\n  \
             break choose_custom_plan / continue / print plansource->generic_cost /\n  \
             print plansource->total_custom_cost / plansource->num_custom_plans / bt / detach\n\
             Ctrl-C stops a running 'continue' without signalling the backend; Ctrl-D quits \
             (detaching).",
        );
        return s;
    };
    let Some(e) = find(t.trim()) else {
        return format!("no command '{t}': type 'help' for the list");
    };
    let mut s = format!("{}\n", e.usage);
    s.push_str(&wrap(e.summary, "  "));
    for p in e.help.split("\n\n") {
        s.push('\n');
        s.push_str(&wrap(p, "  "));
    }
    let subs = subcommands(e);
    if !subs.is_empty() {
        s.push_str(&format!(
            "\nSubcommands ('help {}' explains one):\n",
            subs[0].name
        ));
        for sub in subs {
            s.push_str(&help_line(sub));
            s.push('\n');
        }
    }
    if !e.examples.is_empty() {
        s.push_str(&format!(
            "\nExample{}:\n",
            if e.examples.len() > 1 { "s" } else { "" }
        ));
        for ex in e.examples {
            for l in ex.lines() {
                s.push_str(&format!("  {l}\n"));
            }
        }
    }
    if !e.aliases.is_empty() {
        let group = e.name.split_once(' ').map(|(g, _)| format!("{g} "));
        let names: Vec<String> = e
            .aliases
            .iter()
            .map(|a| format!("{}{a}", group.as_deref().unwrap_or("")))
            .collect();
        s.push_str(&format!("\nAliases: {}\n", names.join(", ")));
    }
    s.trim_end().to_string()
}

/// `text` as lines of at most WIDTH columns, each starting with `indent`.
fn wrap(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(indent);
    for w in text.split_whitespace() {
        if line.len() > indent.len() && line.chars().count() + 1 + w.chars().count() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from(indent);
        }
        if line.len() > indent.len() {
            line.push(' ');
        }
        line.push_str(w);
    }
    out.push_str(&line);
    out.push('\n');
    out
}
