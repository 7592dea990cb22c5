//! `pgdbg attach` by someone the kernel will not let trace the backend:
//! one line naming the cause and the fix, non-zero exit, the backend
//! never touched.  Two real refusals: an unprivileged user against a
//! server run by another user, and root without CAP_SYS_PTRACE (what a
//! container without that capability gives).  (Yama's ptrace_scope
//! cases are unit-tested in src/inferior/permission.rs: the test machine
//! may have no Yama.)

use common::*;
use pgdbg_testbed as common;
use std::process::{Command, Stdio};

fn one_line(out: &std::process::Output, needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "must fail: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected:\n{err}");
    assert!(
        lines[0].starts_with("pgdbg: error: no permission to trace process"),
        "{err}"
    );
    for n in needles {
        assert!(lines[0].contains(n), "expected {n:?} in: {err}");
    }
    err
}

/// The user the cluster's processes run as (its postmaster's real uid).
fn server_user(cl: &Cluster) -> String {
    let st = std::fs::read_to_string(format!("/proc/{}/status", cl.postmaster_pid)).unwrap();
    let uid: u32 = st
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f[2].parse::<u32>().ok() == Some(uid)).then(|| f[0].to_string())
        })
        .unwrap()
}

#[test]
fn refused_attach_names_cause_and_fix() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test runs pgdbg as other users and needs root"
    );
    let cl = Cluster::start(18);
    let mut a = cl.connect();
    let pid = a.pid();
    let owner = server_user(&cl);
    let pid_s = pid.to_string();

    // an unprivileged user (nobody) against the server's user
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(pgdbg_bin())
        .args(["attach", &pid_s])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    one_line(
        &out,
        &[
            &format!("it runs as {owner} (uid "),
            "and pgdbg as nobody (uid 65534) without CAP_SYS_PTRACE",
            &format!("sudo -u {owner} pgdbg attach {pid}"),
        ],
    );
    assert_eq!(tracer_pid(pid), 0);

    // root without CAP_SYS_PTRACE (dropped from the bounding set: gone
    // from the effective set after exec)
    let out = Command::new("setpriv")
        .args(["--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"])
        .arg(pgdbg_bin())
        .args(["attach", &pid_s])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    one_line(
        &out,
        &[
            "runs as root but without CAP_SYS_PTRACE",
            "--cap-add=SYS_PTRACE",
            "kubectl debug --profile=sysadmin",
            "securityContext.capabilities.add: [SYS_PTRACE]",
        ],
    );
    assert_eq!(tracer_pid(pid), 0);

    // and the kernel agrees: opening the backend's memory needs the same
    // ptrace permission; it opens as plain root, not without the capability
    let head = |drop_cap: bool| {
        let mut c = Command::new("setpriv");
        if drop_cap {
            c.args(["--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"]);
        }
        c.args(["head", "-c0", &format!("/proc/{pid}/mem")])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(head(false), "root should open the backend's memory");
    assert!(!head(true), "root without CAP_SYS_PTRACE should not");

    // the backend was never touched
    assert_eq!(a.pid(), pid);
    assert_eq!(a.query_one_i64("select 1"), 1);
    cl.assert_no_crash();
}
