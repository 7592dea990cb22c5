//! `profile --wall`: where one backend thread's time goes, on a CPU and
//! off it, over one window.  Two events on the thread, read by one helper
//! thread: the cpu-clock sampled as `profile` samples it, and the
//! scheduler's switch tracepoint as `profile --off-cpu` records it.
//! Every weight is time: an on-CPU sample weighs its sampling period (a
//! fixed period of 1/HZ s of CPU time, not a frequency the kernel would
//! adjust), an off-CPU interval its duration, so the stacks add up to the
//! window's length.
//!
//! The window starts once both events are enabled (samples before it are
//! dropped, intervals cut at it) and ends at the last drain (an interval
//! still open is counted up to it).  What the two cannot account for: the
//! cpu-clock's part of a period not yet elapsed at the end (its remainder
//! is carried over switches, so at most one period in all), records the
//! kernel lost, and kernel samples a paranoid kernel refuses.
//!
//! Each off-CPU interval has the wait event set at its switch-out, read
//! as `profile --off-cpu` reads it (offcpu.rs).
//!
//! Nothing is written into the backend and it is never stopped.

use super::offcpu::{
    RawOffCpu, Switches, WaitWord, by_wait_event, open_switches, wait_frame, wait_label,
    wait_names, wait_section,
};
use super::profile::{STACK_BYTES, Symbolizer, open_cpu_clock, sample_stack};
use super::recording::Recording;
use super::render::Rendered;
use super::stack::Maps;
use super::{Attr, monotonic_ns};
use anyhow::Result;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// What the reader thread gathered.
#[derive(Default)]
pub struct RawWall {
    /// On-CPU stacks (pcs, innermost first) and their samples.
    pub on: HashMap<Vec<u64>, u64>,
    pub samples: u64,
    /// CPU time each sample stands for, ns.
    pub period_ns: u64,
    pub off: RawOffCpu,
    /// Samples the kernel could not write (the ring was full).
    pub lost_samples: u64,
    pub cpu_s: Option<f64>,
}

pub struct WallProfiler(Recording<RawWall>);

impl WallProfiler {
    /// Open both events on thread `tid` of process `pid` (the binary
    /// loaded at `main_bias`), the cpu-clock sampling every 1/`hz` s of
    /// CPU time, and start recording.
    pub fn start(
        pid: i32,
        tid: i32,
        hz: u64,
        main_bias: u64,
        word: Result<WaitWord, String>,
        timed: bool,
    ) -> Result<WallProfiler> {
        let period_ns = 1_000_000_000 / hz.max(1);
        let mut attr = Attr::cpu_clock(hz, STACK_BYTES);
        // a fixed period: each sample is the same CPU time
        attr.flags &= !super::FLAG_FREQ;
        attr.period_or_freq = period_ns;
        let clock = open_cpu_clock(&attr, pid, tid, "profile --wall")?;
        let switches = open_switches(pid, tid, "profile --wall")?;
        let (mut switches, state_field) = switches;
        // both events run: the window starts (on the records' clock)
        let t0_ns = monotonic_ns();
        Ok(WallProfiler(Recording::start(pid, tid, move |st| {
            let mut clock = clock;
            let mut maps = Maps::new(pid, main_bias);
            let mut sw = Switches::new(t0_ns, state_field, timed);
            let word = word.map_err(|e| sw.raw.no_word = Some(e)).ok();
            let mut raw = RawWall {
                period_ns,
                ..RawWall::default()
            };
            loop {
                let last = st.load(Ordering::Relaxed);
                clock.drain(|b| {
                    // a sample before the window: dropped
                    if let Some((time, pcs)) = sample_stack(b, &mut maps)
                        && time >= t0_ns
                    {
                        raw.samples += 1;
                        if let Some(st) = sw.raw.stamps.as_mut() {
                            // the samples' times beside the intervals'
                            st.push(super::stamp::Stamp {
                                time,
                                weight: period_ns,
                                on_cpu: true,
                                leaf: super::profile::user_leaf(&pcs),
                                wait: None,
                                note: None,
                            });
                        }
                        *raw.on.entry(pcs).or_insert(0) += 1;
                    }
                });
                sw.drain(&mut switches, word.as_ref(), &mut maps);
                if last {
                    break;
                }
                // the switches come oftener: their ring wakes the reader,
                // which drains both every POLL_MS at the latest
                switches.wait(super::POLL_MS);
            }
            raw.off = sw.end(monotonic_ns());
            let before = raw.off.before_ns;
            if let Some(st) = raw.off.stamps.as_mut()
                && before > 0
            {
                // off the CPU since before the window: the statement
                // then is the one at the window's start
                st.push(super::stamp::Stamp {
                    time: t0_ns,
                    weight: before,
                    on_cpu: false,
                    leaf: 0,
                    wait: None,
                    note: Some(BEFORE_START),
                });
            }
            raw.off.lost = switches.lost;
            raw.lost_samples = clock.lost;
            raw.off.maps = Some(maps);
            raw
        })))
    }

