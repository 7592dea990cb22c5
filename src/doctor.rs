//! `pgdbg doctor [PID]`: checks a host before an incident, without
//! touching any server process (it reads /proc, /sys and files only; the
//! one system call it tries, a perf event, is opened on pgdbg itself).
//!
//! Each check ends as `ok`, `warn` (pgdbg works, with less: a fallback or
//! a command that will be refused) or `FAIL` (pgdbg cannot attach, or
//! cannot read the server's structures), with what was found and, when
//! not ok, what to install or set.  The exit status is 1 when any check
//! failed, else 0.

use crate::debuginfo::elf::{ElfImage, find_debug_file};
use crate::inferior::mappedfile::{VerifiedFile, verified_mapped_file};
use crate::inferior::{permission, procfs};
use crate::postgres::cluster;
use anyhow::{Result, bail};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
pub struct Check {
    /// what was checked ("ptrace", "debug info", ...)
    pub what: String,
    pub verdict: Verdict,
    /// what was found, and what to do when it is not ok
    pub text: String,
}

/// The checks of one server (a postmaster and its binary).
#[derive(Debug, Serialize)]
pub struct Server {
    pub postmaster: i32,
    pub binary: PathBuf,
    pub version: Option<String>,
    pub checks: Vec<Check>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub machine: Vec<Check>,
    pub servers: Vec<Server>,
}

fn check(what: &str, verdict: Verdict, text: String) -> Check {
    Check {
        what: what.into(),
        verdict,
        text,
    }
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

fn has_cap(me: &permission::Creds, cap: u32) -> bool {
    me.cap_eff & (1u64 << cap) != 0
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The checks that concern this machine and pgdbg's own process.
fn machine_checks() -> Vec<Check> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let me = permission::creds(&status);
    let mut out = Vec::new();
    let seccomp = status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))
        .map(str::trim)
        .unwrap_or("0");
    if seccomp == "2" {
        out.push(check(
            "seccomp",
            Verdict::Warn,
            format!(
                "pgdbg runs under a seccomp filter (a container's default profile may refuse \
                 ptrace or perf_event_open): if attach or profile is refused, run it with a \
                 profile that allows them ({})",
                permission::LIFT_SECCOMP
            ),
        ));
    }
    // perf events: tried on pgdbg itself (a disabled software clock,
    // closed at once), which is what a seccomp filter or
    // kernel.perf_event_paranoid = 3 (Debian's "no perf at all") refuses
    let paranoid = read_trim("/proc/sys/kernel/perf_event_paranoid");
    let par = paranoid.as_deref().unwrap_or("absent");
    // user mode only, as profile falls back to when the kernel is paranoid
    let mut attr = crate::perf::Attr::cpu_clock(1, 0);
    attr.flags |= crate::perf::FLAG_EXCLUDE_KERNEL;
    // SAFETY: a perf_event_attr of attr.size bytes (no pointers in it);
    // pid 0 = this process, any CPU, no group, close-on-exec
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const crate::perf::Attr,
            0,
            -1i32,
            -1i32,
            crate::perf::PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let fix = if paranoid.as_deref().and_then(|p| p.parse::<i32>().ok()) > Some(2) {
            "sysctl kernel.perf_event_paranoid=2, or give pgdbg CAP_PERFMON".to_string()
        } else if seccomp == "2" {
            format!(
                "allow perf_event_open in pgdbg's seccomp profile ({})",
                permission::LIFT_SECCOMP
            )
        } else {
            format!("give pgdbg CAP_PERFMON ({})", permission::GRANT_PERFMON)
        };
        out.push(check(
            "perf events",
            Verdict::Warn,
            format!(
                "perf_event_open refused ({e}; kernel.perf_event_paranoid = {par}): profile and the \
                 kernel-uprobe modes of count, latency, trace and waits trace cannot run (count and \
                 waits trace fall back to breakpoints, which stop the backend at each hit): {fix}"
            ),
        ));
    } else {
        // SAFETY: the descriptor just opened, closed once
        unsafe { libc::close(fd as i32) };
        let pmu = crate::perf::uprobe::pmu_type();
        let uprobe_pmu = pmu.is_ok();
        let capable = has_cap(&me, CAP_PERFMON) || has_cap(&me, CAP_SYS_ADMIN);
        let no_sysfs = pmu.as_ref().err().and_then(crate::perf::uprobe::no_sysfs);
        let (v, t) = match (uprobe_pmu, capable) {
            (false, _) if let Some(no) = no_sysfs => (
                Verdict::Warn,
                format!(
                    "{no}: count, latency, trace and waits trace use breakpoints, which stop the \
                     backend at each hit"
                ),
            ),
            (true, true) => (
                Verdict::Ok,
                format!("perf events and kernel uprobes (kernel.perf_event_paranoid = {par})"),
            ),
            (false, _) => (
                Verdict::Warn,
                "the kernel has no uprobe event source (/sys/bus/event_source/devices/uprobe; \
                 CONFIG_UPROBE_EVENTS): count, latency, trace and waits trace use breakpoints, \
                 which stop the backend at each hit"
                    .to_string(),
            ),
            (true, false) => (
                Verdict::Warn,
                format!(
                    "perf events allowed (kernel.perf_event_paranoid = {par}) but kernel uprobes \
                     need CAP_PERFMON or CAP_SYS_ADMIN, which pgdbg has not: give it CAP_PERFMON \
                     ({}); meanwhile count and waits trace use breakpoints",
                    permission::GRANT_PERFMON
                ),
            ),
        };
        out.push(check("perf events", v, t));
    }
    let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .find(|d| Path::new(d).join("uprobe_events").exists());
    out.push(match tracefs {
        Some(d) => check("tracefs", Verdict::Ok, format!("{d}/uprobe_events")),
        None => check(
            "tracefs",
            Verdict::Warn,
            "no tracefs (/sys/kernel/tracing/uprobe_events): waits trace and trace --perf cannot \
             use kernel uprobes with arguments: mount -t tracefs nodev /sys/kernel/tracing (in a \
             container: mount the host's /sys/kernel/tracing)"
                .into(),
        ),
    });
    out.push(shm_check());
    out
}

