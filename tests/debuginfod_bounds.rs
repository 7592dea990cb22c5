//! Bad debuginfod servers, faked on 127.0.0.1 by the test: one that
//! drips, one that stalls after its headers, one that announces 3 GB, ones
//! that stream without a Content-Length (ELF-looking past
//! DEBUGINFOD_MAXSIZE, or a web page), one too slow for DEBUGINFOD_MAXTIME
//! and a small answer that is not ELF: each is given up within the bound
//! docs/binaries.md documents, in one line naming the server, what happened and
//! what to do, reading little of what it sends (the servers count it).
//! No cluster: `pgdbg symbols extract` of a stripped copy of the 15 build
//! asks the servers as an attach does (the same lookup), and exits
//! non-zero as it needs the DWARF; the attach's way (one line, then the
//! layout pack) is in tests/debuginfod.rs.

use common::debuginfod::*;
use common::*;
use pgdbg_testbed as common;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
