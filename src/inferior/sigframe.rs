//! The signal frame an injected system call returns through by itself
//! (detour.rs, `inject_syscall`): pgdbg writes, on the backend's own stack
//! below the red zone of its saved `rsp`, the frame the kernel's
//! `rt_sigreturn` reads, holding the backend's saved state, and the
//! injected code is `syscall; xor eax, eax; mov al, SYS_rt_sigreturn;
//! syscall` (`trailer`).  pgdbg stops the backend at the system call's
//! exit and puts the registers back itself, as before; but should every
//! pgdbg process die at any instant, the untraced backend finishes the
//! system call and its `rt_sigreturn` puts back every general register,
//! the flags, the signal mask and the whole FP/SSE/AVX state as pgdbg
//! saved them: it runs on in its own context, held by nobody.
//!
//! Every layout here is the kernel's user ABI, each named where it is
//! defined (Linux, arch/x86/include/uapi/asm/{sigcontext,ucontext}.h,
//! include/uapi/asm-generic/signal.h, and the frame
//! arch/x86/include/asm/sigframe.h, whose `struct rt_sigframe` is what
//! `rt_sigreturn` in arch/x86/kernel/signal_64.c reads at `regs->sp - 8`,
//! as left after a handler's `ret` popped `pretcode`).
//!
//! What `rt_sigreturn` does with the frame, and why each field is as
//! written (arch/x86/kernel/signal_64.c, fpu/signal.c, kernel/signal.c):
//! * `uc_sigmask` becomes the blocked mask (`set_current_blocked`): the
//!   backend's own, read with PTRACE_GETSIGMASK while it is stopped;
//! * `restore_sigcontext` puts back r8..r15, rdi, rsi, rbp, rbx, rdx, rax,
//!   rcx, rsp, rip, the user-changeable flags (FIX_EFLAGS) and cs/ss (with
//!   UC_STRICT_RESTORE_SS, ss exactly as written), sets `orig_ax` to -1
//!   (no system call restart after it) and resets `restart_block`;
//! * `fpu__restore_sig` XRSTORs the image at `fpstate` when its
//!   `_fpx_sw_bytes` check out (`check_xstate_in_sigframe`); with a NULL
//!   `fpstate` it would clear the FP state, with bad sw bytes restore only
//!   the legacy area: so the whole image is written, 64-byte aligned (the
//!   XRSTOR rule), with sw bytes as the kernel's own frames carry them
//!   (where AMX tile data are enabled but not in use, the sw bytes name
//!   the process's own frame size and features, the image written whole
//!   all the same: `frame_xstate`, `plan`);
//! * `restore_altstack` gives `uc_stack` to `do_sigaltstack`, ignoring
//!   every error but a fault reading it: an `ss_flags` that is no valid
//!   mode (SS_ONSTACK | SS_DISABLE) is refused there with EINVAL (or EPERM
//!   first, when the backend runs on its alternate stack), so the
//!   backend's alternate signal stack stays as it is.
//!
//! A frame the kernel rejects (`badframe`) is a SIGSEGV: the frame is
//! refused whenever it cannot be exact (`plan`), and the injected system
//! call then runs as before, in the group stop.

use crate::arch::regs::Registers;
use anyhow::{Result, bail};

/// The length of the injected code (`trailer`): eight bytes, as the
/// guardian's record keeps the borrowed code bytes in one word
/// (guardian/inflight.rs), and the SIGCONT handler compares them with a
/// word at AT_ENTRY (selfrelease/handler.rs).
pub const TRAILER_LEN: usize = 8;
/// Where the injected system call returns: one `syscall` past AT_ENTRY.
pub const AFTER_SYSCALL: u64 = 2;

/// The injected code: `syscall`, `xor eax, eax`, `mov al,
/// SYS_rt_sigreturn`, `syscall` (no instruction here touches memory),
/// assembled once.
pub fn trailer() -> &'static [u8; TRAILER_LEN] {
    static CODE: std::sync::OnceLock<[u8; TRAILER_LEN]> = std::sync::OnceLock::new();
    CODE.get_or_init(|| {
        let c = assemble_trailer().expect("the trailer assembles");
        assert_eq!(
            c.at("after_syscall"),
            Some(AFTER_SYSCALL as usize),
            "the trailer's first system call returns at AFTER_SYSCALL"
        );
        c.bytes
            .try_into()
            .unwrap_or_else(|b: Vec<u8>| panic!("the trailer is {} bytes, not eight", b.len()))
    })
}

