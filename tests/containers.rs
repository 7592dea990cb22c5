//! PostgreSQL 15 in a container (its own PID and mount namespace and root
//! directory: testbed/src/container.rs says how and why), pgdbg on the
//! host: attach by host PID and by the container's PID, `bt` through
//! plpgsql.so, `--cluster` with the container's data directory,
//! `plan --progress` with parallel workers (their titles name the
//! leader's PID in the container), and the host's file at the container's
//! `plpgsql.so` path is never opened.

use common::*;
use container::{Container, Watch};
use pgdbg_testbed as common;
use pgdbg_testbed::container;
use std::time::Duration;

const SETTINGS: &[&str] = container::PARALLEL_SETTINGS;
fn start() -> Container {
    Container::start(&pg_prefix(15), SETTINGS)
}

/// A backend in the container busy in a plpgsql function (pg_sleep inside
/// a loop, so plpgsql.so is mapped and on the stack): its PID in the
/// container, its host PID, and the thread running it.
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
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(format!("/proc/{host}/maps"))
        .unwrap_or_default()
        .contains("plpgsql.so")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "plpgsql.so never loaded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (ns, host, h)
}

fn cancel(ct: &Container, ns: i32) {
    let mut c = ct.connect();
    c.execute("select pg_cancel_backend($1)", &[&ns]).unwrap();
}

