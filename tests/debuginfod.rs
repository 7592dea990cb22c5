//! debuginfod: a `strip --strip-all` copy of the 15 and 18 builds gets its
//! full DWARF from elfutils' own `debuginfod` server program serving the
//! separated debug files on 127.0.0.1: `break choose_custom_plan` (a static
//! function, known only from DWARF) hits, the file lands in the cache that
//! elfutils' client shares, the next attach uses the cache with no server;
//! a server without the build-id, a server that sends another build's file
//! and one that stalls give one line each and the layout pack (more bad
//! servers in tests/debuginfod_bounds.rs).

use common::debuginfod::*;
use common::*;
use pgdbg_testbed as common;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A fake server on 127.0.0.1 for one request: answers with `head` and
/// `body`, then keeps the connection open for `linger` (a stalled download).
fn one_shot_server(
    head: String,
    body: Vec<u8>,
    linger: Duration,
) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
    let h = std::thread::spawn(move || {
        l.set_nonblocking(false).unwrap();
        if let Ok((mut s, _)) = l.accept() {
            let mut req = [0u8; 4096];
            let _ = s.read(&mut req);
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
            let _ = s.flush();
            std::thread::sleep(linger);
        }
    });
    (url, h)
}

fn run(mut c: Command) -> (i32, String, String) {
    let out = c.output().expect("run pgdbg");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Nothing but `debuginfo` (no temporary file) in the build-id's directory.
fn cache_entries(cache: &Path, id: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(cache.join(id))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn stripped_copy_gets_dwarf(major: u32) {
    let other = if major == 15 { 18 } else { 15 };
    let prefix = pg_prefix(major);
    let work =
        std::env::temp_dir().join(format!("pgdbg-debuginfod-{major}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("debug")).unwrap();
    std::fs::create_dir_all(work.join("empty")).unwrap();
    // the debug file, as a -dbgsym package holds it
    let full = prefix.join("bin/postgres");
    let debug_file = work.join("debug/postgres.debug");
    let st = Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&debug_file)
        .status()
        .unwrap();
    assert!(st.success());
    let id = build_id(&full);
    assert_eq!(build_id(&debug_file), id);

    let mut cl = Cluster::start(major);
    cl.seed(&["mediumtab"]);
    let expected_generic = planner_generic_cost(&cl);
    let stripped = cl.restart_from_stripped_copy(&prefix, &work.join("inst"), "--strip-all");
    let mut a = session_after_six(&cl);
    let pid = a.pid();
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(),
        stripped
    );

    let mut server = Debuginfod::start(&work.join("debug"), &work.join("db.sqlite"), 1);
    let mut empty = Debuginfod::start(&work.join("empty"), &work.join("empty.sqlite"), 0);
    let (status, _) = http_get(empty.port, &format!("/buildid/{id}/debuginfo")).unwrap();
    assert_eq!(status, 404);

    // 1. Servers in order: the first has no file for the build-id (its
    // miss is not reported once another server has it), the second sends
    // it; the download is reported in one line; break choose_custom_plan
    // hits in the 7th execution with DWARF's view of the parameters.
    let cache = work.join("cache");
    let urls = format!("{} {}", empty.url, server.url);
    let script = write_script(
        &format!("debuginfod{major}"),
        &[
            "info",
            "break choose_custom_plan",
            "continue",
            "print plansource->generic_cost",
            "print plansource->num_custom_plans",
            "bt 2",
            "detach",
        ],
    );
    let child = pgdbg_env(
        &[
            "attach",
            &pid.to_string(),
            "--script",
            script.to_str().unwrap(),
        ],
        &urls,
        &cache,
        &[],
    )
    .spawn()
    .unwrap();
    let p = Pgdbg { child };
    let t0 = Instant::now();
    wait_until("pgdbg to attach", Duration::from_secs(120), || {
        tracer_pid(pid) != 0
    });
    let attach_secs = t0.elapsed().as_secs_f64();
    let h = a.spawn_text("execute s1(10,30)");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{out}\n{err}");
    a.rejoin(h).unwrap();
    let downloaded: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("Downloaded debug info for"))
        .collect();
    assert_eq!(
        downloaded,
        [format!(
            "Downloaded debug info for {} from {}: {}",
            stripped.display(),
            server.url,
            downloaded
                .first()
                .and_then(|l| l.rsplit(": ").next())
                .unwrap_or("?")
        )],
        "{err}"
    );
    eprintln!(
        "PostgreSQL {major}: {} (attached after {attach_secs:.2} s)",
        downloaded[0]
    );
    assert!(
        !err.contains("pgdbg: debuginfod"),
        "no failure line:\n{err}"
    );
    assert!(!err.contains("layout pack"), "{err}");
    let cached = cache.join(&id).join("debuginfo");
    assert!(
        out.contains(&format!(
            "debug info:  debuginfod {} (cached in {})",
            server.url,
            cached.display()
        )),
        "{out}"
    );
    assert!(out.contains("choose_custom_plan"), "{out}");
    let vals = print_values(&out);
    assert_eq!(vals.len(), 2, "{out}");
    let generic: f64 = vals[0].parse().unwrap();
    assert!(
        (generic - expected_generic).abs() < 0.006,
        "generic_cost {generic} but EXPLAIN says {expected_generic}"
    );
    assert_eq!(vals[1], "6", "{out}");
    let bt: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    assert!(
        bt[0].starts_with("#0  choose_custom_plan (plansource=0x")
            && bt[0].contains("plancache.c:"),
        "{out}"
    );
    // the cache: elfutils' layout, the served file byte for byte, read-only
    assert_eq!(cache_entries(&cache, &id), ["debuginfo"]);
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        std::fs::read(&debug_file).unwrap()
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&cached).unwrap().permissions().mode() & 0o777,
        0o400
    );
    assert_eq!(tracer_pid(pid), 0);

    assert_eq!(debuginfo_requests(server.port), 1);

    // 2. No server any more: the cache serves the next attach, silently.
    server.stop();
    let (code, out, err) = run(pgdbg_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "info",
            "--ex",
            "break choose_custom_plan",
            "--ex",
            "detach",
        ],
        &urls,
        &cache,
        &[],
    ));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(err, "", "the cache, no server asked");
    assert!(
        out.contains(&format!(
            "debug info:  {} (debuginfod cache)",
            cached.display()
        )),
        "{out}"
    );
    assert!(out.contains("Breakpoint 1 at choose_custom_plan"), "{out}");

    // 3. A server without the build-id: one line, then the layout pack.
    let cache2 = work.join("cache2");
    let (code, out, err) = run(pgdbg_env(
        &["attach", &pid.to_string(), "-q", "--ex", "info"],
        &empty.url,
        &cache2,
        &[],
    ));
    assert_eq!(code, 0, "{out}\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(
        lines[0],
        format!(
            "pgdbg: debuginfod {}: no debug info for build-id {id} (HTTP 404)",
            empty.url
        )
    );
    assert!(
        lines[1].starts_with(&format!("pgdbg: no debug info for {}", stripped.display()))
            && lines[1].contains(&format!("layout pack for PostgreSQL {major}")),
        "{err}"
    );
    assert!(out.contains("layout pack for PostgreSQL"), "{out}");
    assert!(!cache2.join(&id).join("debuginfo").exists());
    // several backends: the supervisor asks the servers once, its workers
    // only read the cache (no line, no request from each of them)
    let mut b = cl.connect();
    let script = write_script(&format!("debuginfod-multi{major}"), &["wait"]);
    let (code, out, err) = run(pgdbg_env(
        &[
            "attach",
            &pid.to_string(),
            &b.pid().to_string(),
            "-q",
            "--script",
            script.to_str().unwrap(),
        ],
        &empty.url,
        &cache2,
        &[],
    ));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(err.matches("pgdbg: debuginfod").count(), 1, "{err}");
    assert_eq!(out.matches("Client: ClientRead").count(), 2, "{out}");
    assert_eq!(b.query_one_i64("select 8"), 8);
    // ours above, 1., 3. and the supervisor
    assert_eq!(debuginfo_requests(empty.port), 4);
    drop(b);
    empty.stop();

    // 4. A server that sends another build's file (with DWARF): refused,
    // nothing cached.
    let wrong = std::fs::read(pg_prefix(other).join("bin/postgres")).unwrap();
    let (wrong_url, h) = one_shot_server(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            wrong.len()
        ),
        wrong,
        Duration::ZERO,
    );
    let other_id = build_id(&pg_prefix(other).join("bin/postgres"));
    let (code, out, err) = run(pgdbg_env(
        &["attach", &pid.to_string(), "-q", "--ex", "info"],
        &wrong_url,
        &cache2,
        &[],
    ));
    h.join().unwrap();
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        err.lines().next().unwrap(),
        format!(
            "pgdbg: debuginfod {wrong_url}: the server sent the debug file of build-id {other_id}, not {id}"
        )
    );
    assert!(out.contains("layout pack for PostgreSQL"), "{out}");
    assert_eq!(cache_entries(&cache2, &id), Vec::<String>::new());

    // 5. A server that stalls mid-download: given up after
    // DEBUGINFOD_TIMEOUT, the partial file removed.
    let (stall_url, h) = one_shot_server(
        "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n".into(),
        elf_looking(1000),
        Duration::from_secs(6),
    );
    let t0 = Instant::now();
    let (code, out, err) = run(pgdbg_env(
        &["attach", &pid.to_string(), "-q", "--ex", "info"],
        &stall_url,
        &cache2,
        &[("DEBUGINFOD_TIMEOUT", "2")],
    ));
    let took = t0.elapsed();
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        err.lines().next().unwrap(),
        format!(
            "pgdbg: debuginfod {stall_url}: download cut short after 1.0 kB of 1.0 MB: only 1.0 kB in 2 s, {}",
            slow_tail(2)
        )
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(cache_entries(&cache2, &id), Vec::<String>::new());
    h.join().unwrap();

    // 6. --debug-file and --symbols never ask a server.
    let (code, out, err) = run(pgdbg_env(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--symbols",
            repo()
                .join(format!("symbols/pg{major}.json"))
                .to_str()
                .unwrap(),
            "--ex",
            "info",
        ],
        "http://127.0.0.1:1",
        &cache2,
        &[],
    ));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!err.contains("pgdbg: debuginfod"), "{err}");

    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.query_one_i64("select 7"), 7);
    drop(a);
    cl.assert_no_crash();
    cl.stop_stripped();
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn stripped_copy_of_15_gets_dwarf_from_debuginfod() {
    stripped_copy_gets_dwarf(15);
}

#[test]
fn stripped_copy_of_18_gets_dwarf_from_debuginfod() {
    stripped_copy_gets_dwarf(18);
}