/// pgdbg records what it changes in a backend under /dev/shm before it
/// changes it (for `pgdbg rescue`); without it the record lives only in
/// the guardian's memory (guardian/file.rs).
fn shm_check() -> Check {
    let probe = Path::new("/dev/shm").join(format!("pgdbg-doctor-{}", std::process::id()));
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            check(
                "/dev/shm",
                Verdict::Ok,
                "writable (where pgdbg records what it changes, for pgdbg rescue)".into(),
            )
        }
        Err(e) => check(
            "/dev/shm",
            Verdict::Warn,
            format!(
                "cannot write /dev/shm ({e}): pgdbg keeps its record of what it changes in a \
                 backend in its guardian's memory only, so pgdbg rescue cannot restore a backend \
                 if pgdbg and its guardian are killed together: mount a tmpfs on /dev/shm"
            ),
        ),
    }
}

/// Where the DWARF of the file the server names `named` comes from,
/// without downloading anything; pgdbg opens it at `open` (in the
/// server's root).
fn dwarf_of(open: &Path, named: &Path) -> Result<Option<String>> {
    let img = ElfImage::open(open)?;
    if let Some((_, source)) = find_debug_file(&img, named, None)? {
        return Ok(Some(source.to_string()));
    }
    let id = img.build_id().unwrap_or_default();
    Ok(crate::debuginfo::debuginfod::find(
        &id,
        named,
        crate::debuginfo::debuginfod::Fetch::CacheOnly,
    )
    .map(|f| format!("{} (debuginfod cache)", f.path.display())))
}

/// What a server's binary offers pgdbg: its DWARF, else a layout pack
/// (`named` as the server names it, opened at `binary`).
fn debug_info_check(binary: &Path, named: &Path, version: Option<&str>) -> Check {
    match dwarf_of(binary, named) {
        Ok(Some(src)) => return check("debug info", Verdict::Ok, src),
        Ok(None) => {}
        Err(e) => {
            return check(
                "debug info",
                Verdict::Fail,
                format!("cannot read {}: {e:#}", binary.display()),
            );
        }
    }
    let id = ElfImage::open(binary)
        .ok()
        .and_then(|i| i.build_id())
        .unwrap_or_default();
    let missing = crate::debuginfo::no_debug_info_message(named, &id);
    let servers = crate::debuginfo::debuginfod::urls();
    if !servers.is_empty() {
        return check(
            "debug info",
            Verdict::Warn,
            format!(
                "not on this machine; the first attach downloads it from {} (once; run pgdbg \
                 attach on a backend now to have it cached before an incident)",
                servers.join(" ")
            ),
        );
    }
    let major = version.and_then(crate::postgres::major_of);
    let packed = major.filter(|m| {
        !crate::config::get().no_packs
            && crate::postgres::packs::embedded(*m).is_some_and(|p| p.is_ok())
    });
    match packed {
        Some(m) => check(
            "debug info",
            Verdict::Warn,
            format!(
                "none; pgdbg uses its built-in layout pack for PostgreSQL {m} (plans, plancache, \
                 waits and backtraces by exported names work; print of local variables and \
                 static functions do not): {missing}"
            ),
        ),
        None => check("debug info", Verdict::Fail, missing),
    }
}

