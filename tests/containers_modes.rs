//! Against PostgreSQL 15 in a container (its own PID and mount namespace
//! and root: testbed/src/container.rs), the modes tests/containers.rs does
//! not run: `break plpgsql:exec_stmt_execsql` hit, `plancache`, `plan
//! --next`, `waits trace` and `profile`, run by pgdbg from the host (given
//! the backend's host PID) and, but `plancache` (tests/containers_sidecar.rs
//! has it), from a sidecar (pgdbg in a container that shares only the
//! server's PID namespace, given the PID `pg_backend_pid()` says).  Each
//! runs the same way on the same build on bare metal (a `Cluster`), and
//! the container's results are the bare-metal ones: the same frames,
//! choices and costs, plan, wait events and functions.  No decoy (the
//! host's file at the container's `plpgsql.so` path, the sidecar's files at
//! the paths of the server's libc, loader, binary and `plpgsql.so`) is ever
//! opened.  Runs alone: `cluster_by_the_containers_own_path` names a
//! cluster by `/data`, the path every container of the testbed serves, so
//! another test file's container beside it would make that path name two.

// scripts/test: alone (`--cluster /data` names every container of the testbed: one started by
// another test binary beside this one would make it ambiguous)

use common::*;
use container::{Container, Sidecar, Watch};
use pgdbg_testbed as common;
use pgdbg_testbed::container;
use std::path::PathBuf;
use std::time::Duration;

const SETTINGS: &[&str] = &["jit=off", "max_parallel_workers_per_gather=0"];

const SETUP: &str = "create table ct_t as select g as id from generate_series(1, 20000) g;
     analyze ct_t;
     create function ct_count(lim int) returns bigint language plpgsql as $$
     declare n bigint; begin select count(*) into n from ct_t where id < lim; return n; end $$;";

/// A server to run a mode against, and where pgdbg runs: the container's
/// server from the host, the same from a sidecar (with watches on every
/// decoy), or bare metal's.
enum Server {
    Container(Container, Watch),
    Sidecar(Container, Sidecar, Vec<(PathBuf, Watch)>),
    Bare(Cluster),
}

impl Server {
    fn container() -> Server {
        let ct = Container::start(&pg_prefix(15), SETTINGS);
        let w = Watch::new(&ct.decoy);
        let s = Server::Container(ct, w);
        s.connect().exec(SETUP);
        s
    }

    fn sidecar() -> Server {
        let ct = Container::start(&pg_prefix(15), SETTINGS);
        let sc = Sidecar::start(&ct, &pgdbg_bin());
        let watches = std::iter::once(ct.decoy.clone())
            .chain(sc.decoys.iter().cloned())
            .map(|p| {
                let w = Watch::new(&p);
                (p, w)
            })
            .collect();
        let s = Server::Sidecar(ct, sc, watches);
        s.connect().exec(SETUP);
        s
    }

    fn bare() -> Server {
        let s = Server::Bare(Cluster::start_with(15, SETTINGS));
        s.connect().exec(SETUP);
        s
    }

    fn connect(&self) -> Client {
        match self {
            Server::Container(ct, _) | Server::Sidecar(ct, ..) => Client {
                c: Some(ct.connect()),
            },
            Server::Bare(cl) => cl.connect(),
        }
    }

    /// The host PID of a backend whose `pg_backend_pid()` is `ns`.
    fn host_pid(&self, ns: i32) -> i32 {
        match self {
            Server::Container(ct, _) | Server::Sidecar(ct, ..) => ct.host_pid(ns),
            Server::Bare(_) => ns,
        }
    }

    /// The PID pgdbg is given for the backend whose host PID is `host`
    /// and whose `pg_backend_pid()` is `ns`: the one it sees.
    fn seen(&self, host: i32, ns: i32) -> i32 {
        match self {
            Server::Sidecar(..) => ns,
            _ => host,
        }
    }

    /// `pgdbg ARGS` run where this server's pgdbg runs, once it attached
    /// to the backend whose host PID is `host`.
    fn spawn_attached(&self, args: &[&str], host: i32) -> Pgdbg {
        match self {
            Server::Sidecar(_, sc, _) => sc.spawn_attached(&pgdbg_bin(), args, host),
            _ => Pgdbg::spawn_attached(args, host),
        }
    }

