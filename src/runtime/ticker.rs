//! The poll ticker: probes that read the target now and then (an
//! in-process recorder's ring) have it interrupted periodically.

use super::signals::{block_in_this_thread, in_wait, wake_tracer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A probe's periodic poll is due (see `Ticker`).
static POLL_DUE: AtomicBool = AtomicBool::new(false);
/// The ticker's period, in microseconds (the probe may change it).
static POLL_US: AtomicU64 = AtomicU64::new(20_000);

/// Change the period of a running `Ticker` (from its next tick).
pub fn set_poll_interval(d: std::time::Duration) {
    POLL_US.store(d.as_micros().max(1000) as u64, Ordering::SeqCst);
}

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
}

impl Ticker {
    pub fn start(every: std::time::Duration) -> Ticker {
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        POLL_DUE.store(false, Ordering::SeqCst);
        set_poll_interval(every);
        std::thread::spawn(move || {
            block_in_this_thread();
            loop {
                std::thread::sleep(std::time::Duration::from_micros(
                    POLL_US.load(Ordering::SeqCst),
                ));
                if c.load(Ordering::SeqCst) {
                    return;
                }
                POLL_DUE.store(true, Ordering::SeqCst);
                if in_wait() {
                    wake_tracer();
                }
            }
        });
        Ticker { cancel }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        POLL_DUE.store(false, Ordering::SeqCst);
    }
}