/// The server's own libraries the postmaster has loaded
/// (shared_preload_libraries) and plpgsql: those without DWARF.  `binary`
/// is the path the server names (in its root); each library is opened in
/// the server's root, a mapped one only once verified against its mapping
/// (a container's path on pgdbg's side may be another file).
fn library_check(postmaster: i32, binary: &Path) -> Option<Check> {
    let prefix = binary.parent()?.parent()?.to_path_buf();
    // (the server's path, the path pgdbg opens or why it cannot)
    let mut libs: Vec<(PathBuf, std::result::Result<VerifiedFile, String>)> =
        procfs::maps(postmaster)
            .ok()?
            .into_iter()
            .filter_map(|m| {
                let p = m.path?;
                (p.starts_with(&prefix) && p.extension().is_some_and(|x| x == "so")).then(|| {
                    let at = verified_mapped_file(postmaster, &p, &m.dev, m.inode);
                    (p, at)
                })
            })
            .collect();
    for d in ["lib/postgresql", "lib"] {
        let p = prefix.join(d).join("plpgsql.so");
        // not mapped (not loaded yet): nothing to verify it against
        if let Some(at) = VerifiedFile::open_unchecked(&procfs::in_root_of(postmaster, &p)) {
            libs.push((p, Ok(at)));
            break;
        }
    }
    libs.sort_by(|a, b| a.0.cmp(&b.0));
    libs.dedup_by(|a, b| a.0 == b.0);
    if libs.is_empty() {
        return None;
    }
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let unverified: Vec<String> = libs
        .iter()
        .filter_map(|(p, at)| Some(format!("{} ({})", name(p)?, at.as_ref().err()?)))
        .collect();
    if !unverified.is_empty() {
        return Some(check(
            "libraries",
            Verdict::Warn,
            format!(
                "cannot be verified as the files the server maps, not read: {}",
                unverified.join(", ")
            ),
        ));
    }
    let bare: Vec<String> = libs
        .iter()
        .filter(|(p, at)| !matches!(at.as_ref().map(|f| dwarf_of(f.path(), p)), Ok(Ok(Some(_)))))
        .filter_map(|(p, _)| name(p))
        .collect();
    Some(if bare.is_empty() {
        check(
            "libraries",
            Verdict::Ok,
            format!("{} with debug info", libs.len()),
        )
    } else {
        check(
            "libraries",
            Verdict::Warn,
            format!(
                "no debug info for {} (breakpoints there work by exported name; locals and \
                 types do not): install their debug symbols (-dbgsym packages)",
                bare.join(", ")
            ),
        )
    })
}

