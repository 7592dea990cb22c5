//! `pgdbg completions SHELL` and `pgdbg man`: shell completions and manual
//! pages generated from the clap definitions of the command line (and, for
//! `pgdbg.1`, the session's commands from their registry), so they never
//! drift from `--help`.

use crate::command;
use anyhow::{Context, Result};
use clap_complete::Shell;
use roff::{Roff, bold, roman};
use std::io::Write;
use std::path::Path;

/// The completion script of `shell` for `cmd` (pgdbg's command line).
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) {
    clap_complete::generate(shell, &mut cmd, "pgdbg", out);
}

/// `pgdbg.1`: clap's page for the whole command line, then the commands
/// of a session (the prompt's `help`, with usage and detail).
pub fn main_page(cmd: clap::Command, out: &mut dyn Write) -> Result<()> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    clap_mangen::Man::new(cmd).render(out)?;
    out.write_all(session_section().as_bytes())?;
    Ok(())
}

fn session_section() -> String {
    let mut r = Roff::default();
    r.control("SH", ["SESSION COMMANDS"]);
    r.text([roman(
        "At the (pgdbg) prompt, in --script files and with --ex. At a terminal's prompt the \
         backend runs while pgdbg waits for a command; each command stops it only for as long \
         as it needs; a breakpoint hit, Ctrl-C or interrupt stops it until continue.",
    )]);
    for e in command::entries() {
        r.control("TP", [] as [&str; 0]);
        r.text([bold(e.usage)]);
        let mut text = e.summary.to_string();
        if !e.help.is_empty() {
            text.push_str(". ");
            text.push_str(&e.help.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        if !e.aliases.is_empty() {
            text.push_str(&format!(" (also: {})", e.aliases.join(", ")));
        }
        r.text([roman(text)]);
    }
    r.to_roff()
}

/// Every page (`pgdbg.1`, `pgdbg-attach.1`, ...) into `dir`; returns
/// their paths.
pub fn pages_to(cmd: clap::Command, dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub = sub
            .clone()
            .display_name(format!("pgdbg-{}", sub.get_name()));
        let man = clap_mangen::Man::new(sub);
        written.push(
            man.generate_to(dir)
                .with_context(|| format!("cannot write into {}", dir.display()))?,
        );
    }
    let main = dir.join("pgdbg.1");
    let mut f =
        std::fs::File::create(&main).with_context(|| format!("cannot write {}", main.display()))?;
    main_page(cmd, &mut f)?;
    written.insert(0, main);
    Ok(written)
}
