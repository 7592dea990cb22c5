//! The jump over in the target: the pages a detour's jump leads to
//! mapped (`map_jump_page`), a taken-over jump found and undone at each
//! look (`detour_taken_over`) or at its trap (`fault_in_taken_over_jump`,
//! `rewind_wild_landing`), and the SIGILL it leaves queued taken
//! (`drain_sigill`).  What is decided without the target is in
//! jumpover.rs.

use super::{
    ILL_ILLOPN, JumpPages, PAGE, TakenOver, UD64, jump_traps, landing_page_free, landing_pages,
    landings, sigill_of_jump, trapping_targets,
};
use crate::inferior::detour::{Detour, JMP_LEN};
use crate::inferior::{INT3, Target, procfs};
use anyhow::{Result, bail};
use nix::sys::signal::Signal;

impl Target {
    /// What follows a detour's jump in the backend once a uprobe's removal
    /// put the file's byte back before its `rel32`: the displaced bytes
    /// past the jump, then up to one longest instruction (15 bytes) of the
    /// code after them, as far as it is mapped.
    pub(in crate::inferior) fn after_jump(&self, site: u64, orig: &[u8]) -> Vec<u8> {
        let mut out = orig.get(JMP_LEN..).unwrap_or_default().to_vec();
        let next = site + orig.len() as u64;
        for n in (1..=15usize).rev() {
            let mut b = vec![0u8; n];
            if self.read(next, &mut b).is_ok() {
                out.extend_from_slice(&b);
                break;
            }
        }
        out
    }

    /// Map one page of code (read and execute) for a detour at `site` that
    /// displaces `len` bytes and whose code is `text_len` bytes, placed so
    /// that the jump traps wherever a uprobe makes the backend enter it
    /// (`trapping_targets`, `jump_traps` with the bytes really there), and
    /// so that wherever a uprobe inside its `rel32` makes it lead
    /// (`landings`) there is filler that traps: in the code page outside
    /// the code, or in a reserved landing page mapped here too.
    /// Refused when no such set of pages is free: a jump that may not trap
    /// could run its `rel32` as code under someone's uprobe, and one that
    /// may lead to unmapped memory would kill the backend with SIGSEGV, so
    /// the caller does without the detour.
    pub(in crate::inferior) fn map_jump_page(
        &mut self,
        site: u64,
        len: usize,
        text_len: u64,
    ) -> Result<JumpPages> {
        let maps = procfs::maps(self.pid())?;
        let mut sorted = maps.clone();
        sorted.sort_by_key(|m| m.start);
        let mut orig = vec![0u8; len];
        self.read(site, &mut orig)?;
        let after = self.after_jump(site, &orig);
        let traps = |entry: u64| {
            crate::inferior::detour::jmp(site, entry)
                .is_ok_and(|j| jump_traps(orig[0], &j[1..], &after))
        };
        // Each landing in the code page must be on its filler (never in
        // the code: running it from the middle would do anything); each
        // one elsewhere must be in a page free now (`landing_page_free`),
        // to be mapped below.  None when some landing cannot be so.
        let landing_set = |page: u64, entry: u64| -> Option<Vec<u64>> {
            for l in landings(site, entry, &orig) {
                let p = l & !(PAGE - 1);
                let ok = if p == page {
                    !(entry..entry + text_len).contains(&l)
                } else {
                    landing_page_free(&sorted, p)
                };
                if !ok {
                    return None;
                }
            }
            Some(landing_pages(site, entry, &orig, page))
        };
        let found: Vec<(u64, u64, Vec<u64>)> = trapping_targets(&maps, site, text_len)
            .into_iter()
            .filter(|&(_, entry)| traps(entry))
            .filter_map(|(page, entry)| Some((page, entry, landing_set(page, entry)?)))
            .take(8)
            .collect();
        for (page, entry, landings) in found {
            if let Some(code) = self.map_landing_set(page, &landings)? {
                return Ok(JumpPages {
                    code,
                    entry,
                    landings,
                });
            }
        }
        bail!(
            "no free page within jump reach of {site:#x} makes the jump there trap wherever another tool's uprobe makes it lead"
        )
    }

