//! `--by-statement` on real PostgreSQL 15 (compute_query_id on), 18 (no
//! query id: statements told apart by their text) and 16's release build
//! (compute_query_id on; no DWARF: the entry is read by the layout pack of
//! symbols/, the database and role named by their OIDs, the wait events by
//! the pack's enums): one session runs a
//! known script, `select pg_sleep(1.2)`, a PL/pgSQL loop on a CPU for
//! 1.2 s, `select pg_sleep(0.3)`, then waits for its client, while
//! `pgdbg profile --wall --by-statement` and `waits sample --by-statement`
//! record it.  The recording starts before the script and ends (Ctrl-C)
//! after the session is seen idle, so the window holds the whole script
//! however slow the machine.
//!
//! What is known without pgdbg: each statement's elapsed time (the
//! client's own clock), its text, and on 15 its query id (the server's
//! `EXPLAIN (VERBOSE)`), and that both sleeps share that query id (the
//! constant is not part of it), while on 18 they are two statements.
//! What is checked: each statement's time on and off a CPU is nearly all
//! of its elapsed time and never more, the sleeps' time is
//! `Timeout:PgSleep`, the loop's is not, the idle time is apart, and
//! `report` groups the capture's samples by the same statements.  The
//! sampling starts with no cached wait-event names: the statements' rows
//! carry the names asked of the backend at the end.

use common::*;
use pgdbg_testbed as common;
use serde_json::Value;
use std::time::{Duration, Instant};

const SLEEP: &str = "select pg_sleep(1.2)";
const CPU: &str = "do $$ declare t timestamptz := clock_timestamp(); begin \
                   while clock_timestamp() < t + interval '1.2 s' loop end loop; end $$";
const SHORT: &str = "select pg_sleep(0.3)";
/// What a statement's time may exceed its elapsed time by: an on-CPU
/// sample weighs a whole period (1/99 s), plus the clocks' reading.
const OVER_MS: f64 = 1000.0 / 99.0 + 5.0;

/// Run the script on `c` (its backend recorded meanwhile): each
/// statement's elapsed seconds, by the client's clock.
fn run_script(c: &mut Client) -> Vec<f64> {
    [SLEEP, CPU, SHORT]
        .iter()
        .map(|q| {
            let t0 = Instant::now();
            c.exec(q);
            t0.elapsed().as_secs_f64()
        })
        .collect()
}

/// The by-statement row whose text starts like `text` (the first text
/// seen of its statement).
fn row<'a>(rows: &'a [Value], text: &str) -> &'a Value {
    rows.iter()
        .find(|r| {
            r["statement"]["query"]
                .as_str()
                .is_some_and(|q| q.starts_with(&text[..20]))
        })
        .unwrap_or_else(|| panic!("no row of {text:?}: {rows:#?}"))
}

fn ms(r: &Value) -> f64 {
    r["on_cpu_ms"].as_f64().unwrap() + r["off_cpu_ms"].as_f64().unwrap()
}

/// The query id the server computes for `q` (EXPLAIN VERBOSE's "Query
/// Identifier"), None when it computes none.
fn query_id(cl: &Cluster, q: &str) -> Option<i64> {
    let mut c = cl.connect();
    let plan = c.explain_rows(&format!("explain (verbose) {q}"));
    plan.lines()
        .find_map(|l| l.trim().strip_prefix("Query Identifier: "))
        .map(|v| v.parse().unwrap())
}

