//! The workers `pgdbg attach --cluster` starts ahead (the spares that
//! take each new backend at its fork), seen from /proc: shared by the
//! tests that need them listening before a workload starts.

use super::wait_until;
use std::time::Duration;

/// The fork server among the supervisor `sup`'s children (the process
/// the workers started ahead are forked from), if it has one.
pub fn fork_server(sup: i32) -> Option<i32> {
    children(sup)
        .into_iter()
        .find(|&c| has_arg(c, b"--fork-server"))
}

/// Whether process `pid` runs with `arg` on its command line.
fn has_arg(pid: i32, arg: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .any(|a| a == arg)
}

/// The supervisor `sup`'s workers: its children, and the fork server's
/// in place of the fork server (not its keeper of uprobe events, started
/// when it opens one of its own: a script served by uprobes inherited from
/// the postmaster).
pub fn workers(sup: i32) -> Vec<i32> {
    let server = fork_server(sup);
    let mut w: Vec<i32> = children(sup)
        .into_iter()
        .filter(|&c| Some(c) != server && !has_arg(c, b"__pgdbg_keeper"))
        .collect();
    w.extend(server.map(children).unwrap_or_default());
    w
}

/// How many of the supervisor `sup`'s workers hold a socket of the kernel's
/// process events connector (netlink protocol 11) bound to its group (a
/// fork from then on is heard): the workers started ahead that are
/// listening for forks (each closes it once it took one).
pub fn spares_listening(sup: i32) -> usize {
    let connector: std::collections::HashSet<String> =
        std::fs::read_to_string(format!("/proc/{sup}/net/netlink"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let bound = w
                    .get(3)
                    .is_some_and(|g| !g.trim_start_matches('0').is_empty());
                (w.get(1) == Some(&"11") && bound).then(|| w.last().unwrap().to_string())
            })
            .collect();
    workers(sup)
        .into_iter()
        .filter(|c| {
            std::fs::read_dir(format!("/proc/{c}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .any(|t| {
                    t.to_str()
                        .and_then(|t| t.strip_prefix("socket:["))
                        .and_then(|t| t.strip_suffix(']'))
                        .is_some_and(|i| connector.contains(i))
                })
        })
        .count()
}

/// Wait until the supervisor `sup` keeps its 3 workers started ahead
/// listening for forks and has no other worker left (the workers of
/// earlier sessions have ended: their uprobes are closed).
pub fn spares_ready(sup: i32) {
    wait_until(
        "3 workers started ahead listening for forks, no other worker",
        Duration::from_secs(60),
        || {
            let n = spares_listening(sup);
            n >= 3 && workers(sup).len() == n
        },
    );
}

pub fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}
