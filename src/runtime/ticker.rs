//! The poll ticker: probes that read the target now and then (an
//! in-process recorder's ring) have it interrupted periodically.

use super::signals::{block_in_this_thread, in_wait, wake_tracer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A probe's periodic poll is due (see `Ticker`).
static POLL_DUE: AtomicBool = AtomicBool::new(false);

/// Whether a poll is due, clearing it.
pub(super) fn take_poll_due() -> bool {
    POLL_DUE.swap(false, Ordering::SeqCst)
}

/// A periodic tick for probes that read the target now and then (an
/// in-process recorder's ring): every `every`, the running target is
/// interrupted so the probe can read it while it is stopped.  Dropping it
/// stops the ticks.
pub struct Ticker {
    cancel: Arc<AtomicBool>,
    /// The period, in microseconds (`set_period`).
    period_us: Arc<AtomicU64>,
}

/// A period in microseconds, at least a millisecond.
fn micros(d: std::time::Duration) -> u64 {
    (d.as_micros() as u64).max(1000)
}

impl Ticker {
    pub fn start(every: std::time::Duration) -> Ticker {
        let cancel = Arc::new(AtomicBool::new(false));
        let period_us = Arc::new(AtomicU64::new(micros(every)));
        let (c, us) = (cancel.clone(), period_us.clone());
        POLL_DUE.store(false, Ordering::SeqCst);
        std::thread::spawn(move || {
            block_in_this_thread();
            loop {
                std::thread::sleep(std::time::Duration::from_micros(us.load(Ordering::SeqCst)));
                if c.load(Ordering::SeqCst) {
                    return;
                }
                POLL_DUE.store(true, Ordering::SeqCst);
                if in_wait() {
                    wake_tracer();
                }
            }
        });
        Ticker { cancel, period_us }
    }

    /// Tick every `every` from the next tick on.
    pub fn set_period(&self, every: std::time::Duration) {
        self.period_us.store(micros(every), Ordering::SeqCst);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        POLL_DUE.store(false, Ordering::SeqCst);
    }
}
