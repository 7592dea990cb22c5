//! `pgdbg attach PID PID...` and `pgdbg attach --cluster DIR`: one worker
//! pgdbg process per backend, each a complete single-backend session (its
//! own tracer, breakpoints and cleanup), all appending to one capture file.
//! A worker whose backend exits ends on its own without disturbing the
//! others; with `--cluster`, backends that start later get a worker too.
//! This process only supervises: it checks the script once before anything
//! is attached, prefixes each worker's output with `[PID]`, forwards
//! Ctrl-C/SIGTERM and waits for every worker to detach.

use crate::attach::{AttachOpts, load_debuginfo, load_scripts};
use crate::forks::{self, Handover};
use crate::guard;
use crate::postgres::{ProcessKind, classify, cluster};
use anyhow::{Result, anyhow, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

struct Worker {
    child: Child,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// A new backend held since its fork, for this worker to take.
    handover: Option<Handover>,
}

pub fn run(pids: &[String], cluster_dir: Option<&Path>, opts: &AttachOpts) -> Result<i32> {
    if opts.script.is_none() && opts.ex.is_empty() {
        bail!(
            "attaching to several backends needs --script FILE or --ex COMMAND (the prompt works on one backend: pgdbg attach PID)"
        );
    }
    if cluster_dir.is_some() && !pids.is_empty() {
        bail!("give either PIDs or --cluster DIR, not both");
    }
    let limit = opts.duration()?;
    crate::command::parse_duration(&opts.call_timeout)
        .map_err(|e| anyhow!("--call-timeout: {e}"))?;
    // Targets, all checked before anything is attached.
    let postmaster = cluster_dir.map(cluster::postmaster_of).transpose()?;
    let mut initial = Vec::new();
    for p in pids {
        let pid = crate::attach::parse_pid(Some(p.clone()))?;
        if initial.contains(&pid) {
            crate::errln!("pgdbg: PID {pid} is given more than once: attaching to it once");
            continue;
        }
        crate::attach::check_target(pid, opts.any_process)?;
        initial.push(pid);
    }
    // new backends: from the kernel at their fork (subscribed before the
    // first look, so that none falls between), else by looking
    let mut seizer = None;
    if let Some(pm) = postmaster {
        match forks::Seizer::start(pm) {
            Ok(e) => seizer = Some(e),
            Err(why) => crate::errln!(
                "pgdbg: new backends are looked for every 100 ms (their first statements may be missed): {why}"
            ),
        }
    }
    if let Some(pm) = postmaster {
        initial.extend(cluster::backends(pm).iter().map(|b| b.pid));
    }
    let mut hold_times = forks::HoldTimes::default();
    // new backends held since their fork, waiting for a spare worker
    let mut held: std::collections::VecDeque<(i32, Instant)> = Default::default();
    // workers started ahead (forks.rs), and how many failed to
    let mut spares: Vec<forks::Spare> = Vec::new();
    let mut spare_failures = 0;
    let mut last_look = Instant::now();
    // The script, checked once against the binary's debug info.
    let binary_of = postmaster.or(initial.first().copied());
    let Some(binary_pid) = binary_of else {
        bail!("no backend to attach to");
    };
    let (di, _) = load_debuginfo(binary_pid, opts)?;
    load_scripts(opts, &di)?;
    drop(di);
    if let Some(c) = &opts.capture {
        // create it now so that a bad path fails before any attach
        crate::capture::Capture::open(c)?;
    }
    guard::install();
    let t0 = Instant::now();
    let mut workers: BTreeMap<i32, Worker> = BTreeMap::new();
    let mut seen: BTreeSet<i32> = BTreeSet::new();
    // each backend seen is attached (and then maybe exited during the
    // script, or failed) or failed to attach
    let mut attached = 0usize;
    let mut failed = 0usize;
    let mut not_attached = 0usize;
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
    if !opts.quiet {
        crate::errln!(
            "pgdbg: running the script on {} backend{}{}{}",
            pending.len(),
            if pending.len() == 1 { "" } else { "s" },
            if postmaster.is_some() {
                " (and on every backend that starts)"
            } else {
                ""
            },
            limit
                .map(|d| format!(" for {:.1}s", d.as_secs_f64()))
                .unwrap_or_else(|| "; Ctrl-C stops".into())
        );
    }
    loop {
        let remaining = limit.map(|d| d.saturating_sub(t0.elapsed()));
        let out_of_time = remaining.is_some_and(|r| r.is_zero());
        let (int_now, term_now) = (guard::sigint_seen(), guard::must_stop() || output_failed);
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
                guard::clear_interrupt();
            }
            stopping = true;
        }
        if out_of_time {
            stopping = true;
        }
        // new children of the postmaster, stopped at their fork (before
        // the PIDs found by looking: one may be both)
        if let Some(sz) = &seizer {
            for (pid, since) in sz.new_held() {
                if stopping || !seen.insert(pid) {
                    sz.release(pid);
                    continue;
                }
                held.push_back((pid, since));
            }
        }
        if !stopping {
            for pid in pending.drain(..) {
                if held_by_us(pid) || !seen.insert(pid) {
                    // (held: the seizer's, given above or at the next turn)
                    continue;
                }
                match spawn_worker(pid, opts, remaining) {
                    Ok(w) => {
                        workers.insert(pid, w);
                    }
                    Err(e) => {
                        not_attached += 1;
                        crate::errln!("[{pid}] pgdbg: error: {e}");
                    }
                }
            }
        }
        // each held backend to a ready spare worker
        for sp in spares.iter_mut() {
            sp.poll();
        }
        while !stopping && !held.is_empty() {
            let Some(i) = spares.iter().position(|s| s.ready()) else {
                break;
            };
            let h = held.pop_front().expect("not empty");
            let pid = h.0;
            let sz = seizer.as_ref().expect("held by it");
            match spares.swap_remove(i).assign(h, sz, remaining) {
                Ok((child, threads, h)) => {
                    workers.insert(
                        pid,
                        Worker {
                            child,
                            threads,
                            handover: Some(h),
                        },
                    );
                }
                Err(spare) => {
                    if crate::inferior::procfs::exists(pid) {
                        // let go, running: the next look takes it
                        seen.remove(&pid);
                    } else {
                        ended_first += 1;
                    }
                    spares.push(spare);
                }
            }
        }
        for (_, w) in workers.iter_mut() {
            if let Some(h) = &mut w.handover {
                h.poll(&mut hold_times);
            }
        }
        if stopping {
            // let go of what was not handed over yet; spares end
            if let Some(sz) = &mut seizer {
                sz.stop();
            }
            held.clear();
            spares.iter_mut().for_each(|s| s.dismiss());
        } else if seizer.is_some() {
            // enough spares for what is held, and some ahead
            let want = (SPARES + held.len()).min(MAX_SPARES);
            while spares.len() < want && spare_failures < 3 {
                match spawn_spare(postmaster.unwrap_or(0), opts) {
                    Ok(sp) => spares.push(sp),
                    Err(e) => {
                        spare_failures += 1;
                        crate::errln!("pgdbg: error: cannot start a worker: {e}");
                        break;
                    }
                }
            }
        }
        // spares that ended: none should before they are dismissed
        spares.retain_mut(|sp| {
            let Ok(Some(st)) = sp.child.try_wait() else {
                return true;
            };
            for t in sp.threads.drain(..) {
                let _ = t.join();
            }
            if !stopping {
                spare_failures += 1;
                crate::errln!(
                    "pgdbg: a worker started ahead ended ({st}) before it was given a backend"
                );
            }
            false
        });
        if spare_failures >= 3 && !held.is_empty() {
            // new backends are then found by looking: let them go and
            // forget them, so that the next look takes them
            for (pid, _) in held.drain(..) {
                if let Some(sz) = &seizer {
                    sz.release(pid);
                }
                seen.remove(&pid);
            }
        }
        // reap
        let mut done = Vec::new();
        for (pid, w) in workers.iter_mut() {
            if let Ok(Some(st)) = w.child.try_wait() {
                done.push((*pid, st));
            }
        }
        for (pid, st) in done {
            if let Some(mut w) = workers.remove(&pid) {
                if let Some(h) = &mut w.handover {
                    // never left stopped by a worker that did not take it
                    h.worker_ended(pid, &mut hold_times);
                }
                for t in w.threads {
                    let _ = t.join();
                }
            }
            if st.code() == Some(crate::attach::NOT_ATTACHED_EXIT) {
                // the worker said why; a backend gone now had ended first
                if crate::inferior::procfs::exists(pid) {
                    not_attached += 1;
                } else {
                    ended_first += 1;
                }
                continue;
            }
            attached += 1;
            if st.code() == Some(guard::OUTPUT_FAILED_EXIT) {
                // the worker said which write failed
                failed += 1;
                output_failed = true;
            } else if !crate::inferior::procfs::exists(pid) {
                exited_backends += 1;
            } else if !st.success() && !stopping {
                failed += 1;
            }
        }
        if workers.is_empty() && spares.is_empty() && (stopping || postmaster.is_none()) {
            break;
        }
        let status: Vec<i32> = workers
            .values()
            .filter_map(|w| w.handover.as_ref().and_then(|h| h.status_fd()))
            .chain(spares.iter().filter_map(|s| s.status_fd()))
            .collect();
        let next_look = Duration::from_millis(100).saturating_sub(last_look.elapsed());
        forks::wait(seizer.as_ref(), &status, next_look);
        if last_look.elapsed() < Duration::from_millis(100) {
            continue;
        }
        last_look = Instant::now();
        // looking too: a fork event can be lost (a full socket buffer)
        if let Some(pm) = postmaster
            && !stopping
        {
            if !crate::inferior::procfs::exists(pm) {
                crate::errln!("pgdbg: the postmaster {pm} is gone");
                stopping = true;
            }
            for b in cluster::backends(pm) {
                // with the seizer, a child still under the postmaster's
                // title was forked a moment ago: its fork is the seizer's
                // to handle (held, or let go as no backend)
                if seizer.is_some()
                    && !crate::inferior::procfs::cmdline(b.pid).starts_with("postgres: ")
                {
                    continue;
                }
                if !seen.contains(&b.pid) && is_client_backend(b.pid) {
                    pending.push(b.pid);
                }
            }
        }
    }
    if !opts.quiet
        && let Some(s) = hold_times.summary()
    {
        crate::errln!("pgdbg: {s}");
    }
    if !opts.quiet {
        crate::errln!(
            "pgdbg: {attached} backend{} attached, {exited_backends} exited during the script{}{}{}{}",
            if attached == 1 { "" } else { "s" },
            if failed > 0 {
                format!(", {failed} failed after attaching")
            } else {
                String::new()
            },
            if not_attached > 0 {
                format!(", {not_attached} failed to attach (said above)")
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
        );
    }
    if let Some(what) = guard::output_failure() {
        // our own standard output (the workers' lines are relayed by us)
        crate::errln!("pgdbg: {what}; the backends were restored and detached");
        return Ok(guard::OUTPUT_FAILED_EXIT);
    }
    if output_failed {
        return Ok(guard::OUTPUT_FAILED_EXIT);
    }
    if let Some(sig) = guard::terminating() {
        return Ok(128 + sig);
    }
    Ok(if failed + not_attached > 0 { 1 } else { 0 })
}

