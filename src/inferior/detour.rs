//! Detours: a `jmp` written over the first instructions of a function, to
//! code of ours in pages mapped into the target, which then runs the
//! displaced instructions and jumps back.  Unlike an int3, a detour costs
//! the target no stop: the code it jumps to runs inside the target at full
//! speed (see `recorder.rs`), and if pgdbg dies without cleaning up
//! (SIGKILL) the target goes on working, since the jump leads to valid
//! code.  Nothing here knows about PostgreSQL.
//!
//! Safety rules kept here:
//! * the displaced instructions are decoded (iced-x86) and must be plain
//!   (no branch, nothing relative to rip), so they run the same anywhere;
//! * no branch of the function's own code may land inside the bytes the
//!   `jmp` overwrites (the function is disassembled to check);
//! * pages are mapped and unmapped by system calls the target makes itself
//!   (`inject_syscall`, injected.rs: at the ELF entry point, which never runs again,
//!   with every register restored afterwards; with a signal frame on the
//!   target's stack whose `rt_sigreturn` restores it by itself should
//!   every pgdbg process die meanwhile (sigframe.rs), or `syscall; int3`
//!   in the group stop where that frame is refused);
//! * removal puts the original bytes back first, steps the target out of
//!   our code if it is inside it, and unmaps the pages only when no word
//!   of the stack points into them (a signal handler that interrupted our
//!   code would return there); otherwise they stay mapped, harmlessly.

use super::{Target, procfs};
use crate::arch::fragments;
use anyhow::{Context, Result, bail};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic};

/// Length of `jmp rel32`.
pub const JMP_LEN: usize = fragments::JMP_REL32_LEN;
const PAGE: u64 = 4096;
/// How far a `rel32` reaches, with a margin.
const REACH: u64 = (1 << 31) - (1 << 24);

/// A detour in place.
#[derive(Debug, Clone)]
pub struct Detour {
    pub site: u64,
    /// The original bytes under the jump (whole instructions).
    pub orig: Vec<u8>,
    /// Our code: mapping start and length.
    pub code: (u64, u64),
    /// Our data pages: mapping start and length.
    pub data: (u64, u64),
    /// Where the jump leads (in `code`); None for a detour adopted from an
    /// earlier pgdbg, whose jump is taken as found.
    pub entry: Option<u64>,
    /// Whether a resume at any instruction boundary inside the jump traps
    /// at once (`jumpover::jump_traps`).
    pub traps_inside: bool,
    /// Reserved landing pages (one page each, all trapping filler): where
    /// the jump leads, outside the code page, with a uprobe's int3 or the
    /// file's byte inside its `rel32` (`jumpover::landings`).
    pub landings: Vec<u64>,
    /// Set once someone else's uprobe took the jump over (`jumpover.rs`):
    /// the jump is gone, the pages wait for removal.
    pub taken_over: Option<super::jumpover::TakenOver>,
}

/// How many bytes at `site` a detour displaces: whole instructions covering
/// at least `JMP_LEN` bytes, each of which must run unchanged at another
/// address.  `code` holds the bytes at `site` (at least 32).  `bodies` is
/// the function's code (address, bytes): none of its branches may land
/// strictly inside the displaced bytes.
pub fn displaced_len(site: u64, code: &[u8], bodies: &[(u64, Vec<u8>)]) -> Result<usize> {
    let mut dec = Decoder::with_ip(64, code, site, DecoderOptions::NONE);
    let mut len = 0usize;
    while len < JMP_LEN {
        if !dec.can_decode() {
            bail!("cannot decode the instructions at {site:#x}");
        }
        let ins = dec.decode();
        if ins.is_invalid() {
            bail!("invalid instruction at {:#x}", ins.ip());
        }
        if ins.flow_control() != FlowControl::Next || ins.is_ip_rel_memory_operand() {
            bail!(
                "the instruction at {:#x} ({:?}) cannot be moved",
                ins.ip(),
                ins.mnemonic()
            );
        }
        len += ins.len();
    }
    let (lo, hi) = (site + 1, site + len as u64);
    for (addr, bytes) in bodies {
        let mut dec = Decoder::with_ip(64, bytes, *addr, DecoderOptions::NONE);
        for ins in &mut dec {
            let target = match ins.flow_control() {
                FlowControl::UnconditionalBranch
                | FlowControl::ConditionalBranch
                | FlowControl::Call => ins.near_branch_target(),
                _ => 0,
            };
            if (lo..hi).contains(&target) {
                bail!(
                    "the code at {:#x} branches into the first instructions ({target:#x})",
                    ins.ip()
                );
            }
        }
    }
    Ok(len)
}

