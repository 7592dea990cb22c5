//! Uprobes and uretprobes as sampling perf events (the kernel's `uprobe`
//! PMU): one record per hit, with the time, the thread and the user
//! registers, all written into one ring buffer (the other events' output
//! redirected to the first one's), so the records of one thread come in
//! the order of the hits.  The backend is never stopped for pgdbg: the
//! kernel takes the breakpoint, writes the record and lets it run on.
//!
//! A uretprobe replaces the return address on the stack at the function's
//! entry, so it is only ever placed at an entry; the kernel restores the
//! return address of calls still running when the event is closed (or
//! pgdbg dies) and drops those a `longjmp` left (no record for them).

use super::pmu::PMU;
pub use super::pmu::{no_sysfs, pmu_type};
use super::{Attr, Event, open_error, set_reg};
use crate::arch::regs::Gpr;
use crate::inferior::Registers;
use anyhow::{Result, anyhow};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const SAMPLE_IDENTIFIER: u64 = 1 << 16;
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
const IOC_ID: libc::c_ulong = 0x8008_2407;

/// The uprobe PMU's type and the bit of `config` that makes a uretprobe
/// (its `format/retprobe` file, e.g. `config:0`).
pub fn pmu() -> std::io::Result<(u32, u32)> {
    let bad = |what: &str| std::io::Error::other(format!("{PMU}/{what} is not as expected"));
    let kind = pmu_type()?;
    let ret = std::fs::read_to_string(format!("{PMU}/format/retprobe"))?;
    let bit = ret
        .trim()
        .strip_prefix("config:")
        .and_then(|b| b.parse::<u32>().ok())
        .filter(|b| *b < 64)
        .ok_or_else(|| bad("format/retprobe"))?;
    Ok((kind, bit))
}

/// One probe: the file and the offset in it (a uretprobe: of the
/// function's entry).
#[derive(Debug, Clone)]
pub struct Probe {
    /// The file, opened and checked to be the one mapped.
    pub file: crate::inferior::mappedfile::VerifiedFile,
    pub offset: u64,
    pub ret: bool,
}

/// One hit of probe number `probe` (its index in the list given to
/// [`Sampler::start`]).
pub struct Hit {
    pub probe: usize,
    /// CLOCK_MONOTONIC, ns
    pub time: u64,
    pub tid: u32,
    /// at the entry (a uprobe) or right after the return (a uretprobe)
    pub regs: Registers,
}

/// perf's number of the register DWARF numbers `n` (x86-64: DWARF rax
/// rdx rcx rbx rsi rdi rbp rsp r8-r15; perf ax bx cx dx si di bp sp ip
/// flags, segment registers, r8-r15).
pub fn perf_reg(dwarf: u16) -> u32 {
    Gpr::from_dwarf(dwarf)
        .map(|g| g.info().perf)
        .unwrap_or(16 + (dwarf as u32).saturating_sub(8))
}

/// The stack pointer's bit in a sample's register mask.
pub const SP: u64 = 1 << 7;

/// A record: (event id, hit) from identifier, ip, pid/tid, time, then
/// the registers of `mask` in ascending order.
fn parse(b: &[u8], mask: u64) -> Option<(u64, u64, u32, Registers)> {
    let mut p = 0usize;
    let mut next = || -> Option<u64> {
        let v = u64::from_le_bytes(b.get(p..p + 8)?.try_into().ok()?);
        p += 8;
        Some(v)
    };
    let id = next()?;
    let _ip = next()?;
    let tid = (next()? >> 32) as u32;
    let time = next()?;
    let abi = next()?;
    let mut regs = Registers::default();
    if abi == 0 {
        return None;
    }
    for bit in 0..64u32 {
        if mask & (1 << bit) != 0 {
            set_reg(&mut regs, bit, next()?);
        }
    }
    Some((id, time, tid, regs))
}

/// A probe's attribute block; its file is given to the open (config1).
fn attr(kind: u32, ret_bit: u32, p: &Probe, mask: u64) -> Attr {
    let mut a = Attr::sampling(kind, if p.ret { 1 << ret_bit } else { 0 }, 0);
    a.sample_type |= SAMPLE_IDENTIFIER;
    // only the registers asked for: smaller records
    a.sample_regs_user = mask;
    a.period_or_freq = 1;
    // the reader polls every few ms: no wake-up per record (Attr::sampling)
    a.bp_len = p.offset;
    a
}

