//! Machine code as gdb's `disassemble` prints it: AT&T syntax in the
//! shape of GNU objdump (the mnemonic padded to 6 columns, hexadecimal
//! displacements and immediates), branch targets and RIP-relative operands
//! named `0x... <symbol+offset>`, one line per instruction:
//! `   0x000055d0c0a0b0c0 <+4>:\tmov    %rdi,%rbx`.

use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, Instruction, OpKind};

/// `START,END` or `START,+LEN` split: the start, the end or length
/// expression, and whether it is a length.  None: one location.
pub fn split_range(spec: &str) -> Option<(&str, &str, bool)> {
    let (a, b) = spec.split_once(',')?;
    let b = b.trim();
    Some(match b.strip_prefix('+') {
        Some(len) => (a.trim(), len.trim(), true),
        None => (a.trim(), b, false),
    })
}

/// One decoded instruction: its address, its bytes and its text.
#[derive(Clone, Debug, PartialEq)]
pub struct Insn {
    pub addr: u64,
    pub bytes: Vec<u8>,
    pub text: String,
}

/// gdb's `<symbol+offset>` of an address: the name and the signed offset
/// from it (None: no symbol covers the address).
pub type Symbolic<'a> = &'a dyn Fn(u64) -> Option<(String, i64)>;

/// `name+off` as gdb writes it after an address (`name` alone at 0).
pub fn symbolic_text(name: &str, off: i64) -> String {
    match off {
        0 => name.to_string(),
        o if o > 0 => format!("{name}+{o}"),
        o => format!("{name}{o}"),
    }
}

/// `0x55d0c0a0 <name+off>` (the address alone when no symbol covers it).
fn address_text(addr: u64, sym: Symbolic) -> String {
    match sym(addr) {
        Some((n, o)) => format!("{addr:#x} <{}>", symbolic_text(&n, o)),
        None => format!("{addr:#x}"),
    }
}

fn formatter() -> GasFormatter {
    let mut f = GasFormatter::new();
    let o = f.options_mut();
    o.set_first_operand_char_index(7);
    o.set_small_hex_numbers_in_decimal(false);
    o.set_uppercase_hex(false);
    o.set_branch_leading_zeros(false);
    o.set_displacement_leading_zeros(false);
    o.set_leading_zeros(false);
    o.set_rip_relative_addresses(true);
    o.set_show_branch_size(false);
    o.set_gas_show_mnemonic_size_suffix(false);
    o.set_show_zero_displacements(true);
    o.set_show_useless_prefixes(true);
    f
}

/// The register's AT&T name (`%rax`).
fn reg_name(r: iced_x86::Register) -> String {
    format!("%{r:?}").to_lowercase()
}

