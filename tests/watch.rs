//! `watch`, `rwatch`, `awatch` (hardware debug registers) and `set var`
//! on a real backend, on PostgreSQL 15 and 18: the stops compared with
//! Debian's gdb on the same backend for the same statement (gdb first,
//! then pgdbg, never both attached); the refusals in one line; the debug
//! registers clear after every way pgdbg ends, SIGKILL of pgdbg alone and
//! of pgdbg with its guardian included; `set var` seen by SQL and in the
//! capture, refused on code and read-only data.

use common::ex::{gdb_there, one_line_error};
use common::*;
use pgdbg_testbed as common;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `tool` ("gdb" or "pgdbg") attached to `c`'s backend runs `cmds`; once
/// it has set watchpoint 1, `sql` is sent; its output (stdout and stderr)
/// once it is done.
fn tool_run(c: &mut Client, tool: &str, cmds: &[&str], sql: &str) -> String {
    tool_run_when(c, tool, cmds, "atchpoint 1: ", sql)
}

/// `tool_run`, `sql` sent once the tool's output holds `ready`.
fn tool_run_when(c: &mut Client, tool: &str, cmds: &[&str], ready: &str, sql: &str) -> String {
    let pid = c.pid();
    let out = std::env::temp_dir().join(format!("pgdbg-watch-{tool}-{pid}.txt"));
    let f = std::fs::File::create(&out).unwrap();
    let mut cmd = if tool == "gdb" {
        let mut g = Command::new("gdb");
        g.args(["-nx", "-batch", "-p", &pid.to_string()]);
        g
    } else {
        let mut p = Command::new(pgdbg_bin());
        p.args(["attach", &pid.to_string(), "-q"]);
        p.env_remove("DEBUGINFOD_URLS");
        p
    };
    for c in cmds {
        cmd.arg(if tool == "gdb" { "-ex" } else { "--ex" }).arg(c);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(f.try_clone().unwrap()))
        .stderr(Stdio::from(f))
        .spawn()
        .unwrap();
    wait_until(
        &format!("{tool} to say '{ready}'"),
        Duration::from_secs(90),
        || {
            std::fs::read_to_string(&out).is_ok_and(|t| t.contains(ready))
                || child.try_wait().unwrap().is_some()
        },
    );
    let h = c.spawn_text(sql);
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!(
                "{tool} did not end: {}",
                std::fs::read_to_string(&out).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = c.rejoin(h);
    assert!(r.is_ok(), "{sql}: {r:?}");
    wait_until("the tool to let go", Duration::from_secs(30), || {
        tracer_pid(pid) == 0
    });
    let text = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    text
}

/// The lines of a watchpoint stop and of `info breakpoints`, as both
/// tools print them: gdb's full source paths cut to the file's name, and
/// its `param@entry=` (entry values, which pgdbg does not show) left out.
fn stop_lines(text: &str) -> Vec<String> {
    // gdb's attach (the frame it stopped in) before the first watchpoint
    text.lines()
        .skip_while(|l| !l.starts_with("Hardware "))
        .filter(|l| {
            l.starts_with("Hardware ")
                || l.starts_with("Old value = ")
                || l.starts_with("New value = ")
                || l.starts_with("Value = ")
                || l.contains(") at ")
                || l.split('\t').next().is_some_and(|n| {
                    !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && l.contains('\t')
                })
                || l.starts_with("Watchpoint ")
                || l.starts_with("which its expression is valid")
                || l.starts_with("Num ")
                || l.starts_with("1       ")
                || l.starts_with("\tbreakpoint already hit")
        })
        .map(|l| {
            let mut l = l.to_string();
            // " at /long/path/xact.c:12" -> " at xact.c:12"
            while let Some(i) = l.find(" at /") {
                let rest = &l[i + 4..];
                let end = rest.find(':').unwrap_or(rest.len());
                let base = rest[..end].rsplit('/').next().unwrap().to_string();
                l = format!("{} at {base}{}", &l[..i], &rest[end..]);
            }
            // "portal=portal@entry=0x1" -> "portal=0x1"
            while let Some(i) = l.find("@entry=") {
                let start = l[..i].rfind(['(', ' ']).map_or(0, |s| s + 1);
                let name_end = l[start..i].find('=').map_or(i, |e| start + e + 1);
                l = format!("{}{}", &l[..name_end], &l[i + 7..]);
            }
            l
        })
        .collect()
}

/// gdb's and pgdbg's stops for `watch EXPR` over `n` hits of `sql`
/// agree line by line: the same writes (function, line, old and new
/// value), in gdb's words; then `info breakpoints`.
fn same_stops_as_gdb(c: &mut Client, cmd: &str, n: usize, sql: &str) {
    let mut cmds = vec![cmd.to_string()];
    cmds.extend(std::iter::repeat_n("continue".to_string(), n));
    cmds.push("info breakpoints".into());
    let mut gcmds = cmds.clone();
    gcmds.push("detach".into());
    let g: Vec<&str> = gcmds.iter().map(String::as_str).collect();
    let p: Vec<&str> = cmds.iter().map(String::as_str).collect();
    // the same state for both: caches warm, the statement run once before
    c.exec(sql);
    let theirs = tool_run(c, "gdb", &g, sql);
    c.exec(sql);
    let ours = tool_run(c, "pgdbg", &p, sql);
    let (a, b) = (stop_lines(&ours), stop_lines(&theirs));
    assert!(
        a.iter().filter(|l| l.starts_with("Hardware")).count() == n + 1,
        "{cmd}: pgdbg did not stop {n} times:\n{ours}"
    );
    assert_eq!(a, b, "{cmd}\npgdbg:\n{ours}\ngdb:\n{theirs}");
}

fn watch_stops_as_gdb(major: u32) {
    if !gdb_there() {
        return;
    }
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    // a write in the middle of a line (gdb shows the address) and one at
    // the end of exec_simple_query
    same_stops_as_gdb(&mut c, "watch debug_query_string", 2, "select 1");
    // eight writes: MemoryContextSwitchTo inlined all over (the stop shown
    // at the call site where the inlined code begins, as gdb does)
    same_stops_as_gdb(
        &mut c,
        "watch CurrentMemoryContext",
        8,
        "select count(*) from pg_class",
    );
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

/// Watches of more than one debug register, as gdb splits them: a
/// struct of 24 bytes (32 on 18: every register), each write to one of
/// its members a stop showing the whole struct, old and new; and a
/// 4-byte value at an address 2 mod 4 (two 2-byte pieces).  Each tool on
/// a fresh session after the same statement (the struct's counters are
/// the session's).
fn pieces_as_gdb(major: u32) {
    if !gdb_there() {
        return;
    }
    let cl = Cluster::start(major);
    cl.connect().exec("create table w (i int)");
    for (cmd, n, sql) in [
        ("watch pgWalUsage", 4, "insert into w values (1)"),
        (
            "watch *(int *)((char *)&debug_query_string + 2)",
            2,
            "select 1",
        ),
    ] {
        let mut cmds = vec![cmd.to_string()];
        cmds.extend(std::iter::repeat_n("continue".to_string(), n));
        cmds.push("info breakpoints".into());
        let mut g = cmds.clone();
        g.push("detach".into());
        let mut c = cl.connect();
        c.exec(sql);
        let theirs = tool_run(
            &mut c,
            "gdb",
            &g.iter().map(String::as_str).collect::<Vec<_>>(),
            sql,
        );
        let mut c = cl.connect();
        c.exec(sql);
        let pid = c.pid();
        let ours = tool_run(
            &mut c,
            "pgdbg",
            &cmds.iter().map(String::as_str).collect::<Vec<_>>(),
            sql,
        );
        // values and the functions stopped in (arguments gdb shows from
        // entry values, and the line of a stop in the middle of one, are
        // gdb's own rules, as in reads_as_gdb)
        let key = |t: &str| -> Vec<String> {
            stop_lines(t)
                .into_iter()
                .filter(|l| !l.contains('\t'))
                .map(|l| {
                    if !l.contains(") at ") {
                        return l;
                    }
                    let f = match l.split_once(" in ") {
                        Some((a, f)) if a.starts_with("0x") => f,
                        _ => l.as_str(),
                    };
                    f.split(" (").next().unwrap().to_string()
                })
                .collect()
        };
        let (a, b) = (key(&ours), key(&theirs));
        assert_eq!(
            a.iter().filter(|l| l.starts_with("Old value = ")).count(),
            n,
            "{cmd}: pgdbg did not stop {n} times:\n{ours}"
        );
        assert_eq!(a, b, "{cmd}\npgdbg:\n{ours}\ngdb:\n{theirs}");
        assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after pgdbg detached");
        assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    }
    cl.assert_no_crash();
}

#[test]
fn pieces_as_gdb_15() {
    pieces_as_gdb(15);
}

#[test]
fn pieces_as_gdb_18() {
    pieces_as_gdb(18);
}

#[test]
fn watch_stops_as_gdb_15() {
    watch_stops_as_gdb(15);
}

#[test]
fn watch_stops_as_gdb_18() {
    watch_stops_as_gdb(18);
}

/// A watchpoint hit by the instruction a step runs (`stepi`, `next`, and
/// `continue` off a breakpoint on that instruction, which steps over its
/// int3): the step ends with the watchpoint's stop, as gdb's, line by
/// line; DR6 holds no slot's bit after pgdbg's step (read once it let
/// go), where a stale one would be read as a later hit.
fn watch_hit_in_a_step(major: u32) {
    if !gdb_there() {
        return;
    }
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    // exec_simple_query's store of debug_query_string, as gdb disassembles it
    let code = common::ex::gdb(&cl.postgres_binary(), &["x/40i exec_simple_query"]);
    let store = code
        .lines()
        .find(|l| l.contains("(%rip)") && l.ends_with("<debug_query_string>"))
        .and_then(|l| l.split_once(":\t")?.1.starts_with("mov").then_some(l))
        .unwrap_or_else(|| panic!("no store of debug_query_string:\n{code}"));
    let at = store
        .split('<')
        .nth(1)
        .and_then(|s| s.split('>').next())
        .unwrap()
        .to_string();
    for step in ["stepi", "next", "continue"] {
        let cmds = [
            "watch debug_query_string",
            &format!("break *{at}"),
            "continue",
            step,
            "info breakpoints",
        ];
        let mut g = cmds.to_vec();
        g.push("detach");
        c.exec("select 1");
        let theirs = tool_run(&mut c, "gdb", &g, "select 1");
        c.exec("select 1");
        let ours = tool_run(&mut c, "pgdbg", &cmds, "select 1");
        assert_eq!(
            ours.matches("Hardware watchpoint 1: debug_query_string\n\nOld value = ")
                .count(),
            1,
            "{step}: no watchpoint stop\n{ours}"
        );
        // the breakpoint's stop left out (gdb adds its address)
        let key = |t: &str| -> Vec<String> {
            stop_lines(t)
                .into_iter()
                .filter(|l| !l.starts_with("Breakpoint 2, "))
                .collect()
        };
        assert_eq!(
            key(&ours),
            key(&theirs),
            "{step}\npgdbg:\n{ours}\ngdb:\n{theirs}"
        );
        assert_eq!(
            common::debugreg(pid, 6) & 0xf,
            0,
            "{step}: DR6 of {pid} keeps a slot's bit"
        );
        assert_eq!(dr7(pid), 0);
    }
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn watch_hit_in_a_step_15() {
    watch_hit_in_a_step(15);
}

#[test]
fn watch_hit_in_a_step_18() {
    watch_hit_in_a_step(18);
}

/// `rwatch`/`awatch`: the same values at the same functions as gdb's
/// (reads shown as "Value = ...", writes by awatch as old and new).
fn reads_as_gdb(major: u32) {
    if !gdb_there() {
        return;
    }
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    for (cmd, n) in [
        ("rwatch CurrentMemoryContext", 5),
        ("awatch CurrentMemoryContext", 6),
    ] {
        let sql = "select count(*) from pg_class";
        let mut cmds = vec![cmd.to_string()];
        cmds.extend(std::iter::repeat_n("continue".to_string(), n));
        let mut g = cmds.clone();
        g.push("detach".into());
        c.exec(sql);
        let theirs = tool_run(
            &mut c,
            "gdb",
            &g.iter().map(String::as_str).collect::<Vec<_>>(),
            sql,
        );
        c.exec(sql);
        let ours = tool_run(
            &mut c,
            "pgdbg",
            &cmds.iter().map(String::as_str).collect::<Vec<_>>(),
            sql,
        );
        // values and the functions stopped in (the line of a stop where
        // rows of two files start at one address is gdb's own rule)
        let key = |t: &str| -> Vec<String> {
            stop_lines(t)
                .into_iter()
                .filter(|l| !l.contains('\t'))
                .map(|l| {
                    if !l.contains(") at ") {
                        return l;
                    }
                    let f = match l.split_once(" in ") {
                        Some((a, f)) if a.starts_with("0x") => f,
                        _ => l.as_str(),
                    };
                    f.split(" (").next().unwrap().to_string()
                })
                .collect()
        };
        let (a, b) = (key(&ours), key(&theirs));
        assert!(
            a.iter().any(|l| l.starts_with("Value = ")),
            "{cmd}: no read seen:\n{ours}"
        );
        assert_eq!(a, b, "{cmd}\npgdbg:\n{ours}\ngdb:\n{theirs}");
    }
    cl.assert_no_crash();
}

#[test]
fn reads_as_gdb_15() {
    reads_as_gdb(15);
}

#[test]
fn reads_as_gdb_18() {
    reads_as_gdb(18);
}

/// Refusals in one line, nothing armed: an object larger than 8 bytes,
/// an unaligned one, a constant, a word of the stack in no frame, of code, of
/// read-only data, a fifth watchpoint; then the listing,
/// disable/enable/delete, and DR7 clear after the detach.
fn refusals_and_bookkeeping(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let big = one_line_error(pid, "watch *MyProc");
    assert!(
        big.contains("debug registers (aligned pieces of 1, 2, 4 or 8 bytes), and x86-64 has 4"),
        "{big}"
    );
    // an unaligned value in pieces (1 + 2 + 1 bytes: three registers),
    // one register more, and one watch too many: refused, naming each
    // holder once
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "watch *(int *)((char *)&CurrentMemoryContext + 1)",
        "--ex",
        "watch work_mem",
        "--ex",
        "info breakpoints",
        "--ex",
        "delete 2",
        "--ex",
        "watch *(int *)((char *)&debug_query_string + 2)",
    ]);
    assert_ne!(code, 0);
    assert!(
        out.contains(
            "1       hw watchpoint  keep y                      *(int *)((char *)&CurrentMemoryContext + 1)\n2       hw watchpoint  keep y                      work_mem"
        ),
        "{out}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(
            "not enough hardware debug registers left: watchpoint 3 needs 2 for its 4 bytes, 1 free; 3 in use by watchpoint 1"
        ),
        "{err}"
    );
    assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after pgdbg ended");
    let k = one_line_error(pid, "watch 5");
    assert!(k.contains("Cannot watch constant value `5'."), "{k}");
    let k = one_line_error(pid, "watch MyProcPid + 1");
    assert!(
        k.contains("its value is not in the backend's memory"),
        "{k}"
    );
    // a word of the stack below the stack pointer (no frame's local):
    // refused
    let k = one_line_error(pid, "watch *(long *)($rsp - 4096)");
    assert!(
        k.contains("is on the backend's stack but in no frame pgdbg unwinds"),
        "{k}"
    );
    // code and read-only data: the mapping check of set var (a watched
    // byte that pgdbg's own SIGTRAP handling touches would kill it)
    let k = one_line_error(pid, "watch *(int *)ExecutorStart");
    assert!(k.contains("is in code (an executable mapping"), "{k}");
    let k = one_line_error(pid, "awatch ScanKeywordCategories[0]");
    assert!(k.contains("is in a read-only mapping"), "{k}");
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "watch CurrentMemoryContext",
        "--ex",
        "rwatch debug_query_string",
        "--ex",
        "awatch work_mem",
        "--ex",
        "watch InterruptHoldoffCount",
        "--ex",
        "watch xactStartTimestamp",
    ]);
    assert_ne!(code, 0);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("Hardware")).count(),
        4,
        "{out}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(
            "no hardware debug register left: 4 in use by watchpoint 1, watchpoint 2, watchpoint 3, watchpoint 4"
        ),
        "{err}"
    );
    assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after pgdbg ended");
    // the table, disable (its register free for another), enable, delete
    let out = common::ex::run(
        pid,
        &[
            "watch CurrentMemoryContext",
            "rwatch debug_query_string",
            "awatch work_mem",
            "condition 3 work_mem > 0",
            "info breakpoints",
            "disable 1",
            "watch InterruptHoldoffCount",
            "watch xactStartTimestamp",
            "delete 2",
            "enable 1",
            "info breakpoints",
        ],
    );
    let want_first = "Num     Type            Disp Enb Address            What\n\
                      1       hw watchpoint   keep y                      CurrentMemoryContext\n\
                      2       read watchpoint keep y                      debug_query_string\n\
                      3       acc watchpoint  keep y                      work_mem\n\
                      \tstop only if work_mem > 0\n";
    assert!(out.contains(want_first), "{out}");
    assert!(
        out.contains(
            "1       hw watchpoint  keep y                      CurrentMemoryContext\n3       acc watchpoint keep y"
        ),
        "{out}"
    );
    assert!(
        out.contains("5       hw watchpoint  keep y                      xactStartTimestamp"),
        "{out}"
    );
    assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after pgdbg detached");
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn refusals_and_bookkeeping_15() {
    refusals_and_bookkeeping(15);
}

