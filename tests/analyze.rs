//! `plan --next --analyze` on real PostgreSQL 15 and 18: the actual rows
//! and loops of every node equal the same statement's EXPLAIN (ANALYZE)
//! run in a second session and the true counts computed in SQL; the
//! statement's result is unchanged; "Execution Time" is there; after
//! detach the backend's next statement runs without instrumentation.

mod analyze_text;
use analyze_text::*;
use common::*;
use pgdbg_testbed as common;
use std::time::Duration;

const SETUP: &str = "
    create table an_t1 as select g as id, g % 10 as k from generate_series(1, 5000) g;
    create table an_t2 as select g as k, 'name ' || g as name from generate_series(0, 9) g;
    analyze an_t1; analyze an_t2;";

/// A hash join, an aggregate over a sort.
const JOIN: &str = "select t2.name, count(*) from an_t1 t1 join an_t2 t2 on t1.k = t2.k \
                    where t1.id <= 3000 group by t2.name order by t2.name";
/// A nested loop whose inner side runs once per outer row.
const LATERAL: &str = "select count(*) from an_t2 t2, lateral \
                       (select * from an_t1 t1 where t1.k = t2.k limit 7) s";

fn run_analyze_cases(major: u32) {
    let cl = Cluster::start(major);
    let mut b = cl.connect();
    b.exec(SETUP);
    // the true counts, in SQL
    let filtered = b.query_one_i64("select count(*) from an_t1 where id <= 3000");
    let groups = b.query_one_i64(
        "select count(distinct t2.name) from an_t1 t1 join an_t2 t2 on t1.k = t2.k where t1.id <= 3000",
    );
    let outer = b.query_one_i64("select count(*) from an_t2");
    assert_eq!((filtered, groups, outer), (3000, 10, 10));
    let expected_join = b.explain_rows(&format!(
        "select string_agg(name || ':' || count, ',') from ({JOIN}) x"
    ));
    let expected_lateral = b.simple_text(LATERAL);

    let mut a = cl.connect();
    // the same plan in both sessions, and no parallelism here
    for c in [&mut a, &mut b] {
        c.exec(
            "set max_parallel_workers_per_gather = 0; set enable_mergejoin = off; set jit = off",
        );
    }
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-analyze-{}-{major}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&cap);
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--capture",
            cap.to_str().unwrap(),
            "--ex",
            "plan --next --analyze",
            "--ex",
            "plan --next --analyze --timing off --buffers",
            "--ex",
            "plan --next --analyze --format json",
            "--ex",
            "detach",
        ],
        pid,
        "standard_ExecutorStart",
    );
    let got_join = a.explain_rows(&format!(
        "select string_agg(name || ':' || count, ',') from ({JOIN}) x"
    ));
    let got_lateral = a.simple_text(LATERAL);
    let got_lateral2 = a.simple_text(LATERAL);
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{out}\n{err}");
    // the backend's results are unaffected
    assert_eq!(got_join, expected_join);
    assert_eq!(got_lateral, expected_lateral);
    assert_eq!(got_lateral2, expected_lateral);
    assert_eq!(tracer_pid(pid), 0);

    let bl = blocks(&out);
    assert_eq!(bl.len(), 3, "{out}");
    // 1. the join: per node equal to EXPLAIN (ANALYZE) in session b
    let mine = actuals(&bl[0]);
    let theirs = actuals(&b.explain_rows(&format!(
        "explain (analyze) select string_agg(name || ':' || count, ',') from ({JOIN}) x"
    )));
    assert_eq!(mine, theirs, "pgdbg:\n{}\nEXPLAIN ANALYZE differs", bl[0]);
    assert!(bl[0].contains("Execution Time:"), "{}", bl[0]);
    assert!(bl[0].contains("actual time="), "{}", bl[0]);
    let row = |node: &str| -> f64 {
        mine.iter()
            .find(|(n, ..)| n.starts_with(node))
            .unwrap_or_else(|| panic!("no {node} in {}", bl[0]))
            .1
            .parse()
            .unwrap()
    };
    assert_eq!(row("Seq Scan on an_t1") as i64, filtered);
    assert_eq!(row("Seq Scan on an_t2") as i64, outer);
    assert_eq!(row("Hash Join") as i64, filtered);
    assert_eq!(row("Sort") as i64, groups);

    // 2. the nested loop, timing off, buffers: loops = outer rows
    let mine = actuals(&bl[1]);
    let theirs =
        actuals(&b.explain_rows(&format!("explain (analyze, timing off, buffers) {LATERAL}")));
    assert_eq!(mine, theirs, "pgdbg:\n{}", bl[1]);
    assert!(!bl[1].contains("actual time="), "{}", bl[1]);
    assert!(bl[1].contains("Buffers: shared hit="), "{}", bl[1]);
    let limit = mine
        .iter()
        .find(|(n, ..)| n == "Limit")
        .unwrap_or_else(|| panic!("no Limit: {}", bl[1]));
    assert_eq!(limit.2, outer.to_string(), "{}", bl[1]);
    assert_eq!(limit.1.parse::<f64>().unwrap(), 7.0);

    // 3. JSON parses, with the actuals and the execution time
    let j: serde_json::Value = serde_json::from_str(bl[2].trim()).expect("JSON parses");
    assert_eq!(j[0]["Plan"]["Node Type"], "Aggregate");
    assert_eq!(j[0]["Plan"]["Actual Rows"].as_f64(), Some(1.0));
    assert!(j[0]["Execution Time"].as_f64().unwrap() > 0.0, "{}", bl[2]);

    // one plan event per statement, with the text
    let ev = read_events(&cap, "plan");
    assert_eq!(ev.len(), 3);
    assert!(ev[0]["text"].as_str().unwrap().contains("Execution Time"));
    let _ = std::fs::remove_file(&cap);

    // after detach: the next statement runs without instrumentation
    next_statement_plain(pid, || assert_eq!(a.simple_text(LATERAL), expected_lateral));
    let plain = a.explain_rows(&format!("explain (costs off) {LATERAL}"));
    assert!(!plain.contains("actual"), "{plain}");

    // a parallel seq scan: the workers' rows are in the leader's nodes
    let par = "select count(*) from an_t1 where k = 3";
    let truth = b.query_one_i64("select count(*) from an_t1 where k = 3");
    a.exec(
        "set max_parallel_workers_per_gather = 2; set parallel_setup_cost = 0; \
         set parallel_tuple_cost = 0; set min_parallel_table_scan_size = 0",
    );
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next --analyze",
            "--ex",
            "detach",
        ],
        pid,
        "standard_ExecutorStart",
    );
    assert_eq!(a.query_one_i64(par), truth);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    let bl = blocks(&out);
    assert_eq!(bl.len(), 1, "{out}");
    assert!(bl[0].contains("Workers Launched:"), "{}", bl[0]);
    let mine = actuals(&bl[0]);
    let scan = mine
        .iter()
        .find(|(n, ..)| n.starts_with("Parallel Seq Scan on an_t1"))
        .unwrap_or_else(|| panic!("no parallel scan: {}", bl[0]));
    let (rows, loops): (f64, f64) = (scan.1.parse().unwrap(), scan.2.parse().unwrap());
    // rows are per loop, rounded (15) or with two decimals (18)
    assert!(
        (rows * loops - truth as f64).abs() <= loops,
        "{rows} x {loops} vs {truth}: {}",
        bl[0]
    );
    assert_eq!(mine[0].1.parse::<f64>().unwrap(), 1.0, "{}", bl[0]);
    cl.assert_no_crash();
}

