//! `count FUNC...` in-process (its default): a call counter at the entry of
//! each out-of-line copy of each function (`inferior::counter`), four
//! instructions in the backend per call and no stop, no kernel uprobe.
//! All go in at the stop the command starts from, or none; they are read
//! while the backend runs (every `READ_EVERY`, so that an exit of the
//! backend loses at most that much) and once more at the end, then taken
//! out.  An entry a jump cannot take gets a kernel uprobe instead (said
//! in one line); where a location is an inlined call, or there are more
//! entries than the guardian's detour slots, the command says why in one
//! line and counts all with kernel uprobes instead.

use super::addresses;
use crate::inferior::counter::Counter;
use crate::postgres::backend::{Backend, Outcome, ProbeEnd, ProbeHandler, Ran};
use crate::runtime::limit_text;
use anyhow::{Result, anyhow};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Counters at once: the guardian's detour slots (`guardian.rs`).
const MOST: usize = 16;
/// How often the counts are read while the backend runs.
const READ_EVERY: Duration = Duration::from_millis(10);

/// Why `count` cannot count in-process here: said in one line, then the
/// kernel uprobes count instead.
#[derive(Debug)]
pub struct NotHere(pub String);

impl std::fmt::Display for NotHere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotHere {}

/// Whether `e` is `count_in_process` declining (the caller falls back).
pub fn not_here(e: &anyhow::Error) -> Option<&NotHere> {
    e.downcast_ref::<NotHere>()
}

/// One counter's place: the functions counted there (indexes into the
/// command's list), the entry of one out-of-line copy, and that copy's
/// code.
struct Place {
    /// The functions counted there (one, unless a name is given twice or
    /// two names are one copy's).
    functions: Vec<usize>,
    site: u64,
    bodies: Vec<(u64, Vec<u8>)>,
}

/// The entries to count at, or why there are none that count every call.
fn places(s: &dyn Backend, functions: &[String]) -> Result<Vec<Place>> {
    let mut out: Vec<Place> = Vec::new();
    for (i, f) in functions.iter().enumerate() {
        for a in addresses(s, f)? {
            if let Some(p) = out.iter_mut().find(|p| p.site == a) {
                if !p.functions.contains(&i) {
                    p.functions.push(i);
                }
                continue;
            }
            let bodies = crate::postgres::backend::entry_code(s, f, a)
                .map_err(|why| anyhow!(NotHere(format!("count: {why}"))))?;
            out.push(Place {
                functions: vec![i],
                site: a,
                bodies,
            });
        }
    }
    if out.len() > MOST {
        return Err(anyhow!(NotHere(format!(
            "count: {} entries to count, more than the {MOST} in-process counters a backend can have at once",
            out.len()
        ))));
    }
    Ok(out)
}

