//! Facts about a process from /proc, read without stopping it.

use anyhow::{Result, anyhow};
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    /// Device ("fd:01") and inode of the mapped file (0 for anonymous).
    pub dev: String,
    pub inode: u64,
    pub path: Option<PathBuf>,
    /// The kernel's name of a mapping no file backs: `[stack]`, `[heap]`,
    /// `[vdso]`... (`path` is only ever a file's).
    pub special: Option<String>,
}

impl Mapping {
    /// Whether this is the kernel's mapping `name` (`[stack]`, `[heap]`).
    pub fn is_special(&self, name: &str) -> bool {
        self.special.as_deref() == Some(name)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Status {
    pub name: String,
    pub ppid: i32,
    pub tracer_pid: i32,
    pub uid: u32,
    pub state: String,
}

pub fn exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

pub fn status(pid: i32) -> Result<Status> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|_| anyhow!("no process with PID {pid}"))?;
    let mut st = Status::default();
    for line in s.lines() {
        let (k, v) = match line.split_once(':') {
            Some(x) => x,
            None => continue,
        };
        let v = v.trim();
        match k {
            "Name" => st.name = v.to_string(),
            "PPid" => st.ppid = v.parse().unwrap_or(0),
            "TracerPid" => st.tracer_pid = v.parse().unwrap_or(0),
            "Uid" => {
                st.uid = v
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0)
            }
            "State" => st.state = v.to_string(),
            _ => {}
        }
    }
    Ok(st)
}

/// The process title (argv as rewritten by the process), NULs as spaces.
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            let s: Vec<u8> = b.iter().map(|&c| if c == 0 { b' ' } else { c }).collect();
            String::from_utf8_lossy(&s).trim().to_string()
        })
        .unwrap_or_default()
}

/// Path of the executable as the kernel knows it (may end in " (deleted)").
pub fn exe_path(pid: i32) -> Result<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => anyhow!(
            "no permission to read /proc/{pid}/exe: run pgdbg as the user that owns the server, or as root"
        ),
        _ => anyhow!("cannot read /proc/{pid}/exe ({e}): is PID {pid} a live user process?"),
    })
}

pub fn maps(pid: i32) -> Result<Vec<Mapping>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| anyhow!("cannot read /proc/{pid}/maps ({e})"))?;
    let mut out = Vec::new();
    for line in s.lines() {
        let mut it = line.split_whitespace();
        let range = it.next().unwrap_or("");
        let perms = it.next().unwrap_or("").to_string();
        let offset = u64::from_str_radix(it.next().unwrap_or("0"), 16).unwrap_or(0);
        let dev = it.next().unwrap_or("").to_string();
        let inode = it.next().and_then(|i| i.parse().ok()).unwrap_or(0);
        let path: String = it.collect::<Vec<_>>().join(" ");
        let (a, b) = range.split_once('-').unwrap_or(("0", "0"));
        out.push(Mapping {
            start: u64::from_str_radix(a, 16).unwrap_or(0),
            end: u64::from_str_radix(b, 16).unwrap_or(0),
            perms,
            offset,
            dev,
            inode,
            special: path.starts_with('[').then(|| path.clone()),
            path: if path.starts_with('/') {
                Some(PathBuf::from(path))
            } else {
                None
            },
        });
    }
    Ok(out)
}

/// The auxiliary vector the kernel gave the process at exec
/// (/proc/PID/auxv): its (type, value) pairs up to and including AT_NULL.
pub fn auxv(pid: i32) -> std::io::Result<Vec<(u64, u64)>> {
    let b = std::fs::read(format!("/proc/{pid}/auxv"))?;
    let mut out = Vec::new();
    for c in b.chunks_exact(16) {
        let word = |w: &[u8]| u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        let (k, v) = (word(&c[..8]), word(&c[8..]));
        out.push((k, v));
        if k == libc::AT_NULL {
            break;
        }
    }
    Ok(out)
}

/// AT_ENTRY from /proc/PID/auxv: the runtime entry point of the executable.
pub fn auxv_entry(pid: i32) -> Option<u64> {
    auxv(pid)
        .ok()?
        .into_iter()
        .find_map(|(k, v)| (k == libc::AT_ENTRY).then_some(v))
}

/// The CPU the process last ran on (/proc/PID/stat field 39).
pub fn last_cpu(pid: i32) -> Option<usize> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the parenthesised command name
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// Run the calling thread on `cpu` only; returns the previous mask to
/// restore with `restore_affinity`.
pub fn pin_to_cpu(cpu: usize) -> Option<libc::cpu_set_t> {
    unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0 {
            return None;
        }
        if !libc::CPU_ISSET(cpu, &old) {
            return None;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) != 0 {
            return None;
        }
        Some(old)
    }
}

