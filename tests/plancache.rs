//! `plancache` on real PostgreSQL 15 and 18: seed 000's three cases, a
//! plpgsql loop and a `pgbench -M prepared` client.  Every decision is
//! checked against what the planner's own numbers predict (EXPLAIN costs
//! plus the planning charge, and choose_custom_plan's rule) and against
//! pg_prepared_statements afterwards.

use common::*;
use pgdbg_testbed as common;
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// EXPLAIN total cost of `execute NAME(args)` under a forced plan_cache_mode.
fn explain_cost(cl: &Cluster, prepare: &str, mode: &str, exec: &str) -> f64 {
    let mut b = cl.connect();
    b.exec(&format!("set plan_cache_mode = {mode}"));
    b.exec(prepare);
    let j = b.simple_text(&format!("explain (format json) {exec}"));
    let v: Value = serde_json::from_str(&j).unwrap();
    v[0]["Plan"]["Total Cost"].as_f64().unwrap()
}

fn prepared_counts(c: &mut Client, name: &str) -> (i64, i64) {
    let g = c.query_one_i64(&format!(
        "select generic_plans from pg_prepared_statements where name = '{name}'"
    ));
    let cu = c.query_one_i64(&format!(
        "select custom_plans from pg_prepared_statements where name = '{name}'"
    ));
    (g, cu)
}

/// choose_custom_plan's rule replayed on the planner's numbers: given each
/// execution's custom-plan cost and the generic cost, the expected choices.
fn replay(custom_costs: &[f64], generic: f64) -> Vec<bool> {
    let (mut total, mut n) = (0.0, 0);
    let mut out = Vec::new();
    for c in custom_costs {
        let generic_wins = n >= 5 && generic < total / n as f64;
        out.push(generic_wins);
        if !generic_wins {
            total += c;
            n += 1;
        }
    }
    out
}

const RANGE: &str =
    "prepare s1 as select max(md5(v)) from mediumtab where n between $1::numeric and $2::numeric";
const POINT: &str = "prepare s2 as select v from mediumtab where n = $1::numeric";
const BIG: &str = "prepare s3 as select v from bigtab where n = $1::numeric";

