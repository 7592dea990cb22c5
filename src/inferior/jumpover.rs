//! Someone else's uprobe over a detour's jump (`detour.rs`).
//!
//! A kernel uprobe (perf probe, bpftrace, another pgdbg) placed on a
//! function pgdbg has detoured reads the instruction to run from the *file*,
//! writes its one-byte int3 over the jump's first byte (0xe9), and at each
//! hit runs the file's first instruction out of line and comes back to the
//! end of that instruction: inside the jump's `rel32`.  When the uprobe goes
//! again, the kernel writes the file's first byte back, over our 0xe9: the
//! first byte of the original code before the jump's `rel32`.  Either way
//! the backend runs bytes that are no instruction of its own.
//!
//! Two things make that safe here:
//! * the jump's target is chosen so that each byte of its `rel32` is an
//!   opcode that is invalid in 64-bit mode (`UD64`): whatever instruction
//!   boundary execution resumes at inside the jump, the first byte it meets
//!   raises #UD before anything is done, so the backend stops with SIGILL at
//!   that boundary, its state exactly that of the original code there;
//! * at such a stop (`Target::fault_in_taken_over_jump`, from the wait loop)
//!   and at every look pgdbg takes (`Target::detour_taken_over`, each poll
//!   of the recorder and before removal), a jump whose first byte is no
//!   longer pgdbg's is undone at once: the original bytes go back over
//!   `site+1..site+len`, byte 0 is left to whoever has it (the kernel puts
//!   the file's byte there when its uprobe goes), the signal is not
//!   delivered, and the detour is only waiting for its pages to be unmapped.
//!
//! A uprobe at an original instruction boundary inside the jump (`+2`
//! after `push r15`), or inside an instruction (the kernel takes any
//! offset whose file bytes decode, tracefs `p:/path:0x...`; bpftrace and
//! perf refuse it by default), puts its int3 into the `rel32`, and its removal puts
//! the file's byte there: the jump then leads elsewhere, up to gigabytes
//! away with byte 4 changed.  Each look undoes such a jump too, around
//! the int3 (which the kernel owns).  A call that runs the jump before
//! that look lands at one of a few addresses known in advance
//! (`landings`: each byte of the `rel32` holds our byte, 0xcc or the
//! file's byte: up to 80 addresses).  The jump's target is chosen so that every one of them
//! is on trapping filler: in the code page outside the code, or in a
//! reserved landing page, free when chosen and mapped with the code page
//! (`map_jump_page`), unmapped with it.  The trap there (SIGILL, never
//! SIGSEGV) is recognised (`wild_landing`): the jump is undone, rip put
//! back at the function's start, where nothing of the function has run,
//! and the signal is not delivered.
//!
//! When no free page gives such a jump, there is no detour (the caller
//! stops at each call instead).  Only a SIGILL the CPU raised for #UD
//! (`ILL_ILLOPN`) at a boundary over bytes that are original again is
//! dropped, one per undone jump, so a resume never traps in a loop; one
//! still queued is taken before a new detour and before detaching
//! (`drain_sigill`), since the backend would die of it untraced.

use super::detour::{Detour, JMP_LEN};
use super::{INT3, Target, procfs};
use anyhow::{Result, bail};
use iced_x86::{Decoder, DecoderError, DecoderOptions};
use nix::sys::signal::Signal;

const PAGE: u64 = 4096;

/// One-byte opcodes that are invalid in 64-bit mode: marked "i64" in the
/// Intel SDM's one-byte opcode map (vol. 2, table A-2) and invalid in AMD's
/// long mode: PUSH/POP of ES, CS, SS, DS; DAA, DAS, AAA, AAS; PUSHA, POPA;
/// far CALL and JMP with an immediate pointer; INTO; AAM.  Left out: 0x62,
/// 0xc4, 0xc5 (EVEX and VEX prefixes in 64-bit mode), 0xd5 (APX's REX2
/// prefix), 0x82 and 0xd6 (undocumented or not in both vendors' lists).
/// Executing any of them faults with #UD before any side effect.
pub const UD64: [u8; 17] = [
    0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x60, 0x61, 0x9a, 0xea, 0xce,
    0xd4,
];

