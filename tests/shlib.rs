//! Shared libraries in a backend: PL/pgSQL (`plpgsql.so`), loaded by the
//! backend the first time it runs a PL/pgSQL function.  A breakpoint set
//! before that is pending, armed when the library loads, and hit in that
//! very call; parameters and structs of the library's DWARF print; `bt`
//! names every frame through `plpgsql_exec_function` with arguments;
//! `count` counts library functions, inlined instances included; detach
//! leaves the library's code as in its file.  Debian's stripped
//! `plpgsql.so` works through its exported symbols.

use common::*;
use pgdbg_testbed as common;
use std::path::{Path, PathBuf};
use std::time::Duration;

const FUNCS: &str = "
create function sel_loop(n int) returns int language plpgsql as $$
declare r int := 0;
begin
  for i in 1..n loop
    select i * 2 into r;
  end loop;
  return r;
end $$;
create function count_to(n bigint) returns bigint language plpgsql as $$
declare i bigint = 0;
begin
  while i < n loop
    i := i + 1;
  end loop;
  return i;
end $$;";

/// The path of the object named `file` mapped into `pid`, if mapped.
fn mapped_library(pid: i32, file: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with(&format!("/{file}")))
        .map(PathBuf::from)
}

/// The code bytes of `symbol` (a function of the library at `lib`) in the
/// live process equal the file's.
fn library_code_matches_file(pid: i32, lib: &Path, symbol: &str, len: usize) -> bool {
    mapped_code_matches_file(pid, lib, lib, symbol, len)
}

/// A backend that has not loaded plpgsql.so (checked), with the test's
/// functions created by another one.
fn fresh_backend(cl: &Cluster) -> (Client, i32) {
    let mut setup = cl.connect();
    setup.exec(FUNCS);
    let mut c = cl.connect();
    let pid = c.pid();
    assert_eq!(
        mapped_library(pid, "plpgsql.so"),
        None,
        "a new backend must not have plpgsql.so loaded yet"
    );
    (c, pid)
}

fn pending_breakpoint_in_plpgsql(major: u32) {
    let cl = Cluster::start(major);
    let (mut c, pid) = fresh_backend(&cl);
    let mut args = vec!["attach".to_string(), pid.to_string(), "-q".into()];
    args.extend(ex(&[
        "break exec_stmt_execsql",
        "info breakpoints",
        "continue",
        "print stmt->sqlstmt->query",
        "print estate->func->fn_signature",
        "print *estate",
        "info args",
        "bt",
        // the two calls left, with a parameter's field at each
        "delete",
        "trace exec_stmt_execsql stmt->sqlstmt->query --count 2",
        "info sharedlibrary",
        "detach",
    ]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = Pgdbg::spawn_attached(&argv, pid);
    // queued on the socket until pgdbg has set the breakpoint and resumed
    let h = c.spawn_text("select sel_loop(3)");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "pgdbg failed:\n{out}\n{err}");
    assert_eq!(c.rejoin(h).unwrap(), "6", "the function's result");
    assert_eq!(tracer_pid(pid), 0);
    eprintln!("{out}");
    assert!(
        out.contains("pending until a library defines it (plpgsql.so has it"),
        "{out}"
    );
    assert!(out.contains("<PENDING>"), "{out}");
    assert!(
        out.contains("armed: plpgsql.so was loaded"),
        "the breakpoint was armed when the library loaded:\n{out}"
    );
    assert!(
        out.contains("Breakpoint 1, exec_stmt_execsql (estate=0x"),
        "the pending breakpoint hit in the first call:\n{out}"
    );
    let vals = print_values(&out);
    assert!(vals[0].contains("\"select i * 2"), "{vals:?}");
    assert!(vals[1].contains("\"sel_loop(integer)\""), "{vals:?}");
    assert!(
        vals[2].starts_with("{func = 0x") && vals[2].contains("retisnull = "),
        "*estate as a struct of plpgsql.so's DWARF: {vals:?}"
    );
    assert!(out.contains("stmt = 0x"), "info args: {out}");
    // bt: library frames with arguments and lines, down into the server
    let bt: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    let frame = |f: &str| {
        bt.iter()
            .find(|l| l.contains(&format!(" {f} (")) || l.contains(&format!(" {f}+")))
            .unwrap_or_else(|| panic!("no frame {f} in:\n{}", bt.join("\n")))
    };
    assert!(frame("exec_stmt_execsql").contains("at pl_exec.c:"));
    let f = frame("plpgsql_exec_function");
    assert!(
        f.contains("func=0x") && f.contains("fcinfo=0x") && f.contains("at pl_exec.c:"),
        "{f}"
    );
    assert!(frame("plpgsql_call_handler").contains("at pl_handler.c:"));
    assert!(frame("PostgresMain").contains("at postgres.c:"));
    assert!(!bt.iter().any(|l| l.contains(" ?? (")), "{}", bt.join("\n"));
    let traced: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("exec_stmt_execsql(stmt->sqlstmt->query="))
        .collect();
    assert_eq!(traced.len(), 2, "trace of a library function:\n{out}");
    assert!(traced[0].contains("\"select i * 2"), "{traced:?}");
    // info sharedlibrary: plpgsql.so with its DWARF
    let lib = mapped_library(pid, "plpgsql.so").expect("plpgsql.so loaded");
    assert!(
        out.lines().any(|l| l.trim() == lib.to_str().unwrap()),
        "{out}"
    );
    assert!(out.contains("embedded in the binary ("), "{out}");
    // detach restored the library's code
    assert!(library_code_matches_file(
        pid,
        &lib,
        "exec_stmt_execsql",
        16
    ));
    assert_eq!(c.query_one_i64("select sel_loop(4)"), 8);
    cl.assert_no_crash();
}

