//! The SIGCONT handler (selfrelease.rs) run for real in a forked child,
//! with the SIGTRAP handler beside it: what it does at each state pgdbg
//! can leave the page in when it and its guardian die together.

use super::*;

/// In a forked child: both handlers installed for real (SIGTRAP's and
/// the SIGCONT one of selfrelease.rs), a pipe whose only writer is a
/// grandchild that exits 100 ms later, its read end armed as pgdbg arms
/// it; `prep` writes the page's words, then the child runs a call to
/// `f + 1`, where `jmp $` loops; `f` holds an int3 whose original byte
/// is `ret`.  Returns the child's wait status (stopped included; a
/// child still looping after 3 s dies of its SIGALRM).
///
/// With the words at `f + 160..200` (prep's) not 0, the call runs with
/// another handler's frame at its return slot (`nested`).
fn run_with_release(prep: fn(u64, u64)) -> i32 {
    run_with_release_probe(prep).0
}

/// `run_with_release`, and for a child that stopped, the word at
/// `f + 64` (the first probe, a data word) as it was at the stop.
fn run_with_release_probe(prep: fn(u64, u64)) -> (i32, Option<u64>) {
    unsafe {
        // where the child says its page's base (to read it once stopped)
        let shared = libc::mmap(
            std::ptr::null_mut(),
            8,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert!(shared != libc::MAP_FAILED);
        let shared = shared as *mut u64;
        // both handlers' code written before the fork (the child allocates
        // nothing: tests.rs `handler_pages`)
        let base = super::tests::handler_pages();
        let cont =
            selfrelease::emit(base, &release_layout()).expect("the SIGCONT handler assembles");
        std::ptr::copy_nonoverlapping(
            cont.as_ptr(),
            (base + selfrelease::CODE) as *mut u8,
            cont.len(),
        );
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            *shared = base;
            *((base + SEL) as *mut u64) = base + HALF0;
            let f = base + HALF0 + TABLE_BYTES;
            let loop_code = [0xccu8, 0xeb, 0xfe];
            std::ptr::copy_nonoverlapping(loop_code.as_ptr(), f as *mut u8, 3);
            for (sig, at) in [
                (libc::SIGTRAP, base),
                (libc::SIGCONT, base + selfrelease::CODE),
            ] {
                // as installed: SIGTRAP's `action`, SIGCONT's as
                // selfrelease/install.rs writes it
                let act: [u64; SA_WORDS] = if sig == libc::SIGTRAP {
                    action(base)
                } else {
                    [
                        at,
                        SA_SIGINFO | SA_RESTART | SA_RESTORER,
                        base + RESTORER,
                        BLOCKED_IN_HANDLERS,
                    ]
                };
                if libc::syscall(libc::SYS_rt_sigaction, sig, act.as_ptr(), 0usize, 8usize) != 0 {
                    libc::_exit(91);
                }
            }
            let mut p = [0i32; 2];
            if libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                libc::_exit(92);
            }
            if libc::fork() == 0 {
                libc::close(p[0]);
                libc::usleep(100_000);
                libc::_exit(0);
            }
            libc::close(p[1]);
            *((base + selfrelease::FD) as *mut u64) = p[0] as u64 + 1;
            prep(base, f);
            if libc::fcntl(p[0], libc::F_SETOWN, libc::getpid()) != 0
                || libc::fcntl(p[0], 10, libc::SIGCONT) != 0
                || libc::fcntl(p[0], libc::F_SETFL, libc::O_ASYNC | libc::O_NONBLOCK) != 0
            {
                libc::_exit(93);
            }
            libc::alarm(3);
            // the call runs below a pad of 256 bytes (rsp kept in r12),
            // its slot 8 past a multiple of 16 (or a multiple of 16:
            // the word at f + 184 is 8); rsp at f + 1 is that slot,
            // written below before the call for prep's resume record
            // (and the call's return address where prep asked for
            // it: the word at f + 112).  With the word at f + 160 (a
            // distance) not 0, the slot is another handler's frame's
            // (its ucontext in the pad): the saved rsp written there is
            // the slot + that distance, the frame's rsp that + the word
            // at f + 168, its rip the word at f + 176.  With the word at
            // f + 192 not 0, the slot holds 0, not a return address (a
            // jump, not a call: for a handler that stops again only)
            std::arch::asm!(
                "mov r12, rsp",
                "sub rsp, 256",
                "and rsp, -16",
                "sub rsp, r8",
                "mov rax, rsp",
                "sub rax, 8",
                "test r10, r10",
                "jz 5f",
                "lea rdi, [rax + r10]",
                "mov [rcx], rdi",
                "add rdi, r11",
                "mov [rax + {ursp}], rdi",
                "mov [rax + {urip}], rsi",
                "jmp 2f",
                "5:",
                "test rcx, rcx",
                "jz 2f",
                "mov [rcx], rax",
                "2:",
                "lea rax, [rip + 4f]",
                "test r9, r9",
                "jz 3f",
                "mov [r9], rax",
                "3:",
                "test r13, r13",
                "jz 6f",
                "push 0",
                "jmp rdx",
                "6:",
                "call rdx",
                "4:",
                "mov rsp, r12",
                ursp = const 8 + callrepair::UC_RSP,
                urip = const 8 + callrepair::UC_RIP,
                in("rcx") if *((base + selfrelease::RES_RIP) as *const u64) != 0 {
                    base + selfrelease::RES_RSP
                } else {
                    // (or where prep asked for it: the word at f + 120)
                    *((f + 120) as *const u64)
                },
                in("rdx") f + 1,
                in("r9") *((f + 112) as *const u64),
                in("r10") *((f + 160) as *const u64),
                in("r11") *((f + 168) as *const u64),
                in("rsi") *((f + 176) as *const u64),
                in("r8") *((f + 184) as *const u64),
                in("r13") *((f + 192) as *const u64),
                out("rax") _,
                out("rdi") _,
                out("r12") _,
            );
            // back from the call: the int3 was rewound onto and its
            // byte put back (`ret`), the release counted once
            // (and the held-back signals' word emptied)
            let released = *((base + selfrelease::RELEASED) as *const u64);
            let sigs = *((base + selfrelease::SIGS) as *const u64);
            // (and the probe words at f + 64 and f + 80 hold what
            // the ones at f + 72 and f + 88 say, the data slots empty)
            let probe = |a: u64| *((f + a) as *const u64);
            let slots = (0..callrepair::DATA_SLOTS)
                .any(|n| *((base + callrepair::DATAW + 24 * n) as *const u64) != 0);
            libc::_exit(if *(f as *const u8) == 0xc3 && released == 1 && sigs == 0 {
                if probe(64) != probe(72) || probe(80) != probe(88) {
                    2
                } else if slots {
                    3
                } else {
                    0
                }
            } else {
                1
            });
        }
        let mut st = 0;
        assert_eq!(libc::waitpid(pid, &mut st, libc::WUNTRACED), pid);
        let mut probe = None;
        if libc::WIFSTOPPED(st) {
            let mut word = 0u64;
            let local = libc::iovec {
                iov_base: (&mut word as *mut u64).cast(),
                iov_len: 8,
            };
            let remote = libc::iovec {
                iov_base: (*shared + HALF0 + TABLE_BYTES + 64) as *mut libc::c_void,
                iov_len: 8,
            };
            if libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) == 8 {
                probe = Some(word);
            }
            libc::kill(pid, libc::SIGKILL);
            let mut st2 = 0;
            libc::waitpid(pid, &mut st2, 0);
        }
        libc::munmap(shared.cast(), 8);
        libc::munmap(base as *mut libc::c_void, MAP_LEN as usize);
        (st, probe)
    }
}

