//! `disassemble`: a function's code or an address range as gdb dumps it.
//! The code is read with process_vm_readv (the backend runs on at the
//! prompt), as the program has it: pgdbg's own int3s and the recorder's
//! jump show the bytes they replaced (`Target::read_code`).
use super::*;
use crate::expr::disasm::{self, Insn};

/// More than this many bytes in one dump is refused (a typo in a range).
const MAX_BYTES: u64 = 1 << 20;

impl Session {
    /// `disassemble [/r] [/s] [LOCATION | START,END | START,+LEN]`.
    pub fn disassemble(&mut self, raw: bool, source: bool, spec: Option<&str>) -> Result<String> {
        let pc = self.current_pc();
        let Some(spec) = spec else {
            let pc = pc.ok_or_else(|| {
                anyhow!("no frame selected: give a function or an address, e.g. disassemble GetCachedPlan")
            })?;
            return self.dump_function(pc, pc, raw, source);
        };
        let Some((a, b, is_len)) = disasm::split_range(spec) else {
            let addr = self.address_of(spec)?;
            return self.dump_function(addr, pc.unwrap_or(0), raw, source);
        };
        let start = self.address_of(a)?;
        let end = match (is_len, self.address_of(b)?) {
            (true, len) => start.wrapping_add(len),
            (false, e) => e,
        };
        if end <= start {
            bail!("the range {start:#x},{end:#x} is empty: END must be above START");
        }
        if end - start > MAX_BYTES {
            bail!(
                "the range {start:#x},{end:#x} is {} bytes: give at most {MAX_BYTES}",
                end - start
            );
        }
        let mut out = vec![format!(
            "Dump of assembler code from {start:#x} to {end:#x}:"
        )];
        let label = |s: &Session, a: u64| {
            s.gdb_symbolic(a, false)
                .map(|(n, o)| disasm::range_label(&n, o))
        };
        self.dump_range(&mut out, (start, end), pc.unwrap_or(0), raw, source, &label)?;
        out.push("End of assembler dump.".into());
        Ok(out.join("\n"))
    }

    /// The pc of the selected frame when the backend is stopped (gdb's
    /// `=> ` marks it); None while it runs in the background.
    fn current_pc(&mut self) -> Option<u64> {
        if self.background || self.target.is_gone() {
            return None;
        }
        let sel = self.selected();
        self.frames().ok()?.get(sel).map(|f| f.pc)
    }

    /// `x/Ni ADDR`: `count` instructions from `addr`, gdb's way (`=> ` at
    /// the selected frame's pc, `<name+off>`, the address unpadded); the
    /// text and the address after the last one.
    pub(super) fn examine_instructions(
        &mut self,
        addr: u64,
        count: usize,
    ) -> Result<(String, u64)> {
        let pc = self.current_pc();
        // at most 15 bytes an instruction; fewer where the mapping ends
        let mut code = vec![0u8; count.saturating_mul(15).min(1 << 20)];
        while self.target.read_code(addr, &mut code).is_err() {
            if code.len() <= 16 {
                code.truncate(1);
                self.target
                    .read_code(addr, &mut code)
                    .map_err(|_| anyhow!("Cannot access memory at address {addr:#x}"))?;
                break;
            }
            code.truncate(code.len() / 2);
        }
        let sym = |a: u64| self.gdb_symbolic(a, false);
        let insns = disasm::decode(addr, &code, &sym);
        let mut lines = Vec::new();
        let mut next = addr;
        for i in insns.iter().take(count) {
            let label = match self.gdb_symbolic(i.addr, false) {
                Some((n, o)) => format!(" <{}>", disasm::symbolic_text(&n, o)),
                None => String::new(),
            };
            let mark = if Some(i.addr) == pc { "=> " } else { "   " };
            lines.push(format!("{mark}{:#x}{label}:\t{}", i.addr, i.text));
            next = i.addr + i.bytes.len() as u64;
        }
        Ok((lines.join("\n"), next))
    }

    /// The debug info of the code at runtime `addr` and its load bias.
    fn code_di(&self, addr: u64) -> (Rc<DebugInfo>, u64) {
        if !self.in_main(addr)
            && let Some((_, di, bias)) = self.library_at(addr)
        {
            return (di, bias);
        }
        (self.di.clone(), self.bias)
    }

    /// gdb's `<symbol+offset>` of a runtime address (`DebugInfo::symbolic`).
    fn gdb_symbolic(&self, addr: u64, prefer_function: bool) -> Option<(String, i64)> {
        let (di, bias) = self.code_di(addr);
        di.symbolic(addr.wrapping_sub(bias), prefer_function)
    }

    /// The function around `addr`, each of its ranges (gcc's cold part
    /// too) under gdb's `Address range A to B:` when it has several.
    fn dump_function(&mut self, addr: u64, pc: u64, raw: bool, source: bool) -> Result<String> {
        let (di, bias) = self.code_di(addr);
        let Some((name, ranges)) = di.function_ranges_at(addr.wrapping_sub(bias)) else {
            bail!(
                "No function contains specified address ({addr:#x}): give a range, e.g. disassemble {addr:#x},+32"
            );
        };
        let mut out = vec![format!("Dump of assembler code for function {name}:")];
        let label = |s: &Session, a: u64| {
            s.gdb_symbolic(a, true)
                .map(|(_, o)| disasm::offset_label(o))
        };
        for &(s, e) in &ranges {
            let (s, e) = (s + bias, e + bias);
            if ranges.len() > 1 {
                out.push(format!("Address range {s:#x} to {e:#x}:"));
            }
            self.dump_range(&mut out, (s, e), pc, raw, source, &label)?;
        }
        out.push("End of assembler dump.".into());
        Ok(out.join("\n"))
    }

    /// The instructions of one range, a line each (`/s`: under their
    /// source lines).
    fn dump_range(
        &self,
        out: &mut Vec<String>,
        (start, end): (u64, u64),
        pc: u64,
        raw: bool,
        source: bool,
        label: &dyn Fn(&Session, u64) -> Option<String>,
    ) -> Result<()> {
        // an instruction that starts before `end` is shown whole, as gdb
        // does: up to 15 bytes more are read when they are there
        let len = (end - start) as usize;
        let mut code = vec![0u8; len + 15];
        if self.target.read_code(start, &mut code).is_err() {
            code.truncate(len);
            self.target
                .read_code(start, &mut code)
                .map_err(|_| anyhow!("Cannot access memory at address {start:#x}"))?;
        }
        let sym = |a: u64| self.gdb_symbolic(a, false);
        let mut insns = disasm::decode(start, &code, &sym);
        insns.retain(|i| i.addr < end);
        let mut src = source.then(|| {
            let addrs: Vec<u64> = insns.iter().map(|i| i.addr).collect();
            super::listing::SourceLines::new(self.code_di(start), &addrs)
        });
        for i in &insns {
            if let Some(s) = src.as_mut() {
                s.before(out, i.addr);
            }
            out.push(line(i, pc, raw, label(self, i.addr)));
        }
        Ok(())
    }
}

fn line(i: &Insn, pc: u64, raw: bool, label: Option<String>) -> String {
    disasm::line(i, i.addr == pc, label.as_deref(), raw)
}
