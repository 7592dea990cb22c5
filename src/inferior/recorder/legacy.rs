//! The recorder's emitters as they were, bytes by hand (before issue 30),
//! kept beside the assembled ones for the tests that show both make the
//! same program.

use super::{CAPACITY, HEADER, RecordSpec, SLOT_FIXED, TextSpec, text_at};

/// The machine code of the recorder (before the displaced instructions).
pub(super) fn emit(data: u64, slot: u64, spec: &RecordSpec) -> Vec<u8> {
    let mut c: Vec<u8> = Vec::with_capacity(256);
    let d32 = |c: &mut Vec<u8>, v: u64| c.extend_from_slice(&(v as u32).to_le_bytes());
    c.extend_from_slice(&[0x50, 0x51, 0x52]); // push rax; push rcx; push rdx
    c.extend_from_slice(&[0x48, 0xba]); // movabs rdx, data
    c.extend_from_slice(&data.to_le_bytes());
    c.extend_from_slice(&[0x48, 0x8b, 0x02]); // mov rax, [rdx]        head
    c.extend_from_slice(&[0x48, 0x89, 0xc1]); // mov rcx, rax
    c.extend_from_slice(&[0x48, 0x2b, 0x4a, 0x08]); // sub rcx, [rdx+8]  - tail
    c.extend_from_slice(&[0x48, 0x81, 0xf9]); // cmp rcx, CAPACITY
    d32(&mut c, CAPACITY);
    c.extend_from_slice(&[0x0f, 0x83]); // jae full
    let jae_at = c.len();
    d32(&mut c, 0);
    c.extend_from_slice(&[0x48, 0x89, 0xc1]); // mov rcx, rax
    c.extend_from_slice(&[0x48, 0x81, 0xe1]); // and rcx, CAPACITY-1
    d32(&mut c, CAPACITY - 1);
    c.extend_from_slice(&[0x48, 0x69, 0xc9]); // imul rcx, rcx, slot
    d32(&mut c, slot);
    c.extend_from_slice(&[0x48, 0x8d, 0x4c, 0x0a, HEADER as u8]); // lea rcx, [rdx+rcx+HEADER]
    c.extend_from_slice(&[0x48, 0x89, 0x01]); // mov [rcx], rax        seq
    c.extend_from_slice(&[0x0f, 0x31]); // rdtsc
    c.extend_from_slice(&[0x48, 0xc1, 0xe2, 0x20]); // shl rdx, 32
    c.extend_from_slice(&[0x48, 0x09, 0xd0]); // or rax, rdx
    c.extend_from_slice(&[0x48, 0x89, 0x41, 0x08]); // mov [rcx+8], rax   tsc
    c.extend_from_slice(&[0x48, 0x89, 0x79, 0x10]); // mov [rcx+16], rdi
    c.extend_from_slice(&[0x48, 0x89, 0x71, 0x18]); // mov [rcx+24], rsi
    if let Some(g) = spec.global32 {
        c.extend_from_slice(&[0x48, 0xb8]); // movabs rax, g
        c.extend_from_slice(&g.to_le_bytes());
        c.extend_from_slice(&[0x8b, 0x00]); // mov eax, [rax]
        c.extend_from_slice(&[0x89, 0x41, 0x20]); // mov [rcx+32], eax
    }
    for (i, &(off, size)) in spec.fields.iter().enumerate() {
        let dst = SLOT_FIXED + 8 * i as u64;
        // load into (r/e)ax from [rdi+off], store to [rcx+dst]
        let (load, store): (&[u8], &[u8]) = match size {
            8 => (&[0x48, 0x8b, 0x87], &[0x48, 0x89, 0x81]),
            4 => (&[0x8b, 0x87], &[0x89, 0x81]),
            2 => (&[0x0f, 0xb7, 0x87], &[0x66, 0x89, 0x81]),
            _ => (&[0x0f, 0xb6, 0x87], &[0x88, 0x81]),
        };
        c.extend_from_slice(load);
        d32(&mut c, off);
        c.extend_from_slice(store);
        d32(&mut c, dst);
    }
    if let Some(t) = &spec.text {
        emit_text(&mut c, t, text_at(spec));
    }
    c.extend_from_slice(&[0x48, 0xba]); // movabs rdx, data
    c.extend_from_slice(&data.to_le_bytes());
    c.extend_from_slice(&[0x48, 0xff, 0x02]); // inc qword [rdx]       head++
    c.extend_from_slice(&[0xeb, 0x04]); // jmp done
    let full = c.len();
    c.extend_from_slice(&[0x48, 0xff, 0x42, 0x10]); // full: inc qword [rdx+16]
    c.extend_from_slice(&[0x5a, 0x59, 0x58]); // done: pop rdx; pop rcx; pop rax
    let rel = (full - (jae_at + 4)) as u32;
    c[jae_at..jae_at + 4].copy_from_slice(&rel.to_le_bytes());
    c
}

