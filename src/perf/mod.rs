//! Observation without stopping the backend: Linux perf events on one
//! thread (`perf_event_open`), their samples read from a ring buffer the
//! kernel fills, with the user registers and a copy of the top of the user
//! stack, unwound afterwards with CFI (the server has no frame pointers).
//!
//! The kernel owns every event: when pgdbg exits or is killed, its file
//! descriptors close and the events (sampling timers, hardware
//! breakpoints) go with them.  pgdbg itself writes nothing into the
//! backend; the kernel writes a uprobe's int3 while its event is opened
//! and takes it out at the last close, both done by the keeper process
//! (keeper.rs), which a kill of pgdbg does not interrupt.
//!
//! - `mod.rs`: the system call, the attribute block, the ring buffer and
//!   the sample records;
//! - `keeper.rs`: the process that opens and closes the uprobe events;
//! - `stack.rs`: a sample's stack unwound over the mapped files' CFI;
//! - `profile.rs`: `profile`, on-CPU stacks sampled by the cpu-clock;
//! - `offcpu.rs`: `profile --off-cpu`, the stacks the thread left a CPU
//!   at (the scheduler's switch tracepoint) and how long it stayed off;
//! - `wall.rs`: `profile --wall`, both together, weighed in time;
//! - `export.rs`, `pprof.rs`: a profile's folded stacks as speedscope and
//!   pprof files;
//! - `watch.rs`: a write breakpoint event on one word (every store, with
//!   the value stored);
//! - `uprobe.rs`: uprobes and uretprobes sampled with the registers into
//!   one ring (`latency`, `trace --perf`);
//! - `latency.rs`: calls paired with their returns, their statistics;
//! - `tracefs.rs`: uprobes defined in tracefs, whose records carry memory
//!   the kernel copied at the hit (a statement's text).

pub mod export;
pub mod keeper;
pub mod latency;
pub mod offcpu;
pub mod placement;
mod pmu;
pub mod pprof;
pub mod profile;
mod refusal;
pub mod stack;
pub mod tracefs;
pub mod uprobe;
mod uprobe_events;
pub mod wall;
pub mod watch;

use crate::inferior::Registers;
use std::os::fd::AsRawFd;
use std::sync::atomic::{Ordering, fence};

pub use refusal::{Refused, open_error, permission_why, refused, refused_line};

pub const PERF_TYPE_SOFTWARE: u32 = 1;
pub const PERF_TYPE_BREAKPOINT: u32 = 5;
pub const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
pub const HW_BREAKPOINT_W: u32 = 2;

pub const SAMPLE_IP: u64 = 1 << 0;
pub const SAMPLE_TID: u64 = 1 << 1;
pub const SAMPLE_TIME: u64 = 1 << 2;
pub const SAMPLE_REGS_USER: u64 = 1 << 12;
pub const SAMPLE_STACK_USER: u64 = 1 << 13;

const RECORD_LOST: u32 = 2;
const RECORD_SAMPLE: u32 = 9;

// attr.flags bits
const FLAG_DISABLED: u64 = 1 << 0;
pub(crate) const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_FREQ: u64 = 1 << 10;
const FLAG_WATERMARK: u64 = 1 << 14;
const FLAG_USE_CLOCKID: u64 = 1 << 25;

pub(crate) const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;

/// The x86-64 user registers a sample carries (perf's register numbers:
/// ax bx cx dx si di bp sp ip flags, r8-r15), in that order.
pub const REGS_MASK: u64 = 0x3ff | (0xff << 16);

/// `struct perf_event_attr` as of PERF_ATTR_SIZE_VER7 (128 bytes; every
/// kernel since 5.13 takes it, older ones refuse the unknown tail only if
/// it is not zero).
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct Attr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    /// sample_period, or sample_freq with the freq flag
    pub period_or_freq: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    /// wakeup_events, or wakeup_watermark (bytes) with the watermark flag
    pub wakeup_events: u32,
    pub bp_type: u32,
    /// bp_addr / config1
    pub bp_addr: u64,
    /// bp_len / config2
    pub bp_len: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved2: u16,
    pub aux_sample_size: u32,
    pub reserved3: u32,
    pub sig_data: u64,
}

