//! An open series of guarded calls (`BackendCalls`): the guards applied
//! before the first call, each call with `pg_re_throw` trapped, and the
//! backend's state put back at the end.

use super::*;

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
        // the words the series changes, with their values now: put back by
        // the guardian if pgdbg dies before `close` does
        {
            let mut words: Vec<(u64, Vec<u8>)> = vec![(bc.g.holdoff, bc.saved_holdoff.clone())];
            for (a, v) in [
                (bc.g.cancel_holdoff, bc.saved_cancel.clone()),
                (bc.g.crit, bc.saved_crit.clone()),
            ] {
                if let (Some(a), Some(v)) = (a, v) {
                    words.push((a, v));
                }
            }
            words.push((
                bc.g.current_context,
                bc.saved_context.to_le_bytes().to_vec(),
            ));
            for (a, v) in [
                (bc.g.exception_stack, bc.saved_exception_stack),
                (bc.g.error_context_stack, bc.saved_error_context),
            ] {
                if let (Some(a), Some(v)) = (a, v) {
                    words.push((a, v.to_le_bytes().to_vec()));
                }
            }
            let (flush, catch) = (
                bc.g.flush_error,
                bc.g.exception_stack.zip(bc.saved_exception_stack),
            );
            let t = bc.frame_mut().target();
            for (n, (a, v)) in words.into_iter().enumerate() {
                t.note_data_word(a, &v)?;
                crate::config::pause_for_tests_nth("data-word", n + 1);
            }
            // for the SIGTRAP handler, should pgdbg and its guardian both
            // die during a call: at pg_re_throw inside the call, unless the
            // callee catches the error itself (PG_exception_stack moved),
            // FlushErrorState runs before the registers and these words are
            // put back
            t.note_call_error_repair(flush, catch);
        }
        // hold off interrupts for the whole series
        let held =
            (u32::from_le_bytes(bc.saved_holdoff.clone().try_into().expect("4")) + 1).to_le_bytes();
        let holdoff = bc.g.holdoff;
        bc.frame_mut().target().write(holdoff, &held)?;
        crate::config::pause_for_tests("series");
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
        // forgotten even after an error: the backend runs on from here,
        // and an old value written later would be wrong
        self.frame_mut().target().forget_data_words();
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
