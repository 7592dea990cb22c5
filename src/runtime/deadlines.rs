//! Nested deadlines: a probe's `--for`, the whole script's `--for` around
//! it, an inferior call's timeout inside them.

use super::signals::{block_in_this_thread, wake_tracer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// How a command that runs for a while ends, as its start line says it:
/// " for 2.0s" with a `--for`, " for 100 calls" with a count (`unit` names
/// what is counted), else "; Ctrl-C stops".
pub fn limit_text(duration: Option<std::time::Duration>, count: Option<(u64, &str)>) -> String {
    match (duration, count) {
        (Some(d), _) => format!(" for {:.1}s", d.as_secs_f64()),
        (None, Some((n, unit))) => format!(" for {n} {unit}"),
        _ => "; Ctrl-C stops".into(),
    }
}

/// Active deadlines, innermost last (a call's timeout inside a `--for`).
static DEADLINES: Mutex<Vec<Arc<AtomicBool>>> = Mutex::new(Vec::new());

/// Whether any active deadline has passed: a probe's `--for` or the
/// whole script's `--for` around it.
pub fn deadline_hit() -> bool {
    DEADLINES
        .lock()
        .map(|d| d.iter().any(|f| f.load(Ordering::SeqCst)))
        .unwrap_or(false)
}

/// Whether the innermost active deadline has passed (an inferior call's
/// timeout: an outer `--for` must not abandon a call half-way).
pub fn innermost_deadline_hit() -> bool {
    DEADLINES
        .lock()
        .map(|d| d.last().is_some_and(|f| f.load(Ordering::SeqCst)))
        .unwrap_or(false)
}

/// A running timer (`--for`, a call's timeout).  Deadlines nest: probes
/// stop at any of them, inferior calls only at the innermost (their own).  Dropping it cancels it.
pub struct Deadline {
    flag: Arc<AtomicBool>,
    cancel: Arc<AtomicBool>,
}

impl Deadline {
    /// After `d`, set this deadline's flag and wake the tracer thread.
    pub fn arm(d: std::time::Duration) -> Deadline {
        let flag = Arc::new(AtomicBool::new(false));
        if let Ok(mut v) = DEADLINES.lock() {
            v.push(flag.clone());
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let (f, c) = (flag.clone(), cancel.clone());
        std::thread::spawn(move || {
            block_in_this_thread();
            let t0 = std::time::Instant::now();
            while t0.elapsed() < d {
                if c.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(
                    d.saturating_sub(t0.elapsed())
                        .min(std::time::Duration::from_millis(20)),
                );
            }
            if !c.load(Ordering::SeqCst) {
                f.store(true, Ordering::SeqCst);
                wake_tracer();
            }
        });
        Deadline { flag, cancel }
    }
}

impl Deadline {
    /// A deadline that passes when another thread says so (a reader of
    /// kernel probe records that has seen `--count N` calls).
    pub fn on_demand() -> (Deadline, DeadlineTrigger) {
        let flag = Arc::new(AtomicBool::new(false));
        if let Ok(mut v) = DEADLINES.lock() {
            v.push(flag.clone());
        }
        let d = Deadline {
            flag: flag.clone(),
            cancel: Arc::new(AtomicBool::new(false)),
        };
        (d, DeadlineTrigger(flag))
    }
}

/// Passes an on-demand [`Deadline`] from any thread.
#[derive(Clone)]
pub struct DeadlineTrigger(Arc<AtomicBool>);

impl DeadlineTrigger {
    pub fn fire(&self) {
        if !self.0.swap(true, Ordering::SeqCst) {
            wake_tracer();
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        if let Ok(mut v) = DEADLINES.lock() {
            v.retain(|f| !Arc::ptr_eq(f, &self.flag));
        }
    }
}
