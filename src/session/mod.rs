//! A debugging session on one backend: the target, its debug info, the
//! breakpoints, the frames of the current stop, and the commands.  The
//! `impl Session` is spread over this folder by concern:
//!
//! | file | holds |
//! | --- | --- |
//! | `mod.rs` | the struct, construction, output (`say`, capture events), `info`, `detach` |
//! | `execute.rs` | `execute`: one command of the registry (`crate::command`) run |
//! | `breakpoints.rs` | user breakpoints: add, delete, list, conditions |
//! | `locations.rs` | FUNCTION, FILE:LINE and *ADDRESS resolved to code locations |
//! | `run.rs` | `continue`, stops and how they are reported, Ctrl-C |
//! | `stepping.rs` | `finish`, `stepi`/`nexti`, `next`/`step`/`until`, `advance`: temporary internal int3s and single steps |
//! | `nonstop.rs` | the prompt's non-stop mode: the backend runs while the prompt waits, each command takes the stop it needs, `interrupt` |
//! | `probes.rs` | pgdbg's own breakpoints and watchpoints, the probe loop |
//! | `frames.rs` | unwinding, the frames of the current stop, `bt`, `frame` |
//! | `watch.rs` | `watch`/`rwatch`/`awatch` in debug registers (their hits judged and shown), `set var` |
//! | `values.rs` | expressions: `print`, `printf`, `info locals/args/registers/address` |
//! | `modules.rs` | the files mapped into the target (main binary, libraries) |
//! | `backend.rs` | `Session` as the `postgres::Backend` the PostgreSQL layer and its commands (`crate::postgres::commands`) use |
//! | `sibling.rs` | a second process of the same server (a parallel worker) attached for a while from a session |

use crate::arch::regs::FrameRegs;
use crate::breakpoints::{BpLocation, Breakpoints};
use crate::capture::{Encoder, Event};
use crate::command::Command;
use crate::debuginfo::location::{FrameContext, Place, eval_location};
use crate::debuginfo::types::{TypeRef, TypeSource, size_of};
use crate::debuginfo::unwind::{FileKey, Module};
use crate::debuginfo::{DebugInfo, SourceFrame, VarInfo};
use crate::expr::eval::{EvalEnv, ValLoc, Value, eval, scalar};
use crate::expr::format::{Radix, format_value, to_json};
use crate::expr::parse;
use crate::inferior::{Stop, Target, procfs};
use crate::postgres;
use crate::runtime;
use anyhow::{Result, anyhow, bail};
pub use firstcommand::run_to_first_command;
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

mod backend;
mod bpstate;
mod breakpoints;
mod disasm;
mod display;
mod execute;
mod firstcommand;
mod frames;
mod hits;
mod host;
mod inspect;
mod libraries;
mod listing;
mod locations;
mod modules;
mod nonstop;
mod perf;
mod probes;
pub use perf::profile_detached;
mod run;
mod sampled;
mod sibling;
mod stepping;
mod symbols;
mod values;
mod watch;

pub use crate::postgres::backend::{Flow, Outcome, ProbeEnd, ProbeHandler, Ran};
use libraries::Libraries;
use locations::resolve;
pub use locations::{basename, resolve_location};
use modules::Modules;
pub(crate) use modules::compute_bias;

/// One frame of a backtrace: physical frames, with inlined calls expanded.
#[derive(Clone, Debug)]
pub struct Frame {
    pub level: usize,
    /// Runtime pc of the physical frame.
    pub pc: u64,
    /// Runtime address used for lookups (pc, or pc-1 above frame 0).
    pub lookup: u64,
    pub regs: FrameRegs,
    pub cfa: Option<u64>,
    pub phys: usize,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub die: Option<u64>,
    /// This frame is an inlined call inside the next one.
    pub inlined: bool,
    /// DIE of the physical (out-of-line) function, for the frame base.
    pub phys_die: Option<u64>,
    /// Module name for frames outside the postgres binary.
    pub module: Option<String>,
    /// The shared library (its number in the session's list) whose debug
    /// info describes this frame; None: the postgres binary.
    pub lib: Option<usize>,
    /// ELF symbol and offset of pc.
    pub symbol: Option<(String, u64)>,
}

