//! The command language shared by the REPL and script files: gdb's names
//! and abbreviations where they fit.
//!
//! Every command is one [`Entry`] of the registry, in the file of its
//! family: its name and aliases, usage, summary, help and examples, its
//! parser, its check before attaching and what it needs of the backend
//! ([`Needs`]).  `parse`, `help`, Tab completion, the script checks and
//! the non-stop prompt (`session/nonstop.rs`) all read the registry.
//!
//! A new command: its variant of [`Command`] here, its `Entry` in its
//! family's file, listed in that file's `ENTRIES`.  The compiler then asks
//! for the variant's arm in [`Command::entry`] (which entry checks it) and
//! in `Session::execute`; the unit tests check that the entry's examples
//! parse to a command its own check receives.

mod analyze;
mod args;
mod breakpoints;
pub mod check;
mod data;
mod info;
mod inspect;
mod postgres;
mod probes;
mod profile;
mod running;
mod source;
#[cfg(test)]
mod tests;

pub use args::{parse_duration, split_args, strip_comment};
pub use check::CheckCtx;
pub use data::printf_conversions;
pub use info::help_text;
pub use inspect::{SymbolKind, symbol_regex, type_words};

use crate::expr::format::Radix;
use anyhow::{Result, bail};

pub use crate::postgres::plancache::PlanCacheMode;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Break {
        location: String,
        temporary: bool,
        /// `break LOC if EXPR`: stop only when EXPR is non-zero.
        condition: Option<String>,
    },
    /// `condition N [EXPR]`: set (or remove) breakpoint N's condition.
    Condition {
        id: u32,
        expr: Option<String>,
    },
    /// `commands [N]` opens a block (ended by `end`) run at each hit of
    /// breakpoint N (the last one set by default).  The parser returns
    /// this with an empty body; `script::assemble` fills it in.
    Commands {
        id: Option<u32>,
        body: Vec<Command>,
        /// The body's lines as written (for `info breakpoints`).
        text: Vec<String>,
    },
    /// `end` closes a `commands` block.
    End,
    /// `silent` as a block's first command: no "Breakpoint N, ..." line.
    Silent,
    /// `printf "FORMAT", EXPR...`
    Printf {
        format: String,
        args: Vec<String>,
    },
    /// `trace FUNC [ARGEXPR...] [--for D] [--count N] [--stacks N] [--quiet] [--perf]`
    Trace {
        function: String,
        args: Vec<String>,
        duration: Option<std::time::Duration>,
        count: Option<u64>,
        stacks: usize,
        quiet: bool,
        /// kernel uprobes with the argument registers instead of ptrace stops
        perf: bool,
    },
    /// `count FUNC... [--by-phase] [--for D]`
    Count {
        functions: Vec<String>,
        by_phase: bool,
        duration: Option<std::time::Duration>,
        /// `--ptrace`: a ptrace stop per call instead of kernel uprobes
        /// (also what `--by-phase` needs)
        ptrace: bool,
    },
    /// `latency FUNC... [--for D]`: entry and return uprobes
    Latency {
        functions: Vec<String>,
        duration: Option<std::time::Duration>,
        /// the summary as one JSON document
        json: bool,
    },
    Delete(Vec<u32>),
    InfoBreakpoints,
    Continue,
    /// `interrupt`: stop a backend that runs while the prompt waits.
    Interrupt,
    Print {
        radix: Radix,
        expr: String,
    },
    Backtrace(Option<usize>),
    Frame(Option<usize>),
    Up(usize),
    Down(usize),
    Info,
    InfoAddress(String),
    InfoLocals,
    InfoArgs,
    InfoRegisters,
    InfoFrame,
    InfoSharedlibrary,
    /// `info signals [SIGNAL]`: what pgdbg does with each signal.
    InfoSignals(Option<nix::sys::signal::Signal>),
    /// `x/NFU ADDR`: what is not given comes from the last `x`.
    Examine {
        count: Option<usize>,
        format: Option<char>,
        unit: Option<char>,
        expr: Option<String>,
    },
    /// `ptype EXPR|TYPE`
    Ptype(String),
    /// `whatis EXPR|TYPE`
    Whatis(String),
    /// `info symbol ADDR`
    InfoSymbol(String),
    /// `info line FUNCTION|FILE:LINE`
    InfoLine(String),
    /// `disassemble [/r] [/s] [LOCATION | START,END | START,+LEN]`
    Disassemble {
        /// `/r`: each instruction's bytes
        raw: bool,
        /// `/s`: the source lines with the code
        source: bool,
        /// None: the function of the selected frame's pc
        spec: Option<String>,
    },
    /// `info functions|variables [REGEX]`
    InfoSymbols {
        kind: SymbolKind,
        regex: Option<String>,
    },
    /// `list [LOCATION | FIRST,LAST | -]`
    List(Option<String>),
    /// `directory [DIR]`
    Directory(Option<String>),
    Echo(String),
    /// Watch plan-cache decisions.
    PlanCache {
        duration: Option<std::time::Duration>,
        count: Option<u64>,
        /// the recorder (default), `--fast=stop`, `--stops`
        mode: PlanCacheMode,
    },
    /// `call FUNC(ARGS)`
    Call(String),
    /// `plan [--next] [--format F] [--verbose] [--costs off]`
    Plan {
        next: bool,
        format: String,
        verbose: bool,
        costs: bool,
    },
    /// `plan --next --analyze ...`: EXPLAIN ANALYZE of the next statement(s)
    PlanAnalyze(crate::postgres::analyze::AnalyzeOpts),
    /// `plan --progress [--every D] [--for D]`: the running statement, node by node
    PlanProgress {
        every: std::time::Duration,
        duration: Option<std::time::Duration>,
    },
    /// `wait`: the current wait event
    Wait,
    /// `waits sample [--hz N] [--for D]`
    WaitsSample {
        hz: f64,
        duration: Option<std::time::Duration>,
    },
    /// `waits trace [--for D] [--stacks N] [--quiet] [--ptrace]`
    WaitsTrace {
        duration: Option<std::time::Duration>,
        stacks: usize,
        quiet: bool,
        /// `--ptrace`: a debug register and ptrace stops instead of the
        /// perf write-breakpoint event
        ptrace: bool,
        /// `--no-statements`: no statement times (no uprobes or breakpoints
        /// at the executor's start and end)
        no_statements: bool,
    },
    /// `profile [--hz N] [--for D] [--format F] [--flamegraph OUT] [--speedscope OUT] [--pprof OUT]`
    Profile(crate::perf::profile::ProfileOpts),
    Detach,
    Quit,
    Help(Option<String>),
    Nothing,
}

