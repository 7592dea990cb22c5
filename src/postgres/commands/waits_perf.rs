//! `waits trace` (by default): the waits from a perf write-breakpoint event
//! on the wait-event word (`crate::perf::watch`) instead of ptrace stops,
//! the statement times from kernel uprobes on the executor's start and end.

use crate::perf::Wakeup;
use crate::perf::profile::Symbolizer;
use crate::perf::watch::{MarkSpec, StartError, TextFrom, WordWatch};
use crate::postgres::backend::{Backend, Flow, NoStopDigest, Outcome, ProbeHandler, Ran};
use crate::postgres::waits::TraceProbe;
use anyhow::Result;
use iced_x86::Register;
use std::time::Duration;

/// The functions `statement_marks` may place uprobes on.
const MARKED: [&str; 4] = [
    "PortalDefineQuery",
    "CreateQueryDesc",
    "standard_ExecutorStart",
    "standard_ExecutorEnd",
];

/// The kinds of statement marks (`perf::watch::Mark::kind`).
pub(crate) use super::waits_marks::{END, START};
const TEXT: u8 = 2;
/// The text of a statement that ended (its message buffer reset) before
/// its mark was read.
const GONE: &str = "(statement text reused before it was read)";

/// Uprobes at every out-of-line copy of standard_ExecutorStart and
/// standard_ExecutorEnd, and the statement's text.  With tracefs (`tracefs`
/// is where it is), the executor start's uprobe is defined there with the
/// text as a fetch argument (`QueryDesc.sourceText`): the kernel copies the
/// text into the record at the hit, whatever the backend does with it
/// afterwards, and pgdbg reads the records every few ms.
///
/// Without tracefs, the text is read by pgdbg from the functions that are
/// handed it in a register before the executor starts: PortalDefineQuery
/// (`sourceText`, third argument: simple and extended protocol, cursors)
/// and CreateQueryDesc (second argument: SPI, EXPLAIN ANALYZE, COPY, CREATE
/// TABLE AS; its calls in pquery.c are inlined and preceded by
/// PortalDefineQuery), woken at each of their hits (a simple-protocol
/// statement's message buffer is reused by the next message).  Each
/// executor start takes the text given last; without such a text, the one
/// read from its QueryDesc.  A statement of a few microseconds sent by the
/// simple protocol may be over before its text is read: it is timed, with
/// [`GONE`] for its text.  This costs the backend a wake-up of pgdbg per
/// statement, and PortalDefineQuery's first instruction (a `mov`) is
/// stepped out of line by the kernel: about 45 µs more per statement than
/// with tracefs on the machines measured (docs/benchmarks.md).
///
/// `recorded`: the functions whose marks come from in-process recorders
/// (`waits_marks.rs`), left out here; with standard_ExecutorStart among
/// them, its recorder copies the text and nothing else is probed for it.
fn statement_marks(
    s: &dyn Backend,
    tracefs: Option<&std::path::Path>,
    recorded: &[&str],
) -> Result<Vec<MarkSpec>> {
    let at_start = s
        .layout("QueryDesc")
        .ok()
        .and_then(|l| l.offset("sourceText").ok())
        .map(TextFrom::FieldOfRdi)
        .unwrap_or(TextFrom::None);
    // the kernel copies the text at the executor's start: nothing else to probe
    let kernel = tracefs.filter(|_| at_start != TextFrom::None);
    let probed: &[(&str, u8, TextFrom)] = if kernel.is_some() {
        &[
            ("standard_ExecutorStart", START, at_start),
            ("standard_ExecutorEnd", END, TextFrom::None),
        ]
    } else {
        &[
            ("PortalDefineQuery", TEXT, TextFrom::Rdx),
            ("CreateQueryDesc", TEXT, TextFrom::Rsi),
            ("standard_ExecutorStart", START, at_start),
            ("standard_ExecutorEnd", END, TextFrom::None),
        ]
    };
    let text_recorded = recorded.contains(&"standard_ExecutorStart");
    let mut marks = Vec::new();
    for &(f, kind, text) in probed {
        if recorded.contains(&f) || (kind == TEXT && text_recorded) {
            continue;
        }
        for a in s.function_addrs(f) {
            let (a, file, offset) = mark_place(s.di(), s.bias(), s.pid(), f, a).map_err(|why| {
                anyhow::Error::new(crate::perf::Refused(format!("waits trace: {why}")))
            })?;
            if let Some(why) = crate::postgres::backend::uprobe_conflict(s, a, f) {
                return Err(anyhow::Error::new(crate::perf::Refused(format!(
                    "waits trace: {why}"
                ))));
            }
            marks.push(MarkSpec {
                file,
                offset,
                kind,
                text,
                // only the texts handed to PortalDefineQuery/CreateQueryDesc
                // and read by pgdbg must be read at once (a simple-protocol
                // statement's buffer is reused by the next message); the
                // executor's start and end are only timed (the start's text
                // is a fallback), and a text the kernel copied is in its record
                wakeup: if kind == TEXT {
                    Wakeup::PerRecord
                } else {
                    Wakeup::Batched
                },
                tracefs: kernel.map(|p| p.to_path_buf()),
            });
        }
    }
    Ok(marks)
}

