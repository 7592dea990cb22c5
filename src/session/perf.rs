//! `profile` (`crate::perf::profile`) at the prompt, and `pgdbg profile
//! PID` without attaching.
use super::*;
use crate::perf::profile::{Profile, ProfileOpts, Profiler, Symbolizer};
use crate::postgres::backend::NoStop;

impl Session {
    /// `profile`: let the backend run while the kernel samples it.
    pub(crate) fn profile(&mut self, opts: &ProfileOpts) -> Result<(String, Flow)> {
        let profiler = Profiler::start(self.pid, self.pid, opts.hz, self.bias)?;
        self.say(&format!(
            "profile: sampling backend {} at {} Hz (perf cpu-clock, not stopped){}",
            self.pid,
            opts.hz,
            match opts.duration {
                Some(d) => format!(" for {:.1}s", d.as_secs_f64()),
                None => "; Ctrl-C stops".into(),
            }
        ));
        let mut probe = NoStop;
        let res = self.run_probes(&mut probe, opts.duration);
        let raw = profiler.finish()?;
        let (end, text) = res?;
        let flow = match end {
            ProbeEnd::TargetGone => Flow::TargetGone,
            ProbeEnd::Terminating => Flow::Terminate,
            _ => Flow::Continue,
        };
        let mut sym = Symbolizer::new(self.pid, &self.di, self.bias);
        let p = Profile::build(&raw, &mut sym, self.pid, opts.hz);
        Ok((format!("{}{text}", opts.render(&p)?), flow))
    }
}

/// `pgdbg profile PID`: sample without ptrace at all (the backend is never
/// stopped, not even to attach), until `opts.duration` or a terminating
/// signal (Ctrl-C).
pub fn profile_detached(pid: i32, di: &DebugInfo, opts: &ProfileOpts) -> Result<String> {
    let bias = modules::compute_bias(pid, di)?;
    let _deadline = opts.duration.map(crate::runtime::Deadline::arm);
    let profiler = Profiler::start(pid, pid, opts.hz, bias)?;
    while !crate::runtime::deadline_hit()
        && !crate::runtime::must_stop()
        && !crate::runtime::sigint_seen()
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let raw = profiler.finish()?;
    let mut sym = Symbolizer::new(pid, di, bias);
    let p = Profile::build(&raw, &mut sym, pid, opts.hz);
    opts.render(&p)
}
