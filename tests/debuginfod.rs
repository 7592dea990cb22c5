//! debuginfod: a `strip --strip-all` copy of the 15 and 18 builds gets its
//! full DWARF from elfutils' own `debuginfod` server program serving the
//! separated debug files on 127.0.0.1: `break choose_custom_plan` (a static
//! function, known only from DWARF) hits, the file lands in the cache that
//! elfutils' client shares, the next attach uses the cache with no server;
//! a server without the build-id, a server that sends another build's file
//! and one that stalls give one line each and the layout pack.  Fake
//! servers that drip, stall, flood or send what is not ELF are each given
//! up within the bound the README documents, reading little of them.

mod common;
use common::debuginfod::*;
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// pgdbg with the debuginfod variables (and nothing else of the caller's).
fn pgdbg_env(args: &[&str], urls: &str, cache: &Path, extra: &[(&str, &str)]) -> Command {
    let mut c = Command::new(pgdbg_bin());
    c.args(args)
        .env("DEBUGINFOD_URLS", urls)
        .env("DEBUGINFOD_CACHE_PATH", cache)
        .env_remove("DEBUGINFOD_TIMEOUT")
        .env_remove("DEBUGINFOD_MAXTIME")
        .env_remove("DEBUGINFOD_MAXSIZE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        c.env(k, v);
    }
    c
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

// Bad servers: each given up within its documented bound, in one line,
// reading little of what it sends.  No cluster: `pgdbg symbols extract`
// of a stripped copy of the 15 build asks the servers like an attach
// does (same lookup), and exits non-zero as it needs the DWARF.

/// The end of the line for a server below the minimum speed.
fn slow_tail(secs: u64) -> String {
    format!(
        "less than the 100.0 kB a server must send in each DEBUGINFOD_TIMEOUT={secs} s; check the server, or raise DEBUGINFOD_TIMEOUT for a slow link"
    )
}

/// `n` bytes that begin like an ELF file.
fn elf_looking(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    v[..4].copy_from_slice(b"\x7fELF");
    v
}

/// A fake debuginfod for one request: `head`, then `body` writes what it
/// likes; `sent` counts the body's bytes that the kernel accepted.
struct Fake {
    url: String,
    sent: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Fake {
    fn start(head: &str, body: impl FnOnce(&mut TcpStream, &AtomicU64) + Send + 'static) -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        let head = head.to_string();
        let handle = std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut req = [0u8; 4096];
                let _ = s.read(&mut req);
                if s.write_all(head.as_bytes()).is_ok() {
                    body(&mut s, &counter);
                }
            }
        });
        Fake {
            url,
            sent,
            handle: Some(handle),
        }
    }

    /// The server's thread ended (it ends when pgdbg closes the
    /// connection): how many body bytes it sent.
    fn finish(mut self) -> u64 {
        let h = self.handle.take().unwrap();
        let t0 = Instant::now();
        while !h.is_finished() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{}: the connection stayed open after pgdbg gave up",
                self.url
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        h.join().unwrap();
        let n = self.sent.load(Ordering::SeqCst);
        eprintln!("  ({}: {n} bytes of body sent)", self.url);
        n
    }
}

/// Write `bytes` in pieces of `piece` every `pause` until the peer
/// closes (or all is written).
fn send(
    s: &mut TcpStream,
    sent: &AtomicU64,
    bytes: impl Iterator<Item = Vec<u8>>,
    pause: Duration,
) {
    for b in bytes {
        if s.write_all(&b).is_err() {
            return;
        }
        sent.fetch_add(b.len() as u64, Ordering::SeqCst);
        std::thread::sleep(pause);
    }
}

/// Hold the connection, sending nothing, until the peer closes it.
fn hold(s: &mut TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(120)));
    let mut b = [0u8; 64];
    while matches!(s.read(&mut b), Ok(n) if n > 0) {}
}

/// One byte a second, beginning like ELF, for `Content-Length: 100 MB`.
fn drip() -> Fake {
    Fake::start(
        "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n",
        |s, sent| {
            let bytes = b"\x7fELF".iter().copied().chain(std::iter::repeat(0));
            send(s, sent, bytes.map(|b| vec![b]), Duration::from_secs(1));
        },
    )
}

/// Headers of a 1 MB file, then nothing.
fn stall() -> Fake {
    Fake::start(
        "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n",
        |s, _| hold(s),
    )
}

/// `Content-Length: 3 GB`, 4 kB that look like ELF, then the connection
/// held open.
fn huge() -> Fake {
    Fake::start(
        "HTTP/1.1 200 OK\r\nContent-Length: 3000000000\r\n\r\n",
        |s, sent| {
            send(s, sent, std::iter::once(elf_looking(4096)), Duration::ZERO);
            hold(s);
        },
    )
}

