//! A write breakpoint event on one 4-byte word of one thread
//! (`PERF_TYPE_BREAKPOINT`, `HW_BREAKPOINT_W`, a sample per write): the
//! kernel traps each store, writes a record with the registers as they are
//! right after it, and lets the thread go on; nothing stops it for pgdbg.
//!
//! The value stored is taken from the store itself, not read back later
//! (by then the word may have changed again): the instruction that ends at
//! the sampled pc is decoded once per pc (a `mov` of an immediate or of a
//! register to the word's address, computed from the registers), and each
//! record gives the value from its immediate or its register.  A store of
//! another kind is read back from memory at once, and counted.

use super::stack::{Maps, unwind};
use super::{Attr, Event, Sample, open_error};
use crate::inferior::Registers;
use anyhow::{Result, anyhow};
use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of stack copied per record when stacks are asked for.
const STACK_BYTES: u32 = 8 * 1024;

/// One store into the word.
#[derive(Debug, Clone)]
pub struct Store {
    /// CLOCK_MONOTONIC, ns
    pub time: u64,
    pub value: u32,
    /// pcs, innermost first (empty without stacks)
    pub pcs: Vec<u64>,
}

/// What the store instruction at a pc puts into the word.
#[derive(Debug, Clone, Copy)]
enum Source {
    Imm(u32),
    Reg(Register),
    /// Not a plain `mov` to the word: read the word back.
    ReadBack,
}

pub struct WordWatch {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<WatchResult>>,
}

#[derive(Default)]
pub struct WatchResult {
    pub stores: Vec<Store>,
    pub lost: u64,
    /// Stores whose value was read back (the instruction was not decoded).
    pub read_back: u64,
}

fn reg_value(r: &Registers, reg: Register) -> Option<u64> {
    Some(match reg.full_register() {
        Register::RAX => r.rax,
        Register::RBX => r.rbx,
        Register::RCX => r.rcx,
        Register::RDX => r.rdx,
        Register::RSI => r.rsi,
        Register::RDI => r.rdi,
        Register::RBP => r.rbp,
        Register::RSP => r.rsp,
        Register::R8 => r.r8,
        Register::R9 => r.r9,
        Register::R10 => r.r10,
        Register::R11 => r.r11,
        Register::R12 => r.r12,
        Register::R13 => r.r13,
        Register::R14 => r.r14,
        Register::R15 => r.r15,
        Register::RIP => r.rip,
        _ => return None,
    })
}

fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> bool {
    let len = buf.len();
    let local = [std::io::IoSliceMut::new(buf)];
    let mut local = local;
    let remote = [nix::sys::uio::RemoteIoVec {
        base: addr as usize,
        len,
    }];
    matches!(
        nix::sys::uio::process_vm_readv(nix::unistd::Pid::from_raw(pid), &mut local, &remote),
        Ok(n) if n == len
    )
}

/// The store that ends at `ip` and writes 4 bytes at `word`, given the
/// registers after it (a `mov` does not change its address registers).
/// The instruction is found by decoding its function from its first byte
/// (a suffix of an instruction can decode too: `44 89 22`, `mov [rdx],
/// r12d`, ends with `89 22`, `mov [rdx], esp`); without a symbol, nothing
/// is guessed: the word is read back.
fn decode_store(pid: i32, maps: &mut Maps, ip: u64, word: u64, regs: &Registers) -> Source {
    let Some(m) = maps.find(ip - 1) else {
        return Source::ReadBack;
    };
    let Some((_, off)) = m.symbol(ip - 1) else {
        return Source::ReadBack;
    };
    let start = ip - 1 - off;
    let len = (ip - start) as usize;
    if len > 1 << 20 {
        return Source::ReadBack;
    }
    let mut code = vec![0u8; len];
    if !read_mem(pid, start, &mut code) {
        return Source::ReadBack;
    }
    let mut dec = Decoder::with_ip(64, &code, start, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    let mut last = None;
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        if ins.next_ip() == ip {
            last = Some(ins);
        }
    }
    let Some(ins) = last else {
        return Source::ReadBack;
    };
    if ins.is_invalid()
        || ins.mnemonic() != Mnemonic::Mov
        || ins.op_count() != 2
        || ins.op0_kind() != OpKind::Memory
        || ins.memory_size().size() != 4
    {
        return Source::ReadBack;
    }
    let addr = ins.virtual_address(0, 0, |r, _, _| match r {
        Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
        r => reg_value(regs, r),
    });
    if addr != Some(word) {
        return Source::ReadBack;
    }
    match ins.op1_kind() {
        OpKind::Immediate32 => Source::Imm(ins.immediate32()),
        OpKind::Register => Source::Reg(ins.op1_register()),
        _ => Source::ReadBack,
    }
}

impl WordWatch {
    /// Watch the stores into the 4 bytes at `word` by thread `tid` of
    /// `pid`; with `stacks`, each with its stack (the binary at `bias`).
    pub fn start(pid: i32, tid: i32, word: u64, stacks: bool, bias: u64) -> Result<WordWatch> {
        let attr = Attr::write_watch(word, 4, if stacks { STACK_BYTES } else { 0 });
        let pages = if stacks { 1024 } else { 256 };
        let ev = Event::open(&attr, tid, pages)
            .map_err(|e| open_error("a write breakpoint event", pid, e))?;
        ev.enable()
            .map_err(|e| open_error("a write breakpoint event", pid, e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let handle = std::thread::spawn(move || {
            crate::guard::block_in_this_thread();
            let mut ev = ev;
            // the mapped files: for the stacks and to find the store's function
            let mut maps = Maps::new(pid, bias);
            let mut res = WatchResult::default();
            let mut sources: HashMap<u64, Source> = HashMap::new();
            loop {
                let last = st.load(Ordering::Relaxed);
                ev.drain(|b| {
                    let Some(s) = Sample::parse(b, stacks) else {
                        return;
                    };
                    let Some(regs) = s.regs else { return };
                    let src = *sources
                        .entry(regs.rip)
                        .or_insert_with(|| decode_store(pid, &mut maps, regs.rip, word, &regs));
                    let value = match src {
                        Source::Imm(v) => Some(v),
                        Source::Reg(r) => reg_value(&regs, r).map(|v| v as u32),
                        Source::ReadBack => None,
                    };
                    let value = match value {
                        Some(v) => v,
                        None => {
                            res.read_back += 1;
                            let mut b = [0u8; 4];
                            if !read_mem(pid, word, &mut b) {
                                return;
                            }
                            u32::from_le_bytes(b)
                        }
                    };
                    let pcs = if stacks {
                        unwind(&mut maps, &regs, s.stack, 64)
                    } else {
                        Vec::new()
                    };
                    res.stores.push(Store {
                        time: s.time,
                        value,
                        pcs,
                    });
                });
                if last {
                    break;
                }
                ev.wait(5);
            }
            res.lost = ev.lost;
            res
        });
        Ok(WordWatch {
            stop,
            handle: Some(handle),
        })
    }

    /// Stop watching (the breakpoint event is closed) and return the stores.
    pub fn finish(mut self) -> Result<WatchResult> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .ok_or_else(|| anyhow!("the watch thread is gone"))?
            .join()
            .map_err(|_| anyhow!("the watch thread failed"))
    }
}

impl Drop for WordWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
