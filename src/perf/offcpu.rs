//! `profile --off-cpu`: where one backend thread waits.  Every time the
//! scheduler takes the thread off a CPU, the kernel records the user
//! registers and a copy of the top of the user stack (unwound with CFI as
//! `profile` does), the time and the thread's state; when it puts the
//! thread back, the time again.  Each interval off the CPU (switch-out to
//! the next switch-in) is attributed to the stack at the switch-out.
//!
//! Which events: the tracepoint `sched:sched_switch`, opened on the
//! thread.  It fires in the scheduler while the thread is still the
//! current task, so its sample carries that thread's user registers and
//! stack, and its raw record has `prev_state`: the kernel's reason
//! (sleeping S, uninterruptible D, preempted R).  The software event
//! PERF_COUNT_SW_CONTEXT_SWITCHES would give the same stack but no
//! state.  The switch-in has no sample of its own on a per-thread event
//! (the tracepoint fires for the task leaving), so the same event asks
//! for PERF_RECORD_SWITCH records (`context_switch`), whose switch-in
//! record is written once the thread runs again, with its time.  An
//! interval starts at the switch-out's own record, written after the
//! sample's stack copy and just before the thread's events stop counting,
//! so that `profile --wall`'s cpu-clock and the interval never both count
//! the copy (about 17 µs per switch, measured on a 2-vCPU VM).
//!
//! The wait event set at the switch-out (PostgreSQL's `wait_event_info`
//! word, `*my_wait_event_info`; `MyProc->wait_event_info` on 13): only
//! the backend's own code writes the word, so while its thread is off a
//! CPU the word cannot change.  The ring wakes pgdbg's reader at every
//! switch-out sample ([`Wakeup::PerRecord`]: the sample is the event's
//! only sample; the switch records do not count); the reader drains the
//! ring up to the kernel's head H, and when the last interval is still
//! open (its switch-out read, no switch-in after it) it reads the word
//! with process_vm_readv and then the head again.  The head still H means
//! no record was written meanwhile, so no switch-in either, and the
//! kernel writes the switch-in record before the thread runs its own
//! code again: `finish_task_switch` calls `perf_event_task_sched_in`,
//! which writes the PERF_RECORD_SWITCH (`perf_event_switch(.., true)`)
//! and publishes the head, all in the kernel on the way back to the
//! thread (kernel/sched/core.c, kernel/events/core.c).  x86 keeps a CPU's
//! stores in order for the others (the head, then any store of the
//! thread's), so a word read before the head was seen unchanged is the
//! value at the switch-out, exactly.  The ring is empty when the word is
//! read (just drained), so the switch-in record cannot be lost for want
//! of room.  When the head moved, the new records are drained and, the
//! interval still open, the word read again; an interval whose switch-in
//! came first has its wait event "not read" (counted and said, never
//! guessed): the short ones, shorter than the reader's wake-up.  The cost
//! to the backend: one wake-up of the reader per switch-out (an irq_work
//! on its CPU); the backend is neither stopped nor trapped.
//!
//! Nothing is written into the backend and it is never stopped: the
//! kernel copies what it records, pgdbg only reads its ring and, with
//! process_vm_readv, the wait-event word.

use super::profile::{KERNEL_PC, STACK_BYTES, Symbolizer, stack_frames};
use super::recording::Recording;
use super::stack::{Maps, unwind};
use super::tracefs::{Field, field_u64};
use super::{
    Attr, Event, FLAG_DISABLED, FLAG_EXCLUDE_HV, FLAG_USE_CLOCKID, REGS_MASK, Refused,
    SAMPLE_REGS_USER, SAMPLE_STACK_USER, SAMPLE_TID, SAMPLE_TIME, Wakeup, monotonic_ns, set_reg,
};
use crate::inferior::Registers;
use anyhow::{Result, anyhow};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

const SAMPLE_RAW: u64 = 1 << 10;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
const FLAG_CONTEXT_SWITCH: u64 = 1 << 26;
const RECORD_SAMPLE: u32 = 9;
const RECORD_SWITCH: u32 = 14;
use super::RECORD_LOST;
const MISC_SWITCH_OUT: u16 = 1 << 13;
const MAX_FRAMES: usize = 256;

