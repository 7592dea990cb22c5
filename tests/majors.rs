//! PostgreSQL 13 to 18: the layout packs generated from server headers
//! (checked against the DWARF of the debug builds where one exists) and a
//! smoke set of every main command on the majors the rest of the suite does
//! not run: 13 built with DWARF (scripts/pg-build), 14, 16 and 17 as the
//! release builds of scripts/pg-embedded (`.symtab`, no DWARF: the layout
//! packs of symbols/).

// scripts/test: needs PostgreSQL 13

use common::*;
use pgdbg_testbed as common;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// What a pack says about memory layout: struct sizes, field names and
/// offsets, and each type's shape (kind and size; named structs by name).
/// Left out: enum constants (libpg_query renumbers `LimitOption`) and the
/// names of base types (15.2 turned PGPROC.lwWaiting from bool into uint8
/// of the same size), neither of which moves a byte.
fn layout(pack: &Value) -> Value {
    fn shape(t: &Value) -> Value {
        match t["kind"].as_str().unwrap_or("") {
            "base" => json!(["base", t["size"]]),
            "pointer" => json!(["pointer", shape(&t["to"])]),
            "named" => json!(["named", t["name"]]),
            "array" => json!(["array", shape(&t["elem"]), t["count"]]),
            "enum" => json!(["enum", t["size"]]),
            k => json!([k]),
        }
    }
    let mut structs = serde_json::Map::new();
    for (name, s) in pack["structs"].as_object().unwrap() {
        let fields: Vec<Value> = s["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| json!([f["name"], f["offset"], shape(&f["type"])]))
            .collect();
        structs.insert(name.clone(), json!({"size": s["size"], "fields": fields}));
    }
    let globals: serde_json::Map<String, Value> = pack["globals"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, t)| (k.clone(), shape(t)))
        .collect();
    json!({"structs": structs, "globals": globals})
}

