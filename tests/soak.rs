//! kill -9 soak: pgdbg is killed with SIGKILL at a random instant while it
//! has breakpoints or a hardware watchpoint armed in a busy backend.  The
//! guardian (src/target/guardian.rs) must restore the backend: it stays
//! alive and answers, the server log shows no crashed backend, the code
//! bytes equal the file's, DR7 is clear and no executable anonymous
//! mapping was added.
//!
//! `PGDBG_SOAK_KILLS=N` sets the kills per mode (default 10);
//! scripts/soak-kill9 runs more and prints the table.

use common::*;
use pgdbg_testbed as common;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// `break pg_backend_pid` + `commands silent continue end`, hit in a
    /// plpgsql loop (tens of thousands of hits a second).
    HotBreak,
    /// `count standard_ExecutorStart --for 60s`, a query per iteration.
    Count,
    /// `waits trace --for 60s`: a debug register on the wait event word.
    Waits,
    /// `break standard_ExecutorStart` + `continue` on an idle backend,
    /// which runs a query after the kill.
    IdleBreak,
    /// `waits trace --for 60s` on an idle backend (DR7 armed on its wait
    /// event word), which runs a query after the kill.
    IdleWaits,
    /// `trace LockRelationOid relid lockmode` on a pgbench backend.
    Trace,
    /// `count ... --by-phase` on a pgbench backend (breakpoints on the
    /// planner and executor entries too).
    CountByPhase,
    /// `plancache` (two stops per decision) on a `pgbench -M prepared`
    /// backend.
    Plancache,
    /// `plancache --fast`: the in-process recorder's jump and pages.
    PlancacheFast,
    /// `plan --next` again and again, killed while its inferior calls run
    /// (the return int3 at the ELF entry point is armed).
    PlanNext,
    /// `call pg_usleep(10000)` at every statement start, killed during the
    /// 10 ms call.
    Call,
    /// `latency pg_sleep`: entry and return uprobes (kernel perf events),
    /// killed with calls in flight (their return address is the kernel's).
    Latency,
    /// `trace LockRelationOid relid lockmode --perf` (kernel uprobes) on
    /// a pgbench backend.
    TracePerf,
    /// `pgdbg profile PID --for 60s`: the perf cpu-clock sampling a query
    /// loop; pgdbg never attaches with ptrace.
    PerfProfile,
    /// `waits trace --uprobes --for 60s` (the perf write-breakpoint event
    /// and the statement uprobes) on a pg_sleep loop.
    PerfWaits,
    /// `count standard_ExecutorStart --for 60s` (a kernel uprobe) on a
    /// query loop.
    PerfCount,
    /// `count standard_ExecutorStart --for 60s` (an in-process counter:
    /// a jump at the entry to pgdbg's page) on a query loop.
    CountInProcess,
    /// `waits trace --for 60s` (the perf write-breakpoint event, and
    /// in-process recorders at the executor's start and end) on a
    /// pg_sleep loop.
    WaitsInProcess,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::HotBreak => "break+commands",
            Mode::Count => "count",
            Mode::Waits => "waits trace",
            Mode::IdleBreak => "break, idle backend",
            Mode::IdleWaits => "waits trace, idle backend",
            Mode::Trace => "trace LockRelationOid",
            Mode::CountByPhase => "count --by-phase",
            Mode::Plancache => "plancache",
            Mode::PlancacheFast => "plancache --fast",
            Mode::PlanNext => "plan --next (in its calls)",
            Mode::Call => "call pg_usleep(10000) (in the call)",
            Mode::Latency => "latency pg_sleep (uprobes)",
            Mode::TracePerf => "trace LockRelationOid --perf (uprobes)",
            Mode::PerfProfile => "profile (perf cpu-clock, not attached)",
            Mode::PerfWaits => "waits trace --uprobes (perf watchpoint, uprobes)",
            Mode::WaitsInProcess => "waits trace (perf watchpoint, in-process recorders)",
            Mode::PerfCount => "count (kernel uprobe)",
            Mode::CountInProcess => "count (in-process counter)",
        }
    }
    fn workload(self) -> &'static str {
        match self {
            Mode::HotBreak => {
                "do $$ begin for i in 1..200000000 loop perform pg_backend_pid(); end loop; end $$"
            }
            Mode::Count | Mode::PerfProfile | Mode::PerfCount | Mode::CountInProcess => {
                "do $$ begin for i in 1..200000000 loop perform 1 from pg_class limit 1; end loop; end $$"
            }
            Mode::Waits | Mode::Latency | Mode::PerfWaits | Mode::WaitsInProcess => {
                "do $$ begin for i in 1..200000000 loop perform pg_sleep(0.0002); end loop; end $$"
            }
            _ => "",
        }
    }
    fn symbol(self) -> &'static str {
        match self {
            Mode::HotBreak => "pg_backend_pid",
            Mode::Trace | Mode::TracePerf => "LockRelationOid",
            Mode::Latency => "pg_sleep",
            Mode::Plancache | Mode::PlancacheFast => "GetCachedPlan",
            _ => "standard_ExecutorStart",
        }
    }
    /// Traces a backend of the 4-client pgbench (else one of the test's
    /// own, running `workload`).
    fn on_pgbench(self) -> bool {
        matches!(
            self,
            Mode::Trace
                | Mode::CountByPhase
                | Mode::Plancache
                | Mode::PlancacheFast
                | Mode::PlanNext
                | Mode::Call
                | Mode::TracePerf
        )
    }
    /// Killed while an inferior call (or an injected system call) runs:
    /// pgdbg's int3 at the ELF entry point, where calls return, is armed.
    fn in_call(self) -> bool {
        matches!(self, Mode::PlanNext | Mode::Call)
    }
    /// Observes through perf events the kernel owns (nothing written into
    /// the backend by pgdbg).
    fn perf(self) -> bool {
        matches!(
            self,
            Mode::PerfProfile | Mode::PerfWaits | Mode::PerfCount | Mode::Latency | Mode::TracePerf
        )
    }
    /// Places kernel uprobes (waits trace: on the executor's start, for
    /// the statements' texts).
    fn uprobes(self) -> bool {
        matches!(
            self,
            Mode::PerfWaits | Mode::PerfCount | Mode::Latency | Mode::TracePerf
        )
    }
    /// Functions whose code bytes must equal the file's after a kill.
    fn checked(self) -> Vec<&'static str> {
        let mut v = vec![self.symbol(), "_start"];
        if let Mode::WaitsInProcess = self {
            v.push("standard_ExecutorEnd");
        }
        if let Mode::CountByPhase = self {
            v.extend(["standard_planner", "ReadBufferExtended"]);
        }
        if let Mode::Latency = self {
            v.extend([
                "AbortCurrentTransaction",
                "RollbackAndReleaseCurrentSubTransaction",
            ]);
        }
        v
    }
}

/// A 4-client `pgbench -M prepared` load for the whole run: the backends
/// the pgbench modes trace, and load for the others.
struct Load {
    child: std::process::Child,
    script: std::path::PathBuf,
}

const PGBENCH_APP: &str = "pgdbg-soak-pgbench";

