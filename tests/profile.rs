//! `profile` on real PostgreSQL 15 and 18: a backend running a CPU-bound
//! PL/pgSQL loop (checked running in pg_stat_activity) is sampled by perf
//! events without being stopped or traced; its top functions are the
//! expression evaluator's and PL/pgSQL's, its stacks reach PostgresMain,
//! and the sample count is the rate times the CPU time it used.  Also: the
//! same at the prompt with a flame graph, pgdbg killed mid-profile, bad
//! input.  The speedscope and pprof files read back (serde_json, prost)
//! give the same stacks and samples as the folded output of the same run.

use common::ex::run;
use common::running::*;
use common::*;
use pgdbg_testbed as common;
use pgdbg_testbed::profile_files;
use std::time::Duration;

fn top_row<'a>(p: &'a serde_json::Value, f: &str) -> Option<&'a serde_json::Value> {
    p["top"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["function"] == f)
}

fn profile_of_plpgsql_loop(major: u32) {
    let cl = Cluster::start(major);
    let (a, pid, h) = cl.running(LOOP, LOOP_SHOWS);
    let hz = 199u64;
    // never traced, never stopped while sampled
    let out = output_never_stopped(
        &[
            "profile",
            &pid.to_string(),
            "--for",
            "4s",
            "--hz",
            &hz.to_string(),
            "--format",
            "json",
            "-q",
        ],
        pid,
        Duration::from_secs(3),
        "profile",
    );
    let prof: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let samples = prof["samples"].as_u64().unwrap();
    let cpu = prof["cpu_s"]
        .as_f64()
        .expect("the backend's CPU time is known");
    assert!(cpu > 0.2, "the loop ran on a CPU: {cpu}s");
    let expected = cpu * hz as f64;
    assert!(
        (samples as f64) > 0.8 * expected && (samples as f64) < 1.2 * expected,
        "{samples} samples, expected about {expected:.0} ({hz} Hz x {cpu:.2}s on a CPU)"
    );
    // the executor's expression evaluator and PL/pgSQL's statement loop
    let interp = top_row(&prof, "ExecInterpExpr").expect("ExecInterpExpr sampled");
    assert!(
        interp["self_samples"].as_u64().unwrap() * 20 > samples,
        "{interp}"
    );
    for f in ["exec_stmts", "plpgsql_exec_function", "PostgresMain"] {
        let r = top_row(&prof, f).unwrap_or_else(|| panic!("{f} not in the profile: {out}"));
        assert!(
            r["total_samples"].as_u64().unwrap() * 10 >= samples * 9,
            "{f} is on (nearly) every stack: {r}"
        );
    }
    // whole stacks: most reach PostgresMain (a few may be cut in a prologue)
    let folded = prof["folded"].as_array().unwrap();
    let total: u64 = folded.iter().map(|l| l[1].as_u64().unwrap()).sum();
    assert_eq!(total, samples);
    let deep: u64 = folded
        .iter()
        .filter(|l| {
            l[0].as_str()
                .unwrap()
                .contains("PostgresMain;exec_simple_query")
        })
        .map(|l| l[1].as_u64().unwrap())
        .sum();
    assert!(
        deep * 10 >= samples * 9,
        "{deep} of {samples} stacks reach PostgresMain"
    );
    cl.end_by_cancel(a, pid, h);
}

#[test]
fn profile_of_plpgsql_loop_all_majors() {
    for m in majors() {
        profile_of_plpgsql_loop(m);
    }
}

/// `profile` at the prompt (the session lets the backend run while it
/// samples) with a flame graph, then a table.
#[test]
fn profile_at_the_prompt_with_flamegraph() {
    let cl = Cluster::start(15);
    let (a, pid, h) = cl.running(LOOP, LOOP_SHOWS);
    let svg = std::env::temp_dir().join(format!("pgdbg-profile-{}.svg", std::process::id()));
    let _ = std::fs::remove_file(&svg);
    let out = run(
        pid,
        &[&format!(
            "profile --for 2s --hz 499 --flamegraph {}",
            svg.display()
        )],
    );
    assert!(out.contains("self%"), "{out}");
    assert!(out.contains("ExecInterpExpr"), "{out}");
    assert!(out.contains("wrote"), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("<svg") && text.contains("exec_stmts"),
        "flame graph of the stacks"
    );
    let _ = std::fs::remove_file(&svg);
    assert_eq!(tracer_pid(pid), 0);
    // the command line records as the prompt does, and says so alike
    let (code, _, err) = pgdbg(&["profile", &pid.to_string(), "--for", "2s", "--hz", "499"]);
    assert_eq!(code, 0, "{err}");
    let said = |text: &str| -> String {
        text.lines()
            .find(|l| l.starts_with("profile: sampling backend "))
            .unwrap_or_else(|| panic!("no starting line in {text}"))
            .to_string()
    };
    assert_eq!(said(&err), said(&out));
    cl.end_by_cancel(a, pid, h);
}

/// SIGKILL of pgdbg while it samples: the kernel drops the event; the
/// backend runs on, untouched, and its statement ends normally by cancel.
#[test]
fn profile_killed_leaves_backend_running() {
    let cl = Cluster::start(15);
    let (a, pid, h) = cl.running(LOOP, LOOP_SHOWS);
    for _ in 0..5 {
        let mut p = Pgdbg::spawn(&["profile", &pid.to_string(), "--hz", "999", "-q"]);
        // sampling has started when pgdbg holds a perf event fd
        let ppid = p.pid();
        wait_until(
            "pgdbg to open its perf event",
            Duration::from_secs(30),
            || {
                std::fs::read_dir(format!("/proc/{ppid}/fd"))
                    .map(|d| {
                        d.flatten().any(|e| {
                            std::fs::read_link(e.path())
                                .is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
                        })
                    })
                    .unwrap_or(false)
            },
        );
        std::thread::sleep(Duration::from_millis(300));
        p.child.kill().unwrap();
        p.child.wait().unwrap();
        assert!(!proc_state(pid).starts_with('t'));
    }
    let mut obs = cl.connect();
    assert_eq!(
        obs.simple_text(&format!(
            "select state from pg_stat_activity where pid = {pid}"
        )),
        "active"
    );
    cl.end_by_cancel(a, pid, h);
}

