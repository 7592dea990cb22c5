//! The backend ends its own stop when every pgdbg process is gone.
//!
//! pgdbg holds the backend in a group stop (hold.rs) and the guardian ends
//! it when pgdbg dies; with pgdbg and its guardian killed together nothing
//! would.  So, once the SIGTRAP handler's pages exist (traphandler.rs), the
//! backend gets the read end of a pipe whose only writers are pgdbg and its
//! guardian, with `O_ASYNC`, `F_SETOWN` = the backend and `F_SETSIG` =
//! SIGCONT.  Nobody writes into it.  When the last writer's file is
//! released (every pgdbg process dead, whatever killed it), the kernel's
//! `pipe_release` sends the owner SIGCONT (`si_code` POLL_IN, `si_fd` the
//! read end): the group stop ends at once (tests/fixtures/pipe_release.c,
//! a delay of well under a millisecond), tracer or not.
//!
//! Set up with injected system calls: `pipe2` in the backend, its write end
//! copied into pgdbg (`pidfd_getfd`, close-on-exec) and into the guardian
//! (which takes it from the backend the same way when pgdbg asks it to),
//! the backend's own write end closed, then `fcntl` × 3 on the read end,
//! `F_SETFL` last.  Both ends are recorded in the guardian's table first.
//!
//! The SIGCONT handler (raw code in the handler's code page, every signal
//! blocked while it runs), installed only where the backend's SIGCONT
//! action is the default one (PostgreSQL installs none), the action found
//! kept in the data page and put back at detach.  It acts only on our
//! pipe's signal (`si_code` POLL_IN, `si_fd` ours); then, in the
//! interrupted context:
//! * `rip - 1` one of our int3s (the table, the return or error traps of a
//!   call record), its byte still 0xcc, and (`rip`, `rsp`) not where pgdbg
//!   resumed the backend on purpose (recorded here before such a resume):
//!   a trap pgdbg had not rewound (the kernel dropped its SIGTRAP).  `rip`
//!   goes back onto the int3, which traps again, untraced, into the SIGTRAP
//!   handler (it restores the byte, or repairs a call);
//! * data words changed around calls (callrepair.rs) with no call record
//!   and the registers the backend's own (`NOT_OWN` 0, `rsp` the one the
//!   series saved: before its first call's registers are written; or the
//!   entry of another handler of the backend's whose frame holds that
//!   `rsp` and the saved `rip`: a lower-numbered signal that came while
//!   it was held, delivered just before this one): it puts them back from
//!   their slots (before that handler runs), empties the slots, and the
//!   backend runs on as below; a call running or at its return trap puts them back at
//!   that trap, and one the SIGTRAP handler has repaired (its trap may be
//!   taken before the SIGCONT) did; slots found with another `rsp` (left
//!   over where a restore failed) stop it again;
//! * a call's registers being written or put back (`NOT_OWN` bit 0, no
//!   mark yet or any more: `rsp` the call's return slot or just above it,
//!   or the saved registers' own), or a call record whose call neither
//!   runs nor is at its return trap with the saved registers' own `rsp`:
//!   it runs the SIGTRAP handler's call repair (callrepair.rs) on this
//!   context, as at the call's return trap (the saved registers and XSAVE
//!   image, the data words, the call's int3s put back; `MARK` REPAIRED),
//!   and the backend runs on as below from where pgdbg had stopped it;
//! * `rip` in an injected system call's code at AT_ENTRY, registers not
//!   the backend's own other than a call's (`NOT_OWN`: a system call, a
//!   record of data words that is not whole, a call record that cannot
//!   repair), or a call's context that is none of the above (another
//!   handler's frame delivered first): it stops the backend again
//!   (SIGSTOP to itself), the state it was left in before (`pgdbg rescue`
//!   repairs it);
//! * anything else: it returns and the backend runs on, with the signals
//!   pgdbg held back for it (`SIGS`: during a call series or at an event
//!   stop) sent
//!   to itself first, SIGCONT and the stop signals left out: a
//!   `statement_timeout`'s SIGALRM still fires.  PostgreSQL's handlers set
//!   flags (and a latch), and a call in flight has interrupts held off
//!   (`InterruptHoldoffCount`) until its repair puts the counter back.  A
//!   stop it makes again keeps `SIGS` for `pgdbg rescue`.
//!
//! While pgdbg or the guardian traces the backend the pipe has a writer,
//! so no such signal comes; anyone else's SIGCONT they see is not
//! delivered to the handler (its effect, ending the stop, happened when it
//! was sent; with the default action it is discarded the same).  Every
//! detach closes the read end first, before the action and the pages go.

use super::Target;
use anyhow::{Result, anyhow, bail};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

/// Where the SIGCONT handler's code starts in the code page (after the
/// SIGTRAP handler's restorer).
pub const CODE: u64 = 0x440;
/// In the data page (offsets from the mapping's base, the data page being
/// its second page): our read end's descriptor + 1 (0: none).
pub(super) const FD: u64 = 4096 + 0x800;
/// Where pgdbg last resumed the backend one past an int3 of ours on
/// purpose: rip, rsp (rip 0: none).
pub(super) const RES_RIP: u64 = 4096 + 0x808;
pub(super) const RES_RSP: u64 = 4096 + 0x810;
/// The SIGCONT action found at install (kernel sigaction, 4 words).
const OLD: u64 = 4096 + 0x818;
/// Scratch: pipe2's two descriptors; then a sigaction to install.
const PIPE: u64 = 4096 + 0x840;
const ACT: u64 = 4096 + 0x848;
/// How often the handler let the backend run on (0: never): the records
/// of pgdbg's guardian are old then, never replayed (guardian.rs).
pub(super) const RELEASED: u64 = 4096 + 0x868;
/// Nonzero while the registers (or the xstate) are not the backend's own:
/// bit 0 a call of pgdbg's (set before its registers are first written,
/// cleared once the saved ones are back), bit 1 an injected system call
/// (written before the guardian's record of it, cleared after it).  Bit 2:
/// the data words a call series changes are not all in the SIGTRAP
/// handler's slots (callrepair.rs): none is put back by a handler.  Bit
/// 3: the call's record cannot repair it (not written whole, AMX state).
pub(super) const NOT_OWN: u64 = 4096 + 0x870;
/// The signals pgdbg holds back for the backend (bit N-1 for signal N),
/// as the guardian's record has them: the handler sends them before it
/// lets the backend run on, and empties the word.
pub(super) const SIGS: u64 = 4096 + 0x878;
pub(super) const END: u64 = SIGS + 8;
const _: () = assert!(ACT + 32 <= RELEASED && END <= 2 * 4096);

