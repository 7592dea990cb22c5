//! Which statement a backend runs, over time, read without stopping it:
//! what `--by-statement` splits samples, waits and off-CPU intervals by.
//!
//! The source is the backend's own `PgBackendStatus` entry
//! (`*MyBEEntry`, what pg_stat_activity shows), in shared memory, read
//! with process_vm_readv every [`PERIOD`] by a thread of pgdbg:
//! `st_state` and `st_state_start_timestamp` (pg_stat_activity's
//! state and state_change), `st_query_id` (14+, when `compute_query_id`
//! gives one) and the statement text `st_activity_raw`.  A read is kept
//! only when `st_changecount` was even and the same before and after it
//! (the backend's own protocol, `PGSTAT_BEGIN/END_WRITE_ACTIVITY`).
//!
//! What is certain, and only that is attributed:
//!
//! * a read at time r that sees a state which began at s: the backend was
//!   in that state (that statement) from s through r;
//! * two reads with the same state start: nothing else ran between them;
//! * two reads whose state starts differ: the new state began at its
//!   start s'; from the first read to s' the old state held only if the
//!   change count moved by exactly one write (the state change itself);
//!   otherwise other writes happened there (a transaction's end, another
//!   short statement) and that stretch is "unknown", never guessed.
//!
//! A statement is named by its query id, else by a fingerprint of its
//! text (blanks folded), so that executions of the same statement group;
//! the text shown is the first seen.  Idle states are named as
//! pg_stat_activity names them.  The timestamps are PostgreSQL's
//! (`GetCurrentTimestamp`, wall clock) mapped to CLOCK_MONOTONIC, the
//! clock of perf's records and of pgdbg's own samples.

use super::waitnames::{read_cstr, read_u64};
use crate::debuginfo::DebugInfo;
use crate::debuginfo::layout::Layout;
use crate::perf::monotonic_ns;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often the entry is read.
pub const PERIOD: Duration = Duration::from_millis(1);
/// Bytes of statement text read at most (pg_stat_activity's default
/// `track_activity_query_size` is 1024).
const TEXT_MAX: usize = 1024;
/// PostgreSQL's epoch (2000-01-01) in Unix microseconds.
const PG_EPOCH_US: i64 = 946_684_800 * 1_000_000;

/// Where backend `pid`'s status entry is and how to read it.
#[derive(Clone)]
pub struct StatusShape {
    pid: i32,
    entry: u64,
    l: Fields,
    text_max: usize,
    /// `BackendState` values by their pg_stat_activity names.
    states: Vec<(i64, &'static str)>,
    running: i64,
    /// CLOCK_REALTIME less CLOCK_MONOTONIC, ns.
    clock_offset_ns: i64,
    /// pg_stat_activity's backend_type, datname and usename, as known.
    pub identity: Identity,
}

/// The backend's kind, database and role: the same for its whole life.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Identity {
    pub backend_type: Option<String>,
    pub database: Option<String>,
    pub role: Option<String>,
}

impl Identity {
    /// "client backend, database postgres, role bob"
    pub fn text(&self) -> String {
        let mut v = Vec::new();
        v.extend(self.backend_type.clone());
        v.extend(self.database.as_ref().map(|d| format!("database {d}")));
        v.extend(self.role.as_ref().map(|r| format!("role {r}")));
        v.join(", ")
    }
}

