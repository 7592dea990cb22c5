//! A SIGTRAP handler of ours inside the target, for as long as int3s or
//! debug registers of ours are armed there.  While pgdbg traces the target
//! it never runs: ptrace reports every SIGTRAP to pgdbg first, and pgdbg
//! never delivers one.  It runs only when pgdbg is gone (SIGKILL, the OOM
//! killer, a crash of pgdbg) and the target traps before the guardian
//! (guardian.rs) has restored it: without it the SIGTRAP kills the backend
//! and the postmaster restarts the cluster.
//!
//! The handler (raw machine code, no libc, no stack use beyond its return
//! address, all signals blocked while it runs):
//! * an int3 (`si_code` SI_KERNEL or TRAP_BRKPT) whose address (`rip - 1`
//!   in the interrupted context) is in our table: when the byte there is
//!   still 0xcc, the page is made writable (`mprotect`, page-aligned,
//!   read/write/exec), the original byte stored, the page made read/exec
//!   again; then the context's `rip` is set back to the int3's address and
//!   the handler returns (`rt_sigreturn` through our restorer): the
//!   original instruction runs as if the int3 had never been there;
//! * anything else (a watchpoint: `rip` is already past the writing
//!   instruction, nothing to undo; an int3 that is not ours): it returns,
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
//! guardian), then the pages are unmapped unless a stack word points into
//! them.

use super::{Target, procfs};
use anyhow::{Result, anyhow, bail};
use std::collections::HashSet;

const PAGE: u64 = 4096;
/// Entries in each half of the table.
pub const CAP: u64 = 16384;
/// Mapping: code page, data page (selector, sigaction scratch), two halves.
const TABLE_BYTES: u64 = CAP * 8;
pub const MAP_LEN: u64 = 2 * PAGE + 2 * TABLE_BYTES;
const DATA: u64 = PAGE;
/// In the data page: the address of the active half.
const SEL: u64 = DATA;
/// In the data page: kernel sigaction structs for rt_sigaction.
const ACT_NEW: u64 = DATA + 0x40;
const ACT_OLD: u64 = DATA + 0x80;
const HALF0: u64 = 2 * PAGE;
/// The restorer's offset in the code page.
const RESTORER: u64 = 0x100;

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
/// `si_code` of an int3: SI_KERNEL (do_int3 sends a SIGTRAP without
/// details), or TRAP_BRKPT on kernels that give one.
const SI_KERNEL: u32 = 0x80;
const TRAP_BRKPT: u32 = 1;
const SYS_MPROTECT: u32 = 10;
const SYS_RT_SIGRETURN: u32 = 15;
/// `struct sigaction` as the kernel takes it (kernel_sigaction): handler,
/// flags, restorer, mask (8 bytes): 4 words.
pub const SA_WORDS: usize = 4;
const SA_SIGINFO: u64 = 4;
const SA_RESTART: u64 = 0x1000_0000;
const SA_RESTORER: u64 = 0x0400_0000;
/// Entry: bits 0-47 the address, bit 48 the page is writable already (no
/// mprotect), bits 56-63 the original byte.
const ADDR_MASK: u64 = (1 << 48) - 1;
const F_WRITABLE: u64 = 1 << 48;