/// No Content-Length: 3 GB as fast as the connection takes them, of
/// `first` and then zeros.
fn flood(first: &'static [u8]) -> Fake {
    Fake::start(
        "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
        move |s, sent| {
            let mut piece = vec![0u8; 64 * 1024];
            piece[..first.len()].copy_from_slice(first);
            let rest = std::iter::repeat_n(vec![0u8; 64 * 1024], 3_000_000_000 / 65536);
            send(s, sent, std::iter::once(piece).chain(rest), Duration::ZERO);
        },
    )
}

/// A stripped copy of the 15 build's postgres under `work`.
fn stripped_postgres(work: &Path) -> std::path::PathBuf {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).unwrap();
    let stripped = work.join("postgres");
    let st = Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&stripped)
        .arg(pg_prefix(15).join("bin/postgres"))
        .status()
        .unwrap();
    assert!(st.success());
    stripped
}

/// `pgdbg symbols extract BINARY` against `url`: (exit code, stderr, time),
/// pgdbg killed (and the test failed) past `limit`.
fn extract_from(
    binary: &Path,
    url: &str,
    cache: &Path,
    env: &[(&str, &str)],
    limit: Duration,
) -> (i32, String, Duration) {
    let child = pgdbg_env(
        &[
            "symbols",
            "extract",
            binary.to_str().unwrap(),
            "-o",
            "/dev/null",
        ],
        url,
        cache,
        env,
    )
    .spawn()
    .unwrap();
    let t0 = Instant::now();
    let (code, _, err) = Pgdbg { child }.wait(limit);
    (code, err, t0.elapsed())
}

/// The first line of stderr is the server's, and says `what`; the DWARF
/// is then missing (non-zero exit), nothing is left in the cache.
fn check_given_up(code: i32, err: &str, url: &str, what: &str, cache: &Path) {
    assert_ne!(code, 0, "{err}");
    let first = err.lines().next().unwrap_or("");
    assert_eq!(first, format!("pgdbg: debuginfod {url}: {what}"), "{err}");
    eprintln!("{first}");
    assert_eq!(err.matches("pgdbg: debuginfod").count(), 1, "{err}");
    let left: Vec<_> = std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left in the cache: {left:?}");
}

