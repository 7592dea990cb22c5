//! What the PostgreSQL layer (and the generic probes) may do to a traced
//! backend, as one trait: read its memory, look up symbols and struct
//! layouts, look at the registers and frames of the current stop, arm
//! pgdbg's own breakpoints and a watched word, run probes, write output,
//! and use the two mechanisms that own target state (inferior call frames
//! and the in-process recorder).  The PostgreSQL commands' entry points
//! (`commands/`) also evaluate expressions, keep values in the value
//! history and let the backend run briefly through it.
//!
//! `Session` implements it (`session/backend.rs`); nothing under
//! `postgres/` sees `Session` itself.  The unit tests implement it over an
//! in-memory memory map (`fake`), so the plan-cache, wait and `plan` logic
//! is tested without a live process, the way rbspy tests its interpreter
//! knowledge on core dumps.
//!
//! Addresses given and returned are runtime addresses (link address plus
//! the load bias).

use crate::capture::Event;
use crate::debuginfo::DebugInfo;
use crate::debuginfo::layout::Layout;
use crate::debuginfo::types::TypeRef;
use crate::expr::eval::{Scalar, Value};
use crate::expr::parse::Expr;
use crate::infcall::CallFrame;
use crate::inferior::counter::Counter;
use crate::inferior::recorder::{Record, RecordSpec, Recorder};
use crate::inferior::{Registers, Stop};
use crate::postgres::ProcessKind;
use anyhow::Result;
use std::time::Duration;

/// The NUL-terminated string at `addr` (without the NUL), at most `max`
/// bytes, read through `read` in pieces that do not cross a page (a
/// string that ends before an unmapped page reads whole).
pub fn read_cstr_with(
    read: &dyn Fn(u64, &mut [u8]) -> Result<()>,
    addr: u64,
    max: usize,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut a = addr;
    while out.len() < max {
        let n = (4096 - (a as usize & 4095)).min(max - out.len()).min(256);
        let mut b = vec![0u8; n];
        read(a, &mut b)?;
        if let Some(p) = b.iter().position(|&c| c == 0) {
            out.extend_from_slice(&b[..p]);
            return Ok(out);
        }
        out.extend_from_slice(&b);
        a += n as u64;
    }
    Ok(out)
}

/// The traced backend, as the PostgreSQL layer and the probes reach it.
pub trait Backend {
    // ------------------------------------------------------------ symbols

    /// The binary's debug info (DWARF, or ELF symbols plus a layout pack).
    fn di(&self) -> &DebugInfo;
    /// Load bias of the main binary: runtime address = link address + bias.
    fn bias(&self) -> u64;
    /// The backend's process id.
    fn pid(&self) -> i32;
    /// What kind of PostgreSQL process the backend is.
    fn process_kind(&self) -> &ProcessKind;
    /// Runtime address of the global variable `name`.
    fn global_addr(&self, name: &str) -> Option<u64> {
        self.di().global(name).map(|(a, _)| a + self.bias())
    }
    /// Runtime addresses of the out-of-line copies of function `name`.
    fn function_addrs(&self, name: &str) -> Vec<u64> {
        self.di()
            .function_locations(name)
            .iter()
            .filter(|l| !l.inlined)
            .map(|l| l.addr + self.bias())
            .collect()
    }
    /// The layout of struct `name` (DWARF or pack; never a typed-in offset).
    fn layout(&self, name: &str) -> Result<Layout> {
        Layout::of(self.di(), name)
    }
    /// Runtime addresses of FUNCTION, FILE:LINE or *ADDRESS, as `break` resolves it.
    fn location_addrs(&self, spec: &str) -> Result<Vec<u64>>;

    // ------------------------------------------------------------- memory

