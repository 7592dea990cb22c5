//! `pgdbg attach --cluster DIR` with a script of one `count` line: no
//! worker per backend, uprobes opened on the postmaster and inherited by
//! every process it forks (perf/inherited.rs).  Each short session is
//! counted whole from its fork, however fast it comes and goes: the number
//! of backends counted is the number of connections in the server log,
//! each backend's count is what its statements call, ended backends are
//! named as ended, and no uprobe definition is left behind.

use common::*;
use pgdbg_testbed as common;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-inherit-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// The per-backend counts of the first function in pgdbg's output
/// (`[PID] FUNC N` lines) and which backends were said to have ended.
fn per_backend(out: &str, function: &str) -> (BTreeMap<i32, u64>, Vec<i32>) {
    let mut counts = BTreeMap::new();
    let mut ended = Vec::new();
    for l in out.lines() {
        let Some(rest) = l.strip_prefix('[') else {
            continue;
        };
        let Some((pid, text)) = rest.split_once("] ") else {
            continue;
        };
        let pid: i32 = pid.parse().unwrap();
        let w: Vec<&str> = text.split_whitespace().collect();
        if w.len() == 2 && w[0] == function {
            counts.insert(pid, w[1].parse().unwrap());
        }
        if text.starts_with("count: ") && text.contains("ended during the count") {
            ended.push(pid);
        }
    }
    (counts, ended)
}

fn connections_in(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("connection authorized"))
        .count()
}

/// Start pgdbg's cluster count of `function`; its stderr up to the line
/// that says it counts.
fn start(cl: &Cluster, name: &str, function: &str, out: &Path, cap: &Path) -> (Pgdbg, String) {
    let line = format!("count {function}");
    let mut p = spawn_cluster(
        cl,
        name,
        &[&line],
        &["--capture", cap.to_str().unwrap()],
        out,
    );
    let mut err = stderr_reader(&mut p);
    let banner = read_until(
        &mut err,
        "from its fork on (uprobes inherited",
        Duration::from_secs(60),
    );
    assert!(
        !banner.contains("attached instead"),
        "inherited uprobes refused here: {banner}"
    );
    // the rest of stderr is read once pgdbg ends
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        rest
    });
    (p, banner)
}

/// Ctrl-C, then the exit status and the output.
fn stop(mut p: Pgdbg, out: &Path) -> (i32, String) {
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let st = p.child.wait().unwrap();
    (
        st.code().unwrap_or(-1),
        std::fs::read_to_string(out).unwrap(),
    )
}

/// N short `psql` sessions (4 at a time, each of three statements, the
/// first telling its backend's PID): every one counted, 3 calls of
/// exec_simple_query each, all named as ended, as many backends as the
/// log's connections, nothing traced, no definition left.
fn short_sessions(major: u32) {
    const N: usize = 40;
    let cl = Cluster::start_with(major, &["log_connections=on"]);
    let out = temp(&format!("short-{major}.out"));
    let cap = temp(&format!("short-{major}.jsonl"));
    let (p, _) = start(
        &cl,
        &format!("inherit-{major}"),
        "exec_simple_query",
        &out,
        &cap,
    );
    let sup = p.pid();
    // no worker: the supervisor's only child is the keeper
    let kids = common::spares::children(sup);
    assert!(kids.len() <= 1, "workers started: {kids:?}");
    let log_before = connections_in(&cl.log());
    let pids = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..N / 4 {
                    let o = psql_c(&cl, &["select pg_backend_pid()", "select 2", "select 3"])
                        .output()
                        .expect("run psql");
                    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                    let text = String::from_utf8_lossy(&o.stdout).to_string();
                    let pid: i32 = text.lines().next().unwrap().trim().parse().unwrap();
                    pids.lock().unwrap().push(pid);
                }
            });
        }
    });
    // every backend has ended (its exit record read within a few ms)
    std::thread::sleep(Duration::from_millis(300));
    let connections = connections_in(&cl.log()) - log_before;
    let (code, text) = stop(p, &out);
    assert_eq!(code, 0, "{text}");
    let (counts, ended) = per_backend(&text, "exec_simple_query");
    let mut pids = pids.into_inner().unwrap();
    pids.sort();
    assert_eq!(connections, N, "connections in the log");
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        pids,
        "backends counted: {text}"
    );
    for (pid, n) in &counts {
        assert_eq!(*n, 3, "backend {pid}: {text}");
    }
    let mut ended = ended;
    ended.sort();
    assert_eq!(ended, pids, "backends named as ended: {text}");
    let total = text
        .lines()
        .find(|l| l.starts_with("exec_simple_query "))
        .unwrap_or_else(|| panic!("no total: {text}"));
    assert_eq!(
        total.split_whitespace().nth(1),
        Some(&*(3 * N).to_string()),
        "{text}"
    );
    // a count event per backend in the capture
    let ev = read_events(&cap, "count");
    let mut cap_pids: Vec<i32> = ev
        .iter()
        .inspect(|e| assert_eq!(e["calls"], 3, "{e}"))
        .map(|e| e["pid"].as_i64().unwrap() as i32)
        .collect();
    cap_pids.sort();
    assert_eq!(cap_pids, pids);
    // the definitions are removed once the events are closed
    wait_until(
        "pgdbg's uprobe definitions removed",
        Duration::from_secs(30),
        || tracefs_definitions_of(sup as u32).is_empty(),
    );
    // and the postmaster's code is the file's again (its int3s went with
    // the events)
    assert!(
        code_matches_file(
            cl.postmaster_pid,
            &cl.postgres_binary(),
            "exec_simple_query",
            16
        ),
        "the postmaster's exec_simple_query differs from the file"
    );
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&cap);
}

