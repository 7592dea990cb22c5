//! Stores of one 32-bit word reached through a pointer global, found in the
//! binary's x86-64 code alone (no DWARF: a stripped binary works the same):
//! a RIP-relative load of the pointer into a register (`mov REG,[rip+P]`),
//! then, a few instructions later in the same code, `mov dword
//! [REG+OFFSET],imm32/reg32`.  Every other reference to the pointer is
//! classified too, so a caller can tell a complete list from a guess.
//!
//! The code is decoded linearly, section by section (gcc puts no data in
//! `.text`); the branch targets are every direct branch's and call's target
//! plus the entries of jump tables found from the code's references to
//! `.rodata` (32-bit entries relative to the table, as PIC code uses, or
//! 64-bit absolute ones).

use super::elf::ElfImage;
use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    OpKind, Register,
};
use object::{Object, ObjectSection, SectionKind};
use std::collections::BTreeSet;

/// The word: `*(u32 *)(*pointer + offset)`.
#[derive(Clone, Copy, Debug)]
pub struct WordShape {
    /// Link-time address of the pointer global.
    pub pointer: u64,
    /// Offset of the word from where the pointer points.
    pub offset: i64,
}

/// What a store writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    Imm(u32),
    Reg(Register),
}

/// Where a 5-byte `jmp` can replace the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// The store is 5 bytes or more.
    Alone,
    /// The store with plain neighbouring instructions (no RIP-relative
    /// operand, no branch, no branch target after the first): `start..end`.
    Neighbours { start: u64, end: u64 },
    /// Only by relocating the load..store span (a RIP-relative operand or
    /// a block boundary is in the way).
    Relocate,
}

/// One store of the word.
#[derive(Clone, Debug)]
pub struct Site {
    pub store: u64,
    pub len: u8,
    /// The load of the pointer the store goes through.
    pub load: u64,
    pub value: Value,
    /// Instructions strictly between the load and the store.
    pub between: usize,
    /// A conditional branch lies between the load and the store.
    pub branch_between: bool,
    pub fit: Fit,
    /// A branch target lies in (load, store] (for a store reached along
    /// branches: at the store).
    pub target_inside: bool,
}

/// A reference to the pointer that leads to no store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Other {
    /// The pointer itself is written (`mov [rip+P],reg`).
    SetsPointer,
    /// The pointer is loaded and only read through (the word read back),
    /// or the register is overwritten unused.
    ReadsOnly,
    /// Anything else: why it could not be classified.
    Unclassified(String),
}

/// The result of a scan.
#[derive(Default, Debug)]
pub struct Scan {
    pub sites: Vec<Site>,
    /// Other references to the pointer: (instruction address, kind).
    pub others: Vec<(u64, Other)>,
    /// With a nonzero offset (a field of a struct the pointer points at):
    /// 32-bit stores at that displacement that no load of the pointer
    /// reaches (another struct's field, or the pointer kept elsewhere).
    pub stray: Vec<u64>,
    /// Jump tables found, and branch targets known in all.
    pub jump_tables: usize,
    pub targets: usize,
    /// Executable bytes decoded.
    pub code_bytes: u64,
}

impl Scan {
    /// Every reference is a recognised site or known harmless.
    pub fn classified(&self) -> bool {
        self.stray.is_empty()
            && !self
                .others
                .iter()
                .any(|(_, o)| matches!(o, Other::Unclassified(_)))
    }
}

/// The binary's executable code decoded linearly, with its branch targets.
pub struct Code {
    pub insns: Vec<Instruction>,
    targets: Vec<u64>,
    jump_tables: usize,
    code_bytes: u64,
}

/// How far (instructions) a store may follow its load: in one block, and
/// along branches (13 keeps `MyProc` in a register across its
/// `pgstat_track_activities` tests and a few blocks).
const REACH: usize = 16;
const REACH_ACROSS: usize = 40;

