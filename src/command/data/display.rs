//! `display EXPR`, `undisplay [N...]`, `info display`: expressions the
//! session shows at each stop ("1: expr = value", as gdb shows them;
//! `session/display.rs`).

use super::super::check::{run_args, short};
use super::super::{Entry, Host, Invocation, Needs};
use super::parse_print;
use crate::displays::Display;
use crate::expr::format::Radix;
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};

pub static DISPLAY: Entry = Entry {
    name: "display",
    aliases: &["disp"],
    usage: "display[/x|/d|/u|/o|/t|/c|/NFU] [EXPR]",
    summary: "show EXPR at each stop (no EXPR: show the displays now)",
    help: "EXPR is evaluated like print's and shown at once, then at every stop where the stop \
           line is shown (a breakpoint, an interrupt, a signal; not at a silent breakpoint's \
           hit) as 'N: EXPR = VALUE', gdb's way; where it cannot be evaluated, its line says \
           <error: ...>. An EXPR that cannot be evaluated now is refused, as gdb refuses it. The \
           formats /x /d /u /o /t /c are print's; /i, /s, a count or a unit (/3i, /2xw) show \
           memory as x does ('N: x/i $pc' and x's lines: display/i $pc follows the \
           instructions while stepping). Without EXPR, the displays are shown now.\n\n\
           In a script, EXPR is type-checked before attaching.",
    examples: &[
        "display plansource->num_custom_plans",
        "display/x MyProc->pid",
        "display/i $pc",
        "display",
    ],
    parse: |rest| parse_display(rest).map(|_| Invocation::command(&DISPLAY, rest)),
    needs: Needs::Memory,
    check: |ctx, cmd| match parse_display(run_args("display", cmd)?)? {
        Some(a) => ctx.typecheck(crate::postgres::datum::split_cast(&a.expr)?.0),
        None => Ok(()),
    },
    run: Some(display),
};

/// `display[/F] [EXPR]`, parsed.
#[derive(Debug, PartialEq)]
pub struct DisplayArgs {
    /// The format letter (None: natural).
    pub format: Option<char>,
    /// Shown as `x` shows memory: the count and the unit (gdb's rule:
    /// format i or s, or a unit given).
    pub examine: Option<(usize, char)>,
    pub expr: String,
}

/// `display[/F] [EXPR]` (None: no expression). `/x` is print's format;
/// `/i`, `/s`, `/3i`, `/2xw` are x's.
pub fn parse_display(rest: &str) -> Result<Option<DisplayArgs>> {
    if rest.trim().is_empty() {
        return Ok(None);
    }
    if let Some(r) = rest.strip_prefix('/') {
        let (spec, expr) = r.split_at(r.find(char::is_whitespace).unwrap_or(r.len()));
        let memory = spec.contains(['i', 's', 'b', 'h', 'w', 'g']);
        if memory && !spec.is_empty() {
            let (count, format, unit) = crate::expr::examine::parse_spec(spec)
                .map_err(|e| anyhow!("{}", format!("{e:#}").replacen("x/", "display/", 1)))?;
            let format = format.unwrap_or('x');
            let unit = match format {
                'i' | 's' => 'b',
                f => unit.unwrap_or_else(|| crate::expr::examine::default_unit(f, 'w')),
            };
            if expr.trim().is_empty() {
                bail!("display/{spec} needs an expression: display/{spec} $pc");
            }
            return Ok(Some(DisplayArgs {
                format: Some(format),
                examine: Some((count.unwrap_or(1), unit)),
                expr: expr.trim().to_string(),
            }));
        }
    }
    let (radix, expr) = parse_print(rest).map_err(|e| {
        anyhow!(
            "{}",
            format!("{e:#}")
                .replace("print format", "display format")
                .replace("print needs", "display needs")
        )
    })?;
    let format = match radix {
        Radix::Natural => None,
        _ => rest[1..].chars().next(),
    };
    Ok(Some(DisplayArgs {
        format,
        examine: None,
        expr,
    }))
}

fn display(h: &mut dyn Host, rest: &str) -> Result<Outcome> {
    let Some(args) = parse_display(rest)? else {
        // all of them, now
        let list: Vec<_> = h.displays().list.clone();
        let mut lines = Vec::new();
        for d in list.iter().filter(|d| d.enabled) {
            lines.push(line(h, d));
        }
        return Ok(Outcome::shows(lines.join("\n")));
    };
    // evaluated first: an expression that fails now is not kept (gdb's way)
    let probe = Display {
        id: 0,
        expr: args.expr.clone(),
        format: args.format,
        examine: args.examine,
        enabled: true,
    };
    let value = shown(h, &probe)?;
    let id = h.displays().add(&args.expr, args.format, args.examine);
    Ok(Outcome::shows(format!("{id}: {value}")))
}

fn radix_of(format: Option<char>) -> Radix {
    format
        .and_then(|f| Radix::from_letter(&f.to_string()))
        .unwrap_or(Radix::Natural)
}

/// What follows a display's `N: `: `EXPR = VALUE`, or for a memory display
/// `x/i $pc` and x's lines.
fn shown(h: &mut dyn Host, d: &Display) -> Result<String> {
    match d.examine_head() {
        Some((head, sep)) => {
            let (n, u) = d.examine.unwrap_or((1, 'b'));
            let text = h.examine(Some(n), d.format, Some(u), Some(&d.expr))?;
            Ok(format!("{head}{sep}{text}"))
        }
        None => Ok(format!(
            "{} = {}",
            d.label(),
            h.value_text(&d.expr, radix_of(d.format))?
        )),
    }
}

/// One display's line now (an error: gdb's `<error: ...>`).
fn line(h: &mut dyn Host, d: &Display) -> String {
    match shown(h, d) {
        Ok(v) => format!("{}: {v}", d.id),
        Err(e) => format!(
            "{}: {} = <error: {}>",
            d.id,
            d.label(),
            short(&format!("{e:#}"))
        ),
    }
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
        Ok(Outcome::shows(h.displays().remove(&ids).join("\n")))
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
    run: Some(|h, _| Ok(Outcome::shows(h.displays().info()))),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_numbers() {
        assert_eq!(parse_display("").unwrap(), None);
        let a = parse_display("/x MyProc->pid").unwrap().unwrap();
        assert_eq!((a.format, a.examine), (Some('x'), None));
        assert_eq!(a.expr, "MyProc->pid");
        let a = parse_display("a + b").unwrap().unwrap();
        assert_eq!(
            (a.format, a.examine, a.expr.as_str()),
            (None, None, "a + b")
        );
        let a = parse_display("/i $pc").unwrap().unwrap();
        assert_eq!((a.format, a.examine), (Some('i'), Some((1, 'b'))));
        let a = parse_display("/3i $pc").unwrap().unwrap();
        assert_eq!((a.format, a.examine), (Some('i'), Some((3, 'b'))));
        let a = parse_display("/2w &x").unwrap().unwrap();
        assert_eq!((a.format, a.examine), (Some('x'), Some((2, 'w'))));
        let a = parse_display("/s DataDir").unwrap().unwrap();
        assert_eq!((a.format, a.examine), (Some('s'), Some((1, 'b'))));
        assert!(parse_display("/i").is_err());
        let e = parse_display("/q x").unwrap_err().to_string();
        assert!(e.starts_with("unknown display format '/q'"), "{e}");
        assert_eq!(parse_undisplay("1 3").unwrap(), vec![1, 3]);
        assert!(parse_undisplay("x").is_err());
    }
}