/// The `si_code` of a SIGILL raised by #UD in user mode, "illegal
/// operand" (include/uapi/asm-generic/siginfo.h; the libc crate does not
/// export it).
const ILL_ILLOPN: i32 = 2;

/// What someone else did to a detour's jump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakenOver {
    /// An int3 that is not pgdbg's over the jump's first byte (a uprobe).
    Int3,
    /// The file's first byte over the jump's first byte (a uprobe came and
    /// went, its removal wrote the byte it had replaced).
    FileByte,
    /// Byte 0 still pgdbg's 0xe9, and a uprobe's int3 (or the file's byte,
    /// the uprobe gone again) in the jump's `rel32`: the jump leads
    /// elsewhere now.
    Inside,
    /// Anything else (another patcher's code there now): nothing is
    /// written there, and the detour's pages stay mapped for good, since
    /// that code may lead into them; the guardian forgets the detour.
    Changed,
}

impl TakenOver {
    /// Whether the original bytes after the first one were put back.
    pub fn repaired(self) -> bool {
        self != TakenOver::Changed
    }
}

/// Whether every byte of a jump's `rel32` is an invalid opcode.
pub fn rel32_traps(rel32: &[u8]) -> bool {
    rel32.iter().all(|b| UD64.contains(b))
}

/// Whether a detour's jump traps at once wherever execution resumes
/// inside it: each `rel32` byte is `UD64`, and with the file's first byte
/// `orig0` back before them (a uprobe's removal) the first instruction is
/// invalid at once, or is `orig0` alone (`push rbp`), run as the original
/// code runs it, before the trap at the next byte.  `after` is what really
/// follows the jump in the backend (`Target::after_jump`): an instruction
/// starting at `orig0` may take the `rel32` and those bytes as operands
/// (`mov dword [rsi], imm32` is `c7 06` and four more bytes).  Only a
/// decode the CPU refuses at once counts as a trap: a decode that merely
/// ran out of bytes (`DecoderError::NoMoreBytes`) says nothing about what
/// the CPU would run, so it counts as not trapping.
pub fn jump_traps(orig0: u8, rel32: &[u8], after: &[u8]) -> bool {
    if !rel32_traps(rel32) {
        return false;
    }
    let mut code = vec![orig0];
    code.extend_from_slice(rel32);
    code.extend_from_slice(after);
    let mut dec = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE);
    let ins = dec.decode();
    if ins.is_invalid() {
        return dec.last_error() == DecoderError::InvalidInstruction;
    }
    ins.len() == 1
}

/// Whether a SIGILL raised at `at` is the trap of a resume inside the
/// undone jump `d` (what `jump_traps` promises), so that resuming the
/// backend at `at` without the signal runs its original code from an
/// original instruction boundary:
/// * `at` is inside the jump's five bytes (past them the bytes were never
///   pgdbg's: a SIGILL there is the code's own) and an original boundary;
/// * the bytes from `at` on (`now`, read after the undo) are the original
///   ones again (byte 0 may be a uprobe's int3: the kernel runs the
///   original instruction for it); else the resume would raise the same
///   SIGILL again, and again;
/// * the jump traps wherever it is entered (`traps_inside`), or `at` is
///   past byte 0 and a uprobe sat at byte 0 (`uprobe_at_0`) while the
///   `rel32` bytes all trap: then execution came to `at` only by the
///   kernel's return from the uprobe, after the original instruction at
///   `site` ran out of line, whatever `orig0` would decode to.
fn sigill_of_jump(d: &Detour, at: u64, uprobe_at_0: bool, now: &[u8]) -> bool {
    let Some(entry) = d.entry else {
        return false;
    };
    let Ok(jump) = super::detour::jmp(d.site, entry) else {
        return false;
    };
    if at < d.site || at >= d.site + JMP_LEN as u64 || !boundaries(d).contains(&at) {
        return false;
    }
    let k = (at - d.site) as usize;
    let want = &d.orig[k..];
    // a uprobe's int3 may sit at any original boundary (the kernel runs
    // the original instruction for it), never where the file has one
    let bounds = boundaries(d);
    let original = now.len() == want.len()
        && now.iter().zip(want).enumerate().all(|(i, (n, w))| {
            n == w || (*n == INT3 && *w != INT3 && bounds.contains(&(at + i as u64)))
        });
    original && (d.traps_inside || (k >= 1 && uprobe_at_0 && rel32_traps(&jump[1..])))
}

