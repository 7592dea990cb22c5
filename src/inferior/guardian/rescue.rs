//! A backend that pgdbg and its guardian both left behind (killed together:
//! `pkill -9 -f pgdbg`, a cgroup kill, the OOM killer taking the group):
//! found by its table file (file.rs) or by its state (stopped, no tracer),
//! shown by `pgdbg ps`, restored by `pgdbg rescue PID` and before the next
//! `pgdbg attach PID`, exactly as the guardian restores it.

use super::{
    IN_GUARDIAN, MAGIC, MAGIC_EARLIER, MAGIC_UA2, Shared, W_GUARDIAN, W_GUARDIAN_START, W_MAGIC,
    W_PGDBG, W_PGDBG_START, W_START, file, restore::restore,
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
    /// A record in the layout of an earlier pgdbg (`MAGIC_EARLIER`): this
    /// pgdbg does not read it (its words are elsewhere); that version's
    /// `pgdbg rescue` restores the backend.  Nothing is done to it here.
    Earlier { path: PathBuf },
    /// Stopped (job control) with no tracer and no record.
    Stopped,
}

/// Whether the process `pid` that started at `start` (clock ticks after
/// boot) still runs: a reused PID is another process; a zombie its parent
/// has not reaped yet is dead all the same, once no thread of it is left
/// (one may still hold its files: a perf breakpoint, perfwatch.rs; a
/// pgdbg killed a moment ago is waited for while its threads end).
fn alive(pid: i32, start: u64) -> bool {
    if pid <= 0 || procfs::start_time(pid) != Some(start) {
        return false;
    }
    crate::inferior::perfwatch::wait_exit(pid);
    !crate::inferior::perfwatch::ended(pid)
}

/// A record written by an earlier pgdbg, in another layout (`map`).
#[derive(Debug)]
pub struct EarlierRecord;

impl std::fmt::Display for EarlierRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("written by an earlier version of pgdbg, in another layout")
    }
}

impl std::error::Error for EarlierRecord {}

/// What the record's first word says: `Ok` for this pgdbg's layout and
/// the one before it (`MAGIC_UA2`: the same words, with 21-23 zero, i.e.
/// no pipe, restored as that pgdbg did), `EarlierRecord` for the older
/// one (never read, never removed: its pgdbg's int3s may still be in the
/// backend), else not a record.
fn check_magic(word0: u64, path: &std::path::Path) -> Result<()> {
    match word0 {
        MAGIC | MAGIC_UA2 => Ok(()),
        MAGIC_EARLIER => Err(EarlierRecord.into()),
        _ => bail!("{} is not a pgdbg record: remove it", path.display()),
    }
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
    // the magic first: an earlier layout's record is shorter, and must not
    // be called "not a pgdbg record"
    let file = std::fs::File::from(fd);
    let mut w0 = [0u8; 8];
    if std::os::unix::fs::FileExt::read_exact_at(&file, &mut w0, 0).is_ok() {
        check_magic(u64::from_le_bytes(w0), path)?;
    }
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len < super::BYTES as u64 {
        bail!(
            "{} is not a pgdbg record (too short): remove it",
            path.display()
        );
    }
    let sh = Shared::map(file.as_raw_fd())?;
    check_magic(sh.get(W_MAGIC), path)?;
    let release = [
        super::W_RELEASE,
        super::W_RELEASE_ASK,
        super::W_RELEASE_TAKEN,
    ];
    if sh.get(W_MAGIC) == MAGIC_UA2 && release.iter().any(|&w| sh.get(w) != 0) {
        // not the layout read as the previous one: left alone
        return Err(EarlierRecord.into());
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
            Err(e) if e.is::<EarlierRecord>() => return Some(Left::Earlier { path }),
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
        Some(Left::Earlier { path }) => bail!("{}", earlier(pid, &path)),
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

/// Why a backend cannot be rescued or attached by this pgdbg: an earlier
/// version left its record (and perhaps its int3s) there.
pub fn earlier(pid: i32, path: &std::path::Path) -> String {
    format!(
        "backend {pid}: pgdbg's record {} was written by an earlier version of pgdbg: run that version's 'pgdbg rescue {pid}'; nothing was done to the backend",
        path.display()
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    /// A record file of `len` bytes starting with `magic`, mode 0600.
    fn record(name: &str, magic: u64, len: usize) -> PathBuf {
        let p = std::env::temp_dir().join(format!("pgdbg-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)
            .unwrap();
        f.write_all(&magic.to_le_bytes()).unwrap();
        f.set_len(len as u64).unwrap();
        p
    }

    #[test]
    fn an_earlier_layout_is_told_apart_from_the_current_one() {
        // an earlier pgdbg checks for its own magic: a record of this
        // layout must not carry it (it would read detours 8 words apart)
        assert_ne!(MAGIC, MAGIC_EARLIER);
        assert_ne!(MAGIC, MAGIC_UA2);
        let p = std::path::Path::new("/x");
        assert!(check_magic(MAGIC, p).is_ok());
        assert!(check_magic(MAGIC_UA2, p).is_ok());
        assert!(
            check_magic(MAGIC_EARLIER, p)
                .unwrap_err()
                .is::<EarlierRecord>()
        );
        let other = check_magic(0, p).unwrap_err();
        assert!(!other.is::<EarlierRecord>());
        assert!(format!("{other:#}").contains("not a pgdbg record"));
    }

    #[test]
    fn a_record_of_an_earlier_pgdbg_is_left_to_that_version() {
        let me = std::process::id() as i32;
        // the earlier layout: detours of 8 words, so 16 words shorter
        let earlier = super::super::BYTES - super::super::DETOUR_SLOTS * 8;
        let p = record("earlier", MAGIC_EARLIER, earlier);
        let e = map(&p, me).err().expect("an earlier record is not read");
        assert!(e.is::<EarlierRecord>(), "{e:#}");
        let msg = super::earlier(me, &p);
        assert!(msg.contains("earlier version of pgdbg") && msg.contains("pgdbg rescue"));
        assert!(!msg.contains("remove"), "{msg}");
        assert!(p.exists(), "the record is kept");
        let _ = std::fs::remove_file(&p);
        // this layout's record is read
        let p = record("current", MAGIC, super::super::BYTES);
        assert!(map(&p, me).is_ok());
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn a_record_of_the_previous_layout_is_restored_without_a_pipe() {
        let me = std::process::id() as i32;
        // the previous layout: the same size, words 21-23 unused (zero)
        let p = record("ua2", MAGIC_UA2, super::super::BYTES);
        let sh = map(&p, me).expect("a record of the previous layout is read");
        assert_eq!(sh.get(W_MAGIC), MAGIC_UA2);
        let w = sh.get(super::super::W_RELEASE);
        assert_eq!(w, 0);
        assert!(
            crate::inferior::selfrelease::Release::from_word(w).is_none(),
            "no pipe, no SIGCONT action: the restore of that version"
        );
        drop(sh);
        // the same magic with a pipe's words set: not that layout
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        let at = (super::super::W_RELEASE_ASK * 8) as u64;
        std::os::unix::fs::FileExt::write_all_at(&f, &1u64.to_le_bytes(), at).unwrap();
        let e = map(&p, me).err().expect("such a record is not read");
        assert!(e.is::<EarlierRecord>(), "{e:#}");
        let _ = std::fs::remove_file(&p);
    }
}
