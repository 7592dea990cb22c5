//! Wait events: the word a backend writes when it starts and stops waiting,
//! read without stopping it, and the names of its values as the backend
//! itself spells them (`pgstat_get_wait_event_type` / `pgstat_get_wait_event`
//! called inside the backend, then cached on disk per build-id), so every
//! major's numbering is right without a table typed into pgdbg.

use super::backend::Backend;
use super::call::{BackendCalls, Called};
use crate::capture::Event;
use crate::capture::events::WaitName;
use crate::capture::wall_now;
use crate::infcall::Arg;
use anyhow::{Result, anyhow, bail};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Address of the backend's wait-event word: `*my_wait_event_info` (14+),
/// else `&MyProc->wait_event_info` (13).
pub fn word_address(s: &dyn Backend) -> Result<u64> {
    if let Some(a) = s.global_addr("my_wait_event_info") {
        let p = s.read_u64(a)?;
        if p != 0 {
            return Ok(p);
        }
    }
    let myproc = s
        .global_addr("MyProc")
        .ok_or_else(|| anyhow!("neither my_wait_event_info nor MyProc is in the debug info"))?;
    let proc_ = s.read_u64(myproc)?;
    if proc_ == 0 {
        bail!("MyProc is NULL: this process has no wait events");
    }
    let l = s.layout("PGPROC")?;
    Ok(proc_ + l.offset("wait_event_info")?)
}

