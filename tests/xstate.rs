//! Inferior calls leave the CPU's whole extended state as they found it, on
//! whatever CPU runs the suite: a C fixture (tests/fixtures/xstate.c) holds
//! known values in the x87 stack and control word, MXCSR, XMM/YMM, and ZMM0-31
//! and k0-7 where the CPU has AVX-512, stops in probe_point() with all of them
//! live, pgdbg calls functions that overwrite them (the fixture's own
//! clobber_all() and glibc's vector memset), and the fixture compares every
//! register after it resumes.  The size pgdbg saves is compared with CPUID's.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

struct Fixture {
    child: Child,
    lines: mpsc::Receiver<String>,
    level: u32,
    xsave: usize,
}

impl Fixture {
    fn start(env: &[(&str, &str)]) -> Fixture {
        let mut cmd = Command::new(c_fixture("xstate"));
        cmd.stdout(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out: ChildStdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let ready = lines.recv_timeout(Duration::from_secs(10)).expect("ready");
        let field = |k: &str| -> usize {
            ready
                .split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .unwrap_or_else(|| panic!("{k} in {ready}"))
                .parse()
                .unwrap()
        };
        Fixture {
            level: field("level=") as u32,
            xsave: field("xsave="),
            child,
            lines,
        }
    }

    fn after_call_line(&self) -> String {
        loop {
            let l = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .expect("the fixture reports the round with the calls");
            if l.starts_with("after-call") {
                return l;
            }
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cpu_flag(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|w| w == flag))
}

fn calls(fx: &Fixture, tag: &str) -> (i32, String, String) {
    let script = write_script(
        &format!("xstate-{tag}"),
        &[
            "break probe_point",
            "continue",
            "info",
            "call clobber_all()",
            "call fill(scratch, 85, 8192)",
            "print scratch[8191]",
            "print clobbered",
            "detach",
        ],
    );
    pgdbg(&[
        "attach",
        &fx.child.id().to_string(),
        "--any-process",
        "-q",
        "--script",
        script.to_str().unwrap(),
    ])
}

/// The widest registers this CPU has are checked: ZMM and opmask registers
/// on an AVX-512 CPU, YMM with AVX.
#[test]
fn calls_leave_every_vector_and_x87_register_as_found() {
    let fx = Fixture::start(&[]);
    let want_level = if cpu_flag("avx512f") {
        2
    } else if cpu_flag("avx") {
        1
    } else {
        0
    };
    assert_eq!(
        fx.level, want_level,
        "the fixture checks the widest registers"
    );
    let (code, out, err) = calls(&fx, "widest");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("= 85 'U'"), "memset ran in the fixture: {out}");
    assert!(
        out.contains("clobbered = 1") || out.contains("= 1\n"),
        "{out}"
    );
    // the size pgdbg saved is CPUID leaf 0xD's for the enabled features
    let cpu_line = out
        .lines()
        .find(|l| l.starts_with("cpu state:"))
        .unwrap_or_else(|| panic!("no cpu state line in info: {out}"));
    assert!(
        cpu_line.contains(&format!(" {} bytes", fx.xsave)),
        "pgdbg's xstate size vs CPUID 0xD EBX {}: {cpu_line}",
        fx.xsave
    );
    let l = fx.after_call_line();
    assert!(
        l.ends_with(" ok"),
        "registers changed by the calls pgdbg made: {l}"
    );
}

/// The same on the narrower register sets (what a CPU without AVX-512, or
/// without AVX, has): each level's check sees a clobber when there is one.
#[test]
fn the_fixture_sees_a_clobber_and_pgdbg_undoes_it_at_every_level() {
    for level in 0..=want_max_level() {
        let lv = level.to_string();
        let fx = Fixture::start(&[("XSTATE_LEVEL", &lv), ("XSTATE_SELF_CLOBBER", "1")]);
        let l = fx.after_call_line();
        assert!(
            l.contains("MISMATCH") && l.contains(" mxcsr") && l.contains(" st7"),
            "level {level}: the fixture's own clobber must be seen: {l}"
        );
        drop(fx);
        let fx = Fixture::start(&[("XSTATE_LEVEL", &lv)]);
        let (code, out, err) = calls(&fx, &format!("level{level}"));
        assert_eq!(code, 0, "{out}\n{err}");
        let l = fx.after_call_line();
        assert!(l.ends_with(" ok"), "level {level}: {l}");
    }
}

fn want_max_level() -> u32 {
    if cpu_flag("avx512f") {
        2
    } else if cpu_flag("avx") {
        1
    } else {
        0
    }
}
