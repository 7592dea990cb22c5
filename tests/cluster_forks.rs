//! `pgdbg attach --cluster`: each new backend is attached at its fork by
//! a worker started ahead and stopped before its first command until the
//! script is armed, so that even a session of one short statement is
//! observed from its first statement; a backend killed while it is held is reaped by the
//! postmaster (its crash restart completes), one held while pgdbg is
//! killed runs on; every backend is left running, untraced.

use common::spares::*;
use common::*;
use pgdbg_testbed as common;
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-forks-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// N sessions of one statement each (`psql -c`, a new backend each, a
/// few milliseconds long), one after the other, under a cluster-wide
/// `count`: every backend's count is in the capture and counts its one
/// statement.  (Looking for new backends every 100 ms saw almost none.)
fn each_short_session_counted(major: u32) {
    const N: usize = 30;
    let cl = Cluster::start(major);
    let cap = temp(&format!("short-{major}.jsonl"));
    let out = temp(&format!("short-{major}.out"));
    let script = write_script(
        &format!("short-sessions-{major}"),
        &["count standard_ExecutorStart"],
    );
    // the workers' course (a script of one `count` line is otherwise
    // served without workers: tests/cluster_inherit.rs)
    let mut p = Pgdbg::spawn_to_file_env(
        &[
            "attach",
            "--cluster",
            cl.dir.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--for",
            "600s",
            "--capture",
            cap.to_str().unwrap(),
        ],
        &out,
        &[("PGDBG_NO_INHERIT", "1")],
    );
    let mut err = stderr_reader(&mut p);
    let banner = read_until(&mut err, "running the script", Duration::from_secs(60));
    assert!(
        !banner.contains("looked for every 100 ms"),
        "process events refused here: {banner}"
    );
    // the workers started ahead are forked from one fork server, none
    // executed one by one
    spares_ready(p.pid());
    let server = fork_server(p.pid()).expect("no fork server among pgdbg's workers");
    assert_eq!(
        children(p.pid()),
        vec![server],
        "spares executed, not forked"
    );
    let mut pids = Vec::new();
    for _ in 0..N {
        // `psql -c`: the statement is sent the moment the connection is
        // ready, the whole session lasts a few milliseconds; looking every
        // 100 ms and attaching in 70 ms or more sees none of these first
        // statements.  Each session once the workers started ahead are
        // listening for forks again (a faster stream of new connections
        // outruns them: those backends are then found by looking) and the
        // worker of the session before has ended
        spares_ready(p.pid());
        let o = psql_c(&cl, "select pg_backend_pid()")
            .output()
            .expect("run psql");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let pid: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        pids.push(pid);
    }
    // Ctrl-C: the workers end their scripts and detach
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let (code, _, _) = p.wait(Duration::from_secs(120));
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let ev: Vec<serde_json::Value> = std::fs::read_to_string(&cap)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("capture lines are JSON"))
        .collect();
    let counted = |pid: i32| {
        ev.iter()
            .find(|e| e["event"] == "count" && e["pid"] == pid)
            .and_then(|e| e["calls"].as_u64())
    };
    let missed: Vec<(i32, Option<u64>)> = pids
        .iter()
        .map(|p| (*p, counted(*p)))
        .filter(|(_, n)| n.unwrap_or(0) < 1)
        .collect();
    assert!(
        missed.is_empty(),
        "{} of {N} sessions not counted from their first statement: {missed:?}\n{banner}{rest}\n{text}",
        missed.len()
    );
    assert!(code == 0 || code == 130, "exit {code}: {rest}");
    assert!(
        rest.contains(&format!("{N} new backends attached at their fork")),
        "{rest}"
    );
    // nothing left traced or stopped: the backends of the sessions are
    // gone, the cluster's other processes run untraced
    for pid in children(cl.postmaster_pid) {
        assert_eq!(tracer_pid(pid), 0, "process {pid} left traced");
        assert!(
            !proc_state(pid).starts_with('T'),
            "process {pid} left stopped"
        );
    }
    let mut c = cl.connect();
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn cluster_counts_each_short_session_from_its_first_statement_15() {
    each_short_session_counted(15);
}

#[test]
fn cluster_counts_each_short_session_from_its_first_statement_18() {
    each_short_session_counted(18);
}

