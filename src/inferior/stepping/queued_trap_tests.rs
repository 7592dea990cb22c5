//! A step over one of our int3s, put on a one-byte `push %rbx`, while the
//! SIGTRAP of an earlier execution of that int3 is still queued for the
//! thread (what wait.rs leaves when an interrupt's stop cannot take it):
//! the push must run once.  The child is made to queue that SIGTRAP itself
//! (a system call of pgdbg's, `rt_tgsigqueueinfo` with an int3's `si_code`
//! SI_KERNEL), blocked until the stop is set up, then unblocked.

use super::super::*;

// The child: waits for `go`, then blocks SIGTRAP, queues one for its own
// thread with an int3's si_code (the siginfo at rsi), and loops over a
// one-byte `push %rbx` (rdx 0), `pushfq` (rdx 1) or two `push %rbx` in a
// row (rdx 2).  Raw system calls only (the parent has threads).
core::arch::global_asm!(
    ".pushsection .text.pgdbg_queued_trap_child,\"ax\",@progbits",
    ".globl pgdbg_queued_trap_child",
    "pgdbg_queued_trap_child:",
    "mov r12, rdi",
    "mov r13, rsi",
    "mov r15, rdx",
    "2:",
    "pause",
    "cmp qword ptr [r12], 0",
    "je 2b",
    "sub rsp, 16",
    "mov qword ptr [rsp], 0x10",
    "mov eax, 14",
    "xor edi, edi",
    "mov rsi, rsp",
    "xor edx, edx",
    "mov r10d, 8",
    "syscall",
    "add rsp, 16",
    "mov eax, 39",
    "syscall",
    "mov r14, rax",
    "mov eax, 186",
    "syscall",
    "mov rsi, rax",
    "mov rdi, r14",
    "mov edx, 5",
    "mov r10, r13",
    "mov eax, 297",
    "syscall",
    "cmp r15, 1",
    "je pgdbg_queued_trap_pushf_loop",
    "cmp r15, 2",
    "je pgdbg_queued_trap_pair_loop",
    ".globl pgdbg_queued_trap_loop",
    "pgdbg_queued_trap_loop:",
    "push rbx",
    "pop rbx",
    "jmp pgdbg_queued_trap_loop",
    ".globl pgdbg_queued_trap_pushf_loop",
    "pgdbg_queued_trap_pushf_loop:",
    "pushfq",
    "popfq",
    "jmp pgdbg_queued_trap_pushf_loop",
    ".globl pgdbg_queued_trap_pair_loop",
    "pgdbg_queued_trap_pair_loop:",
    "push rbx",
    "push rbx",
    "pop rbx",
    "pop rbx",
    "jmp pgdbg_queued_trap_pair_loop",
    ".popsection",
);

unsafe extern "C" {
    fn pgdbg_queued_trap_child(go: *const u64, info: *const libc::siginfo_t, kind: u64) -> !;
    fn pgdbg_queued_trap_loop() -> !;
    fn pgdbg_queued_trap_pushf_loop() -> !;
    fn pgdbg_queued_trap_pair_loop() -> !;
}

/// Which loop the child runs, and what is done at the queued trap.
#[derive(Clone, Copy, PartialEq)]
enum Case {
    /// a step over our int3 on `push %rbx`
    Push,
    /// a step over our int3 on `pushfq`
    Pushf,
    /// `push %rbx` twice, our int3 on each, the trap queued at the second:
    /// a drain of pending SIGTRAPs there (`drain_sigtrap`)
    PairDrain,
    /// the same, and the detach
    PairDetach,
    /// the same, then the int3 at the second push deleted and one
    /// instruction stepped (the trap taken by the step): the flag stale,
    /// the next hit of the first push's int3 (at the same rip) is that
    /// int3's, rewound onto it
    PairStale,
    /// the same, pgdbg gone (a raw detach) with the backend in someone's
    /// group stop, then a new attach told of the resume point on that
    /// int3 (as the guardian's, guardian/restore.rs) and its detach
    PairGuardian,
}

