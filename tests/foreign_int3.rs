//! Someone else's int3 in the backend's code (here a kernel uprobe, as
//! perf probe, bpftrace or another pgdbg's `count` place one: a 0xcc in
//! the backend's own copy of the code page) is never saved by pgdbg as an
//! "original" byte: `break`, a probe's own breakpoints and a pending
//! breakpoint armed when its library loads are refused in one line,
//! nothing written (`plancache` stops past it instead of recording); the
//! uprobe keeps working, and
//! once it is gone the code is the file's and the backend runs the
//! function.  Within one session pgdbg places no uprobe over an int3 of
//! its own (the kernel would adopt it and remove it when done).

use common::*;
use pgdbg::perf::UprobeCounter;
use pgdbg_testbed as common;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const FOREIGN: &str = "an int3 that is not pgdbg's is at";
const FOREIGN_UPROBE: &str = "an int3 that is not pgdbg's (a kernel uprobe from perf/bpftrace/another pgdbg, or another debugger)";

fn byte_at(pid: i32, addr: u64) -> u8 {
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8; 1];
    mem.read_exact_at(&mut b, addr).unwrap();
    b[0]
}

/// A kernel uprobe counting `pid`'s calls at `offset` of `file` (what
/// `perf probe`, bpftrace or pgdbg's `count` place).
fn uprobe(file: &Path, offset: u64, pid: i32) -> UprobeCounter {
    UprobeCounter::open(file, offset, pid)
        .unwrap_or_else(|e| panic!("a uprobe at {}+{offset:#x}: {e}", file.display()))
}

fn executes_get_cached_plan(a: &mut Client, n: i64) {
    a.exec(&format!(
        "prepare gcp(int) as select $1 + 1; execute gcp({n}); execute gcp({n}); deallocate gcp"
    ));
    assert_eq!(a.query_one_i64(&format!("select {n}")), n);
}

/// A uprobe on GetCachedPlan's entry: `break`, `plancache` (the recorder's
/// jump), and the probes' own breakpoints are refused in one line, the
/// backend untouched and serving; the uprobe counts on; removed, it leaves
/// the file's code, which the backend runs.
fn foreign_uprobe_at_entry(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let bin = cl.postgres_binary();
    let (vaddr, offset) = symbol_in_file(&exe, "GetCachedPlan");
    let at = runtime(pid, &exe, vaddr);
    assert!(code_matches_file(pid, &bin, "GetCachedPlan", 16));
    let probe = uprobe(&exe, offset, pid);
    wait_until(
        "the uprobe's int3 in the backend's code",
        Duration::from_secs(10),
        || byte_at(pid, at) == 0xcc,
    );
    for cmd in [
        "break GetCachedPlan",
        "plancache --stops --for 2s",
        "count GetCachedPlan --ptrace --for 1s",
        "trace GetCachedPlan --for 1s",
    ] {
        let (code, out, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", cmd]);
        assert_one_line_error(code, &err, &format!("{FOREIGN} GetCachedPlan (0x"));
        assert!(
            err.contains("kernel uprobe") && err.contains("remove it and try again"),
            "{cmd}: {err}"
        );
        assert!(
            !out.contains("stopping at each decision"),
            "{cmd}: no fallback onto the same address:\n{out}"
        );
        assert_eq!(tracer_pid(pid), 0, "{cmd}");
        assert_eq!(byte_at(pid, at), 0xcc, "{cmd}: the uprobe's int3 as it was");
        assert!(!catches_sigtrap(pid), "{cmd}: no SIGTRAP handler left");
        assert!(anon_exec_maps(pid).is_empty(), "{cmd}: no page of pgdbg");
        assert_eq!(a.query_one_i64("select 7"), 7, "{cmd}");
    }
    // plancache's recorder cannot go there: it stops past the uprobe
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "plancache --for 2s",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!("plancache: {FOREIGN_UPROBE} is at GetCachedPlan: no in-process recorder there; stopping at each decision instead")),
        "{out}"
    );
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(byte_at(pid, at), 0xcc, "the uprobe's int3 as it was");
    assert!(anon_exec_maps(pid).is_empty(), "no page of pgdbg");
    // the uprobe is still the kernel's and still fires
    let before = probe.count().unwrap();
    executes_get_cached_plan(&mut a, 1);
    assert!(probe.count().unwrap() >= before + 2, "the uprobe counts on");
    // a breakpoint elsewhere is not affected
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "break standard_ExecutorStart",
        "--ex",
        "info breakpoints",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    drop(probe);
    wait_until("the uprobe removed", Duration::from_secs(10), || {
        code_matches_file(pid, &bin, "GetCachedPlan", 16)
    });
    assert!(code_matches_file(pid, &bin, "standard_ExecutorStart", 16));
    executes_get_cached_plan(&mut a, 2);
    // after the uprobe, pgdbg's own breakpoint works there again
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "break GetCachedPlan",
        "--ex",
        "info breakpoints",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("GetCachedPlan"), "{out}");
    assert!(code_matches_file(pid, &bin, "GetCachedPlan", 16));
    executes_get_cached_plan(&mut a, 3);
    cl.assert_no_crash();
}

#[test]
fn foreign_uprobe_at_entry_15() {
    foreign_uprobe_at_entry(15);
}

#[test]
fn foreign_uprobe_at_entry_18() {
    foreign_uprobe_at_entry(18);
}

const FUNCS: &str = "
create function sel_loop(n int) returns int language plpgsql as $$
declare s int := 0; i int; x int;
begin
  for i in 1..n loop
    select i * 2 into x;  -- exec_stmt_execsql
    s := s + x;
  end loop;
  return s;
end $$;";

fn mapped_library(pid: i32, file: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with(&format!("/{file}")))
        .map(PathBuf::from)
}