/// The kernel's reason for a switch-out, from the tracepoint's
/// `prev_state`: a task preempted is reported with a bit above the task
/// states (TASK_REPORT_MAX) or as 0 (running).
pub fn reason(state: u64) -> char {
    match state & 0xff {
        0 => 'R',
        s if s & 1 != 0 => 'S',
        s if s & 2 != 0 => 'D',
        s if s & 0x80 != 0 => 'I',
        s if s & 0x0c != 0 => 'T',
        _ => '?',
    }
}

fn reason_name(r: char) -> &'static str {
    match r {
        'S' => "S sleeping",
        'D' => "D uninterruptible (disk)",
        'R' => "R preempted",
        'I' => "I idle",
        'T' => "T stopped",
        _ => "? other",
    }
}

/// An off-CPU stack's key: its pcs (innermost first), the kernel's
/// reason, and the wait_event_info at the switch-out (None: not read).
pub type OffKey = (Vec<u64>, char, Option<u32>);

/// What the reader thread gathered.
#[derive(Default)]
pub struct RawOffCpu {
    /// (pcs innermost first, reason, wait_event_info at the switch-out or
    /// None when it was not read) -> (ns off the CPU, intervals)
    pub stacks: HashMap<OffKey, (u64, u64)>,
    /// Why no wait event was read at all (the word could not be found).
    pub no_word: Option<String>,
    pub intervals: u64,
    pub off_ns: u64,
    /// Off the CPU from the window's start to the first switch-in, the
    /// switch-out having come before the window (stack and reason
    /// unknown; not in `off_ns`).
    pub before_ns: u64,
    /// Records the kernel could not write (the ring was full).
    pub lost: u64,
    /// Switches left out because the record they pair with was lost.
    pub unpaired: u64,
    pub duration_s: f64,
    pub cpu_s: Option<f64>,
    /// Each interval's switch-out time, when asked for (`--by-statement`).
    pub stamps: Option<Vec<super::stamp::Stamp>>,
    /// The files the process mapped, as the reader last saw them.
    pub maps: Option<Maps>,
}

impl super::profile::ReaderMaps for RawOffCpu {
    fn reader_maps(&mut self) -> Option<Maps> {
        self.maps.take()
    }
}

/// A switch-out waiting for its switch-in.
struct Out {
    time: u64,
    pcs: Vec<u64>,
    reason: char,
    /// The wait-event word, once read while the thread was still off.
    wait: Option<u32>,
}

/// The backend's wait-event word, read while the backend runs.
pub struct WaitWord {
    pid: i32,
    addr: u64,
}

impl WaitWord {
    /// The word of backend `pid` at `addr` (where PostgreSQL's knowledge
    /// found it, `postgres::waitnames::word_address`), or why it cannot be
    /// read.
    pub fn at(pid: i32, addr: Result<u64, String>) -> Result<WaitWord, String> {
        let w = WaitWord { pid, addr: addr? };
        w.read()
            .map(|_| w)
            .ok_or_else(|| "the wait-event word cannot be read".to_string())
    }

    fn read(&self) -> Option<u32> {
        let mut b = [0u8; 4];
        super::watch::read_mem(self.pid, self.addr, &mut b).then(|| u32::from_le_bytes(b))
    }
}

/// A switch-out sample: time, the tracepoint's raw record, the user
/// registers and the copy of the user stack.
type SwitchOut<'a> = (u64, &'a [u8], Option<Registers>, &'a [u8]);

