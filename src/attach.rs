//! `pgdbg attach`: the checks before a process is touched, loading its
//! debug info and scripts, attaching, running a script or the REPL, and
//! leaving the backend as it was found.  `cli.rs` parses the command line
//! and calls in here; `multi.rs` (several backends) uses the same pieces
//! for each worker.

use crate::command;
use crate::debuginfo::DebugInfo;
use crate::debuginfo::debuginfod::Fetch;
use crate::inferior::{Gone, Target, procfs};
use crate::postgres::{self, ProcessKind};
use crate::runtime::{self, one_line};
use crate::script::Script;
use crate::session::{Flow, Outcome, Session, SessionOptions};
use anyhow::{Result, anyhow, bail};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::rc::Rc;

pub fn parse_pid(pid: Option<String>) -> Result<i32> {
    let s = pid.ok_or_else(|| {
        anyhow!("attach needs the PID of a backend: pgdbg attach PID (find it with: select pid, query from pg_stat_activity)")
    })?;
    let n: i64 = s.trim().parse().map_err(|_| {
        anyhow!("'{s}' is not a PID: give the number of a backend process (select pg_backend_pid() in its session)", s = crate::shown::shown(&s))
    })?;
    if n <= 0 || n > i32::MAX as i64 {
        bail!("{n} is not a valid PID: give the number of a backend process");
    }
    Ok(n as i32)
}

/// Check the process before touching it: exists, postgres, not the
/// postmaster, not traced already.
pub fn check_target(pid: i32, any_process: bool) -> Result<ProcessKind> {
    if !procfs::exists(pid) {
        return Err(Gone::NoProcess(pid).into());
    }
    let st = procfs::status(pid)?;
    // ptrace permission (another user, root without CAP_SYS_PTRACE, Yama's
    // ptrace_scope): the cause and the fix, before anything is touched
    if (any_process || st.name == "postgres" || st.name == "postmaster")
        && let Some(why) = crate::inferior::permission::refusal(pid)
    {
        return Err(crate::inferior::permission::Refused(why).into());
    }
    // /proc/PID/exe needs the same permission as ptrace: fail early with the
    // right message.
    let started = procfs::start_time(pid);
    if let Err(e) = procfs::exe_path(pid) {
        // a process that ended, became a zombie, ran another program or
        // whose PID was taken since it was looked at: said as such, not
        // blamed on permissions
        // (a process in its exit loses its exe link before it becomes a
        // zombie: a moment later it says so)
        let mut what = vanished(pid, &st.name, started);
        let t0 = std::time::Instant::now();
        while what.is_none() && t0.elapsed() < std::time::Duration::from_millis(200) {
            std::thread::sleep(std::time::Duration::from_millis(5));
            what = vanished(pid, &st.name, started);
        }
        if let Some(what) = what {
            return Err(what.into());
        }
        // a process whose name is not postgres is not a backend, readable
        // or not (PID 1 in a container, where even root may not read it)
        if st.name != "postgres" && st.name != "postmaster" {
            bail!(
                "process {pid} ({}) is not a PostgreSQL process: give the PID of a backend (select pg_backend_pid() in its session)",
                st.name
            );
        }
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            bail!(
                "process {pid} (postgres): even root may not read /proc/{pid}/exe or trace it here (ptrace is restricted: a container without CAP_SYS_PTRACE, or kernel.yama.ptrace_scope = 3)"
            );
        }
        return Err(e);
    }
    let kind = postgres::classify(pid)?;
    match &kind {
        _ if any_process => {}
        ProcessKind::NotPostgres { name } => bail!(
            "process {pid} ({name}) is not a PostgreSQL process: give the PID of a backend (select pg_backend_pid() in its session)"
        ),
        ProcessKind::Postmaster => bail!(
            "process {pid} is the postmaster, not a backend: stopping it would stall the whole cluster; attach to a backend instead (select pid from pg_stat_activity)"
        ),
        _ => {}
    }
    if st.tracer_pid != 0 {
        return Err(already_traced(pid, st.tracer_pid));
    }
    // what a killed pgdbg (and its guardian) left: restored first, as
    // `pgdbg rescue PID` does
    use crate::inferior::guardian::rescue::{self, Left};
    match rescue::left(pid) {
        Some(Left::Record { .. }) => crate::runtime::sink().warn(format_args!("{}", rescue::rescue(pid)?)),
        // a guardian still restoring it, or a record that cannot be used:
        // what pgdbg left there would look foreign
        Some(Left::Guarded { pgdbg }) => bail!("{}", rescue::guarded(pid, pgdbg)),
        Some(Left::Unusable { path, why }) => bail!(
            "backend {pid} holds what a killed pgdbg changed, and its record {} cannot be used ({why}): run pgdbg as that pgdbg's user or as root",
            path.display()
        ),
        Some(Left::Earlier { path }) => bail!("{}", rescue::earlier(pid, &path)),
        Some(Left::Stopped) => crate::runtime::sink().warn(format_args!(
            "backend {pid} is stopped (state T, no tracer): pgdbg leaves it stopped; if a killed debugger left it so, 'pgdbg rescue {pid}' lets it run"
        )),
        _ => {}
    }
    Ok(kind)
}

