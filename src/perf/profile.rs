//! `profile`: on-CPU stacks of one backend thread, sampled by the software
//! cpu-clock (`perf record -F HZ --call-graph dwarf` in pgdbg): every
//! sample carries the user registers and a copy of the top of the user
//! stack, unwound with CFI by a helper thread while sampling runs (only
//! the pcs are kept), symbolized at the end with the binary's DWARF
//! (inlined functions are frames of their own) and the libraries' ELF
//! symbols.  The backend is never stopped and nothing is written into it.

use super::export::Weight;
use super::recording::Recording;
use super::stack::{Maps, unwind};
use super::{Attr, Event, Sample, is_kernel, open_error};
use crate::debuginfo::DebugInfo;
use anyhow::Result;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// Bytes of user stack copied per sample: deep enough for a PL/pgSQL
/// function's executor stack down to `main` (perf's default is 8 KB).
pub const STACK_BYTES: u32 = 32 * 1024;
/// Frames kept per sample.
const MAX_FRAMES: usize = 256;
/// The leaf "pc" of a sample taken in the kernel (a system call).
pub const KERNEL_PC: u64 = u64::MAX;

/// What the sampler thread gathered: distinct stacks (pcs, innermost first)
/// and their sample counts.
#[derive(Default)]
pub struct RawProfile {
    pub stacks: HashMap<Vec<u64>, u64>,
    pub samples: u64,
    /// Samples the kernel could not write (the ring was full).
    pub lost: u64,
    /// Samples whose stack ended before `main` (copy too short, code
    /// without CFI).
    pub truncated: u64,
    pub duration_s: f64,
    /// CPU time the thread used while sampled (/proc schedstat), seconds.
    pub cpu_s: Option<f64>,
    /// Each sample's time, when asked for (`--by-statement`).
    pub stamps: Option<Vec<super::stamp::Stamp>>,
    /// The files the process mapped, as the reader last saw them.
    pub maps: Option<Maps>,
}

/// What a recording gathered gives back the files the process mapped, as
/// its reader last saw them: the names of its pcs come from them, also
/// after the process has ended.
pub trait ReaderMaps {
    fn reader_maps(&mut self) -> Option<Maps>;
}

impl ReaderMaps for RawProfile {
    fn reader_maps(&mut self) -> Option<Maps> {
        self.maps.take()
    }
}

/// Open the cpu-clock event `attr` on thread `tid` of process `pid` and
/// enable it (`mode` names the command in refusals); a paranoid kernel that refuses kernel samples to a user
/// without CAP_PERFMON is asked for user-only ones.
pub(crate) fn open_cpu_clock(attr: &Attr, pid: i32, tid: i32, mode: &str) -> Result<Event> {
    // 1 MB of ring: about 30 samples; drained every few ms
    let ev = match Event::open(attr, tid, 256) {
        Ok(e) => e,
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let mut a = *attr;
            a.flags |= super::FLAG_EXCLUDE_KERNEL;
            Event::open(&a, tid, 256).map_err(|e| open_error(mode, pid, e))?
        }
        Err(e) => return Err(open_error(mode, pid, e)),
    };
    ev.enable().map_err(|e| open_error(mode, pid, e))?;
    Ok(ev)
}

/// A cpu-clock sample's time and its stack's pcs, innermost first
/// ([`KERNEL_PC`] first when it was taken in the kernel).
pub(crate) fn sample_stack(b: &[u8], maps: &mut Maps) -> Option<(u64, Vec<u64>)> {
    let s = Sample::parse(b, true)?;
    let mut pcs = Vec::new();
    if is_kernel(s.ip) {
        pcs.push(KERNEL_PC);
    }
    if let Some(r) = &s.regs {
        pcs.extend(unwind(maps, r, s.stack, MAX_FRAMES));
    }
    Some((s.time, pcs))
}

pub struct Profiler {
    rec: Recording<RawProfile>,
    t0: std::time::Instant,
}

