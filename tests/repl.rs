//! The REPL driven as a person would: in tmux, with typed commands, Tab
//! completion, Ctrl-C while the backend runs, Ctrl-C at the prompt, and
//! history.

use common::*;
use pgdbg_testbed as common;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    fn new(cmd: &str) -> Tmux {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let socket = format!("pgdbg-test-{}-{n}", std::process::id());
        let st = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "60",
                cmd,
            ])
            .status()
            .expect("tmux (scripts/test installs it)");
        assert!(st.success());
        Tmux { socket }
    }
    /// `pgdbg attach PID` at the prompt in a new tmux, with a fresh history
    /// file of its own (returned); "PGDBG-EXITED <status>" when it exits.
    fn repl(pid: i32, name: &str) -> (Tmux, std::path::PathBuf) {
        let hist = std::env::temp_dir().join(format!("pgdbg-hist-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&hist);
        let t = Tmux::new(&format!(
            "PGDBG_HISTORY={} {} attach {pid}; echo PGDBG-EXITED $?; sleep 30",
            hist.display(),
            pgdbg_bin().display()
        ));
        t.wait_for("(pgdbg) ", Duration::from_secs(30));
        (t, hist)
    }
    fn keys(&self, keys: &[&str]) {
        let st = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "0"])
            .args(keys)
            .status()
            .unwrap();
        assert!(st.success());
    }
    fn type_line(&self, line: &str) {
        self.keys(&["-l", line]);
        self.keys(&["Enter"]);
    }
    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args([
                "-L",
                &self.socket,
                "capture-pane",
                "-p",
                "-J",
                "-S",
                "-500",
                "-t",
                "0",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    fn wait_for(&self, needle: &str, limit: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            assert!(
                t0.elapsed() < limit,
                "'{needle}' never appeared on screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fn count(&self, needle: &str) -> usize {
        self.screen().matches(needle).count()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

#[test]
fn interactive_session_in_tmux() {
    let cl = Cluster::start(15);
    cl.seed(&["mediumtab"]);
    let mut a = session_after_six(&cl);
    let pid = a.pid();
    let (t, hist) = Tmux::repl(pid, "main");

    // Tab completes a function name.
    t.keys(&["-l", "break choose_cu"]);
    t.keys(&["Tab"]);
    t.wait_for("break choose_custom_plan", Duration::from_secs(5));
    t.keys(&["Enter"]);
    t.wait_for("Breakpoint 1 at choose_custom_plan", Duration::from_secs(5));

    // Tab on the first word completes a command.
    t.keys(&["-l", "inf"]);
    t.keys(&["Tab"]);
    t.keys(&["-l", "breakpoints"]);
    t.keys(&["Enter"]);
    t.wait_for(
        "in choose_custom_plan at plancache.c:",
        Duration::from_secs(5),
    );

    // continue (the backend runs already: the prompt is non-stop); the
    // 7th execution stops in choose_custom_plan.
    t.type_line("continue");
    t.wait_for("The backend runs already", Duration::from_secs(10));
    let h = a.spawn_text("execute s1(10,30)");
    t.wait_for(
        "Breakpoint 1, choose_custom_plan (plansource=0x",
        Duration::from_secs(30),
    );
    t.type_line("print plansource->generic_cost");
    t.wait_for("$1 = 226.435", Duration::from_secs(5));
    t.type_line("bt 3");
    t.wait_for("#1  0x", Duration::from_secs(5));
    t.type_line("up");
    t.wait_for("GetCachedPlan", Duration::from_secs(5));
    t.type_line("print nosuchvar");
    t.wait_for(
        "no symbol \"nosuchvar\" in the current context",
        Duration::from_secs(5),
    );
    t.type_line("delete");
    t.type_line("continue");
    let r = a.rejoin(h).expect("statement completes after continue");
    assert_eq!(r, s1_result(&cl, 10, 30));

    // Ctrl-C while the idle backend runs: stopped with PTRACE_INTERRUPT,
    // the backend gets no SIGINT (its session keeps working afterwards).
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["C-c"]);
    t.wait_for(
        "Program stopped (interrupted; the backend got no signal)",
        Duration::from_secs(10),
    );
    t.type_line("bt");
    t.wait_for("PostgresMain", Duration::from_secs(10));

    // Ctrl-C at the prompt just abandons the line.
    let before = t.count("Quit");
    t.keys(&["-l", "print 1"]);
    t.keys(&["C-c"]);
    wait_until(
        "Quit after Ctrl-C at the prompt",
        Duration::from_secs(5),
        || t.count("Quit") > before,
    );

    // An empty line repeats the last command (gdb habit): bt again.
    let n = t.count("PostgresMain");
    t.keys(&["Enter"]);
    wait_until("repeated bt", Duration::from_secs(5), || {
        t.count("PostgresMain") > n
    });

    t.type_line("quit");
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(10));
    assert!(t.screen().contains("Detached from backend"));
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.simple_text("select 40 + 2"), "42");
    let history = std::fs::read_to_string(&hist).unwrap_or_default();
    assert!(
        history.contains("break choose_custom_plan"),
        "history file: {history}"
    );
    cl.assert_no_crash();
}

/// Ctrl-D at the prompt detaches and exits; closing the terminal (SIGHUP)
/// while the backend runs with a breakpoint armed restores it.
#[test]
fn ctrl_d_and_closed_terminal() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let (t, hist) = Tmux::repl(pid, "ctrl-d");
    t.keys(&["C-d"]);
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(10));
    assert_eq!(tracer_pid(pid), 0);
    drop(t);
    let _ = std::fs::remove_file(&hist);

    let cmd = format!("{} attach {pid}", pgdbg_bin().display());
    let t = Tmux::new(&cmd);
    t.wait_for("(pgdbg) ", Duration::from_secs(30));
    t.type_line("break pg_backend_pid");
    t.type_line("continue");
    std::thread::sleep(Duration::from_millis(300));
    drop(t); // kill-server: the terminal goes away, pgdbg gets SIGHUP
    wait_until(
        "pgdbg to detach after SIGHUP",
        Duration::from_secs(20),
        || tracer_pid(pid) == 0,
    );
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "pg_backend_pid",
        32
    ));
    assert_eq!(a.pid(), pid);
    cl.assert_no_crash();
}

