//! EXPLAIN of the query a backend is executing, computed inside the backend
//! by its own `ExplainPrintPlan` (the printplan.gdb recipe, made safe):
//! `NewExplainState`, set format/verbose/costs, `ExplainBeginOutput`,
//! `ExplainPrintPlan(es, queryDesc)`, `ExplainEndOutput`, read
//! `es->str->data`; all in a private memory context deleted afterwards.

use super::backend::Backend;
use super::call::{BackendCalls, Called};
use crate::debuginfo::types::{Type, strip};
use crate::infcall::Arg;
use anyhow::{Result, anyhow, bail};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ExplainOpts {
    pub format: String,
    pub verbose: bool,
    pub costs: bool,
}

impl Default for ExplainOpts {
    fn default() -> Self {
        ExplainOpts {
            format: "text".into(),
            verbose: false,
            costs: true,
        }
    }
}

/// The QueryDesc of the portal the backend is running, if any:
/// (ActivePortal, queryDesc).
pub fn active_query_desc(s: &dyn Backend) -> Result<Option<(u64, u64)>> {
    let ap = s
        .global_addr("ActivePortal")
        .ok_or_else(|| anyhow!("ActivePortal is not in the debug info"))?;
    let portal = s.read_u64(ap)?;
    if portal == 0 {
        return Ok(None);
    }
    let l = s.layout("PortalData")?;
    let qd = s.read_u64(portal + l.offset("queryDesc")?)?;
    if qd == 0 {
        Ok(None)
    } else {
        Ok(Some((portal, qd)))
    }
}

