//! The handler's unit tests: the kernel ABI offsets, the emitted code
//! disassembled, and the handler run for real in a forked child.

use super::*;
use iced_x86::{Decoder, DecoderOptions, Formatter, NasmFormatter};

#[test]
fn kernel_abi_offsets_match_the_c_structs() {
    // glibc's ucontext_t starts like the kernel's struct ucontext
    let uc = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
        + std::mem::offset_of!(libc::mcontext_t, gregs)
        + 8 * libc::REG_RIP as usize;
    assert_eq!(uc, UCONTEXT_RIP as usize);
    let efl = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
        + std::mem::offset_of!(libc::mcontext_t, gregs)
        + 8 * libc::REG_EFL as usize;
    assert_eq!(efl, UCONTEXT_EFLAGS as usize);
    let gregs = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
        + std::mem::offset_of!(libc::mcontext_t, gregs);
    assert_eq!(gregs, callrepair::UC_GREGS as usize);
    assert_eq!(
        gregs + 8 * libc::REG_RSP as usize,
        callrepair::UC_RSP as usize
    );
    assert_eq!(
        gregs + 8 * libc::REG_RIP as usize,
        callrepair::UC_RIP as usize
    );
    let fp = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
        + std::mem::offset_of!(libc::mcontext_t, fpregs);
    assert_eq!(fp, callrepair::UC_FPREGS as usize);
    assert_eq!(callrepair::UC_RIP, UCONTEXT_RIP);
    let si: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let code = std::ptr::addr_of!(si.si_code) as usize - std::ptr::addr_of!(si) as usize;
    assert_eq!(code, SIGINFO_CODE as usize);
    assert_eq!(SA_SIGINFO, libc::SA_SIGINFO as u64);
    assert_eq!(SA_RESTART, libc::SA_RESTART as u64);
    // SA_RESTORER (0x04000000) is not exported by libc: arch/x86/include/uapi/asm/signal.h
    assert_eq!(SYS_MPROTECT as i64, libc::SYS_mprotect);
    assert_eq!(SYS_RT_SIGRETURN as i64, libc::SYS_rt_sigreturn);
    assert_eq!(SYS_RT_SIGACTION as i64, libc::SYS_rt_sigaction);
    assert_eq!(SYS_GETPID as i64, libc::SYS_getpid);
    assert_eq!(SYS_GETTID as i64, libc::SYS_gettid);
    assert_eq!(SYS_TGKILL as i64, libc::SYS_tgkill);
}

fn disasm(code: &[u8], ip: u64) -> Vec<String> {
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut f = NasmFormatter::new();
    let mut out = Vec::new();
    for ins in &mut dec {
        assert!(!ins.is_invalid(), "invalid at {:#x}", ins.ip());
        let mut s = String::new();
        f.format(&ins, &mut s);
        out.push(s);
    }
    out
}

/// Whether the kernel enabled AVX (XCR0 bit 2), read only where XGETBV
/// exists (OSXSAVE, CPUID 1 ECX bit 27).
fn avx_enabled() -> bool {
    if std::arch::x86_64::__cpuid(1).ecx & (1 << 27) == 0 {
        return false;
    }
    // SAFETY: XGETBV 0 reads XCR0, present with OSXSAVE (checked above)
    unsafe { std::arch::x86_64::_xgetbv(0) & 4 != 0 }
}