pub fn restore_affinity(old: &libc::cpu_set_t) {
    unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), old);
    }
}

/// Every process id in /proc.
pub fn all_pids() -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The children of `ppid` (from each process's status).
pub fn children_of(ppid: i32) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|p| status(*p).is_ok_and(|s| s.ppid == ppid))
        .collect()
}

/// The process's state letter (/proc/PID/stat field 3: R, S, D, T, t, Z,
/// X, ...).
pub fn state(pid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.get(s.rfind(')')? + 2..)?.chars().next()
}

/// When the process started, in clock ticks since boot (/proc/PID/stat
/// field 22): with the PID, names one process even after PID reuse.
pub fn start_time(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The process's PID in each PID namespace it is in (`NSpid` of
/// /proc/PID/status), from this /proc's namespace (the host's, `pid`) to
/// its own (the container's, the PID that PostgreSQL there writes in
/// `postmaster.pid`, `MyProc->pid` and process titles).  `[pid]` on a
/// kernel without `NSpid`.
pub fn ns_pids(pid: i32) -> Vec<i32> {
    nspid(pid).unwrap_or_else(|| vec![pid])
}

/// The `NSpid` line of the process's status; None when unreadable or
/// absent (a kernel before 4.1).
fn nspid(pid: i32) -> Option<Vec<i32>> {
    let v: Vec<i32> = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    (!v.is_empty()).then_some(v)
}

/// The PID the process knows itself by (its innermost namespace's): the
/// one PostgreSQL stores.  Equal to `pid` outside containers.
pub fn ns_pid(pid: i32) -> i32 {
    ns_pids(pid).last().copied().unwrap_or(pid)
}

/// The process's PID namespace (the target of /proc/PID/ns/pid).
pub fn pid_namespace(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// The host PID of the process that is `ns_pid` in the PID namespace of
/// process `of` (a container's PID, given with a process of that container).
pub fn host_pid_in_namespace_of(of: i32, ns_pid: i32) -> Option<i32> {
    host_pid_in_namespace(&pid_namespace(of)?, ns_pid)
}

/// The host PID of the process that is `ns_pid` in the PID namespace `ns`
/// (a target of /proc/PID/ns/pid): its own namespace is `ns` and its
/// `NSpid` ends with `ns_pid`, both read while its start time stayed the
/// same (not a PID that ended and was reused meanwhile).  None without
/// `NSpid` (a kernel before 4.1): the host PID is never taken for it.
pub fn host_pid_in_namespace(ns: &std::path::Path, ns_pid: i32) -> Option<i32> {
    all_pids().into_iter().find(|&p| {
        let Some(t0) = start_time(p) else {
            return false;
        };
        nspid(p).and_then(|v| v.last().copied()) == Some(ns_pid)
            && pid_namespace(p).as_deref() == Some(ns)
            && start_time(p) == Some(t0)
    })
}

/// Device and inode of a file (following symbolic links).
pub fn dev_ino(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

/// The process's root directory is not pgdbg's (a container, a chroot):
/// the paths it maps and names are not the host's.
pub fn root_differs(pid: i32) -> bool {
    match (
        dev_ino(std::path::Path::new(&format!("/proc/{pid}/root"))),
        dev_ino(std::path::Path::new("/proc/self/root")),
    ) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    }
}

/// `path` as the process sees it, reachable from pgdbg: itself when the
/// process shares pgdbg's root, else `/proc/PID/root/<path>` (the way
/// into a container's files without entering its namespaces; `setns`
/// would fail in pgdbg, which has threads).
pub fn in_root_of(pid: i32, path: &std::path::Path) -> PathBuf {
    if !root_differs(pid) {
        return path.to_path_buf();
    }
    let rel = path.strip_prefix("/").unwrap_or(path);
    PathBuf::from(format!("/proc/{pid}/root")).join(rel)
}

/// "fd:01" (as in /proc/PID/maps) as a `dev_t`.
pub(crate) fn parse_dev(s: &str) -> Option<u64> {
    let (ma, mi) = s.split_once(':')?;
    let ma = u32::from_str_radix(ma, 16).ok()?;
    let mi = u32::from_str_radix(mi, 16).ok()?;
    Some(libc::makedev(ma, mi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_namespace() {
        let me = std::process::id() as i32;
        assert_eq!(ns_pid(me), *ns_pids(me).last().unwrap());
        assert!(!root_differs(me));
        assert_eq!(
            in_root_of(me, std::path::Path::new("/etc")),
            PathBuf::from("/etc")
        );
        assert_eq!(parse_dev("fd:01"), Some(libc::makedev(0xfd, 1)));
    }
}
