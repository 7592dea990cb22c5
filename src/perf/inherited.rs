//! `count` across a whole cluster without attaching to any backend: one
//! uprobe per location, defined in tracefs (`uprobe_events`) and opened
//! as a tracepoint event on the postmaster with `inherit`, one event per
//! CPU (the kernel maps a ring only for an inherited event bound to a
//! CPU).  Every process the postmaster forks from then on gets a copy of
//! each event in `fork` itself, before it runs its first instruction, and
//! the uprobe's int3 is already in the pages it inherits: each hit is a
//! sample (`sample_period` 1) carrying the process's PID and the event's
//! id, written into the postmaster event's ring.  No ptrace, no stop, no
//! worker per backend: a session of one statement that ends before any
//! process of pgdbg's could have run is counted whole.  The `task` flag
//! of the first event of each CPU adds the kernel's fork and exit records
//! of those processes (which backends ended during the count).
//!
//! The processes that are there already when the count starts get the
//! same events opened on each of them (not through the postmaster).
//!
//! The uprobe PMU (`perf_uprobe`) is not used here: its events are not
//! meant to be inherited.  The events are opened and last closed by the
//! keeper (keeper.rs) like every uprobe of pgdbg's; the definitions are
//! removed once they are closed (tracefs.rs).

use super::keeper::{self, PerfFd};
use super::pmu::PERF_TYPE_TRACEPOINT;
use super::tracefs::Definition;
use super::{
    Attr, Event, FLAG_DISABLED, FLAG_EXCLUDE_HV, FLAG_USE_CLOCKID, IOC_DISABLE, IOC_ENABLE,
    SAMPLE_TID, SAMPLE_TIME, Wakeup,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::AsRawFd;

const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_TASK: u64 = 1 << 13;
const SAMPLE_ID: u64 = 1 << 6;
const SAMPLE_RAW: u64 = 1 << 10;
/// `PERF_EVENT_IOC_SET_OUTPUT`: this event's records go to another's ring.
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
/// `PERF_EVENT_IOC_ID`: the event's id (what `PERF_SAMPLE_ID` carries; an
/// inherited copy's samples carry its parent's).
const IOC_ID: libc::c_ulong = 0x8008_2407;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const RECORD_EXIT: u32 = 4;
const RECORD_FORK: u32 = 7;
/// Data pages of each CPU's ring (1 MiB: 43690 samples of 24 bytes).
const PAGES: usize = 256;

/// Where a counted function's probe goes.
#[derive(Debug, Clone)]
pub struct Location {
    /// The index of its function (in the caller's list).
    pub function: usize,
    /// The file, opened and checked to be the one mapped.
    pub file: crate::inferior::mappedfile::VerifiedFile,
    pub offset: u64,
}

/// The per-process counts, as the kernel reported them.
#[derive(Debug, Default)]
pub struct Counts {
    /// PID -> calls of each function
    pub calls: BTreeMap<u32, Vec<u64>>,
    /// processes forked while counting (the kernel's fork records)
    pub forked: BTreeSet<u32>,
    /// processes that exited while counting (its exit records)
    pub exited: BTreeSet<u32>,
    /// samples the kernel could not write (a ring was full)
    pub lost: u64,
}

/// What the rings hand out.
#[derive(Debug)]
pub enum Record<'a> {
    /// A hit of the definition of index `index` (the caller's) in process
    /// `pid`; with [`Inherited::start`]'s `raw`, its time (CLOCK_MONOTONIC,
    /// ns) and the tracepoint's raw data (the fetch arguments), else 0 and
    /// nothing.
    Hit {
        pid: u32,
        time: u64,
        index: usize,
        raw: &'a [u8],
    },
    /// A process forked (from the postmaster or one of its children).
    Fork(u32),
    /// A process exited.
    Exit(u32),
}