#[test]
fn refusals_and_bookkeeping_18() {
    refusals_and_bookkeeping(18);
}

/// A stop's `commands` block and `ignore`: the hits are counted, the
/// block runs at each stop that is not ignored.
#[test]
fn commands_and_ignore_15() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let script = write_script(
        "watch-commands",
        &[
            "watch debug_query_string",
            "ignore 1 1",
            "commands 1",
            "  silent",
            "  printf \"query now %p\\n\", debug_query_string",
            "end",
            "continue",
            "info breakpoints",
        ],
    );
    c.exec("select 1");
    let pid = c.pid();
    let p = spawn_continuing(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            script.to_str().unwrap(),
        ],
        pid,
    );
    let h = c.spawn_text("select 2");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{err}");
    assert!(c.rejoin(h).is_ok());
    // the first write (the query's address) ignored, the second (NULL)
    // runs the block
    assert!(
        out.contains("query now (nil)") || out.contains("query now 0x0"),
        "{out}"
    );
    assert!(
        !out.contains("Hardware watchpoint 1: debug_query_string\n\nOld"),
        "{out}"
    );
    assert!(out.contains("\tbreakpoint already hit 2 times"), "{out}");
    assert_eq!(dr7(pid), 0);
    cl.assert_no_crash();
}

/// SIGKILL of pgdbg with a watchpoint armed: its guardian clears the
/// debug registers; the session's next statement runs.  Then pgdbg and
/// its guardian killed together while an access watchpoint traps at
/// every allocation: the backend runs on through pgdbg's SIGTRAP handler,
/// its statement ends; `pgdbg rescue` (as the next attach would) clears
/// DR7.
fn killed_with_a_watchpoint(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let p = spawn_continuing(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "watch work_mem",
            "--ex",
            "continue",
        ],
        pid,
    );
    unsafe { libc::kill(p.pid(), libc::SIGKILL) };
    let _ = p.wait(Duration::from_secs(30));
    wait_until("the guardian's restore", Duration::from_secs(30), || {
        tracer_pid(pid) == 0 && guardians_of(pid).is_empty()
    });
    assert_eq!(dr7(pid), 0, "DR7 of {pid} left armed by a killed pgdbg");
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);

    // a watch in pieces (every register on 18): each cleared
    let p = spawn_continuing(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "watch pgWalUsage",
            "--ex",
            "continue",
        ],
        pid,
    );
    unsafe { libc::kill(p.pid(), libc::SIGKILL) };
    let (_, out, _) = p.wait(Duration::from_secs(30));
    assert!(out.contains("Hardware watchpoint 1: pgWalUsage"), "{out}");
    wait_until("the guardian's restore", Duration::from_secs(30), || {
        tracer_pid(pid) == 0 && guardians_of(pid).is_empty()
    });
    for n in [0, 1, 2, 3, 7] {
        assert_eq!(
            common::debugreg(pid, n),
            0,
            "DR{n} of {pid} left set by a killed pgdbg"
        );
    }
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);

    // both killed, the backend busy under the watchpoint
    let script = write_script(
        &format!("watch-killed-{major}"),
        &[
            "awatch CurrentMemoryContext",
            "commands 1",
            "  silent",
            "  continue",
            "end",
            "continue",
        ],
    );
    let p = spawn_continuing(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            script.to_str().unwrap(),
        ],
        pid,
    );
    let h = c.spawn_text(
        "select count(*) from (select md5(g::text) from generate_series(1, 20000) g) s",
    );
    std::thread::sleep(Duration::from_millis(300));
    let g = guardians_of(pid);
    unsafe {
        libc::kill(g[0], libc::SIGKILL);
        libc::kill(p.pid(), libc::SIGKILL);
    }
    let _ = p.wait(Duration::from_secs(30));
    wait_until(
        "pgdbg and its guardian to end",
        Duration::from_secs(30),
        || tracer_pid(pid) == 0 && guardians_of(pid).is_empty(),
    );
    let r = c.rejoin(h);
    assert_eq!(
        r.as_deref(),
        Ok("20000"),
        "the statement under the watchpoint"
    );
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {out}{err}");
    assert_eq!(dr7(pid), 0, "DR7 of {pid} still armed after the rescue");
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn killed_with_a_watchpoint_15() {
    killed_with_a_watchpoint(15);
}