impl Profiler {
    /// Open the cpu-clock event on thread `tid` of process `pid` (the
    /// binary loaded at `main_bias`) and start sampling at `hz`; `timed`:
    /// keep each sample's time too.
    pub fn start(pid: i32, tid: i32, hz: u64, main_bias: u64, timed: bool) -> Result<Profiler> {
        let ev = open_cpu_clock(&Attr::cpu_clock(hz, STACK_BYTES), pid, tid, "profile")?;
        let t0 = std::time::Instant::now();
        let rec = Recording::start(pid, tid, move |st| {
            let mut ev = ev;
            let mut maps = Maps::new(pid, main_bias);
            let mut raw = RawProfile {
                stamps: timed.then(Vec::new),
                ..RawProfile::default()
            };
            let take = |b: &[u8], raw: &mut RawProfile, maps: &mut Maps| {
                let Some((time, pcs)) = sample_stack(b, maps) else {
                    return;
                };
                if let Some(st) = raw.stamps.as_mut() {
                    st.push(super::stamp::Stamp {
                        time,
                        weight: 1,
                        on_cpu: true,
                        leaf: user_leaf(&pcs),
                        wait: None,
                        note: None,
                    });
                }
                raw.samples += 1;
                *raw.stacks.entry(pcs).or_insert(0) += 1;
            };
            loop {
                let last = st.load(Ordering::Relaxed);
                ev.drain(|b| take(b, &mut raw, &mut maps));
                if last {
                    break;
                }
                ev.wait(super::POLL_MS);
            }
            raw.lost = ev.lost;
            raw.maps = Some(maps);
            raw
        });
        Ok(Profiler { rec, t0 })
    }

    /// Stop sampling (the event is closed) and return what was gathered.
    pub fn finish(self) -> Result<RawProfile> {
        let (mut raw, cpu) = self.rec.finish()?;
        raw.duration_s = self.t0.elapsed().as_secs_f64();
        raw.cpu_s = cpu;
        Ok(raw)
    }
}

/// Names of pcs: the DWARF of the binary or of a library that has it
/// (inlined calls are frames of their own, names as in the source), else
/// its symbols, else `[library]` / `0x...`.
pub struct Symbolizer<'a> {
    di: &'a DebugInfo,
    bias: u64,
    maps: Maps,
    cache: HashMap<(u64, bool), Vec<String>>,
    /// Each library's debug info, loaded at its first pc (None: no DWARF).
    libs: HashMap<std::path::PathBuf, Option<std::rc::Rc<DebugInfo>>>,
}