/// scripts/gen-header-packs --out DIR MAJORS (with this pgdbg).
fn gen_header_packs(dir: &Path, majors: &[u32]) {
    let out = Command::new(repo().join("scripts/gen-header-packs"))
        .arg("--out")
        .arg(dir)
        .args(majors.iter().map(|m| m.to_string()))
        .env("PGDBG_BIN", pgdbg_bin())
        .output()
        .expect("run scripts/gen-header-packs");
    assert!(
        out.status.success(),
        "scripts/gen-header-packs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The method behind the 14, 16 and 17 packs, checked where a debug build
/// exists: the pack generated from 13's, 15's and 18's headers lays out
/// every struct and global exactly as the DWARF of the server built here.
#[test]
fn header_packs_equal_debug_build_packs() {
    let dir = std::env::temp_dir().join(format!("pgdbg-header-packs-{}", std::process::id()));
    let majors = [13, 15, 18];
    gen_header_packs(&dir, &majors);
    for major in majors {
        let bin = pg_prefix(major).join("bin/postgres");
        let (code, out, err) = pgdbg(&["symbols", "extract", bin.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let dwarf: Value = serde_json::from_str(&out).unwrap();
        let headers = read_json(&dir.join(format!("pg{major}.json")));
        assert_eq!(headers["major"], major);
        let (d, h) = (layout(&dwarf), layout(&headers));
        for (name, s) in d["structs"].as_object().unwrap() {
            assert_eq!(
                Some(s),
                h["structs"].get(name),
                "PostgreSQL {major}: {name} from the headers differs from the debug build"
            );
        }
        assert_eq!(d, h, "PostgreSQL {major}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The committed 14, 16 and 17 packs are what their headers give today
/// (14's from the headers vendored in symbols/headers/pg14).
#[test]
fn committed_header_packs_are_fresh() {
    let dir = std::env::temp_dir().join(format!("pgdbg-header-fresh-{}", std::process::id()));
    gen_header_packs(&dir, &[14, 16, 17]);
    for major in [14, 16, 17] {
        let fresh = read_json(&dir.join(format!("pg{major}.json")));
        let committed = read_json(&repo().join(format!("symbols/pg{major}.json")));
        assert!(
            fresh == committed,
            "symbols/pg{major}.json is stale: regenerate it with scripts/gen-header-packs {major}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every directory of vendored headers (symbols/headers/pgMAJOR) holds
/// exactly the files its MANIFEST names, each with the sha256 it names,
/// from the commit it names; and its include/ is exactly what
/// symbols/pack-types.c includes (gcc -M), no more.
#[test]
fn vendored_headers_match_their_manifest() {
    let root = repo().join("symbols/headers");
    let mut majors = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let major: u32 = name.strip_prefix("pg").unwrap().parse().unwrap();
        majors.push(major);
        let manifest = std::fs::read_to_string(dir.join("MANIFEST")).unwrap();
        let field = |k: &str| {
            manifest
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k}: ")))
                .unwrap_or_else(|| panic!("{name}/MANIFEST has no {k}"))
                .to_string()
        };
        assert_eq!(field("repository"), "pganalyze/libpg_query (git)");
        let commit = field("commit");
        assert!(
            commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{commit}"
        );
        let version = field("postgresql");
        assert!(version.starts_with(&format!("{major}.")), "{version}");
        let config = std::fs::read_to_string(dir.join("include/pg_config.h")).unwrap();
        assert!(config.contains(&format!("#define PG_VERSION \"{version}\"")));

        // the hashes
        let listed: Vec<(String, String)> = manifest
            .lines()
            .filter_map(|l| l.split_once("  "))
            .filter(|(h, _)| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()))
            .map(|(h, p)| (h.to_string(), p.to_string()))
            .collect();
        let out = Command::new("sha256sum")
            .args(listed.iter().map(|(_, p)| p))
            .current_dir(&dir)
            .output()
            .expect("run sha256sum");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let (h, p) = l.split_once("  ").unwrap();
                (h.to_string(), p.to_string())
            })
            .collect();
        for ((want, p), (have, _)) in listed.iter().zip(&got) {
            assert_eq!(
                want, have,
                "symbols/headers/{name}/{p} differs from its MANIFEST"
            );
        }

        // no file the manifest does not name
        let mut files = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(&dir).unwrap().to_str().unwrap().to_string();
                    if rel != "MANIFEST" {
                        files.push(rel);
                    }
                }
            }
        }
        files.sort();
        let mut named: Vec<String> = listed.iter().map(|(_, p)| p.clone()).collect();
        named.sort();
        assert_eq!(files, named, "symbols/headers/{name} and its MANIFEST");

        // exactly the headers symbols/pack-types.c includes
        let inc = dir.join("include");
        let out = Command::new("gcc")
            .args(["-M", "-D__thread=", "-DPACK_SOURCE=\"\"", "-I"])
            .arg(&inc)
            .arg(repo().join("symbols/pack-types.c"))
            .output()
            .expect("run gcc -M");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let prefix = format!("{}/", inc.display());
        let mut used: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|w| w.strip_prefix(&prefix))
            .map(|p| format!("include/{p}"))
            .collect();
        used.sort();
        used.dedup();
        let headers: Vec<&String> = named.iter().filter(|p| p.starts_with("include/")).collect();
        assert_eq!(
            used.iter().collect::<Vec<_>>(),
            headers,
            "symbols/headers/{name}: re-vendor it with scripts/gen-header-packs --vendor"
        );
    }
    assert!(majors.contains(&14), "{majors:?}");
}

/// The x86-64 bindings of pgrx-pg-sys 0.19.4 (crates.io), generated by
/// bindgen from the server headers of the latest minors of its day
/// (13.23, 14.25, 15.20, 16.16, 17.12, 18.7): its source of `src/include/pgMAJOR.rs`.
fn later_minor_bindings(major: u32) -> String {
    let crate_file = || {
        let home = std::env::var_os("CARGO_HOME")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").unwrap()).join(".cargo"));
        std::fs::read_dir(home.join("registry/cache"))
            .into_iter()
            .flatten()
            .map(|d| d.unwrap().path().join("pgrx-pg-sys-0.19.4.crate"))
            .find(|p| p.exists())
    };
    let file = crate_file().unwrap_or_else(|| {
        let st = Command::new("cargo")
            .args(["info", "--quiet", "pgrx-pg-sys@0.19.4"])
            .current_dir(std::env::temp_dir())
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run cargo info");
        assert!(
            st.success(),
            "cargo info pgrx-pg-sys@0.19.4 failed (is crates.io reachable?)"
        );
        crate_file().expect("cargo info left no pgrx-pg-sys-0.19.4.crate")
    });
    let out = Command::new("tar")
        .arg("-xzOf")
        .arg(&file)
        .arg(format!("pgrx-pg-sys-0.19.4/src/include/pg{major}.rs"))
        .output()
        .expect("run tar");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Size in bytes of a bindgen field type, where it is plain.
fn bindgen_size(t: &str) -> Option<u64> {
    let t = t.trim_start_matches("::core::ffi::");
    if t.starts_with('*') || t.starts_with("::core::option::Option<") {
        return Some(8);
    }
    if t.ends_with("::Type") {
        return Some(4);
    }
    Some(match t {
        "bool" | "uint8" | "int8" | "c_char" | "c_uchar" | "u8" | "i8" => 1,
        "int16" | "uint16" | "c_short" | "c_ushort" => 2,
        "c_int" | "c_uint" | "int32" | "uint32" | "Oid" | "TransactionId" | "SubTransactionId"
        | "LocalTransactionId" | "CommandId" | "BackendId" | "ProcNumber" | "LOCKMODE"
        | "LOCKMASK" | "XidStatus" | "sig_atomic_t" | "pid_t" | "NodeTag" => 4,
        "f64" | "int64" | "uint64" | "Size" | "XLogRecPtr" | "TimestampTz" | "c_long"
        | "c_ulong" | "usize" => 8,
        _ => return None,
    })
}

/// A pack made from one minor's layouts serves the major's other minors:
/// every struct of every built-in pack has the fields, in the order and
/// (where the type is plain) of the sizes, that bindgen saw in the latest
/// minor's headers.  14's pack comes from 14.6's headers, 16's from 16.1's,
/// 17's from 17.4's; 13.4 grew PortalData, which this would catch.
#[test]
fn packs_have_the_fields_of_later_minors() {
    for major in [13, 14, 15, 16, 17, 18] {
        let rs = later_minor_bindings(major);
        let pack = read_json(&repo().join(format!("symbols/pg{major}.json")));
        let minor = rs
            .lines()
            .find_map(|l| l.strip_prefix("pub const PG_VERSION: &::core::ffi::CStr = c\""))
            .unwrap_or("?")
            .trim_end_matches("\";");
        let mut checked = (0, 0);
        for (name, s) in pack["structs"].as_object().unwrap() {
            let start = format!("pub struct {name} {{\n");
            let body = rs
                .find(&start)
                .map(|i| &rs[i + start.len()..])
                .and_then(|b| b.find("\n}").map(|j| &b[..j]))
                .unwrap_or_else(|| panic!("PostgreSQL {minor}: no struct {name} in the bindings"));
            // bindgen renames fields that are Rust keywords (type_, str_)
            let later: Vec<(String, String)> = body
                .lines()
                .filter_map(|l| l.trim().strip_prefix("pub "))
                .filter_map(|l| l.split_once(": "))
                .map(|(n, t)| {
                    (
                        n.trim_end_matches('_').to_string(),
                        t.trim_end_matches(',').to_string(),
                    )
                })
                .collect();
            let fields = s["fields"].as_array().unwrap();
            let names: Vec<&str> = fields.iter().map(|f| f["name"].as_str().unwrap()).collect();
            let later_names: Vec<&str> = later.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                names, later_names,
                "PostgreSQL {major}'s pack: {name} has other fields in {minor}"
            );
            for (f, (_, t)) in fields.iter().zip(&later) {
                let size = match f["type"]["kind"].as_str() {
                    Some("base") | Some("enum") => f["type"]["size"].as_u64(),
                    Some("pointer") => Some(8),
                    _ => None,
                };
                if let (Some(a), Some(b)) = (size, bindgen_size(t)) {
                    assert_eq!(
                        a, b,
                        "PostgreSQL {major}'s pack: {name}.{} vs {minor}'s {t}",
                        f["name"]
                    );
                    checked.1 += 1;
                }
                checked.0 += 1;
            }
        }
        eprintln!(
            "PostgreSQL {major}'s pack vs {minor}: {} fields, {} sizes compared",
            checked.0, checked.1
        );
    }
}

fn first_line_value(out: &str) -> String {
    out.lines()
        .next()
        .unwrap_or("")
        .split("  [")
        .next()
        .unwrap_or("")
        .to_string()
}

/// attach + info + bt, call, wait = pg_stat_activity, waits sample, plancache
/// (seed 000's point statement: custom x5, then generic 8.4425 < 13.4425),
/// plancache --fast (14+), plan --next = EXPLAIN EXECUTE, and a breakpoint
/// on the static choose_custom_plan reading the plan source through the
/// layouts (its magic number).
fn smoke(major: u32, dwarf: bool) {
    smoke_in(&pg_prefix(major), major, dwarf);
}

fn smoke_in(prefix: &Path, major: u32, dwarf: bool) {
    let cl = Cluster::start_prefix(prefix);
    cl.seed(&["mediumtab"]);
    let mut a = cl.connect();
    let pid = a.pid();
    let p = pid.to_string();

    // attach, info, bt, wait while idle (its last reply sent: waiting for
    // the client, not still in send)
    cl.wait_client_read(pid);
    let (code, out, err) = pgdbg(&[
        "attach", &p, "-q", "--ex", "wait", "--ex", "info", "--ex", "bt",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first_line_value(&out), "Client: ClientRead", "{out}");
    assert!(out.contains(&format!("PostgreSQL {major}.")), "{out}");
    assert!(out.contains("PostgresMain"), "{out}");
    if dwarf {
        assert!(err.is_empty(), "{err}");
        assert!(out.contains("debug info:  embedded in the binary"), "{out}");
    } else {
        assert!(
            err.contains(&format!("the layout pack for PostgreSQL {major}")),
            "{err}"
        );
        assert!(
            out.contains(&format!("layout pack for PostgreSQL {major}"))
                && out.contains("(static functions named by the symbol table)"),
            "{out}"
        );
    }

    // call, at the idle backend's stop
    let (code, out, err) = pgdbg(&["attach", &p, "-q", "--ex", "call pg_strtoint32(\"12\")"]);
    assert_eq!(code, 0, "{err}");
    if dwarf {
        assert_eq!(print_values(&out), vec!["12"], "{out}");
    } else {
        assert!(
            out.contains("pg_strtoint32 returned rax = 0xc (12): its return type is unknown without debug info"),
            "{out}"
        );
    }

    // wait and waits sample while the backend sleeps (checked in
    // pg_stat_activity first)
    let mut obs = cl.connect();
    let h = a.spawn_text("select pg_sleep(3)");
    wait_until("pg_sleep", Duration::from_secs(10), || {
        obs.simple_text(&format!(
            "select coalesce(wait_event, '') from pg_stat_activity where pid = {pid}"
        )) == "PgSleep"
    });
    let (code, out, err) = pgdbg(&[
        "attach",
        &p,
        "-q",
        "--ex",
        "wait",
        "--ex",
        "waits sample --for 1s",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first_line_value(&out), "Timeout: PgSleep", "{out}");
    let row = out
        .lines()
        .find(|l| l.split_whitespace().take(2).eq(["Timeout", "PgSleep"]))
        .unwrap_or_else(|| panic!("no PgSleep row in waits sample:\n{out}"));
    assert!(row.trim_end().ends_with("100.0%"), "{out}");
    a.rejoin(h).unwrap();

    // plancache
    a.exec("prepare s2 as select v from mediumtab where n = $1::numeric");
    let (_, ev) = watch(pid, 7, || {
        for i in 0..7 {
            a.simple_text(&format!("execute s2({})", 100 + i));
        }
    });
    for (i, e) in ev.iter().enumerate() {
        assert_eq!(e["statement"], "s2", "{e}");
        assert_eq!(e["choice"] == "generic", i >= 5, "{e}");
    }
    assert!((ev[6]["generic_cost"].as_f64().unwrap() - 8.4425).abs() < 1e-9);
    assert!((ev[5]["avg_custom_cost"].as_f64().unwrap() - 13.4425).abs() < 1e-9);
    if major == 13 {
        assert!(ev[6]["num_generic_plans"].is_null(), "{}", ev[6]);
        // the default (the in-process recorder) cannot tell decisions apart
        // without num_generic_plans: one line, then the two-stop mode
        a.exec("deallocate s2");
        a.exec("prepare s2 as select v from mediumtab where n = $1::numeric");
        let (out, ev) = watch_cmd(pid, "plancache --count 7", 7, || {
            for i in 0..7 {
                a.simple_text(&format!("execute s2({})", 100 + i));
            }
        });
        let why: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("no num_generic_plans"))
            .collect();
        assert_eq!(why.len(), 1, "{out}");
        assert!(
            why[0].ends_with("two ptrace stops per decision instead"),
            "{out}"
        );
        for (i, e) in ev.iter().enumerate() {
            assert_eq!(e["choice"] == "generic", i >= 5, "{e}");
        }
    } else {
        assert_eq!(ev[6]["num_generic_plans"], 2, "{}", ev[6]);
        a.exec("deallocate s2");
        a.exec("prepare s2 as select v from mediumtab where n = $1::numeric");
        let (out, ev) = watch_cmd(pid, "plancache --fast --count 7", 7, || {
            for i in 0..7 {
                a.simple_text(&format!("execute s2({})", 100 + i));
            }
        });
        assert!(out.contains("(recorded in-process, no stops)"), "{out}");
        for (i, e) in ev.iter().enumerate() {
            assert_eq!(e["choice"] == "generic", i >= 5, "{e}");
        }
        assert!((ev[6]["generic_cost"].as_f64().unwrap() - 8.4425).abs() < 1e-9);
    }

    // plan --next = EXPLAIN EXECUTE
    let pl = Pgdbg::spawn_armed(
        &["attach", &p, "-q", "--ex", "plan --next", "--ex", "detach"],
        pid,
        "standard_ExecutorRun",
    );
    a.simple_text("execute s2(4242)");
    let (code, out, err) = pl.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let plan: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("-- ") && !l.starts_with("Detached from"))
        .collect();
    assert_eq!(plan.join("\n"), a.explain_rows("explain execute s2(4242)"));

    // break on a static function (named by DWARF, or by .symtab)
    a.exec("deallocate s2");
    a.exec("prepare s2 as select v from mediumtab where n = $1::numeric");
    let script = write_script(
        &format!("majors-break-{major}"),
        &[
            "break choose_custom_plan",
            "continue",
            "print ((CachedPlanSource *)$rdi)->magic",
            "print ((CachedPlanSource *)$rdi)->num_custom_plans",
            "detach",
        ],
    );
    let br = Pgdbg::spawn_attached(
        &["attach", &p, "-q", "--script", script.to_str().unwrap()],
        pid,
    );
    assert_eq!(
        a.simple_text("execute s2(7)"),
        a.simple_text("select v from mediumtab where n = 7")
    );
    let (code, out, err) = br.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Breakpoint 1, choose_custom_plan"), "{out}");
    // CACHEDPLANSOURCE_MAGIC, then no custom plan made yet
    assert_eq!(print_values(&out), vec!["195726186", "0"], "{out}");
    let _ = std::fs::remove_file(&script);

    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn smoke_13_with_dwarf() {
    smoke(13, true);
}

#[test]
fn smoke_14_release_build() {
    smoke(14, false);
}

#[test]
fn smoke_16_release_build() {
    smoke(16, false);
}

#[test]
fn smoke_17_release_build() {
    smoke(17, false);
}

/// The release builds of the majors built here with DWARF, as more
/// binaries without it: 13's and 18's packs (extracted from the builds
/// here, 13.16 and 18) serve other minors' release builds (13.23, 18.4).
fn embedded_prefix(major: u32) -> std::path::PathBuf {
    let out = Command::new(repo().join("scripts/pg-embedded"))
        .arg(major.to_string())
        .output()
        .expect("run scripts/pg-embedded");
    assert!(out.status.success(), "scripts/pg-embedded {major} failed");
    std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn smoke_13_release_build() {
    smoke_in(&embedded_prefix(13), 13, false);
}

#[test]
fn smoke_18_release_build() {
    smoke_in(&embedded_prefix(18), 18, false);
}

/// Seed 000 on its own major, 16, as the release build without DWARF: the
/// range statement's generic cost equals the planner's own (EXPLAIN under
/// force_generic_plan), and on 1000 partitions the point statement stays
/// custom with generic 8307.5 against an average custom 15.8025.
#[test]
fn seed000_numbers_on_16() {
    let cl = Cluster::start_seeded(16);
    let generic = planner_generic_cost(&cl);
    let mut a = cl.connect();
    let pid = a.pid();
    let (_, ev) = watch(pid, 7, || {
        a.exec(S1);
        for _ in 0..7 {
            a.exec("execute s1(60,70)");
        }
    });
    let got = ev[5]["generic_cost"].as_f64().unwrap();
    eprintln!("s1: generic_cost {got} (planner: {generic})");
    assert!((got - generic).abs() < 0.006, "{} vs {generic}", ev[5]);

    a.exec("prepare s3 as select v from bigtab where n = $1::numeric");
    let (_, ev) = watch(pid, 7, || {
        for i in 0..7 {
            a.simple_text(&format!("execute s3({})", 5000 + i * 7919));
        }
    });
    assert!(ev.iter().all(|e| e["choice"] == "custom"), "{ev:?}");
    let g = ev[6]["generic_cost"].as_f64().unwrap();
    let avg = ev[6]["avg_custom_cost"].as_f64().unwrap();
    assert!((g - 8307.5).abs() < 1e-6, "generic {g}");
    assert!((avg - 15.8025).abs() < 1e-9, "avg custom {avg}");
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}