/// Uprobes defined in tracefs, opened on the postmaster with `inherit`
/// (and on its children there at the start), every CPU's records in one
/// ring per CPU.
pub struct Inherited {
    /// a software event on the postmaster that is not inherited (see
    /// [`Inherited::start`]); closed last
    _unshared: Option<PerfFd>,
    /// one per CPU, with the ring every other event writes to
    rings: Vec<Event>,
    /// the other events (their records go to their CPU's ring)
    others: Vec<PerfFd>,
    /// event id -> the caller's index of its definition
    ids: HashMap<u64, usize>,
    /// whether samples carry their time and raw data
    raw: bool,
    /// dropped after the events (their removal is queued behind them)
    _defs: Vec<Definition>,
}

pub struct ClusterCount {
    events: Inherited,
    functions: usize,
    pub counts: Counts,
}

/// The CPUs the kernel may run a process on (`/sys/devices/system/cpu/possible`).
fn cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
            out.extend(a..=b);
        }
    }
    if out.is_empty() {
        // SAFETY: sysconf(3) without side effects.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as i32;
        out.extend(0..n);
    }
    out
}

fn ioctl(fd: &impl AsRawFd, req: libc::c_ulong, arg: libc::c_ulong) -> std::io::Result<()> {
    // SAFETY: a perf ioctl on our descriptor with an integer argument.
    if unsafe { libc::ioctl(fd.as_raw_fd(), req, arg) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn event_id(fd: &impl AsRawFd) -> std::io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64.
    if unsafe { libc::ioctl(fd.as_raw_fd(), IOC_ID, &mut id as *mut u64) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(id)
}

fn attr(id: u64, task: bool, raw: bool) -> Attr {
    let mut a = Attr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<Attr>() as u32,
        config: id,
        period_or_freq: 1,
        sample_type: SAMPLE_TID | SAMPLE_ID,
        flags: FLAG_DISABLED | FLAG_EXCLUDE_HV | FLAG_INHERIT | if task { FLAG_TASK } else { 0 },
        ..Attr::default()
    }
    .wakeup(Wakeup::Batched);
    if raw {
        // the same clock as every other sample of pgdbg's
        a.sample_type |= SAMPLE_TIME | SAMPLE_RAW;
        a.flags |= FLAG_USE_CLOCKID;
        a.clockid = libc::CLOCK_MONOTONIC;
    }
    a
}

impl ClusterCount {
    /// Define the uprobes of `locations` and open them on `postmaster`
    /// (inherited by what it forks) and on `existing` (its children now),
    /// one event per CPU each, enabled.  `functions`: how many functions
    /// the locations belong to.  The error says why, in words.
    pub fn start(
        postmaster: i32,
        locations: &[Location],
        functions: usize,
        existing: impl Fn() -> Vec<i32>,
    ) -> Result<ClusterCount, String> {
        let (root, _) = super::tracefs::root()?;
        let mut defs = Vec::new();
        for l in locations {
            let d = Definition::new(&root, l.file.path(), l.offset, "")
                .map_err(|e| super::tracefs::define_error(&root, &e))?;
            defs.push((l.function, d));
        }
        let mut counts = Counts::default();
        let events = Inherited::start(postmaster, defs, false, existing, |r| {
            counts.add(r, functions)
        })?;
        Ok(ClusterCount {
            events,
            functions,
            counts,
        })
    }

    /// Read what the rings hold into `counts`.
    pub fn drain(&mut self) {
        let (n, counts) = (self.functions, &mut self.counts);
        self.events.drain(|r| counts.add(r, n));
        self.counts.lost = self.events.lost();
    }

    /// Wait for records (at most `ms`) on any ring.
    pub fn wait(&self, ms: i32) {
        self.events.wait(ms)
    }

    /// Stop counting and read the rest; the events are closed (in the
    /// background, keeper.rs) when this is dropped.
    pub fn finish(mut self) -> Counts {
        self.events.disable();
        self.drain();
        std::mem::take(&mut self.counts)
    }
}

impl Counts {
    fn add(&mut self, r: Record, functions: usize) {
        match r {
            Record::Hit { pid, index, .. } => {
                self.calls.entry(pid).or_insert_with(|| vec![0; functions])[index] += 1;
            }
            Record::Fork(pid) => {
                self.forked.insert(pid);
            }
            Record::Exit(pid) => {
                self.exited.insert(pid);
            }
        }
    }
}

impl Inherited {
    /// Open the events of `defs` (each with the caller's index) on
    /// `postmaster` (inherited by what it forks) and on `existing` (its
    /// children now), one event per CPU each, enabled; with `raw`, each
    /// hit's record carries its time and the fetch arguments.  What the
    /// rings hold meanwhile is handed to `seen`.  The error says why, in
    /// words.
    pub fn start(
        postmaster: i32,
        defs: Vec<(usize, Definition)>,
        raw: bool,
        existing: impl Fn() -> Vec<i32>,
        mut seen: impl FnMut(Record),
    ) -> Result<Inherited, String> {
        if defs.is_empty() {
            return Err("no location to probe".to_string());
        }
        // One event of the postmaster's that its children do not inherit
        // keeps their event contexts from being clones of its context.
        // Clones are swapped between two children at a context switch
        // (the kernel's cheap switch between siblings); a uprobe event
        // filters by the process it was opened for, so after a swap
        // the first child's exit closes events that name the second one,
        // the kernel finds no event left for the second's memory and
        // takes the uprobe's int3 out of it: the rest of its calls go
        // uncounted (seen under 4 parallel streams of short sessions: 4
        // of 40 backends not counted at all, 6 partly).
        let unshared = Attr {
            kind: super::PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<Attr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            flags: FLAG_DISABLED,
            ..Attr::default()
        };
        let unshared = keeper::open(&unshared, None, postmaster).map_err(|e| {
            format!("perf_event_open of a software event on the postmaster {postmaster}: {e}")
        })?;
        let mut me = Inherited {
            _unshared: Some(unshared),
            rings: Vec::new(),
            others: Vec::new(),
            ids: HashMap::new(),
            raw,
            _defs: Vec::new(),
        };
        let cpus = cpus();
        // the processes forked since the rings' events were enabled
        let forked = std::cell::RefCell::new(BTreeSet::new());
        let mut note = |r: Record| {
            if let Record::Fork(pid) = r {
                forked.borrow_mut().insert(pid);
            }
            seen(r)
        };
        // the rings' events first, enabled at once: every process forked
        // from then on has a fork record, and none before has any event
        me.open_on(postmaster, &cpus, &defs, true)?;
        me.enable()?;
        // those already there (and not just forked: they inherited the
        // events) each get their own; one whose fork record comes only
        // now (forked while listed) drops them again
        let mut own: Vec<(i32, Vec<PerfFd>)> = Vec::new();
        let listed = existing();
        me.drain(&mut note);
        for pid in listed {
            if forked.borrow().contains(&(pid as u32)) {
                continue;
            }
            let before = me.others.len();
            match me.open_on(pid, &cpus, &defs, false) {
                Ok(()) => {}
                // ESRCH: it exited meanwhile
                Err(_) if crate::inferior::procfs::state(pid).is_none() => {}
                Err(e) => return Err(e),
            }
            own.push((pid, me.others.split_off(before)));
        }
        me.drain(&mut note);
        for (pid, fds) in own {
            if !forked.borrow().contains(&(pid as u32)) {
                me.others.extend(fds);
            }
        }
        me.enable()?;
        me._defs = defs.into_iter().map(|(_, d)| d).collect();
        Ok(me)
    }

    /// One event per CPU per definition on `pid`, disabled, writing to
    /// that CPU's ring; on the postmaster (`rings`) the first of each CPU
    /// has the ring and is enabled at once.
    fn open_on(
        &mut self,
        pid: i32,
        cpus: &[i32],
        defs: &[(usize, Definition)],
        rings: bool,
    ) -> Result<(), String> {
        let why = |cpu: i32| {
            move |e: std::io::Error| {
                format!("perf_event_open of a uprobe trace event on process {pid}, CPU {cpu}: {e}")
            }
        };
        // the rings first, on every CPU: from the last one on, each fork
        // on any CPU is recorded
        if rings {
            for &cpu in cpus {
                let (index, d) = &defs[0];
                let mut a = attr(d.id, true, self.raw);
                a.flags &= !FLAG_DISABLED;
                let ev = Event::open_on(&a, None, pid, cpu, PAGES).map_err(why(cpu))?;
                self.ids.insert(event_id(&ev.fd).map_err(why(cpu))?, *index);
                self.rings.push(ev);
            }
        }
        for (ci, &cpu) in cpus.iter().enumerate() {
            for (di, (index, d)) in defs.iter().enumerate() {
                if rings && di == 0 {
                    continue;
                }
                // fork and exit records: the first event of each process
                // and CPU
                let a = attr(d.id, di == 0, self.raw);
                let fd = keeper::open_on(&a, None, pid, cpu).map_err(why(cpu))?;
                let ring = self.rings[ci].fd.as_raw_fd();
                ioctl(&fd, IOC_SET_OUTPUT, ring as libc::c_ulong).map_err(why(cpu))?;
                self.ids.insert(event_id(&fd).map_err(why(cpu))?, *index);
                self.others.push(fd);
            }
        }
        Ok(())
    }

    /// Enable every event (again: enabling an enabled one does nothing).
    fn enable(&self) -> Result<(), String> {
        for fd in self.fds() {
            ioctl(&fd, IOC_ENABLE, 0).map_err(|e| format!("cannot enable a perf event: {e}"))?;
        }
        Ok(())
    }

    /// No more records from now on (the events stay until dropped).
    pub fn disable(&self) {
        for fd in self.fds().collect::<Vec<_>>() {
            // SAFETY: an ioctl without argument on our descriptor.
            unsafe { libc::ioctl(fd, IOC_DISABLE, 0) };
        }
    }

    fn fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.rings
            .iter()
            .map(|r| r.fd.as_raw_fd())
            .chain(self.others.iter().map(|f| f.as_raw_fd()))
    }

    /// Hand what the rings hold to `f`, ring by ring (each ring in the
    /// order the kernel wrote it).
    pub fn drain(&mut self, mut f: impl FnMut(Record)) {
        let (ids, raw) = (&self.ids, self.raw);
        for ring in &mut self.rings {
            ring.drain_records(|kind, _, b| {
                let u32_at = |o: usize| {
                    b.get(o..o + 4)
                        .map(|x| u32::from_le_bytes(x.try_into().unwrap()))
                };
                let u64_at = |o: usize| {
                    b.get(o..o + 8)
                        .map(|x| u64::from_le_bytes(x.try_into().unwrap()))
                };
                match kind {
                    super::RECORD_SAMPLE => {
                        // pid, tid, [time], id, [raw: size, bytes]
                        let Some(pid) = u32_at(0) else { return };
                        let (time, id_at) = if raw { (u64_at(8), 16) } else { (Some(0), 8) };
                        let (Some(time), Some(id)) = (time, u64_at(id_at)) else {
                            return;
                        };
                        let data = if raw {
                            let Some(size) = u32_at(id_at + 8) else {
                                return;
                            };
                            let from = id_at + 12;
                            let Some(d) = b.get(from..from + size as usize) else {
                                return;
                            };
                            d
                        } else {
                            &[][..]
                        };
                        if let Some(&index) = ids.get(&id) {
                            f(Record::Hit {
                                pid,
                                time,
                                index,
                                raw: data,
                            });
                        }
                    }
                    // pid, ppid, tid, ptid, time: a process (not a thread)
                    RECORD_FORK | RECORD_EXIT => {
                        let (Some(pid), Some(tid)) = (u32_at(0), u32_at(8)) else {
                            return;
                        };
                        if pid == tid {
                            f(if kind == RECORD_FORK {
                                Record::Fork(pid)
                            } else {
                                Record::Exit(pid)
                            });
                        }
                    }
                    _ => {}
                }
            });
        }
    }

    /// Records the kernel could not write (a ring was full).
    pub fn lost(&self) -> u64 {
        self.rings.iter().map(|r| r.lost).sum()
    }

    /// The rings' descriptors (poll them for records).
    pub fn ring_fds(&self) -> Vec<i32> {
        self.rings.iter().map(|r| r.fd.as_raw_fd()).collect()
    }

    /// Wait for records (at most `ms`) on any ring.
    pub fn wait(&self, ms: i32) {
        super::poll_in(&self.ring_fds(), ms)
    }
}
