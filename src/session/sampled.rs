//! Arguments from sampled registers (`trace --perf`): which register holds
//! each argument where the backend enters a function, by the function's
//! DWARF at that address, decided once before any call is sampled; the
//! values of each call are then the register contents the kernel
//! recorded, shown exactly as `print` shows them.
use super::*;
use crate::debuginfo::types::{Encoding, Type, strip, type_name};

impl Session {
    /// For each ARGEXPR, the DWARF register that holds it at `addr` (a
    /// location of `function`) and its type; Err: why one cannot be read
    /// from the registers alone (it is an expression, a struct, or its
    /// location there is memory).
    pub(crate) fn register_args(
        &mut self,
        function: &str,
        addr: u64,
        args: &[String],
    ) -> Result<Vec<(u16, TypeRef)>> {
        if !self.in_main(addr) {
            bail!(
                "{function} is in a shared library (only the postgres binary's arguments are mapped to registers)"
            );
        }
        let link = addr - self.bias;
        let source = self.di.frames_at(link);
        let sf = source
            .iter()
            .find(|f| f.function.as_deref() == Some(function))
            .or(source.first())
            .ok_or_else(|| anyhow!("{function} has no debug info at {addr:#x}"))?;
        let frame = Frame {
            level: 0,
            pc: addr,
            lookup: addr,
            regs: FrameRegs::default(),
            cfa: None,
            phys: 0,
            function: sf.function.clone(),
            file: None,
            line: None,
            die: sf.die,
            inlined: sf.inlined,
            phys_die: source.last().and_then(|f| f.die),
            module: None,
            lib: None,
            symbol: None,
        };
        let vars = self.frame_vars(&frame);
        let mut out = Vec::new();
        for a in args {
            let name = a.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                bail!(
                    "'{a}' is an expression, not an argument's name",
                    a = crate::shown::shown(a)
                );
            }
            let v = vars
                .iter()
                .find(|v| v.is_param && v.name == name)
                .ok_or_else(|| {
                    anyhow!(
                        "'{a}' is not an argument of {function}",
                        a = crate::shown::shown(a)
                    )
                })?;
            let ty = v.ty.clone().ok_or_else(|| {
                anyhow!(
                    "'{a}' has no type in the debug info",
                    a = crate::shown::shown(a)
                )
            })?;
            let scalar = match &*strip(self, &ty) {
                Type::Base { size, .. } | Type::Enum { size, .. } => *size <= 8,
                Type::Pointer { target } => {
                    // print shows the text a char * points to: memory
                    if let Some(t) = target
                        && matches!(
                            &*strip(self, t),
                            Type::Base {
                                enc: Encoding::SignedChar | Encoding::UnsignedChar,
                                ..
                            }
                        )
                    {
                        bail!(
                            "'{a}' is a string: its text is in memory, not in a register",
                            a = crate::shown::shown(a)
                        );
                    }
                    true
                }
                _ => false,
            };
            if !scalar {
                bail!(
                    "'{a}' is a {}: not a value a register holds",
                    type_name(self, &ty)
                );
            }
            let reg = self.single_register(v, link).ok_or_else(|| {
                anyhow!("'{a}' is not in a register where {function} is entered (its DWARF location there is memory or missing)")
            })?;
            out.push((reg, ty));
        }
        Ok(out)
    }

    /// The register a variable's location at link-time `pc` is, if it is
    /// exactly one register.
    fn single_register(&self, v: &VarInfo, pc: u64) -> Option<u16> {
        let expr = self.di.var_expression(v, pc).ok()??;
        let unit = self.di.unit_for_offset(v.unit).ok()?;
        let mut ops = expr.operations(unit.encoding());
        let first = ops.next().ok()??;
        if ops.next().ok()?.is_some() {
            return None;
        }
        match first {
            gimli::Operation::Register { register } if register.0 < 16 => Some(register.0),
            _ => None,
        }
    }

    /// A value's text as `print` shows it, and its JSON.
    pub(crate) fn show(&self, v: &Value) -> (String, serde_json::Value) {
        (format_value(self, v, Radix::Natural), to_json(self, v))
    }
}
