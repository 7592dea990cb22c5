//! The sidecar case: pgdbg in a second container that shares only the PID
//! namespace of a PostgreSQL 15 container.  Mechanism (testbed/src/
//! container.rs, `Container` and `Sidecar`, says more): the server in its
//! own PID and mount namespace and root (`unshare --pid --mount --fork` +
//! `pivot_root`); each pgdbg command in a fresh sidecar made with `nsenter
//! --pid=/proc/<postmaster>/ns/pid` + `unshare --mount` + `/proc` mounted
//! for that PID namespace (and sysfs read-only at `/sys`, as runtimes
//! mount it) + `pivot_root` into a root of its own holding
//! only pgdbg, its libraries and decoys.  Why: no container runtime is
//! installed here, and a runtime adds nothing the kernel does not (what
//! `docker run --pid=container:PG` makes is exactly this: the PID
//! namespace shared, the mount namespace and root not).  From the sidecar: `pgdbg ps`, attach by the PID
//! seen there (the one `pg_stat_activity.pid` shows), `bt` through
//! plpgsql.so, `plancache`, and `--cluster` with the data directory as the
//! server's container names it; the server's files are reached through
//! `/proc/PID/root`, and neither the sidecar's decoys (at the paths of the
//! server's libc, loader, binary and plpgsql.so) nor the host's are opened.

use common::*;
use container::{Container, Sidecar, Watch};
use pgdbg_testbed as common;
use pgdbg_testbed::container;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn start() -> (Container, Sidecar) {
    let ct = Container::start(&pg_prefix(15), &["jit = off"]);
    let sc = Sidecar::start(&ct, &pgdbg_bin());
    (ct, sc)
}

/// Watches on every decoy: the host's and the sidecar's.
fn watch_decoys(ct: &Container, sc: &Sidecar) -> Vec<(std::path::PathBuf, Watch)> {
    std::iter::once(ct.decoy.clone())
        .chain(sc.decoys.iter().cloned())
        .map(|p| {
            let w = Watch::new(&p);
            (p, w)
        })
        .collect()
}

fn assert_untouched(watches: &[(std::path::PathBuf, Watch)]) {
    for (p, w) in watches {
        assert!(!w.touched(), "the decoy {} was opened", p.display());
    }
}

/// A backend busy in a plpgsql function: its PID in the container (and
/// the sidecar), its host PID, and the thread running it.
fn busy_in_plpgsql(
    ct: &Container,
) -> (
    i32,
    i32,
    std::thread::JoinHandle<Result<(), postgres::Error>>,
) {
    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let h = std::thread::spawn(move || {
        c.batch_execute(
            "do $$ begin for i in 1..6000 loop perform pg_sleep(0.01); end loop; end $$",
        )
    });
    let host = ct.host_pid(ns);
    wait_until("plpgsql.so loaded", Duration::from_secs(30), || {
        std::fs::read_to_string(format!("/proc/{host}/maps"))
            .unwrap_or_default()
            .contains("plpgsql.so")
    });
    (ns, host, h)
}

fn cancel(ct: &Container, ns: i32) {
    let mut c = ct.connect();
    c.execute("select pg_cancel_backend($1)", &[&ns]).unwrap();
}