/// The SIGCONT of the pipe's last writer at `rip` one past an int3 in
/// the table: rewound, the int3 traps into the SIGTRAP handler, which
/// puts the original byte back; the code goes on.
#[test]
fn release_rewinds_a_trap_not_rewound() {
    let st = run_with_release(|base, f| unsafe {
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
    });
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "status {st:#x}"
    );
}

/// Where pgdbg resumed on purpose (the recorded rip and rsp): not
/// rewound (the loop goes on until the alarm).
#[test]
fn release_leaves_a_resume_of_pgdbgs_alone() {
    let st = run_with_release(|base, f| unsafe {
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
        *((base + selfrelease::RES_RIP) as *mut u64) = f + 1;
    });
    assert!(
        libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGALRM,
        "status {st:#x}"
    );
}

/// Inside an injected system call's code (AT_ENTRY), or data words
/// changed with a call record whose call neither runs nor is at its
/// return (`rsp` above its return slot), or with a call's registers
/// being written or put back (`NOT_OWN` bit 0, no record): the
/// backend stops again.
#[test]
fn release_stops_again_where_it_cannot_go_on() {
    let st = run_with_release(|base, f| unsafe {
        *((base + ENTRY) as *mut u64) = f + 1;
    });
    assert!(
        libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGSTOP,
        "status {st:#x}"
    );
    for prep in [
        (|base, _| unsafe {
            *((base + callrepair::DATAW) as *mut u64) = 0x1000;
            *((base + selfrelease::NOT_OWN) as *mut u64) = 1;
        }) as fn(u64, u64),
        |base, _| unsafe {
            *((base + callrepair::DATAW) as *mut u64) = 0x1000;
            *((base + callrepair::MARK) as *mut u64) = 0x1234;
            *((base + callrepair::SP) as *mut u64) = 0;
        },
    ] {
        let st = run_with_release(prep);
        assert!(
            libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGSTOP,
            "status {st:#x}"
        );
    }
}

