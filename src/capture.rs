//! Capture files: one JSON object per line, `{"event": ..., "ts": ...,
//! "pid": ..., ...}`, appended as events happen.

use anyhow::{Context, Result};
use std::io::Write;

/// Each event is one `write(2)` on a file opened with `O_APPEND`, so the
/// workers of a multi-backend attach can share one capture file without
/// interleaving their lines.
pub struct Capture {
    out: std::fs::File,
}

impl Capture {
    pub fn open(path: &std::path::Path) -> Result<Capture> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open capture file {}", path.display()))?;
        Ok(Capture { out: f })
    }

    pub fn event(&mut self, event: &str, pid: i32, fields: serde_json::Value) {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let mut obj = serde_json::Map::new();
        obj.insert("event".into(), event.into());
        obj.insert("ts".into(), serde_json::json!(ts));
        obj.insert("pid".into(), pid.into());
        if let serde_json::Value::Object(m) = fields {
            for (k, v) in m {
                obj.insert(k, v);
            }
        }
        let mut line = serde_json::Value::Object(obj).to_string();
        line.push('\n');
        let _ = self.out.write_all(line.as_bytes());
    }

    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }
}
