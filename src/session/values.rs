//! Values: expressions evaluated at the stop (`print`, `printf`, `info
//! locals/args/registers/address`) and the session as an expression
//! environment.
use super::*;

impl Session {
    /// Evaluate an expression in the selected frame of the current stop.
    pub fn eval_expr(&mut self, expr: &str) -> Result<Value> {
        let di = self.di.clone();
        let e = match parse::parse_in(expr, &di) {
            Ok(e) => e,
            // a cast to a type of a library's debug info
            Err(err) => {
                parse::parse_with(expr, &|t| self.type_named(t).is_some()).map_err(|_| err)?
            }
        };
        if self.target.is_gone() {
            return Err(crate::inferior::Gone::Backend.into());
        }
        // a backend running in the background has no frames: names are
        // globals (a local needs the stop `execute_at_prompt` then takes)
        if !self.background {
            let _ = self.frames()?;
        }
        eval(self, &e)
    }

    /// `printf "FORMAT", EXPR...`
    pub fn printf(&mut self, format: &str, args: &[String]) -> Result<String> {
        let mut values = Vec::new();
        for a in args {
            values.push(self.eval_expr(a)?);
        }
        let text = crate::expr::printf::printf(self, format, &values)?;
        self.emit(Event::Printf { text: text.clone() });
        // output is line based: the format's own final newline ends the
        // line; the leading newline (which every caller strips) keeps a
        // text that is only "\n", or starts with one, from being lost
        if text.is_empty() {
            return Ok(text);
        }
        Ok(format!("\n{}", text.strip_suffix('\n').unwrap_or(&text)))
    }

    pub fn print(&mut self, expr: &str, radix: Radix) -> Result<String> {
        let (datum_expr, sql) = crate::postgres::datum::split_cast(expr)?;
        let v = self.eval_expr(datum_expr)?;
        let text = match sql {
            Some(ty) => {
                if radix != Radix::Natural {
                    bail!("print: a format (/x ...) and '::TYPE' do not go together");
                }
                self.datum_text(&v, ty)?
            }
            None => self.print_text(&v, radix),
        };
        // a Datum shown as SQL's TYPE: the capture has that text
        let json = match sql {
            Some(_) => serde_json::Value::String(text.clone()),
            None => to_json(self, &v),
        };
        self.history.borrow_mut().push(v);
        let n = self.history.borrow().len();
        self.emit(Event::Print {
            expr: expr.to_string(),
            text: text.clone(),
            value: json,
        });
        Ok(format!("${n} = {text}"))
    }

    /// A value as `print` shows it: gdb's text, with PostgreSQL's
    /// knowledge added: a pointer to a node followed by its tag, a `text *`
    /// (any varlena) by its characters, a NameData as its string.
    fn print_text(&self, v: &Value, radix: Radix) -> String {
        use crate::debuginfo::types::{Type, strip};
        let mut text = format_value(self, v, radix);
        if radix != Radix::Natural {
            return text;
        }
        let t = strip(self, &v.ty);
        let struct_name = |t: &Type| match t {
            Type::Struct {
                name: Some(n),
                declaration: false,
                ..
            } => Some(n.clone()),
            _ => None,
        };
        let read = |a: u64, b: &mut [u8]| self.read_mem(a, b);
        match &*t {
            Type::Struct { .. } if struct_name(&t).as_deref() == Some("nameData") => {
                if let Ok(b) = crate::expr::eval::bytes_of(self, v) {
                    let s = b.split(|&c| c == 0).next().unwrap_or(&[]);
                    return crate::expr::format::quote(s);
                }
            }
            Type::Pointer {
                target: Some(target),
            } => {
                let p = crate::expr::eval::scalar(self, v).map(|s| s.as_i64() as u64);
                if let Ok(p) = p {
                    if p != 0 && struct_name(&strip(self, target)).as_deref() == Some("varlena") {
                        let note = crate::postgres::datum::varlena_note(
                            &read,
                            p,
                            crate::expr::format::PRINT_ELEMENTS,
                        );
                        text.push(' ');
                        text.push_str(&note);
                    } else if p != 0 {
                        let tag = crate::postgres::nodes::dynamic_tag(self, &v.ty, p);
                        if let Some(tag) = &tag {
                            // a pointer to a PostgreSQL node: its tag, the node's dynamic type
                            text.push_str(&format!(" [{tag}]"));
                        }
                        let relations = std::cell::OnceCell::new();
                        let oid_name = |oid: u32| {
                            relations
                                .get_or_init(|| {
                                    crate::postgres::relcache::relation_names(self)
                                        .unwrap_or_default()
                                })
                                .get(&oid)
                                .cloned()
                        };
                        if let Some(note) = crate::postgres::nodes::notes::contents(
                            self,
                            &read,
                            target,
                            p,
                            tag.as_deref(),
                            &oid_name,
                        ) {
                            text.push(' ');
                            text.push_str(&note);
                        }
                    }
                }
            }
            _ => {
                if let Some(name) = self.oid_relation(v) {
                    text.push_str(&format!(" (relation {name})"));
                }
            }
        }
        text
    }