/// The mechanisms, with small bounds set: a drip is left by the minimum
/// speed at DEBUGINFOD_TIMEOUT, a stall likewise, a fast but long download
/// at DEBUGINFOD_MAXTIME, a body past DEBUGINFOD_MAXSIZE is cut off, and
/// what is not ELF is dropped after its first bytes.
#[test]
fn bad_debuginfod_servers_are_given_up_within_their_bounds() {
    let work = std::env::temp_dir().join(format!("pgdbg-debuginfod-bounds-{}", std::process::id()));
    let binary = stripped_postgres(&work);
    let cache = work.join("cache");
    let limit = Duration::from_secs(60);

    // a drip: 1 byte a second is less than 100 kB in 3 s
    let f = drip();
    let (code, err, took) = extract_from(
        &binary,
        &f.url,
        &cache,
        &[("DEBUGINFOD_TIMEOUT", "3")],
        limit,
    );
    let n = err
        .lines()
        .next()
        .and_then(|l| l.split("after ").nth(1))
        .and_then(|r| r.split(' ').next())
        .unwrap_or("?")
        .to_string();
    check_given_up(
        code,
        &err,
        &f.url,
        &format!(
            "download cut short after {n} B of 100.0 MB: only {n} B in 3 s, {}",
            slow_tail(3)
        ),
        &cache,
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(f.finish() < 20);

    // a stall after the headers
    let f = stall();
    let (code, err, took) = extract_from(
        &binary,
        &f.url,
        &cache,
        &[("DEBUGINFOD_TIMEOUT", "2")],
        limit,
    );
    check_given_up(
        code,
        &err,
        &f.url,
        "download cut short after 0 B of 1.0 MB: no data for 2 s (DEBUGINFOD_TIMEOUT); check the server",
        &cache,
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    f.finish();

    // fast enough for the minimum speed (200 kB a second), too long for
    // DEBUGINFOD_MAXTIME
    let f = Fake::start(
        "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n",
        |s, sent| {
            let rest = std::iter::repeat_n(vec![0u8; 20_000], 5000);
            let pieces = std::iter::once(elf_looking(20_000)).chain(rest);
            send(s, sent, pieces, Duration::from_millis(100));
        },
    );
    let (code, err, took) = extract_from(
        &binary,
        &f.url,
        &cache,
        &[("DEBUGINFOD_TIMEOUT", "2"), ("DEBUGINFOD_MAXTIME", "4")],
        limit,
    );
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.starts_with(&format!("pgdbg: debuginfod {}: download cut short after ", f.url))
            && first.ends_with(" of 100.0 MB: the download took longer than DEBUGINFOD_MAXTIME=4 s (raise it for a slow link, 0 for no limit)"),
        "{err}"
    );
    check_given_up(
        code,
        &err,
        &f.url,
        first
            .split_once(": ")
            .unwrap()
            .1
            .split_once(": ")
            .unwrap()
            .1,
        &cache,
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    f.finish();

    // no Content-Length, ELF, more than DEBUGINFOD_MAXSIZE: cut off
    let f = flood(b"\x7fELF");
    let (code, err, _) = extract_from(
        &binary,
        &f.url,
        &cache,
        &[("DEBUGINFOD_MAXSIZE", "1000000")],
        limit,
    );
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.starts_with(&format!(
            "pgdbg: debuginfod {}: download cut short at ",
            f.url
        )) && first.ends_with(" MB: more than DEBUGINFOD_MAXSIZE=1000000 allows"),
        "{err}"
    );
    check_given_up(
        code,
        &err,
        &f.url,
        first
            .split_once(": ")
            .unwrap()
            .1
            .split_once(": ")
            .unwrap()
            .1,
        &cache,
    );
    let sent = f.finish();
    assert!(sent < 64_000_000, "the server sent {sent} bytes");

    // no Content-Length, not ELF, as fast as it goes: dropped at once
    let f = flood(b"<!DOCTYPE html>\n<html>");
    let (code, err, took) = extract_from(&binary, &f.url, &cache, &[], limit);
    check_given_up(
        code,
        &err,
        &f.url,
        "the server sent something that is not ELF (it begins \"<!DOCTYPE html>\\n\"); check that the URL is a debuginfod server's",
        &cache,
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let sent = f.finish();
    assert!(sent < 64_000_000, "the server sent {sent} of 3 GB");

    // a small answer that is not ELF
    let page = "<html><body>Try again later</body></html>";
    let f = Fake::start(
        &format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", page.len()),
        move |s, sent| {
            send(
                s,
                sent,
                std::iter::once(page.as_bytes().to_vec()),
                Duration::ZERO,
            )
        },
    );
    let (code, err, _) = extract_from(&binary, &f.url, &cache, &[], limit);
    check_given_up(
        code,
        &err,
        &f.url,
        "the server sent something that is not ELF (it begins \"<html><body>Try \"); check that the URL is a debuginfod server's",
        &cache,
    );
    f.finish();
    let _ = std::fs::remove_dir_all(&work);
}

/// With no DEBUGINFOD_* bound set, a drip and a stall are given up at
/// the default DEBUGINFOD_TIMEOUT (30 s), well under a minute, and a
/// `Content-Length: 3 GB` at once, for being more than 32 times the
/// binary: the three servers asked at the same time.
#[test]
fn bad_debuginfod_servers_are_given_up_by_default_well_under_a_minute() {
    let work =
        std::env::temp_dir().join(format!("pgdbg-debuginfod-defaults-{}", std::process::id()));
    let binary = stripped_postgres(&work);
    let size = std::fs::metadata(&binary).unwrap().len();
    let plausible = (size * 32).max(256 << 20);
    let limit = Duration::from_secs(120);
    let (d, s, h) = (drip(), stall(), huge());
    let run = |f: &Fake, tag: &str| {
        let (binary, cache, url) = (binary.clone(), work.join(tag), f.url.clone());
        std::thread::spawn(move || {
            let (code, err, took) = extract_from(&binary, &url, &cache, &[], limit);
            (code, err, took, cache)
        })
    };
    let (dj, sj, hj) = (run(&d, "drip"), run(&s, "stall"), run(&h, "huge"));

    let (code, err, took, cache) = hj.join().unwrap();
    check_given_up(
        code,
        &err,
        &h.url,
        &format!(
            "the debug file is 3.0 GB, more than the {:.1} MB a debug file of postgres can plausibly be (DEBUGINFOD_MAXSIZE=BYTES allows more, 0 any size)",
            plausible as f64 / 1e6
        ),
        &cache,
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_eq!(h.finish(), 4096);

    let (code, err, took, cache) = sj.join().unwrap();
    check_given_up(
        code,
        &err,
        &s.url,
        "download cut short after 0 B of 1.0 MB: no data for 30 s (DEBUGINFOD_TIMEOUT); check the server",
        &cache,
    );
    assert!(took < Duration::from_secs(45), "took {took:?}");
    s.finish();

    let (code, err, took, cache) = dj.join().unwrap();
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.ends_with(&format!(" in 30 s, {}", slow_tail(30))),
        "{err}"
    );
    check_given_up(
        code,
        &err,
        &d.url,
        first
            .split_once(": ")
            .unwrap()
            .1
            .split_once(": ")
            .unwrap()
            .1,
        &cache,
    );
    assert!(took < Duration::from_secs(45), "took {took:?}");
    d.finish();
    let _ = std::fs::remove_dir_all(&work);
}