fn server_checks(postmaster: i32, pid: Option<i32>) -> Server {
    let mut checks = Vec::new();
    let target = pid.unwrap_or(postmaster);
    match permission::refusal(target) {
        None => checks.push(check(
            "ptrace",
            Verdict::Ok,
            format!("pgdbg may trace process {target}"),
        )),
        Some(why) => checks.push(check("ptrace", Verdict::Fail, why)),
    }
    let binary = procfs::exe_path(postmaster).unwrap_or_default();
    // debug files are looked up in the server's root first (a container's)
    crate::debuginfo::elf::set_target(postmaster);
    let file = PathBuf::from(format!("/proc/{postmaster}/exe"));
    let version = std::fs::read(&file)
        .ok()
        .and_then(|b| crate::postgres::version_string(&b));
    if binary.as_os_str().is_empty() {
        checks.push(check(
            "binary",
            Verdict::Fail,
            format!(
                "cannot read /proc/{postmaster}/exe: run pgdbg as root or as the server's user"
            ),
        ));
    } else {
        // (where pgdbg opens it, the name its debug link is followed from)
        let (open, named) = if binary.to_string_lossy().ends_with(" (deleted)") {
            checks.push(check(
                "binary",
                Verdict::Warn,
                format!(
                    "{} was replaced on disk since the server started (an upgrade): pgdbg \
                     reads the running one, but debug info for it may be gone: restart the server",
                    binary.display()
                ),
            ));
            (file.clone(), file.clone())
        } else {
            // the server's path, in its root (a container's)
            (procfs::in_root_of(postmaster, &binary), binary.clone())
        };
        checks.push(debug_info_check(&open, &named, version.as_deref()));
        if let Some(c) = library_check(postmaster, &binary) {
            checks.push(c);
        }
    }
    Server {
        postmaster,
        binary,
        version: version.map(|v| v.split(" on ").next().unwrap_or(&v).to_string()),
        checks,
    }
}

/// Run every check: of this machine, and of the server of `pid` (a
/// backend or a postmaster), of the cluster in `dir`, or of every running
/// cluster.
pub fn run(pid: Option<i32>, dir: Option<&Path>) -> Result<Report> {
    let postmasters = match (pid, dir) {
        (Some(p), _) => {
            use crate::postgres::ProcessKind;
            match crate::postgres::classify(p)? {
                ProcessKind::Postmaster => vec![p],
                ProcessKind::NotPostgres { name } => bail!(
                    "process {p} ({}) is not a PostgreSQL process: give a backend's PID \
                     (select pg_backend_pid()) or a postmaster's",
                    crate::shown::shown(&name)
                ),
                _ => vec![procfs::status(p)?.ppid],
            }
        }
        (None, Some(d)) => vec![cluster::postmaster_of(d)?],
        (None, None) => cluster::postmasters(),
    };
    Ok(Report {
        machine: machine_checks(),
        servers: postmasters
            .into_iter()
            .map(|pm| server_checks(pm, pid))
            .collect(),
    })
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Ok => "ok",
        Verdict::Warn => "warn",
        Verdict::Fail => "FAIL",
    }
}

/// The report as text: one line per check, grouped by machine and server.
pub fn text(r: &Report) -> String {
    let line = |c: &Check| format!("  {:<5} {}: {}\n", verdict_word(c.verdict), c.what, c.text);
    let mut out = String::from("this machine:\n");
    for c in &r.machine {
        out.push_str(&line(c));
    }
    if r.servers.is_empty() {
        out.push_str("no running PostgreSQL server found (pgdbg doctor PID checks one)\n");
    }
    for s in &r.servers {
        out.push_str(&format!(
            "postmaster {} ({}{}):\n",
            s.postmaster,
            s.binary.display(),
            s.version
                .as_deref()
                .map(|v| format!(", {v}"))
                .unwrap_or_default()
        ));
        for c in &s.checks {
            out.push_str(&line(c));
        }
    }
    let all = || {
        r.machine
            .iter()
            .chain(r.servers.iter().flat_map(|s| &s.checks))
    };
    let n = |v| all().filter(|c| c.verdict == v).count();
    let (w, f) = (n(Verdict::Warn), n(Verdict::Fail));
    out.push_str(&format!(
        "{f} problem{}, {w} warning{}\n",
        if f == 1 { "" } else { "s" },
        if w == 1 { "" } else { "s" }
    ));
    out
}

/// Exit status: 1 when a check failed.
pub fn status(r: &Report) -> i32 {
    let failed = r
        .machine
        .iter()
        .chain(r.servers.iter().flat_map(|s| &s.checks))
        .any(|c| c.verdict == Verdict::Fail);
    i32::from(failed)
}

/// `pgdbg doctor` from the command line.
pub fn main(pid: Option<String>, dir: Option<&Path>, json: bool) -> Result<i32> {
    let pid = match pid {
        Some(p) => Some(crate::attach::parse_pid(Some(p))?),
        None => None,
    };
    if pid.is_some() && dir.is_some() {
        bail!("give a PID or --cluster DIR, not both");
    }
    let r = run(pid, dir)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", text(&r));
    }
    Ok(status(&r))
}