fn assemble_trailer() -> Result<crate::arch::asm::Code, crate::arch::asm::AsmError> {
    use crate::arch::asm::*;
    let mut a = Asm::new();
    // the injected system call (its number and arguments in the registers)
    a.syscall()?;
    a.set("after_syscall")?;
    // then the frame's context back: rt_sigreturn
    a.xor(eax, eax)?;
    a.mov(al, libc::SYS_rt_sigreturn as i32)?;
    a.syscall()?;
    // position-independent: assembled anywhere
    a.assemble(0)
}

/// The red zone below `rsp` a function may use without moving it (System V
/// x86-64 psABI 3.2.2); the kernel skips it too (`get_sigframe`).
const RED_ZONE: u64 = 128;

// struct rt_sigframe (arch/x86/include/asm/sigframe.h, 64-bit):
// char *pretcode; struct ucontext uc; struct siginfo info;
const F_UC: usize = 8;
// struct ucontext (arch/x86/include/uapi/asm/ucontext.h): unsigned long
// uc_flags; struct ucontext *uc_link; stack_t uc_stack; struct sigcontext
// uc_mcontext; sigset_t uc_sigmask (the kernel's: 64 bits)
const UC_FLAGS: usize = F_UC;
const UC_LINK: usize = F_UC + 8;
// stack_t (include/uapi/asm-generic/signal.h): void *ss_sp; int ss_flags;
// (4 bytes of padding) size_t ss_size
const UC_STACK_SP: usize = F_UC + 16;
const UC_STACK_FLAGS: usize = F_UC + 24;
const UC_STACK_SIZE: usize = F_UC + 32;
const UC_MCONTEXT: usize = F_UC + 40;
// struct sigcontext, __x86_64__ (arch/x86/include/uapi/asm/sigcontext.h):
// r8 r9 r10 r11 r12 r13 r14 r15 rdi rsi rbp rbx rdx rax rcx rsp rip eflags
// (u64 each), cs gs fs ss (u16 each), err trapno oldmask cr2 (u64 each),
// fpstate (pointer), reserved1[8]
const SC_EFLAGS: usize = UC_MCONTEXT + 17 * 8;
const SC_CS: usize = UC_MCONTEXT + 18 * 8;
const SC_SS: usize = SC_CS + 6;
const SC_FPSTATE: usize = UC_MCONTEXT + 23 * 8;
const SIGCONTEXT_LEN: usize = 32 * 8;
const UC_SIGMASK: usize = UC_MCONTEXT + SIGCONTEXT_LEN;
// siginfo_t: 128 bytes (SI_MAX_SIZE, include/uapi/asm-generic/siginfo.h);
// not read by rt_sigreturn, but `access_ok` covers the whole frame
const FRAME_LEN: usize = UC_SIGMASK + 8 + 128;
const _: () = assert!(UC_SIGMASK == 304 && FRAME_LEN == 440);
/// Where a ucontext's general registers start (callrepair.rs's `UC_GREGS`
/// is checked against it).
pub(super) const UC_GREGS_IN_UCONTEXT: usize = UC_MCONTEXT - F_UC;

// uc_flags (arch/x86/include/uapi/asm/ucontext.h)
const UC_FP_XSTATE: u64 = 0x1;
const UC_SIGCONTEXT_SS: u64 = 0x2;
const UC_STRICT_RESTORE_SS: u64 = 0x4;
// ss_flags (include/uapi/linux/signal.h): SS_ONSTACK 1, SS_DISABLE 2;
// both at once is no mode `do_sigaltstack` accepts (EINVAL)
const SS_INVALID_MODE: u32 = 1 | 2;

// struct _fpx_sw_bytes in the FXSAVE area's sw_reserved bytes 464..512
// (arch/x86/include/uapi/asm/sigcontext.h): u32 magic1, u32
// extended_size, u64 xfeatures, u32 xstate_size, u32 padding[7]
const SW_BYTES: usize = 464;
const SW_LEN: usize = 48;
const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
const FP_XSTATE_MAGIC2: u32 = 0x4650_5845;
const FP_XSTATE_MAGIC2_SIZE: usize = 4;
/// `sizeof(struct fxregs_state) + sizeof(struct xstate_header)`, the
/// least `check_xstate_in_sigframe` takes.
const MIN_XSTATE: usize = 512 + 64;