/// By host PID: `bt` through plpgsql.so's frames (its debug info read
/// from the container's file, not the host's decoy) and `info` naming
/// both PIDs; by the container's PID with `--ns-of`: the same process.
#[test]
fn attach_by_host_and_container_pid() {
    let ct = start();
    let watch = Watch::new(&ct.decoy);
    let (ns, host, h) = busy_in_plpgsql(&ct);
    assert_ne!(ns, host, "the backend's PIDs differ in the two namespaces");

    let (code, out, err) = pgdbg(&[
        "attach",
        &host.to_string(),
        "-q",
        "--ex",
        "bt",
        "--ex",
        "info",
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("pg_sleep"), "{out}");
    assert!(
        out.contains("exec_stmt_perform"),
        "plpgsql frames:\n{out}\n{err}"
    );
    assert!(
        out.contains(&format!("pid:         {host} (PID {ns} in its namespace)")),
        "{out}"
    );
    assert_eq!(tracer_pid(host), 0);

    let pm = ct.postmaster.to_string();
    let (code, out, err) = pgdbg(&[
        "attach",
        "--ns-of",
        &pm,
        &ns.to_string(),
        "-q",
        "--ex",
        "info",
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(&format!("pid:         {host} (PID {ns} in its namespace)")),
        "{out}"
    );

    // profile, doctor and rescue take the container's PID with --ns-of too
    let nss = ns.to_string();
    let (code, out, err) = pgdbg(&["profile", "--ns-of", &pm, &nss, "-q", "--for", "1s"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("profile: ")
                && l.contains(&format!(" samples of backend {host} "))),
        "{out}"
    );
    let (_, out, err) = pgdbg(&["doctor", "--ns-of", &pm, &nss]);
    assert!(
        out.contains(&format!("postmaster {pm} ("))
            && out.contains(&format!("pgdbg may trace process {host}")),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    let (code, out, err) = pgdbg(&["rescue", "--ns-of", &pm, &nss]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!(
            "backend {host} needs no rescue: it is not stopped, not traced, and no pgdbg left a record of it"
        )
    );
    assert_eq!(tracer_pid(host), 0);

    // a PID the container has not: one line, nothing attached
    let (code, _, err) = pgdbg(&["attach", "--ns-of", &pm, "999999", "-q", "--ex", "info"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("no process 999999 in the PID namespace of process"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // --ns-of naming a process of pgdbg's own PID namespace: one line,
    // nothing done (no PID is taken as another's)
    let me = std::process::id().to_string();
    let (code, out, err) = pgdbg(&["rescue", "--ns-of", &me, &host.to_string()]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains(&format!(
            "--ns-of {me}: process {me} is in pgdbg's own PID namespace"
        )),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());
    assert!(
        !watch.touched(),
        "the decoy {} was opened",
        ct.decoy.display()
    );
    // the watch does see a read of the decoy
    let _ = std::fs::read(&ct.decoy).unwrap();
    assert!(watch.touched());
}

/// `--cluster` with the container's data directory (its postmaster.pid
/// says PID 1) finds the postmaster and observes the backends.
#[test]
fn cluster_by_container_data_directory() {
    let ct = start();
    let watch = Watch::new(&ct.decoy);
    let (ns, host, h) = busy_in_plpgsql(&ct);
    let data = ct.data.display().to_string();
    let (code, out, err) = pgdbg(&["ps", "--cluster", &data]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "postmaster {} (PID 1 in its namespace)",
            ct.postmaster
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(" (PID {ns} in its namespace)")),
        "{out}"
    );
    let (code, out, err) = pgdbg(&[
        "attach",
        "--cluster",
        &data,
        "-q",
        "--ex",
        "bt",
        "--for",
        "20s",
    ]);
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("exec_stmt_perform"),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert!(
        out.contains(&host.to_string()) || err.contains(&host.to_string()),
        "{out}{err}"
    );
    assert_eq!(tracer_pid(host), 0);
    assert!(
        !watch.touched(),
        "the decoy {} was opened",
        ct.decoy.display()
    );
}

/// `plan --progress` on a parallel query: the workers' titles name the
/// leader's PID in the container, and their lines show.
#[test]
fn plan_progress_counts_container_workers() {
    let ct = start();
    let (ns, leader, h) = container::parallel_query(&ct);
    let cap = std::env::temp_dir().join(format!("pgdbg-ct-progress-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&cap);
    let cap_s = cap.display().to_string();
    let (code, out, err) = pgdbg(&[
        "attach",
        &leader.to_string(),
        "-q",
        "--capture",
        &cap_s,
        "--ex",
        "plan --progress --every 300ms --for 4s",
    ]);
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    // the report's progress table names the leader by both PIDs
    let (rc, report, rerr) = pgdbg(&["report", &cap_s]);
    let _ = std::fs::remove_file(&cap);
    assert_eq!(rc, 0, "{rerr}");
    assert!(report.contains(&format!("{leader} (PID {ns})")), "{report}");
    container::assert_worker_lines(&out, &err);
}

/// A stripped server in the container (the usual image): the layout pack
/// is checked against `MyProc->pid`, which holds the container's PID.
#[test]
fn stripped_server_layout_pack_checked_with_container_pid() {
    let prefix = pg_prefix(15);
    let copy = std::path::PathBuf::from(format!("/tmp/pgdbg-ct-strip-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(copy.join("bin")).unwrap();
    for d in ["lib", "share"] {
        let st = std::process::Command::new("cp")
            .arg("-a")
            .arg(prefix.join(d))
            .arg(copy.join(d))
            .status()
            .unwrap();
        assert!(st.success());
    }
    for b in ["initdb", "postgres"] {
        let st = std::process::Command::new("strip")
            .args(["--strip-debug", "-o"])
            .arg(copy.join("bin").join(b))
            .arg(prefix.join("bin").join(b))
            .status()
            .unwrap();
        assert!(st.success());
    }
    std::process::Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&copy)
        .status()
        .unwrap();
    let ct = Container::start(&copy, SETTINGS);
    let mut c = ct.connect();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    let (code, out, err) = pgdbg(&["attach", &host.to_string(), "--ex", "print MyProc->pid"]);
    drop(c);
    drop(ct);
    let _ = std::fs::remove_dir_all(&copy);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("the layout pack for PostgreSQL 15"), "{err}");
    assert!(!err.contains("does not match"), "{err}");
    assert_eq!(print_values(&out), vec![ns.to_string()], "{out}");
}

/// A library whose DWARF was compressed by dwz (as Debian's and Fedora's
/// debug packages are) names its supplementary file by an absolute path
/// (`.gnu_debugaltlink`) that exists only inside the container; the host
/// has another file at that path.  From the host, at a breakpoint in
/// plpgsql.so (an inlined copy whose parameters' DIEs refer into the
/// supplementary file), the parameters are shown and `ptype` of one names
/// its struct, and the host's file is not opened.  Without the
/// container's file (the host's refused by its build-id), the parameters
/// are missing and one line says which file is.  A member whose type dwz
/// moved into the supplementary file has that type, read from there.
#[test]
fn dwz_supplementary_file_read_inside_the_container() {
    let me = std::process::id();
    let copy = std::path::PathBuf::from(format!("/tmp/pgdbg-ct-dwz-{me}"));
    let alt = format!("/tmp/pgdbg-dwz-alt-{me}.debug");
    copy_install(15, &copy);
    let common = dwz_multifile(&copy, &alt, &["lib/postgresql/plpgsql.so", "bin/postgres"]);
    // the host's file at the container's path: another file
    std::fs::write(&alt, "not the container's supplementary file\n").unwrap();

    let ct = Container::start(&copy, SETTINGS);
    let (ns, host, h) = busy_in_plpgsql(&ct);
    let ptype = |ok: bool| {
        let (code, out, err) = pgdbg(&[
            "attach",
            &host.to_string(),
            "-q",
            "--ex",
            "break plpgsql:exec_stmt_perform",
            "--ex",
            "continue",
            "--ex",
            "ptype estate",
            "--ex",
            "delete",
            "--ex",
            "detach",
        ]);
        assert_eq!(code == 0, ok, "stdout:\n{out}\nstderr:\n{err}");
        assert_eq!(tracer_pid(host), 0);
        out + &err
    };
    // (without it, plpgsql's own DIEs that refer into it are incomplete:
    // the inlined function's parameters are not there)
    // (the host's file is tried then, and refused: not the build-id named)
    let without = ptype(false);
    std::fs::copy(&common, ct.root.join(alt.trim_start_matches('/'))).unwrap();
    let decoy = Watch::new(std::path::Path::new(&alt));
    let with = ptype(true);
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());
    assert!(!decoy.touched(), "the host's {alt} was opened");
    drop(ct);
    let _ = std::fs::remove_dir_all(&copy);
    let _ = std::fs::remove_file(&alt);
    // the inlined function's parameters (their DIEs refer into the
    // supplementary file) and the struct behind one
    assert!(with.contains("exec_stmt_perform (stmt=0x"), "{with}");
    assert!(!without.contains("exec_stmt_perform (stmt="), "{without}");
    assert!(with.contains("    ReturnSetInfo *rsi;"), "{with}");
    // a member whose type dwz moved into that file: read from there
    assert!(with.contains("    Datum retval;"), "{with}");
    assert!(!with.contains("supplementary file>"), "{with}");
    let missing = format!("refers to a dwz supplementary file, {alt}, found nowhere");
    assert!(without.contains(&missing), "{without}");
    assert!(!with.contains("found nowhere"), "{with}");
}

/// docs/containers.md's commands from the host, as written (the
/// document's PIDs and data directory replaced by the container's, the
/// `--for` shortened): each succeeds and shows what its comment says, and
/// a command of the document this test does not know fails it.
#[test]
fn docs_container_examples() {
    use common::recipes::{args_of, assert_all_run, recipes};
    let ct = start();
    let mut c = ct.connect();
    c.batch_execute(
        "create table ct_t as select g as id from generate_series(1, 3000) g; analyze ct_t;
         create function ct_slow(id int) returns bool language plpgsql parallel safe as $$
         begin perform pg_sleep(0.005); return true; end $$;",
    )
    .unwrap();
    let all = recipes("docs/containers.md", &["pgdbg "]);
    let mut done = std::collections::BTreeSet::new();
    let (ns, host, h) = busy_in_plpgsql(&ct);
    let data = ct.data.display().to_string();
    let replace = |cmd: &str| -> Vec<String> {
        args_of(
            &format!("pgdbg {cmd}"),
            &[
                ("48213", &host.to_string()),
                ("48100", &ct.postmaster.to_string()),
                (" 57 ", &format!(" {ns} ")),
                ("/var/lib/docker/volumes/pg/_data", &data),
                ("--for 10s", "--for 3s"),
            ],
        )
    };
    for r in all
        .iter()
        .filter(|r| !r.command.contains("plan --progress"))
    {
        let args = replace(&r.command);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = pgdbg(&a);
        assert_eq!(code, 0, "{args:?}\nstdout:\n{out}\nstderr:\n{err}");
        if r.command.contains("--ex bt") {
            assert!(out.contains("exec_stmt_perform"), "{args:?}:\n{out}\n{err}");
        } else {
            assert!(
                out.contains(&format!("pid:         {host} (PID {ns} in its namespace)")),
                "{args:?}:\n{out}"
            );
        }
        done.insert(r.key());
    }
    cancel(&ct, ns);
    assert!(h.join().unwrap().is_err());

    // the parallel query's workers, found by their titles (the command
    // ends with the statement)
    let r = all
        .iter()
        .find(|r| r.command.contains("plan --progress"))
        .expect("containers.md's plan --progress");
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let leader = ct.host_pid(ns);
    let h =
        std::thread::spawn(move || c.batch_execute("select count(*) from ct_t where ct_slow(id)"));
    container::wait_two_workers(&ct, ns);
    let args = args_of(
        &format!("pgdbg {}", r.command),
        &[("48213", &leader.to_string())],
    );
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = pgdbg(&a);
    assert!(h.join().unwrap().is_ok());
    assert_eq!(code, 0, "{args:?}\nstdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("Worker ") && l.contains("rows so far=")),
        "no worker lines:\n{out}\n{err}"
    );
    done.insert(r.key());
    assert_all_run(&all, &done);
}