pub fn read_word(s: &dyn Backend, addr: u64) -> Result<u32> {
    let mut b = [0u8; 4];
    s.read(addr, &mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// Names of wait-event values for one build, cached in
/// ~/.cache/pgdbg/waitnames/BUILD-ID.json.
#[derive(Default)]
pub struct WaitNames {
    pub map: HashMap<u32, (String, String)>,
    path: Option<PathBuf>,
    /// Why the last attempt to name waits failed (said with every wait it
    /// left unnamed).
    pub failed: Option<String>,
}

impl WaitNames {
    pub fn load(build_id: &str) -> WaitNames {
        let path = crate::debuginfo::index::Index::cache_path(build_id).and_then(|p| {
            p.parent().map(|d| {
                d.with_file_name("waitnames")
                    .join(format!("{build_id}.json"))
            })
        });
        let mut map = HashMap::new();
        if let Some(p) = &path
            && let Ok(t) = std::fs::read_to_string(p)
            && let Ok(m) = serde_json::from_str::<BTreeMap<String, (String, String)>>(&t)
        {
            for (k, v) in m {
                if let Ok(n) = u32::from_str_radix(k.trim_start_matches("0x"), 16) {
                    map.insert(n, v);
                }
            }
        }
        WaitNames {
            map,
            path,
            failed: None,
        }
    }

    fn store(&self) {
        let Some(p) = &self.path else { return };
        if let Some(d) = p.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let m: BTreeMap<String, &(String, String)> = self
            .map
            .iter()
            .map(|(k, v)| (format!("{k:#010x}"), v))
            .collect();
        if let Ok(t) = serde_json::to_string_pretty(&m) {
            let tmp = p.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, t).is_ok() {
                let _ = std::fs::rename(&tmp, p);
            }
        }
    }

    /// (wait_event_type, wait_event) as pg_stat_activity shows them; None
    /// for both when the backend is not waiting.
    pub fn describe(&self, info: u32) -> (Option<String>, Option<String>) {
        if info == 0 {
            return (None, None);
        }
        match self.map.get(&info) {
            Some((t, e)) => (Some(t.clone()), Some(e.clone())),
            None => (None, Some(format!("{info:#010x}"))),
        }
    }

    /// Why `info` has no name, when it has none (a wait, not "on CPU").
    pub fn unresolved(&self, info: u32) -> Option<String> {
        if info == 0 || self.map.contains_key(&info) {
            return None;
        }
        Some(
            self.failed
                .clone()
                .unwrap_or_else(|| "the backend was not asked for its name".into()),
        )
    }

    /// The fields of a capture event for `info`: `wait_event_type`,
    /// `wait_event`, `info`, and `unresolved` (why) when it has no name.
    pub fn event_fields(&self, info: u32) -> WaitName {
        let (t, e) = self.describe(info);
        WaitName {
            info,
            wait_event_type: t,
            wait_event: e,
            unresolved: self.unresolved(info),
        }
    }

    /// Ask for names and remember why it failed, if it did.
    pub fn try_resolve(&mut self, s: &mut dyn Backend, infos: &[u32]) -> Option<String> {
        match self.resolve(s, infos) {
            Ok(_) => None,
            Err(e) => {
                let why = format!("{e:#}");
                self.failed = Some(why.clone());
                Some(why)
            }
        }
    }

    pub fn label(&self, info: u32) -> String {
        match self.describe(info) {
            (None, None) => "on CPU".into(),
            (Some(t), Some(e)) => format!("{t}: {e}"),
            (_, Some(e)) => format!("unresolved {e}"),
            _ => "?".into(),
        }
    }

    /// Ask the backend for the names of `infos` not known yet (the target
    /// must be stopped at a safe point).  Returns false when it could not.
    pub fn resolve(&mut self, s: &mut dyn Backend, infos: &[u32]) -> Result<bool> {
        let missing: Vec<u32> = infos
            .iter()
            .copied()
            .filter(|i| *i != 0 && !self.map.contains_key(i))
            .collect();
        if missing.is_empty() {
            return Ok(true);
        }
        let f_type = super::call::function_address(s, "pgstat_get_wait_event_type")?;
        let f_event = super::call::function_address(s, "pgstat_get_wait_event")?;
        let timeout = s.call_timeout();
        // pgstat_get_wait_event* only read constant tables: callable even
        // while the backend holds LWLocks (e.g. at the end of an LWLock wait)
        let mut calls = BackendCalls::open_pure(s, timeout)?;
        let mut got = Vec::new();
        for info in missing {
            let mut names = Vec::new();
            for f in [f_type, f_event] {
                match calls.call_addr(f, &[Arg::Int(info as u64)])? {
                    Called::Value(r) if r.rax != 0 => names.push(calls.read_cstr(r.rax, 128)?),
                    _ => names.push("?".into()),
                }
            }
            got.push((info, names[0].clone(), names[1].clone()));
        }
        calls.close()?;
        for (i, t, e) in got {
            self.map.insert(i, (t, e));
        }
        self.store();
        Ok(true)
    }
}

/// The enums of the wait-event classes, each named `WaitEvent` and the
/// class name it stands for (`pgstat_get_wait_event_type`'s): what names a
/// wait event by the debug info or a layout pack (which records them).
pub const CLASS_ENUMS: &[&str] = &[
    "WaitEventActivity",
    "WaitEventClient",
    "WaitEventIPC",
    "WaitEventTimeout",
    "WaitEventIO",
    "WaitEventBufferPin",
    "WaitEventExtension",
];

/// Every wait_event_info value this build can report that its debug info
/// enumerates: the values of the wait-event enums of each class (their
/// enumerators carry the class bits), the built-in LWLock tranches, the
/// lock tag types and the buffer pin wait.  A type neither the debug info
/// nor the layout pack has adds nothing (a pack records the wait-event
/// classes' enums, not the LWLock tranches').
pub fn known_values(s: &dyn Backend) -> Vec<u32> {
    use crate::debuginfo::types::{Type, TypeSource, strip};
    let di = s.di();
    let values = |name: &str| -> Vec<(String, i64)> {
        match di.type_by_name(name).map(|t| strip(di, &t)) {
            Some(t) => match &*t {
                Type::Enum { values, .. } => values.clone(),
                _ => Vec::new(),
            },
            None => Vec::new(),
        }
    };
    let mut out: Vec<u32> = Vec::new();
    for e in CLASS_ENUMS {
        out.extend(values(e).iter().map(|(_, v)| *v as u32));
    }
    // PG_WAIT_LWLOCK | tranche: the built-in tranches (individual LWLocks
    // first) below LWTRANCHE_FIRST_USER_DEFINED, from the enum when the
    // debug info has it, else from the lengths of lwlock.c's name arrays
    // (individual LWLocks' names apart before 17)
    let entries = |name: &str| -> i64 {
        match di.global(name).and_then(|(_, t)| t).map(|t| strip(di, &t)) {
            Some(t) => match &*t {
                Type::Array { count, .. } => count.unwrap_or(0) as i64,
                _ => 0,
            },
            None => 0,
        }
    };
    let first_user = values("BuiltinTrancheIds")
        .into_iter()
        .find(|(n, _)| n == "LWTRANCHE_FIRST_USER_DEFINED")
        .map(|(_, v)| v)
        .unwrap_or_else(|| entries("IndividualLWLockNames") + entries("BuiltinTrancheNames"));
    out.extend((0..first_user.clamp(0, 4096) as u32).map(|t| 0x0100_0000 | t));
    // PG_WAIT_LOCK | lock tag type
    out.extend(
        values("LockTagType")
            .iter()
            .filter(|(n, _)| n != "LOCKTAG_LAST_TYPE")
            .map(|(_, v)| 0x0300_0000 | *v as u32),
    );
    if !out.is_empty() {
        // PG_WAIT_BUFFER_PIN (a class of one wait before 17)
        out.push(0x0400_0000);
    }
    out.retain(|v| *v != 0);
    out.sort();
    out.dedup();
    out
}

/// What a sampling run gathered: samples by wait_event_info, their
/// number, and (when asked for) each sample's time (CLOCK_MONOTONIC ns)
/// and value.
pub type Sampled = (BTreeMap<u32, u64>, u64, Vec<(u64, u32)>);

/// Sample the word from another thread while the target runs.
pub struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Sampled>>,
}

