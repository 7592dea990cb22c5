//! `count FUNC --perf` on real PostgreSQL 15 and 18: kernel uprobes count
//! exactly the calls a known number of statements make (the same as the
//! ptrace mode), without stopping the backend; pgdbg killed with SIGKILL
//! while they count leaves the backend's code as the binary has it.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufReader, Read};
use std::time::Duration;

/// `count ... --for 4s` started on `pid`; `work` runs once it says it counts.
fn count_during(pid: i32, cmd: &str, work: impl FnOnce()) -> String {
    let mut p = Pgdbg::spawn(&["attach", &pid.to_string(), "-q", "--ex", cmd]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(&mut out, "count: ", Duration::from_secs(60));
    work();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    rest
}

fn calls(out: &str, f: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(f).map(|r| r.trim().parse::<u64>().unwrap()))
        .unwrap_or_else(|| panic!("no count of {f} in:\n{out}"))
}

fn exact_counts(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    // the ptrace mode first: in a process that has had a uprobe hit, the
    // kernel handles every int3 at an address where some uprobe is
    // registered (even one whose owner is gone: seen after kill -9 soaks)
    // as its own, and pgdbg's breakpoint there would see no hit
    for mode in [" --ptrace", " --uprobes", ""] {
        let cmd = format!("count standard_ExecutorStart standard_ExecutorEnd --for 4s{mode}");
        let out = count_during(pid, &cmd, || {
            for i in 0..137 {
                assert_eq!(a.query_one_i64(&format!("select {i}")), i);
            }
        });
        assert_eq!(calls(&out, "standard_ExecutorStart"), 137, "{mode}:\n{out}");
        assert_eq!(calls(&out, "standard_ExecutorEnd"), 137, "{mode}:\n{out}");
    }
    cl.assert_no_crash();
}

/// The server's binary replaced on disk while it runs (a package upgrade
/// before the restart): the backend maps the old file, and a uprobe placed
/// by the path would be in the new one and never hit; pgdbg places it in
/// the file mapped (/proc/PID/map_files) and counts every call.
#[test]
fn count_perf_binary_replaced_on_disk() {
    let install = install_with_blank(15);
    let cl = Cluster::start_prefix(&install.prefix());
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = install.prefix().join("bin/postgres");
    let new = install.prefix().join("bin/postgres.new");
    std::fs::copy(&bin, &new).unwrap();
    std::fs::rename(&new, &bin).unwrap();
    let mapped = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert!(
        mapped.to_string_lossy().ends_with(" (deleted)"),
        "the backend maps the replaced file: {mapped:?}"
    );
    let out = count_during(
        pid,
        "count standard_ExecutorStart --uprobes --for 4s",
        || {
            for i in 0..61 {
                assert_eq!(a.query_one_i64(&format!("select {i}")), i);
            }
        },
    );
    assert_eq!(calls(&out, "standard_ExecutorStart"), 61, "{out}");
    cl.assert_no_crash();
}

#[test]
fn count_perf_exact_all_majors() {
    for m in majors() {
        exact_counts(m);
    }
}

/// SIGKILL while the uprobes count: pgdbg's keeper, which opened them and
/// holds a copy, closes them and ends; the kernel removes them; the code
/// of the backend is the binary's again, and the backend serves queries.
#[test]
fn count_perf_killed_leaves_code_as_found() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    for _ in 0..5 {
        let mut p = Pgdbg::spawn(&[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "count standard_ExecutorStart --uprobes",
        ]);
        let mut out = BufReader::new(p.child.stdout.take().unwrap());
        read_until(&mut out, "count: ", Duration::from_secs(60));
        // the probe is in place (the kernel's breakpoint in the code page)
        assert!(!code_matches_file(pid, &bin, "standard_ExecutorStart", 1));
        // opened by pgdbg's keeper, which holds a copy of the event
        let keepers = keepers_of(p.pid());
        assert_eq!(keepers.len(), 1, "one keeper: {keepers:?}");
        assert_eq!(perf_fds(keepers[0]), 1, "the keeper holds the uprobe");
        assert_eq!(perf_fds(p.pid()), 1, "pgdbg holds its own copy");
        for i in 0..20 {
            assert_eq!(a.query_one_i64(&format!("select {i}")), i);
        }
        p.child.kill().unwrap();
        p.child.wait().unwrap();
        wait_until("the keeper to end", Duration::from_secs(10), || {
            keepers_of(p.pid()).is_empty()
        });
        wait_until("the probe removed", Duration::from_secs(10), || {
            code_matches_file(pid, &bin, "standard_ExecutorStart", 16)
        });
        wait_until("the backend untraced", Duration::from_secs(10), || {
            tracer_pid(pid) == 0
        });
        assert_eq!(a.query_one_i64("select 5"), 5);
    }
    cl.assert_no_crash();
}

