//! `wait`, `waits sample`, `waits trace`: the backend's wait events.

use crate::capture::Event;
use crate::capture::events::{StatementSamples, WaitSample};
use crate::postgres::backend::{Backend, Flow, NoStop, Outcome, Ran};
use crate::postgres::statements::{Poller, StatusShape, Timeline};
use crate::postgres::waits::{Sampler, TraceProbe, WaitNames, read_word, word_address};
use crate::runtime::limit_text;
use anyhow::{Result, anyhow};
use std::collections::BTreeMap;
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
pub fn waits_sample(
    s: &mut dyn Backend,
    hz: f64,
    duration: Option<Duration>,
    by_statement: bool,
) -> Result<Outcome> {
    let addr = word_address(s)?;
    // --by-statement: the backend's pg_stat_activity entry, read from now on
    let poller = match by_statement {
        true => Some(Poller::start(
            StatusShape::find(s.di(), s.pid(), s.bias())
                .map_err(|e| anyhow!("waits sample --by-statement: {e}"))?,
        )),
        false => None,
    };
    s.say(&format!(
        "waits: sampling backend {} at {hz} Hz{}",
        s.pid(),
        limit_text(duration, None)
    ));
    let t0 = std::time::Instant::now();
    let sampler = Sampler::start(s.pid(), addr, hz, by_statement);
    let mut probe = NoStop;
    let res = s.run_probes(&mut probe, duration);
    let (counts, total, times) = sampler.finish();
    let timeline = poller.map(Poller::finish);
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
    // after the names are asked for: the statements' waits carry them too
    let by_statement = match &timeline {
        Some(tl) => split_samples(tl, &times, &names),
        None => Vec::new(),
    };
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
    if let Some(tl) = &timeline {
        out.push_str(&statement_section(tl, &by_statement));
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
            by_statement,
        },
        None,
    );
    Ok(Outcome::new(out, flow))
}

/// The samples (time, wait_event_info) split by the statement that ran
/// at each one's time, most samples first.
fn split_samples(tl: &Timeline, times: &[(u64, u32)], names: &WaitNames) -> Vec<StatementSamples> {
    let mut by: BTreeMap<usize, BTreeMap<u32, u64>> = BTreeMap::new();
    for (t, v) in times {
        *by.entry(tl.owner_at(*t))
            .or_default()
            .entry(*v)
            .or_insert(0) += 1;
    }
    let mut rows: Vec<StatementSamples> = by
        .into_iter()
        .map(|(o, waits)| {
            let n: u64 = waits.values().sum();
            let mut waits: Vec<(u32, u64)> = waits.into_iter().collect();
            waits.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let owner = &tl.owners[o];
            StatementSamples {
                state: owner.state.clone(),
                query_id: owner.query_id,
                query: owner.query.clone(),
                label: owner.label.clone(),
                samples: n,
                profile: waits
                    .into_iter()
                    .map(|(i, k)| {
                        WaitSample::new(names.event_fields(i), k, k as f64 / n.max(1) as f64)
                    })
                    .collect(),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.label.cmp(&b.label)));
    rows
}

/// A wait sample's name in one word: `type:event`, or "on CPU" for 0.
fn sample_label(p: &WaitSample) -> String {
    match (&p.wait_event_type, &p.wait_event) {
        (Some(t), Some(e)) => format!("{t}:{e}"),
        _ if p.info == 0 => "on CPU (no wait event)".into(),
        _ => format!("{:#010x}", p.info),
    }
}

/// The table's section by statement: each one's share of the samples and
/// its wait events, most first.
fn statement_section(tl: &Timeline, rows: &[StatementSamples]) -> String {
    let total: u64 = rows.iter().map(|r| r.samples).sum();
    let mut out = format!("{}\n{:>6}  statement\n", tl.heading("the samples"), "share");
    for r in rows {
        out.push_str(&format!(
            "{:>5.1}%  {}\n",
            r.samples as f64 * 100.0 / total.max(1) as f64,
            r.label
        ));
        let waits: Vec<String> = r
            .profile
            .iter()
            .take(4)
            .map(|p| format!("{} {:.0}%", sample_label(p), p.share * 100.0))
            .collect();
        out.push_str(&format!("{:>6}  {}\n", "", waits.join(", ")));
    }
    out
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
