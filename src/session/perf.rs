//! `profile` (`crate::perf::profile`): one recording course for the
//! prompt's command and for `pgdbg profile PID`, which never attaches.
use super::*;
use crate::perf::bystatement::{ByStatement, Owners, Stamp, split};
use crate::perf::offcpu::{OffCpuProfile, OffCpuProfiler, WaitLabels, WaitWord, wait_names};
use crate::perf::profile::{Profile, Profiler, ReaderMaps, Symbolizer};
use crate::perf::profile_opts::ProfileOpts;
use crate::perf::render::Rendered;
use crate::perf::syscall_report::SyscallProfile;
use crate::perf::syscalls::SyscallProfiler;
use crate::perf::wall::{WallProfile, WallProfiler};
use crate::postgres::backend::NoStopDigest;
use crate::postgres::statements::{Poller, StatusShape};
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
    // --by-statement: the backend's pg_stat_activity entry, read from now on
    let mut statements = match opts.by_statement {
        true => Some(Poller::start(
            StatusShape::find(di, pid, bias).map_err(|e| anyhow!("profile --by-statement: {e}"))?,
        )),
        false => None,
    };
    let timed = statements.is_some();
    if opts.off_cpu {
        let rec = OffCpuProfiler::start(pid, pid, bias, word(), timed)?;
        let line = format!(
            "profile: recording when backend {pid} leaves a CPU (perf sched:sched_switch, not stopped){limit}"
        );
        return course(
            at,
            opts,
            &line,
            || rec.finish(),
            |raw, sym| {
                let mut p = OffCpuProfile::build(raw, sym, pid, &name_waits);
                let waits = wait_names(raw, &name_waits);
                p.by_statement = split_by_statement(
                    statements.take(),
                    raw.stamps.as_deref(),
                    sym,
                    &waits,
                    0.0,
                    "the time off a CPU",
                );
                p
            },
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
        let rec = WallProfiler::start(pid, pid, hz, bias, word(), timed)?;
        let line = format!(
            "profile: recording backend {pid} on a CPU (perf cpu-clock at {hz} Hz) and off it \
             (perf sched:sched_switch), not stopped{limit}"
        );
        return course(
            at,
            opts,
            &line,
            || rec.finish(),
            |raw, sym| {
                let mut p = WallProfile::build(raw, sym, pid, hz, &name_waits);
                let waits = wait_names(&raw.off, &name_waits);
                p.by_statement = split_by_statement(
                    statements.take(),
                    raw.off.stamps.as_deref(),
                    sym,
                    &waits,
                    0.0,
                    "the time on and off a CPU",
                );
                p
            },
        );
    }
    let rec = Profiler::start(pid, pid, hz, bias, timed)?;
    let line =
        format!("profile: sampling backend {pid} at {hz} Hz (perf cpu-clock, not stopped){limit}");
    course(
        at,
        opts,
        &line,
        || rec.finish(),
        |raw, sym| {
            let mut p = Profile::build(raw, sym, pid, hz);
            p.by_statement = split_by_statement(
                statements.take(),
                raw.stamps.as_deref(),
                sym,
                &WaitLabels::new(),
                1000.0 / hz as f64,
                "the on-CPU samples",
            );
            p
        },
    )
}

/// `--by-statement`: the recording's samples and intervals (`stamps`)
/// split by the statements `poller` saw (it reads once more and stops:
/// the recording has ended); none without a poller.
fn split_by_statement(
    poller: Option<Poller>,
    stamps: Option<&[Stamp]>,
    sym: &mut Symbolizer<'_>,
    waits: &WaitLabels,
    sample_ms: f64,
    of_what: &str,
) -> Option<ByStatement> {
    let tl = poller?.finish();
    let owners = Owners {
        of: &|t| tl.owner_at(t),
        labels: tl.owners.iter().map(|o| o.label.clone()).collect(),
        details: tl.details(),
        heading: tl.heading(of_what),
    };
    Some(split(stamps.unwrap_or(&[]), &owners, sym, waits, sample_ms))
}

/// The modes' common course, their recorder started: say `line`, wait
/// for the command's time, end the recording, and render what `build`
/// makes of it.
fn course<W: Recording, R: ReaderMaps, P: Rendered>(
    at: &mut W,
    opts: &ProfileOpts,
    line: &str,
    finish: impl FnOnce() -> Result<R>,
    build: impl FnOnce(&R, &mut Symbolizer<'_>) -> P,
) -> Result<(String, W::End)> {
    at.say(line);
    at.record(opts.duration, |sym| {
        let mut raw = finish()?;
        // the files as the reader saw them: the backend may have ended
        if let Some(maps) = raw.reader_maps() {
            sym.use_maps(maps);
        }
        opts.render(&build(&raw, sym))
    })
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
