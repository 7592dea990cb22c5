//! gdb's read-only inspection commands on a live backend: `x/NFU` reads
//! what `print` and the client know (the backend's pid, the running
//! query's text), `ptype`/`whatis` declare PostgreSQL's structs from
//! DWARF, `info symbol`/`info line` name code addresses; and where gdb is
//! installed, the same commands agree with gdb's own output on the same
//! binary (gdb reads the file, no process: link-time addresses, so the
//! leading addresses are left out of the comparison).

use common::ex::*;
use common::*;
use pgdbg_testbed as common;

const QUERY: &str = "select pg_sleep(600) /* inspect */";

/// The values of an `x` line (after `ADDR <sym>:`).
fn values(line: &str) -> Vec<String> {
    let (_, v) = line
        .split_once(":\t")
        .unwrap_or_else(|| panic!("not an x line: {line}"));
    v.split('\t').map(str::to_string).collect()
}

fn inspect(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let h = a.spawn_text(QUERY);
    cl.wait_active(&[pid], "pg_sleep(600)");

    // x reads the bytes print reads: the pid, little-endian
    let out = run(
        pid,
        &[
            "print MyProcPid",
            "x/4xb &MyProcPid",
            "x/dw &MyProcPid",
            "x/2xw &MyProcPid",
            "x",
            "x/s debug_query_string",
            "x/2a &MyProc",
            "print MyProc",
            "x/4tb &MyProcPid",
            "x/2c debug_query_string",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("$1 = {pid}"), "{out}");
    let want: Vec<String> = (pid as u32)
        .to_le_bytes()
        .iter()
        .map(|b| format!("0x{b:02x}"))
        .collect();
    assert!(lines[1].contains(" <MyProcPid>:\t"), "{out}");
    assert_eq!(values(lines[1]), want, "{out}");
    assert_eq!(values(lines[2]), vec![pid.to_string()], "{out}");
    assert_eq!(values(lines[3])[0], format!("0x{pid:08x}"), "{out}");
    // a bare x goes on 8 bytes further, with the same format and count
    let at = |l: &str| {
        u64::from_str_radix(
            l.split(&[' ', ':'])
                .next()
                .unwrap()
                .trim_start_matches("0x"),
            16,
        )
        .unwrap()
    };
    assert_eq!(at(lines[4]), at(lines[3]) + 8, "{out}");
    assert_eq!(values(lines[4]).len(), 2, "{out}");
    assert_eq!(values(lines[5]), vec![format!("\"{QUERY}\"")], "{out}");
    // x/a of MyProc is the pointer print shows
    let proc_ptr = lines[7].rsplit(' ').next().unwrap();
    assert!(lines[6].contains(" <MyProc>:\t"), "{out}");
    assert_eq!(values(lines[6])[0], proc_ptr, "{out}");
    let bits: Vec<String> = (pid as u32)
        .to_le_bytes()
        .iter()
        .map(|b| format!("{b:08b}"))
        .collect();
    assert_eq!(values(lines[8]), bits, "{out}");
    assert_eq!(values(lines[9]), vec!["115 's'", "101 'e'"], "{out}");

    // print's formats and gdb's artificial arrays
    let out = run(
        pid,
        &[
            "p/x MyProcPid",
            "p/o MyProcPid",
            "p/t MyProcPid",
            "p/d MyProcPid",
            "p/c *debug_query_string",
            "p *debug_query_string@6",
            "p MyProc->fpRelId[0]@3",
            "p/x MyProc",
        ],
    );
    let v = print_values(&out);
    assert_eq!(v[0], format!("{pid:#x}"), "{out}");
    assert_eq!(v[1], format!("0{pid:o}"), "{out}");
    assert_eq!(v[2], format!("{pid:b}"), "{out}");
    assert_eq!(v[3], pid.to_string(), "{out}");
    assert_eq!(v[4], "115 's'", "{out}");
    assert_eq!(v[5], "\"select\"", "{out}");
    assert_eq!(v[6].matches(',').count(), 2, "{out}");
    assert!(v[6].starts_with('{') && v[6].ends_with('}'), "{out}");
    assert_eq!(v[7], proc_ptr, "{out}");
    let e = one_line_error(pid, "p/q MyProcPid");
    assert!(e.contains("unknown print format '/q'"), "{e}");
    let e = one_line_error(pid, "p MyProcPid@0");
    assert!(e.contains("'@' needs a positive count"), "{e}");

    // types from DWARF
    let out = run(
        pid,
        &[
            "ptype PlannedStmt",
            "whatis MyProc",
            "whatis PlannedStmt",
            "ptype MyProc",
            "whatis standard_ExecutorRun",
        ],
    );
    assert!(out.starts_with("type = struct PlannedStmt {\n"), "{out}");
    assert!(out.contains("\n    struct Plan *planTree;\n"), "{out}");
    assert!(out.contains("\ntype = PGPROC *\n"), "{out}");
    assert!(out.contains("\ntype = struct PlannedStmt\n"), "{out}");
    assert!(out.contains("\ntype = struct PGPROC {\n"), "{out}");
    assert!(out.contains("\n    int pid;\n"), "{out}");
    assert!(out.contains("\n} *\n"), "{out}");
    assert!(
        out.contains("\ntype = void (QueryDesc *, ScanDirection, uint64"),
        "{out}"
    );

    // code addresses named
    let out = run(
        pid,
        &[
            "info symbol &standard_ExecutorRun",
            "info symbol &MyProcPid",
            "info symbol $pc",
            "info address standard_ExecutorRun",
            "info line standard_ExecutorRun",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "standard_ExecutorRun in section .text", "{out}");
    assert_eq!(lines[1], "MyProcPid in section .bss", "{out}");
    // waiting in the kernel: the pc is in libc's code
    assert!(
        lines[2].contains(" in section .text of /") && lines[2].contains("libc"),
        "{out}"
    );
    let entry = lines[3]
        .split("at address ")
        .nth(1)
        .unwrap()
        .trim_end_matches('.')
        .to_string();
    assert!(lines[4].starts_with("Line "), "{out}");
    assert!(
        lines[4].contains(&format!(
            "execMain.c\" starts at address {entry} <standard_ExecutorRun> and ends at "
        )),
        "{out}"
    );

    // bad input: one line, non-zero, the backend untouched
    let e = one_line_error(pid, "x/4q &MyProcPid");
    assert!(e.contains("unknown format or unit 'q'"), "{e}");
    let e = one_line_error(pid, "ptype no_such_thing_here");
    assert!(e.contains("no symbol \"no_such_thing_here\""), "{e}");
    let e = one_line_error(pid, "info line no_such_function_here");
    assert!(e.contains("no function \"no_such_function_here\""), "{e}");
    let e = one_line_error(pid, "x/4xb 0");
    assert!(e.contains("Cannot access memory at address 0x0"), "{e}");
    assert_eq!(tracer_pid(pid), 0);

    // what pgdbg does with each signal, as gdb's info signals shows it
    let out = run(pid, &["info signals", "info handle usr1"]);
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} row: {out}"))
            .to_string()
    };
    assert!(out.starts_with("Signal        Stop\tPrint\tPass to program\tDescription\n"));
    assert!(row("SIGTRAP").contains("Yes\tYes\tNo\t\t"), "{out}");
    assert!(row("SIGALRM").contains("No\tNo\tYes\t\t"), "{out}");
    assert!(
        row("SIGALRM").ends_with("held back by the guardian"),
        "{out}"
    );
    assert_eq!(out.matches("\nSIGUSR1 ").count(), 2, "{out}");
    assert_eq!(tracer_pid(pid), 0);

    auxv_like_gdb(pid);
    assert_eq!(tracer_pid(pid), 0);

    like_gdb(pid, &cl.postgres_binary());

    cl.cancel(&[pid]);
    let _ = a.rejoin(h);
    assert_eq!(a.simple_text("select 1"), "1");
}

