//! The stop mode: pgdbg's breakpoints at GetCachedPlan's entry (and, in the
//! full mode, a one-shot breakpoint at its return address, where the
//! returned `CachedPlan *` says which plan it is); `--fast=stop` reads the
//! plansource's counters at the next entry instead.

use super::{CACHEDPLANSOURCE_MAGIC, Pending, PlanCacheProbe, read};
use crate::postgres::backend::Backend;
use anyhow::Result;

impl PlanCacheProbe {
    pub(super) fn on_entry(&mut self, s: &mut dyn Backend) -> Result<()> {
        let r = s.registers()?;
        let plansource = r.rdi;
        // Frames of calls that returned (or were left by an ERROR's
        // longjmp) are stale.
        let mut i = 0;
        while i < self.pending.len() {
            // a frame at or above the stale call's own depth: it is gone
            if r.rsp + 8 >= self.pending[i].ret_rsp {
                let p = self.pending.remove(i);
                s.disarm_internal(p.ret)?;
            } else {
                i += 1;
            }
        }
        // one process_vm_readv: the CachedPlanSource and the return address
        let mut before = vec![0u8; self.l.cps.size as usize];
        let mut retb = [0u8; 8];
        s.read_many(&mut [(plansource, &mut before[..]), (r.rsp, &mut retb[..])])?;
        if self.l.cps.int(&before, "magic") != Some(CACHEDPLANSOURCE_MAGIC) {
            if !self.bad_magic_warned {
                self.bad_magic_warned = true;
                s.say("plancache: GetCachedPlan's argument does not look like a CachedPlanSource (bad magic); skipped");
            }
            return Ok(());
        }
        let ret = u64::from_le_bytes(retb);
        s.arm_internal(ret)?;
        self.pending.push(Pending {
            plansource,
            bound_params: r.rsi,
            ret,
            ret_rsp: r.rsp + 8,
            before,
            mode: None,
            ts: None,
            text: None,
            start: None,
            named: true,
            next: None,
        });
        Ok(())
    }