/// The handler's machine code, for a mapping at `base`.
pub fn emit(base: u64) -> Vec<u8> {
    let mut c: Vec<u8> = Vec::with_capacity(256);
    let d32 = |c: &mut Vec<u8>, v: u32| c.extend_from_slice(&v.to_le_bytes());
    // rdi = signal, rsi = siginfo, rdx = ucontext
    c.extend_from_slice(&[0x8b, 0x46, SIGINFO_CODE as u8]); // mov eax, [rsi+8]
    c.extend_from_slice(&[0x3d]); // cmp eax, SI_KERNEL
    d32(&mut c, SI_KERNEL);
    c.extend_from_slice(&[0x74, 0x05]); // je int3
    c.extend_from_slice(&[0x83, 0xf8, TRAP_BRKPT as u8]); // cmp eax, TRAP_BRKPT
    let jne_done0 = c.len();
    c.extend_from_slice(&[0x75, 0]); // jne done
    // int3:
    c.extend_from_slice(&[0x4c, 0x8b, 0x82]); // mov r8, [rdx+UCONTEXT_RIP]
    d32(&mut c, UCONTEXT_RIP);
    c.extend_from_slice(&[0x4d, 0x8d, 0x48, 0xff]); // lea r9, [r8-1]
    c.extend_from_slice(&[0x48, 0xb8]); // movabs rax, base+SEL
    c.extend_from_slice(&(base + SEL).to_le_bytes());
    c.extend_from_slice(&[0x48, 0x8b, 0x00]); // mov rax, [rax]    active half
    c.push(0xb9); // mov ecx, CAP
    d32(&mut c, CAP as u32);
    let lp = c.len();
    c.extend_from_slice(&[0x4c, 0x8b, 0x10]); // loop: mov r10, [rax]
    c.extend_from_slice(&[0x4d, 0x85, 0xd2]); // test r10, r10
    let jz_done = c.len();
    c.extend_from_slice(&[0x74, 0]); // jz done (end of table)
    c.extend_from_slice(&[0x4d, 0x89, 0xd3]); // mov r11, r10
    c.extend_from_slice(&[0x49, 0xc1, 0xe3, 0x10]); // shl r11, 16
    c.extend_from_slice(&[0x49, 0xc1, 0xeb, 0x10]); // shr r11, 16   address
    c.extend_from_slice(&[0x4d, 0x39, 0xcb]); // cmp r11, r9
    let je_found = c.len();
    c.extend_from_slice(&[0x74, 0]); // je found
    c.extend_from_slice(&[0x48, 0x83, 0xc0, 0x08]); // add rax, 8
    c.extend_from_slice(&[0xff, 0xc9]); // dec ecx
    let jnz = c.len();
    c.extend_from_slice(&[0x75, 0]); // jnz loop
    c[jnz + 1] = (lp as isize - (jnz as isize + 2)) as i8 as u8;
    let done = c.len();
    c.push(0xc3); // done: ret
    let found = c.len();
    c.extend_from_slice(&[0x49, 0x89, 0xd4]); // found: mov r12, rdx   ucontext
    c.extend_from_slice(&[0x4d, 0x89, 0xcd]); // mov r13, r9           int3 address
    c.extend_from_slice(&[0x4d, 0x89, 0xd6]); // mov r14, r10          entry
    c.extend_from_slice(&[0x41, 0x80, 0x7d, 0x00, 0xcc]); // cmp byte [r13], 0xcc
    let jne_rewind0 = c.len();
    c.extend_from_slice(&[0x75, 0]); // jne rewind (already restored)
    c.extend_from_slice(&[0x49, 0x0f, 0xba, 0xe6, 48]); // bt r14, 48
    let jc_store = c.len();
    c.extend_from_slice(&[0x72, 0]); // jc store (writable page)
    let mprotect = |c: &mut Vec<u8>, prot: u8| {
        c.extend_from_slice(&[0x4c, 0x89, 0xef]); // mov rdi, r13
        c.extend_from_slice(&[0x48, 0x81, 0xe7, 0x00, 0xf0, 0xff, 0xff]); // and rdi, -4096
        c.extend_from_slice(&[0xbe, 0x00, 0x10, 0x00, 0x00]); // mov esi, 4096
        c.extend_from_slice(&[0xba, prot, 0, 0, 0]); // mov edx, prot
        c.push(0xb8); // mov eax, SYS_mprotect
        c.extend_from_slice(&SYS_MPROTECT.to_le_bytes());
        c.extend_from_slice(&[0x0f, 0x05]); // syscall
    };
    mprotect(
        &mut c,
        (libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) as u8,
    );
    // a failed mprotect leaves the int3: rip is still rewound, the int3
    // traps again until the guardian restores the byte
    c.extend_from_slice(&[0x48, 0x85, 0xc0]); // test rax, rax
    let jnz_rewind = c.len();
    c.extend_from_slice(&[0x75, 0]); // jnz rewind
    let store = c.len();
    c.extend_from_slice(&[0x4c, 0x89, 0xf0]); // store: mov rax, r14
    c.extend_from_slice(&[0x48, 0xc1, 0xe8, 0x38]); // shr rax, 56   original byte
    c.extend_from_slice(&[0x41, 0x88, 0x45, 0x00]); // mov [r13], al
    c.extend_from_slice(&[0x49, 0x0f, 0xba, 0xe6, 48]); // bt r14, 48
    let jc_rewind = c.len();
    c.extend_from_slice(&[0x72, 0]); // jc rewind
    mprotect(&mut c, (libc::PROT_READ | libc::PROT_EXEC) as u8);
    let rewind = c.len();
    c.extend_from_slice(&[0x4d, 0x89, 0xac, 0x24]); // rewind: mov [r12+UCONTEXT_RIP], r13
    d32(&mut c, UCONTEXT_RIP);
    c.push(0xc3); // ret
    let patch = |c: &mut Vec<u8>, at: usize, to: usize| {
        c[at + 1] = u8::try_from(to - (at + 2)).expect("short jump");
    };
    patch(&mut c, jne_done0, done);
    patch(&mut c, jz_done, done);
    patch(&mut c, je_found, found);
    patch(&mut c, jne_rewind0, rewind);
    patch(&mut c, jc_store, store);
    patch(&mut c, jnz_rewind, rewind);
    patch(&mut c, jc_rewind, rewind);
    assert!(c.len() as u64 <= RESTORER);
    c.resize(RESTORER as usize, 0xf4); // hlt: never reached
    c.push(0xb8); // restorer: mov eax, SYS_rt_sigreturn
    c.extend_from_slice(&SYS_RT_SIGRETURN.to_le_bytes());
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    c.extend_from_slice(&[0x0f, 0x0b]); // ud2 (rt_sigreturn does not return)
    c
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
        }
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

