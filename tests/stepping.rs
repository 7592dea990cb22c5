//! `finish`, `next`, `step`, `stepi`/`nexti`, `until`/`advance` on a
//! backend stopped in the executor, compared with Debian's gdb on the same
//! backend at the same stop (gdb and pgdbg one after the other, never both
//! attached), on PostgreSQL 15 and 18; after each run the backend's code is
//! the file's (no int3 left) and the session answers.  An ERROR raised
//! inside the function being finished leaves the session healthy, and
//! pgdbg says what happened.

use common::ex::gdb_there;
use common::*;
use pgdbg_testbed as common;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The backend's executable, as mapped.
fn exe(pid: i32) -> PathBuf {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    PathBuf::from(exe.to_string_lossy().trim_end_matches(" (deleted)"))
}

/// Every executable mapping of the postgres binary in `pid` equals the
/// file's bytes (no int3 of anyone's left anywhere in its code).
fn code_is_the_files(pid: i32) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let exe = exe(pid);
    let data = std::fs::read(&exe).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut checked = 0;
    for l in maps.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 6 || !w[1].contains('x') || w[5] != exe.to_str().unwrap() {
            continue;
        }
        let (lo, hi) = w[0].split_once('-').unwrap();
        let lo = u64::from_str_radix(lo, 16).unwrap();
        let hi = u64::from_str_radix(hi, 16).unwrap();
        let off = u64::from_str_radix(w[2], 16).unwrap() as usize;
        let len = ((hi - lo) as usize).min(data.len() - off);
        let mut got = vec![0u8; len];
        mem.read_exact_at(&mut got, lo).unwrap();
        if let Some(i) = (0..len).find(|&i| got[i] != data[off + i]) {
            return Err(format!(
                "code at {:#x} is {:#04x}, the file has {:#04x}",
                lo + i as u64,
                got[i],
                data[off + i]
            ));
        }
        checked += len;
    }
    assert!(checked > 0, "no code mapping of {} in {pid}", exe.display());
    Ok(())
}

/// Wait until a breakpoint is written into the first 256 bytes of
/// `symbol` (gdb's lies past the prologue).
fn wait_armed_near(pid: i32, symbol: &str) {
    let exe = exe(pid);
    wait_until(
        &format!("a breakpoint in {symbol} of {pid}"),
        Duration::from_secs(90),
        || !code_matches_file(pid, &exe, symbol, 256),
    );
}

enum Tool {
    Gdb,
    Pgdbg,
}

/// `tool` attached to the backend of `c` runs `cmds` (the first ones set
/// a breakpoint in `armed_in`, then `continue`); `sql` is sent once the
/// breakpoint is in; the tool's output (stdout and stderr) and the
/// statement's result once the tool is done.
fn stop_and_run(
    c: &mut Client,
    tool: Tool,
    cmds: &[&str],
    armed_in: &str,
    sql: &str,
) -> (String, Result<String, String>) {
    stop_and_run_with(c, tool, &[], cmds, armed_in, sql)
}

