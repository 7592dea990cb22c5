//! The capture file as bytes: opened for appending, one `write(2)` per
//! event line, a failed write turned into `output_failed`.  Only the sink
//! (`sink.rs`) holds one; what a line says (JSON, `event`, `ts`, `pid`...)
//! is the capture room's (`capture.rs`), which hands the sink whole lines.

use anyhow::{Result, anyhow};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Each event is one `write(2)` on a file opened with `O_APPEND`, so the
/// workers of a multi-backend attach can share one capture file without
/// interleaving their lines.
pub(super) struct CaptureFile {
    out: std::fs::File,
    path: PathBuf,
    /// A write failed (reported once, through `output_failed`): nothing
    /// more is written.
    failed: bool,
}

impl CaptureFile {
    /// Open FILE for appending; a file pgdbg creates gets mode 0600 (a
    /// capture holds query texts and parameter values), an existing one
    /// keeps its mode.
    ///
    /// Opened with `O_NONBLOCK`: a FIFO that nobody reads would otherwise
    /// block the open forever (the kernel answers `ENXIO` instead, refused
    /// here in one line); the flag is cleared at once, so that writes
    /// block as on any file (a slow reader slows the output queue, never
    /// the backend).
    pub(super) fn open(path: &Path) -> Result<CaptureFile> {
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
        Ok(CaptureFile {
            out: f,
            path: path.to_path_buf(),
            failed: false,
        })
    }

    /// Whether lines are still written (no write failed).
    pub(super) fn writable(&self) -> bool {
        !self.failed
    }

    /// Append one line (`line` ends with its newline) in one `write`.
    /// A failed write stops the running command (`output_failed`).
    pub(super) fn append(&mut self, line: &[u8]) {
        if self.failed {
            return;
        }
        if let Err(e) = self.out.write_all(line) {
            self.fail(e);
        }
    }

    pub(super) fn flush(&mut self) {
        if self.failed {
            return;
        }
        if let Err(e) = self.out.flush() {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: std::io::Error) {
        self.failed = true;
        super::output_failed(format!(
            "writing capture {} failed: {e}",
            self.path.display()
        ));
    }
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}
