//! `enable`, `disable` and `ignore`: a disabled breakpoint is kept with
//! its int3s out of the backend (`Session::release_int3`, the path
//! `delete` takes) and put back by `enable` (`Session::insert_int3`, the
//! path `break` takes); an ignored hit is counted without a stop
//! (`Breakpoints::ignored`, from `conditions_at`).
use super::*;

impl Session {
    /// `enable [N...]` (`on`) or `disable [N...]`: none given, all.  A
    /// number that names no breakpoint is said, as gdb does, and the
    /// others are done.
    pub fn enable_breakpoints(&mut self, ids: &[u32], on: bool) -> Result<String> {
        let ids = if ids.is_empty() {
            self.bps.ids()
        } else {
            ids.to_vec()
        };
        let mut msgs = Vec::new();
        for id in ids {
            let Some(was) = self.bps.get_mut(id).map(|b| b.enabled) else {
                msgs.push(format!("No breakpoint number {id}."));
                continue;
            };
            if was == on {
                continue;
            }
            if self.bps.get_mut(id).is_some_and(|b| b.watch.is_some()) {
                // a watchpoint: its debug register released, or taken
                // again (refused when none is left)
                if on {
                    self.arm_watch(id)
                        .map_err(|e| anyhow!("watchpoint {id} stays disabled: {e:#}"))?;
                } else {
                    self.disarm_watch(id)?;
                }
                self.bps.set_enabled(id, on);
                continue;
            }
            if on {
                // each address still in code that is mapped (a library
                // unloaded since is dropped at its event; this is the
                // second guard): never an int3 into whatever came after it
                let unmapped = self
                    .bps
                    .list
                    .iter()
                    .filter(|b| b.id == id)
                    .flat_map(|b| b.locations.iter().map(|l| l.addr))
                    .find(|a| !self.in_mapped_code(*a));
                if let Some(a) = unmapped {
                    return Err(anyhow!(
                        "breakpoint {id} stays disabled: its location {a:#x} is no longer in mapped code (its library was unloaded); delete it and set it again"
                    ));
                }
            }
            let addrs = self.bps.set_enabled(id, on).unwrap_or_default();
            if !on {
                for a in addrs {
                    self.release_int3(a)?;
                }
                continue;
            }
            // rolled back on failure, as `break` does: only the int3s this
            // enable wrote (an address in use keeps its int3)
            let mut inserted = Vec::new();
            for a in addrs {
                let ours = !self.target.breakpoint_inserted(a);
                if let Err(e) = self.insert_int3(a) {
                    self.bps.set_enabled(id, false);
                    for a in inserted {
                        self.release_int3(a)?;
                    }
                    return Err(anyhow!("breakpoint {id} stays disabled: {e:#}"));
                }
                if ours {
                    inserted.push(a);
                }
            }
        }
        Ok(msgs.join("\n"))
    }

    /// `ignore N COUNT`, with gdb's words.
    pub fn set_ignore(&mut self, id: u32, count: u64) -> Result<String> {
        let b = self
            .bps
            .get_mut(id)
            .ok_or_else(|| anyhow!("No breakpoint number {id}."))?;
        b.ignore = count;
        Ok(match count {
            0 => format!("Will stop next time breakpoint {id} is reached."),
            1 => format!("Will ignore next crossing of breakpoint {id}."),
            n => format!("Will ignore next {n} crossings of breakpoint {id}."),
        })
    }
}