fn already_traced(pid: i32, tracer: i32) -> anyhow::Error {
    let who = procfs::status(tracer)
        .map(|s| s.name)
        .unwrap_or_else(|_| "?".into());
    NotAttached::error(
        ALREADY_TRACED_EXIT,
        format!(
            "process {pid} is already traced by PID {tracer} ({who}): detach that debugger first"
        ),
    )
}

/// What happened to process `pid` (named `name`, started at `started`
/// when it was first looked at) if it is no longer the live process it
/// was: exited, a zombie, another program, or its PID reused.  None when it
/// is still there as it was.
fn vanished(pid: i32, name: &str, started: Option<u64>) -> Option<Gone> {
    let name = name.to_string();
    if !procfs::exists(pid) {
        return Some(Gone::ExitedAttaching { pid, name });
    }
    let now = procfs::start_time(pid);
    if started.is_some() && now.is_some() && now != started {
        let new = procfs::status(pid).map(|s| s.name).unwrap_or_default();
        return Some(Gone::PidReused { pid, name, new });
    }
    if matches!(procfs::state(pid), Some('Z' | 'X')) {
        return Some(Gone::Zombie { pid, name });
    }
    match procfs::status(pid) {
        Err(_) => Some(Gone::ExitedAttaching { pid, name }),
        Ok(s) if s.name != name => Some(Gone::Exec {
            pid,
            name,
            program: s.name,
        }),
        Ok(_) => None,
    }
}

fn load_script(
    path: &std::path::Path,
    di: &DebugInfo,
    defs: &[(String, String)],
    scopes: &mut Vec<Option<String>>,
) -> Result<Script> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("cannot read script {}: {e}", path.display()))?;
    let w = path.display().to_string();
    crate::script::check_after(&w, &crate::script::substitute(&w, &text, defs)?, di, scopes)
}

/// The backends a command works on (`pgdbg attach`, `bt`, `plan`, `wait`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Targets {
    /// PID of the backend (select pg_backend_pid(), or pg_stat_activity.pid);
    /// several PIDs run the script on each of them at once
    #[arg(value_name = "PID")]
    pub pids: Vec<String>,
    /// Every client backend of the cluster whose data directory or
    /// socket directory is DIR, including backends that start while the
    /// script runs (needs --script or --ex)
    #[arg(long, value_name = "DIR")]
    pub cluster: Option<PathBuf>,
    /// The PIDs are PIDs in the PID namespace of host process HOSTPID
    /// (a container's: pg_stat_activity.pid there; HOSTPID is any
    /// process of that container, e.g. its postmaster)
    #[arg(long, value_name = "HOSTPID")]
    pub ns_of: Option<String>,
}

impl Targets {
    /// The PIDs as this machine's PID namespace numbers them.
    pub fn host_pids(&self) -> Result<Vec<String>> {
        match &self.ns_of {
            Some(of) => host_pids(of, &self.pids),
            None => Ok(self.pids.clone()),
        }
    }
}

/// Where the debug info of the backend's binary comes from (`pgdbg
/// attach`, `bt`, `plan`, `wait`, `profile`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DebugInfoOpts {
    /// Read DWARF from FILE, a separate debug file of this exact build (the
    /// same build-id)
    #[arg(long, value_name = "FILE")]
    pub debug_file: Option<PathBuf>,
    /// Use this layout pack instead of DWARF (stripped binaries; see pgdbg
    /// symbols; the packs for PostgreSQL 13 to 18 are built in and picked
    /// automatically)
    #[arg(long, value_name = "FILE")]
    pub symbols: Option<PathBuf>,
}

