//! Where a kernel uprobe costs least.  At a hit the kernel either emulates
//! the probed instruction (a `push` of a register, a direct `jmp`, `jcc`
//! or `call`: one trap) or copies it to its `[uprobes]` page and
//! single-steps it there (a second trap, a debug exception: in a virtual
//! machine an exit to the hypervisor).  Measured on a 2-CPU KVM guest:
//! a counting uprobe on `standard_ExecutorStart` (`push %r15`) costs the
//! backend about 1 µs per call, one on `PortalDefineQuery` (`mov
//! %rsi,0x8(%rdi)`) about 18 µs.
//!
//! A probe that only counts calls (or reads registers nothing before it
//! writes) may as well sit at the first instruction of the function's
//! entry block that the kernel emulates: that instruction runs exactly
//! once per call, provided no branch of the function lands between the
//! entry and it.

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, OpAccess, OpKind,
    Register,
};

/// Whether the kernel's x86 uprobes emulate `ins` (no single step): the
/// subset of its emulated instructions this module relies on, without
/// prefixes (REX.B only for a push of r8-r15).
pub fn kernel_emulates(code: &[u8]) -> bool {
    match code {
        // push %rax..%rdi; push %r8..%r15
        [0x50..=0x57, ..] | [0x41, 0x50..=0x57, ..] => true,
        // jmp rel8/rel32, call rel32, jcc rel8
        [0xeb | 0xe9 | 0xe8 | 0x70..=0x7f, ..] => true,
        // jcc rel32
        [0x0f, 0x80..=0x8f, ..] => true,
        _ => false,
    }
}

