//! Capture files: one JSON object per line, `{"event": ..., "ts": ...,
//! "pid": ..., ...}`, appended as events happen.

use anyhow::{Result, anyhow};
use std::io::Write;

/// Each event is one `write(2)` on a file opened with `O_APPEND`, so the
/// workers of a multi-backend attach can share one capture file without
/// interleaving their lines.
pub struct Capture {
    out: std::fs::File,
    path: std::path::PathBuf,
    /// A write failed (reported once, through `guard::output_failed`):
    /// nothing more is written.
    failed: bool,
}

impl Capture {
    /// Open FILE for appending; a file pgdbg creates gets mode 0600 (a
    /// capture holds query texts and parameter values), an existing one
    /// keeps its mode.
    pub fn open(path: &std::path::Path) -> Result<Capture> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| anyhow!("cannot open capture file {}: {e}", path.display()))?;
        Ok(Capture {
            out: f,
            path: path.to_path_buf(),
            failed: false,
        })
    }

    /// Append one event: `event`, `ts` (now, unless `fields` has its own),
    /// `pid`, then `fields`' members, as one line written by one `write`.
    /// A failed write stops the running command (`guard::output_failed`).
    pub fn event(&mut self, event: &str, pid: i32, fields: serde_json::Value) {
        if self.failed {
            return;
        }
        let mut ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let members = match fields {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        if let Some(t) = members.get("ts").and_then(|v| v.as_f64()) {
            ts = t;
        }
        let mut line = Vec::with_capacity(256);
        line.extend_from_slice(b"{\"event\":");
        let _ = serde_json::to_writer(&mut line, event);
        line.extend_from_slice(b",\"ts\":");
        let _ = serde_json::to_writer(&mut line, &ts);
        line.extend_from_slice(format!(",\"pid\":{pid}").as_bytes());
        for (k, v) in &members {
            if k == "ts" || k == "event" || k == "pid" {
                continue;
            }
            line.push(b',');
            let _ = serde_json::to_writer(&mut line, k);
            line.push(b':');
            let _ = serde_json::to_writer(&mut line, v);
        }
        line.extend_from_slice(b"}\n");
        if let Err(e) = self.out.write_all(&line) {
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
        crate::guard::output_failed(format!(
            "writing capture {} failed: {e}",
            self.path.display()
        ));
    }
}