/// A session whose backend the workers started ahead get to only after
/// its startup (PGDBG_SPARE_LATE, for tests: as on a machine too
/// busy to give them a CPU in time) is said at the end, not lost silently:
/// `late` "1", each worker attaches and lets it go; "stale", each heard
/// its fork too late to take it (looked at from outside).
fn late_spare_said(major: u32, late: &str) {
    let cl = Cluster::start(major);
    let (mut p, err) = spawn_cluster(
        &cl,
        &format!("late-spare-{late}-{major}"),
        &[("PGDBG_SPARE_LATE", late)],
        None,
    );
    spares_ready(p.id() as i32);
    let o = psql_c(&cl, "select pg_sleep(0.5)")
        .output()
        .expect("run psql");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(p.id() as i32, libc::SIGINT) };
    wait_end(&mut p, &err);
    // its last line, as read by the thread that collects standard error
    let said = || {
        err.lock()
            .unwrap()
            .contains("after their startup (the workers waited for a CPU): 1;")
    };
    let t0 = std::time::Instant::now();
    while !said() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = err.lock().unwrap().clone();
    assert!(said(), "no line of the backend missed:\n{text}");
    assert!(!text.contains("attached at their fork"), "{text}");
    no_backend_traced(&cl);
}

#[test]
fn cluster_says_backends_reached_after_their_startup_15() {
    late_spare_said(15, "1");
}

#[test]
fn cluster_says_backends_reached_after_their_startup_18() {
    late_spare_said(18, "1");
}

#[test]
fn cluster_says_backends_whose_fork_every_worker_heard_late_15() {
    late_spare_said(15, "stale");
}

/// One `psql -c` session under the `--cluster` count `p` (its output in
/// `out`), then Ctrl-C: the session's statement counted, and the backend
/// counted as attached at its fork.
fn one_session_counted(
    cl: &Cluster,
    p: &mut std::process::Child,
    err: &std::sync::Mutex<String>,
    out: &std::path::Path,
) {
    let o = psql_c(cl, "select pg_backend_pid()")
        .output()
        .expect("run psql");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pid: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(p.id() as i32, libc::SIGINT) };
    wait_end(p, err);
    let text = std::fs::read_to_string(out).unwrap_or_default();
    let counted = format!("[{pid}] standard_ExecutorStart          1");
    assert!(text.contains(&counted), "no '{counted}' in:\n{text}");
    wait_until(
        "the count of backends attached at their fork",
        Duration::from_secs(10),
        || {
            err.lock()
                .unwrap()
                .contains("1 new backend attached at their fork")
        },
    );
}

/// Without the fork server (PGDBG_NO_FORK_SERVER, for tests: as when it
/// cannot start), the workers started ahead are executed one by one, and
/// a short session is counted from its first statement all the same.
fn executed_spares_count(major: u32) {
    let cl = Cluster::start(major);
    let out = temp(&format!("executed-spares-{major}.out"));
    let (mut p, err) = spawn_cluster(
        &cl,
        &format!("executed-spares-{major}"),
        &[("PGDBG_NO_FORK_SERVER", "1")],
        Some(&out),
    );
    let sup = p.id() as i32;
    spares_ready(sup);
    assert_eq!(
        fork_server(sup),
        None,
        "a fork server despite PGDBG_NO_FORK_SERVER"
    );
    one_session_counted(&cl, &mut p, &err, &out);
    no_backend_traced(&cl);
}

#[test]
fn cluster_executed_spares_count_a_session_15() {
    executed_spares_count(15);
}

/// The fork server killed alone (SIGKILL, as the OOM killer might pick
/// it): its spares end with it, executed spares take over without a
/// failure said, and a new session is still counted from its first
/// statement.
fn fork_server_killed(major: u32) {
    let cl = Cluster::start(major);
    let out = temp(&format!("server-killed-{major}.out"));
    let (mut p, err) = spawn_cluster(&cl, &format!("server-killed-{major}"), &[], Some(&out));
    let sup = p.id() as i32;
    spares_ready(sup);
    let server = fork_server(sup).expect("a fork server");
    // SAFETY: kill(2) of a process of our pgdbg
    unsafe { libc::kill(server, libc::SIGKILL) };
    wait_until(
        "executed workers started ahead in place of the forked ones",
        Duration::from_secs(60),
        || {
            fork_server(sup).is_none()
                && spares_listening(sup) >= 3
                && workers(sup).len() == spares_listening(sup)
        },
    );
    one_session_counted(&cl, &mut p, &err, &out);
    let e = err.lock().unwrap().clone();
    assert!(!e.contains("ended (") && !e.contains("error"), "{e}");
    no_backend_traced(&cl);
}

