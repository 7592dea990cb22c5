//! `latency FUNC... [--for D]`: the time spent in each function, from a
//! uprobe at its entry to a uretprobe at its return (`crate::perf`): the
//! backend is never stopped for a call.  Per function: calls, total, avg,
//! p50, p99, max, a log2 histogram and a `latency` capture event.

use crate::capture::Event;
use crate::capture::events::LatencyBucket;
use crate::perf::latency::{Pairing, Stats, Times, bucket_range, human, render_hist};
use crate::perf::uprobe::{Probe, Sampler};
use crate::postgres::backend::{Backend, NoStopDigest, Outcome, Ran, probe_outcome};
use anyhow::{Result, anyhow, bail};

/// The out-of-line entries of `function` in the postgres binary (runtime
/// addresses), and how many inlined copies it also has (those have no
/// return of their own to time).
pub fn entries(s: &dyn Backend, function: &str) -> Result<(Vec<u64>, usize)> {
    if function.contains(':') || function.starts_with('*') {
        bail!(
            "{function}: latency takes a function of the postgres binary by name (not FILE:LINE, *ADDRESS or LIB:FUNC)"
        );
    }
    let locs = s.di().function_locations(function);
    if locs.is_empty() {
        bail!(
            "no function \"{function}\" in this postgres binary",
            function = crate::shown::shown(function)
        );
    }
    let inlined = locs.iter().filter(|l| l.inlined).count();
    let mut out = Vec::new();
    for l in locs.iter().filter(|l| !l.inlined) {
        // a return probe rewrites the return address at the entry: only
        // ever at the first byte of a function symbol
        match s.di().symbol_at(l.addr) {
            Some((_, 0)) => out.push(l.addr + s.bias()),
            _ => bail!(
                "{function}: its code at {:#x} is not the start of a function symbol; no return probe is placed there",
                l.addr + s.bias()
            ),
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        bail!(
            "{function} is only inlined ({inlined} copies): it has no call and return of its own to time; time its caller"
        );
    }
    Ok((out, inlined))
}

/// What a probe's hit means.
#[derive(Clone, Copy)]
enum Role {
    Entry(usize),
    Return(usize),
    /// The entry of a function that cleans up after an ERROR: the calls
    /// below it were left by longjmp.
    Cleanup,
}

/// Entry and return probes at each entry of each function, and entry
/// probes on the ERROR cleanup functions: (probes, their roles, inlined
/// copies per function).
fn probes_for(
    s: &dyn Backend,
    functions: &[String],
) -> Result<(Vec<Probe>, Vec<Role>, Vec<usize>)> {
    let mut probes = Vec::new();
    let mut roles = Vec::new();
    let mut inlined = Vec::new();
    let at = |a: u64, f: &str| {
        // the entry block's first emulated instruction, where the stack
        // pointer (and the return address at it) is still the entry's: the
        // return probe rewrites that address, the calls are paired by it
        let a = crate::perf::placement::entry_point(s.di(), s.bias(), f, a, &[], true);
        if let Some(why) = crate::postgres::backend::uprobe_conflict(s, a, f) {
            bail!("latency: {why}; delete it first (latency has no mode with ptrace stops)");
        }
        crate::perf::file_offset(s.pid(), a)
            .map_err(|e| anyhow!("{f} at {a:#x} {}", e.said("the backend")))
    };
    for (i, f) in functions.iter().enumerate() {
        let (addrs, inl) = entries(s, f)?;
        inlined.push(inl);
        for a in addrs {
            let (file, offset) = at(a, f)?;
            for ret in [false, true] {
                probes.push(Probe {
                    file: file.clone(),
                    offset,
                    ret,
                });
                roles.push(if ret { Role::Return(i) } else { Role::Entry(i) });
            }
        }
    }
    for f in crate::postgres::ERROR_CLEANUP_FUNCTIONS {
        if functions.iter().any(|x| x == f) {
            continue;
        }
        // a binary without one simply has no such marker
        let Ok((addrs, _)) = entries(s, f) else {
            continue;
        };
        for a in addrs {
            let (file, offset) = at(a, f)?;
            probes.push(Probe {
                file,
                offset,
                ret: false,
            });
            roles.push(Role::Cleanup);
        }
    }
    Ok((probes, roles, inlined))
}

/// `latency FUNC... [--for D]`
pub fn latency(
    s: &mut dyn Backend,
    functions: &[String],
    duration: Option<std::time::Duration>,
    json: bool,
) -> Result<Outcome> {
    crate::postgres::backend::clear_orphans(s, functions, "latency")?;
    let (probes, roles, inlined) = probes_for(s, functions)?;
    let sampler = Sampler::start(
        s.pid(),
        s.pid(),
        &probes,
        crate::perf::uprobe::SP,
        256,
        Pairing::new(functions.len()),
        move |p: &mut Pairing, h| match roles[h.probe] {
            Role::Entry(f) => p.entry(f, h.regs.rsp, h.time),
            Role::Return(f) => p.ret(f, h.regs.rsp, h.time),
            Role::Cleanup => p.mark(h.regs.rsp),
        },
    )
    .map_err(|e| anyhow!("latency: {e:#}"))?;
    s.say(&format!(
        "latency: {} in backend {} (entry and return uprobes, no stops){}",
        functions.join(", "),
        s.pid(),
        crate::runtime::limit_text(duration, None)
    ));
    let runs0 = s.resumes();
    let t0 = std::time::Instant::now();
    // the calls paired and their statistics while the backend runs on
    let mut digest = NoStopDigest::new(move || -> Result<_> {
        let secs = t0.elapsed().as_secs_f64();
        let (pairing, lost) = sampler.finish()?;
        let stats: Vec<Stats> = pairing.fns.iter().map(Times::stats).collect();
        Ok((secs, pairing.fns, stats, lost))
    });
    let res = s.run_probes(&mut digest, duration);
    // the backend was resumed once; each further resume followed a stop
    let stops = s.resumes().wrapping_sub(runs0).saturating_sub(1);
    let (secs, times, stats, lost) = digest.result()?;
    let Ran { end, text } = res?;
    let width = functions.iter().map(|f| f.len()).max().unwrap_or(8).max(8);
    let mut out = format!(
        "{:<width$} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "function", "calls", "total", "avg", "p50", "p99", "max", "no return"
    );
    let mut notes = String::new();
    let mut hists = String::new();
    let mut docs = Vec::new();
    for (i, f) in functions.iter().enumerate() {
        let (t, st) = (&times[i], &stats[i]);
        if json {
            docs.push(serde_json::to_value(event(f, t, st, secs))?);
        }
        out.push_str(&format!(
            "\n{f:<width$} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
            st.calls,
            human(st.total),
            human(st.avg),
            human(st.p50),
            human(st.p99),
            human(st.max),
            t.no_return
        ));
        if st.calls > 0 {
            hists.push_str(&format!("\n\n{f}\n{}", render_hist(st)));
        }
        if t.no_return > 0 {
            notes.push_str(&format!(
                "\n{f}: {} call{} never returned (left by an ERROR's longjmp, or deeper than the kernel's return probes go): not timed",
                t.no_return,
                if t.no_return == 1 { "" } else { "s" }
            ));
        }
        if t.nested > 0 {
            notes.push_str(&format!(
                "\n{f}: {} call{} began inside another call of {f} (recursion): each is paired with its own return by the stack pointer and timed from its entry to its return, inner calls included",
                t.nested,
                if t.nested == 1 { "" } else { "s" }
            ));
        }
        if t.running_at_start + t.running() > 0 {
            notes.push_str(&format!(
                "\n{f}: not timed: {} call{} running when timing began, {} when it ended",
                t.running_at_start,
                if t.running_at_start == 1 { "" } else { "s" },
                t.running()
            ));
        }
        if inlined[i] > 0 {
            notes.push_str(&format!(
                "\n{f}: its {} inlined cop{} (no call of their own) are not timed",
                inlined[i],
                if inlined[i] == 1 { "y" } else { "ies" }
            ));
        }
        s.emit_event(event(f, t, st, secs), None);
    }
    if json {
        let doc = serde_json::json!({
            "duration_s": secs,
            "functions": docs,
            "lost_records": lost,
            "stops": stops,
        });
        return Ok(probe_outcome(
            s,
            end,
            serde_json::to_string_pretty(&doc)?,
            text,
        ));
    }
    if lost > 0 {
        notes.push_str(&format!(
            "\n{lost} probe records lost (the ring was full): calls around them may be counted as not returned"
        ));
    }
    notes.push_str(&match stops {
        0 => format!("\n({secs:.1}s; the backend was not stopped while timing)"),
        n => format!(
            "\n({secs:.1}s; the backend stopped {n} time{} while timing: signals or library loads)",
            if n == 1 { "" } else { "s" }
        ),
    });
    Ok(probe_outcome(s, end, format!("{out}{hists}{notes}"), text))
}

fn event(function: &str, t: &Times, st: &Stats, secs: f64) -> Event {
    Event::Latency {
        avg_ns: st.avg,
        calls: st.calls,
        duration_s: secs,
        function: function.to_string(),
        histogram: st
            .hist
            .iter()
            .map(|&(k, count)| {
                let (low_us, high_us) = bucket_range(k);
                LatencyBucket {
                    count,
                    high_us,
                    low_us,
                }
            })
            .collect(),
        max_ns: st.max,
        min_ns: st.min,
        nested: t.nested,
        no_return: t.no_return,
        p50_ns: st.p50,
        p99_ns: st.p99,
        running_at_end: t.running(),
        running_at_start: t.running_at_start,
        total_ns: st.total,
    }
}