#[test]
fn killed_with_a_watchpoint_18() {
    killed_with_a_watchpoint(18);
}

/// All of `symbol`'s code in backend `pid` equals the file's (an int3
/// where a watched local's frame returns lies inside its caller).
fn assert_whole_function_as_file(cl: &Cluster, pid: i32, symbol: &str) {
    let bin = cl.postgres_binary();
    let size = common::symbol_size(&bin, symbol);
    assert!(
        common::code_matches_file(pid, &bin, symbol, size as usize),
        "{symbol}'s code (where the frame returns) is not the file's"
    );
}

/// A watchpoint on a frame's local, as gdb: `exec_simple_query`'s `qc`
/// (a struct whose address goes to `PortalRun`), set from the frame above
/// `PortalRun`'s breakpoint; its writes in `InitializeQueryCompletion` and
/// `PortalRun`, then its frame's return to `PostgresMain`, where gdb and
/// pgdbg both delete it ("left the block") and stop; then its writes met
/// by `next`.  The scope's int3 comes out with it: code equal to the
/// file's, no debug register left, and the next statement runs as before.
fn local_watch_as_gdb(major: u32) {
    if !gdb_there() {
        return;
    }
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let sql = "select 1";
    let mut cmds = vec!["break PortalRun", "continue", "up", "watch qc", "delete 1"];
    cmds.extend(std::iter::repeat_n("continue", 5));
    cmds.push("info breakpoints");
    let mut gcmds = cmds.clone();
    gcmds.push("detach");
    c.exec(sql);
    let theirs = tool_run_when(&mut c, "gdb", &gcmds, "reakpoint 1 at", sql);
    c.exec(sql);
    let ours = tool_run_when(&mut c, "pgdbg", &cmds, "reakpoint 1 at", sql);
    // the frame lines without their arguments: gdb names some from their
    // entry values (pgdbg says <optimized out> for those)
    let bare = |t: &str| -> Vec<String> {
        stop_lines(t)
            .into_iter()
            .map(|l| match (l.find(" ("), l.rfind(") at ")) {
                (Some(i), Some(j)) if i < j => format!("{} (...){}", &l[..i], &l[j + 1..]),
                _ => l,
            })
            .collect()
    };
    let (a, b) = (bare(&ours), bare(&theirs));
    assert!(
        ours.contains(
            "Watchpoint 2 deleted because the program has left the block in\nwhich its expression is valid.\n"
        ),
        "pgdbg did not delete the watchpoint at its frame's return:\n{ours}"
    );
    assert!(
        a.iter().filter(|l| l.starts_with("Old value = ")).count() >= 3,
        "pgdbg saw too few writes of qc:\n{ours}"
    );
    assert_eq!(a, b, "pgdbg:\n{ours}\ngdb:\n{theirs}");
    assert!(ours.contains("No breakpoints or watchpoints."), "{ours}");
    // its writes met by `next` (a perf breakpoint's trap merges into the
    // step's: told by the value), as gdb reports them
    let cmds = [
        "break PortalRun",
        "continue",
        "up",
        "watch qc",
        "delete 1",
        "break InitializeQueryCompletion",
        "continue",
        "next",
        "next",
    ];
    let mut gcmds = cmds.to_vec();
    gcmds.push("detach");
    c.exec(sql);
    let theirs = tool_run_when(&mut c, "gdb", &gcmds, "reakpoint 1 at", sql);
    c.exec(sql);
    let ours = tool_run_when(&mut c, "pgdbg", &cmds, "reakpoint 1 at", sql);
    let (a, b) = (bare(&ours), bare(&theirs));
    assert_eq!(
        a.iter().filter(|l| l.starts_with("Old value = ")).count(),
        2,
        "pgdbg:\n{ours}"
    );
    assert_eq!(a, b, "pgdbg:\n{ours}\ngdb:\n{theirs}");
    assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after pgdbg ended");
    assert_whole_function_as_file(&cl, pid, "PostgresMain");
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn local_watch_as_gdb_15() {
    local_watch_as_gdb(15);
}

#[test]
fn local_watch_as_gdb_18() {
    local_watch_as_gdb(18);
}

/// pgdbg attached to `c`'s backend runs `cmds` (the first sets breakpoint
/// 1); then `sql` is sent; pgdbg's exit code and output (stdout and
/// stderr) once it has ended, and what the statement gave.
fn pgdbg_during(c: &mut Client, cmds: &[&str], sql: &str) -> (i32, String, Result<String, String>) {
    let pid = c.pid();
    let out = std::env::temp_dir().join(format!("pgdbg-local-watch-{pid}.txt"));
    let mut args = vec!["attach".to_string(), pid.to_string(), "-q".to_string()];
    args.extend(common::ex(cmds));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = Pgdbg::spawn_to_file(&args, &out);
    wait_until("breakpoint 1", Duration::from_secs(60), || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("Breakpoint 1 at"))
    });
    let h = c.spawn_text(sql);
    let (code, _, err) = p.wait(Duration::from_secs(120));
    let text = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    (code, format!("{text}{err}"), c.rejoin(h))
}