impl Load {
    fn start(cl: &Cluster) -> Load {
        let script =
            std::env::temp_dir().join(format!("pgdbg-soak-pgbench-{}.sql", std::process::id()));
        std::fs::write(&script, "select relname from pg_class where oid = 1259;\n").unwrap();
        let child = std::process::Command::new(cl.bin.join("pgbench"))
            .args(["-n", "-M", "prepared", "-c", "4", "-T", "100000", "-f"])
            .arg(&script)
            .args(["-h", cl.dir.to_str().unwrap(), "-U", "postgres", "postgres"])
            .env("PGAPPNAME", PGBENCH_APP)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut l = Load { child, script };
        wait_until("pgbench's 4 clients", Duration::from_secs(30), || {
            l.backends(cl).len() == 4
        });
        l
    }
    /// The pgbench clients' backends (those that ran the script: pgbench's
    /// setup connection runs none); asserts pgbench still runs.
    fn backends(&mut self, cl: &Cluster) -> Vec<i32> {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "pgbench ended: the load is gone"
        );
        let mut c = cl.connect();
        let s = c.query_one_text(&format!(
            "select coalesce(string_agg(pid::text, ','), '') from pg_stat_activity \
             where application_name = '{PGBENCH_APP}' and query like '%oid = 1259%'"
        ));
        s.split(',').filter_map(|p| p.parse().ok()).collect()
    }
}

impl Load {
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.script);
    }
}

