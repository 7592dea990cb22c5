//! A sampled stack unwound with CFI: the registers the kernel recorded and
//! its copy of the top of the user stack, walked through the `.eh_frame`
//! (or `.debug_frame`) of whichever mapped file holds each pc: the binary
//! and its shared libraries (plpgsql.so, libc).  Nothing is read from the
//! process itself, so a sample can be unwound long after it was taken.

use crate::arch::regs::FrameRegs;
use crate::debuginfo::unwind::{FileKey, Module};
use crate::inferior::Registers;
use crate::inferior::procfs;

/// The files mapped into the process, refreshed when a pc falls in none
/// (a library loaded since), at most once a second.
pub struct Maps {
    pid: i32,
    main_bias: u64,
    list: Vec<Module>,
    /// the executable mappings of files, each file opened while the
    /// process ran (see [`Maps::read_code`])
    code: Vec<Code>,
    taken: std::time::Instant,
}

/// An executable mapping of a file: `start..end` holds the file's bytes
/// from `offset` on.
struct Code {
    start: u64,
    end: u64,
    offset: u64,
    file: std::sync::Arc<std::fs::File>,
}

impl Maps {
    pub fn new(pid: i32, main_bias: u64) -> Maps {
        let mut m = Maps {
            pid,
            main_bias,
            list: Vec::new(),
            code: Vec::new(),
            taken: std::time::Instant::now(),
        };
        m.refresh();
        m
    }

    fn refresh(&mut self) {
        let maps = procfs::maps(self.pid).unwrap_or_default();
        if maps.is_empty() && !self.list.is_empty() {
            // the process has ended: the files it mapped stay as they were
            // (its records are unwound after its end)
            self.taken = std::time::Instant::now();
            return;
        }
        let exe = procfs::exe_path(self.pid).ok();
        let mut mods: Vec<Module> = Vec::new();
        for m in &maps {
            let Some(p) = &m.path else { continue };
            if let Some(existing) = mods.iter_mut().find(|x| &x.path == p) {
                existing.end = existing.end.max(m.end);
                continue;
            }
            if m.offset == 0 {
                let main = exe.as_deref() == Some(p.as_path());
                let bias = if main { self.main_bias } else { m.start };
                let key = FileKey {
                    path: p.clone(),
                    dev: m.dev.clone(),
                    inode: m.inode,
                };
                mods.push(Module::new(key, m.start, m.end, bias, main));
            }
        }
        self.list = mods;
        // the files of the code, kept open: readable after the process ended
        let mut code: Vec<Code> = Vec::new();
        for m in maps.iter().filter(|m| m.perms.contains('x')) {
            let Some(p) = &m.path else { continue };
            let file = match self
                .code
                .iter()
                .chain(code.iter())
                .find(|c| c.start == m.start && c.end == m.end && c.offset == m.offset)
            {
                Some(c) => c.file.clone(),
                None => {
                    let Some(v) = crate::debuginfo::elf::verified_mapped(p, &m.dev, m.inode) else {
                        continue;
                    };
                    v.shared_file()
                }
            };
            code.push(Code {
                start: m.start,
                end: m.end,
                offset: m.offset,
                file,
            });
        }
        self.code = code;
        self.taken = std::time::Instant::now();
    }

    /// The bytes of the code at `addr` as its file has them (no int3 of
    /// anyone's; the process may have ended), if one executable mapping
    /// holds them all.
    pub fn read_code(&self, addr: u64, buf: &mut [u8]) -> bool {
        use std::os::unix::fs::FileExt;
        let end = addr + buf.len() as u64;
        self.code
            .iter()
            .find(|c| addr >= c.start && end <= c.end)
            .is_some_and(|c| c.file.read_exact_at(buf, addr - c.start + c.offset).is_ok())
    }

    pub fn find(&mut self, addr: u64) -> Option<&Module> {
        let hit = self
            .list
            .iter()
            .position(|m| addr >= m.start && addr < m.end);
        if hit.is_none() && self.taken.elapsed() >= std::time::Duration::from_secs(1) {
            self.refresh();
        }
        let i = match hit {
            Some(i) => i,
            None => self
                .list
                .iter()
                .position(|m| addr >= m.start && addr < m.end)?,
        };
        self.list.get(i)
    }
}

/// The pcs of a sampled stack, innermost first (then return addresses), at
/// most `max`.  `stack` is the copy of the memory from `regs.rsp` up.
pub fn unwind(maps: &mut Maps, regs: &Registers, stack: &[u8], max: usize) -> Vec<u64> {
    let sp0 = regs.rsp;
    let read_u64 = |a: u64| -> Option<u64> {
        let off = a.checked_sub(sp0)? as usize;
        let b = stack.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    };
    let mut cur = FrameRegs::from_regs(regs);
    let mut out = Vec::new();
    while out.len() < max {
        let pc = cur.pc();
        if pc == 0 {
            break;
        }
        out.push(pc);
        let lookup = if out.len() == 1 { pc } else { pc - 1 };
        let Some(m) = maps.find(lookup) else { break };
        let Some(tables) = m.tables() else { break };
        let Some((caller, _)) = tables.step(&cur, lookup - m.bias, &read_u64) else {
            break;
        };
        if caller.pc() == 0 || caller.sp() <= cur.sp() {
            break;
        }
        cur = caller;
    }
    out
}
