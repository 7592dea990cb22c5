//! The capture's events as types: what `attach --capture` writes and
//! `pgdbg report` reads back.
//!
//! A line is `{"event": NAME, "ts": SECONDS, "pid": PID, FIELDS...}`
//! ([`Line`]), with `"ns_pid": PID` after `pid` when the backend is in
//! another PID namespace (a container: the PID `pg_stat_activity` shows
//! there; `pid` is the host's); NAME and FIELDS are one [`Event`] variant. The fields of
//! every variant (and of the structs inside them) are declared in
//! alphabetical order: the order of the lines pgdbg wrote before the
//! events had types (a `serde_json::Map` sorts its keys), so a line's
//! bytes did not change. A field that is absent from some lines is an
//! `Option` skipped when `None`; an `Option` without `skip_serializing_if`
//! is written as `null`.
//!
//! Reading is lenient the way the report always was: a field missing from
//! a line (written by an older pgdbg) reads as its default, the counts the
//! report adds up accept any number, and an event whose name this pgdbg
//! does not know reads as [`Event::Other`].

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// The capture format, written in the `attach` event. A capture without
/// it (written before it existed) is format 1; `pgdbg report` refuses a
/// newer one.
pub const CAPTURE_FORMAT: u32 = 1;

fn format_1() -> u32 {
    1
}

/// A key that is present (even `null`) reads as `Some`: for the fields
/// some lines leave out and others write as `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Any JSON number as a count: floats rounded, negatives 0; anything else
/// (null, a string) is 0, as the report has always read its counts.
fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(v.as_u64()
        .or_else(|| v.as_f64().map(|f| f.max(0.0).round() as u64))
        .unwrap_or(0))
}