/// Held by our seizer thread (forks.rs) since its fork.
fn held_by_us(pid: i32) -> bool {
    crate::inferior::procfs::status(pid).is_ok_and(|s| s.tracer_pid == std::process::id() as i32)
}

fn is_client_backend(pid: i32) -> bool {
    matches!(classify(pid), Ok(ProcessKind::ClientBackend { .. }))
}

/// Workers kept started ahead of the forks, and at most at once.
const SPARES: usize = 2;
const MAX_SPARES: usize = 8;

/// Start `pgdbg attach PID --worker ...` with the same script, in its own
/// process group (Ctrl-C reaches it through us, once).
fn spawn_worker(pid: i32, opts: &AttachOpts, remaining: Option<Duration>) -> Result<Worker> {
    let prefix = Arc::new(AtomicI32::new(pid));
    let (child, threads, _) = spawn(opts.worker_args(pid, remaining), prefix, false)?;
    Ok(Worker {
        child,
        threads,
        handover: None,
    })
}

/// Start a worker ahead of any fork, to be handed a new backend
/// (`--held`): it loads the debug info of the postmaster's binary (each
/// backend's) and the script, and waits.
fn spawn_spare(postmaster: i32, opts: &AttachOpts) -> Result<forks::Spare> {
    let mut args = opts.worker_args(postmaster, None);
    args.push("--held".into());
    let prefix = Arc::new(AtomicI32::new(0));
    let (child, threads, pipes) = spawn(args, prefix.clone(), true)?;
    let (go, status) = pipes.expect("asked for");
    Ok(forks::Spare::new(child, threads, go, status, prefix))
}