/// The handler `waits_trace_perf` runs the backend under: `inner`'s,
/// and at the backend's exit stop the in-process recorders' last read.
struct ExitRead<'a, H> {
    inner: &'a mut H,
    marks: Option<&'a super::waits_marks::InProcessMarks>,
}

impl<H: ProbeHandler> ProbeHandler for ExitRead<'_, H> {
    fn on_stop(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()> {
        self.inner.on_stop(s, addr)
    }
    fn done(&self) -> bool {
        self.inner.done()
    }
    fn at_deadline(&mut self) {
        self.inner.at_deadline()
    }
    fn reads_at_exit(&self) -> bool {
        self.marks.is_some()
    }
    fn on_exit(&mut self, _s: &mut dyn Backend) -> Result<()> {
        if let Some(m) = self.marks {
            m.read_at_exit();
        }
        Ok(())
    }
}

/// Where the statement mark of function `f`'s out-of-line copy at `a`
/// (the binary at `bias` in process `pid`) goes: at the entry block's
/// first instruction the kernel emulates, while the argument registers are
/// the entry's; that address and its file and offset.
pub(crate) fn mark_place(
    di: &crate::debuginfo::DebugInfo,
    bias: u64,
    pid: i32,
    f: &str,
    a: u64,
) -> Result<(u64, crate::inferior::mappedfile::VerifiedFile, u64), String> {
    let a = crate::perf::placement::entry_point(
        di,
        bias,
        f,
        a,
        &[Register::RDI, Register::RSI, Register::RDX],
        true,
    );
    let (file, offset) = crate::perf::file_offset(pid, a)
        .map_err(|e| format!("{f} at {a:#x} {}", e.said("the backend")))?;
    Ok((a, file, offset))
}

