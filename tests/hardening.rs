//! Hardening against what a person types or a script supplies: monster
//! expressions (bounded recursion everywhere), script errors at the line
//! that has them, trailing `#` comments, casts to unknown types, non-ASCII
//! names, `printf "\n"`, `pgdbg symbols` without a subcommand.

use common::*;
use pgdbg_testbed as common;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOO_DEEP: &str = "expression nested too deeply (more than 256 levels)";

/// The expressions of row 1 of the hardening issue, and their kin.
fn monsters() -> Vec<(&'static str, String)> {
    let n = 20_000;
    vec![
        (
            "15000 parentheses",
            format!("{}1{}", "(".repeat(15_000), ")".repeat(15_000)),
        ),
        ("20000 '-'", format!("{}1", "-".repeat(n))),
        ("20000 '*'", format!("{}MyProcPid", "*".repeat(n))),
        ("20000 '&'", format!("{}MyProcPid", "& ".repeat(n))),
        ("20000 casts", format!("{}MyProcPid", "(long)".repeat(n))),
        // (8000: one argument of --ex is at most 128 KiB)
        (
            "8000 '->'",
            format!("MyProc{}", "->links.next".repeat(8000)),
        ),
        ("20000 '+'", format!("1{}", "+1".repeat(n))),
    ]
}

/// pgdbg's prompt on pipes: lines written to its standard input, its
/// standard output collected by a thread.
struct Piped {
    child: std::process::Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
}

impl Piped {
    fn attach(pid: i32) -> Piped {
        let mut child = Command::new(pgdbg_bin())
            .args(["attach", &pid.to_string()])
            .env(
                "PGDBG_HISTORY",
                std::env::temp_dir().join(format!("pgdbg-hist-hardening-{}", std::process::id())),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pgdbg");
        let collect = |mut r: Box<dyn Read + Send>| {
            let acc = Arc::new(Mutex::new(String::new()));
            let a = acc.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = r.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    a.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
            acc
        };
        let out = collect(Box::new(child.stdout.take().unwrap()));
        let err = collect(Box::new(child.stderr.take().unwrap()));
        Piped { child, out, err }
    }
    fn line(&mut self, l: &str) {
        let i = self.child.stdin.as_mut().unwrap();
        i.write_all(l.as_bytes()).unwrap();
        i.write_all(b"\n").unwrap();
        i.flush().unwrap();
    }
    fn out(&self) -> String {
        self.out.lock().unwrap().clone()
    }
    fn wait_out(&mut self, needle: &str, limit: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let o = self.out();
            if o.contains(needle) {
                return o;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "pgdbg exited ({st}) before printing '{needle}'\nstdout:\n{}\nstderr:\n{}",
                    tail(&self.out()),
                    tail(&self.err.lock().unwrap())
                );
            }
            assert!(
                t0.elapsed() < limit,
                "'{needle}' never printed:\n{}",
                tail(&o)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    fn wait(mut self, limit: Duration) -> i32 {
        drop(self.child.stdin.take());
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code().unwrap_or(-1);
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                panic!("pgdbg did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The end of a long output (the monster lines are echoed nowhere, but be
/// safe).
fn tail(s: &str) -> String {
    let cs: Vec<char> = s.chars().collect();
    cs[cs.len().saturating_sub(3000)..].iter().collect()
}

const LOOP: &str = "do $$ begin for i in 1..20000 loop perform pg_backend_pid(); end loop; end $$";

/// Row 1: at the prompt, stopped at a breakpoint the backend's loop hits,
/// each monster expression (and a printf and a condition made of one) is
/// answered with one line; pgdbg goes on, the loop finishes once the
/// breakpoint is deleted, and the server log shows no crash.  Before the
/// fix pgdbg overflowed its stack and died with the int3 in place: the
/// backend died of SIGTRAP and the cluster restarted.
fn monster_at_the_prompt(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut a = cl.connect();
    let pid = a.pid();
    let mut p = Piped::attach(pid);
    p.line("break pg_backend_pid");
    p.wait_out("Breakpoint 1 at pg_backend_pid", Duration::from_secs(60));
    p.line("continue");
    let h = a.spawn_text(LOOP);
    p.wait_out("Breakpoint 1, ", Duration::from_secs(60));
    let mut answered = 0;
    for (what, m) in monsters() {
        for cmd in [
            format!("print {m}"),
            format!("printf \"%d\\n\", {m}"),
            format!("condition 1 {m}"),
        ] {
            answered += 1;
            p.line(&cmd);
            // a marker after each: pgdbg is still there and answers
            p.line(&format!("print {answered} + 1000000"));
            let o = p.wait_out(
                &format!("= {}", answered + 1_000_000),
                Duration::from_secs(60),
            );
            assert_eq!(
                o.matches(TOO_DEEP).count(),
                answered,
                "{what}: {}",
                tail(&o)
            );
        }
    }
    assert_ne!(tracer_pid(pid), 0, "pgdbg still holds the backend");
    // the session goes on: the stop is still there
    p.line("bt 1");
    p.wait_out("#0  ", Duration::from_secs(30));
    p.line("detach");
    let code = p.wait(Duration::from_secs(30));
    assert_eq!(code, 0);
    let r = a.rejoin(h);
    assert!(r.is_ok(), "the loop failed: {r:?}");
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(pid, &bin, "pg_backend_pid", 32));
    assert_eq!(a.pid(), pid);
    a.exec(LOOP);
    cl.assert_no_crash();
}

#[test]
fn monster_expression_at_the_prompt_15() {
    monster_at_the_prompt(15);
}

#[test]
fn monster_expression_at_the_prompt_18() {
    monster_at_the_prompt(18);
}

/// Row 1 through `--ex` and `--script` (in a condition, a print, a
/// `commands` block's printf): one line naming the line, checked before
/// the backend is touched.
fn monster_in_scripts(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    for (what, m) in monsters() {
        let (code, out, err) = pgdbg(&[
            "attach",
            "-q",
            &pid.to_string(),
            "--ex",
            "break pg_backend_pid",
            "--ex",
            &format!("print {m}"),
        ]);
        assert_one_line_error(code, &err, &format!("--ex:2: {TOO_DEEP}"));
        assert!(out.is_empty(), "{what}: {}", tail(&out));
        let (code, _, err) = pgdbg(&[
            "attach",
            "-q",
            &pid.to_string(),
            "--ex",
            &format!("break pg_backend_pid if {m}"),
        ]);
        assert_one_line_error(code, &err, TOO_DEEP);
        let script = write_script(
            &format!("monster-{major}"),
            &[
                "break pg_backend_pid",
                "commands",
                "  silent",
                &format!("  printf \"%d\\n\", {m}"),
                "  continue",
                "end",
                "continue",
            ],
        );
        let (code, _, err) = pgdbg(&[
            "attach",
            "-q",
            &pid.to_string(),
            "--script",
            script.to_str().unwrap(),
        ]);
        assert_one_line_error(code, &err, ":4: printf argument");
        assert!(err.contains(TOO_DEEP), "{what}: {err}");
        assert_eq!(tracer_pid(pid), 0);
    }
    assert_eq!(a.pid(), pid);
    a.exec(LOOP);
    cl.assert_no_crash();
}

#[test]
fn monster_expression_in_scripts_15() {
    monster_in_scripts(15);
}

#[test]
fn monster_expression_in_scripts_18() {
    monster_in_scripts(18);
}

/// Row 8: an error inside a `commands` block names its own line (not the
/// block's); a trailing `# comment` is a comment.  And the smaller ones: a
/// cast to an unknown type says so, a non-ASCII name is echoed as typed,
/// `printf "\n"` prints an empty line.
#[test]
fn script_lines_comments_casts_and_printf_newline() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "break choose_custom_plan",
                "commands",
                "  silent",
                "  print plansource->no_such_field",
                "  continue",
                "end",
            ],
            ":4: there is no member named 'no_such_field' in CachedPlanSource",
        ),
        (
            &[
                "break choose_custom_plan # where the choice is made",
                "commands  # at each hit",
                "  silent",
                "  printf \"%d # %s\\n\", plansource->num_custom_plans  # one argument short",
                "  continue",
                "end",
            ],
            ":4: printf: the format has 2 conversions but 1 argument is given",
        ),
        (
            &["print 1 # fine", "print (NoSuchType)1"],
            ":2: no type named 'NoSuchType' in the debug info",
        ),
        (
            &["print (CachedPlanSorce *)0"],
            ":1: no type named 'CachedPlanSorce' in the debug info (did you mean CachedPlanSource?)",
        ),
        (
            &["print MyProcPid § 2"],
            ":1: unexpected character '§' in expression",
        ),
    ];
    for (i, (lines, needle)) in cases.iter().enumerate() {
        let script = write_script(&format!("lines{i}"), lines);
        let (code, out, err) = pgdbg(&[
            "attach",
            "-q",
            &pid.to_string(),
            "--script",
            script.to_str().unwrap(),
        ]);
        assert_one_line_error(code, &err, needle);
        assert!(out.is_empty(), "{out}");
        assert_eq!(tracer_pid(pid), 0);
    }

