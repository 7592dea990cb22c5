//! The handler installed in the target, kept and removed: the injected
//! `mmap` and `rt_sigaction`, the table of armed addresses written as
//! int3s are armed or their code unmapped, stepping the target out of
//! the handler, and the action and pages put back at detach.

use super::{
    ACT_DFL, ACT_NEW, ACT_OLD, ADDR_MASK, CAP, ENTRY, INERT, MAP_LEN, PAGE, SA_WORDS, SEL,
    TABLE_BYTES, TrapHandler, action, emit, release_layout, sa_bytes,
};
use crate::inferior::signals::TRAP_UNK;
use crate::inferior::{Target, callrepair, procfs, selfrelease};
use anyhow::{Result, anyhow, bail};

impl Target {
    /// The disarm's own `fcntl`, injected at `at`: the handler stops the
    /// backend again inside code injected there when the page records
    /// that address, so this one system call needs no NOT_OWN bit (whose
    /// write may be what just failed).
    pub(in crate::inferior) fn disarm_in_injected_code(&mut self, at: u64) -> bool {
        let Some(base) = self
            .trap
            .as_ref()
            .filter(|h| h.release.as_ref().is_some_and(|r| r.disarming()))
            .map(|h| h.base)
        else {
            return false;
        };
        let mut b = [0u8; 8];
        at != 0 && self.read(base + ENTRY, &mut b).is_ok() && u64::from_le_bytes(b) == at
    }

    /// Install the handler if it is not there yet (before the first int3 or
    /// debug register).  The target must be stopped; a failure leaves the
    /// target as it was and is only logged (the guardian still restores
    /// the target, only the window before it acts stays open).
    pub(in crate::inferior) fn ensure_trap_handler(&mut self) {
        if self.trap.is_some()
            || self.trap_refused
            || self.state.is_gone()
            || !self.state.is_stopped()
        {
            return;
        }
        if crate::config::get().no_trap_handler {
            self.trap_refused = true;
            return;
        }
        if let Err(e) = self.install_trap_handler() {
            self.trap_refused = true;
            crate::inferior::log::debug(&format!("no SIGTRAP handler in the target: {e:#}"));
            return;
        }
        if let Some(base) = self.trap.as_ref().map(|h| h.base) {
            self.install_self_release(base, &release_layout());
        }
    }

    fn install_trap_handler(&mut self) -> Result<()> {
        if self.guardian()?.is_none() {
            // the guardian itself never installs one
            bail!("in the guardian");
        }
        let base = self.map_pages(None, MAP_LEN, libc::PROT_READ | libc::PROT_WRITE)?;
        let mut h = TrapHandler::adopted(base, None);
        if let Some(g) = &mut self.guardian {
            g.note_trap(base, None);
        }
        let res = (|| -> Result<()> {
            let code = emit(base);
            self.write(base, &code)?;
            self.write(base + SEL, &h.half_addr(0).to_le_bytes())?;
            let entry = procfs::auxv_entry(self.pid()).unwrap_or(0);
            self.write(base + ENTRY, &entry.to_le_bytes())?;
            self.write(base + ACT_DFL, &[0u8; SA_WORDS * 8])?;
            // the layout of the data page, for a later reader of the call
            // record (callrepair.rs); the record itself stays zero: no call
            self.write(
                base + callrepair::LAYOUT,
                &callrepair::LAYOUT_MAGIC.to_le_bytes(),
            )?;
            let r = self.inject_syscall(
                libc::SYS_mprotect,
                [
                    base,
                    PAGE,
                    (libc::PROT_READ | libc::PROT_EXEC) as u64,
                    0,
                    0,
                    0,
                ],
            )?;
            if r < 0 {
                bail!("mprotect in the target failed (errno {})", -r);
            }
            // the action now in place, read first and recorded for the
            // guardian before ours replaces it
            let r = self.inject_syscall(
                libc::SYS_rt_sigaction,
                [libc::SIGTRAP as u64, 0, base + ACT_OLD, 8, 0, 0],
            )?;
            if r < 0 {
                bail!("rt_sigaction in the target failed (errno {})", -r);
            }
            let mut b = [0u8; SA_WORDS * 8];
            self.read(base + ACT_OLD, &mut b)?;
            let mut old = [0u64; SA_WORDS];
            for (i, w) in old.iter_mut().enumerate() {
                *w = u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
            }
            if old[0] != libc::SIG_DFL as u64 {
                bail!("the target has a SIGTRAP action of its own ({:#x})", old[0]);
            }
            h.old = Some(old);
            if let Some(g) = &mut self.guardian {
                g.note_trap(base, Some(&old));
            }
            let new = action(base);
            self.write(base + ACT_NEW, &sa_bytes(&new))?;
            h.installed = true;
            let r = self.inject_syscall(
                libc::SYS_rt_sigaction,
                [libc::SIGTRAP as u64, base + ACT_NEW, 0, 8, 0, 0],
            )?;
            if r < 0 {
                bail!("rt_sigaction in the target failed (errno {})", -r);
            }
            Ok(())
        })();
        self.trap = Some(h);
        if let Err(e) = res {
            let _ = self.remove_trap_handler();
            return Err(e);
        }
        // addresses already armed (none normally)
        let armed: Vec<(u64, u8)> = self.inserted.iter().map(|(a, b)| (*a, *b)).collect();
        for (a, b) in armed {
            self.note_trap_address(a, b)?;
        }
        Ok(())
    }