/// Functions no other test probes: a uprobe the kernel leaks stays
/// registered until reboot.
const MANY: [&str; 24] = [
    "int4pl",
    "int4mi",
    "int4mul",
    "int4div",
    "int8pl",
    "int8mi",
    "int8mul",
    "int8div",
    "float8pl",
    "float8mi",
    "float8mul",
    "float8div",
    "textcat",
    "lower",
    "upper",
    "md5_text",
    "int4abs",
    "int8abs",
    "float8abs",
    "int4larger",
    "int4smaller",
    "int8larger",
    "int8smaller",
    "to_hex32",
];

/// SIGKILL of pgdbg while it opens (or has just opened) its uprobes: the
/// kernel writes a uprobe's int3 inside perf_event_open and gives up
/// (leaking the uprobe for good, "failed to unregister, leaking uprobe" in
/// the kernel log) when the opening process has a SIGKILL pending; pgdbg's
/// keeper opens them instead.  Each kill lands at a random moment in the
/// first 30 ms after pgdbg's first perf event: the kernel log shows no
/// leak, the keeper ends, the code is the binary's.
#[test]
fn count_perf_killed_while_opening_leaks_no_uprobe() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let mark = kernel_log_now();
    let cmd = format!("count {} --uprobes --for 60s", MANY.join(" "));
    let mut seed = (std::process::id() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut opening = 0;
    for k in 0..12 {
        let mut p = Pgdbg::spawn(&["attach", &pid.to_string(), "-q", "--ex", &cmd]);
        let ppid = p.pid();
        wait_until("pgdbg's first perf event", Duration::from_secs(60), || {
            perf_fds(ppid) > 0
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_micros(seed % 30_000));
        if perf_fds(ppid) < MANY.len() {
            opening += 1;
        }
        unsafe { libc::kill(ppid, libc::SIGKILL) };
        p.child.wait().unwrap();
        wait_until("the keeper to end", Duration::from_secs(10), || {
            keepers_of(ppid).is_empty()
        });
        for f in MANY {
            assert!(
                code_matches_file(pid, &bin, f, 16),
                "kill {k}: the code of {f} is not the binary's"
            );
        }
        assert_eq!(a.query_one_i64("select 2 + 3"), 5);
    }
    eprintln!("{opening} of 12 kills while pgdbg still opened its uprobes");
    assert_eq!(
        leaked_uprobes_since(mark),
        0,
        "the kernel log says uprobes leaked (kills while they were opened)"
    );
    cl.assert_no_crash();
}

/// A keeper that stops answering (SIGSTOP) is given up after 5 s: pgdbg
/// says so in one line and ends anyway; the keeper, continued, closes the
/// uprobe and ends; the code is the binary's.
#[test]
fn count_perf_stopped_keeper_is_given_up() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "count standard_ExecutorStart --uprobes --for 2s",
    ]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(&mut out, "count: ", Duration::from_secs(60));
    let ppid = p.pid();
    let keepers = keepers_of(ppid);
    assert_eq!(keepers.len(), 1);
    // continued whatever happens below (a stopped keeper holds the uprobe)
    struct ContOnDrop(i32);
    impl Drop for ContOnDrop {
        fn drop(&mut self) {
            unsafe { libc::kill(self.0, libc::SIGCONT) };
        }
    }
    let stopped = ContOnDrop(keepers[0]);
    unsafe { libc::kill(keepers[0], libc::SIGSTOP) };
    for i in 0..5 {
        assert_eq!(a.query_one_i64(&format!("select {i}")), i);
    }
    let t0 = std::time::Instant::now();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "pgdbg waited on the keeper"
    );
    assert_eq!(calls(&rest, "standard_ExecutorStart"), 5, "{rest}");
    assert!(
        err.contains("the process that holds kernel uprobes is gone (no answer within 5 s)"),
        "{err}"
    );
    drop(stopped);
    wait_until("the keeper to end", Duration::from_secs(10), || {
        keepers_of(ppid).is_empty()
    });
    wait_until("the probe removed", Duration::from_secs(10), || {
        code_matches_file(pid, &bin, "standard_ExecutorStart", 16)
    });
    assert_eq!(a.query_one_i64("select 5"), 5);
    cl.assert_no_crash();
}