/// The emitted code decodes to the instructions its comments name,
/// with every branch landing where it should.
#[test]
fn handler_code_decodes_as_written() {
    let base = 0x7f00_0000_0000u64;
    let code = emit(base);
    let end = code.iter().position(|&b| b == 0xf4).unwrap();
    let text = disasm(&code[..end], base);
    let want = [
        "xor r15d,r15d",
        "mov eax,[rsi+8]",
        "cmp eax,2",
        "je near 00007F00000000D2h",
        "cmp eax,80h",
        "je short 00007F0000000023h",
        "cmp eax,1",
        "jne near 00007F00000000D1h",
        "mov r8,[rdx+0A8h]",
        "lea r9,[r8-1]",
        "mov r11,7F0000001000h",
        "mov rax,[r11+100h]",
        "cmp rax,1",
        "jbe short 00007F000000006Eh",
        "cmp rax,r9",
        "je near 00007F00000001F9h",
        "lea rcx,[r11+130h]",
        "mov r10,[rcx]",
        "test r10,r10",
        "je short 00007F000000006Eh",
        "cmp r10,r9",
        "je near 00007F000000019Dh",
        "add rcx,8",
        "jmp short 00007F0000000057h",
        "mov rax,7F0000001000h",
        "mov rax,[rax]",
        "mov ecx,4000h",
        "mov r10,[rax]",
        "test r10,r10",
        "je short 00007F00000000A2h",
        "mov r11,r10",
        "shl r11,10h",
        "shr r11,10h",
        "cmp r11,r9",
        "je short 00007F00000000DDh",
        "add rax,8",
        "dec ecx",
        "jne short 00007F0000000080h",
        "test r15,r15",
        "jne near 00007F00000002ECh",
        "cmp byte [r9],0CCh",
        "je near 00007F0000000153h",
        "mov rax,7F0000001010h",
        "mov rax,[rax]",
        "add rax,3",
        "cmp rax,r8",
        "je near 00007F0000000153h",
        "ret",
        "and dword [rdx+0B0h],0FFFFFEFFh",
        "ret",
        "mov r12,rdx",
        "mov r13,r9",
        "mov r14,r10",
        "cmp byte [r13],0CCh",
        "jne short 00007F0000000141h",
        "bt r14,30h",
        "jb short 00007F0000000114h",
        "mov rdi,r13",
        "and rdi,0FFFFFFFFFFFFF000h",
        "mov esi,1000h",
        "mov edx,7",
        "mov eax,0Ah",
        "syscall",
        "test rax,rax",
        "jne short 00007F0000000153h",
        "mov rax,r14",
        "shr rax,38h",
        "mov [r13],al",
        "bt r14,30h",
        "jb short 00007F0000000141h",
        "mov rdi,r13",
        "and rdi,0FFFFFFFFFFFFF000h",
        "mov esi,1000h",
        "mov edx,5",
        "mov eax,0Ah",
        "syscall",
        "test r15,r15",
        "jne near 00007F00000002ECh",
        "mov [r12+0A8h],r13",
        "ret",
        "test r15,r15",
        "jne near 00007F00000002ECh",
        "mov edi,5",
        "mov rsi,7F00000010C0h",
        "xor edx,edx",
        "mov r10d,8",
        "mov eax,0Dh",
        "syscall",
        "mov eax,27h",
        "syscall",
        "mov r15,rax",
        "mov eax,0BAh",
        "syscall",
        "mov esi,eax",
        "mov edi,r15d",
        "mov edx,5",
        "mov eax,0EAh",
        "syscall",
        "ret",
        "mov rax,[r11+108h]",
        "cmp [rdx+0A0h],rax",
        "jae near 00007F000000006Eh",
        "mov rax,[r11+118h]",
        "test rax,rax",
        "je short 00007F00000001CDh",
        "mov rax,[rax]",
        "cmp rax,[r11+120h]",
        "jne near 00007F000000006Eh",
        "mov rax,[r11+110h]",
        "test rax,rax",
        "je short 00007F0000000213h",
        "mov rcx,[r11+108h]",
        "mov rdi,[r11+100h]",
        "mov [rcx],rdi",
        "mov [rdx+0A0h],rcx",
        "mov [rdx+0A8h],rax",
        "ret",
        "mov rax,[r11+108h]",
        "add rax,8",
        "cmp rax,[rdx+0A0h]",
        "jne near 00007F000000006Eh",
        "lea rsi,[r11+160h]",
        "mov r10d,8",
        "mov rdi,[rsi]",
        "test rdi,rdi",
        "je short 00007F000000024Ch",
        "dec rdi",
        "mov rcx,[rsi+8]",
        "mov rax,[rsi+10h]",
        "test rcx,rcx",
        "je short 00007F000000024Ch",
        "cmp rcx,8",
        "ja short 00007F000000024Ch",
        "mov [rdi],al",
        "inc rdi",
        "shr rax,8",
        "dec rcx",
        "jne short 00007F000000023Eh",
        "add rsi,18h",
        "dec r10d",
        "jne short 00007F0000000220h",
        "lea rsi,[r11+220h]",
        "lea rdi,[rdx+28h]",
        "mov ecx,90h",
        "rep movsb",
        "mov rcx,[r11+2B0h]",
        "cmp rcx,1A0h",
        "jb short 00007F00000002D7h",
        "mov r10,[rdx+0E0h]",
        "test r10,r10",
        "je short 00007F00000002D7h",
        "mov rdi,r10",
        "mov rsi,7F0000042000h",
        "mov ecx,1A0h",
        "rep movsb",
        "cmp dword [r10+1D0h],46505853h",
        "jne short 00007F00000002D7h",
        "mov ecx,[r10+1E0h]",
        "cmp rcx,[r11+2B0h]",
        "ja short 00007F00000002D7h",
        "cmp rcx,240h",
        "jb short 00007F00000002D7h",
        "lea rdi,[r10+200h]",
        "mov rsi,7F0000042200h",
        "sub rcx,200h",
        "rep movsb",
        "mov qword [r11+100h],1",
        "mov r12,rdx",
        "lea r15,[r11+128h]",
        "mov rdx,r12",
        "mov r9,[r15]",
        "test r9,r9",
        "je short 00007F0000000304h",
        "add r15,8",
        "lea r8,[r9+1]",
        "jmp 00007F000000006Eh",
        "ret",
    ];
    assert_eq!(text, want, "{text:#?}");
    let r = disasm(&code[RESTORER as usize..], base + RESTORER);
    assert_eq!(r, ["mov eax,0Fh", "syscall", "ud2"]);
    // each label at the instruction it names (the branches above land on
    // them): int3, the error traps' loop, the table search and its loop,
    // missing, done, trace, found, store, rewind, die, and the call
    // repair's: at_error, no_catch, at_return, repair, its data-word loops,
    // fp_done, next_fix, end
    let labels = super::code::assemble(base).unwrap();
    let at = |name: &str| {
        let o = labels.at(name).unwrap_or_else(|| panic!("no label {name}"));
        disasm(&code[o..end], base + o as u64).swap_remove(0)
    };
    for (name, first) in [
        ("int3", "mov r8,[rdx+0A8h]"),
        ("traps", "mov r10,[rcx]"),
        ("search", "mov rax,7F0000001000h"),
        ("loop", "mov r10,[rax]"),
        ("missing", "test r15,r15"),
        ("done", "ret"),
        ("trace", "and dword [rdx+0B0h],0FFFFFEFFh"),
        ("found", "mov r12,rdx"),
        ("store", "mov rax,r14"),
        ("rewind", "test r15,r15"),
        ("die", "test r15,r15"),
        ("at_error", "mov rax,[r11+108h]"),
        ("no_catch", "mov rax,[r11+110h]"),
        ("at_return", "mov rax,[r11+108h]"),
        ("repair", "lea rsi,[r11+160h]"),
        ("dw", "mov rdi,[rsi]"),
        ("db", "mov [rdi],al"),
        ("dw_next", "add rsi,18h"),
        ("fp_done", "mov qword [r11+100h],1"),
        ("next_fix", "mov rdx,r12"),
        ("end", "ret"),
    ] {
        assert_eq!(at(name), first, "label {name}");
    }
    assert_eq!(labels.at("end"), Some(end - 1));
    assert_eq!(labels.at("restorer"), Some(RESTORER as usize));
    assert_eq!(labels.at("repair"), Some(repair_offset() as usize));
    // the data words the code reads
    assert_eq!(base + SEL, 0x7f00_0000_1000);
    assert_eq!(base + ENTRY, 0x7f00_0000_1010);
    assert_eq!(base + ACT_DFL, 0x7f00_0000_10c0);
    assert!(ACT_DFL >= ACT_OLD + 8 * SA_WORDS as u64);
}

