//! PostgreSQL's own regression suite (`pg_regress`, one test at a time,
//! from the source tree scripts/pg-build built) run while `pgdbg attach
//! --cluster` observes the cluster with a `count`, a `waits trace` and a
//! `plancache` script: every client backend of the run (the server logs
//! its connections) is attached at its fork, before its first statement
//! (and, for the same `count` served by uprobes inherited from the
//! postmaster, with no worker and no attach, counted from its fork);
//! `pg_regress` passes as it does without pgdbg (it compares every result
//! with the expected one itself); no backend crashes; nothing of the
//! cluster is left traced or stopped.
//!
//! By default each run is a fixed prefix of the suite's schedule (whole
//! groups, `SUBSET_TESTS` tests or a few more: 41 tests, 43-44 client
//! sessions), so that the eight runs (4 scripts x 2 majors) take about 4
//! minutes (the six with workers measured 13-33 s each on a loaded 2-CPU
//! machine, 209 s in all); PGDBG_REGRESS_FULL=1 runs the whole schedule in
//! each (and the suite once without pgdbg per major, to compare the
//! times).  The whole suite took, on the same loaded machine: 15 without
//! pgdbg 66 s, under
//! `count` 184 s, `plancache` 116 s, `waits trace` 269 s; 18 without
//! pgdbg 126-223 s, under `count` 391 s: one mode per major of the whole
//! suite alone would exceed the default budget.  On a quiet 2-CPU Xeon
//! (2026-12-05, `PGDBG_REGRESS_FULL=1 cargo test --release --test
//! regress_cluster -- --include-ignored --test-threads=1`, all 10 passed,
//! 512 s): 15 (217 tests, 252 connections, each attached at its fork or
//! counted from it) without pgdbg 17.1 s, `count` 88.6 s,
//! `count-inherited` 30.7 s, `plancache` 29.8 s, `waits trace` 66.6 s; 18
//! (231 tests, 276 connections) 21.8, 98.9, 35.4, 34.7, 75.0 s.
//!
//! In the default suite since the workers started ahead wait for the
//! fork and seize the new backend at a real-time priority (forks.rs):
//! before, on a busy 2-CPU machine a few short sessions were reached only
//! after their startup, or ended before any worker started ahead got a
//! CPU (0-4 per run of the prefix, 2-14 of 252-276 in the whole suite, at
//! load average 7-17); with it, none in the six runs at load average
//! 10-12 (2026-12-04, beside builds and `cargo test`).  It remains
//! statistical all the same: the kernel's real-time throttling
//! (`kernel.sched_rt_runtime_us`) can still delay a spare; all the spares
//! can be taken at once by the forks of background or parallel workers
//! (let go, but not ready for the next fork meanwhile); the spare
//! started in place of one that took a backend gets ready (loads, checks
//! the script) at the normal priority, so under load a fork may come
//! before it listens.  It needs real-time for its spares: CAP_SYS_NICE or an
//! RLIMIT_RTPRIO of at least 1 (root in CI), and process events
//! (CAP_NET_ADMIN).  Where real-time is refused pgdbg says so, and the
//! test fails on that line alone, whenever it comes (before the banner
//! or later).  The
//! runs without pgdbg (`_alone`) only time the whole suite and stay
//! ignored: `cargo test --release --test regress_cluster -- --ignored
//! --test-threads=1` with PGDBG_REGRESS_FULL=1.

use common::spares::spares_ready;
use common::*;
use pgdbg_testbed as common;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The scripts: uprobe counters (the kernel's) set by a worker per
/// backend, the same counters inherited from the postmaster (no worker,
/// no attach: `count-inherited`), a write-breakpoint event with the
/// executor's uprobes, and a recorder written into each backend.
const MODES: &[(&str, &str)] = &[
    ("count", "count ExecInterpExpr heap_insert LockRelationOid"),
    (
        "count-inherited",
        "count ExecInterpExpr heap_insert LockRelationOid",
    ),
    ("waits", "waits trace --quiet"),
    ("plancache", "plancache"),
];

/// The default run: the schedule's first groups, up to at least this many
/// tests (test_setup, then the data types: the tests after them need
/// them; 15: 42 tests with the tablespace test, 18: 42).
const SUBSET_TESTS: usize = 40;

fn full() -> bool {
    std::env::var_os("PGDBG_REGRESS_FULL").is_some_and(|v| v != "0")
}

fn cache() -> PathBuf {
    std::env::var_os("PGDBG_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/pgdbg"))
}

