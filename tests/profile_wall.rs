//! `profile --wall` on real PostgreSQL 15 and 18: a backend looping over
//! `perform pg_sleep(0.01)` and a CPU-bound count (checked running before
//! and after the recording) is recorded for 2 s.  The time on a CPU
//! (samples times their period) and off it (the switch intervals) adds up
//! to the window; the off-CPU time is the sleep's stack, the on-CPU time
//! the count's executor.  The speedscope and pprof files of the same run
//! hold its folded stacks, states as roots, in microseconds and
//! nanoseconds.  `--wall --off-cpu` is refused in one line.
//!
//! Why the bounds do not depend on the machine's speed or load: the two
//! events measure the same thread's time with the kernel's clocks, and a
//! loaded machine only moves time between on a CPU, preempted and
//! sleeping, never out of the sum; what the sum misses is at most about
//! one sampling period (10 ms at 99 Hz, 0.5% of 2 s) plus records the
//! kernel lost, so 5% of the window leaves room without hiding a missing
//! half.  The shares checked are ratios of work to work (the count's
//! executor against the rest of the loop's CPU time, the sleep against
//! the rest of the sleeping), the same on a slow machine.

use common::ex::run;
use common::running::*;
use common::*;
use pgdbg_testbed as common;
use pgdbg_testbed::profile_files;
use serde_json::Value;
use std::time::Duration;

/// Runs until cancelled: a 10 ms sleep, then a count over 30000 rows.
const SLEEP_AND_COUNT: &str = "do $$ begin loop perform pg_sleep(0.01); \
     perform count(*) from generate_series(1, 30000) g where g % 7 = 3; end loop; end $$";
const SHOWS: &str = "pg_sleep(0.01)";