/// One capture event, tagged by its on-disk name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// pgdbg attached: the server's version string, its binary, build id
    /// and the capture format.
    Attach {
        #[serde(default)]
        binary: String,
        #[serde(default)]
        build_id: String,
        #[serde(default = "format_1")]
        format: u32,
        #[serde(default)]
        version: Option<String>,
    },
    /// `break`: the new breakpoint and its locations.
    Breakpoint {
        #[serde(default)]
        id: u32,
        #[serde(default)]
        locations: Vec<BreakpointLocation>,
        #[serde(default)]
        spec: String,
    },
    /// The backend stopped: `reason` is "breakpoint" (with `address`,
    /// `breakpoints`, `file`, `function`, `line`), "interrupted" or
    /// "signal" (with `signal`).
    Stop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        address: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        breakpoints: Option<Vec<u32>>,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        file: Option<Option<String>>,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        function: Option<Option<String>>,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        line: Option<Option<u32>>,
        #[serde(default)]
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    /// Hits of a `silent` breakpoint at one location, counted since the
    /// previous `hits` event of that location (`first`: the first one's
    /// time); written instead of one `stop` per hit unless `attach
    /// --capture-hits`.
    Hits {
        #[serde(default)]
        address: String,
        #[serde(default)]
        breakpoints: Vec<u32>,
        #[serde(default, deserialize_with = "count")]
        count: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        #[serde(default)]
        first: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        function: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
    },
    /// A `plan --progress` report: the statement's elapsed time, the
    /// executor functions on the stack, and each plan node's counts so far.
    Progress {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elapsed_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        executing: Option<String>,
        #[serde(default)]
        nodes: Vec<ProgressNode>,
    },
    /// `print EXPR`.
    Print {
        #[serde(default)]
        expr: String,
        #[serde(default)]
        text: String,
        #[serde(default)]
        value: Value,
    },
    /// `set var LVALUE = EXPR`: the bytes written at `address`, the value
    /// before and after as `print` shows them.
    SetVar {
        #[serde(default)]
        address: String,
        #[serde(default)]
        lvalue: String,
        #[serde(default)]
        new: String,
        #[serde(default)]
        old: String,
        #[serde(default)]
        size: u64,
    },
    /// `printf`.
    Printf {
        #[serde(default)]
        text: String,
    },
    /// `backtrace`.
    Backtrace {
        #[serde(default)]
        frames: Vec<BacktraceFrame>,
    },
    /// `call F(...)`: `value` and `text`, or `error` (an ERROR inside the
    /// backend).
    Call {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(default)]
        function: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        value: Option<Value>,
    },
    /// `plan`: the EXPLAIN of the running query.
    Plan {
        #[serde(default)]
        format: String,
        #[serde(default)]
        nested: bool,
        #[serde(default)]
        query: String,
        #[serde(default)]
        text: String,
    },
    /// `plancache`: one custom/generic decision.
    PlanChoice {
        #[serde(default)]
        avg_custom_cost: Option<f64>,
        #[serde(default)]
        choice: String,
        #[serde(default)]
        custom_plan_cost: Option<f64>,
        #[serde(default)]
        execution: i64,
        #[serde(default)]
        generic_cost: Option<f64>,
        #[serde(default)]
        num_custom_plans: Option<i64>,
        #[serde(default)]
        num_generic_plans: Option<i64>,
        #[serde(default)]
        plan_cache_mode: String,
        #[serde(default)]
        planning_cost: Option<f64>,
        /// Null when the text could not be read truthfully.
        #[serde(default)]
        query: Option<String>,
        /// Why `query` is null.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query_unavailable: Option<String>,
        /// Then the text's first bytes, as copied at the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query_start: Option<String>,
        #[serde(default)]
        reason: String,
        #[serde(default)]
        statement: Option<String>,
        /// Written as `null` when not finite.
        #[serde(default)]
        total_custom_cost: Option<f64>,
    },
    /// The end of `plancache`.
    PlancacheEnd {
        #[serde(default)]
        decisions: u64,
        #[serde(default)]
        generic: u64,
        #[serde(default)]
        lost: u64,
        /// Recorded calls whose choice could not be told.
        #[serde(default)]
        undecided: u64,
    },
    /// `wait`: the wait event the backend is in now.
    WaitNow {
        #[serde(default)]
        info: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unresolved: Option<String>,
        #[serde(default)]
        wait_event: Option<String>,
        #[serde(default)]
        wait_event_type: Option<String>,
    },
    /// `waits sample`: one aggregated record per sampling run.
    WaitSamples {
        #[serde(default)]
        duration_s: f64,
        #[serde(default)]
        hz: f64,
        #[serde(default)]
        profile: Vec<WaitSample>,
        #[serde(default)]
        samples: u64,
        /// `--by-statement`: the samples of each statement (or idle
        /// state) that ran.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        by_statement: Vec<StatementSamples>,
    },
    /// `waits trace`: one wait, with its duration, stack and statement.
    Wait {
        #[serde(default, deserialize_with = "count")]
        duration_ns: u64,
        #[serde(default)]
        info: u32,
        #[serde(default)]
        stack: Vec<String>,
        /// Why the wait has no name (the name calls failed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unresolved: Option<String>,
        #[serde(default)]
        wait_event: Option<String>,
        #[serde(default)]
        wait_event_type: Option<String>,
        /// The statement the executor ran when the wait began (none:
        /// outside the executor, or statements not traced).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query: Option<String>,
    },
    /// `waits trace`: one statement, with its duration.
    Statement {
        #[serde(default, deserialize_with = "count")]
        duration_ns: u64,
        #[serde(default)]
        query: String,
    },
    /// `trace`: one call, its arguments (ARGEXPR -> value) and, with
    /// `--stacks`, its stack.
    Trace {
        #[serde(default)]
        args: Map<String, Value>,
        #[serde(default)]
        function: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stack: Option<Vec<String>>,
    },
    /// The end of `trace`.
    TraceEnd {
        #[serde(default, deserialize_with = "count")]
        calls: u64,
        #[serde(default)]
        duration_s: f64,
        #[serde(default)]
        function: String,
    },
    /// `count`: one function's calls (per phase with `--by-phase`).
    Count {
        #[serde(default, deserialize_with = "count")]
        calls: u64,
        #[serde(default)]
        duration_s: f64,
        #[serde(default)]
        function: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        phases: Option<Phases>,
    },
    /// `latency`: one function's call durations (entry to return), their
    /// statistics and log2 histogram, and the calls that could not be
    /// timed.
    Latency {
        #[serde(default, deserialize_with = "count")]
        avg_ns: u64,
        #[serde(default, deserialize_with = "count")]
        calls: u64,
        #[serde(default)]
        duration_s: f64,
        #[serde(default)]
        function: String,
        #[serde(default)]
        histogram: Vec<LatencyBucket>,
        #[serde(default, deserialize_with = "count")]
        max_ns: u64,
        #[serde(default, deserialize_with = "count")]
        min_ns: u64,
        #[serde(default, deserialize_with = "count")]
        nested: u64,
        #[serde(default, deserialize_with = "count")]
        no_return: u64,
        #[serde(default, deserialize_with = "count")]
        p50_ns: u64,
        #[serde(default, deserialize_with = "count")]
        p99_ns: u64,
        #[serde(default, deserialize_with = "count")]
        running_at_end: u64,
        #[serde(default, deserialize_with = "count")]
        running_at_start: u64,
        #[serde(default, deserialize_with = "count")]
        total_ns: u64,
    },
    /// The backend exited (`status`) or was killed (`signal`).
    Exit {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<i32>,
    },
    /// pgdbg detached.
    Detach,
    /// An event this pgdbg does not know (from a newer one): read, never
    /// written.
    #[serde(other, skip_serializing)]
    Other,
}

