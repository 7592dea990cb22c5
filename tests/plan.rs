//! The running plan (inferior calls) on real PostgreSQL 15 and 18: `plan
//! --next` equals EXPLAIN, JSON parses, the 1000-partition generic plan,
//! a query explained while it runs, nested statements, and the faults a
//! call must survive.

use common::*;
use pgdbg_testbed as common;
use std::time::Duration;

/// Output of pgdbg's `plan` minus its "-- query" header line.
fn body(out: &str) -> String {
    out.lines()
        .filter(|l| !l.starts_with("-- ") && !l.starts_with("Detached from"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Split the output of several `plan` commands at their "-- " headers.
fn plans(out: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    for l in out.lines() {
        if let Some(h) = l.strip_prefix("-- ") {
            v.push((h.to_string(), String::new()));
        } else if l.starts_with("Detached from") {
            continue;
        } else if let Some(last) = v.last_mut() {
            if !last.1.is_empty() {
                last.1.push('\n');
            }
            last.1.push_str(l);
        }
    }
    v
}

fn run_plan_cases(major: u32) {
    let cl = Cluster::start_seeded(major);

    // plan --next on seed 000's execute s1(10,30) = EXPLAIN EXECUTE s1(10,30)
    let mut a = cl.connect();
    a.exec(S1);
    let pid = a.pid();
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next",
            "--ex",
            "plan --next --format json --verbose",
            "--ex",
            "detach",
        ],
        pid,
        "standard_ExecutorRun",
    );
    a.simple_text("execute s1(10,30)");
    a.simple_text("execute s1(10,30)");
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    let ps = plans(&out);
    assert_eq!(ps.len(), 2, "{out}");
    assert!(
        ps[0].0.contains("prepare s1 as select max(md5(v))"),
        "{}",
        ps[0].0
    );
    let expected = a.explain_rows("explain execute s1(10,30)");
    assert_eq!(ps[0].1, expected, "plan --next vs EXPLAIN EXECUTE");
    let j: serde_json::Value = serde_json::from_str(&ps[1].1).expect("JSON output parses");
    assert_eq!(j[0]["Plan"]["Node Type"], "Aggregate");
    assert_eq!(j[0]["Plan"]["Plans"][0]["Index Name"], "mediumtab_n_idx");
    assert!(
        j[0]["Plan"]["Output"].is_array(),
        "--verbose adds Output: {}",
        ps[1].1
    );
    assert_eq!(a.pid(), pid);

    // the 1000-partition point lookup under force_generic_plan
    let mut b = cl.connect();
    b.exec("set plan_cache_mode = force_generic_plan");
    b.exec("prepare s3 as select v from bigtab where n = $1::numeric");
    let pid = b.pid();
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
    let v = b.simple_text("execute s3(123457)");
    assert_eq!(v, "Big table record 123457");
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Subplans Removed: 999"), "{out}");
    assert!(out.contains("Append"), "{out}");
    assert_eq!(body(&out), b.explain_rows("explain execute s3(123457)"));

    // a query explained while it runs, then finishing with its result
    let mut c = cl.connect();
    let pid = c.pid();
    let h = c.spawn_text(
        "select count(*) from (select pg_sleep(0.001) from generate_series(1, 2500)) s",
    );
    std::thread::sleep(Duration::from_millis(700));
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "plan",
        "--ex",
        "detach",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Aggregate"), "{out}");
    assert!(out.contains("Function Scan on generate_series"), "{out}");
    assert_eq!(c.rejoin(h).unwrap(), "2500");
    assert_eq!(tracer_pid(pid), 0);

    // nested statements (plpgsql): the innermost plan, flagged as nested
    let mut d = cl.connect();
    let pid = d.pid();
    let p = Pgdbg::spawn_armed(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next",
            "--ex",
            "plan --next",
            "--ex",
            "detach",
        ],
        pid,
        "standard_ExecutorRun",
    );
    d.simple_text("select runload(3)");
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let ps = plans(&out);
    assert_eq!(ps.len(), 2, "{out}");
    assert!(ps[0].0.contains("runload(3)"), "{out}");
    assert!(ps[1].0.starts_with("nested statement"), "{out}");
    assert!(ps[1].1.contains("bigtab"), "{out}");
    cl.assert_no_crash();
}

#[test]
fn plan_15() {
    run_plan_cases(15);
}