/// XCR0 features the frame carries as the kernel's own frames do: x87,
/// SSE, AVX, MPX (3-4), AVX-512 (5-7), PKRU (9), AMX's tile configuration
/// (17) and tile data (18; see `frame_xstate`).  Anything else (features
/// newer than this code) refuses the frame.
const KNOWN_XFEATURES: u64 = 0b110_0000_0010_1111_1111;
/// AMX tile data (XCR0 bit 18): the one feature the kernel leaves out of
/// a process's signal frames until it asks for it
/// (`arch_prctl(ARCH_REQ_XCOMP_PERM)`; XFEATURE_MASK_USER_DYNAMIC in
/// arch/x86/include/asm/fpu/xstate.h), 8 KiB of the ptrace image.
const XTILE_DATA: u64 = 1 << 18;
/// XSTATE_BV, the features whose state the image holds (the rest are in
/// their initial state): the XSAVE header's first word.
const XSTATE_BV: usize = 512;

// Kernel-internal system call return values (include/linux/errno.h), seen
// in rax at a stop inside an interrupted system call.
const ERESTARTSYS: i64 = 512;
const ERESTARTNOINTR: i64 = 513;
const ERESTARTNOHAND: i64 = 514;
const ERESTART_RESTARTBLOCK: i64 = 516;

/// The frame and where it goes, for a backend stopped with `saved`.
pub struct Frame {
    /// Lowest address written: the frame (`pretcode`).
    pub at: u64,
    /// The bytes from `at` up to the image's MAGIC2 (inclusive).
    pub bytes: Vec<u8>,
    /// The injected registers' rsp: `at + 8`, where `rt_sigreturn`
    /// expects it (`regs->sp - 8` is the frame).
    pub rsp: u64,
    /// The blocked signal mask the frame restores (the backend's own).
    pub mask: u64,
}

/// Where the frame of a backend stopped in the trailer with `rsp` (the
/// injected registers' rsp) holds the signal mask `rt_sigreturn` restores.
pub fn sigmask_at(rsp: u64) -> u64 {
    rsp.wrapping_sub(8).wrapping_add(UC_SIGMASK as u64)
}

/// The registers the backend resumes with after a signal handler returns
/// (SA_RESTART) when `saved` is a stop inside an interrupted system call:
/// `rt_sigreturn` never restarts one (`orig_ax` -1), so the frame holds
/// what `handle_signal` (arch/x86/kernel/signal.c) would have set before a
/// handler ran: restarted (rip back onto the `syscall`, rax its number)
/// for -ERESTARTSYS and -ERESTARTNOINTR, -EINTR for -ERESTARTNOHAND and
/// -ERESTART_RESTARTBLOCK.  Used only when pgdbg dies: its own way back
/// puts `orig_rax` back and the kernel restarts the call as it would have.
pub fn as_after_handler(saved: &Registers) -> Registers {
    let mut r = *saved;
    if (saved.orig_rax as i64) < 0 {
        return r;
    }
    match -(saved.rax as i64) {
        ERESTARTSYS | ERESTARTNOINTR => {
            r.rax = saved.orig_rax;
            r.rip = saved.rip.wrapping_sub(2);
        }
        ERESTARTNOHAND | ERESTART_RESTARTBLOCK => r.rax = (-libc::EINTR as i64) as u64,
        _ => {}
    }
    r
}

