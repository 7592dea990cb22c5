//! Both PIDs of a backend in a container (PostgreSQL 15 in its own PID
//! and mount namespace and root: testbed/src/container.rs): a capture's
//! events carry the host PID and, as `ns_pid`, the container's (the one
//! `pg_stat_activity` shows there), `pgdbg report` names both, and `plan`
//! on a parallel worker (15 and 18) names its leader by the container's PID
//! (`pg_stat_activity.leader_pid`) and by the host's (to attach to).

use common::*;
use container::Container;
use pgdbg_testbed as common;
use pgdbg_testbed::container;
use std::time::Duration;

#[test]
fn capture_and_report_name_both_pids() {
    let ct = Container::start(&pg_prefix(15), &[]);
    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    assert_ne!(ns, host);
    let cap = std::env::temp_dir().join(format!("pgdbg-ct-pids-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&cap);
    let cap_s = cap.display().to_string();
    let (code, out, err) = pgdbg(&[
        "attach",
        &host.to_string(),
        "-q",
        "--capture",
        &cap_s,
        "--ex",
        "bt",
        "--ex",
        "print MyProc->pid",
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(print_values(&out), vec![ns.to_string()], "{out}");
    let text = std::fs::read_to_string(&cap).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 3, "attach, bt, print, detach:\n{text}");
    for l in &lines {
        assert_eq!(l["pid"], host, "{l}");
        assert_eq!(l["ns_pid"], ns, "{l}");
    }
    // ns_pid right after pid, as the format says
    assert!(
        text.lines()
            .all(|l| l.contains(&format!("\"pid\":{host},\"ns_pid\":{ns},"))
                || l.contains(&format!("\"pid\":{host},\"ns_pid\":{ns}}}"))),
        "{text}"
    );

    let (code, out, err) = pgdbg(&["report", &cap_s]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "Backends in another PID namespace: {host} (PID {ns} in its namespace)"
        )),
        "{out}"
    );
    let (code, out, err) = pgdbg(&["report", "--json", &cap_s]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["header"]["namespace_pids"],
        serde_json::json!([{"pid": host, "ns_pid": ns}]),
        "{out}"
    );
    assert_eq!(tracer_pid(host), 0);
    let _ = std::fs::remove_file(&cap);
}

/// On a bare-metal server the lines are as before: no `ns_pid`, no
/// namespace line in the report.
#[test]
fn capture_without_namespace_has_no_ns_pid() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let cap = std::env::temp_dir().join(format!("pgdbg-pids-bare-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&cap);
    let cap_s = cap.display().to_string();
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--capture",
        &cap_s,
        "--ex",
        "bt",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&cap).unwrap();
    assert!(!text.contains("ns_pid"), "{text}");
    let (code, out, _) = pgdbg(&["report", &cap_s]);
    assert_eq!(code, 0);
    assert!(!out.contains("PID namespace"), "{out}");
    let _ = std::fs::remove_file(&cap);
    assert_eq!(a.query_one_i64("select 1"), 1);
}

#[test]
fn worker_names_leader_by_both_pids_15() {
    worker_names_leader_by_both_pids(15);
}

#[test]
fn worker_names_leader_by_both_pids_18() {
    worker_names_leader_by_both_pids(18);
}

fn worker_names_leader_by_both_pids(major: u32) {
    let ct = Container::start(
        &pg_prefix(major),
        &[
            "max_parallel_workers_per_gather = 1",
            "parallel_setup_cost = 0",
            "parallel_tuple_cost = 0",
            if major >= 16 {
                "debug_parallel_query = on"
            } else {
                "force_parallel_mode = on"
            },
            "jit = off",
        ],
    );
    let mut c = ct.connect();
    let mut obs = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let leader = ct.host_pid(ns);
    let h = std::thread::spawn(move || {
        c.batch_execute(
            "select count(*) from (select pg_sleep(0.002) from generate_series(1, 4000)) s",
        )
    });
    let mut worker_ns = 0;
    wait_until("a parallel worker", Duration::from_secs(30), || {
        worker_ns = obs
            .query_one(
                "select coalesce(max(pid), 0) from pg_stat_activity where leader_pid = $1 and pid <> $1",
                &[&ns],
            )
            .unwrap()
            .get(0);
        worker_ns != 0
    });
    let worker = ct.host_pid(worker_ns);
    let (code, out, err) = pgdbg(&["attach", &worker.to_string(), "-q", "--ex", "plan"]);
    assert!(h.join().unwrap().is_ok());
    assert_one_line_error(
        code,
        &err,
        &format!(
            "process {worker} (PID {worker_ns} in its namespace) is a parallel worker of leader PID {leader} (PID {ns} in its namespace, pg_stat_activity.leader_pid)"
        ),
    );
    assert!(
        err.contains(&format!("pgdbg attach {leader} --ex plan")),
        "{err}"
    );
    assert!(!out.contains("Gather"), "{out}");
}
