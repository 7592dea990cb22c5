//! Calling functions inside a backend safely: the PostgreSQL guards around
//! the generic inferior-call engine.
//!
//! * refuse at an unsafe stop: inside a critical section, while LWLocks are
//!   held, while an error is being handled, or inside the memory allocator;
//! * `InterruptHoldoffCount` is raised around each call, so a pending cancel
//!   or `statement_timeout` cannot longjmp out of the injected frame (the
//!   interrupt stays pending and is served after we leave);
//! * `pg_re_throw` is trapped: an `ereport(ERROR)` inside the call is
//!   reported, the error state flushed (`FlushErrorState`), and the holdoff
//!   counters and `CurrentMemoryContext` put back, instead of aborting the
//!   user's transaction;
//! * optionally a private memory context (`AllocSetContextCreateInternal`
//!   under `TopMemoryContext`) holds everything the calls allocate and is
//!   deleted afterwards.
//!
//! This file holds the guards (where calling is unsafe, the transaction
//! state); `series.rs` the open series of calls (`BackendCalls`);
//! `prototype.rs` the checks of `call`'s arguments against DWARF.

use super::backend::Backend;
use crate::debuginfo::layout::Layout;
use crate::debuginfo::types::{Encoding, Type, TypeRef, size_of, strip, type_name};
use crate::infcall::{Arg, CallFrame, CallOutcome, CallResult};
use anyhow::{Result, anyhow, bail};
use std::time::Duration;

mod prototype;
mod series;
pub use prototype::{Given, Prepared, Prototype, function_address, prepare_args, prototype};
pub use series::{BackendCalls, Called, Checks};

/// Runtime addresses of the globals and functions the guards use.
struct Guards {
    holdoff: u64,
    cancel_holdoff: Option<u64>,
    crit: Option<u64>,
    current_context: u64,
    top_context: Option<u64>,
    errordata_depth: Option<u64>,
    errordata: Option<u64>,
    held_lwlocks: Option<u64>,
    exception_stack: Option<u64>,
    error_context_stack: Option<u64>,
    re_throw: Vec<u64>,
    flush_error: Option<u64>,
    context_delete: Option<u64>,
    release_all_lwlocks: Option<u64>,
    /// (sizeof(ErrorData), offsetof(ErrorData, message))
    errordata_layout: Option<(u64, u64)>,
}

fn func_addr(s: &dyn Backend, name: &str) -> Option<u64> {
    s.function_addrs(name).first().copied()
}

impl Guards {
    fn new(s: &dyn Backend) -> Result<Guards> {
        let g = |n: &str| s.global_addr(n);
        Ok(Guards {
            holdoff: g("InterruptHoldoffCount")
                .ok_or_else(|| anyhow!("InterruptHoldoffCount is not in the debug info"))?,
            cancel_holdoff: g("QueryCancelHoldoffCount"),
            crit: g("CritSectionCount"),
            current_context: g("CurrentMemoryContext")
                .ok_or_else(|| anyhow!("CurrentMemoryContext is not in the debug info"))?,
            top_context: g("TopMemoryContext"),
            errordata_depth: g("errordata_stack_depth"),
            errordata: g("errordata"),
            held_lwlocks: g("num_held_lwlocks"),
            exception_stack: g("PG_exception_stack"),
            error_context_stack: g("error_context_stack"),
            re_throw: s.function_addrs("pg_re_throw"),
            flush_error: func_addr(s, "FlushErrorState"),
            context_delete: func_addr(s, "MemoryContextDelete"),
            release_all_lwlocks: func_addr(s, "LWLockReleaseAll"),
            errordata_layout: s
                .layout("ErrorData")
                .ok()
                .and_then(|l| l.offset("message").ok().map(|o| (l.size, o))),
        })
    }
}

