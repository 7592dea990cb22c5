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

use super::backend::Backend;
use crate::debuginfo::layout::Layout;
use crate::debuginfo::types::{Encoding, Type, TypeRef, size_of, strip, type_name};
use crate::infcall::{Arg, CallFrame, CallOutcome, CallResult};
use anyhow::{Result, anyhow, bail};
use std::time::Duration;

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
        Err(e) => return unknown(format!("CurrentTransactionState unreadable: {e}")),
    };
    let mut b = vec![0u8; l.size as usize];
    if let Err(e) = s.read(p, &mut b) {
        return unknown(format!("the transaction state unreadable: {e}"));
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

/// An open series of guarded calls.
pub struct BackendCalls<'s> {
    frame: Option<CallFrame<'s>>,
    g: Guards,
    saved_holdoff: Vec<u8>,
    saved_cancel: Option<Vec<u8>>,
    saved_crit: Option<Vec<u8>>,
    saved_context: u64,
    private_context: Option<u64>,
    /// PG_exception_stack / error_context_stack when the series opened: a
    /// call that does not return normally may leave them pointing into its
    /// abandoned frames.
    saved_exception_stack: Option<u64>,
    saved_error_context: Option<u64>,
    /// A call was abandoned (timeout, fault): its state is unknown, so the
    /// private context is left alone rather than deleted.
    abandoned: bool,
    /// num_held_lwlocks when the series opened (None without DWARF).
    saved_held_lwlocks: Option<i32>,
    pid: i32,
}

/// What a guarded call produced.
pub enum Called {
    Value(CallResult),
    /// `ereport(ERROR)` inside the call: its message.
    Error(String),
}

/// Which guards a call series applies before it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checks {
    /// The stop (critical section, LWLocks, error handling, allocator) and
    /// the transaction state.
    All,
    /// The stop only: for functions harmless in any transaction state.
    StopOnly,
    /// Only the critical section: for functions that read constant tables.
    Pure,
}

