//! README.md's recipes, run as written against a real PostgreSQL 15: each
//! `$ pgdbg ...` command of the README (its PID and cluster directory
//! replaced by this test's) runs in the situation the README describes,
//! and every output line the README shows must have a line of the same
//! shape in pgdbg's output (numbers, addresses and column widths aside),
//! except the few named below whose content depends on the machine (which
//! function a sample lands in, whether a block was cached).  A recipe the
//! test does not know fails it, so the README cannot drift from pgdbg.

mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One `$ ...` command of a README code block and the output lines shown.
#[derive(Debug)]
struct Recipe {
    command: String,
    output: Vec<String>,
}

fn readme_recipes() -> Vec<Recipe> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut out: Vec<Recipe> = Vec::new();
    let mut in_block = false;
    for line in readme.lines() {
        if line.trim().is_empty() {
            continue; // a blank line inside a code block does not end it
        }
        let Some(code) = line.strip_prefix("    ") else {
            in_block = false;
            continue;
        };
        if let Some(cmd) = code.strip_prefix("$ ") {
            out.push(Recipe {
                command: cmd.to_string(),
                output: Vec::new(),
            });
            in_block = true;
        } else if in_block {
            out.last_mut().unwrap().output.push(code.to_string());
        }
    }
    out
}

/// A line's shape: numbers and addresses as N, whitespace runs as one space.
fn shape(line: &str) -> String {
    let mut s = String::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            if c == '0' && chars.get(i + 1) == Some(&'x') {
                i += 2;
                while i < chars.len() && chars[i].is_ascii_hexdigit() {
                    i += 1;
                }
            } else {
                while i < chars.len()
                    && (chars[i].is_ascii_digit()
                        || (chars[i] == '.'
                            && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit())))
                {
                    i += 1;
                }
            }
            s.push('N');
            continue;
        }
        if c.is_whitespace() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            s.push(' ');
            continue;
        }
        s.push(c);
        i += 1;
    }
    s.trim().to_string()
}

/// Every README line of `r` (but "..." and those containing one of
/// `varies`) has a line of the same shape in `got`.
fn check(r: &Recipe, got: &str, varies: &[&str]) {
    let have: BTreeSet<String> = got.lines().map(shape).collect();
    for want in &r.output {
        if want.trim() == "..." || want.trim().is_empty() || varies.iter().any(|v| want.contains(v))
        {
            continue;
        }
        assert!(
            have.contains(&shape(want)),
            "README's `$ {}` shows\n  {want}\nbut pgdbg printed no line of that shape:\n{got}",
            r.command
        );
    }
}

/// The README command as arguments for pgdbg: the shell's quotes, a
/// trailing `# comment` and `> /dev/null` removed, the README's PID and
/// `$PGDBG_CLUSTER` replaced.
fn args_of(command: &str, pid: i32, dir: &Path) -> Vec<String> {
    let command = command.split("  #").next().unwrap().trim();
    let command = command.trim_end_matches("> /dev/null").trim();
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in command.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    args.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        args.push(cur);
    }
    assert_eq!(args[0], "pgdbg", "{command}");
    args.remove(0);
    args.into_iter()
        .map(|a| {
            a.replace("5261", &pid.to_string())
                .replace("$PGDBG_CLUSTER", dir.to_str().unwrap())
        })
        .collect()
}

/// pgdbg in `cwd`, to completion: status, stdout followed by stderr.
fn run(args: &[String], cwd: &Path) -> (i32, String) {
    let out = Command::new(pgdbg_bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null())
        .output()
        .expect("run pgdbg");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// pgdbg in the background, its stdout and stderr into `log`.
fn spawn(args: &[String], cwd: &Path, log: &Path) -> Child {
    let f = std::fs::File::create(log).unwrap();
    Command::new(pgdbg_bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null())
        .stdout(Stdio::from(f.try_clone().unwrap()))
        .stderr(Stdio::from(f))
        .spawn()
        .expect("spawn pgdbg")
}

/// `poke` (a statement of the session) until pgdbg has what it waits for
/// and exits: a statement run before pgdbg armed its probe is not seen,
/// the next one is.  Returns its status and output.
fn poke_until_exit(mut child: Child, log: &Path, mut poke: impl FnMut()) -> (i32, String) {
    let t0 = std::time::Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code().unwrap_or(-1);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "pgdbg did not finish:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        poke();
        std::thread::sleep(Duration::from_millis(300));
    };
    (code, std::fs::read_to_string(log).unwrap())
}

/// Until `log` holds `marker` (what pgdbg says once its probe is armed).
fn wait_said(log: &Path, marker: &str) {
    wait_until(marker, Duration::from_secs(60), || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains(marker)
    });
}

const MD5_LOOP: &str = "select count(distinct md5(v||g)) from mediumtab, generate_series(1,4) g;";
const SLEEPY_SCAN: &str = "select count(*) from (select n from mediumtab where n % 50 = 0 offset 0) s where pg_sleep(0.0005) is not null;";