    /// Read `buf.len()` bytes at `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()>;
    /// Read several ranges at once (one system call on a live process).
    fn read_many(&self, ranges: &mut [(u64, &mut [u8])]) -> Result<()> {
        for (a, b) in ranges.iter_mut() {
            self.read(*a, b)?;
        }
        Ok(())
    }
    /// `len` bytes at `addr`.
    fn read_bytes(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        let mut b = vec![0u8; len];
        self.read(addr, &mut b)?;
        Ok(b)
    }
    /// A little-endian u64 at `addr`.
    fn read_u64(&self, addr: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// A little-endian i32 at `addr`.
    fn read_i32(&self, addr: u64) -> Result<i32> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(i32::from_le_bytes(b))
    }
    /// The NUL-terminated string at `addr` (without the NUL), at most
    /// `max` bytes; read a page at a time, so a string that ends before
    /// an unmapped page reads whole.
    fn read_cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>> {
        read_cstr_with(&|a, b| self.read(a, b), addr, max)
    }

    /// Write a value into the stopped backend's own data: a field it reads
    /// later (`QueryDesc.instrument_options` at executor start).  Only for
    /// fields whose whole life the caller knows (see `postgres::analyze`).
    fn write_own_field(&mut self, addr: u64, data: &[u8]) -> Result<()>;

    // ----------------------------------------------------------- the stop

    /// Why the backend is stopped now (None: not stopped by pgdbg yet).
    fn last_stop(&self) -> Option<Stop>;
    /// Registers at the current stop.
    fn registers(&self) -> Result<Registers>;
    /// Function names of the current stop's frames, innermost first ("" when unknown).
    fn frame_functions(&mut self) -> Result<Vec<String>>;
    /// The innermost `n` physical frames as `function+offset` (ELF symbols, cheap).
    fn quick_stack(&mut self, n: usize) -> Vec<String>;
    /// Where the stopped function returns to: (return address, stack pointer after it).
    fn return_point(&self) -> Option<(u64, u64)>;
    /// Select the innermost frame of `function` for `eval_text`.
    fn select_function_frame(&mut self, function: &str) -> Result<()>;
    /// Evaluate a C expression in the selected frame: (text as `print` shows it, JSON).
    fn eval_text(&mut self, expr: &str) -> Result<(String, serde_json::Value)>;
    /// Evaluate a parsed C expression in the selected frame to a scalar,
    /// with the type of the value it came from.
    fn eval_scalar(&mut self, e: &Expr) -> Result<(Scalar, TypeRef)>;
    /// Parameter `param` of each frame of the current stop whose function
    /// is one of `functions`, innermost first: (frame number, function,
    /// its value or why the debug info cannot give it here).
    fn frame_params(
        &mut self,
        functions: &[&str],
        param: &str,
    ) -> Result<Vec<(usize, String, Result<u64>)>>;
    /// `trace --perf`: the DWARF register that holds each ARGEXPR where
    /// the backend enters `function` at `addr`, and its type; Err: why
    /// one needs more than the registers.
    fn register_args(
        &mut self,
        function: &str,
        _addr: u64,
        _args: &[String],
    ) -> Result<Vec<(u16, TypeRef)>> {
        anyhow::bail!("no debug info to map the arguments of {function} to registers")
    }
    /// A value as `print` shows it, and its JSON (not kept in the history).
    fn show_value(&self, v: &Value) -> (String, serde_json::Value) {
        (format!("{:?}", v.loc), serde_json::Value::Null)
    }
    /// Keep `v` in the value history: (its number N for `$N`, its text as
    /// `print` shows it, its JSON).
    fn keep_value(&mut self, v: Value) -> (usize, String, serde_json::Value);

    // ---------------------------------------------- breakpoints and probes