/// `stop_and_run` with more arguments for pgdbg (`--for`).
fn stop_and_run_with(
    c: &mut Client,
    tool: Tool,
    args: &[&str],
    cmds: &[&str],
    armed_in: &str,
    sql: &str,
) -> (String, Result<String, String>) {
    let pid = c.pid();
    let mut cmd = match tool {
        Tool::Gdb => {
            let mut g = Command::new("gdb");
            g.args(["-nx", "-batch", "-p", &pid.to_string()]);
            g
        }
        Tool::Pgdbg => {
            let mut p = Command::new(pgdbg_bin());
            p.args(["attach", &pid.to_string(), "-q"]);
            p.args(args);
            p.env_remove("DEBUGINFOD_URLS");
            p
        }
    };
    for c in cmds {
        cmd.arg(match tool {
            Tool::Gdb => "-ex",
            Tool::Pgdbg => "--ex",
        });
        cmd.arg(c);
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_armed_near(pid, armed_in);
    let h = c.spawn_text(sql);
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = c.rejoin(h);
    wait_until("the tool to let go", Duration::from_secs(30), || {
        tracer_pid(pid) == 0
    });
    (text, r)
}

/// gdb's line of the breakpoint it sets on `function` (past the
/// prologue), from the binary file.
fn gdb_break_line(binary: &Path, function: &str) -> (String, u32) {
    let out = common::ex::gdb(binary, &[&format!("break {function}")]);
    // Breakpoint 1 at 0x...: file ../src/backend/executor/execMain.c, line 312.
    let l = out
        .lines()
        .find(|l| l.contains(", line "))
        .unwrap_or_else(|| panic!("gdb's break {function}: {out}"));
    let file = l.split("file ").nth(1).unwrap().split(',').next().unwrap();
    let file = file.rsplit('/').next().unwrap().to_string();
    let line = l
        .rsplit("line ")
        .next()
        .unwrap()
        .trim_end_matches('.')
        .parse()
        .unwrap();
    (file, line)
}

/// What a run said from its breakpoint's hit to its end (gdb shows
/// where it attached first, and again as it detaches).
fn after_hit(out: &str) -> &str {
    let from = out.find("Breakpoint 1, ").unwrap_or(0);
    let out = &out[from..];
    &out[..out.find("[Inferior 1 ").unwrap_or(out.len())]
}

/// The source lines a run stopped at, in order: each "LINE\t..." line
/// (gdb and pgdbg show one per stop: the breakpoint's, each step's).
fn stop_lines(out: &str) -> Vec<u32> {
    after_hit(out)
        .lines()
        .filter_map(|l| {
            let l = l.split_once('\t').map(|(a, b)| {
                // stepi's "0x...\tLINE\t..."
                if a.starts_with("0x") { b } else { l }
            })?;
            l.split_once('\t')?.0.trim().parse().ok()
        })
        .collect()
}

/// "FUNC ... at FILE:LINE" lines reduced to "FUNC FILE:LINE" (addresses,
/// arguments and directories left out).
fn places(out: &str) -> Vec<String> {
    after_hit(out)
        .lines()
        .filter_map(|l| {
            let l = l
                .split_once(" in ")
                .map_or(l, |(a, b)| if a.starts_with("0x") { b } else { l });
            let l = l.strip_prefix("Run till exit from #0  ").unwrap_or(l);
            let (func, rest) = l.split_once(" (")?;
            if func.contains(' ') {
                return None;
            }
            let at = rest.rsplit(" at ").next()?;
            let at = at.rsplit('/').next()?;
            at.contains(':').then(|| format!("{func} {at}"))
        })
        .collect()
}

fn returned(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with("Value returned is "))
        .map(|l| l.to_string())
        .collect()
}

fn prepared(major: u32) -> (Cluster, Client) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    c.exec("drop table if exists st35; create table st35(v int); insert into st35 values (41)");
    (cl, c)
}

fn healthy(c: &mut Client) {
    assert_eq!(c.query_one_i64("select count(*) from st35"), 1);
    let pid = c.pid();
    code_is_the_files(pid).unwrap();
}

/// `finish` out of int4pl (called by the executor's expression
/// interpreter for `v + 1`): the same caller line and value as gdb's.
fn finish_same_as_gdb(major: u32) {
    let (cl, mut c) = prepared(major);
    let sql = "select v + 1 from st35";
    let cmds = ["break int4pl", "continue", "finish"];
    let (ours, r) = stop_and_run(&mut c, Tool::Pgdbg, &cmds, "int4pl", sql);
    assert_eq!(r.as_deref(), Ok("42"), "{ours}");
    assert!(ours.contains("Run till exit from #0  int4pl ("), "{ours}");
    eprintln!("{ours}");
    assert_eq!(returned(&ours), ["Value returned is $1 = 42"], "{ours}");
    healthy(&mut c);
    if gdb_there() {
        let (theirs, r) = stop_and_run(&mut c, Tool::Gdb, &cmds, "int4pl", sql);
        assert_eq!(r.as_deref(), Ok("42"), "{theirs}");
        assert_eq!(
            returned(&ours),
            returned(&theirs),
            "pgdbg:\n{ours}\ngdb:\n{theirs}"
        );
        // the caller's function and line (gdb says "Run till exit" only
        // at a terminal)
        assert_eq!(
            places(&ours).last(),
            places(&theirs).last(),
            "pgdbg:\n{ours}\ngdb:\n{theirs}"
        );
        assert_eq!(
            stop_lines(&ours).last(),
            stop_lines(&theirs).last(),
            "pgdbg:\n{ours}\ngdb:\n{theirs}"
        );
        healthy(&mut c);
    }
    cl.assert_no_crash();
}

