//! Folded stacks and flame graphs of a capture's stacks.
//!
//! Captures store stacks innermost first (`LWLockAcquire+126`,
//! `LockAcquireExtended+298`, ..., or `0x7f...` where no symbol is
//! known). Folded lines put the root first, drop the `+offset`, and for
//! `wait` events end in the wait itself (`LWLock:LockManager`), weighted
//! by the microseconds waited; `trace` events weigh one per call.

use super::Event;
use crate::capture::Event as CaptureEvent;
use anyhow::{Result, anyhow, bail};
use std::collections::BTreeMap;

/// Which events' stacks to fold.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackKind {
    /// `wait` events (`waits trace --stacks N`), weighted by µs waited
    Waits,
    /// `trace` events (`trace ... --stacks N`), one per call
    Trace,
}

impl StackKind {
    /// "wait" / "trace": what the stacks are, in messages.
    pub fn name(self) -> &'static str {
        match self {
            StackKind::Waits => "wait",
            StackKind::Trace => "call",
        }
    }

    /// The capture event that carries them.
    pub fn event(self) -> &'static str {
        match self {
            StackKind::Waits => "wait",
            StackKind::Trace => "trace",
        }
    }
}

/// Merged folded stacks, sorted by stack.
#[derive(Debug)]
pub struct Folded {
    pub kind: StackKind,
    /// (root;...;leaf, weight)
    pub lines: Vec<(String, u64)>,
    /// Events that contributed a stack.
    pub events: usize,
}

impl Folded {
    /// The `--folded` output: `stack WEIGHT` lines.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (stack, w) in &self.lines {
            s.push_str(stack);
            s.push(' ');
            s.push_str(&w.to_string());
            s.push('\n');
        }
        s
    }
}

/// `LWLockAcquire+126` -> `LWLockAcquire`; `f+0x1a` -> `f`; addresses and
/// names without an offset stay. `;` (the folded separator) becomes `:`.
pub fn clean_frame(frame: &str) -> String {
    let f = frame.trim();
    let base = match f.rfind('+') {
        Some(i) if i > 0 => {
            let off = &f[i + 1..];
            let numeric = if let Some(hex) = off.strip_prefix("0x") {
                !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit())
            } else {
                !off.is_empty() && off.chars().all(|c| c.is_ascii_digit())
            };
            if numeric { &f[..i] } else { f }
        }
        _ => f,
    };
    if base.is_empty() {
        "?".into()
    } else {
        base.replace(';', ":")
    }
}

/// Folded stacks merged one event at a time ([`Folder::add`]): memory
/// grows with the distinct stacks, not with the events.
pub struct Folder {
    /// The kind asked for; None: both, chosen at the end.
    want: Option<StackKind>,
    waits: BTreeMap<String, u64>,
    wait_events: usize,
    traces: BTreeMap<String, u64>,
    trace_events: usize,
}

impl Folder {
    pub fn new(want: Option<StackKind>) -> Folder {
        Folder {
            want,
            waits: BTreeMap::new(),
            wait_events: 0,
            traces: BTreeMap::new(),
            trace_events: 0,
        }
    }

    pub fn add(&mut self, e: &Event) {
        let (kind, stack) = match &e.event {
            CaptureEvent::Wait { stack, .. } => (StackKind::Waits, stack),
            CaptureEvent::Trace {
                stack: Some(stack), ..
            } => (StackKind::Trace, stack),
            _ => return,
        };
        if self.want.is_some_and(|w| w != kind) || stack.is_empty() {
            return;
        }
        let mut frames: Vec<String> = stack.iter().map(|f| clean_frame(f)).collect();
        frames.reverse();
        let weight = match &e.event {
            CaptureEvent::Wait {
                duration_ns,
                unresolved,
                wait_event,
                wait_event_type,
                ..
            } => {
                let t = wait_event_type
                    .as_deref()
                    .or(unresolved.as_ref().map(|_| "unresolved"));
                let ev = wait_event.as_deref();
                frames
                    .push(format!("{}:{}", t.unwrap_or("?"), ev.unwrap_or("?")).replace(';', ":"));
                (*duration_ns as f64 / 1000.0).round() as u64
            }
            _ => 1,
        };
        let (merged, n) = match kind {
            StackKind::Waits => (&mut self.waits, &mut self.wait_events),
            StackKind::Trace => (&mut self.traces, &mut self.trace_events),
        };
        *merged.entry(frames.join(";")).or_default() += weight;
        *n += 1;
    }

    /// The stacks of the kind asked for (default: waits when some `wait`
    /// event has a stack, else trace). Errors when there are none.
    pub fn finish(self, name: &str) -> Result<Folded> {
        let waits = self.wait_events > 0;
        let traces = self.trace_events > 0;
        let kind = match self.want {
            Some(StackKind::Waits) if !waits => bail!(
                "capture {name} has no wait events with stacks (record them with: waits trace --stacks N)"
            ),
            Some(StackKind::Trace) if !traces => bail!(
                "capture {name} has no trace events with stacks (record them with: trace ... --stacks N)"
            ),
            Some(k) => k,
            None if waits => StackKind::Waits,
            None if traces => StackKind::Trace,
            None => bail!(
                "capture {name} has no stacks: they come with wait events (waits trace --stacks N) and trace events (trace ... --stacks N)"
            ),
        };
        let (merged, events) = match kind {
            StackKind::Waits => (self.waits, self.wait_events),
            StackKind::Trace => (self.traces, self.trace_events),
        };
        Ok(Folded {
            kind,
            lines: merged.into_iter().collect(),
            events,
        })
    }
}

/// Fold the stacks of `kind` (default: waits when some `wait` event has a
/// stack, else trace). Errors when there are none.
pub fn fold(name: &str, events: &[Event], kind: Option<StackKind>) -> Result<Folded> {
    let mut f = Folder::new(kind);
    for e in events {
        f.add(e);
    }
    f.finish(name)
}

/// Write the flame graph SVG of `folded` to `out` (with inferno).
pub fn write_svg(folded: &Folded, out: &std::path::Path) -> Result<()> {
    let mut opt = inferno::flamegraph::Options::default();
    match folded.kind {
        StackKind::Waits => {
            opt.title = "Wait stacks (µs waited)".into();
            opt.count_name = "µs".into();
        }
        StackKind::Trace => {
            opt.title = "Traced call stacks (calls)".into();
            opt.count_name = "calls".into();
        }
    }
    if folded.lines.iter().all(|(_, w)| *w == 0) {
        bail!(
            "nothing to draw: the {} stacks weigh 0 (every wait shorter than 0.5 µs)",
            folded.kind.name()
        );
    }
    let text = folded.text();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut opt, text.lines(), &mut svg)
        .map_err(|e| anyhow!("cannot draw the flame graph: {e}"))?;
    std::fs::write(out, svg).map_err(|e| anyhow!("cannot write {}: {e}", out.display()))
}
