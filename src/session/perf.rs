//! `profile` (`crate::perf::profile`) at the prompt, and `pgdbg profile
//! PID` without attaching.
use super::*;
use crate::perf::offcpu::{OffCpuProfile, OffCpuProfiler};
use crate::perf::profile::{Profile, ProfileOpts, Profiler, Symbolizer};
use crate::perf::wall::{WallProfile, WallProfiler};
use crate::postgres::backend::NoStop;

impl Session {
    /// `profile`: let the backend run while the kernel samples it.
    pub(crate) fn profile(&mut self, opts: &ProfileOpts) -> Result<(String, Flow)> {
        if opts.off_cpu {
            return self.profile_off_cpu(opts);
        }
        if opts.wall {
            return self.profile_wall(opts);
        }
        let rec = Profiler::start(self.pid, self.pid, opts.hz, self.bias)?;
        let line = format!(
            "profile: sampling backend {} at {} Hz (perf cpu-clock, not stopped){}",
            self.pid,
            opts.hz,
            crate::runtime::limit_text(opts.duration, None)
        );
        let (pid, hz) = (self.pid, opts.hz);
        self.record(
            opts,
            &line,
            || rec.finish(),
            |raw, sym| Profile::build(raw, sym, pid, hz),
        )
    }

    /// `profile --off-cpu`: let the backend run while the kernel records
    /// its switches.
    fn profile_off_cpu(&mut self, opts: &ProfileOpts) -> Result<(String, Flow)> {
        let rec = OffCpuProfiler::start(self.pid, self.pid, self.bias)?;
        let line = format!(
            "profile: recording when backend {} leaves a CPU (perf sched:sched_switch, not stopped){}",
            self.pid,
            crate::runtime::limit_text(opts.duration, None)
        );
        let pid = self.pid;
        self.record(
            opts,
            &line,
            || rec.finish(),
            |raw, sym| OffCpuProfile::build(raw, sym, pid),
        )
    }

    /// `profile --wall`: on-CPU samples and off-CPU intervals together.
    fn profile_wall(&mut self, opts: &ProfileOpts) -> Result<(String, Flow)> {
        let rec = WallProfiler::start(self.pid, self.pid, opts.hz, self.bias)?;
        let line = wall_start_line(self.pid, opts);
        let (pid, hz) = (self.pid, opts.hz);
        self.record(
            opts,
            &line,
            || rec.finish(),
            |raw, sym| WallProfile::build(raw, sym, pid, hz),
        )
    }

    /// The three modes' common course, their recorder started: say `line`,
    /// let the backend run for the command's time, end the recording, and
    /// render what `build` makes of it.
    fn record<R, P: crate::perf::profile::Rendered>(
        &mut self,
        opts: &ProfileOpts,
        line: &str,
        finish: impl FnOnce() -> Result<R>,
        build: impl FnOnce(&R, &mut Symbolizer<'_>) -> P,
    ) -> Result<(String, Flow)> {
        self.say(line);
        let res = self.run_probes(&mut NoStop, opts.duration);
        let raw = finish()?;
        let (end, text) = res?;
        let flow = flow_of(end);
        let mut sym = Symbolizer::new(self.pid, &self.di, self.bias);
        let p = build(&raw, &mut sym);
        Ok((format!("{}{text}", opts.render(&p)?), flow))
    }
}

/// What `profile --wall` says as it starts.
pub fn wall_start_line(pid: i32, opts: &ProfileOpts) -> String {
    format!(
        "profile: recording backend {pid} on a CPU (perf cpu-clock at {} Hz) and off it \
         (perf sched:sched_switch), not stopped{}",
        opts.hz,
        crate::runtime::limit_text(opts.duration, None)
    )
}

/// Wait `duration` (armed now that the recording has started: --for D
/// records D), or until a terminating signal or the process's end.
fn wait_detached(pid: i32, duration: Option<std::time::Duration>) {
    let _deadline = duration.map(crate::runtime::Deadline::arm);
    while !crate::runtime::deadline_hit()
        && !crate::runtime::must_stop()
        && !crate::runtime::sigint_seen()
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `pgdbg profile PID`: sample without ptrace at all (the backend is never
/// stopped, not even to attach), until `opts.duration` or a terminating
/// signal (Ctrl-C).
pub fn profile_detached(pid: i32, di: &DebugInfo, opts: &ProfileOpts) -> Result<String> {
    let bias = modules::compute_bias(pid, di)?;
    if opts.off_cpu {
        let rec = OffCpuProfiler::start(pid, pid, bias)?;
        wait_detached(pid, opts.duration);
        let raw = rec.finish()?;
        let mut sym = Symbolizer::new(pid, di, bias);
        return opts.render(&OffCpuProfile::build(&raw, &mut sym, pid));
    }
    if opts.wall {
        let rec = WallProfiler::start(pid, pid, opts.hz, bias)?;
        wait_detached(pid, opts.duration);
        let raw = rec.finish()?;
        let mut sym = Symbolizer::new(pid, di, bias);
        return opts.render(&WallProfile::build(&raw, &mut sym, pid, opts.hz));
    }
    let profiler = Profiler::start(pid, pid, opts.hz, bias)?;
    wait_detached(pid, opts.duration);
    let raw = profiler.finish()?;
    let mut sym = Symbolizer::new(pid, di, bias);
    let p = Profile::build(&raw, &mut sym, pid, opts.hz);
    opts.render(&p)
}

/// How a recording that let the backend run ended, for the prompt.
fn flow_of(end: ProbeEnd) -> Flow {
    match end {
        ProbeEnd::TargetGone => Flow::TargetGone,
        ProbeEnd::Terminating => Flow::Terminate,
        _ => Flow::Continue,
    }
}