fn seed000_cases(major: u32) {
    let cl = Cluster::start_seeded(major);

    // 1. The range statement: custom while ranges are small, generic after
    //    several wide ranges raise the average custom cost.
    let args: Vec<(i32, i32)> = [(60, 70); 6]
        .into_iter()
        .chain([(10, 12000); 6])
        .chain([(10, 30); 2])
        .collect();
    let generic = explain_cost(&cl, RANGE, "force_generic_plan", "execute s1(10,30)");
    let mut costs = Vec::new();
    for (x, y) in &args {
        costs.push(
            explain_cost(
                &cl,
                RANGE,
                "force_custom_plan",
                &format!("execute s1({x},{y})"),
            ) + 5.0,
        );
    }
    let expected = replay(&costs, generic);
    assert!(
        expected.iter().any(|g| *g),
        "the scenario must switch to generic: {costs:?} vs {generic}"
    );
    let mut a = cl.connect();
    let pid = a.pid();
    let (out, ev) = watch(pid, args.len(), || {
        a.exec(RANGE);
        for (x, y) in &args {
            a.exec(&format!("execute s1({x},{y})"));
        }
    });
    for (i, e) in ev.iter().enumerate() {
        assert_eq!(e["statement"], "s1", "{e}");
        assert_eq!(e["execution"], (i + 1) as i64);
        assert_eq!(
            e["choice"] == "generic",
            expected[i],
            "execution {}: {e}\n{out}",
            i + 1
        );
        assert_eq!(e["plan_cache_mode"], "auto");
        if e["choice"] == "custom" {
            assert!((f(&e["planning_cost"]) - 5.0).abs() < 1e-9, "{e}");
            assert!(
                (f(&e["custom_plan_cost"]) - costs[i]).abs() < 0.006,
                "execution {}: custom cost {} but EXPLAIN + planning = {}",
                i + 1,
                e["custom_plan_cost"],
                costs[i]
            );
        }
        if i >= 5 {
            assert!((f(&e["generic_cost"]) - generic).abs() < 0.006, "{e}");
            assert_eq!(e["reason"], "cost");
        } else {
            assert_eq!(e["reason"], "fewer_than_5_custom_plans");
        }
    }
    if major == 15 {
        assert_eq!(f(&ev[6]["generic_cost"]), 226.435);
    }
    assert!(
        out.contains("s1 #1: custom plan  fewer than 5 custom plans so far"),
        "{out}"
    );
    assert!(
        out.contains(": GENERIC plan  generic 226.435 < avg custom "),
        "{out}"
    );
    assert!(out.contains("s1 #7: custom plan  avg custom "), "{out}");
    let gens = ev.iter().filter(|e| e["choice"] == "generic").count() as i64;
    assert_eq!(
        prepared_counts(&mut a, "s1"),
        (gens, args.len() as i64 - gens)
    );

    // 2. The point statement: generic 8.4425 < custom 13.4425, generic from
    //    the 6th execution on.
    let mut a = cl.connect();
    let pid = a.pid();
    let (_, ev) = watch(pid, 8, || {
        a.exec(POINT);
        for i in 0..8 {
            a.exec(&format!("execute s2({})", 1000 + i));
        }
    });
    let generic = explain_cost(&cl, POINT, "force_generic_plan", "execute s2(1)");
    let custom = explain_cost(&cl, POINT, "force_custom_plan", "execute s2(1)") + 5.0;
    for (i, e) in ev.iter().enumerate() {
        assert_eq!(e["choice"] == "generic", i >= 5, "execution {}: {e}", i + 1);
    }
    assert!((f(&ev[6]["generic_cost"]) - generic).abs() < 0.006);
    assert!(
        (f(&ev[5]["avg_custom_cost"]) - custom).abs() < 0.006,
        "{}",
        ev[5]
    );
    if major == 15 {
        assert_eq!(f(&ev[6]["generic_cost"]), 8.4425);
        assert_eq!(f(&ev[5]["avg_custom_cost"]), 13.4425);
    }
    assert_eq!(prepared_counts(&mut a, "s2"), (3, 5));

    // 3. 1000 partitions: custom forever under auto ...
    let mut a = cl.connect();
    let pid = a.pid();
    let (_, ev) = watch(pid, 7, || {
        a.exec(BIG);
        for i in 0..7 {
            a.exec(&format!("execute s3({})", 5000 + i * 7919));
        }
    });
    assert!(ev.iter().all(|e| e["choice"] == "custom"), "{ev:?}");
    let g = f(&ev[6]["generic_cost"]);
    let avg = f(&ev[6]["avg_custom_cost"]);
    assert!(g > 100.0 * avg, "generic {g} vs avg custom {avg}");
    if major == 15 {
        assert!((g - 8307.5).abs() < 1e-6, "generic {g}");
        assert!((avg - 15.8025).abs() < 1e-9, "avg custom {avg}");
    }
    // ... and generic every time under force_generic_plan.
    let mut a = cl.connect();
    let pid = a.pid();
    let (out, ev) = watch(pid, 3, || {
        a.exec("set plan_cache_mode = force_generic_plan");
        a.exec(BIG);
        for i in 0..3 {
            a.exec(&format!("execute s3({})", 777 + i));
        }
    });
    for e in &ev {
        assert_eq!(e["choice"], "generic", "{e}");
        assert_eq!(e["reason"], "forced_by_plan_cache_mode");
        assert_eq!(e["plan_cache_mode"], "force_generic_plan");
    }
    assert!(
        out.contains("GENERIC plan  plan_cache_mode = force_generic_plan"),
        "{out}"
    );
    assert_eq!(prepared_counts(&mut a, "s3"), (3, 0));

    // 4. A plpgsql loop (seed 000's runload): SPI statements, no name.  The
    //    loop runs longer than the watch; its own expressions may show up
    //    too (18 plans simple expressions through the plan cache).
    let mut a = cl.connect();
    let pid = a.pid();
    let (out, ev) = watch(pid, 12, || {
        a.simple_text("select runload(200)");
    });
    let loop_stmt: Vec<&Value> = ev
        .iter()
        .filter(|e| e["query"].as_str().is_some_and(|q| q.contains("bigtab")))
        .collect();
    assert!(
        loop_stmt.len() >= 6,
        "the loop's statement is reported:\n{out}"
    );
    for e in &ev {
        assert!(e["statement"].is_null(), "{e}");
    }
    for (i, e) in loop_stmt.iter().enumerate() {
        assert_eq!(e["choice"], "custom", "{e}");
        assert_eq!(e["execution"], (i + 1) as i64, "{e}");
    }
    assert!(out.contains("<unnamed> \""), "{out}");
    cl.assert_no_crash();

    // 5. pgbench -M prepared: protocol-level named statements.
    let script = std::env::temp_dir().join(format!("pgdbg-pgbench-{}.sql", std::process::id()));
    let ready = script.with_extension("ready");
    let _ = std::fs::remove_file(&ready);
    std::fs::write(
        &script,
        format!(
            "\\if :started = 0\n\\shell touch {}\n\\set started 1\n\\endif\n\
             \\sleep 1500 ms\n\\set n random(1, 1000000)\nselect v from mediumtab where n = :n;\n",
            ready.display()
        ),
    )
    .unwrap();
    let mut pgbench = std::process::Command::new(cl.bin.join("pgbench"))
        .args([
            "-n",
            "-M",
            "prepared",
            "-c",
            "1",
            "-D",
            "started=0",
            "-t",
            "10",
            "-f",
        ])
        .arg(&script)
        .args(["-h", cl.dir.to_str().unwrap(), "-U", "postgres", "postgres"])
        .env("PGAPPNAME", "pgdbg-test-pgbench")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut c = cl.connect();
    let bpid = pgbench_backend(&mut c, "pgdbg-test-pgbench", &ready);
    let (_, ev) = watch(bpid, 6, || {});
    assert!(pgbench.wait().unwrap().success());
    for (i, e) in ev.iter().enumerate() {
        let name = e["statement"]
            .as_str()
            .unwrap_or_else(|| panic!("no statement name: {e}"));
        assert!(
            name.starts_with("P_"),
            "pgbench names its statements P_...: {e}"
        );
        assert_eq!(e["choice"] == "generic", i >= 5, "{e}");
    }
    cl.assert_no_crash();
}

