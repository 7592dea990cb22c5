//! bpftrace as a yardstick: a program started and waited for until its
//! probes are attached (its BEGIN probe fires after them), ended with
//! SIGINT, the maps it prints then read back.  scripts/test installs it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const READY: &str = "pgdbg-test-bpftrace-ready";

pub struct Bpftrace {
    child: Child,
    lines: mpsc::Receiver<String>,
}

/// What bpftrace printed of its maps at its end: map -> key -> value.
pub type Maps = HashMap<String, HashMap<String, i64>>;

impl Bpftrace {
    pub fn start(program: &str) -> Bpftrace {
        let prog = format!("BEGIN {{ printf(\"{READY}\\n\"); }} {program}");
        let mut child = Command::new("bpftrace")
            .arg("-e")
            .arg(&prog)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run bpftrace (scripts/test installs it): {e}"));
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        loop {
            match lines.recv_timeout(Duration::from_secs(60)) {
                Ok(l) if l == READY => break,
                Ok(_) => {}
                Err(e) => {
                    let _ = child.kill();
                    panic!("bpftrace did not attach its probes: {e:?}\n{prog}");
                }
            }
        }
        Bpftrace { child, lines }
    }

    /// End it (SIGINT: it prints its maps) and read them.
    pub fn stop(mut self) -> Maps {
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let mut maps = Maps::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(60)) {
            // @name[key]: value
            let Some((lhs, v)) = l.split_once("]: ") else {
                continue;
            };
            let (Some((name, key)), Ok(v)) = (lhs.split_once('['), v.trim().parse()) else {
                continue;
            };
            maps.entry(name.trim_start_matches('@').to_string())
                .or_default()
                .insert(key.to_string(), v);
        }
        let _ = self.child.wait();
        maps
    }
}

impl Drop for Bpftrace {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