impl Sampler {
    /// Start sampling `addr` of `pid` at `hz` (process_vm_readv: the backend
    /// is never stopped for a sample); `timed`: keep each sample's time.
    pub fn start(pid: i32, addr: u64, hz: f64, timed: bool) -> Sampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let handle = std::thread::spawn(move || {
            crate::runtime::block_in_this_thread();
            let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
            let mut total = 0u64;
            let mut times = Vec::new();
            let period = std::time::Duration::from_secs_f64(1.0 / hz.max(1.0));
            let mut next = std::time::Instant::now();
            // a cheap xorshift for jitter (avoid sampling in lockstep with
            // periodic work)
            let mut x: u64 = 0x9e3779b97f4a7c15 ^ pid as u64;
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                let mut b = [0u8; 4];
                let at = crate::perf::monotonic_ns();
                let local = [std::io::IoSliceMut::new(&mut b)];
                let mut local = local;
                let remote = [nix::sys::uio::RemoteIoVec {
                    base: addr as usize,
                    len: 4,
                }];
                match nix::sys::uio::process_vm_readv(
                    nix::unistd::Pid::from_raw(pid),
                    &mut local,
                    &remote,
                ) {
                    Ok(4) => {
                        let v = u32::from_le_bytes(b);
                        *counts.entry(v).or_insert(0) += 1;
                        total += 1;
                        if timed {
                            times.push((at, v));
                        }
                    }
                    _ => break, // the backend is gone
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let jitter = 0.8 + (x % 400) as f64 / 1000.0; // 0.8 .. 1.2
                next += period.mul_f64(jitter);
                let now = std::time::Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            (counts, total, times)
        });
        Sampler {
            stop,
            handle: Some(handle),
        }
    }

