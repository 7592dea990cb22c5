//! The commands built on perf events (`crate::perf`): `profile` at the
//! prompt, `pgdbg profile PID` without attaching, `waits trace --perf`.
use super::*;
use crate::perf::profile::{Profile, ProfileOpts, Profiler, Symbolizer};

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

impl Session {
    /// `waits trace --perf`: every store into the wait-event word comes
    /// from a perf write-breakpoint event (the backend is not stopped per
    /// wait); the waits are reported once tracing ends, through the same
    /// probe (names, capture events, summary) as the ptrace mode.
    pub(crate) fn waits_trace_perf(
        &mut self,
        duration: Option<std::time::Duration>,
        stacks: usize,
        quiet: bool,
    ) -> Result<(String, Flow)> {
        use crate::perf::watch::WordWatch;
        use crate::postgres::waits::TraceProbe;
        let mut probe = TraceProbe::observing(self, stacks, quiet)?;
        let base_i = std::time::Instant::now();
        let base_ns = crate::perf::monotonic_ns();
        let base_wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let watch = WordWatch::start(self.pid, self.pid, probe.word(), stacks > 0, self.bias)?;
        self.say(&format!(
            "waits: tracing backend {} (perf write-breakpoint event on its wait-event word, no stop per wait; reported at the end){}",
            self.pid,
            match duration {
                Some(d) => format!(" for {:.1}s", d.as_secs_f64()),
                None => "; Ctrl-C stops".into(),
            }
        ));
        let mut nostop = NoStop;
        let res = self.run_probes(&mut nostop, duration);
        let got = watch.finish()?;
        let (end, text) = res?;
        let flow = match end {
            ProbeEnd::TargetGone => Flow::TargetGone,
            ProbeEnd::Terminating => Flow::Terminate,
            _ => Flow::Continue,
        };
        let stores = got.stores.len();
        if flow == Flow::Continue {
            let di = self.di.clone();
            let mut sym = Symbolizer::new(self.pid, &di, self.bias);
            for st in got.stores {
                let delta = st.time as i128 - base_ns as i128;
                let now = if delta >= 0 {
                    base_i + std::time::Duration::from_nanos(delta as u64)
                } else {
                    base_i
                        .checked_sub(std::time::Duration::from_nanos((-delta) as u64))
                        .unwrap_or(base_i)
                };
                let ts = base_wall + delta as f64 / 1e9;
                let mut stack = Vec::new();
                for (i, pc) in st.pcs.iter().enumerate() {
                    stack.extend(sym.names(*pc, i == 0));
                    if stack.len() >= stacks {
                        break;
                    }
                }
                stack.truncate(stacks);
                probe.store(self, st.value, now, ts, stack);
            }
            probe.close(self);
        }
        let mut notes = String::new();
        if got.lost > 0 {
            notes.push_str(&format!(
                "\n{} stores not recorded (the ring was full): waits around them are merged",
                got.lost
            ));
        }
        if got.read_back > 0 {
            notes.push_str(&format!(
                "\n{} of {stores} stores were not plain moves: their values were read back",
                got.read_back
            ));
        }
        if flow != Flow::Continue {
            notes.push_str(&format!(
                "\n{stores} stores recorded; not reported (tracing was cut short)"
            ));
        }
        Ok((format!("{}{notes}{text}", probe.summary()), flow))
    }
}

/// `pgdbg profile PID`: sample without ptrace at all (the backend is never
/// stopped, not even to attach), until `opts.duration` or a terminating
/// signal (Ctrl-C).
pub fn profile_detached(pid: i32, di: &DebugInfo, opts: &ProfileOpts) -> Result<String> {
    let bias = modules::compute_bias(pid, di)?;
    let _deadline = opts.duration.map(crate::guard::Deadline::arm);
    let profiler = Profiler::start(pid, pid, opts.hz, bias)?;
    while !crate::guard::deadline_hit()
        && !crate::guard::must_stop()
        && !crate::guard::sigint_seen()
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let raw = profiler.finish()?;
    let mut sym = Symbolizer::new(pid, di, bias);
    let p = Profile::build(&raw, &mut sym, pid, opts.hz);
    opts.render(&p)
}