#[test]
fn plan_18() {
    run_plan_cases(18);
}

fn call_faults(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();

    // names of wait events come from the backend itself
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call pgstat_get_wait_event_type(0x06000000)",
        "--ex",
        "call pgstat_get_wait_event(0x06000000)",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(print_values(&out).len(), 2, "{out}");
    assert!(print_values(&out)[0].ends_with("\"Client\""), "{out}");
    assert!(print_values(&out)[1].ends_with("\"ClientRead\""), "{out}");

    // an ERROR raised inside the call: reported, the user's transaction intact
    a.exec("begin");
    a.exec("create temp table t(x int)");
    a.exec("insert into t values (1)");
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call pg_strtoint32(\"abc\")",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("ERROR inside the backend: invalid input syntax for type integer: \"abc\""),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    a.exec("insert into t values (2)");
    a.exec("commit");
    assert_eq!(a.query_one_i64("select count(*) from t"), 2);
    let (code, out, _) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "print errordata_stack_depth",
        "--ex",
        "print InterruptHoldoffCount",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        print_values(&out),
        vec!["-1", "0"],
        "error state and holdoff restored"
    );

    // a call that hangs past --call-timeout is abandoned
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--call-timeout",
        "1s",
        "--ex",
        "call pg_usleep(20000000)",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("did not return within 1.0s"), "{err}");
    assert_eq!(a.query_one_i64("select 7"), 7);

    // pgdbg killed with SIGTERM in the middle of a call (pg_usleep returns
    // early on a signal, so this runs before the steps that send some)
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--call-timeout",
            "60s",
            "--ex",
            "call pg_usleep(5000000)",
        ],
        pid,
    );
    std::thread::sleep(Duration::from_millis(500));
    unsafe {
        libc::kill(p.pid(), libc::SIGTERM);
    }
    let (code, _, err) = p.wait(Duration::from_secs(30));
    assert_eq!(code, 143, "{err}");
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(pid, &cl.postgres_binary(), "_start", 16));
    // pg_cancel_backend arriving during a call: held off, the call returns
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "call pg_usleep(1500000)",
        ],
        pid,
    );
    std::thread::sleep(Duration::from_millis(400));
    let mut other = cl.connect();
    other.exec(&format!("select pg_cancel_backend({pid})"));
    let (code, _, err) = p.wait(Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    // the cancel reaches an idle backend, which ignores it
    let r = a.c.as_mut().unwrap().simple_query("select 8");
    if r.is_err() {
        assert!(format!("{r:?}").contains("canceling statement"), "{r:?}");
    }
    assert_eq!(a.query_one_i64("select 9"), 9);

    // statement_timeout firing during a call: the statement is cancelled by
    // its timeout afterwards, as it would have been; the backend lives
    a.exec("set statement_timeout = '400ms'");
    let h = a.spawn_text("select pg_sleep(3)");
    std::thread::sleep(Duration::from_millis(200));
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call pg_usleep(800000)",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = a.rejoin(h);
    assert!(
        r.as_ref()
            .err()
            .is_some_and(|e| e.contains("statement timeout")),
        "{r:?}"
    );
    a.exec("reset statement_timeout");
    assert_eq!(a.query_one_i64("select 10"), 10);

    assert_eq!(a.query_one_i64("select 11"), 11);
    assert_eq!(a.pid(), pid);
    cl.assert_no_crash();
}

#[test]
fn call_faults_15() {
    call_faults(15);
}

#[test]
fn call_faults_18() {
    call_faults(18);
}

