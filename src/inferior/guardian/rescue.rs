//! A backend that pgdbg and its guardian both left behind (killed together:
//! `pkill -9 -f pgdbg`, a cgroup kill, the OOM killer taking the group):
//! found by its table file (file.rs) or by its state (stopped, no tracer),
//! shown by `pgdbg ps`, restored by `pgdbg rescue PID` and before the next
//! `pgdbg attach PID`, exactly as the guardian restores it.

use super::{
    IN_GUARDIAN, MAGIC, Shared, W_GUARDIAN, W_GUARDIAN_START, W_MAGIC, W_PGDBG, W_PGDBG_START,
    W_START, file, restore,
};
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
    /// A record this user may not use or that is not one (another user's,
    /// damaged): nothing is done to the backend, never a SIGCONT.
    Unusable { path: PathBuf, why: String },
    /// Stopped (job control) with no tracer and no record.
    Stopped,
}

/// Whether the process `pid` that started at `start` (clock ticks after
/// boot) still runs: a reused PID is another process; a zombie its parent
/// has not reaped yet is dead all the same.
fn alive(pid: i32, start: u64) -> bool {
    pid > 0
        && !matches!(procfs::state(pid), None | Some('Z' | 'X'))
        && procfs::start_time(pid) == Some(start)
}

fn map(path: &std::path::Path, backend: i32) -> Result<Shared> {
    // root may use a record of the backend's own user (who may trace the
    // backend anyway); anyone else only their own
    let uid = procfs::status(backend).map(|s| s.uid).ok();
    let fd = file::open(path, uid).map_err(|e| {
        anyhow!(
            "cannot use pgdbg's record {} ({e}): run this as the user that ran pgdbg, or as root",
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
        let sh = match map(&path, pid) {
            Ok(sh) if sh.get(W_START) == start => sh,
            Ok(_) => {
                return Some(Left::Unusable {
                    why: "it names another process".into(),
                    path,
                });
            }
            Err(e) => {
                if young(&path) {
                    // being written (the magic comes last): its pgdbg runs
                    return Some(Left::Guarded { pgdbg: 0 });
                }
                return Some(Left::Unusable {
                    why: format!("{e:#}"),
                    path,
                });
            }
        };
        let (pg, gu) = (sh.get(W_PGDBG) as i32, sh.get(W_GUARDIAN) as i32);
        if alive(pg, sh.get(W_PGDBG_START)) || alive(gu, sh.get(W_GUARDIAN_START)) {
            return Some(Left::Guarded { pgdbg: pg });
        }
        return Some(Left::Record { path, pgdbg: pg });
    }
    let st = procfs::status(pid).ok()?;
    (st.state.starts_with('T') && st.tracer_pid == 0).then_some(Left::Stopped)
}

/// A file made in the last few seconds (its header may not be written yet).
fn young(p: &std::path::Path) -> bool {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age < std::time::Duration::from_secs(10))
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
        Some(Left::Guarded { pgdbg }) => bail!("{}", guarded(pid, pgdbg)),
        Some(Left::Unusable { path, why }) => bail!(
            "backend {pid}: pgdbg's record {} cannot be used ({why}); nothing was done to the backend",
            path.display()
        ),
        Some(Left::Stopped) => {
            // SAFETY: kill(2) of the process checked just above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
            Ok(format!(
                "backend {pid} was stopped with no tracer and no pgdbg record of it: sent SIGCONT, it runs again"
            ))
        }
        Some(Left::Record { path, pgdbg }) => {
            let sh = map(&path, pid)?;
            // a Ctrl-C or SIGTERM must not end this half-way (the backend
            // is held meanwhile, its record kept until the end)
            crate::runtime::ignore_session_signals();
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

/// Why a backend cannot be rescued or attached now: its pgdbg or guardian
/// runs and restores it itself.
pub fn guarded(pid: i32, pgdbg: i32) -> String {
    if pgdbg > 0 {
        format!(
            "backend {pid} is in the hands of pgdbg (PID {pgdbg}) or its guardian, which restore it when they end: wait for them (or end that pgdbg: kill {pgdbg})"
        )
    } else {
        format!("backend {pid} is being attached by a pgdbg right now: try again in a moment")
    }
}
