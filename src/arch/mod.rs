//! The machine pgdbg runs on and debugs: x86-64, said in one room.
//!
//! Everything that depends on the instruction set lives here or is
//! reached from here: the assembler that makes the machine code pgdbg
//! writes into a backend (`asm.rs`: iced-x86's, with named labels, and a
//! comparison of two programs instruction by instruction), the small
//! fixed pieces of it (`fragments.rs`: a detour's `jmp rel32`, the
//! injected `syscall; int3`), the general registers with their DWARF, perf
//! and encoding numbers (`regs.rs`), the debug registers (`debugregs.rs`),
//! and what the instruction set and the ABI fix for stops, rewinds and
//! calls (`abi.rs`: the int3 byte and length, the call convention).
//! Another architecture is a new room beside this one; until then pgdbg
//! does not build for it.  This room imports nothing of pgdbg's.

#[cfg(not(target_arch = "x86_64"))]
compile_error!(
    "pgdbg runs on x86-64 only: the traced process's registers, debug registers, \
     the int3 rewind, the call ABI and the machine code it writes are x86-64's (src/arch/)"
);

pub mod abi;
pub mod asm;
pub mod debugregs;
pub mod fragments;
pub mod regs;

/// The `int3` instruction's one byte: what a breakpoint writes.
pub use abi::INT3;

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    #[test]
    fn int3_is_the_one_byte_int3() {
        let i = Decoder::with_ip(64, &[super::INT3], 0, DecoderOptions::NONE).decode();
        assert_eq!((i.mnemonic(), i.len()), (Mnemonic::Int3, 1));
        let mut a = super::asm::Asm::new();
        a.int3().unwrap();
        assert_eq!(a.assemble(0).unwrap().bytes, [super::INT3]);
    }
}
