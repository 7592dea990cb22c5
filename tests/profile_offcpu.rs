//! `profile --off-cpu` on real PostgreSQL 15: a backend sleeping in
//! `pg_sleep` (checked running before and after the recording) is off a
//! CPU nearly all the window, in `WaitLatch`'s stacks, sleeping (S); a
//! CPU-bound backend is off a CPU far less than on one.  Neither is
//! traced or stopped.  The speedscope and pprof files written at the
//! prompt hold the same stacks, weighing the time off a CPU.

use common::ex::run;
use common::running::*;
use common::*;
use pgdbg_testbed as common;
use pgdbg_testbed::profile_files;
use std::time::Duration;

/// `pgdbg profile PID --off-cpu --for 3s --format json`, watching that the
/// backend is never traced nor stopped meanwhile.
fn off_cpu_profile(pid: i32) -> serde_json::Value {
    // a long document (every distinct stack): to a file, not a pipe
    let args = [
        "profile",
        &pid.to_string(),
        "--off-cpu",
        "--for",
        "3s",
        "--format",
        "json",
        "-q",
    ];
    let out = output_never_stopped(&args, pid, Duration::from_secs(2), "offcpu");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    eprintln!(
        "off CPU {} s of {} s in {} intervals, on CPU {} s, by reason {}, top stack {}",
        v["off_cpu_s"], v["duration_s"], v["intervals"], v["cpu_s"], v["by_reason"], v["stacks"][0]
    );
    v
}