#[test]
fn pending_breakpoint_in_plpgsql_15() {
    pending_breakpoint_in_plpgsql(15);
}

#[test]
fn pending_breakpoint_in_plpgsql_18() {
    pending_breakpoint_in_plpgsql(18);
}

/// `count` of a library function and of a function gcc inlined into it
/// (`exec_eval_simple_expr` has no symbol in the 15 build) over seed 002's
/// loop: 2N + 2 evaluations (the initial value, the condition and the
/// assignment per iteration, the last condition; a bpftrace uprobe on
/// `exec_eval_expr` counted the same).
fn count_in_plpgsql(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    c.exec(FUNCS);
    assert_eq!(c.query_one_i64("select count_to(1)"), 1);
    let pid = c.pid();
    let lib = mapped_library(pid, "plpgsql.so").expect("plpgsql.so loaded");
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            repo()
                .join("scripts/examples/plpgsql-plancache-checks.pgdbg")
                .to_str()
                .unwrap(),
            "--for",
            "600s",
        ],
        pid,
    );
    let n = 100_000;
    assert_eq!(c.query_one_i64(&format!("select count_to({n})")), n);
    unsafe {
        libc::kill(p.pid(), libc::SIGINT);
    }
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert!(
        code == 0 || code == 130,
        "pgdbg failed ({code}):\n{out}\n{err}"
    );
    eprintln!("{out}");
    let calls = |f: &str| -> i64 {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(f))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("no count of {f}:\n{out}\n{err}"))
    };
    assert_eq!(calls("exec_eval_expr"), 2 * n + 2);
    assert_eq!(calls("exec_eval_simple_expr"), 2 * n + 2);
    // the example's answer: a valid simple expression skips the plan
    // cache (a few checks per call of the function, not per evaluation)
    for f in [
        "GetCachedPlan",
        "RevalidateCachedQuery",
        "AcquireExecutorLocks",
    ] {
        assert!(calls(f) < 100, "{f}: {}", calls(f));
    }
    assert_eq!(tracer_pid(pid), 0);
    assert!(library_code_matches_file(pid, &lib, "exec_eval_expr", 16));
    assert_eq!(c.query_one_i64("select count_to(10)"), 10);
    cl.assert_no_crash();
}

#[test]
fn count_in_plpgsql_15() {
    count_in_plpgsql(15);
}

#[test]
fn count_in_plpgsql_18() {
    count_in_plpgsql(18);
}

