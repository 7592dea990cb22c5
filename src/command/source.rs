//! Source files: `list` shows their lines, `directory` says where to find
//! them.  Only the debug info and the files are read.

use super::check::misrouted;
use super::{Command, Entry, Needs};
use anyhow::{Result, bail};

pub static ENTRIES: &[&Entry] = &[&LIST, &DIRECTORY];

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
    parse: |rest| {
        let r = rest.trim();
        Ok(Command::List((!r.is_empty()).then(|| r.to_string())))
    },
    needs: Needs::Memory,
    check: |ctx, cmd| match cmd {
        Command::List(None) => Ok(()),
        Command::List(Some(s)) => {
            for part in s.split(',').map(str::trim) {
                if part.is_empty() || part == "-" || part.parse::<u32>().is_ok() {
                    continue;
                }
                check_line_spec(ctx, part)?;
            }
            Ok(())
        }
        _ => Err(misrouted("list", cmd)),
    },
    run: None,
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
    parse: |rest| {
        let r = rest.trim();
        Ok(Command::Directory((!r.is_empty()).then(|| r.to_string())))
    },
    needs: Needs::Nothing,
    check: |_, cmd| match cmd {
        Command::Directory(Some(d)) if !std::path::Path::new(d).is_dir() => {
            bail!("{d} is not a directory: give one that holds the sources")
        }
        Command::Directory(_) => Ok(()),
        _ => Err(misrouted("directory", cmd)),
    },
    run: None,
};

/// A FUNCTION or FILE:LINE must name something the debug info has.
fn check_line_spec(ctx: &super::CheckCtx, spec: &str) -> Result<()> {
    ctx.location(spec)
}