/// The child's `go` (written in the child by the tracer).
static GO: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// /proc/PID/status's `key` mask.
fn status_mask(pid: i32, key: &str) -> u64 {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    st.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0)
}

#[test]
fn a_queued_int3_trap_is_taken_before_an_emulated_push() {
    queued_trap_at(Case::Push);
}

#[test]
fn a_queued_int3_trap_is_taken_before_an_emulated_pushf() {
    queued_trap_at(Case::Pushf);
}

/// A drain of pending SIGTRAPs (before a system call pgdbg makes the
/// backend run, at a watchpoint's change) takes that int3's trap without
/// a rewind by rip-1: onto our int3 just before, its push would run twice.
#[test]
fn a_queued_int3_trap_is_not_rewound_onto_the_int3_before_by_a_drain() {
    queued_trap_at(Case::PairDrain);
}

/// The same at pgdbg's detach.
#[test]
fn a_queued_int3_trap_is_not_rewound_onto_the_int3_before_by_the_detach() {
    queued_trap_at(Case::PairDetach);
}

/// The same after pgdbg's death in someone's group stop, at the
/// guardian's attach (its wait) and detach.
#[test]
fn a_queued_int3_trap_is_not_rewound_onto_the_int3_before_by_the_guardian() {
    queued_trap_at(Case::PairGuardian);
}

/// A flag left stale (its trap taken by a step of the instruction once
/// its int3 was deleted) takes no later trap for that one.
#[test]
fn a_stale_queued_trap_flag_takes_no_later_trap() {
    queued_trap_at(Case::PairStale);
}

/// The stack pointer at the top of the pair loop at `base`, from where
/// the child is (rip) and its rsp there: in the loop, or just before it
/// (the few instructions after its system calls), where it is the top's.
fn pair_loop_top_rsp(base: u64, rip: u64, rsp: u64) -> u64 {
    // push, push, pop, pop, jmp: rsp below the top by 0, 8, 16, 8, 0
    match rip.checked_sub(base) {
        Some(1 | 3) => rsp + 8,
        Some(2) => rsp + 16,
        _ => rsp,
    }
}