/// The speedscope file (microseconds) and the pprof file
/// (off-cpu/nanoseconds) hold the same stacks, the sleep's among them,
/// and weigh the time off a CPU of the total line (`off CPU X s`).
fn files_weigh_the_time_off_cpu(total: &str, ss: &std::path::Path, pb: &std::path::Path) {
    let off: f64 = total
        .split(" off CPU ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("the time off a CPU: {total}"));
    let (mut stacks, unit) = profile_files::speedscope_folded(ss);
    assert_eq!(unit, "microseconds");
    stacks.sort();
    let us: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert!(
        (us as f64 / 1e6 - off).abs() < 0.002 + stacks.len() as f64 * 1e-6,
        "{us} us in the stacks, {off} s off a CPU: {total}"
    );
    assert!(
        stacks.iter().any(|(s, _)| s.contains(";WaitLatch;")),
        "{stacks:?}"
    );
    assert!(
        stacks
            .iter()
            .any(|(s, _)| s.ends_with(";[kernel];[wait: Timeout:PgSleep]")),
        "the wait event is the innermost frame: {stacks:?}"
    );
    let p = profile_files::read_pprof(pb);
    assert_eq!(p.sample_types(), [("off-cpu", "nanoseconds")]);
    let mut from_pprof: Vec<(String, u64)> = p
        .folded()
        .into_iter()
        .map(|(s, v)| (s, v[0] as u64 / 1000))
        .collect();
    from_pprof.sort();
    assert_eq!(from_pprof, stacks, "the same stacks in both files");
    let _ = std::fs::remove_file(ss);
    let _ = std::fs::remove_file(pb);
}

#[test]
fn off_cpu_of_pg_sleep_and_of_a_cpu_bound_query() {
    let cl = Cluster::start(15);

    // 200 sleeps of 50 ms: 10 s, longer than the 3 s and 1 s recorded
    let sleep = "select pg_sleep(0.05) from generate_series(1,200)";
    let (mut a, pid, h) = cl.running(sleep, "pg_sleep(0.05)");
    let p = off_cpu_profile(pid);
    cl.still_active(pid, "pg_sleep(0.05)");
    let off = p["off_cpu_s"].as_f64().unwrap();
    let dur = p["duration_s"].as_f64().unwrap();
    assert!(
        (1.5..=3.1).contains(&off) && off <= dur,
        "off CPU {off} s of {dur} s: {p}"
    );
    let n = p["intervals"].as_u64().unwrap();
    assert!(n >= 30, "a switch per sleep at least: {n} intervals");
    let top = &p["stacks"][0];
    let frames: Vec<&str> = top["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        frames
            .iter()
            .any(|f| ["pg_usleep", "WaitLatch", "epoll_wait"].contains(f)),
        "the top off-CPU stack sleeps: {top}"
    );
    assert!(frames.contains(&"PostgresMain"), "whole stack: {top}");
    assert!(
        top["reason"].as_str().unwrap().starts_with('S'),
        "sleeping: {top}"
    );
    // the wait event set at each switch-out: pg_sleep's, read for nearly
    // every interval (one not read is one sleep of 50 ms the reader did not
    // get to before it ended)
    assert_eq!(top["wait_event"], "Timeout:PgSleep", "{top}");
    let by_wait = |label: &str| -> f64 {
        p["by_wait_event"]
            .as_array()
            .unwrap_or_else(|| panic!("by_wait_event: {p}"))
            .iter()
            .filter(|r| r[0] == label)
            .map(|r| r[1].as_f64().unwrap())
            .sum()
    };
    let slept = by_wait("Timeout:PgSleep");
    assert!(
        slept >= 0.9 * off,
        "Timeout:PgSleep {slept} s of {off} s off a CPU: {p}"
    );
    // at the prompt, the table and the total line, a flame graph and the
    // speedscope and pprof files
    let tmp =
        |ext: &str| std::env::temp_dir().join(format!("pgdbg-offcpu-{}.{ext}", std::process::id()));
    let (svg, ss, pb) = (tmp("svg"), tmp("speedscope.json"), tmp("pb.gz"));
    let _ = std::fs::remove_file(&svg);
    let out = run(
        pid,
        &[&format!(
            "profile --off-cpu --for 1s --flamegraph {} --speedscope {} --pprof {}",
            svg.display(),
            ss.display(),
            pb.display()
        )],
    );
    eprintln!("{out}");
    assert!(out.contains("function (off-CPU time)"), "{out}");
    assert!(out.contains("WaitLatch"), "{out}");
    let total = out
        .lines()
        .find(|l| l.contains(" off CPU ") && l.contains(" intervals"))
        .unwrap_or_else(|| panic!("a total line: {out}"));
    assert!(total.contains("S sleeping"), "{total}");
    assert!(
        out.lines()
            .any(|l| l.trim_end().ends_with("  Timeout:PgSleep")),
        "the time by wait event: {out}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("<svg") && text.contains("WaitLatch"),
        "flame graph"
    );
    let _ = std::fs::remove_file(&svg);
    files_weigh_the_time_off_cpu(total, &ss, &pb);
    assert_eq!(tracer_pid(pid), 0);
    cl.still_active(pid, "pg_sleep(0.05)");
    let r = a.rejoin(h);
    assert!(r.is_ok(), "the sleeps end by themselves: {r:?}");

    // CPU-bound (a PL/pgSQL loop, cancelled at the end): it never sleeps,
    // it is off a CPU only when preempted, and the time on and off a CPU
    // adds up to the time recorded (however loaded the machine is)
    let (b, pid, h) = cl.running(LOOP, LOOP_SHOWS);
    let p = off_cpu_profile(pid);
    cl.still_active(pid, LOOP_SHOWS);
    let off = p["off_cpu_s"].as_f64().unwrap();
    let cpu = p["cpu_s"].as_f64().expect("CPU time known");
    let dur = p["duration_s"].as_f64().unwrap();
    assert!(cpu > 0.3, "the loop ran on a CPU: {p}");
    assert!(
        (off + cpu - dur).abs() < 0.15 * dur,
        "on CPU {cpu} s + off CPU {off} s = the {dur} s recorded: {p}"
    );
    let sleeping: f64 = p["by_reason"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r[0].as_str().unwrap().starts_with('S'))
        .map(|r| r[1].as_f64().unwrap())
        .sum();
    assert!(
        sleeping < 0.1 * dur && sleeping < cpu,
        "the loop does not sleep: {sleeping} s sleeping, {cpu} s on a CPU: {p}"
    );
    cl.end_by_cancel(b, pid, h);
}
