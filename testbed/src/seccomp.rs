//! A seccomp filter for a child before exec: the listed system calls fail
//! with EPERM, every other is allowed (what Docker's default profile, or a
//! pod's `RuntimeDefault`, does to the calls it denies).
#![allow(dead_code)]

#[repr(C)]
struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// Install the filter on the calling process (for `pre_exec`): each of
/// `nrs` returns EPERM.
pub fn deny(nrs: &[i64]) -> std::io::Result<()> {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    let f = |code, jt, jf, k| SockFilter { code, jt, jf, k };
    // on the stack: no allocation between fork and exec
    assert!(nrs.len() <= 8, "at most 8 system calls");
    let n = nrs.len() as u8;
    let mut prog = [const {
        SockFilter {
            code: 0,
            jt: 0,
            jf: 0,
            k: 0,
        }
    }; 13];
    prog[0] = f(0x20, 0, 0, 4); // ld [arch]
    prog[1] = f(0x15, 0, n + 1, AUDIT_ARCH_X86_64);
    prog[2] = f(0x20, 0, 0, 0); // ld [nr]
    // each: jeq nr -> the EPERM return (n - i instructions on)
    for (i, nr) in nrs.iter().enumerate() {
        prog[3 + i] = f(0x15, n - i as u8, 0, *nr as u32);
    }
    let len = 3 + nrs.len();
    prog[len] = f(0x06, 0, 0, 0x7fff_0000); // SECCOMP_RET_ALLOW
    prog[len + 1] = f(0x06, 0, 0, 0x0005_0000 | libc::EPERM as u32); // SECCOMP_RET_ERRNO
    let fprog = SockFprog {
        len: (len + 2) as u16,
        filter: prog.as_ptr(),
    };
    // SAFETY: prctl with a filter program that outlives the call
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, 2, &fprog as *const SockFprog, 0, 0) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
