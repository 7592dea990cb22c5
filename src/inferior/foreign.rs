//! Code bytes pgdbg did not write.  Before pgdbg saves bytes of the
//! target's code to put them back later (the byte under an int3, the
//! instructions a detour displaces and runs elsewhere, the bytes an
//! injected system call borrows), none of them may be an int3 that someone
//! else wrote: a kernel uprobe (perf, bpftrace, systemtap, another pgdbg's
//! `count`, `latency`, `trace --perf` or `waits trace`) is a 0xcc in the
//! process's own copy of the page, read like any other byte through
//! `process_vm_readv`.  Saved as "original", it would be written back after
//! its owner took it out: an int3 left in the code, and the next call kills
//! the backend with SIGTRAP.  A displaced copy would trap in our page.
//!
//! A 0xcc is told from an instruction by the file the code is mapped from
//! (the mapping's own inode, `/proc/PID/map_files`, else the path checked
//! against the mapping's device and inode): the file has 0xcc there too, or
//! the byte is someone's int3.  When the file cannot be read, a 0xcc is
//! refused as well.  Only bytes that are 0xcc in memory make pgdbg read the
//! file, so code without one costs nothing more.
//!
//! The file's byte is never taken as the original in place of the 0xcc:
//! the int3's owner still counts on it (a uprobe's int3 is consumed by the
//! kernel, so our breakpoint would never report; the uprobe's removal puts
//! the file's byte back, taking our int3 with it; our removal would take
//! the uprobe's), so the only safe answer is to leave it alone.

use super::{INT3, Target, procfs};
use anyhow::Result;
use std::os::unix::fs::{FileExt, MetadataExt};

/// An int3 pgdbg did not write, among code bytes it was about to save.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.text())]
pub struct ForeignInt3 {
    pub addr: u64,
    /// Whether the mapped file was read (else a 0xcc that could not be
    /// told from an instruction).
    pub file_read: bool,
    /// The function and offset, named by the session (`FUNC+OFF`).
    pub name: Option<String>,
}

impl ForeignInt3 {
    fn text(&self) -> String {
        let at = match &self.name {
            Some(n) => format!("{n} ({:#x})", self.addr),
            None => format!("{:#x}", self.addr),
        };
        const OWNERS: &str =
            "a kernel uprobe from perf/bpftrace/another pgdbg, or another debugger";
        if self.file_read {
            format!("an int3 that is not pgdbg's is at {at} ({OWNERS}): remove it and try again")
        } else {
            format!(
                "a 0xcc byte is at {at} and the file it is mapped from cannot be read to tell an instruction from an int3 that is not pgdbg's ({OWNERS}): nothing written; remove it and try again"
            )
        }
    }
}

/// The first int3 in `mem` (code bytes at some address, pgdbg's own int3s
/// already hidden) that the file does not have: its offset, and whether
/// the file was known (`file`: the same bytes as the file has them, None
/// when it could not be read; then every 0xcc counts).
pub fn foreign_int3(mem: &[u8], file: Option<&[u8]>) -> Option<(usize, bool)> {
    if let Some(f) = file
        && f.len() != mem.len()
    {
        return foreign_int3(mem, None);
    }
    mem.iter().enumerate().find_map(|(i, &b)| {
        if b != INT3 {
            return None;
        }
        match file {
            Some(f) if f[i] == INT3 => None, // an int3 instruction of the binary
            Some(_) => Some((i, true)),
            None => Some((i, false)),
        }
    })
}

/// Device numbers as /proc/PID/maps prints them ("fd:01", hex).
fn maps_dev(dev: &str) -> Option<(u64, u64)> {
    let (a, b) = dev.split_once(':')?;
    Some((
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    ))
}

/// `len` bytes at `addr` of process `pid` as the file mapped there has
/// them; None when no file is mapped there, the range leaves the mapping,
/// or the file cannot be opened as the very inode mapped.
pub fn mapped_file_bytes(pid: i32, addr: u64, len: usize) -> Option<Vec<u8>> {
    file_bytes(pid, addr, len, true)
}

/// `mapped_file_bytes`, through `/proc/PID/map_files` first or not.
fn file_bytes(pid: i32, addr: u64, len: usize, map_files: bool) -> Option<Vec<u8>> {
    let maps = procfs::maps(pid).ok()?;
    let m = maps.iter().find(|m| m.start <= addr && addr < m.end)?;
    if addr + len as u64 > m.end || m.inode == 0 {
        return None;
    }
    let (major, minor) = maps_dev(&m.dev)?;
    let same_inode = |f: &std::fs::File| {
        f.metadata().is_ok_and(|md| {
            md.ino() == m.inode
                && libc::major(md.dev()) as u64 == major
                && libc::minor(md.dev()) as u64 == minor
        })
    };
    // Not mappedfile::verified_mapped_file, on purpose: like it, this
    // checks the open handle itself (fstat), so a file renamed over the
    // path (a package upgrade under a running backend) is never read; but
    // no rule short of the device and inode (that resolver's overlayfs
    // rule: inode number and first page) is taken here: a wrong file's
    // 0xcc would make someone's int3 "original", written back later
    // (SIGTRAP).
    // The mapping's own file (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE)
    let own = match map_files {
        true => std::fs::File::open(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end)),
        false => Err(std::io::ErrorKind::PermissionDenied.into()),
    };
    let file = match own {
        Ok(f) => f,
        Err(_) => {
            let path = m.path.as_ref()?;
            let rooted = std::path::PathBuf::from(format!("/proc/{pid}/root"))
                .join(path.strip_prefix("/").unwrap_or(path));
            [rooted, path.clone()]
                .into_iter()
                .filter_map(|p| super::mappedfile::open_regular(&p))
                .find(same_inode)?
        }
    };
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, m.offset + (addr - m.start))
        .ok()?;
    Some(buf)
}