    pub fn finish(mut self) -> Sampled {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

/// One traced wait.
#[derive(Debug, Clone)]
pub struct WaitRecord {
    pub info: u32,
    pub duration_ns: u128,
    pub stack: Vec<String>,
    /// The statement the executor ran when the wait began (the innermost,
    /// the last one started), when statements are traced.
    pub query: Option<String>,
}

/// `waits trace`: a hardware watchpoint on the wait-event word (every wait
/// with its duration and, optionally, the stack at its start) and
/// breakpoints on standard_ExecutorStart/End (statement times).
pub struct TraceProbe {
    word: u64,
    last: u32,
    /// The wait in progress: its value, start, stack and statement.
    current: Option<(u32, std::time::Instant, Vec<String>, Option<String>)>,
    stacks: usize,
    pub names: WaitNames,
    pub waits: Vec<WaitRecord>,
    starts: Vec<u64>,
    ends: Vec<u64>,
    open: HashMap<u64, (std::time::Instant, String)>,
    pub statements: Vec<(String, u128)>,
    quiet: bool,
    /// Ended waits not reported yet, with their end time (capture `ts`):
    /// a wait whose name could not be asked for (e.g. an IO wait ending
    /// inside a critical section, where no call is made) waits here until
    /// the backend stops at a point where it can be named, so that waits are
    /// reported in order and named; at the end of tracing whatever is left
    /// is reported as unresolved, with the reason.
    unreported: Vec<(WaitRecord, f64)>,
    /// The backend has ended: its waits are named from the names known,
    /// it is not asked.
    ended: bool,
}

/// Ended waits held back for their names at most (then reported unnamed).
const MAX_UNREPORTED: usize = 10_000;

impl TraceProbe {
    /// Without `statements`, no breakpoints at the executor's start and end.
    pub fn new(
        s: &mut dyn Backend,
        stacks: usize,
        quiet: bool,
        statements: bool,
    ) -> Result<TraceProbe> {
        let names = WaitNames::load(&s.di().build_id);
        Self::with_names(s, names, stacks, quiet, statements)
    }

    /// The probe with nothing armed in the backend: the stores into the
    /// word are observed elsewhere (a perf write-breakpoint event) and fed
    /// to [`TraceProbe::store`], the executor's starts and ends (kernel
    /// uprobes) to [`TraceProbe::statement_start`] and
    /// [`TraceProbe::statement_end`].
    pub fn observing(s: &mut dyn Backend, stacks: usize, quiet: bool) -> Result<TraceProbe> {
        let names = WaitNames::load(&s.di().build_id);
        let word = word_address(s)?;
        let last = read_word(s, word)?;
        Ok(Self::from_parts(
            word,
            last,
            names,
            stacks,
            quiet,
            Vec::new(),
            Vec::new(),
        ))
    }

    /// The wait-event word's address.
    pub fn word(&self) -> u64 {
        self.word
    }

    /// The word's value when tracing started.
    pub fn first_value(&self) -> u32 {
        self.last
    }

    /// A store of `v` into the word at `now` (wall clock `ts`), with the
    /// stack where it happened: ends the wait in progress and starts the
    /// next one (a store of the same value changes nothing).
    pub fn store(
        &mut self,
        s: &mut dyn Backend,
        v: u32,
        now: std::time::Instant,
        ts: f64,
        stack: Vec<String>,
    ) {
        if v == self.last {
            return;
        }
        self.finish_wait(s, now, ts);
        if v != 0 {
            let query = self
                .open
                .values()
                .max_by_key(|(t, _)| *t)
                .map(|(_, q)| q.clone());
            self.current = Some((v, now, stack, query));
        }
        self.last = v;
    }

    /// The executor started statement `qd` (its QueryDesc) with text `q`.
    pub fn statement_start(&mut self, qd: u64, now: std::time::Instant, q: String) {
        self.open.insert(qd, (now, q));
    }

    /// The executor ended statement `qd`: its time, as a `statement`
    /// capture event (at `ts`, or now) and a row of the summary.  An end
    /// without its start (tracing began mid-statement) says nothing.
    pub fn statement_end(
        &mut self,
        s: &mut dyn Backend,
        qd: u64,
        now: std::time::Instant,
        ts: Option<f64>,
    ) {
        if let Some((t0, q)) = self.open.remove(&qd) {
            let d = now.saturating_duration_since(t0).as_nanos();
            s.emit_event(
                Event::Statement {
                    duration_ns: d as u64,
                    query: q.clone(),
                },
                ts,
            );
            self.statements.push((q, d));
        }
    }

    /// `new` with the wait names known so far given.
    fn with_names(
        s: &mut dyn Backend,
        names: WaitNames,
        stacks: usize,
        quiet: bool,
        statements: bool,
    ) -> Result<TraceProbe> {
        let word = word_address(s)?;
        let last = read_word(s, word)?;
        let (starts, ends) = if statements {
            (
                s.function_addrs("standard_ExecutorStart"),
                s.function_addrs("standard_ExecutorEnd"),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        // the debug register first: refused (none left), nothing is armed
        s.watch_word(word)?;
        let mut armed = Vec::new();
        for &a in starts.iter().chain(ends.iter()) {
            if let Err(e) = s.arm_internal(a) {
                // nothing left armed: the probe loop that would disarm
                // them never runs
                for a in armed {
                    let _ = s.disarm_internal(a);
                }
                let _ = s.unwatch_word();
                return Err(e);
            }
            armed.push(a);
        }
        Ok(Self::from_parts(
            word, last, names, stacks, quiet, starts, ends,
        ))
    }

    fn from_parts(
        word: u64,
        last: u32,
        names: WaitNames,
        stacks: usize,
        quiet: bool,
        starts: Vec<u64>,
        ends: Vec<u64>,
    ) -> TraceProbe {
        TraceProbe {
            word,
            last,
            current: if last != 0 {
                Some((last, std::time::Instant::now(), Vec::new(), None))
            } else {
                None
            },
            stacks,
            names,
            waits: Vec::new(),
            starts,
            ends,
            open: HashMap::new(),
            statements: Vec::new(),
            quiet,
            unreported: Vec::new(),
            ended: false,
        }
    }

    fn finish_wait(&mut self, s: &mut dyn Backend, now: std::time::Instant, ts: f64) {
        let Some((info, t0, stack, query)) = self.current.take() else {
            return;
        };
        let d = now.saturating_duration_since(t0).as_nanos();
        self.unreported.push((
            WaitRecord {
                info,
                duration_ns: d,
                stack,
                query,
            },
            ts,
        ));
        self.report_named(s, false);
    }

    /// Name the unreported waits if the backend can be asked now, and
    /// report them in order; with `last`, or when too many are held back,
    /// report them all, named or not.
    fn report_named(&mut self, s: &mut dyn Backend, last: bool) {
        let missing: Vec<u32> = self
            .unreported
            .iter()
            .map(|(w, _)| w.info)
            .filter(|i| self.names.unresolved(*i).is_some())
            .collect();
        if !missing.is_empty() && !self.ended {
            self.names.try_resolve(s, &missing);
        }
        let all_named = self
            .unreported
            .iter()
            .all(|(w, _)| self.names.unresolved(w.info).is_none());
        if !all_named && !last && self.unreported.len() < MAX_UNREPORTED {
            return;
        }
        for (w, ts) in std::mem::take(&mut self.unreported) {
            self.report(s, w, ts);
        }
    }

    fn report(&mut self, s: &mut dyn Backend, w: WaitRecord, ts: f64) {
        if !self.quiet {
            let st = if w.stack.is_empty() {
                String::new()
            } else {
                format!("  {}", w.stack.join(" <- "))
            };
            s.say(&format!(
                "wait {:<28} {:>10.3} ms{st}",
                self.names.label(w.info),
                w.duration_ns as f64 / 1e6
            ));
        }
        s.emit_event(
            Event::wait(
                self.names.event_fields(w.info),
                w.duration_ns as u64,
                w.stack.clone(),
                w.query.clone(),
            ),
            Some(ts),
        );
        self.waits.push(w);
    }

    /// Report the waits held back without asking for names (the session is
    /// ending: no more calls).
    pub fn abandon(&mut self, s: &mut dyn Backend) {
        for (w, ts) in std::mem::take(&mut self.unreported) {
            self.report(s, w, ts);
        }
    }

    /// The backend has ended (its records are reported after its end): no
    /// call is made into it to name its waits.
    pub fn backend_ended(&mut self) {
        self.ended = true;
        if self.names.failed.is_none() {
            self.names.failed = Some("the backend ended before it could be asked".into());
        }
    }

    /// Close the wait in progress and report every wait held back (at the
    /// end of tracing).
    pub fn close(&mut self, s: &mut dyn Backend) {
        self.finish_wait(s, std::time::Instant::now(), wall_now());
        self.report_named(s, true);
    }

    /// The summary tables (the bpftrace recipe's "Wait events summary").
    pub fn summary(&self) -> String {
        let mut per: BTreeMap<String, (u64, u128, u128)> = BTreeMap::new();
        let mut total = 0u128;
        for w in &self.waits {
            let e = per.entry(self.names.label(w.info)).or_insert((0, 0, 0));
            e.0 += 1;
            e.1 += w.duration_ns;
            e.2 = e.2.max(w.duration_ns);
            total += w.duration_ns;
        }
        let mut rows: Vec<_> = per.into_iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.1.1));
        let mut out = String::from("Wait events summary:\n");
        out.push_str(&format!(
            "  {:<34} {:>8} {:>12} {:>12}\n",
            "event", "count", "total ms", "max ms"
        ));
        for (name, (n, tot, max)) in rows {
            out.push_str(&format!(
                "  {:<34} {:>8} {:>12.3} {:>12.3}\n",
                name,
                n,
                tot as f64 / 1e6,
                max as f64 / 1e6
            ));
        }
        out.push_str(&format!(
            "  total wait time {:.3} ms in {} waits\n",
            total as f64 / 1e6,
            self.waits.len()
        ));
        let unnamed = self
            .waits
            .iter()
            .filter(|w| self.names.unresolved(w.info).is_some())
            .count();
        if unnamed > 0 {
            out.push_str(&format!(
                "  {unnamed} waits could not be named ({}): shown by their raw wait_event_info\n",
                self.names.failed.as_deref().unwrap_or("no name known")
            ));
        }
        let mut st: BTreeMap<String, (u64, u128)> = BTreeMap::new();
        for (q, d) in &self.statements {
            let e = st.entry(q.clone()).or_insert((0, 0));
            e.0 += 1;
            e.1 += d;
        }
        if !st.is_empty() {
            out.push_str("Statements:\n");
            let mut rows: Vec<_> = st.into_iter().collect();
            rows.sort_by_key(|r| std::cmp::Reverse(r.1.1));
            for (q, (n, tot)) in rows {
                let q: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
                let q = if q.chars().count() > 60 {
                    format!("{}...", q.chars().take(60).collect::<String>())
                } else {
                    q
                };
                out.push_str(&format!(
                    "  {:>6} x {:>10.3} ms  {q}\n",
                    n,
                    tot as f64 / 1e6
                ));
            }
        }
        out.trim_end().to_string()
    }
}

impl super::backend::ProbeHandler for TraceProbe {
    fn on_stop(&mut self, s: &mut dyn Backend, addr: u64) -> Result<()> {
        let qd = s.registers()?.rdi;
        let now = std::time::Instant::now();
        if self.starts.contains(&addr) {
            let q = super::explain::source_text(s, qd);
            self.statement_start(qd, now, q);
        } else if self.ends.contains(&addr) {
            self.statement_end(s, qd, now, None);
        }
        Ok(())
    }

    fn on_watch(&mut self, s: &mut dyn Backend, dr6: u64) -> Result<()> {
        if dr6 & 1 == 0 {
            return Ok(());
        }
        let v = read_word(s, self.word)?;
        if v == self.last {
            return Ok(());
        }
        let (now, ts) = (std::time::Instant::now(), wall_now());
        let stack = if self.stacks > 0 && v != 0 {
            s.quick_stack(self.stacks)
        } else {
            Vec::new()
        };
        self.store(s, v, now, ts, stack);
        Ok(())
    }

    fn done(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests;
