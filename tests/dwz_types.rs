//! Types read from a dwz supplementary file: a copy of PostgreSQL 15's
//! installation whose auto_explain.so and plpgsql.so went through
//! `dwz -m` (as Debian's and Fedora's debug packages do), so the types
//! they share (QueryDesc, PlannedStmt, EState, List, ScanDirection,
//! uint64...) are DIEs of the supplementary file that auto_explain.so
//! refers to by DW_FORM_GNU_ref_alt (and, with a twin of plpgsql.so
//! compressed beside it, plpgsql's own types too).  A backend of a server of that copy
//! stopped in auto_explain's `explain_ExecutorRun`: pgdbg's `bt`,
//! `whatis`, `ptype`, `print` and `info types` there are gdb's on the
//! same backend, command by command.

use common::ex::gdb_there;
use common::*;
use pgdbg_testbed as common;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIB: &str = "lib/postgresql/auto_explain.so";
const FUNC: &str = "explain_ExecutorRun";
const PLPGSQL: &str = "lib/postgresql/plpgsql.so";
const TWIN: &str = "lib/postgresql/plpgsql_twin.so";

/// The commands compared, each run at the breakpoint.
const CMDS: &[&str] = &[
    "bt 1",
    "whatis direction",
    "whatis count",
    "whatis execute_once",
    "whatis queryDesc->plannedstmt",
    "ptype queryDesc",
    "ptype queryDesc->plannedstmt",
    "ptype queryDesc->plannedstmt->planTree",
    "ptype queryDesc->estate",
    "ptype queryDesc->plannedstmt->rtable",
    "whatis queryDesc->estate->es_range_table",
    "p *queryDesc",
    "p *queryDesc->plannedstmt",
    "p direction",
    "info types ^PLpgSQL_stmt_",
    "ptype PLpgSQL_stmt_perform",
];

/// The copy, removed at the end.
struct Copy(PathBuf);

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `--ex`/`-ex` arguments: break, continue, each command after an echo
/// of a marker line, delete, detach.
fn script(flag: &str) -> Vec<String> {
    let mut v = vec![format!("break {FUNC}"), "continue".into()];
    for c in CMDS {
        v.push(format!("echo ==== {c}\\n"));
        v.push(c.to_string());
    }
    v.push("echo ==== end\\n".into());
    v.push("delete".into());
    v.push("detach".into());
    v.into_iter().flat_map(|c| [flag.to_string(), c]).collect()
}

/// Each command's lines (between its marker and the next), normalised:
/// every hexadecimal number is `0x?` (two runs of one backend allocate
/// elsewhere), a path is its file name (gdb names a frame's file by its
/// full path, pgdbg by its name), blank lines and the note that more
/// frames follow left out.
fn sections(out: &str) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = Vec::new();
    for l in out.lines() {
        if let Some(c) = l.strip_prefix("==== ") {
            v.push((c.to_string(), Vec::new()));
            continue;
        }
        let Some((_, lines)) = v.last_mut() else {
            continue;
        };
        if l.trim().is_empty() || l.starts_with("(More stack frames follow") {
            continue;
        }
        lines.push(normalised(l));
    }
    if v.last().is_some_and(|(c, _)| c == "end") {
        v.pop();
    }
    v
}

