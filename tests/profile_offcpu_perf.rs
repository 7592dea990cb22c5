//! `profile --off-cpu` side by side with `perf record -e
//! sched:sched_switch --switch-events --call-graph dwarf -t TID` (Debian's
//! linux-perf) on the same PostgreSQL 15 backend, over the same known
//! workload: the test's client runs `select offcpu_mix()` K times while
//! both record, and each call sleeps 4 times in `pg_sleep(0.001)` (a
//! `Result` plan's expression), 3 times in `pg_sleep(0.005)` (evaluated
//! per row of a scan) and twice in `pg_sleep(0.01)` (a table function
//! under an aggregate): three distinct user stacks, each off a CPU a
//! number of times fixed by the statements (4K, 3K, 2K switch-outs), not
//! by the machine's speed or load.  Between statements the backend waits
//! for its client (the ClientRead stack, K times; left out of the
//! comparison because that wait also runs across the ends of the two
//! windows, which differ).
//!
//! Both tools see the same kernel events (the switch tracepoint's sample
//! at each switch-out, the switch-in record after it), so the comparison
//! is exact in principle: the three top stacks by switch-outs are the
//! same, in the same order, with the same counts (within 2%) and the same
//! time off a CPU (within 5% + 2 ms).  Stacks are compared innermost user
//! frame first, up to a common depth of 10 frames (perf's dwarf unwinding
//! of its 8 KB stack copy can stop short of `main`), after dropping the
//! kernel frames (pgdbg's one `[kernel]`, perf's `[kernel.kallsyms]`
//! ones) and mapping perf's names to pgdbg's (`sym+0x1f` to `sym`, glibc's
//! `__libc_` and `__GI_` aliases to the plain name, unknown frames to
//! `[unknown]`).
//!
//! Beyond that depth, each whole stack perf unwound up to `_start` must
//! be one of pgdbg's.
//!
//! The times differ by a few µs per interval, always in the same
//! direction for a given start order: the two events on one tracepoint
//! write their samples one after the other, the one opened last first,
//! so the other's switch-out time is later by the first's copy of the
//! user stack (pgdbg opened second: its intervals about 6.5 µs longer;
//! perf opened second: perf's about 7 µs longer, measured).
//!
//! What it catches: a wrong unwind (a frame skipped or a wrong caller, an
//! inlined frame not named: the stack is not perf's and its counts are
//! not found there), an interval attributed to another switch-out's stack
//! (the three sleeps last 1, 5 and 10 ms: their times would not be
//! perf's), intervals missed or counted twice (the counts differ).
//!
//! The backend is never traced or stopped; nothing is written into it.

use common::*;
use pgdbg_testbed as common;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MIX: &str = "create function offcpu_mix() returns void language plpgsql as $$ begin \
     perform pg_sleep(0.001); perform pg_sleep(0.001); \
     perform pg_sleep(0.001); perform pg_sleep(0.001); \
     perform pg_sleep(0.005) from generate_series(1, 3); \
     perform count(*) from pg_sleep(0.01); perform count(*) from pg_sleep(0.01); \
     end $$";
/// Calls of `offcpu_mix()` while both record.
const K: u64 = 40;
/// Frames compared, innermost user frame first.
const DEPTH: usize = 10;

/// Per stack (innermost user frames, up to DEPTH): switch-outs, ms off a
/// CPU, and the whole stacks seen (innermost first) that start so.
type Counts = HashMap<Vec<String>, (u64, f64, BTreeSet<Vec<String>>)>;

/// A frame's name as pgdbg writes it.
fn norm(name: &str) -> String {
    let n = name.split("+0x").next().unwrap_or(name).trim();
    if n.is_empty() || n.starts_with("0x") || n == "[unknown]" {
        return "[unknown]".into();
    }
    let n = n.strip_prefix("__libc_").unwrap_or(n);
    n.strip_prefix("__GI_").unwrap_or(n).to_string()
}

/// One switch-out (or pgdbg's `n` of them) off a CPU for `ms`.
fn add(c: &mut Counts, frames: Vec<String>, n: u64, ms: f64) {
    let key = frames.iter().take(DEPTH).cloned().collect();
    let e = c.entry(key).or_default();
    e.0 += n;
    e.1 += ms;
    e.2.insert(frames);
}

