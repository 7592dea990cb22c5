//! The extended CPU state (x87, SSE, AVX, AVX-512, PKRU, AMX...) of a
//! stopped thread, saved and restored whole through `NT_X86_XSTATE`.
//!
//! Its size depends on the CPU and on what the kernel enabled in XCR0:
//! 832 bytes with AVX, 2 432-2 696 with AVX-512, 11 008 with AMX tiles.
//! The kernel accepts a `PTRACE_SETREGSET` only with exactly its own size,
//! and a `GETREGSET` into a smaller buffer silently truncates: so the size is
//! never assumed.  A save reads into a buffer larger than any xstate and
//! takes the length the kernel answers (the size `SETREGSET` wants back); it
//! checks that length against the layout CPUID leaf 0xD gives for the
//! features the kernel says are there (XCR0, which it writes at offset 464
//! of the buffer).  A save that does not check out is refused before
//! anything in the target changed.  A restore is read back and compared
//! (x87, MXCSR and the XMM registers).

use anyhow::{Result, bail};

const NT_X86_XSTATE: libc::c_int = 0x202;
/// Larger than any xstate so far (AMX: 11 008 bytes).
const PROBE_LEN: usize = 64 * 1024;
/// Where the kernel puts XCR0 in the software-reserved bytes.
const XCR0_AT: usize = 464;
/// FCW..MXCSR_MASK (32), ST0-7 (128), XMM0-15 (256): the legacy area that
/// has one meaning on every x86-64 CPU.
const LEGACY_CHECKED: usize = 416;

/// CPUID leaf 0xD sub-leaf 0: (EBX, ECX) = (size of the XSAVE area for the
/// features enabled in XCR0, size for every feature the CPU supports).
pub fn cpuid_xsave_sizes() -> Option<(u32, u32)> {
    // CPUID is available on every x86-64 CPU; leaf 0 tells whether leaf 0xD
    // exists.
    let max = std::arch::x86_64::__cpuid(0).eax;
    if max < 0xd {
        return None;
    }
    let r = std::arch::x86_64::__cpuid_count(0xd, 0);
    Some((r.ebx, r.ecx))
}

/// XCR0 as the kernel writes it into the software-reserved bytes of every
/// xstate it hands to a debugger (offset 464; gdb reads it there too).
pub(super) fn xcr0_of(buf: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(
        buf.get(XCR0_AT..XCR0_AT + 8)?.try_into().ok()?,
    ))
}

/// Size of the standard (uncompacted) XSAVE layout holding the features of
/// `xcr0`, from CPUID leaf 0xD: the end of the highest feature's area,
/// at least the legacy area and the header.
/// (Computed once per XCR0: each CPUID exits to the hypervisor in a VM,
/// and every call saves the state twice.)
pub fn uncompacted_size(xcr0: u64) -> Option<usize> {
    static LAST: std::sync::OnceLock<(u64, Option<usize>)> = std::sync::OnceLock::new();
    let &(seen, size) = LAST.get_or_init(|| (xcr0, layout_size(xcr0)));
    if seen == xcr0 {
        size
    } else {
        layout_size(xcr0)
    }
}

fn layout_size(xcr0: u64) -> Option<usize> {
    if std::arch::x86_64::__cpuid(0).eax < 0xd {
        return None;
    }
    let mut end = 512 + 64;
    for bit in 2..63u32 {
        if xcr0 & (1 << bit) != 0 {
            let r = std::arch::x86_64::__cpuid_count(0xd, bit);
            end = end.max(r.ebx as usize + r.eax as usize);
        }
    }
    Some(end)
}

