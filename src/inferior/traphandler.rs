//! A SIGTRAP handler of ours inside the target, for as long as int3s or
//! debug registers of ours are armed there.  While pgdbg traces the target
//! it never runs: ptrace reports every SIGTRAP to pgdbg first, and pgdbg
//! never delivers one.  It runs only when pgdbg is gone (SIGKILL, the OOM
//! killer, a crash of pgdbg) and the target traps before the guardian
//! (guardian.rs) has restored it: without it the SIGTRAP kills the backend
//! and the postmaster restarts the cluster.  The SIGTRAP of a stop pgdbg
//! was holding when it died never reaches it: the kernel drops it (Linux
//! 6.18, tests/fixtures/tracer_death.c), which is why pgdbg puts `rip`
//! back on the int3 first thing at every hit (the int3 then traps again,
//! untraced, and comes here).
//!
//! The handler (raw machine code, no libc, no stack use of its own beyond
//! its return address, every signal but SIGTRAP blocked while it runs; a
//! nested SIGTRAP's frame lies below its own and returns first; SIGTRAP itself
//! is not deferred (SA_NODEFER): a debug register's trap inside the
//! handler, on a stack word its own frame reuses, comes to it again one
//! frame deeper and returns at once, where a blocked one would be forced
//! to its default action and kill the backend; `BLOCKED_IN_HANDLERS`):
//! * an int3 at the return address or an error trap of an inferior call
//!   whose record pgdbg wrote into the data page (callrepair.rs), when it
//!   is that call's: the backend is put back as before the call (or first
//!   sent through the flush function, at an error trap);
//! * an int3 (`si_code` SI_KERNEL or TRAP_BRKPT) whose address (`rip - 1`
//!   in the interrupted context) is in our table: when the byte there is
//!   still 0xcc, the page is made writable (`mprotect`, page-aligned,
//!   read/write/exec), the original byte stored, the page made read/exec
//!   again; then the context's `rip` is set back to the int3's address and
//!   the handler returns (`rt_sigreturn` through our restorer): the
//!   original instruction runs as if the int3 had never been there; when
//!   the mprotect fails it dies as below (rewinding would loop on the int3);
//! * an int3 not in the table whose byte is still 0xcc (not ours, or ours
//!   and missing from the table), or the one behind an injected system call
//!   (`rip` = AT_ENTRY + 3): the code cannot go on there, so it dies as it
//!   would without us: SIGTRAP's action back to the default, and a SIGTRAP
//!   to its own thread (not blocked: delivered as the `tgkill` returns,
//!   so the core shows the handler's frame above the backend's);
//! * a single-step (`si_code` TRAP_TRACE): the trap flag is cleared in the
//!   interrupted context (else it traps on every instruction after);
//! * anything else (a watchpoint: `rip` is already past the writing
//!   instruction, nothing to undo; a SIGTRAP pgdbg had dealt with, whose
//!   `si_code` it set to TRAP_UNK when it wrote `rip`): it returns,
//!   changing nothing.
//!
//! The table holds every address pgdbg has armed since the handler was
//! installed, with its original byte (code does not change, so an entry
//! stays true after its int3 is removed): an address costs one 8-byte write
//! into the target the first time it is armed, none after (internal
//! one-shot breakpoints are armed thousands of times a second).  When it is
//! full, the addresses still armed are written into the other half of the
//! table and one word switches the handler to it.
//!
//! Installed with an injected `rt_sigaction` only where the target's
//! SIGTRAP action is the default one; the action found is recorded in the
//! guardian's table first and put back at detach (by pgdbg or the
//! guardian), then the pages are unmapped unless the target is still
//! inside the handler (it calls nothing, so only `rip` can point there).
//!
//! Here: the pages' layout and the kernel ABI the code relies on, and
//! what pgdbg keeps of an installed handler (`TrapHandler`); the machine
//! code in traphandler/code.rs; installing, keeping the table and
//! removing, over ptrace, in traphandler/install.rs.

mod code;
mod install;

use super::{callrepair, procfs, selfrelease};
use std::collections::HashSet;