/// A tracepoint sample: TID, TIME, RAW, REGS_USER, STACK_USER in the
/// kernel's order.
fn parse_switch_out(b: &[u8]) -> Option<SwitchOut<'_>> {
    let mut p = 8usize; // pid, tid
    let u64_at = |p: &mut usize| -> Option<u64> {
        let v = u64::from_le_bytes(b.get(*p..*p + 8)?.try_into().ok()?);
        *p += 8;
        Some(v)
    };
    let time = u64_at(&mut p)?;
    let raw_size = u32::from_le_bytes(b.get(p..p + 4)?.try_into().ok()?) as usize;
    let raw = b.get(p + 4..p + 4 + raw_size)?;
    p += 4 + raw_size;
    let abi = u64_at(&mut p)?;
    let regs = if abi != 0 {
        let mut r = Registers::default();
        for bit in 0..64u32 {
            if REGS_MASK & (1 << bit) != 0 {
                set_reg(&mut r, bit, u64_at(&mut p)?);
            }
        }
        Some(r)
    } else {
        None
    };
    let size = u64_at(&mut p)? as usize;
    let mut stack: &[u8] = &[];
    if size > 0 {
        let data = b.get(p..p + size)?;
        p += size;
        let dyn_size = u64_at(&mut p)? as usize;
        stack = &data[..dyn_size.min(size)];
    }
    Some((time, raw, regs, stack))
}

/// The switch tracepoint opened and enabled on thread `tid` of process
/// `pid`, and where its record keeps `prev_state`; `mode` names the
/// command in refusals ("profile --off-cpu").
pub(crate) fn open_switches(pid: i32, tid: i32, mode: &str) -> Result<(Event, Field)> {
    let what = format!("{mode} on process {pid}");
    let (id, fields) = super::tracefs::tracepoint("sched", "sched_switch")
        .map_err(|e| Refused(format!("{what}: {e}")))?;
    let state_field = *fields
        .get("prev_state")
        .ok_or_else(|| anyhow!("{what}: sched:sched_switch has no prev_state field"))?;
    let attr = Attr {
        kind: super::pmu::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<Attr>() as u32,
        config: id,
        period_or_freq: 1,
        sample_type: SAMPLE_TID | SAMPLE_TIME | SAMPLE_RAW | SAMPLE_REGS_USER | SAMPLE_STACK_USER,
        // the switch records carry the tid and time too (sample_id_all)
        flags: FLAG_DISABLED
            | FLAG_EXCLUDE_HV
            | FLAG_USE_CLOCKID
            | FLAG_SAMPLE_ID_ALL
            | FLAG_CONTEXT_SWITCH,
        clockid: libc::CLOCK_MONOTONIC,
        sample_regs_user: REGS_MASK,
        sample_stack_user: STACK_BYTES,
        ..Attr::default()
    }
    // the reader reads the wait-event word at once (module doc)
    .wakeup(Wakeup::PerRecord);
    let refused = |e: std::io::Error| -> anyhow::Error {
        match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => {
                let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "unknown".into());
                let why = super::permission_why(&e, &paranoid);
                anyhow::Error::new(Refused(format!(
                    "{what} (the scheduler's tracepoint: CAP_PERFMON or perf_event_paranoid <= 1): {why}"
                )))
            }
            _ => super::open_error(mode, pid, e),
        }
    };
    // 1 MB of ring: about 30 switch-outs; drained every few ms
    let ev = Event::open(&attr, tid, 256).map_err(refused)?;
    ev.enable().map_err(refused)?;
    Ok((ev, state_field))
}

/// A PERF_RECORD_SWITCH record's time (its sample_id: pid, tid, time).
fn switch_time(b: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(8..16)?.try_into().ok()?))
}

/// The switch records of one thread turned into intervals off the CPU
/// within a window that starts at `t0_ns` (earlier parts are cut off).
pub(crate) struct Switches {
    t0_ns: u64,
    state_field: Field,
    /// The last switch-out, waiting for its switch-in.
    out: Option<Out>,
    /// No switch-in seen yet (a first one ends an interval begun before
    /// the window, whose stack and reason are unknown).
    first: bool,
    /// Records were lost (the ring was full) since the last switch-out:
    /// the next switch-in may end an interval whose switch-out is in the
    /// gap, and is not paired with anything.
    after_gap: bool,
    pub raw: RawOffCpu,
}