const POLL_IN: u8 = 1;
/// Signals the handler never sends from `SIGS` (bit N-1 for signal N).
const NOT_SENT: u64 = 1 << (libc::SIGCONT - 1)
    | 1 << (libc::SIGSTOP - 1)
    | 1 << (libc::SIGTSTP - 1)
    | 1 << (libc::SIGTTIN - 1)
    | 1 << (libc::SIGTTOU - 1);
/// fcntl's F_SETSIG (include/uapi/asm-generic/fcntl.h; not in the libc crate).
const F_SETSIG: i32 = 10;
/// `siginfo_t` for SIGPOLL: `si_band` (long) at 16, `si_fd` (int) at 24.
const SIGINFO_FD: u8 = 24;
/// Another handler's frame below the saved registers' rsp (`putback`):
/// at least its return address and ucontext up to `rip` (8 + `uc_rip` +
/// 8 bytes, `nest_min`; a real one is over a kilobyte, and the red zone's
/// 128 bytes come first), at most 64 KiB below it.
const NEST_MAX: u32 = 64 * 1024;
fn nest_min(l: &Layout) -> u32 {
    8 + l.uc_rip + 8
}

/// Words of the SIGTRAP handler's mapping the SIGCONT handler reads, as
/// offsets from its base (traphandler.rs and callrepair.rs own them).
pub struct Layout {
    /// The address of the table's active half.
    pub sel: u64,
    /// AT_ENTRY, where injected system calls run.
    pub entry: u64,
    /// Entries in a half of the table (each: address in bits 0-47).
    pub cap: u32,
    /// A call's record: its return address (> 1: in flight), its
    /// return-address slot, its error traps (zero-ended), its data words
    /// (slots of 3 words, the first nonzero when used).
    pub mark: u64,
    pub sp: u64,
    pub int3s: u64,
    pub dataw: u64,
    pub data_slots: u32,
    /// `ucontext_t` offsets of rip and rsp.
    pub uc_rip: u32,
    pub uc_rsp: u32,
    /// The call record's saved `rsp` and `rip` (the backend's own before
    /// the call, `rip` as it resumes: see `callrepair::as_resumed`).
    pub gregs_rsp: u64,
    pub gregs_rip: u64,
    /// The SIGTRAP handler's call repair, from the base: entered with r11
    /// = base + 4096 and rdx = the ucontext, it puts the data words, the
    /// saved registers and XSAVE image (into the context) and the call's
    /// int3s back, `MARK` = REPAIRED, and returns (callrepair.rs).
    pub repair: u64,
    /// The SIGTRAP handler's restorer (`rt_sigreturn`), shared.
    pub restorer: u64,
}

