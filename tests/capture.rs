//! Scripted captures (issue 6): the example scripts of scripts/examples/
//! run against real clusters with seed 000's tables, across one or many
//! backends, and their captures answer what the seed found; scripts with
//! errors fail before anything is attached.

use common::*;
use pgdbg_testbed as common;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `pgdbg attach --cluster` counting `standard_ExecutorStart` for 8 s
/// through its workers (a script of one `count` line is otherwise served
/// without workers: tests/cluster_inherit.rs), returned once each of
/// `pids` is traced.
fn count_by_workers(cl: &Cluster, key: &str, pids: &[i32]) -> Pgdbg {
    let script = write_script(key, &["count standard_ExecutorStart"]);
    let p = Pgdbg::spawn_env(
        &[
            "attach",
            "--cluster",
            cl.dir.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--for",
            "8s",
        ],
        &[("PGDBG_NO_INHERIT", "1")],
    );
    wait_until("the backends attached", Duration::from_secs(30), || {
        pids.iter().all(|p| tracer_pid(*p) != 0)
    });
    p
}

fn example(name: &str) -> String {
    repo()
        .join("scripts/examples")
        .join(name)
        .display()
        .to_string()
}

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-cap-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// `pgdbg attach PID -q --script scripts/examples/NAME --for D EXTRA...
/// --capture CAP` in the background, stdout to a file, returned once that
/// output shows `armed`; with the capture and stdout paths (`key` names
/// them).
fn start_example(
    pid: i32,
    name: &str,
    key: &str,
    for_: &str,
    extra: &[&str],
    armed: &str,
) -> (Pgdbg, PathBuf, PathBuf) {
    let cap = temp(&format!("{key}.jsonl"));
    let out = temp(&format!("{key}.out"));
    let (pid, script) = (pid.to_string(), example(name));
    let mut args = vec!["attach", &pid, "-q", "--script", &script, "--for", for_];
    args.extend(extra);
    args.extend(["--capture", cap.to_str().unwrap()]);
    let p = Pgdbg::spawn_to_file(&args, &out);
    wait_for_output(&out, armed);
    (p, cap, out)
}

/// Wait until `file` (pgdbg's stdout) contains `needle`: the probe is armed.
fn wait_for_output(file: &Path, needle: &str) {
    wait_until(needle, Duration::from_secs(60), || {
        std::fs::read_to_string(file).is_ok_and(|s| s.contains(needle))
    });
}

fn all_events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("capture lines are JSON"))
        .collect()
}

/// Every line of a capture pgdbg wrote reads into the typed events (none
/// unknown) and is written back with the same bytes; the `attach` events
/// carry the capture format.
fn assert_typed_lines(path: &Path) {
    use pgdbg::capture::{CAPTURE_FORMAT, Event, Line};
    let text = std::fs::read_to_string(path).unwrap();
    let mut attach = 0;
    for l in text.lines() {
        let line: Line = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
        match &line.event {
            Event::Other => panic!("an event of no known kind: {l}"),
            Event::Attach { format, .. } => {
                assert_eq!(*format, CAPTURE_FORMAT, "{l}");
                attach += 1;
            }
            _ => {}
        }
        let mut back = Vec::new();
        line.write_to(&mut back);
        assert_eq!(String::from_utf8(back).unwrap(), l);
    }
    assert!(attach > 0, "no attach event in {text}");
}

/// `EXPLAIN (ANALYZE, BUFFERS)` "Buffers: shared hit=A read=B" -> A+B.
fn buffers(line: &str) -> u64 {
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            matches!(k, "hit" | "read").then(|| v.parse::<u64>().ok())?
        })
        .sum()
}

// ---------------------------------------------------------------- errors

