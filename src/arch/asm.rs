//! Machine code for the pages pgdbg writes into a backend, made with
//! iced-x86's assembler (`CodeAssembler`) instead of bytes by hand.
//!
//! [`Asm`] adds what every emitter needs on top of it: labels by name
//! (several names may mark one place), and the assembled code with the
//! offset of each name.  The code is assembled for the address it will
//! run at: relative branches and RIP-relative operands depend on it.
//! Branches take their shortest form; a branch to an address outside the
//! code that a rel32 cannot reach becomes an indirect jump through a word
//! the assembler appends (never the case for the code pgdbg places within
//! reach, but correct if it were).
//!
//! iced's assembler marks a label's instruction with the label's number
//! (small integers) in place of an address until the code is assembled,
//! and every other instruction with 0: a branch to an absolute address
//! that small would go to the wrong instruction.  No code lives in the
//! first 64 KiB of a process (`vm.mmap_min_addr`), so [`Asm::assemble`]
//! refuses a branch to an address below [`LOWEST_CODE`] that is not a
//! label's.
//!
//! [`same_program`] compares two pieces of code as programs: the same
//! instructions with the same operands, branches to the same instruction
//! (by its place in the sequence, not its address), whatever encodings
//! were chosen.  Tests use it to show that code made another way does the
//! same thing.

use std::ops::{Deref, DerefMut};

pub use iced_x86::code_asm::*;
use iced_x86::{
    BlockEncoderOptions, Decoder, DecoderOptions, Formatter, Instruction, NasmFormatter, OpKind,
};

/// What went wrong assembling: iced's refusal of an instruction or a
/// label, or a branch to a low absolute address (the module's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsmError(pub String);

impl std::fmt::Display for AsmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "assembling pgdbg's code: {}", self.0)
    }
}

impl std::error::Error for AsmError {}

impl From<iced_x86::IcedError> for AsmError {
    fn from(e: iced_x86::IcedError) -> AsmError {
        AsmError(e.to_string())
    }
}

/// No code is mapped below this address (the kernel's default
/// `vm.mmap_min_addr`); see the module's text.
pub const LOWEST_CODE: u64 = 0x10000;

/// An assembler with named labels.
pub struct Asm {
    a: CodeAssembler,
    names: Vec<(&'static str, CodeLabel)>,
    /// the instruction index a label was last set at: a second name for
    /// the same place needs a zero-sized instruction to sit on
    last_set_at: Option<usize>,
}

/// Assembled code and where each named label is in it.
#[derive(Debug, Clone)]
pub struct Code {
    pub bytes: Vec<u8>,
    pub labels: Vec<(&'static str, usize)>,
}

impl Code {
    /// The offset of label `name` from the start of the code.
    pub fn at(&self, name: &str) -> Option<usize> {
        self.labels
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, o)| *o)
    }
}

impl Default for Asm {
    fn default() -> Self {
        Self::new()
    }
}

impl Asm {
    pub fn new() -> Asm {
        Asm {
            a: CodeAssembler::new(64).expect("64-bit mode exists"),
            names: Vec::new(),
            last_set_at: None,
        }
    }

    /// The label called `name`, made at its first use (a branch to it
    /// before it is set is fine).
    pub fn label(&mut self, name: &'static str) -> CodeLabel {
        if let Some((_, l)) = self.names.iter().find(|(n, _)| *n == name) {
            return *l;
        }
        let l = self.a.create_label();
        self.names.push((name, l));
        l
    }

    /// Sets label `name` at the next instruction.  A name can be set once.
    pub fn set(&mut self, name: &'static str) -> Result<(), AsmError> {
        let here = self.a.instructions().len();
        if self.last_set_at == Some(here) {
            // another name for this place: a zero-sized instruction
            // carries the first
            self.a.zero_bytes()?;
        }
        let mut l = self.label(name);
        self.a.set_label(&mut l)?;
        // set_label filled in the copy: keep it
        for (n, k) in self.names.iter_mut() {
            if *n == name {
                *k = l;
            }
        }
        self.last_set_at = Some(self.a.instructions().len());
        Ok(())
    }

