//! Command line: `pgdbg attach PID [--script FILE] [--capture FILE]
//! [--debug-file FILE]`.  Every failure is one line on stderr naming the
//! problem and what to do, with a non-zero exit, and leaves the target as
//! it was.

use crate::attach::{AttachOpts, BackendOpts, DebugInfoOpts, Targets};
use crate::debuginfo::DebugInfo;
use crate::inferior::procfs;
use crate::runtime;
use crate::runtime::one_line;
use anyhow::{Result, anyhow, bail};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "pgdbg",
    version,
    max_term_width = 100,
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
    /// types, GUC enums and wait-event enums pgdbg reads, for stripped
    /// binaries of that major
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
        #[command(flatten)]
        targets: Targets,
        #[command(flatten)]
        opts: AttachOpts,
    },
    /// Profile a backend's CPU use without stopping it (perf events; no ptrace)
    #[command(
        after_help = "The kernel samples the backend's thread (software cpu-clock) with its registers and the top \
of its stack; pgdbg unwinds the samples with CFI and names them with the binary's DWARF (inlined functions \
are frames of their own). The backend is never stopped, not even to attach; if pgdbg is killed the kernel \
removes the event.\n\nNeeds perf_event_open on the backend: root, or the server's user with \
kernel.perf_event_paranoid <= 2; in a container CAP_PERFMON (or CAP_SYS_ADMIN) and CAP_SYS_PTRACE.\n\n\
Examples:\n  pgdbg profile 4711 --for 10s                 functions by self and total share\n  \
pgdbg profile 4711 --for 10s --hz 999 --flamegraph cpu.svg\n  \
pgdbg profile 4711 --for 5s --format folded   stacks for flamegraph.pl / inferno\n  \
pgdbg profile 4711 --for 10s --speedscope cpu.json --pprof cpu.pb.gz   for speedscope and pprof"
    )]
    Profile {
        /// PID of the backend
        #[arg(value_name = "PID")]
        pid: Option<String>,
        /// The PIDs are PIDs in the PID namespace of host process HOSTPID
        /// (a container's: pg_stat_activity.pid there; HOSTPID is any
        /// process of that container, e.g. its postmaster)
        #[arg(long, value_name = "HOSTPID", requires = "pid")]
        ns_of: Option<String>,
        /// Samples per second of CPU time (1 to 10000)
        #[arg(
            long,
            alias = "freq",
            short = 'F',
            value_name = "N",
            default_value_t = 99
        )]
        hz: u64,
        /// How long to sample (e.g. 10s; default: until Ctrl-C)
        #[arg(long = "for", alias = "seconds", value_name = "DURATION")]
        for_: Option<String>,
        /// Output: top (self/total per function), folded (flame graph input), json
        #[arg(long, value_enum, default_value_t = crate::perf::profile_opts::Format::Top)]
        format: crate::perf::profile_opts::Format,
        /// Also draw the flame graph into FILE (SVG)
        #[arg(long, value_name = "FILE")]
        flamegraph: Option<PathBuf>,
        /// Also write the stacks into FILE for speedscope (JSON, a "sampled" profile; weights:
        /// samples, or microseconds with --off-cpu and --wall)
        #[arg(long, value_name = "FILE")]
        speedscope: Option<PathBuf>,
        /// Also write the stacks into FILE for pprof (gzipped profile.proto: samples/count and
        /// cpu/nanoseconds, or off-cpu/nanoseconds, wall/nanoseconds)
        #[arg(long, value_name = "FILE")]
        pprof: Option<PathBuf>,
        /// Functions in the table
        #[arg(long, value_name = "N", default_value_t = 25)]
        rows: usize,
        /// Where the backend waits instead: time off a CPU by user stack and
        /// the kernel's reason (the scheduler's switch tracepoint)
        #[arg(long)]
        off_cpu: bool,
        /// Where the backend's time goes, on a CPU and off it: samples weighed by their
        /// period and off-CPU intervals by their duration, adding up to the
        /// time recorded
        #[arg(long, conflicts_with = "off_cpu")]
        wall: bool,
        /// Time per system call (calls, errors, total, average, longest, share of the
        /// time recorded), as perf trace -s gives it: the raw_syscalls tracepoints on the
        /// backend's thread; no stacks (--format top or json)
        #[arg(long)]
        syscalls: bool,
        /// Split the samples and off-CPU intervals by the statement that ran (pg_stat_activity's
        /// query id, else its text; idle states apart), read from the backend's own entry
        #[arg(long)]
        by_statement: bool,
        #[command(flatten)]
        debug: DebugInfoOpts,
        /// No progress lines
        #[arg(long, short = 'q')]
        quiet: bool,
    },
    /// Print where backends are: their backtraces (attach, bt, detach)
    #[command(
        after_help = "Each backend is attached, stopped for the milliseconds its stack takes to read, and \
detached, as 'pgdbg attach PID -q --ex bt' does. A PID that cannot be attached (not a backend, exited, no \
permission) is said in one line; the others are answered; the exit status is 1 if any failed.\n\n\
Examples:\n  pgdbg bt 4711\n  pgdbg bt 4711 4712                          lines prefixed [PID]\n  \
pgdbg bt --cluster /var/lib/postgresql/15/main --json   one JSON object per backend (pid, frames)"
    )]
    Bt(crate::oneshot::OneShotArgs),
    /// Print the plans of the queries backends run (EXPLAIN inside each backend)
    #[command(
        after_help = "Each backend is attached, stopped at a safe point of its query, its own ExplainPrintPlan \
called in a private memory context, and detached, as 'pgdbg attach PID -q --ex plan' does. A backend that \
runs no query, or cannot be attached, is said in one line; the others are answered; the exit status is 1 \
if any failed. With --cluster, the backends whose process titles say idle are passed over.\n\n\
Examples:\n  pgdbg plan 4711\n  \
pgdbg plan 4711 4712 --json      one JSON object per backend (pid, query, plan)\n  \
pgdbg plan --cluster /var/lib/postgresql/15/main"
    )]
    Plan(crate::oneshot::OneShotArgs),
    /// Print the wait event each backend is in now, as pg_stat_activity names it
    #[command(
        after_help = "Each backend is attached (stopped for milliseconds), its wait-event word read, and \
detached, as 'pgdbg attach PID -q --ex wait' does. A PID that cannot be attached is said in one line; the others are answered; the exit \
status is 1 if any failed.\n\nExamples:\n  pgdbg wait 4711\n  \
pgdbg wait --cluster /var/run/postgresql --json   pid, backend_type, wait_event_type, wait_event"
    )]
    Wait(crate::oneshot::OneShotArgs),
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
    /// Check this machine and its PostgreSQL servers before an incident:
    /// permissions, perf events, debug info
    #[command(
        after_help = "Reads /proc, /sys and files only: no server process is touched. Each check says ok, \
warn (pgdbg works with less: a fallback, or some commands refused) or FAIL (pgdbg cannot attach or cannot \
read the server's structures), what it found, and what to install or set. Exit status 1 when a check \
failed.\n\nChecks: pgdbg's seccomp filter; perf events and kernel uprobes (kernel.perf_event_paranoid, \
CAP_PERFMON); tracefs; /dev/shm (pgdbg's records for pgdbg rescue); for each server: may pgdbg trace it \
(uid, CAP_SYS_PTRACE, kernel.yama.ptrace_scope), where the binary's debug info is (in the binary, \
/usr/lib/debug, the debuginfod cache or servers, else a built-in layout pack), and its loaded libraries' \
debug info.\n\nExamples:\n  pgdbg doctor                 this machine and every running cluster\n  \
pgdbg doctor 4711            the server of backend 4711\n  \
pgdbg doctor --cluster /var/lib/postgresql/15/main --json"
    )]
    Doctor {
        /// PID of a backend or postmaster (default: every running cluster)
        #[arg(value_name = "PID")]
        pid: Option<String>,
        /// The PIDs are PIDs in the PID namespace of host process HOSTPID
        /// (a container's: pg_stat_activity.pid there; HOSTPID is any
        /// process of that container, e.g. its postmaster)
        #[arg(long, value_name = "HOSTPID", requires = "pid")]
        ns_of: Option<String>,
        /// Data directory or socket directory of the cluster
        #[arg(long, value_name = "DIR")]
        cluster: Option<PathBuf>,
        /// One JSON document
        #[arg(long)]
        json: bool,
    },
    /// Restore a backend a killed pgdbg left stopped or changed
    #[command(
        after_help = "When pgdbg and its guardian are killed together (pkill -9 -f pgdbg, a cgroup or OOM kill of \
both), the backend may be left stopped (state T) or still hold what pgdbg changed. pgdbg keeps a record of every \
change in /dev/shm/pgdbg-backend-PID-START before making it; rescue reads it and undoes everything as pgdbg's \
own detach would: breakpoint bytes, debug registers, in-process recorders, a call in flight (finished or \
abandoned), the signals pgdbg held back (sent again), the stop. pgdbg ps flags such backends, and \
pgdbg attach rescues one before attaching.\n\nExamples:\n  pgdbg ps                 a flagged backend: 'left by a killed pgdbg: pgdbg rescue PID'\n  pgdbg rescue 4711"
    )]
    Rescue {
        /// PID of the backend
        #[arg(value_name = "PID")]
        pid: String,
        /// The PIDs are PIDs in the PID namespace of host process HOSTPID
        /// (a container's: pg_stat_activity.pid there; HOSTPID is any
        /// process of that container, e.g. its postmaster)
        #[arg(long, value_name = "HOSTPID")]
        ns_of: Option<String>,
    },
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell)
    #[command(
        after_help = "Examples:\n  pgdbg completions bash > ~/.local/share/bash-completion/completions/pgdbg\n  pgdbg completions zsh > ~/.zfunc/_pgdbg        (with fpath+=~/.zfunc in ~/.zshrc)\n  pgdbg completions fish > ~/.config/fish/completions/pgdbg.fish"
    )]
    Completions {
        /// The shell
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the manual page pgdbg.1 (roff), or write every page into a directory
    #[command(
        after_help = "Examples:\n  pgdbg man | man -l -\n  pgdbg man --dir ~/.local/share/man/man1      pgdbg.1, pgdbg-attach.1, ... (then: man pgdbg)"
    )]
    Man {
        /// Write pgdbg.1 and one page per subcommand (pgdbg-attach.1, ...) into DIR
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// The command line's definition (for generated documentation).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command()
}