/// `pgdbg ps`, attach by the sidecar's PID with `bt`, `info` and `info
/// sharedlibrary`, and `--cluster /data` (the data directory as the
/// server's container names it; the sidecar has no /data).
#[test]
fn sidecar_ps_attach_bt_cluster() {
    let (ct, sc) = start();
    let watches = watch_decoys(&ct, &sc);
    let bin = pgdbg_bin();
    let (ns, host, h) = busy_in_plpgsql(&ct);
    assert_ne!(ns, host);

    // the postmaster is the sidecar's PID 1; one PID per process, the
    // server's own (no "in its namespace": the sidecar is in it)
    let (code, out, err) = sc.pgdbg(&bin, &["ps"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(&format!(
            "postmaster 1 ({}/bin/postgres -D /data)",
            ct.install.display()
        )),
        "{out}"
    );
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&ns.to_string()))
        .unwrap_or_else(|| panic!("no backend {ns}:\n{out}"));
    assert!(row.contains("[local]"), "{row}");
    assert!(!out.contains("in its namespace"), "{out}");

    let (code, out, err) = sc.pgdbg(
        &bin,
        &[
            "attach",
            &ns.to_string(),
            "-q",
            "--ex",
            "bt",
            "--ex",
            "info",
            "--ex",
            "info sharedlibrary",
        ],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let f = frames(&out);
    for want in [
        "epoll_wait",
        "WaitLatch",
        "pg_sleep",
        "exec_stmt_perform",
        "plpgsql_inline_handler",
        "exec_simple_query",
        "PostgresMain",
        "__libc_start_main_impl",
    ] {
        assert!(f.iter().any(|x| x == want), "{want} missing:\n{out}\n{err}");
    }
    // the frames are the ones the host's pgdbg sees (from the loop's
    // statement down: above it, where each caught the backend)
    let (hcode, hout, herr) = pgdbg(&["attach", &host.to_string(), "-q", "--ex", "bt"]);
    assert_eq!(hcode, 0, "{herr}");
    let hf = frames(&hout);
    let from_loop = |f: &[String]| -> Vec<String> {
        let i = f
            .iter()
            .position(|x| x == "exec_stmt_fori")
            .unwrap_or_else(|| panic!("no exec_stmt_fori: {f:?}"));
        f[i..].to_vec()
    };
    assert_eq!(
        from_loop(&f),
        from_loop(&hf),
        "sidecar:\n{out}\nhost:\n{hout}"
    );
    assert!(out.contains(&format!("pid:         {ns}\n")), "{out}");
    assert!(
        out.contains(&format!(
            "binary:      {}/bin/postgres",
            ct.install.display()
        )),
        "{out}"
    );
    let plpgsql = out
        .lines()
        .find(|l| l.contains("plpgsql.so"))
        .unwrap_or_else(|| panic!("no plpgsql.so in info sharedlibrary:\n{out}"));
    assert!(!plpgsql.contains("symbols only"), "{plpgsql}");
    assert!(!err.contains("not the file mapped"), "{err}");
    assert_eq!(tracer_pid(host), 0);

    let (code, out, err) = sc.pgdbg(
        &bin,
        &[
            "attach",
            "--cluster",
            "/data",
            "-q",
            "--ex",
            "bt",
            "--for",
            "5s",
        ],
    );
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("[{ns}] ")) && l.contains("exec_stmt_perform")),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert_eq!(tracer_pid(host), 0);
    assert_untouched(&watches);
}

/// `plancache --count N` from the sidecar on backend `ns` (host PID
/// `host`), captured in the sidecar's /tmp: `attached` gets pgdbg's
/// process once it attached, then `workload` runs; pgdbg must end well and
/// leave the backend untraced.  The N `plan_choice` events, each checked to
/// name the backend by the sidecar's PID.
fn plancache_from_sidecar(
    sc: &Sidecar,
    ns: i32,
    host: i32,
    n: usize,
    attached: impl FnOnce(&Pgdbg),
    workload: impl FnOnce(),
) -> Vec<serde_json::Value> {
    let capture = format!("/tmp/plancache-{ns}.jsonl");
    let _ = std::fs::remove_file(sc.host_path(&capture));
    let p = sc.spawn_attached(
        &pgdbg_bin(),
        &[
            "attach",
            &ns.to_string(),
            "-q",
            "--capture",
            &capture,
            "--ex",
            &format!("plancache --count {n}"),
            "--ex",
            "detach",
        ],
        host,
    );
    attached(&p);
    workload();
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(tracer_pid(host), 0);
    let ev = read_events(&sc.host_path(&capture), "plan_choice");
    assert_eq!(ev.len(), n, "{out}\n{err}");
    for e in &ev {
        assert_eq!(e["pid"], ns, "the sidecar's PID: {e}");
    }
    ev
}

/// The function of each frame of a `bt` ("#N  FUNC (...)" or "#N  0x... in
/// FUNC+OFF (...)"; a `[PID] ` prefix dropped).
fn frames(out: &str) -> Vec<String> {
    out.lines()
        .map(|l| match l.strip_prefix('[') {
            Some(r) => r.split_once("] ").map_or(l, |(_, r)| r),
            None => l,
        })
        .filter(|l| l.starts_with('#') && l[1..].starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|l| {
            let mut w = l.split_whitespace().skip(1);
            let mut f = w.next()?;
            if f.starts_with("0x") {
                w.next(); // in
                f = w.next()?;
            }
            Some(f.split('+').next().unwrap().to_string())
        })
        .collect()
}

