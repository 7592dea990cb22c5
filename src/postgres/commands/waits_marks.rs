//! `waits trace`'s statement times in-process (its default): an in-process
//! recorder (`inferior::recorder`) at the entry of each out-of-line copy
//! of standard_ExecutorStart, which copies the QueryDesc's address and
//! the first `TEXT_MAX` bytes of its `sourceText`, and of
//! standard_ExecutorEnd, which copies the QueryDesc's address.  No stop
//! and no kernel uprobe per statement: a few dozen instructions in the
//! backend, and a few per byte of the text.
//!
//! The rings are read while the backend runs (`RingReader`, every
//! `READ_EVERY`, and once more at its exit stop), and each record's time
//! stamp counter value is mapped to CLOCK_MONOTONIC (`TscClock`,
//! calibrated at each read), the clock of the perf event's samples of
//! the wait-event word, so that statements and waits merge in time
//! order.  A function whose entry takes no recorder keeps its kernel
//! uprobe (`waits_perf::statement_marks`), said in one line.

use crate::inferior::recorder::{RecordSpec, Recorder, RingReader, TextSpec};
use crate::inferior::tscclock::{self, TscClock};
use crate::perf::watch::{Mark, copied_text, read_text};
use crate::postgres::backend::{Backend, entry_code};
use anyhow::{Result, anyhow};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A mark of a statement's start and of its end.
pub(crate) const START: u8 = 0;
pub(crate) const END: u8 = 1;

/// Bytes of a statement's text copied at the executor's start (its NUL
/// included): as many as the kernel copies into a tracefs uprobe's
/// record (`perf::watch`), so a text reads the same either way.
const TEXT_MAX: u64 = 256;
/// Slots per ring: statements between two reads.
const SLOTS: u64 = 4096;
/// How often the rings are read while the backend runs.
const READ_EVERY: Duration = Duration::from_millis(10);

/// The functions recorded, and the kind of mark each gives.
pub(crate) const RECORDED: [(&str, u8); 2] = [
    ("standard_ExecutorStart", START),
    ("standard_ExecutorEnd", END),
];

/// What the reading thread and the exit stop share.
struct Shared {
    pid: i32,
    /// Where the recorded QueryDesc's `sourceText` is among a start's
    /// fields.
    source_text: Option<u64>,
    readers: Vec<(u8, RingReader)>,
    clock: TscClock,
    marks: Vec<Mark>,
    /// Calls that found a ring full.
    lost: u64,
    /// Why a read failed (the backend ended: its exit stop read last;
    /// said when it did not).
    failed: Option<String>,
}

impl Shared {
    /// Take what the rings hold, then read the clocks (every record read
    /// now was written before), and map the records' counter values.
    fn read(&mut self) {
        let mut got = Vec::new();
        for (kind, r) in &mut self.readers {
            match r.drain() {
                Ok((records, dropped)) => {
                    self.lost += dropped;
                    got.extend(records.into_iter().map(|x| (*kind, x)));
                }
                Err(e) => {
                    self.failed.get_or_insert_with(|| format!("{e:#}"));
                }
            }
        }
        self.clock.calibrate();
        // a longer text completed once per read, for all the records of
        // the same statement (a loop runs one statement many times)
        let mut whole: HashMap<(u64, Vec<u8>), String> = HashMap::new();
        for (kind, r) in got {
            let Some(time) = self.clock.ns(r.tsc) else {
                continue;
            };
            // a text longer than the copy: completed from the backend
            // now if it still starts with the copy (`copied_text`)
            let (pid, at) = (self.pid, self.source_text);
            let pointer = at
                .and_then(|at| r.fields.get(at as usize..at as usize + 8))
                .and_then(|p| p.try_into().ok())
                .map(u64::from_le_bytes);
            let text = r.text.map(|t| match (t.complete, pointer) {
                (true, _) => String::from_utf8_lossy(&t.bytes).into_owned(),
                (false, None) => copied_text(&t.bytes, || None),
                (false, Some(p)) => whole
                    .entry((p, t.bytes.clone()))
                    .or_insert_with(|| copied_text(&t.bytes, || read_text(pid, p)))
                    .clone(),
            });
            self.marks.push(Mark {
                time,
                kind,
                arg: r.rdi,
                text,
            });
        }
    }
}

