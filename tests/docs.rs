//! The documentation a user enters by: README.md stays a short entry
//! (at most 150 lines, no paragraph or table cell over 600 characters),
//! docs/commands.md is what the command definitions generate (a command
//! whose help changes without its page fails here), and every relative
//! link of README.md, ARCHITECTURE.md and docs/ lands on a file and, with
//! a `#fragment`, on a heading of it.  No PostgreSQL needed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const REGENERATE: &str = "PGDBG_BLESS=1 cargo test --release --test docs";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn commands_md_is_generated_from_the_command_definitions() {
    let want = pgdbg::shellgen::commands_markdown(pgdbg::cli::command());
    let path = repo().join("docs/commands.md");
    if std::env::var_os("PGDBG_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(have.lines().count().min(want.lines().count()));
        panic!(
            "docs/commands.md is stale (first difference at line {}): regenerate it with `{REGENERATE}`",
            line + 1
        );
    }
}

#[test]
fn commands_md_names_every_session_command_and_subcommand() {
    let page = read("docs/commands.md");
    for e in pgdbg::command::entries() {
        assert!(
            page.contains(&format!("\n#### {}\n", e.name)),
            "{} has no section in docs/commands.md",
            e.name
        );
    }
    for sub in [
        "attach",
        "bt",
        "plan",
        "wait",
        "ps",
        "profile",
        "report",
        "rescue",
        "symbols extract",
        "man",
    ] {
        assert!(
            page.contains(&format!("\n### pgdbg {sub}\n")),
            "pgdbg {sub} has no section in docs/commands.md"
        );
    }
}

/// docs/usage.md's Environment table names every variable pgdbg reads
/// that is not only for its own tests, and no other.
#[test]
fn usage_lists_the_environment() {
    let text = std::fs::read_to_string(repo().join("docs/usage.md")).unwrap();
    let section = text
        .split("## Environment")
        .nth(1)
        .expect("docs/usage.md has no ## Environment section");
    let listed: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `PGDBG_"))
        .filter_map(|l| l.split('`').next())
        .map(|n| format!("PGDBG_{n}"))
        .collect();
    let used: BTreeSet<String> = pgdbg::config::VARS
        .iter()
        .filter(|v| !v.for_tests)
        .map(|v| v.name.to_string())
        .collect();
    assert_eq!(
        listed, used,
        "docs/usage.md's Environment table vs src/config.rs VARS"
    );
}

#[test]
fn readme_is_a_short_entry() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines: at most 150 (move detail to docs/)"
    );
    for (text, what) in paragraphs(&readme) {
        assert!(
            text.chars().count() <= 600,
            "README.md: a {what} of {} characters (at most 600): {}...",
            text.chars().count(),
            text.chars().take(80).collect::<String>()
        );
    }
    // every page of docs/ is reachable from the README
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            assert!(
                readme.contains(&format!("(docs/{name})")),
                "README.md does not link docs/{name}"
            );
        }
    }
}

/// Prose paragraphs, list items and table cells (code blocks, indented
/// by four spaces or fenced, are output and may be long).
fn paragraphs(md: &str) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    let mut para = String::new();
    let mut fenced = false;
    let flush = |para: &mut String, out: &mut Vec<(String, &'static str)>| {
        if !para.trim().is_empty() {
            out.push((para.trim().to_string(), "paragraph"));
        }
        para.clear();
    };
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            flush(&mut para, &mut out);
            continue;
        }
        if fenced || line.starts_with("    ") || line.trim().is_empty() {
            flush(&mut para, &mut out);
            continue;
        }
        if line.starts_with('|') {
            flush(&mut para, &mut out);
            for cell in line.split(" | ") {
                out.push((cell.trim_matches(['|', ' ']).to_string(), "table cell"));
            }
            continue;
        }
        if line.starts_with("- ") || line.starts_with("* ") || line.starts_with('#') {
            flush(&mut para, &mut out);
        }
        para.push_str(line);
        para.push(' ');
    }
    flush(&mut para, &mut out);
    out
}

#[test]
fn relative_links_land_on_a_file_and_a_heading() {
    let mut pages = vec!["README.md".to_string(), "ARCHITECTURE.md".to_string()];
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    let mut bad = Vec::new();
    for page in &pages {
        let text = read(page);
        let dir = Path::new(page).parent().unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = match target.split_once('#') {
                Some((f, frag)) => (f, Some(frag)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() {
                PathBuf::from(page)
            } else {
                normalize(&dir.join(file))
            };
            let full = repo().join(&resolved);
            if !full.exists() {
                bad.push(format!("{page}: ({target}): no {}", resolved.display()));
                continue;
            }
            if let Some(frag) = fragment {
                let body = std::fs::read_to_string(&full).unwrap_or_default();
                if !anchors(&body).contains(frag) {
                    bad.push(format!(
                        "{page}: ({target}): no heading #{frag} in {}",
                        resolved.display()
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

/// The targets of `[text](target)` outside code.
fn links(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced || line.starts_with("    ") {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// GitHub's anchors of a page's headings: lower case, punctuation other
/// than `-` and `_` dropped, spaces as `-`.
fn anchors(md: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        out.insert(slug);
    }
    out
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Every message docs/troubleshooting.md quotes is one pgdbg prints: each
/// piece of it between the example values (numbers, names, paths, "...",
/// the OS's error text) and punctuation (where pgdbg joins the parts of a
/// message) is in a string of src/.
#[test]
fn troubleshooting_quotes_real_messages() {
    let mut source = String::new();
    let mut dirs = vec![repo().join("src")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                source.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    // a string continued over lines ("...\<newline>   ...") as one
    let mut joined = String::new();
    let mut rest = source.as_str();
    while let Some(i) = rest.find("\\\n") {
        joined.push_str(&rest[..i]);
        rest = rest[i + 2..].trim_start();
    }
    joined.push_str(rest);
    // the example values of the page, not pgdbg's words
    let examples = [
        "alice",
        "postgres",
        "no_such_function",
        "/proc/nonexist/x",
        "/nonexistent",
        "process_api",
        "pg_backend_pid",
        "GetCachedPlan",
        "fcinfo",
        "FunctionCallInfo",
        "aborted",
    ];
    let page = read("docs/troubleshooting.md");
    let mut checked = 0;
    let mut missing = Vec::new();
    for row in page.lines().filter(|l| l.starts_with("| `")) {
        let first = row.trim_start_matches("| ").split(" | ").next().unwrap();
        for quote in first.split('`').skip(1).step_by(2) {
            let quote = quote
                .replace("No such file or directory", "...")
                .replace(['(', ')', ';', ':', ','], " ... ");
            let mut pieces = vec![String::new()];
            for word in quote.split(' ').filter(|w| !w.is_empty()) {
                let bare = word.trim_matches(|c: char| ".\"'".contains(c));
                if word.contains("...")
                    || word.chars().any(|c| c.is_ascii_digit())
                    || examples.contains(&bare)
                {
                    pieces.push(String::new());
                } else {
                    let p = pieces.last_mut().unwrap();
                    if !p.is_empty() {
                        p.push(' ');
                    }
                    p.push_str(word);
                }
            }
            for piece in pieces.iter().filter(|p| p.len() >= 16) {
                checked += 1;
                if !joined.contains(piece.as_str()) {
                    missing.push(piece.clone());
                }
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} pieces of messages found in docs/troubleshooting.md"
    );
    assert!(
        missing.is_empty(),
        "docs/troubleshooting.md quotes words no string of src/ has: {missing:#?}"
    );
}
