//! print's formats and artificial arrays, `info breakpoints` with
//! disabled and ignored breakpoints, and `display`'s lines, compared with
//! gdb's on the same backend (15 and 18); and the new commands' bad input
//! refused before attaching, in one line.

use common::ex::{gdb_attached, gdb_there, one_line_error, run};
use common::*;
use pgdbg_testbed as common;

/// The lines of `out` that print, display and info display write, and the
/// breakpoint table's rows cut to what both say alike: number, type,
/// disposition, enabled, function (gdb sets a breakpoint past the
/// prologue: another address and line), and the tab lines under them.
/// gdb's batch mode (not from a terminal) leaves out what it says only to
/// a terminal: `ignore`'s "Will ignore ..." and the line `display EXPR`
/// shows at once (pgdbg says both, as gdb at its prompt does), so those
/// are left out here, and a display's line is taken once.
fn shapes(out: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in out.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let display =
            w.len() > 2 && w[0].ends_with(':') && w[0][..w[0].len() - 1].parse::<u32>().is_ok();
        if display && (w[1] == "y" || w[1] == "n") && w[2] != "=" {
            // info display's row
            v.push(l.to_string());
        } else if display {
            if !v.iter().any(|x| x == l) {
                v.push(l.to_string());
            }
        } else if l.starts_with('$')
            || l.starts_with('\t')
            || l.starts_with("Auto-display")
            || l.starts_with("Num Enb")
        {
            v.push(l.to_string());
        } else if w.len() >= 7 && w[0].parse::<u32>().is_ok() && w[1] == "breakpoint" {
            v.push(format!("{} {} {} {} {}", w[0], w[2], w[3], w[5], w[6]));
        }
    }
    v
}

fn same_as_gdb(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let cmds = [
        "print MyProcPid",
        "p/x MyProcPid",
        "p/o MyProcPid",
        "p/t MyProcPid",
        "p/d MyProcPid",
        "p/c 65",
        "p ((unsigned char *) DataDir)[0]@4",
        "p/x ((unsigned char *) DataDir)[0]@4",
        "p/d ((unsigned char *) DataDir)[1]@2",
        "break int4mod",
        "break int4pl",
        "ignore 1 3",
        "ignore 2 1",
        "ignore 2 0",
        "disable 2",
        "info breakpoints",
        "display/x MyProcPid",
        "display MyProcPid + 1",
        "display",
        "info display",
    ];
    let ours = run(pid, &cmds);
    assert!(
        ours.contains("$7 = \"/") && ours.contains("Will ignore next 3 crossings of breakpoint 1."),
        "{ours}"
    );
    if gdb_there() {
        let theirs = gdb_attached(pid, &cmds);
        assert_eq!(
            shapes(&ours),
            shapes(&theirs),
            "pgdbg:\n{ours}\ngdb:\n{theirs}"
        );
        assert_eq!(shapes(&ours).len(), 18, "{ours}");
    }
    assert_eq!(c.query_one_i64("select 7 % 4"), 3, "the backend runs on");
    cl.assert_no_crash();
}

#[test]
fn formats_breakpoints_and_displays_as_gdb_15() {
    same_as_gdb(15);
}

#[test]
fn formats_breakpoints_and_displays_as_gdb_18() {
    same_as_gdb(18);
}