/// The recorders in place and their reader.
pub(crate) struct InProcessMarks {
    /// Each with the function it is at.
    recorders: Vec<(&'static str, Recorder)>,
    /// The functions recorded (the others keep their uprobes).
    pub recorded: Vec<&'static str>,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The recorder of function `f` (of `RECORDED`) and what it copies.
fn spec_of(s: &dyn Backend, kind: u8) -> Result<RecordSpec> {
    if kind == END {
        return Ok(RecordSpec {
            capacity: SLOTS,
            global32: None,
            fields: Vec::new(),
            struct_size: 0,
            text: None,
        });
    }
    let qd = s.layout("QueryDesc")?;
    let text = qd.offset("sourceText")?;
    Ok(RecordSpec {
        capacity: SLOTS,
        global32: None,
        fields: vec![(text, 8)],
        struct_size: qd.size,
        text: Some(TextSpec {
            pointer: text,
            guard: None,
            unless: Vec::new(),
            max: TEXT_MAX,
        }),
    })
}

/// Put the recorders in: for each of `RECORDED`, at every out-of-line
/// copy's entry, or at none (that function keeps its uprobes: each one
/// not recorded is said, with why, through `say`: someone else's int3
/// there is met by the uprobes' own checks).  Err when nothing could be
/// recorded (why, for one line).
pub(crate) fn install(s: &mut dyn Backend) -> Result<InProcessMarks> {
    tscclock::usable()?;
    let clock = TscClock::new();
    let mut recorders: Vec<(&'static str, Recorder)> = Vec::new();
    let mut readers = Vec::new();
    let mut recorded = Vec::new();
    for (f, kind) in RECORDED {
        let addrs = s.function_addrs(f);
        let mut mine: Vec<Recorder> = Vec::new();
        let mut why = None;
        if addrs.is_empty() {
            why = Some(format!("{f} has no out-of-line copy"));
        }
        for a in addrs {
            // the function itself, not a compiler's clone of it
            // (`.isra`, `.constprop`: its arguments may be others, and
            // the recorder reads the QueryDesc at rdi)
            let name = s
                .di()
                .symbol_at(a.wrapping_sub(s.bias()))
                .map(|(x, _)| x.name.clone());
            if name.as_deref() != Some(f) {
                why = Some(format!(
                    "{f} ({a:#x}): a copy of it that is not the function itself ({}), whose arguments may not be the function's",
                    name.as_deref().unwrap_or("no symbol")
                ));
                break;
            }
            let placed = entry_code(s, f, a)
                .map_err(|w| anyhow!(w))
                .and_then(|bodies| {
                    let spec = spec_of(s, kind)?;
                    s.install_recorder(a, spec, &bodies)
                });
            match placed {
                Ok(r) => mine.push(r),
                Err(e) => {
                    why = Some(match crate::inferior::foreign(&e) {
                        // someone's uprobe or breakpoint at the entry: the
                        // kernel uprobe goes beside it
                        Some(x) => format!(
                            "{f} ({a:#x}): an int3 that is not pgdbg's is at {:#x} (a kernel uprobe from perf/bpftrace/another pgdbg, or another debugger)",
                            x.addr
                        ),
                        None => format!("{f} ({a:#x}): {e:#}"),
                    });
                    break;
                }
            }
        }
        if let Some(why) = why {
            take_out(s, mine);
            s.say(&format!(
                "waits: no in-process recorder at {why}; a kernel uprobe marks it"
            ));
            continue;
        }
        for r in &mine {
            match r.reader(s.pid()) {
                Ok(x) => readers.push((kind, x)),
                Err(e) => {
                    take_out(
                        s,
                        mine.into_iter().chain(recorders.into_iter().map(|x| x.1)),
                    );
                    return Err(e);
                }
            }
        }
        recorders.extend(mine.into_iter().map(|r| (f, r)));
        recorded.push(f);
    }
    if recorders.is_empty() {
        return Err(anyhow!(
            "no entry of the executor takes an in-process recorder"
        ));
    }
    Ok(InProcessMarks {
        recorders,
        recorded,
        shared: Arc::new(Mutex::new(Shared {
            pid: s.pid(),
            source_text: s
                .layout("QueryDesc")
                .and_then(|l| l.offset("sourceText"))
                .ok(),
            readers,
            clock,
            marks: Vec::new(),
            lost: 0,
            failed: None,
        })),
        stop: Arc::new(AtomicBool::new(false)),
        thread: None,
    })
}

/// Take recorders out, all even when one fails (what fails is logged:
/// the session's detach takes out what is left).
fn take_out(s: &mut dyn Backend, recorders: impl IntoIterator<Item = Recorder>) {
    for r in recorders {
        let site = r.site;
        if let Err(e) = s.remove_recorder(r) {
            crate::inferior::log::debug(&format!(
                "waits: the recorder at {site:#x} could not be taken out now: {e:#}"
            ));
        }
    }
}

impl Drop for InProcessMarks {
    /// The reading thread never outlives the recorders' pages: it writes
    /// each ring's `tail`, and a page unmapped when its recorder is taken
    /// out (here or by the session's detach, on any way out) may be the
    /// backend's own memory next.
    fn drop(&mut self) {
        self.stop_reading();
    }
}

impl InProcessMarks {
    fn stop_reading(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Read the rings every `READ_EVERY` from now on, while the backend
    /// runs.
    pub fn start_reading(&mut self) {
        let (sh, st) = (self.shared.clone(), self.stop.clone());
        self.thread = Some(std::thread::spawn(move || {
            // pgdbg's signals (Ctrl-C, SIGTERM) are its main thread's
            crate::runtime::block_in_this_thread();
            while !st.load(Ordering::Relaxed) {
                lock(&sh).read();
                std::thread::sleep(READ_EVERY);
            }
        }));
    }

    /// The backend is in its exit stop: the rings' last records, while
    /// its memory is still there.
    pub fn read_at_exit(&self) {
        lock(&self.shared).read();
    }

    /// Stop reading, read the rings a last time (the backend still
    /// there), take the recorders out: the marks in time order, the calls
    /// not recorded (a ring full), and the first error of a read if the
    /// backend did not end.  An error taking a recorder out is returned
    /// after the marks are kept (the caller's detach takes out what is
    /// left).
    pub fn finish(mut self, s: &mut dyn Backend) -> Finished {
        self.stop_reading();
        let mut sh = lock(&self.shared);
        if !s.is_gone() {
            sh.read();
        }
        let mut marks = std::mem::take(&mut sh.marks);
        let lost = sh.lost;
        let failed = sh.failed.take().filter(|_| !s.is_gone());
        drop(sh);
        marks.sort_by_key(|m| m.time);
        let mut first = Ok(());
        let mut taken_over = Vec::new();
        for (f, r) in std::mem::take(&mut self.recorders) {
            // someone else's uprobe took the jump over meanwhile (undone
            // when it trapped, `inferior/jumpover.rs`): no record since
            // (known from its trap when the backend has ended since)
            if s.jump_taken_over(r.site).unwrap_or(false) {
                taken_over.push((f, r.site));
            }
            if let Err(e) = s.remove_recorder(r)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        Finished {
            marks,
            lost,
            failed,
            taken_over,
            removed: first,
        }
    }
}

/// What the recorders gave.
pub(crate) struct Finished {
    /// In time order.
    pub marks: Vec<Mark>,
    /// Calls that found a ring full.
    pub lost: u64,
    /// Why a read of the rings failed while the backend was there.
    pub failed: Option<String>,
    /// The recorders another tool (a kernel uprobe, a patcher) took over while
    /// tracing (function, entry): they recorded nothing after that.
    pub taken_over: Vec<(&'static str, u64)>,
    /// Taking the recorders out.
    pub removed: Result<()>,
}