/// A conditional breakpoint with a gdb-style `commands` block typed at the
/// `>` prompt: `silent` hides the stop line, `printf` reports, `continue`
/// lets the backend go on; Ctrl-C at the `>` prompt leaves the block as it
/// was.
#[test]
fn commands_block_and_condition_in_tmux() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid(); // a SELECT itself: asked before the breakpoint is set
    a.exec("create temp table t_x(a int)");
    let (t, hist) = Tmux::repl(pid, "cmds");
    // The block's prompt: an empty line saying just ">".
    let at_block_prompt = || {
        wait_until("the '>' prompt", Duration::from_secs(20), || {
            t.screen().lines().any(|l| l.trim_end() == ">")
        })
    };
    // What the last `info breakpoints` printed.
    let info_breakpoints = || {
        let n = t.count("(pgdbg) info breakpoints");
        t.type_line("info breakpoints");
        wait_until("info breakpoints", Duration::from_secs(20), || {
            let s = t.screen();
            s.matches("(pgdbg) info breakpoints").count() > n && s.trim_end().ends_with("(pgdbg)")
        });
        let s = t.screen();
        let i = s.rfind("(pgdbg) info breakpoints").unwrap();
        s[i..].to_string()
    };

    // A breakpoint that stops only for SELECT (CMD_SELECT = 1).
    t.type_line("break standard_ExecutorRun if queryDesc->operation == 1");
    let s = t.wait_for(
        "stops only if queryDesc->operation == 1",
        Duration::from_secs(20),
    );
    assert!(s.contains("Breakpoint 1 at standard_ExecutorRun"), "{s}");

    // The block, one line at each ">" prompt.
    t.type_line("commands");
    t.wait_for(
        "Type commands for breakpoint(s) 1, one per line.",
        Duration::from_secs(20),
    );
    t.wait_for(
        "End with a line saying just \"end\".",
        Duration::from_secs(20),
    );
    let printf = r#"printf "select in %d: %s\n", MyProcPid, queryDesc->sourceText"#;
    for line in ["silent", printf, "continue", "end"] {
        at_block_prompt();
        t.type_line(line);
        t.wait_for(&format!(">{line}"), Duration::from_secs(20));
    }
    t.wait_for(">end\n(pgdbg) ", Duration::from_secs(20));

    let info = info_breakpoints();
    assert!(info.contains("standard_ExecutorRun"), "{info}");
    assert!(
        info.contains("stop only if queryDesc->operation == 1"),
        "{info}"
    );
    for line in ["silent", printf, "continue"] {
        assert!(info.contains(line), "'{line}' not in:\n{info}");
    }

    // The backend runs; an INSERT does not satisfy the condition, a SELECT
    // runs the block, which prints and goes on.
    t.type_line("continue");
    let h = a.spawn_text("insert into t_x values (1)");
    a.rejoin(h)
        .expect("insert completes: the condition is false");
    let h = a.spawn_text("select 41+1");
    assert_eq!(
        a.rejoin(h).expect("select completes: the block continues"),
        "42"
    );
    let s = t.wait_for(
        &format!("select in {pid}: select 41+1"),
        Duration::from_secs(20),
    );
    assert!(!s.contains("insert into t_x"), "{s}");
    assert!(!s.contains("Breakpoint 1,"), "silent, yet:\n{s}");
    assert_eq!(t.count(&format!("select in {pid}: ")), 1, "{s}");

    // Ctrl-C stops the running `continue`.
    t.keys(&["C-c"]);
    t.wait_for(
        "Program stopped (interrupted; the backend got no signal)",
        Duration::from_secs(20),
    );
    let info = info_breakpoints();
    assert!(info.contains("breakpoint already hit 1 time\n"), "{info}");

    // Ctrl-C at the ">" prompt abandons a new block; the old one stays.
    t.type_line("commands 1");
    wait_until(
        "the second commands prompt",
        Duration::from_secs(20),
        || t.count("Type commands for breakpoint(s) 1, one per line.") == 2,
    );
    at_block_prompt();
    t.type_line("print 1");
    t.wait_for(">print 1", Duration::from_secs(20));
    at_block_prompt();
    t.keys(&["C-c"]);
    t.wait_for("Quit (commands not changed)", Duration::from_secs(20));
    let info = info_breakpoints();
    assert!(!info.contains("print 1"), "{info}");
    for line in ["silent", printf, "continue"] {
        assert!(info.contains(line), "'{line}' not in:\n{info}");
    }

    t.type_line("quit");
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(20));
    assert!(t.screen().contains("Detached from backend"));
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.simple_text("select 1"), "1");
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "standard_ExecutorRun",
        32
    ));
    let _ = std::fs::remove_file(&hist);
    cl.assert_no_crash();
}