    /// Arm one of pgdbg's own breakpoints (counted: nested users share it).
    fn arm_internal(&mut self, addr: u64) -> Result<()>;
    /// Disarm it (removed when its last user disarms it).
    fn disarm_internal(&mut self, addr: u64) -> Result<()>;
    /// Arm a 4-byte write watchpoint on `addr`.
    fn watch_word(&mut self, addr: u64) -> Result<()>;
    /// Give back the register `watch_word` took (nothing when none).
    fn unwatch_word(&mut self) -> Result<()>;
    /// Let the backend run for about `d`, then stop it again (stepping
    /// over a breakpoint it sits on first).  None when it stopped so (or at
    /// a breakpoint); else the report of the stop that came instead (the
    /// backend exited, a signal).
    fn run_briefly(&mut self, d: Duration) -> Result<Option<String>>;
    /// How many times the backend was resumed so far: the difference over
    /// a run, less one, is the stops it made (kernel probes: none).
    fn resumes(&self) -> u64 {
        0
    }
    /// Run the backend, calling `h` at its stops, until `h` is done, `limit`, Ctrl-C or a stop.
    fn run_probes(&mut self, h: &mut dyn ProbeHandler, limit: Option<Duration>) -> Result<Ran>;

    // ------------------------------------------------------------- output

    /// Write a line of output now.
    fn say(&mut self, line: &str);
    /// Append an event to the capture file, if there is one, at `ts`
    /// (seconds since the epoch; None: now).
    fn emit_event(&mut self, event: Event, ts: Option<f64>);
    /// Whether events are captured (to skip building them otherwise).
    fn capturing(&self) -> bool;

    // ----------------------------------- calls and the in-process recorder

    /// How long an inferior call may take before it is abandoned.
    fn call_timeout(&self) -> Duration;
    /// The backend has exited.
    fn is_gone(&self) -> bool;
    /// Save the stopped backend's state for a series of calls (`traps` end a call early).
    fn begin_calls(&mut self, traps: &[u64], timeout: Duration) -> Result<CallFrame<'_>>;
    /// A point just past function entry `entry` where only registers have changed.
    fn register_only_point(&self, entry: u64) -> u64;
    /// Put an in-process recorder at `site` (`bodies`: the function's code).
    fn install_recorder(
        &mut self,
        site: u64,
        spec: RecordSpec,
        bodies: &[(u64, Vec<u8>)],
    ) -> Result<Recorder>;
    /// Take the calls `r` recorded since the last drain, and how many it dropped.
    fn drain_recorder(&mut self, r: &mut Recorder) -> Result<(Vec<Record>, u64)>;
    /// Take the recorder out; false when its pages had to stay mapped.
    fn remove_recorder(&mut self, r: Recorder) -> Result<bool>;
    /// Undo a recorder or call counter an earlier pgdbg left at `site`
    /// (`original`: the file's bytes there).
    fn remove_orphan_recorder(&mut self, site: u64, original: &[u8]) -> Result<bool>;
    /// Put an in-process call counter at `site`, a function's entry
    /// (`bodies`: the function's code).
    fn install_counter(&mut self, _site: u64, _bodies: &[(u64, Vec<u8>)]) -> Result<Counter> {
        anyhow::bail!("no in-process counter here")
    }
    /// Take the counter out; false when its pages had to stay mapped.
    fn remove_counter(&mut self, _c: Counter) -> Result<bool> {
        Ok(true)
    }
    /// Whether someone else's kernel uprobe took over the jump of the
    /// in-process counter or recorder at `site` (it counts or records no
    /// more since); the target stopped.
    fn jump_taken_over(&mut self, _site: u64) -> Result<bool> {
        Ok(false)
    }
    /// What of pgdbg's own is written into the code at `addr` now (an
    /// int3: "breakpoint 2"; the recorder's jump), None when nothing is.
    fn own_code_at(&self, addr: u64) -> Option<String>;

    // ------------------------------------------ other processes of the server