/// 1000 `plan --next` dumps against a backend executing statements in a
/// loop: no crash, and the backend's memory (MemoryContextMemAllocated of
/// TopMemoryContext, asked inside the backend) does not grow with the count.
fn thousand_dumps(major: u32) {
    let cl = Cluster::start(major);
    cl.seed(&["mediumtab"]);
    let mut a = cl.connect();
    a.exec(S1);
    let pid = a.pid();
    let n = 1000;
    let mut lines = vec!["call MemoryContextMemAllocated(TopMemoryContext, 1)".to_string()];
    lines.extend(std::iter::repeat_n("plan --next".to_string(), n));
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    let script = write_script(&format!("dumps{major}"), &refs);
    let out_file =
        std::env::temp_dir().join(format!("pgdbg-dumps-{major}-{}.out", std::process::id()));
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
    // the load: the session executes s1 until pgdbg is done and detached
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let mut c = a.c.take().unwrap();
    let load = std::thread::spawn(move || {
        let mut done = 0;
        while !st.load(std::sync::atomic::Ordering::SeqCst) {
            c.simple_query("execute s1(10,30)")
                .expect("execute during plan dumps");
            done += 1;
        }
        (c, done)
    });
    let (code, _, err) = p.wait(Duration::from_secs(600));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (c, done) = load.join().unwrap();
    a.c = Some(c);
    assert_eq!(code, 0, "{err}");
    assert!(done >= n, "the session ran {done} statements");
    let out = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(
        out.matches("Aggregate  (cost=").count(),
        n,
        "every dump printed a plan"
    );
    // memory now, asked the same way
    let (code, after, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call MemoryContextMemAllocated(TopMemoryContext, 1)",
    ]);
    assert_eq!(code, 0, "{err}");
    let before: i64 = print_values(&out)[0].parse().unwrap();
    let after: i64 = print_values(&after)[0].parse().unwrap();
    assert!(
        after - before < 512 * 1024,
        "backend memory grew by {} bytes over {n} dumps ({before} -> {after})",
        after - before
    );
    assert_eq!(a.query_one_i64("select 3"), 3);
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&out_file);
}

#[test]
fn thousand_plan_dumps_15() {
    thousand_dumps(15);
}

#[test]
fn thousand_plan_dumps_18() {
    thousand_dumps(18);
}

