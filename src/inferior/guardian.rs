//! The guardian: a small process that outlives pgdbg and undoes what pgdbg
//! changed in a backend when pgdbg dies without detaching (SIGKILL, the OOM
//! killer, a crash of pgdbg itself).  Without it the kernel detaches the
//! backend, and the next hit of a left-behind int3 (or a write to a word a
//! debug register watches) delivers a SIGTRAP that kills the backend; the
//! postmaster then restarts every backend of the cluster.
//!
//! How it works:
//! * before the first int3, debug register or detour is written into a
//!   backend, pgdbg starts `pgdbg` again (`/proc/self/exe`) as a guardian
//!   in its own session (`setsid`), ignoring SIGINT/SIGTERM/SIGHUP; it is
//!   not killed with pgdbg;
//! * both share an anonymous memory file (memfd): pgdbg records there every
//!   patched code byte (address, original byte), whether DR7 is armed and
//!   every detour, *before* it changes the backend and forgets an entry only
//!   *after* the backend is restored.  A record is two stores into shared
//!   memory (no system call): pgdbg arms and disarms internal breakpoints
//!   thousands of times a second.  An entry recorded for a change that was
//!   never made is harmless: restoring it writes the byte that is there;
//! * the guardian blocks reading a pipe whose only writer is pgdbg.  pgdbg
//!   sets the "clean" flag when it has detached, closes the pipe and reaps
//!   the guardian, which exits.  When the pipe closes without that flag and
//!   something is still recorded, pgdbg died: the guardian waits until the
//!   backend has no tracer (`TracerPid: 0`), seizes it (`PTRACE_SEIZE` +
//!   `PTRACE_INTERRUPT`, as pgdbg does), takes the recorded state as its
//!   own (a pending SIGTRAP of one of our int3s rewinds rip and is
//!   dropped) and detaches with `Target::detach`: code bytes, debug
//!   registers and detours restored exactly as pgdbg's own detach does.
//!
//! * pgdbg holds the backend in a job-control group stop (hold.rs), which
//!   the kernel re-arms when pgdbg dies: the backend stops (state T) at its
//!   next return to user mode and waits for the guardian wherever it was:
//!   at a hit pgdbg had not handled (the kernel drops that stop's SIGTRAP
//!   and `rip` is one past the int3: rewound here unless pgdbg had resumed
//!   it there on purpose, recorded as (rip, rsp)), inside an inferior call
//!   or an injected system call (their registers are recorded here:
//!   guardian/inflight.rs finishes or abandons the call and puts them
//!   back).  The guardian sends SIGCONT last, and whenever pgdbg ended
//!   without the clean flag while it held the backend, even with nothing
//!   else to restore (pgdbg may die between its PTRACE_DETACH and its
//!   SIGCONT).
//!
//! Left to pgdbg's SIGTRAP handler in the backend (traphandler.rs): the
//! microseconds between pgdbg's end and the kernel's kick reaching a
//! backend running in user mode.  SIGKILL of the guardian too: the backend
//! ends its stop itself (selfrelease.rs: the guardian holds a copy of the
//! write end of the pipe whose release sends it SIGCONT, taken from the
//! backend when pgdbg asks through this process's pipe), and `pgdbg
//! rescue` removes what is left.
//!
//! Here: the shared table's layout and pgdbg's side of it (`Guardian`:
//! started, written before each change, told the end); the guardian
//! process in guardian/watch.rs, and the restore it runs (and `pgdbg
//! rescue` with it) in guardian/restore.rs.

pub mod file;
mod inflight;
pub mod rescue;
mod restore;
mod watch;

use super::{Registers, detour::Detour, log, procfs, traphandler};
use anyhow::{Result, anyhow, bail};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use watch::main;

