//! Command line: `pgdbg attach PID [--script FILE] [--capture FILE]
//! [--debug-file FILE]`.  Every failure is one line on stderr naming the
//! problem and what to do, with a non-zero exit, and leaves the target as
//! it was.

use crate::capture::Capture;
use crate::command;
use crate::debuginfo::DebugInfo;
use crate::guard;
use crate::postgres::{self, ProcessKind};
use crate::session::{Flow, Session};
use crate::target::{Target, procfs};
use anyhow::{Result, anyhow, bail};
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::rc::Rc;

#[derive(Parser, Debug)]
#[command(
    name = "pgdbg",
    version,
    about = "A debugger for live PostgreSQL backends",
    long_about = "pgdbg attaches to a running PostgreSQL backend, reads the DWARF of its postgres binary and \
answers the questions SQL views cannot: where is it, what do its plan-cache costs say, what is in its structs. \
It never leaves a breakpoint behind: every exit (detach, quit, Ctrl-D, an error, SIGTERM, a closed terminal) \
restores the backend.",
    after_help = "Examples:\n  pgdbg attach 4711                      interactive session (help lists the commands)\n  pgdbg attach 4711 --script plan.gdb    run commands from a file, then detach\n  pgdbg attach 4711 --script s --capture out.jsonl   also record events as JSON lines\n\nFind a backend's PID with: select pid, query from pg_stat_activity;"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum SymbolsCmd {
    /// Write the layout pack of a debug build (JSON): the structs, global
    /// types and GUC enums pgdbg reads, for stripped binaries of that major
    Extract {
        /// A postgres binary with DWARF (e.g. ~/.cache/pgdbg/pg/15/bin/postgres)
        binary: PathBuf,
        /// Output file (default: standard output)
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

// parsed once per run: the size of the attach variant does not matter
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Cmd {
    /// Layout packs for stripped binaries
    Symbols {
        #[command(subcommand)]
        action: SymbolsCmd,
    },
    /// Summarize a capture file: tables, JSON, folded stacks or a flame graph
    ///
    /// Tables: plan choices per prepared statement (custom/generic, switches,
    /// costs, last reason), waits per event (count, total, avg, p50, p99,
    /// max), statement times, wait samples, probe counts, traced arguments.
    #[command(
        after_help = "Reads the JSON lines written by 'pgdbg attach PID --capture FILE', from any number of \
backends, and needs no PostgreSQL.\n\nExamples:\n  pgdbg report out.jsonl                         tables, one section per kind of event\n  \
pgdbg report out.jsonl --json                  the same as one JSON document\n  \
pgdbg report out.jsonl --folded                wait stacks as folded lines (flamegraph.pl's input)\n  \
pgdbg report out.jsonl --flamegraph waits.svg  flame graph of the wait stacks (µs waited)\n  \
pgdbg report out.jsonl --flamegraph calls.svg --stacks trace   ... of traced call stacks\n\n\
Stacks come from 'waits trace --stacks N' (wait events) and 'trace ... --stacks N' (trace events)."
    )]
    Report(crate::report::ReportArgs),
    /// Attach to a backend (seize it with ptrace) and open a session
    #[command(
        after_help = "In the session: break choose_custom_plan, continue, print plansource->generic_cost, bt, \
detach. Ctrl-C stops a running 'continue' without signalling the backend.\n\nScript files hold the same commands, \
one per line, '#' starts a comment; they are checked before attaching (commands, locations, and expressions \
type-checked in the function they run in; errors name FILE:LINE).\n\nCapture scripts (ready ones in scripts/examples/):\n  \
break standard_ExecutorRun if queryDesc->plannedstmt->queryId == ${QUERYID}\n  commands\n    silent\n    \
printf \"%s\\n\", queryDesc->sourceText\n    plan\n    continue\n  end\n  continue\n\nExamples:\n  \
pgdbg attach 4711 --script s.pgdbg --define QUERYID=123 --for 60s --capture out.jsonl\n  \
pgdbg attach 4711 4712 4713 --ex 'count ReadBufferExtended --by-phase' --for 10s\n  \
pgdbg attach --cluster /var/lib/postgresql/15/main --script scripts/examples/planner-vs-executor.pgdbg --for 10s --capture c.jsonl\n  \
pgdbg report out.jsonl"
    )]
    Attach {
        /// PID of the backend (select pg_backend_pid(), or pg_stat_activity.pid);
        /// several PIDs run the script on each of them at once
        #[arg(value_name = "PID")]
        pids: Vec<String>,
        /// Every client backend of the cluster whose data directory or
        /// socket directory is DIR, including backends that start while the
        /// script runs (needs --script or --ex)
        #[arg(long, value_name = "DIR")]
        cluster: Option<PathBuf>,
        #[command(flatten)]
        opts: AttachOpts,
    },
    /// List the client backends of a cluster (or of every cluster on this
    /// machine): pid, user, database, client, state from the process titles
    #[command(
        after_help = "Examples:\n  pgdbg ps                          every cluster's client backends\n  pgdbg ps --cluster /var/lib/postgresql/15/main\n  pgdbg ps --cluster /var/run/postgresql --json\n\nThen: pgdbg attach PID (one backend) or pgdbg attach --cluster DIR --script FILE (all of them)."
    )]
    Ps {
        /// Data directory or socket directory of the cluster
        #[arg(long, value_name = "DIR")]
        cluster: Option<PathBuf>,
        /// One JSON object per backend, one per line
        #[arg(long)]
        json: bool,
    },
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    return 0;
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                | ErrorKind::MissingSubcommand => {
                    crate::errln!("pgdbg: error: {}", missing_subcommand());
                    return 2;
                }
                _ => {
                    // One line: clap's message (its first paragraph, e.g.
                    // "the following required arguments were not provided:
                    // <CAPTURE>"), without the usage block.
                    let msg = e.to_string();
                    let first = msg
                        .lines()
                        .map(str::trim)
                        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
                        .collect::<Vec<_>>()
                        .join(" ");
                    let first = first.trim_start_matches("error: ");
                    let first = if first.is_empty() {
                        "bad arguments"
                    } else {
                        first
                    };
                    crate::errln!("pgdbg: error: {first} (see pgdbg --help)");
                    return 2;
                }
            }
        }
    };
    std::panic::set_hook(Box::new(|info| {
        crate::errln!("pgdbg: internal error: {info}; the backend is being restored and detached");
    }));
    let res = std::panic::catch_unwind(|| match cli.cmd {
        Cmd::Attach {
            pids,
            cluster,
            opts,
        } => {
            if pids.len() > 1 || cluster.is_some() {
                crate::multi::run(&pids, cluster.as_deref(), &opts)
            } else {
                run_attach(pids.into_iter().next(), &opts)
            }
        }
        Cmd::Ps { cluster, json } => run_ps(cluster.as_deref(), json),
        Cmd::Report(args) => crate::report::run(&args),
        Cmd::Symbols { action } => match action {
            SymbolsCmd::Extract { binary, output } => extract_pack(&binary, output.as_deref()),
        },
    });
    guard::flush_out();
    match res {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            crate::errln!("pgdbg: error: {}", one_line(&e));
            1
        }
        Err(_) => 101,
    }
}

