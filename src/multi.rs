//! `pgdbg attach PID PID...` and `pgdbg attach --cluster DIR`: one worker
//! pgdbg process per backend, each a complete single-backend session (its
//! own tracer, breakpoints and cleanup), all appending to one capture file.
//! A worker whose backend exits ends on its own without disturbing the
//! others; with `--cluster`, backends that start later get a worker too.
//! This process only supervises: it checks the script once before anything
//! is attached, prefixes each worker's output with `[PID]`, forwards
//! Ctrl-C/SIGTERM and waits for every worker to detach.
//!
//! `pgdbg bt|plan|wait PID...` (`oneshot.rs`) runs the same workers
//! once ([`Mode::Once`]): a PID that cannot be attached is said and
//! counted while the others are answered, `--cluster` takes the backends
//! there now (none that start later), and each worker's answer is written
//! whole when it ends.

use crate::attach::{AttachOpts, load_debuginfo, load_scripts};
use crate::forks::{self, Said, Spare};
use crate::forkserver::{self, ForkServer, Proc};
use crate::postgres::{ProcessKind, classify, cluster};
use crate::runtime;
use anyhow::{Result, anyhow, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

struct Worker {
    child: Proc,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// A spare's: from the kernel's word of its backend's fork to the
    /// stop (counted once the worker ends, if it was a client backend).
    took: Option<Duration>,
}

/// How the supervisor runs its workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `attach`: every target is checked before any is attached; with
    /// `--cluster`, backends that start later get a worker too; output is
    /// relayed line by line.
    Script,
    /// `bt`, `plan`, `wait`: one answer from each backend; a target that
    /// cannot be attached is said in one line and counted; each worker's
    /// standard output is relayed whole when it ends (`quiet_stdout`: not
    /// at all, the answers are read from the capture); `running_only`:
    /// the backends of `--cluster` whose process titles say idle are
    /// passed over (`plan`: they have no query).
    Once {
        quiet_stdout: bool,
        running_only: bool,
    },
}

pub fn run(pids: &[String], cluster_dir: Option<&Path>, opts: &AttachOpts) -> Result<i32> {
    supervise(pids, cluster_dir, opts, Mode::Script)
}