    /// Make sure the handler knows `addr` (an int3 about to be written over
    /// `orig`): one 8-byte write the first time, none after.
    pub(in crate::inferior) fn note_trap_address(&mut self, addr: u64, orig: u8) -> Result<()> {
        let pid = self.pid();
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        if h.known.contains(&addr) || orig == 0xcc {
            return Ok(());
        }
        let e = h.entry(pid, addr, orig);
        if (h.entries.len() as u64) < CAP {
            let at = h.half_addr(h.half) + 8 * h.entries.len() as u64;
            h.entries.push(addr);
            h.known.insert(addr);
            return self.write(at, &e.to_le_bytes());
        }
        // full: this address, the one of the current stop (its int3 may
        // be removed already, its SIGTRAP still pending) and the addresses
        // armed now into the other half, zeros after them, then the switch
        let stop_at = if self.state.is_stopped() {
            self.regs()
                .ok()
                .map(|r| crate::arch::abi::int3_address(r.rip))
        } else {
            None
        };
        let h = self.trap.as_ref().expect("handler");
        let mut list: Vec<(u64, u8)> = vec![(addr, orig)];
        if let Some(s) = stop_at
            && s != addr
            && h.known.contains(&s)
        {
            let b = self
                .inserted
                .get(&s)
                .copied()
                .or_else(|| self.original_byte_in_table(s));
            if let Some(b) = b {
                list.push((s, b));
            }
        }
        for (&a, &b) in &self.inserted {
            if !list.iter().any(|(x, _)| *x == a) {
                list.push((a, b));
            }
        }
        if list.len() >= CAP as usize {
            // an armed int3 would be missing from the table: no handler
            // rather than one that lets the backend run past an int3
            crate::inferior::log::debug(&format!(
                "SIGTRAP handler removed: {} addresses armed, its table holds {}",
                list.len(),
                CAP - 1
            ));
            // no debug register without the handler either (claim_watch):
            // every slot given back first, its owners said by the session
            let owners: Vec<String> = self.dr_owners.iter().flatten().cloned().collect();
            if !owners.is_empty() {
                self.clear_watchpoints()?;
                self.dropped_watches.extend(owners);
            }
            // nor a perf breakpoint, whose trap pending at pgdbg's death
            // the handler takes
            let perf = self.close_perf_watches();
            if !perf.is_empty() {
                self.drain_sigtrap()?;
                self.dropped_watches.extend(perf);
            }
            self.trap_refused = true;
            return self.remove_trap_handler();
        }
        let h = self.trap.as_mut().expect("handler");
        let other = 1 - h.half;
        let mut bytes = vec![0u8; TABLE_BYTES as usize];
        let mut entries = Vec::new();
        for (i, &(a, b)) in list.iter().enumerate() {
            let e = h.entry(pid, a, b);
            bytes[i * 8..i * 8 + 8].copy_from_slice(&e.to_le_bytes());
            entries.push(a);
        }
        let (half_at, sel) = (h.half_addr(other), h.base + SEL);
        self.write(half_at, &bytes)?;
        self.write(sel, &half_at.to_le_bytes())?;
        let h = self.trap.as_mut().expect("handler");
        h.half = other;
        h.known = entries.iter().copied().collect();
        h.entries = entries;
        Ok(())
    }

    /// `addr`'s code was unmapped (a library unloaded): its entry, whose
    /// byte is that code's, becomes one that matches no int3 (address 1,
    /// never a code address; a zero would end the table there), and the
    /// address is new to the handler should other code be mapped there and
    /// armed later (else that code would get the old byte back).
    pub(in crate::inferior) fn forget_trap_address(&mut self, addr: u64) -> Result<()> {
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        if !h.known.remove(&addr) {
            return Ok(());
        }
        // the mappings changed: the writable flags are looked up again
        h.exec.clear();
        let Some(i) = h.entries.iter().position(|a| *a == addr) else {
            return Ok(());
        };
        h.entries[i] = INERT;
        let at = h.half_addr(h.half) + 8 * i as u64;
        self.write(at, &INERT.to_le_bytes())
    }