    /// The relation the relcache holds for an `Oid` value, if it holds one.
    fn oid_relation(&self, v: &Value) -> Option<String> {
        use crate::debuginfo::types::Type;
        let mut t = self.resolve(&v.ty);
        while let Type::Qualified {
            target: Some(q), ..
        } = &*t
        {
            t = self.resolve(q);
        }
        if !matches!(&*t, Type::Typedef { name, .. } if name == "Oid") {
            return None;
        }
        let oid = crate::expr::eval::scalar(self, v).ok()?.as_i64() as u32;
        crate::postgres::relcache::relation_name(self, oid)
    }

    /// `print EXPR::TYPE`: the Datum EXPR is, as SQL shows a TYPE.
    pub(crate) fn datum_text(
        &self,
        v: &Value,
        ty: crate::postgres::datum::SqlType,
    ) -> Result<String> {
        use crate::debuginfo::types::{Type, strip, type_name};
        let t = strip(self, &v.ty);
        let datum = match (&*t, &v.loc) {
            // a struct or array in memory (a NameData, a varlena): its address
            (Type::Struct { .. } | Type::Array { .. }, crate::expr::eval::ValLoc::Memory(a)) => *a,
            _ => match crate::expr::eval::scalar(self, v)? {
                crate::expr::eval::Scalar::F(_) => bail!(
                    "'::' takes a Datum, not a floating-point {}",
                    type_name(self, &v.ty)
                ),
                s => s.as_i64() as u64,
            },
        };
        let read = |a: u64, b: &mut [u8]| self.read_mem(a, b);
        crate::postgres::datum::format_datum(self, &read, ty, datum)
    }

    pub fn info_vars(&mut self, params: bool) -> Result<String> {
        let _ = self.frames()?;
        let f = match self.selected_frame() {
            Some(f) => f.clone(),
            None => bail!("no frame selected"),
        };
        let vars = self.frame_vars(&f);
        let mut lines = Vec::new();
        for v in vars.iter().filter(|v| v.is_param == params) {
            let val = self.var_value(&f, v);
            lines.push(format!(
                "{} = {}",
                v.name,
                format_value(self, &val, Radix::Natural)
            ));
        }
        if lines.is_empty() {
            return Ok(if params {
                "No arguments.".into()
            } else {
                "No locals.".into()
            });
        }
        Ok(lines.join("\n"))
    }

    pub fn info_registers(&mut self) -> Result<String> {
        let _ = self.frames()?;
        let f = self
            .selected_frame()
            .cloned()
            .ok_or_else(|| anyhow!("no frame"))?;
        let names = [
            (0, "rax"),
            (3, "rbx"),
            (2, "rcx"),
            (1, "rdx"),
            (4, "rsi"),
            (5, "rdi"),
            (6, "rbp"),
            (7, "rsp"),
            (8, "r8"),
            (9, "r9"),
            (10, "r10"),
            (11, "r11"),
            (12, "r12"),
            (13, "r13"),
            (14, "r14"),
            (15, "r15"),
            (16, "rip"),
        ];
        let mut s = Vec::new();
        for (n, name) in names {
            match f.regs.get(n) {
                Some(v) => s.push(format!("{name:<8}{v:#018x}  {}", v as i64)),
                None => s.push(format!("{name:<8}<not saved>")),
            }
        }
        Ok(s.join("\n"))
    }

