//! `Session` as the `postgres::Backend` the PostgreSQL layer and the probes
//! use: each method hands over to the session's target, debug info,
//! frames and output.

use crate::capture::Event;
use crate::debuginfo::DebugInfo;
use crate::debuginfo::types::TypeRef;
use crate::expr::eval::{Scalar, Value, eval, scalar};
use crate::expr::format::{Radix, format_value, to_json};
use crate::expr::parse::Expr;
use crate::infcall::CallFrame;
use crate::inferior::counter::Counter;
use crate::inferior::recorder::{Record, RecordSpec, Recorder};
use crate::inferior::{Registers, Stop};
use crate::postgres::ProcessKind;
use crate::postgres::backend::{Backend, ProbeHandler, Ran, Sibling};
use crate::runtime;
use crate::session::Session;
use anyhow::Result;
use std::time::Duration;

impl Backend for Session {
    fn di(&self) -> &DebugInfo {
        &self.di
    }
    fn bias(&self) -> u64 {
        self.bias
    }
    fn pid(&self) -> i32 {
        self.pid
    }
    fn process_kind(&self) -> &ProcessKind {
        &self.kind
    }
    fn location_addrs(&self, spec: &str) -> Result<Vec<u64>> {
        Ok(Session::resolve_location(self, spec)?
            .iter()
            .map(|l| l.addr)
            .collect())
    }
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.target.read(addr, buf)
    }
    fn read_many(&self, ranges: &mut [(u64, &mut [u8])]) -> Result<()> {
        Session::read_many(self, ranges)
    }
    fn write_own_field(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.target.write(addr, data)
    }
    fn read_cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>> {
        Ok(self.target.read_cstr(addr, max)?.0)
    }
    fn last_stop(&self) -> Option<Stop> {
        self.last_stop.clone()
    }
    fn registers(&self) -> Result<Registers> {
        Session::registers(self)
    }
    fn frame_functions(&mut self) -> Result<Vec<String>> {
        Ok(self
            .frames()?
            .iter()
            .map(|f| f.function.clone().unwrap_or_default())
            .collect())
    }
    fn quick_stack(&mut self, n: usize) -> Vec<String> {
        Session::quick_stack(self, n)
    }
    fn return_point(&self) -> Option<(u64, u64)> {
        Session::return_point(self)
    }
    fn select_function_frame(&mut self, function: &str) -> Result<()> {
        Session::select_function_frame(self, function)
    }
    fn register_args(
        &mut self,
        function: &str,
        addr: u64,
        args: &[String],
    ) -> Result<Vec<(u16, TypeRef)>> {
        Session::register_args(self, function, addr, args)
    }
    fn show_value(&self, v: &Value) -> (String, serde_json::Value) {
        self.show(v)
    }
    fn resumes(&self) -> u64 {
        self.target.run_count()
    }
    fn eval_text(&mut self, expr: &str) -> Result<(String, serde_json::Value)> {
        let v = self.eval_expr(expr)?;
        Ok((format_value(self, &v, Radix::Natural), to_json(self, &v)))
    }
    fn eval_scalar(&mut self, e: &Expr) -> Result<(Scalar, TypeRef)> {
        // the selected frame's locals, as print finds them (a backend
        // running in the background has no frames: names are globals)
        if !self.background && !self.target.is_gone() {
            let _ = self.frames();
        }
        let v = eval(self, e)?;
        Ok((scalar(self, &v)?, v.ty))
    }
    fn frame_params(
        &mut self,
        functions: &[&str],
        param: &str,
    ) -> Result<Vec<(usize, String, Result<u64>)>> {
        self.frame_scalars(functions, param, true)
    }
    fn frame_values(
        &mut self,
        functions: &[&str],
        name: &str,
    ) -> Result<Vec<(usize, String, Result<u64>)>> {
        self.frame_scalars(functions, name, false)
    }
    fn keep_value(&mut self, v: Value) -> (usize, String, serde_json::Value) {
        let text = format_value(self, &v, Radix::Natural);
        let json = to_json(self, &v);
        self.history.borrow_mut().push(v);
        let n = self.history.borrow().len();
        (n, text, json)
    }
    fn run_briefly(&mut self, d: Duration) -> Result<Option<String>> {
        let deadline = runtime::Deadline::arm(d);
        let regs = self.target.regs()?;
        if self.target.breakpoint_inserted(regs.rip) {
            self.target.step_over_breakpoint(regs.rip)?;
        }
        let stop = if self.sibling {
            self.target.cont_and_wait(&runtime::PeekHooks)?
        } else {
            self.target.cont_and_wait(&runtime::Hooks)?
        };
        drop(deadline);
        match stop {
            Stop::Interrupted | Stop::Breakpoint { .. } => Ok(None),
            other => Ok(Some(self.report_stop(other)?.text)),
        }
    }
    fn arm_internal(&mut self, addr: u64) -> Result<()> {
        Session::arm_internal(self, addr)
    }
    fn disarm_internal(&mut self, addr: u64) -> Result<()> {
        Session::disarm_internal(self, addr)
    }
    fn watch_word(&mut self, addr: u64) -> Result<()> {
        Session::watch_word(self, addr)
    }
    fn unwatch_word(&mut self) -> Result<()> {
        match self.probe_watch.take() {
            Some(slot) => self.target.release_watch(slot),
            None => Ok(()),
        }
    }
    fn run_probes(&mut self, h: &mut dyn ProbeHandler, limit: Option<Duration>) -> Result<Ran> {
        Session::run_probes(self, h, limit)
    }
    fn say(&mut self, line: &str) {
        Session::say(self, line)
    }
    fn emit_event(&mut self, event: Event, ts: Option<f64>) {
        Session::emit_event(self, event, ts)
    }
    fn capturing(&self) -> bool {
        Session::capturing(self)
    }
    fn call_timeout(&self) -> Duration {
        self.call_timeout
    }
    fn is_gone(&self) -> bool {
        self.target.is_gone()
    }
    fn begin_calls(&mut self, traps: &[u64], timeout: Duration) -> Result<CallFrame<'_>> {
        // calls return to the ELF entry point, where nothing else runs
        let entry = self.di.binary.entry() + self.bias;
        CallFrame::begin(&mut self.target, entry, traps, timeout)
    }
    fn register_only_point(&self, entry: u64) -> u64 {
        self.target.register_only_point(entry)
    }
    fn install_recorder(
        &mut self,
        site: u64,
        spec: RecordSpec,
        bodies: &[(u64, Vec<u8>)],
    ) -> Result<Recorder> {
        Recorder::install(&mut self.target, site, spec, bodies).map_err(|e| self.name_foreign(e))
    }
    fn drain_recorder(&mut self, r: &mut Recorder) -> Result<(Vec<Record>, u64)> {
        r.drain(&mut self.target)
    }
    fn remove_recorder(&mut self, r: Recorder) -> Result<bool> {
        r.remove(&mut self.target)
    }
    fn remove_orphan_recorder(&mut self, site: u64, original: &[u8]) -> Result<bool> {
        Recorder::remove_orphan(&mut self.target, site, original)
    }
    fn install_counter(&mut self, site: u64, bodies: &[(u64, Vec<u8>)]) -> Result<Counter> {
        Counter::install(&mut self.target, site, bodies).map_err(|e| self.name_foreign(e))
    }
    fn remove_counter(&mut self, c: Counter) -> Result<bool> {
        c.remove(&mut self.target)
    }
    fn jump_taken_over(&mut self, site: u64) -> Result<bool> {
        Ok(self.target.detour_taken_over(site)?.is_some())
    }
    fn own_code_at(&self, addr: u64) -> Option<String> {
        Session::own_code_at(self, addr)
    }
    fn attach_sibling(&mut self, pid: i32) -> Result<Box<dyn Sibling>> {
        Ok(Box::new(Session::attach_sibling(self, pid)?))
    }
    fn read_untraced(&self, pid: i32, addr: u64, buf: &mut [u8]) -> Result<()> {
        crate::inferior::read_untraced(pid, addr, buf)
    }
    fn stop_requested(&self) -> bool {
        runtime::interrupt_pending() || runtime::must_stop() || runtime::deadline_hit()
    }
}

impl Session {
    /// Parameter (or, unless `params_only`, local variable) `name` of each
    /// frame of `functions`, innermost first.
    fn frame_scalars(
        &mut self,
        functions: &[&str],
        name: &str,
        params_only: bool,
    ) -> Result<Vec<(usize, String, Result<u64>)>> {
        let frames = self.frames()?.clone();
        let mut out = Vec::new();
        for f in &frames {
            let func = f.function.as_deref().unwrap_or("");
            if !functions.contains(&func) {
                continue;
            }
            let vars = self.frame_vars(f);
            let Some(v) = vars
                .iter()
                .find(|v| (v.is_param || !params_only) && v.name == name)
            else {
                continue;
            };
            let val = self.var_value(f, v);
            let got = scalar(self, &val).map(|sc| sc.as_i64() as u64);
            out.push((f.level, func.to_string(), got));
        }
        Ok(out)
    }
}
