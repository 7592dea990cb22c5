//! `pgdbg attach --cluster DIR` with a script of one `waits trace` line:
//! the statements of every backend are marked by uprobes on the executor
//! opened once on the postmaster and inherited (src/cluster_marks.rs),
//! each worker sets only its backend's wait-event watch and takes its
//! backend's marks from pgdbg's leader.  Each short session's statements
//! are reported in its own block with its own texts, and its waits for
//! its client exactly as bpftrace counts them in the kernel; killed, pgdbg
//! leaves no uprobe in any process of the cluster.

use common::*;
use pgdbg_testbed as common;
use std::path::{Path, PathBuf};
use std::time::Duration;

const SAID: &str = "statements marked in every backend from its fork on by uprobes inherited";

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-marks-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// pgdbg's `waits trace --quiet` on the cluster, its stderr up to the
/// line that says the statements are marked for the whole cluster, and
/// its workers started ahead ready; the rest of its stderr from the
/// thread returned.
fn start(cl: &Cluster, name: &str, out: &Path) -> (Pgdbg, String, std::thread::JoinHandle<String>) {
    let (p, banner, rest) = start_cluster_script(cl, name, &["waits trace --quiet"], &[], out);
    assert!(
        banner.contains(SAID),
        "not marked for the cluster: {banner}"
    );
    (p, banner, rest)
}

/// The lines of backend `pid`, without their `[PID] ` prefix.
fn lines_of(text: &str, pid: i32) -> Vec<&str> {
    let tag = format!("[{pid}] ");
    text.lines()
        .filter_map(|l| l.strip_prefix(tag.as_str()))
        .collect()
}

/// How many times backend `pid`'s summary says statement `sql` ran (its
/// line `N x  T ms  SQL`).
fn runs(text: &str, pid: i32, sql: &str) -> u64 {
    lines_of(text, pid)
        .iter()
        .find(|l| l.trim_end().ends_with(sql) && l.contains(" x "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The code of the executor's start and end in process `pid` is the
/// binary's (no uprobe's int3 in it).
fn code_is_files(cl: &Cluster, pid: i32) -> bool {
    ["standard_ExecutorStart", "standard_ExecutorEnd"]
        .iter()
        .all(|f| code_matches_file(pid, &cl.postgres_binary(), f, 16))
}

/// Short `psql` sessions (2 at a time), each with a statement of its own
/// text, and a backend there before pgdbg started: each backend's block
/// has its own statements, once each, and no other's, and each short
/// session's ClientRead waits are as many as bpftrace saw its recv(2)
/// find nothing (psql's sessions are quick: some never wait, and that
/// must be what pgdbg says too); the definitions are removed and the code
/// is the file's once pgdbg ends.
fn short_sessions(major: u32) {
    const N: usize = 12;
    let cl = Cluster::start(major);
    let mut stay = cl.connect();
    let stay_pid = stay.pid();
    let out = temp(&format!("short-{major}.out"));
    // the yardstick of the short sessions' waits: each time a backend's
    // recv(2) from its client finds nothing (EAGAIN), it waits for the
    // client with ClientRead, once; counted from its first send(2) on
    // (ReadyForQuery's: before it, pgdbg's worker has not armed the watch,
    // and with trust authentication nothing is read from the client)
    let yardstick = bpftrace::Bpftrace::start(
        "tracepoint:syscalls:sys_enter_sendto /comm == \"postgres\"/ { @sent[pid] = 1; } \
         tracepoint:syscalls:sys_exit_recvfrom /comm == \"postgres\" && @sent[pid] && args->ret == -11/ \
         { @eagain[pid] = count(); }",
    );
    let (p, _, rest) = start(&cl, &format!("marks-{major}"), &out);
    let sup = p.pid();
    wait_until(
        "the backend there before attached",
        Duration::from_secs(60),
        || tracer_pid(stay_pid) != 0,
    );
    let sessions = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..2 {
            let sessions = &sessions;
            let cl = &cl;
            s.spawn(move || {
                for i in 0..N / 2 {
                    let sql = format!("select 's{t}-{i}'::text");
                    let o = psql_c(cl, &["select pg_backend_pid()", &sql])
                        .output()
                        .expect("run psql");
                    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                    let text = String::from_utf8_lossy(&o.stdout).to_string();
                    let pid: i32 = text.lines().next().unwrap().trim().parse().unwrap();
                    sessions.lock().unwrap().push((pid, sql));
                }
            });
        }
    });
    for _ in 0..3 {
        assert_eq!(stay.simple_text("select 'stays'::text"), "stays");
    }
    let counted = yardstick.stop();
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(sup, libc::SIGINT) };
    let (code, _, _) = p.wait(Duration::from_secs(120));
    let err = rest.join().unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(code, 0, "{text}\n{err}");
    let sessions = sessions.into_inner().unwrap();
    assert_eq!(sessions.len(), N);
    for (pid, sql) in &sessions {
        assert_eq!(runs(&text, *pid, sql), 1, "backend {pid}, {sql}:\n{text}");
        assert_eq!(runs(&text, *pid, "select pg_backend_pid()"), 1, "{text}");

        // no other session's statement in its block
        for (other, osql) in &sessions {
            if other != pid {
                assert_eq!(
                    runs(&text, *pid, osql),
                    0,
                    "{osql} in {pid}'s block:\n{text}"
                );
            }
        }
    }
    assert_eq!(runs(&text, stay_pid, "select 'stays'::text"), 3, "{text}");
    // every wait of each short session, exactly (decoded from the binary's
    // file: a session is over before most of its records are read; nothing
    // "could not be read back", checked below)
    let mut waits = 0;
    for (pid, _) in &sessions {
        let key = pid.to_string();
        assert!(
            counted.get("sent").is_some_and(|m| m.contains_key(&key)),
            "bpftrace did not see backend {pid}: {counted:?}"
        );
        let want = counted
            .get("eagain")
            .and_then(|m| m.get(&key))
            .copied()
            .unwrap_or(0);
        let got: i64 = lines_of(&text, *pid)
            .iter()
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() >= 3 && w[..2] == ["Client:", "ClientRead"]).then(|| w[2].parse().unwrap())
            })
            .unwrap_or(0);
        assert_eq!(got, want, "backend {pid}'s ClientRead waits:\n{text}");
        waits += got;
    }
    eprintln!("{waits} ClientRead waits in {N} short sessions, each as bpftrace counted");
    for bad in [
        "could not be had",
        "ring was full",
        "(no statement text)",
        "could not be read back",
    ] {
        assert!(
            !text.contains(bad) && !err.contains(bad),
            "said {bad:?}:\n{text}\n{err}"
        );
    }
    wait_until(
        "pgdbg's uprobe definitions removed",
        Duration::from_secs(30),
        || tracefs_definitions_of(sup as u32).is_empty(),
    );
    assert!(
        code_is_files(&cl, cl.postmaster_pid),
        "the postmaster's code"
    );
    assert!(code_is_files(&cl, stay_pid), "the staying backend's code");
    assert_eq!(stay.query_one_i64("select 2 + 3"), 5);
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&out);
}

