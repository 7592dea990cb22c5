//! May this process ptrace a target?  The kernel answers a refused
//! `PTRACE_SEIZE` with a bare EPERM; this names the cause and the fix in
//! one line, before anything is touched: the target runs as another user,
//! root without CAP_SYS_PTRACE (a container), or the Yama LSM's
//! `kernel.yama.ptrace_scope` (1: only one's own descendants, 2: only
//! CAP_SYS_PTRACE, 3: nobody).  The rules are the kernel's
//! (`__ptrace_may_access` and Yama's `yama_ptrace_access_check`) for an
//! attach with real credentials.

/// Capability bits in the capability sets.
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

/// How each runtime grants CAP_SYS_PTRACE (Kubernetes' `sysadmin` debug
/// profile is privileged: every capability, no seccomp filter).
const GRANT_PTRACE: &str = "docker run --cap-add=SYS_PTRACE; Kubernetes: kubectl debug --profile=sysadmin, or securityContext.capabilities.add: [SYS_PTRACE]";

/// How each runtime grants CAP_PERFMON.
pub const GRANT_PERFMON: &str = "docker run --cap-add=PERFMON; Kubernetes: kubectl debug --profile=sysadmin, or securityContext.capabilities.add: [PERFMON]; on a host: setcap cap_perfmon,cap_sys_ptrace+ep on the pgdbg binary";

/// How each runtime lifts a seccomp filter.
pub const LIFT_SECCOMP: &str = "docker run --security-opt seccomp=unconfined; Kubernetes: kubectl debug --profile=sysadmin, or securityContext.seccompProfile.type: Unconfined";

/// What /proc/PID/status says about credentials.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Creds {
    /// real, effective, saved, filesystem
    pub uid: [u32; 4],
    pub gid: [u32; 4],
    pub cap_eff: u64,
    pub ppid: i32,
    /// `Seccomp:` 2 when a filter applies to the process
    pub seccomp: u32,
}

impl Creds {
    /// CAP_PERFMON, or CAP_SYS_ADMIN (which grants it, and is what
    /// kernels before 5.8 check).
    pub fn perfmon(&self) -> bool {
        self.cap_eff & (1 << CAP_PERFMON | 1 << CAP_SYS_ADMIN) != 0
    }

    pub fn seccomp_filtered(&self) -> bool {
        self.seccomp == 2
    }
}

/// pgdbg's own credentials (/proc/self/status).
pub fn own() -> Creds {
    creds(&std::fs::read_to_string("/proc/self/status").unwrap_or_default())
}

pub fn creds(status: &str) -> Creds {
    let ids = |v: &str| {
        let mut a = [u32::MAX; 4];
        for (slot, x) in a.iter_mut().zip(v.split_whitespace()) {
            *slot = x.parse().unwrap_or(u32::MAX);
        }
        a
    };
    let mut c = Creds::default();
    for line in status.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k {
            "Uid" => c.uid = ids(v),
            "Gid" => c.gid = ids(v),
            "CapEff" => c.cap_eff = u64::from_str_radix(v.trim(), 16).unwrap_or(0),
            "PPid" => c.ppid = v.trim().parse().unwrap_or(0),
            "Seccomp" => c.seccomp = v.trim().parse().unwrap_or(0),
            _ => {}
        }
    }
    c
}

/// The user name of `uid` on this machine (/etc/passwd), if it has one (a
/// container's user may have none here, or another name than inside).
fn user_name(uid: u32) -> Option<String> {
    std::fs::read_to_string("/etc/passwd").ok().and_then(|p| {
        p.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2].parse::<u32>().ok() == Some(uid)).then(|| f[0].to_string())
        })
    })
}