/// One command: everything pgdbg knows about it, in one place.
pub struct Entry {
    /// The name, e.g. "break"; a subcommand's is "GROUP SUB", e.g.
    /// "info locals".
    pub name: &'static str,
    /// Other names and gdb's abbreviations (a subcommand's replace its
    /// second word: "info b").
    pub aliases: &'static [&'static str],
    /// The synopsis, e.g. `break LOCATION [if EXPR]`.
    pub usage: &'static str,
    /// `help`'s line (with the names, it fits 100 columns).
    pub summary: &'static str,
    /// `help NAME`: what it does; paragraphs separated by a blank line.
    pub help: &'static str,
    /// Lines as a user types them (a `commands` block: several), shown by
    /// `help NAME`; the first line of each parses to this command.
    pub examples: &'static [&'static str],
    /// The command from the rest of its line (after the name, trimmed).
    pub parse: fn(&str) -> Result<Command>,
    /// What the command needs of the backend: the non-stop prompt takes
    /// that (a stop, or none) before running it.
    pub needs: Needs,
    /// The check made before attaching (`--script`, `--ex`);
    /// `check::no_check` where nothing can be known before.
    pub check: fn(&CheckCtx, &Command) -> Result<()>,
}

/// What a command needs of the backend.  At the non-stop prompt the
/// backend runs while the prompt waits; this says whether a command can
/// run as it is, or takes a stop first (`session/nonstop.rs`).
#[derive(Clone, Copy, Debug)]
pub enum Needs {
    /// Nothing of the backend (help, breakpoint lists, conditions).
    Nothing,
    /// Memory reads (process_vm_readv) while the backend runs; a stop only
    /// when that fails (an expression names a local or a register).
    Memory,
    /// A stop for the whole command: registers, frames, code written
    /// (breakpoints), inferior calls.
    Stop,
    /// A stop to set up, then the backend runs while the command works
    /// (probes, sampling), stopped only for pgdbg's moments (a probe's
    /// hit, a poll); the time it was stopped is measured and said.
    Runs,
    /// The command decides itself whether the backend runs (`continue`,
    /// `interrupt`).
    RunState,
    /// The session ends: the command takes the backend as it finds it,
    /// running or stopped (`detach`, `quit`).
    Detaches,
    /// It depends on the command's options (e.g. `plan` and `plan --next`).
    Varies(fn(&Command) -> Needs),
}

