//! The examples of a Markdown document (README.md, docs/*.md): each
//! command of a code block (`$ pgdbg ...`, or a prompt line such as
//! `(pgdbg) break ...`) with the output lines shown under it, run by a test
//! against a real server; a shown line must have a printed line of the
//! same shape (numbers, addresses and column widths aside).

use super::{pgdbg_bin, repo, wait_until};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One command of a document's code block and the output lines shown.
#[derive(Debug)]
pub struct Recipe {
    /// The document, relative to the repository (`docs/usage.md`).
    pub source: String,
    /// What starts the command's line: `$ ` or a prompt such as `(pgdbg) `.
    pub prompt: String,
    pub command: String,
    pub output: Vec<String>,
}

impl Recipe {
    /// The recipe as the document writes it, with its file: the key a test
    /// marks as run.
    pub fn key(&self) -> String {
        format!("{}: {}{}", self.source, self.prompt, self.command)
    }
}

/// The commands of `file`'s code blocks (indented by four spaces, or
/// fenced by ```) whose lines start with one of `prompts`, each with the
/// lines shown after it up to the next command or the block's end.
pub fn recipes(file: &str, prompts: &[&str]) -> Vec<Recipe> {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let mut out: Vec<Recipe> = Vec::new();
    let mut in_block = false;
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            in_block = false;
            continue;
        }
        if line.trim().is_empty() {
            continue; // a blank line inside a code block does not end it
        }
        let code = if fenced {
            line
        } else if let Some(code) = line.strip_prefix("    ") {
            code
        } else {
            in_block = false;
            continue;
        };
        if let Some(p) = prompts.iter().find(|p| code.starts_with(**p)) {
            out.push(Recipe {
                source: file.to_string(),
                prompt: p.to_string(),
                command: code[p.len()..].to_string(),
                output: Vec::new(),
            });
            in_block = true;
        } else if in_block {
            out.last_mut().unwrap().output.push(code.to_string());
        }
    }
    out
}

/// A line's shape: numbers and addresses as N, whitespace runs as one space.
pub fn shape(line: &str) -> String {
    let mut s = String::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            if c == '0' && chars.get(i + 1) == Some(&'x') {
                i += 2;
                while i < chars.len() && chars[i].is_ascii_hexdigit() {
                    i += 1;
                }
            } else {
                while i < chars.len()
                    && (chars[i].is_ascii_digit()
                        || (chars[i] == '.'
                            && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit())))
                {
                    i += 1;
                }
            }
            s.push('N');
            continue;
        }
        if c.is_whitespace() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            s.push(' ');
            continue;
        }
        s.push(c);
        i += 1;
    }
    s.trim().to_string()
}

/// Every shown line of `r` (but "..." and those containing one of
/// `varies`) has a line of the same shape in `got`; a shown line ending
/// in "..." stands for any line that starts as it does.
pub fn check(r: &Recipe, got: &str, varies: &[&str]) {
    let have: BTreeSet<String> = got.lines().map(|l| without_ring_notes(shape(l))).collect();
    for want in &r.output {
        if want.trim() == "..." || want.trim().is_empty() || varies.iter().any(|v| want.contains(v))
        {
            continue;
        }
        let found = match want.trim_end().strip_suffix("...") {
            Some(head) => {
                let head = shape(head);
                have.iter().any(|h| h.starts_with(&head))
            }
            None => have.contains(&shape(want)),
        };
        assert!(
            found,
            "{}'s `{}{}` shows\n  {want}\nbut pgdbg printed no line of that shape:\n{got}",
            r.source, r.prompt, r.command
        );
    }
}

/// A line's shape without its notes of records the kernel's ring lost
/// ("; N samples lost (ring full)"): true, and made by the machine's load,
/// not by what the example shows.
fn without_ring_notes(mut shaped: String) -> String {
    const END: &str = " lost (ring full)";
    while let Some(e) = shaped.find(END) {
        let start = shaped[..e].rfind("; ").unwrap_or(e);
        shaped.replace_range(start..e + END.len(), "");
    }
    shaped
}