#[test]
fn cluster_fork_server_killed_alone_15() {
    fork_server_killed(15);
}

/// `pgdbg attach --cluster` with every new backend kept stopped 120 s
/// after its fork (PGDBG_HOLD_NEW_MS, for tests), its standard error
/// collected by a thread.
fn spawn_holding(
    cl: &Cluster,
    name: &str,
) -> (
    std::process::Child,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    spawn_cluster(cl, name, &[("PGDBG_HOLD_NEW_MS", "120000")], None)
}

/// `pgdbg attach --cluster` counting each backend's statements, with
/// `env`, its standard output to `out` (else dropped), its standard error
/// collected by a thread.
fn spawn_cluster(
    cl: &Cluster,
    name: &str,
    env: &[(&str, &str)],
    out: Option<&std::path::Path>,
) -> (
    std::process::Child,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    spawn_cluster_for(cl, name, env, out, "600s")
}

/// [`spawn_cluster`] with `--for` `limit`.
fn spawn_cluster_for(
    cl: &Cluster,
    name: &str,
    env: &[(&str, &str)],
    out: Option<&std::path::Path>,
    limit: &str,
) -> (
    std::process::Child,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    let script = write_script(name, &["count standard_ExecutorStart"]);
    let mut child = Command::new(pgdbg_bin())
        .args(["attach", "--cluster", cl.dir.to_str().unwrap()])
        .args(["--script", script.to_str().unwrap(), "--for", limit])
        .env_remove("DEBUGINFOD_URLS")
        // the workers' course (a script of one `count` line is otherwise
        // served without workers: tests/cluster_inherit.rs)
        .env("PGDBG_NO_INHERIT", "1")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(match out {
            Some(p) => std::process::Stdio::from(std::fs::File::create(p).unwrap()),
            None => std::process::Stdio::null(),
        })
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn pgdbg");
    let err = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (mut e, acc) = (child.stderr.take().unwrap(), err.clone());
    std::thread::spawn(move || {
        let mut b = [0u8; 4096];
        while let Ok(n) = e.read(&mut b) {
            if n == 0 {
                break;
            }
            acc.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&b[..n]));
        }
    });
    (child, err)
}