/// How often the kernel wakes the reader of a ring (its `poll`).  The
/// records are in the ring as soon as they are written either way (a
/// drain reads everything up to the kernel's head); only the wake-up
/// differs.  A wake-up is queued as an irq_work from inside the traced
/// thread's trap (a self-IPI: a VM exit in a virtual machine) and then
/// wakes the reader (a context switch, often an IPI to the other CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wakeup {
    /// After every record: for a reader that must act on a record at once
    /// (read memory the record points to before the backend reuses it).
    PerRecord,
    /// Once a quarter of the ring is written ([`Event::open`] sets the
    /// watermark from the ring's size): every reader polls its ring every
    /// [`POLL_MS`] anyway, so records are read within a few ms.
    Batched,
}

/// How long a reader waits for a wake-up before it drains its ring anyway.
pub const POLL_MS: i32 = 5;

impl Attr {
    /// Samples with ip, tid, time (CLOCK_MONOTONIC) and the user registers;
    /// `stack` bytes of the user stack when not 0.  The reader is woken
    /// [`Wakeup::Batched`] (see [`Attr::wakeup`]).
    fn sampling(kind: u32, config: u64, stack: u32) -> Attr {
        let mut a = Attr {
            kind,
            size: std::mem::size_of::<Attr>() as u32,
            config,
            sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_REGS_USER,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_HV | FLAG_USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            sample_regs_user: REGS_MASK,
            ..Attr::default()
        }
        .wakeup(Wakeup::Batched);
        if stack > 0 {
            a.sample_type |= SAMPLE_STACK_USER;
            a.sample_stack_user = stack;
        }
        a
    }

    /// When the reader of this event's ring is woken.
    pub fn wakeup(mut self, w: Wakeup) -> Attr {
        match w {
            Wakeup::PerRecord => {
                self.flags &= !FLAG_WATERMARK;
                self.wakeup_events = 1;
            }
            Wakeup::Batched => {
                // the watermark itself is set by Event::open (a quarter of
                // the ring); an event whose output goes to another's ring
                // never wakes anyone by itself
                self.flags |= FLAG_WATERMARK;
                self.wakeup_events = 0;
            }
        }
        self
    }

    /// The software cpu-clock sampled `hz` times a second of CPU time.
    pub fn cpu_clock(hz: u64, stack: u32) -> Attr {
        let mut a = Attr::sampling(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, stack);
        a.flags |= FLAG_FREQ;
        a.period_or_freq = hz;
        a
    }

    /// A hardware breakpoint on writes of the `len` bytes at `addr`, one
    /// sample per write (taken after the store, registers as they are then).
    pub fn write_watch(addr: u64, len: u64, stack: u32) -> Attr {
        let mut a = Attr::sampling(PERF_TYPE_BREAKPOINT, 0, stack);
        a.bp_type = HW_BREAKPOINT_W;
        a.bp_addr = addr;
        a.bp_len = len;
        a.period_or_freq = 1;
        a.flags |= FLAG_EXCLUDE_KERNEL;
        a
    }
}

/// One perf event and its ring buffer.
pub struct Event {
    fd: keeper::PerfFd,
    base: *mut u8,
    /// data pages (a power of two), in bytes
    data_size: usize,
    map_len: usize,
    /// scratch for records that wrap around the end of the ring
    scratch: Vec<u8>,
    pub lost: u64,
    pub stack_size: u32,
}

// The ring is only read by the thread that owns the Event.
unsafe impl Send for Event {}

impl Event {
    /// Open `attr` on thread `tid` (any CPU) with a ring of `pages` data
    /// pages (a power of two), not enabled yet.  A [`Wakeup::Batched`]
    /// event wakes its reader once a quarter of the ring is written.
    pub fn open(attr: &Attr, tid: i32, pages: usize) -> std::io::Result<Event> {
        Event::open_uprobe(attr, None, tid, pages)
    }