pub fn supervise(
    pids: &[String],
    cluster_dir: Option<&Path>,
    opts: &AttachOpts,
    mode: Mode,
) -> Result<i32> {
    let once = mode != Mode::Script;
    if opts.script.is_none() && opts.ex.is_empty() {
        bail!(
            "attaching to several backends needs --script FILE or --ex COMMAND (the prompt works on one backend: pgdbg attach PID)"
        );
    }
    if cluster_dir.is_some() && !pids.is_empty() {
        bail!("give either PIDs or --cluster DIR, not both");
    }
    let limit = opts.duration()?;
    crate::command::parse_duration(&opts.backend.call_timeout)
        .map_err(|e| anyhow!("--call-timeout: {e}"))?;
    // Targets, all checked before anything is attached.
    let postmaster = cluster_dir.map(cluster::postmaster_of).transpose()?;
    let mut initial = Vec::new();
    // targets refused before a worker was started (Mode::Once)
    let mut refused = 0usize;
    for p in pids {
        let checked = crate::attach::parse_pid(Some(p.clone())).and_then(|pid| {
            if !initial.contains(&pid) {
                crate::attach::check_target(pid, opts.any_process)?;
            }
            Ok(pid)
        });
        let pid = match checked {
            Ok(pid) => pid,
            Err(e) if once => {
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: error: {}",
                    crate::runtime::one_line(&e)
                ));
                refused += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        if initial.contains(&pid) {
            crate::runtime::sink().warn(format_args!(
                "pgdbg: PID {pid} is given more than once: attaching to it once"
            ));
            continue;
        }
        initial.push(pid);
    }
    // new backends: taken at their fork by workers started ahead (forks.rs)
    // when this process may hear of forks; else by looking
    let mut spares_on = false;
    if postmaster.is_some() && mode == Mode::Script {
        match forks::events_refused() {
            None => spares_on = true,
            Some(why) => say_looking(&why),
        }
    }
    if let Some(pm) = postmaster {
        let mut found = cluster::backends(pm);
        if matches!(
            mode,
            Mode::Once {
                running_only: true,
                ..
            }
        ) {
            let before = found.len();
            found.retain(|b| !b.state.starts_with("idle"));
            let idle = before - found.len();
            if idle > 0 {
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: {idle} idle backend{} passed over (no query running, says the process title)",
                    if idle == 1 { "" } else { "s" }
                ));
            }
        }
        initial.extend(found.iter().map(|b| b.pid));
    }
    if once && initial.is_empty() {
        if refused > 0 {
            return Ok(once_summary(refused, refused));
        }
        if !matches!(
            mode,
            Mode::Once {
                running_only: true,
                ..
            }
        ) {
            crate::runtime::sink().warn(format_args!(
                "pgdbg: the cluster has no client backend (pgdbg ps --cluster DIR lists them)"
            ));
        }
        return Ok(0);
    }
    // The script, checked once against the binary's debug info.
    let binary_of = postmaster.or(initial.first().copied());
    let Some(binary_pid) = binary_of else {
        bail!("no backend to attach to");
    };
    let (di, _) = load_debuginfo(binary_pid, opts)?;
    let script = load_scripts(opts, &di)?;
    // a script of one `count` line: every process of the cluster counted
    // from its fork by uprobes the postmaster's children inherit, no
    // worker at all (cluster_count.rs); else (said why) as any script
    // (PGDBG_NO_INHERIT, for tests: the workers' course)
    if mode == Mode::Script
        && !crate::config::get().no_inherit
        && let Some(pm) = postmaster
        && let Some((functions, line_limit)) = script.as_ref().and_then(crate::command::count_only)
    {
        let limit = match (limit, line_limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(code) = crate::cluster_count::run(pm, &di, &functions, limit, opts)? {
            return Ok(code);
        }
    }
    // a script of one `waits trace` line: the statements of every backend
    // marked by uprobes opened once on the postmaster and inherited, not
    // opened and closed by each worker (cluster_marks.rs); else (said why)
    // each worker opens its own
    let mut statements = None;
    if mode == Mode::Script
        && !crate::config::get().no_inherit
        && let Some(pm) = postmaster
        && script
            .as_ref()
            .is_some_and(crate::command::waits_trace_only)
    {
        match crate::cluster_marks::Service::start(pm, &di) {
            Ok(s) => {
                if !opts.quiet {
                    crate::runtime::sink().warn(format_args!(
                        "pgdbg: statements marked in every backend from its fork on by uprobes inherited from the postmaster {pm} (each backend's worker sets only its wait-event watch)"
                    ));
                }
                statements = Some(s);
            }
            Err(why) => crate::runtime::sink().warn(format_args!(
                "pgdbg: the statements cannot be marked for the whole cluster at once here ({why}): each backend's worker marks its own"
            )),
        }
    }
    let fed;
    let opts = match &statements {
        Some(s) => {
            fed = AttachOpts {
                statements_from: Some(s.name().to_string()),
                ..opts.clone()
            };
            &fed
        }
        None => opts,
    };
    drop(di);
    if let Some(c) = &opts.capture {
        // create it now so that a bad path fails before any attach
        crate::runtime::Sink::new().open_capture(c)?;
    }
    runtime::install();
    let t0 = Instant::now();
    let mut workers: BTreeMap<i32, Worker> = BTreeMap::new();
    let mut seen: BTreeSet<i32> = BTreeSet::new();
    // each backend seen is attached (and then maybe exited during the
    // script, or failed) or failed to attach
    let mut attached = 0usize;
    let mut failed = 0usize;
    let mut not_attached = 0usize;
    // of them: already traced by another process, refused by the kernel
    let (mut traced_by_other, mut no_permission) = (0usize, 0usize);
    // backends that ended before their worker could attach (a session of a
    // few milliseconds): not a failure
    let mut ended_first = 0usize;
    let mut exited_backends = 0usize;
    let mut stopping = false;
    // a worker could not write the shared capture (or its output): the
    // capture is lost for all, every worker is stopped
    let mut output_failed = false;
    // signals already forwarded: each new Ctrl-C/SIGTERM is passed on
    let mut forwarded = (false, false);
    let mut pending = initial;
    let mut spares: Vec<Spare> = Vec::new();
    let mut spare_failures = 0;
    let mut said_lost = false;
    let mut said_normal = false;
    let mut fork_times = forks::ForkTimes::default();
    // when spares took their backends lately: more are kept ready while
    // backends start fast
    let mut taken: std::collections::VecDeque<Instant> = Default::default();
    let mut last_look = Instant::now();
    if spares_on && let Some(ms) = forks::held_for_tests() {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: PGDBG_HOLD_NEW_MS is set (for tests): each new backend is kept stopped {ms} ms after its fork"
        ));
    }
    // the spares forked from one process that has loaded the debug info
    // (forkserver.rs); executed one by one when it cannot start
    let mut server = None;
    if spares_on && let Some(pm) = postmaster {
        // (PGDBG_NO_FORK_SERVER, for tests: the executed spares' course)
        if !crate::config::get().no_fork_server {
            server = start_fork_server(pm, opts, limit);
        }
        // the first spares ready before the script is said to run
        start_spares(
            &mut spares,
            SPARES,
            pm,
            opts,
            limit,
            &mut spare_failures,
            server.as_ref(),
        );
        if let Some(why) = forks::await_ready(&mut spares, Duration::from_secs(30)) {
            say_looking(&why);
            spares_on = false;
        }
        say_normal_priority(&spares, &mut said_normal);
    }
    if !opts.quiet {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: running the script on {} backend{}{}{}",
            pending.len(),
            if pending.len() == 1 { "" } else { "s" },
            if postmaster.is_some() {
                " (and on every backend that starts)"
            } else {
                ""
            },
            crate::runtime::limit_text(limit, None)
        ));
    }
    loop {
        let remaining = limit.map(|d| d.saturating_sub(t0.elapsed()));
        let out_of_time = remaining.is_some_and(|r| r.is_zero());
        let (int_now, term_now) = (
            runtime::sigint_seen(),
            runtime::must_stop() || output_failed,
        );
        // (Ctrl-C is cleared once forwarded, so each new one shows up here)
        if int_now || (term_now && !forwarded.1) {
            // the first Ctrl-C ends the workers' scripts (SIGINT); another
            // one, or SIGTERM/SIGHUP, makes them detach at once (SIGTERM)
            let sig = if term_now || forwarded.0 {
                libc::SIGTERM
            } else {
                libc::SIGINT
            };
            for w in workers.values() {
                // SAFETY: plain kill(2) to our own child.
                unsafe { libc::kill(w.child.id() as i32, sig) };
            }
            forwarded = (forwarded.0 || int_now, forwarded.1 || term_now);
            if int_now {
                runtime::clear_interrupt();
            }
            stopping = true;
        }
        if out_of_time {
            stopping = true;
        }
        if !stopping {
            for pid in pending.drain(..) {
                if !seen.insert(pid) {
                    continue;
                }
                match spawn_worker(pid, opts, remaining, mode) {
                    Ok(w) => {
                        workers.insert(pid, w);
                    }
                    Err(e) => {
                        not_attached += 1;
                        crate::runtime::sink().warn(format_args!("[{pid}] pgdbg: error: {e:#}"));
                    }
                }
            }
        }
        // spares: the backends they took become their workers'
        let mut i = 0;
        while i < spares.len() {
            let ended = matches!(spares[i].child.try_wait(), Ok(Some(_)));
            match spares[i].poll() {
                Said::Nothing if !ended => i += 1,
                Said::Nothing => {
                    let mut sp = spares.swap_remove(i);
                    let st = sp.child.wait().ok();
                    for t in sp.threads.drain(..) {
                        let _ = t.join();
                    }
                    if sp.child.orphaned() {
                        // its fork server ended (killed): executed spares
                        // take over (start_spares)
                        crate::inferior::log::debug(
                            "a worker started ahead ended with its fork server",
                        );
                    } else if !stopping && spares_on {
                        spare_failures += 1;
                        crate::runtime::sink().warn(format_args!(
                            "pgdbg: a worker started ahead ended ({}) before it took a backend",
                            st.map(|s| s.to_string()).unwrap_or_default()
                        ));
                    }
                }
                Said::Ready => say_normal_priority(&spares, &mut said_normal),
                Said::Lost => {
                    if !said_lost {
                        crate::runtime::sink().warn(format_args!(
                            "pgdbg: fork events were lost (the kernel's buffer for them was full): the backends they announced are found by looking, every 100 ms, and their first statements may be missed"
                        ));
                    }
                    said_lost = true;
                }
                Said::Missed { pid, at } => fork_times.missed(pid, at),
                Said::Refused(why) => {
                    if spares_on {
                        say_looking(&why);
                    }
                    spares_on = false;
                }
                Said::Attached { pid, .. } if workers.contains_key(&pid) => {
                    // a late spare took a backend that has a worker (its
                    // fork heard late): it ends at once, the backend
                    // restored and detached
                    let mut sp = spares.swap_remove(i);
                    // SAFETY: plain kill(2) to our own child.
                    unsafe { libc::kill(sp.child.id() as i32, libc::SIGTERM) };
                    let _ = sp.child.wait();
                    for t in sp.threads.drain(..) {
                        let _ = t.join();
                    }
                }
                Said::Attached { pid, took, at } => {
                    fork_times.taken(pid, at);
                    let sp = spares.swap_remove(i);
                    sp.prefix.store(pid, Ordering::Relaxed);
                    taken.push_back(Instant::now());
                    seen.insert(pid);
                    if forwarded.0 || forwarded.1 {
                        // taken as the others were told to end
                        // SAFETY: plain kill(2) to our own child.
                        unsafe { libc::kill(sp.child.id() as i32, libc::SIGTERM) };
                    }
                    workers.insert(
                        pid,
                        Worker {
                            child: sp.child,
                            threads: sp.threads,
                            took: Some(took),
                        },
                    );
                }
            }
        }
        if stopping || !spares_on {
            spares.iter_mut().for_each(|s| s.dismiss());
        } else if let Some(pm) = postmaster {
            while taken
                .front()
                .is_some_and(|t| t.elapsed() > Duration::from_secs(1))
            {
                taken.pop_front();
            }
            let want = if taken.is_empty() { SPARES } else { MAX_SPARES };
            start_spares(
                &mut spares,
                want,
                pm,
                opts,
                remaining,
                &mut spare_failures,
                server.as_ref(),
            );
        }
        // reap
        let mut done = Vec::new();
        for (pid, w) in workers.iter_mut() {
            if let Ok(Some(st)) = w.child.try_wait() {
                done.push((*pid, st));
            }
        }
        for (pid, st) in done {
            let mut took = None;
            if let Some(w) = workers.remove(&pid) {
                took = w.took;
                for t in w.threads {
                    let _ = t.join();
                }
            }
            if st.code() == Some(forks::NOT_A_CLIENT_EXIT) {
                // a walsender taken at its fork, let go: never a backend
                // of the script, nor counted as attached at its fork
                continue;
            }
            if let Some(d) = took {
                fork_times.push(d);
            }
            // not attached: the worker said why, and its status says
            // which cause it was
            use crate::attach::{
                ALREADY_TRACED_EXIT, ENDED_FIRST_EXIT, NO_PERMISSION_EXIT, NOT_ATTACHED_EXIT,
            };
            match st.code() {
                Some(ENDED_FIRST_EXIT) => {
                    ended_first += 1;
                    continue;
                }
                Some(c @ (NOT_ATTACHED_EXIT | ALREADY_TRACED_EXIT | NO_PERMISSION_EXIT)) => {
                    not_attached += 1;
                    traced_by_other += (c == ALREADY_TRACED_EXIT) as usize;
                    no_permission += (c == NO_PERMISSION_EXIT) as usize;
                    continue;
                }
                _ => {}
            }
            attached += 1;
            if st.code() == Some(runtime::OUTPUT_FAILED_EXIT) {
                // the worker said which write failed
                failed += 1;
                output_failed = true;
            } else if st.code() == Some(crate::attach::BACKEND_ENDED_EXIT) {
                // its worker saw it end (not judged from /proc: a zombie
                // not reaped yet, or a PID reused, would be miscounted)
                exited_backends += 1;
            } else if !st.success() && !stopping {
                failed += 1;
            }
        }
        if workers.is_empty() && spares.is_empty() && (stopping || postmaster.is_none() || once) {
            break;
        }
        if once {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let status: Vec<i32> = spares.iter().map(|s| s.status_fd()).collect();
        wait_for(
            &status,
            Duration::from_millis(100).saturating_sub(last_look.elapsed()),
        );
        if last_look.elapsed() < Duration::from_millis(100) {
            continue;
        }
        last_look = Instant::now();
        // looking too: a backend forked while no spare was ready, or a fork
        // event lost (a full socket buffer)
        if let Some(pm) = postmaster
            && !stopping
            && !once
        {
            if !crate::inferior::procfs::exists(pm) {
                crate::runtime::sink().warn(format_args!("pgdbg: the postmaster {pm} is gone"));
                stopping = true;
            }
            for b in cluster::backends(pm) {
                // a spare's: it says so (above) once it has armed the script
                if traced_by_spare(b.pid, &spares) {
                    continue;
                }
                if !seen.contains(&b.pid) && is_client_backend(b.pid) {
                    pending.push(b.pid);
                }
            }
        }
    }
    if let Some(s) = server.take() {
        // every child of it has ended (the loop above waited for each)
        if let Ok(s) = Rc::try_unwrap(s) {
            s.end(Duration::from_secs(5));
        }
    }
    // every worker has taken its backend's marks
    let lost = statements.map_or(0, |s| s.finish());
    if lost > 0 {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: {lost} statement starts or ends not recorded (the kernel's ring was full): the waits around them are merged"
        ));
    }
    if !opts.quiet
        && let Some(s) = fork_times.summary()
    {
        crate::runtime::sink().warn(format_args!("pgdbg: {s}"));
    }
    if let Some(s) = fork_times.missed_summary() {
        crate::runtime::sink().warn(format_args!("pgdbg: {s}"));
    }
    if once && runtime::output_failure().is_none() && !output_failed {
        if let Some(sig) = runtime::terminating() {
            return Ok(128 + sig);
        }
        if forwarded.0 {
            return Ok(130);
        }
        return Ok(once_summary(
            refused + failed + not_attached,
            seen.len() + refused,
        ));
    }
    if !opts.quiet {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: {attached} backend{} attached, {exited_backends} exited during the script{}{}{}{}",
            if attached == 1 { "" } else { "s" },
            if failed > 0 {
                format!(", {failed} failed after attaching")
            } else {
                String::new()
            },
            if not_attached > 0 {
                format!(
                    ", {not_attached} failed to attach: {}",
                    failure_causes(not_attached, traced_by_other, no_permission)
                )
            } else {
                String::new()
            },
            if ended_first > 0 {
                format!(", {ended_first} ended before pgdbg could attach")
            } else {
                String::new()
            },
            opts.capture
                .as_ref()
                .map(|c| format!("; capture in {}", c.display()))
                .unwrap_or_default()
        ));
    }
    if let Some(what) = runtime::output_failure() {
        // our own standard output (the workers' lines are relayed by us)
        crate::runtime::sink().warn(format_args!(
            "pgdbg: {what}; the backends were restored and detached"
        ));
        return Ok(runtime::OUTPUT_FAILED_EXIT);
    }
    if output_failed {
        return Ok(runtime::OUTPUT_FAILED_EXIT);
    }
    if let Some(sig) = runtime::terminating() {
        return Ok(128 + sig);
    }
    Ok(if failed + not_attached > 0 { 1 } else { 0 })
}