/// Whether process `pid`, which pgdbg does not trace, has at `addr` a
/// `jmp rel32` that is not the binary's covering it: an `e9` among the 5
/// bytes that end at `addr` where the file's bytes there (`file`, from
/// `addr - 4`, 5 bytes) have none.  Such a jump is a detour of pgdbg's:
/// another pgdbg's at work, or one left behind by a pgdbg killed together
/// with its guardian; a kernel uprobe at `addr` that this process does
/// not trace would make it run the jump's `rel32` as code.  An unreadable
/// process has none.
pub fn stray_jump_at(pid: i32, addr: u64, file: &[u8]) -> bool {
    let mut mem = [0u8; JMP_LEN];
    if file.len() < JMP_LEN || addr < 4 || super::read_untraced(pid, addr - 4, &mut mem).is_err() {
        return false;
    }
    mem.iter().zip(file).any(|(&m, &f)| m == 0xe9 && f != 0xe9)
}

/// `stray_jump_at` for every child of the postmaster `postmaster` (its
/// backends) at `addr` (in function `f`; `file`: as there): why a uprobe
/// the postmaster's children inherit may not go there, or None.
pub fn stray_jump_in_children(postmaster: i32, f: &str, addr: u64, file: &[u8]) -> Option<String> {
    let pid = super::procfs::children_of(postmaster)
        .into_iter()
        .find(|&k| stray_jump_at(k, addr, file))?;
    Some(format!(
        "process {pid} has a jump at {f} ({addr:#x}) that is not the binary's (pgdbg's in-process counter or recorder: another pgdbg's at work, or left by one killed together with its guardian): a uprobe inherited from the postmaster would make it run the jump's bytes as code"
    ))
}

/// The offset of an `int3` among the first instructions at `site` that a
/// detour would displace (where [`displaced_len`] stops on it), if any.
/// Only such an int3 can be someone else's probe that made the decode fail;
/// a 0xcc inside another instruction's bytes is part of that instruction.
pub fn int3_in_displaced(site: u64, code: &[u8]) -> Option<usize> {
    let mut dec = Decoder::with_ip(64, code, site, DecoderOptions::NONE);
    let mut off = 0usize;
    while off < JMP_LEN && dec.can_decode() {
        let ins = dec.decode();
        if ins.is_invalid() {
            return None;
        }
        if ins.mnemonic() == Mnemonic::Int3 {
            return Some(off);
        }
        off += ins.len();
    }
    None
}

// `inject_held` borrows the first bytes of those `inject_syscall` saved

/// `jmp rel32` from `from` to `to` (refused out of reach).
pub fn jmp(from: u64, to: u64) -> Result<[u8; JMP_LEN]> {
    fragments::jmp_rel32(from, to)
}

/// Free address ranges of `len` bytes within jump reach of `near`, nearest
/// first.  The space above the heap (brk grows there) and below the stack
/// is left alone; one guard page is kept under the next mapping.
fn gaps_near(maps: &[procfs::Mapping], near: u64, len: u64) -> Vec<u64> {
    let mut m: Vec<&procfs::Mapping> = maps.iter().collect();
    m.sort_by_key(|x| x.start);
    let mut out = Vec::new();
    let mut prev_end = 0x10000u64; // mmap_min_addr
    let mut prev_is_heap = false;
    for x in &m {
        let next_is_stack = x.path.as_ref().is_some_and(|p| p.as_os_str() == "[stack]");
        if !prev_is_heap && !next_is_stack && x.start >= prev_end + len + 2 * PAGE {
            let a = x.start - len - PAGE;
            if a.abs_diff(near) < REACH && (a + len).abs_diff(near) < REACH {
                out.push(a);
            }
        }
        prev_end = prev_end.max(x.end);
        prev_is_heap = x.path.as_ref().is_some_and(|p| p.as_os_str() == "[heap]");
    }
    out.sort_by_key(|a| a.abs_diff(near));
    out
}