/// The address for a uprobe standing for the entry of the function whose
/// code is `code` at `entry` (its whole body, from its first byte), with
/// `others` the function's other parts (a `.cold` part, which may jump
/// back into it).  Registers in `keep` must hold at the chosen point what
/// they held at entry (the probe reads them); the stack pointer too when
/// `keep_sp`.  `entry` itself when it is emulated already or no later
/// point qualifies.
pub fn cheap_point(
    code: &[u8],
    entry: u64,
    others: &[(u64, &[u8])],
    keep: &[Register],
    keep_sp: bool,
) -> u64 {
    if kernel_emulates(code) {
        return entry;
    }
    let mut dec = Decoder::with_ip(64, code, entry, DecoderOptions::NONE);
    let mut info = InstructionInfoFactory::new();
    let mut ins = Instruction::default();
    let mut chosen = None;
    // the straight-line start of the function: at most 32 instructions
    for _ in 0..32 {
        if !dec.can_decode() {
            return entry;
        }
        let off = (dec.ip() - entry) as usize;
        dec.decode_out(&mut ins);
        if ins.is_invalid() {
            return entry;
        }
        if off > 0 && kernel_emulates(&code[off..]) {
            chosen = Some(ins.ip());
            break;
        }
        if ins.flow_control() != FlowControl::Next {
            // a branch, return, trap or system call that is not emulated
            return entry;
        }
        let used = info.info(&ins);
        if keep_sp
            && used.used_memory().iter().any(|m| {
                m.base() == Register::RSP
                    && !matches!(
                        m.access(),
                        OpAccess::Read | OpAccess::CondRead | OpAccess::NoMemAccess
                    )
            })
        {
            // a store relative to rsp: the return address may be written
            return entry;
        }
        for r in used.used_registers() {
            let writes = !matches!(
                r.access(),
                OpAccess::Read | OpAccess::CondRead | OpAccess::None
            );
            if !writes {
                continue;
            }
            let full = r.register().full_register();
            if keep.contains(&full) || (keep_sp && full == Register::RSP) {
                return entry;
            }
        }
    }
    let Some(at) = chosen else {
        return entry;
    };
    // no branch of the function (or of its other parts) may land after the
    // entry and at or before the chosen point: it would run more than once
    // per call
    let lands_inside = |bytes: &[u8], ip: u64| {
        let mut dec = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
        let mut ins = Instruction::default();
        let mut recent: std::collections::VecDeque<Instruction> = Default::default();
        while dec.can_decode() {
            dec.decode_out(&mut ins);
            if ins.is_invalid() {
                // not all code: nothing can be said
                return true;
            }
            // a jump table's targets are not known: only the entry is sure
            // to run once per call.  A table dispatch indexes memory (`jmp
            // *T(,%rax,8)`, or `movslq (%rdx,%rax,4),%rax; add %rdx,%rax;
            // jmp *%rax` just before); an indirect jump without one is a
            // tail call (a hook), whose target is another function
            if ins.flow_control() == FlowControl::IndirectBranch {
                let indexed = |i: &Instruction| {
                    (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory)
                        && i.memory_index() != Register::None
                };
                if indexed(&ins) || recent.iter().any(indexed) {
                    return true;
                }
            }
            recent.push_back(ins);
            if recent.len() > 3 {
                recent.pop_front();
            }
            // a code address taken (a label's address, `&&label`)
            if ins.is_ip_rel_memory_operand() {
                let t = ins.ip_rel_memory_address();
                if t > entry && t <= at {
                    return true;
                }
            }
            match ins.flow_control() {
                FlowControl::UnconditionalBranch
                | FlowControl::ConditionalBranch
                | FlowControl::Call => {
                    let t = ins.near_branch_target();
                    if t > entry && t <= at {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    };
    if lands_inside(code, entry) || others.iter().any(|(ip, b)| lands_inside(b, *ip)) {
        return entry;
    }
    at
}

/// The register of DWARF's x86-64 number `n` (rax rdx rcx rbx rsi rdi
/// rbp rsp r8-r15), None for the others (vector registers).
pub fn dwarf_register(n: u16) -> Option<Register> {
    use Register::*;
    [
        RAX, RDX, RCX, RBX, RSI, RDI, RBP, RSP, R8, R9, R10, R11, R12, R13, R14, R15,
    ]
    .get(n as usize)
    .copied()
}

/// [`cheap_point`] for the runtime address `addr` of `function` in the
/// main binary (`bias` its load bias), its code taken from the file (not
/// from memory, where an int3 may sit): `addr` itself unless it is the
/// first byte of an ELF function symbol of that name (or of a clone of
/// it), e.g. an inlined copy or a shared library's function.
pub fn entry_point(
    di: &crate::debuginfo::DebugInfo,
    bias: u64,
    function: &str,
    addr: u64,
    keep: &[Register],
    keep_sp: bool,
) -> u64 {
    let Some(link) = addr.checked_sub(bias) else {
        return addr;
    };
    // an ELF function symbol starting here (its other parts are found by
    // name; a range known only from DWARF is not moved into)
    match di.symbol_at(link) {
        Some((sym, 0)) if sym.is_func && sym.size > 0 => {}
        _ => return addr,
    }
    let Some((name, start, end)) = di.code_range_at(link) else {
        return addr;
    };
    if start != link || !(name == function || crate::debuginfo::is_entry_clone_of(&name, function))
    {
        return addr;
    }
    let Some(code) = di.binary.bytes_at(start, end - start) else {
        return addr;
    };
    let cold = format!("{name}.cold");
    let others: Vec<(u64, &[u8])> = di
        .symbols
        .iter()
        .filter(|s| s.is_func && s.size > 0 && s.name.starts_with(&cold))
        .filter_map(|s| Some((s.addr, di.binary.bytes_at(s.addr, s.size)?)))
        .collect();
    let at = cheap_point(code, start, &others, keep, keep_sp);
    // a code address stored as data (a computed goto's table of labels:
    // a relative relocation whose value lands between the entry and the
    // chosen point) may be jumped to from anywhere
    if at != start {
        use object::{Object, ObjectSection, RelocationTarget};
        let taken = di
            .binary
            .file
            .dynamic_relocations()
            .into_iter()
            .flatten()
            .any(|(_, r)| {
                matches!(r.target(), RelocationTarget::Absolute)
                    && (r.addend() as u64) > start
                    && (r.addend() as u64) <= at
            })
            || di.binary.file.sections().any(|sec| {
                sec.relocations().any(|(_, r)| {
                    matches!(r.target(), RelocationTarget::Absolute)
                        && (r.addend() as u64) > start
                        && (r.addend() as u64) <= at
                })
            });
        if taken {
            return addr;
        }
    }
    at + bias
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulated_instructions() {
        assert!(kernel_emulates(&[0x41, 0x57])); // push %r15
        assert!(kernel_emulates(&[0x53])); // push %rbx
        assert!(kernel_emulates(&[0x74, 0x05])); // je
        assert!(kernel_emulates(&[0x0f, 0x84, 0, 0, 0, 0])); // je rel32
        assert!(kernel_emulates(&[0xe8, 0, 0, 0, 0])); // call
        assert!(!kernel_emulates(&[0x48, 0x89, 0x77, 0x08])); // mov %rsi,0x8(%rdi)
        assert!(!kernel_emulates(&[0xf3, 0x0f, 0x1e, 0xfa])); // endbr64
        assert!(!kernel_emulates(&[0x66, 0x50])); // push %ax
        assert!(!kernel_emulates(&[0xc3])); // ret
    }

    // ExecutorEnd of PostgreSQL 15 -O2:
    //   mov ExecutorEnd_hook(%rip),%rax; test %rax,%rax; je +16; jmp *%rax
    //   +16: jmp standard_ExecutorEnd
    const EXECUTOR_END: &[u8] = &[
        0x48, 0x8b, 0x05, 0xa9, 0xd3, 0x57, 0x00, // mov 0x57d3a9(%rip),%rax
        0x48, 0x85, 0xc0, // test %rax,%rax
        0x74, 0x04, // je +16
        0xff, 0xe0, // jmp *%rax
        0x66, 0x90, // xchg %ax,%ax
        0xe9, 0x00, 0x00, 0x00, 0x00, // +16: jmp
    ];

    #[test]
    fn moves_to_the_entry_blocks_branch() {
        // its tail call through the hook (jmp *%rax, no table indexed
        // before it) goes to another function
        let code = EXECUTOR_END.to_vec();
        let at = cheap_point(&code, 0x1000, &[], &[Register::RDI], true);
        assert_eq!(at, 0x1000 + 10);
        // a jump table's dispatch: movslq (%rdx,%rax,4),%rax; add %rdx,%rax;
        // jmp *%rax (its targets unknown): the entry stays
        let mut table = EXECUTOR_END[..12].to_vec();
        table.extend_from_slice(&[0x48, 0x63, 0x04, 0x82, 0x48, 0x01, 0xd0, 0xff, 0xe0]);
        assert_eq!(cheap_point(&table, 0x1000, &[], &[], false), 0x1000);
        // rax is written before it: a probe reading rax stays at the entry
        assert_eq!(
            cheap_point(&code, 0x1000, &[], &[Register::RAX], false),
            0x1000
        );
        // a label's address taken inside the entry block
        // (lea 0x0(%rip),%rax at 0 points to 7, the test: before the je)
        let mut code2 = code.clone();
        code2[0..7].copy_from_slice(&[0x48, 0x8d, 0x05, 0x00, 0x00, 0x00, 0x00]);
        assert_eq!(cheap_point(&code2, 0x1000, &[], &[], false), 0x1000);
    }

    #[test]
    fn a_store_to_the_stack_keeps_a_return_probe_at_the_entry() {
        // mov %rdi,0x8(%rsp); test %rdi,%rdi; je +2
        let code = [0x48, 0x89, 0x7c, 0x24, 0x08, 0x48, 0x85, 0xff, 0x74, 0x02];
        assert_eq!(cheap_point(&code, 0x7000, &[], &[], true), 0x7000);
        assert_eq!(cheap_point(&code, 0x7000, &[], &[], false), 0x7008);
        // sub $8,%rsp moves the stack pointer
        let code = [0x48, 0x83, 0xec, 0x08, 0x74, 0x02];
        assert_eq!(cheap_point(&code, 0x7000, &[], &[], true), 0x7000);
        assert_eq!(dwarf_register(5), Some(Register::RDI));
        assert_eq!(dwarf_register(17), None);
    }

    #[test]
    fn stays_at_an_emulated_entry_or_before_a_store() {
        // push %r15; mov %rdi,%rcx
        assert_eq!(
            cheap_point(&[0x41, 0x57, 0x48, 0x89, 0xf9], 0x2000, &[], &[], false),
            0x2000
        );
        // PortalDefineQuery: stores then ret, nothing emulated
        let pdq = [0x48, 0x89, 0x77, 0x08, 0x48, 0x89, 0x57, 0x38, 0xc3];
        assert_eq!(cheap_point(&pdq, 0x3000, &[], &[], false), 0x3000);
    }

    #[test]
    fn a_branch_back_into_the_entry_block_keeps_the_entry() {
        // 0: mov (%rdi),%rdi; 3: test %rdi,%rdi; 6: jne 0: a loop over the
        // entry itself runs the entry as often as the jne
        let code = [0x48, 0x8b, 0x3f, 0x48, 0x85, 0xff, 0x75, 0xf8];
        assert_eq!(cheap_point(&code, 0x4000, &[], &[], false), 0x4006);
        // ... but a probe reading rdi stays at the entry (the mov writes it)
        assert_eq!(
            cheap_point(&code, 0x4000, &[], &[Register::RDI], false),
            0x4000
        );
        // 0: mov; 3: test; 6: je 10; 8: jmp 3 ... a loop back to the test
        let code = [
            0x48, 0x8b, 0x07, 0x48, 0x85, 0xc0, 0x74, 0x02, 0xeb, 0xf9, 0xc3,
        ];
        assert_eq!(cheap_point(&code, 0x5000, &[], &[], false), 0x5000);
        // the same landing from a .cold part
        let code = [0x48, 0x8b, 0x07, 0x48, 0x85, 0xc0, 0x74, 0x02, 0xc3];
        let cold = [0xe9, 0x00, 0x00, 0x00, 0x00];
        // cold at 0x6100: jmp to 0x6105 + rel = 0x6006 (the je)
        let rel = (0x6006i64 - 0x6105i64) as i32;
        let mut c = cold;
        c[1..5].copy_from_slice(&rel.to_le_bytes());
        assert_eq!(cheap_point(&code, 0x6000, &[], &[], false), 0x6006);
        assert_eq!(
            cheap_point(&code, 0x6000, &[(0x6100, &c)], &[], false),
            0x6000
        );
    }
}
