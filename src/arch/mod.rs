//! The machine pgdbg runs on and debugs: x86-64, said in one room.
//!
//! Everything that depends on the instruction set lives here or is
//! reached from here: the assembler that makes the machine code pgdbg
//! writes into a backend (`asm.rs`: iced-x86's, with named labels, and a
//! comparison of two programs instruction by instruction), the general
//! registers with their DWARF, perf and encoding numbers (`regs.rs`), and
//! the debug registers (`debugregs.rs`).  Another
//! architecture is a new room beside this one; until then pgdbg does not
//! build for it.  This room imports nothing of pgdbg's.

#[cfg(not(target_arch = "x86_64"))]
compile_error!(
    "pgdbg runs on x86-64 only: the traced process's registers, debug registers, \
     the int3 rewind, the call ABI and the machine code it writes are x86-64's (src/arch/)"
);

pub mod abi;
pub mod asm;
pub mod debugregs;
pub mod regs;