    /// `pgdbg ARGS` run to its end where this server's pgdbg runs: (exit
    /// code, standard output, standard error).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        match self {
            Server::Sidecar(_, sc, _) => sc.pgdbg(&pgdbg_bin(), args),
            _ => pgdbg(args),
        }
    }

    /// A client and its backend's host PID.
    fn backend(&self) -> (Client, i32) {
        let mut c = self.connect();
        let ns = c.pid();
        let host = self.host_pid(ns);
        (c, host)
    }

    /// For the container: its backend's PIDs differ, and the decoy was
    /// not opened.
    fn check(&self, host: i32, ns: i32) {
        match self {
            Server::Container(ct, w) => {
                assert_ne!(host, ns);
                assert!(!w.touched(), "the decoy {} was opened", ct.decoy.display());
            }
            Server::Sidecar(_, _, watches) => {
                assert_ne!(host, ns);
                for (p, w) in watches {
                    assert!(!w.touched(), "the decoy {} was opened", p.display());
                }
            }
            Server::Bare(_) => {}
        }
    }
}

/// The function of each frame of a `bt` ("#N  FUNC (...) at FILE:LINE" or
/// "#N  0x... in FUNC (...)").
fn frames(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('#') && l[1..].chars().next().is_some_and(|c| c.is_ascii_digit()))
        .filter_map(|l| {
            let mut w = l.split_whitespace().skip(1);
            let mut f = w.next()?;
            if f.starts_with("0x") {
                w.next(); // "in"
                f = w.next()?;
            }
            Some(f.split('+').next().unwrap().to_string())
        })
        .collect()
}