/// The record's layout: a new layout gets a new value, so that a pgdbg
/// that knows another layout refuses the record instead of reading words
/// at the wrong places ("pgdbgua3": the pipe and SIGCONT action of
/// selfrelease.rs in header words 21-23, which a pgdbg of the layout
/// before would leave in the backend while it unmaps the handler's page).
const MAGIC: u64 = 0x7067_6462_6775_6133; // "pgdbgua3"
/// The magics of the previous layouts.  "pgdbgua2": no pipe, words 21-23
/// unused (zero): read as this layout, no pipe to remove (`rescue::map`).
/// "pgdbguar": detours of 8 words, no landing pages: written by an earlier
/// pgdbg, which alone knows how to restore that backend.
const MAGIC_EARLIER: u64 = 0x7067_6462_6775_6172; // "pgdbguar"
const MAGIC_UA2: u64 = 0x7067_6462_6775_6132; // "pgdbgua2"
/// Words of the header: magic, state, debug registers armed, backend PID,
/// the SIGTRAP handler's pages (traphandler.rs), whether its saved action
/// is valid, the saved action (4 words).
const HDR: usize = 24;
const W_MAGIC: usize = 0;
const W_STATE: usize = 1;
const W_DEBUGREGS: usize = 2;
const W_TRAP_BASE: usize = 4;
const W_TRAP_OLD_VALID: usize = 5;
const W_TRAP_OLD: usize = 8;
/// pgdbg holds the backend in a group stop (hold.rs): SIGCONT it.
const W_HOLD: usize = 6;
/// Where pgdbg last resumed the backend one byte past an int3 of its own
/// on purpose (rip, rsp): a stop found there is not a trap to rewind.
const W_RESUME_RIP: usize = 7;
const W_RESUME_RSP: usize = 12;
/// The backend's start time (clock ticks after boot), pgdbg's PID and the
/// guardian's: whoever reads the table file later (`pgdbg rescue`) checks
/// the backend is the same process and that neither of them is alive.
const W_START: usize = 13;
const W_PGDBG: usize = 14;
const W_GUARDIAN: usize = 15;
/// Signals pgdbg holds back for the backend (bit N-1 for signal N): sent
/// again by whoever restores the backend after pgdbg's death.
const W_SIGNALS: usize = 16;
/// The start times of pgdbg and of the guardian (with their PIDs above:
/// a reused PID is not taken for them).
const W_PGDBG_START: usize = 17;
const W_GUARDIAN_START: usize = 18;
/// `FlushErrorState`'s address while a call series is recorded (0: none
/// known): run before a call abandoned at its error trap is dropped, as
/// pgdbg does (inflight.rs).  A word the header had free: a record of an
/// earlier pgdbg reads 0 there (no flush, as that pgdbg's guardian did).
const W_FLUSH: usize = 19;
/// The call's return-address slot (its `rsp` at entry), where the flush
/// runs from, as pgdbg's does (0: none yet).
const W_RET_SLOT: usize = 20;
/// The pipe and SIGCONT action that let the backend end its own stop
/// (selfrelease.rs: `Release::word`); a write end pgdbg asks the guardian
/// to take from the backend (its number + 1), and the guardian's answer
/// (the same number once it holds its copy).
const W_RELEASE: usize = 21;
const W_RELEASE_ASK: usize = 22;
const W_RELEASE_TAKEN: usize = 23;
const STATE_ACTIVE: u64 = 0;
const STATE_CLEAN: u64 = 1;
/// Breakpoint slots: (address + 1, original byte); 0 marks a free slot.
pub const BP_SLOTS: usize = 16384;
/// Detour slots: site + 1, length, 16 original bytes, code, data.
const DETOUR_SLOTS: usize = 16;
const DETOUR_WORDS: usize = 9;
const BP_DETOUR_WORDS: usize = 2 * BP_SLOTS + DETOUR_SLOTS * DETOUR_WORDS;
const WORDS: usize = HDR + BP_DETOUR_WORDS + inflight::WORDS;
const BYTES: usize = WORDS * 8;

/// Set in the guardian process: its own Target never starts a guardian.
static IN_GUARDIAN: AtomicBool = AtomicBool::new(false);

/// The name of the hidden command line that runs a guardian.
pub const ARG: &str = "__pgdbg_guardian";