/// `pgdbg profile PID --wall --for 2s --format json --speedscope SS
/// --pprof PB`, watching that the backend is never traced nor stopped
/// meanwhile.
fn wall_profile(pid: i32, ss: &std::path::Path, pb: &std::path::Path) -> Value {
    let args = [
        "profile",
        &pid.to_string(),
        "--wall",
        "--for",
        "2s",
        "--format",
        "json",
        "--speedscope",
        ss.to_str().unwrap(),
        "--pprof",
        pb.to_str().unwrap(),
        "-q",
    ];
    let out = output_never_stopped(&args, pid, Duration::from_millis(1500), "wall");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn frames(s: &Value) -> Vec<&str> {
    s["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect()
}

/// Milliseconds of the stacks that `pick` selects.
fn ms_of(p: &Value, pick: impl Fn(&Value) -> bool) -> f64 {
    p["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| pick(s))
        .map(|s| s["ms"].as_f64().unwrap())
        .sum()
}

fn wall_of_sleep_and_count(major: u32) {
    let cl = Cluster::start(major);
    let (a, pid, h) = cl.running(SLEEP_AND_COUNT, SHOWS);

    let tmp = |ext: &str| {
        std::env::temp_dir().join(format!("pgdbg-wall-{}-{pid}.{ext}", std::process::id()))
    };
    let (ss, pb) = (tmp("speedscope.json"), tmp("pb.gz"));
    let p = wall_profile(pid, &ss, &pb);
    cl.still_active(pid, SHOWS);
    let dur = p["duration_s"].as_f64().unwrap();
    let on = p["on_cpu_s"].as_f64().unwrap();
    let off = p["off_cpu_s"].as_f64().unwrap();
    let gap = p["unaccounted_s"].as_f64().unwrap();
    eprintln!(
        "PG {major}: window {dur:.3} s = on CPU {on:.3} s ({} samples) + off CPU {off:.3} s ({} intervals) \
         + not accounted for {gap:.4} s ({:.2}%); kernel's CPU time {}; by state {}; lost {} + {}",
        p["samples"],
        p["intervals"],
        gap * 100.0 / dur,
        p["cpu_s"],
        p["by_state"],
        p["lost_samples"],
        p["lost_switches"]
    );
    // --for counts from the start of the recording; its end is the next
    // poll (20 ms) and the last drain
    assert!((1.95..=4.0).contains(&dur), "the window is --for: {dur} s");
    assert!(
        (on + off - dur).abs() <= 0.05 * dur && (gap - (dur - on - off)).abs() < 1e-6,
        "on CPU {on} s + off CPU {off} s = the {dur} s recorded, within 5%: {p}"
    );
    assert!(on > 0.0 && off > 0.0, "both on and off a CPU: {p}");

    // off a CPU: the sleep's stack, sleeping
    let off_stacks: Vec<&Value> = p["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| !s["on_cpu"].as_bool().unwrap())
        .collect();
    let top_off = off_stacks[0];
    assert!(
        frames(top_off).contains(&"pg_sleep") && top_off["state"] == "[off-CPU: sleeping]",
        "the top off-CPU stack is the sleep: {top_off}"
    );
    let sleeping = ms_of(&p, |s| s["state"] == "[off-CPU: sleeping]");
    let in_sleep = ms_of(&p, |s| {
        s["state"] == "[off-CPU: sleeping]" && frames(s).contains(&"pg_sleep")
    });
    assert!(
        in_sleep >= 0.9 * sleeping && in_sleep >= 0.25 * dur * 1000.0,
        "sleeping is pg_sleep: {in_sleep} ms of {sleeping} ms sleeping, window {dur} s"
    );
    // on a CPU: the count's executor (its aggregate over the function scan)
    let on_ms = ms_of(&p, |s| s["on_cpu"].as_bool().unwrap());
    assert!((on_ms - on * 1000.0).abs() < 1.0, "{on_ms} ms vs {on} s");
    let counting = ms_of(&p, |s| {
        s["on_cpu"].as_bool().unwrap() && frames(s).contains(&"ExecAgg")
    });
    assert!(
        counting >= 0.5 * on_ms,
        "on a CPU mostly in the count's executor (ExecAgg): {counting} ms of {on_ms} ms: {p}"
    );
    // the folded stacks carry the state as their root, in microseconds
    let folded = p["folded"].as_array().unwrap();
    assert!(
        folded
            .iter()
            .any(|f| f[0].as_str().unwrap().starts_with("[on-CPU];"))
    );
    assert!(folded.iter().any(|f| {
        let s = f[0].as_str().unwrap();
        s.starts_with("[off-CPU: sleeping];") && s.contains(";pg_sleep;")
    }));
    let us: u64 = folded.iter().map(|f| f[1].as_u64().unwrap()).sum();
    assert!(
        (us as f64 / 1e6 - (on + off)).abs() < 0.01,
        "the folded stacks weigh the same time: {us} us"
    );
    files_hold_the_folded_stacks(folded, &ss, &pb);

    // at the prompt: the table, the total line and a flame graph
    let svg = std::env::temp_dir().join(format!("pgdbg-wall-{}.svg", std::process::id()));
    let _ = std::fs::remove_file(&svg);
    let out = run(
        pid,
        &[&format!(
            "profile --wall --for 1s --flamegraph {}",
            svg.display()
        )],
    );
    eprintln!("{out}");
    assert!(out.contains("function (wall-clock time)"), "{out}");
    let total = out
        .lines()
        .find(|l| l.contains(" elapsed ") && l.contains(" not accounted for "))
        .unwrap_or_else(|| panic!("a total line: {out}"));
    assert!(
        total.contains(" on CPU ") && total.contains(" off CPU ") && total.contains("sleeping"),
        "{total}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("<svg") && text.contains("pg_sleep") && text.contains("[on-CPU]"),
        "flame graph"
    );
    let _ = std::fs::remove_file(&svg);

    // --wall and --off-cpu together: one line, the backend untouched
    let (code, _, err) = pgdbg(&["profile", &pid.to_string(), "--wall", "--off-cpu"]);
    assert_one_line_error(code, &err, "--off-cpu");
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "profile --wall --off-cpu --for 1s",
    ]);
    eprintln!("{code}: {err}");
    assert!(
        code != 0 && err.contains("--wall") && err.contains("exclude each other"),
        "{code}: {err}"
    );
    assert_eq!(
        err.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "{err}"
    );

    assert_eq!(tracer_pid(pid), 0);
    cl.still_active(pid, SHOWS);
    cl.end_by_cancel(a, pid, h);
}

/// The speedscope file (microseconds) and the pprof file
/// (wall/nanoseconds) of the run hold its folded stacks, the state
/// outermost: the same stacks and time, the sleep's stack among them.
fn files_hold_the_folded_stacks(folded: &[Value], ss: &std::path::Path, pb: &std::path::Path) {
    let mut want: Vec<(String, u64)> = folded
        .iter()
        .map(|f| (f[0].as_str().unwrap().to_string(), f[1].as_u64().unwrap()))
        .collect();
    want.sort();
    let us: u64 = want.iter().map(|(_, n)| n).sum();

    let (mut stacks, unit) = profile_files::speedscope_folded(ss);
    assert_eq!(unit, "microseconds");
    stacks.sort();
    assert_eq!(stacks, want, "speedscope's stacks are the folded ones");
    assert_eq!(stacks.iter().map(|(_, n)| n).sum::<u64>(), us);

    let p = profile_files::read_pprof(pb);
    assert_eq!(p.sample_types(), [("wall", "nanoseconds")]);
    // the outermost location of every sample is its state
    for s in &p.sample {
        let name = p.frames(s).pop().unwrap();
        assert!(
            name.starts_with("[on-CPU]") || name.starts_with("[off-CPU: "),
            "the root is the state: {name}"
        );
    }
    let mut stacks: Vec<(String, u64)> = p
        .folded()
        .into_iter()
        .map(|(s, v)| {
            assert_eq!(v[0] % 1000, 0, "{s}: microseconds in nanoseconds");
            (s, v[0] as u64 / 1000)
        })
        .collect();
    stacks.sort();
    assert_eq!(stacks, want, "pprof's stacks are the folded ones");
    assert!(
        stacks
            .iter()
            .any(|(s, _)| { s.starts_with("[off-CPU: sleeping];") && s.contains(";pg_sleep;") })
    );
    let _ = std::fs::remove_file(ss);
    let _ = std::fs::remove_file(pb);
}

#[test]
fn wall_of_sleep_and_count_pg15() {
    wall_of_sleep_and_count(15);
}

#[test]
fn wall_of_sleep_and_count_pg18() {
    wall_of_sleep_and_count(18);
}