/// The causes of `n` failures to attach, counted: `traced` by another
/// process, `refused` by the kernel, the others said in their lines.
fn failure_causes(n: usize, traced: usize, refused: usize) -> String {
    let other = n - traced - refused;
    let mut parts = Vec::new();
    if traced > 0 {
        parts.push(format!("{traced} already traced by another process"));
    }
    if refused > 0 {
        parts.push(format!("{refused} not permitted to trace"));
    }
    if other > 0 {
        parts.push(format!(
            "{other} {}",
            if other == 1 {
                "other error"
            } else {
                "other errors"
            }
        ));
    }
    format!("{} (each said above)", parts.join(", "))
}

/// The end of a [`Mode::Once`] run: how many of the backends failed (each
/// said why in its own line), and the exit status.
fn once_summary(failed: usize, total: usize) -> i32 {
    if failed == 0 {
        return 0;
    }
    if failed == total && total > 1 {
        crate::runtime::sink().warn(format_args!("pgdbg: all {total} PIDs failed (said above)"));
    } else if total > 1 {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: {failed} of {total} PIDs failed (said above); the others were answered"
        ));
    }
    1
}

fn is_client_backend(pid: i32) -> bool {
    matches!(classify(pid), Ok(ProcessKind::ClientBackend { .. }))
}

