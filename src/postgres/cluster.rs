//! A cluster's processes: the postmaster behind a data or socket
//! directory, and its client backends with what their process titles say
//! (`postgres: USER DATABASE HOST STATE`).  Reads /proc only.

use super::{ProcessKind, classify};
use crate::inferior::procfs;
use anyhow::{Result, anyhow, bail};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Backend {
    pub pid: i32,
    pub user: String,
    pub database: String,
    pub client: String,
    /// idle, active, "idle in transaction", or the command tag shown while
    /// a statement runs (SELECT, EXECUTE, ...).
    pub state: String,
}

/// The postmaster's PID from a data directory (`postmaster.pid`) or a
/// socket directory (`.s.PGSQL.PORT.lock`).
pub fn postmaster_of(dir: &Path) -> Result<i32> {
    let mut candidates = vec![dir.join("postmaster.pid")];
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut locks: Vec<_> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(".s.PGSQL.") && n.ends_with(".lock"))
            })
            .collect();
        locks.sort();
        candidates.extend(locks);
    } else if let Some(h) = postmaster_in_other_root(dir)? {
        return Ok(h);
    } else {
        bail!(
            "cannot read directory {}: give the data directory or the socket directory of a running cluster",
            dir.display()
        );
    }
    for c in candidates {
        let Ok(text) = std::fs::read_to_string(&c) else {
            continue;
        };
        let Some(pid) = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 0 {
            continue;
        }
        // the lock file of a socket directory names the data directory
        // on its second line, as the server sees it
        let data = match c.file_name().is_some_and(|n| n == "postmaster.pid") {
            true => None,
            false => text
                .lines()
                .nth(1)
                .map(|l| Path::new(l.trim()).to_path_buf()),
        };
        let serves = |host: i32| match &data {
            None => cwd_is(host, dir),
            Some(d) => cwd_is(host, &procfs::in_root_of(host, d)),
        };
        let postmaster = |p: i32| classify(p).is_ok_and(|k| k == ProcessKind::Postmaster);
        // the PID as this machine's: a server outside containers (its
        // working directory unreadable to another user: trusted as before)
        if procfs::ns_pid(pid) == pid && postmaster(pid) && serves(pid) != Some(false) {
            return Ok(pid);
        }
        // a server in a container wrote the PID of its own namespace (1
        // when the postmaster is the container's first process): the
        // postmaster whose innermost PID it is and whose data directory
        // this is
        if let Some(h) = postmasters()
            .into_iter()
            .find(|h| procfs::ns_pid(*h) == pid && *h != pid && serves(*h) == Some(true))
        {
            return Ok(h);
        }
        if let Some(h) = postmaster_in_other_root(dir)? {
            return Ok(h);
        }
        bail!(
            "{} names PID {pid}, which is not a running postmaster of this directory (here or in a container's PID namespace): is the cluster stopped?",
            c.display()
        );
    }
    if let Some(h) = postmaster_in_other_root(dir)? {
        return Ok(h);
    }
    Err(anyhow!(
        "no postmaster.pid or .s.PGSQL.*.lock in {}: give the data directory or the socket directory of a running cluster",
        dir.display()
    ))
}

