//! Generic probes on functions: `trace FUNC ARGEXPR...` records each call
//! with argument values, `count FUNC...` counts calls (optionally by
//! statement phase).  Both run on internal breakpoints through
//! `Backend::run_probes`, removed when they end.  Each command returns how
//! the run ended, its summary and the stop's text, for the session to show.

pub mod counters;
pub mod latency;
pub mod phases_perf;
pub mod trace_perf;

use crate::capture::Event;
use crate::capture::events::Phases;
use crate::postgres::backend::{Backend, Outcome, ProbeHandler, Ran, probe_outcome};
use crate::runtime::limit_text;
use anyhow::{Result, bail};
use std::collections::{BTreeMap, HashMap};

/// Every runtime address of `function` (out-of-line copies, clones and
/// inlined instances).
fn addresses(s: &dyn Backend, function: &str) -> Result<Vec<u64>> {
    let addrs = s.location_addrs(function)?;
    if addrs.is_empty() {
        bail!("no code for {function}");
    }
    Ok(addrs)
}

/// Arm internal breakpoints at all `addrs`, or none of them.
fn arm_all(s: &mut dyn Backend, addrs: &[u64]) -> Result<()> {
    for (i, a) in addrs.iter().enumerate() {
        if let Err(e) = s.arm_internal(*a) {
            for b in &addrs[..i] {
                let _ = s.disarm_internal(*b);
            }
            return Err(e);
        }
    }
    Ok(())
}

struct Trace {
    function: String,
    args: Vec<String>,
    stacks: usize,
    quiet: bool,
    count: Option<u64>,
    calls: u64,
    /// argument -> value text -> calls
    values: Vec<BTreeMap<String, u64>>,
}

impl ProbeHandler for Trace {
    fn on_stop(&mut self, s: &mut dyn Backend, _addr: u64) -> Result<()> {
        self.calls += 1;
        s.select_function_frame(&self.function)?;
        let mut json = serde_json::Map::new();
        let mut shown = Vec::new();
        for (i, a) in self.args.iter().enumerate() {
            let (j, text) = match s.eval_text(a) {
                Ok((text, j)) => (j, text),
                Err(e) => {
                    let t = format!("<error: {e:#}>");
                    (serde_json::Value::String(t.clone()), t)
                }
            };
            *self.values[i].entry(text.clone()).or_insert(0) += 1;
            shown.push(format!("{a}={text}"));
            json.insert(a.clone(), j);
        }
        let stack = if self.stacks > 0 {
            s.quick_stack(self.stacks)
        } else {
            Vec::new()
        };
        if !self.quiet {
            let st = if stack.is_empty() {
                String::new()
            } else {
                format!("  {}", stack.join(" <- "))
            };
            s.say(&format!("{}({}){st}", self.function, shown.join(", ")));
        }
        let ev = Event::Trace {
            args: json,
            function: self.function.clone(),
            stack: (self.stacks > 0).then_some(stack),
        };
        s.emit_event(ev, None);
        Ok(())
    }
    fn done(&self) -> bool {
        self.count.is_some_and(|n| self.calls >= n)
    }
}

/// `trace FUNC ARGEXPR... [--for D] [--count N] [--stacks N] [--quiet]`
pub fn trace(
    s: &mut dyn Backend,
    function: &str,
    args: &[String],
    duration: Option<std::time::Duration>,
    count: Option<u64>,
    stacks: usize,
    quiet: bool,
) -> Result<Outcome> {
    let addrs = addresses(s, function)?;
    let mut probe = Trace {
        function: function.to_string(),
        args: args.to_vec(),
        stacks,
        quiet,
        count,
        calls: 0,
        values: vec![BTreeMap::new(); args.len()],
    };
    arm_all(s, &addrs)?;
    s.say(&format!(
        "trace: {function} ({} location{}) in backend {}{}",
        addrs.len(),
        if addrs.len() == 1 { "" } else { "s" },
        s.pid(),
        limit_text(duration, count.map(|n| (n, "calls")))
    ));
    let t0 = std::time::Instant::now();
    let Ran { end, text } = s.run_probes(&mut probe, duration)?;
    let secs = t0.elapsed().as_secs_f64();
    let summary = trace_summary(s, function, args, probe.calls, &probe.values, secs);
    Ok(probe_outcome(s, end, summary, text))
}