/// Why calling here would be unsafe, if it would.
pub fn unsafe_reason(s: &mut dyn Backend) -> Result<Option<String>> {
    let g = Guards::new(s)?;
    if let Some(c) = g.crit {
        let n = s.read_i32(c)?;
        if n > 0 {
            return Ok(Some(format!(
                "the backend is in a critical section (CritSectionCount = {n})"
            )));
        }
    }
    if let Some(h) = g.held_lwlocks {
        let n = s.read_i32(h)?;
        if n > 0 {
            return Ok(Some(format!(
                "the backend holds {n} LWLock{}",
                if n == 1 { "" } else { "s" }
            )));
        }
    }
    if let Some(d) = g.errordata_depth {
        let n = s.read_i32(d)?;
        if n >= 0 {
            return Ok(Some(
                "the backend is in the middle of reporting an error".into(),
            ));
        }
    }
    let frames = s.frame_functions()?;
    for name in frames.iter().take(12) {
        let name = name.as_str();
        if name.starts_with("AllocSet")
            || name.starts_with("GenerationA")
            || name.starts_with("SlabA")
            || name.starts_with("palloc")
            || name.starts_with("MemoryContext")
            || name == "pfree"
            || name == "repalloc"
            || name.contains("malloc")
            || name == "free"
            || name.starts_with("_int_")
        {
            return Ok(Some(format!(
                "the backend is inside the memory allocator ({name})"
            )));
        }
    }
    Ok(None)
}

/// Functions harmless in any transaction state, even an aborted one: they
/// read constant tables or the transaction state itself, allocate nothing
/// and take no lock.  `call` runs them where other functions are refused
/// (see `transaction_state`); pgdbg uses the first two for wait names.
pub const HARMLESS_IN_ANY_TRANSACTION: &[&str] = &[
    "pgstat_get_wait_event",
    "pgstat_get_wait_event_type",
    "IsTransactionState",
    "IsAbortedTransactionBlockState",
    "TransactionBlockStatusCode",
    "GetCurrentTransactionNestLevel",
    "GetTopTransactionIdIfAny",
    "GetCurrentTransactionIdIfAny",
];

/// Where a transaction state forbids calls: the line that says so.
fn refusal(what: &str, hint: &str) -> String {
    format!(
        "the backend's transaction is {what}; calls could corrupt it: {hint}, or call only functions known to be harmless there ({})",
        HARMLESS_IN_ANY_TRANSACTION[..2].join(", ")
    )
}

/// `TBlockState`s in which calling backend code is unsafe: (enumerator,
/// what it means, the transaction is aborted rather than being ended).
const UNSAFE_BLOCK_STATES: &[(&str, &str, bool)] = &[
    (
        "TBLOCK_ABORT",
        "a failed statement in a transaction block",
        true,
    ),
    (
        "TBLOCK_SUBABORT",
        "a failed statement after a SAVEPOINT",
        true,
    ),
    (
        "TBLOCK_ABORT_END",
        "a failed transaction block, ROLLBACK received",
        false,
    ),
    (
        "TBLOCK_SUBABORT_END",
        "a failed subtransaction, ROLLBACK received",
        false,
    ),
    (
        "TBLOCK_ABORT_PENDING",
        "a live transaction block, ROLLBACK received",
        false,
    ),
    (
        "TBLOCK_SUBABORT_PENDING",
        "a live subtransaction, ROLLBACK received",
        false,
    ),
    (
        "TBLOCK_SUBRESTART",
        "a live subtransaction, ROLLBACK TO received",
        false,
    ),
    (
        "TBLOCK_SUBABORT_RESTART",
        "a failed subtransaction, ROLLBACK TO received",
        false,
    ),
];

/// Functions that assign a transaction ID when there is none.  Outside any
/// transaction (an idle backend) the ID is assigned and locked with no
/// transaction to end it: its lock stays until the backend exits.
const ASSIGN_XID: &[&str] = &[
    "GetCurrentTransactionId",
    "GetTopTransactionId",
    "GetCurrentFullTransactionId",
    "GetTopFullTransactionId",
];

/// Refuse `call name()` when it would assign a transaction ID outside any
/// transaction (TRANS_DEFAULT, read from DWARF; no check without it).
pub fn check_outside_transaction(s: &dyn Backend, name: &str) -> Result<()> {
    if !ASSIGN_XID.contains(&name) {
        return Ok(());
    }
    let Some((addr, Some(ty))) = s.di().global("CurrentTransactionState") else {
        return Ok(());
    };
    let Type::Pointer { target: Some(t) } = &*strip(s.di(), &ty) else {
        return Ok(());
    };
    let Ok(l) = Layout::of_type(s.di(), "TransactionStateData", t) else {
        return Ok(());
    };
    let Ok(f) = l.field("state") else {
        return Ok(());
    };
    let p = s.read_u64(addr + s.bias())?;
    let mut b = vec![0u8; l.size as usize];
    s.read(p, &mut b)?;
    let state = l.int(&b, "state").and_then(|v| enumerator(s, &f.ty, v));
    if state.as_deref() == Some("TRANS_DEFAULT") {
        bail!(
            "the backend is outside any transaction (TRANS_DEFAULT): {name} would assign a transaction ID that no transaction ends, its lock held until the backend exits: call it inside a transaction block (BEGIN in the session first)"
        );
    }
    Ok(())
}