/// queryDesc->sourceText
pub fn source_text(s: &dyn Backend, qd: u64) -> String {
    let Ok(l) = s.layout("QueryDesc") else {
        return String::new();
    };
    let Ok(off) = l.offset("sourceText") else {
        return String::new();
    };
    let Ok(p) = s.read_u64(qd + off) else {
        return String::new();
    };
    if p == 0 {
        return String::new();
    }
    let mut out = Vec::new();
    let mut a = p;
    while out.len() < 4096 {
        let mut b = [0u8; 64];
        if s.read(a, &mut b).is_err() {
            break;
        }
        if let Some(i) = b.iter().position(|&c| c == 0) {
            out.extend_from_slice(&b[..i]);
            break;
        }
        out.extend_from_slice(&b);
        a += 64;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Unwrap a guarded call's value, or name the function that raised an ERROR.
pub fn value(c: Called, what: &str) -> Result<u64> {
    match c {
        Called::Value(r) => Ok(r.rax),
        Called::Error(e) => Err(anyhow!("{what} raised an ERROR inside the backend: {e}")),
    }
}

/// The EXPLAIN call series, resolved before a call series opens (the
/// layouts and function addresses need the backend, which the series then
/// borrows): `NewExplainState`, the format and flags written into the
/// ExplainState, `ExplainBeginOutput`, the "Query" group (not in text),
/// `ExplainPrintPlan(es, queryDesc)`, what the caller adds, the group's
/// end, `ExplainEndOutput`, and `es->str` read back.
pub struct PlanPrinter {
    fmt_off: u64,
    fmt_bytes: Vec<u8>,
    text_format: bool,
    bools: Vec<(u64, bool)>,
    new_es: u64,
    begin: u64,
    print: u64,
    end: u64,
    open_group: Option<u64>,
    close_group: Option<u64>,
    str_off: u64,
    data_off: u64,
    len_off: u64,
}

impl PlanPrinter {
    /// `flags`: (ExplainState field, value, required); a field the build
    /// does not have is skipped unless required.
    pub fn new(s: &dyn Backend, format: &str, flags: &[(&str, bool, bool)]) -> Result<PlanPrinter> {
        let es_l = s.layout("ExplainState")?;
        let si_l = s.layout("StringInfoData")?;
        let fmt_field = es_l.field("format")?.clone();
        let fmt_value = match &*strip(s.di(), &fmt_field.ty) {
            Type::Enum { values, .. } => {
                let want = format!("EXPLAIN_FORMAT_{}", format.to_uppercase());
                values
                    .iter()
                    .find(|(n, _)| *n == want)
                    .map(|(_, v)| *v)
                    .ok_or_else(|| {
                        anyhow!(
                            "unknown format '{format}': use text, json, yaml or xml",
                            format = crate::shown::shown(format)
                        )
                    })?
            }
            _ => bail!("ExplainState.format is not an enum in this build"),
        };
        let fsize = fmt_field.size.clamp(1, 8) as usize;
        let mut bools = Vec::new();
        for &(name, v, required) in flags {
            match es_l.field(name) {
                Ok(fl) => bools.push((fl.offset, v)),
                Err(e) if required => return Err(e),
                Err(_) => {}
            }
        }
        let f = |name: &str| super::call::function_address(s, name);
        Ok(PlanPrinter {
            fmt_off: fmt_field.offset,
            fmt_bytes: fmt_value.to_le_bytes()[..fsize].to_vec(),
            text_format: format == "text",
            bools,
            new_es: f("NewExplainState")?,
            begin: f("ExplainBeginOutput")?,
            print: f("ExplainPrintPlan")?,
            end: f("ExplainEndOutput")?,
            open_group: f("ExplainOpenGroup").ok(),
            close_group: f("ExplainCloseGroup").ok(),
            str_off: es_l.offset("str")?,
            data_off: si_l.offset("data")?,
            len_off: si_l.offset("len")?,
        })
    }

    /// Run the series on `calls` for `query_desc`; `more(calls, es)` adds
    /// its output after the plan, inside the "Query" group.
    pub fn print(
        &self,
        calls: &mut BackendCalls,
        query_desc: u64,
        more: impl FnOnce(&mut BackendCalls, u64) -> Result<()>,
    ) -> Result<String> {
        let es = value(calls.call_addr(self.new_es, &[])?, "NewExplainState")?;
        if es == 0 {
            bail!("NewExplainState returned NULL");
        }
        calls.write(es + self.fmt_off, &self.fmt_bytes)?;
        for &(off, v) in &self.bools {
            calls.write(es + off, &[v as u8])?;
        }
        value(
            calls.call_addr(self.begin, &[Arg::Int(es)])?,
            "ExplainBeginOutput",
        )?;
        // EXPLAIN wraps the plan in a "Query" group (the `{ }` of JSON).
        let query = calls.push_cstr("Query")?;
        let group = [Arg::Int(query), Arg::Int(0), Arg::Int(1), Arg::Int(es)];
        if let (Some(open), false) = (self.open_group, self.text_format) {
            value(calls.call_addr(open, &group)?, "ExplainOpenGroup")?;
        }
        value(
            calls.call_addr(self.print, &[Arg::Int(es), Arg::Int(query_desc)])?,
            "ExplainPrintPlan",
        )?;
        more(calls, es)?;
        if let (Some(close), false) = (self.close_group, self.text_format) {
            value(calls.call_addr(close, &group)?, "ExplainCloseGroup")?;
        }
        value(
            calls.call_addr(self.end, &[Arg::Int(es)])?,
            "ExplainEndOutput",
        )?;
        let u64_at = |calls: &mut BackendCalls, a: u64| -> Result<u64> {
            Ok(u64::from_le_bytes(calls.read(a, 8)?.try_into().expect("8")))
        };
        let si = u64_at(calls, es + self.str_off)?;
        let data = u64_at(calls, si + self.data_off)?;
        let len = i32::from_le_bytes(calls.read(si + self.len_off, 4)?.try_into().expect("4"));
        let text = calls.read(data, len.clamp(0, 16 * 1024 * 1024) as usize)?;
        Ok(String::from_utf8_lossy(&text)
            .trim_end_matches('\n')
            .to_string())
    }
}

/// Run EXPLAIN for `query_desc` inside the backend.  A running statement
/// that is instrumented (its own EXPLAIN ANALYZE, auto_explain, or
/// `plan --progress`'s counting) keeps its counters: `ExplainNode` ends
/// the loop of every instrumented node it prints (`InstrEndLoop`, even
/// without ANALYZE), so the nodes' `Instrumentation` is saved before and
/// written back after.
pub fn explain(
    s: &mut dyn Backend,
    query_desc: u64,
    opts: &ExplainOpts,
    timeout: Duration,
) -> Result<String> {
    let printer = PlanPrinter::new(
        s,
        &opts.format,
        &[
            ("verbose", opts.verbose, false),
            ("costs", opts.costs, false),
        ],
    )?;
    let saved = super::planstate::instrumentation_of(s, query_desc)?;
    let mut calls = BackendCalls::open(s, timeout, true)?;
    let text = printer.print(&mut calls, query_desc, |_, _| Ok(()));
    let closed = calls.close();
    let mut restored = Ok(());
    for (addr, bytes) in &saved {
        if let Err(e) = s.write_own_field(*addr, bytes) {
            restored = Err(e);
        }
    }
    let text = text?;
    closed?;
    restored?;
    Ok(text)
}
