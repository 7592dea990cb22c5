//! The queue of probe output that the timer thread writes, failed writes
//! of output or capture turned into a flag that stops the running command,
//! and `errln!`/`errp!` (stderr that never panics).

use super::signals::{in_wait, wake_tracer};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Lines of probe output not written yet (see `out_line`).
static OUT_BUF: Mutex<Vec<u8>> = Mutex::new(Vec::new());
/// Serializes writers of OUT_BUF's contents, so chunks keep their order.
static OUT_WRITE: Mutex<()> = Mutex::new(());
static OUT_DROPPED: AtomicU64 = AtomicU64::new(0);
/// Past this much unwritten output, lines are dropped (and counted) rather
/// than stopping the tracer, which may hold the backend at a breakpoint.
const OUT_CAP: usize = 64 << 20;

/// A write of probe output or of the capture file failed: the running
/// command stops as on SIGTERM (the backend is restored and detached) and
/// pgdbg exits with [`OUTPUT_FAILED_EXIT`].  The first failure's text.
static OUTPUT_FAILED: AtomicBool = AtomicBool::new(false);
static OUTPUT_ERROR: Mutex<Option<String>> = Mutex::new(None);
/// Standard output failed: queued lines are discarded, not written again.
static STDOUT_BROKEN: AtomicBool = AtomicBool::new(false);

/// Exit status after a failed write of output or capture (sysexits'
/// EX_IOERR); the supervisor of a multi-backend attach stops every worker
/// when one exits with it (they share the capture file).
pub const OUTPUT_FAILED_EXIT: i32 = 74;

/// Write to stderr without ever panicking (a closed pipe must not turn
/// into a panic while the backend is attached).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics.
#[macro_export]
macro_rules! errp {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// Record a failed write (`what`: "writing capture FILE failed: OS
/// error"; only the first one is kept) and make the running command stop
/// like on SIGTERM: the wait loop interrupts the backend, the probe or
/// `continue` ends, the session detaches.
pub fn output_failed(what: String) {
    if let Ok(mut e) = OUTPUT_ERROR.lock()
        && e.is_none()
    {
        *e = Some(what);
    }
    OUTPUT_FAILED.store(true, Ordering::SeqCst);
    if in_wait() {
        wake_tracer();
    }
}

/// Whether a write failed (see `output_failed`).
pub(super) fn failed() -> bool {
    OUTPUT_FAILED.load(Ordering::SeqCst)
}

/// The first failed write, if any (see `output_failed`).
pub fn output_failure() -> Option<String> {
    if !failed() {
        return None;
    }
    OUTPUT_ERROR.lock().ok().and_then(|e| e.clone())
}

/// Whether lines wait in the queue.
pub(super) fn queued() -> bool {
    OUT_BUF.lock().is_ok_and(|b| !b.is_empty())
}

/// Queue a line for standard output: written by the timer thread within
/// 50 ms, or by `flush_out`.  Probes print a line per event without a write
/// system call each, and a reader that stalls never blocks the tracer.
pub fn out_line(line: &str) {
    let Ok(mut b) = OUT_BUF.lock() else {
        return;
    };
    if b.len() + line.len() + 1 > OUT_CAP {
        OUT_DROPPED.fetch_add(1, Ordering::SeqCst);
        return;
    }
    b.extend_from_slice(line.as_bytes());
    b.push(b'\n');
}

/// Write the queued lines now (before any other output, and at exit):
/// through `printer` (the prompt's, while it is shown) if it takes them,
/// else on standard output.
pub(super) fn flush_out_through(printer: Option<&mut dyn FnMut(String) -> bool>) {
    use std::io::Write;
    let Ok(_w) = OUT_WRITE.lock() else {
        return;
    };
    let data = match OUT_BUF.lock() {
        Ok(mut b) => std::mem::take(&mut *b),
        Err(_) => return,
    };
    let data = match printer {
        Some(print) if !data.is_empty() => match String::from_utf8(data) {
            Ok(text) if print(text.clone()) => Vec::new(),
            Ok(text) => text.into_bytes(),
            Err(e) => e.into_bytes(),
        },
        _ => data,
    };
    if !data.is_empty() && !STDOUT_BROKEN.load(Ordering::SeqCst) {
        let mut o = std::io::stdout().lock();
        // (SIGPIPE is ignored: a closed pipe is EPIPE here)
        if let Err(e) = o.write_all(&data).and_then(|_| o.flush()) {
            STDOUT_BROKEN.store(true, Ordering::SeqCst);
            output_failed(format!("writing standard output failed: {e}"));
        }
    }
    let dropped = OUT_DROPPED.swap(0, Ordering::SeqCst);
    if dropped > 0 {
        crate::errln!(
            "pgdbg: {dropped} output lines dropped: standard output was not read fast enough"
        );
    }
}