/// `TransState`s in which calls are fine: idle, or a live transaction.
const SAFE_TRANS_STATES: &[&str] = &["TRANS_DEFAULT", "TRANS_INPROGRESS"];

/// The backend's transaction state, as far as calls are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnState {
    /// Idle or a live transaction: calls are fine.
    Safe,
    /// Calls could corrupt it: the line that says why.
    Unsafe(String),
    /// It could not be read: why.
    Unknown(String),
}

/// The name of the enumerator of `ty` whose value is `v` (DWARF's
/// enumerators, never numbers).
fn enumerator(s: &dyn Backend, ty: &TypeRef, v: i64) -> Option<String> {
    match &*strip(s.di(), ty) {
        Type::Enum { values, .. } => values.iter().find(|(_, x)| *x == v).map(|(n, _)| n.clone()),
        _ => None,
    }
}

/// `CurrentTransactionState->state` and `->blockState`, by enumerator name,
/// from DWARF (None when the debug info lacks them: stripped binaries).
fn transaction_state_dwarf(s: &dyn Backend) -> Option<TxnState> {
    let (addr, ty) = s.di().global("CurrentTransactionState")?;
    let ty = ty?;
    let target = match &*strip(s.di(), &ty) {
        Type::Pointer { target: Some(t) } => t.clone(),
        _ => return None,
    };
    let l = Layout::of_type(s.di(), "TransactionStateData", &target).ok()?;
    let (state_f, block_f) = (l.field("state").ok()?, l.field("blockState").ok()?);
    let unknown = |why: String| Some(TxnState::Unknown(why));
    let p = match s.read_u64(addr + s.bias()) {
        Ok(p) if p != 0 => p,
        Ok(_) => return unknown("CurrentTransactionState is NULL".into()),
        Err(e) => return unknown(format!("CurrentTransactionState unreadable: {e:#}")),
    };
    let mut b = vec![0u8; l.size as usize];
    if let Err(e) = s.read(p, &mut b) {
        return unknown(format!("the transaction state unreadable: {e:#}"));
    }
    let (state, block) = (l.int(&b, "state")?, l.int(&b, "blockState")?);
    let Some(state_name) = enumerator(s, &state_f.ty, state) else {
        return unknown(format!(
            "TransState {state} has no enumerator in the debug info"
        ));
    };
    let Some(block_name) = enumerator(s, &block_f.ty, block) else {
        return unknown(format!(
            "TBlockState {block} has no enumerator in the debug info"
        ));
    };
    if let Some((n, what, aborted)) = UNSAFE_BLOCK_STATES.iter().find(|(n, ..)| *n == block_name) {
        return Some(TxnState::Unsafe(if *aborted {
            refusal(&format!("aborted ({n}: {what})"), "ROLLBACK first")
        } else {
            refusal(
                &format!("being rolled back ({n}: {what})"),
                "let the ROLLBACK finish first (continue to a later stop)",
            )
        }));
    }
    if !SAFE_TRANS_STATES.contains(&state_name.as_str()) {
        let what = match state_name.as_str() {
            "TRANS_ABORT" => "in the middle of an abort",
            "TRANS_COMMIT" => "in the middle of its commit",
            "TRANS_PREPARE" => "in the middle of PREPARE TRANSACTION",
            "TRANS_START" => "starting",
            _ => "in a state where calls are unsafe",
        };
        return Some(TxnState::Unsafe(refusal(
            &format!("{what} ({state_name}, {block_name})"),
            "let it finish first (continue to a later stop)",
        )));
    }
    Some(TxnState::Safe)
}

fn unknown_state_line(why: &str) -> String {
    format!(
        "cannot read the backend's transaction state ({why}): calls are refused except functions harmless in any state ({})",
        HARMLESS_IN_ANY_TRANSACTION.join(", ")
    )
}
