//! The guardian process itself (`pgdbg __pgdbg_guardian ...`): it waits
//! until pgdbg closes its pipe (taking copies of the backend's release
//! pipe's write end when asked), then, unless pgdbg detached cleanly,
//! restores the backend (restore.rs) and removes the table file.

use super::restore::restore;
use super::{
    IN_GUARDIAN, MAGIC, STATE_CLEAN, Shared, W_MAGIC, W_RELEASE_ASK, W_RELEASE_TAKEN, W_STATE, file,
};
use crate::inferior::{log, procfs, selfrelease};
use anyhow::{Result, anyhow, bail};
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

/// `pgdbg __pgdbg_guardian PID START PGDBG_PID MEMFD PIPEFD`: never returns.
pub fn main(args: &[String]) -> i32 {
    IN_GUARDIAN.store(true, Ordering::Relaxed);
    // `ps`/`top` name it for what it is (started as /proc/self/exe: "exe")
    // SAFETY: prctl(2) with a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"pgdbg-guardian".as_ptr()) };
    crate::runtime::ignore_session_signals();
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            crate::runtime::sink().warn(format_args!("pgdbg guardian: {e:#}"));
            1
        }
    }
}

fn run(args: &[String]) -> Result<()> {
    let num = |i: usize| -> Result<i64> {
        args.get(i)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("internal command line; not for use by hand"))
    };
    let (pid, start, pgdbg, mfd, rfd) = (
        num(0)? as i32,
        num(1)? as u64,
        num(2)? as i32,
        num(3)? as i32,
        num(4)? as i32,
    );
    let shared = Shared::map(mfd)?;
    // the table file's identity: removed at the end only if it is still
    // this one (a pgdbg attached since may have made its own)
    let ours = file_id_of_fd(mfd);
    unsafe { libc::close(mfd) };
    if shared.get(W_MAGIC) != MAGIC {
        bail!("internal command line; not for use by hand");
    }
    // wait for pgdbg to close the pipe (exit, detach or death); a byte
    // from it asks for a copy of the backend's pipe's write end
    // (selfrelease.rs), kept until this process ends
    let mut b = [0u8; 64];
    let mut write_ends: Vec<OwnedFd> = Vec::new();
    loop {
        let n = unsafe { libc::read(rfd, b.as_mut_ptr() as *mut libc::c_void, b.len()) };
        if n == 0 || (n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
        {
            break;
        }
        let ask = shared.get(W_RELEASE_ASK);
        if n > 0 && ask != 0 && procfs::start_time(pid) == Some(start) {
            match selfrelease::take_write_end(pid, (ask - 1) as i32) {
                // still asked (pgdbg gives up after two seconds and closes
                // the number in the backend: a copy taken later is dropped)
                Ok(fd) if shared.get(W_RELEASE_ASK) == ask => {
                    write_ends.push(fd);
                    shared.set(W_RELEASE_TAKEN, ask);
                }
                Ok(_) => {}
                Err(e) => log::debug(&format!("guardian: no copy of the write end ({e})")),
            }
        }
    }
    let t0 = std::time::Instant::now();
    let remove_file = || {
        let p = file::path(pid, start);
        if ours.is_some() && file_id_of_path(&p) == ours {
            let _ = std::fs::remove_file(p);
        }
    };
    if shared.get(W_STATE) == STATE_CLEAN {
        remove_file();
        return Ok(());
    }
    let res = restore(&shared, pid, start, Some(pgdbg), t0);
    // the backend's read end is closed by now (or the restore failed and
    // the backend is let go): these may go
    drop(write_ends);
    // the record goes before the line is written: a guardian blocked on
    // its stderr and killed there leaves no record of a backend restored
    // already for a rescue to replay
    if res.is_ok() {
        remove_file();
    }
    match &res {
        Ok(None) => {}
        Ok(Some(r)) => {
            if !crate::config::get().guardian_quiet {
                crate::runtime::sink().warn(format_args!(
                    "pgdbg guardian: pgdbg (PID {pgdbg}) ended without detaching from backend {pid}; restored {} ({})",
                    r.what,
                    r.times
                ));
            }
        }
        Err(e) => crate::runtime::sink().warn(format_args!(
            "pgdbg guardian: pgdbg (PID {pgdbg}) ended without detaching from backend {pid}; could not fully restore it ({e:#}): run 'pgdbg rescue {pid}'"
        )),
    }
    res.map(|_| ())
}

fn file_id_of_fd(fd: i32) -> Option<(u64, u64)> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat(2) into a zeroed struct.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

fn file_id_of_path(p: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}