/// One line on stderr, non-zero exit: the error of a refused command.
fn refused(pid: i32, cmd: &str) -> String {
    let (code, out, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", cmd]);
    assert_ne!(code, 0, "{cmd} must be refused: {out}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{cmd}: one line expected: {err}");
    assert!(!out.contains("$1 ="), "{cmd} must not run: {out}");
    lines[0].to_string()
}

/// The postmaster log has no crash, no PANIC and no abort loop.
fn assert_log_clean(cl: &Cluster) {
    cl.assert_no_crash();
    let log = cl.log();
    for bad in [
        "PANIC",
        "terminated by signal",
        "AbortTransaction while in ABORT state",
        "is not owned by resource owner",
    ] {
        assert!(!log.contains(bad), "server log has '{bad}':\n{log}");
    }
}

/// Calls in an aborted transaction (issue 20, row 2): refused with one line
/// naming the state, the wait-name functions still callable, ROLLBACK and
/// the next statements fine, no PANIC.  Then `call` checks its arguments
/// against the DWARF prototype.
fn call_checks(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();

    // the exact scenario of the issue: begin; select 1/0; call GetCurrentTransactionId()
    a.exec("begin");
    let r = a.c.as_mut().unwrap().simple_query("select 1/0");
    assert!(format!("{r:?}").contains("division by zero"), "{r:?}");
    // the client has the error before the backend has ended its recovery
    // (a stop in it is refused as "in the middle of reporting an error")
    cl.wait_client_read(pid);
    let line = refused(pid, "call GetCurrentTransactionId()");
    assert!(
        line.contains(
            "the backend's transaction is aborted (TBLOCK_ABORT: a failed statement in a transaction block); calls could corrupt it: ROLLBACK first, or call only functions known to be harmless there"
        ),
        "{line}"
    );
    // plan allocates and may take locks: refused the same way at a stop
    // inside the aborted transaction (here: no query runs, so it says that)
    let line = refused(pid, "plan");
    assert!(line.contains("is not running a query"), "{line}");
    // the harmless ones still work there, and `wait` names the wait
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call pgstat_get_wait_event_type(0x06000000)",
        "--ex",
        "call GetCurrentTransactionIdIfAny()",
        "--ex",
        "wait",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = print_values(&out);
    assert!(v[0].ends_with("\"Client\""), "{out}");
    assert!(out.contains("Client: ClientRead"), "{out}");
    a.exec("rollback");
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    a.exec("begin");
    a.exec("create temp table t(x int)");
    a.exec("insert into t values (1)");
    a.exec("commit");
    assert_eq!(a.query_one_i64("select count(*) from t"), 1);

    // a failed statement after a savepoint: TBLOCK_SUBABORT
    a.exec("begin");
    a.exec("savepoint s");
    let r = a.c.as_mut().unwrap().simple_query("select 1/0");
    assert!(r.is_err());
    cl.wait_client_read(pid);
    let line = refused(pid, "call GetCurrentTransactionId()");
    assert!(
        line.contains("aborted (TBLOCK_SUBABORT: a failed statement after a SAVEPOINT)"),
        "{line}"
    );
    a.exec("rollback to savepoint s");
    // a live transaction again: calls allowed
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call GetCurrentTransactionNestLevel()",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(print_values(&out), vec!["2"], "{out}");
    a.exec("commit");
    assert_eq!(a.query_one_i64("select 7"), 7);
    // idle, outside any transaction: a transaction ID would be assigned
    // with no transaction to end it (its lock kept until the backend exits)
    let line = refused(pid, "call GetCurrentTransactionId()");
    assert!(
        line.contains("the backend is outside any transaction (TRANS_DEFAULT): GetCurrentTransactionId would assign a transaction ID"),
        "{line}"
    );
    let xid_locks =
        format!("select count(*) from pg_locks where pid = {pid} and locktype = 'transactionid'");
    let mut obs = cl.connect();
    assert_eq!(obs.query_one_i64(&xid_locks), 0);
    // inside a block it is the block's own ID, released at its end
    a.exec("begin");
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call GetCurrentTransactionId()",
    ]);
    assert_eq!(code, 0, "{err}");
    let xid = a.query_one_text("select txid_current()::text");
    assert_eq!(print_values(&out), vec![xid], "{out}");
    a.exec("commit");
    assert_eq!(obs.query_one_i64(&xid_locks), 0);

    // argument counts and types against the prototype
    let cases: &[(&str, &str)] = &[
        (
            "call pg_strtoint32()",
            "pg_strtoint32 takes 1 argument (const char *s), 0 given",
        ),
        (
            "call pg_strtoint32(\"1\", 2)",
            "pg_strtoint32 takes 1 argument (const char *s), 2 given",
        ),
        (
            "call pg_strtoint32(1.5)",
            "argument 1 of pg_strtoint32(const char *s) is a pointer: a double (1.5) given",
        ),
        (
            "call float8out_internal(\"x\")",
            "argument 1 of float8out_internal(double num) is floating point: a string (\"x\") given",
        ),
        (
            "call GetCurrentTransactionNestLevel(1)",
            "GetCurrentTransactionNestLevel takes no arguments (void), 1 given",
        ),
        (
            "call errmsg()",
            "errmsg takes at least 1 argument (const char *fmt, ...), 0 given",
        ),
    ];
    for (cmd, want) in cases {
        let line = refused(pid, cmd);
        assert!(line.ends_with(&format!(": {want}")), "{cmd}: {line}");
        assert_eq!(tracer_pid(pid), 0);
    }
    // what fits is called; an integer given to a double is converted as C would
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "call pg_strtoint32(\"123\")",
        "--ex",
        "call float8out_internal(2)",
        "--ex",
        "call float8out_internal(0.25)",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = print_values(&out);
    assert_eq!(v[0], "123", "{out}");
    assert!(v[1].ends_with("\"2\""), "{out}");
    assert!(v[2].ends_with("\"0.25\""), "{out}");
    assert_eq!(a.query_one_i64("select 8"), 8);
    assert_eq!(a.pid(), pid);
    assert_log_clean(&cl);
}

#[test]
fn call_checks_15() {
    call_checks(15);
}

#[test]
fn call_checks_18() {
    call_checks(18);
}