    pub(super) fn on_return(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()> {
        let r = s.registers()?;
        let Some(i) = self
            .pending
            .iter()
            .rposition(|p| p.ret == addr && p.ret_rsp == r.rsp)
        else {
            return Ok(());
        };
        let p = self.pending.remove(i);
        s.disarm_internal(p.ret)?;
        let after = read(s, p.plansource, self.l.cps.size)?;
        let gplan = self.l.cps.ptr(&after, "gplan").unwrap_or(0);
        let generic = r.rax != 0 && r.rax == gplan;
        self.report(s, &p, &after, generic, Some(r.rax))
    }

    /// --fast: report the pending executions whose counters moved (their
    /// GetCachedPlan has returned); the others are still running.
    pub fn flush_fast(&mut self, s: &mut dyn Backend) -> Result<()> {
        self.flush_fast_read(s, None)
    }

    /// `flush_fast` with the pending plansources already read (`after[i]`
    /// for `pending[i]`), when they were read together with other data.
    pub(super) fn flush_fast_read(
        &mut self,
        s: &mut dyn Backend,
        mut pre: Option<Vec<Vec<u8>>>,
    ) -> Result<()> {
        let mut afters = Vec::with_capacity(self.pending.len());
        for (i, p) in self.pending.iter().enumerate() {
            afters.push(Some(match pre.as_mut() {
                Some(v) if i < v.len() => std::mem::take(&mut v[i]),
                _ => read(s, p.plansource, self.l.cps.size)?,
            }));
        }
        self.settle_pending(s, afters)?;
        // executions left by an ERROR never move their counters
        if self.pending.len() > 64 {
            self.pending.drain(..self.pending.len() - 64);
        }
        Ok(())
    }

    pub(super) fn on_entry_fast(&mut self, s: &mut dyn Backend) -> Result<()> {
        let plansource = s.registers()?.rdi;
        // One process_vm_readv for the pending executions' plansources (to
        // report them), this one's, and plan_cache_mode.
        let size = self.l.cps.size as usize;
        let mut bufs = vec![vec![0u8; size]; self.pending.len() + 1];
        let mut mode = [0u8; 4];
        let read_all = {
            let mut ranges: Vec<(u64, &mut [u8])> = self
                .pending
                .iter()
                .map(|p| p.plansource)
                .chain(std::iter::once(plansource))
                .zip(bufs.iter_mut())
                .map(|(a, b)| (a, &mut b[..]))
                .collect();
            if let Some((a, _)) = &self.l.plan_cache_mode {
                ranges.push((*a, &mut mode[..]));
            }
            s.read_many(&mut ranges).is_ok()
        };
        let before = if read_all {
            self.mode_now = self
                .l
                .plan_cache_mode
                .as_ref()
                .map(|_| i32::from_le_bytes(mode));
            let before = bufs.pop().expect("one more than pending");
            self.flush_fast_read(s, Some(bufs))?;
            self.mode_now = None;
            before
        } else {
            // some address no longer readable: one by one
            self.flush_fast(s)?;
            read(s, plansource, self.l.cps.size)?
        };
        // an earlier execution of it that never moved the counters was left
        // by an ERROR: forget it, or both would be reported now
        self.pending.retain(|p| p.plansource != plansource);
        if self.l.cps.int(&before, "magic") != Some(CACHEDPLANSOURCE_MAGIC) {
            return Ok(());
        }
        self.pending.push(Pending {
            plansource,
            bound_params: s.registers()?.rsi,
            ret: 0,
            ret_rsp: 0,
            before,
            mode: None,
            ts: None,
            text: None,
            start: None,
            named: true,
            next: None,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::inferior::Registers;
    use crate::postgres::backend::ProbeHandler;

    /// Stopped at GetCachedPlan's entry for plansource `ps` (stack `sp`).
    fn at_entry(s: &mut FakeBackend, ps: u64, sp: u64) {
        s.regs = Registers {
            rdi: ps,
            rsi: PARAMS,
            rsp: sp,
            ..Default::default()
        };
        s.map(sp, RET.to_le_bytes().to_vec());
    }

    /// Stopped at the return address, GetCachedPlan having returned `plan`.
    fn at_return(s: &mut FakeBackend, sp: u64, plan: u64) {
        s.regs = Registers {
            rax: plan,
            rsp: sp + 8,
            ..Default::default()
        };
    }

    #[test]
    fn stops_learn_the_choice_from_the_returned_plan() {
        let mut s = backend();
        let l = cps_layout(true);
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, false, false).unwrap();
        probe.points = vec![ENTRY];
        let mut st = Ps::new();
        for _ in 0..5 {
            st = st.custom(10.0);
        }
        s.map(P, st.bytes(&l));
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(s.armed.get(&RET), Some(&1));
        // GetCachedPlan built the generic plan and returned it
        s.map(P, st.generic(5.0).bytes(&l));
        at_return(&mut s, STACK, GPLAN);
        probe.on_stop(&mut s, RET).unwrap();
        assert!(s.armed.is_empty(), "return breakpoint left: {:?}", s.armed);
        assert_eq!(
            s.lines,
            vec!["s1 #6: GENERIC plan  generic 5 < avg custom 10"]
        );
        // a return whose plan is not gplan: a custom plan
        let st = st.generic(5.0);
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        s.map(P, st.custom(12.0).bytes(&l));
        at_return(&mut s, STACK, 0x6000);
        probe.on_stop(&mut s, RET).unwrap();
        // custom although the generic plan is cheaper: the cursor options
        assert_eq!(
            s.lines[1],
            "s1 #7: custom plan  cursor options (generic 5, avg custom 10)"
        );
        let ev = choices(&s);
        assert_eq!(ev[1]["reason"], "cursor_options");
        assert_eq!(ev[1]["custom_plan_cost"], 12.0);
        assert_eq!(ev[1]["plan_cache_mode"], "auto");
    }

    #[test]
    fn stops_drop_executions_left_by_an_error_and_skip_bad_magic() {
        let mut s = backend();
        let l = cps_layout(true);
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, false, false).unwrap();
        probe.points = vec![ENTRY];
        s.map(P, Ps::new().bytes(&l));
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        // a nested GetCachedPlan (deeper on the stack) keeps the outer one
        at_entry(&mut s, P, STACK - 0x200);
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(probe.pending.len(), 2);
        assert_eq!(s.armed.get(&RET), Some(&2));
        // both calls were left by an ERROR's longjmp: the next entry at the
        // outer depth finds their frames gone
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(probe.pending.len(), 1);
        assert_eq!(s.armed.get(&RET), Some(&1));
        // not a CachedPlanSource: said once, nothing armed
        s.map(
            P2,
            Ps {
                magic: 7,
                ..Ps::new()
            }
            .bytes(&l),
        );
        for _ in 0..2 {
            at_entry(&mut s, P2, STACK - 0x400);
            probe.on_stop(&mut s, ENTRY).unwrap();
        }
        assert_eq!(
            s.lines,
            vec![
                "plancache: GetCachedPlan's argument does not look like a CachedPlanSource (bad magic); skipped"
            ]
        );
        assert_eq!(probe.pending.len(), 1);
        assert_eq!(s.armed.get(&RET), Some(&1));
        assert_eq!(probe.decisions, 0);
    }

    #[test]
    fn without_num_generic_plans_executions_count_the_generic_plans_seen() {
        // PostgreSQL 13: no num_generic_plans, so no --fast
        let l = cps_layout(false);
        let e = PlanCacheProbe::new(layouts(l.clone()), None, true, false)
            .err()
            .expect("--fast refused");
        assert!(
            e.to_string()
                .contains("needs CachedPlanSource.num_generic_plans (PostgreSQL 14+)")
        );
        let mut s = backend();
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, false, false).unwrap();
        probe.points = vec![ENTRY];
        let mut st = Ps::new();
        for _ in 0..5 {
            st = st.custom(10.0);
        }
        st = st.generic(5.0);
        for _ in 0..2 {
            s.map(P, st.bytes(&l));
            at_entry(&mut s, P, STACK);
            probe.on_stop(&mut s, ENTRY).unwrap();
            at_return(&mut s, STACK, GPLAN);
            probe.on_stop(&mut s, RET).unwrap();
        }
        assert_eq!(
            s.lines,
            vec![
                "s1 #6: GENERIC plan  generic 5 < avg custom 10",
                "s1 #7: GENERIC plan  generic 5 < avg custom 10",
            ]
        );
        assert!(choices(&s)[0]["num_generic_plans"].is_null());
    }

    #[test]
    fn fast_stops_say_executions_whose_entry_they_did_not_see() {
        let mut s = backend();
        let l = cps_layout(true);
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, true, false).unwrap();
        probe.points = vec![ENTRY];
        let mut st = Ps::new();
        for _ in 0..2 {
            st = st.custom(5.0);
        }
        s.map(P, st.bytes(&l));
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        // #3 and #4 both chose before the next stop: #4's entry was passed
        // with no stop (an interrupt's stop on the int3, stepped over)
        s.map(P, st.custom(5.0).custom(5.0).bytes(&l));
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(
            s.lines,
            vec![
                "s1 #3: custom plan  fewer than 5 custom plans so far (2); generic not built yet",
                "plancache: 1 decision not seen (GetCachedPlan ran with no stop of pgdbg's)",
            ]
        );
        assert_eq!((probe.decisions, probe.lost), (1, 1));
    }

