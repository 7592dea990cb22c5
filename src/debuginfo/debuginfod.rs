//! debuginfod client: when no DWARF is found on disk, the debug file of a
//! build-id comes from the servers named in `DEBUGINFOD_URLS`
//! (`GET URL/buildid/BUILDID/debuginfo`), as gdb, perf and elfutils' tools
//! fetch it, into the cache they share: `$DEBUGINFOD_CACHE_PATH`, else
//! `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`,
//! each file at `CACHE/BUILDID/debuginfo`.
//!
//! Environment (elfutils' names and meanings):
//! - `DEBUGINFOD_URLS`: servers, separated by spaces, asked in order; unset
//!   or empty: no lookup at all (the cache is not read either, as elfutils).
//! - `DEBUGINFOD_TIMEOUT`: seconds to wait for a connection and for the
//!   answer; the download must bring at least 100 kB in each span of that
//!   many seconds (default 30; 0: no limit).
//! - `DEBUGINFOD_MAXTIME`: seconds for a whole download (default 300).
//! - `DEBUGINFOD_MAXSIZE`: largest file accepted, in bytes (default 32
//!   times the size of the file whose debug info is sought, at least 256
//!   MiB).  See limits.rs: a dripping, stalled or huge server is given up
//!   within these bounds, and a body that is not ELF after its first bytes.
//! - `DEBUGINFOD_CACHE_PATH`, `XDG_CACHE_HOME`: where the cache is.
//!
//! A download goes to a temporary file in the build-id's cache directory
//! and is renamed into place only when complete and when its build-id is
//! the binary's (and it has DWARF): a bad or partial file never enters the
//! shared cache.  Negative cache entries that elfutils' client writes
//! (empty files) are not honoured: pgdbg asks the servers again.

mod limits;
mod resolve;

use super::elf::ElfImage;
use limits::{ELF_MAGIC, Limits, Pump, Stop};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use limits::{DEFAULT_MAXTIME_SECS, DEFAULT_TIMEOUT_SECS};

/// How much a lookup may do and say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// Ask the servers; a progress line while downloading, failures named.
    Progress,
    /// Ask the servers; failures named, no progress line (`-q`).
    Quiet,
    /// Only what the cache holds, silently (the workers of a multi-backend
    /// attach: their supervisor has fetched the file already).
    CacheOnly,
    /// Never (`--debug-file`, `--symbols`).
    Off,
}

/// A debug file from debuginfod.
pub struct Found {
    pub image: ElfImage,
    /// Its place in the cache.
    pub path: PathBuf,
    /// The server it was downloaded from now; None: it was in the cache.
    pub server: Option<String>,
    pub bytes: u64,
    pub elapsed: Duration,
}

/// The servers of `DEBUGINFOD_URLS`, in order, without trailing slashes.
pub fn urls() -> Vec<String> {
    std::env::var("DEBUGINFOD_URLS")
        .unwrap_or_default()
        .split_whitespace()
        .map(|u| u.trim_end_matches('/').to_string())
        .filter(|u| !u.is_empty())
        .collect()
}

/// The cache directory elfutils' client uses.
pub fn cache_root() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = var("DEBUGINFOD_CACHE_PATH") {
        return Some(PathBuf::from(p));
    }
    let home = var("HOME").map(PathBuf::from);
    // elfutils' older default, still used when it exists
    if let Some(h) = &home {
        let legacy = h.join(".debuginfod_client_cache");
        if legacy.is_dir() {
            return Some(legacy);
        }
    }
    if let Some(x) = var("XDG_CACHE_HOME") {
        return Some(PathBuf::from(x).join("debuginfod_client"));
    }
    home.map(|h| h.join(".cache").join("debuginfod_client"))
}

