//! Seed 000 on real debug builds of PostgreSQL 15 and 18: break in
//! choose_custom_plan during the 7th execution of a prepared statement,
//! read the plan-cache costs, walk the stack, detach, and check the
//! backend and the cluster are unharmed.

use common::*;
use pgdbg_testbed as common;
use std::time::Duration;

fn choose_custom_plan_costs(major: u32) {
    let cl = Cluster::start(major);
    cl.seed(&["mediumtab"]);
    let expected_generic = planner_generic_cost(&cl);
    let expected_result = s1_result(&cl, 10, 30);
    let mut a = session_after_six(&cl);
    let pid = a.pid();
    let script = write_script(
        &format!("costs{major}"),
        &[
            "# seed 000: why does s1 stay custom?",
            "break choose_custom_plan",
            "continue",
            "print plansource->generic_cost",
            "print plansource->num_custom_plans",
            "print plansource->total_custom_cost / plansource->num_custom_plans",
            "bt",
            "detach",
        ],
    );
    let capture =
        std::env::temp_dir().join(format!("pgdbg-costs-{major}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&capture);
    let p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "--script",
        script.to_str().unwrap(),
        "--capture",
        capture.to_str().unwrap(),
    ]);
    wait_until("pgdbg to attach", Duration::from_secs(30), || {
        tracer_pid(pid) != 0
    });
    let h = a.spawn_text("execute s1(10,30)");
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "pgdbg failed:\n{out}\n{err}");
    let vals = print_values(&out);
    assert_eq!(vals.len(), 3, "{out}");
    let generic: f64 = vals[0]
        .parse()
        .unwrap_or_else(|_| panic!("generic_cost not a number: {}", vals[0]));
    assert!(
        (generic - expected_generic).abs() < 0.006,
        "generic_cost {generic} but EXPLAIN says {expected_generic}"
    );
    if major == 15 {
        assert_eq!(vals[0], "226.435", "seed 000's number on 15");
    }
    assert_eq!(vals[1], "6", "num_custom_plans after six executions");
    let avg: f64 = vals[2].parse().unwrap();
    assert!(
        avg > 8.0 && avg < generic,
        "average custom cost {avg} should be below generic {generic}"
    );

    // The stack: choose_custom_plan <- GetCachedPlan <- ... <- exec_simple_query <- PostgresMain, with lines.
    let bt: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    assert!(
        bt[0].starts_with("#0  choose_custom_plan (plansource=0x"),
        "{}",
        bt[0]
    );
    assert!(bt[0].contains(" at plancache.c:"), "{}", bt[0]);
    let pos = |name: &str| {
        bt.iter()
            .position(|l| l.contains(&format!(" {name} (")) || l.contains(&format!(" {name}+")))
            .unwrap_or_else(|| panic!("no {name} in backtrace:\n{}", bt.join("\n")))
    };
    let (g, e, m) = (
        pos("GetCachedPlan"),
        pos("exec_simple_query"),
        pos("PostgresMain"),
    );
    assert!(g == 1 && g < e && e < m, "frame order:\n{}", bt.join("\n"));
    assert!(bt[g].contains("at plancache.c:"), "{}", bt[g]);
    assert!(
        bt[e].contains("at postgres.c:") && bt[e].contains("\"execute s1(10,30)\""),
        "{}",
        bt[e]
    );

    // The statement completes with the right result, the backend is free.
    let r = a.rejoin(h).expect("execute s1 failed after detach");
    assert_eq!(r, expected_result);
    assert_eq!(tracer_pid(pid), 0);

    // The capture recorded the stop and the prints as JSON lines.
    let cap = std::fs::read_to_string(&capture).unwrap();
    let events: Vec<serde_json::Value> = cap
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stop = events
        .iter()
        .find(|e| e["event"] == "stop")
        .expect("stop event");
    assert_eq!(stop["function"], "choose_custom_plan");
    assert_eq!(stop["pid"], pid);
    let prints: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "print").collect();
    assert_eq!(prints[1]["value"], 6);
    assert!(events.iter().any(|e| e["event"] == "detach"));

    // After detach the backend runs 1000 more statements; nothing crashed.
    for i in 0..1000 {
        a.exec(&format!("select v from mediumtab where n = {}", i + 1));
    }
    assert_eq!(a.pid(), pid);
    cl.assert_no_crash();
}

#[test]
fn choose_custom_plan_costs_15() {
    choose_custom_plan_costs(15);
}

#[test]
fn choose_custom_plan_costs_18() {
    choose_custom_plan_costs(18);
}

/// gdb as the oracle: the same expressions at the same breakpoint print the
/// same values (stable fields of the same prepared statement, read on two
/// consecutive executions: pgdbg first, then gdb).
fn same_values_as_gdb(major: u32) {
    let exprs = [
        "plansource->generic_cost",
        "plansource->magic",
        "plansource->query_string",
        "plansource->commandTag",
        "plansource->num_params",
        "plansource->is_valid",
        "plansource->cursor_options",
        "plansource->node",
        "plansource",
        "MyProc->pid",
        "*my_wait_event_info",
        "MyProcPid",
        "plansource->gplan->is_valid",
    ];
    let cl = Cluster::start(major);
    cl.seed(&["mediumtab"]);
    let mut a = session_after_six(&cl);
    let pid = a.pid();
    let mut lines = vec![
        "break choose_custom_plan".to_string(),
        "continue".to_string(),
    ];
    lines.extend(exprs.iter().map(|e| format!("print {e}")));
    lines.push("detach".into());
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    let script = write_script(&format!("oracle{major}"), &refs);
    let p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "--script",
        script.to_str().unwrap(),
    ]);
    wait_until("pgdbg to attach", Duration::from_secs(30), || {
        tracer_pid(pid) != 0
    });
    let h = a.spawn_text("execute s1(10,30)");
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    a.rejoin(h).unwrap();
    let ours = print_values(&out);

    let mut gdb = std::process::Command::new("gdb");
    gdb.args(["-nx", "-batch", "-p", &pid.to_string()])
        .args(["-ex", "handle SIGUSR1 nostop noprint pass"])
        .args(["-ex", "set print elements 200"])
        .args(["-ex", "break choose_custom_plan", "-ex", "continue"]);
    for e in &exprs {
        gdb.args(["-ex", &format!("print {e}")]);
    }
    gdb.args(["-ex", "detach"]);
    let gchild = gdb
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gdb is needed as the oracle (scripts/test installs it)");
    wait_until("gdb to attach", Duration::from_secs(60), || {
        tracer_pid(pid) != 0
    });
    // gdb sets its breakpoint after attaching: give it time to reach 'continue'
    std::thread::sleep(Duration::from_secs(3));
    let h = a.spawn_text("execute s1(10,30)");
    let gout = gchild.wait_with_output().unwrap();
    a.rejoin(h).unwrap();
    let theirs = print_values(&String::from_utf8_lossy(&gout.stdout));
    assert_eq!(
        theirs.len(),
        exprs.len(),
        "gdb output:\n{}",
        String::from_utf8_lossy(&gout.stdout)
    );
    for (i, e) in exprs.iter().enumerate() {
        assert_eq!(ours[i], theirs[i], "print {e}: pgdbg vs gdb");
    }
    cl.assert_no_crash();
}

#[test]
fn same_values_as_gdb_15() {
    same_values_as_gdb(15);
}

#[test]
fn same_values_as_gdb_18() {
    same_values_as_gdb(18);
}