/// `src/test/regress` of MAJOR's Debian source tree and of its build
/// directory (scripts/pg-build configures in a separate directory).
fn regress_trees(major: u32) -> (PathBuf, PathBuf) {
    // builds it when absent (scripts/pg-build)
    let _ = pg_prefix(major);
    let src = std::fs::read_dir(cache().join(format!("src/{major}")))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("postgresql-{major}-")))
        })
        .unwrap_or_else(|| {
            panic!(
                "no source tree of PostgreSQL {major} under {}: run scripts/pg-build {major}",
                cache().join(format!("src/{major}")).display()
            )
        })
        .join("src/test/regress");
    let build = cache().join(format!("build/{major}/src/test/regress"));
    assert!(
        build.join("pg_regress").exists() && build.join("regress.so").exists(),
        "no pg_regress or regress.so in {}: run scripts/pg-build {major} (it builds there)",
        build.display()
    );
    (src, build)
}

/// A directory for one `pg_regress` run, owned by the server's user (the
/// server writes into `results/` and reads `data/`): the sources' `sql`,
/// `expected`, `data`, schedule and resultmap, the build's `pg_regress`
/// and its loadable modules; `pg_regress` runs there as that user.
/// Returns it and the schedule to run.
fn workdir(major: u32, name: &str) -> (PathBuf, String) {
    let (src, build) = regress_trees(major);
    let w = std::env::temp_dir().join(format!("pgdbg-regress-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&w);
    std::fs::create_dir_all(&w).unwrap();
    let mut cp = Command::new("cp");
    cp.arg("-r");
    for d in [
        "sql",
        "expected",
        "data",
        "input",
        "output",
        "parallel_schedule",
        "resultmap",
    ] {
        if src.join(d).exists() {
            cp.arg(src.join(d));
        }
    }
    for f in std::fs::read_dir(&build).unwrap().flatten() {
        let p = f.path();
        if p.file_name() == Some("pg_regress".as_ref()) || p.extension().is_some_and(|e| e == "so")
        {
            cp.arg(p);
        }
    }
    let st = cp.arg(&w).status().expect("run cp");
    assert!(st.success(), "copy the regression suite to {}", w.display());
    let st = Command::new("chown")
        .args(["-R", "pgdbg"])
        .arg(&w)
        .status()
        .expect("run chown");
    assert!(st.success(), "chown pgdbg {}", w.display());
    let schedule = if full() {
        "parallel_schedule".to_string()
    } else {
        let all = std::fs::read_to_string(w.join("parallel_schedule")).unwrap();
        let mut lines = Vec::new();
        let mut n = 0;
        for l in all.lines().filter(|l| l.starts_with("test:")) {
            if n >= SUBSET_TESTS {
                break;
            }
            n += l.split_whitespace().count() - 1;
            lines.push(l);
        }
        std::fs::write(w.join("subset_schedule"), lines.join("\n") + "\n").unwrap();
        "subset_schedule".to_string()
    };
    (w, schedule)
}

/// How many tests a schedule names.
fn tests_in(w: &Path, schedule: &str) -> usize {
    std::fs::read_to_string(w.join(schedule))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("test:"))
        .map(|l| l.split_whitespace().count() - 1)
        .sum()
}

/// `pg_regress` as `make installcheck` runs it (one test at a time:
/// `--max-connections=1`), against the test cluster, as the server's
/// user; its output, whether it passed, and how long it took.
fn pg_regress(cl: &Cluster, major: u32, w: &Path, schedule: &str) -> (String, bool, Duration) {
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", "pgdbg", "--", "./pg_regress"])
        .args(["--inputdir=.", "--outputdir=.", "--dlpath=."])
        .arg(format!(
            "--bindir={}",
            pg_prefix(major).join("bin").display()
        ))
        .arg(format!("--host={}", cl.dir.display()))
        .args(["--port=5432", "--user=postgres"])
        .args(["--max-concurrent-tests=20", "--max-connections=1"])
        .arg(format!("--schedule={schedule}"));
    if major >= 16 {
        cmd.arg("--expecteddir=.");
    }
    for v in [
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGDATABASE",
        "PGOPTIONS",
        "PGSERVICE",
    ] {
        cmd.env_remove(v);
    }
    let t0 = Instant::now();
    let o = cmd
        .current_dir(w)
        .stdin(Stdio::null())
        .output()
        .expect("run pg_regress");
    let took = t0.elapsed();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let n = tests_in(w, schedule);
    // 15: " All 217 tests passed. ", 18: "# All 231 tests passed."
    let passed = o.status.success() && text.contains(&format!("All {n} tests passed"));
    (text, passed, took)
}

/// The PIDs of the client backends whose connections the server logged
/// in `log` ("connection authorized", log_line_prefix '%m [%p] ').
fn connections(log: &str) -> Vec<i32> {
    log.lines()
        .filter(|l| l.contains("LOG:  connection authorized:"))
        .map(|l| {
            l.split_once(" [")
                .and_then(|(_, r)| r.split_once(']'))
                .and_then(|(p, _)| p.parse().ok())
                .unwrap_or_else(|| panic!("no [PID] in the log line {l:?}"))
        })
        .collect()
}

fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

fn server_log_since(cl: &Cluster, from: usize) -> String {
    let all = std::fs::read(cl.dir.join("postmaster.log")).unwrap_or_default();
    String::from_utf8_lossy(&all[from.min(all.len())..]).into_owned()
}

fn log_len(cl: &Cluster) -> usize {
    std::fs::metadata(cl.dir.join("postmaster.log"))
        .map(|m| m.len() as usize)
        .unwrap_or(0)
}

/// The suite once under `pgdbg attach --cluster` with the script `mode`.
fn regress_under(major: u32, mode: &str) {
    let script_line = MODES.iter().find(|(m, _)| *m == mode).unwrap().1;
    let name = format!("{major}-{mode}");
    let (w, schedule) = workdir(major, &name);
    let cl = Cluster::start_with(major, &["log_connections=on"]);
    let script = write_script(&format!("regress-{name}"), &[script_line]);
    let (cap, out, err) = files(&w);
    let inherited = mode == "count-inherited";
    let mut p = Command::new(pgdbg_bin())
        .args(["attach", "--cluster", cl.dir.to_str().unwrap()])
        .args(["--script", script.to_str().unwrap(), "--for", "3600s"])
        .arg("--capture")
        .arg(&cap)
        .env_remove("DEBUGINFOD_URLS")
        // `count`: the workers' course (a script of one `count` line is
        // otherwise served without workers: `count-inherited`); `waits`
        // with the statements marked by uprobes opened once on the
        // postmaster, as by default
        .envs((mode == "count").then_some(("PGDBG_NO_INHERIT", "1")))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn pgdbg");
    let sup = p.id() as i32;
    let read = |f: &Path| std::fs::read_to_string(f).unwrap_or_default();
    let started = if inherited {
        "in every process of the cluster from its fork on"
    } else {
        "running the script"
    };
    wait_until("pgdbg's banner", Duration::from_secs(60), || {
        read(&err).contains(started) || matches!(p.try_wait(), Ok(Some(_)))
    });
    let banner = read(&err);
    assert!(banner.contains(started), "pgdbg ended first: {banner}");
    if inherited {
        return regress_inherited(major, &cl, &mut p, &w, &schedule);
    }
    assert!(
        !banner.contains("looked for every 100 ms"),
        "process events refused here: {banner}"
    );
    fail_if_rt_refused(&banner);
    spares_ready(sup);
    let from = log_len(&cl);
    let (regress, passed, took) = pg_regress(&cl, major, &w, &schedule);
    let log = server_log_since(&cl, from);
    let code = interrupt(&mut p, &err);
    let stderr = read(&err);
    // said at any time (a worker started ahead later, refused)
    fail_if_rt_refused(&stderr);
    // kept with the run's files when a check fails
    let _ = std::fs::write(w.join("postmaster.log"), &log);
    let conns = connections(&log);
    let attached: BTreeSet<i32> = read_events(&cap, "attach")
        .iter()
        .filter_map(|e| e["pid"].as_i64().map(|p| p as i32))
        .collect();
    let at_fork: Option<usize> = stderr.lines().find_map(|l| {
        l.strip_prefix("pgdbg: ")?
            .split_once(" new backend")
            .filter(|(_, r)| {
                r.starts_with(" attached at their fork")
                    || r.starts_with("s attached at their fork")
            })
            .and_then(|(n, _)| n.parse().ok())
    });
    // pgdbg's own lines (not a backend's), e.g. a process found by
    // looking that ended first
    for l in stderr
        .lines()
        .filter(|l| !l.contains("its capture ends here"))
    {
        eprintln!("  {l}");
    }
    eprintln!(
        "regress {major} {mode}: {schedule}, {} tests, {:.1} s under pgdbg; {} connections in the log, {} backends attached, {:?} at their fork; pgdbg exit {code}",
        tests_in(&w, &schedule),
        took.as_secs_f64(),
        conns.len(),
        attached.len(),
        at_fork
    );
    let tail = |s: &str| {
        s.lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        passed,
        "pg_regress under pgdbg ({mode}) did not pass as without it:\n{}\n{}",
        tail(&regress),
        std::fs::read_to_string(w.join("regression.diffs")).unwrap_or_default()
    );
    cl.assert_no_crash();
    assert!(
        !log.contains("terminated by signal"),
        "a backend died of a signal:\n{log}"
    );
    let unique: BTreeSet<i32> = conns.iter().copied().collect();
    assert_eq!(
        unique.len(),
        conns.len(),
        "a PID of two connections (reused during the run): the log cannot tell which was attached"
    );
    assert!(
        conns.len() > tests_in(&w, &schedule),
        "too few connections logged:\n{log}"
    );
    // every client backend of the run has an attach event, and nothing
    // else was attached ...
    let never: Vec<i32> = conns
        .iter()
        .copied()
        .filter(|p| !attached.contains(p))
        .collect();
    assert!(
        never.is_empty(),
        "{} of {} backends of the run never attached: {never:?}\n{stderr}",
        never.len(),
        conns.len()
    );
    let other: Vec<&i32> = attached.difference(&unique).collect();
    assert!(
        other.is_empty(),
        "attached, not a connection of the run: {other:?}"
    );
    // ... and as many were taken at their fork, stopped before their
    // first command until the script was armed: all of them (none found
    // by looking after the fact, none reached only after its startup)
    assert_eq!(
        at_fork,
        Some(conns.len()),
        "not every backend of the run attached at its fork:\n{stderr}"
    );
    // (not checked: "N ended before pgdbg could attach": a child of the
    // postmaster found by looking, still with the postmaster's title, gone
    // by the time its worker started: none of the run's connections, each
    // of which is checked above to have been attached)
    for bad in [
        "after their startup",
        "fork events were lost",
        "failed after attaching",
        "failed to attach",
    ] {
        assert!(!stderr.contains(bad), "pgdbg said {bad:?}:\n{stderr}");
    }
    assert!(code == 0 || code == 130, "pgdbg exit {code}:\n{stderr}");
    if mode == "waits" {
        // every statement marked by the uprobes the cluster's processes
        // inherit, none lost, each worker given its backend's
        assert!(
            banner.contains("statements marked in every backend from its fork on"),
            "{banner}"
        );
        let text = read(&out);
        // backends with a timed statement (`[PID]   N x   T ms  TEXT`)
        let timed: BTreeSet<&str> = text
            .lines()
            .filter(|l| l.contains(" x ") && l.contains(" ms "))
            .filter_map(|l| l.strip_prefix('[')?.split_once(']').map(|(p, _)| p))
            .collect();
        eprintln!(
            "regress {major} waits: {} of {} backends with timed statements",
            timed.len(),
            conns.len()
        );
        // (a session of only utility statements, e.g. CREATE DATABASE, has
        // none: 3 of 44 in the default subset)
        assert!(
            timed.len() * 10 >= conns.len() * 8,
            "{} of {} backends with timed statements",
            timed.len(),
            conns.len()
        );
        for bad in ["could not be had from pgdbg's leader", "ring was full"] {
            assert!(
                !text.contains(bad) && !stderr.contains(bad),
                "pgdbg said {bad:?}"
            );
        }
    }
    nothing_left(cl.postmaster_pid);
    let _ = std::fs::remove_dir_all(&w);
}

/// `count-inherited`, once its banner is out: no worker, no attach; every
/// client backend of the run is counted from its fork (its `[PID] count:
/// backend PID (from its fork, ...)` block: a process is listed once it
/// has a call, and each backend's start locks catalogs with
/// `LockRelationOid`), no call lost, the suite passes, nothing crashed,
/// nothing left traced.
fn regress_inherited(
    major: u32,
    cl: &Cluster,
    p: &mut std::process::Child,
    w: &Path,
    schedule: &str,
) {
    let (cap, out, err) = files(w);
    let read = |f: &Path| std::fs::read_to_string(f).unwrap_or_default();
    let from = log_len(cl);
    let (regress, passed, took) = pg_regress(cl, major, w, schedule);
    let log = server_log_since(cl, from);
    let code = interrupt(p, &err);
    let (stdout, stderr) = (read(&out), read(&err));
    let _ = std::fs::write(w.join("postmaster.log"), &log);
    let conns = connections(&log);
    eprintln!(
        "regress {major} count-inherited: {schedule}, {} tests, {:.1} s under pgdbg; {} connections in the log; pgdbg exit {code}; {}",
        tests_in(w, schedule),
        took.as_secs_f64(),
        conns.len(),
        stderr.lines().last().unwrap_or_default()
    );
    assert!(
        passed,
        "pg_regress under pgdbg (count-inherited) did not pass as without it:\n{regress}\n{}",
        std::fs::read_to_string(w.join("regression.diffs")).unwrap_or_default()
    );
    cl.assert_no_crash();
    assert!(
        conns.len() > tests_in(w, schedule),
        "too few connections logged:\n{log}"
    );
    let uncounted: Vec<i32> = conns
        .iter()
        .copied()
        .filter(|pid| !stdout.contains(&format!("[{pid}] count: backend {pid} (from its fork, ")))
        .collect();
    assert!(
        uncounted.is_empty(),
        "{} of {} backends of the run not counted from their fork: {uncounted:?}\n{stderr}",
        uncounted.len(),
        conns.len()
    );
    assert!(
        !stderr.contains("calls not counted"),
        "calls lost:\n{stderr}"
    );
    assert!(
        read_events(&cap, "attach").is_empty(),
        "a backend was attached"
    );
    assert!(code == 0 || code == 130, "pgdbg exit {code}:\n{stderr}");
    nothing_left(cl.postmaster_pid);
    let _ = std::fs::remove_dir_all(w);
}

/// Nothing of the cluster of `postmaster` left traced or stopped.
fn nothing_left(postmaster: i32) {
    for pid in children(postmaster) {
        assert_eq!(tracer_pid(pid), 0, "process {pid} left traced");
        assert!(
            !proc_state(pid).starts_with('T') && !proc_state(pid).starts_with('t'),
            "process {pid} left stopped"
        );
    }
}

/// A run's capture, pgdbg's standard output and its standard error, in
/// the run's directory `w`.
fn files(w: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (
        w.join("capture.jsonl"),
        w.join("pgdbg.out"),
        w.join("pgdbg.err"),
    )
}

/// SIGINT to pgdbg (its workers end their scripts and detach); its exit
/// code, or a failure (its stderr `err`) if it runs on 180 s after.
fn interrupt(p: &mut std::process::Child, err: &Path) -> i32 {
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(p.id() as i32, libc::SIGINT) };
    let t0 = Instant::now();
    loop {
        if let Some(st) = p.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if t0.elapsed() > Duration::from_secs(180) {
            let _ = p.kill();
            panic!(
                "pgdbg did not end within 180 s of SIGINT: {}",
                std::fs::read_to_string(err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// PGDBG_REGRESS_FULL only: the whole suite without pgdbg, for its time.
fn regress_alone(major: u32) {
    if !full() {
        eprintln!(
            "PGDBG_REGRESS_FULL unset: the run without pgdbg is only timed with the full suite"
        );
        return;
    }
    let (w, schedule) = workdir(major, &format!("{major}-alone"));
    let cl = Cluster::start_with(major, &["log_connections=on"]);
    let from = log_len(&cl);
    let (regress, passed, took) = pg_regress(&cl, major, &w, &schedule);
    let conns = connections(&server_log_since(&cl, from)).len();
    eprintln!(
        "regress {major} without pgdbg: {schedule}, {} tests, {:.1} s, {conns} connections in the log",
        tests_in(&w, &schedule),
        took.as_secs_f64()
    );
    assert!(passed, "pg_regress fails without pgdbg:\n{regress}");
    let _ = std::fs::remove_dir_all(&w);
}

#[test]
#[ignore = "only times the whole suite (PGDBG_REGRESS_FULL): see the module comment"]
fn regress_15_alone() {
    regress_alone(15);
}

#[test]
#[ignore = "only times the whole suite (PGDBG_REGRESS_FULL): see the module comment"]
fn regress_18_alone() {
    regress_alone(18);
}

#[test]
fn regress_15_count() {
    regress_under(15, "count");
}

#[test]
fn regress_15_count_inherited() {
    regress_under(15, "count-inherited");
}

#[test]
fn regress_18_count_inherited() {
    regress_under(18, "count-inherited");
}

#[test]
fn regress_15_waits_trace() {
    regress_under(15, "waits");
}

#[test]
fn regress_15_plancache() {
    regress_under(15, "plancache");
}

#[test]
fn regress_18_count() {
    regress_under(18, "count");
}

#[test]
fn regress_18_waits_trace() {
    regress_under(18, "waits");
}

#[test]
fn regress_18_plancache() {
    regress_under(18, "plancache");
}

/// Fails in one line where pgdbg said its workers started ahead wait at
/// the normal priority (real-time refused, or no socket filter): the
/// sessions they are late for would fail the test, less clearly.
fn fail_if_rt_refused(stderr: &str) {
    if let Some(l) = stderr
        .lines()
        .find(|l| l.contains("at the normal priority"))
    {
        panic!("real-time priority refused here (needs CAP_SYS_NICE or RLIMIT_RTPRIO): {l}");
    }
}