#[test]
fn short_sessions_statements_15() {
    short_sessions(15);
}

#[test]
fn short_sessions_statements_18() {
    short_sessions(18);
}

/// Every process of pgdbg's but its keeper (the leader, the fork server,
/// the workers and their guardians) killed at once while statements are
/// marked: the keeper closes the cluster's uprobes and removes their
/// definitions, and no process of the cluster keeps an int3: the backend
/// there, the postmaster and a backend forked afterwards run the binary's
/// code and answer.
#[test]
fn killed_all_leaves_no_uprobe_15() {
    let cl = Cluster::start(15);
    let out = temp("killed.out");
    let (p, _, _rest) = start(&cl, "marks-killed", &out);
    let sup = p.pid();
    let mut c = cl.connect();
    let pid = c.pid();
    wait_until("the new backend attached", Duration::from_secs(60), || {
        tracer_pid(pid) != 0
    });
    for i in 0..5 {
        assert_eq!(c.query_one_i64(&format!("select {i}")), i);
    }
    assert!(
        !code_is_files(&cl, pid),
        "no uprobe in the backend while marked"
    );
    let keepers = keepers_of(sup);
    assert_eq!(keepers.len(), 1, "one keeper: {keepers:?}");
    let mut all = vec![sup];
    let mut i = 0;
    while i < all.len() {
        all.extend(common::spares::children(all[i]));
        i += 1;
    }
    all.retain(|p| !keepers.contains(p));
    for p in &all {
        // SAFETY: kill(2) of pgdbg's processes, started by this test.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    wait_until("the keeper to end", Duration::from_secs(30), || {
        keepers_of(sup).is_empty()
    });
    wait_until(
        "pgdbg's uprobe definitions removed",
        Duration::from_secs(30),
        || tracefs_definitions_of(sup as u32).is_empty(),
    );
    assert!(
        code_is_files(&cl, cl.postmaster_pid),
        "the postmaster's code"
    );
    wait_until(
        "the backend's code the file's",
        Duration::from_secs(10),
        || code_is_files(&cl, pid),
    );
    wait_until("the backend released", Duration::from_secs(10), || {
        tracer_pid(pid) == 0
    });
    assert_eq!(c.query_one_i64("select 2 + 3"), 5);
    let mut d = cl.connect();
    assert_eq!(d.query_one_i64("select 7"), 7);
    assert!(code_is_files(&cl, d.pid()), "a new backend's code");
    drop(p);
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&out);
}