#[test]
fn plancache_seed000_15() {
    seed000_cases(15);
}

#[test]
fn plancache_seed000_18() {
    seed000_cases(18);
}

/// `--for` ends a watch that sees nothing, and the breakpoints are gone.
#[test]
fn plancache_for_duration_disarms() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "plancache --stops --for 500ms",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("plancache: 0 decisions"), "{out}");
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "GetCachedPlan",
        32
    ));
    assert_eq!(a.pid(), pid);
    let (code, _, err) = pgdbg(&["attach", &pid.to_string(), "--ex", "plancache --for xyz"]);
    assert_ne!(code, 0);
    assert!(err.contains("--ex:1: bad duration 'xyz'"), "{err}");
}

/// `plancache --fast`: the choice from the counters, the same choices and
/// costs; recorded in-process (no stop) or with `--fast=stop` one stop per
/// decision.
fn fast_mode(major: u32, cmd: &str, in_process: bool) {
    let cl = Cluster::start(major);
    cl.seed(&["mediumtab"]);
    let mut a = cl.connect();
    let pid = a.pid();
    let maps_before = anon_exec_maps(pid);
    // with stops, the 8th decision is reported at the 9th GetCachedPlan
    let (out, ev) = watch_cmd(pid, cmd, 8, || {
        a.exec(POINT);
        for i in 0..9 {
            a.exec(&format!("execute s2({})", 2000 + i));
        }
    });
    assert_eq!(
        out.contains("(recorded in-process, no stops)"),
        in_process,
        "{out}"
    );
    for (i, e) in ev.iter().enumerate() {
        assert_eq!(e["execution"], (i + 1) as i64, "{e}");
        assert_eq!(e["choice"] == "generic", i >= 5, "execution {}: {e}", i + 1);
        assert!(e["planning_cost"].is_null(), "{e}");
        assert_eq!(e["statement"], "s2");
        assert_eq!(e["plan_cache_mode"], "auto");
    }
    if major == 15 {
        assert_eq!(f(&ev[5]["generic_cost"]), 8.4425);
        assert_eq!(f(&ev[5]["avg_custom_cost"]), 13.4425);
    }
    assert_eq!(prepared_counts(&mut a, "s2"), (4, 5));
    // as found: the code and the address space
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "GetCachedPlan",
        32
    ));
    assert_eq!(anon_exec_maps(pid), maps_before);
    cl.assert_no_crash();
}

