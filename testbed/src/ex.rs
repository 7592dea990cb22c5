//! pgdbg's `--ex` commands on a live backend, their output or their one
//! line of error, and beside them gdb's on the same binary file (gdb reads
//! the file, no process: link-time addresses).

use super::pgdbg;
use std::path::Path;
use std::process::Command;

/// pgdbg's output for `--ex` commands on backend `pid` (which must succeed).
pub fn run(pid: i32, cmds: &[&str]) -> String {
    let mut args = vec!["attach".to_string(), pid.to_string(), "-q".into()];
    for c in cmds {
        args.push("--ex".into());
        args.push(c.to_string());
    }
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let (code, out, err) = pgdbg(&a);
    assert_eq!(code, 0, "{cmds:?}: {err}");
    out
}

/// The one line of a failed pgdbg, with a non-zero exit.
pub fn one_line_error(pid: i32, cmd: &str) -> String {
    let (code, _, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", cmd]);
    assert_ne!(
        code, 0,
        "{cmd}: exit status must be non-zero; stderr: {err}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{cmd}: expected one line on stderr, got:\n{err}"
    );
    lines[0].to_string()
}

/// gdb is installed (else the comparisons are skipped, and said so).
pub fn gdb_there() -> bool {
    let there = Command::new("gdb")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        eprintln!("gdb is not installed: the comparison with gdb is skipped");
    }
    there
}

/// gdb's output for the same commands on the binary file.
pub fn gdb(binary: &Path, cmds: &[&str]) -> String {
    let mut g = Command::new("gdb");
    g.args(["-nx", "-batch"]);
    for c in cmds {
        g.arg("-ex").arg(c);
    }
    let o = g.arg(binary).output().expect("run gdb");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// pgdbg's and gdb's outputs of the same commands agree line by line,
/// each line compared as `norm_ours` and `norm_gdb` make it.
pub fn assert_same_as_gdb(
    pid: i32,
    binary: &Path,
    cmds: &[&str],
    norm_ours: impl Fn(&str) -> String,
    norm_gdb: impl Fn(&str) -> String,
) {
    let ours = run(pid, cmds);
    let theirs = gdb(binary, cmds);
    let a: Vec<String> = ours.lines().map(norm_ours).collect();
    let b: Vec<String> = theirs.lines().map(norm_gdb).collect();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(
            x,
            y,
            "{cmds:?}: pgdbg and gdb differ at line {}\npgdbg:\n{ours}\ngdb:\n{theirs}",
            i + 1
        );
    }
    assert_eq!(a.len(), b.len(), "{cmds:?}\npgdbg:\n{ours}\ngdb:\n{theirs}");
}

/// gdb's output for `cmds` attached to process `pid` (gdb stops it for
/// the moment of its commands, then detaches).
pub fn gdb_attached(pid: i32, cmds: &[&str]) -> String {
    let mut g = Command::new("gdb");
    g.args(["-nx", "-batch", "-p", &pid.to_string()]);
    for c in cmds {
        g.arg("-ex").arg(c);
    }
    let o = g.output().expect("run gdb");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// pgdbg attached to `pid` with a breakpoint at `function`, `sql` run by
/// `client`, then `cmds` at the stop: pgdbg's exit status, stdout and
/// stderr.  The statement ends (the backend is not left stopped) and the
/// function's code is the file's again.
pub fn at_break(
    cl: &crate::Cluster,
    client: &mut crate::Client,
    pid: i32,
    function: &str,
    sql: &str,
    cmds: &[&str],
) -> (i32, String, String) {
    let brk = format!("break {function}");
    let mut all = vec![brk.as_str(), "continue"];
    all.extend_from_slice(cmds);
    let mut args = vec!["attach".to_string(), pid.to_string(), "-q".into()];
    args.extend(crate::ex(&all));
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let p = crate::Pgdbg::spawn_attached(&a, pid);
    crate::wait_armed(pid, function);
    let h = client.spawn_text(sql);
    let r = p.wait(std::time::Duration::from_secs(120));
    assert!(client.rejoin(h).is_ok(), "{sql} did not end well");
    assert_eq!(crate::tracer_pid(pid), 0);
    assert!(crate::code_matches_file(
        pid,
        &cl.postgres_binary(),
        function,
        32
    ));
    r
}

/// Debian's `perf` must be there for a test that compares with it
/// (`scripts/test` installs linux-perf); `what` is what it compares.
pub fn assert_perf_there(what: &str) {
    let ok = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "perf is missing: install Debian's linux-perf (apt-get install linux-perf, as \
         scripts/test does) to compare {what}"
    );
}
