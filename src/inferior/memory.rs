//! Reading and writing the target's memory, and the int3 bytes written
//! into its code (each recorded with the guardian and the SIGTRAP handler
//! before it is written).

use super::*;

impl Target {
    /// Read `buf.len()` bytes at `addr` (one process_vm_readv).
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        match vm_read(self.pid, addr, buf)? {
            None => {}
            Some(n) => bail!(
                "cannot read {} bytes at {addr:#x}: only {n} readable",
                buf.len()
            ),
        }
        self.hide_breakpoints(addr, buf);
        Ok(())
    }

    /// Read code at `addr` as the program has it: where pgdbg wrote code
    /// of its own (an int3, the recorder's jump) the bytes it replaced.
    pub fn read_code(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.read(addr, buf)?;
        self.hide_detours(addr, buf);
        Ok(())
    }

    /// The byte at `addr` as it is in the target (our int3s not hidden);
    /// None when nothing is mapped there.
    pub(super) fn byte_in_target(&self, addr: u64) -> Option<u8> {
        let mut b = [0u8; 1];
        let remote = [RemoteIoVec {
            base: addr as usize,
            len: 1,
        }];
        let mut local = [IoSliceMut::new(&mut b)];
        match process_vm_readv(self.pid, &mut local, &remote) {
            Ok(1) => Some(b[0]),
            _ => None,
        }
    }

    /// Read several ranges with a single syscall.  Each range must be readable.
    pub fn read_many(&self, ranges: &mut [(u64, &mut [u8])]) -> Result<()> {
        read_untraced_many(self.pid.as_raw(), ranges)?;
        for (a, b) in ranges.iter_mut() {
            self.hide_breakpoints(*a, b);
        }
        Ok(())
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn read_u32(&self, addr: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Read a NUL-terminated string of at most `max` bytes.
    pub fn read_cstr(&self, addr: u64, max: usize) -> Result<(Vec<u8>, bool)> {
        let mut out = Vec::new();
        let mut a = addr;
        while out.len() < max {
            // read up to the end of the page
            let page_left = 4096 - (a as usize & 4095);
            let n = page_left.min(max - out.len()).min(256);
            let mut buf = vec![0u8; n];
            self.read(a, &mut buf)?;
            if let Some(p) = buf.iter().position(|&c| c == 0) {
                out.extend_from_slice(&buf[..p]);
                return Ok((out, true));
            }
            out.extend_from_slice(&buf);
            a += n as u64;
        }
        Ok((out, false))
    }

    /// Hide inserted int3 bytes from readers.
    pub(super) fn hide_breakpoints(&self, addr: u64, buf: &mut [u8]) {
        let end = addr + buf.len() as u64;
        for (&a, &orig) in self.inserted.range(addr..end) {
            buf[(a - addr) as usize] = orig;
        }
    }

    /// Write bytes into the target, read-only text included: one pwrite to
    /// /proc/PID/mem, else PTRACE_POKEDATA word by word.  The target must
    /// be stopped.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        if let Some(f) = &self.mem {
            use std::os::unix::fs::FileExt;
            if f.write_all_at(data, addr).is_ok() {
                return Ok(());
            }
        }
        let mut off = 0usize;
        while off < data.len() {
            let a = addr + off as u64;
            let aligned = a & !7;
            let word = ptrace::read(self.pid, aligned as ptrace::AddressType)
                .map_err(|e| anyhow!("cannot read target memory at {aligned:#x} ({e})"))?;
            let mut bytes = (word as u64).to_le_bytes();
            let start = (a - aligned) as usize;
            let n = (8 - start).min(data.len() - off);
            bytes[start..start + n].copy_from_slice(&data[off..off + n]);
            ptrace::write(
                self.pid,
                aligned as ptrace::AddressType,
                u64::from_le_bytes(bytes) as i64,
            )
            .map_err(|e| anyhow!("cannot write target memory at {aligned:#x} ({e})"))?;
            off += n;
        }
        Ok(())
    }

    /// Like `write`, but the word-wise fallback never touches a byte before
    /// `addr` (its words start at `addr`, unaligned, the last one ending at
    /// the range's end when the range holds a word): for a write just after
    /// a byte someone else may change meanwhile (a uprobe's int3, which the
    /// kernel writes under the mm's lock, while a PEEK then POKE of the
    /// word holding it is two steps that could put back a stale byte).
    /// Returns whether the word-wise fallback was used.
    pub(super) fn write_from(&mut self, addr: u64, data: &[u8]) -> Result<bool> {
        if let Some(f) = &self.mem {
            use std::os::unix::fs::FileExt;
            if f.write_all_at(data, addr).is_ok() {
                return Ok(false);
            }
        }
        let poke = |a: u64, w: [u8; 8]| {
            ptrace::write(
                self.pid,
                a as ptrace::AddressType,
                u64::from_le_bytes(w) as i64,
            )
            .map_err(|e| anyhow!("cannot write target memory at {a:#x} ({e})"))
        };
        if data.len() < 8 {
            // one word from `addr`: the bytes after the range are read and
            // written back as they are
            let word = ptrace::read(self.pid, addr as ptrace::AddressType)
                .map_err(|e| anyhow!("cannot read target memory at {addr:#x} ({e})"))?;
            let mut w = (word as u64).to_le_bytes();
            w[..data.len()].copy_from_slice(data);
            poke(addr, w)?;
            return Ok(true);
        }
        let mut off = 0usize;
        loop {
            // whole words of `data` only: nothing outside the range is read
            let o = off.min(data.len() - 8);
            poke(addr + o as u64, data[o..o + 8].try_into().expect("8"))?;
            off += 8;
            if o + 8 == data.len() {
                return Ok(true);
            }
        }
    }

    /// Write an int3 at `addr`, remembering the original byte; refused,
    /// nothing written, when the byte there is an int3 that is not ours.
    pub fn insert_breakpoint(&mut self, addr: u64) -> Result<()> {
        if self.inserted.contains_key(&addr) {
            return Ok(());
        }
        if self.in_detour(addr) {
            bail!("{addr:#x} is under a jump pgdbg wrote (an in-process recorder)");
        }
        let mut orig = [0u8; 1];
        self.read(addr, &mut orig)?;
        // someone else's int3 saved as the original would be written back
        // after its owner took it out (foreign.rs)
        self.check_no_foreign_int3(addr, &orig)?;
        if let Some(g) = self.guardian()? {
            g.note_breakpoint(addr, orig[0])?;
        }
        self.ensure_trap_handler();
        self.note_trap_address(addr, orig[0])?;
        // stopped just behind `addr` (a breakpoint on the instruction
        // before the one the backend stopped at, which ran): recorded as
        // the place to resume before the int3 exists, so that neither the
        // guardian nor the SIGCONT handler takes rip one past it for its
        // trap and runs that instruction again if pgdbg dies at this stop
        if self.state.is_stopped()
            && let Ok(r) = self.regs()
            && crate::arch::abi::int3_address(r.rip) == addr
        {
            self.note_resume_over(orig[0], r.rip, r.rsp)
                .map_err(|e| anyhow!("no breakpoint at {addr:#x}, just behind the stop: {e:#}"))?;
        }
        // held before the int3 exists (hold.rs): a trap pgdbg has not
        // rewound when it dies must find the backend stopped
        self.hold_for_change()?;
        self.write(addr, &[INT3])?;
        self.inserted.insert(addr, orig[0]);
        Ok(())
    }

    /// Restore the original byte at `addr`.
    pub fn remove_breakpoint(&mut self, addr: u64) -> Result<()> {
        if let Some(orig) = self.inserted.get(&addr).copied() {
            if !self.state.is_gone() {
                // (the raw byte: `read` shows the original under our int3s)
                if let Some(b) = self.byte_in_target(addr)
                    && b != INT3
                {
                    // a kernel uprobe's removal at this address writes the
                    // file's byte over any int3 there, ours too
                    log::debug(&format!(
                        "{addr:#x}: pgdbg's int3 was gone (byte {b:#04x}): removed by someone else"
                    ));
                    self.lost_int3s.push(addr);
                }
                self.write(addr, &[orig])?;
            }
            self.inserted.remove(&addr);
            self.code_cache.remove(&addr);
            if let Some(g) = &mut self.guardian {
                g.forget_breakpoint(addr);
            }
        }
        Ok(())
    }

    /// Forget the int3 at `addr` without writing: the code it was in was
    /// unmapped (a library unloaded), so there is nothing to restore, and
    /// detach must not write the old byte over whatever is mapped there
    /// later.
    pub fn forget_breakpoint(&mut self, addr: u64) {
        if self.inserted.remove(&addr).is_some() {
            self.code_cache.remove(&addr);
            if let Some(g) = &mut self.guardian {
                g.forget_breakpoint(addr);
            }
            // the SIGTRAP handler's entry holds the old code's byte too:
            // other code mapped there later must not get it
            if let Err(e) = self.forget_trap_address(addr) {
                log::debug(&format!(
                    "{addr:#x}: SIGTRAP handler entry not cleared ({e})"
                ));
            }
        }
    }

    /// The guardian of this target, started on first use (guardian.rs).
    pub(super) fn guardian(&mut self) -> Result<Option<&mut guardian::Guardian>> {
        if self.guardian.is_none() {
            // (the group stop, hold.rs, is entered when something needs it)
            self.guardian = guardian::Guardian::start(self.pid())?;
        }
        Ok(self.guardian.as_mut())
    }

    /// The address of our int3 just behind `rip`, if the instruction that
    /// last ran (or was about to report) is one of them.
    pub(super) fn int3_behind_rip(&self) -> Result<Option<u64>> {
        let addr = crate::arch::abi::int3_address(self.regs()?.rip);
        Ok(self.inserted.contains_key(&addr).then_some(addr))
    }

    /// Put `rip` back on the breakpoint at `addr` (the int3 stood in for
    /// the instruction there, which has not run).  Written to the kernel at
    /// once, never only cached: if pgdbg dies at this stop the kernel drops
    /// the stop's SIGTRAP (measured on Linux 6.18: no handler runs) and the
    /// target resumes from the registers the kernel holds; `rip` one past
    /// the int3 would run the rest of the instruction there.  With `rip`
    /// on the int3 it traps again, and pgdbg's SIGTRAP handler or the
    /// guardian restores the byte.
    pub(super) fn rewind_to(&mut self, addr: u64) -> Result<()> {
        // a new trap seen: an earlier resume past this int3 no longer holds
        if let Some(g) = &mut self.guardian {
            g.forget_resume();
        }
        self.resume_point_on_int3 = None;
        // (rewound all the same; the error after)
        let noted = self.note_release_resume(0, 0);
        let mut regs = self.regs()?;
        regs.rip = addr;
        self.set_regs(&regs)?;
        noted
    }

    /// Every address where an int3 of ours is written.
    pub fn inserted_addresses(&self) -> Vec<u64> {
        self.inserted.keys().copied().collect()
    }

    /// The addresses where an int3 of pgdbg's was found gone when it was
    /// removed (since the last call): its hits after that were not seen.
    pub fn take_lost_int3s(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.lost_int3s)
    }

    pub fn breakpoint_inserted(&self, addr: u64) -> bool {
        self.inserted.contains_key(&addr)
    }

    /// Original (file) bytes at an address, as the code would be without us.
    pub fn original_byte(&self, addr: u64) -> Option<u8> {
        self.inserted.get(&addr).copied()
    }
}

