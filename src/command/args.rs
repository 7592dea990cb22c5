//! Pieces of argument syntax shared by several commands: comments,
//! comma-separated expressions, numbers, durations and the `--for` /
//! `--count` / `--stacks` options.

pub use crate::expr::parse::split_args;
use anyhow::{Result, anyhow, bail};
use std::time::Duration;

/// `line` without its comment: `#` starts one anywhere outside a string
/// (`"..."`) or character (`'#'`) literal.
pub fn strip_comment(line: &str) -> &str {
    let cs: Vec<(usize, char)> = line.char_indices().collect();
    let mut i = 0;
    while i < cs.len() {
        match cs[i].1 {
            '#' => return &line[..cs[i].0],
            '"' => {
                i += 1;
                while i < cs.len() && cs[i].1 != '"' {
                    if cs[i].1 == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '\'' => {
                // a character literal: 'c' or '\c'
                let at = |k: usize| cs.get(i + k).map(|x| x.1);
                if at(1) == Some('\\') && at(3) == Some('\'') {
                    i += 3;
                } else if at(1).is_some() && at(2) == Some('\'') {
                    i += 2;
                }
            }
            _ => {}
        }
        i += 1;
    }
    line
}

/// An optional number argument (`bt 5`, `frame 2`).
pub fn num_arg(rest: &str, what: &str) -> Result<Option<usize>> {
    if rest.is_empty() {
        return Ok(None);
    }
    match rest.parse::<usize>() {
        Ok(n) => Ok(Some(n)),
        Err(_) => bail!(
            "{what} takes a number, not '{rest}'",
            rest = crate::shown::shown(rest)
        ),
    }
}

/// A duration: "10s", "500ms", "2m", "1h", or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(Duration::from_secs_f64(v * mult)),
        _ => bail!(
            "bad duration '{s}': use e.g. 10s, 500ms, 2m",
            s = crate::shown::shown(s)
        ),
    }
}

/// `--for DURATION` and `--count N` of probe commands.
pub fn parse_limits(rest: &str, cmd: &str) -> Result<(Option<Duration>, Option<u64>)> {
    let mut duration = None;
    let mut count = None;
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (w, None),
        };
        let mut value = |name: &str| -> Result<String> {
            match inline {
                Some(v) => Ok(v.to_string()),
                None => it
                    .next()
                    .map(|s| s.to_string())
                    .ok_or_else(|| anyhow!("{cmd}: {name} needs a value")),
            }
        };
        match flag {
            "--for" => duration = Some(parse_duration(&value("--for")?)?),
            "--count" => {
                let v = value("--count")?;
                count = Some(v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    anyhow!(
                        "{cmd}: --count takes a positive number, not '{v}'",
                        v = crate::shown::shown(&v)
                    )
                })?);
            }
            other => bail!(
                "{cmd}: unknown option '{other}' (use --for DURATION, --count N)",
                other = crate::shown::shown(other)
            ),
        }
    }
    Ok((duration, count))
}

/// The value of `--stacks N` (frames per stack, 0 to 64).
pub fn stacks_arg(cmd: &str, v: Option<&str>) -> Result<usize> {
    let v = v.unwrap_or("");
    v.parse::<usize>().ok().filter(|n| *n <= 64).ok_or_else(|| {
        anyhow!(
            "{cmd}: --stacks takes 0 to 64 frames, not '{v}'",
            v = crate::shown::shown(v)
        )
    })
}

/// Refuse an option given twice (`count f --for 2s --for 5s` would
/// otherwise take the last value in silence): called by [`super::parse`]
/// for every command, before its own parser.  The options are the
/// `--NAME` words of the command's usage and help (`--NAME=VALUE` is the
/// same option); the words after `--if` are a condition, not options.
pub fn refuse_repeated_options(cmd: &str, usage: &str, help: &str, rest: &str) -> Result<()> {
    let known = option_names(usage)
        .chain(option_names(help))
        .collect::<Vec<_>>();
    let mut seen: Vec<&str> = Vec::new();
    for w in rest.split_whitespace() {
        let name = w.split_once('=').map_or(w, |(n, _)| n);
        if !known.contains(&name) {
            continue;
        }
        if seen.contains(&name) {
            bail!(
                "{cmd}: option {name} given twice: give it once",
                name = crate::shown::shown(name)
            );
        }
        if name == "--if" {
            break;
        }
        seen.push(name);
    }
    Ok(())
}

/// The `--NAME` words of a usage or help text.
fn option_names(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("--").filter_map(move |(i, _)| {
        let after = &text[i + 2..];
        let len = after
            .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
            .unwrap_or(after.len());
        let before_ok = text[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '-');
        (len > 0 && before_ok && after.as_bytes()[0].is_ascii_lowercase())
            .then(|| &text[i..i + 2 + len])
    })
}
