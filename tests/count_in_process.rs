//! `count FUNC` in-process (its default) on real PostgreSQL 15 and 18: a
//! jump at the function's entry to a counter in a page pgdbg maps in the
//! backend; the exact calls of a known number of statements (the same as
//! kernel uprobes and ptrace stops count: tests/count_perf.rs), the code
//! and mappings as found afterwards; and with pgdbg and its guardian
//! killed together while it counts, the backend serves on, counting into
//! its own page, until the next attach takes the counter out (from the
//! record the dead pgdbg left), or, the record lost too, the next command
//! that places anything at that entry (a kernel uprobe there would make
//! the backend run the jump's bytes as code).

use common::*;
use pgdbg_testbed as common;
use std::io::{BufReader, Read};
use std::time::Duration;

const F: &str = "standard_ExecutorStart";

fn calls(out: &str, f: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(f).map(|r| r.trim().parse::<u64>().unwrap()))
        .unwrap_or_else(|| panic!("no count of {f} in:\n{out}"))
}

/// `count F --for 3s` (and `mode`'s options) on `pid` while `work`
/// runs; its whole output
/// (standard output, then standard error).
fn count_during(pid: i32, mode: &str, work: impl FnOnce()) -> String {
    let cmd = format!("count {F} --for 3s{mode}");
    let mut p = Pgdbg::spawn(&["attach", &pid.to_string(), "-q", "--ex", &cmd]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let head = read_until(&mut out, "count: ", Duration::from_secs(60));
    work();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    format!("{head}{rest}{err}")
}

/// `count F` started on the client's backend, then pgdbg and its
/// guardian SIGKILLed together while it counts; the backend serves on
/// through the jump left behind.  Returns the dead pgdbg's PID.
fn kill_while_counting(cl: &Cluster, a: &mut Client, bin: &std::path::Path) -> i32 {
    let pid = a.pid();
    let cmd = format!("count {F} --for 60s");
    let mut p = Pgdbg::spawn(&["attach", &pid.to_string(), "-q", "--ex", &cmd]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(&mut out, "count: ", Duration::from_secs(60));
    assert!(!code_matches_file(pid, bin, F, 1), "no jump at {F}");
    kill_with_guardian(p.pid(), pid);
    let ppid = p.pid();
    let _ = p.child.wait();
    for i in 0..20 {
        assert_eq!(a.query_one_i64(&format!("select {i}")), i);
    }
    assert!(
        !proc_state(pid).starts_with(['T', 't']),
        "{}",
        proc_state(pid)
    );
    assert!(
        !code_matches_file(pid, bin, F, 1),
        "the jump left behind is gone (nothing took it out)"
    );
    cl.assert_no_crash();
    ppid
}

/// `count F` (with `mode`'s options) while the client runs `n`
/// statements: exactly `n` calls counted, and afterwards the entry's code
/// and the executable mappings as before (`maps`).  Its whole output.
fn count_n(a: &mut Client, bin: &std::path::Path, mode: &str, n: i64, maps: &[String]) -> String {
    let pid = a.pid();
    let out = count_during(pid, mode, || {
        for i in 0..n {
            assert_eq!(a.query_one_i64(&format!("select {i}")), i);
        }
    });
    assert_eq!(calls(&out, F), n as u64, "{out}");
    assert!(
        code_matches_file(pid, bin, F, 16),
        "the jump is still there"
    );
    assert_eq!(anon_exec_maps(pid), maps, "pages left mapped");
    out
}

fn killed_together_then_removed(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let maps_before = anon_exec_maps(pid);
    // counted exactly, in-process, and nothing left afterwards
    let out = count_n(&mut a, &bin, "", 37, &maps_before);
    assert!(
        out.contains(&format!(
            "count: {F} in backend {pid} (in-process counters, no stops)"
        )),
        "{out}"
    );

    // killed together while it counts: the next attach takes the counter
    // out, from the record the dead pgdbg left
    let ppid = kill_while_counting(&cl, &mut a, &bin);
    let out = count_n(&mut a, &bin, "", 11, &maps_before);
    assert!(
        out.contains(&format!(
            "backend {pid}, left by pgdbg (PID {ppid}): restored 1 jump(s)"
        )),
        "{out}"
    );
    // again, and the record is lost too (/dev/shm emptied): `attach
    // --cluster` with one `count` line would open uprobes for every backend
    // through the postmaster; this backend's jump makes it attach each
    // backend instead, whose count takes the jump out
    kill_while_counting(&cl, &mut a, &bin);
    remove_guardian_record(pid);
    let dir = cl.dir.to_str().unwrap().to_string();
    let line = format!("count {F}");
    let (code, out, err) = pgdbg(&["attach", "--cluster", &dir, "--for", "3s", "--ex", &line]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains(&format!("process {pid} has a jump at {F}")),
        "{out}\n{err}"
    );
    assert!(code_matches_file(pid, &bin, F, 16), "{out}\n{err}");
    assert_eq!(anon_exec_maps(pid), maps_before, "pages left mapped");
    assert_eq!(a.query_one_i64("select 7"), 7);
    // again, and the record is lost too (/dev/shm emptied): `count
    // --uprobes` finds the counter's jump at the entry and takes it out
    // before its uprobe goes there (on the jump, the uprobe would make the
    // backend run the jump's rel32 as code: SIGILL)
    kill_while_counting(&cl, &mut a, &bin);
    remove_guardian_record(pid);
    let out = count_n(&mut a, &bin, " --uprobes", 13, &maps_before);
    assert!(
        out.contains("count: removed the in-process counter or recorder an earlier pgdbg left at"),
        "{out}"
    );
    assert!(!catches_sigtrap(pid), "the SIGTRAP action was not put back");
    assert_eq!(a.query_one_i64("select 42"), 42);
    cl.assert_no_crash();
}

#[test]
fn count_in_process_killed_together_then_removed_15() {
    killed_together_then_removed(15);
}

#[test]
fn count_in_process_killed_together_then_removed_18() {
    killed_together_then_removed(18);
}