/// Read `buf.len()` bytes at `addr` of process `pid`, which pgdbg does not
/// trace (one process_vm_readv; the kernel asks for the same permission
/// as ptrace).  Nothing in the process is stopped or changed.
pub fn read_untraced(pid: i32, addr: u64, buf: &mut [u8]) -> Result<()> {
    match vm_read(Pid::from_raw(pid), addr, buf) {
        Ok(None) => Ok(()),
        Ok(Some(n)) => bail!(
            "cannot read {} bytes at {addr:#x} of process {pid}: only {n} readable",
            buf.len()
        ),
        Err(e) => bail!("{e} of process {pid}"),
    }
}

/// Read each of `ranges` (address, where to; at most 1024) of process
/// `pid` with one process_vm_readv, as `read_untraced` reads one.
pub fn read_untraced_many(pid: i32, ranges: &mut [(u64, &mut [u8])]) -> Result<()> {
    let remote: Vec<RemoteIoVec> = ranges
        .iter()
        .map(|(a, b)| RemoteIoVec {
            base: *a as usize,
            len: b.len(),
        })
        .collect();
    let total: usize = remote.iter().map(|r| r.len).sum();
    let mut local: Vec<IoSliceMut> = ranges.iter_mut().map(|(_, b)| IoSliceMut::new(b)).collect();
    let n = process_vm_readv(Pid::from_raw(pid), &mut local, &remote)
        .map_err(|e| anyhow!("cannot read the memory of process {pid} ({e})"))?;
    if n != total {
        bail!("cannot read the memory of process {pid}: short read ({n} of {total} bytes)");
    }
    Ok(())
}

/// One process_vm_readv of `buf.len()` bytes at `addr`: None when all were
/// read, Some(n) when only n were; an error names the address.
fn vm_read(pid: Pid, addr: u64, buf: &mut [u8]) -> Result<Option<usize>> {
    if buf.is_empty() {
        return Ok(None);
    }
    let len = buf.len();
    let remote = [RemoteIoVec {
        base: addr as usize,
        len,
    }];
    let mut local = [IoSliceMut::new(buf)];
    match process_vm_readv(pid, &mut local, &remote) {
        Ok(n) if n == len => Ok(None),
        Ok(n) => Ok(Some(n)),
        Err(e) => bail!("cannot access memory at address {addr:#x} ({e})"),
    }
}