/// Ctrl-C during a `continue` whose breakpoint is hit thousands of times a
/// second without stopping the user (a `silent` + `continue` block, then a
/// condition that never holds) ends it at once, every time, with the line
/// saying where the backend stopped (it used to give a bare prompt, or be
/// ignored).
fn ctrl_c_while_hits_pass(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let h = a.spawn_text(
        "do $$ begin for i in 1..2000000000 loop perform pg_backend_pid(); end loop; end $$",
    );
    let (t, hist) = Tmux::repl(pid, &format!("ctrl-c-hits-{major}"));
    let stopped = "Program stopped (interrupted; the backend got no signal).";
    // `continue`, a second of hits, Ctrl-C: the stop line and where
    let round = |what: &str| {
        let n = t.count(stopped);
        let c = t.count("(pgdbg) continue");
        t.type_line("continue");
        wait_until("continue", Duration::from_secs(20), || {
            t.count("(pgdbg) continue") > c
        });
        std::thread::sleep(Duration::from_secs(1));
        t.keys(&["C-c"]);
        wait_until(
            &format!("{what}: the stop after Ctrl-C"),
            Duration::from_secs(10),
            || t.count(stopped) > n && t.screen().trim_end().ends_with("(pgdbg)"),
        );
        let s = t.screen();
        let tail = &s[s.rfind("(pgdbg) continue").unwrap()..];
        let after = tail.split_once(stopped).map(|x| x.1).unwrap_or("");
        let at = after.lines().nth(1).unwrap_or("");
        // "FUNC (ARGS) at FILE:LINE", with "0x... in " unless at a line's start
        assert!(
            !at.starts_with("(pgdbg)") && at.contains(" (") && at.contains(')'),
            "{what}: no location after the stop line:\n{tail}"
        );
    };
    t.type_line("break pg_backend_pid");
    t.wait_for("Breakpoint 1 at pg_backend_pid", Duration::from_secs(20));
    t.type_line("commands");
    for line in ["silent", "continue", "end"] {
        wait_until("the '>' prompt", Duration::from_secs(20), || {
            t.screen().lines().any(|l| l.trim_end() == ">")
        });
        t.type_line(line);
        t.wait_for(&format!(">{line}"), Duration::from_secs(20));
    }
    t.wait_for(">end\n(pgdbg) ", Duration::from_secs(20));
    for i in 0..3 {
        round(&format!("silent block, round {i}"));
    }
    t.type_line("delete");
    t.type_line("break AllocSetAlloc if size == 99999");
    t.wait_for("stops only if size == 99999", Duration::from_secs(20));
    for i in 0..3 {
        round(&format!("condition, round {i}"));
    }
    t.type_line("quit");
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(20));
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "pg_backend_pid",
        16
    ));
    cl.connect()
        .exec(&format!("select pg_cancel_backend({pid})"));
    let r = a.rejoin(h);
    assert!(
        r.as_ref().is_err_and(|e| e.contains("canceling statement")),
        "{r:?}"
    );
    let _ = std::fs::remove_file(&hist);
    cl.assert_no_crash();
}

