//! A library unloaded (or its code unmapped) while pgdbg has a breakpoint
//! in it, and other memory mapped at the same address afterwards: pgdbg
//! must not write the library's old byte into what is there now, neither
//! at detach nor when the guardian restores the backend.  The process is
//! a small C fixture (tests/fixtures/dlreload.c) that loads
//! tests/fixtures/dlreload_lib.c with dlopen.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

fn library() -> PathBuf {
    let out = std::env::temp_dir().join(format!(
        "pgdbg-fixture-dlreload_lib-{}.so",
        std::process::id()
    ));
    if !out.exists() {
        let st = Command::new("gcc")
            .args(["-O2", "-g", "-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(repo().join("tests/fixtures/dlreload_lib.c"))
            .status()
            .expect("gcc");
        assert!(st.success(), "compiling dlreload_lib.c failed");
    }
    out
}

struct Fixture {
    child: Child,
    out: BufReader<ChildStdout>,
    lib_fn: u64,
    stop_fn: u64,
}

impl Fixture {
    fn start(mode: &str, fill: u8) -> Fixture {
        let mut child = Command::new(c_fixture("dlreload"))
            .arg(library())
            .arg(mode)
            .arg(format!("{fill:02x}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let line = Self::line_of(&mut out);
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(w.first(), Some(&"ready"), "{line}");
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let (lib_fn, stop_fn) = (hex(w[1]), hex(w[2]));
        Fixture {
            child,
            out,
            lib_fn,
            stop_fn,
        }
    }
    fn line_of(out: &mut BufReader<ChildStdout>) -> String {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        line.trim().to_string()
    }
    fn line(&mut self) -> String {
        Self::line_of(&mut self.out)
    }
    fn go(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    /// The byte at `addr` in the fixture, int3s included.
    fn byte(&self, addr: u64) -> Option<u8> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(format!("/proc/{}/mem", self.pid())).ok()?;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, addr).ok()?;
        Some(b[0])
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// pgdbg attached with breakpoints in the library and on fx_stop, in
/// `continue` once both int3s are written; the fixture is then let go
/// (unload, new mapping filled with `fill`, fx_stop).
fn unload_under_breakpoint(mode: &str, fill: u8) -> (Fixture, Pgdbg) {
    let mut fx = Fixture::start(mode, fill);
    let pid = fx.pid().to_string();
    // by address: a script's locations are checked before attaching, in
    // the binary and the server's libraries, which this one is not
    let lib_bp = format!("break *{:#x}", fx.lib_fn);
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid,
            "--any-process",
            "-q",
            "--ex",
            &lib_bp,
            "--ex",
            "break fx_stop",
            "--ex",
            "continue",
        ],
        fx.pid(),
    );
    wait_until("both int3s written", Duration::from_secs(30), || {
        fx.byte(fx.lib_fn) == Some(0xcc) && fx.byte(fx.stop_fn) == Some(0xcc)
    });
    fx.go();
    (fx, p)
}

/// dlclose: the dynamic linker's hook tells pgdbg the library is gone (the
/// hook is armed for any breakpoint in a library, not only for pending
/// ones); the new page holds int3 bytes, so only pgdbg's own record, not
/// the byte there, can tell that the old byte must not be written.
#[test]
fn dlclose_under_a_breakpoint_then_other_memory_there() {
    let (mut fx, p) = unload_under_breakpoint("dlclose", 0xcc);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("its library was unloaded"), "{out}\n{err}");
    assert_eq!(fx.line(), "mapped");
    assert_eq!(tracer_pid(fx.pid()), 0);
    fx.go();
    assert_eq!(
        fx.line(),
        "byte cc",
        "pgdbg wrote into memory mapped after the unload\n{out}\n{err}"
    );
}

/// The library's code unmapped without the dynamic linker (no hook runs):
/// detach finds no int3 of its own there and writes nothing.
#[test]
fn code_unmapped_behind_pgdbg_then_other_memory_there() {
    let (mut fx, p) = unload_under_breakpoint("munmap", 0x00);
    let (code, out, err) = p.wait(Duration::from_secs(60));
    assert_eq!(fx.line(), "mapped", "{out}\n{err}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(tracer_pid(fx.pid()), 0);
    fx.go();
    assert_eq!(
        fx.line(),
        "byte 00",
        "pgdbg wrote into memory mapped after the unmap\n{out}\n{err}"
    );
}