/// An output line without its link-time or runtime addresses (`0x...`
/// before a `<symbol>`, and an x line's leading address).
fn normalised(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        let n = tail
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(tail.len());
        let after = &tail[n..];
        if after.starts_with(" <") || (out.is_empty() && after.starts_with(':')) {
            out.push_str("ADDR");
        } else {
            out.push_str(&rest[i..i + 2 + n]);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The commands that read only the binary's code and debug info agree
/// with gdb's output on the same binary.
fn like_gdb(pid: i32, binary: &std::path::Path) {
    if !gdb_there() {
        return;
    }
    let line = run(pid, &["info line standard_ExecutorRun"]);
    let n: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let file_line = format!("info line execMain.c:{n}");
    let cmds = [
        "ptype PlannedStmt",
        "ptype struct PGPROC",
        "ptype MemoryContextMethods",
        "ptype ListCell",
        "ptype ExecutorRun_hook",
        "whatis ExecutorRun_hook",
        "whatis MyProc",
        "whatis PlannedStmt",
        "ptype NodeTag",
        "ptype Datum",
        "whatis standard_ExecutorRun",
        "ptype standard_ExecutorRun",
        "info symbol &standard_ExecutorRun",
        "info symbol &MyProcPid",
        "info line standard_ExecutorRun",
        &file_line,
        "x/8xb standard_ExecutorRun",
        "x/3xh standard_ExecutorRun",
        "x/5xw standard_ExecutorRun",
        "x/3xg standard_ExecutorRun",
        "x/4dw standard_ExecutorRun",
        "x/4uh standard_ExecutorRun",
        "x/4ob standard_ExecutorRun",
        "x/4tb standard_ExecutorRun",
        "x/4cb standard_ExecutorRun",
        "x/2fg standard_ExecutorRun",
        "x/2fw standard_ExecutorRun",
        "x",
    ];
    assert_same_as_gdb(pid, binary, &cmds, normalised, normalised);
    // print's formats of constants (the same history numbers: both start at $1)
    let formats = ["p/x 3022", "p/o 3022", "p/t 3022", "p/c 65", "p/d 0x10"];
    assert_same_as_gdb(pid, binary, &formats, str::to_string, str::to_string);
    // a fault's row: gdb's defaults are pgdbg's (stop, print, pass)
    assert_same_as_gdb(
        pid,
        binary,
        &["info signals SIGSEGV"],
        str::to_string,
        str::to_string,
    );
}

#[test]
fn inspection_reads_memory_and_types_15() {
    inspect(15);
}

#[test]
fn inspection_reads_memory_and_types_18() {
    inspect(18);
}

/// The rows of an `info auxv` table (a frame line like `0x00007f... in`
/// is none).
fn auxv_rows(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| {
            let mut w = l.split_whitespace();
            w.next().is_some_and(|n| n.parse::<u64>().is_ok())
                && w.next().is_some_and(|n| n.starts_with("AT_") || n == "???")
        })
        .collect()
}

/// A row's value as a number (decimal, or hex with `0x`).
fn auxv_value(row: &str) -> u64 {
    let v = row.split_whitespace().last().unwrap();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => v.parse().unwrap_or_else(|_| panic!("value of {row}")),
    }
}