use code::repair_offset;
pub use code::{code_len, emit, holds_our_code, repair_offset_in};

const PAGE: u64 = 4096;
/// Entries in each half of the table.
pub const CAP: u64 = 16384;
/// A table entry that matches no int3: address 1 (page zero is never
/// code), not zero (a zero entry ends the table).
const INERT: u64 = 1;
/// Mapping: code page, data page (selector, sigaction scratch, the record
/// of a call in flight: callrepair.rs), two halves, the call's XSAVE image.
const TABLE_BYTES: u64 = CAP * 8;
pub(super) const XAREA: u64 = 2 * PAGE + 2 * TABLE_BYTES;
pub const MAP_LEN: u64 = XAREA + callrepair::XAREA_LEN;
const DATA: u64 = PAGE;
/// In the data page: the address of the active half.
const SEL: u64 = DATA;
/// In the data page: the target's AT_ENTRY (where inject_syscall runs
/// `syscall; int3`).
pub(super) const ENTRY: u64 = DATA + 0x10;
/// In the data page: kernel sigaction structs for rt_sigaction; ACT_DFL
/// stays all zeros (SIG_DFL), for the handler itself.
const ACT_NEW: u64 = DATA + 0x40;
const ACT_OLD: u64 = DATA + 0x80;
const ACT_DFL: u64 = DATA + 0xc0;
const HALF0: u64 = 2 * PAGE;
// the call record (callrepair.rs) shares the data page: its words lie
// between and after these
const _: () = assert!(
    DATA == callrepair::DATA
        && ENTRY + 8 <= callrepair::LAYOUT
        && callrepair::LAYOUT + 8 <= ACT_NEW
        && ACT_DFL + 8 * SA_WORDS as u64 <= callrepair::MARK
);
/// The restorer's offset in the code page.
pub(super) const RESTORER: u64 = 0x400;
// selfrelease.rs's words lie after the call record in the data page
const _: () = assert!(callrepair::XLEN + 8 <= selfrelease::FD && selfrelease::END <= 2 * PAGE);
const _: () = assert!(RESTORER + 16 <= selfrelease::CODE);

// Kernel ABI constants (x86-64), fixed by the kernel's user-space ABI:
/// `siginfo_t.si_code`: after `int si_signo; int si_errno;`
/// (include/uapi/asm-generic/siginfo.h).
const SIGINFO_CODE: u32 = 8;
/// `ucontext_t.uc_mcontext.rip`: `struct ucontext { unsigned long
/// uc_flags; struct ucontext *uc_link; stack_t uc_stack (24 bytes);
/// struct sigcontext uc_mcontext; ... }` (arch/x86/include/uapi/asm/
/// ucontext.h), and in `struct sigcontext_64` rip follows r8-r15, rdi,
/// rsi, rbp, rbx, rdx, rax, rcx, rsp: 16 words (arch/x86/include/uapi/
/// asm/sigcontext.h; glibc's REG_RIP = 16).  40 + 16 * 8.
const UCONTEXT_RIP: u32 = 40 + 16 * 8;
/// `ucontext_t.uc_mcontext.eflags`: the word after rip (glibc's REG_EFL
/// = 17), and its trap flag (bit 8).
const UCONTEXT_EFLAGS: u32 = 40 + 17 * 8;
const EFLAGS_TF: u32 = 1 << 8;
const SYS_MPROTECT: u32 = 10;
const SYS_RT_SIGRETURN: u32 = 15;
const SYS_RT_SIGACTION: u32 = 13;
const SYS_GETPID: u32 = 39;
const SYS_GETTID: u32 = 186;
const SYS_TGKILL: u32 = 234;
/// `struct sigaction` as the kernel takes it (kernel_sigaction): handler,
/// flags, restorer, mask (8 bytes): 4 words.
pub const SA_WORDS: usize = 4;
const SA_SIGINFO: u64 = 4;
const SA_RESTART: u64 = 0x1000_0000;
const SA_RESTORER: u64 = 0x0400_0000;
/// arch/x86/include/uapi/asm/signal.h (not exported by libc either).
const SA_NODEFER: u64 = 0x4000_0000;