pub fn main() -> i32 {
    use clap::{CommandFactory, FromArgMatches};
    let mut cmd = Cli::command();
    // --version's long text reads the built-in packs: only when asked
    if std::env::args_os().any(|a| a == "--version") {
        cmd = cmd.long_version(&*Box::leak(crate::version::long_version().into_boxed_str()));
    }
    let cli = match cmd
        .try_get_matches()
        .and_then(|mut m| Cli::from_arg_matches_mut(&mut m))
    {
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
                    crate::runtime::sink()
                        .warn(format_args!("pgdbg: error: {}", missing_subcommand()));
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
                    // (clap quotes the argument as given: escaped here)
                    let first = crate::shown::shown(first);
                    crate::runtime::sink()
                        .warn(format_args!("pgdbg: error: {first} (see pgdbg --help)"));
                    return 2;
                }
            }
        }
    };
    std::panic::set_hook(Box::new(|info| {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: internal error: {info}; the backend is being restored and detached"
        ));
    }));
    let res = std::panic::catch_unwind(|| match cli.cmd {
        Cmd::Attach { targets, opts } => {
            let pids = targets.host_pids()?;
            if pids.len() > 1 || targets.cluster.is_some() {
                crate::multi::run(&pids, targets.cluster.as_deref(), &opts)
            } else {
                match crate::attach::run_attach(pids.into_iter().next(), &opts) {
                    // a worker that never attached says so by its status
                    Err(e) if opts.worker && !crate::attach::attached() => {
                        crate::runtime::sink().warn(format_args!(
                            "pgdbg: error: {}",
                            crate::runtime::one_line(&e)
                        ));
                        Ok(crate::attach::not_attached_exit(&e))
                    }
                    r => r,
                }
            }
        }
        Cmd::Bt(a) => crate::oneshot::run("bt", "bt", a),
        Cmd::Plan(a) => crate::oneshot::run("plan", "plan", a),
        Cmd::Wait(a) => crate::oneshot::run("wait", "wait", a),
        Cmd::Ps { cluster, json } => run_ps(cluster.as_deref(), json),
        Cmd::Doctor {
            pid,
            ns_of,
            cluster,
            json,
        } => crate::doctor::main(in_host_namespace(pid, ns_of)?, cluster.as_deref(), json),
        Cmd::Rescue { pid, ns_of } => {
            let pid = crate::attach::parse_pid(in_host_namespace(Some(pid), ns_of)?)?;
            println!("{}", crate::inferior::guardian::rescue::rescue(pid)?);
            Ok(0)
        }
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            let mut out = std::io::stdout().lock();
            crate::shellgen::completions(Cli::command(), shell, &mut out);
            Ok(0)
        }
        Cmd::Man { dir } => {
            use clap::CommandFactory;
            match dir {
                Some(d) => {
                    for p in crate::shellgen::pages_to(Cli::command(), &d)? {
                        println!("{}", p.display());
                    }
                }
                None => crate::shellgen::main_page(Cli::command(), &mut std::io::stdout().lock())?,
            }
            Ok(0)
        }
        Cmd::Profile {
            pid,
            ns_of,
            hz,
            for_,
            format,
            flamegraph,
            speedscope,
            pprof,
            rows,
            off_cpu,
            wall,
            syscalls,
            by_statement,
            debug,
            quiet,
        } => run_profile(
            in_host_namespace(pid, ns_of)?,
            crate::perf::profile_opts::ProfileOpts {
                hz,
                duration: None,
                format,
                flamegraph,
                speedscope,
                pprof,
                rows,
                off_cpu,
                wall,
                syscalls,
                by_statement,
            },
            for_,
            AttachOpts {
                backend: BackendOpts {
                    debug,
                    ..BackendOpts::default()
                },
                quiet,
                ..AttachOpts::default()
            },
        ),
        Cmd::Report(args) => crate::report::run(&args),
        Cmd::Symbols { action } => match action {
            SymbolsCmd::Extract { binary, output } => extract_pack(&binary, output.as_deref()),
        },
    });
    runtime::flush_out();
    match res {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            crate::runtime::sink().warn(format_args!("pgdbg: error: {}", one_line(&e)));
            1
        }
        Err(_) => 101,
    }
}

