//! Inferior calls and injected system calls in flight, for the guardian.
//!
//! While a call runs (or between the calls of a series) the target's own
//! registers exist only in pgdbg.  Before the first change pgdbg records
//! in the shared table: the saved general registers, the saved xstate
//! (whatever length the kernel gave, up to 64 KiB), the call's return
//! address (an int3 at the ELF entry point) and pgdbg's call timeout; the
//! data words it changes around calls (a counter it raises, a pointer it
//! swaps) with their values to put back; and, for an injected system call,
//! the registers before it and the code bytes it borrowed.  Each record is
//! written word by word and its "valid" word last; it is cleared only after
//! what it describes is back in the target.
//!
//! The guardian (the target held in its group stop, guardian.rs) then:
//! puts back a system call's code bytes and registers; lets a call still
//! running go on to its return int3 (PTRACE_CONT with the group still
//! stopped, every other int3 of the call in place: an error raised inside
//! it stops at its trap), within the recorded timeout; puts back the data
//! words, then the registers and xstate as pgdbg does after a call (read
//! back and compared).  A call that does not return in time, faults or
//! raises an error is abandoned as pgdbg abandons one: interrupted and its
//! frame dropped by putting the saved registers back.

use super::{HDR, Shared};
use crate::arch::fragments::SYSCALL_INT3_LEN;
use crate::inferior::{Registers, Stop, Target, xstate::XState};
use anyhow::{Result, anyhow};

const REGS_WORDS: usize = std::mem::size_of::<libc::user_regs_struct>() / 8;
const DATA_SLOTS: usize = 8;
/// Larger than any xstate so far (AMX: 11 008 bytes); xstate.rs refuses a
/// save that is not smaller.
const XSTATE_WORDS: usize = 64 * 1024 / 8;

// the call record; C_VALID is its phase: 0 none (or recorded, the
// registers still the target's own), CALL_ARMED, CALL_RESTORING
const C_VALID: usize = 0;
pub const CALL_ARMED: u64 = 1;
pub const CALL_RESTORING: u64 = 2;
const C_RET: usize = 1;
const C_TIMEOUT_MS: usize = 2;
const C_XLEN: usize = 3;
const C_REGS: usize = 4;
const C_DATA: usize = C_REGS + REGS_WORDS; // (address + 1, length, value)
const S_VALID: usize = C_DATA + 3 * DATA_SLOTS;
/// S_VALID of a system call injected with its signal frame (sigframe.rs):
/// 8 code bytes borrowed; the backend may have restored itself.
const SYSCALL_TRAILER: u64 = 2;
const _: () = assert!(crate::inferior::sigframe::TRAILER_LEN <= 8);
const S_AT: usize = S_VALID + 1;
const S_CODE: usize = S_AT + 1;
const S_REGS: usize = S_CODE + 1;
const C_XSTATE: usize = S_REGS + REGS_WORDS;
pub(super) const WORDS: usize = C_XSTATE + XSTATE_WORDS;

fn to_words(r: &Registers) -> [u64; REGS_WORDS] {
    let u = r.to_user();
    // SAFETY: user_regs_struct is REGS_WORDS unsigned longs.
    unsafe { std::mem::transmute::<libc::user_regs_struct, [u64; REGS_WORDS]>(u) }
}

fn from_words(w: [u64; REGS_WORDS]) -> Registers {
    // SAFETY: as above.
    let u = unsafe { std::mem::transmute::<[u64; REGS_WORDS], libc::user_regs_struct>(w) };
    Registers::from_user(&u)
}

/// Where the records start in the table.
pub(super) fn base(bp_and_detour_words: usize) -> usize {
    HDR + bp_and_detour_words
}

pub(super) struct Records<'a> {
    pub shared: &'a Shared,
    pub at: usize,
}

