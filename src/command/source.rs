//! Source files: `list` shows their lines, `directory` says where to find
//! them.  Only the debug info and the files are read.  And files of
//! commands: `source FILE` runs one (`source/sourcing.rs`).

use super::check::run_args;
use super::{Command, Entry, Invocation, Needs};
use crate::postgres::backend::Outcome;
use anyhow::{Result, bail};

mod sourcing;

pub static ENTRIES: &[&Entry] = &[&LIST, &DIRECTORY, &SOURCE];

pub static LIST: Entry = Entry {
    name: "list",
    aliases: &["l"],
    usage: "list [FUNCTION | FILE:LINE | LINE | FIRST,LAST | FIRST, | -]",
    summary: "source lines: ten around a function or a line, or the next ten",
    help: "With FUNCTION: ten lines centred on its declaration; with FILE:LINE or LINE (in the \
           file listed last, or the selected frame's): ten lines centred on it; with FIRST,LAST \
           those lines. Without an argument: the ten lines after the last listed, or around the \
           selected frame's line the first time (the backend is stopped for it); 'list -' the \
           ten before the last listed. Lines are 'N<TAB>text', as gdb prints them.\n\n\
           The file is read where the debug info says it was compiled (the unit's compilation \
           directory and the file's name); 'directory DIR' adds a directory to look in first.",
    examples: &[
        "list GetCachedPlan",
        "list plancache.c:1150",
        "list 1140,1145",
        "list",
        "list -",
    ],
    parse: |rest| Ok(Invocation::command(&LIST, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| match optional(run_args("list", cmd)?) {
        None => Ok(()),
        Some(s) => {
            for part in s.split(',').map(str::trim) {
                if part.is_empty() || part == "-" || part.parse::<u32>().is_ok() {
                    continue;
                }
                check_line_spec(ctx, part)?;
            }
            Ok(())
        }
    },
    run: Some(|h, rest| Ok(Outcome::shows(h.list(optional(rest))?))),
};

pub static DIRECTORY: Entry = Entry {
    name: "directory",
    aliases: &["dir"],
    usage: "directory [DIR]",
    summary: "add a directory to search for source files first (list, disassemble /s)",
    help: "DIR is searched for a source file's name before the place the debug info gives \
           (useful when the sources moved after the build). Without DIR: the directories \
           searched, as gdb shows them ($cdir is the compilation directory, $cwd pgdbg's).",
    examples: &[
        "directory /usr/src/postgresql-15/src/backend/utils/cache",
        "directory",
    ],
    parse: |rest| Ok(Invocation::command(&DIRECTORY, rest)),
    needs: Needs::Nothing,
    check: |_, cmd| match optional(run_args("directory", cmd)?) {
        Some(d) if !std::path::Path::new(d).is_dir() => {
            bail!("{d} is not a directory: give one that holds the sources")
        }
        _ => Ok(()),
    },
    run: Some(|h, rest| Ok(Outcome::shows(h.directory(optional(rest))?))),
};

/// The argument, trimmed (None: none).
fn optional(rest: &str) -> Option<&str> {
    let r = rest.trim();
    (!r.is_empty()).then_some(r)
}

/// A FUNCTION or FILE:LINE must name something the debug info has.
fn check_line_spec(ctx: &super::CheckCtx, spec: &str) -> Result<()> {
    ctx.location(spec)
}

pub static SOURCE: Entry = Entry {
    name: "source",
    aliases: &[],
    usage: "source FILE",
    summary: "run the commands of FILE (a script, or what 'save breakpoints' wrote)",
    help: "FILE holds pgdbg commands, one per line, with commands ... end blocks, as --script \
           takes them; they run one after the other, each taking the stop it needs at the \
           prompt. The whole file is parsed and its expressions type-checked before its first \
           line runs; a line that fails ends the file there, naming FILE:LINE. A file may \
           source others, at most 64 deep (gdb sets no limit).\n\n\
           In a script, FILE's lines are checked before attaching, as if they were written \
           where 'source' is.",
    examples: &["source /tmp/breakpoints.gdb"],
    parse: |rest| sourcing::file_arg(rest).map(|_| Invocation::command(&SOURCE, rest)),
    // each of the file's commands takes what it needs
    needs: Needs::RunState,
    check: |_, cmd| {
        let path = sourcing::file_arg(run_args("source", cmd)?)?;
        super::lines::read_sourced(path).map(|_| ())
    },
    run: Some(sourcing::source),
};

/// The file of a `source` command (None: another command).
pub fn sourced_file(cmd: &Command) -> Option<&str> {
    if !cmd.is(&SOURCE) {
        return None;
    }
    sourcing::file_arg(run_args("source", cmd).ok()?).ok()
}