impl Switches {
    /// `timed`: keep each interval's switch-out time too.
    pub fn new(t0_ns: u64, state_field: Field, timed: bool) -> Switches {
        Switches {
            t0_ns,
            state_field,
            out: None,
            first: true,
            after_gap: false,
            raw: RawOffCpu {
                stamps: timed.then(Vec::new),
                ..RawOffCpu::default()
            },
        }
    }

    fn add(&mut self, o: Out, end: u64) {
        let ns = end.saturating_sub(o.time.max(self.t0_ns));
        if let Some(st) = self.raw.stamps.as_mut() {
            st.push(super::stamp::Stamp {
                time: o.time,
                weight: ns,
                on_cpu: false,
                leaf: super::profile::user_leaf(&o.pcs),
                wait: o.wait,
                note: None,
            });
        }
        let e = self
            .raw
            .stacks
            .entry((o.pcs, o.reason, o.wait))
            .or_insert((0, 0));
        e.0 += ns;
        e.1 += 1;
        self.raw.off_ns += ns;
        self.raw.intervals += 1;
    }

    /// One record of the switch event's ring.
    pub fn take(&mut self, kind: u32, misc: u16, b: &[u8], maps: &mut Maps) {
        match kind {
            RECORD_SAMPLE => {
                let Some((time, rec, regs, stack)) = parse_switch_out(b) else {
                    return;
                };
                // every switch happens in the kernel: the user stack is
                // below a kernel frame
                let mut pcs = vec![KERNEL_PC];
                if let Some(r) = &regs {
                    pcs.extend(unwind(maps, r, stack, MAX_FRAMES));
                }
                let state = field_u64(rec, &self.state_field).unwrap_or(0);
                // a switch-out before the last one's switch-in: that
                // record was lost, the interval's end is unknown
                self.after_gap = false;
                self.out = Some(Out {
                    time,
                    pcs,
                    reason: reason(state),
                    wait: None,
                });
            }
            RECORD_SWITCH if misc & MISC_SWITCH_OUT != 0 => {
                // the switch-out's own record, written after its sample
                // (whose user stack copy takes microseconds on the CPU)
                // and just before the thread's events stop counting
                // (`__perf_event_task_sched_out`): the interval starts
                // here, or the cpu-clock and the interval would both
                // count the copy, at every switch
                let Some(time) = switch_time(b) else { return };
                if let Some(o) = self.out.as_mut().filter(|o| time >= o.time) {
                    o.time = time;
                }
            }
            RECORD_SWITCH => {
                let Some(time) = switch_time(b) else { return };
                if std::mem::take(&mut self.after_gap) {
                    // its switch-out was in the gap (or no interval is
                    // open): nothing it can be paired with
                    self.out = None;
                    self.raw.unpaired += 1;
                    return;
                }
                match self.out.take() {
                    Some(o) => self.add(o, time),
                    // none pending: off the CPU since before the start
                    None if self.first => self.raw.before_ns = time.saturating_sub(self.t0_ns),
                    None => {}
                }
                self.first = false;
            }
            RECORD_LOST => {
                // the gap may hold this interval's switch-in and later
                // switches: its end is unknown, it is left out (never
                // stretched over the time on a CPU in the gap)
                if self.out.take().is_some() {
                    self.raw.unpaired += 1;
                }
                self.after_gap = true;
                self.first = false;
            }
            _ => {}
        }
    }

    /// Drain `ev` (this thread's switch event) and read the wait-event
    /// word for the interval still open, if its thread has not run since
    /// (see the module's doc): the head unchanged after the word was read.
    pub fn drain(&mut self, ev: &mut Event, word: Option<&WaitWord>, maps: &mut Maps) {
        // a few rounds: a record written meanwhile (the switch-out's own
        // PERF_RECORD_SWITCH after its sample) is drained and the word
        // read again, as long as no switch-in closed the interval
        for _ in 0..8 {
            let head = ev.drain_records(|k, m, b| self.take(k, m, b, maps));
            let (Some(w), Some(o)) = (word, self.out.as_mut()) else {
                return;
            };
            if o.wait.is_some() {
                return;
            }
            let Some(v) = w.read() else { return };
            if ev.head() == head {
                o.wait = Some(v);
                return;
            }
        }
    }