/// The folded stacks of a JSON profile.
fn folded_of(prof: &serde_json::Value) -> Vec<(String, u64)> {
    prof["folded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l[0].as_str().unwrap().to_string(), l[1].as_u64().unwrap()))
        .collect()
}

/// `pgdbg profile PID --speedscope F --pprof F --format json`, then the
/// same at the prompt with folded output: both files hold the run's folded
/// stacks, weighed in samples (pprof: also their CPU time at 1/HZ s each).
#[test]
fn profile_writes_speedscope_and_pprof() {
    let cl = Cluster::start(15);
    let (a, pid, h) = cl.running(LOOP, LOOP_SHOWS);
    let dir = std::env::temp_dir();
    let me = std::process::id();
    let ss = dir.join(format!("pgdbg-profile-{me}.speedscope.json"));
    let pb = dir.join(format!("pgdbg-profile-{me}.pb.gz"));
    let hz = 199u64;
    let (code, out, err) = pgdbg(&[
        "profile",
        &pid.to_string(),
        "--for",
        "2s",
        "--hz",
        &hz.to_string(),
        "--format",
        "json",
        "--speedscope",
        ss.to_str().unwrap(),
        "--pprof",
        pb.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let prof: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let samples = prof["samples"].as_u64().unwrap();
    assert!(samples > 20, "the loop was sampled: {samples}");
    let folded = folded_of(&prof);

    // speedscope: the same stacks, weights in samples (no unit of time)
    let (mut stacks, unit) = profile_files::speedscope_folded(&ss);
    assert_eq!(unit, "none");
    stacks.sort();
    assert_eq!(stacks, folded, "speedscope's stacks are the folded ones");
    assert_eq!(stacks.iter().map(|(_, n)| n).sum::<u64>(), samples);
    assert!(
        stacks.iter().any(|(s, _)| s.ends_with(";ExecInterpExpr")
            && s.contains("PostgresMain;exec_simple_query")
            && s.contains(";exec_stmts;")),
        "the loop's stacks: {stacks:?}"
    );

    // pprof: samples/count and cpu/nanoseconds, the root outermost
    let p = profile_files::read_pprof(&pb);
    let st = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(
        p.sample_types(),
        [("samples", "count"), ("cpu", "nanoseconds")]
    );
    let period = 1_000_000_000 / hz as i64;
    assert_eq!(p.period, period);
    let mut stacks: Vec<(String, u64)> = p
        .folded()
        .into_iter()
        .map(|(s, v)| {
            assert_eq!(v[1], v[0] * period, "{s}: the samples' CPU time");
            (s, v[0] as u64)
        })
        .collect();
    stacks.sort();
    assert_eq!(stacks, folded, "pprof's stacks are the folded ones");
    assert!(
        p.function.iter().any(|f| st(f.name) == "ExecInterpExpr"),
        "functions by name"
    );
    assert!(p.duration_nanos >= 1_900_000_000, "{}", p.duration_nanos);

    // at the prompt, with folded output: the files are the printed stacks
    let _ = std::fs::remove_file(&ss);
    let _ = std::fs::remove_file(&pb);
    let out = run(
        pid,
        &[&format!(
            "profile --for 1s --format folded --pprof {} --speedscope {}",
            pb.display(),
            ss.display()
        )],
    );
    let mut printed: Vec<(String, u64)> = out
        .lines()
        .filter(|l| !l.starts_with("profile: "))
        .filter_map(|l| {
            let (s, n) = l.rsplit_once(' ')?;
            Some((s.to_string(), n.parse().ok()?))
        })
        .collect();
    printed.sort();
    assert!(!printed.is_empty(), "{out}");
    for f in [&ss, &pb] {
        assert!(
            out.contains(&format!("profile: wrote {}: ", f.display())),
            "{out}"
        );
    }
    let (mut stacks, _) = profile_files::speedscope_folded(&ss);
    stacks.sort();
    assert_eq!(stacks, printed);
    let mut stacks: Vec<(String, u64)> = profile_files::read_pprof(&pb)
        .folded()
        .into_iter()
        .map(|(s, v)| (s, v[0] as u64))
        .collect();
    stacks.sort();
    assert_eq!(stacks, printed);
    let _ = std::fs::remove_file(&ss);
    let _ = std::fs::remove_file(&pb);

    // one file for two outputs: refused before anything is recorded
    let (code, _, err) = pgdbg(&[
        "profile",
        &pid.to_string(),
        "--speedscope",
        "same.out",
        "--pprof",
        "same.out",
    ]);
    assert_one_line_error(code, &err, "--speedscope and --pprof both write same.out");
    assert!(!std::path::Path::new("same.out").exists());
    assert_eq!(tracer_pid(pid), 0);
    cl.end_by_cancel(a, pid, h);
}

#[test]
fn profile_bad_input_is_one_line() {
    let (code, _, err) = pgdbg(&["profile", "999999999", "--for", "1s"]);
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("999999999"), "{err}");
    let (code, _, err) = pgdbg(&["profile", "1", "--hz", "0"]);
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--hz"), "{err}");
}
