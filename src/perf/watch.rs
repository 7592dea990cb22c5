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
use super::tracefs::{Definition, field_bytes, field_u64};
use super::{Attr, Event, POLL_MS, Sample, Wakeup, open_error};
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

/// A uprobe (sampled at each hit, never stopping the thread) whose hits are
/// marked in time: at the entry of a function, with its first argument
/// and a C string read from the process as soon as the record arrives.
#[derive(Debug, Clone)]
pub struct MarkSpec {
    /// The file, opened and checked to be the one mapped.
    pub file: crate::inferior::mappedfile::VerifiedFile,
    pub offset: u64,
    pub kind: u8,
    pub text: TextFrom,
    /// Whether pgdbg is woken at each hit ([`Wakeup::PerRecord`]: a text
    /// that the backend reuses soon after, e.g. a simple-protocol
    /// statement's message buffer, is read while it is still there) or
    /// reads the hits every few ms ([`Wakeup::Batched`]: cheaper for the
    /// backend).
    pub wakeup: Wakeup,
    /// Where tracefs is, when the kernel is to copy the text into each
    /// record at the hit (a uprobe defined in tracefs with fetch
    /// arguments: nothing for pgdbg to read later, no wake-up needed).
    pub tracefs: Option<std::path::PathBuf>,
}

/// Where a mark's C string is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TextFrom {
    None,
    /// The pointer at `rdi + offset` points to it.
    FieldOfRdi(u64),
    /// `rsi` (the second argument) points to it.
    Rsi,
    /// `rdx` (the third argument) points to it.
    Rdx,
}

/// One hit of a [`MarkSpec`]'s uprobe.
#[derive(Debug, Clone)]
pub struct Mark {
    /// CLOCK_MONOTONIC, ns
    pub time: u64,
    pub kind: u8,
    /// rdi at the hit
    pub arg: u64,
    pub text: Option<String>,
}

/// The C string (at most 4 KB) the pointer at `at` points to.
fn read_text_at(pid: i32, at: u64) -> Option<String> {
    let mut p = [0u8; 8];
    if !read_mem(pid, at, &mut p) {
        return None;
    }
    read_text(pid, u64::from_le_bytes(p))
}

/// A statement's text from its first bytes, copied at a hit: up to their
/// NUL; bytes with no NUL (a longer text) are completed by `whole` (the
/// text read from the backend now) if that still starts with them, else
/// end with "...".
pub(crate) fn copied_text(bytes: &[u8], whole: impl FnOnce() -> Option<String>) -> String {
    match bytes.iter().position(|&c| c == 0) {
        Some(n) => String::from_utf8_lossy(&bytes[..n]).into_owned(),
        None => {
            let copied = String::from_utf8_lossy(bytes).into_owned();
            match whole() {
                Some(t) if t.len() > copied.len() && t.starts_with(&copied) => t,
                _ => format!("{copied}..."),
            }
        }
    }
}

/// The C string (at most 4 KB) at `a`: read in pieces of up to 1 KB that
/// never cross a page's end (a page is mapped whole or not at all, and the
/// string may end just before an unmapped one).
pub(crate) fn read_text(pid: i32, mut a: u64) -> Option<String> {
    const MOST: usize = 4096;
    if a == 0 {
        return None;
    }
    let mut out = Vec::new();
    while out.len() < MOST {
        let to_page_end = (4096 - a % 4096) as usize;
        let mut b = vec![0u8; to_page_end.min(1024).min(MOST - out.len())];
        if !read_mem(pid, a, &mut b) {
            break;
        }
        if let Some(i) = b.iter().position(|&c| c == 0) {
            out.extend_from_slice(&b[..i]);
            return Some(String::from_utf8_lossy(&out).into_owned());
        }
        out.extend_from_slice(&b);
        a += b.len() as u64;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The registers a mark's record carries (perf's numbers): dx, si, di
/// (the arguments a mark reads), nothing more to copy per hit.
const MARK_REGS: u64 = (1 << 3) | (1 << 4) | (1 << 5);

/// Why [`WordWatch::start`] failed: the write-breakpoint event, or one of
/// the uprobes marking the executor (which a caller may do without).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Watch(anyhow::Error),
    #[error(transparent)]
    Mark(anyhow::Error),
}

impl StartError {
    /// The error itself (a [`super::Refused`] stays one).
    pub fn into_inner(self) -> anyhow::Error {
        match self {
            StartError::Watch(e) | StartError::Mark(e) => e,
        }
    }
}