/// Every address the jump from `site` to `entry` can lead to once
/// uprobes changed bytes of its `rel32`: a uprobe's int3 may sit at any
/// offset whose file bytes decode, an original instruction boundary or
/// not, and when the uprobe goes the kernel writes the file's byte
/// (`orig[k]`) back there.  So each `k` in 1..=4 holds our byte, 0xcc or
/// `orig[k]`; every combination but "all ours" is a landing.  A change
/// at `k` moves the target by up to 256^(k-1) * 255 bytes: within the
/// code page's neighbourhood for k = 1, up to gigabytes away for k = 4.
/// The set is computed from the original bytes alone, the same way at
/// the choice of the pages (`map_jump_page`), at a trap
/// (`wild_landing`) and in the guardian (`landing_pages`).
pub fn landings(site: u64, entry: u64, orig: &[u8]) -> Vec<u64> {
    let Ok(jump) = super::detour::jmp(site, entry) else {
        return Vec::new();
    };
    // every byte of the rel32, not only the original instruction
    // boundaries: the kernel also takes a uprobe inside an instruction
    // when its bytes decode from there (tracefs `p:/path:0x...`)
    let inside: Vec<usize> = (1..JMP_LEN).filter(|k| *k < orig.len()).collect();
    let mut out = Vec::new();
    for combo in 0..3usize.pow(inside.len() as u32) {
        let mut j = jump;
        let mut c = combo;
        for &k in &inside {
            match c % 3 {
                1 => j[k] = INT3,
                2 => j[k] = orig[k],
                _ => {}
            }
            c /= 3;
        }
        if j == jump {
            continue;
        }
        let rel = i32::from_le_bytes([j[1], j[2], j[3], j[4]]) as i64;
        out.push((site + JMP_LEN as u64).wrapping_add(rel as u64));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The reserved landing pages of a jump whose code is in the page at
/// `code_page`: the pages of its `landings` other than the code page.
pub fn landing_pages(site: u64, entry: u64, orig: &[u8], code_page: u64) -> Vec<u64> {
    let mut pages: Vec<u64> = landings(site, entry, orig)
        .into_iter()
        .map(|l| l & !(PAGE - 1))
        .filter(|&p| p != code_page)
        .collect();
    pages.dedup();
    pages
}

/// The lowest page pgdbg maps (above `mmap_min_addr` and a guard page).
const USER_LO: u64 = 0x10000 + PAGE;
/// The end of user space with 4-level paging (`TASK_SIZE`, one page below
/// 2^47): nothing is mapped past it, and no address past it is canonical
/// with 4-level paging; pgdbg stays below it under 5-level paging too.
const USER_TOP: u64 = 0x7fff_ffff_f000;
/// How far above the heap's current end a landing page may be: brk grows
/// the heap upwards, and a page in its way makes a `brk` fail there
/// (glibc's malloc then goes on with mmap: no harm, but the heap stops
/// growing in place).  Half a gigabyte of growth is left to it.
const HEAP_ROOM: u64 = 512 << 20;

/// Whether one page at `page` may be mapped for a jump's landing: in the
/// user range, no mapping within a page either side of it (`sorted`: the
/// target's maps by start), not in the gap under the stack (it grows down
/// there), and at least `HEAP_ROOM` above the heap.
pub fn landing_page_free(sorted: &[procfs::Mapping], page: u64) -> bool {
    if page < USER_LO || page.checked_add(2 * PAGE).is_none_or(|e| e > USER_TOP) {
        return false;
    }
    // the first mapping that starts past the page's upper guard
    let i = sorted.partition_point(|m| m.start < page + 2 * PAGE);
    let name = |m: &procfs::Mapping, n: &str| m.path.as_ref().is_some_and(|p| p.as_os_str() == n);
    if sorted.get(i).is_some_and(|next| name(next, "[stack]")) {
        return false;
    }
    match i.checked_sub(1).map(|j| &sorted[j]) {
        None => true,
        Some(prev) if name(prev, "[heap]") => prev.end.saturating_add(HEAP_ROOM) <= page,
        Some(prev) => prev.end + PAGE <= page,
    }
}

/// Where a detour's code goes (`Target::map_jump_page`): its code page,
/// the jump's target in it, and the reserved landing pages.
#[derive(Debug, Clone)]
pub struct JumpPages {
    pub code: u64,
    pub entry: u64,
    pub landings: Vec<u64>,
}

/// The jump targets (`site` + 5 + rel32) whose `rel32` bytes are all
/// `UD64` and where `text_len` bytes of code fit in one free page of
/// `maps`, nearest first: (page, entry) pairs.  Free means: no mapping
/// within a page either side, not above the heap (brk grows there) nor
/// below the stack, like `detour::gaps_near`.
pub fn trapping_targets(maps: &[procfs::Mapping], site: u64, text_len: u64) -> Vec<(u64, u64)> {
    let mut m: Vec<&procfs::Mapping> = maps.iter().collect();
    m.sort_by_key(|x| x.start);
    // page starts allowed: [lo, hi]
    let mut free: Vec<(u64, u64)> = Vec::new();
    let mut prev_end = 0x10000u64; // mmap_min_addr
    let mut prev_is_heap = false;
    for x in &m {
        let next_is_stack = x.path.as_ref().is_some_and(|p| p.as_os_str() == "[stack]");
        if !prev_is_heap && !next_is_stack && x.start >= prev_end + 3 * PAGE {
            free.push((prev_end + PAGE, x.start - 2 * PAGE));
        }
        prev_end = prev_end.max(x.end);
        prev_is_heap = x.path.as_ref().is_some_and(|p| p.as_os_str() == "[heap]");
    }
    let is_free = |page: u64| {
        let i = free.partition_point(|&(lo, _)| lo <= page);
        i > 0 && page <= free[i - 1].1
    };
    let mut out = Vec::new();
    for b3 in UD64 {
        for b2 in UD64 {
            for b1 in UD64 {
                for b0 in UD64 {
                    let rel = i32::from_le_bytes([b0, b1, b2, b3]) as i64;
                    let entry = (site + JMP_LEN as u64).wrapping_add(rel as u64);
                    let page = entry & !(PAGE - 1);
                    if (entry - page) + text_len <= PAGE && is_free(page) {
                        out.push((page, entry));
                    }
                }
            }
        }
    }
    out.sort_by_key(|&(_, e)| e.abs_diff(site));
    out
}

/// The instruction boundaries among a detour's original bytes: `site`,
/// then the end of each whole instruction before `site + len`.
fn boundaries(d: &Detour) -> Vec<u64> {
    boundaries_of(d.site, &d.orig)
}

/// The instruction boundaries among the original bytes `orig` at `site`.
fn boundaries_of(site: u64, orig: &[u8]) -> Vec<u64> {
    let mut out = vec![site];
    let dec = Decoder::with_ip(64, orig, site, DecoderOptions::NONE);
    for ins in dec {
        if ins.is_invalid() || ins.next_ip() >= site + orig.len() as u64 {
            break;
        }
        out.push(ins.next_ip());
    }
    out
}

impl Target {
    /// What follows a detour's jump in the backend once a uprobe's removal
    /// put the file's byte back before its `rel32`: the displaced bytes
    /// past the jump, then up to one longest instruction (15 bytes) of the
    /// code after them, as far as it is mapped.
    pub(super) fn after_jump(&self, site: u64, orig: &[u8]) -> Vec<u8> {
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
    pub(super) fn map_jump_page(
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
            super::detour::jmp(site, entry).is_ok_and(|j| jump_traps(orig[0], &j[1..], &after))
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
        let jump = super::detour::jmp(site, entry)?;
        let mut now = vec![0u8; d.orig.len()];
        self.read(site, &mut now)?;
        if now[..JMP_LEN] == jump {
            return Ok(None);
        }
        let file = super::foreign::mapped_file_bytes(self.pid(), site, JMP_LEN);
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
                super::log::debug(&format!(
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
        super::log::debug(&format!("detour at {site:#x} taken over: {kind:?}"));
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
    pub(super) fn fault_in_taken_over_jump(&mut self, sig: Signal) -> Result<bool> {
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
            super::log::debug(&format!(
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
        super::log::debug(&format!(
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
    pub(super) fn rewind_wild_landing(&mut self) -> Result<bool> {
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
    pub(super) fn sigill_pending(&self) -> bool {
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
    pub(super) fn drain_sigill(&mut self) -> Result<()> {
        use nix::sys::wait::WaitStatus;
        for _ in 0..4 {
            if self.gone || !self.stopped || !self.sigill_pending() {
                return Ok(());
            }
            self.cont_raw(None)?;
            match self.waitpid_blocking()? {
                WaitStatus::Exited(_, _) | WaitStatus::Signaled(_, _, _) => {
                    self.mark_gone();
                    return Ok(());
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.mark_stopped();
                    // as `drain_sigtrap`: one of our int3s is rewound
                    if let Some(bp) = self.int3_behind_rip()? {
                        self.int3_sigtrap_live = true;
                        self.rewind_to(bp)?;
                    } else {
                        self.defer(Signal::SIGTRAP);
                    }
                }
                WaitStatus::Stopped(_, sig) => {
                    self.mark_stopped();
                    if !self.fault_in_taken_over_jump(sig)? {
                        self.defer(sig);
                    }
                }
                WaitStatus::PtraceEvent(_, sig, _) => {
                    self.mark_stopped();
                    self.event_stop = true;
                    self.interrupt_stop_seen(sig);
                }
                _ => self.mark_stopped(),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trapping_byte_decodes_as_invalid_in_64_bit_mode() {
        for b in UD64 {
            // whatever follows it
            for next in [0x00u8, 0x90, 0xc3, 0xff] {
                let code = [b, next, next, next, next, next, next, next];
                let mut dec = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE);
                assert!(dec.decode().is_invalid(), "{b:#04x} {next:#04x}");
            }
        }
        // behind a REX prefix or the first byte of endbr64 (what a uprobe's
        // removal puts back before the rel32) as well
        for first in [0x41u8, 0x48, 0xf3, 0x66] {
            for b in UD64 {
                let code = [first, b, 0x90, 0x90, 0x90, 0x90];
                let mut dec = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE);
                assert!(dec.decode().is_invalid(), "{first:#04x} {b:#04x}");
            }
        }
    }

    #[test]
    fn trapping_targets_are_free_and_trap() {
        let m = |start: u64, end: u64, path: &str| procfs::Mapping {
            start,
            end,
            perms: "r-xp".into(),
            offset: 0,
            path: (!path.is_empty()).then(|| path.into()),
            ..Default::default()
        };
        let site = 0x5555_5600_1234u64;
        let maps = vec![
            m(0x5555_5500_0000, 0x5555_5700_0000, "/bin/postgres"),
            m(0x5555_5800_0000, 0x5555_5900_0000, "[heap]"),
            m(0x7fff_0000_0000, 0x7fff_0010_0000, "[stack]"),
        ];
        let t = trapping_targets(&maps, site, 200);
        assert!(!t.is_empty());
        for &(page, entry) in &t {
            assert_eq!(page % PAGE, 0);
            assert!(entry >= page && entry + 200 <= page + PAGE);
            // below the binary: not above the heap, not under the stack
            assert!(page + PAGE < 0x5555_5500_0000, "{page:#x}");
            let jump = super::super::detour::jmp(site, entry).unwrap();
            assert!(rel32_traps(&jump[1..]), "{jump:x?}");
        }
        // nearest first
        assert!(
            t.windows(2)
                .all(|w| w[0].1.abs_diff(site) <= w[1].1.abs_diff(site))
        );
        // with the file's first byte back before them
        let rel = &super::super::detour::jmp(site, t[0].1).unwrap()[1..];
        let after = [0x90u8; 15];
        for orig0 in [0x41u8, 0x48, 0xf3, 0x55, 0x53] {
            assert!(jump_traps(orig0, rel, &after), "{orig0:#x}");
        }
        // mov eax, imm32 would take the rel32 as its immediate
        assert!(!jump_traps(0xb8, rel, &after));
        assert!(!jump_traps(0x55, &[0x90, 0x06, 0x06, 0x06], &after));
        // nothing free: nothing offered
        let full = vec![m(0x10000, 0x7fff_0000_0000, "/bin/postgres")];
        assert!(trapping_targets(&full, site, 200).is_empty());
    }

    #[test]
    fn a_decode_that_runs_out_of_bytes_is_no_trap() {
        let rel = [0x06u8; 4];
        // `c7 06 imm32` is `mov dword [rsi], imm32`: with only the jump's
        // bytes the decoder runs out of them; the CPU would store, not trap
        assert!(!jump_traps(0xc7, &rel, &[]));
        assert!(!jump_traps(0xc7, &rel, &[0x06, 0x06, 0x06, 0x06]));
        // `c6 06 imm8` is `mov byte [rsi], 6`: whole within the jump
        assert!(!jump_traps(0xc6, &rel, &[]));
        // a REX prefix before an invalid opcode: refused at once, whatever
        // follows, even nothing
        assert!(jump_traps(0x41, &rel, &[]));
        assert!(jump_traps(0x41, &rel, &[0x90; 15]));
        // push rbp alone, then the trap at the next byte
        assert!(jump_traps(0x55, &rel, &[]));
    }

    #[test]
    fn a_sigill_is_dropped_only_at_a_boundary_over_original_bytes() {
        // push r15; push r14; mov r14, rcx; the jump's rel32 all 0x06
        let site = 0x1000u64;
        let orig = vec![0x41, 0x57, 0x41, 0x56, 0x49, 0x89, 0xce];
        let entry = site + 5 + 0x0606_0606;
        let d = Detour {
            site,
            orig: orig.clone(),
            code: (0, 0),
            data: (0, 0),
            entry: Some(entry),
            traps_inside: true,
            landings: Vec::new(),
            taken_over: Some(TakenOver::Int3),
        };
        // the uprobe's return past `push r15`: the original bytes again
        assert!(sigill_of_jump(&d, site + 2, true, &orig[2..]));
        assert!(sigill_of_jump(&d, site + 2, false, &orig[2..]));
        // not at a boundary, or past the jump's five bytes
        assert!(!sigill_of_jump(&d, site + 3, true, &orig[3..]));
        assert!(!sigill_of_jump(&d, site + 5, true, &orig[5..]));
        // the bytes still trap (not undone, or changed again): the resume
        // would fault again, forever
        let mut still = orig[2..].to_vec();
        still[0] = 0x06;
        assert!(!sigill_of_jump(&d, site + 2, true, &still));
        assert!(!sigill_of_jump(&d, site + 2, true, &[]));
        // at byte 0 the uprobe's int3 may be back
        let mut b0 = orig.clone();
        b0[0] = INT3;
        assert!(sigill_of_jump(&d, site, false, &b0));
        // a jump that may not trap when entered at byte 0 (the file's
        // byte would take the rel32 as operands): past byte 0 it is still
        // the uprobe's return when a uprobe sat at byte 0, never at byte 0
        let d = Detour {
            traps_inside: false,
            ..d
        };
        assert!(sigill_of_jump(&d, site + 2, true, &orig[2..]));
        assert!(!sigill_of_jump(&d, site + 2, false, &orig[2..]));
        assert!(!sigill_of_jump(&d, site, true, &orig));
        // a uprobe's int3 at another original boundary (+4) stays: the
        // kernel runs the original instruction for it; never off a boundary
        let mut at4 = orig[2..].to_vec();
        at4[2] = INT3;
        assert!(sigill_of_jump(&d, site + 2, true, &at4));
        let mut at3 = orig[2..].to_vec();
        at3[1] = INT3;
        assert!(!sigill_of_jump(&d, site + 2, true, &at3));
        // rel32 bytes that do not all trap: nothing is dropped
        let d = Detour {
            entry: Some(site + 5 + 0x0606_0690),
            ..d
        };
        assert!(!sigill_of_jump(&d, site + 2, true, &orig[2..]));
        // an adopted detour (its jump not known)
        let d = Detour { entry: None, ..d };
        assert!(!sigill_of_jump(&d, site + 2, true, &orig[2..]));
    }

    #[test]
    fn a_uprobe_inside_the_jump_lands_where_the_bytes_say() {
        // push rbp; push rbx; mov rbp, rdi: boundaries at +1 and +2
        let site = 0x40_0000u64;
        let orig = [0x55u8, 0x53, 0x48, 0x89, 0xfd];
        let entry = site + 5 + 0x0606_06d4;
        let l = landings(site, entry, &orig);
        // each of +1..+4 (a uprobe may sit inside an instruction too):
        // ours, 0xcc or the file's byte (80 combinations)
        assert_eq!(l.len(), 80, "{l:x?}");
        // the low byte 0xd4 becomes 0xcc: 8 bytes before the entry
        assert!(l.contains(&(entry - 8)));
        // ... or the file's 0x53
        assert!(l.contains(&(entry - 0xd4 + 0x53)));
        // the second byte 0x06 becomes 0xcc or 0x48
        assert!(l.contains(&(entry + 0xc600)));
        assert!(l.contains(&(entry + 0x4200)));
        // both at once
        assert!(l.contains(&(site + 5 + 0x0606_cccc)));
        assert!(!l.contains(&entry));
        // push r15; push r14; mov r14, rcx: +2 and +4, the high byte too
        let orig = [0x41u8, 0x57, 0x41, 0x56, 0x49, 0x89, 0xce];
        let site = 0x5555_5600_0000u64;
        let entry = site + 5 - 0x1516_f9fa; // rel32 06 06 e9 ea
        let rel = super::super::detour::jmp(site, entry).unwrap();
        assert_eq!(rel, [0xe9, 0x06, 0x06, 0xe9, 0xea]);
        let l = landings(site, entry, &orig);
        assert_eq!(l.len(), 80, "{l:x?}");
        let at = |r: [u8; 4]| (site + 5).wrapping_add(i32::from_le_bytes(r) as i64 as u64);
        // a uprobe at +2 (after push r15), and its removal
        assert!(l.contains(&at([0x06, 0xcc, 0xe9, 0xea])));
        assert!(l.contains(&at([0x06, 0x41, 0xe9, 0xea])));
        // at +4: 870 MB below, 1.2 GB above
        assert!(l.contains(&at([0x06, 0x06, 0xe9, 0xcc])));
        assert!(l.contains(&at([0x06, 0x06, 0xe9, 0x49])));
        // the pages other than the code page's
        let code_page = entry & !(PAGE - 1);
        let pages = landing_pages(site, entry, &orig, code_page);
        assert!(pages.iter().all(|&p| p % PAGE == 0 && p != code_page));
        assert!(l.iter().all(|&x| {
            let p = x & !(PAGE - 1);
            p == code_page || pages.contains(&p)
        }));
        // a first instruction of five bytes or more: no boundary inside,
        // but a uprobe inside it changes the rel32 all the same
        let orig = [0xb8u8, 1, 0, 0, 0, 0x55];
        let l = landings(site, entry, &orig);
        assert_eq!(l.len(), 80, "{l:x?}");
        // +1 and +3, inside instructions: ours, 0xcc or the file's byte
        assert!(l.contains(&at([0xcc, 0x06, 0xe9, 0xea])));
        assert!(l.contains(&at([0x06, 0x06, 0x00, 0xea])));
    }

    #[test]
    fn landing_pages_are_free_with_room() {
        let m = |start: u64, end: u64, path: &str| procfs::Mapping {
            start,
            end,
            perms: "r-xp".into(),
            offset: 0,
            path: (!path.is_empty()).then(|| path.into()),
            ..Default::default()
        };
        let maps = vec![
            m(0x5555_5500_0000, 0x5555_5700_0000, "/bin/postgres"),
            m(0x5555_5800_0000, 0x5555_5900_0000, "[heap]"),
            m(0x7f00_0000_0000, 0x7f00_0010_0000, "/lib/libc.so"),
            m(0x7fff_0000_0000, 0x7fff_0010_0000, "[stack]"),
        ];
        // below the binary, with a guard page either side
        assert!(landing_page_free(&maps, 0x5555_4000_0000));
        assert!(landing_page_free(&maps, 0x5555_5500_0000 - 2 * PAGE));
        assert!(!landing_page_free(&maps, 0x5555_5500_0000 - PAGE));
        assert!(!landing_page_free(&maps, 0x5555_5600_0000));
        assert!(!landing_page_free(&maps, 0x5555_5700_0000));
        assert!(landing_page_free(&maps, 0x5555_5700_0000 + PAGE));
        // above the heap: only with room for it to grow
        assert!(!landing_page_free(&maps, 0x5555_5900_0000 + PAGE));
        assert!(!landing_page_free(&maps, 0x5555_5900_0000 + (256 << 20)));
        assert!(landing_page_free(&maps, 0x5555_5900_0000 + (512 << 20)));
        // not under the stack, not outside the user range
        assert!(!landing_page_free(&maps, 0x7fff_0000_0000 - (64 << 20)));
        assert!(!landing_page_free(&maps, 0x7f00_0010_0000 + PAGE));
        assert!(landing_page_free(&maps, 0x7f00_0000_0000 - 2 * PAGE));
        assert!(!landing_page_free(&maps, 0x1000));
        assert!(!landing_page_free(&maps, 0x8000_0000_0000));
        assert!(!landing_page_free(&maps, 0xffff_ffff_ffff_f000));
    }

    #[test]
    fn boundaries_are_the_original_instructions() {
        // push r15; push r14; mov r14, rcx (7 bytes displaced)
        let d = Detour {
            site: 0x1000,
            orig: vec![0x41, 0x57, 0x41, 0x56, 0x49, 0x89, 0xce],
            code: (0, 0),
            data: (0, 0),
            entry: None,
            traps_inside: true,
            landings: Vec::new(),
            taken_over: None,
        };
        assert_eq!(boundaries(&d), vec![0x1000, 0x1002, 0x1004]);
        // endbr64; push rbp (5 bytes)
        let d = Detour {
            orig: vec![0xf3, 0x0f, 0x1e, 0xfa, 0x55],
            ..d
        };
        assert_eq!(boundaries(&d), vec![0x1000, 0x1004]);
    }
}