/// `plan --progress` on a scan that runs for seconds (each row sleeps):
/// rows and blocks only grow, and the query's result is unchanged.
fn run_progress_case(major: u32) {
    let cl = Cluster::start(major);
    let mut b = cl.connect();
    b.exec(SETUP);
    let mut a = cl.connect();
    let pid = a.pid();
    // 5000 rows of 2 ms: 10 s, beyond both runs below (2 s and 1 s)
    let slow = "select count(*) from an_t1 where length(pg_sleep(0.002)::text) >= 0";
    let h = a.spawn_text(slow);
    cl.wait_active(&[pid], "pg_sleep(0.002)");
    let cap = std::env::temp_dir().join(format!(
        "pgdbg-progress-{major}-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&cap);
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "plan --progress --every 300ms --for 2s",
        "--ex",
        "detach",
        "--capture",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    // the scan's line of each report
    let scans: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("Seq Scan on an_t1"))
        .collect();
    assert!(scans.len() >= 3, "{out}");
    assert!(out.contains("rows counted since"), "{out}");
    assert!(out.contains("elapsed"), "{out}");
    let num = |l: &str, k: &str| -> u64 {
        let i = l.find(k).unwrap_or_else(|| panic!("no {k} in {l}"));
        l[i + k.len()..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect::<String>()
            .parse()
            .unwrap()
    };
    let rows: Vec<u64> = scans.iter().map(|l| num(l, "rows so far=")).collect();
    let blocks: Vec<u64> = scans.iter().map(|l| num(l, "blocks ")).collect();
    assert!(rows.windows(2).all(|w| w[0] <= w[1]), "{out}");
    assert!(blocks.windows(2).all(|w| w[0] <= w[1]), "{out}");
    assert!(rows.last() > rows.first(), "rows do not grow: {out}");
    assert!(*rows.last().unwrap() < 5000, "{out}");
    let total = num(scans[0], " of ");
    assert_eq!(
        total as i64,
        b.query_one_i64("select pg_relation_size('an_t1') / current_setting('block_size')::int")
    );
    // each report is a capture event with the same counts, and the report
    // shows the last one
    let ev = read_events(&cap, "progress");
    assert_eq!(ev.len(), scans.len(), "{ev:?}");
    let scan_node = |e: &serde_json::Value| {
        e["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"].as_str().unwrap().starts_with("Seq Scan on an_t1"))
            .cloned()
            .unwrap_or_else(|| panic!("no scan node in {e}"))
    };
    let last = scan_node(ev.last().unwrap());
    assert_eq!(
        last["rows"].as_f64().unwrap() as u64,
        *rows.last().unwrap(),
        "{last}"
    );
    assert_eq!(last["blocks_total"].as_u64().unwrap(), total, "{last}");
    assert!(
        ev.iter().all(|e| e["elapsed_s"].as_f64().is_some()),
        "{ev:?}"
    );
    let (code, report, err) = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(report.contains("Statement progress"), "{report}");
    let line = report
        .lines()
        .find(|l| l.contains("Seq Scan on an_t1"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        line.contains(&format!("{} of {total}", blocks.last().unwrap())),
        "{line}"
    );
    let _ = std::fs::remove_file(&cap);
    assert_eq!(tracer_pid(pid), 0);
    // a second plan --progress on the same statement reads the counting
    // the first one left (it stays until the statement ends), and says so
    let (code, out2, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "plan --progress --every 300ms --for 1s",
        "--ex",
        "detach",
    ]);
    assert_eq!(code, 0, "{out2}\n{err}");
    assert!(
        out2.contains("rows counted since an earlier plan --progress"),
        "{out2}"
    );
    assert!(!out2.contains("own instrumentation"), "{out2}");
    let again = out2
        .lines()
        .find(|l| l.contains("Seq Scan on an_t1"))
        .map(|l| num(l, "rows so far="))
        .unwrap_or_else(|| panic!("{out2}"));
    assert!(
        again >= *rows.last().unwrap(),
        "counted on: {again}\n{out2}"
    );
    // the statement completes with its own result after pgdbg left
    assert_eq!(a.rejoin(h).unwrap(), "5000");
    // and the session's next EXPLAIN ANALYZE is as usual
    let again =
        a.explain_rows("explain (analyze, timing off, costs off) select count(*) from an_t2");
    assert!(again.contains("(actual rows=1"), "{again}");
    cl.assert_no_crash();
}

/// `plan --progress` at a stop inside a Gather's shared-memory setup
/// (a breakpoint on InitializeParallelDSM: the nodes below have been
/// asked for their sizes, not yet given their parts): counting installed
/// there would make the Partial Aggregate take room it did not ask for
/// ("out of shared memory"); pgdbg waits until the backend is past it.
/// The statement completes with its own result.
fn run_progress_parallel_setup_case(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    a.exec(SETUP);
    a.exec(
        "set max_parallel_workers_per_gather = 2; set parallel_setup_cost = 0; \
         set parallel_tuple_cost = 0; set min_parallel_table_scan_size = 0; set jit = off",
    );
    let slow = "select count(*) from an_t1 where length(pg_sleep(0.0005)::text) >= 0";
    let plan = a.explain_rows(&format!("explain (costs off) {slow}"));
    assert!(
        plan.contains("Gather") && plan.contains("Partial Aggregate"),
        "{plan}"
    );
    let pid = a.pid();
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break InitializeParallelDSM",
            "--ex",
            "continue",
            "--ex",
            "bt 3",
            "--ex",
            "delete",
            "--ex",
            "plan --progress --every 200ms --for 1s",
            "--ex",
            "detach",
        ],
        pid,
    );
    let got = a.simple_text(slow);
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(got, "5000", "{out}\n{err}");
    assert_eq!(code, 0, "{out}\n{err}");
    // the stop was the one meant, and counting was installed after it
    assert!(out.contains("InitializeParallelDSM"), "{out}");
    assert!(out.contains("Partial Aggregate"), "{out}");
    assert!(out.contains("rows counted since"), "{out}");
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