/// "pgdbg symbols needs a subcommand: pgdbg symbols extract BINARY ..."
/// for a command line that stops at a command which has subcommands.
fn missing_subcommand() -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["pgdbg".to_string()];
    for a in std::env::args().skip(1) {
        match cmd.find_subcommand(&a) {
            Some(s) => {
                path.push(s.get_name().to_string());
                cmd = s.clone();
            }
            None => break,
        }
    }
    let path = path.join(" ");
    let subs: Vec<String> = cmd
        .get_subcommands_mut()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| {
            // "Usage: extract [OPTIONS] <BINARY>" -> "extract [OPTIONS] BINARY"
            let usage = s.render_usage().to_string();
            let usage = usage.trim().trim_start_matches("Usage:").trim();
            format!("{path} {}", usage.replace(['<', '>'], ""))
        })
        .collect();
    if subs.is_empty() {
        return format!("{path} needs arguments (see {path} --help)");
    }
    format!(
        "{path} needs a subcommand: {} (see {path} --help)",
        subs.join(", ")
    )
}

fn one_line(e: &anyhow::Error) -> String {
    e.to_string().replace('\n', " ")
}

pub fn parse_pid(pid: Option<String>) -> Result<i32> {
    let s = pid.ok_or_else(|| {
        anyhow!("attach needs the PID of a backend: pgdbg attach PID (find it with: select pid, query from pg_stat_activity)")
    })?;
    let n: i64 = s.trim().parse().map_err(|_| {
        anyhow!("'{s}' is not a PID: give the number of a backend process (select pg_backend_pid() in its session)")
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
        bail!("no process with PID {pid}: check the PID (select pid from pg_stat_activity)");
    }
    let st = procfs::status(pid)?;
    // /proc/PID/exe needs the same permission as ptrace: fail early with the
    // right message.
    if let Err(e) = procfs::exe_path(pid) {
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
        let who = procfs::status(st.tracer_pid)
            .map(|s| s.name)
            .unwrap_or_else(|_| "?".into());
        bail!(
            "process {pid} is already traced by PID {} ({who}): detach that debugger first",
            st.tracer_pid
        );
    }
    Ok(kind)
}

use crate::script::Script;

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

/// The options of `pgdbg attach` besides the targets.
#[derive(clap::Args, Debug, Clone)]
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
    /// Read DWARF from FILE (a separate debug file of this exact build)
    #[arg(long, value_name = "FILE")]
    pub debug_file: Option<PathBuf>,
    /// Use this layout pack instead of DWARF (stripped binaries; the
    /// packs for PostgreSQL 15 and 18 are built in and picked automatically)
    #[arg(long, value_name = "FILE")]
    pub symbols: Option<PathBuf>,
    /// Abandon an inferior call (call, plan) that takes longer (e.g. 5s)
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub call_timeout: String,
    /// Do not print the banner and progress lines
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Allow a process that is not a PostgreSQL backend (test fixtures)
    #[arg(long, hide = true)]
    pub any_process: bool,
    /// Run as one of the per-backend workers of a multi-backend attach
    #[arg(long, hide = true)]
    pub worker: bool,
}