/// The handler's pages mapped (read, write, execute) and its code written,
/// in this process, before a fork: the child gets a copy and allocates
/// nothing (an allocation after a fork can wait for ever on a lock that
/// another test's thread held at the fork).
pub(super) fn handler_pages() -> u64 {
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            MAP_LEN as usize,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert!(base != libc::MAP_FAILED, "mmap");
        let base = base as u64;
        let code = emit(base);
        std::ptr::copy_nonoverlapping(code.as_ptr(), base as *mut u8, code.len());
        base
    }
}

/// In a forked child: the emitted handler installed for real, then
/// `body` run; returns the child's wait status.
fn run_with_handler(body: fn(u64) -> i32) -> i32 {
    unsafe {
        let base = handler_pages();
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            *((base + SEL) as *mut u64) = base + HALF0;
            let act = action(base);
            let r = libc::syscall(
                libc::SYS_rt_sigaction,
                libc::SIGTRAP,
                act.as_ptr(),
                0usize,
                8usize,
            );
            if r != 0 {
                libc::_exit(91);
            }
            libc::_exit(body(base));
        }
        let mut st = 0;
        assert_eq!(libc::waitpid(pid, &mut st, 0), pid);
        libc::munmap(base as *mut libc::c_void, MAP_LEN as usize);
        st
    }
}

