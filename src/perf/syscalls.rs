//! `profile --syscalls`: time per system call of one backend thread, as
//! `perf trace -s` gives it.  Two tracepoints, `raw_syscalls:sys_enter`
//! and `raw_syscalls:sys_exit`, opened on the thread only, both writing
//! into one ring in the order they fired (the exit's output redirected to
//! the enter's ring): each record carries the time and the raw record,
//! whose `id` is the system call's number (and the exit's `ret` its
//! result).  An enter and the next exit of the same number are one call.
//!
//! The kernel copies the records; the backend is never stopped and nothing
//! is written into it.  Per-thread system call tracepoints are allowed to
//! any user who may open a perf event on the thread (the kernel marks
//! them TRACE_EVENT_FL_CAP_ANY), but their ids are read in tracefs.
//!
//! The names come from `syscall_table.rs`, generated from the kernel
//! headers by scripts/gen-syscalls (x86_64); a number it lacks is shown
//! as `syscall_N`.

use super::recording::Recording;
use super::syscall_table::SYSCALLS;
use super::tracefs::{Field, field_u64, parse_record};
use super::{Attr, Event, FLAG_DISABLED, FLAG_EXCLUDE_HV, FLAG_USE_CLOCKID, Refused, SAMPLE_TIME};
use super::{Wakeup, monotonic_ns, open_error};
use anyhow::{Result, anyhow};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

const SAMPLE_RAW: u64 = 1 << 10;
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
const MODE: &str = "profile --syscalls";

/// The name of x86_64 system call `nr` (`syscall_N` when the table has
/// none).
pub fn name(nr: u64) -> String {
    match SYSCALLS.binary_search_by_key(&nr, |(n, _)| *n as u64) {
        Ok(i) => SYSCALLS[i].1.to_string(),
        Err(_) => format!("syscall_{nr}"),
    }
}

/// One system call's calls and time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stat {
    pub calls: u64,
    /// Calls that returned an error (-4095..-1).
    pub errors: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// What the reader gathered.
#[derive(Debug, Default)]
pub struct RawSyscalls {
    pub by_nr: HashMap<u64, Stat>,
    /// The call in progress when the window opened (counted from its
    /// start), and the one in progress when it closed (counted to its end).
    pub open_at_start: Option<u64>,
    pub open_at_end: Option<u64>,
    /// Enters without their exit, or exits without their enter, past the
    /// first record (records lost): not counted.
    pub unpaired: u64,
    pub lost: u64,
    pub duration_s: f64,
    pub cpu_s: Option<f64>,
}

impl super::profile::ReaderMaps for RawSyscalls {
    fn reader_maps(&mut self) -> Option<super::stack::Maps> {
        None
    }
}

/// Where each tracepoint's record keeps what is read.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub enter_type: u64,
    pub exit_type: u64,
    pub common_type: Field,
    pub id: Field,
    pub ret: Field,
}

/// Enters and exits of one thread paired into calls, within a window
/// that starts at `t0_ns` (earlier parts are cut off).
pub struct Pairing {
    t0_ns: u64,
    layout: Layout,
    /// The last enter (number, time), waiting for its exit.
    open: Option<(u64, u64)>,
    first: bool,
    pub raw: RawSyscalls,
}

impl Pairing {
    pub fn new(t0_ns: u64, layout: Layout) -> Pairing {
        Pairing {
            t0_ns,
            layout,
            open: None,
            first: true,
            raw: RawSyscalls::default(),
        }
    }

    fn add(&mut self, nr: u64, from: u64, to: u64, ret: i64) {
        let ns = to.saturating_sub(from.max(self.t0_ns));
        let s = self.raw.by_nr.entry(nr).or_default();
        s.calls += 1;
        s.total_ns += ns;
        s.max_ns = s.max_ns.max(ns);
        if (-4095..0).contains(&ret) {
            s.errors += 1;
        }
    }

    /// One sample of either tracepoint: its time and raw record.
    pub fn take(&mut self, time: u64, rec: &[u8]) {
        let l = self.layout;
        // common_type: the tracepoint's id, an unsigned short
        let kind = super::tracefs::field_bytes(rec, &l.common_type)
            .and_then(|b| Some(u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as u64));
        let (Some(kind), Some(nr)) = (kind, field_u64(rec, &l.id)) else {
            return;
        };
        let first = std::mem::replace(&mut self.first, false);
        if kind == l.enter_type {
            if self.open.replace((nr, time)).is_some() {
                self.raw.unpaired += 1;
            }
        } else if kind == l.exit_type {
            let ret = field_u64(rec, &l.ret).unwrap_or(0) as i64;
            match self.open.take() {
                Some((n, t)) if n == nr => self.add(nr, t, time, ret),
                None if first => {
                    // in the kernel since before the window
                    self.raw.open_at_start = Some(nr);
                    self.add(nr, self.t0_ns, time, ret);
                }
                _ => self.raw.unpaired += 1,
            }
        }
    }