/// One plan node of a `progress` event: its EXPLAIN line, the rows and
/// loops counted so far (leader and parallel workers together), and for a
/// sequential scan the blocks read of the relation's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProgressNode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loops: Option<f64>,
    #[serde(default)]
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakpointLocation {
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub function: String,
    #[serde(default)]
    pub inlined: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BacktraceFrame {
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub function: Option<String>,
    #[serde(default)]
    pub inlined: bool,
    #[serde(default)]
    pub level: usize,
    #[serde(default)]
    pub line: Option<u32>,
    #[serde(default)]
    pub pc: String,
}

/// One wait event's share of a sampling run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitSample {
    #[serde(default)]
    pub info: u32,
    #[serde(default, deserialize_with = "count")]
    pub samples: u64,
    #[serde(default)]
    pub share: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolved: Option<String>,
    #[serde(default)]
    pub wait_event: Option<String>,
    #[serde(default)]
    pub wait_event_type: Option<String>,
}

/// `waits sample --by-statement`: one statement's (or state's) samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementSamples {
    /// pg_stat_activity's state: active, idle, ..., or "unknown".
    #[serde(default)]
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The statement as the table names it.
    #[serde(default)]
    pub label: String,
    #[serde(default, deserialize_with = "count")]
    pub samples: u64,
    /// Its samples by wait event (`share`: of its own samples).
    #[serde(default)]
    pub profile: Vec<WaitSample>,
}

/// `latency`: the calls whose duration is `low_us` to `high_us` (whole
/// microseconds, both included).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencyBucket {
    #[serde(default, deserialize_with = "count")]
    pub count: u64,
    #[serde(default, deserialize_with = "count")]
    pub high_us: u64,
    #[serde(default, deserialize_with = "count")]
    pub low_us: u64,
}

/// `count --by-phase`: calls per phase.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Phases {
    #[serde(default, deserialize_with = "count")]
    pub execution: u64,
    #[serde(default, deserialize_with = "count")]
    pub other: u64,
    #[serde(default, deserialize_with = "count")]
    pub planning: u64,
}

