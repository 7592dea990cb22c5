//! `pgdbg bt|plan|wait PID... | --cluster DIR [--json]`: one answer from
//! each backend, through the same attach as `pgdbg attach PID --ex CMD`.
//! Two backends sleep in `pg_sleep` (checked in pg_stat_activity): `wait`
//! names Timeout: PgSleep, `bt` shows the pg_sleep frame, `plan` the
//! statement's Result node; several PIDs and `--cluster` answer each
//! backend, `--json` gives one object per backend; a PID that is not a
//! backend (exited, the postmaster, not PostgreSQL) is one line on stderr
//! and a non-zero exit while the good PIDs are answered.  After each
//! command the backends are not traced, not stopped, and their statements
//! end on a cancel and run the next one.

use common::*;
use pgdbg_testbed as common;
use serde_json::Value;
use std::time::Duration;

/// Not traced, not stopped (a stopped backend would be state T).
fn assert_free(pids: &[i32]) {
    for &p in pids {
        assert_eq!(tracer_pid(p), 0, "backend {p} is still traced");
        assert!(
            !proc_state(p).starts_with('T'),
            "backend {p} is stopped: {}",
            proc_state(p)
        );
    }
}

/// The JSON lines of `out`, every one an object.
fn objects(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .inspect(|v| assert!(v.is_object(), "{v}"))
        .collect()
}

fn of_pid(objs: &[Value], pid: i32) -> &Value {
    let mine: Vec<&Value> = objs.iter().filter(|o| o["pid"] == pid).collect();
    assert_eq!(mine.len(), 1, "one object for {pid}: {objs:?}");
    mine[0]
}

/// The `[PID] ` lines of `out` for `pid`, without the prefix.
fn lines_of(out: &str, pid: i32) -> Vec<String> {
    let pre = format!("[{pid}] ");
    out.lines()
        .filter_map(|l| l.strip_prefix(&pre).map(str::to_string))
        .collect()
}

/// A backtrace line of pg_sleep's frame ("#4  0x... in pg_sleep+106 (fcinfo=...").
fn is_pg_sleep_frame(l: &str) -> bool {
    l.starts_with('#') && (l.contains(" pg_sleep+") || l.contains(" pg_sleep ("))
}

/// A PID no process has: a child that has exited and been reaped.
fn dead_pid() -> i32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    pid
}