    /// The window ends at `end_ns`: an interval still open is counted up
    /// to it.
    pub fn end(mut self, end_ns: u64) -> RawOffCpu {
        if let Some(o) = self.out.take() {
            self.add(o, end_ns);
        }
        self.raw.duration_s = end_ns.saturating_sub(self.t0_ns) as f64 / 1e9;
        self.raw
    }
}

pub struct OffCpuProfiler(Recording<RawOffCpu>);

impl OffCpuProfiler {
    /// Open the switch tracepoint on thread `tid` of process `pid` (the
    /// binary loaded at `main_bias`) and start recording.
    pub fn start(
        pid: i32,
        tid: i32,
        main_bias: u64,
        word: Result<WaitWord, String>,
        timed: bool,
    ) -> Result<OffCpuProfiler> {
        let (ev, state_field) = open_switches(pid, tid, "profile --off-cpu")?;
        // the window recorded, on the records' clock: every interval lies in it
        let t0_ns = monotonic_ns();
        Ok(OffCpuProfiler(Recording::start(pid, tid, move |st| {
            let mut ev = ev;
            let mut maps = Maps::new(pid, main_bias);
            let mut sw = Switches::new(t0_ns, state_field, timed);
            let word = word.map_err(|e| sw.raw.no_word = Some(e)).ok();
            loop {
                let last = st.load(Ordering::Relaxed);
                sw.drain(&mut ev, word.as_ref(), &mut maps);
                if last {
                    break;
                }
                ev.wait(super::POLL_MS);
            }
            // still off the CPU at the end: counted up to now
            let mut raw = sw.end(monotonic_ns());
            raw.lost = ev.lost;
            raw.maps = Some(maps);
            raw
        })))
    }

    /// Stop recording (the event is closed) and return what was gathered.
    pub fn finish(self) -> Result<RawOffCpu> {
        let (mut raw, cpu) = self.0.finish()?;
        raw.cpu_s = cpu;
        Ok(raw)
    }
}

/// What the intervals whose wait-event word was not read are called.
pub const NOT_READ: &str = "not read";
/// What the intervals whose word was 0 are called.
pub const NO_WAIT_EVENT: &str = "no wait event";

/// The wait event of an interval as pg_stat_activity would show it,
/// `type:event` (`Lock:extend`), [`NO_WAIT_EVENT`], [`NOT_READ`], or the
/// raw value when nothing names it.
pub fn wait_label(names: &WaitLabels, wait: Option<u32>) -> String {
    match wait {
        None => NOT_READ.into(),
        Some(0) => NO_WAIT_EVENT.into(),
        Some(i) => match names.get(&i) {
            Some(l) => l.clone(),
            None => format!("{i:#010x}"),
        },
    }
}

/// Wait events' labels (`Lock:extend`) by their `wait_event_info`.
pub type WaitLabels = HashMap<u32, String>;

/// Who names wait events (PostgreSQL's knowledge, given by the caller):
/// the labels of the `wait_event_info` values asked for, those it knows.
pub type NameWaits<'a> = &'a dyn Fn(&std::collections::BTreeSet<u32>) -> WaitLabels;

/// The innermost pseudo-frame of an off-CPU stack in the folded stacks
/// and the flame graph: `[wait: Lock:extend]`.
pub fn wait_frame(label: &str) -> String {
    format!("[wait: {label}]")
}

/// The labels of every wait event the intervals had, from `name`.
pub(crate) fn wait_names(raw: &RawOffCpu, name: NameWaits<'_>) -> WaitLabels {
    let infos: std::collections::BTreeSet<u32> =
        raw.stacks.keys().filter_map(|(_, _, w)| *w).collect();
    name(&infos)
}