/// A wait event's names, as the `wait`, `wait_now` and `wait_samples`
/// events carry them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WaitName {
    pub info: u32,
    pub wait_event_type: Option<String>,
    pub wait_event: Option<String>,
    /// Why it has no name, when it has none.
    pub unresolved: Option<String>,
}

impl Event {
    /// The `attach` event, with the current [`CAPTURE_FORMAT`].
    pub fn attach(version: Option<String>, binary: String, build_id: String) -> Event {
        Event::Attach {
            binary,
            build_id,
            format: CAPTURE_FORMAT,
            version,
        }
    }

    /// The `wait_now` event of a wait event's names.
    pub fn wait_now(n: WaitName) -> Event {
        Event::WaitNow {
            info: n.info,
            unresolved: n.unresolved,
            wait_event: n.wait_event,
            wait_event_type: n.wait_event_type,
        }
    }

    /// The `wait` event of one traced wait.
    pub fn wait(n: WaitName, duration_ns: u64, stack: Vec<String>, query: Option<String>) -> Event {
        Event::Wait {
            duration_ns,
            info: n.info,
            stack,
            unresolved: n.unresolved,
            wait_event: n.wait_event,
            wait_event_type: n.wait_event_type,
            query,
        }
    }
}

impl WaitSample {
    pub fn new(n: WaitName, samples: u64, share: f64) -> WaitSample {
        WaitSample {
            info: n.info,
            samples,
            share,
            unresolved: n.unresolved,
            wait_event: n.wait_event,
            wait_event_type: n.wait_event_type,
        }
    }
}

/// One line of a capture: when, which backend, what.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Line {
    pub ts: f64,
    pub pid: i64,
    /// The backend's PID in its own PID namespace, when not `pid`.
    #[serde(default)]
    pub ns_pid: Option<i64>,
    #[serde(flatten)]
    pub event: Event,
}

