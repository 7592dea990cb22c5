//! General-purpose registers of an x86-64 target and their DWARF numbers.

/// x86-64 general registers, in a layout independent of libc.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Registers {
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub rsp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    pub rip: u64,
    pub eflags: u64,
    pub orig_rax: u64,
    pub cs: u64,
    pub ss: u64,
    pub ds: u64,
    pub es: u64,
    pub fs: u64,
    pub gs: u64,
    pub fs_base: u64,
    pub gs_base: u64,
}

/// DWARF register numbers (System V x86-64 psABI).
pub const DWARF_RSP: u16 = 7;
pub const DWARF_RA: u16 = 16;

/// Register names accepted as `$name` in expressions.
pub const NAMES: &[&str] = &[
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15", "rip", "pc", "sp", "fp", "eflags",
];

impl Registers {
    pub fn from_user(r: &libc::user_regs_struct) -> Registers {
        Registers {
            rax: r.rax,
            rbx: r.rbx,
            rcx: r.rcx,
            rdx: r.rdx,
            rsi: r.rsi,
            rdi: r.rdi,
            rbp: r.rbp,
            rsp: r.rsp,
            r8: r.r8,
            r9: r.r9,
            r10: r.r10,
            r11: r.r11,
            r12: r.r12,
            r13: r.r13,
            r14: r.r14,
            r15: r.r15,
            rip: r.rip,
            eflags: r.eflags,
            orig_rax: r.orig_rax,
            cs: r.cs,
            ss: r.ss,
            ds: r.ds,
            es: r.es,
            fs: r.fs,
            gs: r.gs,
            fs_base: r.fs_base,
            gs_base: r.gs_base,
        }
    }

    pub fn to_user(&self) -> libc::user_regs_struct {
        let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        r.rax = self.rax;
        r.rbx = self.rbx;
        r.rcx = self.rcx;
        r.rdx = self.rdx;
        r.rsi = self.rsi;
        r.rdi = self.rdi;
        r.rbp = self.rbp;
        r.rsp = self.rsp;
        r.r8 = self.r8;
        r.r9 = self.r9;
        r.r10 = self.r10;
        r.r11 = self.r11;
        r.r12 = self.r12;
        r.r13 = self.r13;
        r.r14 = self.r14;
        r.r15 = self.r15;
        r.rip = self.rip;
        r.eflags = self.eflags;
        r.orig_rax = self.orig_rax;
        r.cs = self.cs;
        r.ss = self.ss;
        r.ds = self.ds;
        r.es = self.es;
        r.fs = self.fs;
        r.gs = self.gs;
        r.fs_base = self.fs_base;
        r.gs_base = self.gs_base;
        r
    }

    /// Value of a DWARF-numbered general register.
    pub fn dwarf(&self, n: u16) -> Option<u64> {
        Some(match n {
            0 => self.rax,
            1 => self.rdx,
            2 => self.rcx,
            3 => self.rbx,
            4 => self.rsi,
            5 => self.rdi,
            6 => self.rbp,
            7 => self.rsp,
            8 => self.r8,
            9 => self.r9,
            10 => self.r10,
            11 => self.r11,
            12 => self.r12,
            13 => self.r13,
            14 => self.r14,
            15 => self.r15,
            16 => self.rip,
            _ => return None,
        })
    }

    pub fn by_name(&self, name: &str) -> Option<u64> {
        Some(match name {
            "rax" => self.rax,
            "rbx" => self.rbx,
            "rcx" => self.rcx,
            "rdx" => self.rdx,
            "rsi" => self.rsi,
            "rdi" => self.rdi,
            "rbp" | "fp" => self.rbp,
            "rsp" | "sp" => self.rsp,
            "r8" => self.r8,
            "r9" => self.r9,
            "r10" => self.r10,
            "r11" => self.r11,
            "r12" => self.r12,
            "r13" => self.r13,
            "r14" => self.r14,
            "r15" => self.r15,
            "rip" | "pc" => self.rip,
            "eflags" => self.eflags,
            _ => return None,
        })
    }
}

/// A sparse register set for one frame during unwinding: which DWARF
/// registers are known in that frame.
#[derive(Debug, Clone, Default)]
pub struct FrameRegs {
    vals: [Option<u64>; 17],
}

