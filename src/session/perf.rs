//! `profile` (`crate::perf::profile`): one recording course for the
//! prompt's command and for `pgdbg profile PID`, which never attaches.
use super::*;
use crate::perf::offcpu::{OffCpuProfile, OffCpuProfiler, WaitWord};
use crate::perf::profile::{Profile, Profiler, Symbolizer};
use crate::perf::profile_opts::ProfileOpts;
use crate::perf::render::Rendered;
use crate::perf::syscall_report::SyscallProfile;
use crate::perf::syscalls::SyscallProfiler;
use crate::perf::wall::{WallProfile, WallProfiler};
use crate::postgres::backend::NoStopDigest;
use std::time::Duration;

/// Where a recording runs: what it says as it starts, and how it waits
/// while the kernel records and then digests the records.
trait Recording {
    /// How waiting ended.
    type End;
    fn say(&mut self, line: &str);
    /// Wait `duration` (or until Ctrl-C, a terminating signal, the
    /// process's end), then `digest` the recording with the process's
    /// symbolizer.
    fn record<P>(
        &mut self,
        duration: Option<Duration>,
        digest: impl FnOnce(&mut Symbolizer<'_>) -> Result<P>,
    ) -> Result<(P, Self::End)>;
}

/// At the prompt: the backend attached and let run (`run_probes`, no
/// stop); at `--for`'s end the digest runs while it still runs, before
/// the stop that ends the command (`NoStopDigest`).
impl Recording for Session {
    type End = Ran;
    fn say(&mut self, line: &str) {
        Session::say(self, line);
    }
    fn record<P>(
        &mut self,
        duration: Option<Duration>,
        digest: impl FnOnce(&mut Symbolizer<'_>) -> Result<P>,
    ) -> Result<(P, Ran)> {
        let (di, pid, bias) = (self.di.clone(), self.pid, self.bias);
        let mut probe = NoStopDigest::new(move || digest(&mut Symbolizer::new(pid, &di, bias)));
        let ran = self.run_probes(&mut probe, duration);
        let p = probe.result()?;
        Ok((p, ran?))
    }
}

/// `pgdbg profile PID`: no ptrace at all (the backend is never stopped,
/// not even to attach); the starting line goes to stderr unless quiet.
struct Detached<'a> {
    pid: i32,
    di: &'a DebugInfo,
    bias: u64,
    quiet: bool,
}

impl Recording for Detached<'_> {
    type End = ();
    fn say(&mut self, line: &str) {
        if !self.quiet {
            crate::runtime::sink().warn(line);
        }
    }
    fn record<P>(
        &mut self,
        duration: Option<Duration>,
        digest: impl FnOnce(&mut Symbolizer<'_>) -> Result<P>,
    ) -> Result<(P, ())> {
        wait_detached(self.pid, duration);
        Ok((
            digest(&mut Symbolizer::new(self.pid, self.di, self.bias))?,
            (),
        ))
    }
}

impl Session {
    /// `profile`: let the backend run while the kernel records it.
    pub(crate) fn profile(&mut self, opts: &ProfileOpts) -> Result<Outcome> {
        let (pid, bias, di) = (self.pid, self.bias, self.di.clone());
        let (out, Ran { end, text }) = record(self, &di, pid, bias, opts)?;
        Ok(Outcome::new(format!("{out}{text}"), Flow::from(end)))
    }
}

/// `pgdbg profile PID`: record without ptrace until `opts.duration` or a
/// terminating signal (Ctrl-C), as the prompt's `profile` does.
pub fn profile_detached(
    pid: i32,
    di: &DebugInfo,
    opts: &ProfileOpts,
    quiet: bool,
) -> Result<String> {
    let bias = modules::compute_bias(pid, di)?;
    let mut at = Detached {
        pid,
        di,
        bias,
        quiet,
    };
    Ok(record(&mut at, di, pid, bias, opts)?.0)
}

/// Start the recorder of `opts`' mode (on-CPU samples, `--off-cpu`
/// switches, or both with `--wall`) on backend `pid`, then run the course.
fn record<W: Recording>(
    at: &mut W,
    di: &DebugInfo,
    pid: i32,
    bias: u64,
    opts: &ProfileOpts,
) -> Result<(String, W::End)> {
    let limit = crate::runtime::limit_text(opts.duration, None);
    // the wait-event word, read while the backend is off a CPU, and the
    // names of the wait events seen (PostgreSQL's knowledge: postgres/)
    let word = || WaitWord::at(pid, crate::postgres::waitnames::word_address(di, pid, bias));
    let name_waits = |infos: &std::collections::BTreeSet<u32>| {
        let names =
            crate::postgres::waitnames::name_without_asking(di, pid, bias, infos.iter().copied());
        infos
            .iter()
            .filter_map(|&i| match names.describe(i) {
                (Some(t), Some(e)) => Some((i, format!("{t}:{e}"))),
                _ => None,
            })
            .collect::<crate::perf::offcpu::WaitLabels>()
    };
    if opts.off_cpu {
        let rec = OffCpuProfiler::start(pid, pid, bias, word())?;
        let line = format!(
            "profile: recording when backend {pid} leaves a CPU (perf sched:sched_switch, not stopped){limit}"
        );
        return course(
            at,
            opts,
            &line,
            || rec.finish(),
            |raw, sym| OffCpuProfile::build(raw, sym, pid, &name_waits),
        );
    }
    if opts.syscalls {
        let rec = SyscallProfiler::start(pid, pid)?;
        let line = format!(
            "profile: recording the system calls of backend {pid} (perf raw_syscalls, not stopped){limit}"
        );
        return course(
            at,
            opts,
            &line,
            || rec.finish(),
            |raw, _| SyscallProfile::build(raw, pid),
        );
    }
    let hz = opts.hz;
    if opts.wall {
        let rec = WallProfiler::start(pid, pid, hz, bias, word())?;
        let line = format!(
            "profile: recording backend {pid} on a CPU (perf cpu-clock at {hz} Hz) and off it \
             (perf sched:sched_switch), not stopped{limit}"
        );
        return course(
            at,
            opts,
            &line,
            || rec.finish(),
            |raw, sym| WallProfile::build(raw, sym, pid, hz, &name_waits),
        );
    }
    let rec = Profiler::start(pid, pid, hz, bias)?;
    let line =
        format!("profile: sampling backend {pid} at {hz} Hz (perf cpu-clock, not stopped){limit}");
    course(
        at,
        opts,
        &line,
        || rec.finish(),
        |raw, sym| Profile::build(raw, sym, pid, hz),
    )
}

/// The modes' common course, their recorder started: say `line`, wait
/// for the command's time, end the recording, and render what `build`
/// makes of it.
fn course<W: Recording, R, P: Rendered>(
    at: &mut W,
    opts: &ProfileOpts,
    line: &str,
    finish: impl FnOnce() -> Result<R>,
    build: impl FnOnce(&R, &mut Symbolizer<'_>) -> P,
) -> Result<(String, W::End)> {
    at.say(line);
    at.record(opts.duration, |sym| opts.render(&build(&finish()?, sym)))
}

/// Wait `duration` (armed now that the recording has started: --for D
/// records D), or until a terminating signal or the process's end.
fn wait_detached(pid: i32, duration: Option<Duration>) {
    let _deadline = duration.map(crate::runtime::Deadline::arm);
    while !crate::runtime::deadline_hit()
        && !crate::runtime::must_stop()
        && !crate::runtime::sigint_seen()
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
}