/// The postmaster whose data directory is `dir` as its own root names it
/// (a container's path, given where pgdbg's root is another: on the host,
/// or in a sidecar container that shares only the server's PID
/// namespace): it works in `/proc/PID/root/<dir>`, and that directory's
/// `postmaster.pid` names the PID it knows itself by.  Several containers
/// may each name their data directory `dir` (`/data`, say): then which one
/// is meant is asked, never guessed.
fn postmaster_in_other_root(dir: &Path) -> Result<Option<i32>> {
    if !dir.is_absolute() {
        return Ok(None);
    }
    let found: Vec<i32> = postmasters()
        .into_iter()
        .filter(|&h| {
            if !procfs::root_differs(h) {
                return false;
            }
            let d = procfs::in_root_of(h, dir);
            let named = std::fs::read_to_string(d.join("postmaster.pid"))
                .ok()
                .and_then(|t| t.lines().next()?.trim().parse::<i32>().ok());
            named == Some(procfs::ns_pid(h)) && cwd_is(h, &d) == Some(true)
        })
        .collect();
    match found[..] {
        [] => Ok(None),
        [h] => Ok(Some(h)),
        _ => {
            let each: Vec<String> = found
                .iter()
                .map(|h| format!("/proc/{h}/root{}", dir.display()))
                .collect();
            bail!(
                "{} is the data directory of {} postmasters, each in its own root (PIDs {}): give one as this machine sees it ({})",
                dir.display(),
                found.len(),
                found
                    .iter()
                    .map(|h| h.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                each.join(" or ")
            )
        }
    }
}

/// Whether process `pid` works in directory `dir` (a postmaster works in
/// its data directory); None when its working directory is unreadable.
fn cwd_is(pid: i32, dir: &Path) -> Option<bool> {
    let cwd = procfs::dev_ino(Path::new(&format!("/proc/{pid}/cwd")))?;
    Some(procfs::dev_ino(dir) == Some(cwd))
}

/// Every running postmaster on this machine.
pub fn postmasters() -> Vec<i32> {
    procfs::all_pids()
        .into_iter()
        .filter(|p| classify(*p).is_ok_and(|k| k == ProcessKind::Postmaster))
        .collect()
}

/// The client backends of a postmaster, by PID.
///
/// A child still under the postmaster's title has not said what it is
/// yet (an autovacuum or parallel worker just forked looks like a client
/// backend, its title read as user, database and client): left out, the
/// next look decides.
pub fn backends(postmaster: i32) -> Vec<Backend> {
    let pm_title = procfs::cmdline(postmaster);
    procfs::children_of(postmaster)
        .into_iter()
        .filter(|&pid| procfs::cmdline(pid) != pm_title)
        .filter_map(|pid| match classify(pid) {
            Ok(ProcessKind::ClientBackend { title }) => parse_title(pid, &title),
            _ => None,
        })
        .collect()
}

/// `USER DATABASE HOST STATE...` (after "postgres: "), with an optional
/// leading `CLUSTER_NAME:`.
pub fn parse_title(pid: i32, title: &str) -> Option<Backend> {
    let mut words: Vec<&str> = title.split_whitespace().collect();
    if words.first().is_some_and(|w| w.ends_with(':')) {
        words.remove(0);
    }
    if words.len() < 3 {
        return None;
    }
    Some(Backend {
        pid,
        user: words[0].to_string(),
        database: words[1].to_string(),
        client: words[2].to_string(),
        state: words[3..].join(" "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        let b = parse_title(7, "pgdbg postgres [local] idle in transaction").unwrap();
        assert_eq!(
            (
                b.user.as_str(),
                b.database.as_str(),
                b.client.as_str(),
                b.state.as_str()
            ),
            ("pgdbg", "postgres", "[local]", "idle in transaction")
        );
        let b = parse_title(7, "main: alice shop 10.0.0.5(51234) SELECT").unwrap();
        assert_eq!((b.user.as_str(), b.state.as_str()), ("alice", "SELECT"));
        assert!(parse_title(7, "checkpointer").is_none());
    }

    /// A directory looked up in other roots: only an absolute path, and
    /// only a postmaster working there (none has this directory).
    #[test]
    fn other_roots() {
        assert_eq!(postmaster_in_other_root(Path::new("data")).unwrap(), None);
        assert_eq!(
            postmaster_in_other_root(Path::new("/nonexistent-pgdbg-test-dir")).unwrap(),
            None
        );
        let e = postmaster_of(Path::new("/nonexistent-pgdbg-test-dir")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read directory /nonexistent-pgdbg-test-dir: "),
            "{e}"
        );
    }
}