    /// The window ends at `end_ns`: a call still in progress is counted up
    /// to it.
    pub fn end(mut self, end_ns: u64) -> RawSyscalls {
        if let Some((nr, t)) = self.open.take() {
            self.raw.open_at_end = Some(nr);
            self.add(nr, t, end_ns, 0);
        }
        self.raw.duration_s = end_ns.saturating_sub(self.t0_ns) as f64 / 1e9;
        self.raw
    }
}

/// The two tracepoints' ids and fields.
fn layout() -> Result<(Layout, u64, u64), String> {
    let (enter, ef) = super::tracefs::tracepoint("raw_syscalls", "sys_enter")?;
    let (exit, xf) = super::tracefs::tracepoint("raw_syscalls", "sys_exit")?;
    let field = |f: &HashMap<String, Field>, n: &str| {
        f.get(n)
            .copied()
            .ok_or_else(|| format!("raw_syscalls has no {n} field in tracefs"))
    };
    let common = field(&ef, "common_type")?;
    let l = Layout {
        enter_type: enter,
        exit_type: exit,
        common_type: common,
        id: field(&ef, "id")?,
        ret: field(&xf, "ret")?,
    };
    if field(&xf, "id")? != l.id || field(&xf, "common_type")? != common {
        return Err("raw_syscalls:sys_enter and sys_exit keep id at different places".into());
    }
    Ok((l, enter, exit))
}

pub struct SyscallProfiler(Recording<RawSyscalls>);

impl SyscallProfiler {
    /// Open both tracepoints on thread `tid` of process `pid` into one
    /// ring and start recording.
    pub fn start(pid: i32, tid: i32) -> Result<SyscallProfiler> {
        let what = format!("{MODE} on process {pid}");
        let (layout, enter, exit) = layout().map_err(|e| Refused(format!("{what}: {e}")))?;
        let attr = |config| {
            Attr {
                kind: super::pmu::PERF_TYPE_TRACEPOINT,
                size: std::mem::size_of::<Attr>() as u32,
                config,
                period_or_freq: 1,
                sample_type: SAMPLE_TIME | SAMPLE_RAW,
                flags: FLAG_DISABLED | FLAG_EXCLUDE_HV | FLAG_USE_CLOCKID,
                clockid: libc::CLOCK_MONOTONIC,
                ..Attr::default()
            }
            .wakeup(Wakeup::Batched)
        };
        // 1 MB of ring: about 8000 calls between two reads
        let mut ev = Event::open(&attr(enter), tid, 256).map_err(|e| open_error(MODE, pid, e))?;
        let exits =
            super::keeper::open(&attr(exit), None, tid).map_err(|e| open_error(MODE, pid, e))?;
        if unsafe { libc::ioctl(exits.as_raw_fd(), IOC_SET_OUTPUT, ev.fd() as u64) } < 0 {
            let e = std::io::Error::last_os_error();
            return Err(anyhow!("{what}: the exits' ring redirection failed ({e})"));
        }
        // the window, on the records' clock, opens before the first record
        let t0_ns = monotonic_ns();
        // exits first: an enter is never recorded without its exit
        if unsafe { libc::ioctl(exits.as_raw_fd(), super::IOC_ENABLE, 0) } < 0 {
            return Err(open_error(MODE, pid, std::io::Error::last_os_error()));
        }
        ev.enable().map_err(|e| open_error(MODE, pid, e))?;
        Ok(SyscallProfiler(Recording::start(pid, tid, move |st| {
            // the redirected event lives as long as the ring is read
            let _exits = exits;
            let mut p = Pairing::new(t0_ns, layout);
            loop {
                let last = st.load(Ordering::Relaxed);
                ev.drain(|b| {
                    if let Some((time, rec)) = parse_record(b) {
                        p.take(time, rec)
                    }
                });
                if last {
                    break;
                }
                ev.wait(super::POLL_MS);
            }
            let mut raw = p.end(monotonic_ns());
            raw.lost = ev.lost;
            raw
        })))
    }

    /// Stop recording (the events are closed) and return what was gathered.
    pub fn finish(self) -> Result<RawSyscalls> {
        let (mut raw, cpu) = self.0.finish()?;
        raw.cpu_s = cpu;
        Ok(raw)
    }
}