impl Records<'_> {
    fn get(&self, i: usize) -> u64 {
        self.shared.get(self.at + i)
    }
    fn set(&self, i: usize, v: u64) {
        self.shared.set(self.at + i, v)
    }
    fn regs(&self, i: usize) -> Registers {
        let mut w = [0u64; REGS_WORDS];
        for (k, x) in w.iter_mut().enumerate() {
            *x = self.get(i + k);
        }
        from_words(w)
    }
    fn set_regs(&self, i: usize, r: &Registers) {
        for (k, x) in to_words(r).iter().enumerate() {
            self.set(i + k, *x);
        }
    }

    pub fn note_call(&self, regs: &Registers, xstate: &[u8], ret: u64, timeout_ms: u64) {
        self.set(C_VALID, 0);
        self.set_regs(C_REGS, regs);
        let n = xstate.len().min(XSTATE_WORDS * 8);
        for (k, c) in xstate[..n].chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.set(C_XSTATE + k, u64::from_le_bytes(b));
        }
        self.set(C_XLEN, n as u64);
        self.set(C_RET, ret);
        self.set(C_TIMEOUT_MS, timeout_ms);
    }

    /// The registers become the call's (`CALL_ARMED`), or are being put
    /// back (`CALL_RESTORING`: never run again, only put back).
    pub fn call_phase(&self, phase: u64) {
        self.set(C_VALID, phase);
    }

    pub fn forget_call(&self) {
        self.set(C_VALID, 0);
    }

    /// A data word to put back (`orig`, up to 8 bytes) after a call.
    pub fn note_data(&self, addr: u64, orig: &[u8]) -> Result<()> {
        let n = orig.len().min(8);
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&orig[..n]);
        let free = (0..DATA_SLOTS).find(|s| {
            let a = self.get(C_DATA + 3 * s);
            a == 0 || a == addr + 1
        });
        let Some(s) = free else {
            anyhow::bail!("internal: more than {DATA_SLOTS} data words recorded for the guardian");
        };
        let i = C_DATA + 3 * s;
        self.set(i, 0);
        self.set(i + 1, n as u64);
        self.set(i + 2, u64::from_le_bytes(b));
        self.set(i, addr + 1);
        Ok(())
    }

    pub fn forget_data(&self) {
        for s in 0..DATA_SLOTS {
            self.set(C_DATA + 3 * s, 0);
        }
    }

    /// An injected system call: `code` the bytes borrowed at `at` (3 for
    /// `syscall; int3`, 8 for the signal-frame trailer: S_VALID says which,
    /// 1 or `SYSCALL_TRAILER`).
    pub fn note_syscall(&self, regs: &Registers, at: u64, code: &[u8], trailer: bool) {
        self.set(S_VALID, 0);
        self.set_regs(S_REGS, regs);
        self.set(S_AT, at);
        let mut b = [0u8; 8];
        let n = code.len().min(8);
        b[..n].copy_from_slice(&code[..n]);
        self.set(S_CODE, u64::from_le_bytes(b));
        self.set(S_VALID, if trailer { SYSCALL_TRAILER } else { 1 });
    }

    pub fn forget_syscall(&self) {
        self.set(S_VALID, 0);
    }

    /// Whether a record needs the group stop (hold.rs): all but a system
    /// call injected with its signal frame, which restores itself.
    pub fn any_held(&self) -> bool {
        self.get(C_VALID) != 0
            || (self.get(S_VALID) != 0 && self.get(S_VALID) != SYSCALL_TRAILER)
            || (0..DATA_SLOTS).any(|s| self.get(C_DATA + 3 * s) != 0)
    }

    pub fn any(&self) -> bool {
        self.get(C_VALID) != 0
            || self.get(S_VALID) != 0
            || (0..DATA_SLOTS).any(|s| self.get(C_DATA + 3 * s) != 0)
    }

    /// What the guardian found: (call, data words, system call).
    pub fn adopt(&self) -> InFlight {
        let call = (self.get(C_VALID) != 0).then(|| {
            let n = (self.get(C_XLEN) as usize).min(XSTATE_WORDS * 8);
            let mut x = Vec::with_capacity(n);
            for k in 0..n.div_ceil(8) {
                x.extend_from_slice(&self.get(C_XSTATE + k).to_le_bytes());
            }
            x.truncate(n);
            Call {
                restoring: self.get(C_VALID) == CALL_RESTORING,
                regs: self.regs(C_REGS),
                xstate: x,
                ret: self.get(C_RET),
                timeout: std::time::Duration::from_millis(self.get(C_TIMEOUT_MS).max(1000)),
            }
        });
        let data = (0..DATA_SLOTS)
            .filter_map(|s| {
                let i = C_DATA + 3 * s;
                let a = self.get(i);
                (a != 0).then(|| {
                    let n = (self.get(i + 1) as usize).min(8);
                    (a - 1, self.get(i + 2).to_le_bytes()[..n].to_vec())
                })
            })
            .collect();
        let syscall = (self.get(S_VALID) != 0).then(|| {
            let trailer = self.get(S_VALID) == SYSCALL_TRAILER;
            let c = self.get(S_CODE).to_le_bytes();
            Syscall {
                regs: self.regs(S_REGS),
                at: self.get(S_AT),
                code: c[..if trailer {
                    crate::inferior::sigframe::TRAILER_LEN
                } else {
                    SYSCALL_INT3_LEN
                }]
                    .to_vec(),
                trailer,
            }
        });
        InFlight {
            call,
            data,
            syscall,
        }
    }
}

