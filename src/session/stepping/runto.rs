//! `finish` and `advance`/`until LOCATION`: runs to temporary
//! breakpoints (`run_to`), and the value a function returned.

use super::*;

impl Session {
    /// `finish`: run until the selected frame returns; its caller's
    /// place and the value returned.
    pub fn finish(&mut self) -> Result<Outcome> {
        self.check_can_step("finish")?;
        let frames = self.frames()?.clone();
        let sel = self.selected();
        let f = frames
            .get(sel)
            .cloned()
            .ok_or_else(|| anyhow!("no frame selected"))?;
        if f.inlined {
            let into = frames
                .iter()
                .skip(sel + 1)
                .find(|c| !c.inlined || c.phys != f.phys)
                .and_then(|c| c.function.clone())
                .unwrap_or_else(|| "its caller".into());
            bail!(
                "'finish' out of an inlined frame ({} inlined into {into}) is not supported yet: \
                 use 'next' or 'until', or 'up' to {into} and 'finish' out of that",
                f.function.as_deref().unwrap_or("??")
            );
        }
        let Some(caller) = frames.iter().find(|c| c.phys == f.phys + 1) else {
            bail!("\"finish\" not meaningful in the outermost frame.");
        };
        let ret = caller.pc;
        let Some(cfa) = f.cfa else {
            bail!(
                "cannot finish frame #{sel}: its call frame address is not known (no CFI at {:#x})",
                f.pc
            );
        };
        let head = format!("Run till exit from #{sel}  {}", self.frame_line(sel, true)?);
        let ret_ty = if f.lib.is_none() {
            f.die.and_then(|d| self.di.die_type(d))
        } else {
            None
        };
        let goal = Goal {
            addr: ret,
            min_sp: Some(cfa),
        };
        // said before the backend runs (it may run long), as gdb does
        self.say(&head);
        match self.run_to(&[goal], Some(cfa))? {
            Arrival::Other(done) => Ok(done),
            Arrival::Longjmp(note) => {
                let at = self.step_stop_text(true, false)?;
                Ok(Outcome::shows(format!("{note}\n{at}")))
            }
            Arrival::At => {
                let at = self.step_stop_text(true, false)?;
                let value = match ret_ty {
                    Some(ty) => self.returned_value(ty)?,
                    None => String::new(),
                };
                Ok(Outcome::shows(format!("{at}{value}")))
            }
        }
    }

    /// "\nValue returned is $N = ..." from rax (rdx), xmm0 or the memory
    /// rax points to, by the DWARF return type (the amd64 ABI).
    fn returned_value(&mut self, ty: crate::debuginfo::types::TypeRef) -> Result<String> {
        use crate::debuginfo::types::{Encoding, Type, strip};
        let regs = self.target.regs()?;
        let stripped = strip(&*self.di, &ty);
        let size = size_of(&*self.di, &ty) as usize;
        let loc = match &*stripped {
            Type::Base {
                enc: Encoding::Float,
                ..
            } => {
                let fp = self.target.fpregs()?;
                let lo = fp.xmm_space[0] as u64 | ((fp.xmm_space[1] as u64) << 32);
                ValLoc::Bytes(lo.to_le_bytes()[..size.clamp(1, 8)].to_vec())
            }
            Type::Struct { .. } if size > 16 => ValLoc::Memory(regs.rax),
            Type::Struct { .. } if size > 8 => {
                if self.has_float_member(&stripped) {
                    return Ok(
                        "\nValue returned: a struct in SSE registers, not shown by pgdbg".into(),
                    );
                }
                let mut b = regs.rax.to_le_bytes().to_vec();
                b.extend_from_slice(&regs.rdx.to_le_bytes());
                b.truncate(size);
                ValLoc::Bytes(b)
            }
            _ if size == 0 => return Ok(String::new()),
            _ => ValLoc::Bytes(regs.rax.to_le_bytes()[..size.clamp(1, 8)].to_vec()),
        };
        let v = Value { ty, loc };
        let (n, text, _) = crate::postgres::Backend::keep_value(self, v);
        Ok(format!("\nValue returned is ${n} = {text}"))
    }

    fn has_float_member(&self, t: &crate::debuginfo::types::Type) -> bool {
        use crate::debuginfo::types::{Encoding, Type, strip};
        match t {
            Type::Struct { members, .. } => members.iter().any(|m| {
                let s = strip(&*self.di, &m.ty);
                matches!(
                    &*s,
                    Type::Base {
                        enc: Encoding::Float,
                        ..
                    }
                ) || self.has_float_member(&s)
            }),
            _ => false,
        }
    }

    /// `advance LOCATION` (`until LOCATION` with `until`: only in this
    /// frame or an outer one): run until LOCATION or until the current
    /// frame returns.
    pub fn advance(&mut self, spec: &str, until: bool) -> Result<Outcome> {
        self.check_can_step(if until { "until" } else { "advance" })?;
        let locs = locations::resolve(&self.di, self.bias, spec, true)?;
        let regs = self.target.regs()?;
        let frames = self.frames()?.clone();
        let sel = self.selected();
        let min_sp = until.then_some(regs.rsp);
        let mut goals: Vec<Goal> = locs
            .iter()
            .map(|l| Goal {
                addr: l.addr,
                min_sp,
            })
            .collect();
        let f = frames.get(sel).cloned();
        let cfa = f.as_ref().and_then(|f| f.cfa);
        if let (Some(f), Some(cfa)) = (&f, cfa)
            && let Some(caller) = frames.iter().find(|c| c.phys == f.phys + 1)
        {
            goals.push(Goal {
                addr: caller.pc,
                min_sp: Some(cfa),
            });
        }
        let start = self.function_key()?;
        match self.run_to(&goals, cfa)? {
            Arrival::Other(done) => Ok(done),
            Arrival::Longjmp(note) => {
                let at = self.step_stop_text(true, false)?;
                Ok(Outcome::shows(format!("{note}\n{at}")))
            }
            Arrival::At => {
                let pc = self.target.regs()?.rip;
                let changed = self.function_key()? != start;
                let line_start = self
                    .line_sequence_at(pc)
                    .is_some_and(|(seq, bias)| seq.stmt_start(pc - bias).is_some());
                Ok(Outcome::shows(self.step_stop_text(changed, line_start)?))
            }
        }
    }
}