/// How pgdbg reads and calls into an attached backend (`pgdbg attach`,
/// `bt`, `plan`, `wait`).
#[derive(clap::Args, Debug, Clone)]
pub struct BackendOpts {
    #[command(flatten)]
    pub debug: DebugInfoOpts,
    /// Abandon an inferior call (call, plan) that takes longer (e.g. 5s)
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub call_timeout: String,
}

impl Default for BackendOpts {
    fn default() -> Self {
        BackendOpts {
            debug: DebugInfoOpts::default(),
            call_timeout: "5s".into(),
        }
    }
}

/// The options of `pgdbg attach` besides the targets.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AttachOpts {
    /// End the script after DURATION (e.g. 10s): the command running then
    /// stops, the backend is restored and detached
    #[arg(long = "for", value_name = "DURATION")]
    pub for_: Option<String>,
    /// End the script after N breakpoint hits (per backend)
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Replace ${NAME} in the script by VALUE (repeatable), e.g.
    /// --define QUERYID=-4913012823401
    #[arg(long, short = 'D', value_name = "NAME=VALUE")]
    pub define: Vec<String>,
    /// Run the commands in FILE, then detach (no prompt)
    #[arg(long, short = 'x', value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Run COMMAND (like a script line; repeatable, after --script), then detach
    #[arg(long = "ex", short = 'e', value_name = "COMMAND")]
    pub ex: Vec<String>,
    /// Append every event (stops, prints, backtraces) to FILE as JSON lines
    #[arg(long, value_name = "FILE")]
    pub capture: Option<PathBuf>,
    /// With --capture: a stop event for every hit of a `silent`
    /// breakpoint (default: a hits event with counts, once a second)
    #[arg(long, requires = "capture")]
    pub capture_hits: bool,
    #[command(flatten)]
    pub backend: BackendOpts,
    /// Do not print the banner and progress lines
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Allow a process that is not a PostgreSQL backend (test fixtures)
    #[arg(long, hide = true)]
    pub any_process: bool,
    /// Run as one of the per-backend workers of a multi-backend attach
    #[arg(long, hide = true)]
    pub worker: bool,
    /// (a worker of --cluster) `waits trace` takes its statements' marks
    /// from the uprobes the leader opened for the cluster, asked for on the
    /// socket of this name (cluster_marks.rs)
    #[arg(long, hide = true, requires = "worker")]
    pub statements_from: Option<String>,
    /// (a worker started ahead) PID is the postmaster: attach to its next
    /// client backend at its fork (forks.rs)
    #[arg(long, hide = true, requires = "worker")]
    pub next_backend: bool,
    /// (with --next-backend) load the debug info and the script once, then
    /// fork each spare from this process (forkserver.rs)
    #[arg(long, hide = true, requires = "next_backend")]
    pub fork_server: bool,
}

impl AttachOpts {
    /// The command line of the worker that attaches to `pid` for a
    /// multi-backend attach: these options, with the time left of `--for`.
    /// (Next to the struct, so a new option is passed on in the same place.)
    pub fn worker_args(
        &self,
        pid: i32,
        remaining: Option<std::time::Duration>,
    ) -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = vec![
            "attach".into(),
            pid.to_string().into(),
            "--worker".into(),
            "-q".into(),
        ];
        let mut opt = |k: &str, v: std::ffi::OsString| {
            a.push(k.into());
            a.push(v);
        };
        if let Some(s) = &self.script {
            opt("--script", s.into());
        }
        for e in &self.ex {
            opt("--ex", e.into());
        }
        for d in &self.define {
            opt("--define", d.into());
        }
        if let Some(c) = &self.capture {
            opt("--capture", c.into());
        }
        if let Some(d) = &self.backend.debug.debug_file {
            opt("--debug-file", d.into());
        }
        if let Some(s) = &self.backend.debug.symbols {
            opt("--symbols", s.into());
        }
        opt("--call-timeout", (&self.backend.call_timeout).into());
        if let Some(r) = remaining {
            opt("--for", format!("{}ms", r.as_millis().max(1)).into());
        }
        if let Some(n) = self.count {
            opt("--count", n.to_string().into());
        }
        if self.any_process {
            a.push("--any-process".into());
        }
        if self.capture_hits {
            a.push("--capture-hits".into());
        }
        if let Some(n) = &self.statements_from {
            a.push("--statements-from".into());
            a.push(n.into());
        }
        a
    }

    /// `--for`, parsed.
    pub fn duration(&self) -> Result<Option<std::time::Duration>> {
        self.for_
            .as_deref()
            .map(|d| command::parse_duration(d).map_err(|e| anyhow!("--for: {e}")))
            .transpose()
    }
}

