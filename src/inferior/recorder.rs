//! An in-process recorder: a detour at a function's entry whose code
//! copies the call's first two arguments, one 4-byte global and chosen
//! fields of the struct the first argument points at, and optionally the
//! first bytes of a string a field points at, into a ring buffer in the
//! target's memory.  The target never stops for it (a few dozen
//! instructions per call, plus a few per byte of the string); pgdbg
//! empties the ring now and then, the target stopped (`Recorder::drain`)
//! or running (`RingReader`).  Like gdb's fast tracepoints with their
//! in-process agent, minus the agent library.  Nothing here knows about
//! PostgreSQL.
//!
//! The ring: a 64-byte header (`head`, written by the target; `tail`,
//! written by pgdbg; `dropped`, calls not recorded because the ring was
//! full) then `capacity` slots.  A slot: sequence number, time stamp
//! counter, rdi, rsi, the global, each field in 8 bytes, then the string's
//! start.  A call writes its slot's number with the WRITING bit first and
//! the number itself last, then moves `head` past it.  The code runs at
//! a function's entry, where the System V ABI makes the flags dead; it
//! saves `rax`, `rcx`, `rdx` and, around the string's copy, `rsi` on the
//! stack below the return address (32 bytes at most), which is free there.

use super::Target;
use super::jumpover::TakenOver;
use crate::arch::asm::*;
use anyhow::{Result, bail};

mod ring;
use ring::Ring;
pub use ring::RingReader;

/// Slots in the ring (a power of two): 50 ms of calls at 300 000 per
/// second (a plpgsql loop of index lookups), when it is read every 5 to
/// 20 ms.  3 MB with 8 fields and 80 bytes of text.
pub const CAPACITY: u64 = 16384;
const HEADER: u64 = 64;
const PAGE: u64 = 4096;
const SLOT_FIXED: u64 = 40;
/// A slot's sequence number with this bit: the call is writing it.
const WRITING: u64 = 1 << 63;

/// What to record at each call.
#[derive(Debug, Clone)]
pub struct RecordSpec {
    /// Slots in the ring: a power of two, 16 to 2^20 (`CAPACITY` unless
    /// the slots are large).
    pub capacity: u64,
    /// A 4-byte global read at each call.
    pub global32: Option<u64>,
    /// (offset, size in 1/2/4/8) of fields of the struct at rdi.
    pub fields: Vec<(u64, u64)>,
    /// Size of that struct: records give it back with the fields in place.
    pub struct_size: u64,
    /// The start of a string a field of the struct points at.
    pub text: Option<TextSpec>,
}

/// The first bytes of a NUL-terminated string that the struct at rdi
/// points at, copied at the call (the string may be freed before the ring
/// is read).
#[derive(Debug, Clone)]
pub struct TextSpec {
    /// Offset of the pointer in the struct.
    pub pointer: u64,
    /// A 4-byte field of the struct and the value it must hold for the
    /// pointer to be followed (the struct's magic number).
    pub guard: Option<(u64, u32)>,
    /// Fields of the struct (offset, size 1, 4 or 8): when one of them is
    /// not zero the string is not copied (the reader has it otherwise).
    pub unless: Vec<(u64, u64)>,
    /// Bytes copied at most (the NUL included), 8 to 256, a multiple of 8.
    pub max: u64,
}

/// What a record holds of the string (`RecordSpec::text`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextStart {
    /// The bytes before its NUL, or the first `max` when none was seen.
    pub bytes: Vec<u8>,
    /// The NUL was seen: `bytes` are the whole string.
    pub complete: bool,
}

/// One recorded call.
#[derive(Debug, Clone)]
pub struct Record {
    pub seq: u64,
    pub tsc: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub global32: u32,
    /// `struct_size` bytes: the recorded fields at their offsets, zeros
    /// elsewhere.
    pub fields: Vec<u8>,
    /// The string's start (None: not asked for, or the guard did not hold,
    /// or the pointer was NULL).
    pub text: Option<TextStart>,
}

pub struct Recorder {
    pub site: u64,
    /// Set by `drain` once someone else's uprobe took the jump over: no
    /// call is recorded any more.
    pub taken_over: Option<TakenOver>,
    ring: Ring,
    tsc0: u64,
    t0: std::time::SystemTime,
}

fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The machine code of the recorder (before the displaced instructions,
/// into which it falls through at its end).  No branch leaves it and
/// nothing in it is relative to rip: the same bytes run at any address.
fn emit(data: u64, slot: u64, spec: &RecordSpec) -> Result<Vec<u8>, AsmError> {
    let mut a = Asm::new();
    a.push(rax)?;
    a.push(rcx)?;
    a.push(rdx)?;
    // the ring's address in full (movabs: `remove_orphan` reads it there)
    a.mov(rdx, data)?;
    a.mov(rax, qword_ptr(rdx))?; // head
    a.mov(rcx, rax)?;
    a.sub(rcx, qword_ptr(rdx + 8))?; // - tail
    a.cmp(rcx, spec.capacity as i32)?;
    let full = a.label("full");
    a.jae(full)?;
    a.mov(rcx, rax)?;
    a.and(rcx, (spec.capacity - 1) as i32)?;
    a.imul_3(rcx, rcx, slot as i32)?;
    a.lea(rcx, qword_ptr(rdx + rcx + HEADER))?; // the slot
    // its sequence number marked as being written (WRITING) first, the
    // number itself last: a reader that does not stop the target takes a
    // slot only when it sees the number before and after its copy
    a.bts(rax, 63)?;
    a.mov(qword_ptr(rcx), rax)?; // seq | WRITING
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)?;
    a.mov(qword_ptr(rcx + 8), rax)?; // tsc
    a.mov(qword_ptr(rcx + 16), rdi)?;
    a.mov(qword_ptr(rcx + 24), rsi)?;
    if let Some(g) = spec.global32 {
        a.mov(rax, g)?;
        a.mov(eax, dword_ptr(rax))?;
        a.mov(dword_ptr(rcx + 32), eax)?;
    }
    for (i, &(off, size)) in spec.fields.iter().enumerate() {
        let dst = SLOT_FIXED + 8 * i as u64;
        // load into (r/e)ax from [rdi+off], store to [rcx+dst]
        match size {
            8 => {
                a.mov(rax, qword_ptr(rdi + off))?;
                a.mov(qword_ptr(rcx + dst), rax)?;
            }
            4 => {
                a.mov(eax, dword_ptr(rdi + off))?;
                a.mov(dword_ptr(rcx + dst), eax)?;
            }
            2 => {
                a.movzx(eax, word_ptr(rdi + off))?;
                a.mov(word_ptr(rcx + dst), ax)?;
            }
            _ => {
                a.movzx(eax, byte_ptr(rdi + off))?;
                a.mov(byte_ptr(rcx + dst), al)?;
            }
        }
    }
    if let Some(t) = &spec.text {
        emit_text(&mut a, t, text_at(spec))?;
    }
    a.mov(rdx, data)?;
    a.mov(rax, qword_ptr(rdx))?; // head: this call's number
    a.mov(qword_ptr(rcx), rax)?; // seq, the slot written
    a.inc(qword_ptr(rdx))?; // head++
    let done = a.label("done");
    a.jmp(done)?;
    a.set("full")?;
    a.inc(qword_ptr(rdx + 16))?; // dropped++
    a.set("done")?;
    a.pop(rdx)?;
    a.pop(rcx)?;
    a.pop(rax)?;
    Ok(a.assemble(0)?.bytes)
}

/// What a slot's copy of the string holds: nothing when the guard field
/// (recorded among the fields) did not hold, an `unless` field (recorded
/// too) was not zero or the pointer was NULL (recorded too), else the
/// bytes up to the NUL.  `fields`: the record's
/// struct with the recorded fields in place.
fn text_start(copy: &[u8], fields: &[u8], t: &TextSpec) -> Option<TextStart> {
    let at = |o: u64, n: usize| fields.get(o as usize..o as usize + n);
    if let Some((o, v)) = t.guard
        && at(o, 4)? != v.to_le_bytes()
    {
        return None;
    }
    let zero = |o: u64, n: u64| at(o, n as usize).map(|b| b.iter().all(|&x| x == 0));
    if zero(t.pointer, 8)? || t.unless.iter().any(|&(o, n)| zero(o, n) != Some(true)) {
        return None;
    }
    let end = copy.iter().position(|&b| b == 0);
    Some(TextStart {
        bytes: copy[..end.unwrap_or(copy.len())].to_vec(),
        complete: end.is_some(),
    })
}

