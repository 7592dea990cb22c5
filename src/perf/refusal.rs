//! Why the kernel refused a perf event, in one line: the cause first
//! (a seccomp filter, no CAP_PERFMON, perf_event_paranoid, no such PMU,
//! no free breakpoint slot) and what to grant in a container or on a host.

use anyhow::anyhow;

/// Why the kernel refused a perf event with EACCES or EPERM, and what to
/// grant: a seccomp filter on pgdbg (a container's profile answers
/// EPERM), no CAP_PERFMON (kernel uprobes and the scheduler's tracepoint
/// need it, every event does above perf_event_paranoid 2), else, with
/// CAP_PERFMON, a security module or a seccomp profile.
pub fn permission_why(err: &std::io::Error, paranoid: &str) -> String {
    use crate::inferior::permission::{GRANT_PERFMON, LIFT_SECCOMP, own};
    let me = own();
    if err.raw_os_error() == Some(libc::EPERM) && me.seccomp_filtered() {
        format!(
            "perf_event_open refused ({err}) and pgdbg runs under a seccomp filter (Seccomp: 2 in \
             /proc/self/status), as a container's profile may deny perf_event_open: run pgdbg \
             with a profile that allows it ({LIFT_SECCOMP})"
        )
    } else if !me.perfmon() {
        format!(
            "perf_event_open refused ({err}; perf_event_paranoid = {paranoid}): pgdbg has no \
             CAP_PERFMON (kernel uprobes and tracepoints need it, every perf event where \
             perf_event_paranoid > 2): grant it, with CAP_SYS_PTRACE when the server runs as \
             another user ({GRANT_PERFMON})"
        )
    } else {
        format!(
            "perf_event_open refused ({err}; perf_event_paranoid = {paranoid}) although pgdbg has \
             CAP_PERFMON: a security module or a seccomp profile may deny it; allow \
             perf_event_open ({LIFT_SECCOMP})"
        )
    }
}

/// What a container or a host must grant when the kernel refuses, in one
/// line (the cause first).
pub fn refused_line(what: &str, pid: i32, err: &std::io::Error) -> String {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    if let Some(no) = super::pmu::no_sysfs(err) {
        return format!("{what} on process {pid}: {no}");
    }
    let why = match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => permission_why(err, &paranoid),
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
            format!("this kernel or machine has no such perf event ({err})")
        }
        Some(libc::ENOSPC) => format!(
            "no hardware breakpoint slot is free for this thread ({err}): a debugger or tracer \
             holds them, or watchpoints set through ptrace earlier still reserve them (the \
             kernel frees those when the backend exits); the ptrace mode (--ptrace) uses a debug register of its own"
        ),
        Some(libc::ESRCH) => format!("process {pid} is gone"),
        _ => format!("perf_event_open failed: {err}"),
    };
    format!("{what} on process {pid}: {why}")
}

/// The kernel refused a perf event (permissions, a missing PMU, no free
/// breakpoint slot, ...): a command with a ptrace mode may run that
/// instead (nothing was changed in the backend).  Not for a process that
/// is gone.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Whether `e` is the kernel refusing a perf event (see [`Refused`]).
pub fn refused(e: &anyhow::Error) -> Option<&Refused> {
    e.downcast_ref::<Refused>()
}

/// A short error for a failed open: a [`Refused`] unless the process is
/// gone.
pub fn open_error(what: &str, pid: i32, e: std::io::Error) -> anyhow::Error {
    let line = refused_line(what, pid, &e);
    if e.raw_os_error() == Some(libc::ESRCH) {
        anyhow!(line)
    } else {
        anyhow::Error::new(Refused(line))
    }
}