impl Code {
    pub fn decode(elf: &ElfImage) -> Code {
        let text: Vec<(u64, &[u8])> = elf
            .file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text && s.size() > 0)
            .filter_map(|s| Some((s.address(), s.data().ok()?)))
            .collect();
        let rodata: Vec<(u64, &[u8])> = elf
            .file
            .sections()
            .filter(|s| matches!(s.kind(), SectionKind::ReadOnlyData))
            .filter_map(|s| Some((s.address(), s.data().ok()?)))
            .collect();
        Code::from_sections(&text, &rodata)
    }

    /// The code of `text` sections (address, bytes), with the jump tables
    /// `rodata` holds.
    pub fn from_sections(sections: &[(u64, &[u8])], rodata: &[(u64, &[u8])]) -> Code {
        let mut insns = Vec::new();
        let mut code_bytes = 0;
        let mut text: Vec<(u64, u64)> = Vec::new();
        for &(addr, data) in sections {
            code_bytes += data.len() as u64;
            text.push((addr, addr + data.len() as u64));
            let mut dec = Decoder::with_ip(64, data, addr, DecoderOptions::NONE);
            let mut ins = Instruction::default();
            while dec.can_decode() {
                dec.decode_out(&mut ins);
                insns.push(ins);
            }
        }
        insns.sort_by_key(|i| i.ip());
        let in_text = |a: u64| text.iter().any(|&(b, e)| b <= a && a < e);
        let mut targets: BTreeSet<u64> = BTreeSet::new();
        let mut tables: BTreeSet<(u64, u8)> = BTreeSet::new();
        let in_rodata = |a: u64| {
            rodata
                .iter()
                .any(|&(b, d)| b <= a && a < b + d.len() as u64)
        };
        for i in &insns {
            if matches!(
                i.op0_kind(),
                OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
            ) {
                targets.insert(i.near_branch_target());
            }
            if i.mnemonic() == Mnemonic::Lea
                && i.is_ip_rel_memory_operand()
                && in_rodata(i.ip_rel_memory_address())
            {
                tables.insert((i.ip_rel_memory_address(), 4));
            }
            if i.memory_base() == Register::None
                && i.memory_index() != Register::None
                && i.memory_index_scale() == 8
                && in_rodata(i.memory_displacement64())
            {
                tables.insert((i.memory_displacement64(), 8));
            }
        }
        let starts: BTreeSet<u64> = insns.iter().map(|i| i.ip()).collect();
        let mut jump_tables = 0;
        for &(base, width) in &tables {
            let Some(&(sb, d)) = rodata
                .iter()
                .find(|&&(b, d)| b <= base && base < b + d.len() as u64)
            else {
                continue;
            };
            let mut off = (base - sb) as usize;
            let mut n = 0;
            while off + width as usize <= d.len() && n < 65536 {
                let t = if width == 4 {
                    let v = i32::from_le_bytes(d[off..off + 4].try_into().unwrap());
                    base.wrapping_add(v as i64 as u64)
                } else {
                    u64::from_le_bytes(d[off..off + 8].try_into().unwrap())
                };
                if !in_text(t) || !starts.contains(&t) {
                    break;
                }
                targets.insert(t);
                n += 1;
                off += width as usize;
            }
            if n > 0 {
                jump_tables += 1;
            }
        }
        Code {
            insns,
            targets: targets.into_iter().collect(),
            jump_tables,
            code_bytes,
        }
    }

    fn is_target(&self, a: u64) -> bool {
        self.targets.binary_search(&a).is_ok()
    }

    /// Index of the instruction starting at `a`.
    pub fn index_of(&self, a: u64) -> Option<usize> {
        self.insns.binary_search_by_key(&a, |i| i.ip()).ok()
    }

    /// The 32-bit stores at displacement `offset` from a base register
    /// (no index) among the instructions starting in `ranges`.
    pub fn stores_in(&self, ranges: &[(u64, u64)], offset: i64) -> Vec<u64> {
        let mut out = Vec::new();
        for &(b, e) in ranges {
            let from = self.insns.partition_point(|i| i.ip() < b);
            for i in self.insns[from..].iter().take_while(|i| i.ip() < e) {
                if is_word_store(i, None, offset) {
                    out.push(i.ip());
                }
            }
        }
        out
    }

    /// Every store of the word `shape` describes, and every other
    /// reference to its pointer.
    pub fn scan(&self, shape: WordShape) -> Scan {
        let mut out = Scan {
            jump_tables: self.jump_tables,
            targets: self.targets.len(),
            code_bytes: self.code_bytes,
            ..Scan::default()
        };
        let mut factory = InstructionInfoFactory::new();
        let mut reached: BTreeSet<u64> = BTreeSet::new();
        for (k, i) in self.insns.iter().enumerate() {
            if !(i.is_ip_rel_memory_operand() && i.ip_rel_memory_address() == shape.pointer) {
                continue;
            }
            let is_load = i.mnemonic() == Mnemonic::Mov
                && i.op_count() == 2
                && i.op0_kind() == OpKind::Register
                && i.op1_kind() == OpKind::Memory
                && i.op0_register().is_gpr64();
            if !is_load {
                if shape.offset != 0 {
                    continue;
                }
                let o = if i.mnemonic() == Mnemonic::Mov && i.op0_kind() == OpKind::Memory {
                    Other::SetsPointer
                } else {
                    Other::Unclassified(format!("{:?} of the pointer", i.mnemonic()))
                };
                out.others.push((i.ip(), o));
                continue;
            }
            let reg = i.op0_register();
            if shape.offset != 0 {
                // a field of a struct (13's MyProc->wait_event_info): the
                // store may sit across branches from the load
                for (s, steps) in self.reach(k, reg, shape.offset, &mut factory) {
                    reached.insert(self.insns[s].ip());
                    out.sites.push(self.site(k, s, steps));
                }
                continue;
            }
            let walk = self.walk(k, reg, shape.offset, &mut factory);
            for &s in &walk.stores {
                reached.insert(self.insns[s].ip());
                out.sites.push(self.site(k, s, s - k - 1));
            }
            if shape.offset != 0 {
                // a pointer to a struct (13's MyProc) is read for its other
                // fields everywhere: the stray stores below say what matters
                continue;
            }
            if let Some(why) = walk.other_use {
                out.others.push((i.ip(), Other::Unclassified(why)));
            } else if walk.stores.is_empty() {
                out.others.push((i.ip(), Other::ReadsOnly));
            }
        }
        if shape.offset != 0 {
            out.stray = self
                .insns
                .iter()
                .filter(|i| is_word_store(i, None, shape.offset) && !reached.contains(&i.ip()))
                .map(|i| i.ip())
                .collect();
        }
        out.sites.sort_by_key(|s| s.store);
        out.sites.dedup_by_key(|s| s.store);
        out
    }

    /// Follow register `reg` from the load at index `k`: the stores of the
    /// word through it, and any use that is neither such a store nor a
    /// read of the word.
    fn walk(
        &self,
        k: usize,
        reg: Register,
        offset: i64,
        factory: &mut InstructionInfoFactory,
    ) -> Walk {
        let mut w = Walk::default();
        let mut prev_end = self.insns[k].next_ip();
        for j in k + 1..(k + 1 + REACH).min(self.insns.len()) {
            let i = &self.insns[j];
            if i.ip() != prev_end {
                break;
            }
            prev_end = i.next_ip();
            if is_word_store(i, Some(reg), offset) {
                if i.op1_kind() == OpKind::Register && i.op1_register().full_register() == reg {
                    w.other_use = Some("the pointer itself stored".into());
                    return w;
                }
                w.stores.push(j);
                continue;
            }
            let reads_word = i.mnemonic() == Mnemonic::Mov
                && i.op1_kind() == OpKind::Memory
                && i.memory_base() == reg
                && i.memory_index() == Register::None
                && i.memory_displacement64() as i64 == offset;
            let info = factory.info(i);
            let mut read = false;
            let mut written = false;
            for u in info.used_registers() {
                if u.register().full_register() != reg {
                    continue;
                }
                match u.access() {
                    OpAccess::Read | OpAccess::CondRead => read = true,
                    OpAccess::Write | OpAccess::CondWrite => written = true,
                    OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                        read = true;
                        written = true
                    }
                    _ => {}
                }
            }
            if read && !reads_word {
                // a test of the pointer against NULL (13's `if (proc)`)
                // reads it harmlessly
                let null_test = i.mnemonic() == Mnemonic::Test
                    && i.op0_kind() == OpKind::Register
                    && i.op1_kind() == OpKind::Register
                    && i.op0_register() == reg
                    && i.op1_register() == reg;
                if !null_test {
                    w.other_use = Some(format!(
                        "{:?} uses the pointer at {:#x}",
                        i.mnemonic(),
                        i.ip()
                    ));
                    return w;
                }
            }
            if written {
                return w;
            }
            match i.flow_control() {
                FlowControl::Next => {}
                // after its stores the register is followed to the end of
                // the straight-line block only
                _ if !w.stores.is_empty() => return w,
                FlowControl::ConditionalBranch => {}
                FlowControl::Call => {
                    if !is_clobbered_by_call(reg) {
                        w.other_use = Some(format!(
                            "the pointer stays in {reg:?} across the call at {:#x}",
                            i.ip()
                        ));
                    }
                    return w;
                }
                _ => {
                    if !w.stores.is_empty() || self.unused_after(j) {
                        return w;
                    }
                    w.other_use = Some(format!(
                        "the pointer may be live in {reg:?} past {:#x}",
                        i.ip()
                    ));
                    return w;
                }
            }
        }
        if w.stores.is_empty() {
            w.other_use = Some(format!("no store within {REACH} instructions"));
        }
        w
    }

    /// The stores of the word through `reg` reachable from the load at
    /// index `k` along direct branches (both ways of a conditional one)
    /// within `REACH_ACROSS` instructions, before `reg` is written or a call,
    /// return or indirect branch: (store index, instructions before it).
    fn reach(
        &self,
        k: usize,
        reg: Register,
        offset: i64,
        factory: &mut InstructionInfoFactory,
    ) -> Vec<(usize, usize)> {
        let mut found: Vec<(usize, usize)> = Vec::new();
        let mut seen: BTreeSet<usize> = BTreeSet::new();
        let mut todo: Vec<(usize, usize)> = vec![(k + 1, 0)];
        while let Some((j, steps)) = todo.pop() {
            if steps >= REACH_ACROSS || j >= self.insns.len() || !seen.insert(j) {
                continue;
            }
            let i = &self.insns[j];
            if is_word_store(i, Some(reg), offset) {
                if !found.iter().any(|&(f, _)| f == j) {
                    found.push((j, steps));
                }
                todo.push((j + 1, steps + 1));
                continue;
            }
            let written = factory.info(i).used_registers().iter().any(|u| {
                u.register().full_register() == reg
                    && matches!(
                        u.access(),
                        OpAccess::Write
                            | OpAccess::CondWrite
                            | OpAccess::ReadWrite
                            | OpAccess::ReadCondWrite
                    )
            });
            if written {
                continue;
            }
            let direct = matches!(
                i.op0_kind(),
                OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
            );
            match i.flow_control() {
                FlowControl::Next => todo.push((j + 1, steps + 1)),
                FlowControl::ConditionalBranch if direct => {
                    todo.push((j + 1, steps + 1));
                    if let Some(t) = self.index_of(i.near_branch_target()) {
                        todo.push((t, steps + 1));
                    }
                }
                FlowControl::UnconditionalBranch if direct => {
                    if let Some(t) = self.index_of(i.near_branch_target()) {
                        todo.push((t, steps + 1));
                    }
                }
                _ => {}
            }
        }
        found
    }

    /// A return ends the function: nothing after it sees the register.
    fn unused_after(&self, j: usize) -> bool {
        self.insns[j].flow_control() == FlowControl::Return
    }

    /// The site of the store at index `store` through the load at index
    /// `load`, `between` instructions executed between them.
    fn site(&self, load: usize, store: usize, between: usize) -> Site {
        let l = &self.insns[load];
        let s = &self.insns[store];
        let linear = store > load && store - load - 1 == between;
        let (branch_between, target_inside) = if linear {
            (
                self.insns[load + 1..store]
                    .iter()
                    .any(|i| i.flow_control() != FlowControl::Next),
                self.insns[load + 1..=store]
                    .iter()
                    .any(|i| self.is_target(i.ip())),
            )
        } else {
            // reached along branches: only the store's own address can
            // be said of
            (true, self.is_target(s.ip()))
        };
        let value = if s.op1_kind() == OpKind::Register {
            Value::Reg(s.op1_register())
        } else {
            Value::Imm(s.immediate32())
        };
        Site {
            store: s.ip(),
            len: s.len() as u8,
            load: l.ip(),
            value,
            between,
            branch_between,
            fit: if linear || s.len() >= 5 {
                self.fit(load, store)
            } else {
                Fit::Relocate
            },
            target_inside,
        }
    }

    /// The smallest run of plain instructions around the store, after the
    /// load, with no branch target after its first, of 5 bytes or more.
    fn fit(&self, load: usize, store: usize) -> Fit {
        if self.insns[store].len() >= 5 {
            return Fit::Alone;
        }
        let plain = |i: &Instruction| {
            i.flow_control() == FlowControl::Next && !i.is_ip_rel_memory_operand()
        };
        let mut best: Option<(u64, u64)> = None;
        for a in (load + 1..=store).rev() {
            let run = &self.insns[a..=store];
            if !run.iter().all(plain)
                || run.windows(2).any(|w| w[0].next_ip() != w[1].ip())
                || run.iter().skip(1).any(|i| self.is_target(i.ip()))
            {
                break;
            }
            let start = self.insns[a].ip();
            let mut end = self.insns[store].next_ip();
            let mut b = store + 1;
            while end - start < 5 && b < self.insns.len() {
                let i = &self.insns[b];
                if i.ip() != end || !plain(i) || self.is_target(i.ip()) {
                    break;
                }
                end = i.next_ip();
                b += 1;
            }
            if end - start >= 5 && best.is_none_or(|(s, e)| end - start < e - s) {
                best = Some((start, end));
            }
        }
        match best {
            Some((start, end)) => Fit::Neighbours { start, end },
            None => Fit::Relocate,
        }
    }
}

