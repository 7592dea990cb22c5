//! A backend that exits while a command observes it (its session closes
//! its connection): what it recorded up to its end is reported, with the
//! same totals as the statements it ran, and it is said to have ended.
//! On one backend (`attach PID --ex`) and in a whole cluster (`attach
//! --cluster --script`).

use common::*;
use pgdbg_testbed as common;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::time::Duration;

/// Rows inserted one statement at a time, then the session closes.
const ROWS: u64 = 37;
/// `pg_sleep` calls made before the session closes.
const SLEEPS: u64 = 15;

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-ended-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// A cache directory whose debug index is the usual one (a link to it) and
/// whose wait names are empty: the names of the waits must be learned
/// afresh, as on a machine where this build was never traced.
fn fresh_wait_names(key: &str) -> PathBuf {
    let index = match std::env::var_os("PGDBG_INDEX_CACHE") {
        Some(d) => PathBuf::from(d),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"))
            .join("pgdbg")
            .join("index"),
    };
    std::fs::create_dir_all(&index).unwrap();
    let dir = temp(&format!("cache-{key}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&index, dir.join("index")).unwrap();
    dir.join("index")
}

/// pgdbg with `PGDBG_INDEX_CACHE` set to `cache`, stdout piped or to a file;
/// with `no_inherit`, `PGDBG_NO_INHERIT` set: `--cluster`'s workers do all
/// (a script of one `count` line is otherwise served without workers,
/// tests/cluster_inherit.rs; one `waits trace` line has its statements
/// marked by uprobes opened once for the cluster).
fn spawn_with_cache(
    args: &[&str],
    cache: &std::path::Path,
    stdout: Option<&std::path::Path>,
    no_inherit: bool,
) -> Pgdbg {
    let mut cmd = std::process::Command::new(pgdbg_bin());
    if no_inherit {
        cmd.env("PGDBG_NO_INHERIT", "1");
    }
    let child = cmd
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .env("PGDBG_INDEX_CACHE", cache)
        .stdin(std::process::Stdio::null())
        .stdout(match stdout {
            Some(p) => std::process::Stdio::from(std::fs::File::create(p).unwrap()),
            None => std::process::Stdio::piped(),
        })
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn pgdbg");
    Pgdbg { child }
}

fn all_events(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("capture lines are JSON"))
        .collect()
}

/// The session's work: `SLEEPS` short sleeps and `ROWS` single-row inserts.
fn work(c: &mut Client) {
    for _ in 0..SLEEPS {
        c.simple_text("select pg_sleep(0.01)::text");
    }
    for i in 0..ROWS {
        c.exec(&format!("insert into ended_t values ({i})"));
    }
}

/// `attach PID -q --ex CMD`, started once pgdbg says `ready` (a line
/// starting with it on stdout), then the session works and closes; the
/// whole standard output and error once pgdbg has ended.
fn observe_until_exit(cl: &Cluster, cmd: &str, ready: &str) -> (i32, String, String) {
    observe_work_until_exit(cl, cmd, ready, work)
}

/// `observe_until_exit` with `work` as the session's work.
fn observe_work_until_exit(
    cl: &Cluster,
    cmd: &str,
    ready: &str,
    work: fn(&mut Client),
) -> (i32, String, String) {
    let mut c = cl.connect();
    c.exec("create table if not exists ended_t (i int)");
    let pid = c.pid();
    let cache = fresh_wait_names(&format!("one-{pid}"));
    let mut p = spawn_with_cache(
        &["attach", &pid.to_string(), "-q", "--ex", cmd],
        &cache,
        None,
        false,
    );
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let mut head = String::new();
    loop {
        let mut l = String::new();
        assert!(out.read_line(&mut l).unwrap() > 0, "pgdbg ended: {head}");
        head.push_str(&l);
        if l.contains(ready) {
            break;
        }
    }
    work(&mut c);
    drop(c);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (_, _, err) = p.wait(Duration::from_secs(90));
    (pid, format!("{head}{rest}"), err)
}

fn calls(out: &str, f: &str) -> u64 {
    out.lines()
        .find_map(|l| {
            let r = l.strip_prefix(f)?;
            r.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no line for {f} in:\n{out}"))
}

/// The count of `Timeout: PgSleep` waits in a `waits trace` summary.
fn pg_sleeps(summary: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("Timeout: PgSleep")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// How many times a `waits trace` summary says statement `text` ran (its
/// line `N x  T ms  TEXT`).
fn statements(summary: &str, text: &str) -> u64 {
    summary
        .lines()
        .find(|l| l.trim_end().ends_with(text) && l.contains(" x "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn count_of_backend_that_exits() {
    let cl = Cluster::start(15);
    let (pid, out, err) = observe_until_exit(&cl, "count heap_insert --for 60s", "count: ");
    assert_eq!(calls(&out, "heap_insert"), ROWS, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains(&format!("{pid}")) && format!("{out}{err}").contains("exit"),
        "the backend is said to have ended:\n{out}\n{err}"
    );
    cl.assert_no_crash();
}

#[test]
fn latency_of_backend_that_exits() {
    let cl = Cluster::start(15);
    let (_, out, err) = observe_until_exit(&cl, "latency heap_insert --for 60s", "latency: ");
    assert_eq!(calls(&out, "heap_insert"), ROWS, "{out}\n{err}");
    cl.assert_no_crash();
}

#[test]
fn waits_trace_of_backend_that_exits() {
    let cl = Cluster::start(15);
    let (pid, out, err) =
        observe_until_exit(&cl, "waits trace --for 60s --quiet", "waits: tracing");
    assert!(pg_sleeps(&out) >= SLEEPS, "{out}\n{err}");
    assert!(
        out.contains(&format!("backend {pid} ended after")),
        "{out}\n{err}"
    );
    assert!(!out.contains("not reported"), "{out}\n{err}");
    // named although the backend could not be asked at the end
    assert!(!out.contains("could not be named"), "{out}\n{err}");
    assert!(!out.contains("unresolved"), "{out}\n{err}");
    cl.assert_no_crash();
}

/// A workload whose waits are the same in any backend (the catalog entries
/// it needs in shared buffers first: `warm`): `SLEEPS` short sleeps and
/// a few trivial selects.
fn sleeps(c: &mut Client) {
    for _ in 0..SLEEPS {
        c.simple_text("select pg_sleep(0.01)::text");
    }
    for _ in 0..5 {
        c.simple_text("select 1::text");
    }
}

fn warm(c: &mut Client) {
    c.simple_text("select pg_sleep(0.01)::text");
    c.simple_text("select 1::text");
}

/// `attach --cluster --script S`: a backend that connects, is attached,
/// works and closes; its totals are in the capture, and the final line
/// counts it as exited.
fn cluster_case(script_line: &str, key: &str) -> (i32, Vec<serde_json::Value>, String, String) {
    let (pid, _, ev, text, err) = cluster_case_with(script_line, key, work, false, true);
    (pid, ev, text, err)
}

/// The lines of backend `pid` in a `--cluster` output, without their
/// `[PID] ` prefix.
fn lines_of(text: &str, pid: i32) -> String {
    let tag = format!("[{pid}] ");
    text.lines()
        .filter_map(|l| l.strip_prefix(tag.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `cluster_case` with `work` as the session's work; with `stayer`, a
/// backend connected before pgdbg starts does the same work first, under
/// the same script, and stays (its PID returned second); `no_inherit`: see
/// [`spawn_with_cache`].
fn cluster_case_with(
    script_line: &str,
    key: &str,
    work: fn(&mut Client),
    stayer: bool,
    no_inherit: bool,
) -> (i32, Option<i32>, Vec<serde_json::Value>, String, String) {
    let cl = Cluster::start(15);
    let mut setup = cl.connect();
    setup.exec("create table if not exists ended_t (i int)");
    warm(&mut setup);
    let mut stay = stayer.then(|| cl.connect());
    let stay_pid = stay.as_mut().map(|c| c.pid());
    let cap = temp(&format!("{key}.jsonl"));
    let out = temp(&format!("{key}.out"));
    let script = write_script(&format!("ended-{key}"), &[script_line]);
    let cache = fresh_wait_names(key);
    let p = spawn_with_cache(
        &[
            "attach",
            "--cluster",
            cl.dir.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            // the end: Ctrl-C once the backend's end is in the capture
            // (below); this only bounds a run that went wrong
            "--for",
            "90s",
            "--capture",
            cap.to_str().unwrap(),
        ],
        &cache,
        Some(&out),
        no_inherit,
    );
    let setup_pid = setup.pid();
    wait_until("the cluster attached", Duration::from_secs(60), || {
        tracer_pid(setup_pid) != 0
    });
    // the script is armed once the backend's arm event is in the capture
    let armed = |pid: i32| {
        wait_until("the script armed", Duration::from_secs(60), || {
            all_events(&cap)
                .iter()
                .any(|e| e["pid"] == pid && e["event"] != "attach")
                || std::fs::read_to_string(&out)
                    .unwrap_or_default()
                    .lines()
                    .any(|l| l.contains(&pid.to_string()) && !l.contains("attach"))
        })
    };
    if let (Some(s), Some(p)) = (stay.as_mut(), stay_pid) {
        wait_until(
            "the staying backend attached",
            Duration::from_secs(60),
            || tracer_pid(p) != 0,
        );
        armed(p);
        // the statement the new backend below runs first, for the same
        // statements in both
        assert_eq!(s.pid(), p);
        work(s);
    }
    let mut c = cl.connect();
    let pid = c.pid();
    wait_until("the new backend attached", Duration::from_secs(60), || {
        tracer_pid(pid) != 0
    });
    armed(pid);
    work(&mut c);
    drop(c);
    // its worker wrote the backend's end (after its summary's events);
    // then Ctrl-C ends the script for the backend that stays, as a person
    // ends a `--cluster` run
    wait_until(
        "the backend's end in the capture",
        Duration::from_secs(60),
        || {
            all_events(&cap)
                .iter()
                .any(|e| e["pid"] == pid && e["event"] == "exit")
        },
    );
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let (code, _, err) = p.wait(Duration::from_secs(120));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(code == 0 || code == 130, "exit {code}\n{text}{err}");
    let ev = all_events(&cap);
    let _ = std::fs::remove_file(&cap);
    let _ = std::fs::remove_file(&out);
    cl.assert_no_crash();
    drop(stay);
    (pid, stay_pid, ev, text, err)
}

#[test]
fn cluster_count_of_backend_that_exits() {
    let (pid, ev, text, err) = cluster_case("count heap_insert", "count");
    let n = ev
        .iter()
        .find(|e| e["event"] == "count" && e["pid"] == pid)
        .and_then(|e| e["calls"].as_u64());
    assert_eq!(n, Some(ROWS), "{text}\n{err}");
    assert!(err.contains("1 exited during the script"), "{err}");
}

/// `waits trace` in a cluster: the backend that ends reports the same
/// summary (each event's count, the number of waits, the statements) as
/// one that stays and ran the same statements; the statements marked by
/// uprobes opened once for the cluster.
#[test]
fn cluster_waits_of_backend_that_exits() {
    cluster_waits_case(false);
}

/// The same with each worker's own uprobes for its backend's statements
/// (`PGDBG_NO_INHERIT`; where the cluster's cannot be had).
#[test]
fn cluster_waits_of_backend_that_exits_own_uprobes() {
    cluster_waits_case(true);
}

fn cluster_waits_case(no_inherit: bool) {
    let key = if no_inherit { "waits-own" } else { "waits" };
    let (pid, stay, _ev, text, err) =
        cluster_case_with("waits trace --quiet", key, sleeps, true, no_inherit);
    let stay = stay.unwrap();
    let (ended, stayed) = (lines_of(&text, pid), lines_of(&text, stay));
    // but for the waits for the client's next message (their number is
    // the client's timing)
    assert_eq!(
        waits_counts(&ended).workload(),
        waits_counts(&stayed).workload(),
        "the same statements, a backend that ended vs one that stays:\n{ended}\n---\n{stayed}"
    );
    assert_eq!(pg_sleeps(&ended), SLEEPS, "{ended}");
    // the statements, from the uprobes the cluster's processes inherit
    // (each worker opens none of its own), with their texts
    assert_eq!(
        err.contains("statements marked in every backend from its fork on by uprobes inherited"),
        !no_inherit,
        "{err}"
    );
    for (t, n) in [
        ("select pg_sleep(0.01)::text", SLEEPS),
        ("select 1::text", 5),
    ] {
        assert_eq!(statements(&ended, t), n, "{t} in\n{ended}");
        assert_eq!(statements(&stayed, t), n, "{t} in\n{stayed}");
    }
    // the sleeps' time, the workload's (SLEEPS x 10 ms, and what a busy
    // machine adds)
    for t in [&ended, &stayed] {
        let ms = wait_total_ms(t, "Timeout: PgSleep");
        assert!(
            ms >= SLEEPS as f64 * 10.0 * 0.99 && ms < SLEEPS as f64 * 10.0 * 3.0,
            "{ms} ms of pg_sleep for {SLEEPS} sleeps of 10 ms:\n{t}"
        );
    }
    let mine: String = text
        .lines()
        .filter(|l| l.contains(&format!("[{pid}]")) || l.contains(&pid.to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!text.contains("not reported"), "{text}\n{err}");
    assert!(!mine.contains("could not be named"), "{mine}\n{err}");
    assert!(!mine.contains("unresolved"), "{mine}\n{err}");
    assert!(
        text.contains(&format!("backend {pid} ended after")),
        "{mine}\n{text}\n{err}"
    );
    assert!(err.contains("1 exited during the script"), "{err}");
}

/// Backend `pid`'s lines in a `--cluster` run say it ended (after its
/// summary, and its worker's), and the final line counts it.
fn said_ended(pid: i32, text: &str, err: &str) {
    let mine = lines_of(text, pid);
    assert!(
        mine.contains(&format!("Backend {pid} exited with status")),
        "backend {pid} not said to have ended:\n{mine}"
    );
    assert!(
        lines_of(err, pid).contains(&format!("backend {pid} exited; its capture ends here")),
        "{err}"
    );
    assert!(err.contains("1 exited during the script"), "{err}");
}

/// The capture's `event` events of backend `pid`.
fn events_of<'a>(ev: &'a [serde_json::Value], pid: i32, event: &str) -> Vec<&'a serde_json::Value> {
    ev.iter()
        .filter(|e| e["pid"] == pid && e["event"] == event)
        .collect()
}

/// `latency`, `trace` and `trace --perf` in a cluster: the backend that
/// ends has its summary, with as many calls as its statements made, its
/// events in the capture, and is said to have ended.
#[test]
fn cluster_latency_of_backend_that_exits() {
    let (pid, ev, text, err) = cluster_case("latency heap_insert", "latency");
    let mine = lines_of(&text, pid);
    assert_eq!(calls(&mine, "heap_insert"), ROWS, "{mine}\n{err}");
    let l = events_of(&ev, pid, "latency");
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0]["calls"].as_u64(), Some(ROWS), "{l:?}");
    said_ended(pid, &text, &err);
}

/// `trace` (by ptrace or perf) of a backend that exits: its summary and
/// its events, every call, and said to have ended.
fn trace_of_backend_that_exits(script_line: &str, key: &str) {
    let (pid, ev, text, err) = cluster_case(script_line, key);
    let mine = lines_of(&text, pid);
    assert!(
        mine.contains(&format!("trace: {ROWS} calls of heap_insert")),
        "{mine}\n{err}"
    );
    assert_eq!(events_of(&ev, pid, "trace").len() as u64, ROWS);
    said_ended(pid, &text, &err);
}

#[test]
fn cluster_trace_of_backend_that_exits() {
    trace_of_backend_that_exits("trace heap_insert --quiet", "trace");
}

#[test]
fn cluster_trace_perf_of_backend_that_exits() {
    trace_of_backend_that_exits("trace heap_insert --perf --quiet", "trace-perf");
}

/// Executions of a prepared statement before the session closes: fewer
/// than the ring's reads would see between them (a few ms in all).
const EXECUTIONS: usize = 9;

/// A statement prepared and executed `EXECUTIONS` times, then the session
/// closes at once: its last decisions are still in the ring at its exit.
fn prepared(c: &mut Client) {
    c.exec("prepare ended_p as select count(*) from ended_t where i = $1");
    for i in 0..EXECUTIONS {
        c.exec(&format!("execute ended_p({i})"));
    }
}

/// `plancache` (the in-process ring) of a backend that exits: every
/// execution's decision, in order, and the backend said to have ended.
fn plancache_of_backend_that_exits(major: u32) {
    let cl = Cluster::start(major);
    let (pid, out, err) =
        observe_work_until_exit(&cl, "plancache --for 30s", "plancache: watching", prepared);
    assert!(
        out.contains("(recorded in-process, no stops)"),
        "{out}\n{err}"
    );
    let decisions: Vec<&str> = out.lines().filter(|l| l.starts_with("ended_p #")).collect();
    assert_eq!(decisions.len(), EXECUTIONS, "{out}\n{err}");
    for (k, l) in decisions.iter().enumerate() {
        assert!(l.starts_with(&format!("ended_p #{}: ", k + 1)), "{out}");
    }
    assert!(
        out.contains(&format!("plancache: {EXECUTIONS} decisions (")),
        "{out}\n{err}"
    );
    assert!(
        out.contains(&format!("Backend {pid} exited with status 0")),
        "{out}\n{err}"
    );
    assert!(
        out.contains(&format!(
            "backend {pid} ended: its ring was read at its exit"
        )),
        "{out}\n{err}"
    );
    cl.assert_no_crash();
}

#[test]
fn plancache_of_backend_that_exits_15() {
    plancache_of_backend_that_exits(15);
}

#[test]
fn plancache_of_backend_that_exits_18() {
    plancache_of_backend_that_exits(18);
}

/// `plancache` in a cluster (the case): the backend that ends has
/// every decision in the capture, in order, and is said to have ended.
#[test]
fn cluster_plancache_of_backend_that_exits() {
    let (pid, _, ev, text, err) =
        cluster_case_with("plancache", "plancache", prepared, false, true);
    let choices = events_of(&ev, pid, "plan_choice");
    let executions: Vec<i64> = choices
        .iter()
        .filter(|e| e["statement"] == "ended_p")
        .map(|e| e["execution"].as_i64().unwrap())
        .collect();
    let want: Vec<i64> = (1..=EXECUTIONS as i64).collect();
    assert_eq!(executions, want, "{}\n{err}", lines_of(&text, pid));
    assert!(
        lines_of(&text, pid).contains(&format!(
            "backend {pid} ended: its ring was read at its exit"
        )),
        "{text}\n{err}"
    );
    said_ended(pid, &text, &err);
}
