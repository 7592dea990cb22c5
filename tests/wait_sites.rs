//! The site inventory of the wait-event word (`info wait-sites`, issue 34's
//! read-only slice): on 13, 15 and 18 the stores found in the code alone
//! equal the stores inside DWARF's inlined instances of
//! `pgstat_report_wait_start`/`_end` (13: plus `pgstat_report_activity`'s
//! own), every reference is classified, and a `strip --strip-all` copy
//! gives the same set.

// scripts/test: needs PostgreSQL 13

use common::*;
use pgdbg::debuginfo::DebugInfo;
use pgdbg::debuginfo::debuginfod::Fetch;
use pgdbg::postgres::packs::Packs;
use pgdbg::postgres::waitsites::{Inventory, inventory, summary};
use pgdbg_testbed as common;
use std::collections::BTreeSet;
use std::path::Path;

fn load(bin: &Path) -> DebugInfo {
    DebugInfo::load(bin, bin, None, None, &Packs, Fetch::Off).unwrap()
}

fn stripped_copy(bin: &Path, major: u32) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pgdbg-waitsites-{}-{major}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("postgres");
    let st = std::process::Command::new("strip")
        .args(["--strip-all", "-o"])
        .arg(&out)
        .arg(bin)
        .status()
        .unwrap();
    assert!(st.success(), "strip failed");
    out
}

fn check(major: u32) -> (Inventory, Inventory) {
    let bin = pg_prefix(major).join("bin/postgres");
    let di = load(&bin);
    let inv = inventory(&di).unwrap();
    eprintln!("PG{major}:\n{}", summary(&di, &inv));
    assert!(
        inv.scan.classified(),
        "PG{major}: {:?} {:?}",
        inv.scan.others,
        inv.scan.stray
    );
    let (only_code, only_dwarf) = inv.differences().expect("the build has DWARF");
    assert!(
        only_dwarf.is_empty(),
        "PG{major}: only in DWARF: {only_dwarf:x?}"
    );
    let extra: Vec<String> = only_code
        .iter()
        .map(|a| {
            di.function_ranges_at(*a)
                .map(|(n, _)| n)
                .unwrap_or_default()
        })
        .collect();
    if major == 13 {
        // 13's pgstat_report_activity writes the word itself
        assert_eq!(extra, ["pgstat_report_activity"], "PG13: {only_code:x?}");
    } else {
        assert!(extra.is_empty(), "PG{major}: only in the code: {extra:?}");
    }
    let copy = stripped_copy(&bin, major);
    let sdi = load(&copy);
    assert!(sdi.index.functions.is_empty(), "the copy still has DWARF");
    let sinv = inventory(&sdi).unwrap();
    eprintln!("PG{major} stripped:\n{}", summary(&sdi, &sinv));
    assert!(sinv.scan.classified());
    assert!(sinv.dwarf.is_none());
    let a: BTreeSet<u64> = inv.store_set();
    let b: BTreeSet<u64> = sinv.store_set();
    assert_eq!(a, b, "PG{major}: the stripped copy's sites differ");
    let _ = std::fs::remove_dir_all(copy.parent().unwrap());
    (inv, sinv)
}

#[test]
fn inventory_13() {
    check(13);
}

#[test]
fn inventory_15() {
    let (inv, _) = check(15);
    assert!(!inv.scan.sites.is_empty());
}

#[test]
fn inventory_18() {
    check(18);
}

/// `info wait-sites` at an attached 15 backend: the summary, `-v` (one line
/// per store) and `--json` (the same sites); the backend is left as it was.
#[test]
fn info_wait_sites_command_15() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "info wait-sites",
        "--ex",
        "info wait-sites -v",
        "--ex",
        "info wait-sites --json",
        "--ex",
        "detach",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let summary_lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("stores of the wait-event word"))
        .collect();
    assert_eq!(summary_lines.len(), 2, "{out}");
    let bin = pg_prefix(15).join("bin/postgres");
    let inv = inventory(&load(&bin)).unwrap();
    let n = inv.scan.sites.len();
    assert!(
        summary_lines[0].starts_with(&format!("{n} stores of the wait-event word")),
        "{out}"
    );
    assert!(out.contains("the same set as the code's"), "{out}");
    // -v: one line per store, each naming its function
    for l in out
        .lines()
        .filter(|l| l.contains("jump fits with") || l.contains("jump fits relocate"))
        .take(4)
    {
        eprintln!("{l}");
    }
    let per_site = out.lines().filter(|l| l.contains("; jump fits ")).count();
    assert_eq!(per_site, n, "{out}");
    for l in out.lines().filter(|l| l.contains("; jump fits ")) {
        assert!(l.contains(" <") && l.contains(".c:"), "{l}");
        assert!(!l.contains("wait_event.h"), "{l}");
        assert!(l.len() <= 200, "{l}");
    }
    let json = out
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("the --json line");
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["classified"], true);
    assert_eq!(v["sites"].as_array().unwrap().len(), n);
    assert!(v["only_in_code"].as_array().unwrap().is_empty());
    assert!(v["only_in_dwarf"].as_array().unwrap().is_empty());
    // runtime addresses: each store's bytes in the backend are a 32-bit
    // store, as in the file (nothing was written)
    assert_eq!(tracer_pid(pid), 0);
    a.exec("select 1");
}
