//! `enable`, `disable`, `ignore`: breakpoints kept but not stopping, or
//! stopping again; and the breakpoint numbers they take (N, or gdb's
//! `$bpnum` that `save breakpoints` writes).

use super::super::check::{CheckCtx, run_args};
use super::super::{Entry, Host, Invocation, Needs};
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};

/// A breakpoint number as written: N, or `$bpnum` (gdb's number of the
/// last breakpoint set, which `save breakpoints` writes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BpNum {
    Num(u32),
    Last,
}

impl BpNum {
    /// `word` as a breakpoint number of command `cmd` (None: not one).
    pub fn parse(word: &str) -> Option<BpNum> {
        if word == "$bpnum" {
            return Some(BpNum::Last);
        }
        word.parse::<u32>().ok().map(BpNum::Num)
    }

    /// The number it names in the session.
    pub fn resolve(self, h: &dyn Host) -> Result<u32> {
        match self {
            BpNum::Num(n) => Ok(n),
            BpNum::Last => h
                .last_breakpoint()
                .ok_or_else(|| anyhow!("$bpnum names no breakpoint: none was set yet")),
        }
    }

    /// The number for a script's check: `breakpoint_scope`'s argument.
    pub fn in_script(self) -> Option<u32> {
        match self {
            BpNum::Num(n) => Some(n),
            BpNum::Last => None,
        }
    }
}

/// `enable|disable [breakpoints] [N...]`: the numbers (none: all).
pub fn parse_numbers(name: &str, rest: &str) -> Result<Vec<BpNum>> {
    let rest = rest.strip_prefix("breakpoints").unwrap_or(rest).trim();
    rest.split_whitespace()
        .map(|w| {
            BpNum::parse(w).ok_or_else(|| {
                anyhow!(
                    "{name} takes breakpoint numbers ({name} 1 2; none: all), not '{}'",
                    crate::shown::shown(w)
                )
            })
        })
        .collect()
}

/// In a script, each number must name a breakpoint set by an earlier
/// line (inside a `commands` block nothing is known: they are all set).
fn check_numbers(ctx: &CheckCtx, name: &str, nums: &[BpNum]) -> Result<()> {
    if ctx.breakpoints.is_none() {
        return Ok(());
    }
    for n in nums {
        if ctx.breakpoint_scope(n.in_script()).is_none() {
            match n {
                BpNum::Num(i) => bail!(
                    "{name} {i}: no breakpoint {i} at this point of the script (set it first)"
                ),
                BpNum::Last => bail!("{name} $bpnum: no breakpoint is set before this line"),
            }
        }
    }
    Ok(())
}

fn run_enable(h: &mut dyn Host, name: &str, rest: &str, on: bool) -> Result<Outcome> {
    let ids = parse_numbers(name, rest)?
        .into_iter()
        .map(|n| n.resolve(h))
        .collect::<Result<Vec<u32>>>()?;
    Ok(Outcome::shows(h.enable_breakpoints(&ids, on)?))
}

pub static ENABLE: Entry = Entry {
    name: "enable",
    aliases: &["en"],
    usage: "enable [N...]",
    summary: "enable breakpoints N (all without arguments): they stop again",
    help: "A disabled breakpoint is put back into the backend (its int3s written again) and \
           stops again at its next hit. 'enable breakpoints N...' is the same; N may be $bpnum, \
           the last breakpoint set.\n\n\
           In a script, each N must be set by an earlier line.",
    examples: &["enable 1 2", "enable"],
    parse: |rest| parse_numbers("enable", rest).map(|_| Invocation::command(&ENABLE, rest)),
    // int3s are written
    needs: Needs::Stop,
    check: |ctx, cmd| {
        check_numbers(
            ctx,
            "enable",
            &parse_numbers("enable", run_args("enable", cmd)?)?,
        )
    },
    run: Some(|h, rest| run_enable(h, "enable", rest, true)),
};