/// `break plpgsql:exec_stmt_execsql` (a one-shot script: break, continue,
/// bt, detach) hit by a plpgsql function's SELECT INTO: the frames.
fn break_in_plpgsql(srv: &Server) -> Vec<String> {
    let (mut c, host) = srv.backend();
    let ns = c.pid();
    let mut args = vec![
        "attach".to_string(),
        srv.seen(host, ns).to_string(),
        "-q".into(),
    ];
    args.extend(ex(&[
        "break plpgsql:exec_stmt_execsql",
        "continue",
        "bt",
        "detach",
    ]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = srv.spawn_attached(&argv, host);
    let h = c.spawn_text("select ct_count(100)");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(c.rejoin(h).unwrap(), "99");
    assert!(
        out.contains("Breakpoint 1, exec_stmt_execsql ("),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert_eq!(tracer_pid(host), 0);
    srv.check(host, ns);
    frames(&out)
}

#[test]
fn break_plpgsql_hit_same_as_bare_metal() {
    let ct = break_in_plpgsql(&Server::container());
    let sc = break_in_plpgsql(&Server::sidecar());
    let bare = break_in_plpgsql(&Server::bare());
    for f in [
        "exec_stmt_execsql",
        "exec_stmts",
        "plpgsql_exec_function",
        "plpgsql_call_handler",
        "PostgresMain",
    ] {
        assert!(ct.iter().any(|x| x == f), "{f} missing: {ct:?}");
    }
    assert_eq!(ct, bare, "the container's frames and bare metal's");
    assert_eq!(sc, bare, "the frames from the sidecar and bare metal's");
}

/// `plancache --count 7` (the default mode) while a prepared statement
/// runs 7 times: each decision's choice, reason and costs.
fn plancache_choices(srv: &Server) -> Vec<(String, String, String, String)> {
    let (mut c, host) = srv.backend();
    let ns = c.pid();
    let (out, ev) = watch_cmd(host, "plancache --count 7", 7, || {
        c.exec("prepare s(int) as select count(*) from ct_t where id < $1");
        for _ in 0..7 {
            c.exec("execute s(100)");
        }
    });
    assert!(!out.is_empty());
    srv.check(host, ns);
    ev.iter()
        .map(|e| {
            assert_eq!(e["statement"], "s", "{e}");
            (
                e["choice"].to_string(),
                e["reason"].to_string(),
                e["generic_cost"].to_string(),
                e["custom_plan_cost"].to_string(),
            )
        })
        .collect()
}

#[test]
fn plancache_same_as_bare_metal() {
    let ct = plancache_choices(&Server::container());
    let bare = plancache_choices(&Server::bare());
    assert_eq!(ct.len(), 7);
    assert!(
        ct[..5]
            .iter()
            .all(|d| d.1 == "\"fewer_than_5_custom_plans\""),
        "{ct:?}"
    );
    assert_eq!(ct, bare, "the container's decisions and bare metal's");
}

/// `plan --next --costs off`, then a statement: the plan printed.
fn plan_next(srv: &Server) -> String {
    let (mut c, host) = srv.backend();
    let ns = c.pid();
    let p = srv.spawn_attached(
        &[
            "attach",
            &srv.seen(host, ns).to_string(),
            "-q",
            "--ex",
            "plan --next --costs off",
        ],
        host,
    );
    let h = c.spawn_text("select count(*) from ct_t where id < 100");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(c.rejoin(h).unwrap(), "99");
    assert_eq!(tracer_pid(host), 0);
    srv.check(host, ns);
    out
}

#[test]
fn plan_next_same_as_bare_metal() {
    let ct = plan_next(&Server::container());
    let sc = plan_next(&Server::sidecar());
    let bare = plan_next(&Server::bare());
    assert!(ct.contains("Seq Scan on ct_t"), "{ct}");
    assert!(ct.contains("Filter: (id < 100)"), "{ct}");
    assert_eq!(ct, bare, "the container's plan and bare metal's");
    assert_eq!(sc, bare, "the plan from the sidecar and bare metal's");
}

/// `waits trace --for 3s` while the client sleeps in three statements and
/// waits for the next between them: the wait events listed.
fn waits_trace(srv: &Server) -> String {
    let (mut c, host) = srv.backend();
    let ns = c.pid();
    let p = srv.spawn_attached(
        &[
            "attach",
            &srv.seen(host, ns).to_string(),
            "-q",
            "--ex",
            "waits trace --for 3s",
        ],
        host,
    );
    for _ in 0..3 {
        c.exec("select pg_sleep(0.2)");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(tracer_pid(host), 0);
    srv.check(host, ns);
    out
}

#[test]
fn waits_trace_same_as_bare_metal() {
    let ct = waits_trace(&Server::container());
    let sc = waits_trace(&Server::sidecar());
    let bare = waits_trace(&Server::bare());
    // the summary's count of an event ("  Timeout: PgSleep   3  ...")
    let count = |out: &str, ev: &str| -> Option<u32> {
        out.lines()
            .find(|l| l.starts_with("  ") && l.trim_start().starts_with(ev))
            .and_then(|l| {
                l.trim_start()[ev.len()..]
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
    };
    for out in [&ct, &sc, &bare] {
        assert!(out.contains("Wait events summary:"), "{out}");
        assert_eq!(count(out, "Timeout: PgSleep"), Some(3), "{out}");
        assert!(
            count(out, "Client: ClientRead").is_some_and(|n| n >= 3),
            "{out}"
        );
        // the statements' texts, copied by the executor-start recorder
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with("3 x") && l.ends_with("select pg_sleep(0.2)")),
            "{out}"
        );
    }
    // how it traced: as on bare metal, from the host and from the sidecar
    // (the tracing line but for the backend's PID: the watch, and the
    // statements marked by the in-process recorder at the executor's
    // start, whatever marks their end)
    let tracing = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("waits: tracing backend "))
            .map(str::to_string)
    };
    let how = |out: &str| tracing(out).and_then(|l| l.split_once(" (").map(|x| x.1.to_string()));
    for out in [&ct, &sc] {
        assert!(
            tracing(out)
                .is_some_and(|l| l.contains("in-process recorder at standard_ExecutorStart")),
            "the container's backend takes the in-process recorder too:\n{out}"
        );
        assert_eq!(how(out), how(&bare), "{out}\nbare metal:\n{bare}");
    }
}

/// `profile --for 2s --rows 500` of a PL/pgSQL loop on a CPU: the table's rows
/// (function, self%, total%) and its last line.
fn profile(srv: &Server) -> (Vec<(String, f64, f64)>, String) {
    let (mut c, host) = srv.backend();
    let ns = c.pid();
    let h = c.spawn_text(common::running::LOOP);
    std::thread::sleep(Duration::from_millis(300));
    let seen = srv.seen(host, ns);
    let (code, out, err) = srv.run(&[
        "profile",
        &seen.to_string(),
        "-q",
        "--for",
        "2s",
        "--rows",
        "500",
    ]);
    let mut k = srv.connect();
    k.exec(&format!("select pg_cancel_backend({ns})"));
    assert!(c.rejoin(h).is_err());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    srv.check(host, ns);
    let rows = out
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let pct = |s: &str| s.strip_suffix('%')?.parse::<f64>().ok();
            (w.len() == 3).then_some(())?;
            Some((w[2].to_string(), pct(w[0])?, pct(w[1])?))
        })
        .collect();
    let last = out
        .lines()
        .find(|l| l.starts_with("profile: "))
        .unwrap_or_else(|| panic!("no summary line:\n{out}"))
        .to_string();
    assert!(
        last.contains(&format!(" samples of backend {seen} ")),
        "{last}"
    );
    (rows, out)
}