/// `NAME (uid N)`, or `uid N` when this machine has no name for it.
fn who(uid: u32, name: &dyn Fn(u32) -> Option<String>) -> String {
    match name(uid) {
        Some(n) => format!("{n} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// The user as `sudo -u` takes it: the name, else `'#N'`.
fn sudo_user(uid: u32, name: &dyn Fn(u32) -> Option<String>) -> String {
    name(uid).unwrap_or_else(|| format!("'#{uid}'"))
}

/// Whether `pid` descends from this process (Yama scope 1 allows those).
fn is_descendant(mut pid: i32, me: i32) -> bool {
    for _ in 0..64 {
        if pid == me {
            return true;
        }
        if pid <= 1 {
            return false;
        }
        let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return false;
        };
        pid = creds(&s).ppid;
    }
    false
}

/// The decision, from the facts (unit-tested without a kernel): None when
/// an attach may go ahead.
pub fn decide(
    pid: i32,
    me: &Creds,
    target: &Creds,
    yama: Option<u32>,
    descendant: bool,
    name: &dyn Fn(u32) -> Option<String>,
) -> Option<String> {
    let cap = me.cap_eff & (1 << CAP_SYS_PTRACE) != 0;
    if yama == Some(3) {
        return Some(format!(
            "no permission to trace process {pid}: kernel.yama.ptrace_scope = 3 forbids every ptrace attach on this machine (only a reboot lowers it); pgdbg cannot work here"
        ));
    }
    if cap {
        return None;
    }
    // the kernel compares our real uid/gid with the target's real,
    // effective and saved ones
    let same = target.uid[..3].iter().all(|u| *u == me.uid[0])
        && target.gid[..3].iter().all(|g| *g == me.gid[0]);
    if !same {
        let uid = target.uid[0];
        let owner = who(uid, name);
        if me.uid[0] == 0 {
            return Some(format!(
                "no permission to trace process {pid}: pgdbg runs as root but without CAP_SYS_PTRACE (a container or a reduced capability set): give it that capability ({GRANT_PTRACE}; systemd: AmbientCapabilities=CAP_SYS_PTRACE) or run pgdbg as {owner}, the user the server runs as"
            ));
        }
        return Some(format!(
            "no permission to trace process {pid}: it runs as {owner} and pgdbg as {} without CAP_SYS_PTRACE: run pgdbg as the server's user (sudo -u {} pgdbg attach {pid}; in a pod: securityContext.runAsUser: {uid}) or as root with CAP_SYS_PTRACE ({GRANT_PTRACE})",
            who(me.uid[0], name),
            sudo_user(uid, name),
        ));
    }
    match yama {
        Some(2) => Some(format!(
            "no permission to trace process {pid}: kernel.yama.ptrace_scope = 2 lets only root (CAP_SYS_PTRACE) trace: run pgdbg as root (sudo pgdbg attach {pid})"
        )),
        Some(1) if !descendant => Some(format!(
            "no permission to trace process {pid}: kernel.yama.ptrace_scope = 1 lets a user trace only its own child processes: run pgdbg as root (sudo pgdbg attach {pid}), give it CAP_SYS_PTRACE (setcap cap_sys_ptrace+ep on the pgdbg binary), or allow it with sysctl kernel.yama.ptrace_scope=0"
        )),
        _ => None,
    }
}

/// The kernel's rules (credentials, Yama, a seccomp filter, a security
/// module) do not let pgdbg trace the process: the cause and the fix, in
/// one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Why `PTRACE_SEIZE` of `pid` failed with EPERM although the
/// credentials allow it ([`refusal`] said None), in one line: another
/// tracer, a seccomp filter on pgdbg (a container's profile answers
/// EPERM), else a security module.
pub fn seize_refused(pid: i32) -> String {
    if let Some(why) = refusal(pid) {
        return why;
    }
    // a process has one tracer: another took it (between a check and the
    // seize, or a worker started ahead that heard of the same fork)
    if let Some(st) = super::procfs::status(pid).ok().filter(|s| s.tracer_pid > 0) {
        let who = super::procfs::status(st.tracer_pid)
            .map(|s| s.name)
            .unwrap_or_else(|_| "?".into());
        return format!(
            "process {pid} is already traced by PID {} ({who}): detach that debugger first",
            st.tracer_pid
        );
    }
    if own().seccomp_filtered() {
        return format!(
            "no permission to trace process {pid}: the kernel refused ptrace and pgdbg runs under a seccomp filter (Seccomp: 2 in /proc/self/status), as a container's profile may deny ptrace: run pgdbg with a profile that allows ptrace ({LIFT_SECCOMP})"
        );
    }
    format!(
        "no permission to trace process {pid}: the kernel refused ptrace although pgdbg's user and capabilities allow it: a security module (AppArmor, SELinux) may deny it: run pgdbg unconfined (docker run --security-opt apparmor=unconfined) or check the kernel log"
    )
}

/// Why this process may not trace `pid`, in one line; None when it may
/// (as far as the kernel's rules can be read from /proc).
pub fn refusal(pid: i32) -> Option<String> {
    let me = creds(&std::fs::read_to_string("/proc/self/status").ok()?);
    let target = creds(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?);
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let descendant = yama == Some(1) && is_descendant(pid, std::process::id() as i32);
    decide(pid, &me, &target, yama, descendant, &user_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(uid: u32, cap: bool) -> Creds {
        Creds {
            uid: [uid; 4],
            gid: [uid; 4],
            cap_eff: if cap { 1 << CAP_SYS_PTRACE } else { 0 },
            ppid: 1,
            seccomp: 0,
        }
    }

    fn name(u: u32) -> Option<String> {
        match u {
            0 => Some("root".into()),
            105 => Some("postgres".into()),
            _ => None,
        }
    }

    #[test]
    fn parses_status() {
        let s = "Name:\tpostgres\nPPid:\t42\nUid:\t105\t105\t105\t105\nGid:\t110\t110\t110\t110\nCapEff:\t000001ffffffffff\nSeccomp:\t2\n";
        let cr = creds(s);
        assert!(cr.seccomp_filtered() && cr.perfmon());
        assert_eq!(cr.uid, [105; 4]);
        assert_eq!(cr.gid, [110; 4]);
        assert_eq!(cr.ppid, 42);
        assert!(cr.cap_eff & (1 << CAP_SYS_PTRACE) != 0);
    }

    #[test]
    fn causes_and_fixes() {
        let pg = c(105, false);
        // root with the capability, or the same user without Yama: fine
        assert_eq!(decide(7, &c(0, true), &pg, None, false, &name), None);
        assert_eq!(decide(7, &c(105, false), &pg, Some(0), false, &name), None);
        // another user
        let m = decide(7, &c(1000, false), &pg, None, false, &name).unwrap();
        assert!(
            m.contains("runs as postgres (uid 105) and pgdbg as uid 1000"),
            "{m}"
        );
        assert!(m.contains("securityContext.runAsUser: 105"), "{m}");
        assert!(m.contains("sudo -u postgres pgdbg attach 7"), "{m}");
        // a user this machine has no name for (a container's): the number,
        // as sudo takes it
        let other = c(999, false);
        let m = decide(7, &c(1000, false), &other, None, false, &name).unwrap();
        assert!(m.contains("runs as uid 999 and pgdbg as uid 1000"), "{m}");
        assert!(m.contains("sudo -u '#999' pgdbg attach 7"), "{m}");
        assert!(m.contains("securityContext.runAsUser: 999"), "{m}");
        let m = decide(7, &c(0, false), &other, None, false, &name).unwrap();
        assert!(m.contains("or run pgdbg as uid 999, the user"), "{m}");
        assert!(!m.contains("(uid 999)"), "{m}");
        // root without CAP_SYS_PTRACE
        let m = decide(7, &c(0, false), &pg, None, false, &name).unwrap();
        assert!(m.contains("without CAP_SYS_PTRACE"), "{m}");
        assert!(m.contains("kubectl debug --profile=sysadmin"), "{m}");
        assert!(m.contains("capabilities.add: [SYS_PTRACE]"), "{m}");
        // Yama
        let m = decide(7, &c(105, false), &pg, Some(1), false, &name).unwrap();
        assert!(m.contains("ptrace_scope = 1"), "{m}");
        assert_eq!(decide(7, &c(105, false), &pg, Some(1), true, &name), None);
        assert_eq!(decide(7, &c(0, true), &pg, Some(1), false, &name), None);
        let m = decide(7, &c(105, false), &pg, Some(2), false, &name).unwrap();
        assert!(m.contains("ptrace_scope = 2"), "{m}");
        let m = decide(7, &c(0, true), &pg, Some(3), false, &name).unwrap();
        assert!(m.contains("ptrace_scope = 3"), "{m}");
        for m in [
            decide(7, &c(1000, false), &pg, Some(1), false, &name).unwrap(),
            decide(7, &c(0, false), &pg, Some(2), false, &name).unwrap(),
        ] {
            assert!(!m.contains('\n') && m.starts_with("no permission"), "{m}");
        }
    }
}