impl PartialEq for Needs {
    /// Kinds compare equal; two `Varies` never do (resolve them first).
    fn eq(&self, other: &Self) -> bool {
        use Needs::*;
        matches!(
            (self, other),
            (Nothing, Nothing)
                | (Memory, Memory)
                | (Stop, Stop)
                | (Runs, Runs)
                | (RunState, RunState)
                | (Detaches, Detaches)
        )
    }
}

/// The families, in the order `help` lists them.
pub static REGISTRY: &[(&str, &[&Entry])] = &[
    ("Breakpoints", breakpoints::ENTRIES),
    ("Running", running::ENTRIES),
    ("Data", data::ENTRIES),
    ("Inspection", inspect::ENTRIES),
    ("Source", source::ENTRIES),
    ("Probes", probes::ENTRIES),
    ("Profiling", profile::ENTRIES),
    ("PostgreSQL", postgres::ENTRIES),
    ("Information", info::ENTRIES),
];

impl Command {
    /// The registry entry that parses and checks this command (None: an
    /// empty line).  No wildcard: a new variant must name its entry.
    pub fn entry(&self) -> Option<&'static Entry> {
        use Command as C;
        Some(match self {
            C::Break {
                temporary: false, ..
            } => &breakpoints::BREAK,
            C::Break {
                temporary: true, ..
            } => &breakpoints::TBREAK,
            C::Condition { .. } => &breakpoints::CONDITION,
            C::Commands { .. } => &breakpoints::COMMANDS,
            C::End => &breakpoints::END,
            C::Silent => &breakpoints::SILENT,
            C::Delete(_) => &breakpoints::DELETE,
            C::InfoBreakpoints => &breakpoints::INFO_BREAKPOINTS,
            C::Continue => &running::CONTINUE,
            C::Interrupt => &running::INTERRUPT,
            C::Detach => &running::DETACH,
            C::Quit => &running::QUIT,
            C::Print { .. } => &data::PRINT,
            C::Printf { .. } => &data::PRINTF,
            C::Echo(_) => &data::ECHO,
            C::Call(_) => &data::CALL,
            C::Backtrace(_) => &data::BACKTRACE,
            C::Frame(_) => &data::FRAME,
            C::Up(_) => &data::UP,
            C::Down(_) => &data::DOWN,
            C::InfoAddress(_) => &data::INFO_ADDRESS,
            C::InfoLocals => &data::INFO_LOCALS,
            C::InfoArgs => &data::INFO_ARGS,
            C::InfoRegisters => &data::INFO_REGISTERS,
            C::InfoFrame => &data::INFO_FRAME,
            C::Trace { .. } => &probes::TRACE,
            C::Count { .. } => &probes::COUNT,
            C::Latency { .. } => &probes::LATENCY,
            C::Plan { .. } | C::PlanAnalyze(_) | C::PlanProgress { .. } => &postgres::PLAN,
            C::PlanCache { .. } => &postgres::PLANCACHE,
            C::Wait => &postgres::WAIT,
            C::WaitsSample { .. } => &postgres::WAITS_SAMPLE,
            C::WaitsTrace { .. } => &postgres::WAITS_TRACE,
            C::Profile(_) => &profile::PROFILE,
            C::InfoSharedlibrary => &info::INFO_SHAREDLIBRARY,
            C::InfoSignals(_) => &info::INFO_SIGNALS,
            C::Examine { .. } => &inspect::X,
            C::Ptype(_) => &inspect::PTYPE,
            C::Whatis(_) => &inspect::WHATIS,
            C::InfoSymbol(_) => &inspect::INFO_SYMBOL,
            C::InfoLine(_) => &inspect::INFO_LINE,
            C::Disassemble { .. } => &inspect::DISASSEMBLE,
            C::List(_) => &source::LIST,
            C::InfoSymbols {
                kind: SymbolKind::Functions,
                ..
            } => &inspect::INFO_FUNCTIONS,
            C::InfoSymbols {
                kind: SymbolKind::Variables,
                ..
            } => &inspect::INFO_VARIABLES,
            C::Directory(_) => &source::DIRECTORY,
            C::Info => &info::INFO,
            C::Help(_) => &info::HELP,
            C::Nothing => return None,
        })
    }
}