/// Workers kept started ahead of the forks; MAX_SPARES while backends
/// start fast (one taken in the last second): a spare takes 0.15 s or
/// more to be ready, a session of one statement lasts a few ms.
const SPARES: usize = 3;
const MAX_SPARES: usize = 8;

/// Start spares until there are `want` (none after 3 failures): forked
/// by the fork server, else executed.
fn start_spares(
    spares: &mut Vec<Spare>,
    want: usize,
    postmaster: i32,
    opts: &AttachOpts,
    remaining: Option<Duration>,
    failures: &mut usize,
    server: Option<&Rc<ForkServer>>,
) {
    while spares.len() < want && *failures < 3 {
        // forked, else (no server, or it ended or refused) executed
        let sp = match server.filter(|s| !s.ended()) {
            Some(s) => fork_spare(s, remaining).or_else(|e| {
                crate::inferior::log::debug(&format!(
                    "the fork server did not fork a worker ({e:#}): one executed instead"
                ));
                spawn_spare(postmaster, opts, remaining)
            }),
            None => spawn_spare(postmaster, opts, remaining),
        };
        match sp {
            Ok(sp) => spares.push(sp),
            Err(e) => {
                *failures += 1;
                crate::runtime::sink()
                    .warn(format_args!("pgdbg: error: cannot start a worker: {e:#}"));
                break;
            }
        }
    }
}

