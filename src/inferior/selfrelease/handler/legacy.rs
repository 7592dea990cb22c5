//! The SIGCONT handler as it was written by hand, byte by byte, before
//! issue 30: kept only for the tests that show the assembled one
//! (handler.rs) is the same program.  It returns its labels too.

use super::super::*;

/// The SIGCONT handler's machine code, for a mapping at `base`; it goes at
/// `base + CODE` and returns through the SIGTRAP handler's restorer.
pub fn emit(base: u64, l: &Layout) -> (Vec<u8>, Vec<(&'static str, usize)>) {
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
    // a system call injected with its signal frame (sigframe.rs): the
    // trailer's eight bytes at AT_ENTRY (no other code there runs again,
    // and `syscall; int3` differs in its third byte).  Its context
    // restores itself (the call finishes, `rt_sigreturn` returns to the
    // backend's own): it runs on like the backend's own.  Reached only
    // when the call's blocked mask is not in place (pgdbg died before its
    // PTRACE_SETSIGMASK, or it failed): with it, SIGCONT waits for the
    // trailer's `rt_sigreturn`.  Beyond 3 it went to `data` above
    // already, as any rip past `syscall; int3`
    c.extend_from_slice(&[0x49, 0xba]); // movabs r10, TRAILER
    c.extend_from_slice(&crate::inferior::sigframe::legacy::TRAILER);
    c.extend_from_slice(&[0x4c, 0x39, 0x10]); // cmp [rax], r10
    jcc(&mut c, &mut jumps, JE, "data");
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
    (c, labels)
}