/// A new session (`psql -c`) whose backend pgdbg holds stopped: connect
/// until one is held (the workers started ahead may not be ready for the
/// first); the psql process and the held backend.
fn held_session(cl: &Cluster, err: &std::sync::Mutex<String>) -> (std::process::Child, i32) {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(120) {
        let mut c = psql_c(cl, "select 1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run psql");
        let t1 = std::time::Instant::now();
        while t1.elapsed() < Duration::from_secs(3) {
            let held: Vec<i32> = children(cl.postmaster_pid)
                .into_iter()
                .filter(|p| tracer_pid(*p) != 0 && proc_state(*p).starts_with('t'))
                .collect();
            if let [pid] = held[..] {
                // still stopped, by the same tracer, a while later: held
                let tracer = tracer_pid(pid);
                std::thread::sleep(Duration::from_millis(500));
                if tracer_pid(pid) == tracer && proc_state(pid).starts_with('t') {
                    return (c, pid);
                }
            }
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    panic!("no new backend held: {}", err.lock().unwrap());
}

fn no_backend_traced(cl: &Cluster) {
    wait_until(
        "every process of the cluster untraced",
        Duration::from_secs(30),
        || {
            children(cl.postmaster_pid)
                .into_iter()
                .all(|p| tracer_pid(p) == 0)
        },
    );
}

/// A backend killed (SIGKILL) while pgdbg holds it stopped after its
/// fork: pgdbg waits for it at once, so that the postmaster reaps it (a
/// traced zombie nobody waits for stays until the 120 s of the hold end)
/// and its crash restart completes.
fn held_backend_killed(major: u32) {
    let cl = Cluster::start(major);
    let (mut pg, err) = spawn_holding(&cl, &format!("held-killed-{major}"));
    let (mut psql, pid) = held_session(&cl, &err);
    // SAFETY: kill(2) of a backend of our test cluster
    unsafe { libc::kill(pid, libc::SIGKILL) };
    wait_until(
        "the postmaster to reap the killed backend",
        Duration::from_secs(10),
        || !std::path::Path::new(&format!("/proc/{pid}")).exists(),
    );
    let _ = psql.wait();
    // pgdbg ended first: with PGDBG_HOLD_NEW_MS it would hold each new
    // connection of the restart (pg_isready's too) for 120 s
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(pg.id() as i32, libc::SIGINT) };
    wait_end(&mut pg, &err);
    let isready = cl.bin.join("pg_isready");
    wait_until(
        "the crash restart to complete",
        Duration::from_secs(60),
        || {
            Command::new(&isready)
                .args(["-h", cl.dir.to_str().unwrap(), "-q"])
                .status()
                .is_ok_and(|s| s.success())
        },
    );
    let mut c = cl.connect();
    assert_eq!(c.query_one_i64("select 7"), 7);
    no_backend_traced(&cl);
}

/// pgdbg killed (SIGKILL) while it holds a new backend stopped after its
/// fork: the backend runs on, untraced, and its session completes.
fn pgdbg_killed_while_holding(major: u32) {
    let cl = Cluster::start(major);
    let (mut pg, err) = spawn_holding(&cl, &format!("killed-holding-{major}"));
    let (mut psql, pid) = held_session(&cl, &err);
    pg.kill().expect("SIGKILL pgdbg");
    let _ = pg.wait();
    wait_until(
        "the held backend to run on, untraced",
        Duration::from_secs(10),
        || tracer_pid(pid) == 0 && !proc_state(pid).to_lowercase().starts_with('t'),
    );
    let st = psql.wait().expect("psql");
    assert!(st.success(), "the held session failed: {st}");
    no_backend_traced(&cl);
    let mut c = cl.connect();
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn cluster_held_backend_killed_is_reaped_15() {
    held_backend_killed(15);
}

#[test]
fn cluster_held_backend_killed_is_reaped_18() {
    held_backend_killed(18);
}

#[test]
fn cluster_pgdbg_killed_while_holding_15() {
    pgdbg_killed_while_holding(15);
}

#[test]
fn cluster_pgdbg_killed_while_holding_18() {
    pgdbg_killed_while_holding(18);
}

/// The scheduling policy of each thread of `pid` (/proc/PID/task/TID/stat,
/// field 41: 0 normal, 1 SCHED_FIFO).
fn policies(pid: i32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter_map(|s| {
            let after = &s[s.rfind(')')? + 2..];
            // `after` starts at field 3
            after.split_whitespace().nth(38)?.parse().ok()
        })
        .collect()
}

/// A worker started ahead killed (SIGKILL) right after the two requests
/// of the seize it made at its real-time priority (paused there by
/// PGDBG_PAUSE_AT=spare-seized; pgdbg's supervisor stopped first so that
/// it attaches nothing meanwhile): the ptrace stop ends with its tracer,
/// the backend runs on untraced and its session completes; nothing of the
/// cluster is left stopped.  Each worker waits for the fork with one
/// real-time thread, and is normal again at the pause (lowered before
/// anything else of its runs).  Where real-time is refused the test fails
/// at once, saying so in one line.  (No autovacuum: a worker of its,
/// forked meanwhile, would be seized and held the same way.)
fn spare_killed_at_real_time(major: u32) {
    let cl = Cluster::start_with(major, &["autovacuum=off"]);
    let (mut pg, err) = spawn_cluster(
        &cl,
        &format!("rt-killed-{major}"),
        &[
            ("PGDBG_PAUSE_AT", "spare-seized"),
            // long enough for the steps from the pause's line to the
            // kill (milliseconds; seconds on a loaded machine); the other
            // spares, which heard the same fork and lost it, pause as long
            // and pgdbg's end waits for them
            ("PGDBG_PAUSE_MS", "15000"),
        ],
        None,
    );
    let sup = pg.id() as i32;
    spares_ready(sup);
    for w in workers(sup) {
        // (normal for a moment while it says it is ready)
        let rt = || policies(w).iter().filter(|p| **p == 1).count();
        let t0 = std::time::Instant::now();
        while rt() != 1 && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if rt() != 1 {
            fail_if_rt_refused(&err.lock().unwrap());
            panic!(
                "worker {w} waits for forks with {} real-time threads, not 1",
                rt()
            );
        }
    }
    let before = children(cl.postmaster_pid);
    let psql = psql_c(&cl, "select 41 + 1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run psql");
    wait_until(
        "a worker started ahead paused after its seize",
        Duration::from_secs(30),
        || err.lock().unwrap().contains("paused at spare-seized"),
    );
    let workers = workers(sup);
    let (pid, spare) = children(cl.postmaster_pid)
        .into_iter()
        .filter(|p| !before.contains(p))
        .map(|p| (p, tracer_pid(p)))
        .find(|(_, t)| workers.contains(t))
        .unwrap_or_else(|| panic!("no new backend seized: {}", err.lock().unwrap()));
    let pol = policies(spare);
    assert!(
        !pol.contains(&1),
        "worker {spare} still real-time after its seize: {pol:?}"
    );
    // SAFETY: kill(2) of our own child and of a worker of it
    unsafe {
        libc::kill(sup, libc::SIGSTOP);
        libc::kill(spare, libc::SIGKILL);
    }
    let t0 = std::time::Instant::now();
    loop {
        let st = proc_state(pid);
        if tracer_pid(pid) == 0 && !st.to_lowercase().starts_with('t') {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "backend {pid} still traced ({}) or stopped ({st}) a second after its worker was killed",
            tracer_pid(pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = psql.wait_with_output().expect("psql");
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "42",
        "the session of the backend let go failed: {} {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // SAFETY: kill(2) of our own child
    unsafe {
        libc::kill(sup, libc::SIGCONT);
        libc::kill(sup, libc::SIGINT);
    }
    wait_end(&mut pg, &err);
    no_backend_traced(&cl);
    for p in children(cl.postmaster_pid) {
        assert!(
            !proc_state(p).to_lowercase().starts_with('t'),
            "process {p} of the cluster left stopped"
        );
    }
    let mut c = cl.connect();
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn cluster_spare_killed_at_real_time_15() {
    spare_killed_at_real_time(15);
}

#[test]
fn cluster_spare_killed_at_real_time_18() {
    spare_killed_at_real_time(18);
}

/// Fails in one line where pgdbg said (at any time: `stderr` is all it
/// said so far) that its workers wait at the normal priority.
fn fail_if_rt_refused(stderr: &str) {
    if let Some(l) = stderr
        .lines()
        .find(|l| l.contains("at the normal priority"))
    {
        panic!("real-time priority refused here (needs CAP_SYS_NICE or RLIMIT_RTPRIO): {l}");
    }
}

/// `psql -c SQL` as postgres in a session of its own on the cluster's
/// socket, unaligned, without psqlrc.
fn psql_c(cl: &Cluster, sql: &str) -> Command {
    let mut c = Command::new(cl.bin.join("psql"));
    c.args([
        "-h",
        cl.dir.to_str().unwrap(),
        "-U",
        "postgres",
        "-X",
        "-At",
    ])
    .args(["-c", sql, "postgres"]);
    c
}

/// Wait for `child` to end (at most 120 s).
fn wait_end(child: &mut std::process::Child, err: &std::sync::Mutex<String>) -> i32 {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "pgdbg did not end: {}",
            err.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A replication connection (a walsender) under `--cluster`: taken at
/// its fork like any connection (its startup packet is not read yet), let
/// go once its title says walsender: no script, no output line, not in
/// the count of backends attached at their fork, and untraced while it
/// runs.
fn replication_connection_not_scripted(major: u32) {
    let cl = Cluster::start(major);
    let out = temp(&format!("repl-{major}.out"));
    let (mut pg, err) = spawn_cluster(
        &cl,
        &format!("repl-{major}"),
        &[("PGDBG_DEBUG", "1")],
        Some(&out),
    );
    spares_ready(pg.id() as i32);
    let psql = cl.bin.join("psql");
    let host = cl.dir.to_str().unwrap();
    // one client session, counted
    let o = psql_c(&cl, "select pg_backend_pid()")
        .output()
        .expect("run psql");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let client: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    spares_ready(pg.id() as i32);
    // a replication session kept open
    let before = children(cl.postmaster_pid);
    let mut repl = Command::new(&psql)
        .arg(format!(
            "host={host} user=postgres dbname=postgres replication=database"
        ))
        .args(["-X", "-At"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run psql");
    let is_walsender = |p: i32| {
        std::fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.contains("walsender"))
    };
    let mut ws = 0;
    wait_until("the walsender", Duration::from_secs(30), || {
        ws = children(cl.postmaster_pid)
            .into_iter()
            .find(|p| !before.contains(p) && is_walsender(*p))
            .unwrap_or(0);
        ws != 0
    });
    // taken at its fork and let go at its first command
    wait_until(
        "the walsender let go by pgdbg",
        Duration::from_secs(30),
        || {
            err.lock()
                .unwrap()
                .contains(&format!("[{ws}] not a client backend: let go"))
        },
    );
    // untraced and running while its session lasts
    for _ in 0..10 {
        assert_eq!(tracer_pid(ws), 0, "walsender {ws} traced");
        let st = proc_state(ws);
        assert!(
            !st.to_lowercase().starts_with('t'),
            "walsender {ws} stopped: {st}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    {
        use std::io::Write;
        let mut i = repl.stdin.take().unwrap();
        i.write_all(b"IDENTIFY_SYSTEM;\n").unwrap();
    }
    let o = repl.wait_with_output().expect("psql replication");
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains('|'),
        "IDENTIFY_SYSTEM failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(pg.id() as i32, libc::SIGINT) };
    let code = wait_end(&mut pg, &err);
    let rest = err.lock().unwrap().clone();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(code == 0 || code == 130, "exit {code}: {rest}");
    assert!(
        rest.contains("1 new backend attached at their fork"),
        "the walsender counted, or the client not: {rest}"
    );
    assert!(
        text.contains(&format!("[{client}]")),
        "no output for the client session {client}: {text}"
    );
    assert!(
        !text.contains(&format!("[{ws}]")) && !rest.contains(&format!("[{ws}] Attached")),
        "output for the walsender {ws}: {text}{rest}"
    );
    no_backend_traced(&cl);
    cl.assert_no_crash();
}

#[test]
fn cluster_replication_connection_not_scripted_15() {
    replication_connection_not_scripted(15);
}

#[test]
fn cluster_replication_connection_not_scripted_18() {
    replication_connection_not_scripted(18);
}

/// The backend of a new connection whose client sends nothing: it waits
/// for the startup packet, traced by the worker that took it at its fork
/// and runs it to its first command (a debug register armed, the group
/// stop's hold, the guardian).  Found once it has been so for half a
/// second; with the worker (its tracer).
fn silent_connection(cl: &Cluster, sup: i32) -> (std::os::unix::net::UnixStream, i32, i32) {
    spares_ready(sup);
    let before = children(cl.postmaster_pid);
    let sock = std::os::unix::net::UnixStream::connect(cl.dir.join(".s.PGSQL.5432"))
        .expect("connect to the server's socket");
    let mut found = None;
    wait_until(
        "the silent connection's backend traced by a worker",
        Duration::from_secs(30),
        || {
            let workers = workers(sup);
            found = children(cl.postmaster_pid)
                .into_iter()
                .filter(|p| !before.contains(p))
                .map(|p| (p, tracer_pid(p)))
                .find(|(_, t)| workers.contains(t));
            if let Some((p, t)) = found {
                std::thread::sleep(Duration::from_millis(500));
                return tracer_pid(p) == t;
            }
            false
        },
    );
    let (pid, worker) = found.unwrap();
    (sock, pid, worker)
}

/// A new backend whose client sends nothing is run to its first command
/// only until `--for` ends (not the 65 s bound of a stalled
/// authentication): pgdbg ends with its `--for`, the backend runs on
/// untraced and its session starts.
fn silent_connection_ends_with_for(major: u32) {
    let cl = Cluster::start(major);
    let t0 = std::time::Instant::now();
    let (mut pg, err) = spawn_cluster_for(&cl, &format!("silent-for-{major}"), &[], None, "8s");
    let (mut sock, pid, _) = silent_connection(&cl, pg.id() as i32);
    wait_end(&mut pg, &err);
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "pgdbg ended {took:?} after its start with --for 8s: the silent connection held it"
    );
    wait_until("the backend untraced", Duration::from_secs(10), || {
        tracer_pid(pid) == 0 && !proc_state(pid).to_lowercase().starts_with('t')
    });
    let types = start_session(&mut sock);
    assert_eq!(
        types.last(),
        Some(&b'Z'),
        "no ReadyForQuery: {:?}",
        String::from_utf8_lossy(&types)
    );
    no_backend_traced(&cl);
    cl.assert_no_crash();
}

#[test]
fn cluster_silent_connection_ends_with_for_15() {
    silent_connection_ends_with_for(15);
}

/// Startup packet (protocol 3.0, user and database postgres) and the
/// server's answers up to ReadyForQuery: the message types seen.
fn start_session(sock: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
    use std::io::Write;
    let mut body = 196608u32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0postgres\0database\0postgres\0\0");
    let mut pkt = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    pkt.extend_from_slice(&body);
    sock.write_all(&pkt).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut types = Vec::new();
    loop {
        let mut h = [0u8; 5];
        if sock.read_exact(&mut h).is_err() {
            return types;
        }
        let len = u32::from_be_bytes(h[1..5].try_into().unwrap()) as usize;
        let mut rest = vec![0u8; len.saturating_sub(4)];
        if sock.read_exact(&mut rest).is_err() {
            return types;
        }
        types.push(h[0]);
        if h[0] == b'Z' || h[0] == b'E' {
            return types;
        }
    }
}

/// The worker holding a silent connection's backend (in the run to its
/// first command) is killed: its guardian restores the backend at once;
/// untraced and running within a second; the client then starts its
/// session normally (nothing left armed at ReadyForQuery) and nothing
/// crashed.
fn worker_killed_during_authentication(major: u32) {
    let cl = Cluster::start(major);
    let (mut pg, err) = spawn_cluster(&cl, &format!("auth-worker-{major}"), &[], None);
    let (mut sock, pid, worker) = silent_connection(&cl, pg.id() as i32);
    // SAFETY: kill(2) of a worker of our pgdbg
    unsafe { libc::kill(worker, libc::SIGKILL) };
    let t0 = std::time::Instant::now();
    loop {
        let st = proc_state(pid);
        if tracer_pid(pid) == 0 && !st.to_lowercase().starts_with('t') {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "backend {pid} still traced ({}) or stopped ({st}) a second after its worker was killed",
            tracer_pid(pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let types = start_session(&mut sock);
    assert_eq!(
        types.last(),
        Some(&b'Z'),
        "no ReadyForQuery: {:?}",
        String::from_utf8_lossy(&types)
    );
    {
        use std::io::Write;
        // Terminate
        sock.write_all(b"X\0\0\0\x04").unwrap();
    }
    drop(sock);
    wait_until("the session's end", Duration::from_secs(10), || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(pg.id() as i32, libc::SIGINT) };
    wait_end(&mut pg, &err);
    no_backend_traced(&cl);
    let mut c = cl.connect();
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

/// A silent connection's backend killed (SIGKILL) in the run to its first
/// command: its worker waits for it, the postmaster reaps it and its
/// crash restart completes; the cluster answers.
fn backend_killed_during_authentication(major: u32) {
    let cl = Cluster::start(major);
    let (mut pg, err) = spawn_cluster(&cl, &format!("auth-killed-{major}"), &[], None);
    let (sock, pid, _) = silent_connection(&cl, pg.id() as i32);
    // SAFETY: kill(2) of a backend of our test cluster
    unsafe { libc::kill(pid, libc::SIGKILL) };
    wait_until(
        "the postmaster to reap the killed backend",
        Duration::from_secs(10),
        || !std::path::Path::new(&format!("/proc/{pid}")).exists(),
    );
    drop(sock);
    let isready = cl.bin.join("pg_isready");
    wait_until(
        "the crash restart to complete",
        Duration::from_secs(60),
        || {
            Command::new(&isready)
                .args(["-h", cl.dir.to_str().unwrap(), "-q"])
                .status()
                .is_ok_and(|s| s.success())
        },
    );
    let mut c = cl.connect();
    assert_eq!(c.query_one_i64("select 7"), 7);
    assert!(
        cl.log().contains("terminated by signal 9"),
        "no crash restart: {}",
        cl.log()
    );
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(pg.id() as i32, libc::SIGINT) };
    wait_end(&mut pg, &err);
    no_backend_traced(&cl);
}

#[test]
fn cluster_worker_killed_during_authentication_15() {
    worker_killed_during_authentication(15);
}

#[test]
fn cluster_worker_killed_during_authentication_18() {
    worker_killed_during_authentication(18);
}

#[test]
fn cluster_backend_killed_during_authentication_15() {
    backend_killed_during_authentication(15);
}

#[test]
fn cluster_backend_killed_during_authentication_18() {
    backend_killed_during_authentication(18);
}

/// utime + stime of `pid`, in clock ticks (/proc/PID/stat).
fn cpu_ticks(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // fields 14 and 15 of the line; `after` starts at field 3
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// A simple-protocol query on `sock`: the message types up to
/// ReadyForQuery.
fn query(sock: &mut std::os::unix::net::UnixStream, sql: &str) -> Vec<u8> {
    use std::io::Write;
    let mut m = vec![b'Q'];
    m.extend_from_slice(&((sql.len() + 5) as u32).to_be_bytes());
    m.extend_from_slice(sql.as_bytes());
    m.push(0);
    sock.write_all(&m).unwrap();
    let mut types = Vec::new();
    loop {
        let mut h = [0u8; 5];
        sock.read_exact(&mut h).expect("an answer to the query");
        let len = u32::from_be_bytes(h[1..5].try_into().unwrap()) as usize;
        let mut rest = vec![0u8; len.saturating_sub(4)];
        sock.read_exact(&mut rest).expect("an answer to the query");
        types.push(h[0]);
        if h[0] == b'Z' {
            return types;
        }
    }
}

/// A silent connection's backend whose worker and guardian are SIGKILLed
/// together (pgdbg's supervisor stopped first so that it attaches nothing
/// meanwhile, then killed): the backend is not left stopped and runs on
/// untraced with the execute debug register on ReadyForQuery and our
/// SIGTRAP handler; its session starts and its statements answer, each
/// trap passing through the handler at a bounded CPU cost; `pgdbg rescue`
/// clears DR7 and puts both signal actions back; the session answers and
/// nothing crashed.
fn worker_and_guardian_killed_during_authentication(major: u32) {
    let cl = Cluster::start(major);
    let (mut pg, err) = spawn_cluster(&cl, &format!("auth-both-{major}"), &[], None);
    let (mut sock, pid, worker) = silent_connection(&cl, pg.id() as i32);
    let g = guardians_of(pid);
    assert_eq!(g.len(), 1, "one guardian of {pid}: {g:?}");
    // SAFETY: kill(2) of our own child, of its worker and of the worker's
    // guardian
    unsafe {
        libc::kill(pg.id() as i32, libc::SIGSTOP);
        libc::kill(g[0], libc::SIGKILL);
        libc::kill(worker, libc::SIGKILL);
    }
    let t0 = std::time::Instant::now();
    loop {
        let st = proc_state(pid);
        if tracer_pid(pid) == 0 && !st.to_lowercase().starts_with('t') {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "backend {pid} still traced ({}) or stopped ({st}) a second after its worker and guardian were killed",
            tracer_pid(pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(pg.id() as i32, libc::SIGKILL) };
    let _ = pg.wait();
    drop(err);
    wait_until("the workers to end", Duration::from_secs(30), || {
        children(pg.id() as i32).is_empty() && guardians_of(pid).is_empty()
    });
    // what the killed worker left: the SIGTRAP and SIGCONT handlers and
    // the debug register armed on ReadyForQuery
    assert!(
        caught(pid, libc::SIGTRAP),
        "no SIGTRAP handler left in {pid}"
    );
    assert!(
        caught(pid, libc::SIGCONT),
        "no SIGCONT handler left in {pid}"
    );
    assert_ne!(dr7(pid), 0, "DR7 of {pid} not left armed");
    let types = start_session(&mut sock);
    assert_eq!(
        types.last(),
        Some(&b'Z'),
        "no ReadyForQuery: {:?}",
        String::from_utf8_lossy(&types)
    );
    let before = cpu_ticks(pid);
    for i in 0..20 {
        let t = query(&mut sock, &format!("select {i}"));
        assert!(t.contains(&b'D'), "no row for statement {i}: {t:?}");
        assert!(!proc_state(pid).starts_with('T'), "backend {pid} stopped");
    }
    // one second of CPU
    // SAFETY: sysconf(3)
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    assert!(
        cpu_ticks(pid) - before < ticks,
        "backend {pid} used {} ticks of CPU for 20 statements",
        cpu_ticks(pid) - before
    );
    assert_eq!(tracer_pid(pid), 0, "backend {pid} traced again");
    let (code, out, e) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {e}");
    assert!(out.contains("restored"), "rescue said: {out}");
    assert_eq!(dr7(pid), 0, "DR7 of {pid} still armed after the rescue");
    assert!(
        !caught(pid, libc::SIGTRAP),
        "the SIGTRAP action was not put back"
    );
    assert!(
        !caught(pid, libc::SIGCONT),
        "the SIGCONT action was not put back"
    );
    let t = query(&mut sock, "select 42");
    assert!(t.contains(&b'D'), "no row after the rescue: {t:?}");
    {
        use std::io::Write;
        // Terminate
        sock.write_all(b"X\0\0\0\x04").unwrap();
    }
    drop(sock);
    wait_until("the session's end", Duration::from_secs(10), || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    no_backend_traced(&cl);
    let mut c = cl.connect();
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn cluster_worker_and_guardian_killed_during_authentication_15() {
    worker_and_guardian_killed_during_authentication(15);
}

#[test]
fn cluster_worker_and_guardian_killed_during_authentication_18() {
    worker_and_guardian_killed_during_authentication(18);
}