/// Decode `code`, the bytes at `addr`, instruction by instruction; bytes
/// that are no instruction are shown as gdb does, `(bad)`, one at a time.
/// The last instruction may be cut by the end of `code`: it is `(bad)`.
pub fn decode(addr: u64, code: &[u8], sym: Symbolic) -> Vec<Insn> {
    let mut out = Vec::new();
    let mut fmt = formatter();
    // string instructions name their segments (`%es:(%rdi)`), as objdump
    let mut strings = formatter();
    strings.options_mut().set_always_show_segment_register(true);
    let mut dec = Decoder::with_ip(64, code, addr, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    while dec.can_decode() {
        let pos = dec.position();
        dec.decode_out(&mut ins);
        if ins.is_invalid() {
            out.push(Insn {
                addr: addr + pos as u64,
                bytes: vec![code[pos]],
                text: "(bad)".into(),
            });
            dec.set_position(pos + 1).expect("inside the buffer");
            dec.set_ip(addr + pos as u64 + 1);
            continue;
        }
        let mut text = String::new();
        if ins.is_string_instruction() {
            strings.format(&ins, &mut text);
        } else {
            fmt.format(&ins, &mut text);
        }
        out.push(Insn {
            addr: ins.ip(),
            bytes: code[pos..pos + ins.len()].to_vec(),
            text: objdump_text(&ins, text, sym),
        });
    }
    out
}

/// iced's AT&T text where objdump writes it otherwise: no size suffix on
/// a push, call or jump through memory, no `$0x1` of a shift by one, the
/// scale 1 of an index written, a three-operand `imul` in full.
fn objdump_spelling(ins: &Instruction, text: String) -> String {
    let mut text = text;
    for (q, plain) in [
        ("pushq ", "push  "),
        ("popq ", "pop  "),
        ("callq ", "call  "),
        ("jmpq ", "jmp  "),
    ] {
        if let Some(rest) = text.strip_prefix(q) {
            text = format!("{plain}{rest}");
        }
    }
    if format!("{:?}", ins.code()).ends_with("_1") {
        text = text.replacen("$0x1,", "", 1);
    }
    let index = ins.memory_index();
    if index != iced_x86::Register::None && ins.memory_index_scale() == 1 {
        let r = reg_name(index);
        text = text.replacen(&format!(",{r})"), &format!(",{r},1)"), 1);
    }
    // a nop's segment override is a prefix for objdump: `cs nopw 0x0(...)`
    if ins.mnemonic() == iced_x86::Mnemonic::Nop
        && let Some(i) = text.find("%cs:")
        && let Some(m) = text.find("nop")
    {
        let ops = text[i + 4..].to_string();
        let head = format!(
            "{}cs {}",
            &text[..m],
            text[m..].split_whitespace().next().unwrap_or("nop")
        );
        text = format!("{head:<6} {ops}");
    }
    if ins.mnemonic() == iced_x86::Mnemonic::Imul
        && ins.op_count() == 3
        && text.matches(',').count() == 1
    {
        text.push_str(&format!(",{}", reg_name(ins.op1_register())));
    }
    text
}

/// iced's AT&T text with what objdump adds: a branch target's symbol, a
/// RIP-relative operand's address and symbol in a comment.
fn objdump_text(ins: &Instruction, text: String, sym: Symbolic) -> String {
    let mut text = objdump_spelling(ins, text);
    // 66 90: objdump's name for the two-byte nop
    if text == "nop" && ins.len() == 2 && ins.code() == iced_x86::Code::Nopw {
        return "xchg   %ax,%ax".into();
    }
    let branch = (0..ins.op_count()).any(|i| {
        matches!(
            ins.op_kind(i),
            OpKind::NearBranch64 | OpKind::NearBranch32 | OpKind::NearBranch16
        )
    });
    if branch {
        let target = ins.near_branch_target();
        if let Some((n, o)) = sym(target) {
            text.push_str(&format!(" <{}>", symbolic_text(&n, o)));
        }
    } else if ins.is_ip_rel_memory_operand() {
        text.push_str(&format!(
            "        # {}",
            address_text(ins.ip_rel_memory_address(), sym)
        ));
    }
    text
}

/// One line of the dump: the marker (`=> ` at the current pc), the
/// address padded to 16 digits, `<label>` (gdb's `<+off>` or
/// `<name+off>`, none when empty), the raw bytes with `/r`, the text.
pub fn line(ins: &Insn, current: bool, label: Option<&str>, raw: bool) -> String {
    let mut s = format!("{}0x{:016x}", if current { "=> " } else { "   " }, ins.addr);
    if let Some(l) = label {
        s.push_str(&format!(" <{l}>"));
    }
    s.push_str(":\t");
    if raw {
        let b: Vec<String> = ins.bytes.iter().map(|b| format!("{b:02x}")).collect();
        // padded to 7 bytes' width, as gdb aligns the instructions
        s.push_str(&format!("{:<19}\t", b.join(" ")));
    }
    s.push_str(&ins.text);
    s
}

/// gdb's label inside a function's dump: the offset from its entry,
/// signed (`+4`, `-246` in a part placed before the entry).
pub fn offset_label(off: i64) -> String {
    if off >= 0 {
        format!("+{off}")
    } else {
        off.to_string()
    }
}

/// gdb's label in a dump of an address range: `name+off`, `+0` included.
pub fn range_label(name: &str, off: i64) -> String {
    format!("{name}{}", offset_label(off))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(addr: u64, code: &[u8]) -> Vec<String> {
        let sym = |a: u64| -> Option<(String, i64)> {
            (0x1000..0x1100)
                .contains(&a)
                .then(|| ("f".to_string(), a as i64 - 0x1000))
        };
        decode(addr, code, &sym)
            .into_iter()
            .map(|i| i.text)
            .collect()
    }

    /// The shapes objdump (and so gdb) prints, instruction by instruction.
    #[test]
    fn att_syntax_as_objdump_prints_it() {
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, // endbr64
            0x41, 0x57, // push %r15
            0x48, 0x8b, 0x47, 0x08, // mov 0x8(%rdi),%rax
            0x48, 0x83, 0xe4, 0xf0, // and $0xfffffffffffffff0,%rsp
            0x0f, 0x1f, 0x44, 0x00, 0x00, // nopl 0x0(%rax,%rax,1)
            0x66, 0x90, // xchg %ax,%ax
            0xc3, // ret
            0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, // mov 0x10(%rip),%rax
            0xe8, 0xd0, 0xff, 0xff, 0xff, // call
            0x74, 0xe2, // je
            0xc7, 0x47, 0x04, 0x01, 0x00, 0x00, 0x00, // movl $0x1,0x4(%rdi)
        ];
        assert_eq!(
            texts(0x1000, &code),
            vec![
                "endbr64",
                "push   %r15",
                "mov    0x8(%rdi),%rax",
                "and    $0xfffffffffffffff0,%rsp",
                "nopl   0x0(%rax,%rax,1)",
                "xchg   %ax,%ax",
                "ret",
                "mov    0x10(%rip),%rax        # 0x102d <f+45>",
                "call   0xff2",
                "je     0x1006 <f+6>",
                "movl   $0x1,0x4(%rdi)",
            ]
        );
    }

    #[test]
    fn bytes_that_are_no_instruction_are_bad() {
        let t = texts(0x2000, &[0x06, 0x90]);
        assert_eq!(t, vec!["(bad)", "nop"]);
    }

    #[test]
    fn lines_and_labels_as_gdb_prints_them() {
        let i = Insn {
            addr: 0x55d0c0a0,
            bytes: vec![0x41, 0x57],
            text: "push   %r15".into(),
        };
        assert_eq!(
            line(&i, false, Some(&offset_label(2)), false),
            "   0x0000000055d0c0a0 <+2>:\tpush   %r15"
        );
        assert_eq!(
            line(&i, true, Some(&offset_label(-246)), true),
            "=> 0x0000000055d0c0a0 <-246>:\t41 57              \tpush   %r15"
        );
        assert_eq!(
            line(&i, false, Some(&range_label("f", 0)), false),
            "   0x0000000055d0c0a0 <f+0>:\tpush   %r15"
        );
        assert_eq!(
            line(&i, false, None, false),
            "   0x0000000055d0c0a0:\tpush   %r15"
        );
        assert_eq!(symbolic_text("f", -3), "f-3");
    }
}