    /// Attach, from this pgdbg, to process `pid` of the same server binary
    /// (a parallel worker of this backend) for a while: a backend of its
    /// own, with the same safety (seized, stopped, restored and detached on
    /// every way out), let go with `Sibling::detach`.  This backend is left
    /// as it is (running or stopped).
    fn attach_sibling(&mut self, pid: i32) -> Result<Box<dyn Sibling>> {
        anyhow::bail!("process {pid} cannot be attached from here")
    }
    /// Read memory of process `pid`, which is not traced (nothing in it is
    /// stopped or changed).
    fn read_untraced(&self, pid: i32, addr: u64, _buf: &mut [u8]) -> Result<()> {
        anyhow::bail!("cannot read {addr:#x} of process {pid} from here")
    }
    /// Ctrl-C, SIGTERM or a deadline asks the command running now to end
    /// (work of its own between the backend's stops looks here).
    fn stop_requested(&self) -> bool {
        false
    }
    /// Like `frame_params`, for a parameter or a local variable `name`.
    fn frame_values(
        &mut self,
        functions: &[&str],
        name: &str,
    ) -> Result<Vec<(usize, String, Result<u64>)>> {
        self.frame_params(functions, name)
    }
}

/// Why no kernel uprobe may go at `addr` (in function `f`) now: pgdbg has
/// written code of its own there.  The kernel takes an int3 it finds at a
/// uprobe's address for its own (its traps go to the uprobe, not to
/// pgdbg) and writes the file's byte over it when the uprobe goes, so the
/// breakpoint would silently be gone; over the recorder's jump a uprobe
/// would run the displaced instruction and come back into the middle of
/// the jump.  None when a uprobe may go there.
pub fn uprobe_conflict(s: &dyn Backend, addr: u64, f: &str) -> Option<String> {
    let own = s.own_code_at(addr)?;
    Some(format!(
        "{own} is at {f} ({addr:#x}), and a kernel uprobe on the same instruction would take over pgdbg's code there and remove it when done"
    ))
}

/// The code of the out-of-line copy of function `f` whose entry is at
/// `a` (its .cold and .part pieces too), for a detour there: nothing in
/// it may branch into the bytes the jump overwrites.  Err says why `a`
/// takes no detour: it is not the entry of a copy of `f` (an inlined
/// call), or no symbol gives its size.
pub fn entry_code(s: &dyn Backend, f: &str, a: u64) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let (di, bias) = (s.di(), s.bias());
    let sym = match di.symbol_at(a.wrapping_sub(bias)) {
        Some((sym, 0))
            if sym.is_func
                && sym.size > 0
                && (sym.name == f || crate::debuginfo::is_entry_clone_of(&sym.name, f)) =>
        {
            sym
        }
        _ => {
            return Err(format!(
                "{f} at {a:#x} is not the entry of a copy of it (an inlined call)"
            ));
        }
    };
    let mut bodies = Vec::new();
    let part = format!("{}.", sym.name);
    for x in di
        .symbols
        .iter()
        .filter(|x| x.is_func && x.size > 0 && (x.name == sym.name || x.name.starts_with(&part)))
    {
        let mut b = vec![0u8; x.size.min(1 << 20) as usize];
        s.read(x.addr + bias, &mut b)
            .map_err(|e| format!("cannot read {f}'s code: {e:#}"))?;
        bodies.push((x.addr + bias, b));
    }
    Ok(bodies)
}

/// Jumps an earlier pgdbg left at the entries of `functions` (the
/// in-process counter or recorder of one killed together with its
/// guardian, its record gone too): taken out before anything else goes
/// there.  A kernel uprobe on such a jump would make the backend run the
/// jump's rel32 bytes as code, which traps (SIGILL) in a backend no one
/// traces: it would die.  Only a jump pgdbg recognises as its own is
/// touched (`Recorder::remove_orphan`).  `what` starts the line said.
pub fn clear_orphans<S: AsRef<str>>(
    s: &mut dyn Backend,
    functions: &[S],
    what: &str,
) -> Result<()> {
    for f in functions {
        let f = f.as_ref();
        for e in s.function_addrs(f) {
            let Some(orig) = s
                .di()
                .binary
                .bytes_at(e.wrapping_sub(s.bias()), 16)
                .map(|b| b.to_vec())
            else {
                continue;
            };
            let mut now = [0u8; 1];
            if orig[0] == 0xe9 || s.read(e, &mut now).is_err() || now[0] != 0xe9 {
                continue;
            }
            if s.remove_orphan_recorder(e, &orig)? {
                s.say(&format!(
                    "{what}: removed the in-process counter or recorder an earlier pgdbg left at {f} ({e:#x}) in this backend (killed with SIGKILL?)"
                ));
            }
        }
    }
    Ok(())
}

