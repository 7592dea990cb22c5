//! `plan --progress` on a parallel seq scan with two workers, on real
//! PostgreSQL 15 and 18: the workers' own nodes are counted (pgdbg attaches
//! to each worker for a moment) and shown per worker under the leader's
//! node; their rows only grow; the statement's result is the one without
//! pgdbg; the workers end normally; pgdbg leaves the leader and the
//! workers as they were.  And workers that end while pgdbg reports (the
//! leader still running) make it say so and go on.
//!
//! The workload is certain, not timed: every row passes a parallel-safe
//! gate function that waits (pg_sleep in a loop) until the row's id is at
//! most the number in the data directory's file `pw_gate` (and, in the
//! leader, in `pw_lead`); the test moves the gates only after it has seen
//! the reports it needs.

mod analyze_text;
use common::*;
use pgdbg_testbed as common;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROWS: i64 = 20000;

const SETUP: &str = "
    create table pw_t as select g as id from generate_series(1, 20000) g;
    analyze pw_t;
    create function pw_limit(f text) returns bigint language sql parallel safe as
      $$ select coalesce(nullif(trim(pg_read_file(f, 0, 40, true)), ''), '0')::bigint $$;
    create function pw_gate(id int, leader int) returns bool language plpgsql parallel safe as $$
    begin
      while id > pw_limit('pw_gate') or (pg_backend_pid() = leader and id > pw_limit('pw_lead')) loop
        perform pg_sleep(0.01);
      end loop;
      return true;
    end $$;";

fn parallel_settings(c: &mut Client) {
    c.exec(
        "set max_parallel_workers_per_gather = 2; set parallel_setup_cost = 0; \
         set parallel_tuple_cost = 0; set min_parallel_table_scan_size = 0; set jit = off",
    );
}

/// Write a gate file atomically (the server reads it at every row).
fn set_gate(cl: &Cluster, name: &str, v: i64) {
    let data = cl.dir.join("data");
    let tmp = data.join(format!("{name}.tmp"));
    std::fs::write(&tmp, format!("{v}\n")).unwrap();
    std::fs::rename(&tmp, data.join(name)).unwrap();
}

/// pgdbg's standard output, line by line, as it comes.
struct Lines {
    all: Arc<Mutex<Vec<String>>>,
}