#[derive(Default)]
struct Walk {
    stores: Vec<usize>,
    other_use: Option<String>,
}

/// `mov dword [BASE+offset], imm32/reg32` with no index register (BASE
/// `base` when given, else any general register but rsp and rip).
fn is_word_store(i: &Instruction, base: Option<Register>, offset: i64) -> bool {
    i.mnemonic() == Mnemonic::Mov
        && i.op_count() == 2
        && i.op0_kind() == OpKind::Memory
        && i.memory_size().size() == 4
        && i.memory_index() == Register::None
        && i.memory_displacement64() as i64 == offset
        && match base {
            Some(b) => i.memory_base() == b,
            None => {
                i.memory_base().is_gpr64()
                    && !matches!(i.memory_base(), Register::RSP | Register::RIP)
            }
        }
}

/// Caller-saved and not an argument register: a call leaves nothing of
/// the pointer in it (an argument register may hand it to the callee).
fn is_clobbered_by_call(r: Register) -> bool {
    matches!(r, Register::RAX | Register::R10 | Register::R11)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 0x9000;

    /// `mov REG,[rip+P]` at `at` (7 bytes; `modrm_reg` 0 = rax, 2 = rdx).
    fn load(at: u64, modrm_reg: u8) -> Vec<u8> {
        let disp = (P as i64 - (at as i64 + 7)) as i32;
        let mut v = vec![0x48, 0x8b, 0x05 | (modrm_reg << 3)];
        v.extend(disp.to_le_bytes());
        v
    }

    fn code(parts: &[&[u8]]) -> Code {
        let bytes: Vec<u8> = parts.concat();
        let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        Code::from_sections(&[(0x1000, leaked)], &[])
    }

    #[test]
    fn immediate_store_fits_alone_register_store_needs_neighbours() {
        // mov rax,[rip+P]; mov dword [rax],0x0a000001; ret
        // mov rdx,[rip+P]; mov [rdx],ebx; add rsp,8; pop rbx; ret
        let l1 = load(0x1000, 0);
        let l2 = load(0x1000 + 7 + 6 + 1, 2);
        let c = code(&[
            &l1,
            &[0xc7, 0x00, 0x01, 0x00, 0x00, 0x0a],
            &[0xc3],
            &l2,
            &[0x89, 0x1a],
            &[0x48, 0x83, 0xc4, 0x08],
            &[0x5b, 0xc3],
        ]);
        let s = c.scan(WordShape {
            pointer: P,
            offset: 0,
        });
        assert!(s.classified(), "{:?}", s.others);
        assert_eq!(s.sites.len(), 2);
        assert_eq!(s.sites[0].store, 0x1007);
        assert_eq!(s.sites[0].value, Value::Imm(0x0a00_0001));
        assert_eq!(s.sites[0].fit, Fit::Alone);
        assert_eq!(s.sites[1].value, Value::Reg(Register::EBX));
        assert_eq!(s.sites[1].len, 2);
        let st = s.sites[1].store;
        assert_eq!(
            s.sites[1].fit,
            Fit::Neighbours {
                start: st,
                end: st + 6
            }
        );
        assert!(!s.sites[1].target_inside);
    }

    #[test]
    fn a_pointer_handed_on_is_unclassified() {
        // mov rdi,[rip+P]; call +0 (the pointer may reach the callee)
        let l = load(0x1000, 7);
        let c = code(&[&l, &[0xe8, 0, 0, 0, 0], &[0xc3]]);
        let s = c.scan(WordShape {
            pointer: P,
            offset: 0,
        });
        assert!(s.sites.is_empty());
        assert!(!s.classified());
    }

    #[test]
    fn a_branch_target_inside_the_span_is_seen() {
        // mov rax,[rip+P]; L: mov dword [rax],0; jmp L
        let l = load(0x1000, 0);
        let c = code(&[&l, &[0xc7, 0x00, 0, 0, 0, 0], &[0xeb, 0xf8]]);
        let s = c.scan(WordShape {
            pointer: P,
            offset: 0,
        });
        assert_eq!(s.sites.len(), 1);
        assert!(s.sites[0].target_inside);
    }
}