/// The copy of the string's first bytes into the slot (rcx) at `dst`:
/// byte by byte up to its NUL (copied too) or `max` bytes, so that nothing
/// past the string's end is read.  Uses rax, rdx (free here) and rsi
/// (saved); flags are dead at a function's entry.
pub(super) fn emit_text(c: &mut Vec<u8>, t: &TextSpec, dst: u64) {
    // `cmp esi, imm8` sign-extends: past 127 the bound would not hold
    assert!(matches!(t.max, 8..=120), "recorder text of {} bytes", t.max);
    let d32 = |c: &mut Vec<u8>, v: u64| c.extend_from_slice(&(v as u32).to_le_bytes());
    let mut skips = Vec::new(); // rel8 jumps to the end
    if let Some((off, value)) = t.guard {
        c.extend_from_slice(&[0x81, 0xbf]); // cmp dword [rdi+off], value
        d32(c, off);
        c.extend_from_slice(&value.to_le_bytes());
        c.extend_from_slice(&[0x75, 0]); // jne end
        skips.push(c.len() - 1);
    }
    for &(off, size) in &t.unless {
        c.extend_from_slice(match size {
            8 => &[0x48, 0x83, 0xbf], // cmp qword [rdi+off], 0
            4 => &[0x83, 0xbf],       // cmp dword [rdi+off], 0
            _ => &[0x80, 0xbf],       // cmp byte [rdi+off], 0
        });
        d32(c, off);
        c.push(0);
        c.extend_from_slice(&[0x75, 0]); // jne end
        skips.push(c.len() - 1);
    }
    c.extend_from_slice(&[0x48, 0x8b, 0x97]); // mov rdx, [rdi+pointer]
    d32(c, t.pointer);
    c.extend_from_slice(&[0x48, 0x85, 0xd2]); // test rdx, rdx
    c.extend_from_slice(&[0x74, 0]); // jz end
    skips.push(c.len() - 1);
    c.extend_from_slice(&[0x56]); // push rsi
    c.extend_from_slice(&[0x31, 0xf6]); // xor esi, esi
    let top = c.len();
    c.extend_from_slice(&[0x0f, 0xb6, 0x04, 0x32]); // movzx eax, byte [rdx+rsi]
    c.extend_from_slice(&[0x88, 0x84, 0x31]); // mov [rcx+rsi+dst], al
    d32(c, dst);
    c.extend_from_slice(&[0xff, 0xc6]); // inc esi
    c.extend_from_slice(&[0x84, 0xc0]); // test al, al
    c.extend_from_slice(&[0x74, 0x05]); // jz out (past cmp, jb)
    c.extend_from_slice(&[0x83, 0xfe, t.max as u8]); // cmp esi, max
    let back = top as i64 - (c.len() as i64 + 2);
    c.extend_from_slice(&[0x72, back as i8 as u8]); // jb top
    c.extend_from_slice(&[0x5e]); // out: pop rsi
    let end = c.len();
    for at in skips {
        let d = end - (at + 1);
        assert!(d <= 127, "recorder text: a skip of {d} bytes");
        c[at] = d as u8;
    }
}