/// `plancache` from the sidecar (by the sidecar's PID, a capture written
/// in its /tmp) while a prepared statement runs 7 times, and the same from
/// the host on another backend of the server: the same decisions.
#[test]
fn sidecar_plancache_same_as_host() {
    let (ct, sc) = start();
    let watches = watch_decoys(&ct, &sc);
    ct.connect()
        .batch_execute(
            "create table ct_t as select g as id from generate_series(1, 20000) g; analyze ct_t;",
        )
        .unwrap();
    let workload = |c: &mut postgres::Client| {
        c.batch_execute("prepare s(int) as select count(*) from ct_t where id < $1")
            .unwrap();
        for _ in 0..7 {
            c.batch_execute("execute s(100)").unwrap();
        }
    };
    let decisions = |ev: &[serde_json::Value]| -> Vec<String> {
        ev.iter()
            .map(|e| {
                format!(
                    "{} {} {} {} {}",
                    e["statement"],
                    e["choice"],
                    e["reason"],
                    e["generic_cost"],
                    e["custom_plan_cost"]
                )
            })
            .collect()
    };

    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    let ev = plancache_from_sidecar(&sc, ns, host, 7, |_| {}, || workload(&mut c));
    let from_sidecar = decisions(&ev);

    let mut c2 = ct.connect();
    let ns2: i32 = c2.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host2 = ct.host_pid(ns2);
    let (_, ev2) = watch_cmd(host2, "plancache --count 7", 7, || workload(&mut c2));
    assert_eq!(from_sidecar, decisions(&ev2));
    assert!(
        from_sidecar[0].contains("fewer_than_5_custom_plans"),
        "{from_sidecar:?}"
    );
    assert_untouched(&watches);
}

/// `plan --progress` from the sidecar on a parallel query (by the PID the
/// sidecar sees, which the workers' titles name): the workers' lines show,
/// as from the host (tests/containers.rs).
#[test]
fn sidecar_plan_progress_counts_workers() {
    let ct = Container::start(&pg_prefix(15), container::PARALLEL_SETTINGS);
    let sc = Sidecar::start(&ct, &pgdbg_bin());
    let watches = watch_decoys(&ct, &sc);
    let (ns, host, h) = container::parallel_query(&ct);
    let (code, out, err) = sc.pgdbg(
        &pgdbg_bin(),
        &[
            "attach",
            &ns.to_string(),
            "-q",
            "--ex",
            "plan --progress --every 300ms --for 3s",
        ],
    );
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    container::assert_worker_lines(&out, &err);
    assert_eq!(tracer_pid(host), 0);
    assert_untouched(&watches);
}

