//! The target process: ptrace attach/detach, the wait loop, registers and
//! memory.  Nothing in here knows about PostgreSQL or DWARF.
//!
//! Invariants kept by this layer:
//! * attach is `PTRACE_SEIZE` + `PTRACE_INTERRUPT`: no SIGSTOP is ever left
//!   pending in the target;
//! * a running target is stopped with `PTRACE_INTERRUPT`, never with a signal
//!   (for a backend SIGINT is a query cancel);
//! * signals the target receives are passed straight through unless they are
//!   faults the user must see;
//! * after a breakpoint trap `rip` is rewound to the breakpoint address before
//!   the stop is reported, so a stop never leaves `rip` in the middle of an
//!   instruction.

pub mod detour;
pub mod guardian;
pub mod procfs;
pub mod recorder;
pub mod regs;
pub mod signals;
pub mod traphandler;
pub mod xstate;

use anyhow::{Context, Result, anyhow, bail};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::{BTreeMap, VecDeque};
use std::io::IoSliceMut;

pub use regs::Registers;

const INT3: u8 = 0xcc;
const SI_KERNEL: i32 = 0x80;
const TRAP_BRKPT: i32 = 1;
const TRAP_TRACE: i32 = 2;
const TRAP_HWBKPT: i32 = 4;

/// Why the target stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// An int3 we inserted was hit; `rip` has been rewound to `addr`.
    Breakpoint { addr: u64 },
    /// A hardware debug register fired (DR6 low bits).
    HardwareBreak { dr6: u64 },
    /// Stopped by `interrupt()` (user Ctrl-C or a tool request).
    Interrupted,
    /// A signal the user should see (a fault); it will be delivered on the
    /// next resume unless discarded.
    Signal(Signal),
    /// The target exited with a status.
    Exited(i32),
    /// The target was killed by a signal.
    Killed(Signal),
    /// pgdbg itself was asked to terminate (SIGTERM/SIGHUP) while waiting;
    /// the target is stopped and must be detached.
    ToolTerminating,
}

/// A traced process.
pub struct Target {
    pid: Pid,
    /// Addresses where an int3 is currently written, with the original byte.
    inserted: BTreeMap<u64, u8>,
    /// Signals that arrived while we could not deliver them (during a
    /// single-step); delivered on the next resume.
    deferred: VecDeque<Signal>,
    /// A fault signal reported to the user, delivered on the next resume.
    pending_fault: Option<Signal>,
    /// Number of PTRACE_INTERRUPTs whose event stop has not been seen.
    interrupts_outstanding: u32,
    /// Interrupts whose stop will still arrive after another stop was
    /// reported first; their event stops are swallowed.
    stale_interrupts: u32,
    /// Set once the target is gone (exited/killed); nothing to restore.
    gone: bool,
    /// Whether the target is currently stopped under ptrace.
    stopped: bool,
    /// How many times the target was let run: a stop's derived state (its
    /// frames) is valid while this has not moved.
    runs: u64,
    /// Debug registers we have modified (DR7 non-zero).
    debugregs_dirty: bool,
    attached: bool,
    /// Registers of the current stop (valid while stopped).
    regs_cache: std::cell::Cell<Option<Registers>>,
    /// The cached registers hold a change not yet written to the kernel
    /// (rip rewound onto an int3): written before the target runs or is
    /// detached, or dropped when a step-over writes all registers anyway.
    regs_dirty: bool,
    /// The (original) first bytes of the instructions under our int3s, for
    /// step-over emulation without reading them at every hit.
    code_cache: std::collections::HashMap<u64, [u8; 4]>,
    /// /proc/PID/mem, for one-syscall writes (text pages included).
    mem: Option<std::fs::File>,
    /// Jumps to code of ours written over function entries (detour.rs).
    detours: Vec<detour::Detour>,
    /// The process that restores the backend if pgdbg dies (guardian.rs),
    /// started before the first change.
    guardian: Option<guardian::Guardian>,
    /// Our SIGTRAP handler in the target (traphandler.rs), installed with
    /// the first int3 or debug register.
    trap: Option<traphandler::TrapHandler>,
    /// Installing it failed or is not wanted: not tried again.
    trap_refused: bool,
}

/// Outcome of checking for a pending tool signal while waiting.
pub trait WaitHooks {
    /// The user pressed Ctrl-C: the wait should interrupt the target.
    fn user_interrupt(&self) -> bool;
    /// pgdbg received SIGTERM/SIGHUP: stop the target and return.
    fn terminate(&self) -> bool;
    /// Called with true before blocking in waitpid and false after.
    fn waiting(&self, _blocked: bool) {}
}

/// Hooks that never interrupt.
pub struct NoHooks;
impl WaitHooks for NoHooks {
    fn user_interrupt(&self) -> bool {
        false
    }
    fn terminate(&self) -> bool {
        false
    }
}

impl Target {
    /// Seize and stop `pid`.  The caller has already checked that the process
    /// exists and is a sensible target.
    pub fn attach(pid: i32) -> Result<Target> {
        Self::attach_prepared(pid, |_| {})
    }