/// `next` through standard_ExecutorRun (inlined MemoryContextSwitchTo,
/// calls through function pointers, ExecutePlan) from gdb's breakpoint
/// line: the same lines as gdb's.
fn next_same_as_gdb(major: u32) {
    let (cl, mut c) = prepared(major);
    let bin = cl.postgres_binary();
    let (file, line) = gdb_break_line(&bin, "standard_ExecutorRun");
    let brk = format!("break {file}:{line}");
    let sql = "select v + 1 from st35";
    let cmds = [
        brk.as_str(),
        "continue",
        "next",
        "next",
        "next",
        "next",
        "next",
        "next",
        "next",
        "next",
        "next",
    ];
    let (ours, r) = stop_and_run(&mut c, Tool::Pgdbg, &cmds, "standard_ExecutorRun", sql);
    assert_eq!(r.as_deref(), Ok("42"), "{ours}");
    let ol = stop_lines(&ours);
    assert_eq!(ol.len(), 10, "{ours}");
    assert_eq!(ol[0], line, "{ours}");
    healthy(&mut c);
    if gdb_there() {
        let (theirs, r) = stop_and_run(&mut c, Tool::Gdb, &cmds, "standard_ExecutorRun", sql);
        assert_eq!(r.as_deref(), Ok("42"), "{theirs}");
        // 15: the breakpoint's line and 8 steps, through an inlined call
        // (MemoryContextSwitchTo), calls through function pointers, to
        // the call site of the inlined ExecutePlan (the next one differs:
        // from that call site gdb's `next` stops at ExecutePlan's first
        // line inside it, pgdbg's runs through the inlined body).  18:
        // the first 3; then gdb stops at each of several line-table rows
        // that start at one address (330, 140, 330, 333 at one pc),
        // pgdbg once.  Known differences, left for later.
        let tl = stop_lines(&theirs);
        let n = if major == 15 { 9 } else { 3 };
        eprintln!("next: pgdbg {ol:?}\n      gdb   {tl:?}");
        assert_eq!(ol[..n], tl[..n], "pgdbg:\n{ours}\ngdb:\n{theirs}");
        healthy(&mut c);
    }
    cl.assert_no_crash();
}

/// `step` from the same stop: into the inlined and out-of-line calls gdb
/// steps into, the same lines.
fn step_same_as_gdb(major: u32) {
    let (cl, mut c) = prepared(major);
    let bin = cl.postgres_binary();
    let (file, line) = gdb_break_line(&bin, "standard_ExecutorRun");
    let brk = format!("break {file}:{line}");
    let sql = "select v + 1 from st35";
    let cmds = [brk.as_str(), "continue", "step", "step", "step", "step"];
    let (ours, r) = stop_and_run(&mut c, Tool::Pgdbg, &cmds, "standard_ExecutorRun", sql);
    assert_eq!(r.as_deref(), Ok("42"), "{ours}");
    healthy(&mut c);
    if gdb_there() {
        let (theirs, r) = stop_and_run(&mut c, Tool::Gdb, &cmds, "standard_ExecutorRun", sql);
        assert_eq!(r.as_deref(), Ok("42"), "{theirs}");
        // the breakpoint's line, the inlined call's site, into it (gdb:
        // at once, as 'down'); later steps through the inlined body's
        // scheduled instructions differ (pgdbg runs them through)
        let (ol, tl) = (stop_lines(&ours), stop_lines(&theirs));
        eprintln!("step: pgdbg {ol:?}\n      gdb   {tl:?}");
        assert!(
            ol.len() >= 3 && tl.len() >= 3,
            "pgdbg:\n{ours}\ngdb:\n{theirs}"
        );
        assert_eq!(ol[..3], tl[..3], "pgdbg:\n{ours}\ngdb:\n{theirs}");
        healthy(&mut c);
    }
    cl.assert_no_crash();
}