fn ioctl(fd: i32, req: libc::c_ulong, arg: u64) -> std::io::Result<()> {
    if unsafe { libc::ioctl(fd, req, arg) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn event_id(fd: i32) -> std::io::Result<u64> {
    let mut id = 0u64;
    ioctl(fd, IOC_ID, &mut id as *mut u64 as u64)?;
    Ok(id)
}

/// Probes sampled on one thread, the records handed to a function on a
/// reader thread (`state` is what it builds, returned by `finish`).
pub struct Sampler<T> {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<(T, u64)>>,
}

impl<T: Send + 'static> Sampler<T> {
    /// Open every probe on thread `tid` of `pid` (all or none), enable
    /// them and read their records until `finish`; each record carries
    /// the user registers of `mask` (perf's numbering, e.g. [`SP`]).
    pub fn start(
        pid: i32,
        tid: i32,
        probes: &[Probe],
        mask: u64,
        pages: usize,
        mut state: T,
        mut on_hit: impl FnMut(&mut T, &Hit) + Send + 'static,
    ) -> Result<Sampler<T>> {
        if probes.is_empty() {
            return Err(anyhow!("no location to probe"));
        }
        let (kind, ret_bit) = pmu().map_err(|e| {
            anyhow!("this kernel has no uprobe perf events ({e}): {PMU} is missing or unreadable")
        })?;
        let what = "a uprobe perf event";
        let mut ring: Option<Event> = None;
        let mut others: Vec<super::keeper::PerfFd> = Vec::new();
        let mut ids: Vec<(u64, usize)> = Vec::new();
        for (i, p) in probes.iter().enumerate() {
            use std::os::unix::ffi::OsStrExt;
            let cpath = std::ffi::CString::new(p.file.path().as_os_str().as_bytes())
                .map_err(|_| anyhow!("bad path {}", p.file.origin().display()))?;
            let a = attr(kind, ret_bit, p, mask);
            let fd = match &ring {
                None => {
                    let ev = Event::open_uprobe(&a, Some(&cpath), tid, pages)
                        .map_err(|e| open_error(what, pid, e))?;
                    let fd = ev.fd();
                    ring = Some(ev);
                    fd
                }
                Some(r) => {
                    let fd = super::keeper::open(&a, Some(&cpath), tid)
                        .map_err(|e| open_error(what, pid, e))?;
                    ioctl(fd.as_raw_fd(), IOC_SET_OUTPUT, r.fd() as u64).map_err(|e| {
                        open_error("a uprobe's output into the first one's ring", pid, e)
                    })?;
                    let raw = fd.as_raw_fd();
                    others.push(fd);
                    raw
                }
            };
            ids.push((
                event_id(fd).map_err(|e| open_error("a uprobe event's id", pid, e))?,
                i,
            ));
        }
        let mut ev = ring.expect("one probe at least");
        ev.enable().map_err(|e| open_error(what, pid, e))?;
        for fd in &others {
            ioctl(fd.as_raw_fd(), super::IOC_ENABLE, 0).map_err(|e| open_error(what, pid, e))?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let handle = std::thread::spawn(move || {
            crate::runtime::block_in_this_thread();
            // the redirected events live as long as the ring is read
            let _others = others;
            loop {
                let last = st.load(Ordering::Relaxed);
                ev.drain(|b| {
                    let Some((id, time, tid, regs)) = parse(b, mask) else {
                        return;
                    };
                    let Some(&(_, probe)) = ids.iter().find(|(i, _)| *i == id) else {
                        return;
                    };
                    on_hit(
                        &mut state,
                        &Hit {
                            probe,
                            time,
                            tid,
                            regs,
                        },
                    );
                });
                if last {
                    break;
                }
                ev.wait(super::POLL_MS);
            }
            (state, ev.lost)
        });
        Ok(Sampler {
            stop,
            handle: Some(handle),
        })
    }

    /// Close the probes (the kernel removes them) and return what the
    /// reader built and how many records the full ring lost.
    pub fn finish(mut self) -> Result<(T, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .ok_or_else(|| anyhow!("the uprobe reader is gone"))?
            .join()
            .map_err(|_| anyhow!("the uprobe reader failed"))
    }
}

impl<T> Drop for Sampler<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