    /// `attach`, with `prepare` run on the target after the seize and
    /// before the first stop is waited for (the guardian hands over the
    /// breakpoints it restores, so a trap of one of them is recognized).
    pub(crate) fn attach_prepared(pid: i32, prepare: impl FnOnce(&mut Target)) -> Result<Target> {
        let pid = Pid::from_raw(pid);
        ptrace::seize(pid, ptrace::Options::empty()).map_err(|e| match e {
            Errno::EPERM => anyhow!(
                "no permission to trace process {pid}: run pgdbg as the same user as the server or as root (and check kernel.yama.ptrace_scope)"
            ),
            Errno::ESRCH => anyhow!("no process with PID {pid}: check the PID (pg_stat_activity.pid)"),
            e => anyhow!("cannot attach to process {pid}: {e}"),
        })?;
        let mut t = Target {
            pid,
            inserted: BTreeMap::new(),
            deferred: VecDeque::new(),
            pending_fault: None,
            interrupts_outstanding: 0,
            stale_interrupts: 0,
            gone: false,
            stopped: false,
            runs: 0,
            debugregs_dirty: false,
            attached: true,
            regs_cache: std::cell::Cell::new(None),
            regs_dirty: false,
            code_cache: std::collections::HashMap::new(),
            mem: std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(format!("/proc/{}/mem", pid.as_raw()))
                .ok(),
            detours: Vec::new(),
            guardian: None,
            trap: None,
            trap_refused: false,
        };
        prepare(&mut t);
        t.interrupt()?;
        match t.wait(&NoHooks)? {
            Stop::Interrupted => {}
            Stop::Exited(c) => bail!("process {pid} exited (status {c}) while attaching"),
            Stop::Killed(s) => bail!("process {pid} was killed by {s:?} while attaching"),
            other => {
                // A fault at the moment of attach: keep it for delivery.
                log::debug(&format!("attach stop: {other:?}"));
            }
        }
        Ok(t)
    }

    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    pub fn is_gone(&self) -> bool {
        self.gone
    }

    /// Changes each time the target runs (see `set_running`).
    pub fn run_count(&self) -> u64 {
        self.runs
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Interrupt, unless an interrupt whose stop has not been seen is
    /// already pending (the kernel merges them: a second one would be
    /// counted but never stop the target); then adopt that one.
    fn interrupt_or_adopt(&mut self) -> Result<()> {
        if self.stale_interrupts > 0 {
            self.stale_interrupts -= 1;
            self.interrupts_outstanding += 1;
            return Ok(());
        }
        if self.interrupts_outstanding > 0 {
            return Ok(());
        }
        self.interrupt()
    }

    /// The event stop of one of our PTRACE_INTERRUPTs was seen while a
    /// loop of our own was waiting for something else: account for it.
    fn interrupt_stop_seen(&mut self) {
        if self.stale_interrupts > 0 {
            self.stale_interrupts -= 1;
        } else if self.interrupts_outstanding > 0 {
            self.interrupts_outstanding -= 1;
        }
    }

    /// Ask a running target to stop (PTRACE_INTERRUPT).
    pub fn interrupt(&mut self) -> Result<()> {
        if self.gone {
            return Ok(());
        }
        ptrace::interrupt(self.pid).context("PTRACE_INTERRUPT")?;
        self.interrupts_outstanding += 1;
        Ok(())
    }

    // ---------------------------------------------------------------- memory

    /// Read `buf.len()` bytes at `addr` (one process_vm_readv).
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let len = buf.len();
        let remote = [RemoteIoVec {
            base: addr as usize,
            len,
        }];
        let mut local = [IoSliceMut::new(buf)];
        match process_vm_readv(self.pid, &mut local, &remote) {
            Ok(n) if n == len => {}
            Ok(n) => bail!("cannot read {len} bytes at {addr:#x}: only {n} readable"),
            Err(e) => bail!("cannot access memory at address {addr:#x} ({e})"),
        }
        self.hide_breakpoints(addr, buf);
        Ok(())
    }