/// `plan --progress` on a statement that counts its own rows (the
/// session's EXPLAIN (ANALYZE, TIMING OFF)): making the plan text calls
/// ExplainNode, which ends the running nodes' loops; pgdbg puts their
/// counters back, so the session's EXPLAIN ANALYZE shows one loop of all
/// the rows, as without pgdbg.
fn run_progress_own_instrumentation_case(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    a.exec(SETUP);
    a.exec("set max_parallel_workers_per_gather = 0; set jit = off");
    let pid = a.pid();
    let slow = "explain (analyze, timing off, costs off) \
                select count(*) from an_t1 where length(pg_sleep(0.0005)::text) >= 0";
    let h = a.spawn_text(slow);
    cl.wait_active(&[pid], "pg_sleep(0.0005)");
    // the scan has returned rows (its loop is running) before pgdbg looks
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "plan --progress --every 200ms --for 1s",
        "--ex",
        "detach",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("rows from the statement's own instrumentation"),
        "{out}"
    );
    let text = a.rejoin(h).unwrap();
    let got = actuals(&text);
    let scan = got
        .iter()
        .find(|(n, ..)| n.starts_with("Seq Scan on an_t1"))
        .unwrap_or_else(|| panic!("no scan: {text}"));
    assert_eq!(scan.1.parse::<f64>().unwrap(), 5000.0, "{text}\n{out}");
    assert_eq!(scan.2, "1", "{text}\n{out}");
    assert_eq!(got[0].2, "1", "{text}");
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