/// Time off the CPU by wait event, most first: (label, seconds, intervals).
pub(crate) fn by_wait_event(raw: &RawOffCpu, names: &WaitLabels) -> Vec<(String, f64, u64)> {
    let mut by: HashMap<String, (u64, u64)> = HashMap::new();
    for ((_, _, w), (ns, n)) in &raw.stacks {
        let e = by.entry(wait_label(names, *w)).or_insert((0, 0));
        e.0 += ns;
        e.1 += n;
    }
    let mut v: Vec<(String, f64, u64)> = by
        .into_iter()
        .map(|(l, (ns, n))| (l, ns as f64 / 1e9, n))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// The table's section of time by wait event, and why none was read when
/// the word could not be found.
pub(crate) fn wait_section(by: &[(String, f64, u64)], no_word: Option<&str>) -> String {
    let mut out = format!(
        "{:>10} {:>9}  {}\n",
        "ms", "intervals", "wait event at the switch-out (wait_event_type:wait_event)"
    );
    for (l, s, n) in by {
        out.push_str(&format!("{:>10.1} {:>9}  {l}\n", s * 1000.0, n));
    }
    if let Some(why) = no_word {
        out.push_str(&format!("(wait events not read: {why})\n"));
    }
    out
}

/// One distinct stack, reason and wait event, its time off the CPU.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StackRow {
    pub ms: f64,
    pub intervals: u64,
    pub reason: String,
    /// The wait event at the switch-out (`Lock:extend`, "no wait event",
    /// "not read").
    pub wait_event: String,
    /// Innermost first.
    pub frames: Vec<String>,
}

/// One function's time: where it is the innermost user frame (self) and
/// anywhere on the stack (total).
#[derive(Debug, Clone, serde::Serialize)]
pub struct OffRow {
    pub function: String,
    pub self_ms: f64,
    pub total_ms: f64,
    pub intervals: u64,
}

/// A symbolized off-CPU profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OffCpuProfile {
    pub pid: i32,
    pub duration_s: f64,
    pub off_cpu_s: f64,
    pub intervals: u64,
    pub lost: u64,
    /// Switches left out because the record they pair with was lost.
    pub unpaired: u64,
    /// CPU time the backend used meanwhile (seconds), when known.
    pub cpu_s: Option<f64>,
    /// Time off the CPU by the kernel's reason: (reason, seconds, intervals).
    pub by_reason: Vec<(String, f64, u64)>,
    /// Time off the CPU by the wait event set at the switch-out:
    /// (`type:event`, "no wait event" or "not read", seconds, intervals).
    pub by_wait_event: Vec<(String, f64, u64)>,
    /// Why no wait event was read, when none could be.
    pub wait_events_unread: Option<String>,
    /// Stacks by time off the CPU, most first.
    pub stacks: Vec<StackRow>,
    pub top: Vec<OffRow>,
    /// Folded stacks, root first, with their microseconds off the CPU.
    pub folded: Vec<(String, u64)>,
    /// `--by-statement`: the intervals by the statement that ran.
    #[serde(flatten)]
    pub by_statement: Option<super::stamp::ByStatement>,
}