/// `trace`'s end: the calls, each ARGEXPR's most frequent values, and the
/// `trace_end` event.
fn trace_summary(
    s: &mut dyn Backend,
    function: &str,
    args: &[String],
    calls: u64,
    values: &[BTreeMap<String, u64>],
    secs: f64,
) -> String {
    let mut summary = format!(
        "trace: {} call{} of {function} in {secs:.1}s",
        calls,
        if calls == 1 { "" } else { "s" }
    );
    for (i, a) in args.iter().enumerate() {
        let mut top: Vec<(&String, &u64)> = values[i].iter().collect();
        top.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
        let shown: Vec<String> = top
            .iter()
            .take(5)
            .map(|(v, n)| format!("{v} ({n})"))
            .collect();
        let more = top.len().saturating_sub(5);
        summary.push_str(&format!(
            "\n  {a}: {}{}",
            shown.join(", "),
            if more > 0 {
                format!(", ... {more} more values")
            } else {
                String::new()
            }
        ));
    }
    s.emit_event(
        Event::TraceEnd {
            calls,
            duration_s: secs,
            function: function.to_string(),
        },
        None,
    );
    summary
}

struct Count {
    /// address -> counted function
    counted: HashMap<u64, usize>,
    /// address -> phase it starts
    phase_entry: HashMap<u64, &'static str>,
    /// functions, in the order given
    names: Vec<String>,
    /// calls per function, per phase (index in PHASES)
    calls: Vec<[u64; 3]>,
    /// running phase functions, innermost last: (stack pointer after they
    /// return, phase, return address with a breakpoint)
    running: Vec<(u64, &'static str, u64)>,
}

impl Count {
    fn phase_index(&self) -> usize {
        let phase = self.running.last().map(|r| r.1).unwrap_or("other");
        crate::postgres::PHASES
            .iter()
            .position(|p| *p == phase)
            .unwrap_or(2)
    }
}

impl ProbeHandler for Count {
    fn on_stop(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()> {
        let sp = s.registers()?.rsp;
        // Phase functions that returned (we stop at their return address)
        // or were left by an ERROR's longjmp: their frame is gone when the
        // stack pointer is at or above where it is after their return.
        while let Some(&(ret_sp, _, ret_addr)) = self.running.last() {
            if ret_sp > sp {
                break;
            }
            self.running.pop();
            s.disarm_internal(ret_addr)?;
        }
        if let Some(&f) = self.counted.get(&addr) {
            let p = self.phase_index();
            self.calls[f][p] += 1;
        }
        if let Some(&phase) = self.phase_entry.get(&addr)
            && let Some((ret_addr, ret_sp)) = s.return_point()
        {
            s.arm_internal(ret_addr)?;
            self.running.push((ret_sp, phase, ret_addr));
        }
        Ok(())
    }
    fn done(&self) -> bool {
        false
    }
}

/// `count FUNC... --ptrace [--by-phase] [--for D]`: a ptrace stop per call
pub fn count(
    s: &mut dyn Backend,
    functions: &[String],
    by_phase: bool,
    duration: Option<std::time::Duration>,
) -> Result<Outcome> {
    let mut probe = Count {
        counted: HashMap::new(),
        phase_entry: HashMap::new(),
        names: functions.to_vec(),
        calls: vec![[0; 3]; functions.len()],
        running: Vec::new(),
    };
    let mut addrs = Vec::new();
    for (i, f) in functions.iter().enumerate() {
        for a in addresses(s, f)? {
            probe.counted.entry(a).or_insert(i);
            addrs.push(a);
        }
    }
    if by_phase {
        for (f, phase) in crate::postgres::PHASE_FUNCTIONS {
            // a binary without one of them simply has no such phase entry
            if let Ok(v) = addresses(s, f) {
                for a in v {
                    probe.phase_entry.insert(a, phase);
                    addrs.push(a);
                }
            }
        }
        // after an ERROR, phases left by longjmp end where the error is
        // cleaned up (a stop there pops them: its stack pointer is above)
        for f in crate::postgres::ERROR_CLEANUP_FUNCTIONS {
            if let Ok(v) = addresses(s, f) {
                addrs.extend(v);
            }
        }
    }
    addrs.sort();
    addrs.dedup();
    arm_all(s, &addrs)?;
    s.say(&format!(
        "count: {} in backend {}{}{}",
        functions.join(", "),
        s.pid(),
        if by_phase { " by phase" } else { "" },
        limit_text(duration, None)
    ));
    let t0 = std::time::Instant::now();
    let Ran { end, text } = s.run_probes(&mut probe, duration)?;
    let secs = t0.elapsed().as_secs_f64();
    let summary = count_summary(s, &probe.names, &probe.calls, by_phase, secs);
    Ok(probe_outcome(s, end, summary, text))
}

/// `count`'s table (per phase with `by_phase`) and its `count` events.
fn count_summary(
    s: &mut dyn Backend,
    functions: &[String],
    calls: &[[u64; 3]],
    by_phase: bool,
    secs: f64,
) -> String {
    let width = functions.iter().map(|f| f.len()).max().unwrap_or(8).max(8);
    let mut summary = if by_phase {
        format!(
            "{:<width$} {:>10} {:>10} {:>10} {:>10}",
            "function", "calls", "planning", "execution", "other"
        )
    } else {
        format!("{:<width$} {:>10}", "function", "calls")
    };
    for (i, f) in functions.iter().enumerate() {
        let c = calls[i];
        let total: u64 = c.iter().sum();
        if by_phase {
            summary.push_str(&format!(
                "\n{f:<width$} {total:>10} {:>10} {:>10} {:>10}",
                c[0], c[1], c[2]
            ));
        } else {
            summary.push_str(&format!("\n{f:<width$} {total:>10}"));
        }
        let ev = Event::Count {
            calls: total,
            duration_s: secs,
            function: f.clone(),
            phases: by_phase.then_some(Phases {
                execution: c[1],
                other: c[2],
                planning: c[0],
            }),
        };
        s.emit_event(ev, None);
    }
    summary.push_str(&format!("\n({secs:.1}s)"));
    summary
}

/// `count FUNC...` (the default): one kernel uprobe counting event per location
/// (the `uprobe` PMU): the backend is never stopped for a call; the
/// kernel removes the probes when pgdbg closes them or dies.  A function's
/// probe sits at the first instruction of its entry block that the kernel
/// emulates ([`crate::perf::placement`]), which costs the backend a trap
/// instead of a trap and a single step.
pub fn count_perf(
    s: &mut dyn Backend,
    functions: &[String],
    duration: Option<std::time::Duration>,
) -> Result<Outcome> {
    crate::postgres::backend::clear_orphans(s, functions, "count")?;
    let mut counters: Vec<(usize, crate::perf::UprobeCounter)> = Vec::new();
    for (i, f) in functions.iter().enumerate() {
        for a in addresses(s, f)? {
            counters.push((i, uprobe_counter(s, f, a)?));
        }
    }
    s.say(&format!(
        "count: {} in backend {} (kernel uprobes, no stops){}",
        functions.join(", "),
        s.pid(),
        limit_text(duration, None)
    ));
    let t0 = std::time::Instant::now();
    let mut nostop = crate::postgres::backend::NoStop;
    let Ran { end, text } = s.run_probes(&mut nostop, duration)?;
    let secs = t0.elapsed().as_secs_f64();
    let mut calls = vec![0u64; functions.len()];
    for (i, c) in &counters {
        calls[*i] += c.count().unwrap_or(0);
    }
    drop(counters);
    Ok(counted(
        s,
        functions,
        &calls,
        secs,
        String::new(),
        end,
        text,
    ))
}

/// A kernel uprobe counting the calls of `f` at its location `a`.
fn uprobe_counter(s: &dyn Backend, f: &str, a: u64) -> Result<crate::perf::UprobeCounter> {
    // a function's entry block runs once per call: the probe goes to its
    // first instruction the kernel emulates (no single step)
    let a = crate::perf::placement::entry_point(s.di(), s.bias(), f, a, &[], false);
    if let Some(why) = crate::postgres::backend::uprobe_conflict(s, a, f) {
        return Err(anyhow::Error::new(crate::perf::Refused(format!(
            "count: {why}"
        ))));
    }
    let (file, off) = crate::perf::file_offset(s.pid(), a).map_err(|e| {
        anyhow::Error::new(crate::perf::Refused(format!(
            "count: {f} at {a:#x} {}",
            e.said("the backend")
        )))
    })?;
    crate::perf::UprobeCounter::open(file.path(), off, s.pid())
        .map_err(|e| crate::perf::open_error("count: a kernel uprobe", s.pid(), e))
}

/// `count`'s table of calls (and its capture events), the line `note`
/// after it.
fn counted(
    s: &mut dyn Backend,
    functions: &[String],
    calls: &[u64],
    secs: f64,
    note: String,
    end: crate::postgres::backend::ProbeEnd,
    text: String,
) -> Outcome {
    let width = functions.iter().map(|f| f.len()).max().unwrap_or(8).max(8);
    let mut summary = format!("{:<width$} {:>10}", "function", "calls");
    for (f, n) in functions.iter().zip(calls) {
        summary.push_str(&format!("\n{f:<width$} {n:>10}"));
        s.emit_event(
            Event::Count {
                calls: *n,
                duration_s: secs,
                function: f.clone(),
                phases: None,
            },
            None,
        );
    }
    summary.push_str(&format!("\n({secs:.1}s){note}"));
    probe_outcome(s, end, summary, text)
}