/// An int3 not in the table: the handler re-raises SIGTRAP with the
/// default action, the process dies of it as it would without us.
#[test]
fn foreign_int3_dies_as_without_handler() {
    let st = run_with_handler(|_| {
        unsafe { std::arch::asm!("int3") };
        0
    });
    assert!(
        libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGTRAP,
        "status {st:#x}"
    );
}

/// An int3 in the table (writable page): the byte comes back, rip is
/// rewound, the original instruction runs.
#[test]
fn int3_in_table_is_restored_and_rewound() {
    let st = run_with_handler(|base| unsafe {
        // a function in the handler's own (writable) mapping: mov eax, 7; ret
        let f = base + HALF0 + TABLE_BYTES;
        let code = [0xb8u8, 7, 0, 0, 0, 0xc3];
        std::ptr::copy_nonoverlapping(code.as_ptr(), f as *mut u8, code.len());
        *(f as *mut u8) = 0xcc;
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xb8u64 << 56);
        let g: extern "C" fn() -> i32 = std::mem::transmute(f as usize);
        if g() != 7 || *(f as *const u8) != 0xb8 {
            return 1;
        }
        0
    });
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "status {st:#x}"
    );
}

/// The context pointer the recording handler of `trap_inside_handler`
/// was given (the child's copy).
static RECORDED_UC: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn record_uc(_sig: i32, _info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    RECORDED_UC.store(uc as u64, std::sync::atomic::Ordering::Relaxed);
}

/// Calls the code at `f` (always from the same place, so that a trap in
/// it builds its signal frame at the same address each time).
#[inline(never)]
fn call_at(f: u64) -> i32 {
    let g: extern "C" fn() -> i32 = unsafe { std::mem::transmute(f as usize) };
    std::hint::black_box(g)()
}