#[test]
fn ctrl_c_while_hits_pass_in_tmux_15() {
    ctrl_c_while_hits_pass(15);
}

#[test]
fn ctrl_c_while_hits_pass_in_tmux_18() {
    ctrl_c_while_hits_pass(18);
}

/// `plancache --fast` at the prompt (completed with Tab): decisions appear
/// while the backend runs through the in-process recorder; Ctrl-C ends the
/// watch with its summary and takes the recorder out; the session goes on.
#[test]
fn plancache_fast_and_ctrl_c_in_tmux() {
    let cl = Cluster::start(15);
    cl.seed(&["mediumtab"]);
    let mut a = cl.connect();
    let pid = a.pid();
    let maps_before = anon_exec_maps(pid);
    let (t, hist) = Tmux::repl(pid, "plancache");
    t.keys(&["-l", "planc"]);
    t.keys(&["Tab"]);
    t.wait_for("(pgdbg) plancache", Duration::from_secs(20));
    t.keys(&["-l", " --fast"]);
    t.keys(&["Enter"]);
    t.wait_for("(recorded in-process, no stops)", Duration::from_secs(20));
    a.exec("prepare s2 as select v from mediumtab where n = $1::numeric");
    for i in 0..7 {
        a.exec(&format!("execute s2({})", 100 + i));
    }
    let s = t.wait_for("s2 #7: GENERIC plan", Duration::from_secs(20));
    assert!(s.contains("s2 #5: custom plan"), "{s}");
    assert!(
        s.contains("s2 #6: GENERIC plan  generic 8.443 < avg custom 13.443"),
        "{s}"
    );
    t.keys(&["C-c"]);
    t.wait_for(
        "plancache: 7 decisions (5 custom, 2 generic)",
        Duration::from_secs(20),
    );
    // the prompt comes back after the summary (printed in two writes)
    wait_until(
        "the prompt after the summary",
        Duration::from_secs(20),
        || t.screen().trim_end().ends_with("(pgdbg)"),
    );
    // the recorder is out while the session goes on (backend still traced)
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "GetCachedPlan",
        32
    ));
    assert_eq!(anon_exec_maps(pid), maps_before);
    assert_ne!(tracer_pid(pid), 0);
    t.type_line("quit");
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(20));
    assert_eq!(tracer_pid(pid), 0);
    a.exec("execute s2(1)");
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&hist);
}

/// Several lines pasted at the prompt all run, in order, as in gdb: a
/// plain paste (the terminal sends the lines at once; pgdbg used to run
/// the first and drop the rest) and a bracketed paste (one edit buffer
/// holding newlines; pgdbg used to run it as one command, "unexpected
/// 'print' in expression").  A pasted `commands` block fills the `>`
/// prompts too.
#[test]
fn pasted_lines_all_run_in_order() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let (t, hist) = Tmux::repl(pid, "paste");
    let paste = |text: &str, bracketed: bool| {
        let st = Command::new("tmux")
            .args(["-L", &t.socket, "set-buffer", "--", text])
            .status()
            .unwrap();
        assert!(st.success());
        let mut args = vec!["-L", &t.socket, "paste-buffer", "-t", "0"];
        if bracketed {
            args.push("-p");
        }
        assert!(Command::new("tmux").args(&args).status().unwrap().success());
    };
    let in_order = |screen: &str, values: &[&str]| {
        let mut at = 0;
        for v in values {
            let i = screen[at..]
                .find(v)
                .unwrap_or_else(|| panic!("'{v}' missing or out of order in:\n{screen}"));
            at += i + v.len();
        }
    };

    // plain paste: the three lines reach pgdbg at once
    paste("print 101\nprint 202\nprint 303\n", false);
    let s = t.wait_for("$3 = 303", Duration::from_secs(20));
    in_order(&s, &["$1 = 101", "$2 = 202", "$3 = 303"]);

    // bracketed paste: inserted as one edit buffer, run on Enter
    paste("print 404\nprint 505\n\nprint 606\n", true);
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["Enter"]);
    let s = t.wait_for("$6 = 606", Duration::from_secs(20));
    in_order(&s, &["$4 = 404", "$5 = 505", "$6 = 606"]);
    assert!(!s.contains("unexpected 'print'"), "{s}");

    // a whole breakpoint with its commands block, pasted
    paste(
        "break pg_backend_pid\ncommands\nsilent\nprintf \"hit %d\\n\", MyProcPid\ncontinue\nend\ninfo breakpoints\n",
        true,
    );
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["Enter"]);
    let s = t.wait_for("  continue", Duration::from_secs(20));
    in_order(
        &s,
        &[
            "Breakpoint 1 at pg_backend_pid",
            "Type commands for breakpoint(s) 1",
            "pg_backend_pid",
            "  silent",
            "  printf \"hit %d\\n\", MyProcPid",
            "  continue",
        ],
    );
    t.type_line("continue");
    assert_eq!(a.pid(), pid);
    t.wait_for(&format!("hit {pid}"), Duration::from_secs(20));
    t.keys(&["C-c"]);
    wait_until("the prompt after Ctrl-C", Duration::from_secs(20), || {
        t.screen().trim_end().ends_with("(pgdbg)")
    });
    t.type_line("quit");
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(20));
    assert_eq!(tracer_pid(pid), 0);
    let history = std::fs::read_to_string(&hist).unwrap_or_default();
    for l in ["print 202", "print 505", "print 606", "commands"] {
        assert!(
            history.lines().any(|h| h == l),
            "'{l}' not a line of the history:\n{history}"
        );
    }
    let _ = std::fs::remove_file(&hist);
    cl.assert_no_crash();
}