fn say_looking(why: &str) {
    crate::runtime::sink().warn(format_args!(
        "pgdbg: new backends are looked for every 100 ms (their first statements may be missed): {why}"
    ));
}

/// Said once: the spares wait for forks at the normal priority (real-time
/// refused), so that on a busy machine one may get a CPU only after a new
/// backend's startup.
fn say_normal_priority(spares: &[Spare], said: &mut bool) {
    if *said {
        return;
    }
    let Some(why) = spares.iter().find_map(|s| s.normal_priority.as_deref()) else {
        return;
    };
    *said = true;
    crate::runtime::sink().warn(format_args!(
        "pgdbg: the workers started ahead wait for new backends at the normal priority ({why}; real-time needs CAP_SYS_NICE or an RLIMIT_RTPRIO): on a busy machine a session may start before one gets a CPU, and its first statements are then missed"
    ));
}

/// Traced by one of the spares (taken at its fork, being armed).
fn traced_by_spare(pid: i32, spares: &[Spare]) -> bool {
    let tracer = crate::inferior::procfs::status(pid).map_or(0, |s| s.tracer_pid);
    tracer != 0 && spares.iter().any(|s| s.child.id() as i32 == tracer)
}

/// Wait at most `d` for a spare's word.
fn wait_for(fds: &[i32], d: Duration) {
    if fds.is_empty() {
        std::thread::sleep(d);
        return;
    }
    crate::perf::poll_in(fds, d.as_millis().clamp(1, 100) as i32);
}

