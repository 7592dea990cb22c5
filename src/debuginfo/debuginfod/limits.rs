//! The bounds of one debuginfod download, and the pump that enforces them
//! on the response body.
//!
//! elfutils' names and meanings, with defaults of pgdbg's own so that a
//! bad server is given up in well under a minute:
//! - `DEBUGINFOD_TIMEOUT` (default 30 s): the connection, the wait for the
//!   answer, and the speed of the body: fewer than 100 kB in a span of
//!   `DEBUGINFOD_TIMEOUT` seconds (the first from the request; elfutils'
//!   minimum-speed rule) and the server is given up, at the end of that
//!   span; a dripping or a stalled server is thus left after 30 s.
//! - `DEBUGINFOD_MAXTIME` (default 300 s): the whole download.
//! - `DEBUGINFOD_MAXSIZE` (default: 32 times the size of the file whose
//!   debug info is sought, at least 256 MiB): a larger `Content-Length` is
//!   refused before reading, a body growing past it is cut off.
//!
//! 0 means no limit for each, as in elfutils.  The body must begin with
//! the ELF magic: anything else is dropped after its first bytes.

use std::io::Read;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Default of `DEBUGINFOD_TIMEOUT` (elfutils waits 90 s; pgdbg is
/// interactive and the target is not touched until the download ends).
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Default of `DEBUGINFOD_MAXTIME`: a debug file of 50 MB still arrives
/// at 170 kB/s.
pub const DEFAULT_MAXTIME_SECS: u64 = 300;
/// The least a server must send in each `DEBUGINFOD_TIMEOUT` span.
pub const MIN_BYTES_PER_SPAN: u64 = 100_000;
/// The default size bound: this many times the file's own size...
const MAXSIZE_FACTOR: u64 = 32;
/// ... and never less than this (a debug file of a small library with
/// much inlining, or a dwz file whose size is not known).
const MAXSIZE_FLOOR: u64 = 256 << 20;

/// What bounds a download, and where each bound came from (for messages).
#[derive(Clone, Debug)]
pub struct Limits {
    /// None: no limit (`DEBUGINFOD_TIMEOUT=0`).
    pub timeout: Option<Duration>,
    pub maxtime: Option<Duration>,
    pub maxsize: Option<u64>,
    /// `DEBUGINFOD_MAXSIZE` was set (else `maxsize` is pgdbg's default).
    pub maxsize_set: bool,
}

impl Limits {
    /// From the environment; `what` (the binary or library whose debug
    /// file is sought) sizes the default bound of `DEBUGINFOD_MAXSIZE`.
    pub fn from_env(what: &Path) -> Limits {
        let timeout = secs_var("DEBUGINFOD_TIMEOUT", DEFAULT_TIMEOUT_SECS);
        let maxtime = secs_var("DEBUGINFOD_MAXTIME", DEFAULT_MAXTIME_SECS);
        let own = std::fs::metadata(what).map_or(0, |m| m.len());
        let default_size = own.saturating_mul(MAXSIZE_FACTOR).max(MAXSIZE_FLOOR);
        let (maxsize, maxsize_set) = match env_value("DEBUGINFOD_MAXSIZE") {
            None => (Some(default_size), false),
            Some(v) => match v.parse::<u64>() {
                Ok(0) => (None, true),
                Ok(n) => (Some(n), true),
                Err(_) => {
                    crate::runtime::sink().warn(format_args!(
                        "pgdbg: DEBUGINFOD_MAXSIZE={v} is not a whole number of bytes: using {default_size}"
                    ));
                    (Some(default_size), false)
                }
            },
        };
        Limits {
            timeout,
            maxtime,
            maxsize,
            maxsize_set,
        }
    }

    /// "more than DEBUGINFOD_MAXSIZE=1000000 allows", or for the default
    /// "more than the 285.2 MB a debug file of postgres can plausibly be
    /// (...)".
    pub fn size_refusal(&self, max: u64, what: &Path) -> String {
        if self.maxsize_set {
            return format!("more than DEBUGINFOD_MAXSIZE={max} allows");
        }
        let name = what.file_name().map_or_else(
            || what.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        format!(
            "more than the {} a debug file of {name} can plausibly be \
             (DEBUGINFOD_MAXSIZE=BYTES allows more, 0 any size)",
            super::size_text(max)
        )
    }
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// A whole number of seconds from the environment (0: no limit).
fn secs_var(name: &str, default: u64) -> Option<Duration> {
    let secs = match env_value(name) {
        None => default,
        Some(v) => v.parse::<u64>().unwrap_or_else(|_| {
            crate::runtime::sink().warn(format_args!(
                "pgdbg: {name}={v} is not a whole number of seconds: using {default} s"
            ));
            default
        }),
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// Why the pump gave up.
pub enum Stop {
    /// Fewer than MIN_BYTES_PER_SPAN in a span of `timeout`: (bytes in
    /// that span, the span).
    TooSlow(u64, Duration),
    /// DEBUGINFOD_MAXTIME passed since the request.
    MaxTime(Duration),
    /// The connection failed (the reader's error).
    Failed(std::io::Error),
}

/// The response body, read by a thread of its own so that a server
/// sending a byte now and then cannot hold pgdbg past the bounds: the
/// caller waits on a channel with a deadline.  When the caller gives up,
/// the reader ends at its next read (the channel is closed) or at
/// ureq's per-read backstop, dropping the connection.
pub struct Pump {
    rx: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    limits: Limits,
    /// When the request was sent (DEBUGINFOD_MAXTIME counts from there).
    started: Instant,
    span_start: Instant,
    span_bytes: u64,
}

impl Pump {
    pub fn start(mut body: impl Read + Send + 'static, limits: Limits, started: Instant) -> Pump {
        // a few chunks in flight at most: the reader never runs far ahead
        let (tx, rx) = mpsc::sync_channel(4);
        std::thread::spawn(move || {
            // signals are the tracer thread's to handle
            crate::runtime::block_in_this_thread();
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                let r = match body.read(&mut buf) {
                    Ok(n) => Ok(buf[..n].to_vec()),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let end = !matches!(&r, Ok(v) if !v.is_empty());
                if tx.send(r).is_err() || end {
                    return;
                }
            }
        });
        Pump {
            rx,
            limits,
            started,
            // the first span counts from the request, as elfutils' does:
            // a slow answer leaves less time for the first 100 kB
            span_start: started,
            span_bytes: 0,
        }
    }

    /// The next piece of the body; None at its end.  The bounds are
    /// checked before each wait, so that a steady drip is judged too.
    pub fn next(&mut self) -> Result<Option<Vec<u8>>, Stop> {
        loop {
            let now = Instant::now();
            let max_end = self.limits.maxtime.map(|t| (t, self.started + t));
            if let Some((t, end)) = max_end
                && now >= end
            {
                return Err(Stop::MaxTime(t));
            }
            if let Some(t) = self.limits.timeout
                && now >= self.span_start + t
            {
                if self.span_bytes < MIN_BYTES_PER_SPAN {
                    return Err(Stop::TooSlow(self.span_bytes, t));
                }
                // enough in this span: the next one begins
                self.span_start = now;
                self.span_bytes = 0;
            }
            let span_end = self.limits.timeout.map(|t| self.span_start + t);
            let deadline = match (span_end, max_end.map(|m| m.1)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let got = match deadline {
                Some(d) => self.rx.recv_timeout(d.saturating_duration_since(now)),
                None => self
                    .rx
                    .recv()
                    .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match got {
                Ok(Ok(v)) if v.is_empty() => return Ok(None),
                Ok(Ok(v)) => {
                    self.span_bytes += v.len() as u64;
                    return Ok(Some(v));
                }
                Ok(Err(e)) => return Err(Stop::Failed(e)),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Stop::Failed(std::io::Error::other("the reader ended")));
                }
                // a bound is due: judged at the top
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

/// The ELF magic every debug file begins with.
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// "not ELF (it begins \"<!DOCTYPE html>\")": the first bytes, escaped.
pub fn not_elf(head: &[u8]) -> String {
    if head.is_empty() {
        return "the server sent an empty file".into();
    }
    let shown = &head[..head.len().min(16)];
    format!(
        "the server sent something that is not ELF (it begins \"{}\"); check that the URL is a debuginfod server's",
        shown.escape_ascii()
    )
}
