//! Register access: the general registers (cached while stopped), the
//! FPU state, the debug registers and the write watchpoints set in them.

use super::*;
use crate::arch::debugregs::{self, DR7};

impl Target {
    pub fn regs(&self) -> Result<Registers> {
        if self.state.is_stopped()
            && let Some(r) = self.regs_cache.get()
        {
            return Ok(r);
        }
        let r = ptrace::getregs(self.pid).map_err(|e| anyhow!("cannot read registers ({e})"))?;
        let r = Registers::from_user(&r);
        if self.state.is_stopped() {
            self.regs_cache.set(Some(r));
        }
        Ok(r)
    }

    pub fn set_regs(&mut self, regs: &Registers) -> Result<()> {
        self.regs_cache.set(None);
        ptrace::setregs(self.pid, regs.to_user())
            .map_err(|e| anyhow!("cannot write registers ({e})"))?;
        if self.state.is_stopped() {
            self.regs_cache.set(Some(*regs));
        }
        if self.int3_sigtrap_live {
            // after the write: `rip` on the int3 with the SIGTRAP still
            // saying int3 is a state the handler gets right, `rip` one past
            // it with the SIGTRAP re-labelled is not
            self.int3_sigtrap_live = false;
            self.defuse_pending_trap()?;
        }
        Ok(())
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
        let off = debugregs::user_offset(n);
        if n == DR7
            && value != 0
            && let Some(g) = self.guardian()?
        {
            g.note_debugregs(true);
        }
        if n == DR7 && value != 0 {
            self.ensure_trap_handler();
            self.hold_for_change()?;
        }
        ptrace::write_user(self.pid, off as ptrace::AddressType, value as i64)
            .map_err(|e| anyhow!("cannot write debug register {n} ({e})"))?;
        if n == DR7 {
            self.debugregs_dirty = value != 0;
            if value == 0
                && let Some(g) = &mut self.guardian
            {
                g.note_debugregs(false);
            }
        }
        Ok(())
    }

    /// Arm a free debug-register slot (DR0-3) for `owner` ("watchpoint
    /// 2", "waits trace"): `kind` on `len` bytes (1, 2, 4, 8; naturally
    /// aligned) at `addr`; the slot.  DR0-3 are written before DR7, as
    /// the hardware wants; nothing is written when it is refused (no slot
    /// left, a length or alignment the hardware does not take).
    pub fn claim_watch(
        &mut self,
        owner: &str,
        addr: u64,
        kind: debugregs::Kind,
        len: u64,
    ) -> Result<usize> {
        let Some(slot) = self.dr_owners.iter().position(Option::is_none) else {
            // each once (a watchpoint's pieces hold several)
            let mut users: Vec<&str> = Vec::new();
            for o in self.dr_owners.iter().flatten() {
                if !users.contains(&o.as_str()) {
                    users.push(o);
                }
            }
            bail!(
                "no hardware debug register left: {} in use by {}",
                debugregs::SLOTS,
                users.join(", ")
            );
        };
        let dr7 = if self.debugregs_dirty {
            self.debugreg(DR7)?
        } else {
            0
        };
        let dr7 = debugregs::dr7_with(dr7, slot, kind, len).map_err(|e| anyhow!(e))?;
        if !addr.is_multiple_of(len) {
            bail!("a {len}-byte watchpoint must be {len}-byte aligned ({addr:#x} is not)");
        }
        // Only under our SIGTRAP handler: a debug register left behind
        // when pgdbg and its guardian both die makes the backend's next
        // access to the address a SIGTRAP, which kills it without one.
        // (The guardian itself never installs one, nor arms a register.)
        self.ensure_trap_handler();
        if self.guardian()?.is_some() && !self.trap.as_ref().is_some_and(|h| h.is_installed()) {
            bail!(
                "no SIGTRAP handler could be placed in the backend: a hardware watchpoint left behind if pgdbg and its guardian died would kill it"
            );
        }
        self.dr_owners[slot] = Some(owner.to_string());
        let r = self
            .set_debugreg(slot, addr)
            .and_then(|()| self.set_debugreg(DR7, dr7));
        if let Err(e) = r {
            let _ = self.release_watch(slot);
            return Err(e);
        }
        Ok(slot)
    }

    /// Disarm slot `slot` taken by `claim_watch`: its DR7 bits first
    /// (DR7 all clear when it was the last), then its address register
    /// (a slot of `claim_perf_watch`: its event closed).
    ///
    /// The slot stays its owner's until its DR7 bits are written away (an
    /// error leaves it armed and said as held).  When DR7 becomes all
    /// clear, a SIGTRAP the slot raised meanwhile is drained: pending, it
    /// would be taken later for an int3's (no debug register in use, no
    /// siginfo looked at: wait.rs).
    pub fn release_watch(&mut self, slot: usize) -> Result<()> {
        if slot >= super::perfwatch::FIRST {
            return self.release_perf_watch(slot);
        }
        if slot >= debugregs::SLOTS || self.dr_owners[slot].is_none() {
            return Ok(());
        }
        if self.state.is_gone() || !self.debugregs_dirty {
            self.dr_owners[slot] = None;
            return Ok(());
        }
        let dr7 = self.debugreg(DR7)?;
        let dr7 = debugregs::dr7_without(dr7, slot);
        self.set_debugreg(DR7, dr7)?;
        self.dr_owners[slot] = None;
        // the address register is cleared, but its failure does not skip
        // the drain: with DR7 at 0, a watchpoint's pending SIGTRAP just
        // past one of our int3s would be taken for that int3's
        let cleared = match self.debugreg(slot) {
            Ok(v) if v != 0 => self.set_debugreg(slot, 0),
            _ => Ok(()),
        };
        if dr7 == 0 {
            self.drain_sigtrap()?;
        }
        cleared
    }

    /// Who holds each slot (None: free).
    pub fn watch_owners(&self) -> &[Option<String>] {
        &self.dr_owners
    }

    /// The owners of the slots given back because the SIGTRAP handler was
    /// removed while they were armed (`note_trap_address`), once.
    pub fn take_dropped_watches(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dropped_watches)
    }

    /// Disable every watchpoint (DR7 first, then DR0-3).
    pub fn clear_watchpoints(&mut self) -> Result<()> {
        if !self.debugregs_dirty || self.state.is_gone() {
            self.dr_owners = Default::default();
            return Ok(());
        }
        self.set_debugreg(DR7, 0)?;
        self.dr_owners = Default::default();
        // only the slots that hold an address: writing one that was never
        // used makes the kernel reserve a breakpoint slot for the thread
        // until it exits (perf and BPF watchpoints on the backend would
        // then find none free)
        for n in 0..debugregs::SLOTS {
            if self.debugreg(n).is_ok_and(|v| v != 0) {
                let _ = self.set_debugreg(n, 0);
            }
        }
        self.drain_sigtrap()
    }

    pub fn debugreg(&self, n: usize) -> Result<u64> {
        let off = debugregs::user_offset(n);
        let v = ptrace::read_user(self.pid, off as ptrace::AddressType)
            .map_err(|e| anyhow!("cannot read debug register {n} ({e})"))?;
        Ok(v as u64)
    }
}
