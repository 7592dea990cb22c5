//! `pgdbg attach --cluster DIR` with a script that is one `count FUNC...`
//! line: served without a worker per backend, by uprobes opened on the
//! postmaster and inherited by every process it forks
//! (`perf/inherited.rs`), so that each backend is counted from its fork
//! on, however short its session.  Where that cannot be had (no tracefs,
//! no permission, a function in a library the postmaster does not map),
//! [`run`] says why in one line and the caller attaches to each backend
//! instead.

use crate::attach::AttachOpts;
use crate::capture::{Encoder, Event};
use crate::debuginfo::DebugInfo;
use crate::perf::inherited::{ClusterCount, Counts, Location};
use crate::runtime;
use anyhow::Result;
use std::time::{Duration, Instant};

/// Count `functions` in every process of the cluster of `postmaster`
/// until `limit`, Ctrl-C or SIGTERM, then print each backend's counts.
/// None (said in one line) when the inherited uprobes cannot be had.
pub fn run(
    postmaster: i32,
    di: &DebugInfo,
    functions: &[String],
    limit: Option<Duration>,
    opts: &AttachOpts,
) -> Result<Option<i32>> {
    let locations = match locations(postmaster, di, functions) {
        Ok(l) => l,
        Err(why) => return Ok(fallback(&why)),
    };
    // no session here: this front's own sink, installed while it counts
    let sink = runtime::Sink::new();
    if let Some(p) = &opts.capture {
        sink.open_capture(p)?;
    }
    let _installed = sink.install();
    let t0 = Instant::now();
    let existing = || crate::inferior::procfs::children_of(postmaster);
    let mut cc = match ClusterCount::start(postmaster, &locations, functions.len(), existing) {
        Ok(cc) => cc,
        Err(why) => return Ok(fallback(&why)),
    };
    runtime::install();
    if !opts.quiet {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: count {} in every process of the cluster from its fork on (uprobes inherited from the postmaster {postmaster}, no attach, no stops){}",
            functions.join(", "),
            runtime::limit_text(limit, None)
        ));
    }
    loop {
        if limit.is_some_and(|d| t0.elapsed() >= d)
            || runtime::must_stop()
            || runtime::sigint_seen()
        {
            break;
        }
        cc.wait(crate::perf::POLL_MS);
        cc.drain();
    }
    let counts = cc.finish();
    let secs = t0.elapsed().as_secs_f64();
    print(&counts, functions, secs, &sink);
    sink.close_capture();
    runtime::flush_out();
    Ok(Some(if runtime::output_failure().is_some() {
        74
    } else {
        0
    }))
}

/// The one line that says why each backend is attached instead.
fn fallback(why: &str) -> Option<i32> {
    crate::runtime::sink().warn(format_args!(
        "pgdbg: count across the cluster without attaching is not possible here ({why}): each backend is attached instead"
    ));
    None
}

/// Where each function's uprobes go: the locations of its code in the
/// postgres binary, at the first instruction the kernel emulates
/// (placement.rs), as file offsets (the postmaster maps the binary).
fn locations(
    postmaster: i32,
    di: &DebugInfo,
    functions: &[String],
) -> std::result::Result<Vec<Location>, String> {
    let bias = crate::session::compute_bias(postmaster, di).map_err(|e| format!("{e:#}"))?;
    let mut out = Vec::new();
    for (i, f) in functions.iter().enumerate() {
        let locs = crate::session::resolve_location(di, bias, f).map_err(|e| format!("{e:#}"))?;
        if locs.is_empty() {
            return Err(format!("no code for {f}"));
        }
        for l in locs {
            let a = crate::perf::placement::entry_point(di, bias, f, l.addr, &[], false);
            // a backend with a jump of a dead pgdbg's there: attached
            // instead (the attach or the count takes the jump out)
            if let Some(why) = di
                .binary
                .bytes_at(a.wrapping_sub(bias + 4), 5)
                .and_then(|b| crate::inferior::detour::stray_jump_in_children(postmaster, f, a, b))
            {
                return Err(why);
            }
            let (file, offset) = crate::perf::file_offset(postmaster, a).map_err(|e| match e {
                crate::perf::NoFile::Unmapped => format!(
                    "{f} at {a:#x} is in no file the postmaster maps (a library loaded later)"
                ),
                e => format!("{f} at {a:#x} {}", e.said("the postmaster")),
            })?;
            out.push(Location {
                function: i,
                file,
                offset,
            });
        }
    }
    Ok(out)
}

/// Each process's counts (`[PID]` lines, ended ones said so), the totals,
/// and one line of what was seen; `count` capture events per process.
fn print(counts: &Counts, functions: &[String], secs: f64, sink: &runtime::Sink) {
    let mut encoder = Encoder::default();
    let width = functions.iter().map(|f| f.len()).max().unwrap_or(8).max(8);
    let mut totals = vec![0u64; functions.len()];
    let mut ended = 0usize;
    for (pid, calls) in &counts.calls {
        let gone = counts.exited.contains(pid);
        ended += gone as usize;
        let state = if gone {
            "ended during the count"
        } else {
            "running"
        };
        let from = if counts.forked.contains(pid) {
            "from its fork"
        } else {
            "there at the start"
        };
        crate::runtime::sink().line(&format!("[{pid}] count: backend {pid} ({from}, {state})"));
        crate::runtime::sink().line(&format!("[{pid}] {:<width$} {:>10}", "function", "calls"));
        for (i, f) in functions.iter().enumerate() {
            totals[i] += calls[i];
            crate::runtime::sink().line(&format!("[{pid}] {f:<width$} {:>10}", calls[i]));
            sink.event(|| {
                encoder.line(
                    Event::Count {
                        calls: calls[i],
                        duration_s: secs,
                        function: f.clone(),
                        phases: None,
                    },
                    None,
                    *pid as i32,
                )
            });
        }
    }
    crate::runtime::sink().line(&format!("{:<width$} {:>10}", "function", "calls (all)"));
    for (f, n) in functions.iter().zip(&totals) {
        crate::runtime::sink().line(&format!("{f:<width$} {n:>10}"));
    }
    crate::runtime::sink().line(&format!("({secs:.1}s)"));
    let n = counts.calls.len();
    crate::runtime::sink().warn(format_args!(
        "pgdbg: {n} process{} counted ({ended} ended during the count), {} forked while counting{}",
        if n == 1 { "" } else { "es" },
        counts.forked.len(),
        if counts.lost > 0 {
            format!(
                "; {} calls not counted: the kernel's ring was full (a slow reader)",
                counts.lost
            )
        } else {
            String::new()
        }
    ));
}
