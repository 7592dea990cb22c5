//! The thread that reads a profile's perf events until it is told to stop:
//! one shape for every mode (on-CPU, off-CPU, wall clock, system calls).
//! The reader gets the stop flag, loops until it is set (draining once
//! more after it), and returns what it gathered; the CPU time of the
//! backend's thread is read when recording starts and when it ends.
use anyhow::{Result, anyhow};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) struct Recording<R> {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<R>>,
    ids: (i32, i32),
    cpu0: Option<u64>,
}

impl<R: Send + 'static> Recording<R> {
    /// Run `read` in a thread of its own (no signal of the session's
    /// handled there), for thread `tid` of process `pid`.
    pub(super) fn start(
        pid: i32,
        tid: i32,
        read: impl FnOnce(&AtomicBool) -> R + Send + 'static,
    ) -> Recording<R> {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let cpu0 = cpu_ns(pid, tid);
        let handle = std::thread::spawn(move || {
            crate::runtime::block_in_this_thread();
            read(&st)
        });
        Recording {
            stop,
            handle: Some(handle),
            ids: (pid, tid),
            cpu0,
        }
    }

    /// Stop recording and return what was gathered, with the CPU seconds
    /// the thread used meanwhile (None where they cannot be read).
    pub(super) fn finish(mut self) -> Result<(R, Option<f64>)> {
        self.stop.store(true, Ordering::Relaxed);
        let cpu1 = cpu_ns(self.ids.0, self.ids.1);
        let raw = self
            .handle
            .take()
            .ok_or_else(|| anyhow!("profile: the recorder is gone"))?
            .join()
            .map_err(|_| anyhow!("profile: the recorder thread failed"))?;
        let cpu = match (self.cpu0, cpu1) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9),
            _ => None,
        };
        Ok((raw, cpu))
    }
}

impl<R> Drop for Recording<R> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// On-CPU time of a thread so far, ns (the first field of its schedstat).
fn cpu_ns(pid: i32, tid: i32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
