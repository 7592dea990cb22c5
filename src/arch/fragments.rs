//! The small fixed pieces of code pgdbg writes into a backend, assembled:
//! a detour's `jmp rel32` and the injected `syscall; int3`.

use super::asm::*;
use anyhow::{Result, anyhow};
use iced_x86::{Code, Encoder, Instruction};

/// Length of `jmp rel32`: what a detour's jump overwrites.
pub const JMP_REL32_LEN: usize = 5;

/// Length of `syscall; int3`: the bytes an injected system call borrows
/// when it runs in the group stop; its int3 traps with rip at their end.
pub const SYSCALL_INT3_LEN: usize = 3;

/// `jmp rel32` at `from` to `to`: always the 5-byte form (a detour
/// replaces exactly that much, `jumpover.rs` reads its rel32), refused
/// when `to` is out of a rel32's reach.
pub fn jmp_rel32(from: u64, to: u64) -> Result<[u8; JMP_REL32_LEN]> {
    let rel = to.wrapping_sub(from.wrapping_add(JMP_REL32_LEN as u64)) as i64;
    if i32::try_from(rel).is_err() {
        return Err(anyhow!("{to:#x} is out of jump range of {from:#x}"));
    }
    // iced's encoder for this one instruction, as given: its block
    // encoder (the assembler's) would shorten it, and takes a target
    // equal to an instruction's own address in the block (0, for the
    // assembler's unlabelled instructions) for that instruction
    let jmp = Instruction::with_branch(Code::Jmp_rel32_64, to).map_err(internal)?;
    let mut e = Encoder::new(64);
    e.encode(&jmp, from).map_err(internal)?;
    e.take_buffer()
        .try_into()
        .map_err(|b: Vec<u8>| anyhow!("internal: a jmp rel32 of {} bytes", b.len()))
}

/// `syscall; int3`: the system call, then a trap with rip at the end.
pub fn syscall_int3() -> Result<[u8; SYSCALL_INT3_LEN]> {
    let mut a = Asm::new();
    a.syscall().map_err(internal)?;
    a.int3().map_err(internal)?;
    a.assemble(0)
        .map_err(internal)?
        .bytes
        .try_into()
        .map_err(|b: Vec<u8>| anyhow!("internal: syscall; int3 of {} bytes", b.len()))
}

fn internal(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("internal: assembler: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    #[test]
    fn jmp_rel32_is_e9_and_its_distance_from_its_end() {
        assert_eq!(jmp_rel32(0x1000, 0x1005).unwrap(), [0xe9, 0, 0, 0, 0]);
        assert_eq!(
            jmp_rel32(0x1000, 0x1000).unwrap(),
            [0xe9, 0xfb, 0xff, 0xff, 0xff]
        );
        assert_eq!(jmp_rel32(0x1000, 0x1007).unwrap(), [0xe9, 2, 0, 0, 0]);
        let (from, to) = (0x7f12_3456_7000u64, 0x7f12_0000_1000u64);
        let j = jmp_rel32(from, to).unwrap();
        let i = Decoder::with_ip(64, &j, from, DecoderOptions::NONE).decode();
        assert_eq!(
            (i.mnemonic(), i.len(), i.near_branch_target()),
            (Mnemonic::Jmp, 5, to)
        );
    }

    #[test]
    fn jmp_rel32_refuses_past_its_reach_exactly_there() {
        let from = 0x7f00_0000_0000u64;
        let end = from + 5;
        let far = end + i32::MAX as u64;
        let near = end - (1u64 << 31);
        assert_eq!(jmp_rel32(from, far).unwrap()[1..], i32::MAX.to_le_bytes());
        assert_eq!(jmp_rel32(from, near).unwrap()[1..], i32::MIN.to_le_bytes());
        for to in [far + 1, near - 1, 0x1_0000_1000, 0] {
            let e = jmp_rel32(from, to).unwrap_err().to_string();
            assert_eq!(e, format!("{to:#x} is out of jump range of {from:#x}"));
        }
        assert!(jmp_rel32(0x1000, 0x1_0000_1000).is_err());
    }

    #[test]
    fn syscall_then_int3() {
        let c = syscall_int3().unwrap();
        assert_eq!(c, [0x0f, 0x05, 0xcc]);
        let m: Vec<Mnemonic> = Decoder::with_ip(64, &c, 0, DecoderOptions::NONE)
            .into_iter()
            .map(|i| i.mnemonic())
            .collect();
        assert_eq!(m, [Mnemonic::Syscall, Mnemonic::Int3]);
        assert_eq!(c[SYSCALL_INT3_LEN - 1], super::super::INT3);
    }
}