/// `info auxv` row by row as gdb's on the same backend (gdb attaches for
/// its command, after pgdbg has detached); a type this gdb does not name
/// (`???`: gdb 13 and AT_RSEQ_*) has pgdbg's row with the same number and
/// value.
fn auxv_like_gdb(pid: i32) {
    let ours = run(pid, &["info auxv"]);
    let rows = auxv_rows(&ours);
    assert_eq!(rows.len(), ours.lines().count(), "{ours}");
    let entry = format!(
        "{:<4} {:<20} {:<30} ",
        9, "AT_ENTRY", "Entry point of program"
    );
    assert!(rows.iter().any(|r| r.starts_with(&entry)), "{ours}");
    assert_eq!(
        rows.last().copied(),
        Some("0    AT_NULL              End of vector                  0x0"),
        "{ours}"
    );
    let execfn = rows
        .iter()
        .find(|r| r.starts_with("31 "))
        .expect("AT_EXECFN");
    assert!(execfn.ends_with("postgres\""), "{execfn}");
    if !gdb_there() {
        return;
    }
    let out = gdb_attached(pid, &["info auxv"]);
    let theirs = auxv_rows(&out);
    assert_eq!(rows.len(), theirs.len(), "pgdbg:\n{ours}\ngdb:\n{out}");
    for (o, t) in rows.iter().zip(&theirs) {
        if t.split_whitespace().nth(1) == Some("???") {
            assert_eq!(o.split_whitespace().next(), t.split_whitespace().next());
            assert_eq!(auxv_value(o), auxv_value(t), "{o} / {t}");
        } else {
            assert_eq!(o, t);
        }
    }
}
