//! Do no harm: SIGTERM, SIGINT or SIGHUP sent to pgdbg while its
//! breakpoints are armed and the backend hits them in a loop leaves the
//! backend alive, untraced, and its code bytes equal to the file's.

use common::*;
use pgdbg_testbed as common;
use std::time::Duration;

const LOOP: &str = "do $$ begin for i in 1..400000 loop perform pg_backend_pid(); end loop; end $$";

fn signal_while_hitting(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    for (sig, name, code) in [
        (libc::SIGTERM, "SIGTERM", 143),
        (libc::SIGINT, "SIGINT", 130),
        (libc::SIGHUP, "SIGHUP", 129),
    ] {
        let mut a = cl.connect();
        let pid = a.pid();
        let maps_before = anon_exec_maps(pid);
        assert!(
            !catches_sigtrap(pid),
            "{name}: SIGTRAP caught before attach"
        );
        // break + many continues: the backend stops at every call.
        let mut lines = vec!["break pg_backend_pid".to_string()];
        lines.extend(std::iter::repeat_n("continue".to_string(), 200_000));
        let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
        let script = write_script(&format!("loop{major}{name}"), &refs);
        let cap = std::env::temp_dir().join(format!(
            "pgdbg-sig-{major}-{name}-{}.jsonl",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&cap);
        let out = std::env::temp_dir().join(format!("pgdbg-sig-{major}-{name}.out"));
        let p = Pgdbg::spawn_to_file(
            &[
                "attach",
                &pid.to_string(),
                "--script",
                script.to_str().unwrap(),
                "--capture",
                cap.to_str().unwrap(),
            ],
            &out,
        );
        wait_until("pgdbg to attach", Duration::from_secs(30), || {
            tracer_pid(pid) != 0
        });
        let h = a.spawn_text(LOOP);
        // Wait until the breakpoint has been hit many times.
        wait_until("breakpoint hits", Duration::from_secs(60), || {
            std::fs::read_to_string(&cap)
                .map(|s| s.matches("\"event\":\"stop\"").count() >= 50)
                .unwrap_or(false)
        });
        // pgdbg's SIGTRAP handler is in place while the int3 is
        assert!(catches_sigtrap(pid), "{name}: no SIGTRAP handler armed");
        unsafe {
            libc::kill(p.pid(), sig);
        }
        let (status, _, err) = p.wait(Duration::from_secs(30));
        assert_eq!(status, code, "{name}: exit status; stderr: {err}");
        assert!(
            !catches_sigtrap(pid),
            "{name}: the SIGTRAP action was not put back"
        );
        assert_eq!(
            anon_exec_maps(pid),
            maps_before,
            "{name}: the handler's pages are still mapped"
        );
        assert_eq!(tracer_pid(pid), 0, "{name}: backend still traced");
        assert!(
            code_matches_file(pid, &bin, "pg_backend_pid", 32),
            "{name}: code bytes of pg_backend_pid differ from the binary (breakpoint left behind)"
        );
        // The loop runs to its end: the backend is alive and well.
        let r = a.rejoin(h);
        assert!(r.is_ok(), "{name}: the DO loop failed: {r:?}");
        assert_eq!(a.pid(), pid);
        assert!(
            !proc_state(pid).starts_with('t'),
            "{name}: backend left in tracing stop"
        );
        cl.assert_no_crash();
        let _ = std::fs::remove_file(&cap);
    }
}

#[test]
fn signals_to_pgdbg_restore_the_backend_15() {
    signal_while_hitting(15);
}

#[test]
fn signals_to_pgdbg_restore_the_backend_18() {
    signal_while_hitting(18);
}

/// The backend exits while pgdbg waits for a breakpoint: pgdbg says so and
/// exits cleanly, the cluster is unharmed.
#[test]
fn backend_exit_is_reported() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    let script = write_script("exit", &["break choose_custom_plan", "continue"]);
    let p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "--script",
        script.to_str().unwrap(),
    ]);
    wait_until("pgdbg to attach", Duration::from_secs(30), || {
        tracer_pid(pid) != 0
    });
    let mut b = cl.connect();
    b.exec(&format!("select pg_terminate_backend({pid})"));
    let (code, _out, err) = p.wait(Duration::from_secs(30));
    assert_ne!(code, 0);
    assert!(err.contains("backend exited"), "{err}");
    drop(a);
    cl.assert_no_crash();
}