    /// The code for address `ip`, and where its labels are.
    pub fn assemble(mut self, ip: u64) -> Result<Code, AsmError> {
        // labels' instructions carry their numbers until assembled
        let labelled: Vec<u64> = self
            .a
            .instructions()
            .iter()
            .map(|i| i.ip())
            .filter(|&n| n != 0)
            .collect();
        for i in self.a.instructions() {
            let t = i.near_branch_target();
            if is_branch(i) && t < LOWEST_CODE && !labelled.contains(&t) {
                return Err(AsmError(format!(
                    "a branch to {t:#x}, an absolute address below 64 KiB (where no code is)"
                )));
            }
        }
        let names = std::mem::take(&mut self.names);
        let r = self
            .a
            .assemble_options(ip, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)?;
        let mut labels = Vec::with_capacity(names.len());
        for (n, l) in &names {
            labels.push((*n, (r.label_ip(l)? - ip) as usize));
        }
        Ok(Code {
            bytes: r.inner.code_buffer,
            labels,
        })
    }
}

impl Deref for Asm {
    type Target = CodeAssembler;
    fn deref(&self) -> &CodeAssembler {
        &self.a
    }
}

impl DerefMut for Asm {
    fn deref_mut(&mut self) -> &mut CodeAssembler {
        &mut self.a
    }
}

/// Where `addr` is in a decoded program: an instruction's index and the
/// distance into it, or outside the program (its address).
fn place(list: &[Instruction], start: u64, addr: u64) -> Result<(usize, u64), u64> {
    let end = list.last().map(|i| i.next_ip()).unwrap_or(start);
    if addr < start || addr >= end {
        return Err(addr);
    }
    let k = list.partition_point(|i| i.next_ip() <= addr);
    Ok((k, addr - list[k].ip()))
}

fn decode(code: &[u8], ip: u64, most: usize) -> Vec<Instruction> {
    Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .into_iter()
        .take(most)
        .collect()
}

fn is_branch(i: &Instruction) -> bool {
    (0..i.op_count()).any(|o| {
        matches!(
            i.op_kind(o),
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
        )
    })
}

/// The operands of `x` and `y` the same but for where a branch or a
/// RIP-relative operand goes (compared by the caller): registers, memory
/// base, index, scale, size and (when not RIP-relative) displacement,
/// immediates at their operand's size, prefixes.
fn same_operands(x: &Instruction, y: &Instruction) -> Result<(), &'static str> {
    if x.mnemonic() != y.mnemonic() || x.op_count() != y.op_count() {
        return Err("another operation");
    }
    // a branch's form decides its operand size (rel16 on some CPUs) and
    // a loop's counter (address size): the same near form
    if is_branch(x) && x.code().as_near_branch() != y.code().as_near_branch() {
        return Err("another form of branch");
    }
    if x.has_lock_prefix() != y.has_lock_prefix()
        || x.has_rep_prefix() != y.has_rep_prefix()
        || x.has_repne_prefix() != y.has_repne_prefix()
        || x.segment_prefix() != y.segment_prefix()
    {
        return Err("other prefixes");
    }
    for o in 0..x.op_count() {
        let (kx, ky) = (x.op_kind(o), y.op_kind(o));
        let immediate = |k: OpKind| {
            matches!(
                k,
                OpKind::Immediate8
                    | OpKind::Immediate16
                    | OpKind::Immediate32
                    | OpKind::Immediate64
                    | OpKind::Immediate8to16
                    | OpKind::Immediate8to32
                    | OpKind::Immediate8to64
                    | OpKind::Immediate32to64
            )
        };
        if immediate(kx) && immediate(ky) {
            // the value the instruction works with, at the size it works
            // at: its memory operand's, else its first register's, else 64
            let memory = (0..x.op_count()).any(|p| x.op_kind(p) == OpKind::Memory);
            let bytes = if memory {
                x.memory_size().size()
            } else {
                x.op_register(0).size()
            };
            let mask = match bytes {
                1 | 2 | 4 => (1u64 << (bytes * 8)) - 1,
                _ => u64::MAX,
            };
            if x.immediate(o) & mask != y.immediate(o) & mask {
                return Err("another immediate");
            }
            continue;
        }
        if kx != ky {
            return Err("another kind of operand");
        }
        let memory_differs = || {
            x.memory_base() != y.memory_base()
                || x.memory_index() != y.memory_index()
                || x.memory_index_scale() != y.memory_index_scale()
                || x.memory_size() != y.memory_size()
                || (!x.is_ip_rel_memory_operand()
                    && x.memory_displacement64() != y.memory_displacement64())
        };
        match kx {
            OpKind::Register if x.op_register(o) != y.op_register(o) => {
                return Err("another register");
            }
            OpKind::Memory if memory_differs() => {
                return Err("another memory operand");
            }
            _ => {}
        }
    }
    Ok(())
}

