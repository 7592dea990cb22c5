//! Which plansource each sighting of an address is, for the in-process
//! recorder (`ring.rs`): a call's record, the next record there, the state
//! read at a drain.  The counters' exact steps tell a plansource from one
//! that took its memory (an unnamed statement replaced by the next Parse),
//! and so which texts may be read and where a call's choice must be told
//! from its entry.

use super::{CACHEDPLANSOURCE_MAGIC, PlanCacheProbe};
use crate::inferior::recorder::Record;

/// How a sighting of the plansource at an address relates to the next
/// sighting there (`PlanCacheProbe::link`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Link {
    /// The same plansource.
    Same,
    /// Another one (the first freed, its memory reused), or none.
    Other,
    /// Not known yet: a first call not over, or a fresh plansource there
    /// that has not been called.
    Unknown,
}

/// Whether the plansource a call saw is the one at its address now (its
/// text can be read), is not (never read: it may be another's), or cannot
/// be told yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Live {
    Yes,
    No,
    NotYet,
}

/// One drain's sightings: for each record, its link to the next sighting
/// of its address and whether its plansource is the one there now.
pub(super) struct Chains {
    pub(super) records: Vec<(Link, Live)>,
    pub(super) addresses: std::collections::HashMap<u64, AddressChain>,
}

pub(super) struct AddressChain {
    /// The link of the address's pending call to its next sighting, and
    /// whether that call's plansource is the one there now.
    pub(super) pending_next: Link,
    pub(super) pending_live: Live,
    /// Every link from the sighting before this drain to now is `Same`:
    /// what was cached for the address is still its plansource's.
    pub(super) continuous: bool,
}

impl PlanCacheProbe {
    /// How two sightings of the plansource at one address relate: `a`, a
    /// call's record or the state read at a drain (`a_call`), and `b`, the
    /// next of either (None: nothing readable there now).  `exact`: no
    /// call was dropped in between.  A call moves one counter by one once
    /// it has chosen (custom or generic, PostgreSQL 14+, which the ring
    /// needs), none if it ended in an ERROR first; a plansource made after
    /// `a` has had no call but those recorded after `a`.  So the counters
    /// tell a plansource from one that took its memory, except a fresh one
    /// with no call yet from a first call not over (`Unknown`).  A one-shot
    /// plansource's text is never its own (CreateOneShotCachedPlan keeps the
    /// caller's pointer) and both are freed when the call is over.
    pub(super) fn link(
        &self,
        a: &[u8],
        a_call: bool,
        b: Option<&[u8]>,
        b_call: bool,
        exact: bool,
    ) -> Link {
        let l = &self.l.cps;
        let Some(b) = b else {
            return Link::Other;
        };
        let count = |x: &[u8]| {
            l.int(x, "num_custom_plans").unwrap_or(0) + l.int(x, "num_generic_plans").unwrap_or(0)
        };
        if l.int(a, "magic") != Some(CACHEDPLANSOURCE_MAGIC)
            || l.int(b, "magic") != Some(CACHEDPLANSOURCE_MAGIC)
            || l.ptr(a, "query_string") != l.ptr(b, "query_string")
            || l.boolean(a, "is_oneshot") == Some(true)
        {
            return Link::Other;
        }
        let (c, m) = (count(a), count(b));
        if !exact {
            return if m >= c { Link::Same } else { Link::Other };
        }
        if (a_call && m == c + 1) || (m == c && c > 0) {
            Link::Same
        } else if m == c && !(a_call && b_call) {
            Link::Unknown
        } else {
            Link::Other
        }
    }

    /// The chain of sightings of each address: where it was seen before
    /// (its pending call, else its state at an earlier drain), this
    /// drain's records of it, its state now.
    pub(super) fn chains(&self, records: &[(Record, f64)], exact: bool) -> Chains {
        let mut out = Chains {
            records: vec![(Link::Other, Live::No); records.len()],
            addresses: Default::default(),
        };
        let mut by_addr: std::collections::HashMap<u64, Vec<usize>> = Default::default();
        for (i, (r, _)) in records.iter().enumerate() {
            by_addr.entry(r.rdi).or_default().push(i);
        }
        for p in &self.pending {
            by_addr.entry(p.plansource).or_default();
        }
        for (ps, idx) in by_addr {
            let now = self.snapshot.get(&ps).map(|b| &b[..]);
            // backwards from the state now
            let mut live = Live::Yes;
            let mut next: (Option<&[u8]>, bool) = (now, false);
            let mut continuous = true;
            for &i in idx.iter().rev() {
                let b = &records[i].0.fields[..];
                let link = self.link(b, true, next.0, next.1, exact);
                live = match link {
                    Link::Same => live,
                    Link::Unknown => Live::NotYet,
                    Link::Other => Live::No,
                };
                continuous &= link == Link::Same;
                out.records[i] = (link, live);
                next = (Some(b), true);
            }
            let pending = self.pending.iter().find(|p| p.plansource == ps);
            let (start, start_call) = match pending {
                Some(p) => (Some(&p.before[..]), true),
                None => (self.seen.get(&ps).map(|b| &b[..]), false),
            };
            let (pending_next, pending_live) = match start {
                Some(a) => {
                    let link = self.link(a, start_call, next.0, next.1, exact);
                    continuous &= link == Link::Same;
                    let l = match link {
                        Link::Same => live,
                        Link::Unknown => Live::NotYet,
                        Link::Other => Live::No,
                    };
                    (link, l)
                }
                None => {
                    continuous = false;
                    (Link::Other, Live::No)
                }
            };
            out.addresses.insert(
                ps,
                AddressChain {
                    pending_next,
                    pending_live,
                    continuous,
                },
            );
        }
        out
    }
}