/// `finish` out of int4div, which raises "division by zero": pgdbg says
/// that an ERROR's longjmp left the frame and where control landed, takes
/// its breakpoints out, and the session gets its ERROR and goes on; the
/// same with `next` over the call and `stepi`/`nexti`/`advance` after.
fn error_inside_finish(major: u32) {
    let (cl, mut c) = prepared(major);
    let sql = "select v / 0 from st35";
    let (ours, r) = stop_and_run(
        &mut c,
        Tool::Pgdbg,
        &["break int4div", "continue", "finish", "bt 3"],
        "int4div",
        sql,
    );
    eprintln!("{ours}");
    let e = r.expect_err("division by zero");
    assert!(e.contains("division by zero"), "{e}");
    assert!(ours.contains("Run till exit from #0  int4div ("), "{ours}");
    assert!(
        ours.contains("An ERROR was raised (pg_re_throw): its longjmp left the frame"),
        "{ours}"
    );
    assert!(returned(&ours).is_empty(), "{ours}");
    healthy(&mut c);
    // the instruction steppers and advance, then an ERROR under `next`
    let (ours, r) = stop_and_run(
        &mut c,
        Tool::Pgdbg,
        &[
            "break int4div",
            "continue",
            "stepi",
            "nexti 3",
            "advance int4div",
        ],
        "int4div",
        sql,
    );
    assert!(r.is_err(), "{ours}");
    assert!(ours.contains("int4div ("), "{ours}");
    healthy(&mut c);
    cl.assert_no_crash();
}

#[test]
fn finish_same_as_gdb_15() {
    finish_same_as_gdb(15);
}

#[test]
fn finish_same_as_gdb_18() {
    finish_same_as_gdb(18);
}

#[test]
fn next_same_as_gdb_15() {
    next_same_as_gdb(15);
}

#[test]
fn next_same_as_gdb_18() {
    next_same_as_gdb(18);
}

#[test]
fn step_same_as_gdb_15() {
    step_same_as_gdb(15);
}

#[test]
fn step_same_as_gdb_18() {
    step_same_as_gdb(18);
}

#[test]
fn error_inside_finish_15() {
    error_inside_finish(15);
}

#[test]
fn error_inside_finish_18() {
    error_inside_finish(18);
}