impl Target {
    /// The target's pages that are pgdbg's own (start, end): the SIGTRAP
    /// handler's code and data (its table, the call record), each
    /// detour's code, data (a recorder's ring) and landing pages.  Not
    /// the backend's data: no `set var` or watchpoint goes there.
    pub fn own_pages(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if let Some(h) = &self.trap {
            let len = super::traphandler::MAP_LEN.div_ceil(PAGE) * PAGE;
            out.push((h.base, h.base + len));
        }
        for d in &self.detours {
            for (start, len) in [d.code, d.data] {
                if len > 0 {
                    out.push((start, start + len.div_ceil(PAGE) * PAGE));
                }
            }
            out.extend(d.landings.iter().map(|&p| (p, p + PAGE)));
        }
        out
    }

    /// Map `len` bytes of anonymous private memory in the target, within
    /// `rel32` reach of `near` when given.
    pub fn map_pages(&mut self, near: Option<u64>, len: u64, prot: i32) -> Result<u64> {
        let len = len.div_ceil(PAGE) * PAGE;
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        let mmap = |t: &mut Target, addr: u64, extra: u64| {
            t.inject_syscall(
                libc::SYS_mmap,
                [addr, len, prot as u64, flags | extra, u64::MAX, 0],
            )
        };
        let Some(near) = near else {
            let r = mmap(self, 0, 0)?;
            if r < 0 {
                bail!("mmap in the target failed (errno {})", -r);
            }
            return Ok(r as u64);
        };
        let maps = procfs::maps(self.pid())?;
        for a in gaps_near(&maps, near, len).into_iter().take(8) {
            let r = mmap(self, a, libc::MAP_FIXED_NOREPLACE as u64)?;
            if r as u64 == a {
                return Ok(a);
            }
            if r > 0 {
                // a kernel without MAP_FIXED_NOREPLACE put it elsewhere
                self.unmap_pages(r as u64, len)?;
            }
        }
        bail!("no free address space within jump reach of {near:#x}")
    }

    /// Map one anonymous private page at exactly `addr`, never over
    /// anything mapped (MAP_FIXED_NOREPLACE); None when it cannot go there.
    pub(super) fn map_page_at(&mut self, addr: u64, prot: i32) -> Result<Option<u64>> {
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
        let r = self.inject_syscall(
            libc::SYS_mmap,
            [addr, PAGE, prot as u64, flags, u64::MAX, 0],
        )?;
        if r as u64 == addr {
            return Ok(Some(addr));
        }
        if r > 0 {
            // a kernel without MAP_FIXED_NOREPLACE put it elsewhere
            self.unmap_pages(r as u64, PAGE)?;
        }
        Ok(None)
    }

    pub fn unmap_pages(&mut self, addr: u64, len: u64) -> Result<()> {
        let r = self.inject_syscall(libc::SYS_munmap, [addr, len, 0, 0, 0, 0])?;
        if r < 0 {
            bail!("munmap in the target failed (errno {})", -r);
        }
        Ok(())
    }