/// Load the debug info of a process's binary (with progress on a terminal).
pub fn load_debuginfo(pid: i32, opts: &AttachOpts) -> Result<(Rc<DebugInfo>, PathBuf)> {
    let exe_link = PathBuf::from(format!("/proc/{pid}/exe"));
    // the files the backend names (libraries, debug files, $libdir) are
    // looked up in its root: a container's, not the host's
    crate::debuginfo::elf::set_target(pid);
    let real = procfs::exe_path(pid)?;
    let real_clean = PathBuf::from(
        real.to_string_lossy()
            .trim_end_matches(" (deleted)")
            .to_string(),
    );
    let t0 = std::time::Instant::now();
    let show_progress = !opts.quiet;
    if show_progress && std::io::stderr().is_terminal() {
        crate::runtime::sink().part(format_args!(
            "Reading debug info of {} ...",
            real_clean.display()
        ));
    }
    // debuginfod: the supervisor of a multi-backend attach downloads, its
    // workers read the cache
    let fetch = if opts.worker {
        Fetch::CacheOnly
    } else if show_progress {
        Fetch::Progress
    } else {
        Fetch::Quiet
    };
    let di = DebugInfo::load(
        &exe_link,
        &real_clean,
        opts.backend.debug.debug_file.as_deref(),
        opts.backend.debug.symbols.as_deref(),
        &postgres::packs::Packs,
        fetch,
    );
    if show_progress && std::io::stderr().is_terminal() {
        crate::runtime::sink().part("\r\x1b[K");
    }
    let di = Rc::new(di?);
    if let Some(note) = &di.index_note {
        crate::runtime::sink().warn(format_args!("pgdbg: {note}"));
    }
    if let Some(p) = &di.pack
        && !opts.worker
    {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: no debug info for {} (build-id {}): using its exported symbols and the layout pack for PostgreSQL {}",
            real_clean.display(),
            if di.build_id.is_empty() {
                "none"
            } else {
                &di.build_id
            },
            p.major
        ));
    }
    if show_progress && !di.index_from_cache && di.pack.is_none() {
        crate::runtime::sink().warn(format_args!(
            "Indexed debug info of {} in {:.2}s ({} functions; cached for the next attach to build {}).",
            real_clean.display(),
            t0.elapsed().as_secs_f64(),
            di.index.functions.len(),
            &di.build_id.get(..12).unwrap_or(&di.build_id)
        ));
    }
    Ok((di, real_clean))
}

/// `--script` and `--ex`, checked against the debug info.
pub fn load_scripts(opts: &AttachOpts, di: &DebugInfo) -> Result<Option<Script>> {
    let mut defs = Vec::new();
    for d in &opts.define {
        let Some((k, v)) = d.split_once('=') else {
            bail!(
                "--define takes NAME=VALUE, not '{d}'",
                d = crate::shown::shown(d)
            );
        };
        defs.push((k.trim().to_string(), v.to_string()));
    }
    // breakpoints of the script, by number, for `--ex` lines that follow
    let mut scopes = Vec::new();
    let mut script_cmds = match &opts.script {
        Some(p) => Some(load_script(p, di, &defs, &mut scopes)?),
        None => None,
    };
    if !opts.ex.is_empty() {
        let text = crate::script::substitute("--ex", &opts.ex.join("\n"), &defs)?;
        let extra = crate::script::check_after("--ex", &text, di, &mut scopes)?;
        script_cmds.get_or_insert_with(Vec::new).extend(extra);
    }
    Ok(script_cmds)
}

/// A worker's exit status when it failed before attaching (the supervisor
/// counts it as failed to attach, not as attached).
pub const NOT_ATTACHED_EXIT: i32 = 3;

/// A worker's exit status when it did not attach because its backend
/// ended first (exited, a zombie, another program, its PID reused): not a
/// failure.
pub const ENDED_FIRST_EXIT: i32 = 6;

/// A worker's exit status when its backend is traced by another process.
pub const ALREADY_TRACED_EXIT: i32 = 7;

/// A worker's exit status when the kernel does not let it trace its
/// backend (credentials, Yama, seccomp, a security module).
pub const NO_PERMISSION_EXIT: i32 = 8;

