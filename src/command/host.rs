//! What a command's `run` is given: the backend (`postgres::Backend`)
//! and the session's own state that `Backend` does not show: numbered
//! breakpoints, frames and their selection, the stop, the listing's
//! place, the session's end.  `session/` implements it (`Session`); the
//! command room cannot name `Session` (session imports command).
//!
//! A new command runs over these and `Backend`'s methods; a method is
//! added here only for a new kind of session state.

use crate::expr::format::Radix;
use crate::perf::profile_opts::ProfileOpts;
use crate::postgres::Backend;
use crate::postgres::backend::Outcome;
use anyhow::Result;

use super::{Command, SymbolKind};
use crate::displays::Displays;

/// A numbered breakpoint as the commands read it (the session's
/// `crate::breakpoints::Breakpoint` holds `Command`s: the command room
/// cannot import it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BreakpointView {
    pub id: u32,
    /// The location as the user typed it.
    pub spec: String,
    pub temporary: bool,
    pub condition: Option<String>,
    /// Hits left to ignore.
    pub ignore: u64,
    /// Its `commands` block's lines as written.
    pub commands: Vec<String>,
    pub enabled: bool,
    /// A watchpoint: the command that sets it (`watch`, `rwatch`,
    /// `awatch`).
    pub watch: Option<&'static str>,
}

/// What a watchpoint stops on (gdb's `watch`, `rwatch`, `awatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchKind {
    Write,
    Read,
    Access,
}

impl WatchKind {
    /// The command that sets it.
    pub fn command(self) -> &'static str {
        match self {
            WatchKind::Write => "watch",
            WatchKind::Read => "rwatch",
            WatchKind::Access => "awatch",
        }
    }
    /// gdb's words when it is set and hit: "Hardware watchpoint 2: x".
    pub fn label(self) -> &'static str {
        match self {
            WatchKind::Write => "Hardware watchpoint",
            WatchKind::Read => "Hardware read watchpoint",
            WatchKind::Access => "Hardware access (read/write) watchpoint",
        }
    }
    /// Its type in `info breakpoints`.
    pub fn table_type(self) -> &'static str {
        match self {
            WatchKind::Write => "hw watchpoint",
            WatchKind::Read => "read watchpoint",
            WatchKind::Access => "acc watchpoint",
        }
    }
}

/// What `next`, `step` and a bare `until` step over.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum LineStep {
    /// `next`: over calls, out-of-line and inlined.
    Next,
    /// `step`: into functions with line info.
    Step,
    /// `until` without an argument: `next` that does not stop at a jump
    /// back (a loop's end).
    Until,
}

pub trait Host: Backend {
    /// `break`/`tbreak`: a numbered breakpoint; its "Breakpoint N at ..." line.
    fn add_breakpoint(
        &mut self,
        location: &str,
        temporary: bool,
        condition: Option<&str>,
    ) -> Result<String>;
    /// `watch`/`rwatch`/`awatch EXPR [if COND]`: gdb's "Hardware
    /// watchpoint N: EXPR".
    fn add_watchpoint(
        &mut self,
        expr: &str,
        kind: WatchKind,
        condition: Option<&str>,
    ) -> Result<String>;
    /// `set var LVALUE = EXPR`: nothing to say on success.
    fn set_var(&mut self, lvalue: &str, expr: &str) -> Result<String>;
    /// Breakpoint `id`'s condition set (None: removed); what to say.
    fn set_condition(&mut self, id: u32, expr: Option<&str>) -> Result<String>;
    /// `delete [N...]` (none: all).
    fn delete_breakpoints(&mut self, ids: &[u32]) -> Result<String>;
    /// `info breakpoints`' table.
    fn info_breakpoints(&self) -> String;
    /// The numbered breakpoints as `save breakpoints` and `source` read
    /// them.
    fn breakpoint_list(&self) -> Vec<BreakpointView>;
    /// The number of the last breakpoint set (gdb's `$bpnum`), deleted
    /// since or not; None before the first.
    fn last_breakpoint(&self) -> Option<u32>;
    /// `enable [N...]` (`on`) or `disable [N...]` (none: all): a disabled
    /// breakpoint's int3s out of the backend, put back when enabled.
    fn enable_breakpoints(&mut self, ids: &[u32], on: bool) -> Result<String>;
    /// `ignore N COUNT`: what to say.
    fn set_ignore(&mut self, id: u32, count: u64) -> Result<String>;
    /// The `display` expressions (shown by the session at each stop).
    fn displays(&mut self) -> &mut Displays;
    /// EXPR in the selected frame as `print` shows it, not kept in the
    /// value history.
    fn value_text(&mut self, expr: &str, radix: Radix) -> Result<String>;
    /// One command of a file `source` runs, as the prompt runs it (each
    /// takes the stop it needs).
    fn execute_sourced(&mut self, cmd: &Command) -> Result<Outcome>;
    /// `info sharedlibrary`'s table.
    fn info_sharedlibrary(&mut self) -> String;
    /// `info` (`info target`): the backend, its build and its state.
    fn info_target(&mut self) -> String;
    /// Stop a backend that runs while the prompt waits.
    fn interrupt(&mut self) -> Result<Outcome>;
    /// Detach: everything pgdbg put into the backend removed.
    fn detach(&mut self) -> Result<String>;

