//! Function latency from an entry uprobe and a return uprobe (`latency`):
//! each return is paired with its call by the stack pointer, so recursion
//! and calls left by `longjmp` (PostgreSQL's ERROR) never pair wrongly.
//!
//! At the entry the stack pointer points at the return address; right
//! after the return it is above it.  A return pairs with the outermost
//! running call whose entry stack pointer is below the return's; running
//! calls deeper than that one were left without returning (a `longjmp`
//! past them: the kernel sends no return record for them).  A new call
//! whose entry stack pointer is at or above a running call's means that
//! call's frame is gone too, except a call of another function at the same
//! stack pointer: a tail call (`jmp`), which returns straight to the first
//! function's caller; the kernel then sends both return records, one
//! after the other, from the same frame, so a return does not end another
//! function's call of that very frame either.

/// The calls of one function on one thread.
#[derive(Default, Debug, Clone)]
pub struct Times {
    /// running calls, innermost last: (entry stack pointer, entry time)
    open: Vec<(u64, u64)>,
    /// durations of the calls that returned, ns
    pub durations: Vec<u64>,
    /// calls that never returned (left by longjmp)
    pub no_return: u64,
    /// calls that began while another call of the function ran (recursion)
    pub nested: u64,
    /// returns of calls that began before timing did
    pub running_at_start: u64,
}

impl Times {
    /// Calls whose return address is below `sp` (at or below with
    /// `inclusive`) are gone: the stack there is free or reused.
    fn forget(&mut self, sp: u64, inclusive: bool) {
        while let Some(&(osp, _)) = self.open.last() {
            if osp > sp || (osp == sp && !inclusive) {
                break;
            }
            self.open.pop();
            self.no_return += 1;
        }
    }

    pub fn entry(&mut self, sp: u64, time: u64) {
        self.forget(sp, true);
        if !self.open.is_empty() {
            self.nested += 1;
        }
        self.open.push((sp, time));
    }

    pub fn ret(&mut self, sp: u64, time: u64) {
        let mut outer = None;
        while let Some(&(osp, t)) = self.open.last() {
            if osp >= sp {
                break;
            }
            self.open.pop();
            if outer.is_some() {
                self.no_return += 1;
            }
            outer = Some(t);
        }
        match outer {
            Some(t) => self.durations.push(time.saturating_sub(t)),
            None => self.running_at_start += 1,
        }
    }

    /// Calls still running (not timed).
    pub fn running(&self) -> u64 {
        self.open.len() as u64
    }

    pub fn stats(&self) -> Stats {
        let mut d = self.durations.clone();
        d.sort_unstable();
        let n = d.len();
        let pct = |p: f64| -> u64 {
            if n == 0 {
                return 0;
            }
            let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
            d[rank - 1]
        };
        let total: u64 = d.iter().sum();
        let mut hist: Vec<(u32, u64)> = Vec::new();
        for &ns in &d {
            let b = bucket(ns);
            match hist.last_mut() {
                Some((k, c)) if *k == b => *c += 1,
                _ => hist.push((b, 1)),
            }
        }
        Stats {
            calls: n as u64,
            total,
            avg: if n > 0 { total / n as u64 } else { 0 },
            p50: pct(0.50),
            p99: pct(0.99),
            min: d.first().copied().unwrap_or(0),
            max: d.last().copied().unwrap_or(0),
            hist,
        }
    }
}

/// The calls of several functions on one thread: every hit of any probe
/// tells which running calls are gone (their return address is in stack
/// that is free now), so a call left by longjmp is known at the next hit
/// above it, e.g. of the function that cleans up after an ERROR.
#[derive(Default, Debug, Clone)]
pub struct Pairing {
    pub fns: Vec<Times>,
}

impl Pairing {
    pub fn new(n: usize) -> Pairing {
        Pairing {
            fns: vec![Times::default(); n],
        }
    }

    /// Function `f` entered with `sp` (pointing at its return address).
    /// Another function's call at the same `sp` is not over: `f` may be its
    /// tail call.
    pub fn entry(&mut self, f: usize, sp: u64, time: u64) {
        for (g, t) in self.fns.iter_mut().enumerate() {
            if g == f {
                t.entry(sp, time);
            } else {
                t.forget(sp, false);
            }
        }
    }

    /// Function `f` returned; `sp` is the stack pointer after the return.
    /// Another function's call of the same frame (entered at `sp - 8`)
    /// tail-called `f`: its own return record follows.
    pub fn ret(&mut self, f: usize, sp: u64, time: u64) {
        for (g, t) in self.fns.iter_mut().enumerate() {
            if g == f {
                t.ret(sp, time);
            } else {
                t.forget(sp.saturating_sub(8), false);
            }
        }
    }

    /// Some other function entered with `sp`: nothing below it runs (a
    /// call at `sp` itself may have tail-called it).
    pub fn mark(&mut self, sp: u64) {
        for t in &mut self.fns {
            t.forget(sp, false);
        }
    }
}

/// A log2 bucket of whole microseconds: 0 holds under 1 us, k >= 1 holds
/// 2^(k-1) to 2^k - 1 us, as bcc's funclatency prints them.
pub fn bucket(ns: u64) -> u32 {
    let us = ns / 1000;
    64 - us.leading_zeros()
}

/// The microseconds bucket `k` covers: (low, high), both included.
pub fn bucket_range(k: u32) -> (u64, u64) {
    if k == 0 {
        return (0, 0);
    }
    let low = 1u64 << (k - 1);
    (low, (low << 1) - 1)
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub calls: u64,
    pub total: u64,
    pub avg: u64,
    pub p50: u64,
    pub p99: u64,
    pub min: u64,
    pub max: u64,
    /// (bucket, calls), buckets ascending, empty ones left out
    pub hist: Vec<(u32, u64)>,
}