    /// Stop recording (the events are closed) and return what was gathered.
    pub fn finish(self) -> Result<RawWall> {
        let (mut raw, cpu) = self.0.finish()?;
        raw.cpu_s = cpu;
        Ok(raw)
    }
}

impl super::profile::ReaderMaps for RawWall {
    fn reader_maps(&mut self) -> Option<Maps> {
        self.off.maps.take()
    }
}

/// The root frame of a stack: on a CPU, or off it and why (the kernel's
/// reason at the switch-out, see `offcpu::reason`).
pub fn state_frame(reason: Option<char>) -> &'static str {
    match reason {
        None => "[on-CPU]",
        Some('S') => "[off-CPU: sleeping]",
        Some('D') => "[off-CPU: I/O]",
        Some('R') => "[off-CPU: preempted]",
        Some('I') => "[off-CPU: idle]",
        Some('T') => "[off-CPU: stopped]",
        Some(_) => "[off-CPU: other]",
    }
}

/// Off the CPU from the window's start to the first switch-in: the
/// switch-out came before the window, its stack and reason are unknown.
const BEFORE_START: &str = "[off-CPU: since before the start]";

/// One distinct stack and state, its time.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WallStack {
    pub ms: f64,
    /// `[on-CPU]`, `[off-CPU: sleeping]`, ... (the folded stacks' root).
    pub state: String,
    pub on_cpu: bool,
    /// Samples on a CPU, intervals off it.
    pub count: u64,
    /// Off a CPU: the wait event at the switch-out (`Lock:extend`, "no
    /// wait event", "not read"); on a CPU: none.
    pub wait_event: Option<String>,
    /// Innermost first.
    pub frames: Vec<String>,
}

/// One function's time where it is the innermost user frame (self) and
/// anywhere on the stack (total, split into on and off a CPU).
#[derive(Debug, Clone, serde::Serialize)]
pub struct WallRow {
    pub function: String,
    pub self_ms: f64,
    pub total_ms: f64,
    pub on_cpu_ms: f64,
    pub off_cpu_ms: f64,
}

/// A symbolized wall-clock profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WallProfile {
    pub pid: i32,
    pub hz: u64,
    /// The window, seconds.
    pub duration_s: f64,
    /// Samples times their period.
    pub on_cpu_s: f64,
    pub off_cpu_s: f64,
    /// The window less the time on and off a CPU (negative when the
    /// samples over-count: a sample stands for a whole period).
    pub unaccounted_s: f64,
    pub samples: u64,
    pub intervals: u64,
    pub lost_samples: u64,
    pub lost_switches: u64,
    /// CPU time the kernel counted for the thread meanwhile, when known.
    pub cpu_s: Option<f64>,
    /// Time by state (the roots): (state, seconds), most first.
    pub by_state: Vec<(String, f64)>,
    /// Time off a CPU by the wait event set at the switch-out:
    /// (`type:event`, "no wait event" or "not read", seconds, intervals).
    pub by_wait_event: Vec<(String, f64, u64)>,
    /// Why no wait event was read, when none could be.
    pub wait_events_unread: Option<String>,
    /// Stacks by time, most first.
    pub stacks: Vec<WallStack>,
    pub top: Vec<WallRow>,
    /// Folded stacks, the state's root first, with their microseconds.
    pub folded: Vec<(String, u64)>,
    /// `--by-statement`: the time by the statement that ran.
    #[serde(flatten)]
    pub by_statement: Option<super::stamp::ByStatement>,
}

