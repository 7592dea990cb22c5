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
    out.write_all(environment_section().as_bytes())?;
    Ok(())
}

/// The `PGDBG_*` variables (config.rs), those for pgdbg's own tests last.
fn environment_section() -> String {
    let mut r = Roff::default();
    r.control("SH", ["ENVIRONMENT"]);
    r.text([roman(
        "DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXTIME and \
         DEBUGINFOD_MAXSIZE are read as elfutils' debuginfod client reads them. pgdbg's own:",
    )]);
    let mut vars: Vec<&crate::config::Var> = crate::config::VARS.iter().collect();
    vars.sort_by_key(|v| v.for_tests);
    for v in vars {
        r.control("TP", [] as [&str; 0]);
        r.text([bold(v.name)]);
        let what = if v.for_tests {
            format!("{} (for pgdbg's own tests)", v.what)
        } else {
            v.what.to_string()
        };
        r.text([roman(what)]);
    }
    r.to_roff()
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
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
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

/// `docs/commands.md`: the command line (each subcommand's `--help`) and
/// every session command of the registry (usage, aliases, help, examples),
/// so that the reference never drifts from the code: `tests/docs.rs`
/// compares the file with this and says how to regenerate it.
pub fn commands_markdown(cmd: clap::Command) -> String {
    let mut cmd = cmd.term_width(100).disable_help_subcommand(true);
    cmd.build();
    let mut s = String::from(
        "# Command reference\n\n\
         <!-- Generated from the command definitions: do not edit. Regenerate with\n     \
         PGDBG_BLESS=1 cargo test --release --test docs -->\n\n\
         Back to the [README](../README.md). The same text as `pgdbg SUBCOMMAND --help` and the \
         prompt's `help COMMAND`.\n\n## Command line\n",
    );
    let mut subs = Vec::new();
    visible_subcommands(&cmd, &mut subs);
    for sub in subs {
        let name = sub.get_bin_name().unwrap_or(sub.get_name()).to_string();
        s.push_str(&format!("\n### {name}\n\n```text\n"));
        let help = sub.clone().render_long_help().to_string();
        for line in help.trim_end().lines() {
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s.push_str("```\n");
    }
    s.push_str(
        "\n## Session commands\n\nAt the `(pgdbg)` prompt, in `--script` files and with `--ex`, \
         by family as `help` lists them.\n",
    );
    for (family, entries) in command::REGISTRY {
        s.push_str(&format!("\n### {family}\n"));
        for e in *entries {
            s.push_str(&format!("\n#### {}\n\n", e.name));
            s.push_str(&format!("```text\n{}\n```\n\n", e.usage));
            s.push_str(&markdown_text(e.summary));
            s.push('\n');
            if !e.aliases.is_empty() {
                let aliases: Vec<String> = e.aliases.iter().map(|a| format!("`{a}`")).collect();
                s.push_str(&format!("\nAlso: {}.\n", aliases.join(", ")));
            }
            for p in e.help.split("\n\n").filter(|p| !p.trim().is_empty()) {
                s.push('\n');
                s.push_str(&markdown_text(p));
                s.push('\n');
            }
            if !e.examples.is_empty() {
                s.push_str("\nExamples:\n\n```text\n");
                for x in e.examples {
                    s.push_str(x);
                    s.push('\n');
                }
                s.push_str("```\n");
            }
        }
    }
    s
}

/// The subcommands a user sees (`--help` lists them), depth first.
fn visible_subcommands(cmd: &clap::Command, out: &mut Vec<clap::Command>) {
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        out.push(sub.clone());
        visible_subcommands(sub, out);
    }
}

/// Help text as a Markdown paragraph: whitespace runs joined, and the
/// characters Markdown would read as markup escaped.
fn markdown_text(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut s = String::with_capacity(joined.len());
    for c in joined.chars() {
        if matches!(c, '\\' | '*' | '[' | ']' | '<' | '`' | '|') {
            s.push('\\');
        }
        s.push(c);
    }
    s
}