/// The features (`_fpx_sw_bytes.xfeatures`) and the size of the image
/// (`xstate_size`) a frame carries for a backend whose ptrace image
/// `xstate` holds the features of `xcr0` (its sw_reserved word);
/// `size_of` the standard layout's size for a set of features (CPUID leaf
/// 0xD, `xstate::uncompacted_size`).  `rt_sigreturn` takes an image no
/// larger than the process's own frames (`check_xstate_in_sigframe`:
/// `xstate_size` <= its `user_size`, else only the legacy area is
/// restored), and puts every feature of its own that the frame's
/// `xfeatures` leave out in its initial state.  The ptrace image is
/// always the largest (every feature the kernel enabled, AMX tile data
/// too), and a process that never asked for the tiles has frames without
/// them: so the frame leaves the tile data out while they are in their
/// initial state (XSTATE_BV bit 18 clear: what every process that never
/// asked for them has), which is then exact for both kinds of process;
/// with tile data in use (only a process that asked, whose frames are the
/// ptrace image's size) it carries the whole image.
pub fn frame_xstate(
    xstate: &[u8],
    xcr0: u64,
    size_of: impl Fn(u64) -> Option<usize>,
) -> Result<(u64, usize)> {
    let n = xstate.len();
    if xcr0 & !KNOWN_XFEATURES != 0 {
        bail!("XCR0 {xcr0:#x} has features the frame does not carry (newer than this code)");
    }
    // (not a multiple of 64 with PKRU last: 2440 bytes with AVX-512)
    if n < MIN_XSTATE {
        bail!("an XSAVE image of {n} bytes");
    }
    let bv = u64::from_le_bytes(xstate[XSTATE_BV..XSTATE_BV + 8].try_into()?);
    if xcr0 & XTILE_DATA == 0 || bv & XTILE_DATA != 0 {
        return Ok((xcr0, n));
    }
    let features = xcr0 & !XTILE_DATA;
    match size_of(features) {
        Some(size) if (MIN_XSTATE..=n).contains(&size) => Ok((features, size)),
        other => bail!("no XSAVE layout size for features {features:#x} ({other:?})"),
    }
}