    /// Whether `rip` is in the handler's code.
    pub(in crate::inferior) fn in_trap_handler(&self) -> bool {
        match (&self.trap, self.regs()) {
            (Some(h), Ok(r)) => r.rip >= h.base && r.rip < h.base + PAGE,
            _ => false,
        }
    }

    /// The target is inside our handler (a SIGTRAP delivered to it as
    /// pgdbg died, before the group stop took hold): let it run to its
    /// return, whose `rt_sigreturn` puts back the interrupted code's
    /// registers, FP state and signal mask.  With `quiet_entry` the
    /// handler's copy of AT_ENTRY is cleared first: the trap behind an
    /// injected system call (whose code the caller has put back) then makes
    /// it return instead of dying.
    pub(in crate::inferior) fn step_out_of_trap_handler(
        &mut self,
        quiet_entry: bool,
    ) -> Result<()> {
        let Some((base, release)) = self.trap.as_ref().map(|h| (h.base, h.release.is_some()))
        else {
            return Ok(());
        };
        if !self.in_trap_handler() {
            return Ok(());
        }
        if quiet_entry {
            self.write(base + ENTRY, &0u64.to_le_bytes())?;
        }
        let mut steps = 0u32;
        while self.in_trap_handler() {
            if steps == 200_000 {
                bail!("the target does not leave the SIGTRAP handler");
            }
            if let Some(stop) = self.single_step_raw()? {
                if self.state.is_gone() {
                    return Ok(());
                }
                return Err(anyhow!(
                    "the target stopped in the SIGTRAP handler: {stop:?}"
                ));
            }
            steps += 1;
        }
        if quiet_entry
            && release
            && let Some(entry) = procfs::auxv_entry(self.pid())
        {
            // the SIGCONT handler reads it too (selfrelease.rs)
            self.write(base + ENTRY, &entry.to_le_bytes())?;
        }
        Ok(())
    }

    /// Put the SIGTRAP action found back and unmap the pages unless the
    /// target is still inside the handler (only possible after pgdbg died:
    /// the guardian steps the target out of it first).
    pub(in crate::inferior) fn remove_trap_handler(&mut self) -> Result<()> {
        let Some(h) = self.trap.clone() else {
            return Ok(());
        };
        if self.state.is_gone() {
            self.trap = None;
            return Ok(());
        }
        if !self.state.is_stopped() {
            self.ensure_stopped()?;
            if self.state.is_gone() {
                self.trap = None;
                return Ok(());
            }
        }
        // the pipe and the SIGCONT action first: they need the pages
        self.remove_self_release()?;
        let base = h.base;
        if let (true, Some(old)) = (h.installed, h.old) {
            let old: [u8; SA_WORDS * 8] = sa_bytes(&old).try_into().expect("sigaction");
            self.restore_action(libc::SIGTRAP, &old, base, base + ACT_NEW, base + ACT_OLD)?;
        }
        if let Some(t) = &mut self.trap {
            t.installed = false;
        }
        if let Some(g) = &mut self.guardian {
            g.note_trap(base, None);
        }
        // inside the handler (the guardian seized the target while it ran):
        // step it out; it is straight-line code and one bounded loop
        self.step_out_of_trap_handler(false)?;
        if self.state.is_gone() {
            self.trap = None;
            return Ok(());
        }
        // The handler calls nothing and runs with every signal but SIGTRAP
        // blocked (a nested SIGTRAP's frame returns before it does), so
        // once the target is out of it nothing refers to the pages: a word
        // on the stack that points into them is a stale return address of
        // a handler that has returned (scanning the stack for such words
        // kept the pages mapped for nothing).  Only `rip` is checked.
        let rip = self.regs()?.rip;
        let in_use = rip >= base && rip < base + MAP_LEN;
        // our code still there: the pages are ours (read before the
        // record goes)
        let mut now = vec![0u8; super::code_len(base)];
        let ours = self.read(base, &mut now).is_ok() && super::holds_our_code(&now, base);
        // the record goes first: if pgdbg dies (or unmapping fails) after
        // this, the pages leak, but nobody unmaps memory the backend may
        // use by then
        self.trap = None;
        if let Some(g) = &mut self.guardian {
            g.forget_trap();
        }
        if in_use || !ours {
            crate::inferior::log::debug(&format!(
                "SIGTRAP handler pages left mapped: {}",
                if in_use {
                    "the stack points into them"
                } else {
                    "they no longer hold our code"
                }
            ));
            return Ok(());
        }
        self.unmap_pages(base, MAP_LEN)
    }