impl Target {
    /// Install the handler if it is not there yet (before the first int3 or
    /// debug register).  The target must be stopped; a failure leaves the
    /// target as it was and is only logged (the guardian still restores
    /// the target, only the window before it acts stays open).
    pub(super) fn ensure_trap_handler(&mut self) {
        if self.trap.is_some() || self.trap_refused || self.gone || !self.stopped {
            return;
        }
        if std::env::var_os("PGDBG_NO_TRAP_HANDLER").is_some() {
            self.trap_refused = true;
            return;
        }
        if let Err(e) = self.install_trap_handler() {
            self.trap_refused = true;
            super::log::debug(&format!("no SIGTRAP handler in the target: {e:#}"));
        }
    }

    fn install_trap_handler(&mut self) -> Result<()> {
        if self.guardian()?.is_none() {
            // the guardian itself never installs one
            bail!("in the guardian");
        }
        let base = self.map_pages(None, MAP_LEN, libc::PROT_READ | libc::PROT_WRITE)?;
        let mut h = TrapHandler::adopted(base, None);
        if let Some(g) = &mut self.guardian {
            g.note_trap(base, None);
        }
        let res = (|| -> Result<()> {
            let code = emit(base);
            self.write(base, &code)?;
            self.write(base + SEL, &h.half_addr(0).to_le_bytes())?;
            let r = self.inject_syscall(
                libc::SYS_mprotect,
                [
                    base,
                    PAGE,
                    (libc::PROT_READ | libc::PROT_EXEC) as u64,
                    0,
                    0,
                    0,
                ],
            )?;
            if r < 0 {
                bail!("mprotect in the target failed (errno {})", -r);
            }
            // the action now in place, read first and recorded for the
            // guardian before ours replaces it
            let r = self.inject_syscall(
                libc::SYS_rt_sigaction,
                [libc::SIGTRAP as u64, 0, base + ACT_OLD, 8, 0, 0],
            )?;
            if r < 0 {
                bail!("rt_sigaction in the target failed (errno {})", -r);
            }
            let mut b = [0u8; SA_WORDS * 8];
            self.read(base + ACT_OLD, &mut b)?;
            let mut old = [0u64; SA_WORDS];
            for (i, w) in old.iter_mut().enumerate() {
                *w = u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
            }
            if old[0] != libc::SIG_DFL as u64 {
                bail!("the target has a SIGTRAP action of its own ({:#x})", old[0]);
            }
            h.old = Some(old);
            if let Some(g) = &mut self.guardian {
                g.note_trap(base, Some(&old));
            }
            let new: [u64; SA_WORDS] = [
                base,
                SA_SIGINFO | SA_RESTART | SA_RESTORER,
                base + RESTORER,
                u64::MAX, // every signal blocked while it runs
            ];
            self.write(base + ACT_NEW, &sa_bytes(&new))?;
            h.installed = true;
            let r = self.inject_syscall(
                libc::SYS_rt_sigaction,
                [libc::SIGTRAP as u64, base + ACT_NEW, 0, 8, 0, 0],
            )?;
            if r < 0 {
                bail!("rt_sigaction in the target failed (errno {})", -r);
            }
            Ok(())
        })();
        self.trap = Some(h);
        if let Err(e) = res {
            let _ = self.remove_trap_handler();
            return Err(e);
        }
        // addresses already armed (none normally)
        let armed: Vec<(u64, u8)> = self.inserted.iter().map(|(a, b)| (*a, *b)).collect();
        for (a, b) in armed {
            self.note_trap_address(a, b)?;
        }
        Ok(())
    }