/// pg_stat_activity's backend_type of a `BackendType` enumerator (as
/// `GetBackendTypeDesc` spells it).
fn backend_type_name(enumerator: &str) -> String {
    let known = [
        ("B_BACKEND", "client backend"),
        ("B_DEAD_END_BACKEND", "dead-end client backend"),
        ("B_AUTOVAC_LAUNCHER", "autovacuum launcher"),
        ("B_AUTOVAC_WORKER", "autovacuum worker"),
        ("B_BG_WORKER", "background worker"),
        ("B_WAL_SENDER", "walsender"),
        ("B_SLOTSYNC_WORKER", "slotsync worker"),
        ("B_STANDALONE_BACKEND", "standalone backend"),
        ("B_ARCHIVER", "archiver"),
        ("B_BG_WRITER", "background writer"),
        ("B_CHECKPOINTER", "checkpointer"),
        ("B_IO_WORKER", "io worker"),
        ("B_STARTUP", "startup"),
        ("B_WAL_RECEIVER", "walreceiver"),
        ("B_WAL_SUMMARIZER", "walsummarizer"),
        ("B_WAL_WRITER", "walwriter"),
        ("B_LOGGER", "logger"),
        ("B_STATS_COLLECTOR", "stats collector"),
    ];
    known
        .iter()
        .find(|(e, _)| *e == enumerator)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| {
            enumerator
                .trim_start_matches("B_")
                .to_lowercase()
                .replace('_', " ")
        })
}