    /// Read several ranges with a single syscall.  Each range must be readable.
    pub fn read_many(&self, ranges: &mut [(u64, &mut [u8])]) -> Result<()> {
        let remote: Vec<RemoteIoVec> = ranges
            .iter()
            .map(|(a, b)| RemoteIoVec {
                base: *a as usize,
                len: b.len(),
            })
            .collect();
        let total: usize = remote.iter().map(|r| r.len).sum();
        let mut local: Vec<IoSliceMut> =
            ranges.iter_mut().map(|(_, b)| IoSliceMut::new(b)).collect();
        let n = process_vm_readv(self.pid, &mut local, &remote)
            .map_err(|e| anyhow!("cannot read target memory ({e})"))?;
        if n != total {
            bail!("cannot read target memory: short read ({n} of {total} bytes)");
        }
        drop(local);
        for (a, b) in ranges.iter_mut() {
            self.hide_breakpoints(*a, b);
        }
        Ok(())
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn read_u32(&self, addr: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Read a NUL-terminated string of at most `max` bytes.
    pub fn read_cstr(&self, addr: u64, max: usize) -> Result<(Vec<u8>, bool)> {
        let mut out = Vec::new();
        let mut a = addr;
        while out.len() < max {
            // read up to the end of the page
            let page_left = 4096 - (a as usize & 4095);
            let n = page_left.min(max - out.len()).min(256);
            let mut buf = vec![0u8; n];
            self.read(a, &mut buf)?;
            if let Some(p) = buf.iter().position(|&c| c == 0) {
                out.extend_from_slice(&buf[..p]);
                return Ok((out, true));
            }
            out.extend_from_slice(&buf);
            a += n as u64;
        }
        Ok((out, false))
    }

    /// Hide inserted int3 bytes from readers.
    fn hide_breakpoints(&self, addr: u64, buf: &mut [u8]) {
        let end = addr + buf.len() as u64;
        for (&a, &orig) in self.inserted.range(addr..end) {
            buf[(a - addr) as usize] = orig;
        }
    }

    /// Write bytes into the target, read-only text included: one pwrite to
    /// /proc/PID/mem, else PTRACE_POKEDATA word by word.  The target must
    /// be stopped.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        if let Some(f) = &self.mem {
            use std::os::unix::fs::FileExt;
            if f.write_all_at(data, addr).is_ok() {
                return Ok(());
            }
        }
        let mut off = 0usize;
        while off < data.len() {
            let a = addr + off as u64;
            let aligned = a & !7;
            let word = ptrace::read(self.pid, aligned as ptrace::AddressType)
                .map_err(|e| anyhow!("cannot read target memory at {aligned:#x} ({e})"))?;
            let mut bytes = (word as u64).to_le_bytes();
            let start = (a - aligned) as usize;
            let n = (8 - start).min(data.len() - off);
            bytes[start..start + n].copy_from_slice(&data[off..off + n]);
            ptrace::write(
                self.pid,
                aligned as ptrace::AddressType,
                u64::from_le_bytes(bytes) as i64,
            )
            .map_err(|e| anyhow!("cannot write target memory at {aligned:#x} ({e})"))?;
            off += n;
        }
        Ok(())
    }

    /// Write an int3 at `addr`, remembering the original byte.
    pub fn insert_breakpoint(&mut self, addr: u64) -> Result<()> {
        if self.inserted.contains_key(&addr) {
            return Ok(());
        }
        if self.in_detour(addr) {
            bail!("{addr:#x} is under a jump pgdbg wrote (an in-process recorder)");
        }
        let mut orig = [0u8; 1];
        self.read(addr, &mut orig)?;
        if let Some(g) = self.guardian()? {
            g.note_breakpoint(addr, orig[0])?;
        }
        self.ensure_trap_handler();
        self.note_trap_address(addr, orig[0])?;
        self.write(addr, &[INT3])?;
        self.inserted.insert(addr, orig[0]);
        Ok(())
    }

    /// Restore the original byte at `addr`.
    pub fn remove_breakpoint(&mut self, addr: u64) -> Result<()> {
        if let Some(orig) = self.inserted.get(&addr).copied() {
            if !self.gone {
                self.write(addr, &[orig])?;
            }
            self.inserted.remove(&addr);
            self.code_cache.remove(&addr);
            if let Some(g) = &mut self.guardian {
                g.forget_breakpoint(addr);
            }
        }
        Ok(())
    }

    /// Forget the int3 at `addr` without writing: the code it was in was
    /// unmapped (a library unloaded), so there is nothing to restore, and
    /// detach must not write the old byte over whatever is mapped there
    /// later.
    pub fn forget_breakpoint(&mut self, addr: u64) {
        if self.inserted.remove(&addr).is_some() {
            self.code_cache.remove(&addr);
            if let Some(g) = &mut self.guardian {
                g.forget_breakpoint(addr);
            }
        }
    }

    /// The guardian of this target, started on first use (guardian.rs).
    fn guardian(&mut self) -> Result<Option<&mut guardian::Guardian>> {
        if self.guardian.is_none() {
            self.guardian = guardian::Guardian::start(self.pid())?;
        }
        Ok(self.guardian.as_mut())
    }

    /// The address of our int3 just behind `rip`, if the instruction that
    /// last ran (or was about to report) is one of them.
    fn int3_behind_rip(&self) -> Result<Option<u64>> {
        let addr = self.regs()?.rip.wrapping_sub(1);
        Ok(self.inserted.contains_key(&addr).then_some(addr))
    }

    /// Put `rip` back on the breakpoint at `addr` (the int3 stood in for
    /// the instruction there, which has not run).
    fn rewind_to(&mut self, addr: u64) -> Result<()> {
        let mut regs = self.regs()?;
        regs.rip = addr;
        if !self.stopped {
            return self.set_regs(&regs);
        }
        // written lazily: most stops end in a step-over that writes all
        // registers anyway (one PTRACE_SETREGS per hit instead of two)
        self.regs_cache.set(Some(regs));
        self.regs_dirty = true;
        Ok(())
    }

    /// Write registers changed only in the cache (before the target runs).
    fn flush_regs(&mut self) -> Result<()> {
        if !self.regs_dirty {
            return Ok(());
        }
        let r = self
            .regs_cache
            .get()
            .ok_or_else(|| anyhow!("internal: changed registers lost"))?;
        ptrace::setregs(self.pid, r.to_user())
            .map_err(|e| anyhow!("cannot write registers ({e})"))?;
        self.regs_dirty = false;
        self.defuse_pending_trap()
    }