    /// Make sure the handler knows `addr` (an int3 about to be written over
    /// `orig`): one 8-byte write the first time, none after.
    pub(super) fn note_trap_address(&mut self, addr: u64, orig: u8) -> Result<()> {
        let pid = self.pid();
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        if h.known.contains(&addr) || orig == 0xcc {
            return Ok(());
        }
        let e = h.entry(pid, addr, orig);
        if (h.entries.len() as u64) < CAP {
            let at = h.half_addr(h.half) + 8 * h.entries.len() as u64;
            h.entries.push(addr);
            h.known.insert(addr);
            return self.write(at, &e.to_le_bytes());
        }
        // full: the addresses armed now (and this one) into the other
        // half, zeros after them, then the switch
        let mut list: Vec<(u64, u8)> = self.inserted.iter().map(|(a, b)| (*a, *b)).collect();
        list.push((addr, orig));
        let h = self.trap.as_mut().expect("handler");
        let other = 1 - h.half;
        let mut bytes = vec![0u8; TABLE_BYTES as usize];
        let mut entries = Vec::new();
        for (i, &(a, b)) in list.iter().enumerate().take(CAP as usize - 1) {
            let e = h.entry(pid, a, b);
            bytes[i * 8..i * 8 + 8].copy_from_slice(&e.to_le_bytes());
            entries.push(a);
        }
        let (half_at, sel) = (h.half_addr(other), h.base + SEL);
        self.write(half_at, &bytes)?;
        self.write(sel, &half_at.to_le_bytes())?;
        let h = self.trap.as_mut().expect("handler");
        h.half = other;
        h.known = entries.iter().copied().collect();
        h.entries = entries;
        Ok(())
    }