    /// Map the code page at `page` and the landing pages `landings`, each
    /// exactly there (MAP_FIXED_NOREPLACE: never over anything mapped
    /// meanwhile), the landing pages filled with the trapping filler
    /// (`UD64`) at once: an anonymous page is zeros, and `00 00` is
    /// `add [rax], al`.  Nothing can run in any of them yet (no jump leads
    /// there before `install_detour`).  None, with whatever was mapped
    /// unmapped again, when one of them cannot go there; an error after
    /// the same cleanup.
    fn map_landing_set(&mut self, page: u64, landings: &[u64]) -> Result<Option<u64>> {
        let prot = libc::PROT_READ | libc::PROT_EXEC;
        let Some(code) = self.map_page_at(page, prot)? else {
            return Ok(None);
        };
        let mut mapped: Vec<u64> = Vec::new();
        let mut res = Ok(true);
        for &p in landings {
            res = match self.map_page_at(p, prot) {
                Ok(Some(_)) => {
                    mapped.push(p);
                    self.write(p, &[UD64[0]; PAGE as usize]).map(|_| true)
                }
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            };
            if !matches!(res, Ok(true)) {
                break;
            }
        }
        if matches!(res, Ok(true)) {
            return Ok(Some(code));
        }
        // (best effort: the first error is the one reported)
        for p in mapped.into_iter().chain([code]) {
            let _ = self.unmap_pages(p, PAGE);
        }
        res.map(|_| None)
    }

    /// Whether someone else has changed the jump of the detour at `site`
    /// since pgdbg wrote it, and what.  When it was uprobes (each byte
    /// that is no longer ours is a foreign int3 or the file's byte: byte
    /// 0, or in the `rel32`, where it makes the jump lead elsewhere), the original bytes are put back
    /// now around the uprobes' int3s, which are left to the kernel.
    /// Otherwise (`Changed`) nothing is written and the pages stay mapped
    /// (`remove_detour`).  Once taken over, the
    /// detour stays so (it only waits for removal, which then writes
    /// nothing).  None while the jump is pgdbg's.  The target must be
    /// stopped.
    pub fn detour_taken_over(&mut self, site: u64) -> Result<Option<TakenOver>> {
        let Some(d) = self.detours.iter().find(|d| d.site == site).cloned() else {
            return Ok(None);
        };
        if d.taken_over.is_some() {
            return Ok(d.taken_over);
        }
        // a detour adopted from an earlier pgdbg: its jump is not known
        let Some(entry) = d.entry else {
            return Ok(None);
        };
        let jump = crate::inferior::detour::jmp(site, entry)?;
        let mut now = vec![0u8; d.orig.len()];
        self.read(site, &mut now)?;
        if now[..JMP_LEN] == jump {
            return Ok(None);
        }
        let file = crate::inferior::foreign::mapped_file_bytes(self.pid(), site, JMP_LEN);
        // a uprobe's int3 where the file has none: at any byte of the jump,
        // not only at an original instruction boundary, since the kernel
        // also takes a uprobe at an offset inside an instruction when the
        // file's bytes decode from there (tracefs `p:/path:0x...`); the
        // same positions as `landings`
        let uprobe_at = |i: usize| {
            now[i] == INT3
                && d.orig[i] != INT3
                && file.as_ref().is_none_or(|f| f.get(i) != Some(&INT3))
        };
        // each byte is still ours, a uprobe's int3, or the file's byte (a
        // uprobe's removal writes the file's byte back)
        let by_uprobes =
            (0..JMP_LEN).all(|i| now[i] == jump[i] || uprobe_at(i) || now[i] == d.orig[i]);
        let mut kind = if !by_uprobes {
            TakenOver::Changed
        } else if uprobe_at(0) {
            TakenOver::Int3
        } else if now[0] == d.orig[0] && now[0] != jump[0] {
            TakenOver::FileByte
        } else {
            TakenOver::Inside
        };
        // the positions written: the original bytes after the first, but
        // never a uprobe's int3 (the kernel owns it, and writes the file's
        // byte there when the uprobe goes); when someone else changed the
        // jump, none: a byte still equal to ours may be theirs now (their
        // own jump's 0xe9), and their code may lead into our page, which
        // therefore stays mapped (`remove_detour`)
        let write_at: Vec<usize> = if kind == TakenOver::Changed {
            Vec::new()
        } else {
            // byte 0 too when it is still our 0xe9 (uprobes inside only)
            (0..d.orig.len())
                .filter(|&i| !(i < JMP_LEN && uprobe_at(i)))
                .filter(|&i| i > 0 || now[0] == jump[0])
                .collect()
        };
        let undone = kind.repaired();
        // The write that undoes the jump, in runs of consecutive
        // positions, as the file has the bytes.  Nothing can be executing
        // them: the target is stopped, and a resume inside them had
        // trapped at once (`UD64`).  `write_from` writes only those bytes
        // unless it has to fall back to whole words, which read and write
        // back their neighbours (a uprobe's int3 or byte 0): then those
        // are checked again below.
        let mut words = false;
        let mut i = 0;
        while i < write_at.len() {
            let mut j = i;
            while j + 1 < write_at.len() && write_at[j + 1] == write_at[j] + 1 {
                j += 1;
            }
            let (a, b) = (write_at[i], write_at[j] + 1);
            words |= self.write_from(site + a as u64, &d.orig[a..b])?;
            i = j + 1;
        }
        if words && undone {
            // the word-wise fallback: the positions left alone still hold
            // a uprobe's int3 or the file's byte, else someone else has
            // the code now
            let mut b = vec![0u8; JMP_LEN];
            self.read(site, &mut b)?;
            let kept = (0..JMP_LEN).filter(|i| !write_at.contains(i));
            if kept.clone().any(|i| b[i] != INT3 && b[i] != d.orig[i]) {
                crate::inferior::log::debug(&format!(
                    "detour at {site:#x}: {b:x?} after the undo: not only uprobes' int3s and the file's bytes"
                ));
                kind = TakenOver::Changed;
            }
        }
        // The guardian must not write the original bytes over a uprobe's
        // int3 if pgdbg dies now; the pages stay known to the detour
        // table and are unmapped at removal.  When someone else changed
        // the jump, nothing is written there by anyone of pgdbg's: the
        // guardian forgets the detour too (its pages then stay mapped).
        if let Some(g) = &mut self.guardian {
            g.forget_detour(site);
        }
        if let Some(x) = self.detours.iter_mut().find(|x| x.site == site) {
            x.taken_over = Some(kind);
        }
        // (a position found changed after the word-wise undo says Changed,
        // but the bytes written are the original ones all the same)
        if undone {
            // one entry per site: a later jump at the same site replaces
            // an earlier one's (whose SIGILL was drained at install)
            self.undone_jumps.retain(|x| x.site != site);
            self.undone_jumps.push(Detour {
                taken_over: Some(kind),
                ..d.clone()
            });
        }
        crate::inferior::log::debug(&format!("detour at {site:#x} taken over: {kind:?}"));
        Ok(Some(kind))
    }