/// An error before the attach whose cause the supervisor of the workers
/// counts: the worker's exit status ([`not_attached_exit`]).
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct NotAttached {
    pub exit: i32,
    what: String,
}

impl NotAttached {
    pub fn error(exit: i32, what: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(NotAttached {
            exit,
            what: what.into(),
        })
    }
}

/// The exit status of a worker that failed before attaching with `e`.
pub fn not_attached_exit(e: &anyhow::Error) -> i32 {
    if let Some(n) = e.downcast_ref::<NotAttached>() {
        return n.exit;
    }
    if crate::inferior::gone::gone(e).is_some() {
        return ENDED_FIRST_EXIT;
    }
    if e.downcast_ref::<crate::inferior::permission::Refused>()
        .is_some()
    {
        return NO_PERMISSION_EXIT;
    }
    NOT_ATTACHED_EXIT
}

/// A worker's exit status when its backend ended while it was attached
/// (its tracer saw the exit, or the script stopped there): the supervisor
/// counts it as exited during the script, whatever /proc says later (a
/// zombie not reaped yet, a PID taken by another process).
pub const BACKEND_ENDED_EXIT: i32 = 5;

/// Whether this process has attached to its target (a failure afterwards
/// is not a failure to attach).
static ATTACHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn attached() -> bool {
    ATTACHED.load(std::sync::atomic::Ordering::Relaxed)
}