fn oneshot(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let mut b = cl.connect();
    let (pa, pb) = (a.pid(), b.pid());
    let (sa, sb) = (pa.to_string(), pb.to_string());
    let ha = a.spawn_text("select pg_sleep(600)");
    let hb = b.spawn_text("select pg_sleep(600)");
    cl.wait_active(&[pa, pb], "pg_sleep(600)");
    let mut obs = cl.connect();
    wait_until("PgSleep", Duration::from_secs(20), || {
        obs.query_one_i64(&format!(
            "select count(*) from pg_stat_activity where pid in ({pa},{pb}) and wait_event = 'PgSleep'"
        )) == 2
    });
    let both = [pa, pb];

    // one backend: the answer as `attach --ex` prints it, no prefix
    let (code, out, err) = pgdbg(&["wait", &sa]);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err}");
    assert!(out.starts_with("Timeout: PgSleep  [0x"), "{out}");
    assert_free(&both);

    let (code, out, err) = pgdbg(&["bt", &sa]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("#0 "), "{out}");
    assert!(
        out.lines().any(is_pg_sleep_frame),
        "no pg_sleep frame:\n{out}"
    );
    assert_free(&both);

    let (code, out, err) = pgdbg(&["plan", &sa]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Result"), "{out}");
    assert_free(&both);

    // several PIDs: each answered, lines prefixed [PID]
    let (code, out, err) = pgdbg(&["wait", &sa, &sb]);
    assert_eq!(code, 0, "{err}");
    for p in both {
        let l = lines_of(&out, p);
        assert_eq!(l.len(), 1, "{out}");
        assert!(l[0].starts_with("Timeout: PgSleep"), "{out}");
    }
    assert_free(&both);

    let (code, out, err) = pgdbg(&["bt", &sa, &sb]);
    assert_eq!(code, 0, "{err}");
    for p in both {
        let l = lines_of(&out, p);
        assert!(l[0].starts_with("#0 "), "{out}");
        assert!(l.iter().any(|l| is_pg_sleep_frame(l)), "{out}");
    }
    // each backend's backtrace is one block, not interleaved
    let firsts: Vec<i32> = out
        .lines()
        .map(|l| l[1..l.find(']').unwrap()].parse().unwrap())
        .collect();
    let switches = firsts.windows(2).filter(|w| w[0] != w[1]).count();
    assert_eq!(switches, 1, "{out}");
    assert_free(&both);

    // --json: one object per backend, PostgreSQL's names
    let (code, out, err) = pgdbg(&["wait", &sa, &sb, "--json"]);
    assert_eq!(code, 0, "{err}");
    let objs = objects(&out);
    assert_eq!(objs.len(), 2, "{out}");
    for p in both {
        let o = of_pid(&objs, p);
        assert_eq!(o["backend_type"], "client backend", "{o}");
        assert_eq!(o["wait_event_type"], "Timeout", "{o}");
        assert_eq!(o["wait_event"], "PgSleep", "{o}");
        assert!(o["wait_event_info"].as_u64().unwrap() > 0, "{o}");
    }
    assert_free(&both);

    let (code, out, err) = pgdbg(&["bt", &sa, "--json"]);
    assert_eq!(code, 0, "{err}");
    let objs = objects(&out);
    let frames = of_pid(&objs, pa)["frames"].as_array().unwrap().clone();
    assert!(
        frames.iter().any(|f| f["function"] == "pg_sleep"),
        "{frames:?}"
    );
    assert_eq!(frames[0]["level"], 0);

    let (code, out, err) = pgdbg(&["plan", &sa, &sb, "--json"]);
    assert_eq!(code, 0, "{err}");
    let objs = objects(&out);
    for p in both {
        let o = of_pid(&objs, p);
        assert_eq!(o["query"], "select pg_sleep(600)", "{o}");
        assert!(o["plan"].as_str().unwrap().contains("Result"), "{o}");
    }
    assert_free(&both);

    // --cluster: every client backend (the two sleeping and obs, idle)
    let dir = cl.dir.to_str().unwrap();
    let (code, out, err) = pgdbg(&["wait", "--cluster", dir, "--json"]);
    assert_eq!(code, 0, "{err}");
    let objs = objects(&out);
    for p in both {
        assert_eq!(of_pid(&objs, p)["wait_event"], "PgSleep", "{out}");
    }
    let idle = of_pid(&objs, obs.pid());
    assert_eq!(idle["wait_event_type"], "Client", "{idle}");
    assert_eq!(idle["wait_event"], "ClientRead", "{idle}");
    assert!(
        objs.iter().all(|o| o["backend_type"] == "client backend"),
        "{out}"
    );
    assert_free(&both);

    let (code, out, err) = pgdbg(&["bt", "--cluster", dir]);
    assert_eq!(code, 0, "{err}");
    for p in both {
        assert!(
            lines_of(&out, p).iter().any(|l| is_pg_sleep_frame(l)),
            "{out}"
        );
    }
    assert_free(&both);

    // plan --cluster passes over the idle backends (obs)
    let (code, out, err) = pgdbg(&["plan", "--cluster", dir]);
    assert_eq!(code, 0, "{err}");
    assert!(lines_of(&out, obs.pid()).is_empty(), "{out}");
    for p in both {
        assert!(
            lines_of(&out, p).iter().any(|l| l.starts_with("Result")),
            "{out}"
        );
    }
    assert!(
        err.lines().count() == 1
            && err.starts_with("pgdbg: ")
            && err.contains(" idle backend")
            && err.contains(" passed over (no query running, says the process title)"),
        "{err}"
    );
    assert_free(&both);

    // bad PIDs: one line each, the good ones answered, non-zero exit
    let dead = dead_pid();
    let me = std::process::id().to_string();
    let pm = cl.postmaster_pid.to_string();
    let (code, out, err) = pgdbg(&["wait", &sa, &dead.to_string(), &pm, &me, &sb]);
    assert_eq!(code, 1, "{out}\n{err}");
    for p in both {
        assert!(
            lines_of(&out, p)
                .first()
                .is_some_and(|l| l.starts_with("Timeout: PgSleep")),
            "{out}"
        );
    }
    let errs: Vec<&str> = err.lines().collect();
    assert_eq!(errs.len(), 4, "{err}");
    assert!(
        errs[0].starts_with(&format!("pgdbg: error: no process with PID {dead}: ")),
        "{err}"
    );
    assert!(
        errs[1].contains(&format!("process {pm} is the postmaster, not a backend")),
        "{err}"
    );
    assert!(
        errs[2].contains(&format!("process {me} ("))
            && errs[2].contains("is not a PostgreSQL process"),
        "{err}"
    );
    assert_eq!(
        errs[3], "pgdbg: 3 of 5 PIDs failed (said above); the others were answered",
        "{err}"
    );
    assert_free(&both);

    // --json keeps standard output JSON; the failure is on stderr
    let (code, out, err) = pgdbg(&["bt", &dead.to_string(), &sb, "--json"]);
    assert_eq!(code, 1, "{err}");
    let objs = objects(&out);
    assert_eq!(objs.len(), 1, "{out}");
    assert_eq!(objs[0]["pid"], pb);
    assert_eq!(err.lines().count(), 2, "{err}");

    // a single bad PID: one line, exit 1
    let (code, out, err) = pgdbg(&["bt", &dead.to_string()]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("no process with PID {dead}")),
        "{err}"
    );
    // no target at all
    let (code, _, err) = pgdbg(&["wait"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "pgdbg: error: pgdbg wait needs the PID of a backend or --cluster DIR: pgdbg wait PID (find it with: pgdbg ps)"
    );

    // the backends run: their statements end on a cancel, the next one runs
    assert_free(&both);
    cl.cancel(&both);
    for (c, h) in [(&mut a, ha), (&mut b, hb)] {
        let r = c.rejoin(h);
        assert!(
            r.as_ref()
                .is_err_and(|e| e.contains("canceling statement due to user request")),
            "{r:?}"
        );
        assert_eq!(c.simple_text("select 41 + 1"), "42");
    }
    cl.assert_no_crash();
}

#[test]
fn oneshot_15() {
    oneshot(15);
}

#[test]
fn oneshot_18() {
    oneshot(18);
}