#[test]
fn progress_parallel_setup_15() {
    run_progress_parallel_setup_case(15);
}

#[test]
fn progress_parallel_setup_18() {
    run_progress_parallel_setup_case(18);
}

#[test]
fn progress_own_instrumentation_15() {
    run_progress_own_instrumentation_case(15);
}

#[test]
fn progress_own_instrumentation_18() {
    run_progress_own_instrumentation_case(18);
}

#[test]
fn progress_15() {
    run_progress_case(15);
}

#[test]
fn progress_18() {
    run_progress_case(18);
}

#[test]
fn analyze_15() {
    run_analyze_cases(15);
}

#[test]
fn analyze_18() {
    run_analyze_cases(18);
}

/// pgdbg killed (SIGKILL) while `plan --next --analyze` waits for the
/// statement, then while the analyzed statement runs: the guardian takes
/// the breakpoints out, and the statement completes with its own result.
fn run_killed_case(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    a.exec(SETUP);
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let clean = |f: &str| code_matches_file(pid, &bin, f, 16);
    let expected = a.simple_text(LATERAL);

    // 1. killed while waiting at the executor's start
    let mut p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next --analyze",
        ],
        pid,
    );
    wait_until(
        "the executor-start breakpoint",
        Duration::from_secs(30),
        || !clean("standard_ExecutorStart"),
    );
    p.child.kill().unwrap();
    let _ = p.wait(Duration::from_secs(30));
    wait_until(
        "the guardian to restore the backend",
        Duration::from_secs(30),
        || tracer_pid(pid) == 0 && clean("standard_ExecutorStart"),
    );
    assert_eq!(a.simple_text(LATERAL), expected);

    // 2. killed while the analyzed statement runs (its end breakpoint armed)
    let mut p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next --analyze",
        ],
        pid,
    );
    wait_until(
        "the executor-start breakpoint",
        Duration::from_secs(30),
        || !clean("standard_ExecutorStart"),
    );
    let h = a.spawn_text("select count(*) from an_t1 where length(pg_sleep(0.0005)::text) >= 0");
    wait_until(
        "the executor-end breakpoint",
        Duration::from_secs(30),
        || !clean("standard_ExecutorEnd"),
    );
    p.child.kill().unwrap();
    let _ = p.wait(Duration::from_secs(30));
    wait_until(
        "the guardian to restore the backend",
        Duration::from_secs(30),
        || tracer_pid(pid) == 0 && clean("standard_ExecutorEnd") && clean("standard_ExecutorStart"),
    );
    assert_eq!(a.rejoin(h).unwrap(), "5000");
    assert_eq!(a.simple_text(LATERAL), expected);
    cl.assert_no_crash();
}