fn valid_build_id(id: &str) -> bool {
    id.len() >= 4 && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The debug file of `build_id` (the build-id of `what`, named in
/// messages): from the cache, else downloaded from the first server of
/// `DEBUGINFOD_URLS` that has it.  None when `DEBUGINFOD_URLS` is not set,
/// or (after one line per server saying why) when no server gave a good file.
pub fn find(build_id: &str, what: &Path, mode: Fetch) -> Option<Found> {
    let servers = urls();
    if mode == Fetch::Off || servers.is_empty() || !valid_build_id(build_id) {
        return None;
    }
    let build_id = build_id.to_ascii_lowercase();
    let talk = mode != Fetch::CacheOnly;
    let Some(root) = cache_root() else {
        if talk {
            crate::runtime::sink().warn(format_args!(
                "pgdbg: debuginfod: no cache directory (set DEBUGINFOD_CACHE_PATH or HOME)"
            ));
        }
        return None;
    };
    let dir = root.join(&build_id);
    let path = dir.join("debuginfo");
    if let Some(image) = cached(&path, &build_id) {
        return Some(Found {
            image,
            path,
            server: None,
            bytes: 0,
            elapsed: Duration::ZERO,
        });
    }
    if !talk {
        return None;
    }
    resolve::builtin_services_only();
    let limits = Limits::from_env(what);
    let timeout = limits.timeout;
    // The body's bounds are the pump's (limits.rs), exact to the second;
    // ureq's per-read and global timeouts, a few seconds later, only end
    // the pump's reader thread once it has been given up.
    let backstop = |d: Option<Duration>| d.map(|d| d + Duration::from_secs(5));
    let answer = match (timeout, limits.maxtime) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .user_agent(concat!("pgdbg/", env!("CARGO_PKG_VERSION")))
        .timeout_connect(timeout)
        .timeout_resolve(timeout)
        .timeout_send_request(timeout)
        .timeout_recv_response(answer)
        .timeout_per_read(backstop(timeout))
        .timeout_global(backstop(limits.maxtime))
        .max_redirects(8)
        .build();
    let agent: ureq::Agent = config.into();
    let show = mode == Fetch::Progress;
    let mut failures = Vec::new();
    for server in &servers {
        let dl = Download {
            agent: &agent,
            server,
            build_id: &build_id,
            dir: &dir,
            what,
            show,
            limits: &limits,
        };
        match dl.run() {
            Ok((mut image, bytes, elapsed)) => {
                image.path = path.clone();
                return Some(Found {
                    image,
                    path,
                    server: Some(server.clone()),
                    bytes,
                    elapsed,
                });
            }
            Err(why) => failures.push(format!("pgdbg: debuginfod {server}: {why}")),
        }
    }
    for f in failures {
        crate::runtime::sink().warn(f);
    }
    None
}

/// The cached file, when it is a debug file of this build-id with DWARF
/// (an empty or foreign file is replaced by the next download).
fn cached(path: &Path, build_id: &str) -> Option<ElfImage> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    let img = ElfImage::open(path).ok()?;
    (img.build_id().as_deref() == Some(build_id) && img.has_dwarf()).then_some(img)
}

/// "41.2 MB"
pub fn size_text(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.1} GB", bytes as f64 / 1e9)
    } else if bytes < 1000 {
        format!("{bytes} B")
    } else if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1e6)
    } else {
        format!("{:.1} kB", bytes as f64 / 1e3)
    }
}

struct Download<'a> {
    agent: &'a ureq::Agent,
    server: &'a str,
    build_id: &'a str,
    dir: &'a Path,
    what: &'a Path,
    show: bool,
    limits: &'a Limits,
}