impl<'a> Symbolizer<'a> {
    pub fn new(pid: i32, di: &'a DebugInfo, bias: u64) -> Symbolizer<'a> {
        Self::with_maps(Maps::new(pid, bias), di, bias)
    }

    /// Name pcs with the files a process mapped as a recording's reader
    /// last saw them (the process may have ended since).
    pub fn use_maps(&mut self, maps: Maps) {
        self.maps = maps;
        self.cache.clear();
    }

    /// With the files a process mapped, read while it still ran (it may
    /// have ended since).
    pub fn with_maps(maps: Maps, di: &'a DebugInfo, bias: u64) -> Symbolizer<'a> {
        Symbolizer {
            di,
            bias,
            maps,
            cache: HashMap::new(),
            libs: HashMap::new(),
        }
    }

    /// The main binary's debug info and load bias.
    pub fn binary(&self) -> (&'a DebugInfo, u64) {
        (self.di, self.bias)
    }

    /// The frames at `pc`, innermost first; `leaf` when it is the sampled
    /// pc itself (else a return address: looked up at pc-1).
    pub fn names(&mut self, pc: u64, leaf: bool) -> Vec<String> {
        if let Some(v) = self.cache.get(&(pc, leaf)) {
            return v.clone();
        }
        let v = self.names_uncached(pc, leaf);
        self.cache.insert((pc, leaf), v.clone());
        v
    }

    fn names_uncached(&mut self, pc: u64, leaf: bool) -> Vec<String> {
        if pc == KERNEL_PC {
            return vec!["[kernel]".into()];
        }
        let lookup = if leaf { pc } else { pc.wrapping_sub(1) };
        let Some(m) = self.maps.find(lookup) else {
            return vec![format!("{pc:#x}")];
        };
        if m.main {
            let link = lookup.wrapping_sub(self.bias);
            let frames = self.di.frames_at(link);
            let names: Vec<String> = frames.into_iter().filter_map(|f| f.function).collect();
            if !names.is_empty() {
                return names;
            }
            if let Some((s, _)) = self.di.symbol_at(link) {
                return vec![s.name.clone()];
            }
            return vec![format!("{pc:#x}")];
        }
        // a library with DWARF (plpgsql.so of a build with -g): named as
        // the binary's frames are
        let lib = self
            .libs
            .entry(m.path.clone())
            .or_insert_with(|| {
                let k = &m.key;
                crate::debuginfo::elf::verified_mapped_image(&k.path, &k.dev, k.inode)
                    .and_then(|img| DebugInfo::load_library(img, &k.path).ok())
                    .filter(|d| d.has_dwarf())
                    .map(std::rc::Rc::new)
            })
            .clone();
        if let Some(di) = lib {
            let names: Vec<String> = di
                .frames_at(lookup.wrapping_sub(m.bias))
                .into_iter()
                .filter_map(|f| f.function)
                .collect();
            if !names.is_empty() {
                return names;
            }
        }
        match m.symbol(lookup) {
            Some((s, _)) => vec![s],
            None => vec![format!("[{}]", m.short_name())],
        }
    }
}

/// The innermost user pc of a stack (`pcs` innermost first; 0: none).
pub fn user_leaf(pcs: &[u64]) -> u64 {
    pcs.iter().copied().find(|&p| p != KERNEL_PC).unwrap_or(0)
}

/// The names of a sampled stack's pcs, innermost first (never empty).
pub fn stack_frames(sym: &mut Symbolizer, pcs: &[u64]) -> Vec<String> {
    let mut frames: Vec<String> = Vec::new();
    for (i, pc) in pcs.iter().enumerate() {
        let leaf = i == 0 || (i == 1 && pcs[0] == KERNEL_PC);
        frames.extend(sym.names(*pc, leaf));
    }
    if frames.is_empty() {
        frames.push("[unknown]".into());
    }
    frames
}

/// One function's share: samples where it is the innermost frame (self)
/// and samples where it is anywhere on the stack (total).
#[derive(Debug, Clone, serde::Serialize)]
pub struct TopRow {
    pub function: String,
    pub self_samples: u64,
    pub total_samples: u64,
}

/// A symbolized profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Profile {
    pub pid: i32,
    pub hz: u64,
    pub duration_s: f64,
    pub samples: u64,
    pub lost: u64,
    /// CPU time the backend used meanwhile (seconds), when known.
    pub cpu_s: Option<f64>,
    /// Functions by self samples, then total.
    pub top: Vec<TopRow>,
    /// Folded stacks: root first, `;`-separated, with their samples.
    pub folded: Vec<(String, u64)>,
    /// `--by-statement`: the samples by the statement that ran.
    #[serde(flatten)]
    pub by_statement: Option<super::stamp::ByStatement>,
}

impl Profile {
    pub fn build(raw: &RawProfile, sym: &mut Symbolizer, pid: i32, hz: u64) -> Profile {
        let mut selfs: HashMap<String, u64> = HashMap::new();
        let mut totals: HashMap<String, u64> = HashMap::new();
        let mut folded: HashMap<String, u64> = HashMap::new();
        for (pcs, n) in &raw.stacks {
            let frames = stack_frames(sym, pcs);
            *selfs.entry(frames[0].clone()).or_insert(0) += n;
            let mut seen: Vec<&String> = Vec::new();
            for f in &frames {
                if !seen.contains(&f) {
                    seen.push(f);
                    *totals.entry(f.clone()).or_insert(0) += n;
                }
            }
            let line: Vec<&str> = frames.iter().rev().map(|s| s.as_str()).collect();
            *folded.entry(line.join(";")).or_insert(0) += n;
        }
        let mut top: Vec<TopRow> = totals
            .into_iter()
            .map(|(f, t)| TopRow {
                self_samples: selfs.get(&f).copied().unwrap_or(0),
                function: f,
                total_samples: t,
            })
            .collect();
        top.sort_by(|a, b| {
            b.self_samples
                .cmp(&a.self_samples)
                .then(b.total_samples.cmp(&a.total_samples))
                .then(a.function.cmp(&b.function))
        });
        let mut folded: Vec<(String, u64)> = folded.into_iter().collect();
        folded.sort();
        Profile {
            pid,
            hz,
            duration_s: raw.duration_s,
            samples: raw.samples,
            lost: raw.lost,
            cpu_s: raw.cpu_s,
            top,
            folded,
            by_statement: None,
        }
    }

