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

use crate::debuginfo::layout::Layout;
use crate::infcall::{Arg, CallFrame, CallOutcome, CallResult};
use crate::session::Session;
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

fn addr_of_global(s: &Session, name: &str) -> Option<u64> {
    s.di.global(name).map(|(a, _)| a + s.bias)
}

fn func_addr(s: &Session, name: &str) -> Option<u64> {
    s.di.function_locations(name)
        .iter()
        .find(|l| !l.inlined)
        .map(|l| l.addr + s.bias)
}

fn read_i32(s: &Session, a: u64) -> Result<i32> {
    let mut b = [0u8; 4];
    crate::expr::eval::EvalEnv::read_mem(s, a, &mut b)?;
    Ok(i32::from_le_bytes(b))
}

fn read_u64(s: &Session, a: u64) -> Result<u64> {
    let mut b = [0u8; 8];
    crate::expr::eval::EvalEnv::read_mem(s, a, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

impl Guards {
    fn new(s: &Session) -> Result<Guards> {
        let g = |n: &str| addr_of_global(s, n);
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
            re_throw: s
                .di
                .function_locations("pg_re_throw")
                .iter()
                .filter(|l| !l.inlined)
                .map(|l| l.addr + s.bias)
                .collect(),
            flush_error: func_addr(s, "FlushErrorState"),
            context_delete: func_addr(s, "MemoryContextDelete"),
            release_all_lwlocks: func_addr(s, "LWLockReleaseAll"),
            errordata_layout: Layout::of(&*s.di, "ErrorData")
                .ok()
                .and_then(|l| l.offset("message").ok().map(|o| (l.size, o))),
        })
    }
}

/// Why calling here would be unsafe, if it would.
pub fn unsafe_reason(s: &mut Session) -> Result<Option<String>> {
    let g = Guards::new(s)?;
    if let Some(c) = g.crit {
        let n = read_i32(s, c)?;
        if n > 0 {
            return Ok(Some(format!(
                "the backend is in a critical section (CritSectionCount = {n})"
            )));
        }
    }
    if let Some(h) = g.held_lwlocks {
        let n = read_i32(s, h)?;
        if n > 0 {
            return Ok(Some(format!(
                "the backend holds {n} LWLock{}",
                if n == 1 { "" } else { "s" }
            )));
        }
    }
    if let Some(d) = g.errordata_depth {
        let n = read_i32(s, d)?;
        if n >= 0 {
            return Ok(Some(
                "the backend is in the middle of reporting an error".into(),
            ));
        }
    }
    let frames = s.frames()?.clone();
    for f in frames.iter().take(12) {
        let name = f.function.as_deref().unwrap_or("");
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

impl<'s> BackendCalls<'s> {
    /// Open a call series at the current stop (refused when unsafe).
    pub fn open(
        s: &'s mut Session,
        timeout: Duration,
        private_context: bool,
    ) -> Result<BackendCalls<'s>> {
        Self::open_checked(s, timeout, private_context, true)
    }

    /// For functions that only read constant tables (the wait-event name
    /// functions): callable even while the backend holds LWLocks.
    pub fn open_pure(s: &'s mut Session, timeout: Duration) -> Result<BackendCalls<'s>> {
        Self::open_checked(s, timeout, false, false)
    }

    fn open_checked(
        s: &'s mut Session,
        timeout: Duration,
        private_context: bool,
        check: bool,
    ) -> Result<BackendCalls<'s>> {
        if !check {
            // still never inside a critical section
            let g = Guards::new(s)?;
            if let Some(c) = g.crit
                && read_i32(s, c)? > 0
            {
                bail!("the backend is in a critical section");
            }
        } else if let Some(why) = unsafe_reason(s)? {
            bail!(
                "unsafe to call a function here: {why}; continue to a safe stop first, e.g. a breakpoint on standard_ExecutorRun (what plan --next does) or an idle backend"
            );
        }
        let g = Guards::new(s)?;
        let entry = s.di.binary.entry() + s.bias;
        let pid = s.pid;
        let read = |s: &Session, a: u64, n: usize| -> Result<Vec<u8>> {
            let mut b = vec![0u8; n];
            crate::expr::eval::EvalEnv::read_mem(s, a, &mut b)?;
            Ok(b)
        };
        let saved_holdoff = read(s, g.holdoff, 4)?;
        let saved_cancel = g.cancel_holdoff.map(|a| read(s, a, 4)).transpose()?;
        let saved_crit = g.crit.map(|a| read(s, a, 4)).transpose()?;
        let saved_context = read_u64(s, g.current_context)?;
        let traps = g.re_throw.clone();
        let top = g.top_context.map(|a| read_u64(s, a)).transpose()?;
        let create = func_addr(s, "AllocSetContextCreateInternal");
        let frame = CallFrame::begin(&mut s.target, entry, &traps, timeout)?;
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
pub fn function_address(s: &Session, name: &str) -> Result<u64> {
    func_addr(s, name)
        .ok_or_else(|| anyhow!("no out-of-line function \"{name}\" to call in this binary"))
}