    pub fn info_address(&self, sym: &str) -> Result<String> {
        let locs = self.di.function_locations(sym);
        if !locs.is_empty() {
            let ool: Vec<String> = locs
                .iter()
                .filter(|l| !l.inlined)
                .map(|l| format!("{:#x}", l.addr + self.bias))
                .collect();
            let inl = locs.iter().filter(|l| l.inlined).count();
            return Ok(format!(
                "Symbol \"{sym}\" is a function at address{} {}{}.",
                if ool.len() > 1 { "es" } else { "" },
                if ool.is_empty() {
                    "(none out of line)".to_string()
                } else {
                    ool.join(", ")
                },
                if inl > 0 {
                    format!(
                        ", and is inlined at {inl} place{}",
                        if inl == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                }
            ));
        }
        if let Some((a, _)) = self.di.global(sym) {
            return Ok(format!(
                "Symbol \"{sym}\" is static storage at address {:#x}.",
                a + self.bias
            ));
        }
        bail!(
            "no symbol \"{sym}\" in {}",
            self.exe_path.display(),
            sym = crate::shown::shown(sym)
        )
    }
}

impl TypeSource for Session {
    fn resolve(&self, t: &TypeRef) -> Rc<crate::debuginfo::types::Type> {
        self.resolve_type(t)
    }
    fn type_by_name(&self, name: &str) -> Option<TypeRef> {
        self.type_named(name)
    }
}

impl EvalEnv for Session {
    fn variable(&self, name: &str) -> Result<Option<Value>> {
        if let Some(f) = self.selected_frame() {
            let vars = self.frame_vars(f);
            if let Some(v) = vars.iter().rev().find(|v| v.name == name) {
                return Ok(Some(self.var_value(f, v)));
            }
        }
        if let Some((addr, ty)) = self.library_global(name) {
            let Some(ty) = ty else {
                bail!(
                    "'{name}' has no type in the debug info; cast it: print *(int *) &{name}",
                    name = crate::shown::shown(name)
                )
            };
            return Ok(Some(Value {
                ty,
                loc: ValLoc::Memory(addr),
            }));
        }
        if let Some((addr, ty)) = self.di.global(name) {
            let ty = match ty {
                Some(t) => t,
                None => {
                    bail!(
                        "'{name}' has no type in the debug info; cast it: print *(int *) &{name}",
                        name = crate::shown::shown(name)
                    )
                }
            };
            return Ok(Some(Value {
                ty,
                loc: ValLoc::Memory(addr + self.bias),
            }));
        }
        Ok(None)
    }

    fn function_address(&self, name: &str) -> Option<u64> {
        self.di
            .function_locations(name)
            .iter()
            .find(|l| !l.inlined)
            .map(|l| l.addr + self.bias)
    }

    fn function_type(&self, name: &str) -> Option<TypeRef> {
        self.di
            .function_locations(name)
            .iter()
            .filter(|l| l.die != 0)
            .find_map(|l| self.di.function_type(l.die))
    }

    fn register(&self, name: &str) -> Option<u64> {
        let f = self.selected_frame()?;
        let n = match name {
            "rip" | "pc" => 16,
            "rsp" | "sp" => 7,
            "rbp" | "fp" => 6,
            "rax" => 0,
            "rdx" => 1,
            "rcx" => 2,
            "rbx" => 3,
            "rsi" => 4,
            "rdi" => 5,
            "r8" => 8,
            "r9" => 9,
            "r10" => 10,
            "r11" => 11,
            "r12" => 12,
            "r13" => 13,
            "r14" => 14,
            "r15" => 15,
            _ => return None,
        };
        if n == 16 {
            return Some(f.pc);
        }
        f.regs.get(n)
    }

    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.target.read(addr, buf)
    }

    fn history(&self, n: Option<usize>) -> Option<Value> {
        let h = self.history.borrow();
        match n {
            None => h.last().cloned(),
            Some(0) => None,
            Some(i) => h.get(i - 1).cloned(),
        }
    }

    fn data_symbol_for(&self, addr: u64) -> Option<String> {
        self.di.data_symbol_at(addr.wrapping_sub(self.bias))
    }

    fn enumerator(&self, name: &str) -> Option<(TypeRef, i64)> {
        self.di.enumerator(name)
    }

    fn symbol_for(&self, addr: u64) -> Option<String> {
        if let Some((s, off)) = self.di.symbol_at(addr.wrapping_sub(self.bias)) {
            return Some(if off == 0 {
                s.name.clone()
            } else {
                format!("{}+{off}", s.name)
            });
        }
        self.module_for(addr)
            .and_then(|m| m.symbol(addr))
            .map(|(s, off)| if off == 0 { s } else { format!("{s}+{off}") })
    }
}