/// What pgdbg derived from the current stop: its frames and the selected
/// one.  It belongs to one stop of the target (`Target::run_count`): once
/// the target has run (continue, a probe's hit, an inferior call, detach),
/// `Session::stop_state` starts afresh, so no cache is invalidated by hand.
/// (Only a partial unwind that stands in for the frames, e.g. at a
/// condition's evaluation, is dropped explicitly with `forget`.)
#[derive(Default)]
pub(crate) struct StopState {
    run: u64,
    frames: Option<Vec<Frame>>,
    selected: usize,
    /// A step (`stepping.rs`) ended at the start of a line: frame 0's
    /// line is shown without its address, as gdb does.
    line_start: bool,
    /// A step (`stepping.rs`) ended at the call site of inlined code it
    /// entered: this many inlined frames are not shown (gdb's "skipped"
    /// inline frames), frame 0 is the caller at the call's line.
    hide_inline: usize,
}

impl StopState {
    /// Drop the frames (and the selection) of this stop: the next reader
    /// unwinds the whole stack afresh (a condition's evaluation or a probe
    /// may have cached a partial unwind that is not the stop's frames).
    fn forget(&mut self) {
        self.frames = None;
        self.selected = 0;
    }
}

/// How a session behaves, fixed when it is made.
#[derive(Debug, Clone, Copy)]
pub struct SessionOptions {
    /// How long an inferior call may take before it is abandoned.
    pub call_timeout: std::time::Duration,
    /// `--count N` of a script: stop after N breakpoint hits.
    pub hit_limit: Option<u64>,
    /// `--capture-hits`: a `stop` event for every hit of a silent
    /// breakpoint, not counts (`hits.rs`).
    pub capture_hits: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            call_timeout: std::time::Duration::from_secs(5),
            hit_limit: None,
            capture_hits: false,
        }
    }
}

pub struct Session {
    pub pid: i32,
    pub target: Target,
    pub di: Rc<DebugInfo>,
    pub bias: u64,
    pub exe_path: PathBuf,
    pub pg_version: Option<String>,
    pub kind: postgres::ProcessKind,
    modules: Modules,
    /// Shared objects mapped into the backend, with their debug info.
    libs: RefCell<Libraries>,
    /// Breakpoints waiting for a library that defines their function.
    pending: Vec<u32>,
    /// The dynamic linker's hook, while pending breakpoints need it.
    dl_hook: Option<u64>,
    pub bps: Breakpoints,
    /// pgdbg's own breakpoints (probes), with a use count.
    internal: std::collections::BTreeMap<u64, u32>,
    /// What was derived from the current stop (frames, the selected one).
    stop: StopState,
    history: RefCell<Vec<Value>>,
    /// `display EXPR`: shown at each stop (`display.rs`).
    displays: crate::displays::Displays,
    /// Where the session's lines, warnings and capture events go
    /// (`runtime/sink.rs`): made with the capture file, if any, installed
    /// as the current sink while the session lives (`_installed`).
    sink: crate::runtime::Sink,
    _installed: crate::runtime::Installed,
    /// Makes the capture's lines of this session's events.
    encoder: Encoder,
    pub last_stop: Option<Stop>,
    /// How long an inferior call may take before it is abandoned.
    call_timeout: std::time::Duration,
    /// At a breakpoint stop: the breakpoints whose condition held, with
    /// their `commands` blocks (taken before a temporary breakpoint is
    /// deleted by its stop).  None: not known, all breakpoints there count.
    hit: Option<Vec<(u32, Vec<Command>)>>,
    /// The debug-register slot `waits trace --ptrace` holds while it runs.
    probe_watch: Option<usize>,
    /// `--count N` of a script: stop after N breakpoint hits.
    hit_limit: Option<u64>,
    /// Breakpoint hits counted against `hit_limit`.
    pub hits_total: u64,
    /// A `stop` event for every hit of a silent breakpoint (`hits.rs`).
    capture_hits: bool,
    /// Hits of silent breakpoints counted for the capture.
    silent_hits: hits::SilentHits,
    /// The prompt's non-stop mode (`nonstop.rs`): the backend runs while
    /// the prompt waits.
    nonstop: bool,
    /// The backend runs in the background (resumed by pgdbg, no command
    /// waiting for its stop).
    background: bool,
    /// A command taken out of the background runs: the backend runs on
    /// after it, so a Ctrl-C that ends it is no stop to show (its location
    /// is not looked up: the first one loads a library's debug info).
    resumes_after: bool,
    /// What a bare `x` goes on from: the last format, unit, count, address.
    examine_last: crate::expr::examine::Last,
    /// The file and lines the last `list` showed (a bare `list` goes on).
    listed: Option<listing::Listed>,
    /// `directory DIR`: where source files are looked for, before the
    /// path the debug info gives.
    source_dirs: Vec<std::path::PathBuf>,
    /// `info`'s CPU state line, read at a stop (it needs one).
    cpu_state: Option<String>,
    /// A second process attached for a while by a command on another
    /// session (`sibling.rs`): its waits leave Ctrl-C to that command.
    sibling: bool,
}

