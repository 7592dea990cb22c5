//! The time stamp counter that in-process recorders read (`rdtsc`, in the
//! target) mapped to CLOCK_MONOTONIC, the clock of pgdbg's perf events, so
//! that a recorder's records and a perf event's samples merge in time
//! order.  pgdbg reads both clocks together (`calibrate`) when tracing
//! starts and at each read of the rings; a record's counter value is
//! placed on the line between the two readings around it.
//!
//! This holds only where every CPU's counter is one clock: the kernel says
//! so by using it as its own clock source ("tsc"), which it does only when
//! the counter is invariant and synchronised across CPUs (it falls back to
//! another source when its checks fail).

use anyhow::{Result, bail};

fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// CLOCK_MONOTONIC now, in ns: the clock of pgdbg's perf events.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Why the counter cannot be mapped here, or Ok.
pub fn usable() -> Result<()> {
    let path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    match std::fs::read_to_string(path) {
        Ok(s) if s.trim() == "tsc" => Ok(()),
        Ok(s) => bail!(
            "the kernel's clock source is {}, not the time stamp counter (so it is not known to be one clock on every CPU)",
            s.trim()
        ),
        Err(e) => bail!("cannot read {path}: {e}"),
    }
}

/// Pairs of (counter, CLOCK_MONOTONIC ns) read together, in order.
#[derive(Debug, Clone, Default)]
pub struct TscClock {
    points: Vec<(u64, u64)>,
}

impl TscClock {
    /// A clock with its first reading taken now.
    pub fn new() -> TscClock {
        let mut c = TscClock::default();
        c.calibrate();
        c
    }

    /// Read both clocks together: of a few tries, the one whose counter
    /// readings around the clock's are closest (a preemption between them
    /// would skew the pair).
    pub fn calibrate(&mut self) {
        let mut best: Option<(u64, u64, u64)> = None;
        for _ in 0..5 {
            let a = rdtsc();
            let ns = monotonic_ns();
            let b = rdtsc();
            let gap = b.wrapping_sub(a);
            if b >= a && best.is_none_or(|(g, _, _)| gap < g) {
                best = Some((gap, a + gap / 2, ns));
            }
        }
        if let Some((_, tsc, ns)) = best
            && self.points.last().is_none_or(|&(t, n)| tsc > t && ns > n)
        {
            self.points.push((tsc, ns));
        }
    }

    /// CLOCK_MONOTONIC ns at counter value `tsc`: between the readings
    /// around it, or along the nearest two past the first or the last
    /// (a record read at the first reading after it, so rarely past it).
    /// None with fewer than two readings.
    pub fn ns(&self, tsc: u64) -> Option<u64> {
        let p = &self.points;
        if p.len() < 2 {
            return None;
        }
        let i = p.partition_point(|&(t, _)| t <= tsc).clamp(1, p.len() - 1);
        let ((t0, n0), (t1, n1)) = (p[i - 1], p[i]);
        let rate = (n1 - n0) as f64 / (t1 - t0) as f64;
        let ns = n0 as f64 + (tsc as f64 - t0 as f64) * rate;
        Some(ns.max(0.0).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_values_fall_between_their_readings() {
        let c = TscClock {
            points: vec![(1000, 5000), (3000, 6000), (7000, 10000)],
        };
        assert_eq!(c.ns(1000), Some(5000));
        assert_eq!(c.ns(2000), Some(5500));
        assert_eq!(c.ns(3000), Some(6000));
        assert_eq!(c.ns(5000), Some(8000));
        // outside: along the nearest segment
        assert_eq!(c.ns(0), Some(4500));
        assert_eq!(c.ns(9000), Some(12000));
        assert_eq!(TscClock::default().ns(1), None);
    }

    /// Readings here, with a sleep between: the counter runs forward
    /// with the clock, and a value read between two readings maps between
    /// the clock's values around it.
    #[test]
    fn calibrated_here() {
        if usable().is_err() {
            return; // no one clock on every CPU here: nothing to map
        }
        let mut c = TscClock::new();
        let before = monotonic_ns();
        let t = rdtsc();
        let after = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.calibrate();
        assert_eq!(c.points.len(), 2);
        let ns = c.ns(t).unwrap();
        // within 50 µs of when it was read (the mapping's error is far less)
        assert!(
            ns + 50_000 >= before && ns <= after + 50_000,
            "{before} <= {ns} <= {after}"
        );
    }
}