impl OffCpuProfile {
    pub fn build(
        raw: &RawOffCpu,
        sym: &mut Symbolizer,
        pid: i32,
        name_waits: NameWaits<'_>,
    ) -> OffCpuProfile {
        let mut stacks = Vec::new();
        let mut reasons: HashMap<char, (u64, u64)> = HashMap::new();
        let mut rows: HashMap<String, OffRow> = HashMap::new();
        let mut folded: HashMap<String, u64> = HashMap::new();
        let names = wait_names(raw, name_waits);
        for ((pcs, r, w), (ns, n)) in &raw.stacks {
            let frames = stack_frames(sym, pcs);
            let wait_event = wait_label(&names, *w);
            let ms = *ns as f64 / 1e6;
            let e = reasons.entry(*r).or_insert((0, 0));
            e.0 += ns;
            e.1 += n;
            // the innermost user frame: the [kernel] one is on every stack
            for (innermost, f) in super::profile::user_frames_once(&frames) {
                let row = rows.entry(f.clone()).or_insert_with(|| OffRow {
                    function: f.clone(),
                    self_ms: 0.0,
                    total_ms: 0.0,
                    intervals: 0,
                });
                if innermost {
                    row.self_ms += ms;
                }
                row.total_ms += ms;
                row.intervals += n;
            }
            // the wait event is the innermost pseudo-frame
            let wf = wait_frame(&wait_event);
            let mut line: Vec<&str> = frames.iter().rev().map(|s| s.as_str()).collect();
            line.push(&wf);
            *folded.entry(line.join(";")).or_insert(0) += ns / 1000;
            stacks.push(StackRow {
                ms,
                intervals: *n,
                reason: reason_name(*r).into(),
                wait_event,
                frames,
            });
        }
        stacks.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        let mut top: Vec<OffRow> = rows.into_values().collect();
        top.sort_by(|a, b| {
            b.self_ms
                .total_cmp(&a.self_ms)
                .then(b.total_ms.total_cmp(&a.total_ms))
                .then(a.function.cmp(&b.function))
        });
        let mut by_reason: Vec<(String, f64, u64)> = reasons
            .into_iter()
            .map(|(r, (ns, n))| (reason_name(r).to_string(), ns as f64 / 1e9, n))
            .collect();
        by_reason.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut folded: Vec<(String, u64)> = folded.into_iter().collect();
        folded.sort();
        OffCpuProfile {
            pid,
            duration_s: raw.duration_s,
            off_cpu_s: raw.off_ns as f64 / 1e9,
            intervals: raw.intervals,
            lost: raw.lost,
            unpaired: raw.unpaired,
            cpu_s: raw.cpu_s,
            by_reason,
            by_wait_event: by_wait_event(raw, &names),
            wait_events_unread: raw.no_word.clone(),
            stacks,
            top,
            folded,
            by_statement: None,
        }
    }

    /// The functions with the most time off the CPU where they are the
    /// innermost user frame (self), then callers by total; the reasons;
    /// the total line.
    pub fn table(&self, rows: usize) -> String {
        let mut out = format!(
            "{:>10} {:>10} {:>9}  {}\n",
            "self ms", "total ms", "intervals", "function (off-CPU time)"
        );
        let line = |r: &OffRow| {
            format!(
                "{:>10.1} {:>10.1} {:>9}  {}\n",
                r.self_ms, r.total_ms, r.intervals, r.function
            )
        };
        out.push_str(&super::profile::table_rows(
            &self.top,
            rows,
            |r| (r.self_ms, r.total_ms),
            "callers, by total:",
            line,
        ));
        out.push_str(&wait_section(
            &self.by_wait_event,
            self.wait_events_unread.as_deref(),
        ));
        if let Some(b) = &self.by_statement {
            out.push_str(&b.section());
        }
        out.push_str(&self.summary_line());
        out
    }

    /// "off CPU 1.234 s of 3.0 s in N intervals (reasons); it ran ..."
    pub fn summary_line(&self) -> String {
        let reasons: Vec<String> = self
            .by_reason
            .iter()
            .map(|(r, s, n)| format!("{r} {s:.3} s in {n}"))
            .collect();
        format!(
            "profile: backend {} off CPU {:.3} s of {:.3} s in {} intervals{}{}{}",
            self.pid,
            self.off_cpu_s,
            self.duration_s,
            self.intervals,
            if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join(", "))
            },
            match self.cpu_s {
                Some(c) => format!("; on a CPU {c:.3} s"),
                None => String::new(),
            },
            if self.lost > 0 {
                format!(
                    "; {} switches left out (their other end lost), {} records lost (ring full)",
                    self.unpaired, self.lost
                )
            } else {
                String::new()
            }
        )
    }
}

impl super::render::Rendered for OffCpuProfile {
    fn table_text(&self, rows: usize) -> String {
        self.table(rows)
    }

    fn folded(&self) -> &[(String, u64)] {
        &self.folded
    }

    fn svg_labels(&self) -> (String, &'static str) {
        (
            format!("Off-CPU stacks of backend {} (microseconds)", self.pid),
            "us",
        )
    }