/// Registers that are not the process's own (a call being set up or
/// put back, MARK 0; an injected system call), or a record of data
/// words that is not whole: it stops again, even at a trap in the
/// table it would otherwise rewind, and sends no held-back signal.
#[test]
fn release_stops_again_without_its_registers_or_words() {
    for (i, prep) in [
        (|base, f| unsafe {
            *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
            *((base + selfrelease::NOT_OWN) as *mut u64) = 1;
            *((base + selfrelease::SIGS) as *mut u64) = 1 << (libc::SIGUSR2 - 1);
        }) as fn(u64, u64),
        |base, f| unsafe {
            *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
            *((base + selfrelease::NOT_OWN) as *mut u64) = 2;
        },
        |base, f| unsafe {
            *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
            *((base + selfrelease::NOT_OWN) as *mut u64) = 4;
        },
    ]
    .into_iter()
    .enumerate()
    {
        let st = run_with_release(prep);
        assert!(
            libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGSTOP,
            "case {i}: status {st:#x}"
        );
    }
}

/// Data words changed with no call record and the process's own
/// registers (`NOT_OWN` 0, `MARK` 0, `rsp` the one the series saved: a
/// series before its first call's registers are written): put back
/// from their slots (of a 4-byte word, its 4 bytes only), the slots
/// emptied, the trap rewound, and the code goes on.
#[test]
fn release_puts_back_data_words_with_no_call() {
    let st = run_with_release(|base, f| unsafe {
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
        let slot = |n: u64, addr: u64, len: u64, v: u64| {
            let at = base + callrepair::DATAW + 24 * n;
            *((at + 8) as *mut u64) = len;
            *((at + 16) as *mut u64) = v;
            *(at as *mut u64) = addr + 1;
        };
        // changed from 0x1111 to 0xdead
        *((f + 64) as *mut u64) = 0xdead;
        *((f + 72) as *mut u64) = 0x1111;
        slot(0, f + 64, 8, 0x1111);
        *((f + 80) as *mut u64) = 0xaaaa_aaaa_bbbb_bbbb;
        *((f + 88) as *mut u64) = 0xaaaa_aaaa_0000_2222;
        slot(callrepair::DATA_SLOTS - 1, f + 80, 4, 0x2222);
        // the rsp the series saved: the harness's own at the loop
        *((f + 120) as *mut u64) = base + callrepair::GREGS + 8 * callrepair::GREGS_RSP;
    });
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "status {st:#x}"
    );
    // the same where rsp is not the one the series saved (the process
    // ran on since, the slots left over): nothing put back, stopped
    let st = run_with_release(|base, f| unsafe {
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
        *((f + 64) as *mut u64) = 0xdead;
        *((f + 72) as *mut u64) = 0x1111;
        let at = base + callrepair::DATAW;
        *((at + 8) as *mut u64) = 8;
        *((at + 16) as *mut u64) = 0x1111;
        *(at as *mut u64) = f + 64 + 1;
        *((base + callrepair::GREGS + 8 * callrepair::GREGS_RSP) as *mut u64) = 0x1000;
    });
    assert!(
        libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGSTOP,
        "status {st:#x}"
    );
    // the same words with the call's registers being written (bit 0,
    // no record): nothing put back, stopped again
    let st = run_with_release(|base, f| unsafe {
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
        *((f + 64) as *mut u64) = 0xdead;
        *((f + 72) as *mut u64) = 0x1111;
        let at = base + callrepair::DATAW;
        *((at + 8) as *mut u64) = 8;
        *((at + 16) as *mut u64) = 0x1111;
        *(at as *mut u64) = f + 64 + 1;
        *((base + selfrelease::NOT_OWN) as *mut u64) = 1;
    });
    assert!(
        libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGSTOP,
        "status {st:#x}"
    );
}

