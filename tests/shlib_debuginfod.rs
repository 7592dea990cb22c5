//! debuginfod serves a shared library's DWARF like the binary's: a
//! `strip --strip-all` copy of the 15 build whose `plpgsql.so` is stripped
//! too, the debug files of both only on elfutils' `debuginfod` on
//! 127.0.0.1.  A breakpoint in plpgsql.so then has its lines and its
//! parameters' structs, and the file lands in the debuginfod cache.

use common::debuginfod::*;
use common::*;
use pgdbg_testbed as common;
use std::process::{Command, Stdio};
use std::time::Duration;

fn run_tool(cmd: &str, args: &[&std::ffi::OsStr]) {
    let st = Command::new(cmd).args(args).status().unwrap();
    assert!(st.success(), "{cmd} {args:?}");
}

#[test]
fn stripped_plpgsql_gets_dwarf_from_debuginfod() {
    let prefix = pg_prefix(15);
    let work = std::env::temp_dir().join(format!("pgdbg-shlib-dbgd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("debug")).unwrap();
    let lib_full = prefix.join("lib/postgresql/plpgsql.so");
    for (src, name) in [
        (prefix.join("bin/postgres"), "postgres.debug"),
        (lib_full.clone(), "plpgsql.debug"),
    ] {
        run_tool(
            "objcopy",
            &[
                "--only-keep-debug".as_ref(),
                src.as_os_str(),
                work.join("debug").join(name).as_os_str(),
            ],
        );
    }
    let mut cl = Cluster::start(15);
    let inst = work.join("inst");
    cl.restart_from_stripped_copy(&prefix, &inst, "--strip-all");
    // the copy's $libdir: the build's modules, plpgsql.so stripped (the
    // server finds $libdir next to its binary; backends load it later)
    std::fs::remove_file(inst.join("lib")).unwrap();
    std::fs::create_dir_all(inst.join("lib/postgresql")).unwrap();
    for e in std::fs::read_dir(prefix.join("lib/postgresql")).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "plpgsql.so" {
            std::os::unix::fs::symlink(e.path(), inst.join("lib/postgresql").join(e.file_name()))
                .unwrap();
        }
    }
    let lib = inst.join("lib/postgresql/plpgsql.so");
    run_tool(
        "strip",
        &[
            "--strip-all".as_ref(),
            "-o".as_ref(),
            lib.as_os_str(),
            lib_full.as_os_str(),
        ],
    );
    run_tool("chmod", &["-R".as_ref(), "a+rX".as_ref(), work.as_os_str()]);
    let id = build_id(&lib);
    assert_eq!(build_id(&lib_full), id);

    let server = Debuginfod::start(&work.join("debug"), &work.join("db.sqlite"), 2);
    let mut c = cl.connect();
    c.exec(
        "create function sel_loop(n int) returns int language plpgsql as $$
         declare r int := 0;
         begin
           for i in 1..n loop
             select i * 2 into r;
           end loop;
           return r;
         end $$",
    );
    assert_eq!(c.query_one_i64("select sel_loop(1)"), 2);
    let pid = c.pid();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        maps.contains(lib.to_str().unwrap()),
        "the backend loaded the stripped plpgsql.so"
    );
    let cache = work.join("cache");
    let mut p = Command::new(pgdbg_bin())
        .args(["attach", &pid.to_string(), "-q"])
        .args(["--ex", "break exec_stmt_execsql"])
        .args(["--ex", "continue"])
        .args(["--ex", "print stmt->sqlstmt->query"])
        .args(["--ex", "bt 1"])
        .args(["--ex", "info sharedlibrary"])
        .args(["--ex", "detach"])
        .env("DEBUGINFOD_URLS", &server.url)
        .env("DEBUGINFOD_CACHE_PATH", &cache)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("pgdbg to attach", Duration::from_secs(60), || {
        tracer_pid(pid) != 0 || p.try_wait().unwrap().is_some()
    });
    let h = c.spawn_text("select sel_loop(2)");
    let out = p.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(out.status.success(), "pgdbg failed:\n{stdout}\n{stderr}");
    assert_eq!(c.rejoin(h).unwrap(), "4");
    eprintln!("{stdout}\n{stderr}");
    assert!(
        stdout.contains("Breakpoint 1, exec_stmt_execsql (estate=0x")
            && stdout.contains("pl_exec.c:"),
        "{stdout}"
    );
    assert!(
        print_values(&stdout)[0].contains("\"select i * 2"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .position(|l| l.trim() == lib.to_str().unwrap())
        .map(|i| stdout.lines().nth(i - 1).unwrap().to_string())
        .unwrap_or_else(|| panic!("plpgsql.so in info sharedlibrary:\n{stdout}"));
    assert!(line.contains("debuginfod"), "{line}");
    assert!(
        cache.join(&id).join("debuginfo").exists(),
        "the library's debug file in the debuginfod cache"
    );
    assert_eq!(tracer_pid(pid), 0);
    drop(server);
    cl.stop_stripped();
    let _ = std::fs::remove_dir_all(&work);
}
