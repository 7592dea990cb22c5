//! `pgdbg attach --cluster`: each new backend is attached at its fork by
//! a worker started ahead and stopped before its first command until the
//! script is armed, so that even a session of one short statement is
//! observed from its first statement; a backend killed while it is held is reaped by the
//! postmaster (its crash restart completes), one held while pgdbg is
//! killed runs on; every backend is left running, untraced.

mod common;
use common::*;
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
    let mut p = Pgdbg::spawn_to_file(
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
    );
    let mut err = stderr_reader(&mut p);
    let banner = read_until(&mut err, "running the script", Duration::from_secs(60));
    assert!(
        !banner.contains("looked for every 100 ms"),
        "process events refused here: {banner}"
    );
    let psql = cl.bin.join("psql");
    let mut pids = Vec::new();
    for _ in 0..N {
        // `psql -c`: the statement is sent the moment the connection is
        // ready, the whole session lasts a few milliseconds; looking every
        // 100 ms and attaching in 70 ms or more sees none of these first
        // statements.  A session every 0.3 s: a worker started ahead takes
        // about 0.1 s of CPU to be ready, so a faster stream of new
        // connections on this shared 2-CPU machine outruns them (those
        // backends are then found by looking)
        std::thread::sleep(Duration::from_millis(300));
        let o = Command::new(&psql)
            .args([
                "-h",
                cl.dir.to_str().unwrap(),
                "-U",
                "postgres",
                "-X",
                "-At",
            ])
            .args(["-c", "select pg_backend_pid()", "postgres"])
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

fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

#[test]
fn cluster_counts_each_short_session_from_its_first_statement_15() {
    each_short_session_counted(15);
}

#[test]
fn cluster_counts_each_short_session_from_its_first_statement_18() {
    each_short_session_counted(18);
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
    let script = write_script(name, &["count standard_ExecutorStart"]);
    let mut child = Command::new(pgdbg_bin())
        .args(["attach", "--cluster", cl.dir.to_str().unwrap()])
        .args(["--script", script.to_str().unwrap(), "--for", "600s"])
        .env_remove("DEBUGINFOD_URLS")
        .env("PGDBG_HOLD_NEW_MS", "120000")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
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
    let psql = cl.bin.join("psql");
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(120) {
        let mut c = Command::new(&psql)
            .args([
                "-h",
                cl.dir.to_str().unwrap(),
                "-U",
                "postgres",
                "-X",
                "-At",
            ])
            .args(["-c", "select 1", "postgres"])
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
    let t0 = std::time::Instant::now();
    while pg.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "pgdbg did not end: {}",
            err.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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