/// From a sidecar made without /sys: the uprobe PMU's type cannot be
/// read there, and `waits trace` says so in one line that names /sys
/// (not "no such perf event": the kernel has it), then traces with a debug
/// register and ptrace stops; `doctor` says the same.
#[test]
fn sidecar_without_sysfs_says_so() {
    let ct = Container::start(&pg_prefix(15), &["jit = off"]);
    let sc = Sidecar::start(&ct, &pgdbg_bin()).without_sysfs();
    let watches = watch_decoys(&ct, &sc);
    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    let (code, out, err) = sc.pgdbg(
        &pgdbg_bin(),
        &[
            "attach",
            &ns.to_string(),
            "-q",
            "--ex",
            "waits trace --for 1s",
        ],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let said = "/sys/bus/event_source/devices/uprobe/type cannot be read: no sysfs is mounted at \
                /sys here";
    let line = out
        .lines()
        .chain(err.lines())
        .find(|l| l.contains(said))
        .unwrap_or_else(|| panic!("{said:?} not said:\nstdout:\n{out}\nstderr:\n{err}"));
    assert!(
        line.starts_with(&format!("a kernel uprobe on process {ns}: "))
            && line.ends_with("; tracing with a debug register and ptrace stops instead"),
        "{line}"
    );
    assert!(!out.contains("no such perf event"), "{out}");
    assert!(out.contains("Wait events summary:"), "{out}");
    assert_eq!(tracer_pid(host), 0);
    assert_untouched(&watches);
    let (_, out, err) = sc.pgdbg(&pgdbg_bin(), &["doctor", &ns.to_string()]);
    assert!(
        out.lines().any(|l| l.contains(said)),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert_eq!(c.query_one("select 1", &[]).unwrap().get::<_, i32>(0), 1);
    assert_untouched(&watches);
}

/// docs/containers.md's sidecar commands (`sidecar# pgdbg ...`), as
/// written (the document's PID replaced by the backend's, `--for`
/// shortened), each run in the sidecar: each succeeds and shows what its
/// comment says, and a sidecar command of the document this test does not
/// know fails it.
#[test]
fn docs_sidecar_examples() {
    use common::recipes::{args_of, assert_all_run, recipes};
    let (ct, sc) = start();
    let watches = watch_decoys(&ct, &sc);
    let bin = pgdbg_bin();
    ct.connect()
        .batch_execute(
            "create table ct_t as select g as id from generate_series(1, 20000) g; analyze ct_t;",
        )
        .unwrap();
    let all = recipes("docs/containers.md", &["sidecar# "]);
    assert!(all.len() >= 4, "{all:?}");
    let mut done = std::collections::BTreeSet::new();
    let args = |cmd: &str, ns: i32| -> Vec<String> {
        let a = args_of(
            cmd,
            &[(" 57 ", &format!(" {ns} ")), ("--for 10s", "--for 3s")],
        );
        assert!(cmd.starts_with("pgdbg "), "{cmd}");
        a
    };

    let (ns, host, h) = busy_in_plpgsql(&ct);
    for r in all.iter().filter(|r| !r.command.contains("plancache")) {
        let a = args(&r.command, ns);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let (code, out, err) = sc.pgdbg(&bin, &a);
        assert_eq!(code, 0, "{a:?}\nstdout:\n{out}\nstderr:\n{err}");
        if r.command.contains("--ex bt") {
            assert!(out.contains("exec_stmt_perform"), "{a:?}:\n{out}\n{err}");
            assert!(out.contains("epoll_wait"), "{a:?}:\n{out}\n{err}");
        } else {
            assert!(out.contains("postmaster 1 ("), "{a:?}:\n{out}");
        }
        if r.command.contains("--ex info") {
            assert!(out.contains(&format!("pid:         {ns}\n")), "{out}");
        }
        done.insert(r.key());
    }
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());
    assert_eq!(tracer_pid(host), 0);

    let r = all
        .iter()
        .find(|r| r.command.contains("plancache"))
        .expect("containers.md's sidecar plancache");
    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    let a = args(&r.command, ns);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let child = sc
        .command(&bin, &a)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run pgdbg in the sidecar");
    let mut p = Pgdbg { child };
    p.wait_attached(host);
    c.batch_execute("prepare s(int) as select count(*) from ct_t where id < $1")
        .unwrap();
    for _ in 0..7 {
        c.batch_execute("execute s(100)").unwrap();
    }
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{a:?}\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("plancache: 7 decisions"), "{out}\n{err}");
    assert_eq!(tracer_pid(host), 0);
    done.insert(r.key());
    assert_all_run(&all, &done);
    assert_untouched(&watches);
}