    /// Put the SIGTRAP action found back and unmap the pages unless a
    /// stack word points into them (a handler running, only possible after
    /// pgdbg died: the guardian steps the target out of it first).
    pub(super) fn remove_trap_handler(&mut self) -> Result<()> {
        let Some(h) = self.trap.clone() else {
            return Ok(());
        };
        if self.gone {
            self.trap = None;
            return Ok(());
        }
        if !self.stopped {
            self.ensure_stopped()?;
            if self.gone {
                self.trap = None;
                return Ok(());
            }
        }
        let base = h.base;
        if let (true, Some(old)) = (h.installed, h.old) {
            self.write(base + ACT_NEW, &sa_bytes(&old))?;
            let r = self.inject_syscall(
                libc::SYS_rt_sigaction,
                [
                    libc::SIGTRAP as u64,
                    base + ACT_NEW,
                    base + ACT_OLD,
                    8,
                    0,
                    0,
                ],
            )?;
            if r < 0 {
                bail!("cannot restore the SIGTRAP action (errno {})", -r);
            }
            let mut b = [0u8; 8];
            self.read(base + ACT_OLD, &mut b)?;
            let cur = u64::from_le_bytes(b);
            if cur != base {
                // the target replaced our action meanwhile: keep its own
                let mut theirs = [0u8; SA_WORDS * 8];
                self.read(base + ACT_OLD, &mut theirs)?;
                self.write(base + ACT_NEW, &theirs)?;
                let _ = self.inject_syscall(
                    libc::SYS_rt_sigaction,
                    [libc::SIGTRAP as u64, base + ACT_NEW, 0, 8, 0, 0],
                )?;
            }
        }
        if let Some(t) = &mut self.trap {
            t.installed = false;
        }
        if let Some(g) = &mut self.guardian {
            g.note_trap(base, None);
        }
        // inside the handler (the guardian seized the target while it ran):
        // step it out; it is straight-line code and one bounded loop
        let in_page = |a: u64| a >= base && a < base + PAGE;
        let mut steps = 0u32;
        while in_page(self.regs()?.rip) {
            if steps == 200_000 {
                bail!("the target does not leave the SIGTRAP handler");
            }
            if let Some(stop) = self.single_step_raw()? {
                if self.gone {
                    self.trap = None;
                    return Ok(());
                }
                return Err(anyhow!(
                    "the target stopped in the SIGTRAP handler: {stop:?}"
                ));
            }
            steps += 1;
        }
        if self.stack_points_into((base, MAP_LEN))? {
            super::log::debug("SIGTRAP handler pages left mapped: the stack points into them");
            self.trap = None;
            if let Some(g) = &mut self.guardian {
                g.forget_trap();
            }
            return Ok(());
        }
        self.unmap_pages(base, MAP_LEN)?;
        self.trap = None;
        if let Some(g) = &mut self.guardian {
            g.forget_trap();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Formatter, NasmFormatter};

    #[test]
    fn kernel_abi_offsets_match_the_c_structs() {
        // glibc's ucontext_t starts like the kernel's struct ucontext
        let uc = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
            + std::mem::offset_of!(libc::mcontext_t, gregs)
            + 8 * libc::REG_RIP as usize;
        assert_eq!(uc, UCONTEXT_RIP as usize);
        let si: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let code = std::ptr::addr_of!(si.si_code) as usize - std::ptr::addr_of!(si) as usize;
        assert_eq!(code, SIGINFO_CODE as usize);
        assert_eq!(SA_SIGINFO, libc::SA_SIGINFO as u64);
        assert_eq!(SA_RESTART, libc::SA_RESTART as u64);
        // SA_RESTORER (0x04000000) is not exported by libc: arch/x86/include/uapi/asm/signal.h
        assert_eq!(SYS_MPROTECT as i64, libc::SYS_mprotect);
        assert_eq!(SYS_RT_SIGRETURN as i64, libc::SYS_rt_sigreturn);
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

    /// The emitted code decodes to the instructions its comments name,
    /// with every branch landing where it should.
    #[test]
    fn handler_code_decodes_as_written() {
        let base = 0x7f00_0000_0000u64;
        let code = emit(base);
        let end = code.iter().position(|&b| b == 0xf4).unwrap();
        let text = disasm(&code[..end], base);
        let want = [
            "mov eax,[rsi+8]",
            "cmp eax,80h",
            "je short 00007F000000000Fh",
            "cmp eax,1",
            "jne short 00007F000000004Ch",
            "mov r8,[rdx+0A8h]",
            "lea r9,[r8-1]",
            "mov rax,7F0000001000h",
            "mov rax,[rax]",
            "mov ecx,4000h",
            "mov r10,[rax]",
            "test r10,r10",
            "je short 00007F000000004Ch",
            "mov r11,r10",
            "shl r11,10h",
            "shr r11,10h",
            "cmp r11,r9",
            "je short 00007F000000004Dh",
            "add rax,8",
            "dec ecx",
            "jne short 00007F000000002Ch",
            "ret",
            "mov r12,rdx",
            "mov r13,r9",
            "mov r14,r10",
            "cmp byte [r13],0CCh",
            "jne short 00007F00000000B1h",
            "bt r14,30h",
            "jb short 00007F0000000084h",
            "mov rdi,r13",
            "and rdi,0FFFFFFFFFFFFF000h",
            "mov esi,1000h",
            "mov edx,7",
            "mov eax,0Ah",
            "syscall",
            "test rax,rax",
            "jne short 00007F00000000B1h",
            "mov rax,r14",
            "shr rax,38h",
            "mov [r13],al",
            "bt r14,30h",
            "jb short 00007F00000000B1h",
            "mov rdi,r13",
            "and rdi,0FFFFFFFFFFFFF000h",
            "mov esi,1000h",
            "mov edx,5",
            "mov eax,0Ah",
            "syscall",
            "mov [r12+0A8h],r13",
            "ret",
        ];
        assert_eq!(text, want, "{text:#?}");
        let r = disasm(&code[RESTORER as usize..], base + RESTORER);
        assert_eq!(r, ["mov eax,0Fh", "syscall", "ud2"]);
        // labels: the loop head, done, found, rewind
        let pos = |s: &str| {
            let mut dec = Decoder::with_ip(64, &code[..end], base, DecoderOptions::NONE);
            let mut f = NasmFormatter::new();
            for ins in &mut dec {
                let mut t = String::new();
                f.format(&ins, &mut t);
                if t == s {
                    return ins.ip();
                }
            }
            panic!("{s} not found");
        };
        assert_eq!(pos("mov r10,[rax]"), base + 0x2c);
        assert_eq!(pos("ret"), base + 0x4c);
        assert_eq!(pos("mov r12,rdx"), base + 0x4d);
        assert_eq!(pos("mov [r12+0A8h],r13"), base + 0xb1);
        assert_eq!(pos("mov rax,r14"), base + 0x84);
    }

    #[test]
    fn entries_pack_address_flag_and_byte() {
        let mut h = TrapHandler::adopted(0x1000, None);
        h.exec = vec![(0x400000, 0x500000, false), (0x600000, 0x601000, true)];
        assert_eq!(h.entry(0, 0x400123, 0x55), 0x5500_0000_0040_0123);
        assert_eq!(h.entry(0, 0x600010, 0xf3), 0xf301_0000_0060_0010);
    }
}