impl Lines {
    fn follow(p: &mut Pgdbg) -> Lines {
        let all = Arc::new(Mutex::new(Vec::new()));
        let out = p.child.stdout.take().unwrap();
        let a = all.clone();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                a.lock().unwrap().push(l);
            }
        });
        Lines { all }
    }
    fn text(&self) -> String {
        self.all.lock().unwrap().join("\n")
    }
    /// Wait (at most `limit`) until the reports satisfy `f`.
    fn wait_for(&self, what: &str, limit: Duration, f: impl Fn(&[Report]) -> bool) {
        let t0 = Instant::now();
        loop {
            if f(&reports(&self.text())) {
                return;
            }
            assert!(
                t0.elapsed() < limit,
                "timed out waiting for {what}; pgdbg's output so far:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One report: the header line, and per worker number the rows of the
/// scan's worker lines (and whether that worker is marked ended).
#[derive(Debug, Default)]
struct Report {
    header: String,
    leader_rows: Option<u64>,
    workers: BTreeMap<u64, (u64, bool)>,
}

fn reports(out: &str) -> Vec<Report> {
    let mut v: Vec<Report> = Vec::new();
    let mut in_scan = false;
    for l in out.lines() {
        if l.starts_with("-- progress at") {
            v.push(Report {
                header: l.to_string(),
                ..Default::default()
            });
            in_scan = false;
            continue;
        }
        let Some(r) = v.last_mut() else { continue };
        if l.contains("Parallel Seq Scan on pw_t") {
            in_scan = true;
            r.leader_rows = analyze_text::number_after(l, "rows so far=");
            continue;
        }
        let t = l.trim_start();
        if in_scan && t.starts_with("Worker ") {
            let n = analyze_text::number_after(t, "Worker ").unwrap();
            let rows = analyze_text::number_after(t, "rows so far=").unwrap();
            r.workers.insert(n, (rows, t.contains("(ended")));
        } else {
            in_scan = false;
        }
    }
    v
}

/// The parallel workers of `leader` (pg_stat_activity), once both run
/// and wait in the gate.
fn waiting_workers(cl: &Cluster, leader: i32) -> Vec<i32> {
    let mut c = cl.connect();
    let sql = format!(
        "select coalesce(string_agg(pid::text, ',' order by pid), '') from pg_stat_activity \
         where leader_pid = {leader} and pid <> {leader} and wait_event = 'PgSleep'"
    );
    let mut got = Vec::new();
    wait_until(
        "both parallel workers waiting in the gate",
        Duration::from_secs(60),
        || {
            got = c
                .simple_text(&sql)
                .split(',')
                .filter_map(|p| p.parse().ok())
                .collect();
            got.len() == 2
        },
    );
    got
}

/// The code bytes pgdbg wrote int3s over (the leader) or called (a
/// worker) equal the binary's.
fn code_as_in_file(cl: &Cluster, pid: i32) {
    let bin = cl.postgres_binary();
    for f in [
        "standard_ExecutorEnd",
        "AbortTransaction",
        "ExecProcNodeFirst",
        "MemoryContextAllocZero",
    ] {
        assert!(code_matches_file(pid, &bin, f, 16), "{f} of {pid} changed");
    }
    assert!(
        !catches_sigtrap(pid),
        "{pid} still has pgdbg's SIGTRAP handler"
    );
    assert!(
        guardians_of(pid).is_empty(),
        "a guardian still watches {pid}"
    );
}

fn start(major: u32) -> (Cluster, Client, i32, String) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    a.exec(SETUP);
    parallel_settings(&mut a);
    let leader = a.pid();
    let q = format!("select count(*) from pw_t where pw_gate(id, {leader})");
    let plan = a.explain_rows(&format!("explain (costs off) {q}"));
    assert!(
        plan.contains("Gather") && plan.contains("Parallel Seq Scan on pw_t"),
        "{plan}"
    );
    // the result without pgdbg, gates open
    set_gate(&cl, "pw_gate", ROWS);
    set_gate(&cl, "pw_lead", ROWS);
    assert_eq!(a.query_one_i64(&q), ROWS);
    (cl, a, leader, q)
}

/// Two workers counted: their lines appear under the scan, their rows
/// only grow (and do grow once the gate opens), the result is unchanged,
/// nothing is left in the leader or the workers.
fn run_workers_case(major: u32) {
    let (cl, mut a, leader, q) = start(major);
    set_gate(&cl, "pw_gate", 0);
    let h = a.spawn_text(&q);
    let workers = waiting_workers(&cl, leader);
    let mut p = Pgdbg::spawn(&[
        "attach",
        &leader.to_string(),
        "-q",
        "--ex",
        "plan --progress --every 300ms --for 600s",
        "--ex",
        "detach",
    ]);
    let out = Lines::follow(&mut p);
    let both = |r: &Report| r.workers.len() == 2;
    out.wait_for("both workers' lines", Duration::from_secs(120), |rs| {
        rs.iter().any(both)
    });
    // counted and let go: no tracer, no guardian, code as in the file
    for &w in &workers {
        assert_eq!(tracer_pid(w), 0, "worker {w} still traced");
        code_as_in_file(&cl, w);
    }
    // half the rows: each worker's block is among the first, so each one
    // returns rows now
    set_gate(&cl, "pw_gate", ROWS / 2);
    out.wait_for(
        "both workers' rows growing",
        Duration::from_secs(120),
        |rs| {
            rs.iter()
                .any(|r| both(r) && r.workers.values().all(|(rows, _)| *rows > 0))
        },
    );
    set_gate(&cl, "pw_gate", ROWS);
    let res = a.rejoin(h).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(120));
    // the output thread has seen the end of the output
    std::thread::sleep(Duration::from_millis(200));
    let text = out.text();
    assert_eq!(code, 0, "{text}\n{err}");
    assert_eq!(res, ROWS.to_string(), "{text}");
    assert!(text.contains("the statement ended"), "{text}");
    assert!(text.contains("parallel workers: 2 counted since"), "{text}");
    // per worker, rows never go back
    let rs = reports(&text);
    for n in [0, 1] {
        let seq: Vec<u64> = rs
            .iter()
            .filter_map(|r| r.workers.get(&n).map(|w| w.0))
            .collect();
        assert!(seq.len() >= 2, "worker {n}: {seq:?}\n{text}");
        assert!(
            seq.windows(2).all(|w| w[0] <= w[1]),
            "worker {n}'s rows went back: {seq:?}\n{text}"
        );
        assert!(*seq.last().unwrap() > 0, "{text}");
    }
    // the leader and its workers together never more than the table
    for r in &rs {
        let total = r.leader_rows.unwrap_or(0) + r.workers.values().map(|w| w.0).sum::<u64>();
        assert!(total <= ROWS as u64, "{total}: {}", r.header);
    }
    assert_eq!(tracer_pid(leader), 0);
    code_as_in_file(&cl, leader);
    // the workers ended normally (no signal, no error) and are gone
    wait_until("the workers to exit", Duration::from_secs(30), || {
        workers
            .iter()
            .all(|w| !std::path::Path::new(&format!("/proc/{w}")).exists())
    });
    cl.assert_no_crash();
    let log = cl.log();
    assert!(!log.contains("ERROR"), "{log}");
    // the session's next statement runs uninstrumented, with the same result
    analyze_text::next_statement_plain(leader, || assert_eq!(a.query_one_i64(&q), ROWS));
    let again = a.explain_rows(&format!("explain (analyze, costs off, timing off) {q}"));
    assert!(again.contains("Workers Launched: 2"), "{again}");
}

/// The workers end while pgdbg reports every 100 ms (the leader still
/// waits in its gate): the reports mark them ended with the counts of
/// their last read, pgdbg goes on and ends normally with the statement.
fn run_workers_end_case(major: u32) {
    let (cl, mut a, leader, q) = start(major);
    set_gate(&cl, "pw_gate", 0);
    set_gate(&cl, "pw_lead", 0);
    let h = a.spawn_text(&q);
    let workers = waiting_workers(&cl, leader);
    let mut p = Pgdbg::spawn(&[
        "attach",
        &leader.to_string(),
        "-q",
        "--ex",
        "plan --progress --every 100ms --for 600s",
        "--ex",
        "detach",
    ]);
    let out = Lines::follow(&mut p);
    out.wait_for("both workers' lines", Duration::from_secs(120), |rs| {
        rs.iter().any(|r| r.workers.len() == 2)
    });
    // the workers take every row but the leader's: they finish and exit
    set_gate(&cl, "pw_gate", ROWS);
    wait_until("the workers to exit", Duration::from_secs(120), || {
        workers
            .iter()
            .all(|w| !std::path::Path::new(&format!("/proc/{w}")).exists())
    });
    out.wait_for("both workers marked ended", Duration::from_secs(60), |rs| {
        rs.iter().any(|r| {
            r.workers.len() == 2
                && r.workers.values().all(|(_, ended)| *ended)
                && r.header.contains("0 running")
        })
    });
    // pgdbg still reports on the leader
    assert_ne!(tracer_pid(leader), 0);
    set_gate(&cl, "pw_lead", ROWS);
    let res = a.rejoin(h).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(200));
    let text = out.text();
    assert_eq!(code, 0, "{text}\n{err}");
    assert_eq!(res, ROWS.to_string(), "{text}");
    assert!(text.contains("the statement ended"), "{text}");
    assert!(!err.contains("error"), "{err}");
    let rs = reports(&text);
    for n in [0, 1] {
        let seq: Vec<u64> = rs
            .iter()
            .filter_map(|r| r.workers.get(&n).map(|w| w.0))
            .collect();
        assert!(
            seq.windows(2).all(|w| w[0] <= w[1]),
            "worker {n}'s rows went back: {seq:?}\n{text}"
        );
    }
    assert_eq!(tracer_pid(leader), 0);
    code_as_in_file(&cl, leader);
    cl.assert_no_crash();
    let log = cl.log();
    assert!(!log.contains("ERROR"), "{log}");
}