/// `pgbench -C`: a new connection per transaction of two statements, one
/// process of pgbench's own at its start; every transaction's backend
/// counted twice, and a backend there before the count (a session that
/// stays) counted from the start.
fn pgbench_connect_per_transaction(major: u32) {
    const T: usize = 60;
    let cl = Cluster::start_with(major, &["log_connections=on"]);
    let out = temp(&format!("pgbench-{major}.out"));
    let cap = temp(&format!("pgbench-{major}.jsonl"));
    let sql = temp(&format!("pgbench-{major}.sql"));
    std::fs::write(&sql, "select 1;\nselect 2;\n").unwrap();
    let mut stays = cl.connect();
    let stays_pid = stays.pid();
    let (p, _) = start(
        &cl,
        &format!("pgbench-{major}"),
        "exec_simple_query",
        &out,
        &cap,
    );
    let log_before = connections_in(&cl.log());
    let o = Command::new(cl.bin.join("pgbench"))
        .args(["-h", cl.dir.to_str().unwrap(), "-U", "postgres", "-n", "-C"])
        .args([
            "-t",
            &T.to_string(),
            "-f",
            sql.to_str().unwrap(),
            "postgres",
        ])
        .output()
        .expect("run pgbench");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stays.simple_text("select 1; select 2");
    stays.simple_text("select 3");
    std::thread::sleep(Duration::from_millis(300));
    let connections = connections_in(&cl.log()) - log_before;
    let (code, text) = stop(p, &out);
    assert_eq!(code, 0, "{text}");
    let (counts, ended) = per_backend(&text, "exec_simple_query");
    // pgbench's transactions: two statements each, their backends ended
    let short: Vec<_> = counts.iter().filter(|(p, _)| **p != stays_pid).collect();
    assert_eq!(short.len(), T, "{text}");
    for (pid, n) in &short {
        assert_eq!(**n, 2, "backend {pid}: {text}");
        assert!(
            ended.contains(pid),
            "backend {pid} not named as ended: {text}"
        );
    }
    // pgbench's own first connection runs no simple query here
    assert!(
        connections == T || connections == T + 1,
        "{connections} connections in the log for {T} transactions"
    );
    // the session that stays: there at the start, running, 2 Query messages
    assert_eq!(counts.get(&stays_pid), Some(&2), "{text}");
    assert!(!ended.contains(&stays_pid), "{text}");
    assert!(
        text.contains(&format!(
            "[{stays_pid}] count: backend {stays_pid} (there at the start, running)"
        )),
        "{text}"
    );
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&cap);
    let _ = std::fs::remove_file(&sql);
}

#[test]
fn short_sessions_15() {
    short_sessions(15);
}

#[test]
fn short_sessions_18() {
    short_sessions(18);
}

#[test]
fn pgbench_connect_15() {
    pgbench_connect_per_transaction(15);
}

#[test]
fn pgbench_connect_18() {
    pgbench_connect_per_transaction(18);
}

/// An installation under a path with a blank, which `uprobe_events` cannot
/// take as a path: pgdbg names the file by its open descriptor's `/proc`
/// link instead, so the cluster is counted without attaching any backend:
/// a new session's inserts counted exactly, the backend never traced.
#[test]
fn count_installation_with_a_blank_15() {
    let install = install_with_blank(15);
    count_one_session(&Cluster::start_prefix(&install.prefix()), false);
}

/// Where the kernel cannot be given a uprobe definition (no tracefs: pgdbg
/// where `/sys/kernel` is hidden, as in some containers), one line says
/// why, without advice that does not apply, and each backend is attached
/// by a worker instead (its uprobes opened as perf events, which need no
/// tracefs): a new session's inserts counted exactly.
#[test]
fn count_where_uprobe_events_cannot_be_had_15() {
    count_one_session(&Cluster::start(15), true);
}

/// `count heap_insert` across the cluster while one new session inserts 7
/// rows; without tracefs when `no_tracefs`.
fn count_one_session(cl: &Cluster, no_tracefs: bool) {
    let mut setup = cl.connect();
    setup.exec("create table blank_t (i int)");
    let out = temp("blank.out");
    let cap = temp("blank.jsonl");
    let p = if no_tracefs {
        let (p, banner, _rest) = start_cluster_script_without_tracefs(
            cl,
            "inherit-blank",
            &["count heap_insert"],
            &["--capture", cap.to_str().unwrap()],
            &out,
        );
        for said in [
            "pgdbg: count across the cluster without attaching is not possible here (",
            "tracefs is not mounted and /sys/kernel/tracing does not exist",
            "): each backend is attached instead",
        ] {
            assert!(banner.contains(said), "{said:?} not said:\n{banner}");
        }
        assert!(!banner.contains("run pgdbg as root"), "{banner}");
        p
    } else {
        // (says that the uprobes are inherited, and nothing of a fallback)
        start(cl, "inherit-blank", "heap_insert", &out, &cap).0
    };
    let mut c = cl.connect();
    let pid = c.pid();
    if no_tracefs {
        wait_until("the new backend attached", Duration::from_secs(60), || {
            tracer_pid(pid) != 0
        });
    }
    c.exec("insert into blank_t select generate_series(1, 7)");
    if !no_tracefs {
        assert_eq!(tracer_pid(pid), 0, "counted without attaching");
    }
    drop(c);
    wait_until("the backend ended", Duration::from_secs(30), || {
        proc_state(pid).is_empty()
    });
    let (code, text) = stop(p, &out);
    assert_eq!(code, 0, "{text}");
    let calls = read_events(&cap, "count")
        .iter()
        .find(|e| e["pid"] == pid && e["function"] == "heap_insert")
        .and_then(|e| e["calls"].as_u64());
    assert_eq!(calls, Some(7), "{text}");
    cl.assert_no_crash();
    drop(setup);
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&cap);
}
