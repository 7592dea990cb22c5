//! `enable`, `disable`, `ignore`, `display`, `save breakpoints` and
//! `source` at pgdbg's prompt on a live backend (15 and 18): a disabled
//! breakpoint's int3 is out of the backend's code (read from
//! /proc/PID/mem) and back at `enable`; ignored hits are counted; displays
//! are shown at each stop; a saved file sets the breakpoints again; the
//! tables have gdb's shapes (gdb run on the same backend afterwards).

use common::*;
use pgdbg_testbed as common;
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// pgdbg's prompt on piped input (the backend stays stopped between
/// commands), each command's output read up to an `echo` marker.
struct Prompt {
    child: Child,
    stdin: ChildStdin,
    out: Arc<Mutex<String>>,
    seen: usize,
    n: usize,
}

impl Prompt {
    fn attach(pid: i32) -> Prompt {
        let mut child = Command::new(pgdbg_bin())
            .args(["attach", &pid.to_string(), "-q"])
            .env("PGDBG_HISTORY", "/dev/null")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pgdbg");
        let out = Arc::new(Mutex::new(String::new()));
        for mut r in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let o = out.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = r.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    o.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let stdin = child.stdin.take().unwrap();
        Prompt {
            child,
            stdin,
            out,
            seen: 0,
            n: 0,
        }
    }

    /// Run `line`; what it printed.
    fn run(&mut self, line: &str) -> String {
        self.n += 1;
        let mark = format!("@@{}@@", self.n);
        writeln!(self.stdin, "{line}\necho {mark}").unwrap();
        let out = self.out.clone();
        wait_until(
            &format!("'{line}' to end"),
            Duration::from_secs(120),
            || out.lock().unwrap()[self.seen..].contains(&mark),
        );
        let all = out.lock().unwrap();
        let end = self.seen + all[self.seen..].find(&mark).unwrap();
        let text = all[self.seen..end].replace("(pgdbg) ", "");
        self.seen = end + mark.len();
        text
    }

    fn quit(mut self) -> String {
        writeln!(self.stdin, "detach").unwrap();
        let st = self.child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let rest = self.out.lock().unwrap()[self.seen..].to_string();
        assert!(st.success(), "pgdbg: {st}: {rest}");
        rest
    }
}

/// The first bytes of int4mod in the backend are the file's: no int3.
fn int4mod_clean(cl: &Cluster, pid: i32) -> bool {
    code_matches_file(pid, &cl.postgres_binary(), "int4mod", 1)
}

/// The line of breakpoint `id` in an `info breakpoints` table.
fn row(table: &str, id: u32) -> String {
    table
        .lines()
        .find(|l| l.starts_with(&format!("{id} ")))
        .unwrap_or_else(|| panic!("no breakpoint {id} in:\n{table}"))
        .to_string()
}