pub(super) struct Call {
    restoring: bool,
    regs: Registers,
    xstate: Vec<u8>,
    ret: u64,
    timeout: std::time::Duration,
}

/// An injected system call's record.
pub(super) struct Syscall {
    regs: Registers,
    at: u64,
    code: Vec<u8>,
    /// Injected with its signal frame (sigframe.rs): the backend, once
    /// untraced, finishes it and returns to its own context by itself.
    trailer: bool,
}

pub(super) struct InFlight {
    pub call: Option<Call>,
    pub data: Vec<(u64, Vec<u8>)>,
    pub syscall: Option<Syscall>,
}

impl InFlight {
    pub fn is_empty(&self) -> bool {
        self.call.is_none() && self.data.is_empty() && self.syscall.is_none()
    }

    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if self.syscall.is_some() {
            v.push("a system call in flight".to_string());
        }
        if self.call.is_some() {
            v.push("a function call in flight".to_string());
        }
        if !self.data.is_empty() {
            v.push(format!("{} data word(s)", self.data.len()));
        }
        v.join(", ")
    }

    /// Put the target back as pgdbg would after the system call and the
    /// call (module comment).  Returns how the call ended, for the log.
    /// `flush`: `FlushErrorState`'s address and the call's return slot
    /// (`abandon_at_error_trap`).
    ///
    /// Every signal that reaches the backend meanwhile is held back: no
    /// PostgreSQL handler runs on the call's stack (or the flush's), nor
    /// cuts its sleep short, while only the guardian can finish it; the
    /// job-control signals excepted (wait.rs).  Each is recorded in
    /// the table at its delivery stop, before the resume that suppresses
    /// it (a rescue sends it again if the guardian dies too), and is sent
    /// again by the detach that follows, once the registers are the
    /// backend's own again; on a failure here as well (the detach then
    /// leaves the backend as it is, and the signals are its own).
    /// The backend ended its stop itself (its SIGCONT handler) and ran on:
    /// nothing of the system call's is replayed, but the code borrowed at
    /// the entry point goes back where nothing can run it any more (`rip`
    /// outside it, no signal frame on the stack returning into it:
    /// `returns_into`); else it stays, harmless (`_start` never runs
    /// again).  Returns what was done, for the message.
    pub fn put_code_back_after_release(&self, t: &mut Target) -> Result<&'static str> {
        let Some(sc) = &self.syscall else {
            return Ok("");
        };
        let range = sc.at..sc.at + sc.code.len() as u64;
        if range.contains(&t.regs()?.rip) || returns_into(t, &range, sc.regs.rsp)? {
            return Ok(", its code left at the entry point: the backend may still run it");
        }
        t.write(sc.at, &sc.code)?;
        Ok(", its code put back")
    }

    pub fn finish(&self, t: &mut Target, flush: (u64, u64)) -> Result<String> {
        t.hold_signals_back(true);
        let res = self.finish_holding(t, flush);
        let held = t.held_signals();
        t.hold_signals_back(false);
        let how = res?;
        Ok(if held.is_empty() {
            how
        } else {
            format!("{how}; {} held back meanwhile, sent after", held.join(" "))
        })
    }

    fn finish_holding(&self, t: &mut Target, flush: (u64, u64)) -> Result<String> {
        let mut how = String::new();
        if t.in_trap_handler() {
            // the SIGTRAP of the call's return int3 (or of the system
            // call's) was delivered to our handler as pgdbg died: the
            // handler returns first (its sigreturn puts back the signal
            // mask and FP state), without acting on the system call's.
            // `syscall; int3`'s code goes back first (its int3 then makes
            // the handler return instead of dying).  A trailer's stays: a
            // signal handler that interrupted it may be what the SIGTRAP
            // handler returns to, and it returns into the trailer;
            // `undo_syscall` puts the code back once no frame on the stack
            // returns there (`returns_into`)
            let put_back = self.syscall.as_ref().filter(|sc| !sc.trailer);
            if let Some(sc) = put_back {
                t.write(sc.at, &sc.code)?;
            }
            t.step_out_of_trap_handler(put_back.is_some())?;
            if t.is_gone() {
                return Ok("backend ended".into());
            }
        }
        if t.call_repaired() {
            // the handler put the call's registers and data words back
            // (pgdbg and its guardian were gone, someone sent SIGCONT) and
            // the backend ran on: these records are old, never replayed
            t.end_call_repair();
            return Ok("the backend had undone the call itself".into());
        }
        if let Some(sc) = &self.syscall {
            how = undo_syscall(t, sc)?;
        }
        let Some(c) = &self.call else {
            self.put_data(t)?;
            return Ok(how);
        };
        let now = t.regs()?;
        let rip = now.rip;
        if c.restoring {
            // pgdbg was putting the registers back: the call is over
            how = "call over, registers put back".into();
        } else if (now.rip, now.rsp) == (c.regs.rip, c.regs.rsp) {
            // armed, but the call's registers not written yet (a call
            // always runs on a stack of its own below the saved rsp)
            how = "call not started".into();
        } else if rip != c.ret && rip != c.ret + 1 {
            how = run_to_return(t, c, flush)?;
            if t.is_gone() {
                return Ok(how);
            }
        } else {
            how = "call had returned".into();
        }
        // the handler's record is disarmed before anything is put back
        // (callrepair.rs: a record marked over restored registers could
        // roll the backend back later)
        t.end_call_repair();
        self.put_data(t)?;
        t.set_regs(&c.regs)?;
        t.check_regs_read_back(&c.regs)?;
        XState::from_saved(c.xstate.clone())?.restore(t.pid())?;
        // the handler's record is done with too
        t.end_call_repair();
        Ok(how)
    }

    fn put_data(&self, t: &mut Target) -> Result<()> {
        for (a, v) in &self.data {
            t.write(*a, v)?;
        }
        // and the handler page's copies of them go: the backend runs on
        // from here, where they are old (a SIGCONT handler left in place
        // by a detach that fails must never put them back)
        if !self.data.is_empty() {
            t.clear_repair_data_slots();
        }
        Ok(())
    }
}