/// The SIGCONT handler's machine code, for a mapping at `base`; it goes at
/// `base + CODE` and returns through the SIGTRAP handler's restorer.
pub fn emit(base: u64, l: &Layout) -> Vec<u8> {
    let mut c: Vec<u8> = Vec::with_capacity(256);
    let d32 = |c: &mut Vec<u8>, v: u32| c.extend_from_slice(&v.to_le_bytes());
    // rel32 jumps to labels, patched at the end
    let mut jumps: Vec<(usize, &'static str)> = Vec::new();
    let jcc = |c: &mut Vec<u8>, j: &mut Vec<(usize, &'static str)>, cc: u8, to| {
        c.extend_from_slice(&[0x0f, cc, 0, 0, 0, 0]);
        j.push((c.len() - 4, to));
    };
    let jmp = |c: &mut Vec<u8>, j: &mut Vec<(usize, &'static str)>, to| {
        c.extend_from_slice(&[0xe9, 0, 0, 0, 0]);
        j.push((c.len() - 4, to));
    };
    const JE: u8 = 0x84;
    const JNE: u8 = 0x85;
    const JBE: u8 = 0x86;
    const JA: u8 = 0x87;
    const JB: u8 = 0x82;
    const JAE: u8 = 0x83;
    let mut labels: Vec<(&'static str, usize)> = Vec::new();
    // disp32 from r11 = base + 4096 (the data page)
    let dp = |a: u64| (a - 4096) as u32;
    // rdi = signal, rsi = siginfo, rdx = ucontext
    c.extend_from_slice(&[0x83, 0x7e, 0x08, POLL_IN]); // cmp dword [rsi+8], POLL_IN
    jcc(&mut c, &mut jumps, JNE, "done");
    c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, base+4096
    c.extend_from_slice(&(base + 4096).to_le_bytes());
    c.extend_from_slice(&[0x8b, 0x46, SIGINFO_FD]); // mov eax, [rsi+24]   si_fd
    c.extend_from_slice(&[0x48, 0xff, 0xc0]); // inc rax
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+FD]
    d32(&mut c, dp(FD));
    jcc(&mut c, &mut jumps, JNE, "done");
    // ours: every writer of the pipe is gone
    c.extend_from_slice(&[0x4c, 0x8b, 0x82]); // mov r8, [rdx+uc_rip]
    d32(&mut c, l.uc_rip);
    c.extend_from_slice(&[0x4d, 0x8d, 0x48, 0xff]); // lea r9, [r8-1]
    // registers not the backend's own: only a call's (`NOT_OWN` 1, no
    // system call, a record that repairs) are dealt with here: running or
    // at its return trap (`MARK` > 1, rsp at most its return slot + 8) it
    // is repaired by the SIGTRAP handler at that trap, or was already
    // (`MARK` 1: its SIGTRAP is taken before this SIGCONT); being set up
    // or put back, or not running with the saved rsp, the repair runs
    // here; the rest stops again
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // mov rax, [r11+NOT_OWN]
    d32(&mut c, dp(NOT_OWN));
    c.extend_from_slice(&[0x48, 0x85, 0xc0]); // test rax, rax
    jcc(&mut c, &mut jumps, JE, "calls");
    c.extend_from_slice(&[0x48, 0x83, 0xf8, 0x01]); // cmp rax, 1
    jcc(&mut c, &mut jumps, JNE, "restop");
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // mov rax, [r11+mark]
    d32(&mut c, dp(l.mark));
    c.extend_from_slice(&[0x48, 0x85, 0xc0]); // test rax, rax
    jcc(&mut c, &mut jumps, JE, "unmarked");
    c.extend_from_slice(&[0x48, 0x83, 0xf8, 0x01]); // cmp rax, 1
    jcc(&mut c, &mut jumps, JE, "calls");
    c.extend_from_slice(&[0x48, 0x8b, 0x82]); // mov rax, [rdx+uc_rsp]
    d32(&mut c, l.uc_rsp);
    c.extend_from_slice(&[0x48, 0x83, 0xe8, 0x08]); // sub rax, 8
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+sp]
    d32(&mut c, dp(l.sp));
    jcc(&mut c, &mut jumps, JA, "own_rsp");
    jmp(&mut c, &mut jumps, "calls");
    // unmarked: a call's registers being written (the call not started:
    // rsp its return slot) or put back (rsp just above it, or the saved
    // registers' own rsp)
    labels.push(("unmarked", c.len()));
    c.extend_from_slice(&[0x48, 0x8b, 0x82]); // unmarked: mov rax, [rdx+uc_rsp]
    d32(&mut c, l.uc_rsp);
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+sp]
    d32(&mut c, dp(l.sp));
    jcc(&mut c, &mut jumps, JNE, "not_slot");
    // at the slot: it holds the call's return address (another handler's
    // frame there would hold its restorer)
    c.extend_from_slice(&[0x48, 0x8b, 0x08]); // mov rcx, [rax]
    c.extend_from_slice(&[0x49, 0x3b, 0x8b]); // cmp rcx, [r11+int3s]   the return address
    d32(&mut c, dp(l.int3s));
    jcc(&mut c, &mut jumps, JE, "repair");
    jmp(&mut c, &mut jumps, "restop");
    labels.push(("not_slot", c.len()));
    c.extend_from_slice(&[0x48, 0x83, 0xe8, 0x08]); // not_slot: sub rax, 8
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+sp]
    d32(&mut c, dp(l.sp));
    jcc(&mut c, &mut jumps, JE, "repair");
    // own_rsp: only the saved registers' own rsp is theirs (another
    // handler's frame, delivered before this one, is below it)
    labels.push(("own_rsp", c.len()));
    c.extend_from_slice(&[0x48, 0x8b, 0x82]); // own_rsp: mov rax, [rdx+uc_rsp]
    d32(&mut c, l.uc_rsp);
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+gregs_rsp]
    d32(&mut c, dp(l.gregs_rsp));
    jcc(&mut c, &mut jumps, JNE, "restop");
    // repair: the SIGTRAP handler's call repair, as at the call's return
    // trap: the saved registers and XSAVE image into this context, the
    // data words and the call's int3s back; then on (its system calls
    // take r11: the base again)
    labels.push(("repair", c.len()));
    c.push(0xe8); // repair: call base+repair
    let rel = l.repair as i64 - (CODE as i64 + c.len() as i64 + 4);
    d32(&mut c, i32::try_from(rel).expect("near call") as u32);
    c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, base+4096
    c.extend_from_slice(&(base + 4096).to_le_bytes());
    jmp(&mut c, &mut jumps, "go");
    labels.push(("calls", c.len()));
    // a call's int3s: its return address, then its error traps
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // mov rax, [r11+mark]
    d32(&mut c, dp(l.mark));
    c.extend_from_slice(&[0x48, 0x83, 0xf8, 0x01]); // cmp rax, 1
    jcc(&mut c, &mut jumps, JBE, "table");
    c.extend_from_slice(&[0x4c, 0x39, 0xc8]); // cmp rax, r9
    jcc(&mut c, &mut jumps, JE, "int3");
    c.extend_from_slice(&[0x49, 0x8d, 0x8b]); // lea rcx, [r11+int3s+8]
    d32(&mut c, dp(l.int3s) + 8);
    labels.push(("traps", c.len()));
    c.extend_from_slice(&[0x4c, 0x8b, 0x11]); // traps: mov r10, [rcx]
    c.extend_from_slice(&[0x4d, 0x85, 0xd2]); // test r10, r10
    jcc(&mut c, &mut jumps, JE, "table");
    c.extend_from_slice(&[0x4d, 0x39, 0xca]); // cmp r10, r9
    jcc(&mut c, &mut jumps, JE, "int3");
    c.extend_from_slice(&[0x48, 0x83, 0xc1, 0x08]); // add rcx, 8
    jmp(&mut c, &mut jumps, "traps");
    // the table's active half
    labels.push(("table", c.len()));
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // table: mov rax, [r11+sel]
    d32(&mut c, dp(l.sel));
    c.push(0xb9); // mov ecx, cap
    d32(&mut c, l.cap);
    labels.push(("loop", c.len()));
    c.extend_from_slice(&[0x4c, 0x8b, 0x10]); // loop: mov r10, [rax]
    c.extend_from_slice(&[0x4d, 0x85, 0xd2]); // test r10, r10
    jcc(&mut c, &mut jumps, JE, "other");
    c.extend_from_slice(&[0x49, 0xc1, 0xe2, 0x10]); // shl r10, 16
    c.extend_from_slice(&[0x49, 0xc1, 0xea, 0x10]); // shr r10, 16   address
    c.extend_from_slice(&[0x4d, 0x39, 0xca]); // cmp r10, r9
    jcc(&mut c, &mut jumps, JE, "int3");
    c.extend_from_slice(&[0x48, 0x83, 0xc0, 0x08]); // add rax, 8
    c.extend_from_slice(&[0xff, 0xc9]); // dec ecx
    jcc(&mut c, &mut jumps, JNE, "loop");
    jmp(&mut c, &mut jumps, "other");
    // rip - 1 is an int3 address of ours (mapped code): still an int3,
    // and not a resume of pgdbg's there?
    labels.push(("int3", c.len()));
    c.extend_from_slice(&[0x41, 0x80, 0x39, 0xcc]); // int3: cmp byte [r9], 0xcc
    jcc(&mut c, &mut jumps, JNE, "other");
    c.extend_from_slice(&[0x4d, 0x3b, 0x83]); // cmp r8, [r11+RES_RIP]
    d32(&mut c, dp(RES_RIP));
    jcc(&mut c, &mut jumps, JNE, "rewind");
    c.extend_from_slice(&[0x48, 0x8b, 0x82]); // mov rax, [rdx+uc_rsp]
    d32(&mut c, l.uc_rsp);
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+RES_RSP]
    d32(&mut c, dp(RES_RSP));
    jcc(&mut c, &mut jumps, JE, "other");
    labels.push(("rewind", c.len()));
    c.extend_from_slice(&[0x4c, 0x89, 0x8a]); // rewind: mov [rdx+uc_rip], r9
    d32(&mut c, l.uc_rip);
    jmp(&mut c, &mut jumps, "data");
    // other: inside an injected system call (`syscall; int3` at
    // AT_ENTRY)?  A call's return int3 there, rewound, is not one
    labels.push(("other", c.len()));
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // other: mov rax, [r11+entry]
    d32(&mut c, dp(l.entry));
    c.extend_from_slice(&[0x48, 0x85, 0xc0]); // test rax, rax
    jcc(&mut c, &mut jumps, JE, "data");
    c.extend_from_slice(&[0x4c, 0x89, 0xc1]); // mov rcx, r8
    c.extend_from_slice(&[0x48, 0x29, 0xc1]); // sub rcx, rax
    c.extend_from_slice(&[0x48, 0x83, 0xf9, 0x03]); // cmp rcx, 3
    jcc(&mut c, &mut jumps, JA, "data");
    c.extend_from_slice(&[0x48, 0x85, 0xc9]); // test rcx, rcx
    jcc(&mut c, &mut jumps, JNE, "restop");
    c.extend_from_slice(&[0x80, 0x38, 0xcc]); // cmp byte [rax], 0xcc
    jcc(&mut c, &mut jumps, JNE, "restop");
    // data words changed around calls: a call running (rsp at or below
    // its return slot) or at its return trap (rsp just above it) puts
    // them back at that trap; with no call record they are put back here
    labels.push(("data", c.len()));
    c.extend_from_slice(&[0x49, 0x8d, 0x8b]); // data: lea rcx, [r11+dataw]
    d32(&mut c, dp(l.dataw));
    c.extend_from_slice(&[0x41, 0xba]); // mov r10d, data_slots
    d32(&mut c, l.data_slots);
    labels.push(("slots", c.len()));
    c.extend_from_slice(&[0x48, 0x83, 0x39, 0x00]); // slots: cmp qword [rcx], 0
    jcc(&mut c, &mut jumps, JNE, "changed");
    c.extend_from_slice(&[0x48, 0x83, 0xc1, 0x18]); // add rcx, 24
    c.extend_from_slice(&[0x41, 0xff, 0xca]); // dec r10d
    jcc(&mut c, &mut jumps, JNE, "slots");
    jmp(&mut c, &mut jumps, "go");
    // (a call the SIGTRAP handler repaired, `mark` 1, had them put back:
    // its trap can come first, SIGTRAP being taken before SIGCONT; no
    // call record, `mark` 0, means `NOT_OWN` 0 here: the registers are
    // the backend's own, a series before its first call; put back only
    // where rsp is still the one the series saved: a backend that ran on
    // since with slots left over stops again rather than take old values)
    labels.push(("changed", c.len()));
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // changed: mov rax, [r11+mark]
    d32(&mut c, dp(l.mark));
    c.extend_from_slice(&[0x48, 0x85, 0xc0]); // test rax, rax
    jcc(&mut c, &mut jumps, JE, "putback");
    c.extend_from_slice(&[0x48, 0x83, 0xf8, 0x01]); // cmp rax, 1
    jcc(&mut c, &mut jumps, JE, "go");
    c.extend_from_slice(&[0x48, 0x8b, 0x82]); // mov rax, [rdx+uc_rsp]
    d32(&mut c, l.uc_rsp);
    c.extend_from_slice(&[0x48, 0x83, 0xe8, 0x08]); // sub rax, 8
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+sp]
    d32(&mut c, dp(l.sp));
    jcc(&mut c, &mut jumps, JBE, "go");
    jmp(&mut c, &mut jumps, "restop");
    // putback: each used slot's value (1-8 bytes) written back to its
    // address, the slot emptied; a length over 8 is not written
    labels.push(("putback", c.len()));
    c.extend_from_slice(&[0x48, 0x8b, 0x82]); // putback: mov rax, [rdx+uc_rsp]
    d32(&mut c, l.uc_rsp);
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+gregs_rsp]
    d32(&mut c, dp(l.gregs_rsp));
    jcc(&mut c, &mut jumps, JE, "pb_own");
    // or the entry of another handler of the backend's, whose signal came
    // while it was stopped and was delivered just before this one (a
    // lower number: a statement_timeout's SIGALRM, a SIGUSR1): its frame
    // (`rt_sigframe`: the return address, then its ucontext) at rax holds
    // the saved registers' own rsp, and their rip (or 2 past it: a
    // system call the saved registers restart that returned EINTR to that
    // handler).  Read only when rax is below the saved rsp by a frame's
    // words at least and 64 KiB at most: the words read lie between this
    // context's rsp and the saved one, in the stack the kernel has just
    // written that frame and this one into
    c.extend_from_slice(&[0x49, 0x8b, 0x8b]); // mov rcx, [r11+gregs_rsp]
    d32(&mut c, dp(l.gregs_rsp));
    c.extend_from_slice(&[0x48, 0x29, 0xc1]); // sub rcx, rax   (unsigned: above it wraps)
    c.extend_from_slice(&[0x48, 0x81, 0xf9]); // cmp rcx, nest_min
    d32(&mut c, nest_min(l));
    jcc(&mut c, &mut jumps, JB, "restop");
    c.extend_from_slice(&[0x48, 0x81, 0xf9]); // cmp rcx, NEST_MAX
    d32(&mut c, NEST_MAX);
    jcc(&mut c, &mut jumps, JA, "restop");
    // a handler's entry: rax is 8 past a multiple of 16 (the kernel's
    // align_sigframe puts the frame there, as a call would) and holds the
    // return address into the restorer (never 0)
    c.extend_from_slice(&[0x89, 0xc1]); // mov ecx, eax
    c.extend_from_slice(&[0x83, 0xe1, 0x0f]); // and ecx, 15
    c.extend_from_slice(&[0x83, 0xf9, 0x08]); // cmp ecx, 8
    jcc(&mut c, &mut jumps, JNE, "restop");
    c.extend_from_slice(&[0x48, 0x83, 0x38, 0x00]); // cmp qword [rax], 0
    jcc(&mut c, &mut jumps, JE, "restop");
    c.extend_from_slice(&[0x48, 0x8b, 0x88]); // mov rcx, [rax+8+uc_rsp]
    d32(&mut c, 8 + l.uc_rsp);
    c.extend_from_slice(&[0x49, 0x3b, 0x8b]); // cmp rcx, [r11+gregs_rsp]
    d32(&mut c, dp(l.gregs_rsp));
    jcc(&mut c, &mut jumps, JNE, "restop");
    // its rip the saved one, or 2 past it (the length of `syscall`: the
    // saved rip at a call they restart, the frame's past it): never 1
    c.extend_from_slice(&[0x48, 0x8b, 0x88]); // mov rcx, [rax+8+uc_rip]
    d32(&mut c, 8 + l.uc_rip);
    c.extend_from_slice(&[0x49, 0x2b, 0x8b]); // sub rcx, [r11+gregs_rip]
    d32(&mut c, dp(l.gregs_rip));
    jcc(&mut c, &mut jumps, JE, "pb_own"); //   equal (sub sets ZF)
    c.extend_from_slice(&[0x48, 0x83, 0xf9, 0x02]); // cmp rcx, 2
    jcc(&mut c, &mut jumps, JNE, "restop");
    labels.push(("pb_own", c.len()));
    c.extend_from_slice(&[0x49, 0x8d, 0x8b]); // pb_own: lea rcx, [r11+dataw]
    d32(&mut c, dp(l.dataw));
    c.extend_from_slice(&[0x41, 0xba]); // mov r10d, data_slots
    d32(&mut c, l.data_slots);
    labels.push(("pb_slot", c.len()));
    c.extend_from_slice(&[0x48, 0x8b, 0x39]); // pb_slot: mov rdi, [rcx]   address + 1
    c.extend_from_slice(&[0x48, 0x85, 0xff]); // test rdi, rdi
    jcc(&mut c, &mut jumps, JE, "pb_next");
    c.extend_from_slice(&[0x48, 0xff, 0xcf]); // dec rdi
    c.extend_from_slice(&[0x4c, 0x8b, 0x41, 0x08]); // mov r8, [rcx+8]   length
    c.extend_from_slice(&[0x49, 0x83, 0xf8, 0x08]); // cmp r8, 8
    jcc(&mut c, &mut jumps, JA, "pb_empty");
    c.extend_from_slice(&[0x48, 0x8d, 0x71, 0x10]); // lea rsi, [rcx+16]   value
    labels.push(("pb_byte", c.len()));
    c.extend_from_slice(&[0x4d, 0x85, 0xc0]); // pb_byte: test r8, r8
    jcc(&mut c, &mut jumps, JE, "pb_empty");
    c.extend_from_slice(&[0x8a, 0x06]); // mov al, [rsi]
    c.extend_from_slice(&[0x88, 0x07]); // mov [rdi], al
    c.extend_from_slice(&[0x48, 0xff, 0xc6]); // inc rsi
    c.extend_from_slice(&[0x48, 0xff, 0xc7]); // inc rdi
    c.extend_from_slice(&[0x49, 0xff, 0xc8]); // dec r8
    jmp(&mut c, &mut jumps, "pb_byte");
    labels.push(("pb_empty", c.len()));
    c.extend_from_slice(&[0x48, 0xc7, 0x01]); // pb_empty: mov qword [rcx], 0
    d32(&mut c, 0);
    labels.push(("pb_next", c.len()));
    c.extend_from_slice(&[0x48, 0x83, 0xc1, 0x18]); // pb_next: add rcx, 24
    c.extend_from_slice(&[0x41, 0xff, 0xca]); // dec r10d
    jcc(&mut c, &mut jumps, JNE, "pb_slot");
    // go: the backend runs on, counted (the records are old from now on),
    // with the signals pgdbg held back for it: sent to itself here (every
    // signal is blocked in this handler: they are delivered after it, as
    // the interrupted context's mask allows), the word emptied.  A system
    // call takes rcx and r11: the base is kept in r13 (rt_sigreturn puts
    // every register back)
    labels.push(("go", c.len()));
    c.extend_from_slice(&[0x4d, 0x8b, 0xa3]); // go: mov r12, [r11+SIGS]
    d32(&mut c, dp(SIGS));
    c.extend_from_slice(&[0x4d, 0x85, 0xe4]); // test r12, r12
    jcc(&mut c, &mut jumps, JE, "count");
    // never SIGCONT or a stop signal (pgdbg's own group stop, or someone's
    // held back at an event stop: the backend would stop with nobody left)
    c.extend_from_slice(&[0x48, 0xb8]); // movabs rax, !(SIGCONT and the stop signals)
    c.extend_from_slice(&(!NOT_SENT).to_le_bytes());
    c.extend_from_slice(&[0x49, 0x21, 0xc4]); // and r12, rax
    c.extend_from_slice(&[0x49, 0xc7, 0x83]); // mov qword [r11+SIGS], 0
    d32(&mut c, dp(SIGS));
    d32(&mut c, 0);
    c.extend_from_slice(&[0x4d, 0x89, 0xdd]); // mov r13, r11
    c.push(0xb8); // mov eax, SYS_getpid
    d32(&mut c, libc::SYS_getpid as u32);
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    c.extend_from_slice(&[0x41, 0x89, 0xc6]); // mov r14d, eax
    c.extend_from_slice(&[0x45, 0x31, 0xff]); // xor r15d, r15d   bit N-1: signal N
    labels.push(("raise", c.len()));
    c.extend_from_slice(&[0x4d, 0x0f, 0xa3, 0xfc]); // raise: bt r12, r15
    jcc(&mut c, &mut jumps, JAE, "raise_next");
    c.extend_from_slice(&[0x44, 0x89, 0xf7]); // mov edi, r14d
    c.extend_from_slice(&[0x41, 0x8d, 0x77, 0x01]); // lea esi, [r15+1]
    c.push(0xb8); // mov eax, SYS_kill
    d32(&mut c, libc::SYS_kill as u32);
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    labels.push(("raise_next", c.len()));
    c.extend_from_slice(&[0x41, 0xff, 0xc7]); // raise_next: inc r15d
    c.extend_from_slice(&[0x41, 0x83, 0xff, 0x40]); // cmp r15d, 64
    jcc(&mut c, &mut jumps, JB, "raise");
    c.extend_from_slice(&[0x4d, 0x89, 0xeb]); // mov r11, r13
    labels.push(("count", c.len()));
    c.extend_from_slice(&[0x49, 0xff, 0x83]); // count: inc qword [r11+RELEASED]
    d32(&mut c, dp(RELEASED));
    c.push(0xc3); // ret
    // restop: stopped again as before (SIGSTOP cannot be blocked: the stop
    // takes hold as the kill returns, inside this handler)
    labels.push(("restop", c.len()));
    c.push(0xb8); // restop: mov eax, SYS_getpid
    d32(&mut c, libc::SYS_getpid as u32);
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    c.extend_from_slice(&[0x89, 0xc7]); // mov edi, eax
    c.push(0xbe); // mov esi, SIGSTOP
    d32(&mut c, libc::SIGSTOP as u32);
    c.push(0xb8); // mov eax, SYS_kill
    d32(&mut c, libc::SYS_kill as u32);
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    labels.push(("done", c.len()));
    c.push(0xc3); // done: ret
    for (at, to) in jumps {
        let to = labels
            .iter()
            .find(|(n, _)| *n == to)
            .map(|(_, a)| *a)
            .expect("label");
        let rel = i32::try_from(to as isize - (at as isize + 4)).expect("near jump");
        c[at..at + 4].copy_from_slice(&rel.to_le_bytes());
    }
    c
}