impl Session {
    /// The state of the current stop, fresh if the target ran since it was
    /// made.
    pub(crate) fn stop_state(&mut self) -> &mut StopState {
        let run = self.target.run_count();
        if self.stop.run != run {
            self.stop = StopState {
                run,
                ..StopState::default()
            };
        }
        &mut self.stop
    }

    /// The current stop's state, if still valid (for `&self` readers).
    fn stop_state_ref(&self) -> Option<&StopState> {
        (self.stop.run == self.target.run_count()).then_some(&self.stop)
    }

    /// A script's `--count N` breakpoint hits were reached.
    pub fn hit_limit_reached(&self) -> bool {
        self.hit_limit.is_some_and(|l| self.hits_total >= l)
    }

    /// The selected frame's number at this stop.
    pub(crate) fn selected(&mut self) -> usize {
        self.stop_state().selected
    }

    pub fn new(
        pid: i32,
        target: Target,
        di: Rc<DebugInfo>,
        exe_path: PathBuf,
        kind: postgres::ProcessKind,
        sink: crate::runtime::Sink,
        opts: SessionOptions,
    ) -> Result<Session> {
        let pg_version = postgres::version_string(di.binary.data);
        let bias = compute_bias(pid, &di)?;
        let mut s = Session {
            pid,
            target,
            di,
            bias,
            exe_path,
            pg_version,
            kind,
            modules: Modules::new(pid, bias),
            libs: RefCell::new(Libraries::default()),
            pending: Vec::new(),
            dl_hook: None,
            bps: Breakpoints::default(),
            internal: std::collections::BTreeMap::new(),
            stop: StopState::default(),
            history: RefCell::new(Vec::new()),
            displays: Default::default(),
            _installed: sink.install(),
            sink,
            encoder: Encoder::default(),
            last_stop: Some(Stop::Interrupted),
            call_timeout: opts.call_timeout,
            hit: None,
            probe_watch: None,
            hit_limit: opts.hit_limit,
            hits_total: 0,
            capture_hits: opts.capture_hits,
            silent_hits: hits::SilentHits::default(),
            nonstop: false,
            background: false,
            resumes_after: false,
            examine_last: Default::default(),
            listed: None,
            source_dirs: Vec::new(),
            cpu_state: None,
            sibling: false,
        };
        s.sync_libraries();
        s.emit(Event::attach(
            s.pg_version.clone(),
            s.exe_path.display().to_string(),
            s.di.build_id.clone(),
        ));
        Ok(s)
    }

    fn emit(&mut self, event: Event) {
        self.emit_event(event, None);
    }

    fn module_for(&self, addr: u64) -> Option<&Module> {
        self.modules.find(addr)
    }

    fn in_main(&self, addr: u64) -> bool {
        self.module_for(addr)
            .is_some_and(|m| m.main && m.bias == self.bias)
    }

    /// With a layout pack instead of DWARF: check it against live data
    /// (`MyProc->pid` must be this PID) before trusting any answer.
    pub fn check_pack(&self) -> Result<()> {
        let Some(pack) = &self.di.pack else {
            return Ok(());
        };
        let l = crate::debuginfo::layout::Layout::of(&*self.di, "PGPROC")?;
        let (myproc, _) = self.di.global("MyProc").ok_or_else(|| {
            anyhow!("MyProc is not exported by this binary: the layout pack cannot be checked")
        })?;
        let p = self.target.read_u64(myproc + self.bias)?;
        let mut b = [0u8; 4];
        self.target.read(p + l.offset("pid")?, &mut b)?;
        let got = i32::from_le_bytes(b);
        // PostgreSQL stores the PID of its own namespace (a container's)
        let expected = crate::inferior::procfs::ns_pid(self.pid);
        if got != expected {
            bail!(
                "the layout pack for PostgreSQL {} does not match this binary (MyProc->pid reads {got}, expected {}): give the pack of this exact major with --symbols, or the debug info",
                pack.major,
                expected
            );
        }
        Ok(())
    }

    /// Several target memory ranges in one system call.
    pub fn read_many(&self, ranges: &mut [(u64, &mut [u8])]) -> Result<()> {
        self.target.read_many(ranges)
    }

    /// Registers at the current stop.
    pub fn registers(&self) -> Result<crate::inferior::Registers> {
        self.target.regs()
    }