/// Put back an injected system call's registers and borrowed code.
///
/// `syscall; int3` (held in the group stop, the backend stopped where
/// pgdbg left it): the code, then the registers, as ever.
///
/// With its signal frame (sigframe.rs) the backend was not held: untraced
/// since pgdbg's death, it may have finished the call and returned to its
/// own context through the frame before this seized it.  Its registers are
/// put back only while `rip` is still inside the injected code (the call
/// not run, or run and the trailer not yet: the same as the trailer would
/// do, the frame below rsp left as dead memory), the registers first.
/// Elsewhere they are its own again (or a handler of its own interrupted
/// the injected code: the handler returns there and the trailer runs):
/// never touched.  The code goes back only when neither `rip` nor any word
/// of the stack (a signal frame's saved rip) points into it; else it stays
/// (AT_ENTRY never runs again but through such a return).
fn undo_syscall(t: &mut Target, sc: &Syscall) -> Result<String> {
    if !sc.trailer {
        t.write(sc.at, &sc.code)?;
        t.set_regs(&sc.regs)?;
        t.check_regs_read_back(&sc.regs)?;
        return Ok("system call undone".into());
    }
    let range = sc.at..sc.at + sc.code.len() as u64;
    let now = t.regs()?;
    let mut how = if range.contains(&now.rip) {
        // the backend's own signal mask first, from the frame (pgdbg
        // blocks every signal while the call runs, detour.rs): the frame
        // lies below the saved rsp's red zone, where the injected rsp is
        let m = crate::inferior::sigframe::sigmask_at(now.rsp);
        if !(now.rsp..sc.regs.rsp.saturating_sub(128)).contains(&m) {
            anyhow::bail!(
                "the injected stack pointer {:#x} is not below the saved one {:#x}",
                now.rsp,
                sc.regs.rsp
            );
        }
        let mut w = [0u8; 8];
        t.read(m, &mut w)?;
        crate::inferior::injected::set_blocked_mask(t.pid(), u64::from_le_bytes(w))?;
        t.set_regs(&sc.regs)?;
        t.check_regs_read_back(&sc.regs)?;
        "system call undone".to_string()
    } else {
        "the backend had returned from the system call by itself".to_string()
    };
    if returns_into(t, &range, sc.regs.rsp)? || range.contains(&t.regs()?.rip) {
        how.push_str(" (its code left at the entry point: the stack returns there)");
    } else {
        t.write(sc.at, &sc.code)?;
    }
    Ok(how)
}

