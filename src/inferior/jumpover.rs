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
//!
//! Here: what is decided from bytes and maps alone (which jumps trap,
//! where a changed jump lands, which pages are free), unit-tested; what
//! is done in the target over ptrace in jumpover/target.rs.

mod target;

use super::detour::{Detour, JMP_LEN};
use super::{INT3, procfs};
use iced_x86::{Decoder, DecoderError, DecoderOptions};

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
