//! The EXPLAIN ANALYZE text, produced by guarded inferior calls at the
//! statement's `standard_ExecutorEnd` (module comment of analyze.rs, step 4).

use super::*;

/// ExplainState flags for the options the executor ran with.
pub struct EsFlags {
    pub timing: bool,
    pub buffers: bool,
    pub wal: bool,
}

impl EsFlags {
    /// What the executor measured (`effective` bits): what to print.
    pub(super) fn from_options(s: &dyn Backend, effective: u32) -> Result<EsFlags> {
        let values = instrument_enum(s)?;
        let has = |n: &str| -> Result<bool> { Ok(effective & enum_bit(&values, n)? != 0) };
        Ok(EsFlags {
            timing: has("INSTRUMENT_TIMER")?,
            buffers: has("INSTRUMENT_BUFFERS")?,
            wal: has("INSTRUMENT_WAL")?,
        })
    }
}

/// The EXPLAIN ANALYZE text of an executed QueryDesc (before
/// ExecutorEnd), made inside the backend as `ExplainOnePlan` makes it,
/// with `elapsed` as its "Execution Time".
pub fn explain_analyze(
    s: &mut dyn Backend,
    qd: u64,
    o: &AnalyzeOpts,
    flags: &EsFlags,
    elapsed: Duration,
    timeout: Duration,
) -> Result<String> {
    let printer = explain::PlanPrinter::new(
        s,
        &o.format,
        &[
            ("analyze", true, true),
            ("verbose", o.verbose, false),
            ("costs", o.costs, false),
            ("timing", flags.timing, true),
            ("buffers", flags.buffers, true),
            ("wal", flags.wal, false),
            ("summary", true, false),
        ],
    )?;
    let f = |name: &str| crate::postgres::call::function_address(s, name);
    let prop_float = f("ExplainPropertyFloat")?;
    let triggers = f("ExplainPrintTriggers").ok();
    let jit = f("ExplainPrintJITSummary").ok();
    let mut calls = BackendCalls::open(s, timeout, true)?;
    // after the plan, what ExplainOnePlan prints: triggers, JIT, the time
    let text = printer.print(&mut calls, qd, |calls, es| {
        if let Some(t) = triggers {
            value(
                calls.call_addr(t, &[Arg::Int(es), Arg::Int(qd)])?,
                "ExplainPrintTriggers",
            )?;
        }
        if let (Some(j), true) = (jit, o.costs) {
            value(
                calls.call_addr(j, &[Arg::Int(es), Arg::Int(qd)])?,
                "ExplainPrintJITSummary",
            )?;
        }
        let label = calls.push_cstr("Execution Time")?;
        let unit = calls.push_cstr("ms")?;
        value(
            calls.call_addr(
                prop_float,
                &[
                    Arg::Int(label),
                    Arg::Int(unit),
                    Arg::Double(elapsed.as_secs_f64() * 1000.0),
                    Arg::Int(3),
                    Arg::Int(es),
                ],
            )?,
            "ExplainPropertyFloat",
        )?;
        Ok(())
    })?;
    calls.close()?;
    Ok(text)
}
