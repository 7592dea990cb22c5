//! `wait`, `waits sample`, `waits trace`: the backend's wait events.

use crate::capture::Event;
use crate::capture::events::WaitSample;
use crate::postgres::backend::{Backend, Flow, NoStop, Outcome, Ran};
use crate::postgres::waits::{Sampler, TraceProbe, WaitNames, read_word, word_address};
use crate::runtime::limit_text;
use anyhow::Result;
use std::time::Duration;

/// `wait`: the wait event now.
pub fn wait_now(s: &mut dyn Backend) -> Result<String> {
    let addr = word_address(s)?;
    let info = read_word(s, addr)?;
    let mut names = WaitNames::load(&s.di().build_id);
    let mut note = String::new();
    if info != 0
        && !names.map.contains_key(&info)
        && let Some(e) = names.try_resolve(s, &[info])
    {
        note = format!(" (name not resolved: {e})");
    }
    s.emit_event(Event::wait_now(names.event_fields(info)), None);
    Ok(format!("{}  [{info:#010x}]{note}", names.label(info)))
}

/// `waits sample`: let the backend run and sample its wait-event word.
pub fn waits_sample(s: &mut dyn Backend, hz: f64, duration: Option<Duration>) -> Result<Outcome> {
    let addr = word_address(s)?;
    s.say(&format!(
        "waits: sampling backend {} at {hz} Hz{}",
        s.pid(),
        limit_text(duration, None)
    ));
    let t0 = std::time::Instant::now();
    let sampler = Sampler::start(s.pid(), addr, hz);
    let mut probe = NoStop;
    let res = s.run_probes(&mut probe, duration);
    let (counts, total) = sampler.finish();
    let elapsed = t0.elapsed().as_secs_f64();
    let Ran { end, text } = res?;
    let flow = Flow::from(end);
    let mut names = WaitNames::load(&s.di().build_id);
    let keys: Vec<u32> = counts.keys().copied().collect();
    let mut note = String::new();
    if flow == Flow::Continue
        && let Some(e) = names.try_resolve(s, &keys)
    {
        note = format!("\n(names not resolved here: {e})");
    }
    let mut rows: Vec<(u32, u64)> = counts.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out = format!(
        "{:<16} {:<32} {:>9} {:>7}\n",
        "wait_event_type", "wait_event", "samples", "share"
    );
    let mut profile = Vec::new();
    for (info, n) in &rows {
        let (t, e) = names.describe(*info);
        let share = if total > 0 {
            *n as f64 * 100.0 / total as f64
        } else {
            0.0
        };
        out.push_str(&format!(
            "{:<16} {:<32} {:>9} {:>6.1}%\n",
            t.clone().unwrap_or_else(|| if *info == 0 {
                "(on CPU)".into()
            } else {
                "unresolved".into()
            }),
            e.clone().unwrap_or_default(),
            n,
            share
        ));
        profile.push(WaitSample::new(
            names.event_fields(*info),
            *n,
            share / 100.0,
        ));
    }
    out.push_str(&format!(
        "{total} samples in {elapsed:.1}s ({:.0}/s){note}{text}",
        total as f64 / elapsed.max(1e-9)
    ));
    s.emit_event(
        Event::WaitSamples {
            duration_s: elapsed,
            hz,
            profile,
            samples: total,
        },
        None,
    );
    Ok(Outcome::new(out, flow))
}

/// `waits trace`: every wait, via a hardware watchpoint on the word.
pub fn waits_trace(
    s: &mut dyn Backend,
    duration: Option<Duration>,
    stacks: usize,
    quiet: bool,
    statements: bool,
) -> Result<Outcome> {
    let mut probe = TraceProbe::new(s, stacks, quiet, statements)?;
    s.say(&format!(
        "waits: tracing backend {} (hardware watchpoint on its wait-event word){}",
        s.pid(),
        limit_text(duration, None)
    ));
    // run_probes disarms the breakpoints and clears the debug registers
    let res = s.run_probes(&mut probe, duration);
    let Ran { end, text } = res?;
    let flow = Flow::from(end);
    if flow == Flow::Continue {
        probe.close(s);
    } else if flow == Flow::Terminate {
        probe.abandon(s);
    }
    Ok(Outcome::new(format!("{}{text}", probe.summary()), flow))
}