/// A line's shape with every name as W too: the shape of a line whose
/// names (a wait event, a function) depend on the workload.
pub fn word_shape(line: &str) -> String {
    let mut s = String::new();
    let mut word = String::new();
    let end = |s: &mut String, word: &mut String| {
        if !word.is_empty() {
            s.push_str(if word == "N" { "N" } else { "W" }); // N: a number
            word.clear();
        }
    };
    for c in shape(line).chars() {
        if c.is_ascii_alphabetic() || c == '_' || (!word.is_empty() && c.is_ascii_alphanumeric()) {
            word.push(c);
        } else {
            end(&mut s, &mut word);
            s.push(c);
        }
    }
    end(&mut s, &mut word);
    s
}

/// Every shown line of `r` containing one of `names` (the lines `check`
/// was told vary) has a printed line of the same `word_shape`; a shown
/// line ending in "..." stands for any line that starts as it does.
pub fn check_names_aside(r: &Recipe, got: &str, names: &[&str]) {
    let have: BTreeSet<String> = got.lines().map(word_shape).collect();
    for want in r
        .output
        .iter()
        .filter(|w| names.iter().any(|n| w.contains(n)))
    {
        let found = match want.trim_end().strip_suffix("...") {
            Some(head) => {
                let head = word_shape(head);
                have.iter().any(|h| h.starts_with(&head))
            }
            None => have.contains(&word_shape(want)),
        };
        assert!(
            found,
            "{}'s `{}{}` shows\n  {want}\nbut pgdbg printed no line of that shape, names aside:\n{got}",
            r.source, r.prompt, r.command
        );
    }
}

/// The command as arguments for pgdbg: each `(from, to)` of `replace`
/// applied (the document's PID, data directory, ...), the shell's quotes,
/// a trailing `# comment` and `> /dev/null` removed.
pub fn args_of(command: &str, replace: &[(&str, &str)]) -> Vec<String> {
    let command = replace
        .iter()
        .fold(command.to_string(), |c, (from, to)| c.replace(from, to));
    let command = command.split("  #").next().unwrap().trim();
    let command = command.trim_end_matches("> /dev/null").trim();
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in command.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    args.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        args.push(cur);
    }
    assert_eq!(args[0], "pgdbg", "{command}");
    args.remove(0);
    args
}

/// pgdbg in `cwd`, to completion: status, stdout followed by stderr.
pub fn run(args: &[String], cwd: &Path) -> (i32, String) {
    let out = Command::new(pgdbg_bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null())
        .output()
        .expect("run pgdbg");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// pgdbg in the background, `input` on its standard input (then its
/// end), its stdout and stderr into `log`.
pub fn spawn_with_input(args: &[String], cwd: &Path, log: &Path, input: &str) -> Child {
    let f = std::fs::File::create(log).unwrap();
    let mut child = Command::new(pgdbg_bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::piped())
        .stdout(Stdio::from(f.try_clone().unwrap()))
        .stderr(Stdio::from(f))
        .spawn()
        .expect("spawn pgdbg");
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    child
}

/// pgdbg in the background, its stdout and stderr into `log`.
pub fn spawn(args: &[String], cwd: &Path, log: &Path) -> Child {
    spawn_with_input(args, cwd, log, "")
}

/// `poke` (a statement of the session) until pgdbg has what it waits for
/// and exits: a statement run before pgdbg armed its probe is not seen,
/// the next one is.  Returns its status and output.
pub fn poke_until_exit(mut child: Child, log: &Path, mut poke: impl FnMut()) -> (i32, String) {
    let t0 = std::time::Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code().unwrap_or(-1);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "pgdbg did not finish:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        poke();
        std::thread::sleep(Duration::from_millis(300));
    };
    (code, std::fs::read_to_string(log).unwrap())
}

/// Until `log` holds `marker` (what pgdbg says once its probe is armed).
pub fn wait_said(log: &Path, marker: &str) {
    wait_until(marker, Duration::from_secs(60), || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains(marker)
    });
}

/// Every recipe of `all` was run (its key in `done`), else the test fails
/// naming those it does not know.
pub fn assert_all_run(all: &[Recipe], done: &BTreeSet<String>) {
    let untested: Vec<String> = all
        .iter()
        .map(Recipe::key)
        .filter(|k| !done.contains(k))
        .collect();
    assert!(
        untested.is_empty(),
        "examples this test does not run: {untested:?}"
    );
}