/// The prompt is non-stop: attached to a backend whose session runs a
/// procedure that updates a counter row and commits in a loop (holding the
/// row's lock most of the time), the counter advances while the prompt
/// waits and a second session that locks the row is never held up; `info`
/// says the backend runs; `bt` and `plan` take a short stop and the
/// backend runs on, and so does `call`; `interrupt`,
/// Ctrl-C and a breakpoint hit stop it (the counter stands
/// still and the row lock is held) until `continue`.
fn nonstop_prompt(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    a.exec(
        "create table ctr(id int primary key, n bigint);
         insert into ctr values (1, 0);
         create procedure bump() language plpgsql as $$
         begin
           loop
             update ctr set n = n + 1 where id = 1;
             perform pg_sleep(0.005);
             commit;
           end loop;
         end $$;",
    );
    let h = a.spawn_text("call bump()");
    let mut b = cl.connect();
    let counter = |b: &mut Client| b.query_one_i64("select n from ctr where id = 1");
    wait_until("the loop to start", Duration::from_secs(20), || {
        counter(&mut b) > 3
    });
    // The counter moves within `limit` (checked every 50 ms).
    let advances = |b: &mut Client, limit: Duration| {
        let n0 = counter(b);
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50));
            if counter(b) > n0 + 2 {
                return true;
            }
        }
        false
    };
    // The row lock can be taken within 1 s, 10 times in a row.
    let lock_free = |b: &mut Client| {
        b.exec("set lock_timeout = '1s'");
        let ok = (0..10).all(|_| {
            b.c.as_mut()
                .unwrap()
                .simple_query("select n from ctr where id = 1 for update")
                .is_ok()
        });
        b.exec("reset lock_timeout");
        ok
    };
    let prompt_back = |t: &Tmux, what: &str| {
        wait_until(what, Duration::from_secs(20), || {
            t.screen().trim_end().ends_with("(pgdbg)")
        })
    };
    let (t, hist) = Tmux::repl(pid, &format!("nonstop-{major}"));
    assert_ne!(tracer_pid(pid), 0);

    // The prompt waits; the backend works and holds nobody up.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        advances(&mut b, Duration::from_secs(5)),
        "the counter stands still while the prompt waits"
    );
    assert!(
        lock_free(&mut b),
        "the row lock is held while the prompt waits"
    );
    t.type_line("info");
    t.wait_for("state:       running", Duration::from_secs(20));
    t.type_line("print MyProcPid");
    t.wait_for(&format!("$1 = {pid}"), Duration::from_secs(20));
    // info auxv reads /proc and the backend's memory: no stop to take
    t.type_line("info auxv");
    t.wait_for(
        "0    AT_NULL              End of vector                  0x0",
        Duration::from_secs(20),
    );
    prompt_back(&t, "the prompt after info auxv");
    assert!(
        advances(&mut b, Duration::from_secs(5)),
        "stopped after info auxv"
    );

    // bt and plan take the stop they need, then the backend goes on.
    t.type_line("bt");
    t.wait_for("PostgresMain", Duration::from_secs(20));
    prompt_back(&t, "the prompt after bt");
    assert!(advances(&mut b, Duration::from_secs(5)), "stopped after bt");
    t.type_line("plan");
    t.wait_for("-- nested statement (SPI/plpgsql)", Duration::from_secs(20));
    prompt_back(&t, "the prompt after plan");
    assert!(
        advances(&mut b, Duration::from_secs(5)),
        "stopped after plan"
    );
    assert!(lock_free(&mut b), "the row lock is held after plan");
    // an inferior call takes a stop too, and the backend runs on after it
    // (how long the call takes is the backend's business: pg_usleep ends
    // early at any signal it catches)
    t.type_line("call pg_usleep(300000)");
    prompt_back(&t, "the prompt after call");
    assert!(
        advances(&mut b, Duration::from_secs(5)),
        "stopped after call"
    );

    // `interrupt` stops it until `continue`.
    let stopped = "Program stopped (interrupted; the backend got no signal).";
    t.type_line("interrupt");
    t.wait_for(stopped, Duration::from_secs(20));
    prompt_back(&t, "the prompt after interrupt");
    assert!(
        !advances(&mut b, Duration::from_secs(1)),
        "the counter moves after interrupt"
    );
    t.type_line("info");
    t.wait_for(
        "state:       stopped (interrupted)",
        Duration::from_secs(20),
    );
    t.type_line("continue");
    t.wait_for("Continuing.", Duration::from_secs(20));
    assert!(
        advances(&mut b, Duration::from_secs(5)),
        "stopped after continue"
    );

    // Ctrl-C at the prompt stops it too.
    t.keys(&["C-c"]);
    wait_until("the stop after Ctrl-C", Duration::from_secs(20), || {
        t.count(stopped) == 2
    });
    assert!(
        !advances(&mut b, Duration::from_secs(1)),
        "the counter moves after Ctrl-C"
    );
    t.type_line("continue");
    wait_until("the second continue", Duration::from_secs(20), || {
        t.count("Continuing.") == 2
    });
    assert!(
        advances(&mut b, Duration::from_secs(5)),
        "stopped after continue"
    );

    // A breakpoint hit while the prompt waits is shown and stops it.
    t.type_line("break pg_sleep");
    t.wait_for("Breakpoint 1, pg_sleep", Duration::from_secs(20));
    prompt_back(&t, "the prompt after the hit");
    assert!(
        !advances(&mut b, Duration::from_secs(1)),
        "the counter moves after a breakpoint hit"
    );
    t.type_line("delete");
    t.type_line("continue");
    wait_until("the third continue", Duration::from_secs(20), || {
        t.count("Continuing.") == 3
    });
    assert!(
        advances(&mut b, Duration::from_secs(5)),
        "stopped after continue"
    );

    t.type_line("quit");
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(20));
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "pg_sleep",
        16
    ));
    assert!(
        advances(&mut b, Duration::from_secs(5)),
        "stopped after quit"
    );
    cl.cancel(&[pid]);
    let r = a.rejoin(h);
    assert!(
        r.as_ref().is_err_and(|e| e.contains("canceling statement")),
        "{r:?}"
    );
    let _ = std::fs::remove_file(&hist);
    cl.assert_no_crash();
}

