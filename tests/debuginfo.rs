//! The debug-info room (`debuginfo/`) on a C fixture, against the
//! system's own tools reading the same binary: `nm` for functions and
//! globals, binutils' `addr2line -i` for source frames (inlined frames
//! included) at every line-table address of the fixture's functions, gdb
//! for struct layouts.  No process runs: only the file is read.

use common::*;
use pgdbg::debuginfo::DebugInfo;
use pgdbg::debuginfo::debuginfod::Fetch;
use pgdbg::debuginfo::layout::Layout;
use pgdbg::postgres::packs::Packs;
use pgdbg_testbed as common;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn load(bin: &Path) -> DebugInfo {
    DebugInfo::load(bin, bin, None, None, &Packs, Fetch::Off).unwrap()
}

/// `nm`'s symbols: name -> (address, kind letter).
fn nm(bin: &Path) -> BTreeMap<String, (u64, char)> {
    let out = Command::new("nm").arg(bin).output().expect("nm");
    assert!(out.status.success());
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if let [a, k, n] = f[..] {
            let a = u64::from_str_radix(a, 16).unwrap();
            m.insert(n.to_string(), (a, k.chars().next().unwrap()));
        }
    }
    m
}

/// binutils' `addr2line -f -i` for each address: the frames innermost
/// first, (function, line).
fn addr2line(bin: &Path, addrs: &[u64]) -> Vec<Vec<(String, u32)>> {
    // one call; a sentinel address (0) after each marks its end ("??")
    let mut args: Vec<String> = vec!["-f".into(), "-i".into(), "-e".into()];
    args.push(bin.display().to_string());
    for a in addrs {
        args.push(format!("{a:#x}"));
        args.push("0".into());
    }
    let out = Command::new("addr2line")
        .args(&args)
        .output()
        .expect("addr2line");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut all = Vec::new();
    let mut cur = Vec::new();
    let mut k = 0;
    while k + 1 < lines.len() {
        let (func, loc) = (lines[k], lines[k + 1]);
        k += 2;
        if func == "??" {
            all.push(std::mem::take(&mut cur));
            continue;
        }
        // "file:line" or "file:line (discriminator N)"
        let line = loc
            .split_whitespace()
            .next()
            .and_then(|s| s.rsplit(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        cur.push((func.to_string(), line));
    }
    assert_eq!(all.len(), addrs.len(), "addr2line's answer:\n{text}");
    all
}

#[test]
fn functions_and_globals_where_nm_has_them() {
    let bin = c_fixture("inline");
    let di = load(&bin);
    let syms = nm(&bin);
    for f in ["f1", "f2", "main", "wait_forever"] {
        let (addr, _) = syms[f];
        let (name, ranges) = di.function_ranges_at(addr).expect(f);
        assert_eq!(name, f);
        assert_eq!(ranges.first().map(|r| r.0), Some(addr), "{f}'s entry");
        assert_eq!(di.symbolic(addr + 1, true), Some((f.to_string(), 1)));
    }
    for g in ["g_outer", "g_inner", "g_ptr", "g_counter"] {
        let (addr, ty) = di.global(g).expect(g);
        assert_eq!(addr, syms[g].0, "{g}'s address");
        assert!(ty.is_some(), "{g} has a type");
    }
}

/// At every line-table address of f1, f2 and main, the source frames
/// (inlined ones first) are addr2line's.  Where the table has rows of
/// several lines at one address, the tools choose differently (binutils
/// the last row; gdb the last statement row; pgdbg, with the addr2line
/// crate, one of them): there the functions are addr2line's and the line
/// one of the table's rows at that address.
#[test]
fn source_frames_where_addr2line_has_them() {
    let bin = c_fixture("inline");
    let di = load(&bin);
    let syms = nm(&bin);
    let mut rows: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for f in ["f1", "f2", "main"] {
        let (_, ranges) = di.function_ranges_at(syms[f].0).unwrap();
        for (lo, hi) in ranges {
            for (a, _, line) in di.line_rows(lo, hi) {
                rows.entry(a).or_default().push(line);
            }
        }
    }
    let addrs: Vec<u64> = rows.keys().copied().collect();
    assert!(addrs.len() >= 10, "line rows in f1, f2, main: {addrs:x?}");
    let theirs = addr2line(&bin, &addrs);
    let ambiguous: Vec<u64> = rows
        .iter()
        .filter(|(_, l)| l.iter().any(|x| *x != l[0]))
        .map(|(a, _)| *a)
        .collect();
    let mut inlined = 0;
    for (a, t) in addrs.iter().zip(&theirs) {
        let ours: Vec<(String, u32)> = di
            .frames_at(*a)
            .into_iter()
            .map(|f| (f.function.unwrap_or_default(), f.line.unwrap_or(0)))
            .collect();
        if ambiguous.contains(a) {
            let names = |v: &[(String, u32)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
            assert_eq!(names(&ours), names(t), "functions at {a:#x}");
            assert!(
                rows[a].contains(&ours[0].1),
                "the line at {a:#x}: {ours:?}, rows {:?}",
                rows[a]
            );
        } else {
            assert_eq!(&ours, t, "frames at {a:#x}");
        }
        if ours.len() > 1 {
            inlined += 1;
        }
    }
    // hot() is inlined into f1 and f2: some addresses are inside it
    assert!(
        inlined > 0,
        "no inlined frame at any of {} addresses",
        addrs.len()
    );
}

#[test]
fn inlined_instances_inside_their_callers() {
    let bin = c_fixture("inline");
    let di = load(&bin);
    let syms = nm(&bin);
    let inst = di.instances(&["hot"]);
    let out_of_line: Vec<_> = inst.iter().filter(|i| !i.inlined).collect();
    assert_eq!(out_of_line.len(), 1, "{inst:#?}");
    assert_eq!(
        out_of_line[0].ranges[0].0, syms["hot"].0,
        "the copy nm names"
    );
    for caller in ["f1", "f2"] {
        let (_, ranges) = di.function_ranges_at(syms[caller].0).unwrap();
        let inside: Vec<_> = inst
            .iter()
            .filter(|i| {
                i.inlined
                    && i.ranges
                        .iter()
                        .all(|(lo, hi)| ranges.iter().any(|(a, b)| a <= lo && hi <= b))
            })
            .collect();
        assert_eq!(inside.len(), 1, "hot inlined once into {caller}: {inst:#?}");
        let at = inside[0].ranges[0].0;
        let t = &addr2line(&bin, &[at])[0];
        assert_eq!(t.first().map(|f| f.0.as_str()), Some("hot"), "{t:?}");
        assert_eq!(t.last().map(|f| f.0.as_str()), Some(caller), "{t:?}");
    }
}

#[test]
fn struct_layouts_where_gdb_has_them() {
    let bin = c_fixture("inline");
    let di = load(&bin);
    let fields = ["tag", "in", "pin", "arr", "c", "label"];
    let mut args: Vec<String> = vec!["-batch".into(), "-nx".into()];
    args.push("-ex".into());
    args.push("print sizeof(struct outer)".into());
    for f in fields {
        args.push("-ex".into());
        args.push(format!("print (long)&((struct outer *)0)->{f}"));
    }
    args.push(bin.display().to_string());
    let out = Command::new("gdb").args(&args).output().expect("gdb");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let vals: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split(" = ").nth(1))
        .map(|v| v.trim().parse().unwrap())
        .collect();
    assert_eq!(vals.len(), fields.len() + 1, "gdb said:\n{text}");
    let l = Layout::of(&di, "outer").unwrap();
    assert_eq!(l.size, vals[0], "sizeof(struct outer)");
    for (f, v) in fields.iter().zip(&vals[1..]) {
        assert_eq!(l.offset(f).unwrap(), *v, "offset of {f}");
    }
    // the bitfields are left out of a layout
    assert!(!l.has("flags") && !l.has("more"));
}