fn normalised(l: &str) -> String {
    let mut out = String::new();
    let mut rest = l;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let hex = rest[i + 2..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len() - i - 2);
        out.push_str("0x?");
        rest = &rest[i + 2 + hex..];
    }
    out.push_str(rest);
    out.split(' ')
        .map(|w| match w.rfind('/') {
            Some(i) if w.starts_with('/') || w.starts_with("\"/") => &w[i + 1..],
            _ => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run `tool` (pgdbg or gdb, attached to `pid` with `script`), wait until
/// its breakpoint is in auto_explain.so, then run a statement on
/// `client`'s backend: it stops there, the commands run, the tool
/// detaches and the statement ends.  The tool's stdout.
fn stopped_once(
    mut tool: std::process::Command,
    pid: i32,
    lib: &Path,
    client: &mut Client,
) -> String {
    let child = tool
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_until("the breakpoint armed", Duration::from_secs(60), || {
        mapped_code_differs(pid, lib, lib, FUNC, 16).is_some()
    });
    assert_eq!(
        client.query_one_i64("select count(*) from pg_class where relname = 'pg_class'"),
        1
    );
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{tool:?}\nstdout:\n{out}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(tracer_pid(pid), 0);
    assert!(
        mapped_code_differs(pid, lib, lib, FUNC, 16).is_none(),
        "a breakpoint left in {FUNC}"
    );
    out
}

/// The premise: auto_explain.so's parameters of explain_ExecutorRun have
/// types that are DIEs of the supplementary file (`<alt 0x...>` in
/// readelf's dump), and its struct QueryDesc is defined only there; so
/// is plpgsql.so's PLpgSQL_stmt_perform.
fn assert_types_in_supplementary_file(lib: &Path, plpgsql: &Path, sup: &Path) {
    let dump = |f: &Path| {
        // (-wN: the file's own DIEs, not those of the file it links to)
        let o = std::process::Command::new("readelf")
            .args(["-wN", "--debug-dump=info"])
            .arg(f)
            .output()
            .expect("readelf");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let info = dump(lib);
    let lines: Vec<&str> = info.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("DW_AT_name") && l.ends_with(&format!(": {FUNC}")))
        .expect("explain_ExecutorRun's DIE");
    // its parameters in order (-wN leaves the supplementary file's
    // strings, their names, out)
    let params: Vec<usize> = (at..lines.len())
        .filter(|&i| lines[i].contains("DW_TAG_formal_parameter"))
        .take(4)
        .collect();
    for (p, &i) in ["direction", "count", "execute_once"]
        .iter()
        .zip(&params[1..])
    {
        assert!(
            lines[i..i + 7]
                .iter()
                .any(|l| l.contains("DW_AT_type") && l.contains("<alt 0x")),
            "{p}'s type is not in the supplementary file:\n{}",
            lines[i..i + 7].join("\n")
        );
    }
    let defines = |dump: &str, name: &str| {
        let l: Vec<&str> = dump.lines().collect();
        l.windows(2)
            .any(|w| w[0].contains("DW_TAG_structure_type") && w[1].ends_with(&format!(": {name}")))
    };
    let sup_info = dump(sup);
    assert!(
        !defines(&info, "QueryDesc"),
        "QueryDesc defined in {}",
        lib.display()
    );
    assert!(
        defines(&sup_info, "QueryDesc"),
        "QueryDesc not in {}",
        sup.display()
    );
    let pl = dump(plpgsql);
    assert!(
        !defines(&pl, "PLpgSQL_stmt_perform"),
        "PLpgSQL_stmt_perform in {}",
        plpgsql.display()
    );
    assert!(
        defines(&sup_info, "PLpgSQL_stmt_perform"),
        "PLpgSQL_stmt_perform not in {}",
        sup.display()
    );
}

#[test]
fn types_from_dwz_supplementary_file_as_gdb() {
    let dir = PathBuf::from(format!("/tmp/pgdbg-dwz-types-{}", std::process::id()));
    let _copy = Copy(dir.clone());
    let alt = dir.join("common.debug");
    copy_install(15, &dir);
    // a twin of plpgsql.so: all its DIEs are shared, so its own types
    // (plpgsql.h's) are in the supplementary file only
    std::fs::copy(dir.join(PLPGSQL), dir.join(TWIN)).unwrap();
    let sup = dwz_multifile(
        &dir,
        alt.to_str().unwrap(),
        &[LIB, PLPGSQL, TWIN, "bin/postgres"],
    );
    let lib = dir.join(LIB);
    assert_types_in_supplementary_file(&lib, &dir.join(PLPGSQL), &sup);

    let cl = Cluster::start_prefix(&dir);
    let mut c = cl.connect();
    c.exec("LOAD 'auto_explain'");
    c.exec("LOAD 'plpgsql'");
    let pid = c.pid();

    let mut ours = std::process::Command::new(pgdbg_bin());
    ours.args(["attach", &pid.to_string(), "-q"])
        .args(script("--ex"))
        .env_remove("DEBUGINFOD_URLS");
    let ours = stopped_once(ours, pid, &lib, &mut c);
    let mine = sections(&ours);
    assert_eq!(
        mine.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
        CMDS,
        "{ours}"
    );

    if gdb_there() {
        let mut gdb = std::process::Command::new("gdb");
        gdb.args(["-nx", "-batch", "-p", &pid.to_string()])
            .args(script("-ex"))
            .env_remove("DEBUGINFOD_URLS");
        let theirs = stopped_once(gdb, pid, &lib, &mut c);
        let gdbs = sections(&theirs);
        assert_eq!(mine.len(), gdbs.len(), "pgdbg:\n{ours}\ngdb:\n{theirs}");
        let differ: Vec<&str> = mine
            .iter()
            .zip(&gdbs)
            .filter(|((_, a), (_, b))| a != b)
            .map(|((c, _), _)| c.as_str())
            .collect();
        assert!(
            differ.is_empty(),
            "pgdbg and gdb differ at {differ:?}\npgdbg:\n{ours}\ngdb:\n{theirs}"
        );
    }
    for (cmd, lines) in &mine {
        assert!(!lines.is_empty(), "{cmd}: nothing\n{ours}");
    }
    assert!(!ours.contains("supplementary file"), "{ours}");
    assert_eq!(c.query_one_i64("select 7 % 4"), 3, "the backend runs on");
    cl.assert_no_crash();
}
