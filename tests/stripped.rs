//! Stripped binaries: Debian's own postgresql-15 package (no debug info on
//! the machine) and a `strip --strip-all` copy of the project's 18 build,
//! debugged from `.dynsym` plus the layout packs in symbols/.

// scripts/test: needs PostgreSQL 13

use common::*;
use pgdbg_testbed as common;
use std::path::PathBuf;
use std::time::Duration;

const DEBIAN_15: &str = "/usr/lib/postgresql/15";

fn debian_prefix() -> PathBuf {
    let p = PathBuf::from(DEBIAN_15);
    assert!(
        p.join("bin/postgres").exists(),
        "Debian's postgresql-15 package is needed (scripts/test installs it)"
    );
    p
}

/// A committed pack equals a fresh extraction from the project's build
/// (the version string aside: a newer minor of the same major has the
/// same layouts).
#[test]
fn committed_packs_match_fresh_extraction() {
    for major in [13, 15, 18] {
        let bin = pg_prefix(major).join("bin/postgres");
        let (code, out, err) = pgdbg(&["symbols", "extract", bin.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let mut fresh: serde_json::Value = serde_json::from_str(&out).unwrap();
        let committed =
            std::fs::read_to_string(repo().join(format!("symbols/pg{major}.json"))).unwrap();
        let mut committed: serde_json::Value = serde_json::from_str(&committed).unwrap();
        fresh.as_object_mut().unwrap().remove("version");
        committed.as_object_mut().unwrap().remove("version");
        assert!(
            fresh == committed,
            "symbols/pg{major}.json is stale: regenerate with scripts/gen-symbols"
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

/// wait, plan --next and plancache on a stripped server.
fn check_stripped(cl: &Cluster, major: u32, bigtab: bool) {
    let mut a = cl.connect();
    let pid = a.pid();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let maps_before = anon_exec_maps(pid);

    // the one-line notice, the mode in `info`, and `wait` = pg_stat_activity
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "wait",
        "--ex",
        "info",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("pgdbg: no debug info for {}", exe.display()))
            && err.contains(&format!("layout pack for PostgreSQL {major}")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(first_line_value(&out), "Client: ClientRead");
    assert!(out.contains("layout pack for PostgreSQL"), "{out}");
    let mut obs = cl.connect();
    let h = a.spawn_text("select pg_sleep(1.5)");
    wait_until("pg_sleep", Duration::from_secs(10), || {
        obs.simple_text(&format!(
            "select coalesce(wait_event, '') from pg_stat_activity where pid = {pid}"
        )) == "PgSleep"
    });
    let (code, out, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "wait"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first_line_value(&out), "Timeout: PgSleep");
    a.rejoin(h).unwrap();

    // calls in an aborted transaction: refused, the state read through
    // exported functions (CurrentTransactionState is static); wait names
    // still resolved there; ROLLBACK and the next statements fine
    let call = |cmd: &str| pgdbg(&["attach", &pid.to_string(), "-q", "--ex", cmd]);
    a.exec("begin");
    assert!(a.c.as_mut().unwrap().simple_query("select 1/0").is_err());
    let (code, out, err) = call("call GetCurrentTransactionId()");
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains(
            "the backend's transaction is aborted (transaction status E: a failed transaction block"
        ),
        "{err}"
    );
    let (code, out, err) = call("wait");
    assert_eq!(code, 0, "{err}");
    assert_eq!(first_line_value(&out), "Client: ClientRead");
    a.exec("rollback");
    // idle, and in a live transaction block: calls made
    let (code, _, err) = call("call pg_strtoint32(\"12\")");
    assert_eq!(code, 0, "{err}");
    a.exec("begin");
    let (code, _, err) = call("call pg_strtoint32(\"13\")");
    assert_eq!(code, 0, "{err}");
    a.exec("commit");
    assert_eq!(a.query_one_i64("select 6"), 6);

    // plan --next = EXPLAIN EXECUTE
    a.exec("prepare s2 as select v from mediumtab where n = $1::numeric");
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next",
            "--ex",
            "detach",
        ],
        pid,
        "standard_ExecutorRun",
    );
    a.simple_text("execute s2(4242)");
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let plan: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("-- ") && !l.starts_with("Detached from"))
        .collect();
    assert_eq!(plan.join("\n"), a.explain_rows("explain execute s2(4242)"));

    // plancache: the point statement goes generic at the 6th execution; the
    // SQL-level name comes from its text (the hash of names is static)
    a.exec("deallocate s2");
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

    // --fast: the in-process recorder, placed with the layout pack's
    // offsets and the exported symbol's size; the same choices
    a.exec("deallocate s2");
    a.exec("prepare s2 as select v from mediumtab where n = $1::numeric");
    let (out, ev) = watch_cmd(pid, "plancache --fast --count 7", 7, || {
        for i in 0..7 {
            a.simple_text(&format!("execute s2({})", 100 + i));
        }
    });
    assert!(out.contains("(recorded in-process, no stops)"), "{out}");
    for (i, e) in ev.iter().enumerate() {
        assert_eq!(e["statement"], "s2", "{e}");
        assert_eq!(e["execution"], (i + 1) as i64, "{e}");
        assert_eq!(e["choice"] == "generic", i >= 5, "{e}");
    }
    assert!((ev[6]["generic_cost"].as_f64().unwrap() - 8.4425).abs() < 1e-9);
    assert_eq!(anon_exec_maps(pid), maps_before);

    if bigtab {
        // seed 000's numbers: generic 8307.5 vs average custom 15.8025
        a.exec("prepare s3 as select v from bigtab where n = $1::numeric");
        let (_, ev) = watch(pid, 7, || {
            for i in 0..7 {
                a.simple_text(&format!("execute s3({})", 5000 + i * 7919));
            }
        });
        assert!(ev.iter().all(|e| e["choice"] == "custom"));
        let g = ev[6]["generic_cost"].as_f64().unwrap();
        let avg = ev[6]["avg_custom_cost"].as_f64().unwrap();
        assert!((g - 8307.5).abs() < 1e-6, "generic {g}");
        assert!((avg - 15.8025).abs() < 1e-9, "avg custom {avg}");
    }
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

#[test]
fn debian_stripped_postgresql_15() {
    let prefix = debian_prefix();
    let cl = Cluster::start_seeded_prefix(&prefix, "debian-15");
    check_stripped(&cl, 15, true);
}

/// A `strip --strip-all` copy of the project's 18 build running a cluster.
#[test]
fn strip_all_copy_of_18() {
    let mut cl = Cluster::start(18);
    cl.seed(&["mediumtab"]);
    let root = std::env::temp_dir().join(format!("pgdbg-stripall-{}", std::process::id()));
    let stripped = cl.restart_from_stripped_copy(&pg_prefix(18), &root, "--strip-all");
    let mut a = cl.connect();
    let pid = a.pid();
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(),
        stripped
    );
    drop(a);
    check_stripped(&cl, 18, false);
    cl.stop_stripped();
    let _ = std::fs::remove_dir_all(&root);
}

/// A pack of the wrong major and a corrupted pack are refused, the backend
/// untouched.
#[test]
fn wrong_or_corrupted_pack_is_refused() {
    let cl = Cluster::start_seeded_prefix(&debian_prefix(), "debian-15");
    let mut a = cl.connect();
    let pid = a.pid();
    let p18 = repo().join("symbols/pg18.json");
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "--symbols",
        p18.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("is for PostgreSQL 18 but") && err.contains("is PostgreSQL 15"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let bad = std::env::temp_dir().join(format!("pgdbg-bad-pack-{}.json", std::process::id()));
    let mut text = std::fs::read_to_string(repo().join("symbols/pg15.json")).unwrap();
    text.truncate(text.len() / 2);
    std::fs::write(&bad, text).unwrap();
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "--symbols",
        bad.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("is corrupted"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.query_one_i64("select 5"), 5);
    let _ = std::fs::remove_file(&bad);
}
