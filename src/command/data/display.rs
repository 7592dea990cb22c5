//! `display EXPR`, `undisplay [N...]`, `info display`: expressions the
//! session shows at each stop ("1: expr = value", as gdb shows them;
//! `session/display.rs`).

use super::super::check::{run_args, short};
use super::super::{Entry, Host, Invocation, Needs};
use super::parse_print;
use crate::expr::format::Radix;
use crate::postgres::backend::Flow;
use anyhow::{Result, anyhow, bail};

pub static DISPLAY: Entry = Entry {
    name: "display",
    aliases: &["disp"],
    usage: "display[/x|/d|/u|/o|/t|/c] [EXPR]",
    summary: "show EXPR at each stop (no EXPR: show the displays now)",
    help: "EXPR is evaluated like print's and shown at once, then at every stop where the stop \
           line is shown (a breakpoint, an interrupt, a signal; not at a silent breakpoint's \
           hit) as 'N: EXPR = VALUE', gdb's way; where it cannot be evaluated, its line says \
           <error: ...>. An EXPR that cannot be evaluated now is refused, as gdb refuses it. The \
           formats are print's. Without EXPR, the displays are shown now.\n\n\
           In a script, EXPR is type-checked before attaching.",
    examples: &[
        "display plansource->num_custom_plans",
        "display/x MyProc->pid",
        "display",
    ],
    parse: |rest| parse_display(rest).map(|_| Invocation::command(&DISPLAY, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| match parse_display(run_args("display", cmd)?)? {
        Some((_, expr)) => ctx.typecheck(&expr),
        None => Ok(()),
    },
    run: Some(display),
};

/// `display[/F] [EXPR]`: the format letter and the expression (None: no
/// expression).
pub fn parse_display(rest: &str) -> Result<Option<(Option<char>, String)>> {
    if rest.trim().is_empty() {
        return Ok(None);
    }
    let (radix, expr) = parse_print(rest).map_err(|e| {
        anyhow!(
            "{}",
            e.to_string()
                .replace("print format", "display format")
                .replace("print needs", "display needs")
        )
    })?;
    let letter = match radix {
        Radix::Natural => None,
        _ => rest[1..].chars().next(),
    };
    Ok(Some((letter, expr)))
}

fn display(h: &mut dyn Host, rest: &str) -> Result<(String, Flow)> {
    let Some((format, expr)) = parse_display(rest)? else {
        // all of them, now
        let list: Vec<_> = h.displays().list.clone();
        let mut lines = Vec::new();
        for d in list.iter().filter(|d| d.enabled) {
            lines.push(line(h, &d.label(), d.id, &d.expr, d.format)?);
        }
        return Ok((lines.join("\n"), Flow::Continue));
    };
    // evaluated first: an expression that fails now is not kept (gdb's way)
    let radix = radix_of(format);
    let value = h.value_text(&expr, radix)?;
    let id = h.displays().add(&expr, format);
    let label = h
        .displays()
        .list
        .last()
        .map(|d| d.label())
        .unwrap_or_default();
    Ok((format!("{id}: {label} = {value}"), Flow::Continue))
}

fn radix_of(format: Option<char>) -> Radix {
    format
        .and_then(|f| Radix::from_letter(&f.to_string()))
        .unwrap_or(Radix::Natural)
}

/// One display's line now (an error: gdb's `<error: ...>`).
fn line(h: &mut dyn Host, label: &str, id: u32, expr: &str, f: Option<char>) -> Result<String> {
    Ok(match h.value_text(expr, radix_of(f)) {
        Ok(v) => format!("{id}: {label} = {v}"),
        Err(e) => format!("{id}: {label} = <error: {}>", short(&e.to_string())),
    })
}

pub static UNDISPLAY: Entry = Entry {
    name: "undisplay",
    aliases: &["undisp"],
    usage: "undisplay [N...]",
    summary: "stop showing displays N at each stop (all without arguments)",
    help: "Removes displays N... (their numbers as 'info display' lists them; all of them \
           without arguments, without asking).",
    examples: &["undisplay 1", "undisplay"],
    parse: |rest| parse_undisplay(rest).map(|_| Invocation::command(&UNDISPLAY, rest)),
    needs: Needs::Nothing,
    check: |_, cmd| parse_undisplay(run_args("undisplay", cmd)?).map(|_| ()),
    run: Some(|h, rest| {
        let ids = parse_undisplay(rest)?;
        Ok((h.displays().remove(&ids).join("\n"), Flow::Continue))
    }),
};

/// `undisplay [N...]`: the numbers (none: all).
pub fn parse_undisplay(rest: &str) -> Result<Vec<u32>> {
    rest.split_whitespace()
        .map(|w| {
            w.parse::<u32>().map_err(|_| {
                anyhow!(
                    "undisplay takes display numbers (see info display), not '{}'",
                    crate::shown::shown(w)
                )
            })
        })
        .collect()
}

pub static INFO_DISPLAY: Entry = Entry {
    name: "info display",
    aliases: &[],
    usage: "info display",
    summary: "the expressions shown at each stop, with their numbers",
    help: "gdb's list: each display's number, whether it is enabled and its expression (with \
           its format, e.g. /x).",
    examples: &["info display"],
    parse: |rest| {
        if !rest.is_empty() {
            bail!("info display takes no argument");
        }
        Ok(Invocation::command(&INFO_DISPLAY, rest))
    },
    needs: Needs::Nothing,
    check: |_, _| Ok(()),
    run: Some(|h, _| Ok((h.displays().info(), Flow::Continue))),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_numbers() {
        assert_eq!(parse_display("").unwrap(), None);
        assert_eq!(
            parse_display("/x MyProc->pid").unwrap(),
            Some((Some('x'), "MyProc->pid".into()))
        );
        assert_eq!(
            parse_display("a + b").unwrap(),
            Some((None, "a + b".into()))
        );
        let e = parse_display("/q x").unwrap_err().to_string();
        assert!(e.starts_with("unknown display format '/q'"), "{e}");
        assert_eq!(parse_undisplay("1 3").unwrap(), vec![1, 3]);
        assert!(parse_undisplay("x").is_err());
    }
}
