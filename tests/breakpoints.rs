//! Breakpoints that cannot harm the backend or pgdbg: `break *ADDRESS` only
//! on an instruction's first byte, FILE:LINE within the file's lines, a hot
//! breakpoint that never stops the user (pgdbg's memory and mappings stay
//! flat, it runs near `count`'s speed, SIGINT ends it), and a damaged name
//! index cache (detected, said, rebuilt).

use common::*;
use pgdbg_testbed as common;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A statement that calls AllocSetAlloc about ten times per iteration, for
/// much longer than any test runs (cancelled at the end).
const ALLOC_LOOP: &str =
    "do $$ begin for i in 1..2000000000 loop perform repeat('x', 10); end loop; end $$";

/// The one line of a failed pgdbg, with a non-zero exit.
fn one_line_error(code: i32, err: &str) -> String {
    assert_ne!(code, 0, "exit status must be non-zero; stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got:\n{err}");
    assert!(lines[0].starts_with("pgdbg: error: "), "{}", lines[0]);
    lines[0].to_string()
}

/// Link-time address and bytes of `symbol` in `binary`.
fn function_code(binary: &Path, symbol: &str) -> (u64, Vec<u8>) {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym = file
        .symbols()
        .find(|s| s.name().ok() == Some(symbol))
        .unwrap_or_else(|| panic!("no symbol {symbol}"));
    let (addr, size) = (sym.address(), sym.size());
    assert!(size > 0, "{symbol} has no size");
    let sec = file
        .sections()
        .find(|s| addr >= s.address() && addr < s.address() + s.size())
        .unwrap();
    let bytes = sec.data_range(addr, size).unwrap().unwrap().to_vec();
    (addr, bytes)
}

/// Offsets (from the function's start) where its instructions start,
/// decoded with iced-x86 like the debugger does, plus the end.
fn instruction_starts(addr: u64, code: &[u8]) -> Vec<u64> {
    let mut d = iced_x86::Decoder::with_ip(64, code, addr, iced_x86::DecoderOptions::NONE);
    let mut v = Vec::new();
    while d.can_decode() {
        v.push(d.ip() - addr);
        let _ = d.decode();
    }
    v.push(code.len() as u64);
    v
}

/// The runtime address of a function in backend `pid`, as pgdbg says it.
fn runtime_address(pid: i32, function: &str) -> u64 {
    let (code, out, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        &format!("info address {function}"),
    ]);
    assert_eq!(code, 0, "{err}");
    let hex = out
        .split("at address 0x")
        .nth(1)
        .unwrap_or_else(|| panic!("no address in: {out}"))
        .trim_end_matches(|c: char| !c.is_ascii_hexdigit());
    u64::from_str_radix(hex, 16).unwrap()
}

fn bad_locations(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let bin = cl.postgres_binary();
    let (link, code) = function_code(&bin, "AllocSetAlloc");
    let starts = instruction_starts(link, &code);
    // the first offset inside an instruction, and its neighbours
    let i = starts
        .windows(2)
        .position(|w| w[1] - w[0] > 1)
        .expect("an instruction longer than one byte");
    let (before, after) = (starts[i], starts[i + 1]);
    let mid = before + 1;
    let base = runtime_address(pid, "AllocSetAlloc");
    let want = format!(
        "not the start of an instruction in AllocSetAlloc (AllocSetAlloc+{mid}; instructions start at AllocSetAlloc+{before} and +{after})"
    );

    // A numeric address inside an instruction: refused once attached,
    // before any byte is written; the backend runs on untouched.
    let (c, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        &format!("break *{:#x}", base + mid),
        "--ex",
        "continue",
    ]);
    let line = one_line_error(c, &err);
    assert!(
        line.contains(&format!("{:#x}: {want}", base + mid)),
        "{line}\nwanted: {want}"
    );
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(pid, &bin, "AllocSetAlloc", code.len()));
    assert_eq!(a.simple_text("select repeat('x', 3)"), "xxx");

    // The same by name: refused before attaching.
    let (c, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        &format!("break *AllocSetAlloc+{mid}"),
    ]);
    let line = one_line_error(c, &err);
    assert!(line.contains(&want), "{line}\nwanted: {want}");

    // Line numbers start at 1, and end with the file's code.
    let (c, _, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "break aset.c:0"]);
    let line = one_line_error(c, &err);
    assert!(line.contains("aset.c:0: line numbers start at 1"), "{line}");
    let (c, _, err) = pgdbg(&[
        "attach",
        &pid.to_string(),
        "-q",
        "--ex",
        "break aset.c:999999",
    ]);
    let line = one_line_error(c, &err);
    assert!(
        line.contains("aset.c:999999 is past the last line with code in aset.c (line "),
        "{line}"
    );
    // An address in no function of the binary.
    let (c, _, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "break *0x10"]);
    let line = one_line_error(c, &err);
    assert!(
        line.contains("0x10: not in a function of the postgres binary"),
        "{line}"
    );
    assert_eq!(tracer_pid(pid), 0);

    // A real instruction start inside the function still works: the
    // backend stops there and goes on after the detach.
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            &format!("break *{:#x}", base + after),
            "--ex",
            "continue",
            "--ex",
            "print $pc",
            "--ex",
            "detach",
        ],
        pid,
    );
    std::thread::sleep(Duration::from_millis(300));
    let h = a.spawn_text("select repeat('y', 3)");
    let (c, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(c, 0, "{out}\n{err}");
    assert!(out.contains("Breakpoint 1, "), "{out}");
    assert!(out.contains(&format!("{:#x}", base + after)), "{out}");
    assert_eq!(a.rejoin(h).unwrap(), "yyy");
    assert!(code_matches_file(pid, &bin, "AllocSetAlloc", code.len()));
    cl.assert_no_crash();
}