/// Debian's postgresql-15: a stripped plpgsql.so (exported symbols only).
/// A pending breakpoint on an exported function is armed when a fresh
/// backend loads it and hits; its code is restored at detach.
#[test]
fn debian_stripped_plpgsql() {
    let prefix = PathBuf::from("/usr/lib/postgresql/15");
    assert!(
        prefix.join("lib/plpgsql.so").exists(),
        "Debian's postgresql-15 package is needed (scripts/test installs it)"
    );
    let cl = Cluster::start_prefix(&prefix);
    let (mut c, pid) = fresh_backend(&cl);
    let mut args = vec!["attach".to_string(), pid.to_string(), "-q".into()];
    args.extend(ex(&[
        "break plpgsql:plpgsql_exec_function",
        "continue",
        "bt 3",
        "info sharedlibrary",
        "detach",
    ]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = Pgdbg::spawn_attached(&argv, pid);
    let h = c.spawn_text("select sel_loop(2)");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "pgdbg failed:\n{out}\n{err}");
    assert_eq!(c.rejoin(h).unwrap(), "4");
    eprintln!("{out}");
    assert!(out.contains("armed: plpgsql.so was loaded"), "{out}");
    assert!(
        out.contains("Breakpoint 1, plpgsql_exec_function ("),
        "{out}"
    );
    assert!(out.contains("plpgsql_call_handler"), "bt:\n{out}");
    assert!(out.contains("ELF symbols only"), "{out}");
    let lib = mapped_library(pid, "plpgsql.so").unwrap();
    assert!(library_code_matches_file(
        pid,
        &lib,
        "plpgsql_exec_function",
        16
    ));
    cl.assert_no_crash();
}

/// `LOAD 'auto_explain'` after attach: a breakpoint on its executor hook,
/// pending until then, is armed when the library loads and hits at the
/// next statement; the hook's parameter prints; detach restores the code.
fn load_after_attach(prefix: &Path, lib_spec: &str, function: &str, expr: Option<&str>) {
    let cl = Cluster::start_prefix(prefix);
    let mut c = cl.connect();
    let pid = c.pid();
    assert_eq!(mapped_library(pid, "auto_explain.so"), None);
    let brk = format!("break {lib_spec}");
    let mut cmds = vec![brk.as_str(), "continue", "bt 2"];
    let pr = expr.map(|e| format!("print {e}"));
    if let Some(p) = &pr {
        cmds.push(p);
    }
    cmds.push("detach");
    let mut args = vec!["attach".to_string(), pid.to_string(), "-q".into()];
    args.extend(ex(&cmds));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = Pgdbg::spawn_attached(&argv, pid);
    let h = c.spawn_text("load 'auto_explain'; select 42 as answer");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "pgdbg failed:\n{out}\n{err}");
    assert_eq!(c.rejoin(h).unwrap(), "42");
    eprintln!("{out}");
    assert!(
        out.contains("pending until a library defines it (auto_explain.so has it"),
        "{out}"
    );
    assert!(out.contains("armed: auto_explain.so was loaded"), "{out}");
    assert!(
        out.contains(&format!("Breakpoint 1, {function} (")),
        "{out}"
    );
    if expr.is_some() {
        assert!(
            print_values(&out)[0].contains("select 42 as answer"),
            "{out}"
        );
    }
    let lib = mapped_library(pid, "auto_explain.so").expect("auto_explain.so loaded");
    assert!(library_code_matches_file(pid, &lib, function, 16));
    assert_eq!(c.query_one_i64("select 7"), 7);
    cl.assert_no_crash();
}

#[test]
fn load_auto_explain_after_attach_15() {
    load_after_attach(
        &pg_prefix(15),
        "auto_explain:explain_ExecutorStart",
        "explain_ExecutorStart",
        Some("queryDesc->sourceText"),
    );
}

#[test]
fn load_auto_explain_after_attach_18() {
    load_after_attach(
        &pg_prefix(18),
        "auto_explain:explain_ExecutorStart",
        "explain_ExecutorStart",
        Some("queryDesc->sourceText"),
    );
}

/// Debian's stripped auto_explain.so: its exported `_PG_init`, which runs
/// right after the library is mapped, is hit.
#[test]
fn load_auto_explain_after_attach_debian() {
    load_after_attach(
        Path::new("/usr/lib/postgresql/15"),
        "auto_explain:_PG_init",
        "_PG_init",
        None,
    );
}