/// Start a worker ahead of any fork (`--next-backend`, forks.rs): it loads
/// the debug info of the postmaster's binary (each backend's) and the
/// script, then takes the next new backend.
fn spawn_spare(postmaster: i32, opts: &AttachOpts, remaining: Option<Duration>) -> Result<Spare> {
    let mut args = opts.worker_args(postmaster, remaining);
    args.push("--next-backend".into());
    let prefix = Arc::new(AtomicI32::new(0));
    let (status, status_w) = forkserver::pipe()?;
    let (child, threads, stdin) = spawn(args, prefix.clone(), Relay::Lines, Some(status_w.into()))?;
    set_nonblocking(&status)?;
    Ok(Spare::new(
        Proc::Exec(child),
        threads,
        stdin.expect("asked for"),
        status,
        prefix,
    ))
}

/// The fork server for the spares of `postmaster`'s backends, ready
/// (None, said in debug output, when it cannot start: spares are then
/// executed one by one).
fn start_fork_server(
    postmaster: i32,
    opts: &AttachOpts,
    remaining: Option<Duration>,
) -> Option<Rc<ForkServer>> {
    let start = || -> Result<ForkServer> {
        let mut args = opts.worker_args(postmaster, remaining);
        args.push("--next-backend".into());
        args.push("--fork-server".into());
        let (mine, theirs) = forkserver::socketpair()?;
        let prefix = Arc::new(AtomicI32::new(0));
        let (child, threads, _) = spawn(args, prefix, Relay::Lines, Some(theirs))?;
        ForkServer::new(child, threads, mine, Duration::from_secs(30))
    };
    match start() {
        Ok(s) => Some(Rc::new(s)),
        Err(e) => {
            crate::inferior::log::debug(&format!(
                "no fork server ({e:#}): each worker started ahead is executed"
            ));
            None
        }
    }
}