/// Every store into the wait-event word comes from the perf event and every
/// executor start and end from a uprobe (the backend is not stopped per
/// wait or statement); the waits and statements are reported once tracing
/// ends, in time order, through the same probe (names, capture events,
/// summary) as the ptrace mode.  A refusal of the kernel is a
/// [`crate::perf::Refused`] returned before anything was opened.
pub fn waits_trace_perf(
    s: &mut dyn Backend,
    duration: Option<Duration>,
    stacks: usize,
    quiet: bool,
    statements: bool,
    uprobes: bool,
) -> Result<Outcome> {
    let mut probe = TraceProbe::observing(s, stacks, quiet)?;
    // the waits are named once tracing ends, by asking the backend; one
    // that ends meanwhile cannot be asked: every value this build can
    // report is named now, while it can (once per build: the names are
    // kept on disk), so that an ended backend's waits have their names
    let values = crate::postgres::waits::known_values(s);
    if values.iter().any(|v| probe.names.unresolved(*v).is_some())
        && let Err(e) = probe.names.resolve(s, &values)
    {
        // asked again at the end, as before, when the backend is still there
        s.say(&format!(
            "waits: the names of this build's waits could not be asked for now ({e:#}); asked at the end"
        ));
    }
    let base_i = std::time::Instant::now();
    let base_ns = crate::perf::monotonic_ns();
    let base_wall = crate::capture::wall_now();
    let mut how = String::new();
    // in a worker of `--cluster`: the marks come from uprobes the
    // postmaster's processes inherit, read by pgdbg's leader
    // (cluster_marks.rs); the backend is registered there first
    let mut fed = match crate::perf::feed::feed().filter(|_| statements) {
        Some(feed) => match crate::perf::feed::register(feed, s.pid()) {
            Ok(r) => Some(r),
            Err(e) => {
                how = format!("; its own uprobes (the cluster's could not be had: {e})");
                None
            }
        },
        None => None,
    };
    let own_marks = statements && fed.is_none();
    if own_marks {
        crate::postgres::backend::clear_orphans(s, &MARKED, "waits trace")?;
    }
    // the executor's start and end marked in-process where their entries
    // take a recorder; kernel uprobes mark the rest
    let mut in_process = match own_marks && !uprobes {
        true => match super::waits_marks::install(s) {
            Ok(m) => Some(m),
            Err(e) => {
                s.say(&format!(
                    "waits: statement times from kernel uprobes, not in-process recorders: {e:#}"
                ));
                None
            }
        },
        false => None,
    };
    let recorded: Vec<&str> = in_process
        .as_ref()
        .map(|m| m.recorded.clone())
        .unwrap_or_default();
    let uprobed = own_marks && recorded.len() < super::waits_marks::RECORDED.len();
    // statement texts from uprobes: copied by the kernel into each
    // executor start's record (a tracefs uprobe), else read by pgdbg as
    // they are handed over
    let tracefs = if uprobed && !recorded.contains(&"standard_ExecutorStart") {
        match crate::perf::tracefs::root() {
            Ok((root, mounted)) => {
                if mounted {
                    s.say(&format!(
                        "waits: mounted tracefs on {} (the kernel copies each statement's text at its start)",
                        root.display()
                    ));
                }
                Some(root)
            }
            Err(why) => {
                how = format!("; statement texts read by pgdbg as they arrive ({why})");
                None
            }
        }
    } else {
        None
    };
    let marks = if uprobed {
        match statement_marks(s, tracefs.as_deref(), &recorded) {
            Ok(m) => m,
            Err(e) => {
                if let Some(m) = in_process.take() {
                    let _ = m.finish(s);
                }
                return Err(e);
            }
        }
    } else {
        Vec::new()
    };
    // without a text: over before pgdbg read it, or (copied by the kernel
    // or the recorder) none at all
    let mut gone = if fed.is_some()
        || marks.iter().any(|m| m.tracefs.is_some())
        || recorded.contains(&"standard_ExecutorStart")
    {
        "(no statement text)"
    } else {
        GONE
    };
    let (pid, word, bias) = (s.pid(), probe.word(), s.bias());
    let start = |marks: &[MarkSpec]| WordWatch::start(pid, pid, word, stacks > 0, bias, marks);
    let watch = match start(&marks) {
        Err(StartError::Mark(e)) if marks.iter().any(|m| m.tracefs.is_some()) => {
            // a tracefs uprobe refused (lockdown, a kernel without fetch
            // arguments): the texts are read by pgdbg instead
            how =
                format!("; statement texts read by pgdbg as they arrive (a tracefs uprobe: {e:#})");
            gone = GONE;
            statement_marks(s, None, &recorded)
                .and_then(|m| start(&m).map_err(StartError::into_inner))
        }
        w => w.map_err(StartError::into_inner),
    };
    let watch = match watch {
        Ok(w) => w,
        Err(e) => {
            if let Some(m) = in_process.take() {
                let _ = m.finish(s);
            }
            return Err(e);
        }
    };
    let marked = if fed.is_some() {
        "the cluster's uprobes on the executor's start and end (inherited from the postmaster)"
            .to_string()
    } else {
        match (recorded.len(), uprobed) {
            (0, _) => "uprobes on the executor's start and end".to_string(),
            (_, false) => "in-process recorders at the executor's start and end".to_string(),
            (_, true) => {
                let rest: Vec<&str> = super::waits_marks::RECORDED
                    .iter()
                    .map(|(f, _)| *f)
                    .filter(|f| !recorded.contains(f))
                    .collect();
                format!(
                    "an in-process recorder at {} and a kernel uprobe at {}",
                    recorded.join(", "),
                    rest.join(", ")
                )
            }
        }
    };
    s.say(&format!(
        "waits: tracing backend {} (perf write-breakpoint event on its wait-event word and {marked}, no stop per wait; reported at the end{how}){}",
        s.pid(),
        crate::runtime::limit_text(duration, None)
    ));
    if let Some(m) = in_process.as_mut() {
        m.start_reading();
    }
    // the watch's records read while the backend runs on
    let mut digest = NoStopDigest::new(move || {
        let ran = base_i.elapsed();
        watch
            .finish()
            .map(|got| (ran, got, crate::perf::monotonic_ns()))
    });
    let res = s.run_probes(
        &mut ExitRead {
            inner: &mut digest,
            marks: in_process.as_ref(),
        },
        duration,
    );
    let finished = in_process.take().map(|m| m.finish(s));
    let (ran, mut got, end_ns) = digest.result()?;
    let mut notes = String::new();
    if let Some(f) = finished {
        got.marks.extend(
            f.marks
                .into_iter()
                .filter(|m| m.time >= base_ns && m.time <= end_ns),
        );
        got.lost += f.lost;
        for (func, site) in &f.taken_over {
            let which = if *func == "standard_ExecutorEnd" {
                "ended"
            } else {
                "started"
            };
            notes.push_str(&format!(
                "\nanother tool (a kernel uprobe, or a patcher) took over the in-process recorder's jump at {func} ({site:#x}) while tracing: statements {which} after that are not timed"
            ));
        }
        if let Some(why) = f.failed {
            notes.push_str(&format!(
                "\nthe in-process recorders' records could not all be read ({why}): statements may be missing"
            ));
        }
        f.removed?;
    }
    if let Some(r) = fed.take() {
        // every mark recorded up to now; those from before the watch
        // started (a backend there already) or after it ended are not
        // this trace's
        match r.take() {
            Ok(t) => {
                got.marks = t
                    .marks
                    .into_iter()
                    .filter(|m| m.time >= base_ns && m.time <= end_ns)
                    .collect();
                if t.dropped > 0 {
                    notes.push_str(&format!(
                        "\n{} statement starts or ends past the most kept for one backend were left out",
                        t.dropped
                    ));
                }
                if t.lost_since > 0 {
                    notes.push_str(&format!(
                        "\n{} statement starts or ends in the cluster were not recorded while it was traced (the kernel's ring was full): some of its statements may be missing",
                        t.lost_since
                    ));
                }
            }
            Err(e) => notes.push_str(&format!(
                "\nthe statements' marks could not be had from pgdbg's leader ({e}): statements left out"
            )),
        }
    }
    let Ran { end, text } = res?;
    let flow = Flow::from(end);
    let stores = got.stores.len();
    // a backend that ended (exited or was killed) recorded everything up
    // to its end: the kernel's records outlive it, and are reported alike
    // (its waits are named from the names known, it cannot be asked)
    if matches!(flow, Flow::Continue | Flow::TargetGone) {
        if flow == Flow::TargetGone {
            probe.backend_ended();
        }
        // names of the stacks first (the debug info is borrowed from the
        // backend, the mapped files were read while it ran), then the
        // stores in order
        let named: Vec<Vec<String>> = {
            let mut sym = match got.maps.take() {
                Some(maps) => Symbolizer::with_maps(maps, s.di(), s.bias()),
                None => Symbolizer::new(s.pid(), s.di(), s.bias()),
            };
            got.stores
                .iter()
                .map(|st| {
                    let mut stack = Vec::new();
                    for (i, pc) in st.pcs.iter().enumerate() {
                        if stack.len() >= stacks {
                            break;
                        }
                        stack.extend(sym.names(*pc, i == 0));
                    }
                    stack.truncate(stacks);
                    stack
                })
                .collect()
        };
        let at = |time: u64| {
            let delta = time as i128 - base_ns as i128;
            let now = if delta >= 0 {
                base_i + Duration::from_nanos(delta as u64)
            } else {
                base_i
                    .checked_sub(Duration::from_nanos((-delta) as u64))
                    .unwrap_or(base_i)
            };
            (now, base_wall + delta as f64 / 1e9)
        };
        // stores and statement marks merged in time order (a mark before a
        // store of the same time: a statement starts before it waits)
        let mut order: Vec<(u64, bool, usize)> = got
            .stores
            .iter()
            .enumerate()
            .map(|(i, st)| (st.time, true, i))
            .chain(
                got.marks
                    .iter()
                    .enumerate()
                    .map(|(i, m)| (m.time, false, i)),
            )
            .collect();
        order.sort();
        let mut named: Vec<Option<Vec<String>>> = named.into_iter().map(Some).collect();
        // the text of the last QueryDesc created: the next executor start's
        let mut created: Option<String> = None;
        for (time, is_store, i) in order {
            let (now, ts) = at(time);
            if is_store {
                let stack = named[i].take().unwrap_or_default();
                probe.store(s, got.stores[i].value, now, ts, stack);
            } else {
                let m = &got.marks[i];
                match m.kind {
                    TEXT => created = m.text.clone(),
                    START => {
                        let q = created
                            .take()
                            .filter(|q| !q.is_empty())
                            .or_else(|| m.text.clone())
                            .filter(|q| !q.is_empty())
                            .unwrap_or_else(|| gone.to_string());
                        probe.statement_start(m.arg, now, q);
                    }
                    _ => probe.statement_end(s, m.arg, now, Some(ts)),
                }
            }
        }
        probe.close(s);
    }
    if got.lost > 0 {
        notes.push_str(&format!(
            "\n{} stores or statement marks not recorded (a ring was full, or written over before it was read): waits around them are merged",
            got.lost
        ));
    }
    if got.read_back > 0 {
        notes.push_str(&format!(
            "\n{} of {stores} stores were not plain moves: their values were read back",
            got.read_back
        ));
    }
    if got.unread > 0 {
        notes.push_str(&format!(
            "\n{} stores were not plain moves and could not be read back (the backend had ended): left out",
            got.unread
        ));
    }
    if flow == Flow::TargetGone {
        notes.push_str(&format!(
            "\nbackend {pid} ended after {:.1} s: its waits and statements up to its end are reported above",
            ran.as_secs_f64()
        ));
    } else if flow != Flow::Continue {
        notes.push_str(&format!(
            "\n{stores} stores recorded; not reported (tracing was cut short)"
        ));
    }
    Ok(Outcome::new(
        format!("{}{notes}{text}", probe.summary()),
        flow,
    ))
}