/// Another process of the server attached by the same pgdbg for a while
/// (`Backend::attach_sibling`).  Dropped without `detach`, it is detached
/// all the same (restored as on every way out).
pub trait Sibling: Backend {
    /// Restore everything pgdbg changed in it, detach and let it run; Ok
    /// too when it has exited meanwhile.
    fn detach(self: Box<Self>) -> Result<()>;
}

/// A probe: called by `Backend::run_probes` at its internal breakpoints.
pub trait ProbeHandler {
    fn on_stop(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()>;
    /// A hardware watchpoint fired (DR6 tells which).
    fn on_watch(&mut self, _s: &mut dyn Backend, _dr6: u64) -> Result<()> {
        Ok(())
    }
    /// True when the probe has seen enough (`--count`).
    fn done(&self) -> bool;
    /// How often `on_poll` wants to run (the target is interrupted for it).
    fn poll_every(&self) -> Option<std::time::Duration> {
        None
    }
    /// The periodic read of a polling probe; the target is stopped.
    fn on_poll(&mut self, _s: &mut dyn Backend) -> Result<()> {
        Ok(())
    }
    /// Right after `on_poll`, with the target running again: work that
    /// needs no access to it (formatting, output), so the target is not
    /// held stopped for it.
    fn after_poll(&mut self, _s: &mut dyn Backend) -> Result<()> {
        Ok(())
    }
    /// Whether `on_exit` has something to read: the target then stops at
    /// its exit.
    fn reads_at_exit(&self) -> bool {
        false
    }
    /// The target is ending, in its exit stop (its memory still readable):
    /// memory reads only, as few as can be, reported later (`after_poll`
    /// is not called); it is let go right after, whatever this returns.
    fn on_exit(&mut self, _s: &mut dyn Backend) -> Result<()> {
        Ok(())
    }
    /// `--for` ran out while the target runs, just before it is stopped
    /// for the end: a probe that needs no stop ends its recording here, so
    /// that reading and digesting the records does not hold the backend
    /// stopped (`NoStopDigest`).  Called once at most; not at the other
    /// ends (Ctrl-C, a stop of the user's, the backend's end).
    fn at_deadline(&mut self) {}
}

pub use super::outcome::{Flow, Outcome, ProbeEnd, Ran};

/// What a probe command shows and how the session goes on, from how its
/// `run_probes` ended (`Outcome::of_probe`, with whether the backend's last
/// stop was an interrupt).
pub fn probe_outcome(s: &dyn Backend, end: ProbeEnd, summary: String, text: String) -> Outcome {
    let interrupted = matches!(s.last_stop(), Some(Stop::Interrupted));
    Outcome::of_probe(end, interrupted, summary, text)
}

/// A probe with no breakpoints: the target just runs (waits sample).
pub struct NoStop;

impl ProbeHandler for NoStop {
    fn on_stop(&mut self, _s: &mut dyn Backend, _addr: u64) -> Result<()> {
        Ok(())
    }
    fn done(&self) -> bool {
        false
    }
}

/// A probe with no breakpoints whose end (`digest`: end the recording,
/// read and digest its records) runs at `--for`'s deadline while the
/// backend still runs (`ProbeHandler::at_deadline`), or after the probe
/// when it ended otherwise: the stop that ends the probe then lasts only
/// as long as ptrace needs.  A signal the backend gets while the digest
/// runs waits for its end (the tracer passes it on then).
pub struct NoStopDigest<F, R> {
    digest: Option<F>,
    digested: Option<R>,
}

impl<F: FnOnce() -> R, R> NoStopDigest<F, R> {
    pub fn new(digest: F) -> NoStopDigest<F, R> {
        NoStopDigest {
            digest: Some(digest),
            digested: None,
        }
    }

