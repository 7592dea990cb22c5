//! `pgdbg report`: runs the built binary on hand-written captures in
//! tests/data/report/ (no PostgreSQL needed).
//!
//! The expected report (capture.txt) was checked cell by cell against
//! numbers worked out by hand from capture.jsonl, not copied blindly from
//! the program's output. Some of them:
//!
//! - s1: 8 plan_choice events, 5 from pid 4711 (custom, custom, custom,
//!   generic, generic: 1 switch) interleaved with 3 from pid 4712
//!   (custom, generic, custom: 2 switches) -> executions 8, custom 5,
//!   generic 3, switches 3 (not 5, which counting across pids in file
//!   order would give); generic_cost 226.435..8307.5, avg_custom_cost
//!   13.71..8400 (15.8025 lies in between); last reason is pid 4711's #5.
//! - LWLock:LockManager waits of 220, 150, 80, 1000, 300 us: sorted
//!   80 150 220 300 1000, n = 5; p50 = index ceil(0.50*5)-1 = 2 -> 0.220
//!   ms; p99 = index ceil(0.99*5)-1 = 4 -> 1.000 ms; total 1.750, avg
//!   0.350.
//! - IO:DataFileRead waits of 2000000, 499600, 120400 ns: total 2.620 ms,
//!   avg 2.62/3 = 0.873; p50 = index ceil(1.5)-1 = 1 -> 0.4996 -> 0.500.
//! - SELECT statement times 1.2, 0.9, 3.1, 0.7 ms: sorted 0.7 0.9 1.2
//!   3.1, p50 = index ceil(2)-1 = 1 -> 0.900 (an interpolating median
//!   would say 1.050), p99 = index ceil(3.96)-1 = 3 -> 3.100, avg 1.475.
//! - Wait samples: ClientRead 200+50 = 250 of 400 = 62.5 %, null/null 60
//!   (info 0: no wait event, "(on CPU)" as `waits sample` says)
//!   and LockManager 40+20 = 60 (15.0 % each, tie broken by label: '('
//!   sorts before 'L'), DataFileRead 30 = 7.5 %.
//! - LWLockAcquire counts: 5000+3000 calls, planning 1200+800, execution
//!   3500+2000, other 300+200, 2 backends.
//! - Folded waits: the 7-frame LockManager stack waited 220+150+1000 =
//!   1370 us, the LockReleaseAll one 80+300 = 380 us, the DataFileRead
//!   one 2000 + round(499.6) + round(120.4) = 2620 us; ClientRead and the
//!   null wait have no stack and are left out.

use std::path::Path;
use std::process::{Command, Output};

const DATA: &str = "tests/data/report";

/// Run `pgdbg ARGS` in the crate's directory (so paths in the header are
/// the relative ones the expected files hold).
fn pgdbg(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgdbg"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run pgdbg")
}

fn data(name: &str) -> String {
    format!("{DATA}/{name}")
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(DATA).join(name))
        .expect("expected file")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 stderr")
}

fn assert_same(got: &str, want: &str) {
    if got != want {
        for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
            if g != w {
                panic!(
                    "first difference at line {}:\n got: {g:?}\nwant: {w:?}\n\nwhole output:\n{got}",
                    i + 1
                );
            }
        }
        panic!(
            "outputs differ in length ({} vs {} lines):\n{got}",
            got.lines().count(),
            want.lines().count()
        );
    }
}

#[test]
fn text_report_matches_expected_file() {
    let o = pgdbg(&["report", &data("capture.jsonl")]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_same(&stdout(&o), &expected("capture.txt"));
    assert!(stderr(&o).is_empty(), "stderr: {}", stderr(&o));
}

#[test]
fn pure_renderer_gives_the_same_text() {
    let name = data("capture.jsonl");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&name)).unwrap();
    let events = pgdbg::report::parse_capture(&name, &text).unwrap();
    assert_eq!(events.len(), 65);
    assert_same(
        &pgdbg::report::text_report(&name, &events),
        &expected("capture.txt"),
    );
}