/// A uprobe sampling event: one record per hit with the time and the
/// [`MARK_REGS`], the reader woken as the spec says.  With
/// [`MarkSpec::tracefs`], a tracefs uprobe whose records carry `rdi` and
/// the text, copied by the kernel (the definition is returned with it: drop
/// it after the event).
fn open_mark(spec: &MarkSpec, tid: i32) -> std::io::Result<(Event, Option<Definition>)> {
    if let Some(root) = &spec.tracefs {
        let def = define_mark(root, spec.file.path(), spec.offset, spec.text)?;
        let ev = def.open(tid, spec.wakeup, 256)?;
        return Ok((ev, Some(def)));
    }
    let kind = super::uprobe::pmu_type()?;
    use std::os::unix::ffi::OsStrExt;
    let cpath = std::ffi::CString::new(spec.file.path().as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut attr = Attr::sampling(kind, 0, 0).wakeup(spec.wakeup);
    attr.sample_regs_user = MARK_REGS;
    attr.bp_len = spec.offset;
    attr.period_or_freq = 1;
    Ok((Event::open_uprobe(&attr, Some(&cpath), tid, 64)?, None))
}

/// A mark's uprobe defined in tracefs (at `offset` in `path`) whose
/// records carry `rdi` (`qd`) and, unless `text` is [`TextFrom::None`], the
/// first [`TEXT_WORDS`] words of the text (`text`), copied by the kernel.
pub(crate) fn define_mark(
    root: &std::path::Path,
    path: &std::path::Path,
    offset: u64,
    text: TextFrom,
) -> std::io::Result<Definition> {
    // the text as a fixed-size array, not `:string`: a string's length
    // is only known at the hit, and before Linux 6.12 a string that
    // fills the kernel's one-page argument buffer overran it (since,
    // a kernel warning); a copy past the string's end reads the
    // backend's memory (zeros where it is unmapped) and is cut at the
    // first NUL
    let base = match text {
        TextFrom::None => None,
        TextFrom::FieldOfRdi(o) => Some(format!("+{o}(%di)")),
        TextFrom::Rsi => Some("%si".to_string()),
        TextFrom::Rdx => Some("%dx".to_string()),
    };
    let mut args = "qd=%di:u64".to_string();
    if let Some(b) = &base {
        args.push_str(&format!(" text=+0({b}):u64[{TEXT_WORDS}]"));
    }
    let def = Definition::new(root, path, offset, &args)?;
    let missing = ["qd", "text"]
        .into_iter()
        .take(if base.is_some() { 2 } else { 1 })
        .find(|f| !def.fields.contains_key(*f));
    if let Some(f) = missing {
        return Err(std::io::Error::other(format!(
            "the tracefs event has no field {f} (its format file)"
        )));
    }
    Ok(def)
}

/// How many 8-byte words of a text a tracefs mark copies: 256 bytes, most
/// statements whole.  The kernel copies an array word by word (a
/// user-memory read each, about 80 ns here), so each word costs the
/// backend at every statement.
const TEXT_WORDS: usize = 32;

/// A mark's hit from a tracefs uprobe's record (see [`open_mark`]).  A
/// text that fills every part is read whole from the backend when the
/// record is read, if it still starts with what the kernel copied;
/// otherwise the copy ends with "...".
fn kernel_mark(spec: &MarkSpec, def: &Definition, b: &[u8], pid: i32) -> Option<Mark> {
    let (time, raw) = super::tracefs::parse_record(b)?;
    mark_from_raw(spec.kind, spec.text, &def.fields, time, raw, pid)
}

/// A mark of `kind` at `time` from the raw data of a hit of a
/// [`define_mark`] uprobe (its fields) in process `pid` (see
/// [`kernel_mark`]).
pub(crate) fn mark_from_raw(
    kind: u8,
    text_from: TextFrom,
    fields: &HashMap<String, super::tracefs::Field>,
    time: u64,
    raw: &[u8],
    pid: i32,
) -> Option<Mark> {
    let qd = field_u64(raw, fields.get("qd")?)?;
    let text = match fields.get("text") {
        Some(f) => {
            let bytes = field_bytes(raw, f)?;
            Some(copied_text(bytes, || match text_from {
                TextFrom::FieldOfRdi(o) => read_text_at(pid, qd + o),
                _ => None,
            }))
        }
        None => None,
    };
    Some(Mark {
        time,
        kind,
        arg: qd,
        text,
    })
}

#[derive(Default)]
pub struct WatchResult {
    pub stores: Vec<Store>,
    /// The marks' hits, in the order of each mark's ring.
    pub marks: Vec<Mark>,
    pub lost: u64,
    /// Stores whose value was read back (the instruction was not decoded).
    pub read_back: u64,
    /// Stores left out: their value was to be read back but the process
    /// had ended (or its memory could not be read) by then.
    pub unread: u64,
    /// The files the process mapped, read while it ran: its stacks can be
    /// named after it ended.
    pub maps: Option<Maps>,
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

/// Read `buf.len()` bytes at `addr` of process `pid` while it runs
/// (process_vm_readv): whether all were read.
pub(crate) fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> bool {
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
    // from the file (the process may have ended since the store: a short
    // session's records are read after its end; and the file has no
    // uprobe's int3 in the function), else from the process
    let mut code = vec![0u8; len];
    if !maps.read_code(start, &mut code) && !read_mem(pid, start, &mut code) {
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
    /// `pid`; with `stacks`, each with its stack (the binary at `bias`);
    /// and the hits of the `marks` uprobes.  Every event is opened before
    /// any is enabled: a refusal leaves nothing behind.
    pub fn start(
        pid: i32,
        tid: i32,
        word: u64,
        stacks: bool,
        bias: u64,
        marks: &[MarkSpec],
    ) -> Result<WordWatch, StartError> {
        let attr = Attr::write_watch(word, 4, if stacks { STACK_BYTES } else { 0 });
        let pages = if stacks { 1024 } else { 256 };
        let watch_error = |e| StartError::Watch(open_error("a write breakpoint event", pid, e));
        let mark_error = |e| StartError::Mark(open_error("a kernel uprobe", pid, e));
        let ev = Event::open(&attr, tid, pages).map_err(watch_error)?;
        let mut mark_evs = Vec::new();
        for m in marks {
            let (e, def) = open_mark(m, tid).map_err(mark_error)?;
            // (spec, event, definition): the event is dropped before its definition
            mark_evs.push((m.clone(), e, def));
        }
        for (_, e, _) in &mark_evs {
            e.enable().map_err(mark_error)?;
        }
        ev.enable().map_err(watch_error)?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        // the mapped files, for the stacks and to find and decode the
        // store's function: read now, while the backend is stopped (a short
        // session may be over before the thread below runs)
        let mut maps = Maps::new(pid, bias);
        let handle = std::thread::spawn(move || {
            crate::runtime::block_in_this_thread();
            let mut ev = ev;
            let mut res = WatchResult::default();
            let mut sources: HashMap<u64, Source> = HashMap::new();
            let mut mark_evs = mark_evs;
            loop {
                let last = st.load(Ordering::Relaxed);
                for (spec, me, def) in mark_evs.iter_mut() {
                    me.drain(|b| {
                        if let Some(def) = def {
                            res.marks.extend(kernel_mark(spec, def, b, pid));
                            return;
                        }
                        let Some(s) = Sample::parse_regs(b, MARK_REGS, false) else {
                            return;
                        };
                        let Some(regs) = s.regs else { return };
                        res.marks.push(Mark {
                            time: s.time,
                            kind: spec.kind,
                            arg: regs.rdi,
                            text: match spec.text {
                                TextFrom::None => None,
                                TextFrom::FieldOfRdi(o) => read_text_at(pid, regs.rdi + o),
                                TextFrom::Rsi => read_text(pid, regs.rsi),
                                TextFrom::Rdx => read_text(pid, regs.rdx),
                            },
                        });
                    });
                }
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
                            let mut b = [0u8; 4];
                            if !read_mem(pid, word, &mut b) {
                                res.unread += 1;
                                return;
                            }
                            res.read_back += 1;
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
                let mut fds = vec![ev.fd()];
                fds.extend(mark_evs.iter().map(|(_, e, _)| e.fd()));
                super::poll_in(&fds, POLL_MS);
            }
            res.lost = ev.lost + mark_evs.iter().map(|(_, e, _)| e.lost).sum::<u64>();
            res.maps = Some(maps);
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

#[cfg(test)]
mod tests {
    use super::read_text;

    /// Texts read from this process: one crossing a page boundary, one
    /// whose NUL is the last byte before an unmapped page, one with no
    /// NUL before it (what was readable), NULL.
    #[test]
    fn texts_are_read_up_to_their_nul_or_an_unmapped_page() {
        let pid = std::process::id() as i32;
        // SAFETY: two fresh anonymous pages, the second unmapped again;
        // only the first is written, within its bounds.
        let base = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(libc::munmap((p as *mut u8).add(4096).cast(), 4096), 0);
            p as *mut u8
        };
        let page = |f: &dyn Fn(&mut [u8])| {
            // SAFETY: the mapped page of 4096 bytes above.
            f(unsafe { std::slice::from_raw_parts_mut(base, 4096) })
        };
        let a = base as u64;
        // "x" * 99 then NUL, ending at the page's last byte
        page(&|b| {
            b.fill(b'x');
            b[4095] = 0;
        });
        assert_eq!(read_text(pid, a + 3996).unwrap(), "x".repeat(99));
        // 4095 bytes from the page's start, the NUL its last byte
        assert_eq!(read_text(pid, a).unwrap().len(), 4095);
        // no NUL before the unmapped page: the bytes read
        page(&|b| b.fill(b'y'));
        assert_eq!(read_text(pid, a + 4000).unwrap(), "y".repeat(96));
        let long = vec![b'z'; 3000];
        let s = std::ffi::CString::new(long).unwrap();
        assert_eq!(read_text(pid, s.as_ptr() as u64).unwrap().len(), 3000);
        assert_eq!(read_text(pid, 0), None);
        // SAFETY: the page mapped above, no longer used.
        unsafe { libc::munmap(base.cast(), 4096) };
    }
}