/// The leader runs EXPLAIN (ANALYZE, VERBOSE) itself: every worker node
/// has its own instrumentation from its start, which pgdbg only reads
/// (nothing installed); the session's EXPLAIN ANALYZE still gets each
/// worker's counts at the end (ExecParallelReportInstrumentation), all
/// the rows in one loop per worker.
fn run_workers_own_instrumentation_case(major: u32) {
    let (cl, mut a, leader, q) = start(major);
    // the leader only gathers: no statement of the gate function runs
    // nested in it (`plan` on a utility statement such as EXPLAIN shows
    // the innermost statement running)
    a.exec("set parallel_leader_participation = off");
    set_gate(&cl, "pw_gate", 0);
    let h = a.spawn_text(&format!(
        "explain (analyze, verbose, timing off, costs off) {q}"
    ));
    let workers = waiting_workers(&cl, leader);
    let mut p = Pgdbg::spawn(&[
        "attach",
        &leader.to_string(),
        "-q",
        "--ex",
        "plan --progress --every 300ms --for 600s",
        "--ex",
        "detach",
    ]);
    let out = Lines::follow(&mut p);
    out.wait_for("both workers' lines", Duration::from_secs(120), |rs| {
        rs.iter().any(|r| r.workers.len() == 2)
    });
    for &w in &workers {
        assert_eq!(tracer_pid(w), 0, "worker {w} still traced");
        code_as_in_file(&cl, w);
    }
    set_gate(&cl, "pw_gate", ROWS);
    let res = a.rejoin(h).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(200));
    let text = out.text();
    assert_eq!(code, 0, "{text}\n{err}");
    assert!(
        text.contains("parallel workers: 2 counted (their own instrumentation)"),
        "{text}"
    );
    assert!(
        text.contains("rows from the statement's own instrumentation"),
        "{text}"
    );
    // the session's own EXPLAIN ANALYZE: all rows, each worker's line
    assert!(res.contains("Workers Launched: 2"), "{res}");
    assert!(
        res.contains("Worker 0:") && res.contains("Worker 1:"),
        "{res}"
    );
    let got = analyze_text::actuals(&res);
    let scan = got
        .iter()
        .find(|(n, ..)| n.starts_with("Parallel Seq Scan on"))
        .unwrap_or_else(|| panic!("no scan: {res}"));
    let (rows, loops): (f64, f64) = (scan.1.parse().unwrap(), scan.2.parse().unwrap());
    assert_eq!(loops, 2.0, "{res}");
    assert!((rows * loops - ROWS as f64).abs() <= loops, "{res}");
    let top = got[0].1.parse::<f64>().unwrap();
    assert_eq!(top, 1.0, "{res}");
    assert_eq!(tracer_pid(leader), 0);
    code_as_in_file(&cl, leader);
    cl.assert_no_crash();
    let log = cl.log();
    assert!(!log.contains("ERROR"), "{log}");
}