/// pgdbg killed (SIGKILL) while a breakpoint in plpgsql.so and the
/// dynamic linker's hook (for a pending breakpoint) are armed: its
/// guardian restores both, the backend goes on running PL/pgSQL and
/// loading libraries.
#[test]
fn guardian_restores_library_breakpoints() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    c.exec(FUNCS);
    assert_eq!(c.query_one_i64("select sel_loop(1)"), 2);
    let pid = c.pid();
    let plpgsql = mapped_library(pid, "plpgsql.so").unwrap();
    let ld = mapped_library(pid, "ld-linux-x86-64.so.2").unwrap();
    let out_file =
        std::env::temp_dir().join(format!("pgdbg-shlib-kill-{}.out", std::process::id()));
    let mut p = Pgdbg::spawn_to_file(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break exec_stmt_execsql",
            "--ex",
            "break auto_explain:explain_ExecutorStart",
            "--ex",
            "continue",
        ],
        &out_file,
    );
    p.wait_attached(pid);
    wait_until("both int3s written", Duration::from_secs(60), || {
        !library_code_matches_file(pid, &plpgsql, "exec_stmt_execsql", 1)
            && !library_code_matches_file(pid, &ld, "_dl_debug_state", 1)
    });
    unsafe {
        libc::kill(p.pid(), libc::SIGKILL);
    }
    let (status, _, err) = p.wait(Duration::from_secs(30));
    assert_eq!(status, -1, "{err}");
    wait_until("untraced", Duration::from_secs(10), || tracer_pid(pid) == 0);
    wait_until("the guardian's restore", Duration::from_secs(10), || {
        library_code_matches_file(pid, &plpgsql, "exec_stmt_execsql", 16)
            && library_code_matches_file(pid, &ld, "_dl_debug_state", 4)
    });
    assert_eq!(c.query_one_i64("select sel_loop(5)"), 10);
    c.exec("load 'auto_explain'");
    assert_eq!(c.query_one_i64("select 3"), 3);
    let _ = std::fs::remove_file(&out_file);
    cl.assert_no_crash();
}

/// `trace` of a function of a library the backend has not loaded: one
/// line naming the library and what to do, the backend untouched.
#[test]
fn trace_of_a_library_not_loaded_says_so() {
    let cl = Cluster::start(15);
    let (mut c, pid) = fresh_backend(&cl);
    let (code, out, err) = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "trace exec_stmt_execsql",
    ])
    .wait(Duration::from_secs(60));
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "exec_stmt_execsql is in plpgsql.so, which backend {pid} has not loaded yet"
        )),
        "{err}"
    );
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(mapped_library(pid, "plpgsql.so"), None);
    assert_eq!(c.query_one_i64("select sel_loop(2)"), 4);
    cl.assert_no_crash();
}

/// Stacks named from perf records (`waits trace --stacks`, `profile`):
/// a library's frames are named by its DWARF as the binary's are, inlined
/// calls included (`exec_stmt_perform` inlined into `exec_stmts`) and no
/// compiler clone suffix (`exec_run_select.constprop.0`), not by its ELF
/// symbols alone.
fn library_frames_in_perf_stacks(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    // a PL/pgSQL loop much longer than the test, cancelled at its end
    let h = c.spawn_text(
        "do $$ begin for i in 1..1000000 loop perform pg_sleep(0.01); end loop; end $$",
    );
    let t0 = std::time::Instant::now();
    while mapped_library(pid, "plpgsql.so").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "plpgsql.so never loaded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // (output() reads stdout while pgdbg runs: a hundred long lines)
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "waits trace --for 1s --stacks 24",
    ]);
    cl.cancel(&[pid]);
    assert!(
        c.rejoin(h)
            .is_err_and(|e| e.contains("canceling statement"))
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let stacks: Vec<&str> = out.lines().filter(|l| l.contains("pg_sleep <- ")).collect();
    assert!(!stacks.is_empty(), "no pg_sleep stack:\n{out}");
    for s in &stacks {
        assert!(
            s.contains("exec_run_select <- exec_stmt_perform <- exec_stmts <- exec_stmt_fori"),
            "{s}"
        );
        assert!(!s.contains(".constprop") && !s.contains("[plpgsql"), "{s}");
    }
    assert_eq!(tracer_pid(pid), 0);
    cl.assert_no_crash();
}

#[test]
fn library_frames_in_perf_stacks_15() {
    library_frames_in_perf_stacks(15);
}

#[test]
fn library_frames_in_perf_stacks_18() {
    library_frames_in_perf_stacks(18);
}