/// The data words of `release_puts_back_data_words_with_no_call` (no
/// call record, `NOT_OWN` 0), the interrupted context at another
/// handler's frame (`run_with_release`'s words at `f + 160..200`): the
/// saved rsp `D` above the context's (wrapping: below it), the frame's
/// rsp the saved one + `DRSP`, its rip the saved one + `DRIP`, the
/// context's rsp a multiple of 16 with `MIS` 8.
fn nested<const D: u64, const DRSP: u64, const DRIP: u64, const MIS: u64>(base: u64, f: u64) {
    unsafe {
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
        let slot = |n: u64, addr: u64, len: u64, v: u64| {
            let at = base + callrepair::DATAW + 24 * n;
            *((at + 8) as *mut u64) = len;
            *((at + 16) as *mut u64) = v;
            *(at as *mut u64) = addr + 1;
        };
        *((f + 64) as *mut u64) = 0xdead;
        *((f + 72) as *mut u64) = 0x1111;
        slot(0, f + 64, 8, 0x1111);
        *((f + 80) as *mut u64) = 0xaaaa_aaaa_bbbb_bbbb;
        *((f + 88) as *mut u64) = 0xaaaa_aaaa_0000_2222;
        slot(callrepair::DATA_SLOTS - 1, f + 80, 4, 0x2222);
        let g = base + callrepair::GREGS;
        // the saved rsp: written by the harness (the slot + D)
        *((f + 120) as *mut u64) = g + 8 * callrepair::GREGS_RSP;
        // the saved rip: any address (the backend's own code)
        let rip = 0x5555_0000_1000u64;
        *((g + 8 * callrepair::GREGS_RIP) as *mut u64) = rip;
        *((f + 160) as *mut u64) = D;
        *((f + 168) as *mut u64) = DRSP;
        *((f + 176) as *mut u64) = rip.wrapping_add(DRIP);
        *((f + 184) as *mut u64) = MIS;
    }
}