/// `stepi` with nothing else armed (a busy backend interrupted at the
/// prompt), then pgdbg SIGKILLed (alone, or with its guardian): a single
/// step leaves the trap flag set and a tracer that dies does not clear
/// it, so the guardian (its detach) or the backend's SIGTRAP handler must
/// be there first; the backend runs on, its statement is cancelled
/// normally, no crash.
fn stepi_then_killed(major: u32, both: bool) {
    use std::io::{BufRead, Write};
    let (cl, mut c) = prepared(major);
    let pid = c.pid();
    let h = c.spawn_text("select count(*) from generate_series(1, 3000000000)");
    wait_until("the statement to run", Duration::from_secs(10), || {
        proc_state(pid).starts_with('R')
    });
    let mut p = Command::new(pgdbg_bin())
        .args(["attach", &pid.to_string(), "-q"])
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = p.stdin.take().unwrap();
    writeln!(input, "interrupt").unwrap();
    writeln!(input, "stepi").unwrap();
    writeln!(input, "echo stepped\\n").unwrap();
    let mut out = std::io::BufReader::new(p.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut l = String::new();
        assert!(out.read_line(&mut l).unwrap() > 0, "pgdbg ended: {seen}");
        seen.push_str(&l);
        if l.contains("stepped") {
            break;
        }
    }
    let g = guardians_of(pid);
    if both {
        for x in &g {
            unsafe { libc::kill(*x, libc::SIGKILL) };
        }
    }
    unsafe { libc::kill(p.id() as i32, libc::SIGKILL) };
    let _ = p.wait();
    wait_until(
        "pgdbg and its guardian to end",
        Duration::from_secs(10),
        || tracer_pid(pid) == 0 && (!both || guardians_of(pid).is_empty()),
    );
    // not killed by a trap: still there, running its statement
    std::thread::sleep(Duration::from_millis(500));
    if proc_state(pid).starts_with('T') {
        // left held (no self-release here): the rescue lets it go
        let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
        assert_eq!(code, 0, "rescue: {out}{err}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the backend died after stepi and pgdbg's death; log:\n{}",
        cl.log()
    );
    cl.cancel(&[pid]);
    let r = c.rejoin(h);
    assert!(
        r.is_err(),
        "the statement was to be cancelled: {r:?}\n{seen}"
    );
    healthy(&mut c);
    cl.assert_no_crash();
}

#[test]
fn stepi_then_pgdbg_killed_15() {
    stepi_then_killed(15, false);
}

#[test]
fn stepi_then_pgdbg_and_guardian_killed_18() {
    stepi_then_killed(18, true);
}

type Running = std::thread::JoinHandle<(postgres::Client, Result<String, String>)>;

/// A busy backend (a long `count(*)`): the cluster, the session, the
/// statement's handle and the backend's PID.
fn busy(major: u32) -> (Cluster, Client, Running, i32) {
    let (cl, mut c) = prepared(major);
    let pid = c.pid();
    let h = c.spawn_text("select count(*) from generate_series(1, 3000000000)");
    let mut other = cl.connect();
    let active = format!(
        "select count(*) from pg_stat_activity where pid = {pid} and state = 'active' \
         and query like '%generate_series%'"
    );
    wait_until("the statement to run", Duration::from_secs(10), || {
        other.query_one_i64(&active) == 1 && proc_state(pid).starts_with('R')
    });
    (cl, c, h, pid)
}

/// After pgdbg let go of a busy backend: it runs on untraced, its
/// statement is cancelled normally, its code is the file's.
fn busy_let_go(cl: &Cluster, c: &mut Client, h: Running, pid: i32, out: &str) {
    wait_until("pgdbg to let go", Duration::from_secs(30), || {
        tracer_pid(pid) == 0
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        proc_state(pid).starts_with('R'),
        "the backend is not running on: {}\n{out}",
        proc_state(pid)
    );
    code_is_the_files(pid).unwrap();
    cl.cancel(&[pid]);
    let r = c.rejoin(h);
    assert!(
        r.is_err(),
        "the statement was to be cancelled: {r:?}\n{out}"
    );
    healthy(c);
    cl.assert_no_crash();
}

/// `stepi` of a hundred million instructions in a script with `--for`:
/// the single steps end at the deadline (the stop said, the script ends
/// as at any deadline), the backend is let go and runs on.
fn step_cut_short_by_for(major: u32) {
    let (cl, mut c, h, pid) = busy(major);
    let t0 = std::time::Instant::now();
    let mut p = Command::new(pgdbg_bin())
        .args(["attach", &pid.to_string(), "--for", "3s"])
        .args(["--ex", "interrupt", "--ex", "stepi 100000000"])
        .args(["--ex", "echo not reached\\n"])
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // (SIGTERM after 30 s: pgdbg stops, restores and detaches)
    let mut ended = false;
    while !ended && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
        ended = p.try_wait().unwrap().is_some();
    }
    let took = t0.elapsed();
    if !ended {
        unsafe { libc::kill(p.id() as i32, libc::SIGTERM) };
    }
    let out = p.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}\n(took {took:?})");
    assert!(
        took < Duration::from_secs(30),
        "stepi ran {took:?} past a 3 s --for:\n{text}"
    );
    assert!(
        text.contains("(the time limit was reached while stepping)"),
        "{text}"
    );
    assert!(text.contains("--for 3s reached at line 3"), "{text}");
    assert!(!text.contains("not reached"), "{text}");
    busy_let_go(&cl, &mut c, h, pid, &text);
}