#[test]
fn readme_recipes_on_15() {
    let cluster = Cluster::start(15);
    cluster.seed(&["mediumtab"]);
    let tmp = std::env::temp_dir().join(format!("pgdbg-readme-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut s = cluster.connect();
    let pid = s.pid();
    // the session of the README's examples
    s.exec("set max_parallel_workers_per_gather = 0");
    s.exec("prepare s2(int) as select v from mediumtab where n = $1;");
    s.exec(
        "create function bump(k int) returns int language plpgsql as $$ begin perform pg_sleep(0); return k + 1; end $$",
    );
    s.query_one_i64("select bump(0)"); // plpgsql.so loaded, as in the README
    let recipes = readme_recipes();
    let mut done = BTreeSet::new();
    let find = |key: &str| -> &Recipe {
        recipes
            .iter()
            .find(|r| r.command.contains(key))
            .unwrap_or_else(|| panic!("README has no `$ pgdbg` recipe with {key:?}"))
    };

    // pgdbg ps
    let r = find("pgdbg ps");
    let (code, out) = run(&args_of(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["/bin/postgres -D"]);
    done.insert(r.command.clone());

    // plancache: custom then generic
    let r = find("plancache --count");
    let log = tmp.join("plancache.out");
    let child = spawn(&args_of(&r.command, pid, &cluster.dir), &tmp, &log);
    wait_said(&log, "plancache: watching");
    for i in 1..=7 {
        s.simple_text(&format!("execute s2({i})"));
    }
    let (code, out) = poke_until_exit(child, &log, || {});
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    done.insert(r.command.clone());

    // plan and wait, then profile, of a running statement
    let h = s.spawn_text(MD5_LOOP);
    cluster.wait_active(&[pid], "count(distinct md5");
    let r = find("--ex plan --ex wait");
    let (code, out) = run(&args_of(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["on CPU"]); // or the wait it is in at that instant
    done.insert(r.command.clone());
    let r = find("pgdbg profile");
    let (code, out) = run(&args_of(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["md5_calc", "datumGetSize", "ExecInterpExpr"]); // where samples land
    done.insert(r.command.clone());
    cluster.cancel(&[pid]);
    let _ = s.rejoin(h);

    // plan --progress and waits trace of a slow scan
    let h = s.spawn_text(SLEEPY_SCAN);
    cluster.wait_active(&[pid], "pg_sleep(0.0005)");
    let r = find("plan --progress");
    let (code, out) = run(&args_of(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["executing now"]);
    done.insert(r.command.clone());
    let r = find("waits trace");
    let (code, out) = run(&args_of(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["DataFileRead"]); // only when a block was not cached
    done.insert(r.command.clone());
    cluster.cancel(&[pid]);
    let _ = s.rejoin(h);

    // plan --next --analyze of the next execute
    let r = find("plan --next --analyze");
    let log = tmp.join("analyze.out");
    let child = spawn(&args_of(&r.command, pid, &cluster.dir), &tmp, &log);
    let (code, out) = poke_until_exit(child, &log, || {
        s.simple_text("execute s2(44)");
    });
    assert_eq!(code, 0, "{out}");
    check(r, &out, &["Buffers:"]); // hits or reads, by the cache
    done.insert(r.command.clone());

    // a breakpoint in PL/pgSQL
    let r = find("exec_stmt_perform");
    let log = tmp.join("break.out");
    let child = spawn(&args_of(&r.command, pid, &cluster.dir), &tmp, &log);
    let (code, out) = poke_until_exit(child, &log, || {
        let h = s.spawn_text("select bump(41)");
        assert_eq!(s.rejoin(h).unwrap(), "42");
    });
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    done.insert(r.command.clone());

    // many backends under pgbench, scripted, and the report
    let script = tmp.join("pb.sql");
    std::fs::write(
        &script,
        "\\set n random(1, 1000000)\nselect v from mediumtab where n = :n;\n",
    )
    .unwrap();
    let mut bench = Command::new(cluster.bin.join("pgbench"))
        .args(["-n", "-M", "prepared", "-c", "3", "-T", "60", "-f"])
        .arg(&script)
        .args([
            "-h",
            cluster.dir.to_str().unwrap(),
            "-U",
            "postgres",
            "postgres",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pgbench");
    wait_until("pgbench's clients", Duration::from_secs(30), || {
        cluster.connect().query_one_i64(
            "select count(*) from pg_stat_activity where application_name = 'pgbench'",
        ) == 3
    });
    let r = find("attach --cluster");
    let mut args = args_of(&r.command, pid, &cluster.dir);
    for a in args.iter_mut().filter(|a| a.starts_with("scripts/")) {
        *a = repo().join(&*a).to_str().unwrap().to_string();
    }
    let (code, out) = run(&args, &tmp);
    let _ = bench.kill();
    let _ = bench.wait();
    assert_eq!(code, 0, "{out}");
    done.insert(r.command.clone());
    let r = find("pgdbg report");
    let (code, out) = run(&args_of(&r.command, pid, &cluster.dir), &tmp);
    assert_eq!(code, 0, "{out}");
    check(r, &out, &[]);
    done.insert(r.command.clone());

    let all: BTreeSet<String> = recipes.iter().map(|r| r.command.clone()).collect();
    let untested: Vec<&String> = all.difference(&done).collect();
    assert!(
        untested.is_empty(),
        "README recipes this test does not run: {untested:?}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
    cluster.assert_no_crash();
}