#[test]
fn plancache_fast_15() {
    fast_mode(15, "plancache --fast --count 8", true);
}

#[test]
fn plancache_fast_18() {
    fast_mode(18, "plancache --fast --count 8", true);
}

#[test]
fn plancache_fast_stop_15() {
    fast_mode(15, "plancache --fast=stop --count 8", false);
}

/// A plpgsql loop: every execution of its statement goes through
/// GetCachedPlan (one decision per iteration).
fn plpgsql_loop(n: u32) -> String {
    format!(
        "do $$ declare r text; begin for k in 1..{n} loop \
         select v into r from mediumtab where n = k; end loop; end $$"
    )
}

/// The in-process recorder under load, then pgdbg told to stop (SIGTERM)
/// or killed (SIGKILL) while the backend runs through it.
/// SIGTERM: every decision up to then was reported once, in order, with
/// the right choice; the backend is left as found (code, mappings,
/// untraced) and finishes its loop.  SIGKILL of pgdbg and of its guardian
/// (which would otherwise take the recorder out): nothing can be cleaned
/// up; the backend waits in the group stop pgdbg held it in until a
/// SIGCONT; then, the jump leading to valid code, it finishes its loop and
/// goes on working, the cluster does not restart; the next `plancache`
/// recognizes the orphan recorder and removes it (code and mappings as
/// found).
fn ring_under_load(major: u32) {
    let cl = Cluster::start(major);
    cl.seed(&["mediumtab"]);
    let bin = cl.postgres_binary();
    for (sig, code) in [(libc::SIGTERM, 143), (libc::SIGKILL, -1)] {
        let mut a = cl.connect();
        let pid = a.pid();
        let maps_before = anon_exec_maps(pid);
        let cap = std::env::temp_dir().join(format!(
            "pgdbg-ring-{major}-{sig}-{}.jsonl",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&cap);
        // stdout to a file: thousands of lines, nobody reading a pipe
        let out_file = std::env::temp_dir().join(format!(
            "pgdbg-ring-{major}-{sig}-{}.out",
            std::process::id()
        ));
        let mut p = Pgdbg::spawn_to_file(
            &[
                "attach",
                &pid.to_string(),
                "-q",
                "--ex",
                "plancache --fast",
                "--capture",
                cap.to_str().unwrap(),
            ],
            &out_file,
        );
        p.wait_attached(pid);
        wait_until("the recorder", Duration::from_secs(30), || {
            anon_exec_maps(pid).len() > maps_before.len()
        });
        let h = a.spawn_text(&plpgsql_loop(300_000));
        wait_until("1000 decisions", Duration::from_secs(60), || {
            read_events(&cap, "plan_choice").len() >= 1000
        });
        if sig == libc::SIGKILL {
            let g = guardians_of(pid);
            assert_eq!(g.len(), 1, "one guardian for the backend");
            unsafe { libc::kill(g[0], libc::SIGKILL) };
        }
        unsafe {
            libc::kill(p.pid(), sig);
        }
        let (status, _, err) = p.wait(Duration::from_secs(30));
        let out = std::fs::read_to_string(&out_file).unwrap_or_default();
        let _ = std::fs::remove_file(&out_file);
        assert_eq!(status, code, "{err}");
        if sig == libc::SIGTERM {
            let lines = out.lines().filter(|l| l.contains(" plan  ")).count();
            assert!(lines >= 1000, "{lines} decision lines\n{err}");
        }
        wait_until("untraced", Duration::from_secs(10), || tracer_pid(pid) == 0);
        let all = read_events(&cap, "plan_choice");
        // the loop's statement (its bounds are one-shot expressions of their own)
        let ev: Vec<&Value> = all
            .iter()
            .filter(|e| {
                e["query"]
                    .as_str()
                    .is_some_and(|q| q.contains("from mediumtab where n = k"))
            })
            .collect();
        assert!(ev.len() >= 1000 - 2, "{}", ev.len());
        // In order, each once, the right choice.  A loop this fast (about
        // 100 000 decisions/s) can outrun the ring at times: decisions not
        // recorded are counted, never guessed.
        let mut last = 0;
        for e in &ev {
            let x = e["execution"].as_i64().unwrap();
            assert!(x > last, "{e}");
            last = x;
            assert_eq!(e["choice"] == "generic", x > 5, "{e}");
        }
        assert_eq!(ev[0]["execution"], 1);
        if sig == libc::SIGTERM {
            let end = read_events(&cap, "plancache_end");
            assert_eq!(end.len(), 1);
            assert_eq!(end[0]["decisions"], all.len() as u64);
            // every execution up to the last reported one: reported or
            // lost (calls lost after it are counted too)
            let lost = end[0]["lost"].as_i64().unwrap();
            assert!(ev.len() as i64 + lost >= last, "lost {lost}");
            let says = out
                .lines()
                .filter(|l| l.contains("not recorded (the ring was full)"));
            assert_eq!(says.count() > 0, lost > 0, "{lost}");
            assert!(code_matches_file(pid, &bin, "GetCachedPlan", 32));
            assert_eq!(anon_exec_maps(pid), maps_before);
        } else {
            // the detour stays: the jump and its page
            assert!(!code_matches_file(pid, &bin, "GetCachedPlan", 32));
            // a recorder alone needs no group stop: with pgdbg and its
            // guardian gone the backend runs on (sampled for a second)
            for _ in 0..50 {
                let st = proc_state(pid);
                assert!(
                    !st.starts_with('T') && !st.starts_with('t'),
                    "backend stopped: {st}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            // the record pgdbg left names the jump: without it (as where
            // /dev/shm cannot be used) the next pgdbg still finds the orphan
            let records: Vec<_> = std::fs::read_dir("/dev/shm")
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("pgdbg-backend-{pid}-"))
                })
                .collect();
            assert_eq!(records.len(), 1, "pgdbg's record of the backend");
            std::fs::remove_file(records[0].path()).unwrap();
        }
        let r = a.rejoin(h);
        assert!(r.is_ok(), "the loop failed: {r:?}");
        assert_eq!(a.pid(), pid);
        assert_eq!(
            a.query_one_i64("select count(*) from mediumtab where n <= 10"),
            10
        );
        if sig == libc::SIGKILL {
            // the next pgdbg finds the orphan, takes it out and records
            let (code, out, err) = pgdbg(&[
                "attach",
                &pid.to_string(),
                "-q",
                "--ex",
                "plancache --fast --for 300ms",
            ]);
            assert_eq!(code, 0, "{out}\n{err}");
            assert!(
                out.contains("removed the in-process recorder an earlier pgdbg left"),
                "{out}"
            );
            assert!(out.contains("(recorded in-process, no stops)"), "{out}");
            assert_eq!(tracer_pid(pid), 0);
            assert!(code_matches_file(pid, &bin, "GetCachedPlan", 32));
            assert_eq!(anon_exec_maps(pid), maps_before);
        }
        cl.assert_no_crash();
        let _ = std::fs::remove_file(&cap);
    }
}