/// In a forked child: a trap at an int3 under a recording handler gives
/// where the kernel puts the signal frame's context; its tracer (this
/// test) arms a debug register on writes of that context's `rip` and
/// detaches (left armed, as when pgdbg and its guardian die); then an int3
/// in the table, from the same stack depth, under the handler installed
/// with `act`: the handler's own write of the context's `rip` traps inside
/// it.  Returns the child's wait status.
fn trap_inside_handler(act: fn(u64) -> [u64; SA_WORDS]) -> i32 {
    unsafe {
        let base = handler_pages();
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            *((base + SEL) as *mut u64) = base + HALF0;
            let f = base + HALF0 + TABLE_BYTES;
            for pass in 0..2 {
                if pass == 0 {
                    // int3; mov eax, 7; ret, under the recording handler
                    let c = [0xccu8, 0xb8, 7, 0, 0, 0, 0xc3];
                    std::ptr::copy_nonoverlapping(c.as_ptr(), f as *mut u8, c.len());
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = record_uc as *const () as usize;
                    sa.sa_flags = libc::SA_SIGINFO;
                    if libc::sigaction(libc::SIGTRAP, &sa, std::ptr::null_mut()) != 0 {
                        libc::_exit(91);
                    }
                } else {
                    // the tracer arms the register and leaves
                    if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                        libc::_exit(92);
                    }
                    libc::raise(libc::SIGSTOP);
                    // mov eax, 7; ret under an int3 of the table
                    let c = [0xb8u8, 7, 0, 0, 0, 0xc3];
                    std::ptr::copy_nonoverlapping(c.as_ptr(), f as *mut u8, c.len());
                    *(f as *mut u8) = 0xcc;
                    *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xb8u64 << 56);
                    let a = act(base);
                    let r = libc::syscall(
                        libc::SYS_rt_sigaction,
                        libc::SIGTRAP,
                        a.as_ptr(),
                        0usize,
                        8usize,
                    );
                    if r != 0 {
                        libc::_exit(93);
                    }
                }
                if call_at(f) != 7 {
                    libc::_exit(94 + pass);
                }
            }
            libc::_exit(0);
        }
        let mut st = 0;
        assert_eq!(libc::waitpid(pid, &mut st, 0), pid);
        assert!(libc::WIFSTOPPED(st), "child status {st:#x}");
        let at = std::ptr::addr_of!(RECORDED_UC) as u64;
        *libc::__errno_location() = 0;
        let uc = libc::ptrace(libc::PTRACE_PEEKDATA, pid, at, 0) as u64;
        assert!(uc != 0, "no context recorded");
        let dr = |n: usize, v: u64| {
            let off = crate::arch::debugregs::user_offset(n);
            assert_eq!(libc::ptrace(libc::PTRACE_POKEUSER, pid, off, v), 0);
        };
        dr(0, uc + UCONTEXT_RIP as u64);
        let dr7 = crate::arch::debugregs::dr7_with(0, 0, crate::arch::debugregs::Kind::Write, 8)
            .expect("dr7");
        dr(crate::arch::debugregs::DR7, dr7);
        assert_eq!(libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0), 0);
        assert_eq!(libc::waitpid(pid, &mut st, 0), pid);
        libc::munmap(base as *mut libc::c_void, MAP_LEN as usize);
        st
    }
}

/// A debug register left armed on the word of the handler's own frame
/// that it writes: its trap inside the handler comes to the handler
/// again (SIGTRAP not blocked, not deferred), which returns; the int3's
/// byte is restored and the code runs on.
#[test]
fn a_debug_trap_inside_the_handler_returns() {
    let st = trap_inside_handler(action);
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "status {st:#x}"
    );
}

/// The same with every signal blocked in the handler (the action before
/// `BLOCKED_IN_HANDLERS`): the kernel forces the trap to its default
/// action and the process dies of SIGTRAP.  The trap inside the handler
/// is real, so the test above is not passing by luck.
#[test]
fn a_debug_trap_inside_a_blocking_handler_kills() {
    let st = trap_inside_handler(|base| {
        [
            base,
            SA_SIGINFO | SA_RESTART | SA_RESTORER,
            base + RESTORER,
            u64::MAX,
        ]
    });
    assert!(
        libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGTRAP,
        "status {st:#x}"
    );
}

/// A single-step trap: the handler clears TF in the context, so the
/// code after it runs without trapping on every instruction.
#[test]
fn single_step_trap_clears_tf() {
    let st = run_with_handler(|_| {
        let flags: u64;
        unsafe {
            std::arch::asm!(
                "pushfq",
                "or qword ptr [rsp], 0x100",
                "popfq",
                "nop",
                "nop",
                "pushfq",
                "pop {f}",
                f = out(reg) flags,
            )
        };
        if flags & 0x100 != 0 { 1 } else { 0 }
    });
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "status {st:#x}"
    );
}