    /// Put `old` (a kernel sigaction) back as `signal`'s action, unless
    /// the target replaced ours (whose handler is at `ours`) meanwhile:
    /// then its own is kept.  `new` and `cur` are scratch words of the
    /// pages (the action to set, the one replaced).
    pub(in crate::inferior) fn restore_action(
        &mut self,
        signal: i32,
        old: &[u8; SA_WORDS * 8],
        ours: u64,
        new: u64,
        cur: u64,
    ) -> Result<()> {
        let name = nix::sys::signal::Signal::try_from(signal).map_or("a signal", |s| s.as_str());
        self.write(new, old)?;
        let r = self.inject_syscall(libc::SYS_rt_sigaction, [signal as u64, new, cur, 8, 0, 0])?;
        if r < 0 {
            bail!("cannot restore the {name} action (errno {})", -r);
        }
        let mut theirs = [0u8; SA_WORDS * 8];
        self.read(cur, &mut theirs)?;
        if u64::from_le_bytes(theirs[..8].try_into().expect("8")) != ours {
            // the target replaced our action meanwhile: keep its own
            self.write(new, &theirs)?;
            let _ =
                self.inject_syscall(libc::SYS_rt_sigaction, [signal as u64, new, 0, 8, 0, 0])?;
        }
        Ok(())
    }

    /// Whether the SIGCONT handler has let the backend run on since pgdbg
    /// and its guardian were gone (selfrelease.rs): the guardian's records
    /// of registers, data words and held-back signals are old then.  Only
    /// from pages that hold our code.
    pub(in crate::inferior) fn released_by_handler(&self) -> bool {
        let Some(base) = self.trap.as_ref().map(|h| h.base) else {
            return false;
        };
        // the SIGCONT handler calls the SIGTRAP handler's call repair:
        // where it is in these pages (another version's encodings put it
        // elsewhere)
        let mut trap = vec![0u8; super::code_len(base)];
        if self.read(base, &mut trap).is_err() || !super::holds_our_code(&trap, base) {
            return false;
        }
        let Some(repair) = super::repair_offset_in(&trap, base) else {
            return false;
        };
        let layout = selfrelease::Layout {
            repair,
            ..release_layout()
        };
        let mut now = vec![0u8; (PAGE - selfrelease::CODE) as usize];
        if self.read(base + selfrelease::CODE, &mut now).is_err()
            || !selfrelease::holds_our_code(&now, base, &layout)
        {
            return false;
        }
        let mut b = [0u8; 8];
        self.read(base + selfrelease::RELEASED, &mut b).is_ok() && u64::from_le_bytes(b) != 0
    }

    /// The original byte recorded in the active half of the table for
    /// `addr` (known, no longer armed).
    fn original_byte_in_table(&self, addr: u64) -> Option<u8> {
        let h = self.trap.as_ref()?;
        let i = h.entries.iter().position(|a| *a == addr)?;
        let mut w = [0u8; 8];
        self.read(h.half_addr(h.half) + 8 * i as u64, &mut w).ok()?;
        let e = u64::from_le_bytes(w);
        (e & ADDR_MASK == addr).then_some((e >> 56) as u8)
    }

    /// pgdbg wrote `rip` at an int3's signal-delivery stop: mark that
    /// SIGTRAP dealt with (`si_code` TRAP_UNK), or, on a kernel that
    /// delivers it when pgdbg dies at this stop (Linux 6.18 drops it), the
    /// handler would take it for a fresh hit and rewind `rip` once more (a
    /// push emulated at an int3 would run twice).
    pub(in crate::inferior) fn defuse_pending_trap(&self) -> Result<()> {
        if self.trap.is_none() || !self.state.is_stopped() {
            return Ok(());
        }
        // called only at the signal-delivery stop of one of our int3s
        // (`int3_sigtrap_live`), once: its siginfo is known, no read first;
        // the handler looks at nothing but si_code
        // SAFETY: an all-zero siginfo_t is a valid value.
        let mut si: libc::siginfo_t = unsafe { std::mem::zeroed() };
        si.si_signo = libc::SIGTRAP;
        si.si_code = TRAP_UNK;
        nix::sys::ptrace::setsiginfo(self.pid, &si)
            .map_err(|e| anyhow!("cannot mark the pending SIGTRAP as handled ({e})"))
    }
}