/// The usual Docker or Podman case: the server's installation comes
/// through an overlayfs mount (its image's layer), and pgdbg's sidecar has
/// Docker's default capabilities plus SYS_PTRACE (`docker run --cap-add
/// SYS_PTRACE --pid=container:PG`): no SYS_ADMIN, so `/proc/PID/map_files`
/// is closed to it, and no PERFMON.  `bt` through plpgsql.so, its DWARF in
/// `info sharedlibrary`, a breakpoint in plpgsql.so hit and removed, and
/// `plancache` work as on the host; no decoy is opened, and the code is the
/// file's afterwards.
#[test]
fn sidecar_with_docker_capabilities_over_overlayfs() {
    let ct = Container::start_overlay(&pg_prefix(15), &["jit = off"]);
    let mut caps = container::DOCKER_DEFAULT_CAPS.to_vec();
    caps.push("sys_ptrace");
    let sc = Sidecar::start(&ct, &pgdbg_bin()).with_only_capabilities(&caps);
    let watches = watch_decoys(&ct, &sc);
    let bin = pgdbg_bin();
    let (ns, host, h) = busy_in_plpgsql(&ct);

    // the premises: plpgsql.so is mapped from an overlayfs, and with the
    // sidecar's capabilities (no SYS_ADMIN) the kernel refuses its
    // map_files entry
    let seen = PathBuf::from(format!("/proc/{host}/root"))
        .join(ct.install.strip_prefix("/").unwrap())
        .join("lib/postgresql/plpgsql.so");
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    let c_path = std::ffi::CString::new(seen.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path and a statfs of our own
    assert_eq!(unsafe { libc::statfs(c_path.as_ptr(), &mut fs) }, 0);
    const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
    assert_eq!(
        fs.f_type as i64,
        OVERLAYFS_SUPER_MAGIC,
        "{}",
        seen.display()
    );
    let maps = std::fs::read_to_string(format!("/proc/{host}/maps")).unwrap();
    let range = maps
        .lines()
        .find(|l| l.ends_with("/plpgsql.so"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("plpgsql.so not mapped:\n{maps}"))
        .to_string();
    let set: Vec<String> = caps.iter().map(|c| format!("+{c}")).collect();
    let denied = Command::new("setpriv")
        .arg(format!("--bounding-set=-all,{}", set.join(",")))
        .args(["--inh-caps=-all", "head", "-c1"])
        .arg(format!("/proc/{host}/map_files/{range}"))
        .output()
        .unwrap();
    let why = String::from_utf8_lossy(&denied.stderr);
    assert!(!denied.status.success(), "map_files read without SYS_ADMIN");
    assert!(why.contains("Operation not permitted"), "{why}");
    // (and with SYS_ADMIN it is readable: the refusal is that capability's)
    let allowed = Command::new("head")
        .arg("-c1")
        .arg(format!("/proc/{host}/map_files/{range}"))
        .output()
        .unwrap();
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );

    let mut args = vec!["attach".to_string(), ns.to_string(), "-q".into()];
    args.extend(ex(&[
        "bt",
        "info sharedlibrary",
        "break plpgsql:exec_stmt_perform",
        "continue",
        "delete",
        "detach",
    ]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = sc.pgdbg(&bin, &argv);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let f = frames(&out);
    for want in [
        "pg_sleep",
        "exec_stmt_perform",
        "plpgsql_inline_handler",
        "PostgresMain",
    ] {
        assert!(f.iter().any(|x| x == want), "{want} missing:\n{out}\n{err}");
    }
    let plpgsql = out
        .lines()
        .find(|l| l.contains("plpgsql.so"))
        .unwrap_or_else(|| panic!("no plpgsql.so in info sharedlibrary:\n{out}"));
    assert!(!plpgsql.contains("symbols only"), "{plpgsql}");
    assert!(
        out.contains("Breakpoint 1, exec_stmt_perform ("),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert!(!err.contains("not the file mapped"), "{err}");
    assert_eq!(tracer_pid(host), 0);
    let plpgsql_file = pg_prefix(15).join("lib/postgresql/plpgsql.so");
    let mapped_as = ct.install.join("lib/postgresql/plpgsql.so");
    assert_eq!(code_differs(host, &plpgsql_file, &mapped_as), None);
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());

    // plancache writes its recorder into the backend: through ptrace and
    // /proc/PID/mem, which SYS_PTRACE grants
    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    // the sidecar's pgdbg has the capabilities asked for, no more
    let has_caps = |p: &Pgdbg| {
        let caps_of_pgdbg = capabilities(p.child.id() as i32);
        const CAP_SYS_PTRACE: u32 = 19;
        const CAP_SYS_ADMIN: u32 = 21;
        const CAP_PERFMON: u32 = 38;
        assert!(
            caps_of_pgdbg & (1 << CAP_SYS_PTRACE) != 0,
            "{caps_of_pgdbg:#x}"
        );
        for cap in [CAP_SYS_ADMIN, CAP_PERFMON] {
            assert!(caps_of_pgdbg & (1 << cap) == 0, "{cap}: {caps_of_pgdbg:#x}");
        }
    };
    let ev = plancache_from_sidecar(&sc, ns, host, 6, has_caps, || {
        c.batch_execute(
            "create table dk_t as select g as id from generate_series(1, 1000) g; analyze dk_t;
             prepare s(int) as select count(*) from dk_t where id < $1",
        )
        .unwrap();
        for _ in 0..6 {
            c.batch_execute("execute s(100)").unwrap();
        }
    });
    assert!(
        ev[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("fewer_than_5_custom_plans")),
        "{}",
        ev[0]
    );
    assert_untouched(&watches);
}

/// A non-root operator's case (CloudNativePG and the Zalando and Crunchy
/// operators run PostgreSQL as a non-root uid; `kubectl debug` with that
/// `runAsUser`): pgdbg in the sidecar as the server's own user, with no
/// capability at all.  `bt` through plpgsql.so, a breakpoint in it hit and
/// removed, and `plancache` (its recorder written into the backend) work
/// as for root; the code is the file's afterwards.  (This kernel has no
/// Yama: its `ptrace_scope` 1, which would need CAP_SYS_PTRACE here, is
/// not tested.)
#[test]
fn sidecar_as_the_servers_own_user() {
    let (ct, sc) = start();
    let sc = sc.as_servers_user();
    let watches = watch_decoys(&ct, &sc);
    let (ns, host, h) = busy_in_plpgsql(&ct);
    let mut args = vec!["attach".to_string(), ns.to_string(), "-q".into()];
    args.extend(ex(&[
        "bt",
        "break plpgsql:exec_stmt_perform",
        "continue",
        "delete",
        "detach",
    ]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = sc.pgdbg(&pgdbg_bin(), &argv);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let f = frames(&out);
    for want in ["pg_sleep", "exec_stmt_perform", "plpgsql_inline_handler"] {
        assert!(f.iter().any(|x| x == want), "{want} missing:\n{out}\n{err}");
    }
    assert!(
        out.contains("Breakpoint 1, exec_stmt_perform ("),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert_eq!(tracer_pid(host), 0);
    let plpgsql_file = pg_prefix(15).join("lib/postgresql/plpgsql.so");
    let mapped_as = ct.install.join("lib/postgresql/plpgsql.so");
    assert_eq!(code_differs(host, &plpgsql_file, &mapped_as), None);
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());

    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    // pgdbg runs as the server's uid, with no capability
    let server_uid = uid_of(host);
    let as_server = |p: &Pgdbg| {
        let pid = pgdbg_under(p.child.id() as i32);
        assert_eq!(uid_of(pid), server_uid);
        assert_ne!(server_uid, 0);
        assert_eq!(capabilities(p.child.id() as i32), 0);
    };
    plancache_from_sidecar(&sc, ns, host, 6, as_server, || {
        c.batch_execute(
            "create table nr_t as select g as id from generate_series(1, 1000) g; analyze nr_t;
             prepare s(int) as select count(*) from nr_t where id < $1",
        )
        .unwrap();
        for _ in 0..6 {
            c.batch_execute("execute s(100)").unwrap();
        }
    });
    assert_untouched(&watches);
}

/// The real uid of process `pid`.
fn uid_of(pid: i32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap()
}

/// A library replaced under the running server, as a package upgrade
/// does (a new file renamed over the path): the backend still maps the
/// old file, the path names another one with the same first page (a copy
/// with a page appended).  From a sidecar with Docker's capabilities (no
/// `/proc/PID/map_files`), pgdbg opens the path, finds another inode on
/// the open file and reads nothing of it: it says so in one line, and the
/// frames in plpgsql.so stay unnamed rather than named from another file.
/// From the host as root it reads the mapped copy (`map_files`).
#[test]
fn library_replaced_under_the_server_is_not_read() {
    let ct = Container::start_overlay(&pg_prefix(15), &["jit = off"]);
    let mut caps = container::DOCKER_DEFAULT_CAPS.to_vec();
    caps.push("sys_ptrace");
    let sc = Sidecar::start(&ct, &pgdbg_bin()).with_only_capabilities(&caps);
    let (ns, host, h) = busy_in_plpgsql(&ct);
    let seen = PathBuf::from(format!("/proc/{host}/root"))
        .join(ct.install.strip_prefix("/").unwrap())
        .join("lib/postgresql/plpgsql.so");
    let mut bytes = std::fs::read(&seen).unwrap();
    let old_ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&seen).unwrap());
    bytes.extend(std::iter::repeat_n(0u8, 4096));
    let tmp = seen.with_extension("so.new");
    std::fs::write(&tmp, &bytes).unwrap();
    std::fs::rename(&tmp, &seen).unwrap();
    let new_ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&seen).unwrap());
    assert_ne!(old_ino, new_ino, "the rename made no new file");

    let mut args = vec!["attach".to_string(), ns.to_string(), "-q".into()];
    args.extend(ex(&["bt", "info sharedlibrary", "detach"]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = sc.pgdbg(&pgdbg_bin(), &argv);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("not reading") && l.contains("plpgsql.so"))
        .collect();
    assert_eq!(said.len(), 1, "one line about plpgsql.so:\n{err}");
    assert!(
        said[0].contains("was replaced or removed after process")
            && said[0].contains("CAP_SYS_ADMIN"),
        "{}",
        said[0]
    );
    let f = frames(&out);
    assert!(f.iter().any(|x| x == "pg_sleep"), "{out}");
    for named_from_plpgsql in ["exec_stmt_perform", "plpgsql_inline_handler"] {
        assert!(
            !f.iter().any(|x| x == named_from_plpgsql),
            "{named_from_plpgsql} named from a file the backend does not map:\n{out}"
        );
    }
    assert_eq!(tracer_pid(host), 0);

    // from the host as root, the mapped copy itself is read (through
    // map_files, checked by its inode): the frames are named
    let host_s = host.to_string();
    let mut args = vec!["attach", host_s.as_str(), "-q"];
    let cmds = ex(&["bt", "detach"]);
    args.extend(cmds.iter().map(String::as_str));
    let (code, out, err) = pgdbg(&args);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(!err.contains("not reading"), "{err}");
    let f = frames(&out);
    for want in ["exec_stmt_perform", "plpgsql_inline_handler"] {
        assert!(f.iter().any(|x| x == want), "{want} missing:\n{out}\n{err}");
    }
    assert_eq!(tracer_pid(host), 0);
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());
}

/// `None` when every executable mapping of `mapped_as` in process `pid`
/// holds `file`'s bytes at the mapping's offset, else where it differs.
fn code_differs(pid: i32, file: &std::path::Path, mapped_as: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let data = std::fs::read(file).unwrap();
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut seen = 0;
    for l in maps.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 6 || !w[1].contains('x') || std::path::Path::new(w[5]) != mapped_as {
            continue;
        }
        let (a, b) = w[0].split_once('-').unwrap();
        let start = u64::from_str_radix(a, 16).unwrap();
        let end = u64::from_str_radix(b, 16).unwrap();
        let off = usize::from_str_radix(w[2], 16).unwrap();
        let len = ((end - start) as usize).min(data.len() - off);
        let mut got = vec![0u8; len];
        mem.read_exact_at(&mut got, start).unwrap();
        if let Some(k) = (0..len).find(|&k| got[k] != data[off + k]) {
            return Some(format!(
                "{}: byte at {:#x} is {:#04x}, the file's {:#04x}",
                l,
                start + k as u64,
                got[k],
                data[off + k]
            ));
        }
        seen += 1;
    }
    (seen == 0).then(|| format!("no executable mapping of {} in {pid}", mapped_as.display()))
}

/// The effective capabilities (`CapEff`) of the process named pgdbg among
/// the descendants of `pid`.
fn capabilities(pid: i32) -> u64 {
    let p = pgdbg_under(pid);
    let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap_or_else(|| panic!("no CapEff:\n{status}"));
    u64::from_str_radix(eff.trim(), 16).unwrap()
}

/// The process named pgdbg among the descendants of `pid` (the
/// sidecar's command: nsenter, unshare, sh, setpriv, each exec'ing or
/// forking the next).
fn pgdbg_under(pid: i32) -> i32 {
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
        if status.lines().next() == Some("Name:\tpgdbg") {
            return p;
        }
        todo.extend(container::children(p));
    }
    panic!("no pgdbg process under {pid}")
}
