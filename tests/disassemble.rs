//! `disassemble` on a live backend agrees with gdb's on the same binary
//! (gdb reads the file: link-time addresses, so pgdbg's runtime addresses
//! are taken back by the load bias before comparing; runs of blanks count
//! as one): whole functions with gcc's cold parts, `/r` bytes, address
//! ranges; `list` and `info functions|variables` on the same binary.  A breakpoint pgdbg placed never shows as an
//! int3 in the dump, and reading the code costs the backend no stop.

use common::ex::*;
use common::*;
use pgdbg_testbed as common;

const QUERY: &str = "select pg_sleep(600) /* disassemble */";

/// The first address of a dump's first instruction line.
fn first_insn_addr(out: &str) -> u64 {
    let l = out
        .lines()
        .find(|l| l.starts_with("   0x") || l.starts_with("=> 0x"))
        .unwrap_or_else(|| panic!("no instruction line in:\n{out}"));
    let hex = l[5..]
        .split(|c: char| !c.is_ascii_hexdigit())
        .next()
        .unwrap();
    u64::from_str_radix(hex, 16).unwrap()
}

/// A line with its blanks collapsed and every address in
/// `[bias, bias + 4 GiB)` taken back by `bias` (the padded ones keep
/// their width); immediates and displacements are left as they are.
fn normalised(line: &str, bias: u64) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        let n = tail
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(tail.len());
        let v = u64::from_str_radix(&tail[..n], 16).unwrap_or(0);
        if n > 0 && bias > 0 && v >= bias && v - bias < 1 << 32 {
            out.push_str(&format!(
                "0x{:0w$x}",
                v - bias,
                w = if n == 16 { 16 } else { 1 }
            ));
        } else {
            out.push_str(&rest[i..i + 2 + n]);
        }
        rest = &tail[n..];
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// pgdbg's and gdb's dumps of the same commands, line by line.
fn same_as_gdb(pid: i32, binary: &std::path::Path, cmds: &[&str], bias: u64) {
    assert_same_as_gdb(
        pid,
        binary,
        cmds,
        |l| normalised(l, bias),
        |l| normalised(l, 0),
    );
}

fn disassemble(major: u32, small_static: &str) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let h = a.spawn_text(QUERY);
    cl.wait_active(&[pid], "pg_sleep(600)");
    let binary = cl.postgres_binary();

    // the shape, without gdb: a whole function, its end, no pc marked
    // (the backend's pc is in the kernel's wait, in libc)
    let out = run(pid, &["disassemble GetCachedPlan"]);
    assert!(
        out.starts_with("Dump of assembler code for function GetCachedPlan:\n"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("End of assembler dump."), "{out}");
    assert!(out.contains(" <+0>:\t"), "{out}");
    assert!(!out.contains("=> "), "{out}");
    // without an argument: the function of the pc, the pc marked
    let out = run(pid, &["disassemble"]);
    assert_eq!(out.matches("\n=> 0x").count(), 1, "{out}");

    // /s: the file's name, numbered source lines, the instructions under them
    let out = run(pid, &["disassemble /s GetCachedPlan"]);
    assert!(out.contains("\nEnd of assembler dump."), "{out}");
    assert!(out.lines().any(|l| l.ends_with("plancache.c:")), "{out}");
    assert!(
        out.lines().any(|l| l
            .split_once('\t')
            .is_some_and(|(n, t)| n.parse::<u32>().is_ok() && t.contains("GetCachedPlan"))),
        "{out}"
    );

    // bad input: one line, before attaching
    let e = one_line_error(pid, "disassemble /q GetCachedPlan");
    assert!(e.contains("unknown modifier '/q'"), "{e}");
    let e = one_line_error(pid, "disassemble no_such_function_here");
    assert!(e.contains("no_such_function_here"), "{e}");
    let e = one_line_error(pid, "disassemble GetCachedPlan,");
    assert!(e.contains("START,END or START,+LENGTH"), "{e}");
    let e = one_line_error(pid, "info functions (unclosed");
    assert!(e.contains("invalid regular expression"), "{e}");
    let e = one_line_error(pid, "list no_such_function_here");
    assert!(e.contains("no_such_function_here"), "{e}");
    assert_eq!(tracer_pid(pid), 0);

    if gdb_there() {
        let link = first_insn_addr(&gdb(&binary, &["disassemble GetCachedPlan"]));
        let runtime = first_insn_addr(&run(pid, &["disassemble GetCachedPlan"]));
        let bias = runtime - link;
        let small = format!("disassemble {small_static}");
        let small_r = format!("disassemble /r {small_static}");
        for cmds in [
            &["disassemble GetCachedPlan"][..],
            &["disassemble /r ExecScan"],
            &[small.as_str(), small_r.as_str()],
            &[
                "disassemble &GetCachedPlan,+24",
                "disassemble /r ExecScan,+10",
            ],
        ] {
            same_as_gdb(pid, &binary, cmds, bias);
        }
        // source lines and the debug info's symbols, as gdb lists them
        same_as_gdb(
            pid,
            &binary,
            &[
                "list GetCachedPlan",
                "list",
                "list -",
                "list plancache.c:1200",
                "list 1140,1145",
            ],
            bias,
        );
        same_as_gdb(
            pid,
            &binary,
            &[
                "info functions ^GetCachedPlan$",
                "info functions ^ExecScan",
                "info variables ^MyProcPid$",
                "info variables ^debug_query",
            ],
            bias,
        );
        // a breakpoint's int3 is not the program's code: the dump is the file's
        let out = run(
            pid,
            &["break GetCachedPlan", "disassemble /r GetCachedPlan"],
        );
        let dump = &out[out.find("Dump of").expect("a dump")..];
        let theirs = gdb(&binary, &["disassemble /r GetCachedPlan"]);
        let a: Vec<String> = dump.lines().map(|l| normalised(l, bias)).collect();
        let b: Vec<String> = theirs.lines().map(|l| normalised(l, 0)).collect();
        assert_eq!(a, b, "pgdbg:\n{out}\ngdb:\n{theirs}");
    }
    assert_eq!(tracer_pid(pid), 0);

    cl.cancel(&[pid]);
    let _ = a.rejoin(h);
    assert_eq!(a.simple_text("select 1"), "1");
}

#[test]
fn disassemble_like_gdb_15() {
    disassemble(15, "choose_custom_plan");
}

#[test]
fn disassemble_like_gdb_18() {
    disassemble(18, "choose_custom_plan");
}