/// Compare decoded programs `da` (from `a_ip`) and `db` (from `b_ip`)
/// instruction by instruction; targets are placed within `ta` and `tb`
/// (the whole decoded programs).
fn compare(da: &[Instruction], a_ip: u64, db: &[Instruction], b_ip: u64) -> Result<(), String> {
    let mut fmt = NasmFormatter::new();
    let text = |f: &mut NasmFormatter, i: &Instruction| {
        let mut s = String::new();
        f.format(i, &mut s);
        s
    };
    for (k, (x, y)) in da.iter().zip(db).enumerate() {
        let what = |s: &str| {
            format!(
                "instruction {k} (at +{:#x} and +{:#x}): {s}",
                x.ip() - a_ip,
                y.ip() - b_ip
            )
        };
        if x.is_invalid() || y.is_invalid() {
            return Err(what("not an instruction"));
        }
        if let Err(e) = same_operands(x, y) {
            return Err(what(&format!(
                "{} against {}: {e}",
                text(&mut fmt, x),
                text(&mut fmt, y)
            )));
        }
        let branch = is_branch(x);
        if branch || x.is_ip_rel_memory_operand() || y.is_ip_rel_memory_operand() {
            if x.is_ip_rel_memory_operand() != y.is_ip_rel_memory_operand() {
                return Err(what("RIP-relative in one only"));
            }
            let (ta, tb) = if branch {
                (x.near_branch_target(), y.near_branch_target())
            } else {
                (x.ip_rel_memory_address(), y.ip_rel_memory_address())
            };
            let (pa, pb) = (place(da, a_ip, ta), place(db, b_ip, tb));
            if pa != pb {
                return Err(what(&format!(
                    "{} goes to {pa:?}, {} to {pb:?}",
                    text(&mut fmt, x),
                    text(&mut fmt, y)
                )));
            }
            continue;
        }
        let (tx, ty) = (text(&mut fmt, x), text(&mut fmt, y));
        if tx != ty {
            return Err(what(&format!("{tx} against {ty}")));
        }
    }
    if da.len() != db.len() {
        return Err(format!("{} instructions against {}", da.len(), db.len()));
    }
    Ok(())
}

/// Whether `a` (at address `a_ip`) and `b` (at `b_ip`) are the same
/// program: instruction for instruction the same operation on the same
/// operands, every branch and RIP-relative operand to the same place (an
/// instruction inside the program by its index, or the same address
/// outside it).  The error names the first difference.
pub fn same_program(a: &[u8], a_ip: u64, b: &[u8], b_ip: u64) -> Result<(), String> {
    compare(
        &decode(a, a_ip, usize::MAX),
        a_ip,
        &decode(b, b_ip, usize::MAX),
        b_ip,
    )
}