/// `plan` where there is no plan of the backend's own (issue 20): the
/// checkpointer (refused at once, `plan --next` too, instead of waiting
/// forever), an idle backend (`plan --next` says it waits), a parallel
/// worker (names its leader), a DO block (its nested statement's plan, or
/// why none), and a stop in the middle of an abort (refused: EXPLAIN
/// allocates and looks up catalogs).
fn plan_elsewhere(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let mut obs = cl.connect();

    let ckpt = obs
        .query_one_i64("select pid from pg_stat_activity where backend_type = 'checkpointer'")
        as i32;
    for cmd in ["plan", "plan --next"] {
        let p = Pgdbg::spawn(&[
            "attach",
            &ckpt.to_string(),
            "-q",
            "--ex",
            cmd,
            "--for",
            "10s",
        ]);
        let (code, _, err) = p.wait(Duration::from_secs(60));
        assert_ne!(code, 0, "{cmd}: {err}");
        assert_eq!(err.lines().count(), 1, "{cmd}: {err}");
        assert!(
            err.contains(&format!(
                "process {ckpt} is the checkpointer, which never runs queries"
            )),
            "{cmd}: {err}"
        );
        assert_eq!(tracer_pid(ckpt), 0);
    }

    // plan --next on an idle backend: it says that it waits, and how to end it
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plan --next",
            "--for",
            "2s",
        ],
        pid,
    );
    let (_, _, err) = p.wait(Duration::from_secs(60));
    assert!(
        err.contains(&format!(
            "plan --next: waiting for the next statement of backend {pid} to start (Ctrl-C ends the wait)"
        )),
        "{err}"
    );
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.query_one_i64("select 1"), 1);

    // a parallel worker: its leader named
    a.exec("set max_parallel_workers_per_gather = 1");
    a.exec("set parallel_setup_cost = 0");
    a.exec("set parallel_tuple_cost = 0");
    a.exec(if major >= 16 {
        "set debug_parallel_query = on"
    } else {
        "set force_parallel_mode = on"
    });
    let h = a.spawn_text(
        "select count(*) from (select pg_sleep(0.001) from generate_series(1, 4000)) s",
    );
    let mut worker = 0;
    wait_until("a parallel worker", Duration::from_secs(20), || {
        worker = obs
            .simple_text(&format!(
                "select coalesce(max(pid), 0) from pg_stat_activity where leader_pid = {pid} and pid <> {pid}"
            ))
            .parse()
            .unwrap();
        worker != 0
    });
    let line = refused(worker, "plan");
    assert!(
        line.contains(&format!(
            "process {worker} is a parallel worker of leader PID {pid}"
        )) && line.contains(&format!("pgdbg attach {pid} --ex plan")),
        "{line}"
    );
    assert_eq!(a.rejoin(h).unwrap(), "4000");
    a.exec("reset all");

    // a DO block sleeping in a nested statement: that statement's plan
    let h = a.spawn_text("do $$ begin perform pg_sleep(3); end $$");
    wait_until("the DO block's pg_sleep", Duration::from_secs(10), || {
        obs.simple_text(&format!(
            "select coalesce(wait_event, '') from pg_stat_activity where pid = {pid}"
        )) == "PgSleep"
    });
    let (code, out, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("-- nested statement (SPI/plpgsql): SELECT pg_sleep(3)"),
        "{out}"
    );
    assert!(out.contains("Result  (cost="), "{out}");
    a.rejoin(h).unwrap();
    // a DO block between nested statements (a loop of simple expressions):
    // why there is no plan to show
    let h = a.spawn_text(
        "do $$ declare i int := 0; begin while i < 2000000000 loop i := i + 1; end loop; end $$",
    );
    std::thread::sleep(Duration::from_millis(500));
    let line = refused(pid, "plan");
    assert!(
        line.contains(&format!("backend {pid} runs a utility statement (do $$"))
            && line.contains("no nested statement is executing at this moment"),
        "{line}"
    );
    obs.exec(&format!("select pg_cancel_backend({pid})"));
    let r = a.rejoin(h);
    assert!(format!("{r:?}").contains("canceling statement"), "{r:?}");

    // plan at a stop in the middle of an abort: a plpgsql exception block
    // rolling back its subtransaction, inside a running query
    a.exec(
        "create function f_exc() returns int language plpgsql as $$ \
         begin begin perform 1/0; exception when division_by_zero then return 1; end; return 0; end $$",
    );
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break AtSubAbort_Portals",
            "--ex",
            "continue",
            "--ex",
            "plan",
            "--ex",
            "print 1",
        ],
        pid,
    );
    let h = a.spawn_text("select f_exc()");
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        err.contains(
            "the backend's transaction is in the middle of an abort (TRANS_ABORT, TBLOCK_SUBINPROGRESS); calls could corrupt it"
        ),
        "{err}"
    );
    assert!(
        !out.contains("$1 = 1"),
        "the script stops at the refusal: {out}"
    );
    assert_eq!(a.rejoin(h).unwrap(), "1");
    assert_eq!(a.query_one_i64("select 2"), 2);
    assert_eq!(a.pid(), pid);
    assert_log_clean(&cl);
}

#[test]
fn plan_elsewhere_15() {
    plan_elsewhere(15);
}

#[test]
fn plan_elsewhere_18() {
    plan_elsewhere(18);
}