/// The pipe and the SIGCONT action set up in a backend.
#[derive(Debug, Clone, Default)]
pub struct Release {
    /// The read end in the backend (armed once `F_SETFL` succeeded).
    pub rfd: Option<i32>,
    /// The backend's own write end, until it is closed.
    pub wfd: Option<i32>,
    /// Our SIGCONT action is (or may be) in place; the old one is in the
    /// data page.
    pub action: bool,
    /// pgdbg's own write end (None in the guardian and `pgdbg rescue`).
    pub mine: Option<Arc<OwnedFd>>,
    /// A resume point is written in the data page (not all zeros).
    resume_set: bool,
    /// What `NOT_OWN` and `SIGS` hold now (written when they change;
    /// `u64::MAX`: not known, the page is read).
    not_own: u64,
    sigs: u64,
    /// The read end no longer signals (a word above could not be
    /// written): the words do not matter any more.
    disarmed: bool,
    /// That is being done (an injected `fcntl`).
    disarming: bool,
}

impl Release {
    /// The read end is being disarmed (its own injected `fcntl`).
    pub fn disarming(&self) -> bool {
        self.disarming
    }

    /// The record's word (guardian.rs): read end + 1, write end + 1 << 32,
    /// bit 63 the action.
    pub fn word(&self) -> u64 {
        let f = |x: Option<i32>| x.map(|v| v as u64 + 1).unwrap_or(0) & 0x7fff_ffff;
        f(self.rfd) | f(self.wfd) << 32 | (self.action as u64) << 63
    }

