//! `plan --next --analyze` on real PostgreSQL 15 and 18, continued: a
//! PL/pgSQL function's inner statements (`--nested`), `--buffers` on a warm
//! cache, the backend's memory after many captures, every early way out
//! (a breakpoint inside the executor's start, Ctrl-C while waiting and
//! while the statement runs) leaving the backend as found, and `plan` on a
//! statement that counts its own rows leaving its counters alone.

mod analyze_text;
use analyze_text::*;
use common::*;
use pgdbg_testbed as common;
use std::time::{Duration, Instant};

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
/// Runs for seconds (each of its 5000 rows sleeps 0.5 ms).
const SLOW: &str = "select count(*) from an_t1 where length(pg_sleep(0.0005)::text) >= 0";

/// The same plans in every session, no parallelism.
const SETTINGS: &str =
    "set max_parallel_workers_per_gather = 0; set enable_mergejoin = off; set jit = off";

/// A function whose SQL runs in a known order: a declaration and an IF
/// evaluated as simple expressions (no executor), a PERFORM, then the join.
const FUNC: &str = "
    create function an_f() returns table(name text, n bigint) language plpgsql as $$
    declare lim int := 3000;
    begin
      if lim > 0 then
        perform count(*) from an_t2 where k < 5;
      end if;
      return query select t2.name, count(*) from an_t1 t1 join an_t2 t2 on t1.k = t2.k
                   where t1.id <= 3000 group by t2.name order by t2.name;
    end $$;";
const CALL_F: &str = "select string_agg(name || ':' || n, ',') from an_f()";
const PERFORM: &str = "select count(*) from an_t2 where k < 5";

/// The "-- " header lines of pgdbg's output.
fn headers(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with("-- ")).collect()
}

/// `plan --next --analyze` on `select ... from an_f()` is the call itself
/// (the first statement whose executor starts); with `--nested` the first
/// statement started inside it, in the order the function runs them (the
/// simple expressions of the declaration and the IF start no executor):
/// the PERFORM, then with `--count 2` the RETURN QUERY join.  Each one's
/// actual rows and loops per node equal EXPLAIN (ANALYZE) of the same
/// statement in a second session.
fn run_plpgsql_case(major: u32) {
    let cl = Cluster::start(major);
    let mut b = cl.connect();
    b.exec(SETUP);
    b.exec(FUNC);
    b.exec(SETTINGS);
    let expected = b.simple_text(CALL_F);
    let mut a = cl.connect();
    a.exec(SETTINGS);
    let pid = a.pid();
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next --analyze",
            "--ex",
            "plan --next --analyze --nested --count 2",
            "--ex",
            "detach",
        ],
        pid,
    );
    // the outer statement must be the first one the armed command sees
    wait_armed(pid, "standard_ExecutorStart");
    assert_eq!(a.simple_text(CALL_F), expected);
    assert_eq!(a.simple_text(CALL_F), expected);
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(tracer_pid(pid), 0);
    let h = headers(&out);
    let bl = blocks(&out);
    assert_eq!((h.len(), bl.len()), (3, 3), "{out}");
    // which statement each one is
    assert!(
        !h[0].contains("nested") && h[0].contains("from an_f()"),
        "{out}"
    );
    assert!(
        h[1].starts_with("-- nested statement") && h[1].contains("an_t2 where k < 5"),
        "{out}"
    );
    assert!(
        h[2].starts_with("-- nested statement") && h[2].contains("an_t1 t1 join an_t2 t2"),
        "{out}"
    );
    for (i, reference) in [CALL_F, PERFORM, JOIN].iter().enumerate() {
        let theirs = actuals(&b.explain_rows(&format!("explain (analyze) {reference}")));
        let mine = actuals(&bl[i]);
        assert!(!mine.is_empty(), "{}", bl[i]);
        assert_eq!(mine, theirs, "pgdbg:\n{}\nEXPLAIN ANALYZE differs", bl[i]);
        assert!(bl[i].contains("Execution Time:"), "{}", bl[i]);
    }
    // and the true counts, in SQL
    let rows = |text: &str, node: &str| -> f64 {
        actuals(text)
            .iter()
            .find(|(n, ..)| n.starts_with(node))
            .unwrap_or_else(|| panic!("no {node} in {text}"))
            .1
            .parse()
            .unwrap()
    };
    assert_eq!(rows(&bl[0], "Function Scan on an_f") as i64, 10);
    assert_eq!(
        rows(&bl[1], "Seq Scan on an_t2") as i64,
        b.query_one_i64("select count(*) from an_t2 where k < 5")
    );
    assert_eq!(
        rows(&bl[2], "Seq Scan on an_t1") as i64,
        b.query_one_i64("select count(*) from an_t1 where id <= 3000")
    );
    cl.assert_no_crash();
}

#[test]
fn plpgsql_inner_statement_15() {
    run_plpgsql_case(15);
}

#[test]
fn plpgsql_inner_statement_18() {
    run_plpgsql_case(18);
}