#[test]
fn bad_break_locations_are_refused_15() {
    bad_locations(15);
}

#[test]
fn bad_break_locations_are_refused_18() {
    bad_locations(18);
}

fn status_kb(pid: i32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn mappings(pid: i32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// One ptrace stop of the backend is one voluntary context switch (for
/// `count` the two agree exactly): a busy loop makes no others.
fn stops(backend: i32) -> u64 {
    status_kb(backend, "voluntary_ctxt_switches")
}

/// pgdbg running `args` on the busy `backend` for `secs` after a second of
/// warm-up, then SIGINT: (hits/s, growth of pgdbg's mappings, growth of its
/// RSS in kB, stdout).  pgdbg must exit within 5 s of the SIGINT.
fn hot_run(backend: i32, args: &[&str], secs: u64) -> (f64, i64, i64, String) {
    let pid_s = backend.to_string();
    let mut all = vec!["attach", &pid_s, "-q"];
    all.extend_from_slice(args);
    let p = Pgdbg::spawn_attached(&all, backend);
    std::thread::sleep(Duration::from_secs(1));
    let me = p.pid();
    let (m0, r0, s0, t0) = (
        mappings(me),
        status_kb(me, "VmRSS"),
        stops(backend),
        Instant::now(),
    );
    std::thread::sleep(Duration::from_secs(secs));
    let (m1, r1, s1) = (mappings(me), status_kb(me, "VmRSS"), stops(backend));
    let rate = (s1 - s0) as f64 / t0.elapsed().as_secs_f64();
    unsafe {
        libc::kill(me, libc::SIGINT);
    }
    let t = Instant::now();
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "pgdbg {args:?} took {:?} to exit after SIGINT",
        t.elapsed()
    );
    assert_eq!(code, 130, "{args:?}: exit status\n{out}\n{err}");
    assert_eq!(tracer_pid(backend), 0);
    (rate, m1 as i64 - m0 as i64, r1 as i64 - r0 as i64, out)
}

fn hot_breakpoint(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let h = a.spawn_text(ALLOC_LOOP);
    std::thread::sleep(Duration::from_millis(500));
    // the reference: pgdbg's own call counter on the same loop
    let (count_rate, _, _, out) = hot_run(pid, &["--ex", "count AllocSetAlloc --ptrace"], 3);
    assert!(out.contains("AllocSetAlloc"), "{out}");
    let silent = write_script(
        &format!("silent{major}"),
        &[
            "break AllocSetAlloc",
            "commands",
            "silent",
            "continue",
            "end",
            "continue",
        ],
    );
    for args in [
        vec![
            "--ex",
            "break AllocSetAlloc if size == 99999",
            "--ex",
            "continue",
        ],
        vec!["--script", silent.to_str().unwrap()],
    ] {
        let (rate, maps, rss, out) = hot_run(pid, &args, 5);
        eprintln!(
            "{major} {args:?}: {rate:.0} hits/s (count {count_rate:.0}/s), mappings {maps:+}, RSS {rss:+} kB"
        );
        // nothing kept per hit: no mapping, no memory
        assert!(maps.abs() <= 4, "{args:?}: pgdbg's mappings grew by {maps}");
        assert!(rss <= 8 * 1024, "{args:?}: pgdbg's RSS grew by {rss} kB");
        // a hit that does not stop the user costs about what `count` pays
        // per call (measured at 0.7 of count; it was 0.005)
        assert!(
            rate >= 0.2 * count_rate,
            "{args:?}: {rate:.0} hits/s, count does {count_rate:.0}/s"
        );
        // SIGINT (Ctrl-C) stopped it where it was, and said so
        assert!(out.contains("Program stopped (interrupted"), "{out}");
        assert!(code_matches_file(
            pid,
            &cl.postgres_binary(),
            "AllocSetAlloc",
            32
        ));
    }
    let mut b = cl.connect();
    b.exec(&format!("select pg_cancel_backend({pid})"));
    let r = a.rejoin(h);
    assert!(
        r.as_ref().is_err_and(|e| e.contains("canceling statement")),
        "{r:?}"
    );
    assert_eq!(a.simple_text("select 1"), "1");
    cl.assert_no_crash();
}

#[test]
fn hot_breakpoint_keeps_pgdbg_flat_and_fast_15() {
    hot_breakpoint(15);
}

#[test]
fn hot_breakpoint_keeps_pgdbg_flat_and_fast_18() {
    hot_breakpoint(18);
}

/// pgdbg with its own index cache directory: (status, stdout, stderr).
fn with_cache(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(pgdbg_bin())
        .args(args)
        .env("PGDBG_INDEX_CACHE", dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The address `info breakpoints` shows for breakpoint 1 (one location).
fn breakpoint_address(dir: &Path, pid: i32) -> (u64, String) {
    let (c, out, err) = with_cache(
        dir,
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break AllocSetAlloc",
            "--ex",
            "info breakpoints",
        ],
    );
    assert_eq!(c, 0, "{out}\n{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("1 ") && l.contains("in AllocSetAlloc"))
        .unwrap_or_else(|| panic!("no breakpoint line in: {out}"));
    let hex = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("0x"))
        .unwrap();
    (u64::from_str_radix(hex, 16).unwrap(), err)
}

fn index_cache(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    let pid = a.pid();
    let dir = std::env::temp_dir().join(format!("pgdbg-idx-{major}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (fresh, err) = breakpoint_address(&dir, pid);
    assert!(!err.contains("did not verify"), "{err}");
    let file: PathBuf = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .expect("an index cache file");
    let good = std::fs::read(&file).unwrap();
    let note = format!("pgdbg: index cache {} did not verify (", file.display());

    // A change that keeps the file decodable: AllocSetAlloc's address in
    // the index moved by 8 (the map key, its length first, then the
    // locations: a count, then address, inlined, DIE of each).
    let (link, _) = function_code(&cl.postgres_binary(), "AllocSetAlloc");
    let mut key = 13u64.to_le_bytes().to_vec();
    key.extend_from_slice(b"AllocSetAlloc");
    let at = good
        .windows(key.len())
        .position(|w| w == key)
        .expect("AllocSetAlloc in the index")
        + key.len();
    assert_eq!(good[at..at + 8], 1u64.to_le_bytes(), "one location");
    assert_eq!(good[at + 8..at + 16], link.to_le_bytes(), "its address");
    let mut moved = good.clone();
    moved[at + 8..at + 16].copy_from_slice(&(link + 8).to_le_bytes());
    // a byte flipped in the middle; the file cut short
    let mut flipped = good.clone();
    let mid = good.len() / 2;
    flipped[mid] ^= 0xff;
    let cut = good[..good.len() - 100].to_vec();

    for (what, bytes, reason) in [
        ("address moved by 8", moved, "(checksum); rebuilt"),
        ("byte flipped", flipped, "(checksum); rebuilt"),
        ("truncated", cut, "(truncated); rebuilt"),
    ] {
        std::fs::write(&file, &bytes).unwrap();
        let (addr, err) = breakpoint_address(&dir, pid);
        let line = err
            .lines()
            .find(|l| l.starts_with(&note))
            .unwrap_or_else(|| panic!("{what}: no 'did not verify' line in: {err}"));
        assert!(line.ends_with(reason), "{what}: {line}");
        assert_eq!(addr, fresh, "{what}: breakpoint address from a bad cache");
        // rebuilt and stored again: the next attach uses it silently
        let (addr, err) = breakpoint_address(&dir, pid);
        assert!(!err.contains("did not verify"), "{what}: {err}");
        assert_eq!(addr, fresh);
    }
    assert_eq!(tracer_pid(pid), 0);
    assert_eq!(a.simple_text("select 2"), "2");
    let _ = std::fs::remove_dir_all(&dir);
    cl.assert_no_crash();
}

#[test]
fn damaged_index_cache_is_rebuilt_15() {
    index_cache(15);
}

#[test]
fn damaged_index_cache_is_rebuilt_18() {
    index_cache(18);
}

/// The function name of a `bt` line (`#N  fn (...)` or `#N  0x... in fn (...)`).
fn frame_name(l: &str) -> String {
    let w: Vec<&str> = l.split_whitespace().collect();
    let name = if w[1].starts_with("0x") && w.get(2) == Some(&"in") {
        w[3]
    } else {
        w[1]
    };
    name.split(['(', '+']).next().unwrap().to_string()
}

/// `break int4mod [if 1]`, `continue`, `bt`, `up` on a backend running a
/// statement that calls int4mod: (stdout of pgdbg, frame names of `bt`).
fn stop_and_walk(cl: &Cluster, location: &str) -> (String, Vec<String>) {
    let mut c = cl.connect();
    let pid = c.pid();
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            location,
            "--ex",
            "continue",
            "--ex",
            "bt",
            "--ex",
            "up",
            "--ex",
            "detach",
        ],
        pid,
    );
    // queued on the socket until pgdbg has set the breakpoint and resumed
    let h = c.spawn_text("select sum(n % 3) from generate_series(1, 10) n");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "pgdbg failed:\n{out}\n{err}");
    assert_eq!(c.rejoin(h).unwrap(), "10", "the statement's result");
    assert_eq!(tracer_pid(pid), 0);
    // `bt`'s lines, then `up`'s frame line (the last line that starts with '#')
    let mut frames: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    let up = frames.pop().unwrap_or_default();
    assert!(
        up.starts_with("#1 ") && frames.len() > 1 && frame_name(up) == frame_name(frames[1]),
        "up did not select frame 1:\n{out}"
    );
    let names = frames.iter().map(|l| frame_name(l)).collect();
    (out, names)
}

/// A breakpoint's condition is evaluated at the stop with a partial unwind
/// (frame 0 only); once the condition holds, `bt` shows the whole stack as
/// it does without a condition, and `up` selects the caller.
fn bt_after_conditional_stop(major: u32) {
    let cl = Cluster::start(major);
    let (plain_out, plain) = stop_and_walk(&cl, "break int4mod");
    assert!(
        plain.len() > 5 && plain[0] == "int4mod" && plain.iter().any(|f| f == "PostgresMain"),
        "the whole stack without a condition:\n{plain_out}"
    );
    let (out, names) = stop_and_walk(&cl, "break int4mod if 1");
    assert!(out.contains("Breakpoint 1, int4mod ("), "{out}");
    assert_eq!(
        names, plain,
        "bt after the conditional stop:\n{out}\nwithout the condition:\n{plain_out}"
    );
    cl.assert_no_crash();
}

#[test]
fn bt_after_conditional_stop_15() {
    bt_after_conditional_stop(15);
}

#[test]
fn bt_after_conditional_stop_18() {
    bt_after_conditional_stop(18);
}

/// `frame function NAME` selects the innermost frame of NAME, numbered as
/// `bt` numbers it, and shows it as `frame N` does.
fn frame_function(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break int4mod",
            "--ex",
            "continue",
            "--ex",
            "bt",
            "--ex",
            "frame function PostgresMain",
            "--ex",
            "echo selected:\\n",
            "--ex",
            "frame",
            "--ex",
            "detach",
        ],
        pid,
    );
    let h = c.spawn_text("select sum(n % 3) from generate_series(1, 10) n");
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "pgdbg failed:\n{out}\n{err}");
    assert_eq!(c.rejoin(h).unwrap(), "10", "the statement's result");
    assert_eq!(tracer_pid(pid), 0);
    let (bt, after) = out.split_once("selected:").expect("the echo");
    let frames: Vec<&str> = bt.lines().filter(|l| l.starts_with('#')).collect();
    // bt's lines, then the line of `frame function`
    let (chosen, bt) = frames.split_last().expect("frame lines");
    let level = bt
        .iter()
        .position(|l| frame_name(l) == "PostgresMain")
        .unwrap_or_else(|| panic!("PostgresMain in bt:\n{out}"));
    assert!(
        chosen.starts_with(&format!("#{level} ")) && frame_name(chosen) == "PostgresMain",
        "frame function PostgresMain selected frame {level}:\n{out}"
    );
    // `frame` shows the same frame: it stays selected
    let again = after
        .lines()
        .find(|l| l.starts_with('#'))
        .unwrap_or_default();
    assert_eq!(again, *chosen, "{out}");
    cl.assert_no_crash();
}

#[test]
fn frame_function_selects_the_innermost_frame_15() {
    frame_function(15);
}

#[test]
fn frame_function_selects_the_innermost_frame_18() {
    frame_function(18);
}