    // A script with trailing comments runs; printf "\n" is an empty line.
    let script = write_script(
        "comments-run",
        &[
            "print 40 + 2   # the answer",
            "printf \"\\n\"  # an empty line",
            "printf \"%d # not a comment\\n\", MyProcPid # a comment",
            "print größe # a name with non-ASCII letters",
        ],
    );
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--script",
        script.to_str().unwrap(),
    ]);
    assert_eq!(
        out,
        format!("$1 = 42\n\n{pid} # not a comment\n"),
        "stderr: {err}"
    );
    assert_one_line_error(code, &err, ":4: no symbol \"größe\" in the current context");
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.pid(), pid);
    cl.assert_no_crash();
}

/// `pgdbg symbols` without a subcommand: a usage error naming the
/// subcommand, not the command's own description.
#[test]
fn symbols_without_subcommand_names_the_subcommands() {
    let (code, out, err) = pgdbg(&["symbols"]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err.trim_end(),
        "pgdbg: error: pgdbg symbols needs a subcommand: pgdbg symbols extract [OPTIONS] BINARY (see pgdbg symbols --help)"
    );
    let (code, _, err) = pgdbg(&[]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("pgdbg needs a subcommand: "), "{err}");
    assert!(err.contains("pgdbg attach"), "{err}");
    let (code, _, err) = pgdbg(&["report"]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim_end(),
        "pgdbg: error: the following required arguments were not provided: <CAPTURE> (see pgdbg --help)"
    );
}