impl Line {
    /// Append the line's JSON (without the newline) to `out`:
    /// `{"event":NAME,"ts":TS,"pid":PID[,"ns_pid":PID],FIELDS...}`, serialized straight
    /// into `out` (no intermediate `Value`).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let start = out.len();
        // `{"event":"NAME"` then `,FIELDS}` or `}`: serde writes the tag
        // first; `ts` and `pid` go right after it.
        if serde_json::to_writer(&mut *out, &self.event).is_err() {
            out.truncate(start);
            return;
        }
        const TAG: &[u8] = b"{\"event\":\"";
        debug_assert!(out[start..].starts_with(TAG));
        let name_start = start + TAG.len();
        let Some(close) = memchr::memchr(b'"', &out[name_start..]) else {
            return;
        };
        let at = name_start + close + 1;
        let mut head = Vec::with_capacity(48);
        head.extend_from_slice(b",\"ts\":");
        let _ = serde_json::to_writer(&mut head, &self.ts);
        head.extend_from_slice(b",\"pid\":");
        head.extend_from_slice(self.pid.to_string().as_bytes());
        if let Some(n) = self.ns_pid {
            head.extend_from_slice(b",\"ns_pid\":");
            head.extend_from_slice(n.to_string().as_bytes());
        }
        out.splice(at..at, head);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as pgdbg wrote them before the events had types (from the
    /// `json!` writers, and tests/data/report/capture.jsonl): each reads
    /// into a typed [`Line`] and is written back with the same bytes.
    const LINES: &[&str] = &[
        r#"{"event":"attach","ts":1700000000.0,"pid":4711,"binary":"/usr/lib/postgresql/15/bin/postgres","build_id":"abc123","format":1,"version":"PostgreSQL 15.8"}"#,
        r#"{"event":"attach","ts":1700000000.0,"pid":4711,"binary":"/x/postgres","build_id":"","format":1,"version":null}"#,
        r#"{"event":"breakpoint","ts":1700000000.3,"pid":4711,"id":1,"locations":[{"address":"0x55d1e2f00000","function":"choose_custom_plan","inlined":false}],"spec":"choose_custom_plan"}"#,
        r#"{"event":"stop","ts":1700000000.4,"pid":4711,"address":"0x55d1e2f00000","breakpoints":[1],"file":"plancache.c","function":"choose_custom_plan","line":1025,"reason":"breakpoint"}"#,
        r#"{"event":"stop","ts":1700000000.6,"pid":4713,"address":"0x55d1e2f00abc","breakpoints":[2],"file":null,"function":null,"line":null,"reason":"breakpoint"}"#,
        r#"{"event":"stop","ts":1700000000.7,"pid":4713,"reason":"signal","signal":"SIGUSR1"}"#,
        r#"{"event":"stop","ts":1700000000.7,"pid":4713,"reason":"interrupted"}"#,
        r#"{"event":"print","ts":1700000000.41,"pid":4711,"expr":"plansource->generic_cost","text":"-1","value":-1}"#,
        r#"{"event":"print","ts":1700000000.41,"pid":4711,"expr":"p","text":"{a = 1}","value":{"a":1,"b":[1,2]}}"#,
        r#"{"event":"printf","ts":1700000000.41,"pid":4711,"text":"x=1\n"}"#,
        r#"{"event":"set_var","ts":1700000000.42,"pid":4711,"address":"0x55d0c0a0","lvalue":"work_mem","new":"12345","old":"4096","size":4}"#,
        r#"{"event":"backtrace","ts":1700000000.42,"pid":4711,"frames":[]}"#,
        r#"{"event":"backtrace","ts":1700000000.42,"pid":4711,"frames":[{"file":"plancache.c","function":"choose_custom_plan","inlined":true,"level":0,"line":1025,"pc":"0x55d1e2f00000"},{"file":null,"function":null,"inlined":false,"level":1,"line":null,"pc":"0x1"}]}"#,
        r#"{"event":"call","ts":1.5,"pid":1,"function":"pg_backend_pid","text":"4711","value":4711}"#,
        r#"{"event":"call","ts":1.5,"pid":1,"function":"f","text":"<void>","value":null}"#,
        r#"{"event":"call","ts":1.5,"pid":1,"error":"division by zero","function":"int4div"}"#,
        r#"{"event":"plan","ts":1.5,"pid":1,"format":"text","nested":false,"query":"select 1","text":"Result  (cost=0.00..0.01 rows=1 width=4)"}"#,
        r#"{"event":"plan_choice","ts":1700000001.0,"pid":4711,"avg_custom_cost":null,"choice":"custom","custom_plan_cost":12.5,"execution":1,"generic_cost":null,"num_custom_plans":0,"num_generic_plans":0,"plan_cache_mode":"auto","planning_cost":1000.0,"query":"SELECT abalance FROM pgbench_accounts WHERE aid = $1","reason":"fewer than 5 custom plans so far (0); generic not built yet","statement":"s1","total_custom_cost":0.0}"#,
        r#"{"event":"plan_choice","ts":1700000001.8,"pid":4713,"avg_custom_cost":null,"choice":"custom","custom_plan_cost":null,"execution":1,"generic_cost":null,"num_custom_plans":7,"num_generic_plans":null,"plan_cache_mode":"auto","planning_cost":null,"query":"SELECT 1","reason":"one_shot","statement":null,"total_custom_cost":null}"#,
        r#"{"event":"plancache_end","ts":1700000002.0,"pid":4711,"decisions":5,"generic":2,"lost":0,"undecided":0}"#,
        r#"{"event":"wait_now","ts":1.0,"pid":7,"info":0,"wait_event":null,"wait_event_type":null}"#,
        r#"{"event":"wait_now","ts":1.0,"pid":7,"info":167772168,"unresolved":"the backend was not asked for its name","wait_event":"0x0a000008","wait_event_type":null}"#,
        r#"{"event":"wait_samples","ts":1700000005.0,"pid":4711,"duration_s":3.0,"hz":100.0,"profile":[{"info":100663296,"samples":200,"share":0.6667,"wait_event":"ClientRead","wait_event_type":"Client"},{"info":0,"samples":60,"share":0.2,"wait_event":null,"wait_event_type":null},{"info":16777282,"samples":40,"share":0.1333,"unresolved":"cannot read","wait_event":"0x01000042","wait_event_type":null}],"samples":300}"#,
        r#"{"event":"wait","ts":1700000003.0,"pid":4711,"duration_ns":220000,"info":1,"stack":["LWLockAcquire+126","LockAcquireExtended+298"],"wait_event":"LockManager","wait_event_type":"LWLock"}"#,
        r#"{"event":"wait","ts":2.0,"pid":7,"duration_ns":5000,"info":16777282,"stack":[],"unresolved":"cannot read the FP/SSE/AVX state","wait_event":"0x01000042","wait_event_type":null}"#,
        r#"{"event":"statement","ts":1700000004.0,"pid":4711,"duration_ns":1200000,"query":"SELECT abalance FROM pgbench_accounts WHERE aid = $1"}"#,
        r#"{"event":"trace","ts":1700000006.0,"pid":4711,"args":{"lockmode":1,"relid":16384},"function":"LockRelationOid","stack":["LockRelationOid+79","AcquireExecutorLocks+101"]}"#,
        r#"{"event":"trace","ts":1700000006.03,"pid":4712,"args":{"heapRelation":"pgbench_accounts","x":"<error: no symbol \"x\" in current context>"},"function":"index_beginscan"}"#,
        r#"{"event":"trace_end","ts":1700000006.5,"pid":4712,"calls":14,"duration_s":0.5,"function":"ReadBufferExtended"}"#,
        r#"{"event":"count","ts":1700000010.0,"pid":4711,"calls":5000,"duration_s":10.0,"function":"LWLockAcquire","phases":{"execution":3500,"other":300,"planning":1200}}"#,
        r#"{"event":"count","ts":1700000010.2,"pid":4713,"calls":42,"duration_s":10.0,"function":"ExecInitNode"}"#,
        r#"{"event":"exit","ts":1700000011.0,"pid":4713,"status":0}"#,
        r#"{"event":"exit","ts":1700000011.0,"pid":4713,"signal":"SIGKILL"}"#,
        r#"{"event":"detach","ts":1700000012.345,"pid":4712}"#,
    ];

    fn write(l: &Line) -> String {
        let mut out = Vec::new();
        l.write_to(&mut out);
        String::from_utf8(out).unwrap()
    }

    /// What `Capture::event` wrote before the events had types: `event`,
    /// `ts`, `pid`, then the `json!` fields in `serde_json::Map`'s
    /// (sorted) order.
    fn untyped_writer(text: &str) -> String {
        let v: Value = serde_json::from_str(text).unwrap();
        let m = v.as_object().unwrap();
        let mut line = format!(
            "{{\"event\":{},\"ts\":{},\"pid\":{}",
            m["event"], m["ts"], m["pid"]
        );
        for (k, v) in m {
            if k != "event" && k != "ts" && k != "pid" {
                line.push_str(&format!(",{}:{}", Value::from(k.as_str()), v));
            }
        }
        line.push('}');
        line
    }

    #[test]
    fn every_kind_round_trips_byte_for_byte() {
        let mut kinds = std::collections::BTreeSet::new();
        for text in LINES {
            assert_eq!(&untyped_writer(text), text, "not as pgdbg wrote it");
            let l: Line = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_ne!(l.event, Event::Other, "{text}");
            let name = serde_json::from_str::<Value>(text).unwrap()["event"].clone();
            kinds.insert(name.as_str().unwrap().to_string());
            assert_eq!(&write(&l), text);
        }
        // every event named in the --capture row of docs/usage.md
        assert_eq!(kinds.len(), 20, "{kinds:?}");
    }

    /// The lines of tests/data/report/capture.jsonl (hand-written, some as
    /// older pgdbg wrote them: other key order, fields missing) read into
    /// the types and back to the same JSON value, but for the fields an
    /// older pgdbg did not write.
    #[test]
    fn report_test_capture_reads_into_the_types() {
        let text = include_str!("../../tests/data/report/capture.jsonl");
        let mut other = 0;
        for line in text.lines() {
            let l: Line = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            if l.event == Event::Other {
                other += 1;
                continue;
            }
            let back: Value = serde_json::from_str(&write(&l)).unwrap();
            let mut want: Value = serde_json::from_str(line).unwrap();
            let (b, w) = (back.as_object().unwrap(), want.as_object_mut().unwrap());
            for (k, v) in b {
                // added on the way back: defaults of what was not written
                if !w.contains_key(k) {
                    assert!(
                        matches!(
                            k.as_str(),
                            "format" | "custom_plan_cost" | "planning_cost" | "lost" | "undecided"
                        ),
                        "{line}: {k}"
                    );
                    w.insert(k.clone(), v.clone());
                }
            }
            // numbers compare by value (1000 was written as 1000.0)
            let norm = |v: &Value| {
                serde_json::from_str::<Value>(
                    &v.to_string().replace(".0,", ",").replace(".0}", "}"),
                )
                .unwrap()
            };
            assert_eq!(norm(&back), norm(&want), "{line}");
        }
        assert_eq!(other, 1);
    }

    #[test]
    fn unknown_events_and_missing_fields_read_leniently() {
        let l: Line =
            serde_json::from_str(r#"{"event":"frobnicate","ts":1,"pid":2,"x":[1]}"#).unwrap();
        assert_eq!((l.ts, l.pid, l.event), (1.0, 2, Event::Other));
        let l: Line = serde_json::from_str(r#"{"event":"attach","ts":1.0,"pid":7}"#).unwrap();
        assert_eq!(
            l.event,
            Event::Attach {
                binary: String::new(),
                build_id: String::new(),
                format: 1,
                version: None
            }
        );
        let l: Line = serde_json::from_str(
            r#"{"event":"wait","ts":1.0,"pid":7,"duration_ns":1500.6,"wait_event":"X"}"#,
        )
        .unwrap();
        let Event::Wait {
            duration_ns, stack, ..
        } = l.event
        else {
            panic!()
        };
        assert_eq!((duration_ns, stack.len()), (1501, 0));
        assert!(serde_json::from_str::<Line>(r#"{"event":"wait","pid":7}"#).is_err());
    }

    /// A plan choice's cost that is not finite is written as `null`, as
    /// `json!` wrote it.
    #[test]
    fn non_finite_costs_are_null() {
        let l = Line {
            ts: 1.0,
            pid: 1,
            ns_pid: None,
            event: Event::PlancacheEnd {
                decisions: 1,
                generic: 0,
                lost: 0,
                undecided: 0,
            },
        };
        assert_eq!(
            write(&l),
            r#"{"event":"plancache_end","ts":1.0,"pid":1,"decisions":1,"generic":0,"lost":0,"undecided":0}"#
        );
        let v = serde_json::to_value(Event::PlanChoice {
            avg_custom_cost: None,
            choice: "custom".into(),
            custom_plan_cost: None,
            execution: 1,
            generic_cost: None,
            num_custom_plans: Some(0),
            num_generic_plans: None,
            plan_cache_mode: "auto".into(),
            planning_cost: None,
            query: None,
            query_unavailable: None,
            query_start: None,
            reason: String::new(),
            statement: None,
            total_custom_cost: Some(f64::NAN),
        })
        .unwrap();
        assert!(v["total_custom_cost"].is_null());
    }
}