impl WallProfile {
    pub fn build(
        raw: &RawWall,
        sym: &mut Symbolizer,
        pid: i32,
        hz: u64,
        name_waits: super::offcpu::NameWaits<'_>,
    ) -> WallProfile {
        let mut stacks = Vec::new();
        for (pcs, n) in &raw.on {
            stacks.push((
                super::profile::stack_frames(sym, pcs),
                None,
                n * raw.period_ns,
                *n,
                None,
            ));
        }
        let names = wait_names(&raw.off, name_waits);
        for ((pcs, r, w), (ns, n)) in &raw.off.stacks {
            stacks.push((
                super::profile::stack_frames(sym, pcs),
                Some(*r),
                *ns,
                *n,
                Some(wait_label(&names, *w)),
            ));
        }
        let mut rows: HashMap<String, WallRow> = HashMap::new();
        let mut folded: HashMap<String, u64> = HashMap::new();
        let mut states: HashMap<&'static str, u64> = HashMap::new();
        let mut out = Vec::new();
        for (frames, reason, ns, n, wait_event) in stacks {
            let state = state_frame(reason);
            *states.entry(state).or_insert(0) += ns;
            let ms = ns as f64 / 1e6;
            // the innermost user frame is self: the [kernel] one is on
            // every off-CPU stack
            for (innermost, f) in super::profile::user_frames_once(&frames) {
                let row = rows.entry(f.clone()).or_insert_with(|| WallRow {
                    function: f.clone(),
                    self_ms: 0.0,
                    total_ms: 0.0,
                    on_cpu_ms: 0.0,
                    off_cpu_ms: 0.0,
                });
                if innermost {
                    row.self_ms += ms;
                }
                row.total_ms += ms;
                if reason.is_none() {
                    row.on_cpu_ms += ms;
                } else {
                    row.off_cpu_ms += ms;
                }
            }
            // off a CPU, the wait event is the innermost pseudo-frame
            let wf = wait_event.as_deref().map(wait_frame);
            let mut line = vec![state];
            line.extend(frames.iter().rev().map(|s| s.as_str()));
            line.extend(wf.as_deref());
            *folded.entry(line.join(";")).or_insert(0) += ns / 1000;
            out.push(WallStack {
                ms,
                state: state.into(),
                on_cpu: reason.is_none(),
                count: n,
                wait_event,
                frames,
            });
        }
        let before = raw.off.before_ns;
        if before > 0 {
            *states.entry(BEFORE_START).or_insert(0) += before;
            *folded.entry(BEFORE_START.into()).or_insert(0) += before / 1000;
            out.push(WallStack {
                ms: before as f64 / 1e6,
                state: BEFORE_START.into(),
                on_cpu: false,
                count: 1,
                wait_event: None,
                frames: Vec::new(),
            });
        }
        out.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        let mut top: Vec<WallRow> = rows.into_values().collect();
        top.sort_by(|a, b| {
            b.self_ms
                .total_cmp(&a.self_ms)
                .then(b.total_ms.total_cmp(&a.total_ms))
                .then(a.function.cmp(&b.function))
        });
        let mut by_state: Vec<(String, f64)> = states
            .into_iter()
            .map(|(s, ns)| (s.to_string(), ns as f64 / 1e9))
            .collect();
        by_state.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut folded: Vec<(String, u64)> = folded.into_iter().collect();
        folded.sort();
        let on_cpu_s = (raw.samples * raw.period_ns) as f64 / 1e9;
        let off_cpu_s = (raw.off.off_ns + before) as f64 / 1e9;
        WallProfile {
            pid,
            hz,
            duration_s: raw.off.duration_s,
            on_cpu_s,
            off_cpu_s,
            unaccounted_s: raw.off.duration_s - on_cpu_s - off_cpu_s,
            samples: raw.samples,
            intervals: raw.off.intervals,
            lost_samples: raw.lost_samples,
            lost_switches: raw.off.lost,
            cpu_s: raw.cpu_s,
            by_state,
            by_wait_event: by_wait_event(&raw.off, &names),
            wait_events_unread: raw.off.no_word.clone(),
            stacks: out,
            top,
            folded,
            by_statement: None,
        }
    }