/// A spare forked by the fork server: its standard input, output and
/// error and its status pipe made here, their other ends sent.
fn fork_spare(server: &Rc<ForkServer>, remaining: Option<Duration>) -> Result<Spare> {
    use std::os::fd::AsRawFd;
    let (stdin_r, stdin_w) = forkserver::pipe()?;
    let (out_r, out_w) = forkserver::pipe()?;
    let (err_r, err_w) = forkserver::pipe()?;
    let (status, status_w) = forkserver::pipe()?;
    set_nonblocking(&status)?;
    let pid = server.fork(
        [
            stdin_r.as_raw_fd(),
            out_w.as_raw_fd(),
            err_w.as_raw_fd(),
            status_w.as_raw_fd(),
        ],
        remaining,
    )?;
    // (their copies are the spare's now)
    drop((stdin_r, out_w, err_w, status_w));
    let prefix = Arc::new(AtomicI32::new(0));
    let threads = vec![
        prefix_lines(prefix.clone(), out_r, Relay::Lines),
        prefix_lines(prefix.clone(), err_r, Relay::Stderr),
    ];
    Ok(Spare::new(
        Proc::Forked {
            pid,
            server: server.clone(),
            status: None,
        },
        threads,
        stdin_w,
        status,
        prefix,
    ))
}

fn set_nonblocking(f: &std::fs::File) -> Result<()> {
    nix::fcntl::fcntl(
        f,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )?;
    Ok(())
}

/// Start `pgdbg attach PID --worker ...` with the same script, in its own
/// process group (Ctrl-C reaches it through us, once).
fn spawn_worker(
    pid: i32,
    opts: &AttachOpts,
    remaining: Option<Duration>,
    mode: Mode,
) -> Result<Worker> {
    let stdout = match mode {
        Mode::Script => Relay::Lines,
        Mode::Once {
            quiet_stdout: false,
            ..
        } => Relay::Whole,
        Mode::Once {
            quiet_stdout: true, ..
        } => Relay::Drop,
    };
    let prefix = Arc::new(AtomicI32::new(pid));
    let (child, threads, _) = spawn(opts.worker_args(pid, remaining), prefix, stdout, None)?;
    Ok(Worker {
        child: Proc::Exec(child),
        threads,
        took: None,
    })
}