fn breakpoint_state(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    let pid = c.pid();
    let mut p = Prompt::attach(pid);
    let out = p.run("break int4mod");
    assert!(out.contains("Breakpoint 1 at int4mod"), "{out}");
    assert!(!int4mod_clean(&cl, pid), "break wrote its int3");

    // disable: the int3 leaves the backend's code; enable: it is back
    assert_eq!(p.run("disable 1").trim(), "");
    assert!(int4mod_clean(&cl, pid), "disable took the int3 out");
    let t = p.run("info breakpoints");
    assert!(row(&t, 1).contains("breakpoint     keep n   0x"), "{t}");
    assert_eq!(p.run("enable 1").trim(), "");
    assert!(!int4mod_clean(&cl, pid), "enable put the int3 back");
    assert!(row(&p.run("info breakpoints"), 1).contains(" keep y   0x"));
    assert_eq!(p.run("enable 7").trim(), "No breakpoint number 7.");

    // ignore: the 4th of int4mod's 10 calls stops, the 3 before counted
    assert_eq!(
        p.run("ignore 1 3").trim(),
        "Will ignore next 3 crossings of breakpoint 1."
    );
    let t = p.run("info breakpoints");
    assert!(t.contains("\n\tignore next 3 hits"), "{t}");
    let h = c.spawn_text("select sum(n % 3) from generate_series(1, 10) n");
    let out = p.run("continue");
    assert!(out.contains("Breakpoint 1, int4mod ("), "{out}");
    assert!(
        p.run("print fcinfo->args[0].value").contains("= 4"),
        "the 4th call"
    );
    let t = p.run("info breakpoints");
    assert!(t.contains("\tbreakpoint already hit 4 times"), "{t}");
    assert!(!t.contains("ignore next"), "{t}");

    // display: shown at once, then at each stop, gdb's way
    let d = p.run("display fcinfo->args[0].value");
    assert_eq!(d.trim(), "1: fcinfo->args[0].value = 4");
    let d = p.run("display/x fcinfo->args[0].value + 10");
    assert_eq!(d.trim(), "2: /x fcinfo->args[0].value + 10 = 0xe");
    let e = p.run("display no_such_thing");
    assert!(e.contains("no_such_thing"), "refused: {e}");
    assert_eq!(
        p.run("info display").trim(),
        "Auto-display expressions now in effect:\nNum Enb Expression\n\
         1:   y  fcinfo->args[0].value\n2:   y  /x fcinfo->args[0].value + 10"
    );
    let out = p.run("continue");
    assert!(
        out.contains("\n1: fcinfo->args[0].value = 5\n2: /x fcinfo->args[0].value + 10 = 0xf"),
        "{out}"
    );
    p.run("undisplay 1");
    let out = p.run("continue");
    assert!(!out.contains("1: fcinfo"), "{out}");
    assert!(
        out.contains("2: /x fcinfo->args[0].value + 10 = 0x10"),
        "{out}"
    );
    p.run("undisplay");
    assert_eq!(
        p.run("info display").trim(),
        "There are no auto-display expressions now."
    );
    // display/i: x's instruction line at each stop, => at the pc
    let d = p.run("display/i $pc");
    assert!(d.trim().starts_with("3: x/i $pc\n=> 0x"), "{d}");
    assert!(d.contains(" <int4mod") && d.contains(">:\t"), "{d}");
    assert_eq!(
        p.run("info display").trim(),
        "Auto-display expressions now in effect:\nNum Enb Expression\n3:   y  /1bi $pc"
    );

    // disabled: the remaining calls do not stop; the statement's end does
    p.run("disable");
    assert!(int4mod_clean(&cl, pid));
    p.run("break standard_ExecutorEnd");
    p.run("condition 1 fcinfo->args[0].value > 100");
    let out = p.run("continue");
    assert!(
        out.contains("Breakpoint 2, standard_ExecutorEnd ("),
        "{out}"
    );
    assert!(
        out.contains("\n3: x/i $pc\n=> 0x") && out.contains(" <standard_ExecutorEnd"),
        "{out}"
    );
    p.run("undisplay 3");
    let t = p.run("info breakpoints");
    assert!(row(&t, 1).contains(" keep n "), "{t}");
    assert!(t.contains("\tbreakpoint already hit 6 times"), "{t}");

    // save, delete, source: the same breakpoints again, 1 still disabled
    let file = std::env::temp_dir().join(format!("pgdbg-save-{major}-{}.gdb", std::process::id()));
    let out = p.run(&format!("save breakpoints {}", file.display()));
    assert_eq!(out.trim(), format!("Saved to file '{}'.", file.display()));
    let saved = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        saved,
        "break int4mod\n  condition $bpnum fcinfo->args[0].value > 100\ndisable $bpnum\n\
         break standard_ExecutorEnd\n"
    );
    p.run("delete");
    let out = p.run(&format!("source {}", file.display()));
    assert!(
        out.contains("Breakpoint 3 at int4mod")
            && out.contains("Breakpoint 4 at standard_ExecutorEnd"),
        "{out}"
    );
    let t = p.run("info breakpoints");
    assert!(row(&t, 3).contains(" keep n "), "{t}");
    assert!(row(&t, 4).contains(" keep y "), "{t}");
    assert!(
        t.contains("\tstop only if fcinfo->args[0].value > 100"),
        "{t}"
    );
    assert!(
        int4mod_clean(&cl, pid),
        "a disabled breakpoint sourced: no int3"
    );
    let _ = std::fs::remove_file(&file);

    p.quit();
    assert_eq!(c.rejoin(h).unwrap(), "10", "the statement's result");
    assert_eq!(tracer_pid(pid), 0);
    assert!(int4mod_clean(&cl, pid));
    cl.assert_no_crash();
}

#[test]
fn enable_disable_ignore_display_save_source_15() {
    breakpoint_state(15);
}

#[test]
fn enable_disable_ignore_display_save_source_18() {
    breakpoint_state(18);
}