/// After a watch on a global (its debug register keeps one breakpoint
/// slot of the thread), a watched local's frame left by a `finish` (whose int3 is where the
/// frame returns: the watchpoint ends after it, said after its text), and
/// by an ERROR's longjmp (seen at the next stop, where another frame
/// writes the word); a disabled one whose frame has returned is not
/// enabled again.
fn local_watch_ends_with_its_frame(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    // a watch on a global first (DR0 through ptrace): its detach writes no
    // other address register, so three breakpoint slots stay free for the
    // perf breakpoints of locals (a written register is reserved for good)
    let (code, out, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "watch work_mem"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        common::free_breakpoint_slots(pid),
        3,
        "breakpoint slots of {pid} after a watchpoint on a global"
    );
    let deleted = "Watchpoint 2 deleted because the program has left the block in\nwhich its expression is valid.";
    let mut cmds = vec!["break PortalRun", "continue", "up", "watch qc", "delete 1"];
    cmds.extend(std::iter::repeat_n("continue", 4));
    cmds.extend(["finish", "finish", "info breakpoints"]);
    let (code, out, r) = pgdbg_during(&mut c, &cmds, "select 1");
    assert_eq!((code, r.as_deref()), (0, Ok("1")), "{out}");
    let after = out
        .split("Run till exit from #0  exec_simple_query")
        .nth(1)
        .unwrap_or_else(|| panic!("no finish out of exec_simple_query:\n{out}"));
    assert!(
        after.contains("in PostgresMain") && after.contains(deleted),
        "{out}"
    );
    assert!(out.contains("No breakpoints or watchpoints."), "{out}");
    // an ERROR in the executor: its longjmp leaves exec_simple_query
    let mut cmds = vec!["break PortalRun", "continue", "up", "watch qc", "delete 1"];
    cmds.extend(std::iter::repeat_n("continue", 3));
    cmds.push("info breakpoints");
    let (code, out, r) = pgdbg_during(&mut c, &cmds, "select 1 / g from generate_series(0, 0) g");
    assert_eq!(code, 0, "{out}");
    assert!(r.is_err_and(|e| e.contains("division by zero")), "{out}");
    assert!(out.contains(deleted), "{out}");
    assert!(out.contains("No breakpoints or watchpoints."), "{out}");
    // disabled, its frame returns meanwhile: enable refuses it
    let cmds = [
        "break PortalRun",
        "continue",
        "up",
        "watch qc",
        "delete 1",
        "disable 2",
        "tbreak ReadyForQuery",
        "continue",
        "enable 2",
    ];
    let (code, out, r) = pgdbg_during(&mut c, &cmds, "select 2");
    assert_eq!((code, r.as_deref()), (1, Ok("2")), "{out}");
    assert!(
        out.contains(
            "watchpoint 2 stays disabled: the frame of its local (exec_simple_query) has returned"
        ),
        "{out}"
    );
    assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after pgdbg ended");
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn local_watch_ends_with_its_frame_15() {
    local_watch_ends_with_its_frame(15);
}

/// pgdbg and its guardian killed together while an access watchpoint on
/// a frame's local (`exec_simple_query`'s `qc`) is armed inside a
/// statement: it is two perf breakpoints of pgdbg's (no debug register
/// through ptrace), which the kernel takes out with pgdbg's files, so
/// nothing traps on that stack word once its frame returns and other
/// frames reuse it; the int3 where the frame returns is restored by
/// pgdbg's SIGTRAP handler when it is hit; the statements end right;
/// `pgdbg rescue` leaves the code as the file's; the cluster never
/// restarts.
fn killed_with_a_local_watchpoint(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let script = write_script(
        &format!("local-watch-killed-{major}"),
        &[
            "break PortalRun",
            "continue",
            "up",
            "awatch qc",
            "delete 1",
            "commands 2",
            "  silent",
            "  continue",
            "end",
            "continue",
        ],
    );
    let out = std::env::temp_dir().join(format!("pgdbg-local-watch-killed-{pid}.txt"));
    let p = Pgdbg::spawn_to_file(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--script",
            script.to_str().unwrap(),
        ],
        &out,
    );
    let said = |what: &str| std::fs::read_to_string(&out).is_ok_and(|t| t.contains(what));
    wait_until("the breakpoint", Duration::from_secs(60), || {
        said("Breakpoint 1 at")
    });
    // the watch is set at PortalRun's stop, then the statement sleeps
    // inside the frame that holds qc: both are killed meanwhile
    let h = c.spawn_text("select 7 from pg_sleep(1.5)");
    wait_until(
        "the watchpoint on qc to be set",
        Duration::from_secs(60),
        || said("watchpoint 2: qc"),
    );
    std::thread::sleep(Duration::from_millis(300));
    // qc's 16 bytes: two perf breakpoints of pgdbg's, no debug register
    // through ptrace (which would stay reserved for the thread's life)
    assert_eq!(
        common::free_breakpoint_slots(pid),
        2,
        "breakpoint slots of {pid} while qc is watched"
    );
    assert!(
        proc_state(pid).starts_with('S'),
        "not asleep in pg_sleep: {}",
        proc_state(pid)
    );
    let g = guardians_of(pid);
    assert!(!g.is_empty(), "no guardian of {pid}");
    unsafe {
        libc::kill(g[0], libc::SIGKILL);
        libc::kill(p.pid(), libc::SIGKILL);
    }
    let _ = p.wait(Duration::from_secs(30));
    wait_until(
        "pgdbg and its guardian to end",
        Duration::from_secs(30),
        || tracer_pid(pid) == 0 && guardians_of(pid).is_empty(),
    );
    let _ = std::fs::remove_file(&out);
    // the kernel took pgdbg's breakpoints out with its files: every slot
    // free again, nothing left to trap on qc's word once its frame returns
    assert_eq!(dr7(pid), 0, "DR7 of {pid} armed by a watchpoint on a local");
    assert_eq!(
        common::free_breakpoint_slots(pid),
        4,
        "breakpoint slots of {pid} after pgdbg's end"
    );
    let r = c.rejoin(h);
    assert_eq!(r.as_deref(), Ok("7"), "the statement under the watchpoint");
    // the word is another frame's now, at every statement
    for _ in 0..20 {
        assert!(c.query_one_i64("select count(*) from pg_class where relname like 'pg_%'") > 0);
    }
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    let (code, out, err) = pgdbg(&["rescue", &pid.to_string()]);
    assert_eq!(code, 0, "rescue: {out}{err}");
    assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after the rescue");
    assert_whole_function_as_file(&cl, pid, "PostgresMain");
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn killed_with_a_local_watchpoint_15() {
    killed_with_a_local_watchpoint(15);
}

#[test]
fn killed_with_a_local_watchpoint_18() {
    killed_with_a_local_watchpoint(18);
}

/// `set var` on a GUC's variable: `show` in that session sees it, print
/// reads it back, the capture has the write; refused on code, on a
/// function and on read-only data, nothing written.
fn set_var(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let cap = std::env::temp_dir().join(format!("pgdbg-setvar-{pid}.jsonl"));
    let _ = std::fs::remove_file(&cap);
    let out = common::ex::run(
        pid,
        &[
            "set var work_mem = 12345",
            "print work_mem",
            "set variable enable_seqscan = 0",
        ],
    );
    assert_eq!(out.trim(), "$1 = 12345", "{out}");
    assert_eq!(c.query_one_text("show work_mem"), "12345kB");
    assert_eq!(c.query_one_text("show enable_seqscan"), "off");
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--capture",
        cap.to_str().unwrap(),
        "--ex",
        "set var work_mem = 4096",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&cap).unwrap();
    assert!(
        text.lines().any(|l| l.contains("\"event\":\"set_var\"")
            && l.contains("\"lvalue\":\"work_mem\"")
            && l.contains("\"old\":\"12345\"")
            && l.contains("\"new\":\"4096\"")),
        "{text}"
    );
    let _ = std::fs::remove_file(&cap);
    assert_eq!(c.query_one_text("show work_mem"), "4MB");
    let e = one_line_error(pid, "set var *(char *)ExecutorStart = 0");
    assert!(e.contains("is in code (an executable mapping"), "{e}");
    let e = one_line_error(pid, "set var ExecutorStart = 0");
    assert!(e.contains("is a function (code): nothing written"), "{e}");
    let e = one_line_error(pid, "set var ScanKeywordCategories[0] = 1");
    assert!(e.contains("is in a read-only mapping"), "{e}");
    let e = one_line_error(pid, "set var *MyProc = 1");
    assert!(e.contains("cannot assign to a PGPROC"), "{e}");
    // nothing written: the code is the file's
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert!(code_matches_file(pid, &exe, "ExecutorStart", 16));
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

#[test]
fn set_var_15() {
    set_var(15);
}

#[test]
fn set_var_18() {
    set_var(18);
}

/// `waits trace --ptrace` takes a debug register beside the user's
/// watchpoints and gives back only its own (the user's watchpoint stops
/// after it); with the four taken it is refused in one line.
#[test]
fn waits_trace_beside_watchpoints_15() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let pid = c.pid();
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "watch CurrentMemoryContext",
        "--ex",
        "rwatch debug_query_string",
        "--ex",
        "awatch work_mem",
        "--ex",
        "watch InterruptHoldoffCount",
        "--ex",
        "waits trace --ptrace --for 1s",
    ]);
    assert_ne!(code, 0, "{out}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("no hardware debug register left: 4 in use by watchpoint 1"),
        "{err}"
    );
    assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after pgdbg ended");
    let file = std::env::temp_dir().join(format!("pgdbg-watch-waits-{pid}.txt"));
    let mut p = Pgdbg::spawn_to_file(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "watch work_mem",
            "--ex",
            "waits trace --ptrace --for 1s",
            "--ex",
            "continue",
        ],
        &file,
    );
    p.wait_attached(pid);
    wait_until("the trace's end", Duration::from_secs(60), || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.contains("total wait time"))
    });
    let h = c.spawn_text("set work_mem = '5MB'");
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert!(c.rejoin(h).is_ok());
    let out = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(
        out.contains("Hardware watchpoint 1: work_mem\n\nOld value = 4096\nNew value = 5120\n"),
        "{out}"
    );
    assert_eq!(dr7(pid), 0);
    assert_eq!(c.query_one_text("show work_mem"), "5MB");
    cl.assert_no_crash();
}

