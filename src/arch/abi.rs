//! What the x86-64 instruction set and the System V ABI fix for the code
//! pgdbg stops, rewinds and calls: the breakpoint instruction and where
//! `rip` is after it traps, the system call instruction's length (a
//! restarted call goes back over it), and the call convention.

use super::regs::Gpr;

/// The breakpoint instruction (`int3`).
pub const INT3: u8 = 0xcc;
/// Its length: after it traps, `rip` is this far past its address.
pub const INT3_LEN: u64 = 1;
/// The `syscall` instruction's length (0f 05).
pub const SYSCALL_LEN: u64 = 2;

/// Where the int3 that trapped is, from `rip` after the trap.
pub fn int3_address(rip: u64) -> u64 {
    rip.wrapping_sub(INT3_LEN)
}

/// Integer and pointer arguments, in order (psABI 3.2.3).
pub const INT_ARGS: [Gpr; 6] = [Gpr::Rdi, Gpr::Rsi, Gpr::Rdx, Gpr::Rcx, Gpr::R8, Gpr::R9];
/// `double` arguments go in xmm0-7; `al` says how many for a variadic
/// callee.
pub const FLOAT_ARGS: usize = 8;
/// Bytes below `rsp` a function may use without moving it.
pub const RED_ZONE: u64 = 128;
/// `rsp` is a multiple of this before a `call` (so `rsp % 16 == 8` at the
/// callee's entry).
pub const STACK_ALIGN: u64 = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    #[test]
    fn instruction_lengths_as_the_decoder_sees_them() {
        let i = Decoder::new(64, &[INT3], DecoderOptions::NONE).decode();
        assert_eq!((i.mnemonic(), i.len() as u64), (Mnemonic::Int3, INT3_LEN));
        let s = Decoder::new(64, &[0x0f, 0x05], DecoderOptions::NONE).decode();
        assert_eq!(
            (s.mnemonic(), s.len() as u64),
            (Mnemonic::Syscall, SYSCALL_LEN)
        );
        assert_eq!(int3_address(0x1001), 0x1000);
    }
}
