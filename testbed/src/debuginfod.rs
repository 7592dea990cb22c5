//! elfutils' `debuginfod` serving separated debug files on 127.0.0.1, for
//! the tests of stripped binaries and libraries that get their DWARF from
//! it (tests/debuginfod.rs, tests/shlib_debuginfod.rs).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// elfutils' `debuginfod -F DIR` on a free port of 127.0.0.1, stopped on drop.
pub struct Debuginfod {
    child: Option<Child>,
    pub url: String,
    pub port: u16,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.0 GET to 127.0.0.1:port: (status, body), None when the
/// server does not answer.
pub fn http_get(port: u16, path: &str) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).ok()?;
    let head_end = resp.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&resp[..head_end]).to_string();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, resp[head_end + 4..].to_vec()))
}

/// How many /buildid/.../debuginfo requests a debuginfod has answered.
pub fn debuginfo_requests(port: u16) -> u64 {
    let (_, body) = http_get(port, "/metrics").expect("debuginfod's /metrics");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("http_requests_total{type=\"debuginfo\"} "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

impl Debuginfod {
    /// Serve the ELF files under `dir`; wait (bounded) until `files` of
    /// them are scanned.
    pub fn start(dir: &Path, db: &Path, files: usize) -> Debuginfod {
        let port = free_port();
        let _ = std::fs::remove_file(db);
        let child = Command::new("debuginfod")
            .args(["-F", "-p", &port.to_string(), "-d"])
            .arg(db)
            .args(["-t0", "-g0", "-c1", "--disable-source-scan"])
            .arg(dir)
            // a server with DEBUGINFOD_URLS forwards its misses upstream
            .env_remove("DEBUGINFOD_URLS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "elfutils' debuginfod is needed (scripts/test installs the debuginfod package)",
            );
        let mut d = Debuginfod {
            child: Some(child),
            url: format!("http://127.0.0.1:{port}"),
            port,
        };
        let want = format!("scanned_files_total{{source=\"file\"}} {files}");
        let t0 = Instant::now();
        loop {
            if let Some(st) = d.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("debuginfod exited at start ({st})");
            }
            if let Some((200, body)) = http_get(port, "/metrics") {
                let m = String::from_utf8_lossy(&body).to_string();
                // (an empty directory answers 404 to everything at once)
                let idle = m.contains("thread_work_pending{role=\"scan\"} 0");
                if files == 0 || (idle && m.lines().any(|l| l == want)) {
                    break;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "debuginfod did not scan {} within 60 s",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        d
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Debuginfod {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The GNU build-id of an ELF file, as `readelf -n` prints it.
pub fn build_id(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .expect("readelf");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build-id note")
        .trim()
        .to_string()
}

/// pgdbg with the debuginfod variables (and nothing else of the caller's).
pub fn pgdbg_env(args: &[&str], urls: &str, cache: &Path, extra: &[(&str, &str)]) -> Command {
    let mut c = Command::new(super::pgdbg_bin());
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

/// The end of the line for a server below the minimum speed.
pub fn slow_tail(secs: u64) -> String {
    format!(
        "less than the 100.0 kB a server must send in each DEBUGINFOD_TIMEOUT={secs} s; check the server, or raise DEBUGINFOD_TIMEOUT for a slow link"
    )
}

/// `n` bytes that begin like an ELF file.
pub fn elf_looking(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    v[..4].copy_from_slice(b"\x7fELF");
    v
}
