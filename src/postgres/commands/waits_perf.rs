//! `waits trace --perf`: the waits from a perf write-breakpoint event on
//! the wait-event word (`crate::perf::watch`) instead of ptrace stops.

use crate::perf::profile::Symbolizer;
use crate::perf::watch::WordWatch;
use crate::postgres::backend::{Backend, Flow, NoStop};
use crate::postgres::waits::TraceProbe;
use anyhow::Result;
use std::time::Duration;

/// Every store into the wait-event word comes from the perf event (the
/// backend is not stopped per wait); the waits are reported once tracing
/// ends, through the same probe (names, capture events, summary) as the
/// ptrace mode.
pub fn waits_trace_perf(
    s: &mut dyn Backend,
    duration: Option<Duration>,
    stacks: usize,
    quiet: bool,
) -> Result<(String, Flow)> {
    let mut probe = TraceProbe::observing(s, stacks, quiet)?;
    let base_i = std::time::Instant::now();
    let base_ns = crate::perf::monotonic_ns();
    let base_wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let watch = WordWatch::start(s.pid(), s.pid(), probe.word(), stacks > 0, s.bias())?;
    s.say(&format!(
        "waits: tracing backend {} (perf write-breakpoint event on its wait-event word, no stop per wait; reported at the end){}",
        s.pid(),
        match duration {
            Some(d) => format!(" for {:.1}s", d.as_secs_f64()),
            None => "; Ctrl-C stops".into(),
        }
    ));
    let mut nostop = NoStop;
    let res = s.run_probes(&mut nostop, duration);
    let got = watch.finish()?;
    let (end, text) = res?;
    let flow = Flow::from(end);
    let stores = got.stores.len();
    if flow == Flow::Continue {
        // names of the stacks first (the debug info is borrowed from the
        // backend), then the stores in order
        let named: Vec<Vec<String>> = {
            let mut sym = Symbolizer::new(s.pid(), s.di(), s.bias());
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
        for (st, stack) in got.stores.iter().zip(named) {
            let delta = st.time as i128 - base_ns as i128;
            let now = if delta >= 0 {
                base_i + Duration::from_nanos(delta as u64)
            } else {
                base_i
                    .checked_sub(Duration::from_nanos((-delta) as u64))
                    .unwrap_or(base_i)
            };
            let ts = base_wall + delta as f64 / 1e9;
            probe.store(s, st.value, now, ts, stack);
        }
        probe.close(s);
    }
    let mut notes = String::new();
    if got.lost > 0 {
        notes.push_str(&format!(
            "\n{} stores not recorded (the ring was full): waits around them are merged",
            got.lost
        ));
    }
    if got.read_back > 0 {
        notes.push_str(&format!(
            "\n{} of {stores} stores were not plain moves: their values were read back",
            got.read_back
        ));
    }
    if flow != Flow::Continue {
        notes.push_str(&format!(
            "\n{stores} stores recorded; not reported (tracing was cut short)"
        ));
    }
    Ok((format!("{}{notes}{text}", probe.summary()), flow))
}