    /// `perf report`-like table: the `rows` functions with the most self
    /// samples, then the ones with the most total samples not shown yet.
    pub fn table(&self, rows: usize) -> String {
        let pct = |n: u64| n as f64 * 100.0 / self.samples.max(1) as f64;
        let mut out = format!(
            "{:>7} {:>7}  {}\n",
            "self%", "total%", "function (on-CPU samples)"
        );
        out.push_str(&table_rows(
            &self.top,
            rows,
            |r| (r.self_samples as f64, r.total_samples as f64),
            "callers (no self samples), by total:",
            |r| {
                format!(
                    "{:>6.2}% {:>6.2}%  {}\n",
                    pct(r.self_samples),
                    pct(r.total_samples),
                    r.function
                )
            },
        ));
        if let Some(b) = &self.by_statement {
            out.push_str(&b.section());
        }
        out.push_str(&self.summary_line());
        out
    }

    pub fn summary_line(&self) -> String {
        let cpu = match self.cpu_s {
            Some(c) => format!(
                "; it ran {c:.2}s on a CPU: {:.0} samples expected",
                c * self.hz as f64
            ),
            None => String::new(),
        };
        format!(
            "profile: {} samples of backend {} in {:.1}s at {} Hz{cpu}{}",
            self.samples,
            self.pid,
            self.duration_s,
            self.hz,
            if self.lost > 0 {
                format!("; {} samples lost (ring full)", self.lost)
            } else {
                String::new()
            }
        )
    }
}

impl super::render::Rendered for Profile {
    fn table_text(&self, rows: usize) -> String {
        self.table(rows)
    }

    fn folded(&self) -> &[(String, u64)] {
        &self.folded
    }

    fn svg_labels(&self) -> (String, &'static str) {
        (
            format!("On-CPU stacks of backend {} (samples)", self.pid),
            "samples",
        )
    }

    fn nothing_to_draw(&self) -> &'static str {
        "nothing to draw: no samples (the backend did not run on a CPU while sampled)"
    }

    fn weight(&self) -> Weight {
        Weight::Samples { hz: self.hz }
    }

    fn recorded_s(&self) -> f64 {
        self.duration_s
    }
}

/// A stack's user frames (the `[kernel]` frame of an off-CPU stack left
/// out), innermost first, each function once (a recursive one counts once
/// per stack), with whether it is the innermost: the self frame.
pub(crate) fn user_frames_once(frames: &[String]) -> impl Iterator<Item = (bool, &String)> {
    let mut seen: Vec<&String> = Vec::new();
    frames
        .iter()
        .filter(|f| *f != "[kernel]")
        .enumerate()
        .filter_map(move |(i, f)| {
            if seen.contains(&f) {
                return None;
            }
            seen.push(f);
            Some((i == 0, f))
        })
}

/// The rows of a `perf report`-like table (`profile`, `--off-cpu`,
/// `--wall`): the first `rows` of `top` with self time, in `top`'s order,
/// then, when fewer were shown, those without self time by total, under
/// the line `callers`.  `weights`: a row's (self, total).
pub(crate) fn table_rows<R>(
    top: &[R],
    rows: usize,
    weights: impl Fn(&R) -> (f64, f64),
    callers: &str,
    line: impl Fn(&R) -> String,
) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for r in top.iter().filter(|r| weights(r).0 > 0.0).take(rows) {
        out.push_str(&line(r));
        shown += 1;
    }
    let mut by_total: Vec<&R> = top.iter().filter(|r| weights(r).0 == 0.0).collect();
    by_total.sort_by(|a, b| weights(b).1.total_cmp(&weights(a).1));
    if shown < rows && !by_total.is_empty() {
        out.push_str(callers);
        out.push('\n');
        for r in by_total.into_iter().take(rows - shown) {
            out.push_str(&line(r));
        }
    }
    out
}