    /// [`Event::open`] of a uprobe PMU event on the file `path` (the
    /// offset in `attr.bp_len`, config2).
    pub fn open_uprobe(
        attr: &Attr,
        path: Option<&std::ffi::CStr>,
        tid: i32,
        pages: usize,
    ) -> std::io::Result<Event> {
        let mut attr = *attr;
        if attr.flags & FLAG_WATERMARK != 0 {
            attr.wakeup_events = (4096 * pages / 4).max(1) as u32;
        }
        let fd = keeper::open(&attr, path, tid)?;
        let page = 4096usize;
        let map_len = page * (1 + pages);
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Event {
            fd,
            base: base as *mut u8,
            data_size: page * pages,
            map_len,
            scratch: Vec::new(),
            lost: 0,
            stack_size: attr.sample_stack_user,
        })
    }

    pub fn enable(&self) -> std::io::Result<()> {
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), IOC_ENABLE, 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Wait until the ring has data or `ms` pass.
    pub fn wait(&self, ms: i32) {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut p, 1, ms) };
    }

    /// Hand every sample in the ring to `f` (its raw bytes after the
    /// header), then give the space back to the kernel.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) {
        self.drain_records(|kind, _, b| {
            if kind == RECORD_SAMPLE {
                f(b)
            }
        })
    }

    /// Hand every record in the ring to `f` (its type, its header's misc
    /// bits and its bytes after the header; lost records are counted),
    /// then give the space back to the kernel.
    pub fn drain_records(&mut self, mut f: impl FnMut(u32, u16, &[u8])) {
        // perf_event_mmap_page: data_head at 1024, data_tail at 1032
        let head_p = unsafe { self.base.add(1024) as *const u64 };
        let tail_p = unsafe { self.base.add(1032) as *mut u64 };
        let head = unsafe { std::ptr::read_volatile(head_p) };
        fence(Ordering::Acquire);
        let mut tail = unsafe { std::ptr::read_volatile(tail_p) };
        let data = unsafe { self.base.add(4096) };
        let mask = (self.data_size - 1) as u64;
        while tail < head {
            let off = (tail & mask) as usize;
            let hdr = self.read_at(data, off, 8).to_vec();
            let kind = u32::from_le_bytes(hdr[0..4].try_into().unwrap());
            let misc = u16::from_le_bytes(hdr[4..6].try_into().unwrap());
            let size = u16::from_le_bytes(hdr[6..8].try_into().unwrap()) as usize;
            if size < 8 {
                break;
            }
            let rec = self.read_at(data, off, size);
            match kind {
                RECORD_LOST if rec.len() >= 24 => {
                    self.lost += u64::from_le_bytes(rec[16..24].try_into().unwrap());
                }
                _ => f(kind, misc, &rec[8..]),
            }
            tail += size as u64;
        }
        fence(Ordering::Release);
        unsafe { std::ptr::write_volatile(tail_p, tail) };
    }

    fn read_at(&mut self, data: *mut u8, off: usize, len: usize) -> &[u8] {
        if off + len <= self.data_size {
            unsafe { std::slice::from_raw_parts(data.add(off), len) }
        } else {
            self.scratch.clear();
            let first = self.data_size - off;
            unsafe {
                self.scratch
                    .extend_from_slice(std::slice::from_raw_parts(data.add(off), first));
                self.scratch
                    .extend_from_slice(std::slice::from_raw_parts(data, len - first));
            }
            &self.scratch
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
    }
}

/// A decoded sample (for attrs made by [`Attr::sampling`]).
pub struct Sample<'a> {
    pub ip: u64,
    pub tid: u32,
    /// CLOCK_MONOTONIC, ns
    pub time: u64,
    /// The user registers (None when the sample hit a kernel thread).
    pub regs: Option<Registers>,
    /// The copy of the user stack from `regs.rsp` (the valid part).
    pub stack: &'a [u8],
}