/// pgdbg killed (SIGKILL) once the workers are counted: the guardian
/// restores the leader; the counting left in the workers (their query
/// memory, their own ExecProcNodeInstr) goes on and ends with them; the
/// statement completes with its result, every process ends normally.
fn run_workers_killed_case(major: u32) {
    let (cl, mut a, leader, q) = start(major);
    set_gate(&cl, "pw_gate", 0);
    let h = a.spawn_text(&q);
    let workers = waiting_workers(&cl, leader);
    let mut p = Pgdbg::spawn(&[
        "attach",
        &leader.to_string(),
        "-q",
        "--ex",
        "plan --progress --every 200ms --for 600s",
        "--ex",
        "detach",
    ]);
    let out = Lines::follow(&mut p);
    out.wait_for("both workers' lines", Duration::from_secs(120), |rs| {
        rs.iter().any(|r| r.workers.len() == 2)
    });
    p.child.kill().unwrap();
    let _ = p.wait(Duration::from_secs(30));
    let bin = cl.postgres_binary();
    wait_until(
        "the guardian to restore the leader",
        Duration::from_secs(60),
        || {
            tracer_pid(leader) == 0
                && code_matches_file(leader, &bin, "standard_ExecutorEnd", 16)
                && guardians_of(leader).is_empty()
        },
    );
    code_as_in_file(&cl, leader);
    for &w in &workers {
        assert_eq!(tracer_pid(w), 0, "worker {w} still traced");
    }
    set_gate(&cl, "pw_gate", ROWS / 2);
    set_gate(&cl, "pw_gate", ROWS);
    assert_eq!(a.rejoin(h).unwrap(), ROWS.to_string());
    wait_until("the workers to exit", Duration::from_secs(30), || {
        workers
            .iter()
            .all(|w| !std::path::Path::new(&format!("/proc/{w}")).exists())
    });
    cl.assert_no_crash();
    let log = cl.log();
    assert!(!log.contains("ERROR"), "{log}");
    assert_eq!(a.query_one_i64(&q), ROWS);
}

#[test]
fn progress_workers_killed_15() {
    run_workers_killed_case(15);
}

#[test]
fn progress_workers_killed_18() {
    run_workers_killed_case(18);
}

#[test]
fn progress_workers_own_instrumentation_15() {
    run_workers_own_instrumentation_case(15);
}

#[test]
fn progress_workers_own_instrumentation_18() {
    run_workers_own_instrumentation_case(18);
}

#[test]
fn progress_workers_15() {
    run_workers_case(15);
}

#[test]
fn progress_workers_18() {
    run_workers_case(18);
}

#[test]
fn progress_workers_end_15() {
    run_workers_end_case(15);
}

#[test]
fn progress_workers_end_18() {
    run_workers_end_case(18);
}