/// A call in flight repaired by the handler alone: the "call" returns
/// to its return int3 with `rsp` just above its return slot; the
/// handler puts a data word, the registers and the XSAVE image (XMM0
/// changed in it) back, and the int3's byte; the code it resumes at
/// exits with a status that sums what it finds.
#[test]
fn call_return_trap_restores_the_saved_state() {
    use callrepair as cr;
    static mut WORD: u32 = 5;
    let st = run_with_handler(|base| unsafe {
        let w = |a: u64, v: u64| *((base + a) as *mut u64) = v;
        // the return int3 (original byte: nop) and, after it, the code
        // the saved registers resume at:
        //   mov eax,[rbx]; add eax,r12d; movzx ecx,byte [r13];
        //   add eax,ecx; movd edx,xmm0; add eax,edx;
        //   vextractf128 xmm1,ymm0,1; movd edx,xmm1; add eax,edx (with
        //   AVX: ymm0's upper half, else nops); mov edi,eax;
        //   mov eax,231 (exit_group); syscall
        let f = base + HALF0 + TABLE_BYTES;
        let stub = f + 16;
        let avx = avx_enabled();
        let upper: [u8; 12] = if avx {
            [
                0xc4, 0xe3, 0x7d, 0x19, 0xc1, 0x01, 0x66, 0x0f, 0x7e, 0xca, 0x01, 0xd0,
            ]
        } else {
            [0x90; 12]
        };
        let mut code = vec![
            0x8b, 0x03, 0x44, 0x01, 0xe0, 0x41, 0x0f, 0xb6, 0x4d, 0x00, 0x01, 0xc8, 0x66, 0x0f,
            0x7e, 0xc2, 0x01, 0xd0,
        ];
        code.extend_from_slice(&upper);
        code.extend_from_slice(&[0x89, 0xc7, 0xb8, 0xe7, 0, 0, 0, 0x0f, 0x05]);
        std::ptr::copy_nonoverlapping(code.as_ptr(), stub as *mut u8, code.len());
        *(f as *mut u8) = 0xcc;
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0x90u64 << 56);
        // the saved XSAVE image: this thread's own, XMM0 = 60, and with
        // AVX the upper half of YMM0 = 9 (its area from CPUID 0xD.2, the
        // feature marked in use in XSTATE_BV): all of it must come back,
        // also where the image is larger than the kernel's frame (AMX)
        let Some((size, _)) = super::super::xstate::cpuid_xsave_sizes() else {
            return 80;
        };
        let x = base + XAREA;
        std::arch::asm!("xsave64 [{0}]", in(reg) x, in("eax") u32::MAX, in("edx") u32::MAX);
        *((x + 160) as *mut u32) = 60;
        if avx {
            let hi = std::arch::x86_64::__cpuid_count(0xd, 2).ebx as u64;
            *((x + hi) as *mut u32) = 9;
            *((x + 512) as *mut u64) |= 4;
        }
        w(cr::XLEN, size as u64);
        // the data word the "series" changed, to be put back
        let word = std::ptr::addr_of_mut!(WORD);
        w(cr::DATAW, word as u64 + 1);
        w(cr::DATAW + 8, 4);
        w(cr::DATAW + 16, 5);
        *word = 99;
        let regs = super::super::Registers {
            rbx: word as u64,
            r12: 37,
            r13: f,
            rip: stub,
            rsp: (x - 4096) & !0xf,
            eflags: 0x202,
            ..Default::default()
        };
        for (i, v) in cr::gregs_words(&regs).iter().enumerate() {
            w(cr::GREGS + 8 * i as u64, *v);
        }
        w(cr::INT3S, f);
        w(cr::MARK, f);
        // the "call" returns to f: its return slot is rsp - 8 here
        std::arch::asm!(
            "lea rax, [rsp - 8]",
            "mov [rcx], rax",
            "push rdx",
            "ret",
            in("rcx") base + cr::SP,
            in("rdx") f,
            options(noreturn),
        )
    });
    // 5 (the word) + 37 (r12) + 0x90 (the byte) + 60 (XMM0) + 9 (YMM0's
    // upper half, with AVX)
    let avx = avx_enabled();
    let want = if avx { 255 } else { 246 };
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == want,
        "status {st:#x}, want {want}"
    );
}