    /// The functions with the most time where they are the innermost user
    /// frame, then callers by total; the total line.
    pub fn table(&self, rows: usize) -> String {
        let mut out = format!(
            "{:>10} {:>10} {:>10} {:>10}  {}\n",
            "self ms", "total ms", "on CPU ms", "off CPU ms", "function (wall-clock time)"
        );
        let line = |r: &WallRow| {
            format!(
                "{:>10.1} {:>10.1} {:>10.1} {:>10.1}  {}\n",
                r.self_ms, r.total_ms, r.on_cpu_ms, r.off_cpu_ms, r.function
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

    /// "elapsed 2.000 s = on CPU ... + off CPU ... + not accounted for ..."
    pub fn summary_line(&self) -> String {
        let off: Vec<String> = self
            .by_state
            .iter()
            .filter(|(s, _)| s != state_frame(None))
            .map(|(s, secs)| {
                let s = s.trim_start_matches("[off-CPU: ").trim_end_matches(']');
                format!("{s} {secs:.3} s")
            })
            .collect();
        let pct = |s: f64| s * 100.0 / self.duration_s.max(1e-9);
        let mut line = format!(
            "profile: backend {} elapsed {:.3} s = on CPU {:.3} s ({} samples of {:.1} ms) \
             + off CPU {:.3} s in {} intervals{} + not accounted for {:.3} s ({:.1}%)",
            self.pid,
            self.duration_s,
            self.on_cpu_s,
            self.samples,
            1000.0 / self.hz.max(1) as f64,
            self.off_cpu_s,
            self.intervals,
            if off.is_empty() {
                String::new()
            } else {
                format!(" ({})", off.join(", "))
            },
            self.unaccounted_s,
            pct(self.unaccounted_s),
        );
        if let Some(c) = self.cpu_s {
            line.push_str(&format!("; the kernel counted {c:.3} s on a CPU"));
        }
        if self.lost_samples + self.lost_switches > 0 {
            line.push_str(&format!(
                "; {} samples and {} switch records lost (ring full)",
                self.lost_samples, self.lost_switches
            ));
        }
        line
    }
}

impl Rendered for WallProfile {
    fn table_text(&self, rows: usize) -> String {
        self.table(rows)
    }

    fn folded(&self) -> &[(String, u64)] {
        &self.folded
    }

    fn svg_labels(&self) -> (String, &'static str) {
        (
            format!(
                "Wall-clock time of backend {} (microseconds, on and off CPU)",
                self.pid
            ),
            "us",
        )
    }

    fn nothing_to_draw(&self) -> &'static str {
        "nothing to draw: no sample and no switch was recorded"
    }

    fn weight(&self) -> super::export::Weight {
        super::export::Weight::Micros("wall")
    }

    fn recorded_s(&self) -> f64 {
        self.duration_s
    }
}

#[cfg(test)]
mod tests {
    use super::state_frame;

    #[test]
    fn roots_name_the_state() {
        assert_eq!(state_frame(None), "[on-CPU]");
        assert_eq!(state_frame(Some('S')), "[off-CPU: sleeping]");
        assert_eq!(state_frame(Some('D')), "[off-CPU: I/O]");
        assert_eq!(state_frame(Some('R')), "[off-CPU: preempted]");
    }
}
