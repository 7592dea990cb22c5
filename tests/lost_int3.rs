//! An int3 of pgdbg's that someone else takes out while a probe waits:
//! the probe cannot see the hits after that, and says so.  Seen in the
//! full suite under load (README's `plan --next --analyze` printed
//! "0 statements shown" with `execute s2(44)` run every 300 ms, PGDBG_DEBUG
//! saying "pgdbg's int3 was gone (byte 0x41): removed by someone else" at
//! standard_ExecutorStart).  A kernel uprobe's removal writes the file's
//! byte back over a 0xcc at its place; here the test does that write
//! itself, through /proc/PID/mem, while `plan --next --analyze` waits.

use common::recipes::{poke_until_exit, spawn};
use common::*;
use pgdbg_testbed as common;
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// Where `symbol` is in process `pid` (the postgres binary's load address
/// from /proc/PID/maps, the symbol's value from `nm`), and the file's
/// byte there.
fn code_address(pid: i32, binary: &std::path::Path, symbol: &str) -> (u64, u8) {
    let nm = std::process::Command::new("nm")
        .arg(binary)
        .output()
        .expect("nm");
    let value = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == symbol && f[1] == "T")
                .then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("{symbol} not in nm's output"));
    let real = std::fs::canonicalize(binary).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let base = maps
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && f[2] == "00000000" && std::path::Path::new(f[5]) == real)
                .then(|| u64::from_str_radix(f[0].split('-').next().unwrap(), 16).unwrap())
        })
        .expect("the binary's first mapping");
    let mut b = [0u8; 1];
    std::fs::File::open(&real)
        .unwrap()
        .read_exact_at(&mut b, value)
        .unwrap(); // a PIE's text: file offset = address (checked by the test's byte)
    (base + value, b[0])
}

#[test]
fn plan_next_says_its_int3_was_taken_out_15() {
    let cluster = Cluster::start(15);
    cluster.seed(&["mediumtab"]);
    let tmp = std::env::temp_dir().join(format!("pgdbg-lost-int3-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut s = cluster.connect();
    let pid = s.pid();
    s.exec("prepare s2(int) as select v from mediumtab where n = $1;");
    let (addr, file_byte) = code_address(pid, &cluster.postgres_binary(), "standard_ExecutorStart");
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))
        .unwrap();
    let byte = || {
        let mut b = [0u8; 1];
        mem.read_exact_at(&mut b, addr).unwrap();
        b[0]
    };
    assert_eq!(byte(), file_byte, "the code as the file has it");
    let log = tmp.join("analyze.out");
    let args: Vec<String> = ["attach", &pid.to_string(), "-q", "--ex"]
        .iter()
        .map(|a| a.to_string())
        .chain(["plan --next --analyze --for 4s".to_string()])
        .collect();
    let child = spawn(&args, &tmp, &log);
    wait_until(
        "pgdbg's int3 at standard_ExecutorStart",
        Duration::from_secs(60),
        || byte() == 0xcc,
    );
    // what a uprobe's removal does: the file's byte over the 0xcc
    mem.write_all_at(&[file_byte], addr).unwrap();
    let (code, out) = poke_until_exit(child, &log, || {
        s.simple_text("execute s2(44)");
    });
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("plan --analyze: 0 statements shown"), "{out}");
    assert!(
        out.contains("its breakpoint at standard_ExecutorStart")
            && out.contains("was found removed by someone else")
            && out.contains("its hits after that were not seen"),
        "pgdbg did not say its int3 was taken out:\n{out}"
    );
    assert_eq!(byte(), file_byte, "the code as the file has it after pgdbg");
    let _ = std::fs::remove_dir_all(&tmp);
    cluster.assert_no_crash();
}
