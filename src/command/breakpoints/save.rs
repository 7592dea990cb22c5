//! `save breakpoints FILE`: the breakpoints as the commands that make
//! them again, gdb's way (`$bpnum` for the number each `break` gets), so
//! that `source FILE` (or `--script FILE`) sets them in another session.

use super::super::BreakpointView;
use super::super::check::{no_check, run_args};
use super::super::{Entry, Invocation, Needs};
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};

pub static SAVE: Entry = Entry {
    name: "save",
    aliases: &[],
    usage: "save breakpoints FILE",
    summary: "write the session's settings to a file: save breakpoints FILE",
    help: "'save breakpoints FILE' writes the breakpoints as commands that 'source FILE' runs \
           to set them again.",
    examples: &[],
    parse: |_| bail!("save needs a subcommand: save breakpoints FILE"),
    needs: Needs::Nothing,
    check: no_check,
    run: None,
};

pub static SAVE_BREAKPOINTS: Entry = Entry {
    name: "save breakpoints",
    aliases: &[],
    usage: "save breakpoints FILE",
    summary: "write the breakpoints to FILE as commands that 'source FILE' sets again",
    help: "As gdb writes them: 'break LOCATION' (or tbreak) for each breakpoint, then, \
           indented, 'condition $bpnum EXPR', 'ignore $bpnum COUNT' and its 'commands' block, \
           and 'disable $bpnum' when it is disabled ($bpnum is the number of the breakpoint \
           just set). 'source FILE' or --script FILE in another session sets them again.\n\n\
           In a script, FILE's directory must exist.",
    examples: &["save breakpoints /tmp/breakpoints.gdb"],
    parse: |rest| file_arg(rest).map(|_| Invocation::command(&SAVE_BREAKPOINTS, rest)),
    needs: Needs::Nothing,
    check: |_, cmd| {
        let file = file_arg(run_args("save breakpoints", cmd)?)?;
        let dir = std::path::Path::new(file)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            bail!(
                "save breakpoints {}: no directory {}: give a file in an existing directory",
                crate::shown::shown(file),
                dir.display()
            );
        }
        Ok(())
    },
    run: Some(|h, rest| {
        let file = file_arg(rest)?;
        let text = save_text(&h.breakpoint_list());
        if text.is_empty() {
            bail!("Nothing to save: no breakpoints are set");
        }
        std::fs::write(file, text).map_err(|e| {
            anyhow!(
                "cannot write {}: {e}: give a file in a writable directory",
                crate::shown::shown(file)
            )
        })?;
        Ok(Outcome::shows(format!("Saved to file '{file}'.")))
    }),
};

/// The file's name: the rest of the line.
fn file_arg(rest: &str) -> Result<&str> {
    let f = rest.trim();
    if f.is_empty() {
        bail!("save breakpoints needs a file name, e.g. save breakpoints /tmp/breakpoints.gdb");
    }
    Ok(f)
}

/// The commands that set `bps` again, as gdb's `save breakpoints` writes
/// them ("" without breakpoints).
pub fn save_text(bps: &[BreakpointView]) -> String {
    let mut s = String::new();
    for b in bps {
        let kind = match b.watch {
            Some(w) => w,
            None if b.temporary => "tbreak",
            None => "break",
        };
        s.push_str(&format!("{kind} {}\n", b.spec));
        if let Some(c) = &b.condition {
            s.push_str(&format!("  condition $bpnum {c}\n"));
        }
        if b.ignore > 0 {
            s.push_str(&format!("  ignore $bpnum {}\n", b.ignore));
        }
        if !b.commands.is_empty() {
            s.push_str("  commands\n");
            for l in &b.commands {
                s.push_str(&format!("    {l}\n"));
            }
            s.push_str("  end\n");
        }
        if !b.enabled {
            s.push_str("disable $bpnum\n");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_gdb_writes_them() {
        assert_eq!(save_text(&[]), "");
        let bps = [
            BreakpointView {
                id: 1,
                spec: "f".into(),
                condition: Some("x > 0".into()),
                ignore: 3,
                commands: vec!["silent".into(), "print x".into(), "continue".into()],
                ..Default::default()
            },
            BreakpointView {
                id: 2,
                spec: "plancache.c:1150".into(),
                temporary: true,
                enabled: true,
                ..Default::default()
            },
        ];
        assert_eq!(
            save_text(&bps),
            "break f\n  condition $bpnum x > 0\n  ignore $bpnum 3\n  commands\n    silent\n    \
             print x\n    continue\n  end\ndisable $bpnum\ntbreak plancache.c:1150\n"
        );
        // and it reads back as a script
        let script = crate::command::lines::assemble("saved", &save_text(&bps)).unwrap();
        assert_eq!(script.len(), 6);
        // a watchpoint is saved as the command that set it
        let w = [BreakpointView {
            id: 3,
            spec: "CurrentMemoryContext".into(),
            condition: Some("CurrentMemoryContext != 0".into()),
            enabled: true,
            watch: Some("rwatch"),
            ..Default::default()
        }];
        assert_eq!(
            save_text(&w),
            "rwatch CurrentMemoryContext\n  condition $bpnum CurrentMemoryContext != 0\n"
        );
    }
}