/// The row of `f` in a `count --by-phase` table: calls, planning,
/// execution, other.
fn phase_row(out: &str, f: &str) -> Vec<u64> {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{f} ")))
        .unwrap_or_else(|| panic!("no row of {f} in:\n{out}"))
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

/// `count --by-phase --perf`: the same counts per phase as the ptrace
/// mode for the same statements (relation locks taken while parsing,
/// planning and executing; a phase function's own entry is counted in
/// the phase around it: executor starts at top level are "other").
fn by_phase_as_ptrace(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let sql = "select count(*) from pg_class where relname = 'pg_proc'";
    a.query_one_i64(sql);
    let mut rows = Vec::new();
    // the ptrace mode first (see exact_counts)
    for perf in [false, true] {
        let cmd = format!(
            "count LockRelationOid standard_ExecutorStart --by-phase --for 4s{}",
            if perf { " --perf" } else { "" }
        );
        let out = count_during(pid, &cmd, || {
            for _ in 0..40 {
                assert_eq!(a.query_one_i64(sql), 1);
            }
        });
        let lock = phase_row(&out, "LockRelationOid");
        let start = phase_row(&out, "standard_ExecutorStart");
        assert_eq!(start, vec![40, 0, 0, 40], "perf {perf}:\n{out}");
        assert!(lock[1] >= 40 && lock[2] >= 40, "perf {perf}:\n{out}");
        rows.push(lock);
    }
    assert_eq!(rows[0], rows[1], "ptrace, then --perf");
    cl.assert_no_crash();
}

#[test]
fn count_by_phase_perf_as_ptrace_all_majors() {
    for m in majors() {
        by_phase_as_ptrace(m);
    }
}

fn has_uprobes_page(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .contains("[uprobes]")
}

/// A function whose first instruction the kernel would single-step
/// (ExecutorEnd starts with `mov ExecutorEnd_hook(%rip),%rax`) is counted
/// at the first instruction of its entry block that the kernel emulates
/// (its `je`): the counts are exact (equal to the ptrace mode's), and the
/// kernel never steps an instruction out of line for it, so the backend
/// gets no `[uprobes]` page; a uprobe on `PortalDefineQuery` (stores, then
/// `ret`: nothing to move to) gets one, the kernel's sign of a step.
fn counted_where_nothing_is_stepped(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    assert_entry_not_a_push(&bin, "ExecutorEnd");
    let mut a = cl.connect();
    let pid = a.pid();
    assert!(!has_uprobes_page(pid));
    // the ptrace mode first (see exact_counts)
    for mode in [" --ptrace", " --uprobes"] {
        let out = count_during(pid, &format!("count ExecutorEnd --for 4s{mode}"), || {
            for i in 0..137 {
                assert_eq!(a.query_one_i64(&format!("select {i}")), i);
            }
        });
        assert_eq!(calls(&out, "ExecutorEnd"), 137, "{mode}:\n{out}");
    }
    assert!(
        !has_uprobes_page(pid),
        "the kernel stepped an instruction out of line"
    );
    let out = count_during(pid, "count PortalDefineQuery --uprobes --for 3s", || {
        for i in 0..10 {
            assert_eq!(a.query_one_i64(&format!("select {i}")), i);
        }
    });
    assert_eq!(calls(&out, "PortalDefineQuery"), 10, "{out}");
    assert!(has_uprobes_page(pid), "a stepped uprobe maps [uprobes]");
    cl.assert_no_crash();
}

#[test]
fn count_perf_avoids_a_single_step() {
    for m in majors() {
        counted_where_nothing_is_stepped(m);
    }
}