    /// Write a detour at `site` (a function's entry): `len` bytes of whole
    /// instructions (`displaced_len`) are replaced by a jump to
    /// `pages.entry` in the code page `pages.code`, which must be mapped,
    /// as must the reserved landing pages (`map_jump_page`); `body` is
    /// what runs there before the displaced instructions and the jump back
    /// (both appended here).
    pub fn install_detour(
        &mut self,
        site: u64,
        len: usize,
        body: &[u8],
        pages: &super::jumpover::JumpPages,
        data: (u64, u64),
    ) -> Result<()> {
        let (code, entry) = ((pages.code, PAGE), pages.entry);
        if !self.state.is_stopped() {
            bail!("internal: install_detour needs a stopped target");
        }
        // A SIGILL of an earlier jump's still queued is taken now, while
        // its entry in `undone_jumps` is known; then no entry there can
        // match a SIGILL to come (the bytes each one covers are original
        // again, or this jump's, whose own entry is made if it is taken
        // over), so they all go: none is left to drop a SIGILL of the
        // code's own, or of this jump under another entry's bytes.
        self.drain_sigill()?;
        if self.state.is_gone() {
            bail!("the backend exited");
        }
        // (kept while one is still queued: the drain gives up after a few
        // rounds, and an entry must not go before its SIGILL is taken)
        if !self.sigill_pending() {
            self.undone_jumps.clear();
        }
        if self.detours.iter().any(|d| d.site == site) {
            bail!("a detour is already at {site:#x}");
        }
        let range = site..site + len as u64;
        if self.inserted.keys().any(|a| range.contains(a)) {
            bail!("a breakpoint is set at {site:#x}: delete it first");
        }
        let rip = self.regs()?.rip;
        if rip > site && rip < site + len as u64 {
            bail!("the target is stopped inside the instructions to displace");
        }
        // nor may a signal frame return there (a handler running now)
        if self.stack_points_into((site + 1, len as u64 - 1))? {
            bail!("the stack holds an address inside the instructions to displace");
        }
        let mut orig = vec![0u8; len];
        self.read(site, &mut orig)?;
        // run from our page and put back at removal: no one else's int3
        self.check_no_foreign_int3(site, &orig)?;
        let mut text = body.to_vec();
        text.extend_from_slice(&orig);
        let back_from = entry + text.len() as u64;
        text.extend_from_slice(&jmp(back_from, site + len as u64)?);
        if entry < code.0 || entry + text.len() as u64 > code.0 + code.1 {
            bail!("internal: detour code does not fit its page");
        }
        let to_code = jmp(site, entry)?;
        // what the jump is followed by, for whether it traps when entered
        // past its first byte (`jumpover::jump_traps`)
        let after = self.after_jump(site, &orig);
        let d = Detour {
            site,
            orig: orig.clone(),
            code,
            data,
            entry: Some(entry),
            traps_inside: super::jumpover::jump_traps(orig[0], &to_code[1..], &after),
            landings: pages.landings.clone(),
            taken_over: None,
        };
        // a jump that may not trap could run its rel32 as code under
        // someone's uprobe (`jumpover.rs`): no detour rather than that
        if !d.traps_inside {
            bail!("the jump at {site:#x} would not trap if another tool's uprobe landed on it");
        }
        if let Some(g) = self.guardian()? {
            g.note_detour(&d)?;
        }
        // The rest of the code pages: an opcode invalid in 64-bit mode
        // (`jumpover::UD64`), never zeros (`00 00` is `add [rax], al`): a
        // jump that lands wide of `entry` (a uprobe's int3 in its rel32)
        // traps at once with nothing done.
        let mut page = vec![super::jumpover::UD64[0]; code.1 as usize];
        let off = (entry - code.0) as usize;
        page[off..off + text.len()].copy_from_slice(&text);
        self.write(code.0, &page)?;
        if let Err(e) = self.write(site, &to_code) {
            // a word-by-word write may have half happened
            if self.write(site, &orig).is_ok()
                && let Some(g) = &mut self.guardian
            {
                g.forget_detour(site);
            }
            return Err(e);
        }
        self.detours.push(d);
        Ok(())
    }

