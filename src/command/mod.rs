//! The command language shared by the REPL and script files: gdb's names
//! and abbreviations where they fit.
//!
//! Every command is one [`Entry`] of the registry, in the file of its
//! family: its name and aliases, usage, summary, help and examples, its
//! parser, its check before attaching and what it needs of the backend
//! ([`Needs`]).  `parse`, `help`, Tab completion, the script checks and
//! the non-stop prompt (`session/nonstop.rs`) all read the registry.
//!
//! A new command: its `Entry` in its family's file, listed in that file's
//! `ENTRIES`, whose `parse` gives [`Invocation::command`] (the entry and
//! the rest of the line) and whose `run` is its implementation, over
//! [`Host`] (the backend, `postgres::Backend`, and the session's own
//! breakpoints, frames and stop): `Command::Run` carries the entry, so
//! [`Command::entry`], `Session::execute`, the non-stop prompt, the script
//! checks, `help`, `info`'s list of subcommands and Tab completion need
//! nothing more (e.g. `frame function`: `data.rs` and
//! `data/frame_function.rs`).  [`Command`] keeps variants only for what
//! the session and the script reader handle as structure: a `commands`
//! block (`Commands`, `End`, `Silent`), `Continue` (the block's resume,
//! the non-stop prompt's background run) and the empty line.  The unit
//! tests check that each entry's examples parse to a command its own
//! check receives, and that an entry has a `run` exactly when its parser
//! gives `Command::Run`.

mod analyze;
mod args;
mod breakpoints;
pub mod check;
mod data;
mod host;
mod info;
mod inspect;
pub mod lines;
mod postgres;
mod probes;
mod profile;
mod running;
mod source;
#[cfg(test)]
mod tests;

pub use args::{parse_duration, split_args, strip_comment};
pub use breakpoints::{break_location, changes_breakpoints};
pub use check::CheckCtx;
pub use data::printf_conversions;
pub use data::selects_frame;
pub use host::{BreakpointView, Host, LineStep, WatchKind};
pub use info::help_text;
pub use inspect::{SymbolKind, symbol_regex, type_words};
pub use postgres::waits_trace_only;
pub use probes::count_only;
pub use source::sourced_file;

use crate::postgres::backend::Outcome;
use anyhow::{Result, bail};

pub use crate::postgres::plancache::PlanCacheMode;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
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
    /// `continue`: at the non-stop prompt the backend runs in the
    /// background (`Session::execute_at_prompt`); as a `commands` block's
    /// last command it resumes the backend after the block.
    Continue,
    /// A command its registry entry runs (`Entry::run`): no variant of
    /// its own, no arm in `Session::execute`.
    Run(Invocation),
    Nothing,
}

/// How a command of the registry runs by itself: over the backend and the
/// session's own state ([`Host`]), with the rest of its line (which its
/// entry's `parse` accepted).
pub type Run = fn(&mut dyn Host, &str) -> Result<Outcome>;

/// A parsed command that its entry runs: the entry and the rest of the
/// line.
#[derive(Clone)]
pub struct Invocation {
    pub entry: &'static Entry,
    pub args: String,
}

impl Invocation {
    /// The command `entry` runs with `args` (an entry's `parse` gives it).
    pub fn command(entry: &'static Entry, args: &str) -> Command {
        Command::Run(Invocation {
            entry,
            args: args.to_string(),
        })
    }

    /// Run it: the entry's `run` over the session.
    pub fn run(&self, b: &mut dyn Host) -> Result<Outcome> {
        match self.entry.run {
            Some(run) => run(b, &self.args),
            None => bail!("{}: this command cannot run here", self.entry.name),
        }
    }
}

impl PartialEq for Invocation {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.entry, other.entry) && self.args == other.args
    }
}

impl std::fmt::Debug for Invocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Run({:?} {:?})", self.entry.name, self.args)
    }
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
    /// How it runs, when its `parse` gives `Command::Run` (see
    /// `Invocation::command`); None for the structure of a `commands`
    /// block and `continue`, which have a variant of `Command`, and for a
    /// group of subcommands (`waits`).
    pub run: Option<Run>,
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
            C::Commands { .. } => &breakpoints::COMMANDS,
            C::End => &breakpoints::END,
            C::Silent => &breakpoints::SILENT,
            C::Continue => &running::CONTINUE,
            C::Run(i) => i.entry,
            C::Nothing => return None,
        })
    }
}

impl Command {
    /// Whether this is a command `entry` runs (`Command::Run` of it).
    pub fn is(&self, entry: &Entry) -> bool {
        matches!(self, Command::Run(i) if std::ptr::eq(i.entry, entry))
    }

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