/// Ctrl-C (SIGINT) and SIGTERM to pgdbg while it waits in `continue`
/// with a watchpoint armed: it detaches, DR7 is clear, the session goes
/// on.
#[test]
fn interrupted_and_terminated_15() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let pid = c.pid();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let p = spawn_continuing(
            &[
                "attach",
                &pid.to_string(),
                "-q",
                "--ex",
                "awatch work_mem",
                "--ex",
                "continue",
            ],
            pid,
        );
        unsafe { libc::kill(p.pid(), sig) };
        let _ = p.wait(Duration::from_secs(30));
        wait_until("pgdbg to let go", Duration::from_secs(30), || {
            tracer_pid(pid) == 0 && guardians_of(pid).is_empty()
        });
        assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after signal {sig}");
        assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    }
    cl.assert_no_crash();
}

/// Without pgdbg's SIGTRAP handler in the backend (PGDBG_NO_TRAP_HANDLER,
/// as when the backend has its own SIGTRAP action or the install fails)
/// no debug register is armed: `watch` and `waits trace --ptrace` are
/// refused in one line, DR7 stays clear, the backend goes on.
#[test]
fn no_trap_handler_no_watchpoint_15() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let pid = c.pid();
    for cmd in ["watch work_mem", "waits trace --ptrace --for 1s"] {
        let p = Pgdbg::spawn_env(
            &["attach", &pid.to_string(), "-q", "--ex", cmd],
            &[("PGDBG_NO_TRAP_HANDLER", "1")],
        );
        let (code, out, err) = p.wait(Duration::from_secs(60));
        assert_ne!(code, 0, "{cmd}: {out}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{cmd}: {err}");
        assert!(
            lines[0].contains(
                "no SIGTRAP handler could be placed in the backend: a hardware watchpoint left behind if pgdbg and its guardian died would kill it"
            ),
            "{cmd}: {err}"
        );
        assert_eq!(dr7(pid), 0, "DR7 of {pid} armed after {cmd}");
    }
    assert_eq!(c.query_one_i64("select 6 * 7"), 42);
    cl.assert_no_crash();
}

