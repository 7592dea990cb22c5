//! `x`, `ptype`, `whatis`, `info symbol`, `info line`: memory and debug
//! info read, nothing written, the backend never resumed or stopped here
//! (a local or a register in an expression: the stop the prompt took).
use super::*;
use crate::debuginfo::types::{Type, strip};
use crate::expr::{ctype, examine};

impl Session {
    /// `x/NFU [EXPR]`: what is not given comes from the last `x`.
    pub fn examine(
        &mut self,
        count: Option<usize>,
        format: Option<char>,
        unit: Option<char>,
        expr: Option<&str>,
    ) -> Result<String> {
        let last = self.examine_last.clone();
        let format = format.unwrap_or(last.format);
        let unit = unit.unwrap_or_else(|| examine::default_unit(format, last.unit));
        let count = count.unwrap_or(if expr.is_some() { 1 } else { last.count });
        let addr = match expr {
            Some(e) => self.address_of(e)?,
            None => last.next.ok_or_else(|| {
                anyhow!("x needs an address the first time, e.g. x/4xb &MyProcPid")
            })?,
        };
        let (text, next) = if format == 'i' {
            self.examine_instructions(addr, count)?
        } else {
            examine::examine(self, addr, count, format, unit)?
        };
        self.examine_last = examine::Last {
            format,
            unit,
            count,
            next: Some(next),
        };
        Ok(text)
    }

    /// The address an expression gives, as `x` and `info symbol` take it:
    /// a pointer's or an integer's value, where an array, a function or a
    /// struct lies.
    pub(super) fn address_of(&mut self, expr: &str) -> Result<u64> {
        let v = self.eval_expr(expr)?;
        let t = strip(self, &v.ty);
        match (&*t, &v.loc) {
            (Type::Pointer { .. } | Type::Base { .. } | Type::Enum { .. }, _) => {
                Ok(scalar(self, &v)?.as_i64() as u64)
            }
            (
                Type::Array { .. } | Type::Function { .. } | Type::Struct { .. },
                ValLoc::Memory(a),
            ) => Ok(*a),
            _ => bail!(
                "'{}' is not an address: give a pointer, an integer or an object in memory",
                crate::command::check::short(expr)
            ),
        }
    }

    /// The type `ptype`/`whatis` describe: a type name's, else the
    /// expression's (true: it was a type name).
    fn type_of(&mut self, text: &str) -> Result<(TypeRef, bool)> {
        if let Some((base, stars)) = crate::command::type_words(text)
            && let Some(mut t) = self.type_named(base)
        {
            for _ in 0..stars {
                t = crate::debuginfo::types::Type::pointer_to(Some(t));
            }
            return Ok((t, stars == 0));
        }
        Ok((self.eval_expr(text)?.ty, false))
    }

    pub fn ptype(&mut self, text: &str) -> Result<String> {
        let (t, _) = self.type_of(text)?;
        Ok(format!("type = {}", ctype::ptype(self, &t)))
    }

    pub fn whatis(&mut self, text: &str) -> Result<String> {
        let (t, is_name) = self.type_of(text)?;
        Ok(format!("type = {}", ctype::whatis(self, &t, is_name)))
    }

    /// `info symbol ADDR`: `heap_insert + 16 in section .text`, with `of
    /// LIBRARY` in a shared library.
    pub fn info_symbol(&mut self, expr: &str) -> Result<String> {
        let addr = self.address_of(expr)?;
        let link = addr.wrapping_sub(self.bias);
        let named = |name: &str, off: u64| {
            if off == 0 {
                name.to_string()
            } else {
                format!("{name} + {off}")
            }
        };
        if self.in_main(addr) || self.module_for(addr).is_none() {
            if let Some((s, off)) = self.di.symbol_at(link) {
                let section =
                    crate::debuginfo::unwind::section_named(&self.di.binary.sections(), link)
                        .unwrap_or_else(|| "?".into());
                return Ok(format!("{} in section {section}", named(&s.name, off)));
            }
        } else if let Some(m) = self.module_for(addr)
            && let Some((s, off)) = m.symbol(addr)
        {
            let section = m.section_at(addr).unwrap_or_else(|| "?".into());
            return Ok(format!(
                "{} in section {section} of {}",
                named(&s, off),
                m.path.display()
            ));
        }
        Ok(format!(
            "No symbol matches {}.",
            crate::command::check::short(expr)
        ))
    }

    /// `info line FUNCTION|FILE:LINE`, from the binary's line table.
    pub fn info_line(&self, spec: &str) -> Result<String> {
        let locs = resolve(&self.di, self.bias, spec, true)?;
        let want = spec
            .rsplit_once(':')
            .and_then(|(_, l)| l.parse::<u32>().ok());
        let Some(loc) = locs.iter().min_by_key(|l| (l.inlined, l.addr)) else {
            bail!("no code for {}", crate::command::check::short(spec));
        };
        let link = loc.addr.wrapping_sub(self.bias);
        // the line found; the file's full name from the line table, as gdb
        let full = self.di.location_at(link);
        let (file, line) = loc
            .file_line
            .clone()
            .map(|(f, l)| match &full {
                Some((ff, _)) if ff.ends_with(&f) => (ff.clone(), l),
                _ => (f, l),
            })
            .or(full.clone())
            .ok_or_else(|| {
                anyhow!(
                    "no line information for {}",
                    crate::command::check::short(spec)
                )
            })?;
        let at = |a: u64| match self.symbol_for(a) {
            Some(s) => format!("{a:#x} <{s}>"),
            None => format!("{a:#x}"),
        };
        if let Some(w) = want
            && w != line
        {
            return Ok(format!(
                "Line {w} of \"{file}\" is at address {} but contains no code.",
                at(loc.addr)
            ));
        }
        match self.di.line_range_at(link) {
            Some((start, end)) => Ok(format!(
                "Line {line} of \"{file}\" starts at address {} and ends at {}.",
                at(start + self.bias),
                at(end + self.bias)
            )),
            None => Ok(format!(
                "Line {line} of \"{file}\" is at address {}.",
                at(loc.addr)
            )),
        }
    }
}
