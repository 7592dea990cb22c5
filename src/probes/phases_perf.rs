//! `count FUNC... --by-phase --perf`: the calls counted by kernel uprobes
//! whose records carry the stack pointer, the phase they fall in from
//! entry and return uprobes on the planner's and the executor's entry
//! points (as `count --by-phase` does with breakpoints): the backend is
//! never stopped for a call.  One probe per address, whatever it is for,
//! so a counted function that also starts a phase is counted in the
//! phase around it, as in the ptrace mode.

use super::{addresses, count_summary};
use crate::perf::uprobe::{Probe, SP, Sampler};
use crate::postgres::backend::{Backend, NoStopDigest, Outcome, Ran, probe_outcome};
use crate::postgres::{ERROR_CLEANUP_FUNCTIONS, PHASE_FUNCTIONS, PHASES};
use crate::runtime::limit_text;
use anyhow::{Result, anyhow};
use std::collections::BTreeMap;
use std::time::Duration;

/// What one probed address is for.
#[derive(Default, Clone)]
struct Site {
    /// counted functions starting there
    counted: Vec<usize>,
    /// the phase it starts (index in PHASES), with a return probe
    phase: Option<usize>,
}

#[derive(Clone, Copy)]
enum Role {
    Entry(usize),
    PhaseReturn,
}

/// The running phase functions and the calls counted per phase.
struct State {
    sites: Vec<Site>,
    roles: Vec<Role>,
    /// running phase functions, innermost last: (entry stack pointer, phase)
    running: Vec<(u64, usize)>,
    calls: Vec<[u64; 3]>,
}

impl State {
    /// Phase functions whose frames are gone (at or below `sp`, or below
    /// it with `!inclusive`): returned, or left by an ERROR's longjmp.
    fn forget(&mut self, sp: u64, inclusive: bool) {
        while let Some(&(osp, _)) = self.running.last() {
            if osp > sp || (osp == sp && !inclusive) {
                break;
            }
            self.running.pop();
        }
    }

    fn hit(&mut self, probe: usize, sp: u64) {
        match self.roles[probe] {
            Role::Entry(site) => {
                self.forget(sp, true);
                let phase = self.running.last().map_or(2, |r| r.1);
                let site = &self.sites[site];
                for &f in &site.counted {
                    self.calls[f][phase] += 1;
                }
                if let Some(p) = site.phase {
                    self.running.push((sp, p));
                }
            }
            Role::PhaseReturn => self.forget(sp, false),
        }
    }
}

/// `count FUNC... --by-phase --perf`
pub fn count_by_phase_perf(
    s: &mut dyn Backend,
    functions: &[String],
    duration: Option<Duration>,
) -> Result<Outcome> {
    crate::postgres::backend::clear_orphans(s, functions, "count")?;
    let phase_functions: Vec<&str> = PHASE_FUNCTIONS.iter().map(|(f, _)| *f).collect();
    crate::postgres::backend::clear_orphans(s, &phase_functions, "count")?;
    crate::postgres::backend::clear_orphans(s, ERROR_CLEANUP_FUNCTIONS, "count")?;
    let mut by_addr: BTreeMap<u64, Site> = BTreeMap::new();
    // the function each address was found for (for a refusal's line)
    let mut names: BTreeMap<u64, &str> = BTreeMap::new();
    for (i, f) in functions.iter().enumerate() {
        for a in addresses(s, f)? {
            by_addr.entry(a).or_default().counted.push(i);
            names.entry(a).or_insert(f);
        }
    }
    for (f, phase) in PHASE_FUNCTIONS {
        // a binary without one of them simply has no such phase entry
        let Ok((addrs, _)) = super::latency::entries(s, f) else {
            continue;
        };
        let p = PHASES.iter().position(|x| x == phase).unwrap_or(2);
        for a in addrs {
            by_addr.entry(a).or_default().phase = Some(p);
            names.entry(a).or_insert(f);
        }
    }
    for f in ERROR_CLEANUP_FUNCTIONS {
        if let Ok((addrs, _)) = super::latency::entries(s, f) {
            for a in addrs {
                by_addr.entry(a).or_default();
                names.entry(a).or_insert(f);
            }
        }
    }
    let mut probes = Vec::new();
    let mut roles = Vec::new();
    let mut sites = Vec::new();
    for &a in by_addr.keys() {
        let f = names.get(&a).copied().unwrap_or("?");
        if let Some(why) = crate::postgres::backend::uprobe_conflict(s, a, f) {
            return Err(anyhow::Error::new(crate::perf::Refused(format!(
                "count --by-phase --perf: {why}"
            ))));
        }
    }
    for (a, site) in by_addr {
        let (file, offset) = crate::perf::file_offset(s.pid(), a)
            .map_err(|e| anyhow!("count --perf: {a:#x} {}", e.said("the backend")))?;
        if site.phase.is_some() {
            probes.push(Probe {
                file: file.clone(),
                offset,
                ret: true,
            });
            roles.push(Role::PhaseReturn);
        }
        probes.push(Probe {
            file,
            offset,
            ret: false,
        });
        roles.push(Role::Entry(sites.len()));
        sites.push(site);
    }
    let state = State {
        sites,
        roles,
        running: Vec::new(),
        calls: vec![[0; 3]; functions.len()],
    };
    let sampler = Sampler::start(s.pid(), s.pid(), &probes, SP, 256, state, |st, h| {
        st.hit(h.probe, h.regs.rsp)
    })
    .map_err(|e| anyhow!("count --perf: {e:#}"))?;
    s.say(&format!(
        "count: {} in backend {} by phase (kernel uprobes, no stops){}",
        functions.join(", "),
        s.pid(),
        limit_text(duration, None)
    ));
    let t0 = std::time::Instant::now();
    // the records read while the backend runs on
    let mut digest = NoStopDigest::new(move || {
        let secs = t0.elapsed().as_secs_f64();
        sampler.finish().map(|got| (secs, got))
    });
    let res = s.run_probes(&mut digest, duration);
    let (secs, (state, lost)) = digest.result()?;
    let Ran { end, text } = res?;
    let mut summary = count_summary(s, functions, &state.calls, true, secs);
    if lost > 0 {
        summary.push_str(&format!(
            "\n{lost} probe records lost (the kernel's ring was full): their calls are not counted"
        ));
    }
    Ok(probe_outcome(s, end, summary, text))
}