/// `next` of a hundred million lines at the prompt, Ctrl-C (SIGINT to
/// pgdbg): the stepping ends at once, where it was, the backend stopped
/// under pgdbg (not running) and the session answers; `detach` lets it
/// run on.
fn step_cut_short_by_ctrl_c(major: u32) {
    use std::io::{BufRead, Write};
    let (cl, mut c, h, pid) = busy(major);
    let mut p = Command::new(pgdbg_bin())
        .args(["attach", &pid.to_string(), "-q"])
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = p.stdin.take().unwrap();
    let mut out = std::io::BufReader::new(p.stdout.take().unwrap());
    let mut seen = String::new();
    let mut read_until = |what: &str, seen: &mut String| loop {
        let mut l = String::new();
        assert!(out.read_line(&mut l).unwrap() > 0, "pgdbg ended: {seen}");
        seen.push_str(&l);
        if l.contains(what) {
            break;
        }
    };
    writeln!(input, "interrupt").unwrap();
    writeln!(input, "echo interrupted\\n").unwrap();
    read_until("interrupted", &mut seen);
    let before = seen.len();
    writeln!(input, "next 100000000").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = std::time::Instant::now();
    unsafe { libc::kill(p.id() as i32, libc::SIGINT) };
    writeln!(input, "echo stepped\\n").unwrap();
    read_until("stepped", &mut seen);
    let took = t0.elapsed();
    eprintln!("{seen}\n(Ctrl-C answered in {took:?})");
    assert!(took < Duration::from_secs(10), "{took:?}\n{seen}");
    assert!(
        seen[before..].contains("Program stopped (interrupted"),
        "{seen}"
    );
    // stopped under pgdbg, not running
    assert_eq!(tracer_pid(pid), p.id() as i32, "{seen}");
    assert!(proc_state(pid).starts_with('t'), "{}", proc_state(pid));
    writeln!(input, "detach").unwrap();
    drop(input);
    let _ = p.wait();
    busy_let_go(&cl, &mut c, h, pid, &seen);
}

#[test]
fn step_cut_short_by_for_15() {
    step_cut_short_by_for(15);
}

#[test]
fn step_cut_short_by_ctrl_c_18() {
    step_cut_short_by_ctrl_c(18);
}

/// `finish` out of standard_ExecutorRun, a breakpoint on int4pl met on
/// the way whose `commands` run `trace int4out` (a probe: the backend
/// runs) and `continue`: the step's int3 at the return address is out
/// while the block runs (trace counted its hit as a call of int4out, and
/// its end took every internal int3 out); the backend ran, so the step
/// ends and the block's `continue` continues, as gdb's; code as the
/// file's afterwards.
fn commands_probe_during_finish(major: u32) {
    let (cl, mut c) = prepared(major);
    let sql = "select v + 1 from st35";
    let cmds = [
        "break standard_ExecutorRun",
        "continue",
        "break int4pl",
        "commands",
        "trace int4out --for 500ms",
        "continue",
        "end",
        "finish",
        "echo not reached\\n",
    ];
    let (ours, r) = stop_and_run_with(
        &mut c,
        Tool::Pgdbg,
        &["--for", "8s"],
        &cmds,
        "standard_ExecutorRun",
        sql,
    );
    eprintln!("{ours}");
    assert_eq!(r.as_deref(), Ok("42"), "{ours}");
    assert!(ours.contains("Run till exit from #0"), "{ours}");
    let calls = ours
        .lines()
        .filter(|l| l.trim_start().starts_with("int4out("))
        .count();
    assert_eq!(calls, 1, "int4out traced once:\n{ours}");
    assert!(
        ours.contains("The breakpoint's commands ran the backend (a probe or a step)"),
        "{ours}"
    );
    assert!(!ours.contains("not reached"), "{ours}");
    healthy(&mut c);
    cl.assert_no_crash();
}

#[test]
fn commands_probe_during_finish_15() {
    commands_probe_during_finish(15);
}