/// CPU time (utime + stime, clock ticks) of `pid`.
fn cpu_ticks(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(r) = s.rfind(')') else { return 0 };
    let f: Vec<&str> = s[r + 2..].split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

/// The backend runs: its CPU time grows (within 5 s).
fn assert_busy(pid: i32, what: &str) {
    let c0 = cpu_ticks(pid);
    let t0 = Instant::now();
    // 30 s: a loaded machine may leave a pgbench backend waiting on the
    // others' row locks for a while; a backend left stopped never moves
    while cpu_ticks(pid) <= c0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "backend {pid} used no CPU in 30 s ({what}): state {:?}, wchan {:?}, tracer {}",
            proc_state(pid),
            std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default(),
            tracer_pid(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The byte at the ELF entry point (`AT_ENTRY`): 0xcc while pgdbg's
/// inferior call (or injected system call) is in flight.
fn entry_byte(pid: i32) -> Option<u8> {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let entry = auxv.chunks_exact(16).find_map(|c| {
        (u64::from_le_bytes(c[..8].try_into().unwrap()) == libc::AT_ENTRY)
            .then(|| u64::from_le_bytes(c[8..].try_into().unwrap()))
    })?;
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut b = [0u8; 1];
    mem.read_exact_at(&mut b, entry).ok()?;
    Some(b[0])
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn crashes(log: &str) -> usize {
    log.matches("terminated by signal").count()
}

/// One mode: `kills` times start pgdbg, let it arm, SIGKILL it at a
/// random instant, check the backend.  Returns (backends crashed, kills
/// that landed while an inferior call was in flight, backends not
/// restored).
fn soak(
    cl: &Cluster,
    load: &mut Option<Load>,
    mode: Mode,
    kills: usize,
    rng: &mut Rng,
) -> (usize, usize, usize) {
    let bin = cl.postgres_binary();
    let mut crashed = 0;
    let mut in_call = 0;
    let mut unrestored = 0;
    let mut a = cl.connect();
    for k in 0..kills {
        let pid = if mode.on_pgbench() {
            let b = load.as_mut().expect("a pgbench load").backends(cl);
            assert_eq!(b.len(), 4, "pgbench should have 4 clients: {b:?}");
            b[rng.below(4) as usize]
        } else {
            a.pid()
        };
        let mut maps_before = anon_exec_maps(pid);
        let idle = matches!(mode, Mode::IdleBreak | Mode::IdleWaits);
        let h = (!idle && !mode.on_pgbench()).then(|| a.spawn_text(mode.workload()));
        if h.is_some() {
            cl.wait_active(&[pid], "200000000");
        }
        if !idle {
            assert_busy(pid, "before attaching");
        }
        let args = attach_args(mode, pid);
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let log_before = crashes(&cl.log());
        let mut p = if mode == Mode::PerfProfile {
            Pgdbg::spawn(&refs)
        } else {
            Pgdbg::spawn_attached(&refs, pid)
        };
        let ppid = p.pid();
        let landed_in_call = wait_kill_instant(mode, pid, &bin, &mut p, rng, k);
        unsafe { libc::kill(p.pid(), libc::SIGKILL) };
        if landed_in_call && entry_byte(pid) == Some(0xcc) {
            in_call += 1;
        }
        let t_kill = Instant::now();
        let (_, _, err) = p.wait(Duration::from_secs(30));
        // the guardian acts, then exits; the keeper closes the uprobes,
        // then exits
        wait_until("the guardian to finish", Duration::from_secs(30), || {
            guardians_of(pid).is_empty()
        });
        wait_until("the keeper to finish", Duration::from_secs(30), || {
            keepers_of(ppid).is_empty()
        });
        // a backend put back into a call's return int3 or past an int3
        // crashes within the call's length (10 ms here): look after that
        std::thread::sleep(Duration::from_millis(200));
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        let died = crashes(&cl.log()) > log_before || !alive;
        eprintln!(
            "soak {} kill {k}: {} ({:?} until the guardian was done){}",
            mode.name(),
            if died { "BACKEND DIED" } else { "ok" },
            t_kill.elapsed(),
            err.lines()
                .filter(|l| l.contains("guardian") || l.starts_with("rescue:"))
                .map(|l| format!("\n    {l}"))
                .collect::<String>()
        );
        if died {
            crashed += 1;
            let log = cl.log();
            for l in log
                .lines()
                .filter(|l| l.contains("terminated by signal"))
                .skip(log_before)
            {
                eprintln!("    {l}");
            }
            if let Some(h) = h {
                let _ = a.rejoin(h);
            }
            // the postmaster restarts the cluster: wait until it answers
            wait_until("the cluster to recover", Duration::from_secs(60), || {
                postgres::Client::connect(&cl.connstr(), postgres::NoTls).is_ok()
            });
            a = cl.connect();
            // pgbench lost its clients: a new load (the old one ended first)
            if let Some(l) = load.as_mut() {
                l.stop();
                *l = Load::start(cl);
            }
            continue;
        }
        let bad = check_restored(pid, &bin, mode, &maps_before);
        if !bad.is_empty() {
            eprintln!("    NOT RESTORED: {}", bad.join("; "));
            unrestored += 1;
            maps_before = anon_exec_maps(pid);
        }
        if let Some(h) = h {
            // the loop still runs: cancel it; the backend answers (and
            // runs the function that had the breakpoint)
            cl.cancel(&[pid]);
            let r = a.rejoin(h);
            assert!(
                r.as_ref().err().is_some_and(|e| e.contains("cancel")),
                "{}: the loop should end by the cancel: {r:?}",
                mode.name()
            );
        }
        if mode.on_pgbench() {
            // pgbench's client goes on through the functions pgdbg patched
            assert_busy(pid, "after the restore");
            assert!(load.as_mut().expect("load").backends(cl).contains(&pid));
        } else {
            assert_eq!(a.pid(), pid);
            assert_eq!(
                a.query_one_i64("select count(*) from pg_class where false"),
                0
            );
        }
        assert!(
            crashes(&cl.log()) == log_before,
            "{} kill {k}: a backend died after the restore",
            mode.name()
        );
        // the next attach (a clean one) finds nothing of ours and adds
        // nothing
        if k + 1 == kills {
            let (code, _, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "bt 1"]);
            assert_eq!(code, 0, "{}: attach after the kills: {err}", mode.name());
            let bad = check_restored(pid, &bin, mode, &maps_before);
            if !bad.is_empty() {
                eprintln!("    NOT RESTORED after a clean attach: {}", bad.join("; "));
                unrestored += 1;
            }
        }
    }
    (crashed, in_call, unrestored)
}

/// pgdbg's command line for `mode` on backend `pid`.
fn attach_args(mode: Mode, pid: i32) -> Vec<String> {
    let script = |name: &str, lines: &[&str]| -> Vec<String> {
        let s = write_script(name, lines);
        vec![
            "attach".into(),
            pid.to_string(),
            "--script".into(),
            s.to_string_lossy().into(),
        ]
    };
    let ex = |cmd: &str| -> Vec<String> {
        vec![
            "attach".into(),
            pid.to_string(),
            "-q".into(),
            "--ex".into(),
            cmd.into(),
        ]
    };
    match mode {
        Mode::HotBreak => script(
            "soak-break",
            &[
                "break pg_backend_pid",
                "commands",
                "silent",
                "continue",
                "end",
                "continue",
            ],
        ),
        Mode::Count => ex("count standard_ExecutorStart --ptrace --for 60s"),
        Mode::IdleBreak => script("soak-idle", &["break standard_ExecutorStart", "continue"]),
        Mode::Waits | Mode::IdleWaits => ex("waits trace --ptrace --for 60s"),
        Mode::Trace => ex("trace LockRelationOid relid lockmode --for 60s"),
        Mode::CountByPhase => {
            ex("count ReadBufferExtended standard_ExecutorStart --by-phase --for 60s")
        }
        Mode::Latency => ex("latency pg_sleep --for 60s"),
        Mode::TracePerf => ex("trace LockRelationOid relid lockmode --perf --quiet --for 60s"),
        Mode::Plancache => ex("plancache --stops --for 60s"),
        Mode::PerfProfile => vec![
            "profile".into(),
            pid.to_string(),
            "--for".into(),
            "60s".into(),
        ],
        Mode::PerfWaits => ex("waits trace --uprobes --for 60s"),
        Mode::WaitsInProcess => ex("waits trace --for 60s"),
        Mode::PerfCount => ex("count standard_ExecutorStart --uprobes --for 60s"),
        Mode::CountInProcess => ex("count standard_ExecutorStart --for 60s"),
        Mode::PlancacheFast => ex("plancache --fast --for 60s"),
        Mode::PlanNext => {
            let lines = vec!["plan --next"; 5000];
            script("soak-plan", &lines)
        }
        Mode::Call => script(
            "soak-call",
            &[
                "break standard_ExecutorStart",
                "commands",
                "silent",
                "call pg_usleep(10000)",
                "continue",
                "end",
                "continue",
            ],
        ),
    }
}

/// Waits until pgdbg has armed in `mode` (an int3 or the recorder's jump
/// in the code, the return int3 of a call in flight, its perf events, or
/// a moment for the watchpoint), then a random instant; asserts pgdbg
/// still runs.  Returns whether an inferior call is in flight then.
fn wait_kill_instant(
    mode: Mode,
    pid: i32,
    bin: &std::path::Path,
    p: &mut Pgdbg,
    rng: &mut Rng,
    k: usize,
) -> bool {
    let ppid = p.pid();
    let mut exited = || p.child.try_wait().ok().flatten().is_some();
    // armed: an int3 (or the recorder's jump) in the code, the return
    // int3 of a call in flight, or a moment for the watchpoint; then
    // a random instant
    let t0 = Instant::now();
    if mode.in_call() {
        // poll the entry point's byte until a call is in flight
        while entry_byte(pid) != Some(0xcc) && !exited() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{}: no inferior call within 20 s",
                mode.name()
            );
            std::thread::yield_now();
        }
        let d = match mode {
            Mode::Call => rng.below(10_000),
            _ => rng.below(300),
        };
        if d > 0 {
            std::thread::sleep(Duration::from_micros(d));
        }
    } else if mode.perf() {
        // armed: pgdbg holds its perf events (for count, the kernel's
        // uprobe is in the code page too; the uprobes are opened by
        // the keeper, which holds a copy)
        let kept = || {
            std::env::var_os("PGDBG_NO_KEEPER").is_some()
                || keepers_of(ppid).iter().any(|k| perf_fds(*k) > 0)
        };
        while (perf_fds(ppid) == 0
            || (mode.uprobes() && !kept())
            || (matches!(mode, Mode::PerfCount | Mode::Latency | Mode::TracePerf)
                && code_matches_file(pid, bin, mode.symbol(), 64)))
            && !exited()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{}: not armed within 20 s",
                mode.name()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_micros(rng.below(300_000)));
        if mode == Mode::PerfProfile {
            // never a tracer: no ptrace stop at all
            assert_eq!(tracer_pid(pid), 0, "profile attached with ptrace");
        }
    } else {
        match mode {
            Mode::Waits | Mode::IdleWaits => std::thread::sleep(Duration::from_millis(500)),
            _ => {
                while code_matches_file(pid, bin, mode.symbol(), 64)
                    && t0.elapsed() < Duration::from_secs(20)
                    && !exited()
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(300_000)));
    }
    assert!(
        !exited(),
        "{} kill {k}: pgdbg ended before the kill",
        mode.name()
    );
    if mode.perf() {
        assert!(
            perf_fds(ppid) > 0,
            "{} kill {k}: pgdbg holds no perf event before the kill",
            mode.name()
        );
    }
    if mode.uprobes() && std::env::var_os("PGDBG_NO_KEEPER").is_none() {
        // the keeper opened them and holds a copy: the kernel's
        // removal happens in it, not in the process being killed
        let keepers = keepers_of(ppid);
        assert!(
            keepers.len() == 1 && perf_fds(keepers[0]) > 0,
            "{} kill {k}: no keeper holds pgdbg's uprobes ({keepers:?})",
            mode.name()
        );
    }
    mode.in_call() && entry_byte(pid) == Some(0xcc)
}

/// The backend as pgdbg found it: untraced, code bytes equal to the
/// file's, DR7 clear, SIGTRAP not caught, no executable mapping added.
/// Returns what differs (empty: restored).
fn check_restored(
    pid: i32,
    bin: &std::path::Path,
    mode: Mode,
    maps_before: &[String],
) -> Vec<String> {
    let mut bad = Vec::new();
    if tracer_pid(pid) != 0 {
        bad.push("still traced".to_string());
        return bad;
    }
    if stopped(pid) {
        bad.push("left stopped".to_string());
    }
    for sym in mode.checked() {
        if !code_matches_file(pid, bin, sym, 64) {
            bad.push(format!("code bytes of {sym} differ from the binary"));
        }
    }
    if dr7(pid) != 0 {
        bad.push("DR7 left armed".into());
    }
    if catches_sigtrap(pid) {
        bad.push("the SIGTRAP action was not put back".into());
    }
    let maps = anon_exec_maps(pid);
    if maps != maps_before {
        bad.push(format!(
            "executable anonymous mappings changed: {maps_before:?} -> {maps:?}"
        ));
    }
    bad
}

