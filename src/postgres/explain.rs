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

/// Run EXPLAIN for `query_desc` inside the backend.
pub fn explain(
    s: &mut dyn Backend,
    query_desc: u64,
    opts: &ExplainOpts,
    timeout: Duration,
) -> Result<String> {
    let es_l = s.layout("ExplainState")?;
    let si_l = s.layout("StringInfoData")?;
    let fmt_field = es_l.field("format")?.clone();
    let fmt_value = match &*strip(s.di(), &fmt_field.ty) {
        Type::Enum { values, .. } => {
            let want = format!("EXPLAIN_FORMAT_{}", opts.format.to_uppercase());
            values
                .iter()
                .find(|(n, _)| *n == want)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    anyhow!(
                        "unknown format '{}': use text, json, yaml or xml",
                        opts.format
                    )
                })?
        }
        _ => bail!("ExplainState.format is not an enum in this build"),
    };
    let f = |name: &str| super::call::function_address(s, name);
    let (new_es, begin, print, end) = (
        f("NewExplainState")?,
        f("ExplainBeginOutput")?,
        f("ExplainPrintPlan")?,
        f("ExplainEndOutput")?,
    );
    let open_group = f("ExplainOpenGroup").ok();
    let close_group = f("ExplainCloseGroup").ok();
    let verbose_off = es_l.field("verbose").ok().map(|x| x.offset);
    let costs_off = es_l.field("costs").ok().map(|x| x.offset);
    let str_off = es_l.offset("str")?;
    let data_off = si_l.offset("data")?;
    let len_off = si_l.offset("len")?;
    let mut calls = BackendCalls::open(s, timeout, true)?;
    let value = |c: Called, what: &str| -> Result<u64> {
        match c {
            Called::Value(r) => Ok(r.rax),
            Called::Error(e) => Err(anyhow!("{what} raised an ERROR inside the backend: {e}")),
        }
    };
    let es = value(calls.call_addr(new_es, &[])?, "NewExplainState")?;
    if es == 0 {
        bail!("NewExplainState returned NULL");
    }
    let fsize = fmt_field.size.clamp(1, 8) as usize;
    calls.write(es + fmt_field.offset, &fmt_value.to_le_bytes()[..fsize])?;
    if let Some(o) = verbose_off {
        calls.write(es + o, &[opts.verbose as u8])?;
    }
    if let Some(o) = costs_off {
        calls.write(es + o, &[opts.costs as u8])?;
    }
    value(
        calls.call_addr(begin, &[Arg::Int(es)])?,
        "ExplainBeginOutput",
    )?;
    // EXPLAIN wraps the plan in a "Query" group (the `{ }` of JSON).
    let query = calls.push_cstr("Query")?;
    let group = [Arg::Int(query), Arg::Int(0), Arg::Int(1), Arg::Int(es)];
    if let (Some(open), true) = (open_group, opts.format != "text") {
        value(calls.call_addr(open, &group)?, "ExplainOpenGroup")?;
    }
    value(
        calls.call_addr(print, &[Arg::Int(es), Arg::Int(query_desc)])?,
        "ExplainPrintPlan",
    )?;
    if let (Some(close), true) = (close_group, opts.format != "text") {
        value(calls.call_addr(close, &group)?, "ExplainCloseGroup")?;
    }
    value(calls.call_addr(end, &[Arg::Int(es)])?, "ExplainEndOutput")?;
    let si = u64::from_le_bytes(calls.read(es + str_off, 8)?.try_into().expect("8"));
    let data = u64::from_le_bytes(calls.read(si + data_off, 8)?.try_into().expect("8"));
    let len = i32::from_le_bytes(calls.read(si + len_off, 4)?.try_into().expect("4"));
    let text = calls.read(data, len.clamp(0, 16 * 1024 * 1024) as usize)?;
    calls.close()?;
    Ok(String::from_utf8_lossy(&text)
        .trim_end_matches('\n')
        .to_string())
}