impl Command {
    /// What this command needs of the backend, from its registry entry
    /// (an empty line: nothing).  Never `Needs::Varies`.
    pub fn needs(&self) -> Needs {
        let mut n = self.entry().map_or(Needs::Nothing, |e| e.needs);
        // an entry's function may not answer `Varies` again: one level
        if let Needs::Varies(f) = n {
            n = f(self);
        }
        match n {
            Needs::Varies(_) => Needs::Stop,
            n => n,
        }
    }
}

/// Every entry, commands and subcommands, in `help`'s order.
pub fn entries() -> impl Iterator<Item = &'static Entry> {
    REGISTRY.iter().flat_map(|(_, es)| es.iter().copied())
}

/// The names of the commands (not of subcommands), for Tab completion.
pub fn command_names() -> Vec<&'static str> {
    entries()
        .filter(|e| !e.name.contains(' '))
        .map(|e| e.name)
        .collect()
}

/// The command a first word names: its name, an alias, or a unique prefix
/// of at least two letters of a name (gdb accepts "cont", "back", ...).
pub fn lookup(word: &str) -> Option<&'static Entry> {
    let commands = || entries().filter(|e| !e.name.contains(' '));
    if let Some(e) = commands().find(|e| e.name == word || e.aliases.contains(&word)) {
        return Some(e);
    }
    let mut cands = commands().filter(|e| e.name.starts_with(word) && word.len() >= 2);
    match (cands.next(), cands.next()) {
        (Some(e), None) => Some(e),
        _ => None,
    }
}

/// The subcommands of a command ("info locals", ... of "info").
pub fn subcommands(group: &Entry) -> Vec<&'static Entry> {
    entries()
        .filter(|e| e.name.split_once(' ').is_some_and(|(g, _)| g == group.name))
        .collect()
}

/// The subcommand of `group` that `word` names (its name or an alias).
fn subcommand(group: &Entry, word: &str) -> Option<&'static Entry> {
    subcommands(group).into_iter().find(|e| {
        e.name.split_once(' ').is_some_and(|(_, s)| s == word) || e.aliases.contains(&word)
    })
}

/// The entry `help TOPIC` explains: "break", "b", "info locals", "i b".
pub fn find(topic: &str) -> Option<&'static Entry> {
    let mut words = topic.split_whitespace();
    let e = lookup(words.next()?)?;
    match (words.next(), words.next()) {
        (None, _) => Some(e),
        (Some(sub), None) => subcommand(e, sub),
        _ => None,
    }
}

/// One line of the REPL or a script as a command.
pub fn parse(line: &str) -> Result<Command> {
    let line = strip_comment(line).trim();
    if line.is_empty() {
        return Ok(Command::Nothing);
    }
    // print/x
    let (word, rest) = match line.find(|c: char| c.is_whitespace() || c == '/') {
        Some(i) => (&line[..i], line[i..].trim_start()),
        None => (line, ""),
    };
    let Some(entry) = lookup(word) else {
        bail!(
            "unknown command '{word}': type 'help' for the list of commands",
            word = crate::shown::shown(word)
        );
    };
    let (sub, args) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    match subcommand(entry, sub) {
        Some(s) => {
            args::refuse_repeated_options(s.name, s.usage, s.help, args)?;
            (s.parse)(args)
        }
        None => {
            args::refuse_repeated_options(entry.name, entry.usage, entry.help, rest)?;
            (entry.parse)(rest)
        }
    }
}

/// The check of `cmd` before attaching, by its registry entry.
pub fn check(ctx: &CheckCtx, cmd: &Command) -> Result<()> {
    match cmd.entry() {
        Some(e) => (e.check)(ctx, cmd),
        // an empty line
        None => Ok(()),
    }
}