/// Where a slot's copy of the string starts; the slot's size.
fn text_at(spec: &RecordSpec) -> u64 {
    SLOT_FIXED + 8 * spec.fields.len() as u64
}

fn slot_size(spec: &RecordSpec) -> u64 {
    text_at(spec) + spec.text.as_ref().map_or(0, |t| t.max)
}

/// The copy of the string's first bytes into the slot (rcx) at `dst`:
/// byte by byte up to its NUL (copied too) or `max` bytes, so that nothing
/// past the string's end is read.  Uses rax, rdx (free here) and rsi
/// (saved); flags are dead at a function's entry.  Its skips go to label
/// `text_end`, set here for the next instruction.
fn emit_text(a: &mut Asm, t: &TextSpec, dst: u64) -> Result<(), AsmError> {
    // the slot's layout (`slot_size`), checked by `install`
    assert!(matches!(t.max, 8..=256), "recorder text of {} bytes", t.max);
    let end = a.label("text_end");
    if let Some((off, value)) = t.guard {
        a.cmp(dword_ptr(rdi + off), value)?;
        a.jne(end)?;
    }
    for &(off, size) in &t.unless {
        match size {
            8 => a.cmp(qword_ptr(rdi + off), 0)?,
            4 => a.cmp(dword_ptr(rdi + off), 0)?,
            _ => a.cmp(byte_ptr(rdi + off), 0)?,
        }
        a.jne(end)?;
    }
    a.mov(rdx, qword_ptr(rdi + t.pointer))?;
    a.test(rdx, rdx)?;
    a.jz(end)?;
    a.push(rsi)?;
    a.xor(esi, esi)?;
    a.set("text_top")?;
    a.movzx(eax, byte_ptr(rdx + rsi))?;
    a.mov(byte_ptr(rcx + rsi + dst), al)?;
    a.inc(esi)?;
    a.test(al, al)?;
    let out = a.label("text_out");
    a.jz(out)?; // the NUL copied
    a.cmp(esi, t.max as i32)?;
    let top = a.label("text_top");
    a.jb(top)?;
    a.set("text_out")?;
    a.pop(rsi)?;
    a.set("text_end")?;
    Ok(())
}

/// The jump back of a detour's code at `entry` (`page`: its bytes from
/// there): the first `jmp rel32` to just past `site`.
fn jump_back(page: &[u8], entry: u64, site: u64) -> Option<iced_x86::Instruction> {
    iced_x86::Decoder::with_ip(64, page, entry, iced_x86::DecoderOptions::NONE)
        .into_iter()
        .find(|i| {
            i.mnemonic() == iced_x86::Mnemonic::Jmp
                && i.len() == 5
                && i.near_branch_target() > site
                && i.near_branch_target() <= site + 16
        })
}

impl Recorder {
    /// Put a recorder at `site`, a function's entry.  `bodies` is the
    /// function's code, to check that nothing branches into the bytes the
    /// detour overwrites.  The target must be stopped.
    pub fn install(
        t: &mut Target,
        site: u64,
        spec: RecordSpec,
        bodies: &[(u64, Vec<u8>)],
    ) -> Result<Recorder> {
        if spec.fields.iter().any(|&(o, s)| {
            !matches!(s, 1 | 2 | 4 | 8) || o + s > spec.struct_size || o > i32::MAX as u64
        }) {
            bail!("internal: bad recorder field");
        }
        if let Some(t) = &spec.text {
            let recorded = |off: u64, n: u64| spec.fields.iter().any(|&(o, s)| o == off && s == n);
            // the reader tells a copy from an old slot's bytes by the
            // pointer and the guard, recorded as fields too
            if t.max < 8
                || t.max > 256
                || !t.max.is_multiple_of(8)
                || !recorded(t.pointer, 8)
                || t.guard.is_some_and(|(g, _)| !recorded(g, 4))
                || t.unless.len() > 4
                || t.unless
                    .iter()
                    .any(|&(o, n)| !matches!(n, 1 | 4 | 8) || !recorded(o, n))
            {
                bail!("internal: bad recorder text");
            }
        }
        if !spec.capacity.is_power_of_two() || !(16..=1 << 20).contains(&spec.capacity) {
            bail!("internal: bad recorder capacity");
        }
        let slot = slot_size(&spec);
        let data_len = (HEADER + spec.capacity * slot).div_ceil(PAGE) * PAGE;
        let data = t.place_detour(site, bodies, data_len, |data| {
            emit(data, slot, &spec)
                .map_err(|e| anyhow::anyhow!("internal: the recorder's code: {e}"))
        })?;
        Ok(Recorder {
            site,
            taken_over: None,
            ring: Ring {
                spec,
                data,
                slot,
                tail: 0,
                dropped: 0,
            },
            tsc0: rdtsc(),
            t0: std::time::SystemTime::now(),
        })
    }