impl<'a> Sample<'a> {
    /// A record of an attr made by [`Attr::sampling`] with all of
    /// [`REGS_MASK`].
    pub fn parse(b: &'a [u8], with_stack: bool) -> Option<Sample<'a>> {
        Sample::parse_regs(b, REGS_MASK, with_stack)
    }

    /// A record whose attr sampled the user registers of `mask` (the
    /// others are 0).
    pub fn parse_regs(b: &'a [u8], mask: u64, with_stack: bool) -> Option<Sample<'a>> {
        let mut p = 0usize;
        let u64_at = |p: &mut usize| -> Option<u64> {
            let v = u64::from_le_bytes(b.get(*p..*p + 8)?.try_into().ok()?);
            *p += 8;
            Some(v)
        };
        let ip = u64_at(&mut p)?;
        let pidtid = u64_at(&mut p)?;
        let time = u64_at(&mut p)?;
        let abi = u64_at(&mut p)?;
        let regs = if abi != 0 {
            let mut r = Registers::default();
            for bit in 0..64u32 {
                if mask & (1 << bit) != 0 {
                    set_reg(&mut r, bit, u64_at(&mut p)?);
                }
            }
            Some(r)
        } else {
            None
        };
        let mut stack: &[u8] = &[];
        if with_stack {
            let size = u64_at(&mut p)? as usize;
            if size > 0 {
                let data = b.get(p..p + size)?;
                p += size;
                let dyn_size = u64_at(&mut p)? as usize;
                stack = &data[..dyn_size.min(size)];
            }
        }
        Some(Sample {
            ip,
            tid: (pidtid >> 32) as u32,
            time,
            regs,
            stack,
        })
    }
}

/// Set the register of perf's number `perf` (x86-64: ax bx cx dx si di bp
/// sp ip flags, segment registers, r8-r15) in `r`.
pub(crate) fn set_reg(r: &mut Registers, perf: u32, v: u64) {
    match perf {
        0 => r.rax = v,
        1 => r.rbx = v,
        2 => r.rcx = v,
        3 => r.rdx = v,
        4 => r.rsi = v,
        5 => r.rdi = v,
        6 => r.rbp = v,
        7 => r.rsp = v,
        8 => r.rip = v,
        9 => r.eflags = v,
        16 => r.r8 = v,
        17 => r.r9 = v,
        18 => r.r10 = v,
        19 => r.r11 = v,
        20 => r.r12 = v,
        21 => r.r13 = v,
        22 => r.r14 = v,
        23 => r.r15 = v,
        _ => {}
    }
}

/// CLOCK_MONOTONIC now, in ns (the clock of the samples' `time`).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Whether a kernel address (a sample taken in a system call or interrupt).
pub fn is_kernel(ip: u64) -> bool {
    ip >= 0xffff_8000_0000_0000
}

/// A uprobe counting event (the kernel's `uprobe` PMU) at `offset` in the
/// file `path`, counting hits by thread `tid` only: no sample, no stop;
/// the kernel removes the probe when the event is closed.
pub struct UprobeCounter {
    fd: keeper::PerfFd,
}

impl UprobeCounter {
    pub fn open(path: &std::path::Path, offset: u64, tid: i32) -> std::io::Result<UprobeCounter> {
        let kind = uprobe::pmu_type()?;
        use std::os::unix::ffi::OsStrExt;
        let cpath = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        let attr = Attr {
            kind,
            size: std::mem::size_of::<Attr>() as u32,
            // the offset (config2; the path is config1)
            bp_len: offset,
            flags: FLAG_DISABLED,
            ..Attr::default()
        };
        let fd = keeper::open(&attr, Some(&cpath), tid)?;
        if unsafe { libc::ioctl(fd.as_raw_fd(), IOC_ENABLE, 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(UprobeCounter { fd })
    }

    /// Hits so far.
    pub fn count(&self) -> std::io::Result<u64> {
        let mut v = 0u64;
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        if n != 8 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(v)
    }
}

/// The file mapped at runtime address `addr` of process `pid` and the
/// offset of `addr` in it (what a uprobe is placed by).
pub fn file_offset(pid: i32, addr: u64) -> Option<(std::path::PathBuf, u64)> {
    let maps = crate::inferior::procfs::maps(pid).ok()?;
    let m = maps.iter().find(|m| addr >= m.start && addr < m.end)?;
    let path = m.path.clone()?;
    // through /proc/PID/root: the file as the backend sees it (containers)
    let rooted = std::path::PathBuf::from(format!("/proc/{pid}/root"))
        .join(path.strip_prefix("/").unwrap_or(&path));
    Some((rooted, addr - m.start + m.offset))
}