#[test]
fn killed_15() {
    run_killed_case(15);
}

#[test]
fn killed_18() {
    run_killed_case(18);
}

/// `--count N`: each statement's EXPLAIN ANALYZE is printed as it ends,
/// not all N at the end (the next statement is run only once the previous
/// one's block is on stdout).
fn analyze_count_prints_each_as_it_ends(major: u32) {
    use std::io::BufRead;
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let mut p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next --analyze --count 3 --for 120s",
        ],
        pid,
        "standard_ExecutorStart",
    );
    let out = std::io::BufReader::new(p.child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in out.lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut seen: Vec<String> = Vec::new();
    let wait_for = |seen: &mut Vec<String>, needle: &str| {
        let t0 = std::time::Instant::now();
        while !seen.iter().any(|l| l.contains(needle)) {
            let left = Duration::from_secs(30).saturating_sub(t0.elapsed());
            match rx.recv_timeout(left) {
                Ok(l) => seen.push(l),
                Err(_) => panic!("'{needle}' not printed yet:\n{}", seen.join("\n")),
            }
        }
    };
    for i in 1..=3 {
        assert_eq!(a.query_one_i64(&format!("select {i}00 + 1")), i * 100 + 1);
        wait_for(&mut seen, &format!("-- select {i}00 + 1"));
        wait_for(&mut seen, "Execution Time:");
        seen.clear();
    }
    wait_for(&mut seen, "plan --analyze: 3 statements shown");
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

#[test]
fn analyze_count_prints_each_as_it_ends_15() {
    analyze_count_prints_each_as_it_ends(15);
}

#[test]
fn analyze_count_prints_each_as_it_ends_18() {
    analyze_count_prints_each_as_it_ends(18);
}