/// `pgdbg profile PID`: checked like attach, then sampled without ptrace.
fn run_profile(
    pid: Option<String>,
    mut opts: crate::perf::profile_opts::ProfileOpts,
    for_: Option<String>,
    aopts: AttachOpts,
) -> Result<i32> {
    let pid = crate::attach::parse_pid(pid)?;
    if !(1..=10_000).contains(&opts.hz) {
        bail!("--hz takes a rate from 1 to 10000, not {}", opts.hz);
    }
    if opts.rows == 0 {
        bail!("--rows takes a number of rows from 1");
    }
    opts.check_modes()?;
    if let Some(f) = &for_ {
        opts.duration = Some(crate::command::parse_duration(f).map_err(|e| anyhow!("--for: {e}"))?);
    }
    crate::attach::check_target(pid, false)?;
    let (di, _) = crate::attach::load_debuginfo(pid, &aopts)?;
    runtime::install();
    let out = crate::session::profile_detached(pid, &di, &opts, aopts.quiet)?;
    crate::runtime::sink().line(&out);
    Ok(0)
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

fn extract_pack(binary: &std::path::Path, output: Option<&std::path::Path>) -> Result<i32> {
    let di = DebugInfo::load(
        binary,
        binary,
        None,
        None,
        &crate::postgres::packs::Packs,
        crate::debuginfo::debuginfod::Fetch::Progress,
    )?;
    if di.pack.is_some() {
        bail!(
            "{} has no DWARF: extract packs from a debug build (scripts/pg-build MAJOR)",
            binary.display()
        );
    }
    let pack = crate::postgres::packs::extract(&di)?;
    let json = pack.to_json();
    match output {
        Some(p) => {
            std::fs::write(p, json).map_err(|e| anyhow!("cannot write {}: {e}", p.display()))?
        }
        None => print!("{json}"),
    }
    Ok(0)
}

/// `PID` as this machine's PID namespace numbers it: itself, or with
/// `--ns-of HOSTPID` the host PID of the process that is `PID` in the PID
/// namespace of process HOSTPID (a container's).
fn in_host_namespace(pid: Option<String>, ns_of: Option<String>) -> Result<Option<String>> {
    match (pid, ns_of) {
        (Some(p), Some(of)) => Ok(crate::attach::host_pids(&of, &[p])?.pop()),
        (pid, _) => Ok(pid),
    }
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
    use crate::inferior::guardian::rescue::{self, Left};
    rescue::remove_stale();
    // what a killed pgdbg left: the remedy, for the table and for JSON
    let left = |pid: i32| -> Option<String> {
        Some(match rescue::left(pid)? {
            Left::Record { pgdbg, .. } => {
                format!("left by a killed pgdbg (PID {pgdbg}): pgdbg rescue {pid}")
            }
            Left::Stopped => format!("stopped, no tracer: pgdbg rescue {pid}"),
            Left::Guarded { pgdbg } => format!("attached by pgdbg (PID {pgdbg})"),
            Left::Unusable { path, why } => {
                format!("pgdbg's record {} cannot be used: {why}", path.display())
            }
            Left::Earlier { .. } => {
                format!("left by an earlier version of pgdbg: that version's pgdbg rescue {pid}")
            }
        })
    };
    let mut out = String::new();
    for pm in postmasters {
        let data_dir = procfs::cmdline(pm);
        let backends = cluster::backends(pm);
        if json {
            for b in &backends {
                let mut v = serde_json::to_value(b)?;
                v["postmaster"] = pm.into();
                v["pgdbg"] = left(b.pid).into();
                // a container's process: its PID there (pg_stat_activity's)
                let ns = procfs::ns_pid(b.pid);
                if ns != b.pid {
                    v["ns_pid"] = ns.into();
                }
                out.push_str(&format!("{v}\n"));
            }
            continue;
        }
        let in_ns = |pid: i32| match procfs::ns_pid(pid) {
            ns if ns != pid => format!(" (PID {ns} in its namespace)"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "postmaster {pm}{} ({}): {} client backend{}\n",
            in_ns(pm),
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
            let mut note = left(b.pid).map(|n| format!("  ({n})")).unwrap_or_default();
            note.push_str(&in_ns(b.pid));
            out.push_str(&format!(
                "{:>8}  {:<12} {:<12} {:<22} {}{note}\n",
                b.pid, b.user, b.database, b.client, b.state
            ));
        }
    }
    print!("{out}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    /// The options `attach`, `bt`, `plan`, `wait` and `profile` have in
    /// common read the same in each (one definition, flattened in).
    #[test]
    fn common_options_read_the_same_in_every_subcommand() {
        let cmd = super::command();
        let help = |sub: &str, opt: &str| -> Option<String> {
            let s = cmd.find_subcommand(sub).unwrap();
            let a = s.get_arguments().find(|a| a.get_id() == opt)?;
            Some(format!("{:?} {:?}", a.get_help(), a.get_default_values()))
        };
        let common = [
            (
                "debug_file",
                &["attach", "bt", "plan", "wait", "profile"][..],
            ),
            ("symbols", &["attach", "bt", "plan", "wait", "profile"][..]),
            ("call_timeout", &["attach", "bt", "plan", "wait"][..]),
            (
                "ns_of",
                &[
                    "attach", "bt", "plan", "wait", "profile", "doctor", "rescue",
                ][..],
            ),
        ];
        for (opt, subs) in common {
            let want = help("attach", opt).unwrap_or_else(|| panic!("attach has no {opt}"));
            for sub in subs {
                assert_eq!(help(sub, opt).as_ref(), Some(&want), "{sub}'s {opt}");
            }
        }
    }
}