/// gdb's artificial arrays over PostgreSQL's own structs, a List's
/// flexible array member and enumerators in expressions, printed by
/// pgdbg and gdb on the same idle backend: every `$N = ...` line alike.
/// A count read from memory (`@l->length`) passes the check before
/// attaching, a count of 0 written in the line does not; so does an
/// enumerator in a breakpoint's condition, a misspelt one does not.
fn arrays_as_gdb(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    // the search path and pg_class's catcache are set up by a query
    assert_eq!(
        c.query_one_i64("select count(*) from pg_class where relname = 'pg_class'"),
        1
    );
    let pid = c.pid();
    let attrs = if major >= 18 {
        "compact_attrs"
    } else {
        "attrs"
    };
    let tupdesc_attrs = format!("p *SysCache[RELOID]->cc_tupdesc->{attrs}@2");
    let tupdesc_attr1 = format!("p/x SysCache[RELOID]->cc_tupdesc->{attrs}[1]@2");
    let cmds = [
        "p *activeSearchPath",
        "p/x *activeSearchPath",
        "p activeSearchPath->elements[0]@2",
        "p *activeSearchPath->elements@activeSearchPath->length",
        "p/x activeSearchPath->elements[0]@2",
        "p RELOID",
        "p/d RELOID",
        "p SysCache[RELOID]->cc_keyno[0]@4",
        "p SysCache[RELOID]->cc_relname[0]@3",
        "p SysCache[RELOID]->cc_relname",
        &tupdesc_attrs,
        &tupdesc_attr1,
        "p MyProc->links@2",
        "p ((unsigned char *) DataDir)[0]@3@2",
        "p MyProcPid@2",
    ];
    let ours = run(pid, &cmds);
    let values = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with('$'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(values(&ours).len(), cmds.len(), "{ours}");
    assert!(
        ours.contains("$4 = {{ptr_value = ") && ours.contains("$6 = RELOID\n"),
        "{ours}"
    );
    if gdb_there() {
        let theirs = gdb_attached(pid, &cmds);
        assert_eq!(
            values(&ours),
            values(&theirs),
            "pgdbg:\n{ours}\ngdb:\n{theirs}"
        );
    }
    // x/i and memory displays: gdb's lines (gdb's batch mode leaves out
    // the display line shown at once: only what follows is compared)
    let cmds = [
        "x/3i $pc",
        "x/2i ExecInitNode",
        "display/i $pc",
        "display/2i $pc",
        "display/s DataDir",
        "display/2xw &MyProcPid",
        "display/x MyProcPid",
        "info display",
        "display",
    ];
    let ours = run(pid, &cmds);
    assert!(ours.starts_with("=> 0x"), "{ours}");
    if gdb_there() {
        let theirs = gdb_attached(pid, &cmds);
        let x_lines = |out: &str| -> Vec<String> {
            out.lines()
                .filter(|l| l.starts_with("=> 0x") || l.starts_with("   0x"))
                .take(5)
                .map(str::to_string)
                .collect()
        };
        let from_info = |out: &str| -> Vec<String> {
            out.lines()
                .skip_while(|l| !l.starts_with("Auto-display"))
                .filter(|l| !l.starts_with("[Inferior"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            x_lines(&ours),
            x_lines(&theirs),
            "pgdbg:\n{ours}\ngdb:\n{theirs}"
        );
        assert_eq!(
            from_info(&ours),
            from_info(&theirs),
            "pgdbg:\n{ours}\ngdb:\n{theirs}"
        );
        assert_eq!(from_info(&ours).len(), 16, "{ours}");
    }
    let e = one_line_error(pid, "p activeSearchPath->elements[0]@(2 - 2)");
    assert!(e.contains("'@' needs a positive count, not 0"), "{e}");
    // an enumerator in a condition passes the check before attaching
    let out = run(
        pid,
        &[
            "break ExecInitNode if node->type == T_SeqScan",
            "info breakpoints",
        ],
    );
    assert!(
        out.contains("\tstop only if node->type == T_SeqScan"),
        "{out}"
    );
    let e = one_line_error(pid, "break ExecInitNode if node->type == T_SeqScanX");
    assert!(e.contains("no symbol \"T_SeqScanX\""), "{e}");
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(c.query_one_i64("select 7 % 4"), 3, "the backend runs on");
    cl.assert_no_crash();
}

#[test]
fn artificial_arrays_and_enumerators_as_gdb_15() {
    arrays_as_gdb(15);
}

#[test]
fn artificial_arrays_and_enumerators_as_gdb_18() {
    arrays_as_gdb(18);
}

/// Each new command's bad input: one line naming the problem and what to
/// do, a non-zero exit, the backend not touched.
#[test]
fn bad_input_refused_before_attaching_15() {
    let cl = Cluster::start(15);
    let mut c = cl.connect();
    let pid = c.pid();
    let looping = std::env::temp_dir().join(format!("pgdbg-self-{}.gdb", std::process::id()));
    std::fs::write(&looping, format!("echo x\nsource {}\n", looping.display())).unwrap();
    let cases = [
        (
            "enable 1",
            "enable 1: no breakpoint 1 at this point of the script",
        ),
        ("disable x", "disable takes breakpoint numbers"),
        (
            "ignore 1",
            "ignore needs a breakpoint number and a count: ignore 1 5",
        ),
        (
            "ignore $bpnum 2",
            "ignore $bpnum: no breakpoint is set before this line",
        ),
        (
            "condition $bpnum 1",
            "condition $bpnum: no breakpoint is set before this line",
        ),
        ("display/q MyProcPid", "unknown display format '/q'"),
        ("display no_such_global", "no_such_global"),
        ("undisplay x", "undisplay takes display numbers"),
        (
            "save breakpoints /nonexistent-dir/f.gdb",
            "no directory /nonexistent-dir",
        ),
        ("save", "save needs a subcommand: save breakpoints FILE"),
        (
            "source /nonexistent.gdb",
            "source: cannot read /nonexistent.gdb",
        ),
        ("source", "source needs a file of pgdbg commands"),
    ];
    for (cmd, want) in cases {
        let e = one_line_error(pid, cmd);
        assert!(e.contains(want), "{cmd}: {e}");
    }
    let e = one_line_error(pid, &format!("source {}", looping.display()));
    assert!(
        e.contains("files source each other more than 64 deep"),
        "{e}"
    );
    let _ = std::fs::remove_file(&looping);
    // a sourced file is checked before attaching, its breakpoints known to
    // the lines after `source`; its error names both files' lines
    let dir = std::env::temp_dir();
    let inner = dir.join(format!("pgdbg-inner-{}.gdb", std::process::id()));
    let outer = dir.join(format!("pgdbg-outer-{}.gdb", std::process::id()));
    std::fs::write(&inner, "echo inner\\n\nbreak no_such_function_zz\n").unwrap();
    std::fs::write(
        &outer,
        format!(
            "source {}\ncondition 1 fcinfo->args[0].value > 2\n",
            inner.display()
        ),
    )
    .unwrap();
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--script",
        outer.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    let want = format!("{}:1: {}:2: ", outer.display(), inner.display());
    assert!(
        err.contains(&want) && err.contains("no_such_function_zz"),
        "{err}"
    );
    std::fs::write(&inner, "break int4mod\n").unwrap();
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--script",
        outer.to_str().unwrap(),
        "--ex",
        "info breakpoints",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("\tstop only if fcinfo->args[0].value > 2"),
        "{out}"
    );
    let _ = std::fs::remove_file(&inner);
    let _ = std::fs::remove_file(&outer);
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(c.query_one_i64("select 7 % 4"), 3);
    cl.assert_no_crash();
}