/// `--buffers` on a warm cache: per node the same actual rows, loops and
/// "Buffers:" line as EXPLAIN (ANALYZE, BUFFERS) in a second session, all
/// of them hits (the reference reads nothing), a scan's hits the
/// relation's pages.
fn run_buffers_case(major: u32) {
    let cl = Cluster::start(major);
    let mut b = cl.connect();
    b.exec(SETUP);
    let mut a = cl.connect();
    for c in [&mut a, &mut b] {
        c.exec(SETTINGS);
        // warm: the pages in shared buffers (hint bits set), the caches
        for _ in 0..2 {
            c.explain_rows(JOIN);
        }
    }
    let reference = b.explain_rows(&format!("explain (analyze, buffers) {JOIN}"));
    let theirs = node_buffers(&reference);
    assert!(
        theirs.iter().all(|(_, buf)| !buf.contains("read=")),
        "the cache is not warm:\n{reference}"
    );
    assert!(
        theirs.iter().any(|(_, buf)| buf.contains("hit=")),
        "{reference}"
    );
    let pid = a.pid();
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next --analyze --buffers",
            "--ex",
            "detach",
        ],
        pid,
        "standard_ExecutorStart",
    );
    let got = a.explain_rows(JOIN);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(got, b.explain_rows(JOIN));
    let bl = blocks(&out);
    assert_eq!(bl.len(), 1, "{out}");
    let mine = node_buffers(&bl[0]);
    assert_eq!(mine, theirs, "pgdbg:\n{}\nEXPLAIN:\n{reference}", bl[0]);
    assert_eq!(actuals(&bl[0]), actuals(&reference), "{}", bl[0]);
    let pages = b
        .query_one_i64("select pg_relation_size('an_t1') / current_setting('block_size')::int")
        as u64;
    let scan = mine
        .iter()
        .find(|(n, _)| n.starts_with("Seq Scan on an_t1"))
        .unwrap_or_else(|| panic!("{}", bl[0]));
    assert_eq!(number_after(&scan.1, "hit="), Some(pages), "{}", bl[0]);
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

#[test]
fn buffers_warm_15() {
    run_buffers_case(15);
}

#[test]
fn buffers_warm_18() {
    run_buffers_case(18);
}

/// How many captures the memory test makes: 1000 (about 4 ms each, the
/// backend stopped three times and a call series per capture), or
/// PGDBG_ANALYZE_CAPTURES.
fn captures() -> usize {
    std::env::var("PGDBG_ANALYZE_CAPTURES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

/// MemoryContextMemAllocated(TopMemoryContext, recurse), asked inside the
/// backend by `call` (as the 1000-dump test of `plan` measures it).
fn backend_memory(pid: i32) -> i64 {
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call MemoryContextMemAllocated(TopMemoryContext, 1)",
    ]);
    assert_eq!(code, 0, "{err}");
    print_values(&out)[0].parse().unwrap()
}

/// N `plan --next --analyze` captures, one after another, against a
/// session that runs the join in a loop: every capture printed, and the
/// backend's memory afterwards where it was (a capture that left its
/// EXPLAIN text behind would add N times that text's size).
fn run_memory_case(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    a.exec(SETUP);
    a.exec(SETTINGS);
    for _ in 0..3 {
        a.explain_rows(JOIN);
    }
    let pid = a.pid();
    // one capture first: the server's caches EXPLAIN fills once
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next --analyze",
        ],
        pid,
        "standard_ExecutorStart",
    );
    a.explain_rows(JOIN);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    let text_len = blocks(&out)[0].len() as i64;
    let before = backend_memory(pid);

    let n = captures();
    let lines = vec!["plan --next --analyze"; n];
    let script = write_script(&format!("analyze-mem{major}"), &lines);
    let out_file =
        std::env::temp_dir().join(format!("pgdbg-analyze-{major}-{}.out", std::process::id()));
    let t0 = Instant::now();
    let p = Pgdbg::spawn_to_file(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            script.to_str().unwrap(),
        ],
        &out_file,
    );
    wait_until("attach", Duration::from_secs(30), || tracer_pid(pid) != 0);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let mut c = a.c.take().unwrap();
    let load = std::thread::spawn(move || {
        let mut done = 0;
        while !st.load(std::sync::atomic::Ordering::SeqCst) {
            c.simple_query(JOIN).expect("the join during captures");
            done += 1;
        }
        (c, done)
    });
    let (code, _, err) = p.wait(Duration::from_secs(900));
    let took = t0.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (c, done) = load.join().unwrap();
    a.c = Some(c);
    assert_eq!(code, 0, "{err}");
    assert!(done >= n, "the session ran {done} statements");
    let out = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(
        out.matches("Execution Time:").count(),
        n,
        "every capture printed"
    );
    let after = backend_memory(pid);
    let grew = after - before;
    eprintln!(
        "PostgreSQL {major}: {n} captures in {:.1}s ({:.0} ms each); backend memory {before} -> {after} ({grew:+} bytes); one EXPLAIN text {text_len} bytes",
        took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / n as f64
    );
    // a leak of one EXPLAIN text per capture would be n * text_len
    assert!(
        grew < n as i64 * text_len / 4,
        "backend memory grew by {grew} bytes over {n} captures ({before} -> {after}); one text is {text_len} bytes"
    );
    assert_eq!(a.query_one_i64("select 3"), 3);
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&out_file);
}

