//! Another tool's uprobe (perf probe, bpftrace: a kernel uprobe, opened
//! here as they open it) on GetCachedPlan while `plancache` records there
//! with its in-process recorder, on a backend of a `pgbench -M prepared`
//! client, both orders, 20 times each:
//! * recorder first: the uprobe's int3 lands on the jump's first byte;
//!   pgdbg undoes the jump (at the backend's trap or its next poll), says
//!   so in one line and goes on with a stop at each decision; the uprobe
//!   counts its hits and is removed while pgdbg still runs;
//! * uprobe first: `plancache` says in one line that it stops at each
//!   decision instead, and goes on so; the uprobe is removed meanwhile;
//! * on an idle backend, a uprobe placed and removed again before any
//!   call: pgdbg's polls find it (over the jump, or gone with the file's
//!   first byte back before the jump's rel32) and undo the jump before the
//!   backend runs into it.
//!
//! Every time: the same backend serves pgbench throughout, no crash in
//! the server's log, and once both are gone the code is the file's and no
//! page of pgdbg is left.

use common::*;
use pgdbg::perf::UprobeCounter;
use pgdbg_testbed as common;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

/// Each order, on one backend (`PGDBG_UPROBE_ROUNDS` for fewer while debugging).
fn rounds() -> usize {
    std::env::var("PGDBG_UPROBE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}
const TAKEN: &str = "plancache: another tool placed a uprobe on GetCachedPlan (perf, bpftrace): pgdbg's recorder there is removed; plancache goes on with a stop at each decision";
const FALLBACK: &str =
    "is at GetCachedPlan: no in-process recorder there; stopping at each decision instead";

fn byte_at(pid: i32, addr: u64) -> u8 {
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8; 1];
    mem.read_exact_at(&mut b, addr).unwrap();
    b[0]
}

/// A `pgbench -M prepared` client running for `secs`, and its backend.
fn pgbench(cl: &Cluster, secs: u32) -> (Child, i32) {
    let script = std::env::temp_dir().join(format!("pgdbg-uprobe-{}.sql", std::process::id()));
    std::fs::write(&script, "\\set n random(1, 1000)\nselect :n::int + 1;\n").unwrap();
    let child = std::process::Command::new(cl.bin.join("pgbench"))
        .args([
            "-n",
            "-M",
            "prepared",
            "-c",
            "1",
            "-T",
            &secs.to_string(),
            "-f",
        ])
        .arg(&script)
        .args(["-h", cl.dir.to_str().unwrap(), "-U", "postgres", "postgres"])
        .env("PGAPPNAME", "pgdbg-test-uprobe")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut c = cl.connect();
    let mut bpid = 0;
    // pgbench may open a short-lived connection first (on a loaded machine
    // it can last longer than the moment below): a backend that has run
    // the script's statement, still there a moment later
    wait_until("pgbench's backend", Duration::from_secs(20), || {
        let q = "select coalesce(max(pid), 0)::text from pg_stat_activity where application_name = 'pgdbg-test-uprobe' and query like '%::int + 1%'";
        let first: i32 = c.simple_text(q).parse().unwrap();
        if first == 0 {
            return false;
        }
        std::thread::sleep(Duration::from_millis(300));
        bpid = c.simple_text(q).parse().unwrap();
        bpid == first
    });
    (child, bpid)
}

struct Setup {
    bpid: i32,
    exe: PathBuf,
    bin: PathBuf,
    offset: u64,
    at: u64,
    maps_before: Vec<String>,
    /// The server's log, shown when the backend is found gone.
    log: PathBuf,
}

impl Setup {
    fn uprobe(&self) -> UprobeCounter {
        UprobeCounter::open(&self.exe, self.offset, self.bpid).unwrap_or_else(|e| {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "a uprobe at {}+{:#x} in {}: {e}; the server's log ends with:\n{}",
                self.exe.display(),
                self.offset,
                self.bpid,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
    }

    /// `plancache` on the backend, its output to `out` and its errors to
    /// `err_file(out)` (shown when a wait for the output fails).
    fn plancache(&self, out: &Path) -> Pgdbg {
        let child = std::process::Command::new(pgdbg_bin())
            .args([
                "attach",
                &self.bpid.to_string(),
                "-q",
                "--ex",
                "plancache --for 300s",
            ])
            .env_remove("DEBUGINFOD_URLS")
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(std::fs::File::create(err_file(out)).unwrap())
            .spawn()
            .expect("spawn pgdbg");
        let mut p = Pgdbg { child };
        p.wait_attached(self.bpid);
        p
    }

    /// pgdbg ended by SIGTERM, the backend left as it was.
    fn end(&self, p: Pgdbg, out: &Path, round: &str) -> String {
        unsafe {
            libc::kill(p.pid(), libc::SIGTERM);
        }
        let (code, _, _) = p.wait(Duration::from_secs(60));
        let err = std::fs::read_to_string(err_file(out)).unwrap_or_default();
        let text = std::fs::read_to_string(out).unwrap_or_default();
        assert_eq!(code, 143, "{round}: {text}\n{err}");
        wait_until("untraced", Duration::from_secs(10), || {
            tracer_pid(self.bpid) == 0
        });
        text
    }

    /// Whether the backend is there and pgbench still running on it.
    fn serving(&self, bench: &mut Child) -> bool {
        Path::new(&format!("/proc/{}", self.bpid)).exists() && bench.try_wait().unwrap().is_none()
    }

    /// The uprobe is gone and so is pgdbg: the file's code, no page of
    /// pgdbg, the same backend serving pgbench.
    fn check_restored(&self, cl: &Cluster, bench: &mut Child, round: &str) {
        wait_until(
            &format!("{round}: GetCachedPlan's code as the file has it"),
            Duration::from_secs(20),
            || mapped_code_matches_file(self.bpid, &self.bin, &self.exe, "GetCachedPlan", 32),
        );
        assert_eq!(
            anon_exec_maps(self.bpid),
            self.maps_before,
            "{round}: no page of pgdbg left"
        );
        assert!(
            Path::new(&format!("/proc/{}", self.bpid)).exists(),
            "{round}: the backend is gone"
        );
        assert!(
            bench.try_wait().unwrap().is_none(),
            "{round}: pgbench ended (its backend died?)"
        );
        cl.assert_no_crash();
    }
}

fn err_file(out: &Path) -> PathBuf {
    out.with_extension("err")
}

/// Wait (at most 30 s) until the recorder's jump is at `at` in process
/// `pid`; panics with pgdbg's output (in `out` and its error file).
fn wait_jump(pid: i32, at: u64, out: &Path, round: &str) {
    let t0 = std::time::Instant::now();
    while byte_at(pid, at) != 0xe9 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{round}: the recorder's jump not written in 30 s; pgdbg's output:\n{}\n{}",
            std::fs::read_to_string(out).unwrap_or_default(),
            std::fs::read_to_string(err_file(out)).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait (at most 30 s) until pgdbg's output in `out` satisfies `f`;
/// panics with the output.
fn wait_output(out: &Path, what: &str, f: impl Fn(&str) -> bool) {
    wait_output_with(out, what, f, String::new)
}

/// `wait_output`, with `more()` in the panic's text (the backend's state).
fn wait_output_with(out: &Path, what: &str, f: impl Fn(&str) -> bool, more: impl Fn() -> String) {
    let t0 = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        if f(&text) {
            return;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            let err = std::fs::read_to_string(err_file(out)).unwrap_or_default();
            let err_tail: Vec<&str> = err.lines().rev().take(60).collect();
            panic!(
                "timed out waiting for {what}; {}pgdbg's output ends with:\n{}\nits errors with:\n{}",
                more(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
                err_tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Decision lines after the first line containing `mark`.
/// The executions accounted for after the line with `mark`: each decision
/// printed, and each one said not seen (an entry the stops passed: an
/// interrupt's stop on the int3 right after another tool's uprobe ran).
fn decisions_after(text: &str, mark: &str) -> usize {
    text.lines()
        .skip_while(|l| !l.contains(mark))
        .map(|l| {
            if l.contains(" plan  ") {
                1
            } else if let Some(r) = l.strip_prefix("plancache: ")
                && r.contains(" not seen ")
            {
                r.split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            } else {
                0
            }
        })
        .sum()
}

fn uprobe_over_recorder(major: u32) {
    let cl = Cluster::start(major);
    let (mut bench, bpid) = pgbench(&cl, 3600);
    let exe = std::fs::read_link(format!("/proc/{bpid}/exe")).unwrap();
    let (vaddr, offset) = symbol_in_file(&exe, "GetCachedPlan");
    let s = Setup {
        bpid,
        at: runtime(bpid, &exe, vaddr),
        bin: cl.postgres_binary(),
        exe,
        offset,
        maps_before: anon_exec_maps(bpid),
        log: cl.dir.join("postmaster.log"),
    };
    let out = std::env::temp_dir().join(format!("pgdbg-uprobe-{major}-{}.out", std::process::id()));
    let read = || std::fs::read_to_string(&out).unwrap_or_default();
    for i in 0..rounds() {
        // the recorder first, then the uprobe
        let round = format!("{major} recorder then uprobe #{i}");
        let p = s.plancache(&out);
        wait_jump(bpid, s.at, &out, &round);
        wait_output(&out, &format!("{round}: a decision recorded"), |t| {
            t.contains(" plan  ")
        });
        let probe = s.uprobe();
        wait_until(
            &format!("{round}: the uprobe's hits, or the backend's end"),
            Duration::from_secs(30),
            || probe.count().unwrap() > 0 || !s.serving(&mut bench),
        );
        assert!(
            s.serving(&mut bench),
            "{round}: the backend died:\n{}\n{}",
            read(),
            cl.log()
        );
        wait_output(
            &out,
            &format!("{round}: the line and decisions with stops"),
            |t| decisions_after(t, TAKEN) >= 3,
        );
        drop(probe);
        // stops after the uprobe's removal too
        let n = decisions_after(&read(), TAKEN);
        wait_output(
            &out,
            &format!("{round}: decisions after the uprobe's removal"),
            |t| decisions_after(t, TAKEN) >= n + 3,
        );
        let text = s.end(p, &out, &round);
        assert_eq!(text.matches(TAKEN).count(), 1, "{round}: {text}");
        assert!(!text.contains("Program received signal"), "{round}: {text}");
        s.check_restored(&cl, &mut bench, &round);

        // the uprobe first, then the recorder
        let round = format!("{major} uprobe then recorder #{i}");
        let probe = s.uprobe();
        wait_until(
            &format!("{round}: the uprobe's int3"),
            Duration::from_secs(10),
            || byte_at(bpid, s.at) == 0xcc,
        );
        let p = s.plancache(&out);
        wait_output(
            &out,
            &format!("{round}: the line and decisions with stops"),
            |t| decisions_after(t, FALLBACK) >= 3,
        );
        assert!(probe.count().unwrap() > 0, "{round}: the uprobe counts on");
        drop(probe);
        let n = decisions_after(&read(), FALLBACK);
        wait_output(
            &out,
            &format!("{round}: decisions after the uprobe's removal"),
            |t| decisions_after(t, FALLBACK) >= n + 3,
        );
        let text = s.end(p, &out, &round);
        let line = text
            .lines()
            .find(|l| l.contains(FALLBACK))
            .unwrap_or_else(|| panic!("{round}: {text}"));
        assert!(
            line.starts_with("plancache: an int3 that is not pgdbg's (a kernel uprobe"),
            "{line}"
        );
        s.check_restored(&cl, &mut bench, &round);
    }
    // an idle backend: a uprobe placed and removed before any call, so
    // seen by pgdbg's polls only (over the jump, or gone again with the
    // file's first byte back before the jump's rel32)
    let mut c = cl.connect();
    let cpid = c.pid();
    let idle = Setup {
        bpid: cpid,
        maps_before: anon_exec_maps(cpid),
        ..s
    };
    c.exec("prepare q(int) as select $1 + 1");
    for (i, open_for) in [50u64, 0, 50, 0].into_iter().enumerate() {
        let round = format!("{major} idle #{i}");
        let p = idle.plancache(&out);
        wait_until(
            &format!("{round}: the recorder's jump"),
            Duration::from_secs(30),
            || byte_at(cpid, idle.at) == 0xe9,
        );
        let probe = idle.uprobe();
        std::thread::sleep(Duration::from_millis(open_for));
        drop(probe);
        wait_output(&out, &format!("{round}: the line"), |t| t.contains(TAKEN));
        for k in 0..8 {
            assert_eq!(
                c.query_one_i64(&format!("execute q({k})")),
                k + 1,
                "{round}"
            );
        }
        // the last one is reported at the end
        wait_output(&out, &format!("{round}: decisions with stops"), |t| {
            decisions_after(t, TAKEN) >= 7
        });
        let text = idle.end(p, &out, &round);
        assert_eq!(decisions_after(&text, TAKEN), 8, "{round}: {text}");
        // the kernel takes its int3 out when the uprobe's event is freed,
        // which may come after the close (as in `check_restored`)
        let t0 = std::time::Instant::now();
        let mut differs;
        loop {
            differs = mapped_code_differs(cpid, &idle.bin, &idle.exe, "GetCachedPlan", 32);
            if differs.is_none() || t0.elapsed() > Duration::from_secs(20) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(differs, None, "{round}");
        assert_eq!(
            anon_exec_maps(cpid),
            idle.maps_before,
            "{round}: no page of pgdbg left"
        );
        assert_eq!(c.query_one_i64("execute q(41)"), 42, "{round}");
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(err_file(&out));
    let _ = bench.kill();
    let _ = bench.wait();
    cl.assert_no_crash();
}

/// The first original instruction boundary past GetCachedPlan's first
/// byte and inside the recorder's five-byte jump, decoded from the file.
fn boundary_inside_jump(exe: &Path, offset: u64) -> u64 {
    let mut code = [0u8; 32];
    std::fs::File::open(exe)
        .unwrap()
        .read_exact_at(&mut code, offset)
        .unwrap();
    let mut dec = iced_x86::Decoder::new(64, &code, iced_x86::DecoderOptions::NONE);
    let k = dec.decode().len() as u64;
    assert!(
        (1..5).contains(&k),
        "GetCachedPlan's first instruction: {code:02x?}"
    );
    k
}

fn file_bytes(exe: &Path, offset: u64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    std::fs::File::open(exe)
        .unwrap()
        .read_exact_at(&mut b, offset)
        .unwrap();
    b
}

fn read_to(out: &Path) -> String {
    std::fs::read_to_string(out).unwrap_or_default()
}

/// A uprobe placed at an original instruction boundary inside the
/// recorder's jump (its int3 lands in the jump's rel32, not on byte 0),
/// on an idle backend so that pgdbg's poll finds it before the backend
/// runs into the jump: the jump is undone around the uprobe's int3, the
/// backend runs its own code through the uprobe (which counts), and once
/// pgdbg has detached and the uprobe is gone the code is the file's.
fn uprobe_inside_jump(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let cpid = c.pid();
    let exe = std::fs::read_link(format!("/proc/{cpid}/exe")).unwrap();
    let (vaddr, offset) = symbol_in_file(&exe, "GetCachedPlan");
    let k = boundary_inside_jump(&exe, offset);
    let s = Setup {
        bpid: cpid,
        at: runtime(cpid, &exe, vaddr),
        bin: cl.postgres_binary(),
        offset: offset + k,
        exe,
        maps_before: anon_exec_maps(cpid),
        log: cl.dir.join("postmaster.log"),
    };
    c.exec("prepare q(int) as select $1 + 1");
    let out = std::env::temp_dir().join(format!(
        "pgdbg-uprobe-in-{major}-{}.out",
        std::process::id()
    ));
    let round = format!("{major} uprobe at GetCachedPlan+{k}");
    let p = s.plancache(&out);
    wait_until(
        &format!("{round}: the recorder's jump"),
        Duration::from_secs(30),
        || byte_at(cpid, s.at) == 0xe9,
    );
    let probe = s.uprobe();
    assert_eq!(byte_at(cpid, s.at + k), 0xcc, "{round}: the uprobe's int3");
    // (the statements first, the line's wording after: a jump left with
    // the uprobe's int3 in its rel32 fails them)
    wait_output(&out, &format!("{round}: the line"), |t| {
        t.contains("pgdbg's recorder there is removed")
    });
    for i in 0..8 {
        assert_eq!(
            c.query_one_i64(&format!("execute q({i})")),
            i + 1,
            "{round}"
        );
    }
    assert!(probe.count().unwrap() >= 8, "{round}: the uprobe counts");
    assert!(read_to(&out).contains(TAKEN), "{round}: {}", read_to(&out));
    // (the last one is reported at the end)
    wait_output_with(
        &out,
        &format!("{round}: decisions with stops"),
        |t| decisions_after(t, TAKEN) >= 7,
        || {
            format!(
                "GetCachedPlan's first 8 bytes {:02x?} (the file's {:02x?}), uprobe hits {:?}; ",
                (0..8).map(|i| byte_at(cpid, s.at + i)).collect::<Vec<_>>(),
                file_bytes(&s.exe, s.offset - k, 8),
                probe.count()
            )
        },
    );
    let text = s.end(p, &out, &round);
    assert!(!text.contains("Program received signal"), "{round}: {text}");
    // pgdbg gone, the uprobe still there: the original code around its int3
    assert_eq!(c.query_one_i64("execute q(41)"), 42, "{round}");
    drop(probe);
    for i in 0..4 {
        assert_eq!(
            c.query_one_i64(&format!("execute q({i})")),
            i + 1,
            "{round}"
        );
    }
    wait_until(
        &format!("{round}: GetCachedPlan's code as the file has it"),
        Duration::from_secs(20),
        || mapped_code_matches_file(cpid, &s.bin, &s.exe, "GetCachedPlan", 32),
    );
    assert_eq!(
        anon_exec_maps(cpid),
        s.maps_before,
        "{round}: no page of pgdbg left"
    );
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(err_file(&out));
    cl.assert_no_crash();
}

/// The original instruction boundaries at GetCachedPlan+2..+4 (inside
/// the recorder's jump's rel32 past its low byte), decoded from the file.
fn boundaries_in_rel32(exe: &Path, offset: u64) -> Vec<u64> {
    let mut code = [0u8; 32];
    std::fs::File::open(exe)
        .unwrap()
        .read_exact_at(&mut code, offset)
        .unwrap();
    let dec = iced_x86::Decoder::new(64, &code, iced_x86::DecoderOptions::NONE);
    let mut at = 0u64;
    let mut out = Vec::new();
    for ins in dec {
        at += ins.len() as u64;
        if at >= 5 {
            break;
        }
        if at >= 2 {
            out.push(at);
        }
    }
    out
}

/// A uprobe at an original instruction boundary at GetCachedPlan+2..+4
/// while `plancache` records there and pgbench calls it without pause:
/// the backend may run the jump with the uprobe's int3 (or, the uprobe
/// gone again, the file's byte) in its rel32 before pgdbg's next look,
/// which makes it lead far off (up to gigabytes with +4).  It lands on
/// one of the recorder's reserved landing pages, traps there, and is put
/// back at the function's start: no crash, the same backend serves
/// pgbench throughout.  20 rounds, the boundaries in turn, the uprobe
/// kept until pgdbg has said so, or removed again at once; each time the
/// code is the file's afterwards and no page of pgdbg is left.
fn uprobe_in_rel32_under_load(major: u32) {
    let cl = Cluster::start(major);
    let (mut bench, bpid) = pgbench(&cl, 3600);
    let exe = std::fs::read_link(format!("/proc/{bpid}/exe")).unwrap();
    let (vaddr, offset) = symbol_in_file(&exe, "GetCachedPlan");
    let ks = boundaries_in_rel32(&exe, offset);
    assert!(
        !ks.is_empty(),
        "no instruction boundary at GetCachedPlan+2..+4 in this build"
    );
    let mut s = Setup {
        bpid,
        at: runtime(bpid, &exe, vaddr),
        bin: cl.postgres_binary(),
        exe,
        offset,
        maps_before: anon_exec_maps(bpid),
        log: cl.dir.join("postmaster.log"),
    };
    let out = std::env::temp_dir().join(format!(
        "pgdbg-uprobe-rel32-{major}-{}.out",
        std::process::id()
    ));
    let read = || std::fs::read_to_string(&out).unwrap_or_default();
    for i in 0..rounds() {
        let k = ks[i % ks.len()];
        let keep = (i / ks.len()).is_multiple_of(2);
        let round = format!(
            "{major} uprobe at GetCachedPlan+{k} #{i} ({})",
            if keep { "kept" } else { "removed at once" }
        );
        s.offset = offset + k;
        let p = s.plancache(&out);
        wait_jump(bpid, s.at, &out, &round);
        wait_output(&out, &format!("{round}: a decision recorded"), |t| {
            t.contains(" plan  ")
        });
        // the code page and at least one landing page
        let pages = anon_exec_maps(bpid)
            .into_iter()
            .filter(|m| !s.maps_before.contains(m))
            .count();
        assert!(pages >= 2, "{round}: the recorder's pages: {pages}");
        let probe = s.uprobe();
        if keep {
            wait_until(
                &format!("{round}: the uprobe's hits, or the backend's end"),
                Duration::from_secs(30),
                || probe.count().unwrap() > 0 || !s.serving(&mut bench),
            );
        }
        drop(probe);
        assert!(
            s.serving(&mut bench),
            "{round}: the backend died:\n{}\n{}",
            read(),
            cl.log()
        );
        wait_output(
            &out,
            &format!("{round}: the line and decisions with stops"),
            |t| decisions_after(t, TAKEN) >= 3,
        );
        let text = s.end(p, &out, &round);
        assert_eq!(text.matches(TAKEN).count(), 1, "{round}: {text}");
        assert!(!text.contains("Program received signal"), "{round}: {text}");
        s.check_restored(&cl, &mut bench, &round);
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(err_file(&out));
    let _ = bench.kill();
    let _ = bench.wait();
    cl.assert_no_crash();
}

/// Another patcher's change to the recorder's jump that is no uprobe's
/// (its own `jmp` written over ours, on an idle backend so that it is not
/// run): pgdbg's poll finds it, writes nothing there (the bytes stay
/// theirs, no breakpoint either), says so, and leaves its recorder's pages
/// mapped (their code may lead into them); once they have put the file's
/// bytes back, the backend runs on and the code is the file's.
fn changed_jump_left_alone(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let cpid = c.pid();
    let exe = std::fs::read_link(format!("/proc/{cpid}/exe")).unwrap();
    let (vaddr, offset) = symbol_in_file(&exe, "GetCachedPlan");
    let s = Setup {
        bpid: cpid,
        at: runtime(cpid, &exe, vaddr),
        bin: cl.postgres_binary(),
        offset,
        exe,
        maps_before: anon_exec_maps(cpid),
        log: cl.dir.join("postmaster.log"),
    };
    c.exec("prepare q(int) as select $1 + 1");
    let out = std::env::temp_dir().join(format!(
        "pgdbg-changed-jump-{major}-{}.out",
        std::process::id()
    ));
    let round = format!("{major} another patcher's jmp over the recorder's");
    let p = s.plancache(&out);
    wait_until(
        &format!("{round}: the recorder's jump"),
        Duration::from_secs(30),
        || byte_at(cpid, s.at) == 0xe9,
    );
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{cpid}/mem"))
        .unwrap();
    let mut file_bytes = [0u8; 5];
    std::fs::File::open(&s.exe)
        .unwrap()
        .read_exact_at(&mut file_bytes, s.offset)
        .unwrap();
    // their jmp (to just past itself: never run here, the backend idles)
    let theirs = [0xe9u8, 0, 0, 0, 0];
    mem.write_all_at(&theirs, s.at).unwrap();
    const CHANGED: &str = "plancache: another program changed the code under pgdbg's recorder at GetCachedPlan: pgdbg writes nothing there (no breakpoint either) and leaves its recorder's pages mapped in the backend (that code may lead into them); no decision is seen from now on";
    wait_output(&out, &format!("{round}: the line"), |t| t.contains(CHANGED));
    let mut now = [0u8; 5];
    mem.read_exact_at(&mut now, s.at).unwrap();
    assert_eq!(now, theirs, "{round}: pgdbg wrote over their bytes");
    // they go: the file's bytes back
    mem.write_all_at(&file_bytes, s.at).unwrap();
    for i in 0..8 {
        assert_eq!(
            c.query_one_i64(&format!("execute q({i})")),
            i + 1,
            "{round}"
        );
    }
    let text = s.end(p, &out, &round);
    assert_eq!(text.matches(CHANGED).count(), 1, "{round}: {text}");
    assert_eq!(decisions_after(&text, CHANGED), 0, "{round}: {text}");
    assert!(!text.contains("Program received signal"), "{round}: {text}");
    assert_eq!(c.query_one_i64("execute q(41)"), 42, "{round}");
    assert!(
        mapped_code_matches_file(cpid, &s.bin, &s.exe, "GetCachedPlan", 32),
        "{round}"
    );
    // the recorder's code page is still there, as said
    let maps = anon_exec_maps(cpid);
    assert!(
        maps.iter().any(|m| !s.maps_before.contains(m)),
        "{round}: the recorder's page was unmapped: {maps:?}"
    );
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(err_file(&out));
    cl.assert_no_crash();
}

#[test]
fn changed_jump_left_alone_15() {
    changed_jump_left_alone(15);
}

#[test]
fn uprobe_inside_jump_15() {
    uprobe_inside_jump(15);
}

#[test]
fn uprobe_inside_jump_18() {
    uprobe_inside_jump(18);
}

#[test]
fn uprobe_in_rel32_under_load_15() {
    uprobe_in_rel32_under_load(15);
}

#[test]
fn uprobe_in_rel32_under_load_18() {
    uprobe_in_rel32_under_load(18);
}

#[test]
fn uprobe_over_recorder_15() {
    uprobe_over_recorder(15);
}

#[test]
fn uprobe_over_recorder_18() {
    uprobe_over_recorder(18);
}