#[test]
fn nonstop_prompt_in_tmux_15() {
    nonstop_prompt(15);
}

#[test]
fn nonstop_prompt_in_tmux_18() {
    nonstop_prompt(18);
}

/// A terminal pgdbg runs in, driven by a test: tmux, or a pty of the
/// test's own.
trait Term {
    fn send_line(&self, line: &str);
    fn ctrl_c(&self);
    /// What is on the screen (tmux) or was written so far (pty).
    fn text(&self) -> String;
}

impl Term for Tmux {
    fn send_line(&self, line: &str) {
        self.type_line(line);
    }
    fn ctrl_c(&self) {
        self.keys(&["C-c"]);
    }
    fn text(&self) -> String {
        self.screen()
    }
}

/// pgdbg on a pseudo-terminal the test holds the master side of: the
/// slave is its controlling terminal (so Ctrl-C is SIGINT when the line
/// discipline's ISIG is on), a thread collects everything it writes.
struct Pty {
    master: std::fs::File,
    out: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    child: std::process::Child,
}

impl Pty {
    /// `pgdbg attach PID` on a new pty whose mode is first set by `raw`
    /// (a terminal another program left raw).
    fn repl(pid: i32, raw: bool) -> Pty {
        use std::os::fd::{FromRawFd, OwnedFd};
        use std::os::unix::process::CommandExt;
        let (mut m, mut s) = (0, 0);
        let ws = libc::winsize {
            ws_row: 60,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes the two descriptors.
        let r =
            unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), &ws) };
        assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors are new and ours.
        let (master, slave) = unsafe { (std::fs::File::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
        if raw {
            // as `stty -isig -icanon -echo` leaves it
            let mut t: libc::termios = unsafe { std::mem::zeroed() };
            assert_eq!(unsafe { libc::tcgetattr(s, &mut t) }, 0);
            t.c_lflag &= !(libc::ISIG | libc::ICANON | libc::ECHO);
            assert_eq!(unsafe { libc::tcsetattr(s, libc::TCSANOW, &t) }, 0);
        }
        let hist = std::env::temp_dir().join(format!("pgdbg-hist-pty-{}", std::process::id()));
        let mut cmd = Command::new(pgdbg_bin());
        cmd.args(["attach", &pid.to_string()])
            .env("PGDBG_HISTORY", &hist)
            .env("TERM", "xterm")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn pgdbg on a pty");
        drop(cmd);
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (o, mut rd) = (out.clone(), master.try_clone().unwrap());
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            // EIO once pgdbg and every holder of the slave are gone
            while let Ok(n) = rd.read(&mut buf) {
                if n == 0 {
                    break;
                }
                o.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let p = Pty { master, out, child };
        wait_until("the prompt on the pty", Duration::from_secs(30), || {
            p.text().contains("(pgdbg) ")
        });
        p
    }
    fn write(&self, bytes: &[u8]) {
        use std::io::Write;
        (&self.master).write_all(bytes).unwrap();
    }
}

impl Term for Pty {
    fn send_line(&self, line: &str) {
        self.write(format!("{line}\r").as_bytes());
    }
    fn ctrl_c(&self) {
        self.write(b"\x03");
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        // SIGTERM: pgdbg detaches before it exits
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// The backend is not stopped (its /proc state is never t or T over a
/// quarter of a second) and its client gets an answer.
fn backend_runs(what: &str, pid: i32, a: &mut Client) {
    for _ in 0..25 {
        let st = proc_state(pid);
        assert!(
            !st.starts_with('t') && !st.starts_with('T'),
            "{what}: the backend is left stopped ({st})"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let h = a.spawn_text("select 42");
    wait_until(
        &format!("{what}: the backend's answer"),
        Duration::from_secs(20),
        || h.is_finished(),
    );
    assert_eq!(a.rejoin(h).as_deref(), Ok("42"), "{what}");
}

/// Ctrl-C during a long command at the prompt: it ends the command within
/// a second, measured from the key to the prompt coming back, and the
/// backend runs on (never left stopped until `continue`); a line typed
/// while the command ran is discarded with it (the terminal drops what was
/// typed ahead on Ctrl-C), not run later.  On a terminal another program
/// left raw (`-isig -icanon -echo`) Ctrl-C used to be a byte read at the
/// next prompt: the command ran on, then that byte stopped the backend.
fn ctrl_c_ends_long_commands(t: &dyn Term, pid: i32, a: &mut Client, how: &str) {
    let prompts = |t: &dyn Term| t.text().matches("(pgdbg) ").count();
    type Started<'a> = &'a dyn Fn(&dyn Term) -> bool;
    let commands: [(&str, Started); 2] = [
        ("latency exec_simple_query --for 60s", &|t| {
            t.text().contains("latency: exec_simple_query in backend")
        }),
        ("plan --next --analyze", &|_| {
            wait_armed(pid, "standard_ExecutorStart");
            true
        }),
    ];
    for (i, (line, started)) in commands.iter().enumerate() {
        let what = format!("{how}: {line}");
        let before = t.text().len();
        t.send_line(line);
        wait_until(&format!("{what}: started"), Duration::from_secs(30), || {
            started(t)
        });
        // a line typed while it runs
        t.send_line(&format!("echo typed-ahead-{i}\\n"));
        std::thread::sleep(Duration::from_millis(300));
        let n = prompts(t);
        let t0 = Instant::now();
        t.ctrl_c();
        wait_until(
            &format!("{what}: the prompt after Ctrl-C"),
            Duration::from_secs(70),
            || prompts(t) > n,
        );
        let took = t0.elapsed();
        eprintln!("{what}: the prompt came back {took:?} after Ctrl-C");
        assert!(
            took < Duration::from_secs(1),
            "{what}: Ctrl-C took {took:?}:\n{}",
            &t.text()[before..]
        );
        backend_runs(&what, pid, a);
        // the typed line did not run
        t.send_line("info");
        wait_until(&format!("{what}: info"), Duration::from_secs(20), || {
            t.text()[before..].contains("state:       running")
        });
        let out = t.text()[before..].to_string();
        assert!(
            !out.contains(&format!("\ntyped-ahead-{i}")),
            "{what}: the line typed during the command ran:\n{out}"
        );
    }
}

fn ctrl_c_ends_long_commands_in_tmux(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let hist = std::env::temp_dir().join(format!("pgdbg-hist-raw-{}", std::process::id()));
    // the terminal as a program that crashed in raw mode leaves it
    let t = Tmux::new(&format!(
        "stty -isig -icanon -echo; PGDBG_HISTORY={} {} attach {pid}; echo PGDBG-EXITED $?; sleep 30",
        hist.display(),
        pgdbg_bin().display()
    ));
    t.wait_for("(pgdbg) ", Duration::from_secs(30));
    ctrl_c_ends_long_commands(&t, pid, &mut a, "tmux");
    t.type_line("quit");
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(20));
    assert_eq!(tracer_pid(pid), 0);
    backend_runs("after quit", pid, &mut a);
    let _ = std::fs::remove_file(&hist);
    cl.assert_no_crash();
}

fn ctrl_c_ends_long_commands_on_a_pty(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    for raw in [true, false] {
        let p = Pty::repl(pid, raw);
        let how = if raw { "raw pty" } else { "pty" };
        ctrl_c_ends_long_commands(&p, pid, &mut a, how);
        p.send_line("quit");
        wait_until(&format!("{how}: quit"), Duration::from_secs(20), || {
            tracer_pid(pid) == 0
        });
        backend_runs(&format!("{how}: after quit"), pid, &mut a);
    }
    cl.assert_no_crash();
}

#[test]
fn ctrl_c_ends_long_commands_in_tmux_15() {
    ctrl_c_ends_long_commands_in_tmux(15);
}

#[test]
fn ctrl_c_ends_long_commands_in_tmux_18() {
    ctrl_c_ends_long_commands_in_tmux(18);
}

#[test]
fn ctrl_c_ends_long_commands_on_a_pty_15() {
    ctrl_c_ends_long_commands_on_a_pty(15);
}

#[test]
fn ctrl_c_ends_long_commands_on_a_pty_18() {
    ctrl_c_ends_long_commands_on_a_pty(18);
}

/// At the non-stop prompt, a command whose registry entry says it lets the
/// backend run while it works (probes, samplers) does not hold it stopped:
/// on an idle backend, each of them for 2 s ends without "(the backend was
/// stopped for ...)" (what the prompt says after a long stop), and the
/// backend answers a query right after each.
fn running_commands_at_the_prompt(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let (t, hist) = Tmux::repl(pid, &format!("runs-{major}"));
    assert_ne!(tracer_pid(pid), 0);
    for (cmd, said) in [
        (
            "latency standard_ExecutorRun --for 2s",
            "the backend was not stopped while timing",
        ),
        ("count standard_ExecutorRun --for 2s", "count: "),
        ("trace standard_ExecutorRun --for 2s", "trace: "),
        ("waits sample --for 2s", "waits: sampling backend"),
        ("profile --for 2s", "profile: sampling backend"),
    ] {
        let prompts = t.count("(pgdbg) ");
        t.type_line(cmd);
        wait_until(
            &format!("the prompt after {cmd}"),
            Duration::from_secs(60),
            || t.count("(pgdbg) ") > prompts,
        );
        let screen = t.screen();
        let out = &screen[screen.rfind(cmd).unwrap()..];
        assert!(out.contains(said), "{cmd}:\n{out}");
        // the stop to arm and disarm the probes is said when it passes
        // 100 ms (it can on a loaded machine); held for the command's
        // 2 s would say 2 s or more
        let stopped = out
            .split("the backend was stopped for ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .map(|x| x.parse::<f64>().unwrap());
        assert!(
            stopped.is_none_or(|x| x < 1.0),
            "{cmd} held the idle backend stopped:\n{out}"
        );
        assert!(!out.contains("rror"), "{cmd}:\n{out}");
        assert_eq!(a.query_one_i64("select 7"), 7, "the backend after {cmd}");
    }
    t.type_line("quit");
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(20));
    assert_eq!(tracer_pid(pid), 0);
    let _ = std::fs::remove_file(&hist);
    cl.assert_no_crash();
}

#[test]
fn running_commands_at_the_prompt_in_tmux_15() {
    running_commands_at_the_prompt(15);
}

#[test]
fn running_commands_at_the_prompt_in_tmux_18() {
    running_commands_at_the_prompt(18);
}
