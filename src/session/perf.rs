//! `profile` (`crate::perf::profile`) at the prompt, and `pgdbg profile
//! PID` without attaching.
use super::*;
use crate::perf::offcpu::{OffCpuProfile, OffCpuProfiler};
use crate::perf::profile::{Profile, ProfileOpts, Profiler, Symbolizer};
use crate::postgres::backend::NoStop;

impl Session {
    /// `profile`: let the backend run while the kernel samples it.
    pub(crate) fn profile(&mut self, opts: &ProfileOpts) -> Result<(String, Flow)> {
        if opts.off_cpu {
            return self.profile_off_cpu(opts);
        }
        let profiler = Profiler::start(self.pid, self.pid, opts.hz, self.bias)?;
        self.say(&format!(
            "profile: sampling backend {} at {} Hz (perf cpu-clock, not stopped){}",
            self.pid,
            opts.hz,
            crate::runtime::limit_text(opts.duration, None)
        ));
        let mut probe = NoStop;
        let res = self.run_probes(&mut probe, opts.duration);
        let raw = profiler.finish()?;
        let (end, text) = res?;
        let flow = flow_of(end);
        let mut sym = Symbolizer::new(self.pid, &self.di, self.bias);
        let p = Profile::build(&raw, &mut sym, self.pid, opts.hz);
        Ok((format!("{}{text}", opts.render(&p)?), flow))
    }
}

impl Session {
    /// `profile --off-cpu`: let the backend run while the kernel records
    /// its switches.
    fn profile_off_cpu(&mut self, opts: &ProfileOpts) -> Result<(String, Flow)> {
        let rec = OffCpuProfiler::start(self.pid, self.pid, self.bias)?;
        self.say(&format!(
            "profile: recording when backend {} leaves a CPU (perf sched:sched_switch, not stopped){}",
            self.pid,
            crate::runtime::limit_text(opts.duration, None)
        ));
        let mut probe = NoStop;
        let res = self.run_probes(&mut probe, opts.duration);
        let raw = rec.finish()?;
        let (end, text) = res?;
        let flow = flow_of(end);
        let mut sym = Symbolizer::new(self.pid, &self.di, self.bias);
        let p = OffCpuProfile::build(&raw, &mut sym, self.pid);
        Ok((format!("{}{text}", opts.render_off_cpu(&p)?), flow))
    }
}

/// Wait until the deadline, a terminating signal or the process's end.
fn wait_detached(pid: i32) {
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
    let _deadline = opts.duration.map(crate::runtime::Deadline::arm);
    if opts.off_cpu {
        let rec = OffCpuProfiler::start(pid, pid, bias)?;
        wait_detached(pid);
        let raw = rec.finish()?;
        let mut sym = Symbolizer::new(pid, di, bias);
        return opts.render_off_cpu(&OffCpuProfile::build(&raw, &mut sym, pid));
    }
    let profiler = Profiler::start(pid, pid, opts.hz, bias)?;
    wait_detached(pid);
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