#[test]
fn folded_wait_stacks_by_default() {
    let o = pgdbg(&["report", &data("capture.jsonl"), "--folded"]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_same(&stdout(&o), &expected("capture.waits.folded"));
    let o = pgdbg(&[
        "report",
        &data("capture.jsonl"),
        "--folded",
        "--stacks",
        "waits",
    ]);
    assert_same(&stdout(&o), &expected("capture.waits.folded"));
}

#[test]
fn folded_trace_stacks_on_request() {
    let o = pgdbg(&[
        "report",
        &data("capture.jsonl"),
        "--folded",
        "--stacks",
        "trace",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_same(&stdout(&o), &expected("capture.trace.folded"));
}

#[test]
fn flamegraph_svg() {
    let dir = std::env::temp_dir().join(format!("pgdbg-report-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("waits.svg");
    let o = pgdbg(&[
        "report",
        &data("capture.jsonl"),
        "--flamegraph",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert!(stdout(&o).is_empty(), "no tables with --flamegraph alone");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "one confirmation line: {err}");
    assert!(err.contains("3 distinct wait stacks"), "{err}");
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(
        svg.starts_with("<?xml") || svg.starts_with("<svg"),
        "not SVG: {}",
        &svg[..svg.len().min(100)]
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("AcquireExecutorLocks"));
    assert!(svg.contains("LWLock:LockManager"));
    assert!(svg.contains("Wait stacks"));

    let out = dir.join("calls.svg");
    let o = pgdbg(&[
        "report",
        &data("capture.jsonl"),
        "--flamegraph",
        out.to_str().unwrap(),
        "--stacks",
        "trace",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("Traced call stacks"));
    assert!(svg.contains("index_beginscan"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// tests/data/report/by_statement.jsonl, worked by hand:
///
/// - waits traced with their statement: `select * from t where a = 1`
///   waited 2 + 4 ms in DataFileRead and 1 ms for a relation lock (7 ms),
///   `update t ...` 3 ms for a lock, a ClientRead of 9 ms had no statement
///   (outside the executor): statements in order of their time, 9, 7, 3;
/// - wait samples by statement (two runs, 200 samples): query id -77 was
///   `select pg_sleep(1.2)` in the first run and `select pg_sleep(3)` in
///   the second, one statement named by its first text: 40 + 100 = 140
///   (70.0 %); query id 42, 45 samples on a CPU (22.5 %); idle 10
///   ClientRead (5.0 %) and 5 on a CPU (2.5 %).
#[test]
fn statements_group_waits_and_samples() {
    let o = pgdbg(&["report", &data("by_statement.jsonl")]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_same(&stdout(&o), &expected("by_statement.txt"));
    let o = pgdbg(&["report", &data("by_statement.jsonl"), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    let w = &v["waits_by_statement"];
    assert_eq!(w.as_array().unwrap().len(), 4, "{w}");
    assert_eq!(w[1]["query"], "select * from t where a = 1");
    assert_eq!(w[1]["count"], 2);
    let s = &v["wait_samples_by_statement"];
    assert_eq!(s[0]["query_id"], -77);
    assert_eq!(s[0]["statement"], "select pg_sleep(1.2)");
    assert_eq!(s[0]["samples"], 140);
    assert_eq!(s[0]["share_pct"], 70.0);
    assert!(s[3]["query_id"].is_null(), "{s}");
}

#[test]
fn json_document() {
    let o = pgdbg(&["report", &data("capture.jsonl"), "--json"]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    for key in [
        "header",
        "plan_choices",
        "waits",
        "statements",
        "wait_samples",
        "probe_counts",
        "traced_args",
    ] {
        assert!(v.get(key).is_some(), "no {key}");
    }
    let h = &v["header"];
    assert_eq!(h["events"], 65);
    assert_eq!(h["backends"], 3);
    assert_eq!(h["exited"], 1);
    let plans = v["plan_choices"].as_array().unwrap();
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[0]["statement"], "s1");
    assert_eq!(plans[0]["executions"], 8);
    assert_eq!(plans[0]["switches"], 3);
    assert_eq!(plans[0]["generic_cost_max"], 8307.5);
    assert_eq!(plans[1]["generic_cost_min"], serde_json::Value::Null);
    let waits = v["waits"].as_array().unwrap();
    assert_eq!(waits.len(), 4);
    let lm = waits
        .iter()
        .find(|w| w["wait_event"] == "LockManager")
        .unwrap();
    assert_eq!(lm["count"], 5);
    assert!((lm["p50_ms"].as_f64().unwrap() - 0.220).abs() < 1e-9);
    assert!((lm["p99_ms"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    assert_eq!(v["statements"].as_array().unwrap().len(), 2);
    assert_eq!(v["wait_samples"][0]["samples"], 250);
    let probes = v["probe_counts"].as_array().unwrap();
    assert_eq!(probes.len(), 7);
    assert_eq!(probes[0]["function"], "LWLockAcquire");
    assert_eq!(probes[0]["calls"], 8000);
    assert_eq!(probes[0]["planning"], 2000);
    assert_eq!(probes[1]["planning"], serde_json::Value::Null);
    let args = v["traced_args"].as_array().unwrap();
    let block = args.iter().find(|a| a["argument"] == "blockNum").unwrap();
    assert_eq!(block["distinct"], 12);
    assert_eq!(block["top"].as_array().unwrap().len(), 10);
    assert_eq!(block["others"], 2);
}

fn assert_one_line_error(o: &Output, needle: &str) {
    assert!(!o.status.success(), "should fail");
    assert!(stdout(o).is_empty(), "stdout: {}", stdout(o));
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
}

#[test]
fn bad_json_line_names_file_and_line() {
    let o = pgdbg(&["report", &data("bad-line.jsonl")]);
    assert_one_line_error(&o, "tests/data/report/bad-line.jsonl:3:");
}

#[test]
fn missing_and_empty_captures() {
    let o = pgdbg(&["report", &data("no-such-capture.jsonl")]);
    assert_one_line_error(&o, "no-such-capture.jsonl");

    let dir = std::env::temp_dir().join(format!("pgdbg-report-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "\n\n").unwrap();
    let o = pgdbg(&["report", empty.to_str().unwrap()]);
    assert_one_line_error(&o, "is empty");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_stacks_is_an_error_saying_where_stacks_come_from() {
    // bad-line.jsonl's first two lines: a wait without a stack.
    let dir = std::env::temp_dir().join(format!("pgdbg-report-nostack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("nostack.jsonl");
    let text = expected("bad-line.jsonl");
    std::fs::write(&cap, text.lines().take(2).collect::<Vec<_>>().join("\n")).unwrap();
    let svg = dir.join("x.svg");
    let o = pgdbg(&[
        "report",
        cap.to_str().unwrap(),
        "--flamegraph",
        svg.to_str().unwrap(),
    ]);
    assert_one_line_error(&o, "waits trace --stacks N");
    assert!(stderr(&o).contains("trace ... --stacks N"));
    assert!(!svg.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn helpers() {
    use pgdbg::report::{fmt_cost, percentile, shorten_query};
    assert_eq!(fmt_cost(226.435), "226.435");
    assert_eq!(fmt_cost(8307.5), "8307.5");
    assert_eq!(fmt_cost(15.8025), "15.8025");
    assert_eq!(fmt_cost(100.0), "100");
    assert_eq!(fmt_cost(0.00004), "0");
    // Nearest rank: index ceil(p/100*n)-1.
    assert_eq!(percentile(&[7], 50), 7);
    assert_eq!(percentile(&[7], 99), 7);
    assert_eq!(percentile(&[1, 2, 3, 4], 50), 2);
    let hundred: Vec<u64> = (1..=100).collect();
    assert_eq!(percentile(&hundred, 99), 99);
    assert_eq!(percentile(&hundred, 50), 50);
    let q = shorten_query("select\n  1,   2");
    assert_eq!(q, "select 1, 2");
    let long = "x".repeat(61);
    let s = shorten_query(&long);
    assert_eq!(s.chars().count(), 60);
    assert!(s.ends_with("..."));
    assert_eq!(shorten_query(&"y".repeat(60)), "y".repeat(60));
}

/// A wait pgdbg could not name (its name calls failed) is said as such: the
/// table types it "unresolved" with its raw wait_event_info, the folded
/// stacks end in "unresolved:0x...", never a bare number posing as a name.
#[test]
fn unresolved_waits_are_said_as_such() {
    let dir = std::env::temp_dir().join(format!("pgdbg-report-unres-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("unresolved.jsonl");
    std::fs::write(
        &cap,
        concat!(
            r#"{"event":"attach","ts":1.0,"pid":7,"postgres":"15.18"}"#,
            "\n",
            r#"{"event":"wait","ts":2.0,"pid":7,"wait_event_type":null,"wait_event":"0x01000042","info":16777282,"unresolved":"cannot read the FP/SSE/AVX state","duration_ns":5000,"stack":["LWLockAcquire+126","LockRelationOid+79"]}"#,
            "\n",
            r#"{"event":"wait","ts":3.0,"pid":7,"wait_event_type":"Client","wait_event":"ClientRead","info":100663296,"duration_ns":7000,"stack":["secure_read+1"]}"#,
            "\n",
        ),
    )
    .unwrap();
    let c = cap.to_str().unwrap();
    let o = pgdbg(&["report", c]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.lines()
            .any(|l| l.starts_with("unresolved") && l.contains("0x01000042")),
        "{out}"
    );
    let o = pgdbg(&["report", c, "--folded"]);
    let out = stdout(&o);
    assert!(
        out.contains("LockRelationOid;LWLockAcquire;unresolved:0x01000042 5"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn temp_dir(key: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pgdbg-report-{key}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The report of `cap` must be capture.txt's, but for the header's file
/// name (capture.jsonl's 65 events plus an ignored last line).
fn assert_tables_of_capture_jsonl(o: &Output) {
    assert!(o.status.success(), "stderr: {}", stderr(o));
    let out = stdout(o);
    let want = expected("capture.txt");
    let (head, rest) = out.split_once('\n').unwrap();
    let (want_head, want_rest) = want.split_once('\n').unwrap();
    assert!(
        head.ends_with(want_head.split_once(": ").unwrap().1),
        "{head}"
    );
    assert_same(rest, want_rest);
}

/// A writer killed mid-line (or a full disk) leaves a last line without
/// its newline: the rest is reported, with one line saying so.
#[test]
fn truncated_last_line_is_ignored_with_a_note() {
    let dir = temp_dir("truncated");
    let good = expected("capture.jsonl");
    assert!(good.ends_with('\n'));
    let cases: &[(&str, &[u8])] = &[
        (
            "json",
            b"{\"event\":\"wait\",\"ts\":1700000001.0,\"pid\":4711,\"wait_",
        ),
        // cut inside a two-byte character
        (
            "utf8",
            b"{\"event\":\"statement\",\"ts\":1.0,\"pid\":1,\"query\":\"caf\xc3",
        ),
        ("number", b"{\"event\":\"wait\",\"ts\":1700000001."),
    ];
    for (key, tail) in cases {
        let cap = dir.join(format!("{key}.jsonl"));
        let mut bytes = good.as_bytes().to_vec();
        bytes.extend_from_slice(tail);
        std::fs::write(&cap, &bytes).unwrap();
        let o = pgdbg(&["report", cap.to_str().unwrap()]);
        assert_tables_of_capture_jsonl(&o);
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{key}: one line: {err}");
        assert!(
            err.contains(&format!(
                "{}: the last line (line 66) is incomplete (a writer was killed?): ignored",
                cap.display()
            )),
            "{key}: {err}"
        );
        // the same for the folded stacks and the JSON document
        let o = pgdbg(&["report", cap.to_str().unwrap(), "--folded"]);
        assert!(o.status.success(), "{key}: {}", stderr(&o));
        assert_same(&stdout(&o), &expected("capture.waits.folded"));
        let o = pgdbg(&["report", cap.to_str().unwrap(), "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
        assert_eq!(v["header"]["events"], 65);
    }
    // the same cut line followed by more lines is an error, naming it
    let cap = dir.join("middle.jsonl");
    std::fs::write(
        &cap,
        format!(
            "{good}{{\"event\":\"wait\",\"ts\":1700000001.0,\n{}",
            good.lines().next().unwrap()
        ),
    )
    .unwrap();
    let o = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_one_line_error(&o, &format!("{}:66: not a valid JSON line", cap.display()));
    // a complete last line without its newline is used
    let cap = dir.join("no-newline.jsonl");
    std::fs::write(&cap, good.trim_end_matches('\n')).unwrap();
    let o = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_tables_of_capture_jsonl(&o);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run `pgdbg ARGS` to its end; (stdout, stderr, exit code, max RSS in
/// KiB) from wait4's rusage of this one child.
#[allow(clippy::zombie_processes)] // reaped by wait4, not Child::wait
fn pgdbg_rss(args: &[&str]) -> (String, String, i32, i64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgdbg"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run pgdbg");
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut so, &mut s).unwrap();
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).unwrap();
        s
    });
    let mut status = 0;
    // SAFETY: plain wait4 on our own child, which std has not reaped.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(r, child.id() as i32, "wait4");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (
        t_out.join().unwrap(),
        t_err.join().unwrap(),
        code,
        ru.ru_maxrss,
    )
}

/// `report` streams: a 200 MB capture (900 000 wait events with
/// stacks) is reported in a few MB. The version that read the whole file
/// and kept every event's JSON used 1383 MB for a 215 MB capture.
#[test]
fn large_capture_in_bounded_memory() {
    use std::io::Write;
    let dir = temp_dir("large");
    let cap = dir.join("large.jsonl");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&cap).unwrap());
    let waits = [
        ("LWLock", "LockManager", "LWLockAcquire+126"),
        ("IO", "DataFileRead", "pg_pread+20"),
        ("Client", "ClientRead", "WaitEventSetWait+100"),
    ];
    let n: u64 = 900_000;
    let mut total_us = [0u64; 3];
    let mut size = 0;
    for i in 0..n {
        let k = (i % 3) as usize;
        let (t, e, top) = waits[k];
        let us = 1 + (i * 7919) % 1000;
        total_us[k] += us;
        let line = format!(
            "{{\"event\":\"wait\",\"ts\":{}.{:06},\"pid\":{},\"wait_event_type\":\"{t}\",\"wait_event\":\"{e}\",\"duration_ns\":{},\"stack\":[\"{top}\",\"LockAcquireExtended+298\",\"LockRelationOid+79\",\"AcquireExecutorLocks+101\"]}}\n",
            1_700_000_000 + i / 1_000_000,
            i % 1_000_000,
            4711 + i % 4,
            us * 1000
        );
        size += line.len();
        w.write_all(line.as_bytes()).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    assert!(size > 200_000_000, "{size} bytes");
    let path = cap.to_str().unwrap();
    let limit_kib = 64 * 1024;

    let (out, err, code, rss) = pgdbg_rss(&["report", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("Capture {path}: {n} events from 4 backends")),
        "{out}"
    );
    // every event counted: n/3 per wait event, totals in ms
    for (k, (t, e, _)) in waits.iter().enumerate() {
        let row = out
            .lines()
            .find(|l| l.starts_with(t) && l.contains(e))
            .unwrap_or_else(|| panic!("no {t} {e} row:\n{out}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[2], (n / 3).to_string(), "{row}");
        assert_eq!(
            cells[3],
            format!("{:.3}", total_us[k] as f64 / 1000.0),
            "{row}"
        );
    }
    assert!(rss < limit_kib, "report used {rss} KiB for {size} bytes");

    let (out, err, code, rss) = pgdbg_rss(&["report", path, "--folded"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(rss < limit_kib, "report --folded used {rss} KiB");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The capture format: `attach` without one (an older pgdbg) is format 1,
/// format 1 is read, a newer one is refused with one line naming it.
#[test]
fn capture_format_is_checked() {
    let dir = temp_dir("format");
    let good = expected("capture.jsonl");
    let cap = dir.join("f1.jsonl");
    let with_format = good.replacen(
        r#""build_id":"abc123"}"#,
        r#""build_id":"abc123","format":1}"#,
        1,
    );
    assert_ne!(with_format, good);
    std::fs::write(&cap, &with_format).unwrap();
    let o = pgdbg(&["report", cap.to_str().unwrap()]);
    assert_tables_of_capture_jsonl(&o);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let cap = dir.join("f2.jsonl");
    std::fs::write(
        &cap,
        good.replacen(
            r#""build_id":"abc123"}"#,
            r#""build_id":"abc123","format":2}"#,
            1,
        ),
    )
    .unwrap();
    for extra in [&[][..], &["--folded"][..], &["--json"][..]] {
        let mut args = vec!["report", cap.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = pgdbg(&args);
        assert_one_line_error(
            &o,
            "f2.jsonl:1: the capture is in format 2, written by a newer pgdbg",
        );
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A known event whose fields have other types than pgdbg writes (a
/// hand-edited line) is counted in the header, left out of the tables,
/// and said on stderr in one line.
#[test]
fn unreadable_fields_are_counted_and_said() {
    let dir = temp_dir("unreadable");
    let cap = dir.join("u.jsonl");
    std::fs::write(
        &cap,
        concat!(
            r#"{"event":"statement","ts":1.0,"pid":7,"duration_ns":1000000,"query":"select 1"}"#,
            "\n",
            r#"{"event":"statement","ts":2.0,"pid":7,"duration_ns":2000000,"query":["not","text"]}"#,
            "\n",
        ),
    )
    .unwrap();
    let o = pgdbg(&["report", cap.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with(&format!("Capture {}: 2 events", cap.display())),
        "{out}"
    );
    let row = out.lines().find(|l| l.starts_with("select 1")).expect(&out);
    assert_eq!(row.split_whitespace().nth(2), Some("1"), "{row}");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("1 event with fields of other types than pgdbg writes (first at line 2)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