impl AttachOpts {
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
    let real = procfs::exe_path(pid)?;
    let real_clean = PathBuf::from(
        real.to_string_lossy()
            .trim_end_matches(" (deleted)")
            .to_string(),
    );
    let t0 = std::time::Instant::now();
    let show_progress = !opts.quiet;
    if show_progress && std::io::stderr().is_terminal() {
        crate::errp!("Reading debug info of {} ...", real_clean.display());
    }
    let di = DebugInfo::load(
        &exe_link,
        &real_clean,
        opts.debug_file.as_deref(),
        opts.symbols.as_deref(),
    );
    if show_progress && std::io::stderr().is_terminal() {
        crate::errp!("\r\x1b[K");
    }
    let di = Rc::new(di?);
    if let Some(p) = &di.pack
        && !opts.worker
    {
        crate::errln!(
            "pgdbg: no debug info for {} (build-id {}): using its exported symbols and the layout pack for PostgreSQL {}",
            real_clean.display(),
            if di.build_id.is_empty() {
                "none"
            } else {
                &di.build_id
            },
            p.major
        );
    }
    if show_progress && !di.index_from_cache && di.pack.is_none() {
        crate::errln!(
            "Indexed debug info of {} in {:.2}s ({} functions; cached for the next attach to build {}).",
            real_clean.display(),
            t0.elapsed().as_secs_f64(),
            di.index.functions.len(),
            &di.build_id.get(..12).unwrap_or(&di.build_id)
        );
    }
    Ok((di, real_clean))
}