    /// Write a line of probe output now (not buffered until the command ends).
    pub fn say(&mut self, line: &str) {
        self.sink.line(line);
    }

    /// Append `event` to the capture, if there is one, at `ts` (None: now).
    pub fn emit_event(&mut self, event: Event, ts: Option<f64>) {
        let (encoder, pid) = (&mut self.encoder, self.pid);
        self.sink.event(|| encoder.line(event, ts, pid));
    }

    /// Whether the session writes a capture.
    pub fn capturing(&self) -> bool {
        self.sink.capturing()
    }

    /// The session's sink (`runtime/sink.rs`).
    pub fn sink(&self) -> &crate::runtime::Sink {
        &self.sink
    }

    /// Write the counted hits of silent breakpoints (`hits.rs`).
    fn write_silent_hits(&mut self) {
        for e in self.silent_hits.take() {
            self.emit(e);
        }
    }

    /// Restore the backend and detach.
    pub fn detach(&mut self) -> Result<String> {
        self.write_silent_hits();
        self.internal.clear();
        // the hook's int3 goes with every other one in Target::detach
        self.dl_hook = None;
        self.pending.clear();
        let n = self.bps.all_addresses().len();
        self.bps = Breakpoints::default();
        let gone = self.target.is_gone();
        self.target.detach()?;
        self.emit(Event::Detach);
        self.sink.flush_capture();
        if gone {
            Ok(format!("Backend {} is gone.", self.pid))
        } else {
            let removed = if n > 0 {
                format!(
                    " ({n} breakpoint location{} removed)",
                    if n == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            };
            Ok(format!(
                "Detached from backend {}{removed}; it runs as before.",
                self.pid
            ))
        }
    }

    pub fn info(&mut self) -> String {
        let state = if self.target.is_gone() {
            "gone".to_string()
        } else if self.background {
            "running (the prompt does not stop it; 'interrupt' or Ctrl-C does)".to_string()
        } else {
            match &self.last_stop {
                Some(Stop::Breakpoint { .. }) => {
                    let f = self.frame_line(0, false).unwrap_or_default();
                    format!("stopped at a breakpoint: {f}")
                }
                Some(Stop::Signal(s)) => format!("stopped by signal {s:?}"),
                _ => "stopped (interrupted)".to_string(),
            }
        };
        if self.cpu_state.is_none() && self.target.is_stopped() {
            self.cpu_state = Some(match crate::inferior::xstate::XState::save(self.pid) {
                Ok(x) => format!("{} saved around each call", x.describe()),
                Err(e) => format!("{e:#}"),
            });
        }
        let kind = match &self.kind {
            postgres::ProcessKind::ClientBackend { title } => format!("client backend ({title})"),
            postgres::ProcessKind::Auxiliary { role } => format!("{role} (not a client backend)"),
            _ => "?".into(),
        };
        format!(
            "pid:         {}{}\nprocess:     {kind}\npostgres:    {}\nbinary:      {}\nbuild-id:    {}\ndebug info:  {}{}\nindex:       {} functions, {} globals, {} types ({})\nload bias:   {:#x}\ncpu state:   {}\nbreakpoints: {}\nstate:       {state}",
            self.pid,
            // a container's process: the PID PostgreSQL there shows too
            match crate::inferior::procfs::ns_pid(self.pid) {
                ns if ns != self.pid => format!(" (PID {ns} in its namespace)"),
                _ => String::new(),
            },
            self.pg_version
                .clone()
                .unwrap_or_else(|| "unknown version".into()),
            self.exe_path.display(),
            if self.di.build_id.is_empty() {
                "none"
            } else {
                &self.di.build_id
            },
            self.di.source,
            match &self.di.pack {
                // a release build that keeps its symbol table names its
                // static functions too (e.g. choose_custom_plan)
                Some(_) if object::Object::symbol_table(&self.di.binary.file).is_some() => {
                    "\n             without DWARF: no locals/parameters, source lines or inlined frames, no prepared-statement names in plancache, no ERROR messages from calls (static functions named by the symbol table)"
                }
                Some(_) => {
                    "\n             without DWARF: no locals/parameters, source lines or inlined frames, no static functions (break on exported ones), no prepared-statement names in plancache, no ERROR messages from calls"
                }
                None => "",
            },
            self.di.index.functions.len(),
            self.di.index.globals.len(),
            self.di.index.types.len(),
            if self.di.index_from_cache {
                "from cache"
            } else {
                "built now"
            },
            self.bias,
            self.cpu_state
                .as_deref()
                .unwrap_or("not read yet (it is read at a stop)"),
            self.bps.list.len(),
        )
    }
}