pub fn run_attach(pid: Option<String>, opts: &AttachOpts) -> Result<i32> {
    // (--next-backend: the postmaster's, whose binary every backend runs,
    // until a new backend is taken)
    let mut pid = parse_pid(pid)?;
    if let Some(n) = &opts.statements_from {
        crate::perf::feed::set_feed(n);
    }
    let mut started = std::time::Instant::now();
    let call_timeout = command::parse_duration(&opts.backend.call_timeout)
        .map_err(|e| anyhow!("--call-timeout: {e}"))?;
    let mut limit = opts.duration()?;
    if (limit.is_some() || opts.count.is_some()) && opts.script.is_none() && opts.ex.is_empty() {
        bail!("--for and --count limit a script: give --script FILE or --ex COMMAND");
    }
    // the target as first seen: a failure until it is seized is checked
    // against it (ended, a zombie, another program, its PID reused: said
    // as such, not blamed on permissions or debug info)
    let seen = (
        procfs::status(pid).map(|s| s.name).unwrap_or_default(),
        procfs::start_time(pid),
    );
    let gone_or = |e: anyhow::Error| {
        if opts.next_backend || seen.0.is_empty() || e.downcast_ref::<NotAttached>().is_some() {
            return e;
        }
        if let Some(what) = vanished(pid, &seen.0, seen.1) {
            return anyhow::Error::new(what);
        }
        // (the seize refused: traced by another process meanwhile)
        match procfs::status(pid).map(|s| s.tracer_pid) {
            Ok(t) if t != 0 && t != std::process::id() as i32 => already_traced(pid, t),
            _ => e,
        }
    };
    let kind = if opts.next_backend {
        // taken before its first command (forks.rs: not_run_yet); checked
        // to hold a client connection (forks.rs)
        ProcessKind::ClientBackend {
            title: "new connection".into(),
        }
    } else {
        check_target(pid, opts.any_process).map_err(gone_or)?
    };
    let (di, real_clean) = load_debuginfo(pid, opts).map_err(gone_or)?;
    let script_cmds = load_scripts(opts, &di)?;
    if opts.fork_server {
        // returns in each spare forked from here, with the time left
        match crate::forkserver::serve(crate::forks::STATUS_FD)? {
            None => return Ok(0),
            Some(left) => {
                started = std::time::Instant::now();
                limit = left;
            }
        }
    }
    let script_path = opts.script.clone().unwrap_or_else(|| PathBuf::from("--ex"));
    let (capture, quiet) = (&opts.capture, opts.quiet);
    // the session's sink, its capture opened before attaching (a bad
    // path fails first)
    let sink = runtime::Sink::new();
    if let Some(p) = &capture {
        sink.open_capture(p)?;
    }
    runtime::install();
    let target = if opts.next_backend {
        let until = limit.map(|l| started + l);
        let Some((mut t, p, _)) = crate::forks::take_next_backend(pid, until)? else {
            runtime::flush_out();
            return Ok(NOT_ATTACHED_EXIT);
        };
        crate::forks::hold_for_tests(&mut t);
        // from its fork to its first command it runs untouched
        if let Err(e) = crate::session::run_to_first_command(&mut t, &di, p, until) {
            let _ = t.detach();
            if !t.is_gone() {
                crate::runtime::sink().warn(format_args!("pgdbg: new backend {p}: {e:#}"));
            }
            runtime::flush_out();
            return Ok(if t.is_gone() {
                ENDED_FIRST_EXIT
            } else {
                NOT_ATTACHED_EXIT
            });
        }
        // its title is set by now: a walsender (a replication connection)
        // or any other child that merely inherited a connection is let go
        if !matches!(
            crate::postgres::classify(p),
            Ok(ProcessKind::ClientBackend { .. })
        ) {
            // said once it is true: the test (and a reader) sees it untraced
            let _ = t.detach();
            crate::inferior::log::debug(&format!("[{p}] not a client backend: let go"));
            runtime::flush_out();
            return Ok(crate::forks::NOT_A_CLIENT_EXIT);
        }
        pid = p;
        limit = limit.map(|l| l.saturating_sub(started.elapsed()));
        t
    } else {
        crate::config::pause_for_tests("seize");
        // (a zombie's seize fails with EPERM, an ended process's with ESRCH)
        let mut t = Target::attach(pid).map_err(gone_or)?;
        // seized: still the process checked, not another program run by
        // it nor another process under its PID
        if let Some(what) = vanished(pid, &seen.0, seen.1) {
            let _ = t.detach();
            return Err(anyhow::Error::new(what));
        }
        t
    };
    ATTACHED.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut session = Session::new(
        pid,
        target,
        di,
        real_clean.clone(),
        kind.clone(),
        sink,
        SessionOptions {
            call_timeout,
            hit_limit: opts.count,
            capture_hits: opts.capture_hits,
        },
    )?;
    if let Err(e) = session.check_pack() {
        let _ = session.detach();
        return Err(e);
    }
    if !quiet {
        let what = match &kind {
            ProcessKind::ClientBackend { title } => format!("backend {pid} ({title})"),
            ProcessKind::Auxiliary { role } => {
                format!("{role} process {pid} (not a client backend)")
            }
            _ => format!("process {pid}"),
        };
        crate::runtime::sink().warn(format_args!(
            "Attached to {what}, {}; debug info {}.",
            session
                .pg_version
                .as_deref()
                .map(short_version)
                .unwrap_or("unknown version"),
            session.di.source
        ));
    }
    let code = match script_cmds {
        Some(cmds) => {
            let _deadline = limit.map(runtime::Deadline::arm);
            run_script(&mut session, &script_path, cmds, opts)
        }
        None => crate::repl::run(&mut session),
    };
    // Whatever happened, leave the backend as we found it.
    let gone = session.target.is_gone();
    let detach_res = session.detach();
    // the queued output now (a closed or full standard output is one more
    // failed write, reported below)
    runtime::flush_out();
    if let Some(what) = runtime::output_failure() {
        match &detach_res {
            Ok(_) => crate::runtime::sink().warn(format_args!(
                "pgdbg: {what}; the backend was restored and detached"
            )),
            Err(e) => crate::runtime::sink().warn(format_args!(
                "pgdbg: {what}; detach failed: {}",
                one_line(e)
            )),
        }
        return Ok(runtime::OUTPUT_FAILED_EXIT);
    }
    if opts.worker && (gone || matches!(code, Ok(BACKEND_ENDED_EXIT))) {
        // (an error of the script's after the end is said, not counted)
        if let Err(e) = &code {
            crate::runtime::sink().warn(format_args!("pgdbg: error: {}", one_line(e)));
        }
        return Ok(BACKEND_ENDED_EXIT);
    }
    if let Some(sig) = runtime::terminating() {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: received {}: backend {pid} restored and detached",
            runtime::signal_name(sig)
        ));
        return Ok(128 + sig);
    }
    match (code, detach_res) {
        (Ok(c), Ok(_)) => Ok(c),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(anyhow!("detach failed: {e:#}")),
    }
}

fn short_version(v: &str) -> &str {
    v.split(" on ").next().unwrap_or(v)
}