    pub fn from_word(w: u64) -> Option<Release> {
        let f = |x: u64| (x != 0).then(|| (x - 1) as i32);
        let r = Release {
            rfd: f(w & 0x7fff_ffff),
            wfd: f((w >> 32) & 0x7fff_ffff),
            action: w >> 63 != 0,
            mine: None,
            resume_set: true,
            not_own: u64::MAX,
            sigs: u64::MAX,
            disarmed: false,
            disarming: false,
        };
        (r.rfd.is_some() || r.wfd.is_some() || r.action).then_some(r)
    }
}

/// Whether the running kernel's release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = r
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

fn sa_bytes(sa: &[u64; 4]) -> Vec<u8> {
    sa.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn pidfd_getfd(pid: i32, fd: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) / pidfd_getfd(2); each fd is owned at once.
    unsafe {
        let p = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        if p < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let pidfd = OwnedFd::from_raw_fd(p as i32);
        let f = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
        if f < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(f as i32))
    }
}

/// The write end `fd` of backend `pid`, copied into this process (the
/// guardian's side of the hand-over).
pub fn take_write_end(pid: i32, fd: i32) -> std::io::Result<OwnedFd> {
    pidfd_getfd(pid, fd)
}

impl Target {
    fn release_base(&self) -> Option<u64> {
        self.trap.as_ref().map(|h| h.base)
    }