pub static DISABLE: Entry = Entry {
    name: "disable",
    aliases: &["dis", "disa"],
    usage: "disable [N...]",
    summary: "disable breakpoints N (all without arguments): kept, not stopping",
    help: "A disabled breakpoint keeps its number, locations, condition, commands and hit \
           count, but its int3s are taken out of the backend (code shared with another enabled \
           breakpoint or a probe keeps its int3) until 'enable N'; 'info breakpoints' shows n \
           in its Enb column. 'disable breakpoints N...' is the same; N may be $bpnum.\n\n\
           In a script, each N must be set by an earlier line.",
    examples: &["disable 1", "disable"],
    parse: |rest| parse_numbers("disable", rest).map(|_| Invocation::command(&DISABLE, rest)),
    // int3s are taken out
    needs: Needs::Stop,
    check: |ctx, cmd| {
        check_numbers(
            ctx,
            "disable",
            &parse_numbers("disable", run_args("disable", cmd)?)?,
        )
    },
    run: Some(|h, rest| run_enable(h, "disable", rest, false)),
};

/// `ignore N COUNT`.
pub fn parse_ignore(rest: &str) -> Result<(BpNum, u64)> {
    let usage = "ignore needs a breakpoint number and a count: ignore 1 5";
    let mut words = rest.split_whitespace();
    let (Some(n), Some(c), None) = (words.next(), words.next(), words.next()) else {
        bail!("{usage}");
    };
    let n = BpNum::parse(n).ok_or_else(|| {
        anyhow!(
            "ignore: '{}' is not a breakpoint number: {usage}",
            crate::shown::shown(n)
        )
    })?;
    let c = c.parse::<u64>().map_err(|_| {
        anyhow!(
            "ignore: the count '{}' is not a number of hits (0 or more): {usage}",
            crate::shown::shown(c)
        )
    })?;
    Ok((n, c))
}

pub static IGNORE: Entry = Entry {
    name: "ignore",
    aliases: &[],
    usage: "ignore N COUNT",
    summary: "let the next COUNT hits of breakpoint N pass without stopping",
    help: "gdb's ignore count: the next COUNT hits of breakpoint N whose condition holds are \
           counted ('breakpoint already hit') but do not stop the backend nor run its commands; \
           'info breakpoints' shows how many are left. COUNT 0 stops at the next hit again. N \
           may be $bpnum.\n\n\
           In a script, N must be set by an earlier line.",
    examples: &["ignore 1 100", "ignore 1 0"],
    parse: |rest| parse_ignore(rest).map(|_| Invocation::command(&IGNORE, rest)),
    needs: Needs::Nothing,
    check: |ctx, cmd| {
        let (n, _) = parse_ignore(run_args("ignore", cmd)?)?;
        check_numbers(ctx, "ignore", &[n])
    },
    run: Some(|h, rest| {
        let (n, count) = parse_ignore(rest)?;
        let id = n.resolve(h)?;
        Ok(Outcome::shows(h.set_ignore(id, count)?))
    }),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_bpnum() {
        assert_eq!(parse_numbers("enable", "").unwrap(), vec![]);
        assert_eq!(
            parse_numbers("disable", "breakpoints 1 $bpnum").unwrap(),
            vec![BpNum::Num(1), BpNum::Last]
        );
        let e = parse_numbers("disable", "1 x").unwrap_err().to_string();
        assert_eq!(
            e,
            "disable takes breakpoint numbers (disable 1 2; none: all), not 'x'"
        );
        assert_eq!(parse_ignore("2 5").unwrap(), (BpNum::Num(2), 5));
        assert_eq!(parse_ignore("$bpnum 0").unwrap(), (BpNum::Last, 0));
        for bad in ["", "1", "1 2 3", "x 2", "1 -2"] {
            let e = parse_ignore(bad).unwrap_err().to_string();
            assert!(e.contains("ignore 1 5"), "{bad}: {e}");
        }
    }
}
