//! The kernel's `uprobe_events` file under tracefs: lines appended to it
//! (a definition, `-:group/name` to remove one) and pgdbg's definitions
//! removed, by name or by group (`pgdbg_<pid>_<start time>`).  Below both
//! `tracefs.rs`, which defines them, and `keeper.rs`, which removes them
//! once their events are closed or pgdbg is gone.

use std::io::Write;
use std::path::Path;

pub(super) fn append(root: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("uprobe_events"))?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// Remove definition `ev` (`group/name`) under `root`.  Best effort.
pub(super) fn remove(root: &Path, ev: &str) {
    if let Err(e) = append(root, &format!("-:{ev}")) {
        crate::inferior::log::debug(&format!("uprobe definition {ev} not removed ({e})"));
    }
}

/// Remove the definitions that `drop_it` says to remove
/// (given the group's pid and start time).  Best effort.
pub(super) fn remove_where(root: &Path, mut drop_it: impl FnMut(&str, &str) -> bool) {
    let Ok(text) = std::fs::read_to_string(root.join("uprobe_events")) else {
        return;
    };
    for line in text.lines() {
        // "p:pgdbg_123_456/m0 /path:0x... args"
        let Some(ev) = line.split_whitespace().next().and_then(|w| w.get(2..)) else {
            continue;
        };
        let Some((group, _)) = ev.split_once('/') else {
            continue;
        };
        let Some((pid, started)) = group.strip_prefix("pgdbg_").and_then(|p| p.split_once('_'))
        else {
            continue;
        };
        if drop_it(pid, started) {
            let _ = append(root, &format!("-:{ev}"));
        }
    }
}

/// Remove the definitions of pgdbg `pid` started at `start` (its keeper,
/// once pgdbg is gone and the events are closed).  Tracefs is not mounted
/// for this.  Best effort.
pub fn remove_group_of(pid: u32, start: u64) {
    for d in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let root = Path::new(d);
        if root.join("uprobe_events").exists() {
            remove_where(root, |p, s| p == pid.to_string() && s == start.to_string());
            return;
        }
    }
}