/// Data words with no call record, the context another handler's entry
/// (a signal that came while the backend was held, delivered first)
/// whose frame holds the saved rsp and rip (or rip + 2: a restarted
/// `syscall`'s), 184 bytes to 64 KiB below the saved rsp: put back.
#[test]
fn release_puts_back_data_words_under_another_handlers_frame() {
    for (i, prep) in [
        nested::<3000, 0, 0, 0> as fn(u64, u64),
        nested::<3000, 0, 2, 0>,
        nested::<184, 0, 0, 0>,
        nested::<65536, 0, 0, 0>,
    ]
    .into_iter()
    .enumerate()
    {
        let st = run_with_release(prep);
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "case {i}: status {st:#x}"
        );
    }
}

/// The same with a frame that is not one the saved registers were
/// interrupted at: its rsp not the saved one, its rip 1 or 3 past the
/// saved one (or before it), the distance under a frame's (100) or over
/// 64 KiB (70000), the context above the saved rsp, the context's rsp
/// not 8 past a multiple of 16, no return address (0) at it: stopped
/// again, the words not put back.
#[test]
fn release_stops_again_under_a_frame_not_the_saved_registers() {
    let mut bad = Vec::new();
    for (i, prep) in [
        nested::<3000, 8, 0, 0> as fn(u64, u64),
        nested::<3000, { 0u64.wrapping_sub(8) }, 0, 0>,
        nested::<3000, 0, 1, 0>,
        nested::<3000, 0, 3, 0>,
        nested::<3000, 0, { 0u64.wrapping_sub(2) }, 0>,
        nested::<100, 0, 0, 0>,
        nested::<183, 0, 0, 0>,
        nested::<70000, 0, 0, 0>,
        nested::<65537, 0, 0, 0>,
        nested::<{ 0u64.wrapping_sub(3000) }, 0, 0, 0>,
        nested::<3000, 0, 0, 8>,
        |base, f| {
            nested::<3000, 0, 0, 0>(base, f);
            unsafe { *((f + 192) as *mut u64) = 1 };
        },
    ]
    .into_iter()
    .enumerate()
    {
        // (every case run: the ones that fail named together)
        let (st, probe) = run_with_release_probe(prep);
        if !(libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGSTOP) || probe != Some(0xdead) {
            bad.push(format!("case {i}: status {st:#x}, data word {probe:x?}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A call's registers being written or put back (`NOT_OWN` bit 0,
/// `MARK` 0) with the call's `rsp` (its return slot; just above it, at
/// its return, is not set up by this harness),
/// or a record whose call is not running with the saved registers'
/// own `rsp`: the SIGTRAP handler's repair puts the saved registers
/// into the context, and the process goes on from them (here: code
/// that exits 42); the record is marked repaired.  With `NOT_OWN` bit
/// 3 (a record that cannot repair), or an `rsp` that is none of these,
/// it stops again.
#[test]
fn release_repairs_a_call_being_set_up_or_put_back() {
    fn prep(base: u64, f: u64, mark: u64, sp_at: u64, not_own: u64) {
        unsafe {
            // exit_group(42)
            let code = [0xbfu8, 42, 0, 0, 0, 0xb8, 231, 0, 0, 0, 0x0f, 0x05];
            std::ptr::copy_nonoverlapping(code.as_ptr(), (f + 128) as *mut u8, code.len());
            let g = base + callrepair::GREGS;
            *((g + 16 * 8) as *mut u64) = f + 128;
            *((g + 17 * 8) as *mut u64) = 0x202;
            *((base + callrepair::MARK) as *mut u64) = mark;
            *((base + selfrelease::NOT_OWN) as *mut u64) = not_own;
            // the call's rsp (f + 1 runs with the harness's rsp - 8)
            // is written here by the harness before the call
            *((f + 120) as *mut u64) = sp_at;
            // the saved rsp where the harness does not write it
            if sp_at != g + 8 * callrepair::GREGS_RSP {
                *((g + 8 * callrepair::GREGS_RSP) as *mut u64) = 0x1000;
            }
            // the return address in the slot is the call's (the
            // record's first int3)
            *((f + 112) as *mut u64) = base + callrepair::INT3S;
        }
    }
    type Case = (fn(u64, u64), Option<i32>);
    let cases: [Case; 7] = [
        // registers being written: the call's rsp is its slot
        (|b, f| prep(b, f, 0, b + callrepair::SP, 1), Some(42)),
        // the saved registers' own rsp, no mark
        (
            |b, f| {
                prep(
                    b,
                    f,
                    0,
                    b + callrepair::GREGS + 8 * callrepair::GREGS_RSP,
                    1,
                )
            },
            Some(42),
        ),
        // a call record whose call is not running, the own rsp
        (
            |b, f| {
                prep(
                    b,
                    f,
                    0x1234,
                    b + callrepair::GREGS + 8 * callrepair::GREGS_RSP,
                    1,
                )
            },
            Some(42),
        ),
        // a record that cannot repair
        (|b, f| prep(b, f, 0, b + callrepair::SP, 1 | 8), None),
        // rsp at the slot, but the slot does not hold the call's return
        // address (another handler's frame there)
        (
            |b, f| {
                prep(b, f, 0, b + callrepair::SP, 1);
                unsafe { *((f + 112) as *mut u64) = 0 };
            },
            None,
        ),
        // an rsp that is none of them
        (|b, f| prep(b, f, 0, 0, 1), None),
        (|b, f| prep(b, f, 0x1234, 0, 1), None),
    ];
    for (i, (prep, want)) in cases.into_iter().enumerate() {
        let st = run_with_release(prep);
        match want {
            Some(code) => assert!(
                libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == code,
                "case {i}: status {st:#x}"
            ),
            None => assert!(
                libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGSTOP,
                "case {i}: status {st:#x}"
            ),
        }
    }
}

/// Signals pgdbg held back: sent by the handler as it lets the process
/// go on (SIGUSR2's default action ends it, before the rewound trap).
#[test]
fn release_sends_the_signals_held_back() {
    let st = run_with_release(|base, f| unsafe {
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
        *((base + selfrelease::SIGS) as *mut u64) = 1 << (libc::SIGUSR2 - 1);
    });
    assert!(
        libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGUSR2,
        "status {st:#x}"
    );
    // never SIGCONT or a stop signal: the trap is rewound, the code
    // goes on (and the word is emptied all the same)
    let st = run_with_release(|base, f| unsafe {
        *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xc3u64 << 56);
        *((base + selfrelease::SIGS) as *mut u64) = [
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGCONT,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ]
        .iter()
        .fold(0, |m, s| m | 1 << (*s - 1));
    });
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "status {st:#x}"
    );
}

/// The SIGCONT handler fits its page after the SIGTRAP handler's code.
#[test]
fn release_code_fits_its_page() {
    let n = selfrelease::emit(0x7f00_0000_0000, &release_layout())
        .expect("the SIGCONT handler assembles")
        .len() as u64;
    assert!(selfrelease::CODE + n <= 4096, "{n} bytes");
}

/// Data words changed, with a call running (`rsp` at or below its
/// return slot): left to the call's return trap; or with the call
/// repaired already: put back.  The code goes on (until the alarm
/// here).
#[test]
fn release_lets_a_running_or_repaired_call_go_on() {
    let st = run_with_release(|base, _| unsafe {
        *((base + callrepair::DATAW) as *mut u64) = 0x1000;
        *((base + callrepair::MARK) as *mut u64) = 0x1234;
        *((base + callrepair::SP) as *mut u64) = u64::MAX / 2;
    });
    assert!(
        libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGALRM,
        "status {st:#x}"
    );
    let st = run_with_release(|base, _| unsafe {
        *((base + callrepair::DATAW) as *mut u64) = 0x1000;
        *((base + callrepair::MARK) as *mut u64) = callrepair::REPAIRED;
        *((base + selfrelease::NOT_OWN) as *mut u64) = 1;
    });
    assert!(
        libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGALRM,
        "status {st:#x}"
    );
}
