//! General-purpose registers of an x86-64 target, and the one table of
//! their names and numbers: DWARF's (System V psABI), perf's (the kernel's
//! `perf_regs.h`) and the instruction encoding's.  Every mapping between
//! them is read from [`GPRS`].

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

/// A general-purpose register (with `rip` and `eflags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gpr {
    Rax,
    Rbx,
    Rcx,
    Rdx,
    Rsi,
    Rdi,
    Rbp,
    Rsp,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
    Rip,
    Eflags,
}

/// One register's names and numbers.
#[derive(Debug, Clone, Copy)]
pub struct GprInfo {
    pub gpr: Gpr,
    pub name: &'static str,
    /// DWARF's number (psABI figure 3.36); `rip` is the return address
    /// column
    pub dwarf: Option<u16>,
    /// perf's number (arch/x86/include/uapi/asm/perf_regs.h)
    pub perf: u32,
    /// the number in an instruction's ModRM/REX bits
    pub encoding: Option<u8>,
}

const fn info(gpr: Gpr, name: &'static str, dwarf: i32, perf: u32, encoding: i32) -> GprInfo {
    GprInfo {
        gpr,
        name,
        dwarf: if dwarf < 0 { None } else { Some(dwarf as u16) },
        perf,
        encoding: if encoding < 0 {
            None
        } else {
            Some(encoding as u8)
        },
    }
}

/// Every general-purpose register's names and numbers.
pub const GPRS: [GprInfo; 18] = [
    info(Gpr::Rax, "rax", 0, 0, 0),
    info(Gpr::Rbx, "rbx", 3, 1, 3),
    info(Gpr::Rcx, "rcx", 2, 2, 1),
    info(Gpr::Rdx, "rdx", 1, 3, 2),
    info(Gpr::Rsi, "rsi", 4, 4, 6),
    info(Gpr::Rdi, "rdi", 5, 5, 7),
    info(Gpr::Rbp, "rbp", 6, 6, 5),
    info(Gpr::Rsp, "rsp", 7, 7, 4),
    info(Gpr::R8, "r8", 8, 16, 8),
    info(Gpr::R9, "r9", 9, 17, 9),
    info(Gpr::R10, "r10", 10, 18, 10),
    info(Gpr::R11, "r11", 11, 19, 11),
    info(Gpr::R12, "r12", 12, 20, 12),
    info(Gpr::R13, "r13", 13, 21, 13),
    info(Gpr::R14, "r14", 14, 22, 14),
    info(Gpr::R15, "r15", 15, 23, 15),
    info(Gpr::Rip, "rip", 16, 8, -1),
    info(Gpr::Eflags, "eflags", -1, 9, -1),
];

impl Gpr {
    /// The register of DWARF number `n`.
    pub fn from_dwarf(n: u16) -> Option<Gpr> {
        GPRS.iter().find(|g| g.dwarf == Some(n)).map(|g| g.gpr)
    }
    /// The register of perf's number `n`.
    pub fn from_perf(n: u32) -> Option<Gpr> {
        GPRS.iter().find(|g| g.perf == n).map(|g| g.gpr)
    }
    /// The register of encoding number `n` (0-15).
    pub fn from_encoding(n: u8) -> Gpr {
        GPRS.iter()
            .find(|g| g.encoding == Some(n & 15))
            .map(|g| g.gpr)
            .expect("16 encodings")
    }
    /// The register called `name` (`pc`, `sp` and `fp` are gdb's names
    /// of `rip`, `rsp` and `rbp`).
    pub fn from_name(name: &str) -> Option<Gpr> {
        let name = match name {
            "pc" => "rip",
            "sp" => "rsp",
            "fp" => "rbp",
            n => n,
        };
        GPRS.iter().find(|g| g.name == name).map(|g| g.gpr)
    }
    pub fn info(self) -> &'static GprInfo {
        GPRS.iter()
            .find(|g| g.gpr == self)
            .expect("every register is listed")
    }
}

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
        Gpr::from_dwarf(n).map(|g| self.get(g))
    }

    pub fn by_name(&self, name: &str) -> Option<u64> {
        Gpr::from_name(name).map(|g| self.get(g))
    }

    /// The value of register `g`.
    pub fn get(&self, g: Gpr) -> u64 {
        let mut r = *self;
        *r.get_mut(g)
    }

    pub fn get_mut(&mut self, g: Gpr) -> &mut u64 {
        match g {
            Gpr::Rax => &mut self.rax,
            Gpr::Rbx => &mut self.rbx,
            Gpr::Rcx => &mut self.rcx,
            Gpr::Rdx => &mut self.rdx,
            Gpr::Rsi => &mut self.rsi,
            Gpr::Rdi => &mut self.rdi,
            Gpr::Rbp => &mut self.rbp,
            Gpr::Rsp => &mut self.rsp,
            Gpr::R8 => &mut self.r8,
            Gpr::R9 => &mut self.r9,
            Gpr::R10 => &mut self.r10,
            Gpr::R11 => &mut self.r11,
            Gpr::R12 => &mut self.r12,
            Gpr::R13 => &mut self.r13,
            Gpr::R14 => &mut self.r14,
            Gpr::R15 => &mut self.r15,
            Gpr::Rip => &mut self.rip,
            Gpr::Eflags => &mut self.eflags,
        }
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
        self.get_mut(Gpr::from_encoding(n))
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

    /// The table against iced-x86's own register numbering (encoding) and
    /// the psABI's DWARF order, and each number used once.
    #[test]
    fn register_table_is_consistent() {
        use iced_x86::Register;
        let iced = [
            Register::RAX,
            Register::RCX,
            Register::RDX,
            Register::RBX,
            Register::RSP,
            Register::RBP,
            Register::RSI,
            Register::RDI,
        ];
        for (n, r) in iced.iter().enumerate() {
            let g = Gpr::from_encoding(n as u8);
            assert_eq!(format!("{r:?}").to_lowercase(), g.info().name);
        }
        for n in 8..16u8 {
            assert_eq!(Gpr::from_encoding(n).info().name, format!("r{n}"));
        }
        let dwarf = [
            "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
            "r12", "r13", "r14", "r15", "rip",
        ];
        for (n, name) in dwarf.iter().enumerate() {
            assert_eq!(Gpr::from_dwarf(n as u16).unwrap().info().name, *name);
        }
        let mut perf: Vec<u32> = GPRS.iter().map(|g| g.perf).collect();
        perf.sort();
        perf.dedup();
        assert_eq!(perf.len(), GPRS.len());
        assert_eq!(Gpr::from_name("pc"), Some(Gpr::Rip));
        assert_eq!(Gpr::from_name("fp"), Some(Gpr::Rbp));
        let mut r = Registers::default();
        for (k, g) in GPRS.iter().enumerate() {
            *r.get_mut(g.gpr) = k as u64 + 1;
        }
        for (k, g) in GPRS.iter().enumerate() {
            assert_eq!(r.get(g.gpr), k as u64 + 1, "{}", g.name);
        }
    }

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