    /// What the digest gave, run now if the deadline did not run it.
    pub fn result(mut self) -> R {
        match (self.digested.take(), self.digest.take()) {
            (Some(r), _) => r,
            (None, Some(f)) => f(),
            (None, None) => unreachable!("a digest runs once and is kept"),
        }
    }
}

impl<F: FnOnce() -> R, R> ProbeHandler for NoStopDigest<F, R> {
    fn on_stop(&mut self, _s: &mut dyn Backend, _addr: u64) -> Result<()> {
        Ok(())
    }
    fn done(&self) -> bool {
        false
    }
    fn at_deadline(&mut self) {
        if let Some(f) = self.digest.take() {
            self.digested = Some(f());
        }
    }
}

/// Stop at the first hit of the armed internal breakpoints.
#[derive(Default)]
pub struct OneStop {
    hit: bool,
}

impl ProbeHandler for OneStop {
    fn on_stop(&mut self, _s: &mut dyn Backend, _addr: u64) -> Result<()> {
        self.hit = true;
        Ok(())
    }
    fn done(&self) -> bool {
        self.hit
    }
}

/// A backend in memory for unit tests: a memory map, symbols and layouts
/// given by the test, registers set by it, output collected.  No debug
/// info, no calls, no recorder: those fail (or, for `di`, panic), so a test
/// that reaches them sees it.
#[cfg(test)]
pub mod fake {
    use super::*;
    use crate::debuginfo::layout::{Field, FieldKind};
    use anyhow::anyhow;
    use std::collections::{BTreeMap, HashMap};

    #[derive(Default)]
    pub struct FakeBackend {
        /// Readable regions: start address -> bytes.
        pub mem: BTreeMap<u64, Vec<u8>>,
        pub regs: Registers,
        pub globals: HashMap<String, u64>,
        pub functions: HashMap<String, Vec<u64>>,
        pub layouts: HashMap<String, Layout>,
        pub frames: Vec<String>,
        pub stack: Vec<String>,
        /// Internal breakpoints and their use counts.
        pub armed: BTreeMap<u64, u32>,
        /// `arm_internal` at this address fails (a refused int3).
        pub refuse_arm: Option<u64>,
        pub watched: Option<u64>,
        /// `say` lines, in order.
        pub lines: Vec<String>,
        /// Captured events, in order.
        pub events: Vec<(String, serde_json::Value)>,
        pub capture: bool,
        /// None: a client backend.
        pub kind: Option<ProcessKind>,
        pub stop: Option<Stop>,
        /// The backend has ended (`is_gone`).
        pub gone: bool,
    }

    impl FakeBackend {
        pub fn new() -> FakeBackend {
            FakeBackend {
                capture: true,
                ..Default::default()
            }
        }

        /// Map `bytes` at `addr` (replacing a region that starts there).
        pub fn map(&mut self, addr: u64, bytes: Vec<u8>) {
            self.mem.insert(addr, bytes);
        }

        /// Map a NUL-terminated string at `addr`.
        pub fn map_str(&mut self, addr: u64, s: &str) {
            let mut b = s.as_bytes().to_vec();
            b.push(0);
            self.map(addr, b);
        }

        pub fn unmap(&mut self, addr: u64) {
            self.mem.remove(&addr);
        }

        /// Write into mapped memory (the region must cover it).
        pub fn poke(&mut self, addr: u64, data: &[u8]) {
            let (start, r) = self
                .mem
                .range_mut(..=addr)
                .next_back()
                .expect("poke into mapped memory");
            let o = (addr - start) as usize;
            r[o..o + data.len()].copy_from_slice(data);
        }

        fn page_mapped(&self, a: u64) -> bool {
            let page = a >> 12;
            self.mem.iter().any(|(start, r)| {
                let last = start + (r.len() as u64).max(1) - 1;
                (start >> 12) <= page && page <= (last >> 12)
            })
        }

        /// The events named `name`, in order.
        pub fn events_named(&self, name: &str) -> Vec<&serde_json::Value> {
            self.events
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v)
                .collect()
        }
    }

