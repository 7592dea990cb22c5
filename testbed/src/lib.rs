//! Test harness: real PostgreSQL clusters started by the tests themselves
//! (through scripts/pg-cluster, as an unprivileged user), client sessions,
//! and the pgdbg binary.  One crate for every test file under tests/
//! (`use pgdbg_testbed as common;`): compiled once, not once per test file.
#![allow(dead_code)]

pub mod bpftrace;
pub mod container;
pub mod debuginfod;
pub mod ex;
pub mod profile_files;
pub mod recipes;
pub mod running;
pub mod seccomp;
pub mod spares;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The repository: this crate's parent directory.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testbed/ has a parent directory")
        .to_path_buf()
}

/// The pgdbg binary.  The helpers below run it without `DEBUGINFOD_URLS`
/// (a developer's shell may set it: stripped targets would then ask the
/// servers); tests/debuginfod.rs sets its own.
/// Cargo builds it beside the test executables' directory
/// (`target/PROFILE/pgdbg` for `target/PROFILE/deps/TEST-HASH`).
pub fn pgdbg_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test executable's path");
        let bin = exe
            .parent()
            .and_then(Path::parent)
            .map(|profile| profile.join("pgdbg"))
            .unwrap_or_else(|| panic!("{}: not in target/PROFILE/deps", exe.display()));
        assert!(
            bin.is_file(),
            "no pgdbg executable at {} (the tests run from cargo's target/PROFILE/deps)",
            bin.display()
        );
        bin
    })
    .clone()
}

/// The majors that come as release builds without DWARF (the npm package
/// of scripts/pg-embedded): no Debian source package of theirs builds here.
pub const EMBEDDED_MAJORS: &[u32] = &[14, 16, 17];

/// Install prefix of a PostgreSQL build: $PGDBG_PG<major>, else
/// scripts/pg-build (cached after the first build), or scripts/pg-embedded
/// for the majors of `EMBEDDED_MAJORS`.
/// `psql -X -At -c SQL -c SQL ... postgres` on cluster `cl`'s socket: one
/// Query message per `-c`.
pub fn psql_c(cl: &Cluster, sqls: &[&str]) -> Command {
    let mut c = Command::new(cl.bin.join("psql"));
    c.args([
        "-h",
        cl.dir.to_str().unwrap(),
        "-U",
        "postgres",
        "-X",
        "-At",
    ]);
    for s in sqls {
        c.args(["-c", s]);
    }
    c.arg("postgres");
    c
}

/// `pgdbg attach --cluster DIR --script S --for 600s MORE...` on cluster
/// `cl`, the script the `lines` (a file named after `name`), its standard
/// output to `out`.
pub fn spawn_cluster(cl: &Cluster, name: &str, lines: &[&str], more: &[&str], out: &Path) -> Pgdbg {
    spawn_cluster_in(&[], cl, name, lines, more, out)
}

/// [`spawn_cluster`] run by the command `wrapper` (which execs its
/// arguments: pgdbg keeps the wrapper's PID).
fn spawn_cluster_in(
    wrapper: &[&str],
    cl: &Cluster,
    name: &str,
    lines: &[&str],
    more: &[&str],
    out: &Path,
) -> Pgdbg {
    let script = write_script(name, lines);
    let mut args = vec![
        "attach",
        "--cluster",
        cl.dir.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--for",
        "600s",
    ];
    args.extend(more);
    Pgdbg::spawn_to_file_in(wrapper, &args, out)
}

/// [`spawn_cluster`], then its standard error up to the line that says the
/// script runs (returned), the rest read by the thread returned, and its
/// workers started ahead listening for forks (at least 3; a backend there
/// before has its own worker besides them).
pub fn start_cluster_script(
    cl: &Cluster,
    name: &str,
    lines: &[&str],
    more: &[&str],
    out: &Path,
) -> (Pgdbg, String, std::thread::JoinHandle<String>) {
    start_cluster_script_in(&[], cl, name, lines, more, out)
}

/// [`start_cluster_script`] with pgdbg in a mount namespace of its own
/// where `/sys/kernel` is an empty read-only tmpfs: no tracefs can be
/// found or mounted (as in a container that hides `/sys/kernel`), while
/// the uprobe perf events (`/sys/bus/event_source`) stay.
pub fn start_cluster_script_without_tracefs(
    cl: &Cluster,
    name: &str,
    lines: &[&str],
    more: &[&str],
    out: &Path,
) -> (Pgdbg, String, std::thread::JoinHandle<String>) {
    let wrapper = [
        "unshare",
        "--mount",
        "--",
        "sh",
        "-c",
        "mount -t tmpfs -o ro,size=4k none /sys/kernel && exec \"$0\" \"$@\"",
    ];
    start_cluster_script_in(&wrapper, cl, name, lines, more, out)
}

fn start_cluster_script_in(
    wrapper: &[&str],
    cl: &Cluster,
    name: &str,
    lines: &[&str],
    more: &[&str],
    out: &Path,
) -> (Pgdbg, String, std::thread::JoinHandle<String>) {
    let mut p = spawn_cluster_in(wrapper, cl, name, lines, more, out);
    let mut err = stderr_reader(&mut p);
    let banner = read_until(&mut err, "running the script", Duration::from_secs(60));
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        rest
    });
    let sup = p.pid();
    wait_until("workers started ahead", Duration::from_secs(60), || {
        spares::spares_listening(sup) >= 3
    });
    (p, banner, rest)
}