    fn note_release(&mut self) {
        let w = self
            .trap
            .as_ref()
            .and_then(|h| h.release.as_ref())
            .map(|r| r.word())
            .unwrap_or(0);
        if let Some(g) = &mut self.guardian {
            g.note_release(w);
        }
    }

    fn set_release(&mut self, f: impl FnOnce(&mut Release)) {
        if let Some(h) = &mut self.trap {
            f(h.release.get_or_insert_with(Release::default));
        }
        self.note_release();
    }

    /// Set up the pipe and the SIGCONT handler (module comment) in a
    /// backend whose SIGTRAP handler was just installed at `base`.  A
    /// failure removes what was set up and is only logged: the backend is
    /// then as before (stopped until someone ends it if pgdbg and its
    /// guardian die together).
    pub(super) fn install_self_release(&mut self, base: u64, l: &Layout) {
        if crate::config::get().no_self_release {
            return;
        }
        if let Err(e) = self.try_install_self_release(base, l) {
            super::log::debug(&format!("the backend cannot release itself: {e:#}"));
            let _ = self.remove_self_release();
        }
    }

    fn try_install_self_release(&mut self, base: u64, l: &Layout) -> Result<()> {
        // before Linux 5.5 pipe_release signalled the readers at every
        // close: pgdbg's death alone would release the backend while its
        // guardian restores it
        if !kernel_at_least(5, 5) {
            bail!("Linux 5.5 or later is needed");
        }
        self.write(base + CODE, &emit(base, l))?;
        self.write(base + FD, &0u64.to_le_bytes())?;
        self.write(base + RES_RIP, &[0u8; 16])?;
        self.write(base + RELEASED, &[0u8; 24])?;
        // the SIGCONT action: only in place of the default one, asked
        // first (nothing else is injected where the backend has its own)
        let r = self.inject_syscall(
            libc::SYS_rt_sigaction,
            [libc::SIGCONT as u64, 0, base + OLD, 8, 0, 0],
        )?;
        if r < 0 {
            bail!("rt_sigaction in the backend failed (errno {})", -r);
        }
        let mut old = [0u8; 8];
        self.read(base + OLD, &mut old)?;
        if u64::from_le_bytes(old) != libc::SIG_DFL as u64 {
            bail!("the backend has a SIGCONT action of its own");
        }
        let r = self.inject_syscall(
            libc::SYS_pipe2,
            [base + PIPE, libc::O_CLOEXEC as u64, 0, 0, 0, 0],
        )?;
        if r < 0 {
            bail!("pipe2 in the backend failed (errno {})", -r);
        }
        let mut b = [0u8; 8];
        self.read(base + PIPE, &mut b)?;
        let rfd = i32::from_le_bytes(b[..4].try_into().expect("4"));
        let wfd = i32::from_le_bytes(b[4..].try_into().expect("4"));
        // recorded first: a rescue closes both
        self.set_release(|r| {
            r.rfd = Some(rfd);
            r.wfd = Some(wfd);
        });
        let mine = pidfd_getfd(self.pid(), wfd)
            .map_err(|e| anyhow!("cannot take the pipe's write end ({e})"))?;
        self.set_release(|r| r.mine = Some(Arc::new(mine)));
        let shared = match self.guardian()? {
            Some(g) => g.share_release_fd(wfd),
            None => false,
        };
        if !shared {
            bail!("the guardian did not take the pipe's write end");
        }
        let r = self.inject_syscall(libc::SYS_close, [wfd as u64, 0, 0, 0, 0, 0])?;
        if r < 0 {
            bail!("close in the backend failed (errno {})", -r);
        }
        self.set_release(|r| r.wfd = None);
        // the signals held back now, for the handler
        self.note_release_signals(self.held_signal_mask())?;
        self.write(base + FD, &(rfd as u64 + 1).to_le_bytes())?;
        const SA_SIGINFO: u64 = 4;
        const SA_RESTART: u64 = 0x1000_0000;
        const SA_RESTORER: u64 = 0x0400_0000;
        let new: [u64; 4] = [
            base + CODE,
            SA_SIGINFO | SA_RESTART | SA_RESTORER,
            base + l.restorer,
            u64::MAX, // every signal blocked while it runs
        ];
        self.write(base + ACT, &sa_bytes(&new))?;
        self.set_release(|r| r.action = true);
        let r = self.inject_syscall(
            libc::SYS_rt_sigaction,
            [libc::SIGCONT as u64, base + ACT, 0, 8, 0, 0],
        )?;
        if r < 0 {
            bail!("rt_sigaction in the backend failed (errno {})", -r);
        }
        // the read end armed last
        let pid = self.pid() as u64;
        for (cmd, arg) in [
            (libc::F_SETOWN, pid),
            (F_SETSIG, libc::SIGCONT as u64),
            (libc::F_SETFL, (libc::O_ASYNC | libc::O_NONBLOCK) as u64),
        ] {
            let r = self.inject_syscall(libc::SYS_fcntl, [rfd as u64, cmd as u64, arg, 0, 0, 0])?;
            if r < 0 {
                bail!("fcntl in the backend failed (errno {})", -r);
            }
        }
        Ok(())
    }

