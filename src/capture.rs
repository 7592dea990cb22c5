//! Capture files: one JSON object per line, `{"event": ..., "ts": ...,
//! "pid": ..., ...}` (and `"ns_pid"`, the PID in a container's
//! namespace), appended as events happen. The events' types (what
//! is written, what `pgdbg report` reads) are in [`events`].

pub mod events;

pub use events::{CAPTURE_FORMAT, Event, Line, ProgressNode};

use anyhow::{Result, anyhow};
use std::io::Write;

/// Seconds since the epoch: a capture event's `ts`.
pub fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Each event is one `write(2)` on a file opened with `O_APPEND`, so the
/// workers of a multi-backend attach can share one capture file without
/// interleaving their lines.
pub struct Capture {
    out: std::fs::File,
    path: std::path::PathBuf,
    /// A write failed (reported once, through `runtime::output_failed`):
    /// nothing more is written.
    failed: bool,
    /// Each backend's PID in its own namespace, when not its host PID
    /// (read once, while it runs: the `attach` event comes first).
    ns_pids: std::collections::HashMap<i32, Option<i32>>,
}

impl Capture {
    /// Open FILE for appending; a file pgdbg creates gets mode 0600 (a
    /// capture holds query texts and parameter values), an existing one
    /// keeps its mode.
    ///
    /// Opened with `O_NONBLOCK`: a FIFO that nobody reads would otherwise
    /// block the open forever (the kernel answers `ENXIO` instead, refused
    /// here in one line); the flag is cleared at once, so that writes
    /// block as on any file (a slow reader slows the output queue, never
    /// the backend).
    pub fn open(path: &std::path::Path) -> Result<Capture> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENXIO) if is_fifo(path) => anyhow!(
                    "capture file {} is a FIFO with no reader: start the reader first (e.g. cat {} &)",
                    path.display(),
                    path.display()
                ),
                _ => anyhow!("cannot open capture file {}: {e}", path.display()),
            })?;
        // SAFETY: F_GETFL/F_SETFL on a descriptor this function owns.
        let cleared = unsafe {
            let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            fl >= 0 && libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) == 0
        };
        if !cleared {
            let e = std::io::Error::last_os_error();
            return Err(anyhow!("cannot open capture file {}: {e}", path.display()));
        }
        Ok(Capture {
            out: f,
            path: path.to_path_buf(),
            failed: false,
            ns_pids: Default::default(),
        })
    }

    /// Append one event, as one line written by one `write`: `event`,
    /// `ts` (`ts`, or now), `pid` (and `ns_pid` in a container), then the
    /// event's fields.
    /// A failed write stops the running command (`runtime::output_failed`).
    pub fn event(&mut self, event: Event, ts: Option<f64>, pid: i32) {
        if self.failed {
            return;
        }
        let ts = ts.unwrap_or_else(wall_now);
        let ns_pid = *self.ns_pids.entry(pid).or_insert_with(|| {
            let ns = crate::inferior::procfs::ns_pid(pid);
            (ns != pid).then_some(ns)
        });
        let line = Line {
            ts,
            pid: pid.into(),
            ns_pid: ns_pid.map(i64::from),
            event,
        };
        let mut out = Vec::with_capacity(256);
        line.write_to(&mut out);
        out.push(b'\n');
        if let Err(e) = self.out.write_all(&out) {
            self.fail(e);
        }
    }

    pub fn flush(&mut self) {
        if self.failed {
            return;
        }
        if let Err(e) = self.out.flush() {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: std::io::Error) {
        self.failed = true;
        crate::runtime::output_failed(format!(
            "writing capture {} failed: {e}",
            self.path.display()
        ));
    }
}

fn is_fifo(path: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}