fn run_script(
    session: &mut Session,
    path: &std::path::Path,
    cmds: Script,
    opts: &AttachOpts,
) -> Result<i32> {
    for (n, _text, cmd) in cmds {
        if runtime::must_stop() {
            return Ok(1);
        }
        if runtime::deadline_hit() {
            if !opts.quiet {
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: --for {} reached at line {n}: detaching",
                    opts.for_.as_deref().unwrap_or("")
                ));
            }
            return Ok(0);
        }
        if session.hit_limit_reached() {
            if !opts.quiet {
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: --count reached ({} hits): detaching",
                    session.hits_total
                ));
            }
            return Ok(0);
        }
        // all output goes through the queue: a stalled reader of stdout
        // never stops the tracer (written at exit, after the detach)
        match session.execute(&cmd) {
            Ok(Outcome { text, flow }) => {
                if !text.is_empty() {
                    crate::runtime::sink().line(text.strip_prefix('\n').unwrap_or(&text));
                }
                // a backend that ended is said to have ended, even when a
                // Ctrl-C came while its end was being recorded
                if runtime::sigint_seen() && !matches!(flow, Flow::TargetGone) {
                    crate::runtime::sink().warn(format_args!(
                        "pgdbg: interrupted: script stopped at line {n}"
                    ));
                    return Ok(130);
                }
                match flow {
                    Flow::Continue => {}
                    Flow::Quit => return Ok(0),
                    Flow::TargetGone if opts.worker => {
                        crate::runtime::sink().warn(format_args!(
                            "backend {} exited; its capture ends here",
                            session.pid
                        ));
                        return Ok(BACKEND_ENDED_EXIT);
                    }
                    Flow::TargetGone => {
                        bail!("{}:{n}: the backend exited; script stopped", path.display())
                    }
                    Flow::Terminate => return Ok(1),
                }
            }
            Err(e) => bail!("{}:{n}: {}", path.display(), one_line(&e)),
        }
    }
    Ok(0)
}

/// `--ns-of HOSTPID`: the host PIDs of `pids`, PIDs in the PID namespace
/// of process `of` (a container's).
pub fn host_pids(of: &str, pids: &[String]) -> Result<Vec<String>> {
    let of = parse_pid(Some(of.to_string())).map_err(|e| anyhow!("--ns-of: {e}"))?;
    // read once: every PID is looked up in this namespace, even if `of`
    // ends (and its PID is reused) meanwhile
    let Some(ns) = procfs::pid_namespace(of) else {
        if !procfs::exists(of) {
            bail!(
                "--ns-of {of}: no process with PID {of}: give the host PID of a process in the container"
            );
        }
        // reading a namespace link takes the ptrace permission
        if let Some(why) = crate::inferior::permission::refusal(of) {
            bail!("--ns-of {of}: cannot read /proc/{of}/ns/pid: {why}");
        }
        bail!(
            "--ns-of {of}: cannot read /proc/{of}/ns/pid (no permission): give the host PID of a process in the container"
        );
    };
    if procfs::pid_namespace(std::process::id() as i32).as_ref() == Some(&ns) {
        bail!(
            "--ns-of {of}: process {of} is in pgdbg's own PID namespace, where the PIDs need no translation: give them without --ns-of"
        );
    }
    pids.iter()
        .map(|p| {
            let n = parse_pid(Some(p.clone()))?;
            procfs::host_pid_in_namespace(&ns, n)
                .map(|h| h.to_string())
                .ok_or_else(|| {
                    anyhow!(
                        "no process {n} in the PID namespace of process {of}: give a PID from pg_stat_activity in that container"
                    )
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process whose start time is not the one first seen has another
    /// process's PID (its own ended, the PID reused): said so.
    #[test]
    fn vanished_says_a_reused_pid() {
        let me = std::process::id() as i32;
        let name = procfs::status(me).unwrap().name;
        let started = procfs::start_time(me).unwrap();
        assert_eq!(vanished(me, &name, Some(started)), None);
        let what = vanished(me, &name, Some(started + 1)).expect("said to have vanished");
        let what = what.to_string();
        assert!(
            what.contains(&format!(
                "process {me} ({name}) exited while pgdbg was attaching and its PID now belongs to another process ({name})"
            )),
            "{what}"
        );
        // another name under the same start: another program
        let what = vanished(me, "postgres", Some(started))
            .expect("said to have vanished")
            .to_string();
        assert!(
            what.contains(&format!(
                "process {me} (postgres) started another program ({name})"
            )),
            "{what}"
        );
    }
}