    /// `print EXPR` in the selected frame, into the value history.
    fn print(&mut self, expr: &str, radix: Radix) -> Result<String>;
    /// `printf "FORMAT", ARGS...`
    fn printf(&mut self, format: &str, args: &[String]) -> Result<String>;
    /// `backtrace [N]`
    fn backtrace(&mut self, limit: Option<usize>) -> Result<String>;
    /// How many frames the stopped backend's stack has.
    fn frame_count(&mut self) -> Result<usize>;
    /// The selected frame's level.
    fn selected(&mut self) -> usize;
    /// Select frame `n`; its line as `frame` shows it.
    fn select_frame(&mut self, n: usize) -> Result<String>;
    /// `info frame`
    fn info_frame(&mut self) -> Result<String>;
    /// `info locals` (`params`: `info args`).
    fn info_vars(&mut self, params: bool) -> Result<String>;
    /// `info registers`
    fn info_registers(&mut self) -> Result<String>;
    /// `info address SYM`
    fn info_address(&self, sym: &str) -> Result<String>;
    /// `x/NFU ADDR`: what is not given comes from the last `x`.
    fn examine(
        &mut self,
        count: Option<usize>,
        format: Option<char>,
        unit: Option<char>,
        expr: Option<&str>,
    ) -> Result<String>;
    /// `ptype EXPR|TYPE`
    fn ptype(&mut self, text: &str) -> Result<String>;
    /// `whatis EXPR|TYPE`
    fn whatis(&mut self, text: &str) -> Result<String>;
    /// `info symbol ADDR`
    fn info_symbol(&mut self, expr: &str) -> Result<String>;
    /// `info line FUNCTION|FILE:LINE`
    fn info_line(&self, spec: &str) -> Result<String>;
    /// `info functions|variables [REGEX]`
    fn info_symbols(&self, kind: SymbolKind, regex: Option<&str>) -> Result<String>;
    /// `info types [REGEX]`
    fn info_types(&self, regex: Option<&str>) -> Result<String>;
    /// `list [LOCATION | FIRST,LAST | -]`
    fn list(&mut self, spec: Option<&str>) -> Result<String>;
    /// `directory [DIR]`
    fn directory(&mut self, dir: Option<&str>) -> Result<String>;
    /// `disassemble [/r] [/s] [SPEC]`
    fn disassemble(&mut self, raw: bool, source: bool, spec: Option<&str>) -> Result<String>;
    /// `finish`: run until the selected frame returns.
    fn finish(&mut self) -> Result<Outcome>;
    /// `stepi [N]` (`over`: `nexti [N]`).
    fn step_instructions(&mut self, over: bool, count: u64) -> Result<Outcome>;
    /// `next [N]`, `step [N]`, `until`.
    fn step_lines(&mut self, mode: LineStep, count: u64) -> Result<Outcome>;
    /// `advance LOCATION` (`until`: `until LOCATION`).
    fn advance(&mut self, spec: &str, until: bool) -> Result<Outcome>;
    /// `profile ...`
    fn profile(&mut self, opts: &ProfileOpts) -> Result<Outcome>;
}