    /// At a stop with a fault signal: whether it is the trap of a resume
    /// inside a detour's jump that someone's uprobe took over, at an
    /// original instruction boundary (`sigill_of_jump`).  Then the jump is
    /// undone (now, or already at a poll: `detour_taken_over`) and the
    /// signal must not be delivered: resumed at the instruction that
    /// trapped, the backend runs its original code.  Told by the fault's
    /// own address (`si_addr`, the instruction that raised #UD), so a
    /// SIGILL reported late (queued before a poll's stop, taken at the
    /// next resume, perhaps during an injected system call or after the
    /// detour's removal) is recognised too.  A fault there anywhere else,
    /// or over a jump whose bytes may not trap, or another signal, is left
    /// to be reported and delivered: pgdbg does not guess how much of some
    /// other code ran.  One SIGILL at most is dropped per undone jump: the
    /// bytes are the original ones after it, so another SIGILL there is
    /// the code's own, and a resume can never trap in a loop.
    pub(in crate::inferior) fn fault_in_taken_over_jump(&mut self, sig: Signal) -> Result<bool> {
        if sig != Signal::SIGILL || (self.detours.is_empty() && self.undone_jumps.is_empty()) {
            return Ok(false);
        }
        let Ok(si) = nix::sys::ptrace::getsiginfo(self.pid) else {
            return Ok(false);
        };
        // #UD in user mode is reported as ILL_ILLOPN with the faulting
        // instruction in si_addr (arch/x86/kernel/traps.c); anything else
        // (kill, sigqueue, some other fault) is not the trap of a jump
        if si.si_code != ILL_ILLOPN {
            return Ok(false);
        }
        // SAFETY: a kernel-generated SIGILL's siginfo carries si_addr.
        let at = unsafe { si.si_addr() } as u64;
        // The jump ran with a uprobe's int3 (or the file's byte) in its
        // rel32 and landed on the filler of its code page or of a
        // reserved landing page (`wild_landing`).  Taken
        // at the fault (rip there): resumed at the function's start.
        // Taken late (queued, reported during an injected system call
        // whose registers are put back afterwards): dropped all the same,
        // the registers kept; the resume at the filler traps again, and
        // that SIGILL is taken at the fault.
        if let Some(site) = self.wild_landing(at) {
            if self.regs()?.rip == at {
                self.rewind_wild_landing()?;
            }
            crate::inferior::log::debug(&format!(
                "{sig:?} at {at:#x}: the jump at {site:#x} landed wide (a uprobe inside it)"
            ));
            return Ok(true);
        }
        let inside = |d: &Detour| at >= d.site && at < d.site + d.orig.len() as u64;
        if let Some(d) = self.detours.iter().find(|d| inside(d)).cloned()
            && d.taken_over.is_none()
        {
            self.detour_taken_over(d.site)?;
        }
        let Some(d) = self.undone_jumps.iter().find(|d| inside(d)).cloned() else {
            return Ok(false);
        };
        // what is there now, read after the undo
        let mut now = vec![0u8; (d.site + d.orig.len() as u64 - at) as usize];
        if self.read(at, &mut now).is_err() {
            now.clear();
        }
        // a uprobe at byte 0: seen when the jump was taken over, or now
        let uprobe_at_0 = d.taken_over == Some(TakenOver::Int3)
            || (self.byte_in_target(d.site) == Some(INT3)
                && d.orig[0] != INT3
                && !self.inserted.contains_key(&d.site));
        let resume = sigill_of_jump(&d, at, uprobe_at_0, &now);
        if resume {
            self.undone_jumps.retain(|x| x.site != d.site);
        }
        crate::inferior::log::debug(&format!(
            "{sig:?} at {at:#x} inside the jump at {:#x}: {}",
            d.site,
            if resume { "dropped" } else { "delivered" }
        ));
        Ok(resume)
    }