/// An installation under a path with a blank, which `uprobe_events` cannot
/// take as a path: pgdbg names the file by its open descriptor's `/proc`
/// link instead, so the statements are marked for the whole cluster at
/// once: a new session's statements are reported with their texts.
#[test]
fn marks_installation_with_a_blank_15() {
    let install = install_with_blank(15);
    marks_one_session(&Cluster::start_prefix(&install.prefix()), false);
}

/// Where the kernel cannot be given a uprobe definition (no tracefs: pgdbg
/// where `/sys/kernel` is hidden, as in some containers), one line says the
/// statements cannot be marked for the cluster at once, and why; each
/// worker marks its own (in-process recorders at the executor, whose
/// copies of the texts need no tracefs): a new session's statements are
/// reported with their texts.
#[test]
fn marks_where_uprobe_events_cannot_be_had_15() {
    marks_one_session(&Cluster::start(15), true);
}

/// `waits trace --quiet` across the cluster while one new session runs
/// two statements; without tracefs when `no_tracefs`.
fn marks_one_session(cl: &Cluster, no_tracefs: bool) {
    let out = temp("blank.out");
    let start = match no_tracefs {
        true => start_cluster_script_without_tracefs,
        false => start_cluster_script,
    };
    let (p, banner, rest) = start(cl, "marks-blank", &["waits trace --quiet"], &[], &out);
    for said in [
        "pgdbg: the statements cannot be marked for the whole cluster at once here (",
        "tracefs is not mounted and /sys/kernel/tracing does not exist",
        "): each backend's worker marks its own",
    ] {
        assert_eq!(banner.contains(said), no_tracefs, "{said:?}:\n{banner}");
    }
    assert!(!banner.contains("run pgdbg as root"), "{banner}");
    assert_eq!(banner.contains(SAID), !no_tracefs, "{banner}");
    let mut c = cl.connect();
    let pid = c.pid();
    wait_until("the new backend attached", Duration::from_secs(60), || {
        tracer_pid(pid) != 0
    });
    // each statement sent only once the backend waits for it (seen in
    // pg_stat_activity from another session): a client quicker than the
    // backend's return to recv(2) leaves it no ClientRead wait at all
    // (seen on a loaded machine)
    let mut m = cl.connect();
    let waits_for_client = |m: &mut Client| {
        wait_until(
            "the backend waits for its client",
            Duration::from_secs(30),
            || {
                m.simple_text(&format!(
                    "select coalesce(wait_event, '') from pg_stat_activity where pid = {pid}"
                )) == "ClientRead"
            },
        )
    };
    for _ in 0..2 {
        waits_for_client(&mut m);
        assert_eq!(c.simple_text("select 'blank'::text"), "blank");
    }
    drop(c);
    drop(m);
    wait_until("the backend ended", Duration::from_secs(30), || {
        proc_state(pid).is_empty()
    });
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(p.pid(), libc::SIGINT) };
    let (code, _, _) = p.wait(Duration::from_secs(120));
    let err = rest.join().unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(code, 0, "{text}\n{err}");
    // timed all three (the client's `select pg_backend_pid()` too: the
    // backend was held at its fork until its worker had armed); their
    // texts read by pgdbg from the backend as they arrive, which a
    // statement of microseconds may beat (said so; seen for all three on
    // a loaded machine)
    assert_eq!(
        runs(&text, pid, "select 'blank'::text")
            + runs(&text, pid, "select pg_backend_pid()")
            + runs(&text, pid, "(statement text reused before it was read)"),
        3,
        "{text}\n{err}"
    );
    // its waits, decoded from the binary's file after the session ended
    assert!(
        lines_of(&text, pid)
            .iter()
            .any(|l| l.trim_start().starts_with("Client: ClientRead")),
        "{text}"
    );
    assert!(!text.contains("could not be read back"), "{text}");
    if no_tracefs {
        // each worker's own marks: its texts copied by the in-process
        // recorder at the executor's start (no tracefs needed)
        assert!(
            (text.clone() + &err).contains("in-process recorder at standard_ExecutorStart"),
            "{text}\n{err}"
        );
        assert_eq!(
            runs(&text, pid, "(statement text reused before it was read)"),
            0
        );
    }
    cl.assert_no_crash();
    let _ = std::fs::remove_file(&out);
}