#[test]
fn plancache_ring_under_load_15() {
    ring_under_load(15);
}

#[test]
fn plancache_ring_under_load_18() {
    ring_under_load(18);
}

/// One-shot statements (plpgsql's dynamic EXECUTE): each plansource is
/// freed right after its only decision, and the next one often takes its
/// address; every decision is still reported, once.
#[test]
fn plancache_fast_one_shot_15() {
    let cl = Cluster::start(15);
    cl.seed(&["mediumtab"]);
    let mut a = cl.connect();
    let pid = a.pid();
    let (_, ev) = watch_cmd(pid, "plancache --fast --count 50", 50, || {
        a.exec(
            "do $$ declare r text; begin for k in 1..50 loop \
             execute 'select v from mediumtab where n = $1' into r using k; end loop; end $$",
        );
    });
    for e in &ev {
        assert_eq!(e["reason"], "one_shot", "{e}");
        assert_eq!(e["choice"], "custom", "{e}");
        assert_eq!(e["execution"], 1, "{e}");
    }
    cl.assert_no_crash();
}

/// The k-th statement `freed_one_shot_texts` runs: distinct, of varying
/// length (so that freed texts are reused by allocations of other sizes).
fn one_shot_text(k: usize) -> String {
    format!("select {k} as c, '{}'::text as pad", "ab".repeat(k % 40))
}

