//! The session as the commands see it (`command::Host`): each method is
//! the session's own implementation.
use super::*;
use crate::command::{BreakpointView, Host, SymbolKind};
use crate::perf::profile_opts::ProfileOpts;

impl Host for Session {
    fn finish(&mut self) -> Result<Outcome> {
        Session::finish(self)
    }
    fn step_instructions(&mut self, over: bool, count: u64) -> Result<Outcome> {
        Session::step_instructions(self, over, count)
    }
    fn step_lines(&mut self, mode: crate::command::LineStep, count: u64) -> Result<Outcome> {
        Session::step_lines(self, mode, count)
    }
    fn advance(&mut self, spec: &str, until: bool) -> Result<Outcome> {
        Session::advance(self, spec, until)
    }
    fn add_breakpoint(
        &mut self,
        location: &str,
        temporary: bool,
        condition: Option<&str>,
    ) -> Result<String> {
        Session::add_breakpoint(self, location, temporary, condition)
    }
    fn add_watchpoint(
        &mut self,
        expr: &str,
        kind: crate::command::WatchKind,
        condition: Option<&str>,
    ) -> Result<String> {
        Session::add_watchpoint(self, expr, kind, condition)
    }
    fn set_var(&mut self, lvalue: &str, expr: &str) -> Result<String> {
        Session::set_var(self, lvalue, expr)
    }
    fn set_condition(&mut self, id: u32, expr: Option<&str>) -> Result<String> {
        if let Some(e) = expr {
            let di = self.di.clone();
            parse::parse_in(e, &di)?;
        }
        let b = self
            .bps
            .get_mut(id)
            .ok_or_else(|| anyhow!("No breakpoint number {id}."))?;
        b.condition = expr.map(str::to_string);
        Ok(match expr {
            Some(_) => String::new(),
            None => format!("Breakpoint {id} now unconditional."),
        })
    }
    fn delete_breakpoints(&mut self, ids: &[u32]) -> Result<String> {
        Session::delete_breakpoints(self, ids)
    }
    fn info_breakpoints(&self) -> String {
        Session::info_breakpoints(self)
    }
    fn breakpoint_list(&self) -> Vec<BreakpointView> {
        self.bps
            .list
            .iter()
            .map(|b| BreakpointView {
                id: b.id,
                spec: b.spec.clone(),
                temporary: b.temporary,
                condition: b.condition.clone(),
                ignore: b.ignore,
                commands: b.commands_text.clone(),
                enabled: b.enabled,
                watch: b.watch.as_ref().map(|w| w.kind.command()),
            })
            .collect()
    }
    fn last_breakpoint(&self) -> Option<u32> {
        self.bps.last_id()
    }
    fn enable_breakpoints(&mut self, ids: &[u32], on: bool) -> Result<String> {
        Session::enable_breakpoints(self, ids, on)
    }
    fn set_ignore(&mut self, id: u32, count: u64) -> Result<String> {
        Session::set_ignore(self, id, count)
    }
    fn displays(&mut self) -> &mut crate::displays::Displays {
        &mut self.displays
    }
    fn value_text(&mut self, expr: &str, radix: Radix) -> Result<String> {
        Session::value_text(self, expr, radix)
    }
    fn execute_sourced(&mut self, cmd: &Command) -> Result<Outcome> {
        Session::execute_at_prompt(self, cmd)
    }
    fn info_sharedlibrary(&mut self) -> String {
        Session::info_sharedlibrary(self)
    }
    fn info_target(&mut self) -> String {
        Session::info(self)
    }
    fn interrupt(&mut self) -> Result<Outcome> {
        Session::interrupt(self)
    }
    fn detach(&mut self) -> Result<String> {
        Session::detach(self)
    }
    fn print(&mut self, expr: &str, radix: Radix) -> Result<String> {
        Session::print(self, expr, radix)
    }
    fn printf(&mut self, format: &str, args: &[String]) -> Result<String> {
        Session::printf(self, format, args)
    }
    fn backtrace(&mut self, limit: Option<usize>) -> Result<String> {
        Session::backtrace(self, limit)
    }
    fn frame_count(&mut self) -> Result<usize> {
        Ok(self.frames()?.len())
    }
    fn selected(&mut self) -> usize {
        Session::selected(self)
    }
    fn select_frame(&mut self, n: usize) -> Result<String> {
        Session::select_frame(self, n)
    }
    fn info_frame(&mut self) -> Result<String> {
        let _ = self.frames()?;
        let f = self
            .selected_frame()
            .cloned()
            .ok_or_else(|| anyhow!("no frame"))?;
        Ok(format!(
            "Stack level {}, frame at {}:\n rip = {:#x} in {}{}\n {}",
            f.level,
            f.cfa
                .map(|c| format!("{c:#x}"))
                .unwrap_or_else(|| "?".into()),
            f.pc,
            f.function.clone().unwrap_or_else(|| "??".into()),
            match (&f.file, f.line) {
                (Some(fl), Some(l)) => format!(" ({}:{l})", basename(fl)),
                _ => String::new(),
            },
            if f.inlined {
                "inlined into the frame above"
            } else {
                "physical frame"
            }
        ))
    }
    fn info_vars(&mut self, params: bool) -> Result<String> {
        Session::info_vars(self, params)
    }
    fn info_registers(&mut self) -> Result<String> {
        Session::info_registers(self)
    }
    fn info_address(&self, sym: &str) -> Result<String> {
        Session::info_address(self, sym)
    }
    fn examine(
        &mut self,
        count: Option<usize>,
        format: Option<char>,
        unit: Option<char>,
        expr: Option<&str>,
    ) -> Result<String> {
        Session::examine(self, count, format, unit, expr)
    }
    fn ptype(&mut self, text: &str) -> Result<String> {
        Session::ptype(self, text)
    }
    fn whatis(&mut self, text: &str) -> Result<String> {
        Session::whatis(self, text)
    }
    fn info_symbol(&mut self, expr: &str) -> Result<String> {
        Session::info_symbol(self, expr)
    }
    fn info_line(&self, spec: &str) -> Result<String> {
        Session::info_line(self, spec)
    }
    fn info_symbols(&self, kind: SymbolKind, regex: Option<&str>) -> Result<String> {
        Session::info_symbols(self, kind, regex)
    }
    fn info_types(&self, regex: Option<&str>) -> Result<String> {
        Session::info_types(self, regex)
    }
    fn list(&mut self, spec: Option<&str>) -> Result<String> {
        Session::list(self, spec)
    }
    fn directory(&mut self, dir: Option<&str>) -> Result<String> {
        Session::directory(self, dir)
    }
    fn disassemble(&mut self, raw: bool, source: bool, spec: Option<&str>) -> Result<String> {
        Session::disassemble(self, raw, source, spec)
    }
    fn profile(&mut self, opts: &ProfileOpts) -> Result<Outcome> {
        Session::profile(self, opts)
    }
}