    /// Put a detour with code of ours at `site`, a function's entry:
    /// `data_len` bytes of data pages mapped (read and write), `emit`
    /// given their address makes the code that runs before the displaced
    /// instructions (no branch leaves it, nothing in it relative to rip),
    /// and the jump written last.  `bodies` is the function's code, to
    /// check that nothing branches into the bytes the jump overwrites.  On
    /// an error nothing is left: pages unmapped, code as found.  Returns
    /// the data pages' address.
    pub fn place_detour(
        &mut self,
        site: u64,
        bodies: &[(u64, Vec<u8>)],
        data_len: u64,
        emit: impl FnOnce(u64) -> Result<Vec<u8>>,
    ) -> Result<u64> {
        let mut code = [0u8; 32];
        self.read(site, &mut code)?;
        // someone's int3 in the first instructions decodes as `int3`: say
        // whose it is rather than that it cannot be moved
        let len = displaced_len(site, &code, bodies).map_err(|e| {
            match int3_in_displaced(site, &code) {
                Some(k) => self
                    .check_no_foreign_int3(site + k as u64, &code[k..k + 1])
                    .err()
                    .unwrap_or(e),
                None => e,
            }
        })?;
        self.check_no_foreign_int3(site, &code[..len])?;
        let data = self.map_pages(None, data_len, libc::PROT_READ | libc::PROT_WRITE)?;
        let body = match emit(data) {
            Ok(b) => b,
            Err(e) => {
                let _ = self.unmap_pages(data, data_len);
                return Err(e);
            }
        };
        // the code: the body, the displaced instructions, the jump back;
        // placed so that the jump to it traps wherever it is entered
        // other than at its start (`jumpover.rs`)
        let text_len = (body.len() + len + JMP_LEN) as u64;
        let pages = match self.map_jump_page(site, len, text_len) {
            Ok(a) => a,
            Err(e) => {
                let _ = self.unmap_pages(data, data_len);
                return Err(e);
            }
        };
        if let Err(e) = self.install_detour(site, len, &body, &pages, (data, data_len)) {
            // (no jump leads into them: the install writes it last)
            for p in pages.landings.iter().chain([&pages.code]) {
                let _ = self.unmap_pages(*p, PAGE);
            }
            let _ = self.unmap_pages(data, data_len);
            return Err(e);
        }
        Ok(data)
    }

    /// Take charge of a detour found in the target (left by an earlier
    /// pgdbg that was killed), so that `remove_detour` undoes it.
    pub fn adopt_detour(&mut self, d: Detour) {
        if !self.has_detour(d.site) {
            self.detours.push(d);
        }
    }

    pub fn has_detour(&self, site: u64) -> bool {
        self.detours.iter().any(|d| d.site == site)
    }