/// One-shot statements freed and their memory reused at once: a fast
/// plpgsql loop of dynamic EXECUTEs of distinct statements, recorded
/// in-process.  Every decision's statement text is one that ran (each ran
/// once: a text reported twice was read where another had been) or is
/// null with the reason; never bytes from reused memory.
fn freed_one_shot_texts(major: u32) {
    const N: usize = 3000;
    let issued: HashSet<String> = (1..=N).map(one_shot_text).collect();
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    a.exec("prepare endmark as select 1");
    let maps_before = anon_exec_maps(pid);
    let tag = format!("pgdbg-oneshot-text-{major}-{}", std::process::id());
    let cap = std::env::temp_dir().join(format!("{tag}.jsonl"));
    let out_file = std::env::temp_dir().join(format!("{tag}.out"));
    let _ = std::fs::remove_file(&cap);
    let mut p = Pgdbg::spawn_to_file(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plancache --fast",
            "--capture",
            cap.to_str().unwrap(),
        ],
        &out_file,
    );
    p.wait_attached(pid);
    wait_until("the recorder", Duration::from_secs(30), || {
        anon_exec_maps(pid).len() > maps_before.len()
    });
    let body = format!(
        "do $$ declare r record; begin for k in 1..{N} loop \
         execute 'select ' || k || ' as c, ''' || repeat('ab', k % 40) || '''::text as pad' into r; \
         end loop; end $$"
    );
    a.exec(&body);
    // a last decision: all before it are in the capture once it is
    a.exec("execute endmark");
    wait_until("the last decision", Duration::from_secs(60), || {
        read_events(&cap, "plan_choice")
            .iter()
            .any(|e| e["statement"] == "endmark")
    });
    unsafe { libc::kill(p.pid(), libc::SIGTERM) };
    let (status, _, err) = p.wait(Duration::from_secs(30));
    let out = std::fs::read_to_string(&out_file).unwrap_or_default();
    let _ = std::fs::remove_file(&out_file);
    assert_eq!(status, 143, "{err}");
    let ev = read_events(&cap, "plan_choice");
    let mut seen = HashSet::new();
    let mut one_shot = 0;
    let mut bad = Vec::new();
    for e in &ev {
        if e["reason"] == "one_shot" {
            one_shot += 1;
        }
        let Some(q) = e["query"].as_str() else {
            assert!(
                e["query_unavailable"]
                    .as_str()
                    .is_some_and(|w| !w.is_empty()),
                "no text and no reason: {e}"
            );
            // the start the recorder copied at the call: a statement's
            // that ran (a one-shot text is freed at once, but copied first)
            match e["query_start"].as_str() {
                Some(st) if issued.iter().any(|t| t.starts_with(st)) => {}
                _ if e["reason"] != "one_shot" => {}
                _ => bad.push(format!("a one-shot call without its text's start: {e}")),
            }
            continue;
        };
        if q.contains('\u{fffd}') {
            bad.push(format!("not text: {e}"));
        } else if issued.contains(q) {
            if !seen.insert(q) {
                bad.push(format!("a statement that ran once, twice: {e}"));
            }
        } else if !(body.contains(q) || q == "prepare endmark as select 1") {
            // (the loop's own expressions, the marker)
            bad.push(format!("not a statement that ran: {e}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} decisions with a wrong text, e.g.\n{}",
        bad.len(),
        ev.len(),
        bad.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    assert!(!out.contains('\u{fffd}'), "{out}");
    let end = read_events(&cap, "plancache_end");
    let lost = end[0]["lost"].as_u64().unwrap() as usize;
    assert!(
        one_shot + lost >= N,
        "{one_shot} one-shot decisions, {lost} lost"
    );
    assert_eq!(tracer_pid(pid), 0);
    let _ = std::fs::remove_file(&cap);
    cl.assert_no_crash();
}

#[test]
fn plancache_freed_one_shot_texts_15() {
    freed_one_shot_texts(15);
}

#[test]
fn plancache_freed_one_shot_texts_18() {
    freed_one_shot_texts(18);
}

/// The statements `unnamed_statements` runs in each pgbench transaction:
/// a short one, one longer than the text the recorder copies at the call
/// (80 bytes), one without parameters.
const UNNAMED: [&str; 3] = [
    "select :n::int + 1 as first_short",
    "select :n::int + 2 as second_long, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'::text as pad",
    "select 3 as third_without_parameters",
];

/// A driver's unnamed statements (`pgbench -M extended`: Parse, Bind,
/// Execute of the unnamed statement, each Parse freeing the last one and
/// making the next, usually at the same address with its text at the same
/// place), recorded in-process: every call is reported (none lost, none
/// whose choice is not known), in the order they ran, each with its own
/// text (whole, or its start when the plansource was freed before the ring
/// was read), custom for the two with parameters, generic for the other.
fn unnamed_statements(major: u32) {
    const T: usize = 3000;
    let cl = Cluster::start(major);
    let tag = format!("pgdbg-unnamed-{major}-{}", std::process::id());
    let tmp = std::env::temp_dir();
    let (script, ready, go, cap, out_file) = (
        tmp.join(format!("{tag}.sql")),
        tmp.join(format!("{tag}.ready")),
        tmp.join(format!("{tag}.go")),
        tmp.join(format!("{tag}.jsonl")),
        tmp.join(format!("{tag}.out")),
    );
    for f in [&ready, &go, &cap] {
        let _ = std::fs::remove_file(f);
    }
    // the first transaction waits for the test's go (pgdbg's recorder in)
    std::fs::write(
        &script,
        format!(
            "\\if :started = 0\n\\shell touch {}\n\\shell while [ ! -e {} ]; do sleep 0.05; done\n\\set started 1\n\\endif\n\
             \\set n random(1, 1000)\n{};\n{};\n{};\n",
            ready.display(),
            go.display(),
            UNNAMED[0],
            UNNAMED[1],
            UNNAMED[2]
        ),
    )
    .unwrap();
    let pgbench = std::process::Command::new(cl.bin.join("pgbench"))
        .args(["-n", "-M", "extended", "-c", "1", "-D", "started=0", "-t"])
        .arg(T.to_string())
        .arg("-f")
        .arg(&script)
        .args(["-h", cl.dir.to_str().unwrap(), "-U", "postgres", "postgres"])
        .env("PGAPPNAME", "pgdbg-test-unnamed")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = cl.connect();
    let pid = pgbench_backend(&mut c, "pgdbg-test-unnamed", &ready);
    let maps_before = anon_exec_maps(pid);
    let mut p = Pgdbg::spawn_to_file(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "plancache",
            "--capture",
            cap.to_str().unwrap(),
        ],
        &out_file,
    );
    p.wait_attached(pid);
    wait_until("the recorder", Duration::from_secs(30), || {
        anon_exec_maps(pid).len() > maps_before.len()
    });
    std::fs::write(&go, "").unwrap();
    let done = pgbench.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    // its backend ended with pgbench: pgdbg reports and ends (the script
    // stopped by the backend's end: status 1)
    let (status, _, err) = p.wait(Duration::from_secs(60));
    let out = std::fs::read_to_string(&out_file).unwrap_or_default();
    assert!(
        status == 1 && err.contains("the backend exited"),
        "{status}: {out}\n{err}"
    );
    assert!(
        out.contains("every decision it recorded is reported"),
        "{out}"
    );
    let mut ev = read_events(&cap, "plan_choice");
    ev.sort_by(|a, b| a["ts"].as_f64().partial_cmp(&b["ts"].as_f64()).unwrap());
    let end = read_events(&cap, "plancache_end");
    assert_eq!(end.len(), 1, "{out}");
    assert_eq!(
        (end[0]["lost"].as_u64(), end[0]["undecided"].as_u64()),
        (Some(0), Some(0)),
        "{out}"
    );
    assert_eq!(ev.len(), 3 * T, "{out}");
    let texts: Vec<String> = UNNAMED
        .iter()
        .map(|q| format!("{};", q.replace(":n", "$1")))
        .collect();
    let mut whole = [0; 3];
    for (i, e) in ev.iter().enumerate() {
        let k = i % 3;
        let want = &texts[k];
        match e["query"].as_str() {
            Some(q) => {
                assert_eq!(q, want, "decision {i}: {e}");
                whole[k] += 1;
            }
            None => {
                // longer than the copy, and freed before it was read
                assert_eq!(k, 1, "decision {i}: {e}");
                assert_eq!(e["query_unavailable"], "plansource_freed", "{e}");
                assert_eq!(e["query_start"].as_str(), Some(&want[..80]), "{e}");
            }
        }
        assert!(e["statement"].is_null(), "{e}");
        let (choice, reason) = if k == 2 {
            ("generic", "no_parameters")
        } else {
            ("custom", "fewer_than_5_custom_plans")
        };
        assert_eq!(
            (e["choice"].as_str(), e["reason"].as_str()),
            (Some(choice), Some(reason)),
            "{e}"
        );
    }
    eprintln!("whole texts: {whole:?} of {T} each");
    assert_eq!(
        (whole[0], whole[2]),
        (T, T),
        "short texts are whole in the record"
    );
    assert!(!out.contains("not available"), "{out}");
    for f in [&script, &go, &cap, &out_file] {
        let _ = std::fs::remove_file(f);
    }
    cl.assert_no_crash();
}

#[test]
fn plancache_unnamed_statements_15() {
    unnamed_statements(15);
}

#[test]
fn plancache_unnamed_statements_18() {
    unnamed_statements(18);
}