struct Shared {
    words: *const AtomicU64,
}

impl Shared {
    fn map(fd: i32) -> Result<Shared> {
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            bail!(
                "cannot map the guardian's table ({})",
                std::io::Error::last_os_error()
            );
        }
        Ok(Shared {
            words: p as *const AtomicU64,
        })
    }
    fn w(&self, i: usize) -> &AtomicU64 {
        assert!(i < WORDS);
        unsafe { &*self.words.add(i) }
    }
    fn get(&self, i: usize) -> u64 {
        self.w(i).load(Ordering::Acquire)
    }
    fn set(&self, i: usize, v: u64) {
        self.w(i).store(v, Ordering::Release)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.words as *mut libc::c_void, BYTES) };
    }
}

/// The guardian's own Target keeps the table's word of held-back signals
/// up to date (it holds signals back while it finishes a call in flight:
/// inflight.rs): `before` (what pgdbg had held back, sent again at the
/// end) with the signals the Target holds now, so that a rescue after the
/// guardian's death too sends them all again.
pub(super) struct SignalWord {
    word: *const AtomicU64,
    pub(super) before: u64,
}

// SAFETY: a word of the table mapped by `restore`'s caller, which outlives
// the Target that holds this (dropped inside `restore`).
unsafe impl Send for SignalWord {}

impl SignalWord {
    pub(super) fn note(&self, held: u64) {
        // SAFETY: see the Send impl: the mapping is alive.
        unsafe { &*self.word }.store(self.before | held, Ordering::Release);
    }
}

/// pgdbg's side: the guardian of one backend.
pub struct Guardian {
    shared: Shared,
    child: Option<std::process::Child>,
    pipe_w: Option<OwnedFd>,
    bp_slot: HashMap<u64, usize>,
    free: Vec<usize>,
    next_slot: usize,
    detour_slot: HashMap<u64, usize>,
    /// (backend PID, start time) of the table file, removed when clean;
    /// None for an anonymous table.
    file: Option<(i32, u64)>,
}

// The table is ours alone in this process (the guardian only reads it
// after pgdbg is gone).
unsafe impl Send for Guardian {}

