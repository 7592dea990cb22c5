//! `trace FUNC ARGEXPR... --perf`: each call from a kernel uprobe whose
//! record carries the user registers; the ARGEXPRs are arguments that a
//! register holds where the backend enters FUNC (by its DWARF), decided
//! before tracing, so no call stops the backend.  The calls are printed,
//! with the same lines, capture events and summary as the ptrace mode,
//! once tracing ends.  What needs memory (an expression, a struct, a
//! string, an argument passed on the stack) or `--stacks` is traced with
//! ptrace stops instead, saying why in one line.

use super::{BTreeMap, Event, addresses, trace, trace_summary};
use crate::debuginfo::types::TypeRef;
use crate::expr::eval::{ValLoc, Value};
use crate::inferior::Registers;
use crate::perf::uprobe::{Probe, Sampler};
use crate::postgres::backend::{Backend, NoStopDigest, Outcome, ProbeEnd, Ran, probe_outcome};
use crate::runtime::limit_text;
use anyhow::{Result, anyhow};
use std::collections::HashMap;
use std::time::Duration;

/// One sampled call: its location, time (CLOCK_MONOTONIC ns) and the
/// registers of its ARGEXPRs, in order.
struct Call {
    loc: usize,
    time: u64,
    regs: Vec<u64>,
}

/// A register by its DWARF number (x86-64: rax rdx rcx rbx rsi rdi rbp
/// rsp r8-r15).
fn dwarf_reg(r: &Registers, n: u16) -> u64 {
    match n {
        0 => r.rax,
        1 => r.rdx,
        2 => r.rcx,
        3 => r.rbx,
        4 => r.rsi,
        5 => r.rdi,
        6 => r.rbp,
        7 => r.rsp,
        8 => r.r8,
        9 => r.r9,
        10 => r.r10,
        11 => r.r11,
        12 => r.r12,
        13 => r.r13,
        14 => r.r14,
        _ => r.r15,
    }
}

