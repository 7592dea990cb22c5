//! The REPL driven as a person would: in tmux, with typed commands, Tab
//! completion, Ctrl-C while the backend runs, Ctrl-C at the prompt, and
//! history.

mod common;
use common::*;
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
    let hist = std::env::temp_dir().join(format!("pgdbg-hist-{}", std::process::id()));
    let _ = std::fs::remove_file(&hist);
    let cmd = format!(
        "PGDBG_HISTORY={} {} attach {pid}; echo PGDBG-EXITED $?; sleep 30",
        hist.display(),
        pgdbg_bin().display()
    );
    let t = Tmux::new(&cmd);
    t.wait_for("(pgdbg) ", Duration::from_secs(30));

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

    // continue; the 7th execution stops in choose_custom_plan.
    t.type_line("continue");
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
    let cmd = format!(
        "{} attach {pid}; echo PGDBG-EXITED $?; sleep 30",
        pgdbg_bin().display()
    );
    let t = Tmux::new(&cmd);
    t.wait_for("(pgdbg) ", Duration::from_secs(30));
    t.keys(&["C-d"]);
    t.wait_for("PGDBG-EXITED 0", Duration::from_secs(10));
    assert_eq!(tracer_pid(pid), 0);
    drop(t);

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