/// The process of a worker and the threads copying its output; a spare
/// (and the fork server) also gets its standard input piped (returned)
/// and `fd3` as its descriptor 3 (`forks::STATUS_FD`: a spare's status
/// pipe, the fork server's socket).
fn spawn(
    args: Vec<std::ffi::OsString>,
    prefix: Arc<AtomicI32>,
    stdout: Relay,
    fd3: Option<OwnedFd>,
) -> Result<(
    Child,
    Vec<std::thread::JoinHandle<()>>,
    Option<std::fs::File>,
)> {
    use std::os::fd::AsRawFd;
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(args);
    let parent = std::process::id() as i32;
    let spare = fd3.is_some();
    let status_w = fd3.as_ref().map(|w| w.as_raw_fd());
    cmd.stdin(if spare { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: prctl, getppid, fcntl and dup2 are async-signal-safe;
    // nothing else runs between fork and exec.  If this supervisor dies
    // (even by SIGKILL), the worker gets SIGTERM and restores its backend.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            // the status pipe as descriptor 3, kept across exec
            if let Some(w) = status_w {
                let fd = forks::STATUS_FD;
                if w == fd {
                    libc::fcntl(fd, libc::F_SETFD, 0);
                } else if libc::dup2(w, fd) < 0 {
                    libc::_exit(1);
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    drop(fd3);
    let stdin = child
        .stdin
        .take()
        .map(|s| std::fs::File::from(OwnedFd::from(s)));
    let mut threads = Vec::new();
    if let Some(o) = child.stdout.take() {
        threads.push(prefix_lines(prefix.clone(), o, stdout));
    }
    if let Some(e) = child.stderr.take() {
        threads.push(prefix_lines(prefix, e, Relay::Stderr));
    }
    Ok((child, threads, stdin))
}

/// Where a worker's output goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Relay {
    /// to standard error, line by line
    Stderr,
    /// to standard output, line by line
    Lines,
    /// to standard output, all of it in one write when the worker ends (a
    /// backtrace is not interleaved with another backend's)
    Whole,
    /// read and dropped
    Drop,
}

/// The backend a worker's lines are prefixed with.  A worker started
/// ahead says which backend it took (forks.rs) before it writes anything
/// else, but on another pipe, read by the supervisor's loop: its first
/// line may come first, and waits for that (0 after 500 ms: it took none).
fn backend_of(pid: &AtomicI32) -> i32 {
    let t0 = Instant::now();
    loop {
        let p = pid.load(Ordering::Relaxed);
        if p != 0 || t0.elapsed() > Duration::from_millis(500) {
            return p;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Copy a worker's output, each line prefixed with `[PID] `.
fn prefix_lines(
    pid: Arc<AtomicI32>,
    r: impl std::io::Read + Send + 'static,
    relay: Relay,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        runtime::block_in_this_thread();
        // never stop draining: a worker blocked on a full pipe could hold
        // its backend stopped at a breakpoint
        let mut rd = std::io::BufReader::new(r);
        let mut buf = Vec::new();
        let mut whole = String::new();
        let mut stdout_broken = false;
        let mut write_out = |text: &str| {
            if stdout_broken || text.is_empty() {
                return;
            }
            let mut o = std::io::stdout().lock();
            if let Err(e) = o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
                // keep draining (the worker must not block); the
                // supervisor stops every worker
                stdout_broken = true;
                runtime::output_failed(format!("writing standard output failed: {e}"));
            }
        };
        loop {
            buf.clear();
            match rd.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
            let line = String::from_utf8_lossy(&buf);
            let l = match backend_of(&pid) {
                // a worker started ahead that took no backend
                0 => format!("{}\n", line.trim_end_matches('\n')),
                p => format!("[{p}] {}\n", line.trim_end_matches('\n')),
            };
            match relay {
                Relay::Stderr => {
                    let _ = std::io::stderr().write_all(l.as_bytes());
                }
                Relay::Lines => write_out(&l),
                Relay::Whole => whole.push_str(&l),
                Relay::Drop => {}
            }
        }
        write_out(&whole);
    })
}