#[test]
fn profile_same_as_bare_metal() {
    let (ct, ct_out) = profile(&Server::container());
    let (sc, sc_out) = profile(&Server::sidecar());
    let (bare, bare_out) = profile(&Server::bare());
    for (rows, out) in [(&ct, &ct_out), (&sc, &sc_out), (&bare, &bare_out)] {
        // every sample named: functions of the binary, of plpgsql.so
        // (unwound through it to the binary's main), none unnamed
        for f in ["ExecInterpExpr", "exec_eval_expr", "exec_stmts"] {
            assert!(rows.iter().any(|r| r.0 == f), "{f} missing:\n{out}");
        }
        for (f, _, total) in rows.iter() {
            assert!(
                f == "[kernel]"
                    || f.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_'),
                "a sample not named: {f}\n{out}"
            );
            if f == "exec_stmts" {
                assert_eq!(*total, 100.0, "{f}:\n{out}");
            }
        }
    }
    // the callers every sample passed through: the same in both
    let all = |rows: &[(String, f64, f64)]| -> std::collections::BTreeSet<String> {
        rows.iter()
            .filter(|r| r.2 == 100.0)
            .map(|r| r.0.clone())
            .collect()
    };
    assert_eq!(
        all(&ct),
        all(&bare),
        "container:\n{ct_out}\nbare:\n{bare_out}"
    );
    assert_eq!(
        all(&sc),
        all(&bare),
        "from the sidecar:\n{sc_out}\nbare:\n{bare_out}"
    );
}

/// `--cluster` with the data directory as the container names it (`/data`,
/// which the host lacks): the postmaster working there in its own root.
#[test]
fn cluster_by_the_containers_own_path() {
    assert!(
        !std::path::Path::new("/data").exists(),
        "the host has a /data"
    );
    let srv = Server::container();
    let Server::Container(ct, _) = &srv else {
        unreachable!()
    };
    let (mut c, host) = srv.backend();
    let ns = c.pid();
    let (code, out, err) = pgdbg(&["ps", "--cluster", "/data"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "postmaster {} (PID 1 in its namespace)",
            ct.postmaster
        )),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with(&format!("{host} "))
                && l.ends_with(&format!(" (PID {ns} in its namespace)"))),
        "{out}"
    );
    // the same as JSON: the host PIDs, and the backend's PID in the
    // container as ns_pid (pg_stat_activity's)
    let (code, out, err) = pgdbg(&["ps", "--cluster", "/data", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let mine: Vec<&serde_json::Value> = rows.iter().filter(|v| v["pid"] == host).collect();
    assert_eq!(mine.len(), 1, "{out}");
    assert_eq!(mine[0]["ns_pid"], ns, "{out}");
    assert_eq!(mine[0]["postmaster"], ct.postmaster, "{out}");
    let (code, out, err) = pgdbg(&[
        "attach",
        "--cluster",
        "/data",
        "-q",
        "--ex",
        "print MyProc->pid",
        "--for",
        "3s",
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains(&ns.to_string()), "{out}");
    assert_eq!(c.query_one_i64("select 1"), 1);
    srv.check(host, ns);
    // a path no root has: one line, as before
    let (code, _, err) = pgdbg(&["ps", "--cluster", "/nonexistent-pgdbg-data"]);
    assert_one_line_error(code, &err, "cannot read directory /nonexistent-pgdbg-data");
    // a second container whose data directory is /data too: which one is
    // asked, never guessed, in one line naming both as the host sees them
    let other = Container::start(&pg_prefix(15), SETTINGS);
    let (code, _, err) = pgdbg(&["ps", "--cluster", "/data"]);
    assert_one_line_error(
        code,
        &err,
        "/data is the data directory of 2 postmasters, each in its own root",
    );
    for pm in [ct.postmaster, other.postmaster] {
        assert!(err.contains(&format!("/proc/{pm}/root/data")), "{err}");
    }
    // named as the host sees it: that one
    let (code, out, err) = pgdbg(&[
        "ps",
        "--cluster",
        &format!("/proc/{}/root/data", other.postmaster),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("postmaster {} ", other.postmaster)),
        "{out}"
    );
}