/// Build the frame for a backend stopped with `saved`, blocked mask
/// `sigmask` and XSAVE image `xstate` (NT_X86_XSTATE, `xcr0` from its
/// sw_reserved word); `stack` the writable mapping holding `rsp`;
/// `size_of` as for `frame_xstate`.  Refused (an error naming why) where
/// it cannot be exact.
pub fn plan(
    saved: &Registers,
    sigmask: u64,
    xstate: &[u8],
    xcr0: u64,
    stack: (u64, u64),
    size_of: impl Fn(u64) -> Option<usize>,
) -> Result<Frame> {
    // `size` what the frame says it carries; the whole image `n` written
    // all the same, with MAGIC2 after both: a kernel from 6.15 to 7.0
    // looks for MAGIC2 at the process's own `user_size` instead of
    // `xstate_size` (reverted upstream in 7.1 for frames such as this
    // one), which is 11 008 in a backend that once used tiles; XRSTOR
    // reads no further than `size`
    let (features, size) = frame_xstate(xstate, xcr0, size_of)?;
    let n = xstate.len();
    if saved.cs & 3 != 3 || saved.ss & 3 != 3 {
        bail!(
            "not user-mode selectors (cs {:#x}, ss {:#x})",
            saved.cs,
            saved.ss
        );
    }
    // as the kernel's get_sigframe lays a frame out: below the red zone,
    // the FP image 64-byte aligned (fpu__alloc_mathframe), the frame
    // under it at 16n - 8 (align_sigframe: as after a call)
    let top = saved.rsp.saturating_sub(RED_ZONE);
    let fp = top.saturating_sub((n + FP_XSTATE_MAGIC2_SIZE) as u64) & !63;
    let at = (fp.saturating_sub(FRAME_LEN as u64) & !15).wrapping_sub(8);
    let (lo, hi) = stack;
    if !(at >= lo && at < fp && saved.rsp <= hi && saved.rsp > lo) {
        bail!(
            "the stack mapping {lo:#x}-{hi:#x} cannot take the frame at {at:#x} (rsp {:#x})",
            saved.rsp
        );
    }
    let r = as_after_handler(saved);
    let len = (fp - at) as usize + n + FP_XSTATE_MAGIC2_SIZE;
    let mut b = vec![0u8; len];
    let put = |b: &mut [u8], off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
    put(
        &mut b,
        UC_FLAGS,
        &(UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS).to_le_bytes(),
    );
    put(&mut b, UC_LINK, &0u64.to_le_bytes());
    put(&mut b, UC_STACK_SP, &0u64.to_le_bytes());
    put(&mut b, UC_STACK_FLAGS, &SS_INVALID_MODE.to_le_bytes());
    put(&mut b, UC_STACK_SIZE, &0u64.to_le_bytes());
    let gregs = [
        r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rdi, r.rsi, r.rbp, r.rbx, r.rdx,
        r.rax, r.rcx, r.rsp, r.rip, r.eflags,
    ];
    for (i, v) in gregs.iter().enumerate() {
        put(&mut b, UC_MCONTEXT + 8 * i, &v.to_le_bytes());
    }
    debug_assert_eq!(UC_MCONTEXT + 8 * 17, SC_EFLAGS);
    // cs, gs, fs, ss: gs and fs are not restored in 64-bit mode (the
    // bases are untouched by the injection); cs and ss the saved ones
    put(&mut b, SC_CS, &(r.cs as u16).to_le_bytes());
    put(&mut b, SC_SS, &(r.ss as u16).to_le_bytes());
    put(&mut b, SC_FPSTATE, &fp.to_le_bytes());
    put(&mut b, UC_SIGMASK, &sigmask.to_le_bytes());
    // the image, with the sw bytes a signal frame carries (save_sw_bytes
    // in fpu/signal.c): the ptrace image holds XCR0 in its first word
    // there instead
    let img = (fp - at) as usize;
    put(&mut b, img, xstate);
    let mut sw = [0u8; SW_LEN];
    sw[0..4].copy_from_slice(&FP_XSTATE_MAGIC1.to_le_bytes());
    sw[4..8].copy_from_slice(&((size + FP_XSTATE_MAGIC2_SIZE) as u32).to_le_bytes());
    sw[8..16].copy_from_slice(&features.to_le_bytes());
    sw[16..20].copy_from_slice(&(size as u32).to_le_bytes());
    put(&mut b, img + SW_BYTES, &sw);
    put(&mut b, img + size, &FP_XSTATE_MAGIC2.to_le_bytes());
    put(&mut b, img + n, &FP_XSTATE_MAGIC2.to_le_bytes());
    Ok(Frame {
        at,
        bytes: b,
        rsp: at + 8,
        mask: sigmask,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs() -> Registers {
        Registers {
            rsp: 0x7ffd_0000_1238,
            rip: 0x5555_0000_1000,
            rax: 1,
            r8: 8,
            r15: 15,
            eflags: 0x246,
            cs: 0x33,
            ss: 0x2b,
            orig_rax: u64::MAX,
            ..Default::default()
        }
    }

    /// No layout size asked for (no AMX tile data in these images).
    fn size(_: u64) -> Option<usize> {
        None
    }

    /// The ptrace image of an AMX CPU (XCR0 0x602e7: x87, SSE, AVX,
    /// AVX-512, PKRU, tile configuration and data) with XSTATE_BV `bv`.
    fn amx_image(bv: u64) -> Vec<u8> {
        let mut x = vec![0u8; 11008];
        x[464..472].copy_from_slice(&0x602e7u64.to_le_bytes());
        x[XSTATE_BV..XSTATE_BV + 8].copy_from_slice(&bv.to_le_bytes());
        x
    }

    #[test]
    fn amx_tile_data_left_out_while_not_in_use() {
        // the layout of a Xeon with AMX (CPUID 0xD): the tile
        // configuration ends at 2816, the tile data at 11008
        let sizes = |f: u64| match f {
            0x202e7 => Some(2816),
            _ => None,
        };
        assert_eq!(
            frame_xstate(&amx_image(0x2e7), 0x602e7, sizes).unwrap(),
            (0x202e7, 2816)
        );
        // tile data in use (a process that asked for them): all of it
        assert_eq!(
            frame_xstate(&amx_image(0x402e7), 0x602e7, sizes).unwrap(),
            (0x602e7, 11008)
        );
        // no size for the smaller layout: refused, never guessed
        assert!(frame_xstate(&amx_image(0x2e7), 0x602e7, size).is_err());
        let mut r = regs();
        r.rsp += 0x8000; // room for the 11 KB image
        let f = plan(
            &r,
            0,
            &amx_image(0x2e7),
            0x602e7,
            (0x7ffd_0000_0000, 0x7ffd_0001_0000),
            sizes,
        )
        .unwrap();
        let w = |o: usize| u64::from_le_bytes(f.bytes[o..o + 8].try_into().unwrap());
        let img = (w(SC_FPSTATE) - f.at) as usize;
        let u32at = |o: usize| u32::from_le_bytes(f.bytes[o..o + 4].try_into().unwrap());
        assert_eq!(u32at(img + 468), 2820);
        assert_eq!(w(img + 472), 0x202e7);
        assert_eq!(u32at(img + 480), 2816);
        assert_eq!(u32at(img + 2816), FP_XSTATE_MAGIC2);
        // the whole image, MAGIC2 after it too (kernels 6.15 to 7.0 look
        // there in a backend that once used tiles)
        assert_eq!(u32at(img + 11008), FP_XSTATE_MAGIC2);
        assert_eq!(f.bytes.len(), img + 11012);
    }

    /// The sw bytes of the last frame the kernel built for `kernel_frame`'s
    /// signal: (xfeatures, xstate_size).
    static KERNEL_SW: std::sync::Mutex<Option<(u64, u32)>> = std::sync::Mutex::new(None);

    extern "C" fn note_sw_bytes(_: libc::c_int, _: *mut libc::siginfo_t, uc: *mut libc::c_void) {
        // SAFETY: the kernel passes its ucontext; fpregs points at the
        // frame's image (64-bit: the FXSAVE area, sw bytes at 464)
        let fp = unsafe { (*(uc as *mut libc::ucontext_t)).uc_mcontext.fpregs } as *const u8;
        if fp.is_null() {
            return;
        }
        let sw = unsafe { std::slice::from_raw_parts(fp.add(SW_BYTES), 24) };
        let magic = u32::from_le_bytes(sw[0..4].try_into().unwrap());
        if magic == FP_XSTATE_MAGIC1
            && let Ok(mut k) = KERNEL_SW.try_lock()
        {
            *k = Some((
                u64::from_le_bytes(sw[8..16].try_into().unwrap()),
                u32::from_le_bytes(sw[16..20].try_into().unwrap()),
            ));
        }
    }

    /// XCR0 of this CPU (XGETBV 0).
    fn xgetbv0() -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: XGETBV with ECX 0 reads XCR0; every x86-64 CPU Linux
        // runs the XSAVE code on has it (checked by the caller)
        unsafe {
            std::arch::asm!("xgetbv", in("ecx") 0, out("eax") lo, out("edx") hi, options(nomem, nostack));
        }
        (hi as u64) << 32 | lo as u64
    }

    /// A fact of this machine's kernel, not of the code: the frame of a
    /// process that never asked for AMX (this test, as a PostgreSQL
    /// backend) has the features and size `frame_xstate` gives for an
    /// image with no tile data in use.  On a CPU without AMX: the whole
    /// image.
    #[test]
    fn frame_xstate_is_the_kernels_own_frame() {
        if std::arch::x86_64::__cpuid(1).ecx & (1 << 27) == 0 {
            return; // no OSXSAVE: the kernel's frames are FXSAVE only
        }
        let xcr0 = xgetbv0();
        let Some(n) = crate::inferior::xstate::uncompacted_size(xcr0) else {
            panic!("no XSAVE layout size for XCR0 {xcr0:#x}");
        };
        let sig = libc::SIGRTMIN() + 7;
        // SAFETY: a handler of this test's own on a real-time signal no
        // other code of pgdbg's uses, sent to this thread only
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = note_sw_bytes as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
            assert_eq!(libc::raise(sig), 0);
        }
        let kernel = KERNEL_SW.lock().unwrap().expect("the handler ran");
        let mut img = vec![0u8; n];
        img[464..472].copy_from_slice(&xcr0.to_le_bytes());
        let ours = frame_xstate(&img, xcr0, crate::inferior::xstate::uncompacted_size).unwrap();
        assert_eq!((ours.0, ours.1 as u32), kernel, "XCR0 {xcr0:#x}");
    }

    #[test]
    fn frame_is_laid_out_as_the_kernel_reads_it() {
        let r = regs();
        let mut x = vec![0u8; 832];
        x[464..472].copy_from_slice(&7u64.to_le_bytes());
        let f = plan(
            &r,
            0x4000,
            &x,
            7,
            (0x7ffd_0000_0000, 0x7ffd_0001_0000),
            size,
        )
        .unwrap();
        assert_eq!(f.at % 16, 8);
        assert_eq!(f.rsp, f.at + 8);
        let w = |o: usize| u64::from_le_bytes(f.bytes[o..o + 8].try_into().unwrap());
        assert_eq!(w(UC_FLAGS), 7);
        assert_eq!(w(UC_MCONTEXT), 8);
        assert_eq!(w(UC_MCONTEXT + 7 * 8), 15);
        assert_eq!(w(UC_MCONTEXT + 15 * 8), r.rsp);
        assert_eq!(w(UC_MCONTEXT + 16 * 8), r.rip);
        assert_eq!(w(SC_EFLAGS), 0x246);
        assert_eq!(w(UC_SIGMASK), 0x4000);
        assert_eq!(f.mask, 0x4000);
        assert_eq!(w((sigmask_at(f.rsp) - f.at) as usize), 0x4000);
        let fp = w(SC_FPSTATE);
        assert_eq!(fp % 64, 0);
        assert!(fp + 832 + 4 <= r.rsp - RED_ZONE);
        let img = (fp - f.at) as usize;
        let u32at = |o: usize| u32::from_le_bytes(f.bytes[o..o + 4].try_into().unwrap());
        assert_eq!(u32at(img + 464), FP_XSTATE_MAGIC1);
        assert_eq!(u32at(img + 468), 836);
        assert_eq!(w(img + 472), 7);
        assert_eq!(u32at(img + 480), 832);
        assert_eq!(u32at(img + 832), FP_XSTATE_MAGIC2);
        assert_eq!(f.bytes.len(), img + 836);
    }

    #[test]
    fn refused_where_it_cannot_be_exact() {
        let r = regs();
        let x = vec![0u8; 832];
        // a feature newer than this code (XCR0 bit 19)
        assert!(
            plan(
                &r,
                0,
                &x,
                0x802e7,
                (0x7ffd_0000_0000, 0x7ffd_0001_0000),
                size
            )
            .is_err()
        );
        // too near the bottom of the stack mapping
        assert!(plan(&r, 0, &x, 7, (r.rsp - 1024, r.rsp + 4096), size).is_err());
        // rsp outside the mapping
        assert!(plan(&r, 0, &x, 7, (0x1000, 0x2000), size).is_err());
    }

    /// The trailer is the four instructions, at the offsets other code
    /// relies on: eight bytes (one word of the guardian's record, one
    /// word the SIGCONT handler compares), the first system call returning
    /// at AFTER_SYSCALL, and its third byte not an int3 (the handler tells
    /// it from `syscall; int3` there).
    #[test]
    fn trailer_is_the_four_instructions() {
        use iced_x86::{Code, Decoder, DecoderOptions, Formatter, NasmFormatter};
        let t = trailer();
        assert_eq!(t.len(), TRAILER_LEN);
        let mut fmt = NasmFormatter::new();
        let got: Vec<(u64, Code, String)> = Decoder::with_ip(64, t, 0, DecoderOptions::NONE)
            .into_iter()
            .map(|i| {
                let mut s = String::new();
                fmt.format(&i, &mut s);
                (i.ip(), i.code(), s)
            })
            .collect();
        let want = [
            (0, Code::Syscall, "syscall"),
            (AFTER_SYSCALL, Code::Xor_rm32_r32, "xor eax,eax"),
            (4, Code::Mov_r8_imm8, "mov al,0Fh"),
            (6, Code::Syscall, "syscall"),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0, g.1, g.2.as_str()), w);
        }
        assert_eq!(libc::SYS_rt_sigreturn, 0xf);
        assert_ne!(t[2], crate::inferior::INT3);
    }

    #[test]
    fn interrupted_system_calls_as_after_a_restarting_handler() {
        let mut r = regs();
        r.orig_rax = 232; // epoll_wait
        r.rax = (-ERESTARTNOHAND) as u64;
        assert_eq!(as_after_handler(&r).rax as i64, -(libc::EINTR as i64));
        assert_eq!(as_after_handler(&r).rip, r.rip);
        r.rax = (-ERESTARTSYS) as u64;
        let a = as_after_handler(&r);
        assert_eq!((a.rax, a.rip), (232, r.rip - 2));
        r.rax = (-ERESTART_RESTARTBLOCK) as u64;
        assert_eq!(as_after_handler(&r).rax as i64, -(libc::EINTR as i64));
        // no system call: unchanged
        r.orig_rax = u64::MAX;
        assert_eq!(as_after_handler(&r), r);
    }
}
