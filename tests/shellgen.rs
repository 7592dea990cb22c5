//! `pgdbg completions SHELL` and `pgdbg man`: generated from the clap
//! definitions, they name every subcommand `pgdbg --help` lists; bash's
//! completion completes them, and groff reads the pages without a warning.

use common::*;
use pgdbg_testbed as common;
use std::process::Command;

/// The subcommands `pgdbg --help` lists (without `help`).
fn subcommands() -> Vec<String> {
    let (code, out, _) = pgdbg(&["--help"]);
    assert_eq!(code, 0);
    let list = out.split_once("Commands:").expect("a Commands: section").1;
    let names: Vec<String> = list
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // a description wrapped at 100 columns goes on, indented further
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect();
    for n in [
        "attach",
        "bt",
        "plan",
        "wait",
        "report",
        "ps",
        "rescue",
        "symbols",
        "completions",
        "man",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} not in --help:\n{out}");
    }
    names
}

#[test]
fn completions_name_every_subcommand() {
    let subs = subcommands();
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = pgdbg(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        for s in &subs {
            assert!(out.contains(s.as_str()), "{shell}: no {s}");
        }
        for opt in ["script", "capture", "flamegraph", "cluster"] {
            // fish names a long option "-l NAME"
            let want = if shell == "fish" {
                format!("-l {opt}")
            } else {
                format!("--{opt}")
            };
            assert!(out.contains(&want), "{shell}: no {want}");
        }
    }
    let (code, out, err) = pgdbg(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("tcsh") && err.contains("bash"), "{err}");
}

/// bash itself, with the generated script sourced, completes a
/// subcommand and an option.
#[test]
fn bash_completes_with_the_script() {
    let complete = |words: &str| -> String {
        let script = format!(
            "source <('{}' completions bash)\nCOMP_WORDS=({words})\nCOMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n_pgdbg pgdbg \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\necho \"${{COMPREPLY[@]}}\"",
            pgdbg_bin().display()
        );
        let out = Command::new("bash")
            .args(["-c", &script])
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(complete("pgdbg att"), "attach");
    assert_eq!(complete("pgdbg comp"), "completions");
    assert_eq!(complete("pgdbg attach --scr"), "--script");
    assert_eq!(complete("pgdbg completions fi"), "fish");
}

#[test]
fn man_pages_name_every_subcommand_and_session_command() {
    let subs = subcommands();
    let (code, page, err) = pgdbg(&["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(page.contains(".TH pgdbg 1"), "{page}");
    for s in &subs {
        assert!(
            page.contains(&format!("pgdbg\\-{s}(1)")),
            "no {s} in:\n{page}"
        );
    }
    let session = page
        .split_once(".SH \"SESSION COMMANDS\"")
        .expect("a SESSION COMMANDS section")
        .1;
    for c in [
        "break",
        "continue",
        "interrupt",
        "detach",
        "plancache",
        "waits sample",
    ] {
        assert!(
            session.contains(&format!("\\fB{c}")),
            "{c} not in the session commands:\n{session}"
        );
    }
    // groff reads it without a warning
    let dir = std::env::temp_dir().join(format!("pgdbg-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err) = pgdbg(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let mut want: Vec<String> = subs.iter().map(|s| format!("pgdbg-{s}.1")).collect();
    want.push("pgdbg.1".into());
    want.sort();
    assert_eq!(pages, want, "{out}");
    assert_eq!(std::fs::read_to_string(dir.join("pgdbg.1")).unwrap(), page);
    for p in &pages {
        let g = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(dir.join(p))
            .output()
            .expect("groff (scripts/test installs it)");
        assert!(g.status.success(), "{p}");
        assert_eq!(String::from_utf8_lossy(&g.stderr), "", "{p}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