/// Whether the stack holds a signal frame whose handler returns into the
/// injected code `range`: a word pointing into it (the frame's saved rip)
/// right after one that is an rsp on the injected signal frame's stack
/// (`sigcontext` has rsp, then rip), between the saved rsp less the red
/// zone and 128 KiB below (the frame is at most 440 bytes and a 64 KiB
/// XSAVE image).  Only such a word counts: the stack holds `_start`'s
/// address elsewhere (the auxiliary vector's AT_ENTRY, a stale word of the
/// C library's start-up), which no return goes to.  Unknown stack: yes.
fn returns_into(t: &Target, range: &std::ops::Range<u64>, saved_rsp: u64) -> Result<bool> {
    let Some(words) = t.stack_words()? else {
        return Ok(true);
    };
    let hi = saved_rsp.saturating_sub(128);
    let lo = hi.saturating_sub(128 * 1024);
    Ok(words
        .windows(2)
        .any(|w| range.contains(&w[1]) && (lo..hi).contains(&w[0])))
}

/// Let a call in flight run to its return int3 (the group still stopped:
/// if the guardian dies too, the target stops again), within its timeout.
/// At its error trap it is abandoned, the error state flushed first.
fn run_to_return(t: &mut Target, c: &Call, flush: (u64, u64)) -> Result<String> {
    let started = t.regs()?.rip;
    // an int3 of the call where it stands (a trap it stopped at): the
    // original instruction runs first
    let rip = started;
    if (t.breakpoint_inserted(rip) || t.breakpoint_inserted(crate::arch::abi::int3_address(rip)))
        && rip != c.ret
    {
        // stopped at one of the call's traps (an error raised inside it),
        // rewound or not
        return abandon_at_error_trap(t, c, flush);
    }
    t.resume()?;
    match wait_for_return(t, c, c.timeout)? {
        Ran::Returned => Ok("call completed".into()),
        Ran::Gone => Ok("backend ended".into()),
        Ran::ErrorTrap => abandon_at_error_trap(t, c, flush),
        Ran::Signal(sig) => {
            let at = t.regs().map(|r| r.rip).unwrap_or(0);
            abandon(
                t,
                format!("call abandoned after {sig:?} at {at:#x}, started at {started:#x}"),
            )
        }
        Ran::TimedOut => abandon(t, "call abandoned after its timeout"),
    }
}

/// How a run of the backend towards the call's return int3 ended.
enum Ran {
    Returned,
    Gone,
    /// at an int3 of the call other than its return: an error trap
    ErrorTrap,
    /// a fault (discarded: the call is abandoned)
    Signal(nix::sys::signal::Signal),
    TimedOut,
}