/// `perf record`, stopped by SIGINT however the test ends (a failed
/// assertion included): nothing left recording the backend.
struct PerfRecord(Child);

impl Drop for PerfRecord {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
            let _ = self.0.wait();
        }
    }
}

/// `perf record` of the switch tracepoint with dwarf call graphs and the
/// switch records, on thread `tid`, until SIGINT.
fn perf_record(tid: i32, out: &std::path::Path) -> PerfRecord {
    common::ex::assert_perf_there("profile --off-cpu with perf record");
    let p = Command::new("perf")
        .args([
            "record",
            "-e",
            "sched:sched_switch",
            "--switch-events",
            "--call-graph",
            "dwarf",
            "-t",
            &tid.to_string(),
            "-o",
        ])
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("perf record");
    let ppid = p.id() as i32;
    let rec = PerfRecord(p);
    wait_until("perf to open its events", Duration::from_secs(30), || {
        perf_fds(ppid) > 0
    });
    // its events are enabled once opened; a moment for its first mmap
    std::thread::sleep(Duration::from_millis(500));
    rec
}

/// Stop `perf record` (SIGINT, as Ctrl-C) and read its file back with
/// `perf script`: each sched_switch sample is a switch-out with its
/// stack, each PERF_RECORD_SWITCH IN after it ends that interval.
fn perf_counts(mut rec: PerfRecord, data: &std::path::Path) -> Counts {
    let p = &mut rec.0;
    unsafe { libc::kill(p.id() as i32, libc::SIGINT) };
    let st = p.wait().unwrap();
    let mut err = String::new();
    use std::io::Read;
    let _ = p.stderr.take().unwrap().read_to_string(&mut err);
    // perf record ends by the SIGINT (status 130 or the signal) once it
    // has written its file
    assert!(
        err.contains("Captured and wrote"),
        "perf record failed ({st}): {err}"
    );
    let out = Command::new("perf")
        .args(["script", "--show-switch-events", "--ns", "-i"])
        .arg(data)
        .output()
        .expect("perf script");
    let _ = std::fs::remove_file(data);
    let text = String::from_utf8_lossy(&out.stdout);
    let serr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "perf script failed: {serr}");
    assert!(
        !serr.to_lowercase().contains("lost") && !err.to_lowercase().contains("lost"),
        "perf lost records (the comparison needs every switch): {err}{serr}"
    );
    let time = |l: &str| -> f64 {
        l.split_whitespace()
            .find_map(|w| w.strip_suffix(':').and_then(|t| t.parse::<f64>().ok()))
            .unwrap_or_else(|| panic!("no time in {l}"))
    };
    let mut counts = Counts::new();
    // the pending switch-out: its time and its user frames so far
    let mut out_at: Option<(f64, Vec<String>)> = None;
    let mut in_sample = false;
    for l in text.lines() {
        if l.trim().is_empty() {
            continue;
        }
        if l.starts_with([' ', '\t']) {
            // "    108ef3 epoll_wait+0x13 (/usr/lib/.../libc.so.6)"
            if let (true, Some((_, frames))) = (in_sample, out_at.as_mut()) {
                let rest = l.trim().split_once(' ').map_or("", |(_, r)| r);
                let (sym, dso) = rest.rsplit_once(" (").unwrap_or((rest, ""));
                if !dso.contains("kernel.kallsyms") {
                    frames.push(norm(sym));
                }
            }
            continue;
        }
        in_sample = false;
        if l.contains("sched:sched_switch:") {
            out_at = Some((time(l), Vec::new()));
            in_sample = true;
        } else if l.contains("PERF_RECORD_SWITCH IN")
            && let Some((t0, frames)) = out_at.take()
        {
            add(&mut counts, frames, 1, (time(l) - t0) * 1e3);
        }
    }
    counts
}