    /// Every address where an int3 of ours is written.
    pub fn inserted_addresses(&self) -> Vec<u64> {
        self.inserted.keys().copied().collect()
    }

    pub fn breakpoint_inserted(&self, addr: u64) -> bool {
        self.inserted.contains_key(&addr)
    }

    /// Original (file) bytes at an address, as the code would be without us.
    pub fn original_byte(&self, addr: u64) -> Option<u8> {
        self.inserted.get(&addr).copied()
    }

    // ------------------------------------------------------------- registers

    pub fn regs(&self) -> Result<Registers> {
        if self.stopped
            && let Some(r) = self.regs_cache.get()
        {
            return Ok(r);
        }
        let r = ptrace::getregs(self.pid).map_err(|e| anyhow!("cannot read registers ({e})"))?;
        let r = Registers::from_user(&r);
        if self.stopped {
            self.regs_cache.set(Some(r));
        }
        Ok(r)
    }

    pub fn set_regs(&mut self, regs: &Registers) -> Result<()> {
        self.regs_cache.set(None);
        ptrace::setregs(self.pid, regs.to_user())
            .map_err(|e| anyhow!("cannot write registers ({e})"))?;
        self.regs_dirty = false;
        if self.stopped {
            self.regs_cache.set(Some(*regs));
        }
        self.defuse_pending_trap()
    }

    /// Read the registers from the kernel (not the cache) and check that
    /// what matters to the target's code equals `want`: every general
    /// register, rip, `orig_rax` (a restarted system call), the FS/GS bases
    /// (thread-local storage) and the arithmetic flags.
    pub fn check_regs_read_back(&self, want: &Registers) -> Result<()> {
        let r =
            ptrace::getregs(self.pid).map_err(|e| anyhow!("cannot read registers back ({e})"))?;
        let got = Registers::from_user(&r);
        const ARITH_FLAGS: u64 = 0xcd5; // CF PF AF ZF SF DF OF
        let mut a = got;
        let mut b = *want;
        for x in [&mut a, &mut b] {
            x.eflags &= ARITH_FLAGS;
            (x.cs, x.ss, x.ds, x.es, x.fs, x.gs) = (0, 0, 0, 0, 0, 0);
        }
        if a != b {
            bail!("the registers read back after writing them differ: {got:x?} (wanted {want:x?})");
        }
        Ok(())
    }