    /// The calls recorded since the last drain, oldest first, and how many
    /// more calls found the ring full since then.  The target should be
    /// stopped (the ring is then consistent and `tail` can be written).
    pub fn drain(&mut self, t: &mut Target) -> Result<(Vec<Record>, u64)> {
        // someone's uprobe over the jump since the last look: undone now,
        // before the backend can run into it; what the ring holds is still
        // good and drained below
        if self.taken_over.is_none() {
            self.taken_over = t.detour_taken_over(self.site)?;
        }
        let ring = &mut self.ring;
        // (the target is stopped: its memory is read and written through
        // its own `Target`, breakpoints and detours hidden)
        let target = std::cell::RefCell::new(t);
        ring.take(
            &mut |ranges| target.borrow().read_many(ranges),
            &mut |at, v| target.borrow_mut().write(at, &v.to_le_bytes()),
        )
    }

    /// A reader of the ring for another thread, the target running (this
    /// recorder's own `drain` is then not to be used any more).
    pub fn reader(&self, pid: i32) -> Result<RingReader> {
        let mem = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map_err(|e| anyhow::anyhow!("cannot open /proc/{pid}/mem: {e}"))?;
        Ok(RingReader {
            pid,
            mem,
            ring: self.ring.clone(),
        })
    }

    /// Seconds since the epoch at which each record's time stamp counter
    /// was read (the TSC rate measured between install and now; the clock
    /// read once for all of them).
    pub fn wall_times(&self, records: &[Record]) -> Vec<f64> {
        let secs = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0)
        };
        let now = secs(std::time::SystemTime::now());
        let now_tsc = rdtsc();
        let span = now - secs(self.t0);
        let ticks = now_tsc.saturating_sub(self.tsc0) as f64;
        records
            .iter()
            .map(|r| {
                if span < 0.005 || ticks <= 0.0 || r.tsc > now_tsc {
                    now
                } else {
                    now - now_tsc.saturating_sub(r.tsc) as f64 * span / ticks
                }
            })
            .collect()
    }

    /// A recorder (or a call counter, `counter.rs`) left at `site` by a
    /// pgdbg that could not clean up (killed with SIGKILL): a `jmp` there
    /// into an anonymous executable page that starts like our code and
    /// ends, after a copy of the file's own bytes (`original`, the code at
    /// `site` as built), with the jump back.  When
    /// all of that holds, it is undone like our own detours (original bytes
    /// back, pages unmapped when safe) and true is returned.
    pub fn remove_orphan(t: &mut Target, site: u64, original: &[u8]) -> Result<bool> {
        let mut jmp = [0u8; 5];
        t.read(site, &mut jmp)?;
        if jmp[0] != 0xe9 || t.has_detour(site) {
            return Ok(false);
        }
        // a breakpoint of pgdbg's inside the jump (`break` on an entry
        // where the jump was found) saved a byte of the jump as the
        // original: the file's bytes written back under it would make its
        // removal write that byte back over them.  Left as found.
        if (site..site + 16).any(|a| t.breakpoint_inserted(a)) {
            return Ok(false);
        }
        let rel = i32::from_le_bytes(jmp[1..].try_into().expect("4")) as i64;
        // the recorder's code starts anywhere in its page (`map_jump_page`)
        let entry = (site as i64 + 5 + rel) as u64;
        let code = entry & !(PAGE - 1);
        let off = (entry - code) as usize;
        // Lengths come from the code itself, never from /proc/PID/maps (the
        // kernel merges neighbouring anonymous mappings: unmapping a maps
        // line could take the backend's own memory with it).
        let maps = super::procfs::maps(t.pid())?;
        let inside = |a: u64, len: u64, perms: &str| {
            maps.iter()
                .any(|m| m.start <= a && a + len <= m.end && m.path.is_none() && m.perms == perms)
        };
        let code_len = PAGE;
        if !inside(code, code_len, "r-xp") {
            return Ok(false);
        }
        let mut page = vec![0u8; code_len as usize];
        t.read(code, &mut page)?;
        let page = page.split_off(off);
        // a recorder's code (`emit`) or a counter's (`counter::emit`); its
        // jump back: the first `jmp rel32` to just past `site`
        let back = jump_back(&page, entry, site);
        let (data, data_len) = if page.len() >= 13 && page[..5] == [0x50, 0x51, 0x52, 0x48, 0xba] {
            let data = u64::from_le_bytes(page[5..13].try_into().expect("8"));
            // the ring's size (`cmp rcx, CAPACITY`, `imul rcx, rcx, SLOT`),
            // before the jump back
            let end = back.map_or(0, |b| b.ip());
            let dec = iced_x86::Decoder::with_ip(64, &page, entry, iced_x86::DecoderOptions::NONE);
            let (mut cap, mut slot) = (None, None);
            for i in dec.into_iter().take_while(|i| i.ip() < end) {
                use iced_x86::Mnemonic::{Cmp, Imul};
                match i.mnemonic() {
                    Cmp if cap.is_none() => cap = Some(i.immediate32() as u64),
                    Imul if slot.is_none() => slot = Some(i.immediate32() as u64),
                    _ => {}
                }
            }
            let (Some(cap), Some(slot)) = (cap, slot) else {
                return Ok(false);
            };
            (data, (HEADER + cap * slot).div_ceil(PAGE) * PAGE)
        } else if let Some(data) = super::counter::orphan_word(&page) {
            (data, super::counter::DATA_LEN)
        } else {
            return Ok(false);
        };
        let Some(back) = back else {
            return Ok(false);
        };
        if !data.is_multiple_of(PAGE) || !inside(data, data_len, "rw-p") {
            return Ok(false);
        }
        let len = (back.near_branch_target() - site) as usize;
        let copy_at = (back.ip() - entry) as usize;
        if len > original.len() || copy_at < len || page[copy_at - len..copy_at] != original[..len]
        {
            return Ok(false);
        }
        // The reserved landing pages of this jump (`jumpover::landings`,
        // from the jump's target and the file's bytes): each one only if
        // it is still an anonymous read-and-execute page holding nothing
        // but the trapping filler, as pgdbg mapped it; one that is not is
        // someone else's now and left alone.
        let mut landings = Vec::new();
        let filler = [super::jumpover::UD64[0]; PAGE as usize];
        for p in super::jumpover::landing_pages(site, entry, &original[..len], code) {
            let mut b = vec![0u8; PAGE as usize];
            if inside(p, PAGE, "r-xp") && t.read(p, &mut b).is_ok() && b[..] == filler[..] {
                landings.push(p);
            }
        }
        t.adopt_detour(super::detour::Detour {
            site,
            orig: original[..len].to_vec(),
            code: (code, code_len),
            data: (data, data_len),
            entry: None,
            traps_inside: false,
            landings,
            taken_over: None,
        });
        t.remove_detour(site)?;
        Ok(true)
    }

    /// Remove the detour (and its pages when nothing can return into
    /// them).  Drain first: what is still in the ring is lost.
    pub fn remove(self, t: &mut Target) -> Result<bool> {
        t.remove_detour(self.site)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Formatter, NasmFormatter};

    /// The emitted code decodes to the instructions its comments name.
    #[test]
    fn recorder_code_decodes_as_written() {
        let spec = RecordSpec {
            capacity: CAPACITY,
            global32: Some(0x1122_3344_5566),
            fields: vec![(0, 4), (0x40, 8), (0x88, 1), (0x90, 2)],
            struct_size: 0x100,
            text: None,
        };
        let code = emit(0x7f00_0000_0000, 128, &spec).unwrap();
        let mut dec = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE);
        let mut f = NasmFormatter::new();
        let mut text = Vec::new();
        for ins in &mut dec {
            assert!(!ins.is_invalid());
            let mut s = String::new();
            f.format(&ins, &mut s);
            text.push(s);
        }
        let want = [
            "push rax",
            "push rcx",
            "push rdx",
            "mov rdx,7F0000000000h",
            "mov rax,[rdx]",
            "mov rcx,rax",
            "sub rcx,[rdx+8]",
            "cmp rcx,4000h",
            "jae short 0000000000001", // the assembler's shortest form
            "mov rcx,rax",
            "and rcx,3FFFh",
            "imul rcx,80h", // nasm's short form of imul rcx,rcx,80h
            "lea rcx,[rdx+rcx+40h]",
            "bts rax,3Fh",
            "mov [rcx],rax",
            "rdtsc",
            "shl rdx,20h",
            "or rax,rdx",
            "mov [rcx+8],rax",
            "mov [rcx+10h],rdi",
            "mov [rcx+18h],rsi",
            "mov rax,112233445566h",
            "mov eax,[rax]",
            "mov [rcx+20h],eax",
            "mov eax,[rdi]",
            "mov [rcx+28h],eax",
            "mov rax,[rdi+40h]",
            "mov [rcx+30h],rax",
            "movzx eax,byte [rdi+88h]",
            "mov [rcx+38h],al",
            "movzx eax,word [rdi+90h]",
            "mov [rcx+40h],ax",
            "mov rdx,7F0000000000h",
            "mov rax,[rdx]",
            "mov [rcx],rax",
            "inc qword [rdx]",
            "jmp short 0000000000001",
            "inc qword [rdx+10h]",
            "pop rdx",
            "pop rcx",
            "pop rax",
        ];
        assert_eq!(text.len(), want.len(), "{text:#?}");
        for (got, w) in text.iter().zip(want) {
            assert!(got.starts_with(w), "{got} != {w}\n{text:#?}");
        }
        // jae lands on `inc qword [rdx+10h]`, jmp short on `pop rdx`
        let ends: Vec<(u64, u64, usize)> = {
            let mut d = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE);
            (&mut d)
                .into_iter()
                .map(|i| (i.ip(), i.near_branch_target(), i.len()))
                .collect()
        };
        let ip_of = |n: usize| ends[n].0;
        assert_eq!(ends[8].1, ip_of(37));
        assert_eq!(ends[36].1, ip_of(38));
    }

    /// What `remove_orphan` reads of the code, and where it ends: it
    /// starts with `push rax; push rcx; push rdx; movabs rdx, data`, its
    /// first `cmp` and `imul` give the ring's capacity and slot size, it
    /// has no `jmp rel32`, and it falls through at its end (into the
    /// displaced instructions) with no branch leaving it.
    #[test]
    fn recorder_code_as_remove_orphan_reads_it() {
        let text = TextSpec {
            pointer: 0x40,
            guard: Some((0, 0xbaad_f00d)),
            unless: vec![(0x48, 1), (0x50, 8), (0x58, 4), (0x1000, 8)],
            max: 120,
        };
        let many: Vec<(u64, u64)> = (0..16).map(|k| (0x1000 + 8 * k, 8)).collect();
        // `waits trace`'s marks: a smaller ring, the longest text
        let long = TextSpec {
            pointer: 0x40,
            guard: None,
            unless: vec![],
            max: 256,
        };
        for (capacity, fields, text) in [
            (CAPACITY, vec![], None),
            (CAPACITY, vec![(0, 4)], Some(text.clone())),
            (CAPACITY, many, Some(text)),
            (4096, vec![], None),
            (4096, vec![(0x40, 8)], Some(long)),
        ] {
            let spec = RecordSpec {
                capacity,
                global32: Some(0x60_1000),
                fields,
                struct_size: 0x2000,
                text,
            };
            for slot in [slot_size(&spec), 128, 4096] {
                let data = 0x7f12_3456_0000;
                let code = emit(data, slot, &spec).unwrap();
                assert_eq!(&code[..5], &[0x50, 0x51, 0x52, 0x48, 0xba]);
                assert_eq!(code[5..13], data.to_le_bytes());
                let list: Vec<_> = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE)
                    .into_iter()
                    .collect();
                let first = |m: iced_x86::Mnemonic| {
                    let i = list.iter().find(|i| i.mnemonic() == m).expect("there");
                    i.immediate32() as u64
                };
                assert_eq!(first(iced_x86::Mnemonic::Cmp), capacity);
                assert_eq!(first(iced_x86::Mnemonic::Imul), slot);
                let end = 0x1000 + code.len() as u64;
                for i in &list {
                    assert!(!i.is_invalid());
                    assert!(!(i.mnemonic() == iced_x86::Mnemonic::Jmp && i.len() == 5));
                    let t = i.near_branch_target();
                    assert!(t == 0 || (0x1000..end).contains(&t), "{i}");
                }
                let last: Vec<String> = list[list.len() - 3..]
                    .iter()
                    .map(|i| format!("{i}"))
                    .collect();
                assert_eq!(last, ["pop rdx", "pop rcx", "pop rax"]);
            }
        }
    }

    /// The copy of a string's start: guarded by the magic field, nothing
    /// when the pointer is NULL, byte by byte up to the NUL (copied) or
    /// `max` bytes; the loop's and the skips' jumps land where they should.
    #[test]
    fn recorder_text_copy_decodes_as_written() {
        let t = TextSpec {
            pointer: 0x40,
            guard: Some((0, 0xbaad_f00d)),
            unless: vec![(0x48, 1), (0x50, 8)],
            max: 80,
        };
        let mut a = Asm::new();
        emit_text(&mut a, &t, 0x68).unwrap();
        // a zero-sized instruction for the label the skips go to
        a.zero_bytes().unwrap();
        let code = a.assemble(0x1000).unwrap().bytes;
        let text: Vec<(String, u64, u64)> = {
            let mut f = NasmFormatter::new();
            Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE)
                .into_iter()
                .map(|i| {
                    assert!(!i.is_invalid());
                    let mut s = String::new();
                    f.format(&i, &mut s);
                    (s, i.ip(), i.near_branch_target())
                })
                .collect()
        };
        let want = [
            "cmp dword [rdi],0BAADF00Dh",
            "jne short",
            "cmp byte [rdi+48h],0",
            "jne short",
            "cmp qword [rdi+50h],0",
            "jne short",
            "mov rdx,[rdi+40h]",
            "test rdx,rdx",
            "je short",
            "push rsi",
            "xor esi,esi",
            "movzx eax,byte [rdx+rsi]",
            "mov [rcx+rsi+68h],al",
            "inc esi",
            "test al,al",
            "je short",
            "cmp esi,50h",
            "jb short",
            "pop rsi",
        ];
        assert_eq!(text.len(), want.len(), "{text:#?}");
        for ((got, _, _), w) in text.iter().zip(want) {
            assert!(got.starts_with(w), "{got} != {w}\n{text:#?}");
        }
        let end = 0x1000 + code.len() as u64;
        let ip = |n: usize| text[n].1;
        for n in [1, 3, 5] {
            assert_eq!(text[n].2, end, "jne {n}: past the copy");
        }
        assert_eq!(text[8].2, end, "je: past the copy");
        assert_eq!(text[15].2, ip(18), "je: to pop rsi");
        assert_eq!(text[17].2, ip(11), "jb: the loop");
        // what the reader makes of a slot's copy
        let mut fields = vec![0u8; 0x100];
        fields[0..4].copy_from_slice(&0xbaad_f00du32.to_le_bytes());
        fields[0x40..0x48].copy_from_slice(&0x5000u64.to_le_bytes());
        let mut copy = vec![b'x'; 80];
        copy[..6].copy_from_slice(b"BEGIN\0");
        assert_eq!(
            text_start(&copy, &fields, &t),
            Some(TextStart {
                bytes: b"BEGIN".to_vec(),
                complete: true
            })
        );
        let long = vec![b'y'; 80];
        assert_eq!(
            text_start(&long, &fields, &t),
            Some(TextStart {
                bytes: long.clone(),
                complete: false
            })
        );
        for u in [0x48, 0x55] {
            fields[u] = 1; // an `unless` field not zero: nothing was copied
            assert_eq!(text_start(&copy, &fields, &t), None);
            fields[u] = 0;
        }
        fields[0] ^= 1; // not the magic: nothing was copied
        assert_eq!(text_start(&copy, &fields, &t), None);
    }
}