pub use super::signals::BLOCKED_IN_HANDLERS;

/// Our SIGTRAP action (kernel sigaction: handler, flags, restorer, mask)
/// for the pages at `base`: siginfo, restarted system calls, our
/// restorer, SIGTRAP neither blocked nor deferred (SA_NODEFER) while it
/// runs, every other signal blocked.
pub(super) fn action(base: u64) -> [u64; SA_WORDS] {
    [
        base,
        SA_SIGINFO | SA_RESTART | SA_RESTORER | SA_NODEFER,
        base + RESTORER,
        BLOCKED_IN_HANDLERS,
    ]
}
/// Entry: bits 0-47 the address, bit 48 the page is writable already (no
/// mprotect), bits 56-63 the original byte.
const ADDR_MASK: u64 = (1 << 48) - 1;
const F_WRITABLE: u64 = 1 << 48;

/// Where the SIGCONT handler (selfrelease.rs) finds the words it reads.
fn release_layout() -> selfrelease::Layout {
    use callrepair as cr;
    selfrelease::Layout {
        sel: SEL,
        entry: ENTRY,
        cap: CAP as u32,
        mark: cr::MARK,
        sp: cr::SP,
        int3s: cr::INT3S,
        dataw: cr::DATAW,
        data_slots: cr::DATA_SLOTS as u32,
        uc_rip: cr::UC_RIP,
        uc_rsp: cr::UC_RSP,
        gregs_rsp: cr::GREGS + 8 * cr::GREGS_RSP,
        gregs_rip: cr::GREGS + 8 * cr::GREGS_RIP,
        repair: repair_offset(),
        restorer: RESTORER,
    }
}

/// A handler installed in the target.
#[derive(Debug, Clone)]
pub struct TrapHandler {
    pub base: u64,
    /// The SIGTRAP action found at install (kernel sigaction), put back at
    /// detach; None while it has not been read (nothing changed yet).
    pub old: Option<[u64; SA_WORDS]>,
    /// Whether our action is (or may be) in place.
    installed: bool,
    /// Addresses in the active half, in order.
    entries: Vec<u64>,
    known: HashSet<u64>,
    half: u64,
    /// Executable mappings (start, end, writable), refreshed on a miss.
    exec: Vec<(u64, u64, bool)>,
    /// The pipe and SIGCONT handler that end the stop when every pgdbg
    /// process is gone (selfrelease.rs).
    pub release: Option<selfrelease::Release>,
}

impl TrapHandler {
    /// Taken over by the guardian from pgdbg's record.
    pub fn adopted(base: u64, old: Option<[u64; SA_WORDS]>) -> TrapHandler {
        TrapHandler {
            base,
            old,
            installed: old.is_some(),
            entries: Vec::new(),
            known: HashSet::new(),
            half: 0,
            exec: Vec::new(),
            release: None,
        }
    }

    /// Whether our action is (or may be) in place.
    pub fn is_installed(&self) -> bool {
        self.installed
    }

    fn half_addr(&self, h: u64) -> u64 {
        self.base + HALF0 + h * TABLE_BYTES
    }

    fn entry(&mut self, pid: i32, addr: u64, orig: u8) -> u64 {
        let find = |e: &[(u64, u64, bool)]| {
            e.iter()
                .find(|(s, en, _)| *s <= addr && addr < *en)
                .map(|x| x.2)
        };
        let writable = match find(&self.exec) {
            Some(w) => w,
            None => {
                self.exec = procfs::maps(pid)
                    .unwrap_or_default()
                    .iter()
                    .filter(|m| m.perms.contains('x'))
                    .map(|m| (m.start, m.end, m.perms.contains('w')))
                    .collect();
                find(&self.exec).unwrap_or(false)
            }
        };
        (addr & ADDR_MASK) | if writable { F_WRITABLE } else { 0 } | ((orig as u64) << 56)
    }
}

fn sa_bytes(sa: &[u64; SA_WORDS]) -> Vec<u8> {
    sa.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[cfg(test)]
mod release_tests;

#[cfg(test)]
mod tests;