    /// Whether our SIGCONT handler may be in place: a SIGCONT seen while
    /// tracing is not delivered (module comment).
    pub(super) fn sigcont_to_handler(&self) -> bool {
        self.trap
            .as_ref()
            .and_then(|h| h.release.as_ref())
            .is_some_and(|r| r.action)
    }

    /// Remove the pipe's ends from the backend, then the SIGCONT action
    /// (the old one back).  First at every detach: from then on the
    /// backend stays stopped if pgdbg dies, as before it was set up.
    pub(super) fn remove_self_release(&mut self) -> Result<()> {
        let Some(r) = self.trap.as_ref().and_then(|h| h.release.clone()) else {
            return Ok(());
        };
        let Some(base) = self.release_base() else {
            return Ok(());
        };
        if self.gone {
            return Ok(());
        }
        if !self.stopped {
            self.ensure_stopped()?;
            if self.gone {
                return Ok(());
            }
        }
        // a call's return int3 at AT_ENTRY (the guardian's or a rescue's
        // detach) would keep the system calls from running there: it goes
        // first, as the detach removes it anyway
        if let Some(at) = super::procfs::auxv_entry(self.pid()) {
            for a in at..at + 3 {
                if !self.inserted.contains_key(&a) {
                    continue;
                }
                if self.byte_in_target(a) == Some(super::INT3) {
                    self.remove_breakpoint(a)?;
                } else {
                    self.forget_breakpoint(a);
                }
            }
        }
        for fd in [r.rfd, r.wfd].into_iter().flatten() {
            // only a pipe: the backend never closes descriptors it did not
            // open, but a number is checked before it is closed
            let link = std::fs::read_link(format!("/proc/{}/fd/{fd}", self.pid()))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if link.starts_with("pipe:") {
                let r = self.inject_syscall(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0])?;
                if r < 0 && r != -(libc::EBADF as i64) {
                    bail!("cannot close descriptor {fd} in the backend (errno {})", -r);
                }
            }
        }
        self.write(base + FD, &0u64.to_le_bytes())?;
        self.set_release(|r| {
            r.rfd = None;
            r.wfd = None;
        });
        if r.action {
            let mut old = [0u8; 32];
            self.read(base + OLD, &mut old)?;
            self.restore_action(libc::SIGCONT, &old, base + CODE, base + ACT, base + OLD)?;
        }
        if let Some(h) = &mut self.trap {
            h.release = None;
        }
        self.note_release();
        Ok(())
    }

    /// pgdbg resumes the backend at `rip` with `rsp`, one past an int3 of
    /// its own, on purpose (hold.rs): the handler must not rewind there.
    /// `rip` 0: no such resume holds any more.
    /// An error: the handler may act on the point before (the caller
    /// does not resume there).
    pub(super) fn note_release_resume(&mut self, rip: u64, rsp: u64) -> Result<()> {
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        let base = h.base;
        let Some(r) = &mut h.release else {
            return Ok(());
        };
        if r.disarmed || (rip == 0 && !r.resume_set) {
            return Ok(());
        }
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&rip.to_le_bytes());
        b[8..].copy_from_slice(&rsp.to_le_bytes());
        self.write(base + RES_RIP, &b)
            .map_err(|e| anyhow!("resume point not written for the SIGCONT handler: {e:#}"))?;
        if let Some(r) = self.trap.as_mut().and_then(|h| h.release.as_mut()) {
            r.resume_set = rip != 0;
        }
        Ok(())
    }

    /// A word of the data page the handler reads, written when it
    /// changes; what is known of it follows only a write that succeeded
    /// (a failed one is tried again at the next change).
    fn note_release_word(
        &mut self,
        at: u64,
        v: u64,
        old: fn(&mut Release) -> &mut u64,
    ) -> Result<()> {
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        let base = h.base;
        let Some(r) = &mut h.release else {
            return Ok(());
        };
        if r.disarmed || *old(r) == v {
            return Ok(());
        }
        self.write(base + at, &v.to_le_bytes())
            .map_err(|e| anyhow!("a word of the SIGCONT handler not written: {e:#}"))?;
        if let Some(r) = self.trap.as_mut().and_then(|h| h.release.as_mut()) {
            *old(r) = v;
        }
        Ok(())
    }

    /// A call (bit 0) or an injected system call (bit 1) of pgdbg's is in
    /// flight or no longer: before the registers change, after they are
    /// back.  An error on `on`: the call or system call must not start.
    pub(super) fn note_release_not_own(&mut self, bit: u64, on: bool) -> Result<()> {
        let Some((base, cached)) = self
            .trap
            .as_ref()
            .and_then(|h| Some((h.base, h.release.as_ref()?.not_own)))
        else {
            return Ok(());
        };
        let cur = if cached == u64::MAX {
            // not known (the guardian's Target): the page's, which keeps
            // what pgdbg had set
            let mut b = [0u8; 8];
            self.read(base + NOT_OWN, &mut b)?;
            let cur = u64::from_le_bytes(b);
            if let Some(r) = self.trap.as_mut().and_then(|h| h.release.as_mut()) {
                r.not_own = cur;
            }
            cur
        } else {
            cached
        };
        let v = if on { cur | bit } else { cur & !bit };
        self.note_release_word(NOT_OWN, v, |r| &mut r.not_own)
    }

    /// Whether the SIGCONT handler sees NOT_OWN `bit` set, or cannot act
    /// (no pipe armed, or disarmed).
    pub(super) fn release_sees(&self, bit: u64) -> bool {
        match self.trap.as_ref().and_then(|h| h.release.as_ref()) {
            None => true,
            Some(r) => {
                r.rfd.is_none() || r.disarmed || (r.not_own != u64::MAX && r.not_own & bit != 0)
            }
        }
    }

    /// The signals pgdbg holds back now (the guardian's record has the
    /// same mask).
    pub(super) fn note_release_signals(&mut self, mask: u64) -> Result<()> {
        self.note_release_word(SIGS, mask, |r| &mut r.sigs)
    }

    /// A word the handler reads could not be written (`why`) where the
    /// change cannot be refused: the read end stops signalling (`F_SETFL`
    /// without `O_ASYNC`, one injected `fcntl`), so that a death of pgdbg
    /// and its guardian leaves the backend stopped, as without the pipe.
    /// Only at a stop; an error when that is not possible.
    pub(super) fn disarm_self_release(&mut self, why: anyhow::Error) -> Result<()> {
        let Some(r) = self.trap.as_ref().and_then(|h| h.release.as_ref()) else {
            return Ok(());
        };
        if r.disarmed {
            return Ok(());
        }
        let Some(rfd) = r.rfd.filter(|_| !r.disarming && self.stopped && !self.gone) else {
            return Err(why);
        };
        let set = |t: &mut Target, f: fn(&mut Release)| {
            if let Some(r) = t.trap.as_mut().and_then(|h| h.release.as_mut()) {
                f(r);
            }
        };
        set(self, |r| r.disarming = true);
        let res = self.inject_syscall(
            libc::SYS_fcntl,
            [
                rfd as u64,
                libc::F_SETFL as u64,
                libc::O_NONBLOCK as u64,
                0,
                0,
                0,
            ],
        );
        set(self, |r| r.disarming = false);
        match res {
            Ok(0) => {
                set(self, |r| r.disarmed = true);
                super::log::debug(&format!("the backend no longer releases itself: {why:#}"));
                Ok(())
            }
            Ok(e) => Err(why.context(format!("fcntl in the backend failed (errno {})", -e))),
            Err(e) => Err(why.context(format!("{e:#}"))),
        }
    }

    /// After a restore that failed, when the backend is let go: the
    /// handler must not stop it again for words of pgdbg's (the guardian's
    /// SIGCONT lets it run, as it did before the pipe).
    pub(super) fn release_words_cleared(&mut self) {
        let Some(base) = self
            .trap
            .as_ref()
            .filter(|h| h.release.is_some())
            .map(|h| h.base)
        else {
            return;
        };
        // (not the call record: a call still running when the restore
        // failed is repaired at its return trap from it; a stale one repairs
        // nothing, the backend never executes that return address)
        for at in [SIGS, NOT_OWN] {
            if let Err(e) = self.write(base + at, &0u64.to_le_bytes()) {
                super::log::debug(&format!("a word of the SIGCONT handler not cleared: {e:#}"));
            }
        }
        // nor does it put old data words back
        self.clear_repair_data_slots_unless_in_call();
    }
}