impl FrameRegs {
    pub fn from_regs(r: &Registers) -> FrameRegs {
        let mut f = FrameRegs::default();
        for n in 0..17u16 {
            f.vals[n as usize] = r.dwarf(n);
        }
        f
    }
    pub fn get(&self, n: u16) -> Option<u64> {
        self.vals.get(n as usize).copied().flatten()
    }
    pub fn set(&mut self, n: u16, v: Option<u64>) {
        if let Some(slot) = self.vals.get_mut(n as usize) {
            *slot = v;
        }
    }
    pub fn pc(&self) -> u64 {
        self.get(DWARF_RA).unwrap_or(0)
    }
    pub fn sp(&self) -> u64 {
        self.get(DWARF_RSP).unwrap_or(0)
    }
}

impl Registers {
    /// General-purpose register by its x86 encoding number (0 rax, 1 rcx,
    /// 2 rdx, 3 rbx, 4 rsp, 5 rbp, 6 rsi, 7 rdi, 8-15 r8-r15).
    pub fn gpr(&self, n: u8) -> u64 {
        let mut r = *self;
        *r.gpr_mut(n)
    }

    pub fn gpr_mut(&mut self, n: u8) -> &mut u64 {
        match n & 15 {
            0 => &mut self.rax,
            1 => &mut self.rcx,
            2 => &mut self.rdx,
            3 => &mut self.rbx,
            4 => &mut self.rsp,
            5 => &mut self.rbp,
            6 => &mut self.rsi,
            7 => &mut self.rdi,
            8 => &mut self.r8,
            9 => &mut self.r9,
            10 => &mut self.r10,
            11 => &mut self.r11,
            12 => &mut self.r12,
            13 => &mut self.r13,
            14 => &mut self.r14,
            _ => &mut self.r15,
        }
    }
}

/// A prologue instruction that touches no register but rsp: `push r64`
/// (length, Some(register)), or `endbr64`/`nop` (length, None).
pub fn decode_push_or_nop(code: &[u8]) -> Option<(u64, Option<u8>)> {
    match *code {
        [b @ 0x50..=0x57, ..] => Some((1, Some(b - 0x50))),
        [0x41, b @ 0x50..=0x57, ..] => Some((2, Some(b - 0x50 + 8))),
        [0xf3, 0x0f, 0x1e, 0xfa, ..] => Some((4, None)), // endbr64
        [0x90, ..] => Some((1, None)),
        _ => None,
    }
}

/// `mov r64, r64` (REX.W 89/8B with a register ModRM): (length, dst, src).
pub fn decode_mov_reg(code: &[u8]) -> Option<(u64, u8, u8)> {
    let [rex @ 0x48..=0x4f, op @ (0x89 | 0x8b), modrm, ..] = *code else {
        return None;
    };
    if modrm >> 6 != 0b11 {
        return None;
    }
    let reg = ((modrm >> 3) & 7) | if rex & 4 != 0 { 8 } else { 0 };
    let rm = (modrm & 7) | if rex & 1 != 0 { 8 } else { 0 };
    let (dst, src) = if op == 0x89 { (rm, reg) } else { (reg, rm) };
    Some((3, dst, src))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_and_nop_decoding() {
        assert_eq!(decode_push_or_nop(&[0x41, 0x57, 0, 0]), Some((2, Some(15))));
        assert_eq!(decode_push_or_nop(&[0x55, 0, 0, 0]), Some((1, Some(5))));
        assert_eq!(
            decode_push_or_nop(&[0xf3, 0x0f, 0x1e, 0xfa]),
            Some((4, None))
        );
        assert_eq!(decode_push_or_nop(&[0x90]), Some((1, None)));
        assert_eq!(decode_push_or_nop(&[0x49, 0x89, 0xce]), None);
    }

    #[test]
    fn mov_reg_decoding() {
        // mov %rcx,%r14 ; mov %rdi,%rbx ; mov %rsp,%rbp ; mov (%rdi),%rax
        assert_eq!(decode_mov_reg(&[0x49, 0x89, 0xce]), Some((3, 14, 1)));
        assert_eq!(decode_mov_reg(&[0x48, 0x89, 0xfb]), Some((3, 3, 7)));
        assert_eq!(decode_mov_reg(&[0x48, 0x89, 0xe5]), Some((3, 5, 4)));
        assert_eq!(decode_mov_reg(&[0x48, 0x8b, 0x07]), None);
        // mov %r12,%rsi (4c 89 e6) ; 8b form: mov %rsi,%r13 (4c 8b ee)
        assert_eq!(decode_mov_reg(&[0x4c, 0x89, 0xe6]), Some((3, 6, 12)));
        assert_eq!(decode_mov_reg(&[0x4c, 0x8b, 0xee]), Some((3, 13, 6)));
    }
}