/// Over the child's loop of `case`.
fn queued_trap_at(case: Case) {
    let pair = matches!(
        case,
        Case::PairDrain | Case::PairDetach | Case::PairGuardian | Case::PairStale
    );
    // the system calls the child makes, by number
    assert_eq!(
        [libc::SYS_rt_sigprocmask, libc::SYS_getpid, libc::SYS_gettid],
        [14, 39, 186]
    );
    assert_eq!((libc::SYS_rt_tgsigqueueinfo, libc::SIGTRAP), (297, 5));
    let base = pgdbg_queued_trap_pair_loop as *const () as u64;
    // where our int3 with the queued trap is: the second push of a pair
    let addr = match case {
        Case::Push => pgdbg_queued_trap_loop as *const () as u64,
        Case::Pushf => pgdbg_queued_trap_pushf_loop as *const () as u64,
        Case::PairDrain | Case::PairDetach | Case::PairGuardian | Case::PairStale => base + 1,
    };
    let kind = match case {
        Case::Push => 0u64,
        Case::Pushf => 1,
        Case::PairDrain | Case::PairDetach | Case::PairGuardian | Case::PairStale => 2,
    };
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    info.si_signo = libc::SIGTRAP;
    info.si_code = signals::SI_KERNEL;
    // The child is a grandchild (pgdbg never traces its own child: a
    // parent sees the group stops pgdbg holds), its pid passed back in a
    // shared page.  SAFETY: raw forks (no atfork handlers: the parent has
    // threads); the children run the code above and raw system calls.
    let shared = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(shared, libc::MAP_FAILED);
    let slot = shared as *mut i64;
    let mid = unsafe { libc::syscall(libc::SYS_fork) };
    assert!(mid >= 0, "fork");
    if mid == 0 {
        unsafe {
            let pid = libc::syscall(libc::SYS_fork);
            if pid == 0 {
                pgdbg_queued_trap_child(GO.as_ptr(), &info, kind)
            }
            std::ptr::write_volatile(slot, pid);
            libc::syscall(libc::SYS_exit, 0);
        }
    }
    unsafe { libc::waitpid(mid as i32, std::ptr::null_mut(), 0) };
    let pid = unsafe { std::ptr::read_volatile(slot) } as i32;
    unsafe { libc::munmap(shared, 4096) };
    assert!(pid > 0, "the grandchild's fork");
    let bit = 1u64 << (libc::SIGTRAP - 1);
    let result = std::panic::catch_unwind(|| {
        let mut t = Target::attach(pid).expect("attach");
        // pgdbg's SIGTRAP handler in first (its system calls would take a
        // SIGTRAP queued before them), then the child goes on until its
        // SIGTRAP is queued, and is stopped again (in the push loop)
        t.ensure_trap_handler();
        t.write(GO.as_ptr() as u64, &1u64.to_le_bytes())
            .expect("go");
        t.resume().expect("resume");
        let start = std::time::Instant::now();
        while status_mask(pid, "SigPnd:") & bit == 0 {
            assert!(
                start.elapsed().as_secs() < 10,
                "the child queued no SIGTRAP"
            );
            let stop = t.poll().expect("poll");
            assert!(stop.is_none(), "{stop:?}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        t.interrupt().expect("interrupt");
        let stop = t.wait(&NoHooks).expect("wait");
        assert!(matches!(stop, Stop::Interrupted), "{stop:?}");
        assert_eq!(status_mask(pid, "SigBlk:") & bit, bit, "SIGTRAP blocked");
        // rip to the push, the stack as there: one past it, the push undone
        let mut r = t.regs().expect("regs");
        let top = if pair {
            // at the second push: the first one ran
            let top = pair_loop_top_rsp(base, r.rip, r.rsp);
            r.rsp = top - 8;
            top
        } else {
            if r.rip == addr + 1 {
                r.rsp += 8;
            }
            assert!(
                (addr..addr + 4).contains(&r.rip),
                "in the loop at {addr:#x}: {:#x}",
                r.rip
            );
            r.rsp
        };
        r.rip = addr;
        t.set_regs(&r).expect("set regs");
        let before = t.regs().expect("regs");
        t.insert_breakpoint(addr).expect("breakpoint");
        if pair {
            // ours on the push before it too
            t.insert_breakpoint(base).expect("breakpoint before");
        }
        if case == Case::PairGuardian {
            return guardian_case(t, pid, base, addr, top);
        }
        // the queued SIGTRAP unblocked: rip on our int3 with its trap
        // pending, as wait.rs leaves it
        let mask = injected::blocked_mask(pid).expect("mask");
        injected::set_blocked_mask(pid, mask & !bit).expect("unblock");
        assert!(t.own_sigtrap_queued(), "an int3's SIGTRAP queued");
        assert_eq!(t.regs().expect("regs").rip, addr);
        t.trap_queued_on_int3 = Some(addr);
        t.trap_queued_since = t.sigtrap_stops;
        match case {
            Case::PairDetach => {
                t.detach().expect("detach");
                drop(t);
                // where the loop's stack is now, seen from a new attach
                let t = Target::attach(pid).expect("attach again");
                let r = t.regs().expect("regs");
                assert_eq!(
                    pair_loop_top_rsp(base, r.rip, r.rsp),
                    top,
                    "rsp at the loop's top after the detach (8 less: the first push ran twice)"
                );
                return;
            }
            Case::PairDrain => {
                t.drain_sigtrap().expect("drain");
                assert_eq!(t.regs().expect("regs").rip, addr, "rip on the int3");
                assert!(!t.own_sigtrap_queued(), "the queued SIGTRAP taken");
            }
            Case::PairStale => {
                t.remove_breakpoint(addr).expect("delete the second push's");
                // takes the queued trap (a stop) and runs the push
                assert!(t.step_instruction().expect("stepi").is_none());
                t.resume().expect("resume");
                let stop = t.wait(&NoHooks).expect("wait");
                assert!(
                    matches!(stop, Stop::Breakpoint { addr: a } if a == base),
                    "the first push's next hit: {stop:?}"
                );
                assert_eq!(
                    t.regs().expect("regs").rsp,
                    top,
                    "rsp at the first push's next hit (8 more: its push skipped)"
                );
                t.remove_breakpoint(base).expect("remove");
                return;
            }
            Case::Push | Case::Pushf | Case::PairGuardian => {}
        }
        assert!(t.step_over_breakpoint(addr).expect("step over").is_none());
        t.resume().expect("resume");
        let stop = t.wait(&NoHooks).expect("wait");
        // the next int3 the loop meets: the first push of the next pair
        let next = if pair { base } else { addr };
        assert!(
            matches!(stop, Stop::Breakpoint { addr: a } if a == next),
            "the loop's next push: {stop:?}"
        );
        let after = t.regs().expect("regs");
        let want = if pair { top } else { before.rsp };
        assert_eq!(
            after.rsp, want,
            "rsp at the push's next hit (8 less: the push ran twice)"
        );
        assert!(!t.own_sigtrap_queued(), "the queued SIGTRAP taken");
        t.remove_breakpoint(addr).expect("remove");
        if pair {
            t.remove_breakpoint(base).expect("remove");
        }
    });
    unsafe { libc::kill(pid, libc::SIGKILL) };
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// `Case::PairGuardian` from the stop set up at the second push (`addr`,
/// the trap queued and still blocked): the backend put into someone's
/// group stop (SIGSTOP delivered, no instruction run), its SIGTRAP
/// unblocked there, pgdbg gone without a word (a raw detach: the int3s
/// stay); then an attach told of both int3s and of the resume point at
/// `addr` (the guardian's), whose wait and detach must leave rip there.
fn guardian_case(t: Target, pid: i32, base: u64, addr: u64, top: u64) {
    use nix::sys::ptrace;
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let p = nix::unistd::Pid::from_raw(pid);
    let bit = 1u64 << (libc::SIGTRAP - 1);
    // SAFETY: kill(2) of the grandchild this test made
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    ptrace::cont(p, None).expect("cont");
    match waitpid(p, Some(WaitPidFlag::__WALL)).expect("wait") {
        WaitStatus::Stopped(_, nix::sys::signal::Signal::SIGSTOP) => {}
        other => panic!("the SIGSTOP's delivery stop: {other:?}"),
    }
    ptrace::cont(p, nix::sys::signal::Signal::SIGSTOP).expect("deliver SIGSTOP");
    match waitpid(p, Some(WaitPidFlag::__WALL)).expect("wait") {
        WaitStatus::PtraceEvent(..) => {}
        other => panic!("the group stop: {other:?}"),
    }
    assert_eq!(t.regs().expect("regs").rip, addr, "nothing ran");
    let mask = injected::blocked_mask(pid).expect("mask");
    injected::set_blocked_mask(pid, mask & !bit).expect("unblock");
    ptrace::detach(p, None).expect("detach");
    // pgdbg is gone: nothing of this Target's is undone
    std::mem::forget(t);
    assert_eq!(
        status_mask(pid, "SigPnd:") & bit,
        bit,
        "the int3's SIGTRAP queued"
    );
    let mut g = Target::attach_prepared(pid, |g| {
        for a in [base, addr] {
            g.inserted.insert(a, 0x53);
        }
        g.trap_queued_on_int3 = Some(addr);
        g.trap_queued_since = g.sigtrap_stops;
    })
    .expect("attach as the guardian");
    assert_eq!(
        g.regs().expect("regs").rip,
        addr,
        "rip at the attach (one less: rewound onto the push before)"
    );
    g.detach().expect("detach");
    drop(g);
    // SAFETY: as above
    unsafe { libc::kill(pid, libc::SIGCONT) };
    std::thread::sleep(std::time::Duration::from_millis(20));
    let t = Target::attach(pid).expect("attach again");
    let r = t.regs().expect("regs");
    assert_eq!(
        pair_loop_top_rsp(base, r.rip, r.rsp),
        top,
        "rsp at the loop's top after the guardian's detach (8 less: the first push ran twice)"
    );
}
