//! Reading EXPLAIN ANALYZE texts (pgdbg's and the server's) in the
//! analyze tests: per node actual rows and loops, buffers, pgdbg's blocks;
//! and the check that a backend's next statement is not instrumented.
#![allow(dead_code)]

use crate::common::{Pgdbg, print_values};
use std::time::Duration;

/// (node, actual rows, loops) of each node line of an EXPLAIN ANALYZE
/// text, in order.  Rows as printed (18 prints two decimals).
pub fn actuals(text: &str) -> Vec<(String, String, String)> {
    let mut v = Vec::new();
    for l in text.lines() {
        let Some(a) = l.find("(actual") else { continue };
        let node = l[..a].trim().trim_start_matches("->").trim();
        // the node name without its estimate part
        let node = node.split("  (cost=").next().unwrap_or(node).trim();
        let rest = &l[a..];
        let get = |k: &str| -> String {
            let i = rest.find(k).unwrap_or_else(|| panic!("no {k} in {l}"));
            rest[i + k.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect()
        };
        v.push((node.to_string(), get("rows="), get("loops=")));
    }
    v
}

/// The EXPLAIN text blocks of pgdbg's output (after each "-- " header).
pub fn blocks(out: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut cur: Option<String> = None;
    for l in out.lines() {
        if l.starts_with("-- ") {
            if let Some(c) = cur.take() {
                v.push(c);
            }
            cur = Some(String::new());
        } else if l.starts_with("Detached from") || l.starts_with("plan --analyze:") {
            if let Some(c) = cur.take() {
                v.push(c);
            }
        } else if let Some(c) = cur.as_mut() {
            c.push_str(l);
            c.push('\n');
        }
    }
    if let Some(c) = cur {
        v.push(c);
    }
    v
}

/// (node, its "Buffers:" line or "") of each node, in order; the
/// statement's "Planning:" part (only in the server's own EXPLAIN) is left
/// out.
pub fn node_buffers(text: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    for l in text.lines() {
        let t = l.trim();
        if t.starts_with("Planning") {
            break;
        }
        if let Some(a) = l.find("(actual") {
            let node = l[..a].trim().trim_start_matches("->").trim();
            let node = node.split("  (cost=").next().unwrap_or(node).trim();
            v.push((node.to_string(), String::new()));
        } else if let Some(b) = t.strip_prefix("Buffers: ")
            && let Some(last) = v.last_mut()
            && last.1.is_empty()
        {
            last.1 = b.to_string();
        }
    }
    v
}

/// The number after `key` in `line` (e.g. "hit=" in a Buffers line).
pub fn number_after(line: &str, key: &str) -> Option<u64> {
    let i = line.find(key)?;
    line[i + key.len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .ok()
}

/// The next statement of `pid` (run by `run`) is not instrumented: its
/// QueryDesc's request and its executor's flag, read at its executor run.
pub fn next_statement_plain(pid: i32, run: impl FnOnce()) {
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next",
            "--ex",
            "print queryDesc->instrument_options",
            "--ex",
            "print queryDesc->estate->es_instrument",
            "--ex",
            "detach",
        ],
        pid,
        "standard_ExecutorRun",
    );
    run();
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(print_values(&out), vec!["0", "0"], "{out}");
}
