//! pgdbg refused by the kernel, against PostgreSQL 15 in a container (its
//! own PID and mount namespace and root: testbed/src/container.rs): root
//! without CAP_SYS_PTRACE, another user than the server's, a seccomp
//! filter that denies ptrace (as a container's profile may), and no
//! CAP_PERFMON for the perf-event commands.  Each time one line names what
//! is missing and how Docker and Kubernetes grant it, and the backend is
//! untouched: not traced, its code the file's.

use common::*;
use container::Container;
use pgdbg_testbed as common;
use pgdbg_testbed::container;
use pgdbg_testbed::seccomp;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// pgdbg under `setpriv ARGS` (capabilities, user), or with `deny` system
/// calls refused by a seccomp filter: (exit code, stdout, stderr).
fn run(setpriv: &[&str], deny: &'static [i64], args: &[&str]) -> (i32, String, String) {
    let mut c = if setpriv.is_empty() {
        Command::new(pgdbg_bin())
    } else {
        let mut c = Command::new("setpriv");
        c.args(setpriv).arg(pgdbg_bin());
        c
    };
    c.args(args)
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null());
    if !deny.is_empty() {
        // SAFETY: the filter is installed from a stack array, nothing
        // allocated between fork and exec
        unsafe {
            c.pre_exec(move || seccomp::deny(deny));
        }
    }
    let out = c.output().expect("run pgdbg");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Not traced, and the code of a function it runs is the binary's.
fn untouched(host: i32) {
    assert_eq!(tracer_pid(host), 0, "process {host} is traced");
    let bin = pg_prefix(15).join("bin/postgres");
    for f in ["exec_simple_query", "PostgresMain"] {
        assert!(
            code_matches_file(host, &bin, f, 32),
            "{f} in process {host} differs from the file"
        );
    }
}

const NO_PTRACE_CAP: &[&str] = &["--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"];

#[test]
fn ptrace_refusals_name_what_to_grant() {
    let ct = Container::start(&pg_prefix(15), &[]);
    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    let h = host.to_string();
    let pm = ct.postmaster.to_string();
    let ns_s = ns.to_string();
    let by_host: &[&str] = &["attach", &h, "-q", "--ex", "bt"];
    let by_ns: &[&str] = &["attach", "--ns-of", &pm, &ns_s, "-q", "--ex", "bt"];

    // root without CAP_SYS_PTRACE (the default of a debug container)
    for args in [by_host, by_ns] {
        let (code, _, err) = run(NO_PTRACE_CAP, &[], args);
        assert_one_line_error(code, &err, "pgdbg runs as root but without CAP_SYS_PTRACE");
        for w in [
            "--cap-add=SYS_PTRACE",
            "kubectl debug --profile=sysadmin",
            "securityContext.capabilities.add: [SYS_PTRACE]",
        ] {
            assert!(err.contains(w), "{w:?} missing: {err}");
        }
        untouched(host);
    }

    // another user than the server's (uid 65534 against the container's
    // unprivileged server user)
    let (code, _, err) = run(
        &["--reuid=65534", "--regid=65534", "--clear-groups"],
        &[],
        by_host,
    );
    assert_one_line_error(code, &err, "it runs as pgdbg (uid ");
    for w in [
        "and pgdbg as nobody (uid 65534) without CAP_SYS_PTRACE",
        "sudo -u pgdbg pgdbg attach",
        "securityContext.runAsUser: ",
        "kubectl debug --profile=sysadmin",
    ] {
        assert!(err.contains(w), "{w:?} missing: {err}");
    }
    untouched(host);

    // a seccomp filter that denies ptrace (EPERM, as Docker's profile
    // answers): root with every capability, refused all the same
    for args in [by_host, by_ns] {
        let (code, _, err) = run(&[], &[libc::SYS_ptrace], args);
        assert_one_line_error(code, &err, "pgdbg runs under a seccomp filter");
        for w in [
            "the kernel refused ptrace",
            "--security-opt seccomp=unconfined",
            "securityContext.seccompProfile.type: Unconfined",
        ] {
            assert!(err.contains(w), "{w:?} missing: {err}");
        }
        untouched(host);
    }

    // bad input under the same filter: still one line about the input
    let (code, _, err) = run(&[], &[libc::SYS_ptrace], &["attach", "x1", "-q"]);
    assert_one_line_error(code, &err, "'x1' is not a PID");

    // and with the capability and no filter, the same attach works
    let (code, out, err) = run(&[], &[], by_host);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("PostgresMain"), "{out}");
    untouched(host);
    assert_eq!(c.query_one("select 1", &[]).unwrap().get::<_, i32>(0), 1);
}