/// The enumerators of an enum-typed field of `l`, by value (empty when the
/// field is not an enum in the layout, DWARF's or a pack's).
fn enum_values(di: &DebugInfo, l: &Layout, field: &str) -> Vec<(String, i64)> {
    use crate::debuginfo::types::{Type, strip};
    l.field(field)
        .ok()
        .and_then(|f| match &*strip(di, &f.ty) {
            Type::Enum { values, .. } => Some(values.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The backend's identity: its type from its entry, its database and role
/// from `MyProcPort` (a client backend's connection) where its layout is
/// known, else their OIDs from the entry (pg_stat_activity's datid and
/// usesysid), as far as the layout and memory tell.
fn identity(di: &DebugInfo, pid: i32, bias: u64, l: &Layout, entry: &[u8]) -> Identity {
    let backend_type = l.int(entry, "st_backendType").and_then(|v| {
        enum_values(di, l, "st_backendType")
            .into_iter()
            .find(|(_, x)| *x == v)
            .map(|(n, _)| backend_type_name(&n))
    });
    let port = || -> Option<(String, String)> {
        let (g, _) = di.global("MyProcPort")?;
        let p = read_u64(pid, g + bias).filter(|p| *p != 0)?;
        let pl = Layout::of(di, "Port").ok()?;
        let s = |f: &str| read_cstr(pid, read_u64(pid, p + pl.offset(f).ok()?)?);
        Some((s("database_name")?, s("user_name")?))
    };
    // "database OID 5, role OID 10" in the heading
    let oid = |f: &str| {
        l.int(entry, f)
            .filter(|v| *v != 0)
            .map(|v| format!("OID {}", v as u32))
    };
    let (database, role) = match port() {
        Some((d, r)) => (Some(d), Some(r)),
        None => (oid("st_databaseid"), oid("st_userid")),
    };
    Identity {
        backend_type,
        database,
        role,
    }
}

/// pg_stat_activity's names of `BackendState`'s enumerators.
const STATE_NAMES: &[(&str, &str)] = &[
    ("STATE_UNDEFINED", "undefined"),
    ("STATE_STARTING", "starting"),
    ("STATE_IDLE", "idle"),
    ("STATE_RUNNING", "active"),
    ("STATE_IDLEINTRANSACTION", "idle in transaction"),
    ("STATE_FASTPATH", "fastpath function call"),
    (
        "STATE_IDLEINTRANSACTION_ABORTED",
        "idle in transaction (aborted)",
    ),
    ("STATE_DISABLED", "disabled"),
];

/// Where the fields read are in the entry: (offset, size), from the
/// layout (DWARF or pack).
#[derive(Clone, Copy)]
struct Fields {
    size: usize,
    changecount: (usize, usize),
    state: (usize, usize),
    state_start: (usize, usize),
    query_id: Option<(usize, usize)>,
    activity_raw: (usize, usize),
}

impl Fields {
    fn of(l: &Layout) -> Result<Fields, String> {
        let f = |n: &str| {
            l.field(n)
                .map(|f| (f.offset as usize, f.size as usize))
                .map_err(|e| format!("{e:#}"))
        };
        Ok(Fields {
            size: l.size as usize,
            changecount: f("st_changecount")?,
            state: f("st_state")?,
            state_start: f("st_state_start_timestamp")?,
            query_id: f("st_query_id").ok(),
            activity_raw: f("st_activity_raw")?,
        })
    }

    /// The signed integer at `(offset, size)` of `b`.
    fn int(b: &[u8], (off, size): (usize, usize)) -> Option<i64> {
        let raw = b.get(off..off + size.min(8))?;
        let mut x = [0u8; 8];
        x[..raw.len()].copy_from_slice(raw);
        let sh = 64 - 8 * raw.len() as u32;
        Some(((u64::from_le_bytes(x) << sh) as i64) >> sh)
    }
}

fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

impl StatusShape {
    /// Backend `pid`'s entry (the binary loaded at `bias`), or why
    /// statements cannot be told apart in it.
    pub fn find(di: &DebugInfo, pid: i32, bias: u64) -> Result<StatusShape, String> {
        let l = Layout::of(di, "PgBackendStatus").map_err(|e| {
            format!(
                "{e:#}: the backend's pg_stat_activity entry is read by its layout; give the \
                 server's debug info (--debug-file FILE, or its debug symbols package) or a \
                 layout pack that has PgBackendStatus (pgdbg's own, or pgdbg symbols extract)"
            )
        })?;
        let fields = Fields::of(&l)?;
        let (g, _) = di
            .global("MyBEEntry")
            .ok_or("MyBEEntry is not in this binary's symbols")?;
        let entry = read_u64(pid, g + bias).ok_or("the backend's memory cannot be read")?;
        if entry == 0 {
            return Err(
                "MyBEEntry is NULL: this process has no pg_stat_activity entry".to_string(),
            );
        }
        let text_max = di
            .global("pgstat_track_activity_query_size")
            .and_then(|(a, _)| {
                let mut b = [0u8; 4];
                crate::perf::watch::read_mem(pid, a + bias, &mut b)
                    .then(|| i32::from_le_bytes(b) as usize)
            })
            .filter(|n| *n > 0)
            .unwrap_or(TEXT_MAX)
            .min(TEXT_MAX);
        let values = enum_values(di, &l, "st_state");
        let states: Vec<(i64, &'static str)> = STATE_NAMES
            .iter()
            .filter_map(|(e, n)| {
                values
                    .iter()
                    .find(|(name, _)| name == e)
                    .map(|(_, v)| (*v, *n))
            })
            .collect();
        let running = states
            .iter()
            .find(|(_, n)| *n == "active")
            .map(|(v, _)| *v)
            .ok_or(
                "the enumerator STATE_RUNNING is not in the layout of PgBackendStatus.st_state",
            )?;
        let clock_offset_ns = clock_ns(libc::CLOCK_REALTIME) - clock_ns(libc::CLOCK_MONOTONIC);
        let mut b = vec![0u8; l.size as usize];
        let identity = if crate::perf::watch::read_mem(pid, entry, &mut b) {
            identity(di, pid, bias, &l, &b)
        } else {
            Identity::default()
        };
        Ok(StatusShape {
            pid,
            entry,
            l: fields,
            text_max,
            states,
            running,
            clock_offset_ns,
            identity,
        })
    }

    fn count(&self) -> Option<i64> {
        let mut b = [0u8; 4];
        crate::perf::watch::read_mem(self.pid, self.entry + self.l.changecount.0 as u64, &mut b)
            .then(|| i32::from_le_bytes(b) as i64)
    }

    /// A PostgreSQL timestamp (µs since 2000, wall clock) on CLOCK_MONOTONIC
    /// (ns); None for 0 (never set).
    fn mono(&self, ts: i64) -> Option<u64> {
        (ts != 0).then(|| ((ts + PG_EPOCH_US) * 1000 - self.clock_offset_ns).max(0) as u64)
    }

    /// One consistent read (None: the backend is gone, or it wrote the
    /// entry through every attempt); the text only when `last` is of
    /// another state than this one.
    pub fn read(&self, last: Option<&Read>) -> Option<Read> {
        let size = self.l.size;
        for _ in 0..10 {
            let at_ns = monotonic_ns();
            // the count on its own before the entry (the copy of the
            // entry need not read its own fields in order), and after
            let cc = self.count()?;
            if cc & 1 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let mut b = vec![0u8; size];
            if !crate::perf::watch::read_mem(self.pid, self.entry, &mut b) {
                return None;
            }
            let state = Fields::int(&b, self.l.state)?;
            let state_start = Fields::int(&b, self.l.state_start)?;
            let query_id = self
                .l
                .query_id
                .and_then(|f| Fields::int(&b, f))
                .unwrap_or(0);
            let text = match last {
                Some(r) if r.state == state && r.state_start_raw == state_start => r.text.clone(),
                _ => {
                    let p = Fields::int(&b, self.l.activity_raw)? as u64;
                    let mut t = vec![0u8; self.text_max];
                    if p == 0 || !crate::perf::watch::read_mem(self.pid, p, &mut t) {
                        Arc::from("")
                    } else {
                        let n = t.iter().position(|&c| c == 0).unwrap_or(t.len());
                        Arc::from(String::from_utf8_lossy(&t[..n]).as_ref())
                    }
                }
            };
            if self.count()? != cc {
                continue;
            }
            return Some(Read {
                at_ns,
                cc,
                state,
                state_start_raw: state_start,
                state_start_ns: self.mono(state_start),
                query_id,
                text,
            });
        }
        None
    }

    fn state_name(&self, v: i64) -> &'static str {
        self.states
            .iter()
            .find(|(s, _)| *s == v)
            .map(|(_, n)| *n)
            .unwrap_or("undefined")
    }
}

/// One consistent read of the entry.
#[derive(Clone, Debug)]
pub struct Read {
    /// CLOCK_MONOTONIC just before the read, ns.
    pub at_ns: u64,
    pub cc: i64,
    pub state: i64,
    state_start_raw: i64,
    /// When the state began (CLOCK_MONOTONIC ns), None when never set.
    pub state_start_ns: Option<u64>,
    pub query_id: i64,
    pub text: Arc<str>,
}

/// The thread that reads the entry every [`PERIOD`].
pub struct Poller {
    shape: StatusShape,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<Read>>>,
}

impl Poller {
    /// Start reading; the first read is made before this returns, so
    /// whatever is recorded after it has a state to belong to.
    pub fn start(shape: StatusShape) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sh) = (stop.clone(), shape.clone());
        let first = sh.read(None);
        let handle = std::thread::spawn(move || {
            crate::runtime::block_in_this_thread();
            let mut reads: Vec<Read> = first.into_iter().collect();
            while !st.load(Ordering::Relaxed) {
                std::thread::sleep(PERIOD);
                match sh.read(reads.last()) {
                    Some(r) => {
                        // a read like the two before it only moves the
                        // last one's time
                        let n = reads.len();
                        if n >= 2 && reads[n - 1].cc == r.cc && reads[n - 2].cc == r.cc {
                            reads[n - 1] = r;
                        } else {
                            reads.push(r);
                        }
                    }
                    None if !std::path::Path::new(&format!("/proc/{}", sh.pid)).exists() => break,
                    None => {}
                }
            }
            reads
        });
        Poller {
            shape,
            stop,
            handle: Some(handle),
        }
    }

    /// Stop after one last read (call it once what is attributed has
    /// been recorded) and build the timeline.
    pub fn finish(mut self) -> Timeline {
        self.stop.store(true, Ordering::Relaxed);
        let mut reads = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        if let Some(r) = self.shape.read(reads.last()) {
            reads.push(r);
        }
        let mut t = Timeline::build(&reads, &|v| self.shape.state_name(v), self.shape.running);
        t.identity = self.shape.identity.clone();
        t
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Who owned a stretch of time.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Owner {
    /// pg_stat_activity's state ("active", "idle", ...), or "unknown".
    pub state: String,
    /// The statement's query id, when the backend computed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_id: Option<i64>,
    /// The statement's text (the first execution's), for "active".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// What the stretch is, said once.
    pub label: String,
}

/// Stretches of time and who owned each.
pub struct Timeline {
    /// (start, end, owner), ns on CLOCK_MONOTONIC, in order, not
    /// overlapping.
    pieces: Vec<(u64, u64, usize)>,
    pub owners: Vec<Owner>,
    /// Whose statements they are.
    pub identity: Identity,
}

/// Index of the owner of time no read accounts for.
pub const UNKNOWN: usize = 0;

/// The statement's text as one line of at most 80 characters.
fn one_line(t: &str) -> String {
    let folded = t.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() > 80 {
        format!("{}...", folded.chars().take(77).collect::<String>())
    } else {
        folded
    }
}

/// FNV-1a of the text with its blanks folded.
fn fingerprint(t: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for w in t.split_whitespace() {
        for b in w.bytes().chain(std::iter::once(b' ')) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

impl Timeline {
    /// The timeline of `reads` (in order); `name` gives pg_stat_activity's
    /// name of a state value, `running` is STATE_RUNNING's.
    pub fn build(reads: &[Read], name: &dyn Fn(i64) -> &'static str, running: i64) -> Timeline {
        let mut owners = vec![Owner {
            state: "unknown".into(),
            query_id: None,
            query: None,
            label: "(unknown: the state changed between two reads)".into(),
        }];
        let mut keys: HashMap<(i64, u64), usize> = HashMap::new();
        let mut pieces: Vec<(u64, u64, usize)> = Vec::new();
        let push = |pieces: &mut Vec<(u64, u64, usize)>, s: u64, e: u64, o: usize| {
            let s = s.max(pieces.last().map(|p| p.1).unwrap_or(0));
            if e <= s {
                return;
            }
            match pieces.last_mut() {
                Some(l) if l.2 == o && l.1 == s => l.1 = e,
                _ => pieces.push((s, e, o)),
            }
        };
        // periods: runs of reads of one state start
        let mut i = 0;
        let mut prev: Option<(&Read, usize)> = None;
        while i < reads.len() {
            let mut j = i;
            while j + 1 < reads.len()
                && reads[j + 1].state == reads[i].state
                && reads[j + 1].state_start_ns == reads[i].state_start_ns
            {
                j += 1;
            }
            let (first, last) = (&reads[i], &reads[j]);
            // the statement's name: its query id, once known, else its text
            let owner = if first.state == running {
                let qid = reads[i..=j]
                    .iter()
                    .rev()
                    .map(|r| r.query_id)
                    .find(|q| *q != 0);
                let key = match qid {
                    Some(q) => (1, q as u64),
                    None => (2, fingerprint(&last.text)),
                };
                *keys.entry(key).or_insert_with(|| {
                    let text = one_line(&last.text);
                    owners.push(Owner {
                        state: "active".into(),
                        query_id: qid,
                        label: match qid {
                            Some(q) => format!("{text}  [query id {q}]"),
                            None => text.clone(),
                        },
                        query: Some(text),
                    });
                    owners.len() - 1
                })
            } else {
                *keys.entry((0, first.state as u64)).or_insert_with(|| {
                    let n = name(first.state);
                    owners.push(Owner {
                        state: n.into(),
                        query_id: None,
                        query: None,
                        label: format!("({n})"),
                    });
                    owners.len() - 1
                })
            };
            let start = first.state_start_ns.unwrap_or(first.at_ns);
            if let Some((p, po)) = prev {
                // from the last read of the previous state to this one's
                // start: the previous state's only if one write happened
                let gap_owner = if first.cc - p.cc == 2 { po } else { UNKNOWN };
                push(&mut pieces, p.at_ns, start, gap_owner);
            }
            push(&mut pieces, start, last.at_ns, owner);
            prev = Some((last, owner));
            i = j + 1;
        }
        Timeline {
            pieces,
            owners,
            identity: Identity::default(),
        }
    }

    /// The heading of a table by statement: what the statements are
    /// named by, whose they are, and what the shares are of.
    pub fn heading(&self, of_what: &str) -> String {
        let who = self.identity.text();
        format!(
            "by statement (pg_stat_activity's query id, else its text){}; share of {of_what}:",
            if who.is_empty() {
                String::new()
            } else {
                format!(" of the {who}")
            }
        )
    }

    /// Each owner as the JSON document carries it.
    pub fn details(&self) -> Vec<serde_json::Value> {
        self.owners
            .iter()
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .collect()
    }

    /// The owner of the time `t` (CLOCK_MONOTONIC ns): an index into
    /// `owners`, [`UNKNOWN`] when no read accounts for it.
    pub fn owner_at(&self, t: u64) -> usize {
        let i = self.pieces.partition_point(|p| p.0 <= t);
        match i.checked_sub(1).map(|i| self.pieces[i]) {
            Some((_, e, o)) if t <= e => o,
            _ => UNKNOWN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNNING: i64 = 2;
    const IDLE: i64 = 1;

    fn read(at: u64, cc: i64, state: i64, start: u64, qid: i64, text: &str) -> Read {
        Read {
            at_ns: at,
            cc,
            state,
            state_start_raw: start as i64,
            state_start_ns: Some(start),
            query_id: qid,
            text: Arc::from(text),
        }
    }

    fn name(v: i64) -> &'static str {
        if v == IDLE { "idle" } else { "active" }
    }

    fn label(t: &Timeline, at: u64) -> String {
        t.owners[t.owner_at(at)].label.clone()
    }

    /// What two reads bound is attributed only when it is certain.
    #[test]
    fn certain_stretches_only() {
        let reads = [
            read(100, 10, RUNNING, 50, 0, "select  a"),
            read(200, 10, RUNNING, 50, 0, "select  a"),
            // one write between: idle began at 250, select a held until then
            read(300, 12, IDLE, 250, 0, "select  a"),
            // several writes between: 300..320 unknown, then b from 320
            read(400, 18, RUNNING, 320, 0, "select b"),
            // b again after a transaction's writes: the same statement
            read(500, 26, RUNNING, 450, 0, "select\n b"),
        ];
        let t = Timeline::build(&reads, &name, RUNNING);
        assert_eq!(
            label(&t, 40),
            "(unknown: the state changed between two reads)"
        );
        assert_eq!(label(&t, 60), "select a");
        assert_eq!(label(&t, 240), "select a");
        assert_eq!(label(&t, 260), "(idle)");
        assert_eq!(
            label(&t, 310),
            "(unknown: the state changed between two reads)"
        );
        assert_eq!(label(&t, 330), "select b");
        assert_eq!(
            label(&t, 420),
            "(unknown: the state changed between two reads)"
        );
        assert_eq!(label(&t, 460), "select b");
        assert_eq!(
            label(&t, 501),
            "(unknown: the state changed between two reads)"
        );
        assert_eq!(t.owners.len(), 4);
    }

    /// A query id reported after the statement began names the whole
    /// statement; two texts with one query id are one statement.
    #[test]
    fn query_id_names_the_statement() {
        let reads = [
            read(100, 10, RUNNING, 50, 0, "select 1"),
            read(200, 12, RUNNING, 50, 77, "select 1"),
            read(300, 14, RUNNING, 250, 0, "select 2"),
            read(400, 16, RUNNING, 250, 77, "select 2"),
        ];
        let t = Timeline::build(&reads, &name, RUNNING);
        assert_eq!(t.owner_at(60), t.owner_at(350));
        assert_eq!(label(&t, 60), "select 1  [query id 77]");
        assert_eq!(t.owners.len(), 2);
    }

    #[test]
    fn long_text_is_one_short_line() {
        let long = format!("select {}", "x, ".repeat(60));
        assert!(one_line(&long).ends_with("...") && one_line(&long).chars().count() == 80);
        assert_eq!(fingerprint("a  b\n"), fingerprint("a b"));
        assert_ne!(fingerprint("a b"), fingerprint("ab"));
    }
}