/// Whether `pid` is in a stop (state T or t).
fn stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let st = s.rsplit_once(") ")?.1.chars().next()?;
            Some(st == 'T' || st == 't')
        })
        .unwrap_or(false)
}

fn kills() -> usize {
    std::env::var("PGDBG_SOAK_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}

fn run(major: u32, modes: &[Mode], n: usize) {
    let cl = Cluster::start(major);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("soak seed {seed}");
    let mut rng = Rng(seed);
    // the pgbench modes trace its backends; the others run under it when
    // PGDBG_SOAK_PGBENCH is set (scripts/soak-kill9 sets it)
    let mut load = (modes.iter().any(|m| m.on_pgbench())
        || std::env::var_os("PGDBG_SOAK_PGBENCH").is_some())
    .then(|| Load::start(&cl));
    let mut table = Vec::new();
    for &m in modes {
        let mark = kernel_log_now();
        let (c, in_call, u) = soak(&cl, &mut load, m, n, &mut rng);
        // "failed to unregister, leaking uprobe": the kernel keeps a uprobe
        // whose removal failed (a removal run by a process being killed)
        let leaks = leaked_uprobes_since(mark);
        table.push((m, c, in_call, u, leaks));
    }
    eprintln!(
        "| PostgreSQL | mode | kills | of them during a call | backends crashed | alive, not fully restored | uprobes the kernel leaked |"
    );
    eprintln!("| --- | --- | --- | --- | --- | --- | --- |");
    for (m, c, in_call, u, leaks) in &table {
        let during = if m.in_call() {
            in_call.to_string()
        } else {
            "-".into()
        };
        eprintln!(
            "| {major} | {} | {n} | {during} | {c} | {u} | {leaks} |",
            m.name()
        );
    }
    for (m, c, _, u, leaks) in &table {
        assert_eq!(
            *leaks,
            0,
            "{}: the kernel log says {leaks} uprobe(s) could not be removed and leaked",
            m.name()
        );
        assert_eq!(*c, 0, "{}: {c} of {n} kills crashed the backend", m.name());
        assert_eq!(
            *u,
            0,
            "{}: {u} of {n} kills left the backend not restored",
            m.name()
        );
    }
}

// pgdbg and its guardian killed together at a random instant, by SIGKILL
// to both PIDs or by `cgroup.kill` of a cgroup v2 directory pgdbg was
// started in (its guardian is born there too), in every mode of issue 37,
// each on a session of the test's own that runs its loop again and again
// under `statement_timeout = '300ms'` (every statement ends by that
// timeout).  After each kill, before anything else acts on the backend:
// how long it stays stopped (state T/t, sampled every millisecond) once
// pgdbg and its guardian are gone: a held backend ends its stop itself
// (src/inferior/selfrelease.rs), within RELEASE_BOUND (docs/safety.md);
// then `kill -CONT`, what a person who finds it stopped sends (after every
// kill, stopped or not: it must never crash the backend; the rescue only
// where it is still stopped after it); then the statement running at the
// kill ends by its statement timeout and a `select pg_sleep(5)` does too.
// Then `pgdbg rescue PID` and the same checks as above.  PGDBG_SOAK_KILLS kills per mode (default 1);
// scripts/soak-kill9 --modes together runs 50.

/// How pgdbg and its guardian are killed together.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Together {
    /// SIGKILL to the guardian's PID and pgdbg's, back to back.
    Sigkill,
    /// pgdbg started in a fresh cgroup v2 directory (the guardian forked
    /// there too), then `echo 1 > cgroup.kill`, then the directory
    /// removed.
    Cgroup,
}

impl Together {
    fn name(self) -> &'static str {
        match self {
            Together::Sigkill => "SIGKILL both",
            Together::Cgroup => "cgroup.kill",
        }
    }
}

/// How long a backend may stay stopped once pgdbg and its guardian are
/// both gone (docs/safety.md, "the backend ends its own stop"): the
/// kernel sends SIGCONT inside the last writer's close of the
/// self-release pipe, before that process is a zombie, and the SIGCONT's
/// wake-up itself ends state T (the backend is runnable then, whether or
/// not it has a CPU); what is left is this test's 1 ms sampling.
const RELEASE_BOUND: Duration = Duration::from_millis(5);

/// The modes issue 37 names: breakpoints with commands, count, waits
/// trace, plancache (stopping and --fast), plan --next in its calls,
/// call pg_usleep, profile.
const TOGETHER_MODES: [Mode; 8] = [
    Mode::HotBreak,
    Mode::Count,
    Mode::Waits,
    Mode::Plancache,
    Mode::PlancacheFast,
    Mode::PlanNext,
    Mode::Call,
    Mode::PerfProfile,
];

/// Kills per mode and way of killing: `PGDBG_SOAK_KILLS`, else 1.
fn together_kills() -> usize {
    std::env::var("PGDBG_SOAK_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// The loop the traced session runs (each run ended by its statement
/// timeout): one that hits `mode`'s breakpoint, plan-cache lookups and
/// executor starts, or short sleeps for `waits trace`.
fn together_workload(mode: Mode) -> &'static str {
    match mode {
        Mode::HotBreak | Mode::Waits => mode.workload(),
        _ => Mode::Count.workload(),
    }
}

/// The traced session's loop on a thread of its own: `sql` run again and
/// again under `statement_timeout = '300ms'`; each end noted (its instant,
/// its error) until `stop` is set or the connection is gone.
struct TimedLoop {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ends: std::sync::Arc<std::sync::Mutex<Vec<(Instant, String)>>>,
    h: std::thread::JoinHandle<postgres::Client>,
}

impl TimedLoop {
    fn start(a: &mut Client, sql: &str) -> TimedLoop {
        let mut c = a.c.take().unwrap();
        c.batch_execute("set statement_timeout = '300ms'").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ends = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, e, sql) = (stop.clone(), ends.clone(), sql.to_string());
        let h = std::thread::spawn(move || {
            while !s.load(std::sync::atomic::Ordering::Relaxed) && !c.is_closed() {
                let r = c.batch_execute(&sql);
                let text = match r {
                    Ok(()) => "ended without error".to_string(),
                    Err(err) => format!("{err:?}"),
                };
                e.lock().unwrap().push((Instant::now(), text));
            }
            c
        });
        TimedLoop { stop, ends, h }
    }
    /// The ends after `t`.
    fn ends_after(&self, t: Instant) -> Vec<String> {
        self.ends
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| *at > t)
            .map(|(_, e)| e.clone())
            .collect()
    }
    /// Stops the loop after its current run; the client back into `a`.
    fn stop(self, a: &mut Client) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        a.c = Some(self.h.join().expect("the session's thread"));
    }
}