/// A copy of PostgreSQL `major`'s installation in a directory whose name
/// has a blank (a path the kernel's `uprobe_events` cannot take as text:
/// pgdbg names the file by its open descriptor instead), removed
/// when the returned guard is dropped.
pub fn install_with_blank(major: u32) -> BlankInstall {
    let dir = std::env::temp_dir().join(format!("pgdbg blank {}-{major}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(pg_prefix(major))
        .arg(dir.join("pg"))
        .status()
        .expect("cp");
    assert!(st.success(), "cp -a of the installation");
    BlankInstall(dir)
}

/// See [`install_with_blank`]; `.prefix()` is the installation.
pub struct BlankInstall(PathBuf);

impl BlankInstall {
    pub fn prefix(&self) -> PathBuf {
        self.0.join("pg")
    }
}

impl Drop for BlankInstall {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_ok(c: &mut Command) -> String {
    let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        o.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A copy at `dest` of PostgreSQL `major`'s installation (`cp -a`; what
/// was at `dest` removed first).
pub fn copy_install(major: u32, dest: &Path) {
    let _ = std::fs::remove_dir_all(dest);
    run_ok(Command::new("cp").arg("-a").arg(pg_prefix(major)).arg(dest));
}

/// `files` (paths under the installation `dest`) through `dwz -m`, as
/// Debian's and Fedora's debug packages are: the DIEs they share moved
/// into `dest/common.debug`, which each names by the path `alt`
/// (`.gnu_debugaltlink`).  dwz leaves a file it cannot shrink as it is
/// (the server's binary: "not beneficial"); the first of `files` must
/// have been rewritten.  Then all of `dest` is made readable by all (the
/// server runs as another user).  Returns the supplementary file.
pub fn dwz_multifile(dest: &Path, alt: &str, files: &[&str]) -> PathBuf {
    let common = dest.join("common.debug");
    let _ = Command::new("dwz")
        .arg("-m")
        .arg(&common)
        .args(["-M", alt])
        .args(files.iter().map(|f| dest.join(f)))
        .output()
        .expect("dwz (apt-get install dwz)");
    let first = dest.join(files[0]);
    let link = run_ok(
        Command::new("readelf")
            .args(["-p", ".gnu_debugaltlink"])
            .arg(&first),
    );
    assert!(
        link.contains(alt),
        "{} has no altlink to {alt}:\n{link}",
        first.display()
    );
    run_ok(Command::new("chmod").args(["-R", "a+rX"]).arg(dest));
    common
}

pub fn pg_prefix(major: u32) -> PathBuf {
    if let Ok(p) = std::env::var(format!("PGDBG_PG{major}")) {
        return PathBuf::from(p);
    }
    let script = if EMBEDDED_MAJORS.contains(&major) {
        "scripts/pg-embedded"
    } else {
        "scripts/pg-build"
    };
    let out = Command::new(repo().join(script))
        .arg(major.to_string())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    assert!(out.status.success(), "{script} {major} failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A throwaway cluster; stopped and removed on drop.
pub struct Cluster {
    pub dir: PathBuf,
    pub bin: PathBuf,
    pub postmaster_pid: i32,
    /// Stop without removing the directory (the seeded clusters).
    keep: bool,
    /// A seeded cluster's lock (`flock` on `DIR.lock`), held from before
    /// it starts until after `Drop` stopped it: one user at a time, whether
    /// another test thread of this binary (a plain `cargo test` runs them
    /// in parallel) or another test run on the machine.  Released when the
    /// file closes, after `Drop::drop` (fields drop after it), or when the
    /// process dies.
    _lock: Option<std::fs::File>,
    /// Length of postmaster.log when this run started it.
    log_start: usize,
}

impl Cluster {
    pub fn start(major: u32) -> Cluster {
        Self::start_with(major, &[])
    }

    /// A cluster with seed 000's tables that survives between test runs
    /// (stopped after each use, seeded once per machine: 1000 partitions
    /// take half a minute to create).
    pub fn start_seeded(major: u32) -> Cluster {
        Self::start_seeded_prefix(&pg_prefix(major), &format!("seeded-{major}"))
    }

    /// Like `start_seeded`, for any installation (e.g. Debian's package).
    pub fn start_seeded_prefix(prefix: &Path, key: &str) -> Cluster {
        let base = std::env::var_os("PGDBG_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/pgdbg")
            });
        let dir = base.join("clusters").join(key);
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        let lock_path = base.join("clusters").join(format!("{key}.lock"));
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .unwrap_or_else(|e| panic!("open {}: {e}", lock_path.display()));
        // blocks while another test uses this cluster (flock, not
        // File::lock: the crate's MSRV predates it)
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock on a descriptor this function owns
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            assert!(
                e.kind() == std::io::ErrorKind::Interrupted,
                "flock {}: {e}",
                lock_path.display()
            );
        }
        let mut c = Self::start_in(prefix, &[], Some(&dir));
        c.keep = true;
        c._lock = Some(lock);
        c.seed(&["mediumtab", "bigtab"]);
        c
    }

    /// A throwaway cluster of any installation (e.g. Debian's package, or
    /// scripts/pg-embedded's).
    pub fn start_prefix(prefix: &Path) -> Cluster {
        Self::start_in(prefix, &[], None)
    }

    pub fn start_with(major: u32, settings: &[&str]) -> Cluster {
        Self::start_in(&pg_prefix(major), settings, None)
    }

    fn start_in(prefix: &Path, settings: &[&str], dir: Option<&Path>) -> Cluster {
        let mut cmd = Command::new(repo().join("scripts/pg-cluster"));
        cmd.arg("start").arg(prefix);
        if let Some(d) = dir {
            cmd.arg("--dir").arg(d);
        }
        for s in settings {
            cmd.arg("--set").arg(s);
        }
        let out = cmd.stderr(Stdio::piped()).output().expect("run pg-cluster");
        assert!(
            out.status.success(),
            "pg-cluster start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let get = |k: &str| -> String {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("pg-cluster printed no {k}: {text}"))
                .to_string()
        };
        let dir = PathBuf::from(get("PGDBG_CLUSTER"));
        let log_start = std::fs::metadata(dir.join("postmaster.log"))
            .map(|m| m.len() as usize)
            .unwrap_or(0);
        Cluster {
            dir,
            bin: PathBuf::from(get("PGBIN")),
            postmaster_pid: get("PGDBG_POSTMASTER_PID").parse().unwrap(),
            keep: false,
            _lock: None,
            log_start,
        }
    }

    pub fn connstr(&self) -> String {
        format!(
            "host={} port=5432 user=postgres dbname=postgres",
            self.dir.display()
        )
    }

    pub fn connect(&self) -> Client {
        let c = postgres::Client::connect(&self.connstr(), postgres::NoTls)
            .expect("connect to test cluster");
        Client { c: Some(c) }
    }

    pub fn seed(&self, tables: &[&str]) {
        let out = Command::new(repo().join("scripts/seed-tables"))
            .arg(&self.dir)
            .args(tables)
            .output()
            .expect("seed-tables");
        assert!(
            out.status.success(),
            "seed-tables failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// postmaster.log since this test started the server.
    pub fn log(&self) -> String {
        let all = std::fs::read(self.dir.join("postmaster.log")).unwrap_or_default();
        String::from_utf8_lossy(&all[self.log_start.min(all.len())..]).into_owned()
    }

    /// The postmaster restarted the cluster or a backend died of a signal.
    pub fn assert_no_crash(&self) {
        let log = self.log();
        assert!(
            !log.contains("terminated by signal") && !log.contains("was terminated by"),
            "postmaster log shows a crashed backend:\n{log}"
        );
        assert!(
            std::path::Path::new(&format!("/proc/{}", self.postmaster_pid)).exists(),
            "postmaster is gone"
        );
    }

    /// Wait (at most 20 s) until every backend of `pids` is running a
    /// statement that contains `query` (pg_stat_activity): a workload a test
    /// relies on is checked, never assumed from a sleep.
    pub fn wait_active(&self, pids: &[i32], query: &str) {
        let mut c = self.connect();
        let list = pids
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!(
            "select count(*) from pg_stat_activity where pid in ({list}) and state = 'active' and position({} in query) > 0",
            sql_literal(query)
        );
        wait_until(
            &format!("backends {list} running {query:?}"),
            Duration::from_secs(20),
            || c.query_one_i64(&sql) == pids.len() as i64,
        );
    }

    /// Wait until backend `pid` waits for its client (pg_stat_activity's
    /// `ClientRead`): one that just answered may still be in `send` with
    /// its reply, no wait event set yet.
    pub fn wait_client_read(&self, pid: i32) {
        let mut c = self.connect();
        let sql = format!(
            "select count(*) from pg_stat_activity where pid = {pid} and wait_event = 'ClientRead'"
        );
        wait_until(
            &format!("backend {pid} waiting for its client (ClientRead)"),
            Duration::from_secs(20),
            || c.query_one_i64(&sql) == 1,
        );
    }

    /// Cancel the statements of `pids` (pg_cancel_backend).
    pub fn cancel(&self, pids: &[i32]) {
        let mut c = self.connect();
        for p in pids {
            c.query_one_text(&format!("select pg_cancel_backend({p})::text"));
        }
    }

    pub fn postgres_binary(&self) -> PathBuf {
        self.bin.join("postgres")
    }

    /// pg_ctl of this cluster, run as its owner.
    pub fn pg_ctl(&self, args: &[&str]) {
        let st = Command::new("runuser")
            .args(["-u", "pgdbg", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "pg_ctl {args:?}");
    }

    /// Restart the server from a stripped copy (`strip HOW`) of `prefix`'s
    /// postgres, installed under `root` (share/ and lib/ linked); returns
    /// the copy's path and records the new postmaster PID.
    pub fn restart_from_stripped_copy(&mut self, prefix: &Path, root: &Path, how: &str) -> PathBuf {
        let _ = std::fs::remove_dir_all(root);
        std::fs::create_dir_all(root.join("bin")).unwrap();
        let stripped = root.join("bin/postgres");
        let st = Command::new("strip")
            .args([how, "-o"])
            .arg(&stripped)
            .arg(prefix.join("bin/postgres"))
            .status()
            .unwrap();
        assert!(st.success());
        std::os::unix::fs::symlink(prefix.join("share"), root.join("share")).unwrap();
        std::os::unix::fs::symlink(prefix.join("lib"), root.join("lib")).unwrap();
        Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(root)
            .status()
            .unwrap();
        let data = self.dir.join("data");
        let log = self.dir.join("postmaster.log");
        self.pg_ctl(&["stop", "-D", data.to_str().unwrap(), "-m", "fast", "-w"]);
        self.pg_ctl(&[
            "start",
            "-D",
            data.to_str().unwrap(),
            "-p",
            stripped.to_str().unwrap(),
            "-l",
            log.to_str().unwrap(),
            "-w",
        ]);
        let pidfile = std::fs::read_to_string(data.join("postmaster.pid")).unwrap();
        self.postmaster_pid = pidfile.lines().next().unwrap().trim().parse().unwrap();
        stripped
    }

    /// Stop a server started by `restart_from_stripped_copy` (while the
    /// copy still exists).
    pub fn stop_stripped(&self) {
        let data = self.dir.join("data");
        self.pg_ctl(&["stop", "-D", data.to_str().unwrap(), "-m", "fast", "-w"]);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut cmd = Command::new(repo().join("scripts/pg-cluster"));
        cmd.arg("stop").arg(&self.dir);
        if self.keep {
            cmd.arg("--keep");
        }
        let _ = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status();
    }
}

/// How long `Client::rejoin` waits for a statement after it is joined:
/// far above any test's statement, far below CI's limit.
pub const REJOIN_LIMIT: Duration = Duration::from_secs(300);

/// A client session (one backend).
pub struct Client {
    pub c: Option<postgres::Client>,
}

impl Client {
    pub fn pid(&mut self) -> i32 {
        self.query_one_i64("select pg_backend_pid()") as i32
    }
    pub fn exec(&mut self, sql: &str) {
        self.c
            .as_mut()
            .unwrap()
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    // Only the simple protocol: the driver names its own prepared
    // statements s0, s1, ..., which would clash with seed 000's SQL-level s1.
    pub fn query_one_i64(&mut self, sql: &str) -> i64 {
        let t = self.simple_text(sql);
        t.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{sql}: not a number: {t}"))
    }
    pub fn query_one_text(&mut self, sql: &str) -> String {
        self.simple_text(sql)
    }
    /// First column of the first row, as text (simple protocol).
    pub fn simple_text(&mut self, sql: &str) -> String {
        let msgs = self
            .c
            .as_mut()
            .unwrap()
            .simple_query(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        for m in msgs {
            if let postgres::SimpleQueryMessage::Row(r) = m {
                return r.get(0).unwrap_or("").to_string();
            }
        }
        panic!("{sql}: no rows")
    }
    /// All rows' first column, joined by newlines (EXPLAIN output).
    pub fn explain_rows(&mut self, sql: &str) -> String {
        let msgs = self.c.as_mut().unwrap().simple_query(sql).unwrap();
        msgs.iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|s| s.to_string()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Run `sql` on a thread (it may block at a breakpoint); join later.
    pub fn spawn_text(
        &mut self,
        sql: &str,
    ) -> std::thread::JoinHandle<(postgres::Client, Result<String, String>)> {
        let mut c = self.c.take().unwrap();
        let sql = sql.to_string();
        std::thread::spawn(move || {
            let r = c
                .simple_query(&sql)
                .map_err(|e| format!("{e:?}"))
                .map(|msgs| {
                    msgs.iter()
                        .filter_map(|m| match m {
                            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|s| s.to_string()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                });
            (c, r)
        })
    }
    /// Join a statement run by `spawn_text`: panics (the test fails, never
    /// hangs) if it has not ended within `REJOIN_LIMIT`, a backend left
    /// stopped, say; the cluster's drop then kills what is left.
    pub fn rejoin(
        &mut self,
        h: std::thread::JoinHandle<(postgres::Client, Result<String, String>)>,
    ) -> Result<String, String> {
        let t0 = Instant::now();
        while !h.is_finished() {
            assert!(
                t0.elapsed() < REJOIN_LIMIT,
                "the statement had not ended {REJOIN_LIMIT:?} after it was joined \
                 (the backend left stopped or hung?)"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let (c, r) = h.join().expect("client thread");
        self.c = Some(c);
        r
    }
}

/// Seed 000's prepared statement, executed 6 times.
pub const S1: &str =
    "prepare s1 as select max(md5(v)) from mediumtab where n between $1::numeric and $2::numeric";

/// tests/fixtures/NAME.c compiled with gcc -O2 -g, once per test process
/// (tests of one binary may run in parallel: the first one compiles).
pub fn c_fixture(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(n, _)| n == name) {
        return p.clone();
    }
    let out = std::env::temp_dir().join(format!("pgdbg-fixture-{name}-{}", std::process::id()));
    let st = Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&out)
        .arg(repo().join(format!("tests/fixtures/{name}.c")))
        .status()
        .expect("gcc");
    assert!(st.success(), "compiling the fixture {name}.c failed");
    built.push((name.to_string(), out.clone()));
    out
}

/// `s` as an SQL string literal.
pub fn sql_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub fn write_script(name: &str, lines: &[&str]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("pgdbg-test-{}-{name}.gdb", std::process::id()));
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

/// pgdbg running in the background.
pub struct Pgdbg {
    pub child: Child,
}

impl Pgdbg {
    pub fn spawn(args: &[&str]) -> Pgdbg {
        Pgdbg::spawn_env(args, &[])
    }

    /// `spawn` with these environment variables set.
    pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Pgdbg {
        let child = Command::new(pgdbg_bin())
            .args(args)
            .envs(env.iter().copied())
            .env_remove("DEBUGINFOD_URLS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pgdbg");
        Pgdbg { child }
    }

    /// Wait for exit with a generous bound; returns (status code, stdout, stderr).
    pub fn wait(mut self, limit: Duration) -> (i32, String, String) {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let (out, err) = self.drain();
                return (st.code().unwrap_or(-1), out, err);
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                let (out, err) = self.drain();
                panic!("pgdbg did not finish within {limit:?}\nstdout:\n{out}\nstderr:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Pgdbg {
    fn drain(&mut self) -> (String, String) {
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut s) = self.child.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        if let Some(mut s) = self.child.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        (out, err)
    }

    /// Spawn pgdbg and wait until it has seized `pid` (TracerPid set);
    /// fails at once with its stderr if it exits first.
    pub fn spawn_attached(args: &[&str], pid: i32) -> Pgdbg {
        Pgdbg::spawn_attached_env(args, pid, &[])
    }

    pub fn spawn_attached_env(args: &[&str], pid: i32, env: &[(&str, &str)]) -> Pgdbg {
        let mut p = Pgdbg::spawn_env(args, env);
        p.wait_attached(pid);
        p
    }

    /// `spawn_attached`, then wait until pgdbg has armed `symbol` in `pid`
    /// (`plan --next`: standard_ExecutorRun; `--analyze`:
    /// standard_ExecutorStart), so that a statement sent next is caught.
    pub fn spawn_armed(args: &[&str], pid: i32, symbol: &str) -> Pgdbg {
        let p = Pgdbg::spawn_attached(args, pid);
        wait_armed(pid, symbol);
        p
    }

    pub fn wait_attached(&mut self, pid: i32) {
        wait_until("pgdbg to attach", Duration::from_secs(30), || {
            if let Ok(Some(_)) = self.child.try_wait() {
                let mut err = String::new();
                if let Some(e) = self.child.stderr.as_mut() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("pgdbg exited before attaching: {err}");
            }
            tracer_pid(pid) != 0
        });
    }

    /// pgdbg with stdout going to a file (for long outputs).
    pub fn spawn_to_file(args: &[&str], stdout: &Path) -> Pgdbg {
        Pgdbg::spawn_to_file_env(args, stdout, &[])
    }

    /// `spawn_to_file` run by the command `wrapper`, which execs pgdbg
    /// (given as its next argument; none: pgdbg itself).
    pub fn spawn_to_file_in(wrapper: &[&str], args: &[&str], stdout: &Path) -> Pgdbg {
        let Some((first, rest)) = wrapper.split_first() else {
            return Pgdbg::spawn_to_file(args, stdout);
        };
        let f = std::fs::File::create(stdout).unwrap();
        let child = Command::new(first)
            .args(rest)
            .arg(pgdbg_bin())
            .args(args)
            .env_remove("DEBUGINFOD_URLS")
            .stdin(Stdio::null())
            .stdout(Stdio::from(f))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pgdbg");
        Pgdbg { child }
    }

    /// `spawn_to_file` with these environment variables set.
    pub fn spawn_to_file_env(args: &[&str], stdout: &Path, env: &[(&str, &str)]) -> Pgdbg {
        let f = std::fs::File::create(stdout).unwrap();
        let child = Command::new(pgdbg_bin())
            .args(args)
            .envs(env.iter().copied())
            .env_remove("DEBUGINFOD_URLS")
            .stdin(Stdio::null())
            .stdout(Stdio::from(f))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pgdbg");
        Pgdbg { child }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

/// Run pgdbg to completion.
pub fn pgdbg(args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(pgdbg_bin())
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null())
        .output()
        .expect("run pgdbg");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The system call `pid` is in or sleeps in (/proc/PID/syscall's first
/// field; None while it runs in user mode).
pub fn syscall_nr(pid: i32) -> Option<i64> {
    std::fs::read_to_string(format!("/proc/{pid}/syscall"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub fn tracer_pid(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("TracerPid:")
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

/// The word of held-back signals (bit N-1 for signal N) in the guardian's
/// table of `pid` (/dev/shm/pgdbg-backend-PID-START, word 16), or None
/// when there is no table any more.
pub fn recorded_signals(pid: i32) -> Option<u64> {
    let name = std::fs::read_dir("/dev/shm")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| n.starts_with(&format!("pgdbg-backend-{pid}-")))?;
    let mut f = std::fs::File::open(format!("/dev/shm/{name}")).ok()?;
    let mut b = [0u8; 17 * 8];
    f.read_exact(&mut b).ok()?;
    Some(u64::from_le_bytes(b[16 * 8..].try_into().unwrap()))
}

/// Wait until `pid` is in one of the system calls `nrs`, while pgdbg runs
/// (its stderr shown if it ends first: the call refused or failed).
pub fn wait_call_in(p: &mut Pgdbg, pid: i32, what: &str, nrs: &[i64]) {
    wait_until(what, Duration::from_secs(20), || {
        if let Ok(Some(st)) = p.child.try_wait() {
            let mut err = String::new();
            let _ = p.child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("pgdbg ended ({st}) before {what}: {err}");
        }
        syscall_nr(pid).is_some_and(|n| nrs.contains(&n))
    });
}

/// SIGKILL to pgdbg alone, once the call is under way: the guardian takes
/// the backend over (it traces it from then on until it has restored it).
pub fn kill_pgdbg_alone(p: &Pgdbg, backend: i32) -> i32 {
    let g = guardians_of(backend);
    assert_eq!(g.len(), 1, "one guardian of {backend}: {g:?}");
    // SAFETY: kill(2) of the pgdbg this test started.
    unsafe { libc::kill(p.pid(), libc::SIGKILL) };
    wait_until(
        "the guardian to take the backend over",
        Duration::from_secs(20),
        || tracer_pid(backend) == g[0],
    );
    g[0]
}

pub fn proc_state(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("State:").map(|v| v.trim().to_string()))
        })
        .unwrap_or_default()
}

pub fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Parse `$N = VALUE` lines of pgdbg/gdb output, in order.
pub fn print_values(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| {
            let l = l.trim();
            if !l.starts_with('$') {
                return None;
            }
            l.split_once(" = ").map(|(_, v)| v.to_string())
        })
        .collect()
}

/// Wait until pgdbg has written an int3 into the first 32 bytes of
/// `symbol` in `pid` (a command armed): attached (TracerPid) is not armed
/// yet, and a statement sent in between would run before the breakpoint.
pub fn wait_armed(pid: i32, symbol: &str) {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let exe = PathBuf::from(exe.to_string_lossy().trim_end_matches(" (deleted)"));
    wait_until(
        &format!("pgdbg to arm {symbol} in {pid}"),
        Duration::from_secs(60),
        || !code_matches_file(pid, &exe, symbol, 32),
    );
}

/// `--ex CMD` for each of `cmds`: pgdbg's arguments for a one-shot script.
pub fn ex(cmds: &[&str]) -> Vec<String> {
    cmds.iter()
        .flat_map(|c| ["--ex".to_string(), c.to_string()])
        .collect()
}

/// The code bytes of `symbol` in the live process equal those in the file.
pub fn code_matches_file(pid: i32, binary: &Path, symbol: &str, len: usize) -> bool {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    mapped_code_matches_file(pid, binary, &exe, symbol, len)
}

/// The code bytes of `symbol` (from `file`'s symbol table or its dynamic
/// symbols) in the live process, where the object is mapped from the path
/// `mapped_as`, equal those in `file`.
pub fn mapped_code_matches_file(
    pid: i32,
    file: &Path,
    mapped_as: &Path,
    symbol: &str,
    len: usize,
) -> bool {
    mapped_code_differs(pid, file, mapped_as, symbol, len).is_none()
}

/// `None` when the first `len` bytes of `symbol` in process `pid` are the
/// file's, else both, for a test's failure message.
pub fn mapped_code_differs(
    pid: i32,
    file: &Path,
    mapped_as: &Path,
    symbol: &str,
    len: usize,
) -> Option<String> {
    let (addr, file_off) = symbol_in_file(file, symbol);
    let data = std::fs::read(file).unwrap();
    let want = &data[file_off as usize..file_off as usize + len];
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut got = vec![0u8; len];
    mem.read_exact_at(&mut got, runtime(pid, mapped_as, addr))
        .unwrap();
    (got != want).then(|| format!("{symbol} in memory {got:02x?}, in the file {want:02x?}"))
}

/// Panics when `symbol`'s first instruction in `file` is a push (which
/// the kernel's uprobes emulate): a test of a uprobe moved off an entry the
/// kernel would step out of line needs another entry.
pub fn assert_entry_not_a_push(file: &Path, symbol: &str) {
    let data = std::fs::read(file).unwrap();
    let (_, off) = symbol_in_file(file, symbol);
    let first = &data[off as usize..off as usize + 2];
    assert!(
        !matches!(first, [0x50..=0x57, _] | [0x41, 0x50..=0x57]),
        "{symbol} starts with a push in this build: {first:02x?}"
    );
}

/// `symbol`'s link-time address in `file` and its offset in the file
/// (where a uprobe is placed).
pub fn symbol_in_file(file: &Path, symbol: &str) -> (u64, u64) {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(file).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let sym = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .find(|s| s.name().ok() == Some(symbol))
        .unwrap_or_else(|| panic!("no symbol {symbol} in {}", file.display()));
    let addr = sym.address();
    let sec = obj
        .sections()
        .find(|s| addr >= s.address() && addr < s.address() + s.size())
        .unwrap();
    let (foff, _) = sec.file_range().unwrap();
    (addr, foff + (addr - sec.address()))
}

/// How many hardware breakpoint slots of thread `pid` the kernel has free:
/// write-breakpoint perf events opened on it (at most 8) until the kernel
/// refuses one, then all closed.  x86-64 has 4; a debug register that
/// ptrace has used, or a perf breakpoint someone holds open, takes one.
pub fn free_breakpoint_slots(pid: i32) -> usize {
    // struct perf_event_attr as of PERF_ATTR_SIZE_VER7 (128 bytes)
    let mut attr = [0u64; 16];
    let kind_size: u64 = 5 | (128 << 32); // PERF_TYPE_BREAKPOINT, size
    attr[0] = kind_size;
    attr[2] = 1; // sample_period
    attr[5] = (1 << 5) | (1 << 6); // exclude_kernel, exclude_hv
    attr[6] = 2 << 32; // bp_type HW_BREAKPOINT_W (wakeup_events 0)
    attr[8] = 8; // bp_len
    let mut fds = Vec::new();
    for i in 0..8u64 {
        attr[7] = 0x10000 + 8 * i; // bp_addr
        // SAFETY: the kernel reads 128 bytes of `attr`.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                pid,
                -1i32,
                -1i32,
                8u64, // PERF_FLAG_FD_CLOEXEC
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            assert_eq!(
                e.raw_os_error(),
                Some(libc::ENOSPC),
                "perf_event_open of a breakpoint on {pid}: {e}"
            );
            break;
        }
        fds.push(fd as i32);
    }
    for fd in &fds {
        unsafe { libc::close(*fd) };
    }
    fds.len()
}

/// `symbol`'s size in `file`'s symbol table (or its dynamic symbols).
pub fn symbol_size(file: &Path, symbol: &str) -> u64 {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(file).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    obj.symbols()
        .chain(obj.dynamic_symbols())
        .find(|s| s.name().ok() == Some(symbol))
        .unwrap_or_else(|| panic!("no symbol {symbol} in {}", file.display()))
        .size()
}

/// The runtime address of link-time address `addr` of the object mapped
/// from `mapped_as` in `pid`.
pub fn runtime(pid: i32, mapped_as: &Path, addr: u64) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let base = maps
        .lines()
        .find(|l| {
            l.ends_with(mapped_as.to_str().unwrap())
                && l.split_whitespace().nth(2) == Some("00000000")
        })
        .map(|l| u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap())
        .unwrap_or_else(|| panic!("{} is not mapped in {pid}", mapped_as.display()));
    base + addr
}

/// Lines of a child's stderr until one contains `needle`.
pub fn read_until(r: &mut impl BufRead, needle: &str, limit: Duration) -> String {
    let t0 = Instant::now();
    let mut acc = String::new();
    let mut line = String::new();
    while t0.elapsed() < limit {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        acc.push_str(&line);
        if line.contains(needle) {
            return acc;
        }
    }
    panic!("did not see '{needle}' in:\n{acc}");
}

/// Lines of pgdbg's stderr until one contains `needle`, read on a thread
/// of their own (which goes on draining the pipe after): panics after
/// `limit` even when no line comes at all (a pause point never reached,
/// pgdbg waiting on its stdin), or when stderr ends first.
pub fn wait_for_stderr(p: &mut Pgdbg, needle: &str, limit: Duration) -> String {
    use std::sync::mpsc::RecvTimeoutError;
    let err = p.child.stderr.take().expect("pgdbg's stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines() {
            let Ok(l) = l else { break };
            // the receiver gone: drained all the same
            let _ = tx.send(l);
        }
    });
    let t0 = Instant::now();
    let mut seen = String::new();
    loop {
        match rx.recv_timeout(limit.saturating_sub(t0.elapsed())) {
            Ok(l) => {
                seen.push_str(&l);
                seen.push('\n');
                if l.contains(needle) {
                    return seen;
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!("no '{needle}' on pgdbg's stderr within {limit:?}:\n{seen}")
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("pgdbg's stderr ended before '{needle}':\n{seen}")
            }
        }
    }
}

/// Until pgdbg says on stderr that it paused at `at` (PGDBG_PAUSE_AT),
/// stderr read in place (what follows is still the test's to read).  A
/// deadline: pgdbg is killed (its guardian restores the backend) and the
/// test fails if the pause has not come within 90 s.
pub fn wait_paused(p: &mut Pgdbg, at: &str) {
    let limit = Duration::from_secs(90);
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let pid = p.pid();
    let dog = std::thread::spawn(move || {
        let late = watch.recv_timeout(limit).is_err();
        if late {
            // SAFETY: kill(2) of the pgdbg this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        late
    });
    let mut err = BufReader::new(p.child.stderr.as_mut().unwrap());
    let mut seen = String::new();
    let needle = format!("paused at {at} ");
    loop {
        let mut l = String::new();
        let n = err.read_line(&mut l).unwrap_or(0);
        seen.push_str(&l);
        if n == 0 {
            let _ = done.send(());
            let late = dog.join().unwrap_or(false);
            let why = if late {
                format!("was killed: no pause within {limit:?}")
            } else {
                "ended".to_string()
            };
            panic!("pgdbg {why} before it paused at {at}: {seen}");
        }
        if l.contains(&needle) {
            let _ = done.send(());
            let _ = dog.join();
            return;
        }
    }
}

pub fn stderr_reader(p: &mut Pgdbg) -> BufReader<std::process::ChildStderr> {
    BufReader::new(p.child.stderr.take().unwrap())
}

pub fn majors() -> Vec<u32> {
    match std::env::var("PGDBG_MAJORS") {
        Ok(s) => s.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![15, 18],
    }
}

/// The planner's own generic-plan cost for seed 000's s1: EXPLAIN EXECUTE
/// of the same statement under force_generic_plan in another session.
pub fn planner_generic_cost(cl: &Cluster) -> f64 {
    let mut b = cl.connect();
    b.exec("set plan_cache_mode = force_generic_plan");
    b.exec(S1);
    let j = b.simple_text("explain (format json) execute s1(10,30)");
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    v[0]["Plan"]["Total Cost"].as_f64().unwrap()
}

/// Result of `execute s1(a,b)` computed by another session.
pub fn s1_result(cl: &Cluster, a: i32, b: i32) -> String {
    let mut c = cl.connect();
    c.exec(S1);
    c.simple_text(&format!("execute s1({a},{b})"))
}

/// A session that prepared s1 and executed it 6 times (seed 000).
pub fn session_after_six(cl: &Cluster) -> Client {
    let mut a = cl.connect();
    a.exec(S1);
    for _ in 0..6 {
        a.exec("execute s1(60,70)");
    }
    a
}

/// The events of one kind in a capture file.
pub fn read_events(path: &Path, event: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // a line being written while a test polls the file: not complete yet
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    complete
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("capture lines are JSON"))
        .filter(|e| e["event"] == event)
        .collect()
}

/// Run `plancache --count n` on `pid` while `work` runs statements; returns
/// (stdout, plan_choice events).
pub fn watch(pid: i32, n: usize, work: impl FnOnce()) -> (String, Vec<serde_json::Value>) {
    watch_cmd(pid, &format!("plancache --stops --count {n}"), n, work)
}

/// Like `watch`, with any plancache command line.
pub fn watch_cmd(
    pid: i32,
    cmd: &str,
    n: usize,
    work: impl FnOnce(),
) -> (String, Vec<serde_json::Value>) {
    let cap = std::env::temp_dir().join(format!("pgdbg-pc-{}-{pid}-{n}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&cap);
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            cmd,
            "--ex",
            "detach",
            "--capture",
            cap.to_str().unwrap(),
        ],
        pid,
    );
    // plancache arms its breakpoints right after attaching; the statements
    // queue on the socket meanwhile.
    work();
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "pgdbg failed:\n{out}\n{err}");
    assert_eq!(tracer_pid(pid), 0);
    let events = read_events(&cap, "plan_choice");
    let _ = std::fs::remove_file(&cap);
    assert_eq!(events.len(), n, "decisions reported:\n{out}");
    (out, events)
}

/// Anonymous executable mappings (the in-process recorder's code page is
/// one while it is in place).
pub fn anon_exec_maps(pid: i32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .filter(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() == 5 && w[1].contains('x')
        })
        .map(|l| l.to_string())
        .collect()
}

/// PIDs of the processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

/// PIDs of the guardians (src/inferior/guardian.rs) watching `pid`.
pub fn guardians_of(pid: i32) -> Vec<i32> {
    processes_with(&format!("__pgdbg_guardian\0{pid}\0"))
}

/// Start `pgdbg attach PID -q [--capture CAP] --ex CMD` (a `waits trace`
/// line) and return once it says it is tracing (everything is armed
/// before that line): pgdbg, the rest of its standard output, and what it
/// printed up to that line.
pub fn start_waits_trace(
    pid: i32,
    cmd: &str,
    capture: Option<&Path>,
) -> (Pgdbg, BufReader<std::process::ChildStdout>, String) {
    let pid = pid.to_string();
    let cap = capture.map(|c| c.display().to_string());
    let mut args = vec!["attach", &pid, "-q"];
    if let Some(c) = &cap {
        args.extend(["--capture", c]);
    }
    args.extend(["--ex", cmd]);
    let mut p = Pgdbg::spawn(&args);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let head = read_until(&mut out, "waits: tracing backend", Duration::from_secs(60));
    (p, out, head)
}

/// Delete the guardian's record of backend `pid` in /dev/shm (as if
/// /dev/shm were emptied): there must be exactly one.
pub fn remove_guardian_record(pid: i32) {
    let prefix = format!("pgdbg-backend-{pid}-");
    let records: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    std::fs::remove_file(&records[0]).unwrap();
}

/// SIGKILL to the guardian of `backend` and to pgdbg process `pgdbg`,
/// back to back: the guardian first, so that it is gone before pgdbg's
/// death could wake it (on a loaded machine it could otherwise restore
/// the backend in between); then until both are gone.
pub fn kill_with_guardian(pgdbg: i32, backend: i32) {
    let g = guardians_of(backend);
    assert_eq!(g.len(), 1, "one guardian of {backend}: {g:?}");
    unsafe {
        libc::kill(g[0], libc::SIGKILL);
        libc::kill(pgdbg, libc::SIGKILL);
    }
    wait_until(
        "pgdbg and its guardian to end",
        Duration::from_secs(10),
        || tracer_pid(backend) == 0 && guardians_of(backend).is_empty(),
    );
}

/// The keepers (pgdbg's process that opens and holds its kernel uprobes,
/// src/perf/keeper.rs) of pgdbg process `pgdbg`.
pub fn keepers_of(pgdbg: i32) -> Vec<i32> {
    processes_with(&format!("__pgdbg_keeper\0{pgdbg}\0"))
}

/// The perf event file descriptors process `p` holds.
pub fn perf_fds(p: i32) -> usize {
    std::fs::read_dir(format!("/proc/{p}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy() == "anon_inode:[perf_event]")
                .count()
        })
        .unwrap_or(0)
}

/// Seconds since boot (the kernel log's clock): a mark for
/// [`leaked_uprobes_since`].
pub fn kernel_log_now() -> f64 {
    std::fs::read_to_string("/proc/uptime")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// How many times the kernel log says, since `mark` ([`kernel_log_now`]),
/// that a uprobe could not be removed and stays registered ("uprobe:
/// COMM:PID failed to unregister, leaking uprobe"); the tests run as root,
/// which may read it.  By time, not by count: the log is a ring.
pub fn leaked_uprobes_since(mark: f64) -> usize {
    let out = std::process::Command::new("dmesg")
        .output()
        .expect("dmesg (util-linux) runs");
    assert!(
        out.status.success(),
        "dmesg failed (the kernel log must be readable: run the tests as root): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("leaking uprobe"))
        .filter(|l| {
            // "[  364.692775] uprobe: ..."
            l.strip_prefix('[')
                .and_then(|r| r.split_once(']'))
                .and_then(|(t, _)| t.trim().parse::<f64>().ok())
                .is_none_or(|t| t >= mark)
        })
        .count()
}

/// Whether `pid` has a handler for SIGTRAP (/proc/PID/status SigCgt):
/// pgdbg's own while it has int3s or debug registers armed there, none
/// once it (or its guardian) restored the backend.
pub fn catches_sigtrap(pid: i32) -> bool {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    st.lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap()
        & (1 << (libc::SIGTRAP - 1))
        != 0
}

/// The error is one line, mentions `needle`, and the exit is non-zero.
pub fn assert_one_line_error(code: i32, err: &str, needle: &str) {
    assert_ne!(code, 0, "exit status must be non-zero; stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got:\n{err}");
    assert!(lines[0].starts_with("pgdbg: error: "), "{}", lines[0]);
    assert!(
        lines[0].contains(needle),
        "expected '{needle}' in: {}",
        lines[0]
    );
}

/// The tracefs uprobe definitions of pgdbg process `k` still listed.
pub fn tracefs_definitions_of(k: u32) -> Vec<String> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .filter_map(|root| std::fs::read_to_string(format!("{root}/uprobe_events")).ok())
        .flat_map(|d| {
            d.lines()
                .filter(|l| l.contains(&format!(":pgdbg_{k}_")))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        // both roots are one tracefs where debugfs is mounted too (perf
        // or bpftrace mount it): each definition once
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// DR7 of `pid`, read with a short PTRACE_SEIZE of our own.
pub fn dr7(pid: i32) -> u64 {
    debugreg(pid, 7)
}

/// Debug register `n` (DR0-3, DR6, DR7) of `pid`, read with a short
/// PTRACE_SEIZE of our own.
pub fn debugreg(pid: i32, n: usize) -> u64 {
    unsafe {
        let p = pid as libc::pid_t;
        assert_eq!(
            libc::ptrace(libc::PTRACE_SEIZE, p, 0usize, 0usize),
            0,
            "seize {pid} to read DR{n}: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::ptrace(libc::PTRACE_INTERRUPT, p, 0usize, 0usize), 0);
        let mut st = 0;
        loop {
            assert_eq!(libc::waitpid(p, &mut st, libc::__WALL), p);
            // the interrupt's event stop; anything else is passed on
            if st >> 16 == libc::PTRACE_EVENT_STOP {
                break;
            }
            let sig = if libc::WIFSTOPPED(st) {
                libc::WSTOPSIG(st)
            } else {
                0
            };
            assert_ne!(sig, libc::SIGTRAP, "a SIGTRAP is still on its way to {pid}");
            libc::ptrace(libc::PTRACE_CONT, p, 0usize, sig as usize);
        }
        let off = std::mem::offset_of!(libc::user, u_debugreg) + n * 8;
        *libc::__errno_location() = 0;
        let v = libc::ptrace(libc::PTRACE_PEEKUSER, p, off, 0usize);
        assert_eq!(*libc::__errno_location(), 0, "PEEKUSER DR{n}");
        libc::ptrace(libc::PTRACE_DETACH, p, 0usize, 0usize);
        v as u64
    }
}

/// Whether `pid` has an action of its own for signal `sig` (SigCgt).
pub fn caught(pid: i32, sig: i32) -> bool {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    st.lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap()
        & (1 << (sig - 1))
        != 0
}

/// What a `waits trace` summary counts (its times left out: they are the
/// machine's, not the workload's): each event's count, the number of
/// waits, and each statement's count.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WaitsCounts {
    pub events: std::collections::BTreeMap<String, u64>,
    pub waits: u64,
    pub statements: std::collections::BTreeMap<String, u64>,
}

impl WaitsCounts {
    /// Without the waits for the client's next message (`Client:
    /// ClientRead`): whether the backend waits at all depends on when the
    /// client's message arrives, not on the statements.
    pub fn workload(mut self) -> WaitsCounts {
        if let Some(n) = self.events.remove("Client: ClientRead") {
            self.waits -= n;
        }
        self
    }
}

/// [`WaitsCounts`] of the summary in `text` (the lines from `Wait events
/// summary:` on, without a `[PID] ` prefix).
pub fn waits_counts(text: &str) -> WaitsCounts {
    let mut c = WaitsCounts::default();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("Wait events summary:"))
        .skip(1);
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no summary in:\n{text}"));
    assert!(header.trim().starts_with("event"), "{header}");
    // the events' rows, then the total
    for l in lines.by_ref() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("total wait time ") {
            // "X ms in N waits"
            c.waits = rest
                .split_whitespace()
                .nth(3)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{l}"));
            break;
        }
        // "NAME COUNT TOTAL MAX"
        let f: Vec<&str> = t.split_whitespace().collect();
        assert!(f.len() >= 4, "not an event's row: {l}");
        c.events
            .insert(f[..f.len() - 3].join(" "), f[f.len() - 3].parse().unwrap());
    }
    // then maybe a line of unnamed waits, and the statements' rows
    let mut lines = lines.skip_while(|l| l.contains("could not be named"));
    if lines.next().map(str::trim) == Some("Statements:") {
        for l in lines {
            // "N x T ms  QUERY"
            let Some((n, rest)) = l.trim().split_once(" x ") else {
                break;
            };
            let Some((_, q)) = rest.split_once(" ms  ") else {
                break;
            };
            *c.statements.entry(q.to_string()).or_default() += n.trim().parse::<u64>().unwrap();
        }
    }
    c
}

/// The total milliseconds of `event` in the `waits trace` summary in
/// `text` (0 when it has none).
pub fn wait_total_ms(text: &str, event: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix(event)?;
            rest.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0.0)
}

/// The backend of a one-client pgbench whose script's first transaction
/// creates `ready` (`\shell touch FILE`, guarded so it runs once). pgbench
/// opens a setup connection first and finishes it before its clients
/// connect; once the file exists the client is connected, so when one
/// backend named `app` is left it is the client's, not the setup's.
pub fn pgbench_backend(c: &mut Client, app: &str, ready: &Path) -> i32 {
    wait_until(
        "pgbench's first transaction",
        Duration::from_secs(20),
        || ready.exists(),
    );
    let q = format!(
        "select count(*)::text || ' ' || coalesce(max(pid), 0)::text \
         from pg_stat_activity where application_name = '{app}'"
    );
    let mut pid = 0;
    wait_until(
        "pgbench's setup connection to end",
        Duration::from_secs(20),
        || {
            let t = c.simple_text(&q);
            let (n, p) = t.split_once(' ').unwrap();
            pid = p.parse().unwrap();
            n == "1"
        },
    );
    pid
}