/// `--script` and `--ex`, checked against the debug info.
pub fn load_scripts(opts: &AttachOpts, di: &DebugInfo) -> Result<Option<Script>> {
    let mut defs = Vec::new();
    for d in &opts.define {
        let Some((k, v)) = d.split_once('=') else {
            bail!("--define takes NAME=VALUE, not '{d}'");
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

fn run_attach(pid: Option<String>, opts: &AttachOpts) -> Result<i32> {
    let pid = parse_pid(pid)?;
    let call_timeout =
        command::parse_duration(&opts.call_timeout).map_err(|e| anyhow!("--call-timeout: {e}"))?;
    let limit = opts.duration()?;
    if (limit.is_some() || opts.count.is_some()) && opts.script.is_none() && opts.ex.is_empty() {
        bail!("--for and --count limit a script: give --script FILE or --ex COMMAND");
    }
    let kind = check_target(pid, opts.any_process)?;
    let (di, real_clean) = load_debuginfo(pid, opts)?;
    let script_cmds = load_scripts(opts, &di)?;
    let script_path = opts.script.clone().unwrap_or_else(|| PathBuf::from("--ex"));
    let (capture, quiet) = (&opts.capture, opts.quiet);
    let cap = match &capture {
        Some(p) => Some(Capture::open(p)?),
        None => None,
    };
    guard::install();
    let target = Target::attach(pid)?;
    let mut session = Session::new(pid, target, di, real_clean.clone(), kind.clone(), cap)?;
    session.call_timeout = call_timeout;
    session.hit_limit = opts.count;
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
        crate::errln!(
            "Attached to {what}, {}; debug info {}.",
            session
                .pg_version
                .as_deref()
                .map(short_version)
                .unwrap_or("unknown version"),
            session.di.source
        );
    }
    let code = match script_cmds {
        Some(cmds) => {
            let _deadline = limit.map(guard::Deadline::arm);
            run_script(&mut session, &script_path, cmds, opts)
        }
        None => crate::repl::run(&mut session),
    };
    // Whatever happened, leave the backend as we found it.
    let detach_res = session.detach();
    // the queued output now (a closed or full standard output is one more
    // failed write, reported below)
    guard::flush_out();
    if let Some(what) = guard::output_failure() {
        match &detach_res {
            Ok(_) => crate::errln!("pgdbg: {what}; the backend was restored and detached"),
            Err(e) => crate::errln!("pgdbg: {what}; detach failed: {}", one_line(e)),
        }
        return Ok(guard::OUTPUT_FAILED_EXIT);
    }
    if let Some(sig) = guard::terminating() {
        crate::errln!(
            "pgdbg: received {}: backend {pid} restored and detached",
            guard::signal_name(sig)
        );
        return Ok(128 + sig);
    }
    match (code, detach_res) {
        (Ok(c), Ok(_)) => Ok(c),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(anyhow!("detach failed: {e}")),
    }
}

fn extract_pack(binary: &std::path::Path, output: Option<&std::path::Path>) -> Result<i32> {
    let di = DebugInfo::load(binary, binary, None, None)?;
    if di.pack.is_some() {
        bail!(
            "{} has no DWARF: extract packs from a debug build (scripts/pg-build MAJOR)",
            binary.display()
        );
    }
    let pack = crate::debuginfo::pack::Pack::extract(&di)?;
    let json = pack.to_json();
    match output {
        Some(p) => {
            std::fs::write(p, json).map_err(|e| anyhow!("cannot write {}: {e}", p.display()))?
        }
        None => print!("{json}"),
    }
    Ok(0)
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
        if guard::must_stop() {
            return Ok(1);
        }
        if guard::deadline_hit() {
            if !opts.quiet {
                crate::errln!(
                    "pgdbg: --for {} reached at line {n}: detaching",
                    opts.for_.as_deref().unwrap_or("")
                );
            }
            return Ok(0);
        }
        if session.hit_limit.is_some_and(|l| session.hits_total >= l) {
            if !opts.quiet {
                crate::errln!(
                    "pgdbg: --count reached ({} hits): detaching",
                    session.hits_total
                );
            }
            return Ok(0);
        }
        // all output goes through the queue: a stalled reader of stdout
        // never stops the tracer (written at exit, after the detach)
        match session.execute(&cmd) {
            Ok((text, flow)) => {
                if !text.is_empty() {
                    guard::out_line(text.strip_prefix('\n').unwrap_or(&text));
                }
                if guard::sigint_seen() {
                    crate::errln!("pgdbg: interrupted: script stopped at line {n}");
                    return Ok(130);
                }
                match flow {
                    Flow::Continue => {}
                    Flow::Quit => return Ok(0),
                    Flow::TargetGone if opts.worker => {
                        crate::errln!("backend {} exited; its capture ends here", session.pid);
                        return Ok(0);
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

/// `pgdbg ps [--cluster DIR] [--json]`
fn run_ps(cluster: Option<&std::path::Path>, json: bool) -> Result<i32> {
    use crate::postgres::cluster;
    let postmasters = match cluster {
        Some(d) => vec![cluster::postmaster_of(d)?],
        None => cluster::postmasters(),
    };
    if postmasters.is_empty() {
        bail!(
            "no running PostgreSQL cluster found on this machine (pgdbg ps --cluster DIR names one)"
        );
    }
    let mut out = String::new();
    for pm in postmasters {
        let data_dir = procfs::cmdline(pm);
        let backends = cluster::backends(pm);
        if json {
            for b in &backends {
                let mut v = serde_json::to_value(b)?;
                v["postmaster"] = pm.into();
                out.push_str(&format!("{v}\n"));
            }
            continue;
        }
        out.push_str(&format!(
            "postmaster {pm} ({}): {} client backend{}\n",
            data_dir.trim(),
            backends.len(),
            if backends.len() == 1 { "" } else { "s" }
        ));
        if backends.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "{:>8}  {:<12} {:<12} {:<22} {}\n",
            "pid", "user", "database", "client", "state"
        ));
        for b in &backends {
            out.push_str(&format!(
                "{:>8}  {:<12} {:<12} {:<22} {}\n",
                b.pid, b.user, b.database, b.client, b.state
            ));
        }
    }
    print!("{out}");
    Ok(0)
}