/// `trace FUNC [ARGEXPR...] --perf [--for D] [--count N] [--quiet]`
pub fn trace_perf(
    s: &mut dyn Backend,
    function: &str,
    args: &[String],
    duration: Option<Duration>,
    count: Option<u64>,
    stacks: usize,
    quiet: bool,
) -> Result<Outcome> {
    let fallback = |s: &mut dyn Backend, why: String| {
        s.say(&format!(
            "trace --perf: {why}: tracing with a ptrace stop per call instead"
        ));
        trace(s, function, args, duration, count, stacks, quiet)
    };
    if stacks > 0 {
        return fallback(s, "--stacks reads the stack at each call".into());
    }
    crate::postgres::backend::clear_orphans(s, &[function], "trace --perf")?;
    let addrs = addresses(s, function)?;
    let mut specs: Vec<Vec<(u16, TypeRef)>> = Vec::new();
    for a in &addrs {
        match s.register_args(function, *a, args) {
            Ok(v) => specs.push(v),
            Err(e) => return fallback(s, format!("{e:#}")),
        }
    }
    // each probe at its entry block's first emulated instruction where the
    // argument registers (and the stack pointer) still hold the entry's
    let addrs: Vec<u64> = addrs
        .iter()
        .zip(&specs)
        .map(|(a, spec)| {
            let keep: Option<Vec<_>> = spec
                .iter()
                .map(|(r, _)| crate::perf::placement::dwarf_register(*r))
                .collect();
            match keep {
                Some(keep) => {
                    crate::perf::placement::entry_point(s.di(), s.bias(), function, *a, &keep, true)
                }
                None => *a,
            }
        })
        .collect();
    for a in &addrs {
        if let Some(why) = crate::postgres::backend::uprobe_conflict(s, *a, function) {
            return fallback(s, why);
        }
    }
    let mut probes = Vec::new();
    for a in &addrs {
        let (file, offset) = crate::perf::file_offset(s.pid(), *a)
            .map_err(|e| anyhow!("{function} at {a:#x} {}", e.said("the backend")))?;
        probes.push(Probe {
            file,
            offset,
            ret: false,
        });
    }
    let regs_of: Vec<Vec<u16>> = specs
        .iter()
        .map(|v| v.iter().map(|x| x.0).collect())
        .collect();
    // --count N: the reader ends the run once it has N calls
    let (on_demand, trigger) = match count {
        Some(_) => {
            let (d, t) = crate::runtime::Deadline::on_demand();
            (Some(d), Some(t))
        }
        None => (None, None),
    };
    let mask = regs_of
        .iter()
        .flatten()
        .fold(0u64, |m, r| m | 1 << crate::perf::uprobe::perf_reg(*r));
    let sampler = Sampler::start(
        s.pid(),
        s.pid(),
        &probes,
        // at least one register: a record without any is a kernel thread's
        mask | crate::perf::uprobe::SP,
        256,
        Vec::<Call>::new(),
        move |calls: &mut Vec<Call>, h| {
            if count.is_some_and(|n| calls.len() as u64 >= n) {
                return;
            }
            calls.push(Call {
                loc: h.probe,
                time: h.time,
                regs: regs_of[h.probe]
                    .iter()
                    .map(|r| dwarf_reg(&h.regs, *r))
                    .collect(),
            });
            if let (Some(n), Some(t)) = (count, &trigger)
                && calls.len() as u64 >= n
            {
                t.fire();
            }
        },
    )
    .map_err(|e| anyhow!("trace --perf: {e:#}"))?;
    s.say(&format!(
        "trace: {function} ({} location{}) in backend {} (kernel uprobes with the argument registers, no stops; calls printed at the end){}",
        addrs.len(),
        if addrs.len() == 1 { "" } else { "s" },
        s.pid(),
        limit_text(duration, count.map(|n| (n, "calls")))
    ));
    let base_ns = crate::perf::monotonic_ns();
    let base_wall = crate::capture::wall_now();
    let runs0 = s.resumes();
    let t0 = std::time::Instant::now();
    // the records read while the backend runs on
    let mut digest = NoStopDigest::new(move || {
        let secs = t0.elapsed().as_secs_f64();
        sampler.finish().map(|got| (secs, got))
    });
    let res = s.run_probes(&mut digest, duration);
    let stops = s.resumes().wrapping_sub(runs0).saturating_sub(1);
    drop(on_demand);
    let (secs, (calls, lost)) = digest.result()?;
    let Ran { end, text } = res?;
    let end = match end {
        // the reader's own deadline: --count was reached
        ProbeEnd::Deadline if count.is_some_and(|n| calls.len() as u64 >= n) => ProbeEnd::Done,
        e => e,
    };
    let mut values = vec![BTreeMap::<String, u64>::new(); args.len()];
    // each distinct register value of an argument is shown once
    let mut shown_as: HashMap<(usize, usize, u64), (String, serde_json::Value)> = HashMap::new();
    let capturing = s.capturing();
    for c in &calls {
        let mut json = serde_json::Map::new();
        let mut shown = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let (text, j) = shown_as
                .entry((c.loc, i, c.regs[i]))
                .or_insert_with(|| {
                    s.show_value(&Value {
                        ty: specs[c.loc][i].1.clone(),
                        loc: ValLoc::Bytes(c.regs[i].to_le_bytes().to_vec()),
                    })
                })
                .clone();
            *values[i].entry(text.clone()).or_insert(0) += 1;
            if !quiet {
                shown.push(format!("{a}={text}"));
            }
            if capturing {
                json.insert(a.clone(), j);
            }
        }
        if !quiet {
            s.say(&format!("{function}({})", shown.join(", ")));
        }
        if !capturing {
            continue;
        }
        let ts = base_wall + (c.time as f64 - base_ns as f64) / 1e9;
        s.emit_event(
            Event::Trace {
                args: json,
                function: function.to_string(),
                stack: None,
            },
            Some(ts),
        );
    }
    let mut summary = trace_summary(s, function, args, calls.len() as u64, &values, secs);
    if lost > 0 {
        summary.push_str(&format!(
            "\n{lost} calls not recorded (the kernel's ring was full)"
        ));
    }
    summary.push_str(&match stops {
        0 => "\n(the backend was not stopped while tracing)".to_string(),
        n => format!(
            "\n(the backend stopped {n} time{} while tracing: signals or library loads)",
            if n == 1 { "" } else { "s" }
        ),
    });
    Ok(probe_outcome(s, end, summary, text))
}