impl<'s> BackendCalls<'s> {
    /// Open a call series at the current stop (refused when unsafe, or when
    /// the backend's transaction is aborted or half-ended).
    pub fn open(
        s: &'s mut dyn Backend,
        timeout: Duration,
        private_context: bool,
    ) -> Result<BackendCalls<'s>> {
        Self::open_checked(s, timeout, private_context, Checks::All)
    }

    /// For functions on `HARMLESS_IN_ANY_TRANSACTION`: the stop's checks,
    /// not the transaction state.
    pub fn open_harmless(s: &'s mut dyn Backend, timeout: Duration) -> Result<BackendCalls<'s>> {
        Self::open_checked(s, timeout, false, Checks::StopOnly)
    }

    /// For functions that only read constant tables (the wait-event name
    /// functions): callable even while the backend holds LWLocks, and in
    /// any transaction state.
    pub fn open_pure(s: &'s mut dyn Backend, timeout: Duration) -> Result<BackendCalls<'s>> {
        Self::open_checked(s, timeout, false, Checks::Pure)
    }

    fn open_checked(
        s: &'s mut dyn Backend,
        timeout: Duration,
        private_context: bool,
        checks: Checks,
    ) -> Result<BackendCalls<'s>> {
        if checks == Checks::Pure {
            // still never inside a critical section
            let g = Guards::new(s)?;
            if let Some(c) = g.crit
                && s.read_i32(c)? > 0
            {
                bail!("the backend is in a critical section");
            }
        } else if let Some(why) = unsafe_reason(s)? {
            bail!(
                "unsafe to call a function here: {why}; continue to a safe stop first, e.g. a breakpoint on standard_ExecutorRun (what plan --next does) or an idle backend"
            );
        }
        // The transaction state: from DWARF, or else (stripped binaries)
        // asked through exported functions once the call frame exists.
        let mut state_by_calls = None;
        if checks == Checks::All {
            match transaction_state_dwarf(s) {
                Some(TxnState::Safe) => {}
                Some(TxnState::Unsafe(line)) => bail!("{line}"),
                Some(TxnState::Unknown(why)) => bail!("{}", unknown_state_line(&why)),
                None => {
                    let f = |n: &str| func_addr(s, n);
                    state_by_calls = Some((
                        f("TransactionBlockStatusCode"),
                        f("IsTransactionState"),
                        f("GetCurrentTransactionNestLevel"),
                    ));
                }
            }
        }
        let g = Guards::new(s)?;
        let pid = s.pid();
        let saved_holdoff = s.read_bytes(g.holdoff, 4)?;
        let saved_cancel = g.cancel_holdoff.map(|a| s.read_bytes(a, 4)).transpose()?;
        let saved_crit = g.crit.map(|a| s.read_bytes(a, 4)).transpose()?;
        let saved_context = s.read_u64(g.current_context)?;
        let traps = g.re_throw.clone();
        let top = g.top_context.map(|a| s.read_u64(a)).transpose()?;
        let create = func_addr(s, "AllocSetContextCreateInternal");
        let frame = s.begin_calls(&traps, timeout)?;
        let mut bc = BackendCalls {
            frame: Some(frame),
            g,
            saved_holdoff,
            saved_cancel,
            saved_crit,
            saved_context,
            private_context: None,
            saved_exception_stack: None,
            saved_error_context: None,
            abandoned: false,
            saved_held_lwlocks: None,
            pid,
        };
        if let Some(a) = bc.g.held_lwlocks {
            bc.saved_held_lwlocks = Some(i32::from_le_bytes(bc.read(a, 4)?.try_into().expect("4")));
        }
        if let Some(a) = bc.g.exception_stack {
            bc.saved_exception_stack =
                Some(u64::from_le_bytes(bc.read(a, 8)?.try_into().expect("8")));
        }
        if let Some(a) = bc.g.error_context_stack {
            bc.saved_error_context =
                Some(u64::from_le_bytes(bc.read(a, 8)?.try_into().expect("8")));
        }
        // hold off interrupts for the whole series
        let held =
            (u32::from_le_bytes(bc.saved_holdoff.clone().try_into().expect("4")) + 1).to_le_bytes();
        let holdoff = bc.g.holdoff;
        bc.frame_mut().target().write(holdoff, &held)?;
        if let Some(fs) = state_by_calls {
            // on refusal, dropping `bc` puts everything back
            match bc.transaction_state_by_calls(fs)? {
                TxnState::Safe => {}
                TxnState::Unsafe(line) => bail!("{line}"),
                TxnState::Unknown(why) => bail!("{}", unknown_state_line(&why)),
            }
        }
        if private_context {
            let (Some(top), Some(create)) = (top, create) else {
                bail!("cannot create a private memory context in this build");
            };
            let name = bc.frame_mut().push_cstr("pgdbg")?;
            match bc.call_addr(
                create,
                &[
                    Arg::Int(top),
                    Arg::Int(name),
                    Arg::Int(0),
                    Arg::Int(8 * 1024),
                    Arg::Int(8 * 1024 * 1024),
                ],
            )? {
                Called::Value(r) if r.rax != 0 => {
                    bc.private_context = Some(r.rax);
                    let cc = bc.g.current_context;
                    bc.frame_mut().target().write(cc, &r.rax.to_le_bytes())?;
                }
                Called::Value(_) => bail!("creating a private memory context failed"),
                Called::Error(e) => bail!("creating a private memory context failed: {e}"),
            }
        }
        Ok(bc)
    }

    /// Without DWARF for `CurrentTransactionState` (a static): the state
    /// from exported functions that only read it.  Coarser than the DWARF
    /// names: `TransactionBlockStatusCode()` is 'E' in every failed or
    /// rolling-back block state, `IsTransactionState()` is true only in
    /// TRANS_INPROGRESS, and a nesting level of 0 outside a transaction.
    fn transaction_state_by_calls(
        &mut self,
        (code, in_progress, nest): (Option<u64>, Option<u64>, Option<u64>),
    ) -> Result<TxnState> {
        let (Some(code), Some(in_progress), Some(nest)) = (code, in_progress, nest) else {
            return Ok(TxnState::Unknown(
                "TransactionBlockStatusCode, IsTransactionState or GetCurrentTransactionNestLevel is not in this binary".into(),
            ));
        };
        let mut ask = |f: u64, what: &str| -> Result<u64> {
            match self.call_addr(f, &[])? {
                Called::Value(r) => Ok(r.rax),
                Called::Error(e) => bail!("{what} raised an ERROR: {e}"),
            }
        };
        let status = ask(code, "TransactionBlockStatusCode")? as u8;
        let live = ask(in_progress, "IsTransactionState")? as u8 != 0;
        let level = ask(nest, "GetCurrentTransactionNestLevel")? as u32 as i32;
        Ok(match status {
            b'E' => TxnState::Unsafe(refusal(
                "aborted (transaction status E: a failed transaction block, or its ROLLBACK under way; the exact state needs debug info)",
                "ROLLBACK first",
            )),
            b'I' | b'T' if live || level == 0 => TxnState::Safe,
            b'I' | b'T' => TxnState::Unsafe(refusal(
                "in the middle of its commit or abort (not TRANS_INPROGRESS; the exact state needs debug info)",
                "let it finish first (continue to a later stop)",
            )),
            other => TxnState::Unknown(format!("TransactionBlockStatusCode() returned {other:#x}")),
        })
    }

    fn frame_mut(&mut self) -> &mut CallFrame<'s> {
        self.frame.as_mut().expect("open")
    }

    pub fn push_cstr(&mut self, s: &str) -> Result<u64> {
        self.frame_mut().push_cstr(s)
    }

    pub fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>> {
        let mut b = vec![0u8; len];
        self.frame_mut().target().read(addr, &mut b)?;
        Ok(b)
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.frame_mut().target().write(addr, data)
    }

    pub fn read_cstr(&mut self, addr: u64, max: usize) -> Result<String> {
        let (b, _) = self.frame_mut().target().read_cstr(addr, max)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// Call the function at `addr`.  An ERROR inside it is caught (unless
    /// the callee catches it itself with its own PG_TRY).
    pub fn call_addr(&mut self, addr: u64, args: &[Arg]) -> Result<Called> {
        let mut out = self.frame_mut().call(addr, args)?;
        loop {
            match out {
                CallOutcome::Returned(r) => return Ok(Called::Value(r)),
                CallOutcome::Trapped { .. } => {
                    // pg_re_throw: would the longjmp leave our call?  If the
                    // callee set up its own PG_TRY, let it catch the error.
                    if let (Some(a), Some(saved)) =
                        (self.g.exception_stack, self.saved_exception_stack)
                    {
                        let now = u64::from_le_bytes(self.read(a, 8)?.try_into().expect("8"));
                        if now != saved {
                            out = self.frame_mut().resume()?;
                            continue;
                        }
                    }
                    let msg = self.error_message().unwrap_or_else(|| {
                        "an ERROR was raised (its message needs debug info)".into()
                    });
                    self.recover_from_error()?;
                    return Ok(Called::Error(msg));
                }
                CallOutcome::TimedOut => {
                    self.abandoned = true;
                    self.restore_error_stacks()?;
                    self.release_leaked_lwlocks()?;
                    bail!(
                        "the call did not return within {:.1}s: abandoned, the backend's registers restored (raise --call-timeout if it is just slow)",
                        self.frame_mut().timeout.as_secs_f64()
                    )
                }
                CallOutcome::Faulted(why) => {
                    self.abandoned = true;
                    self.restore_error_stacks()?;
                    self.release_leaked_lwlocks()?;
                    bail!("{why}: the call was abandoned and the backend restored")
                }
            }
        }
    }

    /// After a call that did not return normally: LWLocks it took are
    /// still held (an ERROR would have released them in AbortTransaction).
    /// When none were held before the series, release them all, as the
    /// error path would; returns how many were released.
    fn release_leaked_lwlocks(&mut self) -> Result<i32> {
        let (Some(a), Some(saved)) = (self.g.held_lwlocks, self.saved_held_lwlocks) else {
            return Ok(0);
        };
        let now = i32::from_le_bytes(self.read(a, 4)?.try_into().expect("4"));
        if now <= saved || saved != 0 {
            return Ok(0);
        }
        let Some(f) = self.g.release_all_lwlocks else {
            return Ok(0);
        };
        match self.frame_mut().call(f, &[])? {
            CallOutcome::Returned(_) => Ok(now),
            other => bail!("releasing the {now} LWLock(s) left by the call failed ({other:?})"),
        }
    }

    /// Put PG_exception_stack and error_context_stack back.
    fn restore_error_stacks(&mut self) -> Result<()> {
        if let (Some(a), Some(v)) = (self.g.exception_stack, self.saved_exception_stack) {
            self.write(a, &v.to_le_bytes())?;
        }
        if let (Some(a), Some(v)) = (self.g.error_context_stack, self.saved_error_context) {
            self.write(a, &v.to_le_bytes())?;
        }
        Ok(())
    }

    /// The message of the error being thrown (errordata[depth].message).
    fn error_message(&mut self) -> Option<String> {
        let depth_addr = self.g.errordata_depth?;
        let base = self.g.errordata?;
        let d = i32::from_le_bytes(self.read(depth_addr, 4).ok()?.try_into().ok()?);
        if d < 0 {
            return None;
        }
        let (size, msg_off) = self.g.errordata_layout?;
        let ed = base + d as u64 * size;
        let p = u64::from_le_bytes(self.read(ed + msg_off, 8).ok()?.try_into().ok()?);
        if p == 0 {
            return None;
        }
        self.read_cstr(p, 1000).ok()
    }

    /// After a trapped ERROR: flush the error state and put the counters
    /// and the memory context back.
    fn recover_from_error(&mut self) -> Result<()> {
        self.restore_error_stacks()?;
        self.release_leaked_lwlocks()?;
        if let Some(f) = self.g.flush_error {
            match self.frame_mut().call(f, &[])? {
                CallOutcome::Returned(_) => {}
                other => bail!("FlushErrorState did not return cleanly ({other:?})"),
            }
        }
        // errfinish zeroed these; the series keeps interrupts held off.
        let held = (u32::from_le_bytes(self.saved_holdoff.clone().try_into().expect("4")) + 1)
            .to_le_bytes();
        let h = self.g.holdoff;
        self.write(h, &held)?;
        if let (Some(a), Some(v)) = (self.g.cancel_holdoff, self.saved_cancel.clone()) {
            self.write(a, &v)?;
        }
        if let (Some(a), Some(v)) = (self.g.crit, self.saved_crit.clone()) {
            self.write(a, &v)?;
        }
        let ctx = self.private_context.unwrap_or(self.saved_context);
        let cc = self.g.current_context;
        self.write(cc, &ctx.to_le_bytes())?;
        Ok(())
    }

    /// Delete the private context, restore the counters, the context and
    /// the registers.
    pub fn close(mut self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<()> {
        let Some(_) = self.frame.as_ref() else {
            return Ok(());
        };
        let mut first: Option<anyhow::Error> = None;
        let cc = self.g.current_context;
        let saved_ctx = self.saved_context;
        if let Err(e) = self.write(cc, &saved_ctx.to_le_bytes()) {
            first.get_or_insert(e);
        }
        if let Err(e) = self.restore_error_stacks() {
            first.get_or_insert(e);
        }
        for (a, v) in [
            (self.g.cancel_holdoff, self.saved_cancel.clone()),
            (self.g.crit, self.saved_crit.clone()),
        ] {
            if let (Some(a), Some(v)) = (a, v)
                && let Err(e) = self.write(a, &v)
            {
                first.get_or_insert(e);
            }
        }
        // After an abandoned call the context's state is unknown: leave it
        // (a few KB under TopMemoryContext) rather than delete it.
        let ctx_to_delete = if self.abandoned {
            None
        } else {
            self.private_context.take()
        };
        if let Some(ctx) = ctx_to_delete {
            // MemoryContextDelete(ctx): everything the calls allocated
            if let Some(del) = self.g.context_delete {
                match self.frame_mut().call(del, &[Arg::Int(ctx)]) {
                    Ok(CallOutcome::Returned(_)) => {}
                    Ok(other) => {
                        first.get_or_insert(anyhow!(
                            "deleting pgdbg's memory context failed ({other:?})"
                        ));
                    }
                    Err(e) => {
                        first.get_or_insert(e);
                    }
                }
            }
        }
        let h = self.g.holdoff;
        let v = self.saved_holdoff.clone();
        if let Err(e) = self.write(h, &v) {
            first.get_or_insert(e);
        }
        if let Some(f) = self.frame.take()
            && let Err(e) = f.finish()
        {
            first.get_or_insert(e);
        }
        let _ = self.pid;
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for BackendCalls<'_> {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}

/// Resolve a function name to a runtime address for `call`.
pub fn function_address(s: &dyn Backend, name: &str) -> Result<u64> {
    func_addr(s, name)
        .ok_or_else(|| anyhow!("no out-of-line function \"{name}\" to call in this binary"))
}

/// A function's parameters from DWARF: (name, type) each, and whether it
/// takes `...` after them.
#[derive(Debug, Clone)]
pub struct Prototype {
    pub params: Vec<(Option<String>, Option<TypeRef>)>,
    pub variadic: bool,
}

/// What one DIE of a function says: its parameter DIEs, `...`,
/// DW_AT_prototyped, and the DIE it refers to (abstract origin or
/// specification).
fn subprogram_facts(s: &dyn Backend, off: u64) -> Option<(Vec<u64>, bool, bool, Option<u64>)> {
    use crate::debuginfo::index::{die_offset, global_ref};
    use gimli::constants as dw;
    s.di()
        .with_die(off, |u, e| {
            let next = e
                .attr_value(dw::DW_AT_abstract_origin)
                .or_else(|| e.attr_value(dw::DW_AT_specification))
                .and_then(|v| global_ref(u, v));
            let prototyped = matches!(
                e.attr_value(dw::DW_AT_prototyped),
                Some(gimli::AttributeValue::Flag(true))
            );
            let (mut params, mut variadic) = (Vec::new(), false);
            if let Ok(mut tree) = u.entries_tree(Some(e.offset()))
                && let Ok(root) = tree.root()
            {
                let mut children = root.children();
                while let Ok(Some(c)) = children.next() {
                    match c.entry().tag() {
                        dw::DW_TAG_formal_parameter => {
                            params.push(die_offset(u, c.entry().offset()))
                        }
                        dw::DW_TAG_unspecified_parameters => variadic = true,
                        _ => {}
                    }
                }
            }
            (params, variadic, prototyped, next)
        })
        .ok()
}

/// The prototype of `name` from DWARF (None without DWARF, or when the
/// debug info does not say: then no check is made).
pub fn prototype(s: &dyn Backend, name: &str) -> Option<Prototype> {
    let die = s
        .di()
        .function_locations(name)
        .iter()
        .find(|l| !l.inlined && l.die != 0)?
        .die;
    // the concrete copy, then its abstract origin / declaration: the last
    // one that lists parameters lists all of them
    let mut chain = Vec::new();
    let mut cur = Some(die);
    while let Some(off) = cur {
        if chain.len() >= 4 {
            break;
        }
        let facts = subprogram_facts(s, off)?;
        cur = facts.3;
        chain.push(facts);
    }
    let variadic = chain.iter().any(|f| f.1);
    let prototyped = chain.iter().any(|f| f.2);
    let with_params: Vec<&Vec<u64>> = chain
        .iter()
        .map(|f| &f.0)
        .filter(|p| !p.is_empty())
        .collect();
    let Some(params) = with_params.last() else {
        return (prototyped || variadic).then(|| Prototype {
            params: Vec::new(),
            variadic,
        });
    };
    let params = params
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            // a declaration's parameters may have no names: take the
            // definition's
            let name = s.di().die_name(p).or_else(|| {
                with_params
                    .iter()
                    .find_map(|ps| ps.get(i).and_then(|&q| s.di().die_name(q)))
            });
            (name, s.di().die_type(p))
        })
        .collect();
    Some(Prototype { params, variadic })
}

impl Prototype {
    fn param_text(s: &dyn Backend, p: &(Option<String>, Option<TypeRef>)) -> String {
        let ty =
            p.1.as_ref()
                .map(|t| type_name(s.di(), t))
                .unwrap_or_else(|| "?".into());
        match &p.0 {
            Some(n) if ty.ends_with('*') => format!("{ty}{n}"),
            Some(n) => format!("{ty} {n}"),
            None => ty,
        }
    }

    /// "const char *s", "void", "const char *fmt, ..."
    pub fn text(&self, s: &dyn Backend) -> String {
        let mut v: Vec<String> = self.params.iter().map(|p| Self::param_text(s, p)).collect();
        if self.variadic {
            v.push("...".into());
        }
        if v.is_empty() {
            "void".into()
        } else {
            v.join(", ")
        }
    }
}

/// One argument of `call` as the user wrote it, evaluated.
#[derive(Debug, Clone)]
pub enum Given {
    /// A string literal (copied into the backend).
    Str(String),
    /// A value of pointer (or array, function) type.
    Ptr(u64),
    Int(u64),
    Float(f64),
}

impl Given {
    fn what(&self) -> String {
        match self {
            Given::Str(t) => format!("a string (\"{t}\")"),
            Given::Ptr(a) => format!("a pointer ({a:#x})"),
            Given::Int(i) => format!("an integer ({})", *i as i64),
            Given::Float(f) => format!("a double ({f})"),
        }
    }
}

/// An argument ready for the call: a value, or a string to copy into the
/// backend first.
#[derive(Debug, Clone)]
pub enum Prepared {
    Arg(Arg),
    Str(String),
}

/// Check `call name(given...)` against the DWARF prototype (count, and
/// types roughly: pointers, integers, floating point) and convert as C
/// would (an integer to a double parameter); one line naming the
/// prototype when it does not fit.  Without a prototype, no check.
pub fn prepare_args(s: &dyn Backend, name: &str, given: Vec<Given>) -> Result<Vec<Prepared>> {
    let plain = |g: Given| match g {
        Given::Str(t) => Prepared::Str(t),
        Given::Ptr(a) | Given::Int(a) => Prepared::Arg(Arg::Int(a)),
        Given::Float(f) => Prepared::Arg(Arg::Double(f)),
    };
    let Some(proto) = prototype(s, name) else {
        return Ok(given.into_iter().map(plain).collect());
    };
    let n = proto.params.len();
    let fits = if proto.variadic {
        given.len() >= n
    } else {
        given.len() == n
    };
    if !fits {
        let takes = match (n, proto.variadic) {
            (0, false) => "no arguments".to_string(),
            (1, false) => "1 argument".to_string(),
            (n, false) => format!("{n} arguments"),
            (1, true) => "at least 1 argument".to_string(),
            (n, true) => format!("at least {n} arguments"),
        };
        bail!(
            "{name} takes {takes} ({}), {} given",
            proto.text(s),
            given.len()
        );
    }
    let mut out = Vec::new();
    for (i, g) in given.into_iter().enumerate() {
        let Some(p) = proto.params.get(i) else {
            out.push(plain(g)); // after `...`: as given
            continue;
        };
        let Some(ty) = &p.1 else {
            out.push(plain(g));
            continue;
        };
        let bad = |wants: &str, g: &Given| {
            anyhow!(
                "argument {} of {name}({}) is {wants}: {} given",
                i + 1,
                proto.text(s),
                g.what()
            )
        };
        let size = size_of(s.di(), ty);
        let prepared = match &*strip(s.di(), ty) {
            Type::Pointer { .. } => match g {
                Given::Float(_) => return Err(bad("a pointer", &g)),
                g => plain(g),
            },
            Type::Base {
                enc: Encoding::Float,
                ..
            } => {
                let v = match g {
                    Given::Float(f) => f,
                    Given::Int(v) => v as i64 as f64,
                    g => return Err(bad("floating point", &g)),
                };
                match size {
                    // a float travels in the low 32 bits of its register
                    4 => Prepared::Arg(Arg::Double(f64::from_bits((v as f32).to_bits() as u64))),
                    8 => Prepared::Arg(Arg::Double(v)),
                    _ => bail!(
                        "argument {} of {name}({}) is a {size}-byte float: call cannot pass it",
                        i + 1,
                        proto.text(s)
                    ),
                }
            }
            Type::Base { .. } | Type::Enum { .. } => match g {
                Given::Float(f) => Prepared::Arg(Arg::Int(f as i64 as u64)),
                // a string where a pointer-sized integer (Datum, uintptr_t)
                // is expected passes its address, as in C with a cast
                Given::Str(_) if size < 8 => return Err(bad("an integer", &g)),
                g => plain(g),
            },
            _ => bail!(
                "argument {} of {name}({}) is passed by value as a {}: call cannot pass it",
                i + 1,
                proto.text(s),
                type_name(s.di(), ty)
            ),
        };
        out.push(prepared);
    }
    Ok(out)
}