fn profile_by_statement(major: u32, settings: &[&str]) {
    let cl = Cluster::start_with(major, settings);
    let mut a = cl.connect();
    let pid = a.pid();
    let qid = query_id(&cl, SLEEP);
    assert_eq!(
        qid.is_some(),
        settings.contains(&"compute_query_id=on"),
        "query ids as set: {qid:?}"
    );
    // whose statements: names where the server's debug info has `Port`,
    // else pg_stat_activity's datid and usesysid
    let who = if major == 16 {
        let mut c = cl.connect();
        let oid = |c: &mut Client, col: &str| {
            c.query_one_i64(&format!(
                "select {col}::bigint from pg_stat_activity where pid = {pid}"
            ))
        };
        format!(
            "client backend, database OID {}, role OID {}",
            oid(&mut c, "datid"),
            oid(&mut c, "usesysid")
        )
    } else {
        "client backend, database postgres, role postgres".to_string()
    };
    assert_eq!(qid, query_id(&cl, SHORT), "one query id for both sleeps");

    let out = std::env::temp_dir().join(format!("pgdbg-bystmt-{major}-{}", std::process::id()));
    // a names cache of its own, empty: the wait events are named by the
    // debug info or the layout pack, not by what an earlier command cached
    let cache = out.with_extension("cache");
    let _ = std::fs::remove_dir_all(&cache);
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    let mut p = Pgdbg::spawn_to_file_env(
        &[
            "profile",
            &pid.to_string(),
            "--wall",
            "--by-statement",
            "--format",
            "json",
        ],
        &out,
        &env,
    );
    wait_for_stderr(
        &mut p,
        "profile: recording backend",
        Duration::from_secs(60),
    );
    let took = run_script(&mut a);
    cl.wait_client_read(pid);
    std::thread::sleep(Duration::from_millis(200));
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let (code, _, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_dir_all(&cache);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let rows = v["by_statement"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"));
    eprintln!(
        "elapsed {took:?}; {}",
        serde_json::to_string_pretty(rows).unwrap()
    );
    let heading = v["by_statement_heading"].as_str().unwrap();
    assert!(heading.contains(&who), "{heading}");

    let sleep = row(rows, SLEEP);
    let cpu = row(rows, CPU);
    let top = |r: &Value| r["top"][0][0].as_str().unwrap().to_string();
    // the sleeps: nearly all their time, off a CPU, in pg_sleep's wait
    let slept = if qid.is_some() {
        // one statement by query id: both sleeps in one row
        assert_eq!(sleep["statement"]["query_id"].as_i64(), qid, "{sleep}");
        took[0] + took[2]
    } else {
        assert!(sleep["statement"]["query_id"].is_null(), "{sleep}");
        let short = row(rows, SHORT);
        assert!(ms(short) >= 0.8 * took[2] * 1e3 && ms(short) <= took[2] * 1e3 + OVER_MS);
        assert_eq!(top(short), "[wait: Timeout:PgSleep]", "{short}");
        took[0]
    };
    assert!(
        ms(sleep) >= 0.9 * slept * 1e3 && ms(sleep) <= slept * 1e3 + OVER_MS,
        "the sleeps' {} ms of their {slept} s: {sleep}",
        ms(sleep)
    );
    assert_eq!(top(sleep), "[wait: Timeout:PgSleep]", "{sleep}");
    assert!(sleep["top"][0][1].as_f64().unwrap() > 0.9, "{sleep}");
    // the loop: its time, on a CPU (or preempted), never in a sleep's wait
    assert!(
        ms(cpu) >= 0.9 * took[1] * 1e3 && ms(cpu) <= took[1] * 1e3 + OVER_MS,
        "the loop's {} ms of its {} s: {cpu}",
        ms(cpu),
        took[1]
    );
    assert!(cpu["on_cpu_samples"].as_u64().unwrap() > 0, "{cpu}");
    assert!(
        !cpu["top"].to_string().contains("PgSleep"),
        "the loop does not sleep: {cpu}"
    );
    // waiting for the client after the script: idle, apart
    let idle = rows
        .iter()
        .find(|r| r["statement"]["state"] == "idle")
        .unwrap_or_else(|| panic!("an idle row: {rows:#?}"));
    assert!(idle["off_cpu_ms"].as_f64().unwrap() >= 100.0, "{idle}");
    assert!(idle["top"].to_string().contains("ClientRead"), "{idle}");
    cl.assert_no_crash();
}

#[test]
fn profile_wall_by_statement_15() {
    profile_by_statement(15, &["compute_query_id=on"]);
}

#[test]
fn profile_wall_by_statement_18() {
    profile_by_statement(18, &[]);
}

#[test]
fn profile_wall_by_statement_16_layout_pack() {
    profile_by_statement(16, &["compute_query_id=on"]);
}

/// `waits sample --by-statement` at the prompt, its capture and `report`.
#[test]
fn waits_sample_by_statement_15() {
    let cl = Cluster::start_with(15, &["compute_query_id=on"]);
    let mut a = cl.connect();
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!("pgdbg-bystmt-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&cap);
    let file = cap.with_extension("out");
    // a cache of its own: the wait events' names are asked of the backend
    // after the sampling, and the statements' rows carry them too
    let cache = cap.with_extension("cache");
    let _ = std::fs::remove_dir_all(&cache);
    let p = Pgdbg::spawn_to_file_env(
        &[
            "attach",
            &pid.to_string(),
            "--capture",
            cap.to_str().unwrap(),
            "-e",
            "waits sample --hz 500 --by-statement",
        ],
        &file,
        &[("XDG_CACHE_HOME", cache.to_str().unwrap())],
    );
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    wait_until("the sampling started", Duration::from_secs(60), || {
        read().contains("waits: sampling backend")
    });
    let took = run_script(&mut a);
    cl.wait_client_read(pid);
    std::thread::sleep(Duration::from_millis(200));
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let (_, _, err) = p.wait(Duration::from_secs(120));
    let out = read();
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&cache);
    eprintln!("elapsed {took:?}\n{out}\n{err}");
    assert!(out.contains("by statement (pg_stat_activity's query id, else its text)"));
    let line_after = |label: &str| -> String {
        let mut it = out.lines().skip_while(|l| !l.contains(label));
        it.next().unwrap_or_else(|| panic!("{label}: {out}"));
        it.next().unwrap().to_string()
    };
    let sleeps = line_after(SLEEP);
    assert!(sleeps.trim().starts_with("Timeout:PgSleep"), "{sleeps}");
    assert!(line_after("while clock_timestamp").contains("on CPU"));

    let lines = std::fs::read_to_string(&cap).unwrap();
    let ev: Value = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "wait_samples")
        .unwrap_or_else(|| panic!("{lines}"));
    let rows = ev["by_statement"].as_array().unwrap();
    let sleep = rows
        .iter()
        .find(|r| r["query"].as_str().is_some_and(|q| q.starts_with(SLEEP)))
        .unwrap_or_else(|| panic!("{ev}"));
    let n = sleep["samples"].as_u64().unwrap() as f64;
    let total = ev["samples"].as_u64().unwrap() as f64;
    let whole = ev["duration_s"].as_f64().unwrap();
    let expect = (took[0] + took[2]) / whole * total;
    assert!(
        n >= 0.85 * expect && n <= 1.1 * expect,
        "{n} samples of the sleeps, {expect} expected from their time: {ev}"
    );
    assert_eq!(sleep["profile"][0]["wait_event"], "PgSleep", "{sleep}");
    // report: the samples per statement, the query id in its column
    let (code, rep, err) = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_file(&cap);
    let section = rep
        .split("Wait samples per statement")
        .nth(1)
        .unwrap_or_else(|| panic!("{rep}"));
    let qid = query_id(&cl, SLEEP).unwrap().to_string();
    assert!(
        section
            .lines()
            .any(|l| l.starts_with("select pg_sleep(1.2)")
                && l.contains(&qid)
                && l.contains("PgSleep")),
        "{rep}"
    );
    cl.assert_no_crash();
}