/// The assembled emitters against these, for every shape of spec.
mod tests {
    use super::super::{emit as new_emit, emit_text as new_emit_text, slot_size};
    use super::*;
    use crate::arch::asm::{Asm, same_program};
    use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic};

    fn decode(code: &[u8], ip: u64) -> Vec<Instruction> {
        let list: Vec<Instruction> = Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
            .into_iter()
            .collect();
        assert!(list.iter().all(|i| !i.is_invalid()), "{code:02x?}");
        list
    }

    /// The text copies of every shape: no guard or one (an imm8 and an
    /// imm32 value), 0 to 4 `unless` fields of each size at offsets that
    /// take a disp8 or a disp32, every `max`, pointers near and far.
    fn texts() -> Vec<TextSpec> {
        let mut out = Vec::new();
        let guards = [
            None,
            Some((0, 0xbaad_f00d)),
            Some((0x10, 5)),
            Some((0x200, 0xffff_ff80)),
        ];
        let sizes = [1u64, 4, 8];
        for (gi, guard) in guards.into_iter().enumerate() {
            for n in 0..=4usize {
                for variant in 0..6usize {
                    let unless: Vec<(u64, u64)> = (0..n)
                        .map(|k| {
                            let off = if (k + variant) % 2 == 0 {
                                0x48 + 8 * k as u64
                            } else {
                                0x1000 + 8 * k as u64
                            };
                            (off, sizes[(k + variant) % 3])
                        })
                        .collect();
                    for max in (8..=120).step_by(8) {
                        let pointer = [0, 0x40, 0x400][(gi + n + variant + max as usize) % 3];
                        out.push(TextSpec {
                            pointer,
                            guard,
                            unless: unless.clone(),
                            max,
                        });
                    }
                }
            }
        }
        out
    }

    /// Fields lists: none, one, one of each size, 8, and 16 far ones (the
    /// jump to `full` then needs a rel32).
    fn field_lists() -> Vec<Vec<(u64, u64)>> {
        vec![
            vec![],
            vec![(0, 4)],
            vec![(0, 8), (0x40, 4), (0x88, 2), (0x90, 1)],
            vec![
                (0, 4),
                (0x40, 8),
                (0x88, 1),
                (0x90, 2),
                (0x98, 8),
                (0xa0, 4),
                (0x7f, 1),
                (0x80, 8),
            ],
            (0..16)
                .map(|k| (0x1000 + 8 * k, [1, 2, 4, 8][k as usize % 4]))
                .collect(),
            vec![(0x7fff_fff0, 8)],
        ]
    }

    /// A branch of `code` (at `ip`) that leaves `ip..ip+len` (`len`: what
    /// it may reach, its end included).
    fn branches_out(list: &[Instruction], ip: u64, len: u64) -> Vec<String> {
        list.iter()
            .filter(|i| i.near_branch_target() != 0)
            .filter(|i| !(ip..=ip + len).contains(&i.near_branch_target()))
            .map(|i| format!("{i}"))
            .collect()
    }

    #[test]
    fn assembled_recorder_is_the_hand_made_program() {
        let datas = [
            0x7f00_0000_0000u64,
            0x7fff_f7fe_1000,
            0x5555_5555_8000,
            0x1000_0000,
            0x10000,
        ];
        let texts = texts();
        let mut shapes = 0;
        // the new code's `jae full`: short and near both seen
        let mut jae_lens = std::collections::BTreeSet::new();
        for (fi, fields) in field_lists().into_iter().enumerate() {
            for global32 in [None, Some(0x1122_3344_5566u64), Some(0x60_1000)] {
                // no text, and a spread of the text shapes
                let text_shapes = std::iter::once(None)
                    .chain(texts.iter().skip(fi).step_by(37).cloned().map(Some));
                for text in text_shapes {
                    let spec = RecordSpec {
                        global32,
                        fields: fields.clone(),
                        struct_size: 0x8000_0000,
                        text,
                    };
                    let own = slot_size(&spec);
                    for slot in [own, own + 8, 40, 120, 128, 4096] {
                        for data in datas {
                            let old = emit(data, slot, &spec);
                            let new = new_emit(data, slot, &spec).expect("assembles");
                            check_recorder(&old, &new, data, slot, &spec);
                            let jae = decode(&new, 0)
                                .into_iter()
                                .find(|i| i.mnemonic() == Mnemonic::Jae);
                            jae_lens.insert(jae.expect("a jae").len());
                            shapes += 1;
                        }
                    }
                }
            }
        }
        assert!(shapes > 1000, "{shapes}");
        assert_eq!(jae_lens.into_iter().collect::<Vec<_>>(), [2, 6]);
    }

    fn check_recorder(old: &[u8], new: &[u8], data: u64, slot: u64, spec: &RecordSpec) {
        let say = |e: String| {
            format!("{e}\nspec {spec:?} slot {slot} data {data:#x}\nold {old:02x?}\nnew {new:02x?}")
        };
        // the same program, wherever each one runs
        for (a_ip, b_ip) in [
            (0x1000, 0x1000),
            (0x7f12_3456_7000, 0x5000),
            (0, 0x7fff_0000_0ff0),
        ] {
            if let Err(e) = same_program(old, a_ip, new, b_ip) {
                panic!("{}", say(e));
            }
        }
        // the same bytes at any address (nothing relative to rip leaves it)
        let mut a = Asm::new();
        a.db(new).unwrap();
        assert_eq!(a.assemble(0x7f00_1234_5678).unwrap().bytes, new);
        let (lo, ln) = (decode(old, 0x1000), decode(new, 0x1000));
        // it falls through at its end into the displaced instructions: no
        // branch leaves it, its last instructions are the pops
        assert!(
            branches_out(&ln, 0x1000, new.len() as u64 - 1).is_empty(),
            "{}",
            say(String::new())
        );
        assert!(branches_out(&lo, 0x1000, old.len() as u64 - 1).is_empty());
        assert_eq!(
            &new[new.len() - 3..],
            &[0x5a, 0x59, 0x58],
            "pop rdx; pop rcx; pop rax"
        );
        // what `remove_orphan` reads of it: the first bytes and the ring's
        // address, the first cmp's and imul's immediates, no jmp rel32
        assert_eq!(new[..13], old[..13]);
        assert_eq!(&new[..5], &[0x50, 0x51, 0x52, 0x48, 0xba]);
        assert_eq!(new[5..13], data.to_le_bytes());
        let first = |l: &[Instruction], m: Mnemonic| {
            l.iter()
                .find(|i| i.mnemonic() == m)
                .map(|i| i.immediate32() as u64)
        };
        assert_eq!(first(&ln, Mnemonic::Cmp), Some(CAPACITY));
        assert_eq!(first(&ln, Mnemonic::Imul), Some(slot as u32 as u64));
        assert_eq!(first(&lo, Mnemonic::Imul), first(&ln, Mnemonic::Imul));
        assert!(
            !ln.iter()
                .any(|i| i.mnemonic() == Mnemonic::Jmp && i.len() == 5)
        );
    }

    #[test]
    fn assembled_text_copy_is_the_hand_made_program() {
        let mut shapes = 0;
        for t in texts() {
            for dst in [40u64, 0x68, 0xc0, 40 + 8 * 16] {
                // a nop after each: where the skips land
                let mut old = Vec::new();
                emit_text(&mut old, &t, dst);
                old.push(0x90);
                let mut a = Asm::new();
                new_emit_text(&mut a, &t, dst).expect("emits");
                a.nop().unwrap();
                let code = a.assemble(0x4000).unwrap();
                let new = code.bytes;
                if let Err(e) = same_program(&old, 0x1000, &new, 0x4000) {
                    panic!("{e}\n{t:?} dst {dst}\nold {old:02x?}\nnew {new:02x?}");
                }
                // the skips' label is the nop's place; nothing leaves
                assert_eq!(
                    code.labels.iter().find(|l| l.0 == "text_end").map(|l| l.1),
                    Some(new.len() - 1)
                );
                let ln = decode(&new, 0x4000);
                assert!(branches_out(&ln, 0x4000, new.len() as u64 - 1).is_empty());
                shapes += 1;
            }
        }
        assert!(shapes > 1000, "{shapes}");
    }
}