type Pipes = Option<(std::process::ChildStdin, std::fs::File)>;

/// The process of a worker and the threads copying its output; with
/// `handover`, its standard input and a pipe on its descriptor 3
/// (`attach::HANDOVER_FD`).
fn spawn(
    args: Vec<std::ffi::OsString>,
    prefix: Arc<AtomicI32>,
    handover: bool,
) -> Result<(Child, Vec<std::thread::JoinHandle<()>>, Pipes)> {
    use std::os::fd::{AsRawFd, IntoRawFd};
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(args);
    let parent = std::process::id() as i32;
    let pipe = if handover {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        nix::fcntl::fcntl(
            &r,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        Some((r, w))
    } else {
        None
    };
    let status_w = pipe.as_ref().map(|(_, w)| w.as_raw_fd());
    cmd.stdin(if handover {
        Stdio::piped()
    } else {
        Stdio::null()
    })
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
                let fd = crate::attach::HANDOVER_FD;
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
    let pipes = match pipe {
        Some((r, w)) => {
            drop(w);
            let go = child.stdin.take().expect("piped stdin");
            // SAFETY: the read end, ours, handed to the File
            let status =
                unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(r.into_raw_fd()) };
            Some((go, status))
        }
        None => None,
    };
    let mut threads = Vec::new();
    if let Some(o) = child.stdout.take() {
        threads.push(prefix_lines(prefix.clone(), o, false));
    }
    if let Some(e) = child.stderr.take() {
        threads.push(prefix_lines(prefix, e, true));
    }
    Ok((child, threads, pipes))
}

/// Copy a worker's output line by line, each line prefixed with `[PID] `.
fn prefix_lines(
    pid: Arc<AtomicI32>,
    r: impl std::io::Read + Send + 'static,
    to_stderr: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        guard::block_in_this_thread();
        // never stop draining: a worker blocked on a full pipe could hold
        // its backend stopped at a breakpoint
        let mut rd = std::io::BufReader::new(r);
        let mut buf = Vec::new();
        let mut stdout_broken = false;
        loop {
            buf.clear();
            match rd.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
            let line = String::from_utf8_lossy(&buf);
            let l = format!(
                "[{}] {}\n",
                pid.load(Ordering::Relaxed),
                line.trim_end_matches('\n')
            );
            if to_stderr {
                let _ = std::io::stderr().write_all(l.as_bytes());
            } else if !stdout_broken {
                let mut o = std::io::stdout().lock();
                if let Err(e) = o.write_all(l.as_bytes()).and_then(|_| o.flush()) {
                    // keep draining (the worker must not block); the
                    // supervisor stops every worker
                    stdout_broken = true;
                    guard::output_failed(format!("writing standard output failed: {e}"));
                }
            }
        }
    })
}