fn cloexec_off(fd: i32) -> std::io::Result<()> {
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Guardian {
    /// Start the guardian of `pid`; None in the guardian itself.
    pub fn start(pid: i32) -> Result<Option<Guardian>> {
        if IN_GUARDIAN.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let fail = |what: &str, e: std::io::Error| {
            anyhow!(
                "cannot start the guardian that restores the backend if pgdbg is killed ({what}: {e}); nothing was changed in the backend"
            )
        };
        let start = procfs::start_time(pid).unwrap_or(0);
        let (memfd, file) = match file::create(pid, start) {
            Ok(fd) => (fd, Some((pid, start))),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => bail!(
                "backend {pid} still holds what an earlier pgdbg changed and could not restore (its record is {}): run 'pgdbg rescue {pid}' first",
                file::path(pid, start).display()
            ),
            Err(e) => {
                log::debug(&format!(
                    "no table file in {} ({e}): the guardian's table is anonymous",
                    file::DIR
                ));
                let fd =
                    unsafe { libc::memfd_create(c"pgdbg-guardian".as_ptr(), libc::MFD_CLOEXEC) };
                if fd < 0 {
                    return Err(fail("memfd_create", std::io::Error::last_os_error()));
                }
                (unsafe { OwnedFd::from_raw_fd(fd) }, None)
            }
        };
        // from here on an error removes the file again
        let remove_file = || {
            if let Some((p, s)) = file {
                file::remove(p, s);
            }
        };
        // a file-size limit (ulimit -f) applies to this memory file too:
        // the soft limit is raised to the hard one for the ftruncate only
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit with a valid struct.
        let raised = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut rl) } == 0
            && rl.rlim_cur < rl.rlim_max
            && unsafe {
                libc::setrlimit(
                    libc::RLIMIT_FSIZE,
                    &libc::rlimit {
                        rlim_cur: rl.rlim_max,
                        rlim_max: rl.rlim_max,
                    },
                )
            } == 0;
        // SAFETY: ftruncate on our own memfd.
        let r = unsafe { libc::ftruncate(memfd.as_raw_fd(), BYTES as libc::off_t) };
        let err = std::io::Error::last_os_error();
        if raised {
            // SAFETY: the limit as it was.
            unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &rl) };
        }
        if r < 0 {
            remove_file();
            return Err(fail("ftruncate", err));
        }
        let shared = Shared::map(memfd.as_raw_fd()).inspect_err(|_| remove_file())?;
        shared.set(W_STATE, STATE_ACTIVE);
        shared.set(3, pid as u64);
        shared.set(W_START, start);
        shared.set(W_PGDBG, std::process::id() as u64);
        shared.set(
            W_PGDBG_START,
            procfs::start_time(std::process::id() as i32).unwrap_or(0),
        );
        // the magic last: a reader never takes a half-written header
        shared.set(W_MAGIC, MAGIC);
        let mut fds = [0i32; 2];
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            remove_file();
            return Err(fail("pipe", std::io::Error::last_os_error()));
        }
        let (pipe_r, pipe_w) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (mfd, rfd) = (memfd.as_raw_fd(), pipe_r.as_raw_fd());
        let mut cmd = std::process::Command::new("/proc/self/exe");
        cmd.arg(ARG)
            .arg(pid.to_string())
            .arg(start.to_string())
            .arg(std::process::id().to_string())
            .arg(mfd.to_string())
            .arg(rfd.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        use std::os::unix::process::CommandExt;
        unsafe {
            cmd.pre_exec(move || {
                libc::setsid();
                cloexec_off(mfd)?;
                cloexec_off(rfd)
            });
        }
        let child = cmd.spawn().map_err(|e| {
            remove_file();
            fail("spawn", e)
        })?;
        shared.set(W_GUARDIAN, child.id() as u64);
        shared.set(
            W_GUARDIAN_START,
            procfs::start_time(child.id() as i32).unwrap_or(0),
        );
        drop(pipe_r);
        drop(memfd);
        Ok(Some(Guardian {
            shared,
            child: Some(child),
            pipe_w: Some(pipe_w),
            bp_slot: HashMap::new(),
            free: Vec::new(),
            next_slot: 0,
            detour_slot: HashMap::new(),
            file,
        }))
    }

    /// The signals pgdbg holds back for the backend now (a mask, bit N-1
    /// for signal N).
    pub fn note_signals(&mut self, mask: u64) {
        self.shared.set(W_SIGNALS, mask);
    }

    /// The function that flushes PostgreSQL's error state (`FlushErrorState`),
    /// for a call of the series in flight abandoned at its error trap.
    pub fn note_flush(&mut self, addr: u64) {
        self.shared.set(W_FLUSH, addr);
    }

    /// The return-address slot of the calls of the series in flight.
    pub fn note_ret_slot(&mut self, sp: u64) {
        self.shared.set(W_RET_SLOT, sp);
    }

    /// Record an int3 about to be written at `addr` over `orig`.
    pub fn note_breakpoint(&mut self, addr: u64, orig: u8) -> Result<()> {
        if self.bp_slot.contains_key(&addr) {
            return Ok(());
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None if self.next_slot < BP_SLOTS => {
                self.next_slot += 1;
                self.next_slot - 1
            }
            None => bail!(
                "more than {BP_SLOTS} breakpoint addresses at once: delete some breakpoints first"
            ),
        };
        let i = HDR + 2 * slot;
        self.shared.set(i + 1, orig as u64);
        self.shared.set(i, addr + 1);
        self.bp_slot.insert(addr, slot);
        Ok(())
    }

    /// The byte at `addr` is the original again.
    pub fn forget_breakpoint(&mut self, addr: u64) {
        if let Some(slot) = self.bp_slot.remove(&addr) {
            self.shared.set(HDR + 2 * slot, 0);
            self.free.push(slot);
        }
    }

    fn records(&self) -> inflight::Records<'_> {
        inflight::Records {
            shared: &self.shared,
            at: inflight::base(BP_DETOUR_WORDS),
        }
    }

    /// A call, an injected system call or a changed data word is recorded
    /// (not yet put back).
    pub fn in_flight(&self) -> bool {
        self.records().any()
    }

    /// The same, but for a system call injected with its signal frame
    /// (sigframe.rs), which needs no group stop: it restores itself.
    pub fn in_flight_held(&self) -> bool {
        self.records().any_held()
    }

    /// pgdbg holds the backend in a group stop (or no longer does).
    pub fn note_hold(&mut self, held: bool) {
        self.shared.set(W_HOLD, held as u64);
    }

    /// The backend resumes at `rip` with `rsp`, one past an int3 of ours.
    pub fn note_resume(&mut self, rip: u64, rsp: u64) {
        self.shared.set(W_RESUME_RIP, 0);
        self.shared.set(W_RESUME_RSP, rsp);
        self.shared.set(W_RESUME_RIP, rip);
    }

    /// No resume past an int3 holds any more (pgdbg saw a new trap and
    /// rewound it, or the instruction is one whose rewind is harmless).
    pub fn forget_resume(&mut self) {
        self.shared.set(W_RESUME_RIP, 0);
    }

    /// A call is about to change the registers saved as `regs`/`xstate`;
    /// it returns to the int3 at `ret`.
    pub fn note_call(&mut self, regs: &Registers, xstate: &[u8], ret: u64, timeout_ms: u64) {
        self.records().note_call(regs, xstate, ret, timeout_ms)
    }

    pub fn call_phase(&mut self, phase: u64) {
        self.records().call_phase(phase)
    }

    pub fn forget_call(&mut self) {
        self.records().forget_call();
        self.shared.set(W_FLUSH, 0);
        self.shared.set(W_RET_SLOT, 0);
    }

    pub fn note_data(&mut self, addr: u64, orig: &[u8]) -> Result<()> {
        self.records().note_data(addr, orig)
    }

    pub fn forget_data(&mut self) {
        self.records().forget_data()
    }

    pub fn note_syscall(&mut self, regs: &Registers, at: u64, code: &[u8], trailer: bool) {
        self.records().note_syscall(regs, at, code, trailer)
    }

    pub fn forget_syscall(&mut self) {
        self.records().forget_syscall()
    }

    pub fn note_debugregs(&mut self, armed: bool) {
        self.shared.set(W_DEBUGREGS, armed as u64);
    }

    pub fn note_detour(&mut self, d: &Detour) -> Result<()> {
        if self.detour_slot.contains_key(&d.site) {
            return Ok(());
        }
        if d.orig.len() > 16 {
            bail!("internal: a detour displaces more than 16 bytes");
        }
        let used: Vec<usize> = self.detour_slot.values().copied().collect();
        let Some(slot) = (0..DETOUR_SLOTS).find(|s| !used.contains(s)) else {
            bail!("more than {DETOUR_SLOTS} in-process recorders at once");
        };
        let i = HDR + 2 * BP_SLOTS + slot * DETOUR_WORDS;
        let mut orig = [0u8; 16];
        orig[..d.orig.len()].copy_from_slice(&d.orig);
        self.shared.set(i + 1, d.orig.len() as u64);
        self.shared
            .set(i + 2, u64::from_le_bytes(orig[..8].try_into().expect("8")));
        self.shared
            .set(i + 3, u64::from_le_bytes(orig[8..].try_into().expect("8")));
        self.shared.set(i + 4, d.code.0);
        self.shared.set(i + 5, d.code.1);
        self.shared.set(i + 6, d.data.0);
        self.shared.set(i + 7, d.data.1);
        // the jump's target (0: not known), from which the reserved
        // landing pages are found again (`jumpover::landing_pages`)
        self.shared.set(i + 8, d.entry.unwrap_or(0));
        self.shared.set(i, d.site + 1);
        self.detour_slot.insert(d.site, slot);
        Ok(())
    }

    /// The SIGTRAP handler's pages at `base` (mapped before this is
    /// called), and the action to put back once it is known (recorded
    /// before ours replaces it; None once it is back).
    pub fn note_trap(&mut self, base: u64, old: Option<&[u64; traphandler::SA_WORDS]>) {
        match old {
            Some(o) => {
                for (i, w) in o.iter().enumerate() {
                    self.shared.set(W_TRAP_OLD + i, *w);
                }
                self.shared.set(W_TRAP_OLD_VALID, 1);
            }
            None => self.shared.set(W_TRAP_OLD_VALID, 0),
        }
        self.shared.set(W_TRAP_BASE, base);
    }

    /// The pipe and SIGCONT action set up in the backend now (0: none).
    pub fn note_release(&mut self, word: u64) {
        self.shared.set(W_RELEASE, word);
    }

    /// Have the guardian take its copy of the write end `fd` of the
    /// backend's pipe (it must hold one before the backend's own is
    /// closed); false when it did not within two seconds.
    pub fn share_release_fd(&mut self, fd: i32) -> bool {
        let ask = fd as u64 + 1;
        self.shared.set(W_RELEASE_TAKEN, 0);
        self.shared.set(W_RELEASE_ASK, ask);
        let Some(w) = &self.pipe_w else {
            return false;
        };
        // SAFETY: a one-byte write to our end of the guardian's pipe.
        if unsafe { libc::write(w.as_raw_fd(), b"r".as_ptr() as *const libc::c_void, 1) } != 1 {
            return false;
        }
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(2) {
            if self.shared.get(W_RELEASE_TAKEN) == ask {
                self.shared.set(W_RELEASE_ASK, 0);
                return true;
            }
            if let Some(c) = &mut self.child
                && !matches!(c.try_wait(), Ok(None))
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        self.shared.set(W_RELEASE_ASK, 0);
        false
    }

    /// The handler's pages are unmapped (or left for good).
    pub fn forget_trap(&mut self) {
        self.shared.set(W_TRAP_OLD_VALID, 0);
        self.shared.set(W_TRAP_BASE, 0);
    }

    pub fn forget_detour(&mut self, site: u64) {
        if let Some(slot) = self.detour_slot.remove(&site) {
            self.shared.set(HDR + 2 * BP_SLOTS + slot * DETOUR_WORDS, 0);
        }
    }

    /// The backend is gone: nothing to restore.
    pub fn forget_all(&mut self) {
        let addrs: Vec<u64> = self.bp_slot.keys().copied().collect();
        for a in addrs {
            self.forget_breakpoint(a);
        }
        let sites: Vec<u64> = self.detour_slot.keys().copied().collect();
        for s in sites {
            self.forget_detour(s);
        }
        self.note_debugregs(false);
        self.forget_trap();
        self.note_release(0);
        self.forget_call();
        self.forget_data();
        self.forget_syscall();
        self.note_hold(false);
        self.note_signals(0);
    }

    /// Whether nothing is recorded: the backend is as pgdbg found it.
    fn empty(&self) -> bool {
        self.bp_slot.is_empty()
            && self.detour_slot.is_empty()
            && self.shared.get(W_DEBUGREGS) == 0
            && self.shared.get(W_TRAP_BASE) == 0
            && self.shared.get(W_RELEASE) == 0
            && self.shared.get(W_HOLD) == 0
            && self.shared.get(W_SIGNALS) == 0
            && !self.records().any()
    }

    /// pgdbg detached: tell the guardian, which exits, and reap it.  With
    /// something still recorded (a restore that failed) the guardian is
    /// left to try again once pgdbg has let go of the backend.
    pub fn finish(&mut self) {
        if self.empty() {
            self.shared.set(W_STATE, STATE_CLEAN);
            if let Some((p, s)) = self.file.take() {
                file::remove(p, s);
            }
        }
        self.pipe_w = None;
        if let Some(mut c) = self.child.take()
            && self.shared.get(W_STATE) == STATE_CLEAN
        {
            let _ = c.wait();
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.finish();
    }
}