/// A duration in ns as `812ns`, `12.3us`, `50.32ms`, `1.234s`.
pub fn human(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else {
        format!("{:.3}s", f / 1e9)
    }
}

/// The histogram as bcc's funclatency draws it.
pub fn render_hist(st: &Stats) -> String {
    let (Some(first), Some(last)) = (st.hist.first(), st.hist.last()) else {
        return String::new();
    };
    let top = st.hist.iter().map(|h| h.1).max().unwrap_or(1).max(1);
    let mut out = format!("{:>24} : {:<8} distribution", "usecs", "count");
    for k in first.0..=last.0 {
        let c = st.hist.iter().find(|h| h.0 == k).map_or(0, |h| h.1);
        let (lo, hi) = bucket_range(k);
        let hi = if k == 0 { 1 } else { hi };
        let stars = ((c * 40).div_ceil(top)) as usize;
        out.push_str(&format!(
            "\n{lo:>10} -> {hi:<10} : {c:<8} |{:<40}|",
            "*".repeat(stars.min(40))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_calls_pair() {
        let mut t = Times::default();
        for i in 0..3u64 {
            t.entry(1000, i * 100);
            t.ret(1008, i * 100 + 40);
        }
        let s = t.stats();
        assert_eq!((s.calls, s.total, s.max, s.p50), (3, 120, 40, 40));
        assert_eq!((t.no_return, t.nested, t.running()), (0, 0, 0));
    }

    #[test]
    fn recursion_pairs_by_stack() {
        let mut t = Times::default();
        // f calls f calls f: entries at falling stack pointers
        t.entry(1000, 0);
        t.entry(900, 10);
        t.entry(800, 20);
        t.ret(808, 25); // innermost: 5
        t.ret(908, 40); // middle: 30
        t.ret(1008, 100); // outer: 100
        let mut d = t.durations.clone();
        d.sort();
        assert_eq!(d, vec![5, 30, 100]);
        assert_eq!((t.nested, t.no_return), (2, 0));
    }

    #[test]
    fn longjmp_leaves_calls_unpaired() {
        let mut t = Times::default();
        // outer call, inner call left by longjmp, outer returns
        t.entry(1000, 0);
        t.entry(800, 10);
        t.ret(1008, 50);
        assert_eq!(t.durations, vec![50]);
        assert_eq!(t.no_return, 1);
        // a call left by longjmp, then the next call at the same depth
        t.entry(1000, 100);
        t.entry(1000, 200);
        t.ret(1008, 230);
        assert_eq!(t.durations, vec![50, 30]);
        assert_eq!(t.no_return, 2);
        // a return of a call begun before timing
        t.ret(5000, 300);
        assert_eq!(t.running_at_start, 1);
        t.entry(1000, 400);
        assert_eq!(t.running(), 1);
    }

    #[test]
    fn other_hits_end_calls_left_by_longjmp() {
        let mut p = Pairing::new(2);
        // f (0) at 800 left by longjmp; the ERROR's cleanup entered at 1000
        p.entry(0, 800, 0);
        p.mark(1000);
        assert_eq!((p.fns[0].no_return, p.fns[0].running()), (1, 0));
        // f at 700 inside g (1) at 900; g returns: f is gone
        p.entry(1, 900, 10);
        p.entry(0, 700, 20);
        p.ret(1, 908, 50);
        assert_eq!(p.fns[0].no_return, 2);
        assert_eq!(p.fns[1].durations, vec![40]);
        // a later, deeper call of f is not nested in a call that is gone
        p.entry(0, 600, 60);
        p.ret(0, 608, 70);
        assert_eq!((p.fns[0].nested, p.fns[0].durations.clone()), (0, vec![10]));
    }

    #[test]
    fn tail_calls_pair_both_functions() {
        // f (0) tail-calls g (1): g entered at f's stack pointer; the
        // kernel sends g's return record, then f's, from the same frame
        let mut p = Pairing::new(2);
        p.entry(0, 1000, 0);
        p.entry(1, 1000, 10);
        p.ret(1, 1008, 50);
        p.ret(0, 1008, 50);
        assert_eq!(p.fns[0].durations, vec![50]);
        assert_eq!(p.fns[1].durations, vec![40]);
        // the other order of the two records
        p.entry(0, 1000, 100);
        p.entry(1, 1000, 130);
        p.ret(0, 1008, 150);
        p.ret(1, 1008, 150);
        assert_eq!(p.fns[0].durations, vec![50, 50]);
        assert_eq!(p.fns[1].durations, vec![40, 20]);
        for t in &p.fns {
            assert_eq!((t.no_return, t.running_at_start, t.running()), (0, 0, 0));
        }
        // a call of f deeper than the returning frame is still over
        p.entry(1, 1000, 200);
        p.entry(0, 900, 210);
        p.ret(1, 1008, 250);
        assert_eq!((p.fns[0].no_return, p.fns[0].running()), (1, 0));
    }

    #[test]
    fn percentiles_and_buckets() {
        let mut t = Times::default();
        for i in 1..=100u64 {
            t.entry(1000, 0);
            t.ret(1008, i * 1000);
        }
        let s = t.stats();
        assert_eq!(
            (s.p50, s.p99, s.min, s.max),
            (50_000, 99_000, 1000, 100_000)
        );
        assert_eq!(bucket(999), 0);
        assert_eq!(bucket(1000), 1);
        assert_eq!(bucket(50_000_000), 16);
        assert_eq!(bucket_range(16), (32768, 65535));
        assert_eq!(s.hist.iter().map(|h| h.1).sum::<u64>(), 100);
        assert!(render_hist(&s).contains("64 -> 127"));
    }
}