    pub fn fpregs(&self) -> Result<libc::user_fpregs_struct> {
        let mut fp: libc::user_fpregs_struct = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_GETFPREGS,
                self.pid.as_raw(),
                std::ptr::null_mut::<libc::c_void>(),
                &mut fp as *mut _ as *mut libc::c_void,
            )
        };
        if r < 0 {
            bail!("cannot read FP registers ({})", Errno::last());
        }
        Ok(fp)
    }

    pub fn set_fpregs(&mut self, fp: &libc::user_fpregs_struct) -> Result<()> {
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETFPREGS,
                self.pid.as_raw(),
                std::ptr::null_mut::<libc::c_void>(),
                fp as *const _ as *mut libc::c_void,
            )
        };
        if r < 0 {
            bail!("cannot write FP registers ({})", Errno::last());
        }
        Ok(())
    }

    /// Write debug register `n` (0-7).
    pub fn set_debugreg(&mut self, n: usize, value: u64) -> Result<()> {
        let off = debugreg_offset(n);
        if n == 7
            && value != 0
            && let Some(g) = self.guardian()?
        {
            g.note_debugregs(true);
        }
        if n == 7 && value != 0 {
            self.ensure_trap_handler();
        }
        ptrace::write_user(self.pid, off as ptrace::AddressType, value as i64)
            .map_err(|e| anyhow!("cannot write debug register {n} ({e})"))?;
        if n == 7 {
            self.debugregs_dirty = value != 0;
            if value == 0
                && let Some(g) = &mut self.guardian
            {
                g.note_debugregs(false);
            }
        }
        Ok(())
    }

    /// Arm debug-register slot `slot` (0-3) as a write watchpoint of
    /// `len` bytes (1, 2, 4, 8; naturally aligned) at `addr`.  DR0-3 are
    /// written before DR7, as the hardware wants.
    pub fn set_write_watchpoint(&mut self, slot: usize, addr: u64, len: u64) -> Result<()> {
        if slot > 3 {
            bail!("only 4 hardware watchpoints exist");
        }
        if !addr.is_multiple_of(len) {
            bail!("a {len}-byte watchpoint must be {len}-byte aligned ({addr:#x} is not)");
        }
        let len_bits = match len {
            1 => 0b00,
            2 => 0b01,
            4 => 0b11,
            8 => 0b10,
            _ => bail!("watchpoint length must be 1, 2, 4 or 8"),
        };
        self.set_debugreg(slot, addr)?;
        let mut dr7 = self.debugreg(7).unwrap_or(0);
        let shift = 16 + slot * 4;
        dr7 &= !(0b1111u64 << shift);
        dr7 |= (0b01u64 | (len_bits << 2)) << shift; // RW = write
        dr7 |= 1 << (slot * 2); // local enable
        self.set_debugreg(7, dr7)?;
        Ok(())
    }

    /// Disable every watchpoint (DR7 first, then DR0-3).
    pub fn clear_watchpoints(&mut self) -> Result<()> {
        if !self.debugregs_dirty || self.gone {
            return Ok(());
        }
        self.set_debugreg(7, 0)?;
        for n in 0..4 {
            let _ = self.set_debugreg(n, 0);
        }
        self.drain_sigtrap()
    }

    pub fn debugreg(&self, n: usize) -> Result<u64> {
        let off = debugreg_offset(n);
        let v = ptrace::read_user(self.pid, off as ptrace::AddressType)
            .map_err(|e| anyhow!("cannot read debug register {n} ({e})"))?;
        Ok(v as u64)
    }

    // -------------------------------------------------------------- running

    /// Resume the target (delivering any deferred signal) and wait for the
    /// next stop the user should see.  Breakpoint stepping is the caller's
    /// business: call `step_over_breakpoint` first when `rip` sits on one.
    pub fn cont_and_wait(&mut self, hooks: &dyn WaitHooks) -> Result<Stop> {
        self.resume()?;
        self.wait(hooks)
    }

    /// The signal to deliver with the next resume (a fault the user saw,
    /// else the first deferred one); any further deferred signals are
    /// re-sent to the target with kill(2).
    fn signal_to_deliver(&mut self) -> Option<Signal> {
        let sig = self
            .pending_fault
            .take()
            .or_else(|| self.deferred.pop_front());
        while let Some(s) = self.deferred.pop_front() {
            let _ = nix::sys::signal::kill(self.pid, s);
        }
        sig
    }

    /// Resume the target (delivering any deferred signal) without waiting;
    /// `wait` collects the next stop.
    pub fn resume(&mut self) -> Result<()> {
        let sig = self.signal_to_deliver();
        self.flush_regs()?;
        ptrace::cont(self.pid, sig)
            .map_err(|e| anyhow!("cannot resume process {} ({e})", self.pid))?;
        self.set_running();
        Ok(())
    }

    /// Execute one instruction with the original code at `addr` (where an
    /// int3 of ours is inserted and `rip == addr`), then put the int3 back.
    /// Signals arriving meanwhile are deferred to the next resume.
    pub fn step_over_breakpoint(&mut self, addr: u64) -> Result<Option<Stop>> {
        let orig = match self.inserted.get(&addr) {
            Some(&b) => b,
            None => return Ok(None),
        };
        if self.emulate_at(addr)? {
            return Ok(None);
        }
        self.write(addr, &[orig])?;
        let res = self.single_step_raw();
        // Re-insert even when the step failed, unless the target is gone.
        if !self.gone {
            self.write(addr, &[INT3])?;
        } else {
            self.inserted.clear();
        }
        res
    }

    /// A cheaper place than `entry` for a probe that only reads argument
    /// registers: the first `mov r64, r64` after the `endbr64`/`push`/`nop` run
    /// that starts a function.  Up to there the argument registers hold
    /// what they held at entry (pushes only move rsp), and stepping over a
    /// register move writes no memory.  `entry` itself when the function
    /// starts otherwise.
    pub fn register_only_point(&self, entry: u64) -> u64 {
        let mut code = [0u8; 32];
        if self.read(entry, &mut code).is_err() {
            return entry;
        }
        let mut off = 0usize;
        while off + 4 <= code.len() {
            let Some((len, _)) = regs::decode_push_or_nop(&code[off..]) else {
                break;
            };
            off += len as usize;
        }
        match regs::decode_mov_reg(&code[off..]) {
            Some((_, dst, _)) if off > 0 && dst != 4 => entry + off as u64,
            _ => entry,
        }
    }

    /// Step over simple instructions without single-stepping: function
    /// prologues start with `push %reg` or `endbr64`, which are emulated
    /// (the int3 stays in place, no extra stop).  Returns false when the
    /// instruction at `addr` is not one of those.
    fn emulate_at(&mut self, addr: u64) -> Result<bool> {
        let code = match self.code_cache.get(&addr) {
            Some(c) => *c,
            None => {
                let mut code = [0u8; 4];
                if self.read(addr, &mut code).is_err() {
                    return Ok(false);
                }
                self.code_cache.insert(addr, code);
                code
            }
        };
        let mut r = self.regs()?;
        if r.rip != addr {
            return Ok(false);
        }
        if let Some((len, dst, src)) = regs::decode_mov_reg(&code) {
            // a register copy: no memory touched (never into rsp here)
            if dst == 4 {
                return Ok(false);
            }
            let v = r.gpr(src);
            *r.gpr_mut(dst) = v;
            r.rip = addr + len;
            self.set_regs(&r)?;
            return Ok(true);
        }
        let Some((len, pushed)) = regs::decode_push_or_nop(&code) else {
            return Ok(false);
        };
        if let Some(v) = pushed.map(|n| r.gpr(n)) {
            let sp = r.rsp - 8;
            if self.write(sp, &v.to_le_bytes()).is_err() {
                // e.g. a stack page not grown yet: single-step instead
                return Ok(false);
            }
            r.rsp = sp;
        }
        r.rip = addr + len;
        self.set_regs(&r)?;
        Ok(true)
    }

    /// Single-step once; returns Some(stop) only when the target died or a
    /// breakpoint was hit in the single instruction (cannot happen for the
    /// instruction itself).
    fn single_step_raw(&mut self) -> Result<Option<Stop>> {
        loop {
            self.flush_regs()?;
            ptrace::step(self.pid, None).map_err(|e| anyhow!("PTRACE_SINGLESTEP failed ({e})"))?;
            self.set_running();
            let status = self.waitpid_blocking()?;
            match status {
                WaitStatus::Exited(_, code) => {
                    self.mark_gone();
                    return Ok(Some(Stop::Exited(code)));
                }
                WaitStatus::Signaled(_, sig, _) => {
                    self.mark_gone();
                    return Ok(Some(Stop::Killed(sig)));
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.stopped = true;
                    let code = self.siginfo_code().unwrap_or(TRAP_TRACE);
                    if code == TRAP_TRACE || code == TRAP_BRKPT || code == TRAP_HWBKPT {
                        return Ok(None);
                    }
                    // Some other trap (a late watchpoint hit): never handed to
                    // the backend (a SIGTRAP kills it); step again.
                }
                WaitStatus::Stopped(_, sig) if signals::pass_through(sig) => {
                    // A signal arrived before the instruction ran: defer it,
                    // step again without it.
                    self.stopped = true;
                    self.deferred.push_back(sig);
                }
                WaitStatus::Stopped(_, sig) => {
                    // The instruction itself faults: report it (stepping
                    // again would fault forever).
                    self.stopped = true;
                    self.pending_fault = Some(sig);
                    return Ok(Some(Stop::Signal(sig)));
                }
                WaitStatus::PtraceEvent(_, _, _) => {
                    self.stopped = true;
                    self.interrupt_stop_seen();
                    // step again
                }
                _ => {
                    self.stopped = true;
                }
            }
        }
    }

    fn siginfo_code(&self) -> Option<i32> {
        ptrace::getsiginfo(self.pid).ok().map(|si| si.si_code)
    }

    /// The target runs (or is gone): cached registers are stale, and so is
    /// whatever a caller derived from this stop (`run_count` moves on).
    fn set_running(&mut self) {
        self.runs = self.runs.wrapping_add(1);
        self.stopped = false;
        self.regs_cache.set(None);
        self.regs_dirty = false;
    }

    fn mark_gone(&mut self) {
        self.gone = true;
        self.set_running();
        self.attached = false;
        self.inserted.clear();
        self.trap = None;
        if let Some(g) = &mut self.guardian {
            g.forget_all();
        }
    }

    fn waitpid_blocking(&mut self) -> Result<WaitStatus> {
        loop {
            match waitpid(self.pid, Some(WaitPidFlag::__WALL)) {
                Ok(s) => return Ok(s),
                Err(Errno::EINTR) => continue,
                Err(Errno::ECHILD) => {
                    self.mark_gone();
                    bail!("process {} is gone", self.pid)
                }
                Err(e) => bail!("waitpid failed ({e})"),
            }
        }
    }

    /// Wait for the next stop worth reporting.  Pass-through signals are
    /// re-delivered at once; stale interrupt stops are swallowed.  When
    /// pgdbg itself gets Ctrl-C (`hooks.user_interrupt`) or SIGTERM/SIGHUP
    /// (`hooks.terminate`) while waiting, the target is interrupted.
    pub fn wait(&mut self, hooks: &dyn WaitHooks) -> Result<Stop> {
        let mut interrupted_for_tool = false;
        let mut interrupted_for_user = false;
        loop {
            // Checked before every blocking wait, not only on EINTR: the
            // signal may have arrived while we were busy elsewhere.
            if !self.stopped {
                if hooks.terminate() && !interrupted_for_tool {
                    interrupted_for_tool = true;
                    if !interrupted_for_user {
                        self.interrupt_or_adopt()?;
                    }
                } else if !interrupted_for_user && !interrupted_for_tool && hooks.user_interrupt() {
                    interrupted_for_user = true;
                    self.interrupt_or_adopt()?;
                }
            }
            hooks.waiting(true);
            let waited = waitpid(self.pid, Some(WaitPidFlag::__WALL));
            hooks.waiting(false);
            let status = match waited {
                Ok(s) => s,
                Err(Errno::EINTR) => continue,
                Err(Errno::ECHILD) => {
                    self.mark_gone();
                    return Ok(Stop::Exited(-1));
                }
                Err(e) => bail!("waitpid failed ({e})"),
            };
            let terminating = interrupted_for_tool || hooks.terminate();
            match status {
                WaitStatus::Exited(_, code) => {
                    self.mark_gone();
                    return Ok(Stop::Exited(code));
                }
                WaitStatus::Signaled(_, sig, _) => {
                    self.mark_gone();
                    return Ok(Stop::Killed(sig));
                }
                WaitStatus::PtraceEvent(_, _sig, ev) if ev == libc::PTRACE_EVENT_STOP => {
                    self.stopped = true;
                    if self.stale_interrupts > 0 && !terminating && !interrupted_for_user {
                        // The stop of an interrupt that lost the race against
                        // another stop reported earlier: swallow it.
                        self.stale_interrupts -= 1;
                        self.cont_raw(None)?;
                        continue;
                    }
                    if self.stale_interrupts > 0 {
                        self.stale_interrupts -= 1;
                    } else if self.interrupts_outstanding > 0 {
                        self.interrupts_outstanding -= 1;
                    }
                    // The interrupt may have landed just after one of our
                    // int3s executed, before its SIGTRAP was taken: rip is
                    // one past the breakpoint.  Rewind now, while the int3
                    // is still known; the queued SIGTRAP is swallowed when it
                    // is reported (or drained at detach).
                    if let Some(bp) = self.int3_behind_rip()?
                        && self.sigtrap_pending()
                    {
                        self.rewind_to(bp)?;
                    }
                    if terminating {
                        return self.reported(Stop::ToolTerminating);
                    }
                    // Our interrupt (attach, Ctrl-C, an explicit stop) or a
                    // group-stop by someone's SIGSTOP.
                    return self.reported(Stop::Interrupted);
                }
                WaitStatus::PtraceEvent(_, _, _) => {
                    self.stopped = true;
                    self.cont_raw(None)?;
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.stopped = true;
                    // An int3 of ours just executed?  Without debug registers
                    // in use no other trap can look like one (no siginfo
                    // needed); with them, siginfo must say it was an int3.
                    let ours = match self.int3_behind_rip()? {
                        Some(a) if !self.debugregs_dirty => Some(a),
                        Some(a) => matches!(
                            self.siginfo_code().unwrap_or(SI_KERNEL),
                            SI_KERNEL | TRAP_BRKPT
                        )
                        .then_some(a),
                        None => None,
                    };
                    if let Some(addr) = ours {
                        self.rewind_to(addr)?;
                        if terminating {
                            return self.reported(Stop::ToolTerminating);
                        }
                        return self.reported(Stop::Breakpoint { addr });
                    }
                    let code = self.siginfo_code().unwrap_or(SI_KERNEL);
                    // Anything else is a debug event: a watchpoint hit (its
                    // si_code is not always TRAP_HWBKPT), a late one after
                    // the watchpoint was cleared, or a stray trap.  A SIGTRAP
                    // is never handed to the backend: it would kill it.
                    let dr6 = if self.debugregs_dirty {
                        self.debugreg(6).unwrap_or(0)
                    } else {
                        0
                    };
                    if dr6 & 0xf != 0 {
                        let _ = self.set_debugreg(6, 0);
                        if terminating {
                            return self.reported(Stop::ToolTerminating);
                        }
                        return self.reported(Stop::HardwareBreak { dr6 });
                    }
                    log::debug(&format!(
                        "swallowed a SIGTRAP (si_code {code}, dr6 {dr6:#x})"
                    ));
                    if terminating {
                        return self.reported(Stop::ToolTerminating);
                    }
                    self.cont_raw(None)?;
                }
                WaitStatus::Stopped(_, sig) => {
                    self.stopped = true;
                    if signals::pass_through(sig) {
                        if terminating {
                            // Keep the signal for delivery at detach.
                            self.deferred.push_back(sig);
                            return self.reported(Stop::ToolTerminating);
                        }
                        self.cont_raw(Some(sig))?;
                        continue;
                    }
                    self.pending_fault = Some(sig);
                    return self.reported(Stop::Signal(sig));
                }
                _ => {
                    self.stopped = true;
                    self.cont_raw(None)?;
                }
            }
        }
    }

    fn cont_raw(&mut self, sig: Option<Signal>) -> Result<()> {
        self.flush_regs()?;
        ptrace::cont(self.pid, sig)
            .map_err(|e| anyhow!("cannot resume process {} ({e})", self.pid))?;
        self.set_running();
        Ok(())
    }

    /// Bookkeeping when a stop is handed to the caller: interrupts still in
    /// flight become stale (their stop will come later and is swallowed).
    fn reported(&mut self, stop: Stop) -> Result<Stop> {
        self.stale_interrupts += self.interrupts_outstanding;
        self.interrupts_outstanding = 0;
        Ok(stop)
    }

    /// Make sure the target is stopped (interrupting it if it runs).
    pub fn ensure_stopped(&mut self) -> Result<Option<Stop>> {
        if self.stopped || self.gone {
            return Ok(None);
        }
        self.interrupt()?;
        let s = self.wait(&NoHooks)?;
        Ok(Some(s))
    }

    /// Take the signals waiting for delivery (a call must not receive
    /// them); give them back with `restore_pending_signals`.
    pub fn take_pending_signals(&mut self) -> (Option<Signal>, VecDeque<Signal>) {
        (
            self.pending_fault.take(),
            std::mem::take(&mut self.deferred),
        )
    }

    pub fn restore_pending_signals(&mut self, p: (Option<Signal>, VecDeque<Signal>)) {
        self.pending_fault = p.0;
        let mut d = p.1;
        d.extend(self.deferred.drain(..));
        self.deferred = d;
    }

    /// Discard a fault signal instead of delivering it.
    pub fn discard_pending_fault(&mut self) {
        self.pending_fault = None;
    }

    /// Whether the kernel holds a SIGTRAP for the target that it has not
    /// delivered yet (/proc/PID/status SigPnd/ShdPnd).
    fn sigtrap_pending(&self) -> bool {
        let Ok(st) = std::fs::read_to_string(format!("/proc/{}/status", self.pid)) else {
            return false;
        };
        let bit = 1u64 << (libc::SIGTRAP - 1);
        st.lines().any(|l| {
            (l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
                && u64::from_str_radix(l.split_whitespace().nth(1).unwrap_or("0"), 16).unwrap_or(0)
                    & bit
                    != 0
        })
    }

    /// Consume a SIGTRAP the kernel still holds for the target (a
    /// watchpoint that fired as we stopped it): let it be reported to us
    /// and drop it, so it is not delivered after we detach.
    pub fn drain_sigtrap(&mut self) -> Result<()> {
        for _ in 0..8 {
            if self.gone || !self.stopped || !self.sigtrap_pending() {
                return Ok(());
            }
            self.cont_raw(None)?;
            match self.waitpid_blocking()? {
                WaitStatus::Exited(_, _) | WaitStatus::Signaled(_, _, _) => {
                    self.mark_gone();
                    return Ok(());
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.stopped = true;
                    // rewind if it was one of our int3s after all
                    if let Some(bp) = self.int3_behind_rip()? {
                        self.rewind_to(bp)?;
                    }
                }
                WaitStatus::Stopped(_, sig) => {
                    self.stopped = true;
                    self.deferred.push_back(sig);
                }
                WaitStatus::PtraceEvent(_, _, _) => {
                    self.stopped = true;
                    self.interrupt_stop_seen();
                }
                _ => self.stopped = true,
            }
        }
        Ok(())
    }

    /// Restore every code byte and debug register and detach.  Safe to call
    /// more than once and on a dead target.
    /// Let go without restoring anything (the guardian found another
    /// process under the PID): records dropped, a signal kept at attach
    /// delivered.
    pub(super) fn detach_untouched(&mut self) -> Result<()> {
        self.inserted.clear();
        self.debugregs_dirty = false;
        self.detours.clear();
        self.trap = None;
        self.regs_dirty = false;
        if !self.attached || self.gone {
            return Ok(());
        }
        self.attached = false;
        let sig = self
            .pending_fault
            .take()
            .or_else(|| self.deferred.pop_front());
        while let Some(s) = self.deferred.pop_front() {
            let _ = nix::sys::signal::kill(self.pid, s);
        }
        self.set_running();
        match ptrace::detach(self.pid, sig) {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(e) => Err(anyhow!("cannot detach from process {} ({e})", self.pid)),
        }
    }

    pub fn detach(&mut self) -> Result<()> {
        if !self.attached || self.gone {
            self.attached = false;
            return Ok(());
        }
        if !self.stopped {
            self.ensure_stopped()?;
            if self.gone {
                return Ok(());
            }
        }
        let mut first_err: Option<anyhow::Error> = None;
        // A SIGTRAP still queued for one of our int3s: take it while the
        // breakpoint is known, so rip is rewound (drained again below).
        if let Some(bp) = self.int3_behind_rip()?
            && self.sigtrap_pending()
        {
            self.rewind_to(bp)?;
        }
        if let Err(e) = self.remove_all_detours() {
            first_err.get_or_insert(e);
        }
        let addrs: Vec<u64> = self.inserted.keys().copied().collect();
        for a in addrs {
            if let Err(e) = self.remove_breakpoint(a) {
                first_err.get_or_insert(e);
            }
        }
        if self.debugregs_dirty {
            if let Err(e) = self.set_debugreg(7, 0) {
                first_err.get_or_insert(e);
            }
            for n in 0..4 {
                let _ = self.set_debugreg(n, 0);
            }
        }
        // a SIGTRAP the kernel still holds would kill the backend after
        // we leave: take it now
        if let Err(e) = self.drain_sigtrap() {
            first_err.get_or_insert(e);
        }
        // our SIGTRAP handler last: nothing of ours can trap any more
        if let Err(e) = self.remove_trap_handler() {
            first_err.get_or_insert(e);
        }
        self.deferred.retain(|s| *s != Signal::SIGTRAP);
        if self.pending_fault == Some(Signal::SIGTRAP) {
            self.pending_fault = None;
        }
        let sig = self.signal_to_deliver();
        if self.gone {
            self.attached = false;
            return Ok(());
        }
        if let Err(e) = self.flush_regs() {
            first_err.get_or_insert(e);
        }
        match ptrace::detach(self.pid, sig) {
            Ok(()) => {}
            Err(Errno::ESRCH) => {}
            Err(e) => {
                first_err.get_or_insert(anyhow!("PTRACE_DETACH failed ({e})"));
            }
        }
        self.attached = false;
        self.set_running();
        if let Some(g) = &mut self.guardian {
            // clean when everything was restored; else it tries again
            g.finish();
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.attached && !self.gone {
            let _ = self.detach();
        }
    }
}

fn debugreg_offset(n: usize) -> usize {
    std::mem::offset_of!(libc::user, u_debugreg) + n * 8
}

/// Minimal debug logging, enabled with PGDBG_DEBUG=1.
pub mod log {
    pub fn debug(msg: &str) {
        if std::env::var_os("PGDBG_DEBUG").is_some() {
            crate::errln!("pgdbg-debug: {msg}");
        }
    }
}