/// An error trap inside the call (rsp below its return slot, the catch
/// word unchanged): the handler runs the flush function on the call's
/// stack, which returns into the return trap, which repairs; both
/// int3s get their bytes back.
#[test]
fn call_error_trap_flushes_then_repairs() {
    use callrepair as cr;
    static mut WORD: u32 = 5;
    static mut FLAG: u32 = 0;
    static mut CATCHW: u64 = 3;
    let st = run_with_handler(|base| unsafe {
        let w = |a: u64, v: u64| *((base + a) as *mut u64) = v;
        // f: the return int3 (original byte nop), e: the error trap
        // (original byte 0); the code the saved registers resume at:
        //   mov eax,[rbx]; add eax,r12d; add eax,[r14];
        //   movzx ecx,byte [r13+8]; add eax,ecx; mov edi,eax;
        //   mov eax,231 (exit_group); syscall
        // and the "flush function": mov dword [rsi],20; ret
        let f = base + HALF0 + TABLE_BYTES;
        let e = f + 8;
        let stub = f + 16;
        let flush = f + 48;
        let code = [
            0x8b, 0x03, 0x44, 0x01, 0xe0, 0x41, 0x03, 0x06, 0x41, 0x0f, 0xb6, 0x4d, 0x08, 0x01,
            0xc8, 0x89, 0xc7, 0xb8, 0xe7, 0, 0, 0, 0x0f, 0x05,
        ];
        std::ptr::copy_nonoverlapping(code.as_ptr(), stub as *mut u8, code.len());
        let fl = [0xc7u8, 0x06, 20, 0, 0, 0, 0xc3];
        std::ptr::copy_nonoverlapping(fl.as_ptr(), flush as *mut u8, fl.len());
        *(f as *mut u8) = 0xcc;
        *(e as *mut u8) = 0xcc;
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0x90u64 << 56);
        *((base + HALF0 + 8) as *mut u64) = e | F_WRITABLE;
        let word = std::ptr::addr_of_mut!(WORD);
        w(cr::DATAW, word as u64 + 1);
        w(cr::DATAW + 8, 4);
        w(cr::DATAW + 16, 5);
        *word = 99;
        let flag = std::ptr::addr_of_mut!(FLAG);
        let regs = super::super::Registers {
            rbx: word as u64,
            r12: 17,
            r13: f,
            r14: flag as u64,
            rip: stub,
            rsp: (base + XAREA - 4096) & !0xf,
            eflags: 0x202,
            ..Default::default()
        };
        for (i, v) in cr::gregs_words(&regs).iter().enumerate() {
            w(cr::GREGS + 8 * i as u64, *v);
        }
        w(cr::INT3S, f);
        w(cr::INT3S + 8, e);
        w(cr::FLUSH, flush);
        w(cr::CATCH_AT, std::ptr::addr_of!(CATCHW) as u64);
        w(cr::CATCH_VAL, 3);
        w(cr::MARK, f);
        // the "call" raises its error below its return slot
        std::arch::asm!(
            "lea rax, [rsp - 8]",
            "mov [rcx], rax",
            "sub rsp, 256",
            "jmp rdx",
            in("rcx") base + cr::SP,
            in("rdx") e,
            in("rsi") flag,
            options(noreturn),
        )
    });
    // 5 (the word) + 17 (r12) + 20 (the flush ran) + 0 (e's byte back)
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 42,
        "status {st:#x}"
    );
}