/// pgdbg's own pages in the backend (here its SIGTRAP handler's data
/// page, the one after its code page) are no data of the backend's:
/// `watch` and `set var` on them are refused in one line, nothing armed
/// or written, the backend goes on.
#[test]
fn pgdbg_pages_refused_15() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let pid = c.pid();
    let before = anon_exec_maps(pid);
    let script = std::env::temp_dir().join(format!("pgdbg-watch-own-{pid}.gdb"));
    for (i, (cmd, want)) in [
        ("watch *(long *)", "not the backend's data"),
        (
            "set var *(long *)",
            "not the backend's data: nothing written",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        // (checked when pgdbg starts, read again when run)
        std::fs::write(&script, "").unwrap();
        let p = Pgdbg::spawn_attached(
            &[
                "attach",
                &pid.to_string(),
                "-q",
                "--ex",
                "watch work_mem",
                "--ex",
                "continue",
                "--ex",
                &format!("source {}", script.display()),
            ],
            pid,
        );
        wait_until("the handler's code page", Duration::from_secs(30), || {
            anon_exec_maps(pid).len() > before.len()
        });
        let code_page = anon_exec_maps(pid)
            .into_iter()
            .find(|l| !before.contains(l))
            .unwrap();
        let data = code_page.split(['-', ' ']).nth(1).unwrap().to_string();
        let line = if cmd.starts_with("set") {
            format!("{cmd}0x{data} = 0\n")
        } else {
            format!("{cmd}0x{data}\n")
        };
        std::fs::write(&script, line).unwrap();
        let h = c.spawn_text(&format!("set work_mem = '{}MB'", 5 + i));
        let (code, out, err) = p.wait(Duration::from_secs(60));
        assert!(c.rejoin(h).is_ok());
        assert_ne!(code, 0, "{out}");
        assert!(out.contains("Hardware watchpoint 1: work_mem"), "{out}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].contains(&format!("0x{data} is in pgdbg's own pages in the backend"))
                && lines[0].contains(want),
            "{err}"
        );
        assert_eq!(dr7(pid), 0);
        assert_eq!(anon_exec_maps(pid), before, "the handler's pages left");
    }
    let _ = std::fs::remove_file(&script);
    assert_eq!(c.query_one_text("show work_mem"), "6MB");
    cl.assert_no_crash();
}

/// pgdbg attached to `pid` with `args` (commands that arm something, then
/// `continue`), returned once its guardian is there and the backend runs
/// again (out of its tracing stop: the commands before `continue` ran),
/// and half a second more.
fn spawn_continuing(args: &[&str], pid: i32) -> Pgdbg {
    let p = Pgdbg::spawn_attached(args, pid);
    wait_until("the guardian", Duration::from_secs(30), || {
        guardians_of(pid).len() == 1
    });
    wait_until("the backend resumed", Duration::from_secs(30), || {
        !proc_state(pid).starts_with('t')
    });
    std::thread::sleep(Duration::from_millis(500));
    p
}