/// Reads the counters every `READ_EVERY` while the command runs, so that
/// the counts up to then are known if the backend ends.
struct Reader {
    last: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reader {
    fn start(pid: i32, words: Vec<u64>) -> Reader {
        let last = Arc::new(Mutex::new(vec![0u64; words.len()]));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, st) = (last.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            // pgdbg's signals (Ctrl-C, SIGTERM) are its main thread's
            crate::runtime::block_in_this_thread();
            while !st.load(Ordering::Relaxed) {
                if let Some(now) = read_all(pid, &words) {
                    *l.lock().unwrap_or_else(|e| e.into_inner()) = now;
                }
                std::thread::sleep(READ_EVERY);
            }
        });
        Reader {
            last,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The probe the backend runs under: no stop of its own, but the
/// backend's exit is one, where the counts are read a last time.
struct AtExit {
    pid: i32,
    words: Vec<u64>,
    counts: Option<Vec<u64>>,
}

impl ProbeHandler for AtExit {
    fn on_stop(&mut self, _s: &mut dyn Backend, _addr: u64) -> Result<()> {
        Ok(())
    }
    fn done(&self) -> bool {
        false
    }
    fn reads_at_exit(&self) -> bool {
        true
    }
    fn on_exit(&mut self, _s: &mut dyn Backend) -> Result<()> {
        self.counts = read_all(self.pid, &self.words);
        Ok(())
    }
}

/// Each counter's count, None if any cannot be read (the backend gone).
fn read_all(pid: i32, words: &[u64]) -> Option<Vec<u64>> {
    words
        .iter()
        .map(|&w| {
            let mut b = [0u8; 8];
            crate::inferior::read_untraced(pid, w, &mut b).ok()?;
            Some(u64::from_le_bytes(b))
        })
        .collect()
}

/// Take every counter out, all even when one fails (the first error kept).
fn remove_all(s: &mut dyn Backend, counters: Vec<Counter>) -> Result<()> {
    let mut first = Ok(());
    for c in counters {
        if let Err(e) = s.remove_counter(c)
            && first.is_ok()
        {
            first = Err(e);
        }
    }
    first
}

/// `count FUNC... [--for D]` with in-process counters.  `NotHere` when
/// some entry cannot have one (nothing was written then).
pub fn count_in_process(
    s: &mut dyn Backend,
    functions: &[String],
    duration: Option<Duration>,
) -> Result<Outcome> {
    let places = places(s, functions)?;
    // a counter (or recorder) an earlier pgdbg could not take out
    // (SIGKILL) where this one goes: out first
    crate::postgres::backend::clear_orphans(s, functions, "count")?;
    // a counter at each entry; a kernel uprobe where a jump cannot go
    let mut counters: Vec<Counter> = Vec::new();
    // each counter's functions, in `counters`' order
    let mut counters_of: Vec<Vec<usize>> = Vec::new();
    let mut uprobes: Vec<(Vec<usize>, crate::perf::UprobeCounter)> = Vec::new();
    for p in &places {
        let f = &functions[p.functions[0]];
        let e = match s.install_counter(p.site, &p.bodies) {
            Ok(c) => {
                counters.push(c);
                counters_of.push(p.functions.clone());
                continue;
            }
            Err(e) => e,
        };
        // someone's int3 there: refused as the uprobes would be
        let u = match crate::inferior::foreign(&e) {
            Some(_) => Err(e),
            None => super::uprobe_counter(s, f, p.site).map(|u| (u, e)),
        };
        match u {
            Ok((u, why)) => {
                s.say(&format!(
                    "count: no in-process counter at {f} ({:#x}): {why:#}; a kernel uprobe counts there",
                    p.site
                ));
                uprobes.push((p.functions.clone(), u));
            }
            Err(e) => {
                remove_all(s, counters)?;
                return Err(e);
            }
        }
    }
    if counters.is_empty() {
        // nothing in-process: the uprobes' own mode says so
        drop(uprobes);
        return Err(anyhow!(NotHere(
            "count: no entry can have an in-process counter".into()
        )));
    }
    let with = match uprobes.len() {
        0 => String::new(),
        1 => "; a kernel uprobe at 1 entry".into(),
        n => format!("; kernel uprobes at {n} entries"),
    };
    s.say(&format!(
        "count: {} in backend {} (in-process counters, no stops{with}){}",
        functions.join(", "),
        s.pid(),
        limit_text(duration, None)
    ));
    let words: Vec<u64> = counters.iter().map(|c| c.word).collect();
    let t0 = std::time::Instant::now();
    let reader = Reader::start(s.pid(), words.clone());
    let mut probe = AtExit {
        pid: s.pid(),
        words: words.clone(),
        counts: None,
    };
    let ran = s.run_probes(&mut probe, duration);
    let secs = t0.elapsed().as_secs_f64();
    let last = reader.finish();
    let gone = matches!(&ran, Ok(r) if r.end == ProbeEnd::TargetGone);
    // the counts now if the backend is there, else at its exit stop, else
    // the last read while it ran
    let now = match gone {
        false => read_all(s.pid(), &words),
        true => probe.counts.take(),
    };
    let (counts, note) = match now {
        Some(now) => (now, String::new()),
        None => (
            last,
            format!(
                "; the backend ended: calls up to the counters' last read (at most {} ms before its end)",
                READ_EVERY.as_millis()
            ),
        ),
    };
    // someone else's uprobe at a counted entry took the jump over: that
    // counter missed the calls since, said so
    let mut note = note;
    if !gone && ran.is_ok() {
        for (c, of) in counters.iter().zip(&counters_of) {
            if s.jump_taken_over(c.site).unwrap_or(false) {
                let f = &functions[of[0]];
                note.push_str(&format!(
                    "\n(another tool (a kernel uprobe, or a patcher) took over the in-process counter's jump at {f} ({:#x}) while it counted: {f}'s calls after that are missing)",
                    c.site
                ));
            }
        }
    }
    let removed = remove_all(s, counters);
    let Ran { end, text } = ran?;
    removed?;
    let mut calls = vec![0u64; functions.len()];
    for (c, n) in counters_of.iter().zip(counts) {
        for &i in c {
            calls[i] += n;
        }
    }
    for (c, u) in &uprobes {
        let n = u.count().unwrap_or(0);
        for &i in c {
            calls[i] += n;
        }
    }
    drop(uprobes);
    Ok(super::counted(s, functions, &calls, secs, note, end, text))
}