    /// The site of the detour whose jump leads to `at` when uprobes
    /// changed bytes of its `rel32` (`landings`), `at` being on trapping
    /// filler of that detour's: in its code page outside the code (checked
    /// at the choice, `map_jump_page`) or in one of its reserved landing
    /// pages (all filler).  No code of the backend's or of pgdbg's leads
    /// there but that jump: a trap at exactly such an address is the jump
    /// run with a uprobe's int3 (or the file's byte, the uprobe gone) in
    /// its `rel32`, and nothing else.
    fn wild_landing(&self, at: u64) -> Option<u64> {
        self.detours
            .iter()
            .chain(self.undone_jumps.iter())
            .find(|d| {
                let ours = (d.code.0..d.code.0 + d.code.1).contains(&at)
                    || d.landings.iter().any(|&p| (p..p + PAGE).contains(&at));
                ours && d
                    .entry
                    .is_some_and(|e| landings(d.site, e, &d.orig).contains(&at))
            })
            .map(|d| d.site)
    }

    /// When the target is stopped at a wild landing of a detour's jump
    /// (`wild_landing`): the jump is undone and rip set back to the
    /// detour's site.  The jump is the first instruction at the function's
    /// start and has no effect but on rip, and the filler traps before
    /// doing anything (#UD), so no instruction of the function ran: the
    /// target is then exactly as it was when it ran the jump, and runs its
    /// original code (and the uprobe) from the function's start.  Whether
    /// it was.
    pub(in crate::inferior) fn rewind_wild_landing(&mut self) -> Result<bool> {
        let mut r = self.regs()?;
        let Some(site) = self.wild_landing(r.rip) else {
            return Ok(false);
        };
        if self
            .detours
            .iter()
            .any(|x| x.site == site && x.taken_over.is_none())
        {
            self.detour_taken_over(site)?;
        }
        // undone before the rewind: never back into a jump of ours
        let mut b = [0u8; 1];
        self.read(site, &mut b)?;
        if b[0] == 0xe9 {
            bail!("the jump at {site:#x} is still in place: the backend is left where it stopped");
        }
        r.rip = site;
        self.set_regs(&r)?;
        // (kept while a SIGILL is still queued: it may be this jump's)
        if !self.sigill_pending() {
            self.undone_jumps.retain(|x| x.site != site);
        }
        Ok(true)
    }

    /// Whether the kernel holds a SIGILL for the target that it has not
    /// delivered yet and that a resume would make it take at once (not
    /// blocked: the kernel unblocks a fault's own SIGILL).
    pub(in crate::inferior) fn sigill_pending(&self) -> bool {
        let Ok(st) = std::fs::read_to_string(format!("/proc/{}/status", self.pid)) else {
            return false;
        };
        let mask = |key: &str| {
            st.lines()
                .filter(|l| l.starts_with(key))
                .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
                .fold(0, |a, b| a | b)
        };
        let bit = 1u64 << (libc::SIGILL - 1);
        (mask("SigPnd:") | mask("ShdPnd:")) & bit != 0 && mask("SigBlk:") & bit == 0
    }

    /// Take a SIGILL the kernel still holds for the target (a jump's trap
    /// queued as pgdbg stopped the backend for something else) while the
    /// undone jumps are known: dropped when it is one of theirs, else held
    /// to be delivered as it would have been.  Left pending at detach, the
    /// backend would take it untraced and die of it; at a new detour's
    /// install, the entries it could refer to are then all stale.  The
    /// resume runs no code of the backend: a pending unblocked signal is
    /// taken (a signal-delivery stop) before any instruction.
    pub(in crate::inferior) fn drain_sigill(&mut self) -> Result<()> {
        self.drain_pending(4, Self::sigill_pending, true)
    }
}