    #[test]
    fn fast_stops_settle_at_the_next_entry() {
        let mut s = backend();
        let l = cps_layout(true);
        let mut probe = PlanCacheProbe::new(layouts(l.clone()), None, true, false).unwrap();
        probe.points = vec![ENTRY];
        let st = Ps::new();
        s.map(P, st.bytes(&l));
        at_entry(&mut s, P, STACK);
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert!(s.armed.is_empty(), "--fast arms no return breakpoint");
        // it chose a custom plan; plan_cache_mode was set meanwhile, read
        // with the plansources at the next entry
        let st = st.custom(3.0);
        s.map(P, st.bytes(&l));
        s.map(MODE, 2i32.to_le_bytes().to_vec());
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(
            s.lines,
            vec![
                "s1 #1: custom plan  plan_cache_mode = force_custom_plan (generic not built yet, avg custom none yet)"
            ]
        );
        // that execution raised an ERROR before choosing: the next entry of
        // the same plansource replaces it, nothing reported
        probe.on_stop(&mut s, ENTRY).unwrap();
        assert_eq!(s.lines.len(), 1);
        assert_eq!(probe.pending.len(), 1);
        s.map(P, st.custom(4.0).bytes(&l));
        probe.flush_fast(&mut s).unwrap();
        assert_eq!(s.lines.len(), 2);
        assert!(
            s.lines[1].starts_with("s1 #2: custom plan"),
            "{:?}",
            s.lines
        );
        assert_eq!(choices(&s)[1]["custom_plan_cost"], 4.0);
        assert_eq!(probe.decisions, 2);
    }
}
