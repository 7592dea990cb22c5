//! `pgdbg doctor`: a healthy host says ok for each check and exits 0; three
//! settings really broken for the doctor's process (a capability dropped,
//! tracefs hidden and /dev/shm read-only in its own mount namespace, a
//! server binary without debug info) are each named with what to do, and
//! the exit status says a check failed.  No server process is touched.

use common::*;
use pgdbg_testbed as common;
use std::process::{Command, Stdio};

fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The line of check `what` ("  ok    ptrace: ...").
fn line<'a>(out: &'a str, what: &str) -> &'a str {
    out.lines()
        .find(|l| {
            l.trim_start()
                .split_once(' ')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(&format!("{what}:")))
        })
        .unwrap_or_else(|| panic!("no {what} line in:\n{out}"))
}

fn verdict<'a>(out: &'a str, what: &str) -> &'a str {
    line(out, what).split_whitespace().next().unwrap()
}

#[test]
fn doctor_on_a_healthy_host_15() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let pid = c.pid();
    let dir = cl.dir.join("data");
    let pid_s = pid.to_string();
    for args in [
        vec!["doctor", "--cluster", dir.to_str().unwrap()],
        vec!["doctor", &pid_s],
    ] {
        let (code, out, err) = run(Command::new(pgdbg_bin()).args(&args));
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert!(err.is_empty(), "{err}");
        assert_eq!(verdict(&out, "ptrace"), "ok", "{out}");
        assert_eq!(verdict(&out, "debug info"), "ok", "{out}");
        assert!(
            line(&out, "debug info").contains("embedded in the binary"),
            "{out}"
        );
        assert_eq!(verdict(&out, "/dev/shm"), "ok", "{out}");
        assert!(
            out.contains(&format!("postmaster {} (", cl.postmaster_pid)),
            "{out}"
        );
        assert!(out.contains("PostgreSQL 15."), "{out}");
        assert!(
            out.lines().last().unwrap().starts_with("0 problems"),
            "{out}"
        );
    }
    // JSON: one document with the same checks
    let (code, out, err) = run(Command::new(pgdbg_bin()).args([
        "doctor",
        "--cluster",
        dir.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let checks = v["servers"][0]["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["what"] == "ptrace" && c["verdict"] == "ok"),
        "{out}"
    );
    // bad input: one line, non-zero
    let (code, _, err) = run(Command::new(pgdbg_bin()).args(["doctor", "1"]));
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.starts_with("pgdbg: error: "), "{err}");
    // the backend was never stopped or traced by the doctor
    assert_eq!(tracer_pid(pid), 0);
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let state = state.rsplit_once(')').unwrap().1.split_whitespace().next();
    assert!(!matches!(state, Some("T" | "t")), "{state:?}");
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn doctor_names_each_broken_setting_15() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "needs root (namespaces)");
    let mut cl = Cluster::start(15);
    let dir = cl.dir.join("data");
    let dir_s = dir.to_str().unwrap().to_string();

    // 1. root without CAP_SYS_PTRACE (what a container without it gives)
    let (code, out, err) = run(Command::new("setpriv")
        .args(["--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", "--"])
        .arg(pgdbg_bin())
        .args(["doctor", "--cluster", &dir_s]));
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(verdict(&out, "ptrace"), "FAIL", "{out}");
    assert!(line(&out, "ptrace").contains("CAP_SYS_PTRACE"), "{out}");
    assert!(
        line(&out, "ptrace").contains("--cap-add=SYS_PTRACE"),
        "{out}"
    );

    // 2. a server binary without debug info (stripped copy, no layout pack)
    let prefix = pg_prefix(15);
    let root = std::env::temp_dir().join(format!("pgdbg-doctor-{}", std::process::id()));
    cl.restart_from_stripped_copy(&prefix, &root, "--strip-debug");
    // 3. tracefs hidden and /dev/shm read-only, in a mount namespace of
    //    the doctor's own (the machine's mounts are not changed)
    let script = format!(
        "mount -t tmpfs -o ro none /dev/shm && mount -t tmpfs none /sys/kernel/tracing && \
         (mount -t tmpfs none /sys/kernel/debug 2>/dev/null || true) && exec {} doctor --cluster {dir_s}",
        pgdbg_bin().display()
    );
    let (code, out, err) = run(Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env("PGDBG_NO_PACKS", "1")
        .env_remove("DEBUGINFOD_URLS"));
    cl.stop_stripped();
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(verdict(&out, "ptrace"), "ok", "{out}");
    assert_eq!(verdict(&out, "debug info"), "FAIL", "{out}");
    assert!(
        line(&out, "debug info").contains("no debug info for"),
        "{out}"
    );
    assert!(line(&out, "debug info").contains("build-id"), "{out}");
    assert_eq!(verdict(&out, "/dev/shm"), "warn", "{out}");
    assert!(line(&out, "/dev/shm").contains("Read-only"), "{out}");
    assert_eq!(verdict(&out, "tracefs"), "warn", "{out}");
    assert!(line(&out, "tracefs").contains("mount -t tracefs"), "{out}");
    assert!(
        out.lines().last().unwrap().starts_with("1 problem,"),
        "{out}"
    );
    // the machine's own mounts were not changed
    assert!(std::path::Path::new("/sys/kernel/tracing/uprobe_events").exists());
}