/// A pending breakpoint whose library brings someone's uprobe with it
/// (registered for the file before the backend mapped it, installed by
/// the kernel as it maps it): not armed when the library loads, one line
/// says why, the breakpoint stays pending; another one in the same library
/// is armed and hit.
fn pending_breakpoint_over_foreign_uprobe(major: u32) {
    let cl = Cluster::start(major);
    let mut setup = cl.connect();
    setup.exec(FUNCS);
    let setup_pid = setup.pid();
    let lib = mapped_library(setup_pid, "plpgsql.so").expect("plpgsql.so in the setup backend");
    let mut c = cl.connect();
    let pid = c.pid();
    assert_eq!(mapped_library(pid, "plpgsql.so"), None, "not loaded yet");
    let (vaddr, offset) = symbol_in_file(&lib, "exec_stmt_execsql");
    let probe = uprobe(&lib, offset, pid);
    let args = [
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "break exec_stmt_execsql",
        "--ex",
        "break plpgsql_exec_function",
        "--ex",
        "continue",
        "--ex",
        "info breakpoints",
        "--ex",
        "detach",
    ];
    let p = Pgdbg::spawn_attached(&args, pid);
    let h = c.spawn_text("select sel_loop(3)");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "pgdbg failed:\n{out}\n{err}");
    assert_eq!(c.rejoin(h).unwrap(), "12", "the function's result");
    assert_eq!(tracer_pid(pid), 0);
    let refused = out
        .lines()
        .find(|l| l.starts_with("Breakpoint 1 (exec_stmt_execsql) could not be armed: "))
        .unwrap_or_else(|| panic!("no refusal for breakpoint 1:\n{out}"));
    assert!(
        refused.contains(&format!("{FOREIGN} exec_stmt_execsql (0x")),
        "{refused}"
    );
    assert!(
        out.contains("Breakpoint 2, plpgsql_exec_function ("),
        "the other pending breakpoint armed and hit:\n{out}"
    );
    assert!(
        out.contains("<PENDING>"),
        "breakpoint 1 pending again:\n{out}"
    );
    let at = runtime(pid, &lib, vaddr);
    assert_eq!(byte_at(pid, at), 0xcc, "the uprobe's int3 as it was");
    assert!(
        probe.count().unwrap() >= 3,
        "the uprobe counted the statements"
    );
    drop(probe);
    wait_until("the uprobe removed", Duration::from_secs(10), || {
        mapped_code_matches_file(pid, &lib, &lib, "exec_stmt_execsql", 16)
    });
    assert_eq!(c.query_one_text("select sel_loop(4)::text"), "20");
    cl.assert_no_crash();
}

#[test]
fn pending_breakpoint_over_foreign_uprobe_15() {
    pending_breakpoint_over_foreign_uprobe(15);
}

#[test]
fn pending_breakpoint_over_foreign_uprobe_18() {
    pending_breakpoint_over_foreign_uprobe(18);
}

/// pgdbg's own uprobes never go over its own int3 (the kernel would take
/// the int3 for its uprobe's and remove it when done): `count`, `trace
/// --perf` and `waits trace` use their ptrace modes with one line naming
/// the breakpoint, `latency` is refused; the breakpoint still stops
/// afterwards and detach leaves the file's code.
fn own_uprobe_over_own_breakpoint(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "break standard_ExecutorStart",
        "--ex",
        "count standard_ExecutorStart --for 1s",
        "--ex",
        "trace standard_ExecutorStart --perf --for 1s",
        "--ex",
        "waits trace --for 1s",
        "--ex",
        "echo ready-for-the-statement",
        "--ex",
        "continue",
        "--ex",
        "detach",
    ]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let mut text = read_until(
        &mut out,
        "ready-for-the-statement",
        Duration::from_secs(120),
    );
    // only now a statement: it stops at the breakpoint, which is still there
    let h = a.spawn_text("select 41 + 1");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    text.push_str(&rest);
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{text}\n{err}");
    assert_eq!(a.rejoin(h).unwrap(), "42");
    let own = "breakpoint 1 is at standard_ExecutorStart (0x";
    for (cmd, then) in [
        ("count: ", "; counting with a ptrace stop per call instead"),
        (
            "trace --perf: ",
            ": tracing with a ptrace stop per call instead",
        ),
        (
            "waits trace: ",
            "; tracing with a debug register and ptrace stops instead",
        ),
    ] {
        let l = text
            .lines()
            .find(|l| l.starts_with(cmd) && l.contains(own))
            .unwrap_or_else(|| panic!("no line of {cmd} naming the breakpoint:\n{text}"));
        assert!(l.ends_with(then), "{l}");
    }
    assert!(
        !text.contains("kernel uprobes, no stops"),
        "no uprobe placed:\n{text}"
    );
    assert!(
        text.contains("Breakpoint 1, standard_ExecutorStart ("),
        "the breakpoint still stops:\n{text}"
    );
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(pid, &bin, "standard_ExecutorStart", 16));
    // latency has no ptrace mode: refused in one line
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "break standard_ExecutorStart",
        "--ex",
        "latency standard_ExecutorStart --for 1s",
    ]);
    assert_one_line_error(code, &err, &format!("latency: {own}"));
    assert!(err.contains("delete it first"), "{err}");
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(pid, &bin, "standard_ExecutorStart", 16));
    assert_eq!(a.query_one_i64("select 5"), 5);
    cl.assert_no_crash();
}

#[test]
fn own_uprobe_over_own_breakpoint_15() {
    own_uprobe_over_own_breakpoint(15);
}

#[test]
fn own_uprobe_over_own_breakpoint_18() {
    own_uprobe_over_own_breakpoint(18);
}