/// Every kind of script error is reported with FILE:LINE before anything
/// is attached (the backend is never traced), also with --cluster.
fn script_errors(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let cases: &[(&str, &[&str], usize, &str)] = &[
        (
            "syntax",
            &["# a comment", "break standard_ExecutorRun if queryDesc->"],
            2,
            "",
        ),
        (
            "unknown-function",
            &[
                "count query_planner",
                "",
                "trace NoSuchFunctionAnywhere relid",
            ],
            3,
            "NoSuchFunctionAnywhere",
        ),
        (
            "bad-member",
            &["break standard_ExecutorRun if queryDesc->plannedstmt->no_such_field == 1"],
            1,
            "no_such_field",
        ),
        (
            "bad-block",
            &[
                "break standard_ExecutorRun",
                "commands",
                "  silent",
                "  printf \"%d\\n\", queryDesc->operation",
                "  printf \"%s\\n\", queryDesc->sourceTxt",
                "  continue",
                "end",
            ],
            // the line of the bad printf, not the block's first line
            5,
            "sourceTxt",
        ),
        (
            // a block's `condition` is checked like any other command
            "block-condition",
            &[
                "break standard_ExecutorRun",
                "commands",
                "  condition 1 MyProc->no_such_member > 0",
                "  continue",
                "end",
            ],
            3,
            "no_such_member",
        ),
        (
            "trace-arg",
            &["trace LockRelationOid relid lockmode nosuchparam"],
            1,
            "nosuchparam",
        ),
        (
            "unclosed",
            &["break standard_ExecutorRun", "commands", "  bt"],
            2,
            "end",
        ),
        (
            "undefined",
            &["break standard_ExecutorRun if queryDesc->plannedstmt->queryId == ${QUERYID}"],
            1,
            "QUERYID",
        ),
        (
            "printf-arity",
            &["printf \"%d %d\\n\", MyProcPid"],
            1,
            "conversion",
        ),
    ];
    for (name, lines, line, needle) in cases {
        let s = write_script(&format!("err-{major}-{name}"), lines);
        let sp = s.display().to_string();
        for target in [
            vec!["attach".to_string(), pid.to_string()],
            vec![
                "attach".to_string(),
                "--cluster".to_string(),
                cl.dir.display().to_string(),
            ],
        ] {
            let mut args: Vec<&str> = target.iter().map(|s| s.as_str()).collect();
            args.extend(["--script", &sp, "--for", "5s"]);
            let (code, out, err) = pgdbg(&args);
            assert_ne!(code, 0, "{name}: {out}{err}");
            let want = format!("{sp}:{line}:");
            assert!(err.contains(&want), "{name}: wants {want}: {err}");
            assert!(err.contains(needle), "{name}: wants {needle}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{name}: one line: {err}");
            assert!(!err.contains("Attached"), "{name}: {err}");
            assert_eq!(tracer_pid(pid), 0);
        }
        let _ = std::fs::remove_file(&s);
    }
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn script_errors_before_attach_15() {
    script_errors(15);
}

#[test]
fn script_errors_before_attach_18() {
    script_errors(18);
}

// ------------------------------------------------------- buffers by phase

/// scripts/examples/buffers-by-phase.pgdbg: ReadBufferExtended calls while
/// planning and while executing a statement equal EXPLAIN (ANALYZE,
/// BUFFERS)'s "Planning: Buffers" and the plan's "Buffers"; with the rest
/// (parse analysis, ...) they add up to every call the statement made.
fn buffers_by_phase(major: u32) {
    let cl = Cluster::start_seeded(major);
    // a new session: its catalog caches are cold, so planning reads too
    let mut c = cl.connect();
    let pid = c.pid();
    let (p, cap, out) = start_example(
        pid,
        "buffers-by-phase.pgdbg",
        &format!("buffers-{major}"),
        "5s",
        &[],
        "count: ReadBufferExtended",
    );
    let plan = c.explain_rows(
        "explain (analyze, buffers, costs off, timing off) select v from mediumtab where n = 4242",
    );
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = plan.lines().collect();
    let planning_line = lines
        .iter()
        .position(|l| l.trim() == "Planning:")
        .map(|i| lines[i + 1])
        .unwrap_or_else(|| panic!("no Planning: Buffers in {plan}"));
    let exec_line = lines
        .iter()
        .find(|l| l.trim_start().starts_with("Buffers:"))
        .unwrap_or_else(|| panic!("no Buffers in {plan}"));
    let (want_planning, want_exec) = (buffers(planning_line), buffers(exec_line));
    let ev = read_events(&cap, "count");
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert_eq!(e["function"], "ReadBufferExtended");
    let ph = &e["phases"];
    let (planning, execution, other) = (
        ph["planning"].as_u64().unwrap(),
        ph["execution"].as_u64().unwrap(),
        ph["other"].as_u64().unwrap(),
    );
    println!(
        "PG {major}: planning {planning} (EXPLAIN {want_planning}), execution {execution} (EXPLAIN {want_exec}), other {other}\n{plan}"
    );
    assert!(want_planning > 0 && want_exec > 0, "{plan}");
    assert_eq!(planning, want_planning, "{plan}");
    assert_eq!(execution, want_exec, "{plan}");
    assert_eq!(
        e["calls"].as_u64().unwrap(),
        planning + execution + other,
        "phases add up to the total"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("planning") && text.contains("execution"),
        "{text}"
    );
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(c.query_one_i64("select 5"), 5);
    cl.assert_no_crash();
}

#[test]
fn buffers_by_phase_15() {
    buffers_by_phase(15);
}

#[test]
fn buffers_by_phase_18() {
    buffers_by_phase(18);
}

// ----------------------------------------- planner vs executor, 6 backends

/// scripts/examples/planner-vs-executor.pgdbg over --cluster while 6
/// backends run seed 000's load: under force_generic_plan query_planner is
/// (almost) never called while executors start; under auto every execution
/// plans.  One capture holds the counts of all 6.
fn planner_vs_executor(major: u32) {
    let cl = Cluster::start_seeded(major);
    for mode in ["force_generic_plan", "auto"] {
        let mut load = Vec::new();
        let mut pids = Vec::new();
        for _ in 0..6 {
            let mut c = cl.connect();
            c.exec(&format!(
                "set plan_cache_mode = {mode}; set statement_timeout = '9s'"
            ));
            pids.push(c.pid());
            let h = c.spawn_text("call runload_commit(100000000)");
            load.push((c, h));
        }
        std::thread::sleep(Duration::from_millis(300));
        let cap = temp(&format!("pve-{major}-{mode}.jsonl"));
        let script = example("planner-vs-executor.pgdbg");
        let (code, out, err) = pgdbg(&[
            "attach",
            "--cluster",
            cl.dir.to_str().unwrap(),
            "--script",
            &script,
            "--for",
            "3s",
            "--capture",
            cap.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let ev = read_events(&cap, "count");
        let sum = |f: &str| -> u64 {
            ev.iter()
                .filter(|e| {
                    e["function"] == f && pids.contains(&(e["pid"].as_i64().unwrap() as i32))
                })
                .map(|e| e["calls"].as_u64().unwrap())
                .sum()
        };
        let counted: std::collections::BTreeSet<i64> = ev
            .iter()
            .filter(|e| e["function"] == "standard_ExecutorStart" && e["calls"].as_u64() > Some(0))
            .map(|e| e["pid"].as_i64().unwrap())
            .collect();
        for p in &pids {
            assert!(
                counted.contains(&(*p as i64)),
                "{mode}: backend {p} counted: {ev:?}"
            );
        }
        let (planner, executor) = (sum("query_planner"), sum("standard_ExecutorStart"));
        println!(
            "PG {major} {mode}: query_planner {planner}, standard_ExecutorStart {executor} over 6 backends"
        );
        assert!(executor >= 60, "{mode}: {executor} executions");
        if mode == "force_generic_plan" {
            assert!(
                planner * 20 <= executor,
                "{mode}: planner {planner} vs executor {executor}"
            );
        } else {
            let diff = planner.abs_diff(executor);
            assert!(
                diff * 20 <= executor,
                "{mode}: planner {planner} vs executor {executor}"
            );
        }
        // the report sums them per function over the backends
        let (code, rep, err) = pgdbg(&["report", cap.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let row = rep
            .lines()
            .find(|l| l.starts_with("standard_ExecutorStart"))
            .unwrap_or_else(|| panic!("{rep}"));
        let all: u64 = ev
            .iter()
            .filter(|e| e["function"] == "standard_ExecutorStart")
            .map(|e| e["calls"].as_u64().unwrap())
            .sum();
        assert!(
            row.split_whitespace().any(|w| w == all.to_string()),
            "report row {row:?} sums {all}: {rep}"
        );
        for (mut c, h) in load {
            let r = c.rejoin(h);
            assert!(format!("{r:?}").contains("statement timeout"), "{r:?}");
            assert_eq!(c.query_one_i64("select 3"), 3);
        }
        for p in &pids {
            assert_eq!(tracer_pid(*p), 0);
        }
        let _ = std::fs::remove_file(&cap);
    }
    cl.assert_no_crash();
}

#[test]
fn planner_vs_executor_six_backends_15() {
    planner_vs_executor(15);
}

#[test]
fn planner_vs_executor_six_backends_18() {
    planner_vs_executor(18);
}

// ------------------------------------------------ backends come and go

/// A capture of a whole cluster survives one backend being terminated and
/// a new one starting: the others' counts are all there, the new backend
/// is captured, the terminated one's exit is recorded.
fn backends_come_and_go(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut load = Vec::new();
    let mut pids = Vec::new();
    for _ in 0..3 {
        let mut c = cl.connect();
        c.exec("set statement_timeout = '12s'");
        pids.push(c.pid());
        let h = c.spawn_text("call runload_commit(100000000)");
        load.push((c, h));
    }
    let mut ctl = cl.connect();
    let cap = temp(&format!("churn-{major}.jsonl"));
    let out = temp(&format!("churn-{major}.out"));
    let script = write_script(&format!("churn-{major}"), &["count standard_ExecutorStart"]);
    // the workers' course (a script of one `count` line is otherwise
    // served without workers: tests/cluster_inherit.rs)
    let p = Pgdbg::spawn_to_file_env(
        &[
            "attach",
            "--cluster",
            cl.dir.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            // ended by Ctrl-C once the new backend is counted: a window
            // that ends on its own may end before a slow machine's scan
            // has found it
            "--for",
            "60s",
            "--capture",
            cap.to_str().unwrap(),
        ],
        &out,
        &[("PGDBG_NO_INHERIT", "1")],
    );
    wait_until(
        "all load backends attached",
        Duration::from_secs(30),
        || pids.iter().all(|p| tracer_pid(*p) != 0),
    );
    std::thread::sleep(Duration::from_millis(500));
    // one goes away...
    let victim = pids[0];
    assert_eq!(
        ctl.simple_text(&format!("select pg_terminate_backend({victim})")),
        "t"
    );
    // ...and a new one arrives
    let mut newc = cl.connect();
    newc.exec("set statement_timeout = '12s'");
    let newpid = newc.pid();
    let hn = newc.spawn_text("call runload_commit(100000000)");
    wait_until("the new backend attached", Duration::from_secs(30), || {
        tracer_pid(newpid) != 0
    });
    std::thread::sleep(Duration::from_secs(1));
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let (code, _, err) = p.wait(Duration::from_secs(60));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(code, 0, "{text}{err}");
    let ev = all_events(&cap);
    let count_of = |pid: i32| -> Option<u64> {
        ev.iter()
            .find(|e| e["event"] == "count" && e["pid"] == pid)
            .and_then(|e| e["calls"].as_u64())
    };
    for p in &pids[1..] {
        let n = count_of(*p).unwrap_or_else(|| panic!("no count for survivor {p}: {text}"));
        assert!(n > 50, "survivor {p}: {n} executions");
        assert!(
            ev.iter().any(|e| e["event"] == "detach" && e["pid"] == *p),
            "{p} detached"
        );
        assert_eq!(tracer_pid(*p), 0);
    }
    let n = count_of(newpid).unwrap_or_else(|| panic!("no count for the new backend: {text}"));
    assert!(n > 0, "new backend: {n}");
    assert!(
        ev.iter()
            .any(|e| e["event"] == "exit" && e["pid"] == victim),
        "the terminated backend's exit is recorded: {text}"
    );
    assert!(err.contains("exited during the script"), "{err}");
    // the survivors go on until their statement_timeout
    let (mut victim_c, vh) = load.remove(0);
    let r = victim_c.rejoin(vh);
    assert!(r.is_err(), "the terminated session's loop failed: {r:?}");
    for (mut c, h) in load {
        let r = c.rejoin(h);
        assert!(format!("{r:?}").contains("statement timeout"), "{r:?}");
        assert_eq!(c.query_one_i64("select 4"), 4);
    }
    let r = newc.rejoin(hn);
    assert!(format!("{r:?}").contains("statement timeout"), "{r:?}");
    cl.assert_no_crash();
}

#[test]
fn cluster_capture_survives_backends_coming_and_going_15() {
    backends_come_and_go(15);
}

#[test]
fn cluster_capture_survives_backends_coming_and_going_18() {
    backends_come_and_go(18);
}

// ------------------------------------------------- relation locks per run

/// scripts/examples/relation-locks.pgdbg: under force_generic_plan each
/// execution of the 1000-partition point lookup locks 1000+ relations
/// (AcquireExecutorLocks); the trace records relid and lockmode of each.
fn relation_locks(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut c = cl.connect();
    c.exec("set plan_cache_mode = force_generic_plan");
    c.exec("prepare p(numeric) as select v from bigtab where n = $1");
    c.exec("execute p(1)");
    c.exec("execute p(2)");
    let pid = c.pid();
    let (p, cap, out) = start_example(
        pid,
        "relation-locks.pgdbg",
        &format!("locks-{major}"),
        "6s",
        &[],
        "trace: LockRelationOid",
    );
    const RUNS: u64 = 3;
    for k in 0..RUNS {
        c.exec(&format!("execute p({})", 1000 + k * 7));
    }
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert_typed_lines(&cap);
    let ev = read_events(&cap, "trace");
    let calls = ev.len() as u64;
    let relids: std::collections::BTreeSet<i64> = ev
        .iter()
        .map(|e| e["args"]["relid"].as_i64().expect("relid is a number"))
        .collect();
    println!(
        "PG {major}: {calls} LockRelationOid calls in {RUNS} executions, {} relations",
        relids.len()
    );
    assert!(calls >= 1000 * RUNS, "{calls} calls for {RUNS} executions");
    assert!(relids.len() >= 1000, "{} relations", relids.len());
    assert!(
        ev.iter()
            .all(|e| e["function"] == "LockRelationOid" && e["args"]["lockmode"] == 1)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains(&format!("trace: {calls} calls of LockRelationOid")),
        "{text}"
    );
    let (code, rep, err) = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        rep.lines()
            .any(|l| l.starts_with("LockRelationOid") && l.contains(&calls.to_string())),
        "{rep}"
    );
    assert!(rep.contains("Traced arguments"), "{rep}");
    assert_eq!(
        c.simple_text("execute p(77)"),
        c.simple_text("select v from bigtab where n = 77")
    );
    cl.assert_no_crash();
}

#[test]
fn relation_locks_per_generic_execution_15() {
    relation_locks(15);
}

#[test]
fn relation_locks_per_generic_execution_18() {
    relation_locks(18);
}

// ------------------------------------------------------ plan of a queryId

/// scripts/examples/plan-of-queryid.pgdbg: the plan is printed for the
/// statement with that queryId only, each time it runs, by a conditional
/// breakpoint with a commands block.
fn plan_of_queryid(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut c = cl.connect();
    c.exec("set compute_query_id = on");
    let ex = c.explain_rows("explain (verbose, costs off) select v from mediumtab where n = 5");
    let qid = ex
        .lines()
        .find_map(|l| l.trim().strip_prefix("Query Identifier: "))
        .unwrap_or_else(|| panic!("{ex}"))
        .to_string();
    let pid = c.pid();
    let define = format!("QUERYID={qid}");
    let (p, cap, out) = start_example(
        pid,
        "plan-of-queryid.pgdbg",
        &format!("qid-{major}"),
        "4s",
        &["--define", &define],
        "Breakpoint 1 at standard_ExecutorRun",
    );
    assert_eq!(c.query_one_i64("select 40 + 2"), 42);
    c.exec("select v from mediumtab where n = 5");
    c.exec("select count(*) from mediumtab where n < 3");
    c.exec("select v from mediumtab where n = 77");
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let plans = read_events(&cap, "plan");
    assert_eq!(plans.len(), 2, "two runs of that queryId: {text}");
    assert!(
        plans[0]["query"].as_str().unwrap().contains("n = 5"),
        "{plans:?}"
    );
    assert!(
        plans[1]["query"].as_str().unwrap().contains("n = 77"),
        "{plans:?}"
    );
    for p in &plans {
        assert!(
            p["text"].as_str().unwrap().contains("Index Cond: (n = "),
            "{p}"
        );
    }
    assert!(
        text.contains(&format!("queryId {qid}, backend {pid}:")),
        "{text}"
    );
    assert!(
        !text.contains("count(*)") && !text.contains("40 + 2"),
        "{text}"
    );
    assert!(!text.contains("Breakpoint 1, "), "silent: {text}");
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

#[test]
fn plan_of_one_queryid_15() {
    plan_of_queryid(15);
}

#[test]
fn plan_of_one_queryid_18() {
    plan_of_queryid(18);
}

// --------------------------------------- LockManager waits, flame graph

/// scripts/examples/lockmanager-waits.pgdbg under the custom/generic plan
/// experiment's load with a generic plan, then `pgdbg report --flamegraph`:
/// the SVG's stacks go through AcquireExecutorLocks to LWLock:LockManager.
/// The load is checked to be running, and the capture is extended (at most
/// 5 windows of 2 s) until it holds such a stack: contention is made
/// certain, not assumed from one window on this CPU.
fn lockmanager_flamegraph(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut load = Vec::new();
    let mut pids = Vec::new();
    for _ in 0..3 {
        let mut c = cl.connect();
        c.exec("set plan_cache_mode = force_generic_plan; set statement_timeout = '90s'");
        pids.push(c.pid());
        let h = c.spawn_text("call runload_commit(100000000)");
        load.push((c, h));
    }
    let mut a = cl.connect();
    a.exec("set plan_cache_mode = force_generic_plan; set statement_timeout = '90s'");
    let pid = a.pid();
    pids.push(pid);
    let h = a.spawn_text("call runload_commit(100000000)");
    cl.wait_active(&pids, "runload_commit");
    let cap = temp(&format!("lm-{major}.jsonl"));
    let _ = std::fs::remove_file(&cap);
    let script = example("lockmanager-waits.pgdbg");
    let lm_stack = |folded: &str| {
        folded.lines().any(|l| {
            l.contains("AcquireExecutorLocks;")
                && l.contains("LockRelationOid;")
                && l.split(' ')
                    .next()
                    .unwrap()
                    .ends_with(";LWLock:LockManager")
        })
    };
    let mut folded = String::new();
    for _window in 0..5 {
        let (code, out, err) = pgdbg(&[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            &script,
            "--for",
            "2s",
            "--capture",
            cap.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let (code, f, err) = pgdbg(&["report", cap.to_str().unwrap(), "--folded"]);
        assert_eq!(code, 0, "{err}");
        folded = f;
        if lm_stack(&folded) {
            break;
        }
    }
    assert!(lm_stack(&folded), "{folded}");
    assert!(
        !folded.contains("unresolved:"),
        "every wait named: {folded}"
    );
    let svg = temp(&format!("lm-{major}.svg"));
    let (code, _, err) = pgdbg(&[
        "report",
        cap.to_str().unwrap(),
        "--flamegraph",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.contains("<svg"), "an SVG");
    assert!(
        s.contains("AcquireExecutorLocks"),
        "stacks through AcquireExecutorLocks"
    );
    assert!(s.contains("LWLock:LockManager"), "the wait as the leaf");
    assert_typed_lines(&cap);
    let (code, rep, _) = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(rep.contains("LockManager"), "{rep}");
    cl.cancel(&pids);
    let r = a.rejoin(h);
    assert!(format!("{r:?}").contains("canceling statement"), "{r:?}");
    for (mut c, h) in load {
        let _ = c.rejoin(h);
        assert_eq!(c.query_one_i64("select 2"), 2);
    }
    cl.assert_no_crash();
}

#[test]
fn lockmanager_waits_flamegraph_15() {
    lockmanager_flamegraph(15);
}

#[test]
fn lockmanager_waits_flamegraph_18() {
    lockmanager_flamegraph(18);
}

// ------------------------------------------- valid scripts, tbreak blocks

/// The checks before attaching accept what is valid: names whose scope is
/// only known at the stop (top level), `$N`, `&param->field`, array
/// elements, casts, a block that moves to another frame; a tbreak's block
/// runs at its (only) hit; a false condition never stops.
#[test]
fn valid_scripts_run_and_tbreak_blocks_15() {
    let cl = Cluster::start_seeded(15);
    let mut c = cl.connect();
    let pid = c.pid();
    let s = write_script(
        "valid-15",
        &[
            "print MyProcPid",
            "print $1 + 1",
            "print (long) MyProcPid * 2",
            "break choose_custom_plan if plansource->magic == 195726186 && plansource->num_custom_plans < 0",
            "commands",
            "  print &plansource->generic_cost",
            "  print plansource->query_string[0]",
            "  up",
            "  print some_local_of_the_caller",
            "end",
            "tbreak standard_ExecutorRun if queryDesc->operation == 1",
            "commands",
            "  silent",
            "  printf \"tbreak block: %s (%d)\\n\", queryDesc->sourceText, queryDesc->operation",
            "  continue",
            "end",
            "info breakpoints",
            "continue",
        ],
    );
    let out = temp("valid-15.out");
    let p = Pgdbg::spawn_to_file(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            s.to_str().unwrap(),
            "--for",
            "3s",
            // --ex lines follow the script: its breakpoint 1 is known there
            "--ex",
            "condition 1 plansource->num_custom_plans < -1",
        ],
        &out,
    );
    wait_for_output(&out, "Temporary breakpoint 2 at standard_ExecutorRun");
    c.exec("create temp table tb_x(a int); insert into tb_x values (1)");
    assert_eq!(c.query_one_i64("select 40 + 3"), 43);
    assert_eq!(c.query_one_i64("select 40 + 4"), 44);
    let (code, _, err) = p.wait(Duration::from_secs(60));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(code, 0, "{text}{err}");
    assert!(text.contains(&format!("$1 = {pid}")), "{text}");
    assert!(text.contains(&format!("$2 = {}", pid + 1)), "{text}");
    // the tbreak's block ran once, for the first SELECT, then it was gone
    // ... and checked in breakpoint 1's function
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "--script",
        s.to_str().unwrap(),
        "--ex",
        "condition 1 plansource->no_such_member > 0",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--ex:1:") && err.contains("no_such_member"),
        "{err}"
    );
    let block_lines = text
        .lines()
        .filter(|l| l.starts_with("tbreak block: "))
        .count();
    assert_eq!(block_lines, 1, "{text}");
    assert!(text.contains("tbreak block: select 40 + 3 (1)"), "{text}");
    assert!(
        !text.contains("Breakpoint 1,"),
        "the false condition never stopped: {text}"
    );
    assert!(
        text.contains("stop only if plansource->magic == 195726186"),
        "{text}"
    );
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(c.query_one_i64("select 9"), 9);
    cl.assert_no_crash();
}

// ---------------------------------------------- the supervisor's death

/// A multi-backend capture whose supervisor is killed (SIGKILL: it cannot
/// clean up) still leaves every backend untraced: each worker gets SIGTERM
/// from the kernel (PR_SET_PDEATHSIG) and restores its backend; a SIGTERM
/// to the supervisor is forwarded.
#[test]
fn workers_restore_backends_when_the_supervisor_dies_15() {
    let cl = Cluster::start_seeded(15);
    for sig in [libc::SIGKILL, libc::SIGTERM] {
        let mut load = Vec::new();
        let mut pids = Vec::new();
        for _ in 0..3 {
            let mut c = cl.connect();
            c.exec("set statement_timeout = '8s'");
            pids.push(c.pid());
            let h = c.spawn_text("call runload_commit(100000000)");
            load.push((c, h));
        }
        let ps: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
        let mut args = vec!["attach"];
        args.extend(ps.iter().map(|s| s.as_str()));
        args.extend(["--ex", "count standard_ExecutorStart LockRelationOid"]);
        let p = Pgdbg::spawn(&args);
        wait_until("all three attached", Duration::from_secs(30), || {
            pids.iter().all(|p| tracer_pid(*p) != 0)
        });
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(p.pid(), sig) };
        wait_until("every backend untraced", Duration::from_secs(30), || {
            pids.iter().all(|p| tracer_pid(*p) == 0)
        });
        let _ = p.wait(Duration::from_secs(30));
        // `count` may run on kernel uprobes: a worker detaches first and
        // then closes them, and the kernel takes each int3 out at the last
        // close (in the worker's background thread, or its keeper's once
        // the worker is gone), some milliseconds after the backend is
        // untraced.  Bounded: the int3s must be gone within 30 s.
        for p in &pids {
            wait_until(
                &format!("{sig}: no int3 left in {p}"),
                Duration::from_secs(30),
                || code_matches_file(*p, &cl.postgres_binary(), "standard_ExecutorStart", 16),
            );
        }
        for (mut c, h) in load {
            let r = c.rejoin(h);
            assert!(
                format!("{r:?}").contains("statement timeout"),
                "{sig}: {r:?}"
            );
            assert_eq!(c.query_one_i64("select 6"), 6);
        }
    }
    cl.assert_no_crash();
}

// ------------------------------------------------ plan choices, report

/// scripts/examples/plan-choices.pgdbg on seed 000's mediumtab point
/// statement (generic 8.4425 < custom 13.4425 on 15): custom for the first
/// five executions, generic from the sixth; the report's row says so.
fn plan_choices_example(major: u32) {
    let cl = Cluster::start_seeded(major);
    let mut c = cl.connect();
    c.exec("prepare pt(numeric) as select v from mediumtab where n = $1");
    let pid = c.pid();
    let (p, cap, _) = start_example(
        pid,
        "plan-choices.pgdbg",
        &format!("choices-{major}"),
        "4s",
        &[],
        "plancache: watching",
    );
    for k in 0..8 {
        c.exec(&format!("execute pt({})", 100 + k));
    }
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert_typed_lines(&cap);
    let ev = read_events(&cap, "plan_choice");
    let choices: Vec<&str> = ev.iter().map(|e| e["choice"].as_str().unwrap()).collect();
    assert_eq!(
        choices,
        [
            "custom", "custom", "custom", "custom", "custom", "generic", "generic", "generic"
        ],
        "{ev:?}"
    );
    assert_eq!(
        c.simple_text("select generic_plans || ' ' || custom_plans from pg_prepared_statements where name = 'pt'"),
        "3 5"
    );
    let (code, rep, err) = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let row = rep
        .lines()
        .find(|l| l.starts_with("pt "))
        .unwrap_or_else(|| panic!("{rep}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    // statement, query..., executions, custom, generic, switches, ...
    let i = cols
        .iter()
        .position(|w| *w == "$1")
        .expect("query ends with $1");
    assert_eq!(&cols[i + 1..i + 5], ["8", "5", "3", "1"], "{row}");
    if major == 15 {
        assert!(row.contains("8.4425"), "generic cost 8.4425: {row}");
    }
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

#[test]
fn plan_choices_example_15() {
    plan_choices_example(15);
}

#[test]
fn plan_choices_example_18() {
    plan_choices_example(18);
}

// ------------------------------------------------------------------ ps

/// `pgdbg ps` finds the same backends from the data directory and from the
/// socket directory, with what their titles say, and one line of error for
/// a directory that holds no cluster.
#[test]
fn ps_lists_client_backends() {
    let cl = Cluster::start_seeded(15);
    let mut a = cl.connect();
    let mut b = cl.connect();
    a.exec("begin; select 1");
    let (pa, pb) = (a.pid(), b.pid());
    let data = cl.dir.join("data");
    let (code, by_data, err) = pgdbg(&["ps", "--cluster", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, by_socket, err) = pgdbg(&["ps", "--cluster", cl.dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(by_data, by_socket);
    assert!(
        by_data.contains(&format!("postmaster {}", cl.postmaster_pid)),
        "{by_data}"
    );
    let line = |pid: i32| {
        by_data
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
            .unwrap_or_else(|| panic!("{pid} in {by_data}"))
            .to_string()
    };
    assert!(line(pa).ends_with("idle in transaction"), "{by_data}");
    assert!(
        line(pb).contains("postgres") && line(pb).ends_with("idle"),
        "{by_data}"
    );
    assert!(
        !by_data.contains("checkpointer"),
        "only client backends: {by_data}"
    );
    let (code, json, _) = pgdbg(&["ps", "--cluster", data.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        rows.iter()
            .any(|r| r["pid"] == pa && r["state"] == "idle in transaction"),
        "{json}"
    );
    let (code, _, err) = pgdbg(&["ps", "--cluster", "/tmp"]);
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("/tmp"), "{err}");
    a.exec("commit");
}

// ------------------------------------------ a reader that does not read

/// Probe output goes through a queue written by a timer thread: when
/// nobody reads pgdbg's standard output (a full pipe), the tracer still
/// runs, the backend is not held at a breakpoint, and the script ends and
/// detaches at its count of calls; the output comes out when the pipe is
/// read.
#[test]
fn unread_output_does_not_hold_the_backend_15() {
    let cl = Cluster::start_seeded(15);
    let mut c = cl.connect();
    let pid = c.pid();
    let cap = temp("unread.jsonl");
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "trace standard_ExecutorStart queryDesc->sourceText eflags --count 3000 --for 120s",
        "--capture",
        cap.to_str().unwrap(),
    ]);
    p.wait_attached(pid);
    // dynamic SQL: one executor start per iteration, each a long trace line
    let h = c.spawn_text(
        "do $$ begin for i in 1..20000 loop execute 'select ' || i || ' as a_rather_long_column_name_to_make_the_line_longer'; end loop; end $$",
    );
    wait_until("the backend detached", Duration::from_secs(60), || {
        tracer_pid(pid) == 0
    });
    let traced = read_events(&cap, "trace").len();
    // the pipe's size as the kernel says (64 KiB by default): what was
    // printed is checked against it below
    let pipe = {
        use std::os::fd::AsRawFd;
        let fd = p.child.stdout.as_ref().unwrap().as_raw_fd();
        // SAFETY: fcntl(2) on a descriptor we own.
        unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) }
    };
    assert!(
        pipe > 0 && traced > 0,
        "{traced} calls traced, pipe of {pipe} bytes"
    );
    let r = c.rejoin(h);
    assert!(r.is_ok(), "{r:?}");
    // now read what pgdbg has been waiting to write, and let it exit
    let mut so = p.child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut so, &mut out).unwrap();
        out
    });
    let (code, _, err) = p.wait(Duration::from_secs(60));
    let out = reader.join().unwrap();
    assert_eq!(code, 0, "{err}");
    let lines = out
        .lines()
        .filter(|l| l.starts_with("standard_ExecutorStart("))
        .count();
    assert_eq!(lines, traced, "every traced call printed");
    // what pgdbg held while nobody read: at least twice the pipe
    assert!(
        out.len() > 2 * pipe as usize,
        "{} bytes printed, pipe of {pipe} bytes",
        out.len()
    );
    assert!(
        out.contains(&format!("trace: {traced} calls of standard_ExecutorStart")),
        "{err}"
    );
    cl.assert_no_crash();
}

/// The final line of a cluster run counts the backends attached, those of
/// them that exited during the script, and those that failed to attach
/// with their causes (here one already traced by another pgdbg and one by
/// `strace -p`), each exactly.
#[test]
fn cluster_final_line_counts_attached_exited_failed() {
    let cl = Cluster::start(15);
    let mut held = cl.connect();
    let mut straced = cl.connect();
    let mut stays = cl.connect();
    let mut goes = cl.connect();
    let mut ctl = cl.connect();
    let (held_pid, stays_pid, goes_pid, ctl_pid) = (held.pid(), stays.pid(), goes.pid(), ctl.pid());
    // another pgdbg traces one backend: no worker can attach to it
    let holder = Pgdbg::spawn_attached(
        &[
            "attach",
            &held_pid.to_string(),
            "-q",
            "--ex",
            "waits trace --for 60s --quiet",
        ],
        held_pid,
    );
    let holder_tracer = tracer_pid(held_pid);
    // and strace another one
    let straced_pid = straced.pid();
    let mut strace = std::process::Command::new("strace")
        .args(["-q", "-o", "/dev/null", "-p", &straced_pid.to_string()])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("strace (needed by this test)");
    wait_until("strace to attach", Duration::from_secs(30), || {
        tracer_pid(straced_pid) == strace.id() as i32
    });
    let p = count_by_workers(&cl, "final-line", &[stays_pid, goes_pid, ctl_pid]);
    assert_eq!(
        ctl.simple_text(&format!("select pg_terminate_backend({goes_pid})")),
        "t"
    );
    let (code, _, err) = p.wait(Duration::from_secs(60));
    // SAFETY: plain kill(2) of our own child: it restores and detaches
    unsafe { libc::kill(holder.pid(), libc::SIGTERM) };
    let _ = holder.wait(Duration::from_secs(60));
    // SAFETY: plain kill(2) of our own child: strace detaches
    unsafe { libc::kill(strace.id() as i32, libc::SIGINT) };
    let _ = strace.wait();
    assert_eq!(tracer_pid(held_pid), 0, "held backend left traced");
    assert_eq!(tracer_pid(straced_pid), 0, "backend left traced by strace");
    assert_ne!(holder_tracer, 0);
    assert_eq!(code, 1, "a backend failed to attach: {err}");
    assert!(
        err.contains(&format!(
            "[{held_pid}] pgdbg: error: process {held_pid} is already traced"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "[{straced_pid}] pgdbg: error: process {straced_pid} is already traced by PID {} (strace)",
            strace.id()
        )),
        "{err}"
    );
    assert!(
        err.contains(
            "pgdbg: 3 backends attached, 1 exited during the script, 2 failed to attach: 2 already traced by another process (each said above)"
        ),
        "{err}"
    );
    assert_eq!(held.pid(), held_pid);
    assert_eq!(straced.pid(), straced_pid);
    assert_eq!(stays.pid(), stays_pid);
    let _ = goes;
}

/// Sends SIGCONT to a stopped process when dropped (a failed assertion
/// too): the cluster's postmaster is never left stopped.
struct ContOnDrop(i32);

impl Drop for ContOnDrop {
    fn drop(&mut self) {
        // SAFETY: plain kill(2)
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// A backend ended by `pg_terminate_backend` while its worker observes it
/// is counted as exited from what its worker saw, not from /proc at the
/// reap: here its postmaster is stopped, so the backend is still a zombie
/// (not reaped) when the supervisor reaps the worker, and is counted all
/// the same, exactly.
#[test]
fn cluster_exit_counted_from_the_worker_while_unreaped() {
    let cl = Cluster::start(15);
    let mut stays = cl.connect();
    let mut goes = cl.connect();
    let mut ctl = cl.connect();
    let (stays_pid, goes_pid, ctl_pid) = (stays.pid(), goes.pid(), ctl.pid());
    let p = count_by_workers(&cl, "exit-exact", &[stays_pid, goes_pid, ctl_pid]);
    // the worker of `goes` (its PID is its first argument)
    let worker_of = |b: i32| {
        std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let w: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(format!("/proc/{w}/cmdline")).ok()?;
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            (args.len() > 3
                && args[1] == b"attach"
                && args[2] == b.to_string().as_bytes()
                && args.contains(&&b"--worker"[..]))
            .then_some(w)
        })
    };
    let worker = worker_of(goes_pid).unwrap_or_else(|| panic!("no worker for {goes_pid}"));
    // SAFETY: plain kill(2): stopped until the guard is dropped
    unsafe { libc::kill(cl.postmaster_pid, libc::SIGSTOP) };
    let cont = ContOnDrop(cl.postmaster_pid);
    assert_eq!(
        ctl.simple_text(&format!("select pg_terminate_backend({goes_pid})")),
        "t"
    );
    // its worker saw the end and was reaped by the supervisor (gone from
    // /proc, not a zombie) while the backend is still an unreaped zombie
    wait_until(
        "the worker of the ended backend reaped",
        Duration::from_secs(30),
        || !std::path::Path::new(&format!("/proc/{worker}")).exists(),
    );
    assert!(
        proc_state(goes_pid).starts_with('Z'),
        "backend {goes_pid} is {} (a zombie while its postmaster is stopped)",
        proc_state(goes_pid)
    );
    drop(cont);
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("[{goes_pid}] backend {goes_pid} exited")),
        "{err}"
    );
    assert!(
        err.contains("pgdbg: 3 backends attached, 1 exited during the script"),
        "{err}"
    );
    assert_eq!(stays.pid(), stays_pid);
    drop(goes);
    cl.assert_no_crash();
}

// ------------------------------------------- a silent breakpoint's hits

/// A `silent` breakpoint whose block continues, hit 300 times in one
/// statement: the capture holds `hits` events whose counts add up to 300
/// (not 300 `stop` events), `pgdbg report` counts 300 calls; with
/// `--capture-hits`, one `stop` event per hit as before.
fn silent_hits_counted(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let s = write_script(
        &format!("silent-hits-{major}"),
        &[
            "break pg_backend_pid",
            "commands",
            "  silent",
            "  continue",
            "end",
            "continue",
        ],
    );
    for per_hit in [false, true] {
        let key = format!("silent-hits-{major}-{per_hit}");
        let (cap, out) = (temp(&format!("{key}.jsonl")), temp(&format!("{key}.out")));
        let pid_s = pid.to_string();
        let mut args = vec![
            "attach",
            &pid_s,
            "-q",
            "--script",
            s.to_str().unwrap(),
            "--for",
            "6s",
            "--capture",
            cap.to_str().unwrap(),
        ];
        if per_hit {
            args.push("--capture-hits");
        }
        let p = Pgdbg::spawn_to_file(&args, &out);
        wait_for_output(&out, "Breakpoint 1 at");
        assert_eq!(
            c.query_one_i64("select count(pg_backend_pid()) from generate_series(1, 300)"),
            300
        );
        let (code, _, err) = p.wait(Duration::from_secs(60));
        assert_eq!(code, 0, "{err}");
        assert_typed_lines(&cap);
        // (the --for deadline's stop is an "interrupted" one)
        let stops: Vec<_> = read_events(&cap, "stop")
            .into_iter()
            .filter(|e| e["reason"] == "breakpoint")
            .collect();
        let hits = read_events(&cap, "hits");
        if per_hit {
            assert_eq!(stops.len(), 300, "--capture-hits: one stop per hit");
            assert!(hits.is_empty(), "{hits:?}");
        } else {
            assert!(stops.is_empty(), "{stops:?}");
            let n: u64 = hits.iter().map(|h| h["count"].as_u64().unwrap()).sum();
            assert_eq!(n, 300, "{hits:?}");
            assert!(
                hits.iter()
                    .all(|h| h["function"] == "pg_backend_pid" && h["breakpoints"][0] == 1),
                "{hits:?}"
            );
        }
        let (code, report, err) = pgdbg(&["report", cap.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(
            report
                .lines()
                .any(|l| l.contains("pg_backend_pid") && l.contains("300")),
            "{report}"
        );
        assert_eq!(tracer_pid(pid), 0);
    }
    cl.assert_no_crash();
}

#[test]
fn silent_hits_counted_15() {
    silent_hits_counted(15);
}

#[test]
fn silent_hits_counted_18() {
    silent_hits_counted(18);
}