    fn nothing_to_draw(&self) -> &'static str {
        "nothing to draw: the backend did not leave a CPU while it was recorded"
    }

    fn weight(&self) -> super::export::Weight {
        super::export::Weight::Micros("off-cpu")
    }

    fn recorded_s(&self) -> f64 {
        self.duration_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A switch-in record's bytes: pid, tid, time.
    fn switch_in(time: u64) -> Vec<u8> {
        let mut b = vec![0u8; 8];
        b.extend_from_slice(&time.to_le_bytes());
        b
    }

    fn out_at(sw: &mut Switches, time: u64) {
        sw.after_gap = false;
        sw.out = Some(Out {
            time,
            pcs: vec![KERNEL_PC, 0x1000],
            reason: 'S',
            wait: None,
        });
    }

    /// A gap in the ring (records lost) between a switch-out and the next
    /// switch-in: that interval is left out, never stretched over the
    /// time on a CPU in the gap; the next pair counts again.
    #[test]
    fn lost_records_leave_their_interval_out() {
        let mut sw = Switches::new(0, Field { offset: 0, size: 8 }, false);
        let mut maps = Maps::new(std::process::id() as i32, 0);
        out_at(&mut sw, 100);
        sw.take(RECORD_SWITCH, 0, &switch_in(150), &mut maps);
        assert_eq!((sw.raw.intervals, sw.raw.off_ns), (1, 50));
        // out at 200; its switch-in, a run on a CPU and the next switch-out
        // lost; a switch-in at 900 that pairs with the lost switch-out
        out_at(&mut sw, 200);
        sw.take(RECORD_LOST, 0, &[0u8; 16], &mut maps);
        sw.take(RECORD_SWITCH, 0, &switch_in(900), &mut maps);
        assert_eq!((sw.raw.intervals, sw.raw.off_ns), (1, 50));
        assert_eq!(sw.raw.unpaired, 2);
        // the next switch-out pairs with its own switch-in
        out_at(&mut sw, 1000);
        sw.take(RECORD_SWITCH, 0, &switch_in(1010), &mut maps);
        assert_eq!((sw.raw.intervals, sw.raw.off_ns), (2, 60));
        // a gap with only a switch-in lost: the next switch-out clears it
        out_at(&mut sw, 2000);
        sw.take(RECORD_LOST, 0, &[0u8; 16], &mut maps);
        out_at(&mut sw, 3000);
        sw.take(RECORD_SWITCH, 0, &switch_in(3005), &mut maps);
        assert_eq!((sw.raw.intervals, sw.raw.off_ns), (3, 65));
    }

    /// An interval runs from the switch-out's own record (written after
    /// the sample's stack copy), not from the sample, to the switch-in;
    /// a sample whose record was lost keeps its own time.
    #[test]
    fn intervals_start_at_the_switch_out_record() {
        let mut sw = Switches::new(0, Field { offset: 0, size: 8 }, true);
        let mut maps = Maps::new(std::process::id() as i32, 0);
        out_at(&mut sw, 100);
        sw.take(RECORD_SWITCH, MISC_SWITCH_OUT, &switch_in(120), &mut maps);
        sw.take(RECORD_SWITCH, 0, &switch_in(150), &mut maps);
        assert_eq!((sw.raw.intervals, sw.raw.off_ns), (1, 30));
        assert_eq!(sw.raw.stamps.as_ref().unwrap()[0].time, 120);
        // a switch-out record with no sample pending changes nothing
        sw.take(RECORD_SWITCH, MISC_SWITCH_OUT, &switch_in(160), &mut maps);
        out_at(&mut sw, 200);
        sw.take(RECORD_SWITCH, 0, &switch_in(250), &mut maps);
        assert_eq!((sw.raw.intervals, sw.raw.off_ns), (2, 80));
    }

    #[test]
    fn reasons_of_prev_state() {
        assert_eq!(reason(1), 'S');
        assert_eq!(reason(2), 'D');
        assert_eq!(reason(0), 'R');
        // preempted: TASK_REPORT_MAX (0x100 since Linux 5.14)
        assert_eq!(reason(0x100), 'R');
        assert_eq!(reason(0x80), 'I');
    }
}
