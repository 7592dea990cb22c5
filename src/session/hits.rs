//! The hits of a `silent` breakpoint in a capture.  A silent breakpoint
//! whose `commands` end in `continue` can be hit a million times in a run:
//! one `stop` event per hit made captures of hundreds of megabytes that
//! said nothing a count does not.  So its hits are counted per location
//! and written as one `hits` event per location, at most once a second
//! (at the next hit after that) and when pgdbg detaches; `attach
//! --capture-hits` writes every hit as a `stop` event as before.  The
//! events a `commands` block writes itself (`print`, `printf`, `bt`) are
//! written at each hit either way.

use crate::capture::Event;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The longest time a counted hit waits to be written (while hits come).
const EVERY: Duration = Duration::from_secs(1);

/// Where a breakpoint was hit, as the `stop` event would have said.
pub(crate) struct HitAt {
    pub address: u64,
    pub breakpoints: Vec<u32>,
    pub file: Option<String>,
    pub function: Option<String>,
    pub line: Option<u32>,
}

struct Counted {
    at: HitAt,
    count: u64,
    /// The wall-clock time of the first hit counted (seconds).
    first: f64,
}

/// Hits counted and not yet written.
#[derive(Default)]
pub(crate) struct SilentHits {
    counts: BTreeMap<(u64, Vec<u32>), Counted>,
    /// When the oldest unwritten hit was counted.
    since: Option<Instant>,
}

impl SilentHits {
    /// Count one hit.
    pub fn add(&mut self, at: HitAt) {
        self.since.get_or_insert_with(Instant::now);
        let key = (at.address, at.breakpoints.clone());
        self.counts
            .entry(key)
            .or_insert_with(|| Counted {
                at,
                count: 0,
                first: crate::capture::wall_now(),
            })
            .count += 1;
    }

    /// The counted hits are old enough to be written.
    pub fn due(&self) -> bool {
        self.since.is_some_and(|t| t.elapsed() >= EVERY)
    }

    /// The `hits` events of what was counted (one per location), and a
    /// fresh count.
    pub fn take(&mut self) -> Vec<Event> {
        self.since = None;
        std::mem::take(&mut self.counts)
            .into_values()
            .map(|c| Event::Hits {
                address: format!("{:#x}", c.at.address),
                breakpoints: c.at.breakpoints,
                count: c.count,
                file: c.at.file,
                first: c.first,
                function: c.at.function,
                line: c.at.line,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_per_location() {
        let mut h = SilentHits::default();
        assert!(!h.due());
        let at = |a: u64, ids: Vec<u32>| HitAt {
            address: a,
            breakpoints: ids,
            file: Some("x.c".into()),
            function: Some("f".into()),
            line: Some(3),
        };
        for _ in 0..5 {
            h.add(at(0x10, vec![1]));
        }
        h.add(at(0x20, vec![2]));
        h.add(at(0x10, vec![1, 3]));
        let ev = h.take();
        let counts: Vec<(String, u64)> = ev
            .iter()
            .map(|e| match e {
                Event::Hits { address, count, .. } => (address.clone(), *count),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            counts,
            vec![("0x10".into(), 5), ("0x10".into(), 1), ("0x20".into(), 1)]
        );
        assert!(h.take().is_empty());
        assert!(!h.due());
    }
}