/// A stale record (no call's return: rsp elsewhere) repairs nothing:
/// the int3 in the table is rewound as usual.
#[test]
fn a_stale_call_record_is_ignored() {
    let st = run_with_handler(|base| unsafe {
        use callrepair as cr;
        let f = base + HALF0 + TABLE_BYTES;
        let code = [0xb8u8, 7, 0, 0, 0, 0xc3];
        std::ptr::copy_nonoverlapping(code.as_ptr(), f as *mut u8, code.len());
        *(f as *mut u8) = 0xcc;
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xb8u64 << 56);
        *((base + cr::MARK) as *mut u64) = f;
        *((base + cr::SP) as *mut u64) = 0x1000;
        *((base + cr::INT3S) as *mut u64) = f;
        let g: extern "C" fn() -> i32 = std::mem::transmute(f as usize);
        if g() != 7 || *(f as *const u8) != 0xb8 || *((base + cr::MARK) as *const u64) != f {
            return 1;
        }
        0
    });
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "status {st:#x}"
    );
}

#[test]
fn entries_pack_address_flag_and_byte() {
    let mut h = TrapHandler::adopted(0x1000, None);
    h.exec = vec![(0x400000, 0x500000, false), (0x600000, 0x601000, true)];
    assert_eq!(h.entry(0, 0x400123, 0x55), 0x5500_0000_0040_0123);
    assert_eq!(h.entry(0, 0x600010, 0xf3), 0xf301_0000_0060_0010);
}

/// The bytes of tests/fixtures/older-handlers/NAME.hex: what pgdbg wrote
/// before its code was made with the assembler (main at 40c4364, the
/// hand-assembled emitters), at the base in NAME.
fn older(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/older-handlers")
        .join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&p).expect("the fixture");
    (0..text.trim().len())
        .step_by(2)
        .map(|k| u8::from_str_radix(&text[k..k + 2], 16).expect("hex"))
        .collect()
}

/// A backend whose pages an older pgdbg wrote (other encodings of the
/// same programs) is read by this one's guardian and `pgdbg rescue`: its
/// SIGTRAP handler with the call repair, and its SIGCONT handler, are
/// recognised as pgdbg's (else a released backend's old records would be
/// replayed on it); a changed byte, or the code of another base, is not.
#[test]
fn code_an_older_pgdbg_wrote_is_recognised() {
    for base in [0x7f12_3456_0000u64, 0x5555_5555_0000] {
        let old = older(&format!("sigtrap-{base:x}"));
        assert_eq!(old.len(), code_len(base));
        assert_ne!(
            old,
            emit(base),
            "the encodings differ: the test shows nothing"
        );
        assert!(holds_our_code(&old, base));
        assert!(holds_our_code(&emit(base), base));
        assert!(!holds_our_code(&old, base + 0x1000));
        for at in [3, 20, 100, 0x200, RESTORER as usize + 1] {
            let mut bad = old.clone();
            bad[at] ^= 0x01;
            assert!(!holds_our_code(&bad, base), "a byte changed at {at:#x}");
        }
        // the older SIGCONT handler calls the older call repair
        let repair = repair_offset_in(&old, base).unwrap();
        assert_ne!(repair, repair_offset_in(&emit(base), base).unwrap());
        let l = selfrelease::Layout {
            repair,
            ..release_layout()
        };
        let mut page = older(&format!("sigcont-{base:x}"));
        assert_ne!(page, selfrelease::emit(base, &release_layout()).unwrap());
        assert!(!selfrelease::holds_our_code(&page, base, &release_layout()));
        let len = page.len();
        page.resize((PAGE - selfrelease::CODE) as usize, 0);
        assert!(selfrelease::holds_our_code(&page, base, &l));
        assert!(!selfrelease::holds_our_code(&page, base + 0x1000, &l));
        for at in [5, 50, len - 2] {
            let mut bad = page.clone();
            bad[at] ^= 0x01;
            assert!(
                !selfrelease::holds_our_code(&bad, base, &l),
                "a byte changed at {at:#x}"
            );
        }
    }
}