const NO_PERFMON: &[&str] = &[
    "--bounding-set=-perfmon,-sys_admin",
    "--inh-caps=-perfmon,-sys_admin",
];

/// Root with CAP_SYS_PTRACE but without CAP_PERFMON (and CAP_SYS_ADMIN),
/// at perf_event_paranoid 2: kernel uprobes and the scheduler's
/// tracepoint are refused.  `latency` and `profile --off-cpu` (no other
/// mode) refuse in one line, non-zero exit, backend untouched; `count`
/// and `waits trace` say the same in one line and run their ptrace modes;
/// `profile`'s user-space sampling needs no CAP_PERFMON and runs.
#[test]
fn perf_commands_without_perfmon() {
    // the setting this test is about (Debian's own kernels default to 3,
    // others to 2): set for the test, put back after it (tests run one
    // at a time: scripts/test)
    let _paranoid = Paranoid::set("2");
    let ct = Container::start(&pg_prefix(15), &[]);
    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    let h = host.to_string();
    let grant = [
        "pgdbg has no CAP_PERFMON",
        "docker run --cap-add=PERFMON",
        "kubectl debug --profile=sysadmin",
        "securityContext.capabilities.add: [PERFMON]",
    ];
    for (args, what) in [
        (
            vec![
                "attach",
                &h,
                "-q",
                "--ex",
                "latency exec_simple_query --for 1s",
            ],
            "latency: a uprobe perf event on process",
        ),
        (
            vec!["profile", &h, "-q", "--off-cpu", "--for", "1s"],
            "profile --off-cpu on process",
        ),
    ] {
        let (code, out, err) = run(NO_PERFMON, &[], &args);
        assert_one_line_error(code, &err, what);
        for w in grant {
            assert!(err.contains(w), "{w:?} missing: {err}");
        }
        assert!(out.trim().is_empty(), "{out}");
        untouched(host);
    }
    for (cmd, fallback) in [
        (
            "count exec_simple_query --uprobes --for 1s",
            "; counting with a ptrace stop per call instead",
        ),
        (
            "waits trace --for 1s",
            "; tracing with a debug register and ptrace stops instead",
        ),
    ] {
        let (code, out, err) = run(NO_PERFMON, &[], &["attach", &h, "-q", "--ex", cmd]);
        assert_eq!(code, 0, "{cmd}: {out}\n{err}");
        let refused: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("perf_event_open refused"))
            .collect();
        assert_eq!(refused.len(), 1, "{out}");
        assert!(refused[0].ends_with(fallback), "{}", refused[0]);
        for w in grant {
            assert!(refused[0].contains(w), "{w:?} missing: {}", refused[0]);
        }
        untouched(host);
    }
    let (code, out, err) = run(NO_PERFMON, &[], &["profile", &h, "-q", "--for", "1s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("samples of backend {host}")), "{out}");
    untouched(host);
    assert_eq!(c.query_one("select 1", &[]).unwrap().get::<_, i32>(0), 1);
}

/// `kernel.perf_event_paranoid` set for a test and put back when dropped.
struct Paranoid(String);

impl Paranoid {
    const PATH: &'static str = "/proc/sys/kernel/perf_event_paranoid";

    fn set(v: &str) -> Paranoid {
        let old = std::fs::read_to_string(Self::PATH).expect("perf_event_paranoid");
        if old.trim() != v {
            std::fs::write(Self::PATH, v).expect("set perf_event_paranoid (the tests run as root)");
        }
        Paranoid(old.trim().to_string())
    }
}

impl Drop for Paranoid {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::PATH, &self.0);
    }
}