    /// Undo the detour at `site`: the original bytes back, the target out of
    /// our code, our pages unmapped when nothing can return into them.
    /// Returns false when the pages had to stay mapped.
    pub fn remove_detour(&mut self, site: u64) -> Result<bool> {
        let Some(i) = self.detours.iter().position(|d| d.site == site) else {
            return Ok(true);
        };
        if self.state.is_gone() {
            self.detours.clear();
            return Ok(true);
        }
        if !self.state.is_stopped() {
            self.ensure_stopped()?;
            if self.state.is_gone() {
                self.detours.clear();
                return Ok(true);
            }
        }
        // A SIGILL of the jump still queued (its trap, raised as pgdbg
        // stopped the backend) is taken first, while the detour and its
        // undone jump are known: dropped, and the backend rewound if it
        // stopped on the filler.  Left queued, nothing here could tell it
        // from the code's own once the detour is forgotten; delivered, it
        // would kill the backend.
        self.drain_sigill()?;
        if self.state.is_gone() {
            self.detours.clear();
            return Ok(true);
        }
        // someone's uprobe over the jump: its bytes are the original ones
        // again already but for the uprobes' int3s
        // (`jumpover::detour_taken_over`)
        let taken_over = self.detour_taken_over(site)?;
        let d = self.detours[i].clone();
        if taken_over == Some(super::jumpover::TakenOver::Changed) {
            // Someone else changed the jump in a way that is no uprobe's
            // (another patcher's code there now, perhaps leading into our
            // page): nothing is written there, and the pages stay mapped,
            // since their code may still be run.  The guardian forgot the
            // detour already (it must not write there either).
            self.detours.remove(i);
            super::log::debug(&format!(
                "detour at {site:#x}: the code there was changed by someone else; left as found, its pages mapped"
            ));
            return Ok(false);
        }
        if taken_over.is_none() {
            // forgotten only once the original bytes are back
            self.write(d.site, &d.orig)
                .context("cannot restore the code under a detour")?;
        }
        // stopped on the filler of the code page or of a landing page,
        // where the jump led with a uprobe's int3 (or the file's byte) in
        // its rel32: back to the site (no step there);
        // before the detour is forgotten, so that a failure leaves it known
        self.rewind_wild_landing()?;
        self.detours.remove(i);
        if let Some(g) = &mut self.guardian {
            g.forget_detour(d.site);
        }
        let in_code = |a: u64| a >= d.code.0 && a < d.code.0 + d.code.1;
        if in_code(self.regs()?.rip) {
            // single-steps follow: the trap flag is set while each runs,
            // and a tracer's death then would leave it set (only a detach
            // clears it): held, the guardian or a rescue detaches
            self.hold_for_change()?;
        }
        // our code runs forward but for a recorder's copy of a text (a loop
        // of 7 instructions per byte, 120 bytes at most): a few hundred
        // steps take the target out of it
        let mut steps = 0;
        while in_code(self.regs()?.rip) {
            if steps == 4000 {
                bail!("the target does not leave the detour code");
            }
            if let Some(stop) = self.single_step_raw()? {
                if self.state.is_gone() {
                    return Ok(true);
                }
                bail!("the target stopped in the detour code: {stop:?}");
            }
            steps += 1;
        }
        // The reserved landing pages: no jump leads there any more (the
        // original bytes are back, or only a uprobe's int3 with them), and
        // the target is not on one (rewound above).  Each is left mapped,
        // harmlessly (filler, read and execute), if the target is stopped
        // on it all the same or its stack points into it.
        let rip = self.regs()?.rip;
        // one read of the stack for all the pages (the target is stopped
        // meanwhile; the unmaps below restore rsp and write nothing above it)
        let stack = self.stack_words()?;
        let points_into = |(start, len): (u64, u64)| match &stack {
            None => true, // unknown stack: keep the pages
            Some(words) => words.iter().any(|&v| v >= start && v < start + len),
        };
        // A landing page holds trapping filler only: nothing is ever called
        // from it, so the one word of the stack that can refer to it is the
        // saved rip of code that trapped there, a landing address itself;
        // any other word in its range is stale data (found once in 40 runs
        // of tests/foreign_uprobe.rs), no reason to keep the page.  A
        // detour adopted from an earlier pgdbg (no known entry) keeps the
        // whole-page test.
        let exact = d
            .entry
            .map(|e| super::jumpover::landings(d.site, e, &d.orig));
        let refers_to = |p: u64| match (&stack, &exact) {
            (Some(words), Some(ls)) => words
                .iter()
                .any(|v| (p..p + PAGE).contains(v) && ls.contains(v)),
            _ => points_into((p, PAGE)),
        };
        let mut kept = false;
        for &p in &d.landings {
            if (p..p + PAGE).contains(&rip) || refers_to(p) {
                kept = true;
            } else {
                self.unmap_pages(p, PAGE)?;
            }
        }
        if kept {
            let words: Vec<String> = stack
                .iter()
                .flatten()
                .filter(|v| d.landings.iter().any(|p| (*p..p + PAGE).contains(*v)))
                .map(|v| format!("{v:#x}"))
                .collect();
            super::log::debug(&format!(
                "a landing page left mapped: the target is on it (rip {rip:#x}) or its stack points into it ({})",
                words.join(" ")
            ));
        }
        let code_kept = points_into(d.code);
        if code_kept {
            super::log::debug("detour pages left mapped: the stack points into them");
        } else {
            self.unmap_pages(d.code.0, d.code.1)?;
            self.unmap_pages(d.data.0, d.data.1)?;
        }
        // the detour is forgotten and some of its pages are gone (the
        // address may be someone else's next), on every path from here:
        // an entry for this jump could only misread a later SIGILL there,
        // and none of its own is queued now (taken above, or by the
        // unmap's own resumes, which drop it); one still pending keeps it
        if !self.sigill_pending() {
            self.undone_jumps.retain(|x| x.site != site);
        }
        Ok(!kept && !code_kept)
    }

    /// Put a detour's original bytes over its jump in `buf`, the target's
    /// bytes at `addr` (a jump someone else's uprobe took over is gone
    /// from the code already).
    pub(super) fn hide_detours(&self, addr: u64, buf: &mut [u8]) {
        let end = addr + buf.len() as u64;
        for d in self.detours.iter().filter(|d| d.taken_over.is_none()) {
            for (i, &b) in d.orig.iter().enumerate() {
                let a = d.site + i as u64;
                if a >= addr && a < end {
                    buf[(a - addr) as usize] = b;
                }
            }
        }
    }