    /// A struct layout with its fields laid out one after the other
    /// (8-byte aligned), as a test describes it: (name, size, kind).
    pub fn layout(name: &str, fields: &[(&str, u64, FieldKind)]) -> Layout {
        let mut off = 0;
        let mut map = HashMap::new();
        for &(n, size, kind) in fields {
            map.insert(
                n.to_string(),
                Field {
                    offset: off,
                    size,
                    kind,
                    ty: crate::debuginfo::types::Type::int(),
                },
            );
            off += size.div_ceil(8) * 8;
        }
        Layout {
            name: name.into(),
            size: off,
            fields: map,
        }
    }

    impl Backend for FakeBackend {
        fn di(&self) -> &DebugInfo {
            panic!(
                "the fake backend has no debug info: give the test globals, functions and layouts"
            )
        }
        fn bias(&self) -> u64 {
            0
        }
        fn pid(&self) -> i32 {
            4711
        }
        fn process_kind(&self) -> &ProcessKind {
            static CLIENT: ProcessKind = ProcessKind::ClientBackend {
                title: String::new(),
            };
            self.kind.as_ref().unwrap_or(&CLIENT)
        }
        fn global_addr(&self, name: &str) -> Option<u64> {
            self.globals.get(name).copied()
        }
        fn function_addrs(&self, name: &str) -> Vec<u64> {
            self.functions.get(name).cloned().unwrap_or_default()
        }
        fn layout(&self, name: &str) -> Result<Layout> {
            self.layouts
                .get(name)
                .cloned()
                .ok_or_else(|| anyhow!("type {name} is not in the debug info"))
        }
        fn location_addrs(&self, spec: &str) -> Result<Vec<u64>> {
            let addrs = self.function_addrs(spec);
            if addrs.is_empty() {
                anyhow::bail!(
                    "no function \"{spec}\" in this postgres binary",
                    spec = crate::shown::shown(spec)
                );
            }
            Ok(addrs)
        }
        /// Like a process's memory, mapped by pages: bytes of a page that
        /// holds a region but outside it read as zeros.
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
            for (i, byte) in buf.iter_mut().enumerate() {
                let a = addr + i as u64;
                *byte = match self.mem.range(..=a).next_back() {
                    Some((start, r)) if a - start < r.len() as u64 => r[(a - start) as usize],
                    _ if self.page_mapped(a) => 0,
                    _ => anyhow::bail!("cannot read {} bytes at {addr:#x}", buf.len()),
                };
            }
            Ok(())
        }
        /// Other processes' memory is this memory map too.
        fn read_untraced(&self, _pid: i32, addr: u64, buf: &mut [u8]) -> Result<()> {
            self.read(addr, buf)
        }
        fn write_own_field(&mut self, addr: u64, data: &[u8]) -> Result<()> {
            self.poke(addr, data);
            Ok(())
        }
        fn last_stop(&self) -> Option<Stop> {
            self.stop.clone()
        }
        fn registers(&self) -> Result<Registers> {
            Ok(self.regs)
        }
        fn frame_functions(&mut self) -> Result<Vec<String>> {
            Ok(self.frames.clone())
        }
        fn quick_stack(&mut self, n: usize) -> Vec<String> {
            self.stack.iter().take(n).cloned().collect()
        }
        fn return_point(&self) -> Option<(u64, u64)> {
            None
        }
        fn select_function_frame(&mut self, _function: &str) -> Result<()> {
            Ok(())
        }
        fn eval_text(&mut self, expr: &str) -> Result<(String, serde_json::Value)> {
            anyhow::bail!("the fake backend evaluates no expressions ({expr})")
        }
        fn eval_scalar(&mut self, _e: &Expr) -> Result<(Scalar, TypeRef)> {
            anyhow::bail!("the fake backend evaluates no expressions")
        }
        fn frame_params(
            &mut self,
            _functions: &[&str],
            _param: &str,
        ) -> Result<Vec<(usize, String, Result<u64>)>> {
            Ok(Vec::new())
        }
        fn keep_value(&mut self, _v: Value) -> (usize, String, serde_json::Value) {
            panic!("the fake backend keeps no values")
        }
        fn run_briefly(&mut self, _d: Duration) -> Result<Option<String>> {
            anyhow::bail!("the fake backend does not run")
        }
        fn arm_internal(&mut self, addr: u64) -> Result<()> {
            if self.refuse_arm == Some(addr) {
                anyhow::bail!("the fake backend refuses an int3 at {addr:#x}");
            }
            *self.armed.entry(addr).or_insert(0) += 1;
            Ok(())
        }
        fn disarm_internal(&mut self, addr: u64) -> Result<()> {
            if let Some(n) = self.armed.get_mut(&addr) {
                *n -= 1;
                if *n == 0 {
                    self.armed.remove(&addr);
                }
            }
            Ok(())
        }
        fn watch_word(&mut self, addr: u64) -> Result<()> {
            self.watched = Some(addr);
            Ok(())
        }
        fn unwatch_word(&mut self) -> Result<()> {
            self.watched = None;
            Ok(())
        }
        fn run_probes(
            &mut self,
            _h: &mut dyn ProbeHandler,
            _limit: Option<Duration>,
        ) -> Result<Ran> {
            anyhow::bail!("the fake backend does not run")
        }
        fn say(&mut self, line: &str) {
            self.lines.push(line.to_string());
        }
        /// Kept as the line's JSON fields (with `ts` when given), by
        /// event name.
        fn emit_event(&mut self, event: Event, ts: Option<f64>) {
            if self.capture {
                let mut v = serde_json::to_value(event).expect("event serializes");
                let m = v.as_object_mut().expect("an event is an object");
                let name = m.remove("event").expect("tagged");
                if let Some(ts) = ts {
                    m.insert("ts".into(), ts.into());
                }
                self.events
                    .push((name.as_str().expect("a name").to_string(), v));
            }
        }
        fn capturing(&self) -> bool {
            self.capture
        }
        fn call_timeout(&self) -> Duration {
            Duration::from_secs(5)
        }
        fn is_gone(&self) -> bool {
            self.gone
        }
        fn begin_calls(&mut self, _traps: &[u64], _timeout: Duration) -> Result<CallFrame<'_>> {
            anyhow::bail!("the fake backend cannot run calls")
        }
        fn register_only_point(&self, entry: u64) -> u64 {
            entry
        }
        fn install_recorder(
            &mut self,
            _site: u64,
            _spec: RecordSpec,
            _bodies: &[(u64, Vec<u8>)],
        ) -> Result<Recorder> {
            anyhow::bail!("the fake backend has no in-process recorder")
        }
        fn drain_recorder(&mut self, _r: &mut Recorder) -> Result<(Vec<Record>, u64)> {
            anyhow::bail!("the fake backend has no in-process recorder")
        }
        fn remove_recorder(&mut self, _r: Recorder) -> Result<bool> {
            Ok(true)
        }
        fn remove_orphan_recorder(&mut self, _site: u64, _original: &[u8]) -> Result<bool> {
            Ok(false)
        }
        fn own_code_at(&self, _addr: u64) -> Option<String> {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest runs once: at the deadline (kept for `result`), or in
    /// `result` when the probe ended otherwise.
    #[test]
    fn a_digest_runs_once_at_the_deadline_or_after() {
        let runs = std::cell::Cell::new(0);
        let mut d = NoStopDigest::new(|| {
            runs.set(runs.get() + 1);
            runs.get()
        });
        d.at_deadline();
        d.at_deadline();
        assert_eq!(runs.get(), 1);
        assert_eq!(d.result(), 1);
        assert_eq!(runs.get(), 1, "kept, not run again");

        let later = std::cell::Cell::new(false);
        let d = NoStopDigest::new(|| later.set(true));
        assert!(!later.get(), "not before the deadline or the end");
        d.result();
        assert!(later.get());
    }
}