impl Target {
    /// Refuse to save `mem`, the target's bytes at `addr` (read with our
    /// int3s hidden), as code to put back later when one of them is an
    /// int3 pgdbg did not write.  Called before anything is written.
    pub(super) fn check_no_foreign_int3(&self, addr: u64, mem: &[u8]) -> Result<()> {
        if !mem.contains(&INT3) {
            return Ok(());
        }
        let file = mapped_file_bytes(self.pid(), addr, mem.len());
        match foreign_int3(mem, file.as_deref()) {
            None => Ok(()),
            Some((i, file_read)) => Err(ForeignInt3 {
                addr: addr + i as u64,
                file_read,
                name: None,
            }
            .into()),
        }
    }
}

/// The [`ForeignInt3`] in `e`'s chain, if that is what `e` is about.
pub fn foreign(e: &anyhow::Error) -> Option<&ForeignInt3> {
    e.chain().find_map(|c| c.downcast_ref::<ForeignInt3>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_int3_the_file_does_not_have_is_foreign() {
        // push r15 under a uprobe: the file has 0x41
        let mem = [0xcc, 0x57, 0x41, 0x56];
        let file = [0x41, 0x57, 0x41, 0x56];
        assert_eq!(foreign_int3(&mem, Some(&file)), Some((0, true)));
        // further in (a displaced instruction)
        let mem = [0x41, 0x57, 0xcc, 0x56];
        assert_eq!(foreign_int3(&mem, Some(&file)), Some((2, true)));
        // the code as the file has it
        assert_eq!(foreign_int3(&file, Some(&file)), None);
    }

    #[test]
    fn an_int3_the_file_has_is_an_instruction() {
        // mov eax, 0xcccccccc; int3 (padding): all in the file
        let code = [0xb8, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc];
        assert_eq!(foreign_int3(&code, Some(&code)), None);
        // one of them genuine, the next not
        let mem = [0xcc, 0xcc, 0x90];
        let file = [0xcc, 0x48, 0x90];
        assert_eq!(foreign_int3(&mem, Some(&file)), Some((1, true)));
    }

    #[test]
    fn without_the_file_every_0xcc_is_refused() {
        assert_eq!(foreign_int3(&[0x55, 0x48], None), None);
        assert_eq!(foreign_int3(&[0x55, 0xcc], None), Some((1, false)));
        // a file read of another length is no answer
        assert_eq!(foreign_int3(&[0xcc], Some(&[0x55, 0x48])), Some((0, false)));
    }

    #[test]
    fn the_message_names_the_place_and_the_owner() {
        let e = ForeignInt3 {
            addr: 0x5555_0000_1234,
            file_read: true,
            name: Some("GetCachedPlan".into()),
        };
        let m = e.to_string();
        assert!(m.starts_with("an int3 that is not pgdbg's is at GetCachedPlan (0x555500001234)"));
        assert!(m.contains("kernel uprobe") && m.ends_with("remove it and try again"));
        assert!(!m.contains('\n'));
        let wrapped = anyhow::Error::new(e.clone()).context("break GetCachedPlan");
        assert_eq!(foreign(&wrapped), Some(&e));
    }

    #[test]
    fn maps_device_numbers_are_hex() {
        assert_eq!(maps_dev("fd:01"), Some((0xfd, 1)));
        assert_eq!(maps_dev("103:02"), Some((0x103, 2)));
        assert_eq!(maps_dev("x"), None);
    }

    #[test]
    fn this_process_code_reads_as_its_file() {
        // a function of this test binary: memory and file agree
        let f = this_process_code_reads_as_its_file as fn() as usize as u64;
        let mut mem = [0u8; 16];
        mem.copy_from_slice(unsafe { std::slice::from_raw_parts(f as *const u8, 16) });
        let pid = std::process::id() as i32;
        let file = mapped_file_bytes(pid, f, 16).expect("mapped file");
        assert_eq!(mem.to_vec(), file);
        // by its path, checked against the mapping's device and inode
        assert_eq!(file_bytes(pid, f, 16, false), Some(file));
        // anonymous memory has no file
        let v = [0u8; 64];
        assert!(mapped_file_bytes(std::process::id() as i32, v.as_ptr() as u64, 8).is_none());
    }
}