    /// Whether an address is among the bytes a detour replaced.
    pub fn in_detour(&self, addr: u64) -> bool {
        self.detours
            .iter()
            .any(|d| addr >= d.site && addr < d.site + d.orig.len() as u64)
    }

    /// Whether any word between rsp and the top of its stack mapping holds
    /// an address in `range` (start, length): a saved rip of an interrupted
    /// detour.
    pub(super) fn stack_points_into(&self, range: (u64, u64)) -> Result<bool> {
        Ok(match self.stack_words()? {
            None => true, // unknown stack: keep the pages
            Some(words) => words.iter().any(|&v| v >= range.0 && v < range.0 + range.1),
        })
    }

    /// The words between rsp and the top of its stack mapping (None: rsp
    /// is in no mapping, so nothing can be said).
    pub(super) fn stack_words(&self) -> Result<Option<Vec<u64>>> {
        let rsp = self.regs()?.rsp;
        let maps = procfs::maps(self.pid())?;
        let Some(m) = maps.iter().find(|m| m.start <= rsp && rsp < m.end) else {
            return Ok(None);
        };
        let from = rsp & !7;
        let mut buf = vec![0u8; (m.end - from) as usize];
        self.read(from, &mut buf)?;
        Ok(Some(
            buf.chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
                .collect(),
        ))
    }

    /// Undo every detour (detach, drop).
    pub(super) fn remove_all_detours(&mut self) -> Result<()> {
        let mut first = Ok(());
        let sites: Vec<u64> = self.detours.iter().map(|d| d.site).collect();
        for s in sites {
            if let Err(e) = self.remove_detour(s)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prologue_pushes_and_moves_are_displaced_whole() {
        // push r15; push r14; mov r14, rcx; push r13 (GetCachedPlan, gcc 12 -O2)
        let mut code = vec![0x41, 0x57, 0x41, 0x56, 0x49, 0x89, 0xce, 0x41, 0x55];
        code.resize(32, 0x90);
        assert_eq!(displaced_len(0x1000, &code, &[]).unwrap(), 7);
        // a branch of the function into the displaced bytes forbids it
        let body = vec![(0x1100, vec![0xe9, 0xff, 0xfe, 0xff, 0xff])]; // jmp 0x1004
        assert!(displaced_len(0x1000, &code, &body).is_err());
        // to the entry itself is fine
        let body = vec![(0x1100, vec![0xe9, 0xfb, 0xfe, 0xff, 0xff])]; // jmp 0x1000
        assert_eq!(displaced_len(0x1000, &code, &body).unwrap(), 7);
        // rip-relative or branching first instructions are refused
        let mut lea = vec![0x48, 0x8d, 0x05, 0, 0, 0, 0]; // lea rax, [rip+0]
        lea.resize(32, 0x90);
        assert!(displaced_len(0x1000, &lea, &[]).is_err());
        let mut call = vec![0xe8, 0, 0, 0, 0];
        call.resize(32, 0x90);
        assert!(displaced_len(0x1000, &call, &[]).is_err());
    }

    #[test]
    fn jumps_encode_relative_to_their_end() {
        assert_eq!(jmp(0x1000, 0x1005).unwrap(), [0xe9, 0, 0, 0, 0]);
        assert_eq!(jmp(0x1000, 0x1000).unwrap(), [0xe9, 0xfb, 0xff, 0xff, 0xff]);
        assert!(jmp(0x1000, 0x1_0000_1000).is_err());
    }

    #[test]
    fn gaps_skip_heap_and_stack_neighbourhoods() {
        let m = |start: u64, end: u64, path: &str| procfs::Mapping {
            start,
            end,
            perms: "r-xp".into(),
            offset: 0,
            path: (!path.is_empty()).then(|| path.into()),
            ..Default::default()
        };
        let maps = vec![
            m(0x400000, 0x500000, "/bin/postgres"),
            m(0x600000, 0x700000, "[heap]"),
            m(0x7f0000000000, 0x7f0000100000, "[stack]"),
        ];
        let g = gaps_near(&maps, 0x450000, 0x2000);
        // below the binary only: not above the heap, not under the stack
        assert_eq!(g, vec![0x400000 - 0x2000 - PAGE, 0x600000 - 0x2000 - PAGE]);
    }
}