/// pgdbg's stacks (JSON), merged by their DEPTH innermost user frames.
fn pgdbg_counts(p: &Value) -> Counts {
    let mut counts = Counts::new();
    for s in p["stacks"].as_array().unwrap() {
        let frames = s["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .filter(|f| *f != "[kernel]")
            .map(norm)
            .collect();
        let n = s["intervals"].as_u64().unwrap();
        add(&mut counts, frames, n, s["ms"].as_f64().unwrap());
    }
    counts
}

/// The `n` stacks with the most switch-outs, most first.
fn top(c: &Counts, n: usize) -> Vec<(&Vec<String>, u64, f64)> {
    let mut v: Vec<_> = c.iter().map(|(k, (n, ms, _))| (k, *n, *ms)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.truncate(n);
    v
}

#[test]
fn off_cpu_top_stacks_as_perf_15() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    a.exec(MIX);
    let pid = a.pid();
    // once, so that the function's first-call work is not in the window
    a.exec("select offcpu_mix()");

    let data = std::env::temp_dir().join(format!("pgdbg-offcpu-perf-{pid}.data"));
    let perf = perf_record(pid, &data);
    let file = std::env::temp_dir().join(format!("pgdbg-offcpu-perf-{pid}.json"));
    let mut pg = Pgdbg::spawn_to_file(
        &[
            "profile",
            &pid.to_string(),
            "--off-cpu",
            "--for",
            "120s",
            "--format",
            "json",
        ],
        &file,
    );
    wait_for_stderr(&mut pg, "profile: recording", Duration::from_secs(60));
    let t0 = Instant::now();
    for _ in 0..K {
        a.exec("select offcpu_mix()");
        assert_eq!(tracer_pid(pid), 0, "pgdbg must not ptrace the backend");
    }
    eprintln!("{K} calls in {:?}", t0.elapsed());
    // Ctrl-C ends the recording: the table is written
    unsafe { libc::kill(pg.pid(), libc::SIGINT) };
    let (code, _, err) = pg.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let theirs = perf_counts(perf, &data);
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(&file);
    assert_eq!(p["lost"], 0, "pgdbg lost records: {p}");
    let ours = pgdbg_counts(&p);
    let (t_ours, t_perf) = (top(&ours, 4), top(&theirs, 4));
    for (name, t) in [("pgdbg", &t_ours), ("perf", &t_perf)] {
        eprintln!("{name}:");
        for (k, n, ms) in t.iter() {
            eprintln!("  {n:>5} {ms:>9.1} ms  {}", k.join(" <- "));
        }
    }

    // the known answer: three sleeping stacks, 4K, 3K and 2K switch-outs
    for (i, (k, n, _)) in t_ours.iter().take(3).enumerate() {
        let want = (4 - i as u64) * K;
        assert!(
            k.iter().any(|f| f == "pg_sleep") && k.iter().any(|f| f == "WaitLatch"),
            "pgdbg's top stack {i} sleeps in pg_sleep: {k:?}"
        );
        assert!(
            (want..=want + want / 10).contains(n),
            "pgdbg's top stack {i}: {n} switch-outs, {want} sleeps: {k:?}"
        );
    }
    assert_eq!(
        t_ours.iter().take(3).map(|t| t.0).collect::<Vec<_>>(),
        t_perf.iter().take(3).map(|t| t.0).collect::<Vec<_>>(),
        "the same top three stacks, in the same order, as perf"
    );
    for ((k, n, ms), (_, pn, pms)) in t_ours.iter().zip(&t_perf).take(3) {
        assert!(
            n.abs_diff(*pn) <= 2.max(pn / 50),
            "switch-outs: pgdbg {n}, perf {pn}: {k:?}"
        );
        assert!(
            (ms - pms).abs() <= 0.05 * pms + 2.0,
            "ms off a CPU: pgdbg {ms:.1}, perf {pms:.1}: {k:?}"
        );
    }
    // beyond the common depth: each whole stack perf unwound to `_start`
    // (its copy of the stack was deep enough) is one of pgdbg's
    let mut whole_seen = 0;
    for (k, _, _) in t_perf.iter().take(3) {
        let mine = &ours[*k].2;
        for whole in theirs[*k]
            .2
            .iter()
            .filter(|s| s.last().is_some_and(|f| f == "_start"))
        {
            whole_seen += 1;
            assert!(
                mine.contains(whole),
                "perf's whole stack {whole:?} is not among pgdbg's {mine:?}"
            );
        }
    }
    eprintln!("{whole_seen} whole stacks of perf's also pgdbg's");
    assert!(whole_seen >= 3, "perf unwound none of the three to _start");
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.query_one_i64("select 41 + 1"), 42);
    cl.assert_no_crash();
}