/// The cgroup v2 hierarchy's mount point; panics in one line where there
/// is none.
fn cgroup2_root() -> std::path::PathBuf {
    let unified = std::path::Path::new("/sys/fs/cgroup");
    if unified.join("cgroup.controllers").exists() {
        return unified.to_path_buf();
    }
    // a hybrid hierarchy: cgroup v2 mounted beside the v1 controllers
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for l in mounts.lines() {
        let (pre, post) = l.split_once(" - ").unwrap_or((l, ""));
        if post.split_whitespace().next() == Some("cgroup2")
            && let Some(m) = pre.split_whitespace().nth(4)
        {
            return m.into();
        }
    }
    panic!(
        "cgroup v2 is not mounted (no /sys/fs/cgroup/cgroup.controllers, no cgroup2 in /proc/self/mountinfo): the cgroup kill cannot be tested; mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup/unified) and run again"
    );
}

/// A fresh cgroup v2 directory, killed (if still populated) and removed
/// when dropped.
struct Cgroup(std::path::PathBuf);

impl Cgroup {
    fn new(n: usize) -> Cgroup {
        let root = cgroup2_root();
        let dir = root.join(format!("pgdbg-soak-{}-{n}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir) {
            panic!(
                "cannot create the cgroup {}: {e}; the cgroup kill needs root and a writable cgroup v2 hierarchy",
                dir.display()
            );
        }
        let cg = Cgroup(dir);
        assert!(
            cg.0.join("cgroup.kill").exists(),
            "{} has no cgroup.kill (Linux 5.14 or later has it): the cgroup kill cannot be tested on this kernel",
            cg.0.display()
        );
        cg
    }
    /// Whether process `p` is in this cgroup.
    fn holds(&self, p: i32) -> bool {
        let name = self.0.file_name().unwrap().to_string_lossy().to_string();
        std::fs::read_to_string(format!("/proc/{p}/cgroup"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with("0::") && l.ends_with(&format!("/{name}")))
    }
    fn populated(&self) -> bool {
        std::fs::read_to_string(self.0.join("cgroup.events"))
            .map(|s| s.lines().any(|l| l == "populated 1"))
            .unwrap_or(false)
    }
    fn kill(&self) {
        std::fs::write(self.0.join("cgroup.kill"), "1")
            .unwrap_or_else(|e| panic!("echo 1 > {}/cgroup.kill: {e}", self.0.display()));
    }
    /// pgdbg started in this cgroup (its first instruction runs there).
    fn spawn(&self, args: &[&str]) -> Pgdbg {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(self.0.join("cgroup.procs"))
            .unwrap();
        let fd = procs.as_raw_fd();
        let mut cmd = std::process::Command::new(pgdbg_bin());
        cmd.args(args)
            .env_remove("DEBUGINFOD_URLS")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // SAFETY: write(2) on a descriptor opened before the fork, nothing
        // else, between fork and exec ("0": the writing process itself).
        unsafe {
            cmd.pre_exec(move || {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn pgdbg in the cgroup");
        drop(procs);
        Pgdbg { child }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if self.populated() {
            let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        }
        let t0 = Instant::now();
        while std::fs::remove_dir(&self.0).is_err() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// One look at the backend after a kill: when the look began and ended,
/// whether it was stopped, whether pgdbg and its guardian had ended.
struct Sample {
    t0: Instant,
    t1: Instant,
    stopped: bool,
    gone: bool,
}

/// Whether every thread of process `p` has ended (a zombie or reaped):
/// its files are closed then.  The thread group leader alone is not
/// enough: it is a zombie as soon as it has exited itself, while another
/// thread may still be tearing the address space down before it closes
/// the files (exit_mm comes before exit_files), tens of milliseconds for
/// pgdbg's.
fn ended(p: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
        return true;
    };
    tasks.filter_map(|e| e.ok()).all(|e| {
        std::fs::read_to_string(e.path().join("stat")).map_or(true, |s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, r)| r.starts_with('Z') || r.starts_with('X'))
        })
    })
}

/// What one mode's kills found.
#[derive(Default)]
struct TogetherCounts {
    crashed: usize,
    in_call: usize,
    over_bound: usize,
    no_timeout: usize,
    unrestored: usize,
    /// For each kill that found the backend stopped once pgdbg and its
    /// guardian were gone: how long after that it ran again.
    stops: Vec<Duration>,
    /// For each kill that found the backend stopped after it: how long
    /// after the kill it ran again (pgdbg's and its guardian's exit
    /// included).
    stops_from_kill: Vec<Duration>,
}

/// One mode: `kills` times start pgdbg on the session's backend (its loop
/// running under the statement timeout), let it arm, kill it and its
/// guardian together at a random instant, and check: the stop after both
/// are gone, a `kill -CONT` as a person would send (it must never crash
/// the backend), the statement timeout, then the rescue and the restore.
fn soak_together(
    cl: &Cluster,
    mode: Mode,
    kills: usize,
    rng: &mut Rng,
    how: Together,
) -> TogetherCounts {
    let bin = cl.postgres_binary();
    let mut n = TogetherCounts::default();
    let mut a = cl.connect();
    for k in 0..kills {
        let pid = a.pid();
        let maps_before = anon_exec_maps(pid);
        let lp = TimedLoop::start(&mut a, together_workload(mode));
        // the loop runs and its statement timeout fires before the attach
        wait_until(
            "the loop's first statement timeout",
            Duration::from_secs(20),
            || {
                !lp.ends_after(Instant::now() - Duration::from_secs(60))
                    .is_empty()
            },
        );
        let first = lp.ends_after(Instant::now() - Duration::from_secs(60));
        assert!(
            first[0].contains("statement timeout"),
            "{}: the loop did not end by its statement timeout before the attach: {}",
            mode.name(),
            first[0]
        );
        let args = attach_args(mode, pid);
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let log_before = crashes(&cl.log());
        let cg = (how == Together::Cgroup).then(|| Cgroup::new(k));
        let mut p = match &cg {
            Some(cg) => cg.spawn(&refs),
            None => Pgdbg::spawn(&refs),
        };
        if mode != Mode::PerfProfile {
            p.wait_attached(pid);
        }
        let ppid = p.pid();
        let landed_in_call = wait_kill_instant(mode, pid, &bin, &mut p, rng, k);
        let guardians = guardians_of(pid);
        if let Some(cg) = &cg {
            assert!(cg.holds(ppid), "pgdbg {ppid} is not in {}", cg.0.display());
            for g in &guardians {
                assert!(
                    cg.holds(*g),
                    "the guardian {g} was not born in {}",
                    cg.0.display()
                );
            }
        }
        // the backend's state, every millisecond, from just before the
        // kill, and whether pgdbg and its guardian have ended, sampled by a
        // thread of real-time priority (a loaded machine would otherwise
        // leave gaps of tens of milliseconds between samples)
        let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let s = sampling.clone();
        let gs = guardians.clone();
        let sampler = std::thread::spawn(move || {
            let prio = libc::sched_param { sched_priority: 10 };
            // SAFETY: sets this thread's own policy.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &prio) };
            let mut v = Vec::new();
            while s.load(std::sync::atomic::Ordering::Relaxed) {
                let t0 = Instant::now();
                let gone = ended(ppid) && gs.iter().all(|g| ended(*g));
                let st = stopped(pid);
                v.push(Sample {
                    t0,
                    t1: Instant::now(),
                    stopped: st,
                    gone,
                });
                std::thread::sleep(Duration::from_millis(1));
            }
            v
        });
        std::thread::sleep(Duration::from_millis(2));
        let t_kill = Instant::now();
        match &cg {
            Some(cg) => cg.kill(),
            None => {
                // the guardian first: gone before pgdbg's death could
                // wake it
                for g in &guardians {
                    unsafe { libc::kill(*g, libc::SIGKILL) };
                }
                unsafe { libc::kill(ppid, libc::SIGKILL) };
            }
        }
        if landed_in_call && entry_byte(pid) == Some(0xcc) {
            n.in_call += 1;
        }
        // both gone (zombies at least: their files are closed)
        while !(ended(ppid) && guardians.iter().all(|g| ended(*g))) {
            assert!(
                t_kill.elapsed() < Duration::from_secs(30),
                "{} kill {k}: pgdbg or its guardian still runs 30 s after the kill",
                mode.name()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let t_gone = Instant::now();
        let (_, _, mut err) = p.wait(Duration::from_secs(30));
        if let Some(cg) = cg {
            wait_until("the cgroup to empty", Duration::from_secs(30), || {
                !cg.populated()
            });
            drop(cg);
        }
        // nobody acts on the backend now: sample on for a while
        let window = Duration::from_millis(300);
        std::thread::sleep((t_gone + window).saturating_duration_since(Instant::now()));
        sampling.store(false, std::sync::atomic::Ordering::Relaxed);
        let samples = sampler.join().unwrap();
        // from the first sample that saw both ended: the last that saw
        // the backend stopped (it was at least until that read began),
        // and the first after it that saw it running
        let g = samples.iter().position(|x| x.gone).unwrap_or(samples.len());
        let t_gone = samples.get(g).map_or(t_gone, |x| x.t0);
        let still = stopped(pid);
        let last_stop = samples[g..].iter().rposition(|x| x.stopped).map(|i| g + i);
        let stop_after_gone = last_stop.map(|i| {
            samples
                .get(i + 1)
                .map_or_else(Instant::now, |x| x.t1)
                .saturating_duration_since(t_gone)
        });
        let surely_stopped = last_stop.map(|i| samples[i].t0.saturating_duration_since(t_gone));
        // and from the kill: until it ran for good (ptrace stops of
        // pgdbg's while it still ran included)
        let stop_after_kill = samples
            .iter()
            .rposition(|x| x.stopped && x.t1 >= t_kill)
            .map(|i| {
                samples
                    .get(i + 1)
                    .map_or_else(Instant::now, |x| x.t1)
                    .saturating_duration_since(t_kill)
            });
        if let Some(d) = stop_after_kill {
            n.stops_from_kill.push(d);
        }
        let over = still || surely_stopped.is_some_and(|d| d > RELEASE_BOUND);
        if let Some(d) = stop_after_gone {
            n.stops.push(d);
        }
        if over {
            n.over_bound += 1;
        }
        // what a person who finds the backend stopped does: `kill -CONT`.
        // It must never crash the backend (issue 37), stopped or not: sent
        // after every kill, the checks below see a crash
        // SAFETY: kill(2) of a backend of the soak's own cluster.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        std::thread::sleep(Duration::from_millis(20));
        let still_after_cont = stopped(pid);
        let mut rescued = false;
        if still_after_cont {
            // stopped until someone acts: the rescue now, before the
            // timeout checks (which would wait for it)
            let (code, out, rerr) = pgdbg(&["rescue", &pid.to_string()]);
            assert_eq!(code, 0, "{} kill {k}: pgdbg rescue: {rerr}", mode.name());
            err.push_str(&format!("\nrescue (left stopped): {}", out.trim()));
            rescued = true;
        }
        // the statement running at the kill ends by its timeout
        let t_check = Instant::now();
        let mut timeout_ok = false;
        let alive = || std::path::Path::new(&format!("/proc/{pid}")).exists();
        while t_check.elapsed() < Duration::from_secs(5) && alive() {
            if lp
                .ends_after(t_kill)
                .iter()
                .any(|e| e.contains("statement timeout"))
            {
                timeout_ok = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if !timeout_ok && alive() {
            eprintln!(
                "    STATEMENT TIMEOUT LOST: the loop's statement ran on 5 s after the kill (ends since: {:?})",
                lp.ends_after(t_kill)
            );
            cl.cancel(&[pid]);
        }
        lp.stop(&mut a);
        let died_now = crashes(&cl.log()) > log_before || !alive();
        if !died_now && a.c.as_ref().is_some_and(|c| !c.is_closed()) {
            // a new statement under the timeout after the kill
            let t = Instant::now();
            let r = a.c.as_mut().unwrap().batch_execute("select pg_sleep(5)");
            let took = t.elapsed();
            let fired = r
                .as_ref()
                .err()
                .is_some_and(|e| format!("{e:?}").contains("statement timeout"))
                && took < Duration::from_secs(3);
            if !fired {
                eprintln!(
                    "    STATEMENT TIMEOUT LOST: select pg_sleep(5) under statement_timeout 300ms: {r:?} after {took:?}"
                );
            }
            timeout_ok &= fired;
        }
        if !rescued {
            let (code, out, rerr) = pgdbg(&["rescue", &pid.to_string()]);
            assert_eq!(code, 0, "{} kill {k}: pgdbg rescue: {rerr}", mode.name());
            err.push_str(&format!("\nrescue: {}", out.trim()));
        }
        wait_until("the keeper to finish", Duration::from_secs(30), || {
            keepers_of(ppid).is_empty()
        });
        // a backend put back into a call's return int3 or past an int3
        // crashes within the call's length (10 ms here): look after that
        std::thread::sleep(Duration::from_millis(200));
        let died = crashes(&cl.log()) > log_before || !alive();
        if !died && !timeout_ok {
            n.no_timeout += 1;
        }
        eprintln!(
            "soak together {} ({}) kill {k}: {}, stopped {:?} after the kill, {} after both were gone{}{}",
            mode.name(),
            how.name(),
            if died { "BACKEND DIED" } else { "ok" },
            stop_after_kill.unwrap_or_default(),
            match (stop_after_gone, still) {
                (_, true) if still_after_cont => "until the rescue".to_string(),
                (_, true) => "until kill -CONT".to_string(),
                (Some(d), _) =>
                    format!("{d:?} (at least {:?})", surely_stopped.unwrap_or_default()),
                (None, _) => "0".to_string(),
            },
            if timeout_ok || died {
                ""
            } else {
                ", statement_timeout LOST"
            },
            err.lines()
                .filter(|l| l.starts_with("rescue"))
                .map(|l| format!("\n    {l}"))
                .collect::<String>()
        );
        if died {
            n.crashed += 1;
            for l in cl
                .log()
                .lines()
                .filter(|l| l.contains("terminated by signal"))
                .skip(log_before)
            {
                eprintln!("    {l}");
            }
            wait_until("the cluster to recover", Duration::from_secs(60), || {
                postgres::Client::connect(&cl.connstr(), postgres::NoTls).is_ok()
            });
            a = cl.connect();
            continue;
        }
        let bad = check_restored(pid, &bin, mode, &maps_before);
        if !bad.is_empty() {
            eprintln!("    NOT RESTORED: {}", bad.join("; "));
            n.unrestored += 1;
        }
        a.exec("set statement_timeout = 0");
        assert_eq!(a.pid(), pid);
        assert_eq!(
            a.query_one_i64("select count(*) from pg_class where false"),
            0
        );
        assert!(
            crashes(&cl.log()) == log_before,
            "{} kill {k}: a backend died after the restore",
            mode.name()
        );
        if k + 1 == kills {
            let (code, _, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "bt 1"]);
            assert_eq!(code, 0, "{}: attach after the kills: {err}", mode.name());
            let bad = check_restored(pid, &bin, mode, &anon_exec_maps(pid));
            if !bad.is_empty() {
                eprintln!("    NOT RESTORED after a clean attach: {}", bad.join("; "));
                n.unrestored += 1;
            }
        }
    }
    n
}

fn run_together(major: u32, how: Together) {
    if how == Together::Cgroup {
        // unavailable: one line and a failure, before a cluster starts
        drop(Cgroup::new(usize::MAX));
    }
    let n = together_kills();
    let cl = Cluster::start(major);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("soak seed {seed}");
    let mut rng = Rng(seed);
    // under the 4-client pgbench when PGDBG_SOAK_PGBENCH is set
    // (scripts/soak-kill9 sets it)
    let mut load = std::env::var_os("PGDBG_SOAK_PGBENCH")
        .is_some()
        .then(|| Load::start(&cl));
    let mut table = Vec::new();
    // PGDBG_SOAK_MODES: only the modes whose name starts with one of
    // these comma-separated words (scripts/soak-kill9 --only)
    let only: Vec<String> = std::env::var("PGDBG_SOAK_MODES")
        .unwrap_or_default()
        .split(',')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    for m in TOGETHER_MODES {
        if !only.is_empty() && !only.iter().any(|w| m.name().starts_with(w.as_str())) {
            continue;
        }
        table.push((m, soak_together(&cl, m, n, &mut rng, how)));
        if let Some(l) = load.as_mut() {
            // still 4 clients (a crash would have ended them)
            if l.backends(&cl).len() != 4 {
                l.stop();
                *l = Load::start(&cl);
            }
        }
    }
    eprintln!(
        "| PostgreSQL | killed by | mode | kills | of them during a call | crashed | left stopped over the bound ({RELEASE_BOUND:?}) | statement_timeout not firing | not restored | stopped after both gone: kills, median, max | stopped after the kill: kills, median, max |"
    );
    eprintln!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let spread = |v: &[Duration]| {
        let mut s = v.to_vec();
        s.sort();
        if s.is_empty() {
            "0".to_string()
        } else {
            format!(
                "{}, {:.1?}, {:.1?}",
                s.len(),
                s[s.len() / 2],
                s[s.len() - 1]
            )
        }
    };
    for (m, c) in &table {
        let during = if m.in_call() {
            c.in_call.to_string()
        } else {
            "-".into()
        };
        eprintln!(
            "| {major} | {} | {} | {n} | {during} | {} | {} | {} | {} | {} | {} |",
            how.name(),
            m.name(),
            c.crashed,
            c.over_bound,
            c.no_timeout,
            c.unrestored,
            spread(&c.stops),
            spread(&c.stops_from_kill)
        );
    }
    if let Some(l) = load.as_mut() {
        l.stop();
    }
    for (m, c) in &table {
        assert_eq!(
            c.crashed,
            0,
            "{} ({}): {} of {n} kills crashed the backend",
            m.name(),
            how.name(),
            c.crashed
        );
        // the two known defects of issue 37 (docs/safety.md, "Not
        // protected"): asserted by scripts/soak-kill9 (PGDBG_SOAK_STRICT),
        // reported by the default run, where 1 kill per mode would make
        // the suite fail at random until they are fixed
        if std::env::var_os("PGDBG_SOAK_STRICT").is_none() {
            if c.over_bound + c.no_timeout > 0 {
                eprintln!(
                    "soak: known defect (not asserted here; PGDBG_SOAK_STRICT=1 asserts): {} ({}): {} kill(s) left the backend stopped past {RELEASE_BOUND:?}, {} lost the running statement's statement_timeout",
                    m.name(),
                    how.name(),
                    c.over_bound,
                    c.no_timeout
                );
            }
            assert_eq!(
                c.unrestored,
                0,
                "{} ({}): {} of {n} kills left the backend not restored",
                m.name(),
                how.name(),
                c.unrestored
            );
            continue;
        }
        assert_eq!(
            c.over_bound,
            0,
            "{} ({}): {} of {n} kills left the backend stopped longer than {RELEASE_BOUND:?} after pgdbg and its guardian were gone",
            m.name(),
            how.name(),
            c.over_bound
        );
        assert_eq!(
            c.no_timeout,
            0,
            "{} ({}): after {} of {n} kills the session's statement_timeout did not fire",
            m.name(),
            how.name(),
            c.no_timeout
        );
        assert_eq!(
            c.unrestored,
            0,
            "{} ({}): {} of {n} kills left the backend not restored",
            m.name(),
            how.name(),
            c.unrestored
        );
    }
}

#[test]
fn kill9_together_15() {
    run_together(15, Together::Sigkill);
}

#[test]
fn kill9_together_18() {
    run_together(18, Together::Sigkill);
}

#[test]
fn kill9_together_cgroup_15() {
    run_together(15, Together::Cgroup);
}

#[test]
fn kill9_together_cgroup_18() {
    run_together(18, Together::Cgroup);
}

#[test]
fn kill9_idle_15() {
    run(15, &[Mode::IdleBreak, Mode::IdleWaits], kills());
}

#[test]
fn kill9_idle_18() {
    run(18, &[Mode::IdleBreak, Mode::IdleWaits], kills());
}

// A backend that hits the breakpoint or writes the watched word within the
// half millisecond the guardian needs after pgdbg's death: pgdbg's SIGTRAP
// handler in the backend (src/target/traphandler.rs) puts the byte back
// and rewinds, or lets a watchpoint trap pass, until the guardian restores
// the rest.  Without it (PGDBG_NO_TRAP_HANDLER=1) nearly every kill here
// crashes the backend.
#[test]
fn kill9_busy_15() {
    run(15, &[Mode::HotBreak, Mode::Count, Mode::Waits], kills());
}

#[test]
fn kill9_busy_18() {
    run(18, &[Mode::HotBreak, Mode::Count, Mode::Waits], kills());
}

// `profile`, `waits trace` and `count` through perf events (their default
// modes): the kernel owns the sampling timer, the write breakpoint and the
// uprobes, and closes them with pgdbg's files (the uprobes with its
// keeper's, which opened them); nothing of pgdbg's is in the backend to
// restore.  After each kill: pgdbg held perf events just before it (and
// its keeper the uprobes), the backend runs on, untraced and not stopped,
// its code equal to the file's, DR7 clear, no mapping added, no perf event
// left (pgdbg, its guardian and its keeper are gone with their files), no
// uprobe leaked by the kernel.
#[test]
fn kill9_perf_15() {
    run(
        15,
        &[Mode::PerfProfile, Mode::PerfWaits, Mode::PerfCount],
        kills(),
    );
}

#[test]
fn kill9_perf_18() {
    run(
        18,
        &[Mode::PerfProfile, Mode::PerfWaits, Mode::PerfCount],
        kills(),
    );
}

// `latency` and `trace --perf`: kernel uprobes (perf events), which the
// kernel removes when pgdbg dies, calls in flight included (their return
// addresses are put back as they return).
#[test]
fn kill9_uprobes_15() {
    run(15, &[Mode::Latency, Mode::TracePerf], kills());
}

#[test]
fn kill9_uprobes_18() {
    run(18, &[Mode::Latency, Mode::TracePerf], kills());
}

const PROBE_MODES: [Mode; 6] = [
    Mode::Trace,
    Mode::CountByPhase,
    Mode::Plancache,
    Mode::PlancacheFast,
    Mode::PlanNext,
    Mode::Call,
];

/// Kills per mode of the probe modes: `PGDBG_SOAK_KILLS`, else 3 (the
/// default run; scripts/soak-kill9 runs 50).
fn probe_kills() -> usize {
    std::env::var("PGDBG_SOAK_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

// `plancache --fast` on backends of a 4-client pgbench, `count`'s
// in-process counter on a query loop and `waits trace`'s in-process
// recorders on a pg_sleep loop: their jumps are harmless after pgdbg's
// death and the guardian takes them out (plancache --fast: 0 crashes in
// 100 kills).
#[test]
fn kill9_recorder_15() {
    run(
        15,
        &[
            Mode::PlancacheFast,
            Mode::CountInProcess,
            Mode::WaitsInProcess,
        ],
        probe_kills(),
    );
}

#[test]
fn kill9_recorder_18() {
    run(
        18,
        &[
            Mode::PlancacheFast,
            Mode::CountInProcess,
            Mode::WaitsInProcess,
        ],
        probe_kills(),
    );
}

// `trace`, `count --by-phase`, `plancache` (stops and in-process recorder),
// `plan --next` and `call` on backends of a 4-client pgbench; the last two
// killed while their inferior call is in flight.  pgdbg holds the backend
// in a group stop (src/inferior/hold.rs): a kill that lands in a hit pgdbg
// has not yet rewound, or inside an inferior call, leaves the backend
// stopped for the guardian, which rewinds it or finishes the call.
// scripts/soak-kill9 --modes probes runs 50 kills per mode.
#[test]
fn kill9_probes_15() {
    run(15, &PROBE_MODES, probe_kills());
}

#[test]
fn kill9_probes_18() {
    run(18, &PROBE_MODES, probe_kills());
}

fn vm_rss_kb(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Attach/detach cycles per run: `PGDBG_SOAK_CYCLES`, else 40 (the
/// default run; scripts/soak-kill9 --cycles 1000 for the long one).
fn cycles() -> usize {
    std::env::var("PGDBG_SOAK_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

/// Attach, arm, detach again and again on a backend of the pgbench load:
/// a traced call (int3s), or `waits trace` (a debug register), every
/// cycle ended by pgdbg itself.  After each: the backend as found (code
/// bytes, DR7, SIGTRAP action, mappings, still serving pgbench); no
/// guardian left; pgdbg's peak RSS (wait4's ru_maxrss) and the backend's
/// VmRSS flat from the first tenth of the cycles to the last.
fn attach_detach_cycles(major: u32) {
    let cl = Cluster::start(major);
    let bin = cl.postgres_binary();
    let mut load = Load::start(&cl);
    let pid = load.backends(&cl)[0];
    let n = cycles();
    let maps_before = anon_exec_maps(pid);
    let mut pgdbg_rss = Vec::new();
    let mut backend_rss = Vec::new();
    let log_before = crashes(&cl.log());
    let t0 = Instant::now();
    for k in 0..n {
        assert_busy(pid, &format!("before the attach of cycle {k}"));
        let cmd = if k % 2 == 0 {
            "trace LockRelationOid relid --count 3 --quiet"
        } else {
            "waits trace --ptrace --for 20ms"
        };
        // reaped with wait4 below, for its rusage (peak RSS)
        #[allow(clippy::zombie_processes)]
        let child = std::process::Command::new(pgdbg_bin())
            .args(["attach", &pid.to_string(), "-q", "--ex", cmd])
            .env_remove("DEBUGINFOD_URLS")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let cpid = child.id() as i32;
        let mut st = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::wait4(cpid, &mut st, 0, &mut ru) }, cpid);
        let mut err = String::new();
        if let Some(mut e) = child.stderr {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "cycle {k} ({cmd}): status {st:#x}: {err}"
        );
        pgdbg_rss.push(ru.ru_maxrss as u64);
        backend_rss.push(vm_rss_kb(pid));
        assert!(
            guardians_of(pid).is_empty(),
            "cycle {k}: a guardian is left"
        );
        assert_eq!(tracer_pid(pid), 0, "cycle {k}: still traced");
        // the reads of the binary and the seize for DR7 are the slow part:
        // every tenth cycle (and the last)
        if k % 10 == 0 || k + 1 == n {
            for sym in ["LockRelationOid", "_start"] {
                assert!(
                    code_matches_file(pid, &bin, sym, 64),
                    "cycle {k}: code bytes of {sym} differ from the binary"
                );
            }
            assert_eq!(dr7(pid), 0, "cycle {k}: DR7 left armed");
        }
        assert!(!catches_sigtrap(pid), "cycle {k}: SIGTRAP still caught");
        assert_eq!(
            anon_exec_maps(pid),
            maps_before,
            "cycle {k}: mappings changed"
        );
        assert_eq!(
            crashes(&cl.log()),
            log_before,
            "cycle {k}: a backend crashed"
        );
    }
    assert_busy(pid, "after the cycles");
    assert!(load.backends(&cl).contains(&pid));
    let tenth = (n / 10).max(1);
    let avg = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
    let (p0, p1) = (avg(&pgdbg_rss[..tenth]), avg(&pgdbg_rss[n - tenth..]));
    let (b0, b1) = (avg(&backend_rss[..tenth]), avg(&backend_rss[n - tenth..]));
    eprintln!(
        "attach/detach {n} cycles on PostgreSQL {major} in {:.1?}: pgdbg peak RSS {p0:.0} -> {p1:.0} kB (max {}), backend VmRSS {b0:.0} -> {b1:.0} kB (max {})",
        t0.elapsed(),
        pgdbg_rss.iter().max().unwrap(),
        backend_rss.iter().max().unwrap()
    );
    assert!(
        p1 < p0 * 1.10 + 1024.0,
        "pgdbg's RSS grows: {p0:.0} -> {p1:.0} kB"
    );
    assert!(
        b1 < b0 + 2048.0,
        "the backend's RSS grows: {b0:.0} -> {b1:.0} kB"
    );
}

#[test]
fn attach_detach_cycles_15() {
    attach_detach_cycles(15);
}

#[test]
fn attach_detach_cycles_18() {
    attach_detach_cycles(18);
}
