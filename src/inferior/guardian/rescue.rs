//! A backend that pgdbg and its guardian both left behind (killed together:
//! `pkill -9 -f pgdbg`, a cgroup kill, the OOM killer taking the group):
//! found by its table file (file.rs) or by its state (stopped, no tracer),
//! shown by `pgdbg ps`, restored by `pgdbg rescue PID` and before the next
//! `pgdbg attach PID`, exactly as the guardian restores it.

use super::{IN_GUARDIAN, MAGIC, Shared, W_GUARDIAN, W_MAGIC, W_PGDBG, W_START, file, restore};
use crate::inferior::procfs;
use anyhow::{Result, anyhow, bail};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// What pgdbg left in or around a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Left {
    /// A table file of a pgdbg and guardian that are both gone: the
    /// backend may hold int3s, a call in flight, held-back signals, a stop.
    Record { path: PathBuf, pgdbg: i32 },
    /// A table file whose pgdbg or guardian still runs: it restores the
    /// backend itself.
    Guarded { pgdbg: i32 },
    /// Stopped (job control) with no tracer and no record.
    Stopped,
}

/// Whether `pid` is a live pgdbg (or guardian) process, not another
/// program that reused the PID.
fn pgdbg_alive(pid: i32) -> bool {
    // gone, or a zombie its parent has not reaped yet: dead all the same
    if pid <= 0 || matches!(procfs::state(pid), None | Some('Z' | 'X')) {
        return false;
    }
    let me = std::fs::read_link("/proc/self/exe").ok();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let name = procfs::status(pid).map(|s| s.name).unwrap_or_default();
    // a zombie has no exe; a live one is our executable or named pgdbg*
    (exe.is_some() && exe == me) || name.starts_with("pgdbg")
}

fn map(path: &std::path::Path) -> Result<Shared> {
    let fd = file::open(path).map_err(|e| {
        anyhow!(
            "cannot open pgdbg's record {} ({e}): run this as the user that ran pgdbg (or root)",
            path.display()
        )
    })?;
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if len < super::BYTES as u64 {
        bail!(
            "{} is not a pgdbg record (too short): remove it",
            path.display()
        );
    }
    let sh = Shared::map(fd.as_raw_fd())?;
    if sh.get(W_MAGIC) != MAGIC {
        bail!("{} is not a pgdbg record: remove it", path.display());
    }
    Ok(sh)
}

/// What is left around backend `pid` (None: nothing).  Records of an
/// earlier process under the same PID are removed on the way.
pub fn left(pid: i32) -> Option<Left> {
    let start = procfs::start_time(pid)?;
    for (p, s, path) in file::all() {
        if p != pid {
            continue;
        }
        if s != start {
            // another process had this PID: its record is of no use
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let Ok(sh) = map(&path) else {
            continue;
        };
        if sh.get(W_START) != start {
            continue;
        }
        let (pg, gu) = (sh.get(W_PGDBG) as i32, sh.get(W_GUARDIAN) as i32);
        if pgdbg_alive(pg) || pgdbg_alive(gu) {
            return Some(Left::Guarded { pgdbg: pg });
        }
        return Some(Left::Record { path, pgdbg: pg });
    }
    let st = procfs::status(pid).ok()?;
    (st.state.starts_with('T') && st.tracer_pid == 0).then_some(Left::Stopped)
}

/// Records whose backend is gone: removed (`pgdbg ps` calls this).
pub fn remove_stale() {
    for (p, s, path) in file::all() {
        if procfs::start_time(p) != Some(s) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `pgdbg rescue PID`: restore what a dead pgdbg left; one line saying
/// what was done.
pub fn rescue(pid: i32) -> Result<String> {
    let start = procfs::start_time(pid).ok_or_else(|| {
        anyhow!("no process with PID {pid}: check the PID (pgdbg ps lists backends)")
    })?;
    match left(pid) {
        None => {
            let tracer = procfs::status(pid).map(|s| s.tracer_pid).unwrap_or(0);
            if tracer != 0 {
                bail!(
                    "backend {pid} is traced by process {tracer} ({}), and pgdbg left no record of it: nothing to rescue",
                    procfs::status(tracer).map(|s| s.name).unwrap_or_default()
                );
            }
            Ok(format!(
                "backend {pid} needs no rescue: it is not stopped, not traced, and no pgdbg left a record of it"
            ))
        }
        Some(Left::Guarded { pgdbg }) => bail!(
            "backend {pid} is still in the hands of pgdbg (PID {pgdbg}) or its guardian, which restore it when they end: end that pgdbg (kill {pgdbg}) instead"
        ),
        Some(Left::Stopped) => {
            // SAFETY: kill(2) of the process checked just above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
            Ok(format!(
                "backend {pid} was stopped with no tracer and no pgdbg record of it: sent SIGCONT, it runs again"
            ))
        }
        Some(Left::Record { path, pgdbg }) => {
            let sh = map(&path)?;
            // this process restores as a guardian does: the Target it uses
            // starts no guardian (nor a record) of its own meanwhile
            IN_GUARDIAN.store(true, Ordering::Relaxed);
            let res = restore(&sh, pid, start, None, std::time::Instant::now());
            IN_GUARDIAN.store(false, Ordering::Relaxed);
            let what = res?;
            let _ = std::fs::remove_file(&path);
            Ok(match what {
                Some(r) => format!(
                    "backend {pid}, left by pgdbg (PID {pgdbg}): restored {}",
                    r.what
                ),
                None => format!(
                    "backend {pid}: the record pgdbg (PID {pgdbg}) left holds nothing to restore; removed it"
                ),
            })
        }
    }
}