/// Whether memory `mem` (read at `mem_ip`) begins with the same program
/// as `code` (assembled for `code_ip`), as [`same_program`] compares them:
/// as many instructions as `code` has, whatever their encodings.  Code
/// another version of pgdbg wrote is recognised so.
pub fn begins_with_program(mem: &[u8], mem_ip: u64, code: &[u8], code_ip: u64) -> bool {
    let dc = decode(code, code_ip, usize::MAX);
    let dm = decode(mem, mem_ip, dc.len());
    compare(&dm, mem_ip, &dc, code_ip).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_by_name_two_names_at_one_place_and_forward_branches() {
        let mut a = Asm::new();
        let done = a.label("done");
        a.cmp(eax, 5).unwrap();
        a.je(done).unwrap();
        a.set("loop").unwrap();
        a.set("again").unwrap();
        a.dec(ecx).unwrap();
        let lp = a.label("loop");
        a.jnz(lp).unwrap();
        a.set("done").unwrap();
        a.ret().unwrap();
        let c = a.assemble(0x1000).unwrap();
        // cmp eax,imm32 (5 bytes), je short (2), dec ecx (2), jnz short (2), ret
        assert_eq!(c.bytes.len(), 5 + 2 + 2 + 2 + 1);
        assert_eq!(c.at("loop"), Some(7));
        assert_eq!(c.at("again"), Some(7));
        assert_eq!(c.at("done"), Some(11));
        assert_eq!(c.bytes[11], 0xc3);
        // the jnz goes back to the dec
        assert_eq!(&c.bytes[9..11], &[0x75, 0xfc]);
    }

    #[test]
    fn a_branch_to_a_low_absolute_address_is_refused() {
        let mut a = Asm::new();
        a.set("top").unwrap();
        a.nop().unwrap();
        a.jmp(0u64).unwrap();
        assert!(a.assemble(0x7f00_0000_0000).is_err());
        let mut a = Asm::new();
        let top = a.label("top");
        a.set("top").unwrap();
        a.nop().unwrap();
        a.jmp(top).unwrap();
        a.call(0x7f00_0000_1000u64).unwrap();
        let c = a.assemble(0x7f00_0000_0000).unwrap();
        // jmp short back to the nop; call rel32 to the address
        assert_eq!(&c.bytes[..3], &[0x90, 0xeb, 0xfd]);
        assert_eq!(c.bytes[3], 0xe8);
    }

    #[test]
    fn same_program_sees_through_encodings_and_finds_differences() {
        // cmp eax, 5 as imm8 and as the eax/imm32 form; a near and a
        // short je to the ret
        let a = [0x83, 0xf8, 0x05, 0x0f, 0x84, 0x00, 0x00, 0x00, 0x00, 0xc3];
        let b = [0x3d, 0x05, 0x00, 0x00, 0x00, 0x74, 0x00, 0xc3];
        assert_eq!(same_program(&a, 0x1000, &b, 0x5000), Ok(()));
        // a branch to another instruction
        let c = [0x3d, 0x05, 0x00, 0x00, 0x00, 0x74, 0xf9, 0xc3];
        assert!(same_program(&a, 0x1000, &c, 0x5000).is_err());
        // another operand
        let d = [0x3d, 0x06, 0x00, 0x00, 0x00, 0x74, 0x00, 0xc3];
        assert!(same_program(&a, 0x1000, &d, 0x5000).is_err());
        // one instruction more
        assert!(same_program(&a, 0x1000, &b[..7], 0x5000).is_err());
        // a jump out of the code: the same address
        let e = [0xe9, 0xfb, 0x0f, 0x00, 0x00]; // jmp 0x2000 from 0x1000
        let f = [0xe9, 0xfb, 0xef, 0xff, 0xff]; // jmp 0x2000 from 0x3000
        assert_eq!(same_program(&e, 0x1000, &f, 0x3000), Ok(()));
        assert!(same_program(&e, 0x1000, &f, 0x3001).is_err());
        // RIP-relative: the same place, other operands
        let g = [0x48, 0x89, 0x05, 0x00, 0x00, 0x00, 0x00, 0xc3]; // mov [rip+0],rax
        let h = [0x89, 0x05, 0x00, 0x00, 0x00, 0x00, 0xc3]; // mov [rip+0],eax
        assert!(same_program(&g, 0x1000, &g, 0x9000).is_ok());
        assert!(same_program(&g, 0x1000, &h, 0x1000).is_err());
        let i = [0xc7, 0x05, 0, 0, 0, 0, 1, 0, 0, 0, 0xc3]; // mov dword [rip+0],1
        let j = [0xc7, 0x05, 0, 0, 0, 0, 2, 0, 0, 0, 0xc3]; // ... ,2
        assert!(same_program(&i, 0x1000, &j, 0x1000).is_err());
        // an immediate by its value at the operand's size: add rax,-1 as
        // imm8 and imm32
        let k = [0x48, 0x83, 0xc0, 0xff];
        let l = [0x48, 0x05, 0xff, 0xff, 0xff, 0xff];
        assert!(same_program(&k, 0x1000, &l, 0x1000).is_ok());
        let m = [0x48, 0x05, 0xff, 0xff, 0xff, 0x7f];
        assert!(same_program(&k, 0x1000, &m, 0x1000).is_err());
        // bytes that are no instruction are never equal
        assert!(same_program(&[0x06], 0x1000, &[0x07], 0x1000).is_err());
        assert!(same_program(&[0x06], 0x1000, &[0x06], 0x1000).is_err());
        // memory that begins with the program, whatever follows
        let mut mem = b.to_vec();
        mem.extend([0xf4, 0xf4, 0x00]);
        assert!(begins_with_program(&mem, 0x7000, &a, 0x1000));
        assert!(!begins_with_program(&c, 0x7000, &a, 0x1000));
        assert!(!begins_with_program(&b[..5], 0x7000, &a, 0x1000));
    }
}