fn regset(pid: i32, req: libc::c_uint, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the iovec points at `buf`, which outlives the call.
    let r = unsafe {
        libc::ptrace(
            req,
            pid,
            NT_X86_XSTATE as usize as *mut libc::c_void,
            &mut iov as *mut _ as *mut libc::c_void,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(iov.iov_len)
}

/// A thread's whole extended state, as the kernel gave it.
#[derive(Clone, Debug)]
pub struct XState {
    bytes: Vec<u8>,
    /// XCR0 as the kernel reported it (the features present).
    pub xfeatures: u64,
}

impl XState {
    /// Save the xstate of stopped thread `pid`; refused (nothing changed)
    /// when the kernel's answer does not check out.
    pub fn save(pid: i32) -> Result<XState> {
        let mut buf = vec![0u8; PROBE_LEN];
        let n = regset(pid, libc::PTRACE_GETREGSET, &mut buf).map_err(|e| {
            anyhow::anyhow!("cannot read the FP/SSE/AVX state of the backend ({e})")
        })?;
        if n >= PROBE_LEN {
            bail!(
                "the FP/SSE/AVX state of this CPU is larger than {PROBE_LEN} bytes; pgdbg cannot save it, so it makes no calls here"
            );
        }
        buf.truncate(n);
        XState::check(buf, uncompacted_size)
    }

    /// The checks of `save`, apart from the system call; `expected` gives
    /// the size of the layout of an XCR0 (CPUID in `save`).
    fn check(buf: Vec<u8>, expected: impl Fn(u64) -> Option<usize>) -> Result<XState> {
        let n = buf.len();
        if n < 512 + 64 {
            bail!("the kernel gave a {n}-byte FP/SSE state (less than XSAVE's 576): no calls here");
        }
        let xfeatures = xcr0_of(&buf).unwrap_or(0);
        if xfeatures & 0b11 != 0b11 {
            bail!(
                "the kernel's FP/SSE/AVX state ({n} bytes) names no x87/SSE features (XCR0 {xfeatures:#x}): pgdbg cannot be sure it saved it whole, so it makes no calls here"
            );
        }
        if let Some(want) = expected(xfeatures)
            && want != n
        {
            bail!(
                "the kernel gave {n} bytes of FP/SSE/AVX state where CPUID gives {want} for its features (XCR0 {xfeatures:#x}): not saved whole, so no call is made"
            );
        }
        Ok(XState {
            bytes: buf,
            xfeatures,
        })
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The saved bytes, for the guardian's record of a call in flight.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A state saved earlier (the guardian's record), checked as `save`
    /// checks the kernel's answer.
    pub fn from_saved(bytes: Vec<u8>) -> Result<XState> {
        XState::check(bytes, uncompacted_size)
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Put this state back into stopped thread `pid` (two tries), then read
    /// it back and compare the x87/MXCSR/XMM area.
    pub fn restore(&self, pid: i32) -> Result<()> {
        let mut b = self.bytes.clone();
        let first = regset(pid, libc::PTRACE_SETREGSET, &mut b);
        if let Err(e1) = first {
            let mut b = self.bytes.clone();
            if let Err(e2) = regset(pid, libc::PTRACE_SETREGSET, &mut b) {
                bail!(
                    "cannot restore the FP/SSE/AVX state ({e1}; again: {e2}): the backend's floating-point and vector registers may hold the called function's values"
                );
            }
        }
        let back = XState::save(pid)?;
        if back.bytes.len() != self.bytes.len()
            || back.bytes[..LEGACY_CHECKED] != self.bytes[..LEGACY_CHECKED]
        {
            bail!(
                "the FP/SSE/AVX state read back after the restore differs from the saved one: the backend's floating-point and vector registers may hold the called function's values"
            );
        }
        Ok(())
    }

    /// "2432 bytes (XCR0 0xe7: x87 SSE AVX AVX-512)", for `info`.
    pub fn describe(&self) -> String {
        let mut names = Vec::new();
        for (bits, name) in [
            (1u64, "x87"),
            (1 << 1, "SSE"),
            (1 << 2, "AVX"),
            (0b111 << 5, "AVX-512"),
            (1 << 9, "PKRU"),
            (0b11 << 17, "AMX"),
        ] {
            if self.xfeatures & bits == bits {
                names.push(name);
            }
        }
        format!(
            "{} bytes (XCR0 {:#x}: {})",
            self.bytes.len(),
            self.xfeatures,
            names.join(" ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(n: usize, xcr0: u64) -> Vec<u8> {
        let mut b = vec![0u8; n];
        b[XCR0_AT..XCR0_AT + 8].copy_from_slice(&xcr0.to_le_bytes());
        b
    }

    #[test]
    fn a_truncated_or_unlabelled_state_is_refused() {
        // the Xeon of the bug report: XCR0 0x602e7, 11 008 bytes
        let amx = |x: u64| (x == 0x602e7).then_some(11008);
        // what a 4096-byte buffer got there
        let e = XState::check(fake(4096, 0x602e7), amx);
        assert!(format!("{:#}", e.unwrap_err()).contains("CPUID gives 11008"));
        let e = XState::check(fake(2432, 0), amx);
        assert!(format!("{:#}", e.unwrap_err()).contains("no x87/SSE"));
        let e = XState::check(vec![0u8; 100], amx);
        assert!(format!("{:#}", e.unwrap_err()).contains("less than XSAVE"));
        let ok = XState::check(fake(11008, 0x602e7), amx);
        assert_eq!(ok.unwrap().len(), 11008);
    }

    /// This CPU's own layout: AVX (bit 2) ends at 576 + 256 = 832.
    #[test]
    fn cpuid_layout_of_avx() {
        if std::arch::x86_64::__cpuid_count(0xd, 2).eax == 256 {
            assert_eq!(uncompacted_size(0b111), Some(832));
        }
        assert_eq!(uncompacted_size(0b11), Some(576));
    }

    /// The size pgdbg saves is the one CPUID 0xD gives on whatever CPU runs
    /// the suite (a traced child of our own).
    #[test]
    fn saved_size_is_cpuids_size_on_this_cpu() {
        use nix::sys::ptrace;
        use nix::sys::wait::waitpid;
        use nix::unistd::{ForkResult, fork};
        let (enabled, _max) = cpuid_xsave_sizes().expect("CPUID leaf 0xD");
        // SAFETY: the child only sleeps and exits.
        let child = match unsafe { fork() }.expect("fork") {
            ForkResult::Child => {
                std::thread::sleep(std::time::Duration::from_secs(5));
                unsafe { libc::_exit(0) }
            }
            ForkResult::Parent { child } => child,
        };
        ptrace::seize(child, ptrace::Options::empty()).expect("seize");
        ptrace::interrupt(child).expect("interrupt");
        waitpid(child, None).expect("wait");
        let x = XState::save(child.as_raw());
        let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
        let _ = waitpid(child, None);
        let x = x.expect("save");
        assert_eq!(
            x.len(),
            enabled as usize,
            "saved xstate size vs CPUID 0xD EBX (xfeatures {:#x})",
            x.xfeatures
        );
        assert_eq!(uncompacted_size(x.xfeatures), Some(enabled as usize));
    }
}