#[test]
fn captures_keep_memory_15() {
    run_memory_case(15);
}

#[test]
fn captures_keep_memory_18() {
    run_memory_case(18);
}

/// Every early way out of `plan --next --analyze` leaves the backend as
/// found:
/// 1. a breakpoint inside the executor's start (after pgdbg wrote
///    instrument_options, before the executor read it): the field is put
///    back at once and that very statement runs without instrumentation;
/// 2. Ctrl-C (SIGINT to pgdbg) while it waits for the statement;
/// 3. Ctrl-C while the analyzed statement runs;
///
/// each time the code is the binary's again and the next statement runs
/// uninstrumented, with its own result.
fn run_interrupted_case(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    a.exec(SETUP);
    a.exec(SETTINGS);
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let clean = |f: &str| code_matches_file(pid, &bin, f, 16);
    let expected = a.simple_text(LATERAL);

    // 1. stopped by a breakpoint between the write and the executor's read
    // (a statement whose planning makes no executor state: no constant
    // to fold, as LATERAL's `limit 7` is)
    let plain = "select count(*) from an_t1 where k = 3";
    let expected_plain = a.simple_text(plain);
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break CreateExecutorState",
            "--ex",
            "plan --next --analyze",
            "--ex",
            "bt 2",
            "--ex",
            "delete",
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
        "standard_ExecutorStart",
    );
    assert_eq!(a.simple_text(plain), expected_plain);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    // the stop was inside the statement's executor start
    let bt: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    assert!(
        bt.len() == 2 && bt[0].contains("CreateExecutorState"),
        "{out}"
    );
    assert!(bt[1].contains("standard_ExecutorStart"), "{out}");
    assert!(
        out.contains("instrument_options put back before the executor read it"),
        "{out}\n{err}"
    );
    // that statement itself: no request, no instrumentation
    assert_eq!(print_values(&out), vec!["0", "0"], "{out}");
    assert_eq!(tracer_pid(pid), 0);
    assert!(clean("standard_ExecutorStart") && clean("CreateExecutorState"));

    // 2. Ctrl-C while waiting for the statement
    let p = Pgdbg::spawn_attached(
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
    unsafe {
        libc::kill(p.pid(), libc::SIGINT);
    }
    let (code, out, err) = p.wait(Duration::from_secs(30));
    assert!(code == 130 || code == 0, "{code}: {out}\n{err}");
    assert_eq!(tracer_pid(pid), 0);
    assert!(clean("standard_ExecutorStart"));
    next_statement_plain(pid, || assert_eq!(a.simple_text(LATERAL), expected));

    // 3. Ctrl-C while the analyzed statement runs
    let p = Pgdbg::spawn_attached(
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
    let h = a.spawn_text(SLOW);
    wait_until(
        "the executor-end breakpoint",
        Duration::from_secs(30),
        || !clean("standard_ExecutorEnd"),
    );
    cl.wait_active(&[pid], "pg_sleep(0.0005)");
    unsafe {
        libc::kill(p.pid(), libc::SIGINT);
    }
    let (code, out, err) = p.wait(Duration::from_secs(30));
    assert!(code == 130 || code == 0, "{code}: {out}\n{err}");
    assert!(out.contains("had not ended"), "{out}\n{err}");
    assert_eq!(tracer_pid(pid), 0);
    assert!(clean("standard_ExecutorStart") && clean("standard_ExecutorEnd"));
    assert_eq!(a.rejoin(h).unwrap(), "5000");
    next_statement_plain(pid, || assert_eq!(a.simple_text(LATERAL), expected));
    cl.assert_no_crash();
}

#[test]
fn interrupted_15() {
    run_interrupted_case(15);
}

#[test]
fn interrupted_18() {
    run_interrupted_case(18);
}

/// `plan` (the plan text only) on a statement that counts its own rows
/// (the session's EXPLAIN (ANALYZE, TIMING OFF)), twice while it runs:
/// ExplainNode would end the running nodes' loops; their counters are put
/// back, so the session's EXPLAIN ANALYZE shows one loop of all the rows.
fn run_plan_keeps_counters_case(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    a.exec(SETUP);
    a.exec(SETTINGS);
    let pid = a.pid();
    let h = a.spawn_text(&format!("explain (analyze, timing off, costs off) {SLOW}"));
    cl.wait_active(&[pid], "pg_sleep(0.0005)");
    // the scan has returned rows (its loop is running) before pgdbg looks
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "plan",
        "--ex",
        "plan",
        "--ex",
        "detach",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(out.matches("Seq Scan on an_t1").count(), 2, "{out}");
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
fn plan_keeps_counters_15() {
    run_plan_keeps_counters_case(15);
}

#[test]
fn plan_keeps_counters_18() {
    run_plan_keeps_counters_case(18);
}
