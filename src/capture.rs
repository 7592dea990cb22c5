//! Capture files: one JSON object per line, `{"event": ..., "ts": ...,
//! "pid": ..., ...}` (and `"ns_pid"`, the PID in a container's
//! namespace), appended as events happen. The events' types (what
//! is written, what `pgdbg report` reads) are in [`events`]; an event
//! becomes its line here ([`Encoder`]); the file is the sink's
//! (`runtime::Sink::open_capture`, `Sink::event`: one `write(2)` per
//! line), the only writer of it.

pub mod events;

pub use events::{CAPTURE_FORMAT, Event, Line, ProgressNode};

/// Seconds since the epoch: a capture event's `ts`.
pub fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Turns events into the capture's lines, for [`crate::runtime::Sink::event`].
#[derive(Default)]
pub struct Encoder {
    /// Each backend's PID in its own namespace, when not its host PID
    /// (read once, while it runs: the `attach` event comes first).
    ns_pids: std::collections::HashMap<i32, Option<i32>>,
}

impl Encoder {
    /// One event's line, newline included: `event`, `ts` (`ts`, or now),
    /// `pid` (and `ns_pid` in a container), then the event's fields.
    pub fn line(&mut self, event: Event, ts: Option<f64>, pid: i32) -> Vec<u8> {
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
        out
    }
}