impl Download<'_> {
    fn no_progress(&self) -> String {
        match self.limits.timeout {
            Some(t) => format!("no answer for {} s (DEBUGINFOD_TIMEOUT)", t.as_secs()),
            None => "timed out".into(),
        }
    }

    fn reason(&self, e: &ureq::Error) -> String {
        match e {
            ureq::Error::Timeout(ureq::Timeout::Global) => match self.limits.maxtime {
                Some(t) => self.too_long(t),
                None => "the download took too long".into(),
            },
            ureq::Error::Timeout(_) => self.no_progress(),
            ureq::Error::Io(io) => match io.kind() {
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => self.no_progress(),
                _ if io.to_string().contains("lookup address") => {
                    let t = os_text(io);
                    let t = t.rsplit(": ").next().unwrap_or(&t).to_string();
                    format!("host not found ({t})")
                }
                _ => format!("cannot connect ({})", os_text(io)),
            },
            ureq::Error::HostNotFound => "host not found".into(),
            ureq::Error::BadUri(u) => format!("not a URL ({u})"),
            other => other.to_string(),
        }
    }

    fn too_long(&self, t: Duration) -> String {
        format!(
            "the download took longer than DEBUGINFOD_MAXTIME={} s (raise it for a slow link, 0 for no limit)",
            t.as_secs()
        )
    }

    /// Why the pump gave up on the body.
    fn stopped(&self, stop: Stop) -> String {
        match stop {
            Stop::TooSlow(0, t) => format!(
                "no data for {} s (DEBUGINFOD_TIMEOUT); check the server",
                t.as_secs()
            ),
            Stop::TooSlow(n, t) => format!(
                "only {} in {} s, less than the {} a server must send in each DEBUGINFOD_TIMEOUT={} s; check the server, or raise DEBUGINFOD_TIMEOUT for a slow link",
                size_text(n),
                t.as_secs(),
                size_text(limits::MIN_BYTES_PER_SPAN),
                t.as_secs()
            ),
            Stop::MaxTime(t) => self.too_long(t),
            Stop::Failed(e) => {
                let inner = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>());
                match (inner, e.kind()) {
                    (Some(ue), _) => self.reason(ue),
                    (None, std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                        self.no_progress()
                    }
                    (None, _) => e.to_string(),
                }
            }
        }
    }

    /// Download into the cache: (image, bytes, time) or why not.
    fn run(&self) -> Result<(ElfImage, u64, Duration), String> {
        let url = format!("{}/buildid/{}/debuginfo", self.server, self.build_id);
        let tty = self.show && std::io::stderr().is_terminal();
        let t0 = Instant::now();
        if tty {
            crate::runtime::sink().part(format_args!(
                "\r\x1b[KDownloading debug info for {} from {} ...",
                self.what.display(),
                self.server
            ));
        }
        let res = self.fetch(&url, tty, t0);
        if tty {
            crate::runtime::sink().part("\r\x1b[K");
        }
        let (img, bytes) = res?;
        let elapsed = t0.elapsed();
        if self.show {
            crate::runtime::sink().warn(format_args!(
                "Downloaded debug info for {} from {}: {} in {:.2} s",
                self.what.display(),
                self.server,
                size_text(bytes),
                elapsed.as_secs_f64()
            ));
        }
        Ok((img, bytes, elapsed))
    }

    fn fetch(&self, url: &str, tty: bool, t0: Instant) -> Result<(ElfImage, u64), String> {
        let resp = self.agent.get(url).call().map_err(|e| self.reason(&e))?;
        let status = resp.status();
        if status.as_u16() == 404 {
            return Err(format!(
                "no debug info for build-id {} (HTTP 404)",
                self.build_id
            ));
        }
        if !status.is_success() {
            return Err(format!(
                "HTTP {} {} for {url}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            ));
        }
        let total = resp.body().content_length();
        // refused before reading: dropping the response closes the connection
        if let (Some(max), Some(n)) = (self.limits.maxsize, total)
            && n > max
        {
            return Err(format!(
                "the debug file is {}, {}",
                size_text(n),
                self.limits.size_refusal(max, self.what)
            ));
        }
        mkdir_private(self.dir)
            .map_err(|e| format!("cannot create {}: {}", self.dir.display(), os_text(&e)))?;
        let tmp = self
            .dir
            .join(format!("debuginfo.pgdbg-{}.tmp", std::process::id()));
        let res = self.receive(resp, &tmp, total, tty, t0);
        if res.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        res
    }

    fn receive(
        &self,
        resp: ureq::http::Response<ureq::Body>,
        tmp: &Path,
        total: Option<u64>,
        tty: bool,
        t0: Instant,
    ) -> Result<(ElfImage, u64), String> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(tmp)
            .map_err(|e| format!("cannot write {}: {}", tmp.display(), os_text(&e)))?;
        let mut pump = Pump::start(resp.into_body().into_reader(), self.limits.clone(), t0);
        let of = total
            .map(|t| format!(" of {}", size_text(t)))
            .unwrap_or_default();
        // the first bytes, for the ELF magic and the message when it is not
        let mut head: Vec<u8> = Vec::with_capacity(16);
        let mut got: u64 = 0;
        let mut last_shown = Instant::now();
        loop {
            let chunk = match pump.next() {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(stop) => {
                    return Err(format!(
                        "download cut short after {}{of}: {}",
                        size_text(got),
                        self.stopped(stop)
                    ));
                }
            };
            if head.len() < 16 {
                let take = (16 - head.len()).min(chunk.len());
                head.extend_from_slice(&chunk[..take]);
                // not ELF: read no further (a server answering with a web
                // page or a stream of something else)
                let n = head.len().min(4);
                if head[..n] != ELF_MAGIC[..n] {
                    return Err(limits::not_elf(&head));
                }
            }
            got += chunk.len() as u64;
            if let Some(max) = self.limits.maxsize
                && got > max
            {
                return Err(format!(
                    "download cut short at {}: {}",
                    size_text(got),
                    self.limits.size_refusal(max, self.what)
                ));
            }
            out.write_all(&chunk)
                .map_err(|e| format!("cannot write {}: {}", tmp.display(), os_text(&e)))?;
            if tty && last_shown.elapsed() >= Duration::from_millis(100) {
                last_shown = Instant::now();
                crate::runtime::sink().part(format_args!(
                    "\r\x1b[KDownloading debug info for {} from {} ... {}{of} ({:.0} s)",
                    self.what.display(),
                    self.server,
                    size_text(got),
                    t0.elapsed().as_secs_f64()
                ));
            }
        }
        if head.len() < 4 {
            return Err(limits::not_elf(&head));
        }
        drop(out);
        let img = ElfImage::open(tmp).map_err(|_| "the server sent a file that is not ELF")?;
        match img.build_id() {
            Some(id) if id == self.build_id => {}
            Some(id) => {
                return Err(format!(
                    "the server sent the debug file of build-id {id}, not {}",
                    self.build_id
                ));
            }
            None => return Err("the server sent a file without a build-id".into()),
        }
        if !img.has_dwarf() {
            return Err("the server sent a file without DWARF (.debug_info)".into());
        }
        // read-only in the cache, as elfutils leaves its files
        let _ = std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o400));
        let dest = self.dir.join("debuginfo");
        std::fs::rename(tmp, &dest).map_err(|e| {
            format!(
                "cannot move the download to {}: {}",
                dest.display(),
                os_text(&e)
            )
        })?;
        Ok((img, got))
    }
}

/// `mkdir -p` with mode 0700 for what it creates (the cache is per user).
fn mkdir_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// An I/O error's text without Rust's " (os error N)".
fn os_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}