/// Wait for the running backend to reach the call's return int3, within
/// the call's timeout (then interrupted); stopped at the end unless gone.
fn wait_for_return(t: &mut Target, c: &Call, limit: std::time::Duration) -> Result<Ran> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match t.poll()? {
            Some(Stop::Breakpoint { addr }) if addr == c.ret => return Ok(Ran::Returned),
            Some(Stop::Breakpoint { .. }) => return Ok(Ran::ErrorTrap),
            Some(Stop::Exited(_)) | Some(Stop::Killed(_)) => return Ok(Ran::Gone),
            Some(Stop::Signal(sig)) => {
                t.discard_pending_fault();
                return Ok(Ran::Signal(sig));
            }
            Some(_) => t.resume()?,
            None if t.is_gone() => return Ok(Ran::Gone),
            None if t.is_stopped() => t.resume()?,
            None if std::time::Instant::now() > deadline => {
                t.interrupt()?;
                let s = t.wait(&crate::inferior::NoHooks)?;
                if let Stop::Breakpoint { addr } = s
                    && addr == c.ret
                {
                    return Ok(Ran::Returned);
                }
                if matches!(s, Stop::Exited(_) | Stop::Killed(_)) {
                    return Ok(Ran::Gone);
                }
                t.discard_pending_fault();
                return Ok(Ran::TimedOut);
            }
            None => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

/// The call raised an ERROR and stopped at its trap (`pg_re_throw`): as
/// pgdbg does after a trapped error (postgres/call/series.rs), the error
/// state is flushed by a call of `FlushErrorState` before the call is
/// abandoned, so that PostgreSQL's error stack is not left one entry deep
/// (each entry left brings the session nearer "ERRORDATA_STACK_SIZE
/// exceeded", a PANIC).  `flush`: (the function, the call's return-address
/// slot), recorded by pgdbg; (0, _) or (_, 0): not known (a record of an
/// earlier pgdbg, or no such function in the binary): abandoned as is.
///
/// The flush runs exactly as pgdbg's own does: from the call's return
/// slot (its `rsp` at entry, which pgdbg wrote and which holds the return
/// address already: written again here), on the abandoned call's stack,
/// whose frames are dropped with it, and returns to the call's return
/// int3, within the call's timeout.  Should the guardian die meanwhile,
/// the backend's own repair recognizes that return (`rsp` one past the
/// slot, callrepair.rs) as it would pgdbg's flush.  A flush that does not
/// return there is itself abandoned like the call: the saved registers
/// are put back whatever happened.
fn abandon_at_error_trap(t: &mut Target, c: &Call, flush: (u64, u64)) -> Result<String> {
    let (func, slot) = flush;
    if func == 0 || slot == 0 {
        return abandon(t, "call abandoned at its error trap");
    }
    let mut r = t.regs()?;
    if r.rsp >= slot {
        // not inside the call's frames: not the call's error
        return abandon(t, "call abandoned at its error trap");
    }
    // the slot decides where the backend's memory is written and where
    // code runs: only one shaped as pgdbg makes it (16-byte alignment at
    // entry less the return address, below the red zone and a page under
    // the backend's own frames), else no flush
    if slot % 16 != 8 || slot + 8 > c.regs.rsp.saturating_sub(256 + 4096) {
        return abandon(t, "call abandoned at its error trap");
    }
    t.write(slot, &c.ret.to_le_bytes())?;
    r.rsp = slot;
    r.rip = func;
    // no system call to restart under these registers (as infcall.rs)
    r.orig_rax = u64::MAX;
    r.rax = 0;
    t.set_regs(&r)?;
    t.resume()?;
    // FlushErrorState takes microseconds: signals are held back meanwhile,
    // so the flush gets a second at most, not a second call timeout
    let limit = c.timeout.min(std::time::Duration::from_secs(1));
    match wait_for_return(t, c, limit)? {
        Ran::Returned => abandon(t, "call abandoned at its error trap, error state flushed"),
        Ran::Gone => Ok("backend ended".into()),
        Ran::ErrorTrap | Ran::Signal(_) | Ran::TimedOut => abandon(
            t,
            "call abandoned at its error trap (the error state flush did not return)",
        ),
    }
}

fn abandon(t: &mut Target, how: impl Into<String>) -> Result<String> {
    if !t.is_stopped() {
        return Err(anyhow!("internal: abandoning a call of a running backend"));
    }
    Ok(how.into())
}

impl Target {
    /// Record a call about to start (see the module comment): the guardian
    /// is started first if it is not running yet.
    pub fn note_call_in_flight(
        &mut self,
        regs: &Registers,
        xstate: &XState,
        ret: u64,
        traps: &[u64],
        timeout: std::time::Duration,
    ) -> Result<()> {
        // (the handler page's NOT_OWN bit 0 comes with the registers:
        // `call_registers_coming`; until then they are the backend's own)
        if let Some(g) = self.guardian()? {
            g.note_call(regs, xstate.bytes(), ret, timeout.as_millis() as u64);
        }
        // the same in the backend's own memory, for when the guardian is
        // gone too (callrepair.rs)
        self.write_call_repair(regs, xstate, ret, traps);
        self.trap_repair_ret = ret;
        Ok(())
    }

    /// A call's registers are about to be written: from now until
    /// [`Target::forget_call_in_flight`] they may not be the backend's own,
    /// and the SIGCONT handler must not let it run on by itself
    /// (selfrelease.rs; before this, with the backend's own registers, it
    /// puts the data words back and lets it run).  An error: the call must
    /// not start.
    pub fn call_registers_coming(&mut self) -> Result<()> {
        // a record that cannot repair must be known to the handler as such
        // (bit 3) before a call's registers are written
        if self.trap_repair_off && !self.release_sees(8) {
            return Err(anyhow!(
                "the backend's record of the call could not be written, nor its self-release \
                 turned off: the call is refused"
            ));
        }
        self.note_release_not_own(1, true)
    }

    /// The call's registers are about to be written (`armed`), or the
    /// saved ones put back (not armed).
    pub fn call_in_flight_phase(&mut self, armed: bool) {
        // an inferior call runs the backend even in someone else's stop
        // (it must return; outside.rs)
        self.set_in_call(armed);
        if let Some(g) = &mut self.guardian {
            g.call_phase(if armed { CALL_ARMED } else { CALL_RESTORING });
        }
        if !armed {
            self.disarm_call_repair();
        }
    }

    /// The call's registers are in the backend: the handler's record may
    /// be used from now on (callrepair.rs).
    pub fn call_regs_written(&mut self) {
        self.mark_call_repair(self.trap_repair_ret);
    }

    /// The registers and xstate are back (or could not be put back: the
    /// backend runs on from here all the same, and the handler must not
    /// act on a call's state that is gone): the record goes.
    pub fn forget_call_in_flight(&mut self) {
        if let Some(g) = &mut self.guardian {
            g.forget_call();
        }
        self.end_call_repair();
        // not cleared: the backend no longer releases itself (the handler
        // would repair it from this record once it has run on)
        if let Err(e) = self.note_release_not_own(1, false)
            && let Err(e) = self.disarm_self_release(e)
        {
            super::log::debug(&format!("{e:#}"));
        }
    }

    /// A data word about to be changed around calls, and its value to put
    /// back if pgdbg dies.
    pub fn note_data_word(&mut self, addr: u64, orig: &[u8]) -> Result<()> {
        self.hold_for_change()?;
        if let Some(g) = self.guardian()? {
            g.note_data(addr, orig)?;
        }
        self.note_repair_data_word(addr, orig);
        Ok(())
    }

    /// The data words are back.
    pub fn forget_data_words(&mut self) {
        if let Some(g) = &mut self.guardian {
            g.forget_data();
        }
        self.forget_repair_data_words();
    }

    /// An injected system call about to start: `code` the bytes borrowed
    /// at `at`, `trailer` whether it runs with its signal frame
    /// (sigframe.rs).  The SIGCONT handler is told (NOT_OWN bit 1) that
    /// the registers are not the backend's own, so that it stops the
    /// backend again rather than let it run on there; not for a system
    /// call with its frame while no other bit is set: the handler lets the
    /// backend run on in the injected code, which restores itself
    /// (selfrelease/handler.rs recognizes the trailer's bytes at AT_ENTRY;
    /// it runs there only if the call's blocked mask is not in place: with
    /// it SIGCONT waits for the trailer's `rt_sigreturn`).
    pub(in crate::inferior) fn note_syscall_in_flight(
        &mut self,
        regs: &Registers,
        at: u64,
        code: &[u8],
        trailer: bool,
    ) -> Result<()> {
        let alone = trailer && self.release_not_own_is(0);
        if !alone && !self.disarm_in_injected_code(at) {
            self.note_release_not_own(2, true)?;
        }
        if let Some(g) = self.guardian()? {
            g.note_syscall(regs, at, code, trailer);
        }
        Ok(())
    }

    pub(in crate::inferior) fn forget_syscall_in_flight(&mut self) {
        if let Some(g) = &mut self.guardian {
            g.forget_syscall();
        }
        if let Err(e) = self.note_release_not_own(2, false) {
            super::log::debug(&format!("{e:#}"));
        }
    }
}
