//! `pgdbg attach --cluster` where it cannot hear of forks (no process
//! events: another user or PID namespace, no CAP_NET_ADMIN; here
//! PGDBG_NO_PROC_EVENTS): it says so in one line, once, and finds new
//! backends by looking every 100 ms instead; a session found so is
//! attached, armed and counted like any other, and left running untraced.

use common::*;
use pgdbg_testbed as common;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

const LOOKING: &str = "pgdbg: new backends are looked for every 100 ms (their first statements may be missed): PGDBG_NO_PROC_EVENTS is set";

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-looking-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn looked_for(major: u32) {
    const INSERTS: u64 = 7;
    let cl = Cluster::start(major);
    let mut setup = cl.connect();
    setup.exec("create table looking_t (i int)");
    let cap = temp(&format!("{major}.jsonl"));
    let out = temp(&format!("{major}.out"));
    let script = write_script(&format!("looking-{major}"), &["count heap_insert"]);
    let mut p = Pgdbg::spawn_to_file_env(
        &[
            "attach",
            "--cluster",
            cl.dir.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--for",
            "600s",
            "--capture",
            cap.to_str().unwrap(),
        ],
        &out,
        &[
            ("PGDBG_NO_PROC_EVENTS", "1"),
            // a worker per backend (one `count` line is otherwise served
            // by uprobes inherited from the postmaster, no looking at all)
            ("PGDBG_NO_INHERIT", "1"),
        ],
    );
    let mut err = stderr_reader(&mut p);
    let banner = read_until(&mut err, "running the script", Duration::from_secs(60));
    assert_eq!(
        banner.matches(LOOKING).count(),
        1,
        "not said once, in these words:\n{banner}"
    );
    // a session that starts now is found by looking (it lives long
    // enough), then armed: only then does it insert
    let mut c = cl.connect();
    let pid = c.pid();
    wait_until(
        "the new backend found and attached",
        Duration::from_secs(60),
        || tracer_pid(pid) != 0,
    );
    wait_armed(pid, "heap_insert");
    for i in 0..INSERTS {
        c.exec(&format!("insert into looking_t values ({i})"));
    }
    drop(c);
    wait_until(
        "the session's backend to end",
        Duration::from_secs(30),
        || proc_state(pid).is_empty() || proc_state(pid).starts_with('Z'),
    );
    // SAFETY: kill(2) of our own child
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let (code, _, _) = p.wait(Duration::from_secs(120));
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let counted = read_events(&cap, "count")
        .iter()
        .find(|e| e["pid"] == pid)
        .and_then(|e| e["calls"].as_u64());
    assert_eq!(
        counted,
        Some(INSERTS),
        "the session found by looking: {counted:?} heap_insert calls\n{rest}\n{text}"
    );
    assert!(code == 0 || code == 130, "exit {code}: {rest}");
    assert!(rest.contains("1 exited during the script"), "{rest}");
    assert!(
        !rest.contains(LOOKING),
        "said again after the banner:\n{rest}"
    );
    for child in common::spares::children(cl.postmaster_pid) {
        assert_eq!(tracer_pid(child), 0, "process {child} left traced");
        assert!(
            !proc_state(child).starts_with('T'),
            "process {child} left stopped"
        );
    }
    assert_eq!(
        setup.query_one_i64("select count(*) from looking_t"),
        INSERTS as i64
    );
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&cap);
    let _ = std::fs::remove_file(&out);
}

#[test]
fn cluster_looks_for_new_backends_without_process_events_15() {
    looked_for(15);
}

#[test]
fn cluster_looks_for_new_backends_without_process_events_18() {
    looked_for(18);
}
