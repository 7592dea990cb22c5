//! Wait names and `waits trace` on a fake backend: the wait-event word
//! in an in-memory memory map, written by the test as the backend
//! would write it.
use super::*;
use crate::debuginfo::layout::FieldKind::{Pointer, Signed, Unsigned};
use crate::inferior::Registers;
use crate::postgres::backend::ProbeHandler;
use crate::postgres::backend::fake::{FakeBackend, layout};

const LWLOCK: u32 = 0x0100_0033;
const IO: u32 = 0x0a00_0008;
/// `my_wait_event_info` (a pointer) and the word it points at.
const MY_WAIT: u64 = 0x1000;
const WORD: u64 = 0x2000;
/// Globals the call guards read.
const HOLDOFF: u64 = 0x3000;
const CONTEXT: u64 = 0x3100;
const CRIT: u64 = 0x3200;
const LWLOCKS_HELD: u64 = 0x3300;
const EXEC_START: u64 = 0x40_0000;
const EXEC_END: u64 = 0x40_1000;

fn names() -> WaitNames {
    let mut n = WaitNames::default();
    n.map
        .insert(LWLOCK, ("LWLock".into(), "LockManager".into()));
    n
}

fn backend() -> FakeBackend {
    let mut s = FakeBackend::new();
    s.globals.insert("my_wait_event_info".into(), MY_WAIT);
    s.map(MY_WAIT, WORD.to_le_bytes().to_vec());
    s.map(WORD, 0u32.to_le_bytes().to_vec());
    for (name, a) in [
        ("InterruptHoldoffCount", HOLDOFF),
        ("CurrentMemoryContext", CONTEXT),
        ("CritSectionCount", CRIT),
        ("num_held_lwlocks", LWLOCKS_HELD),
    ] {
        s.globals.insert(name.into(), a);
        s.map(a, vec![0u8; 8]);
    }
    for (name, a) in [
        ("pgstat_get_wait_event_type", 0x50_0000),
        ("pgstat_get_wait_event", 0x50_1000),
        ("standard_ExecutorStart", EXEC_START),
        ("standard_ExecutorEnd", EXEC_END),
    ] {
        s.functions.insert(name.into(), vec![a]);
    }
    s.stack = vec![
        "LWLockAcquire+126".into(),
        "LockAcquireExtended+298".into(),
        "LockRelationOid+79".into(),
    ];
    s
}

/// The backend writes `info` into its wait-event word; the watchpoint
/// (DR6 bit 0) fires.
fn write_word(s: &mut FakeBackend, p: &mut TraceProbe, info: u32) {
    s.poke(WORD, &info.to_le_bytes());
    p.on_watch(s, 1).unwrap();
}

fn wait(s: &mut FakeBackend, p: &mut TraceProbe, info: u32) {
    write_word(s, p, info);
    write_word(s, p, 0);
}

#[test]
fn names_label_and_unresolved() {
    let n = names();
    assert_eq!(n.describe(0), (None, None));
    assert_eq!(n.label(0), "on CPU");
    assert_eq!(n.unresolved(0), None);
    assert_eq!(
        n.describe(LWLOCK),
        (Some("LWLock".into()), Some("LockManager".into()))
    );
    assert_eq!(n.label(LWLOCK), "LWLock: LockManager");
    assert_eq!(n.unresolved(LWLOCK), None);
    assert_eq!(n.describe(IO), (None, Some("0x0a000008".into())));
    assert_eq!(n.label(IO), "unresolved 0x0a000008");
    assert_eq!(
        n.unresolved(IO).as_deref(),
        Some("the backend was not asked for its name")
    );
    let f = serde_json::to_value(Event::wait_now(n.event_fields(IO))).unwrap();
    assert_eq!(
        f,
        serde_json::json!({"event": "wait_now", "wait_event_type": null, "wait_event": "0x0a000008",
            "info": IO, "unresolved": "the backend was not asked for its name"})
    );
    let f = serde_json::to_value(Event::wait_now(n.event_fields(LWLOCK))).unwrap();
    assert_eq!(
        f,
        serde_json::json!({"event": "wait_now", "wait_event_type": "LWLock", "wait_event": "LockManager", "info": LWLOCK})
    );
}

#[test]
fn resolving_says_why_a_name_could_not_be_asked_for() {
    let mut s = backend();
    let mut n = names();
    // known names and "on CPU" need no call (none could be made here)
    s.functions.clear();
    assert_eq!(n.try_resolve(&mut s, &[0, LWLOCK]), None);
    assert!(n.failed.is_none());
    // no name functions in the binary
    let why = n.try_resolve(&mut s, &[IO]).expect("cannot resolve");
    assert_eq!(
        why,
        "no out-of-line function \"pgstat_get_wait_event_type\" to call in this binary"
    );
    assert_eq!(n.unresolved(IO).as_deref(), Some(why.as_str()));
    // inside a critical section no call is made, not even these
    let mut s = backend();
    s.poke(CRIT, &1i32.to_le_bytes());
    assert_eq!(
        n.try_resolve(&mut s, &[IO]).as_deref(),
        Some("the backend is in a critical section")
    );
    assert_eq!(
        n.label(IO),
        "unresolved 0x0a000008",
        "an unresolved wait keeps its raw value"
    );
    // holding LWLocks (the end of an LWLock wait) does not stop them:
    // the guards pass and the call frame is opened (the fake has none)
    s.poke(CRIT, &0i32.to_le_bytes());
    s.poke(LWLOCKS_HELD, &2i32.to_le_bytes());
    assert_eq!(
        n.try_resolve(&mut s, &[IO]).as_deref(),
        Some("the fake backend cannot run calls")
    );
    // whereas an ordinary call is refused there
    let e = BackendCalls::open(&mut s, std::time::Duration::from_secs(1), false)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("the backend holds 2 LWLocks"), "{e}");
}

#[test]
fn word_address_falls_back_to_myproc() {
    let mut s = backend();
    assert_eq!(word_address(&s).unwrap(), WORD);
    // 13: no my_wait_event_info, the word is MyProc->wait_event_info
    s.globals.remove("my_wait_event_info");
    const MYPROC: u64 = 0x6000;
    const PROC: u64 = 0x7000;
    s.globals.insert("MyProc".into(), MYPROC);
    s.map(MYPROC, 0u64.to_le_bytes().to_vec());
    let l = layout(
        "PGPROC",
        &[
            ("links", 16, Pointer),
            ("pid", 4, Signed),
            ("wait_event_info", 4, Unsigned),
        ],
    );
    let off = l.offset("wait_event_info").unwrap();
    s.layouts.insert("PGPROC".into(), l);
    assert_eq!(
        word_address(&s).unwrap_err().to_string(),
        "MyProc is NULL: this process has no wait events"
    );
    s.poke(MYPROC, &PROC.to_le_bytes());
    assert_eq!(word_address(&s).unwrap(), PROC + off);
}

#[test]
fn trace_holds_unnamed_waits_back_and_reports_in_order() {
    let mut s = backend();
    let mut p = TraceProbe::with_names(&mut s, names(), 2, false, true).unwrap();
    assert_eq!(s.watched, Some(WORD));
    assert_eq!(
        s.armed.keys().copied().collect::<Vec<_>>(),
        vec![EXEC_START, EXEC_END]
    );
    // another debug register fired: not the word's
    s.poke(WORD, &LWLOCK.to_le_bytes());
    p.on_watch(&mut s, 0b10).unwrap();
    assert!(p.current.is_none());
    // the same value written again is no new wait
    p.on_watch(&mut s, 1).unwrap();
    p.on_watch(&mut s, 1).unwrap();
    write_word(&mut s, &mut p, 0);
    assert_eq!(s.lines.len(), 1);
    assert!(
        s.lines[0].starts_with("wait LWLock: LockManager"),
        "{:?}",
        s.lines
    );
    assert!(
        s.lines[0].ends_with(" ms  LWLockAcquire+126 <- LockAcquireExtended+298"),
        "{:?}",
        s.lines
    );
    // an IO wait ends inside a critical section: it cannot be named
    // there, and is held back; so is the wait after it (order)
    s.poke(CRIT, &1i32.to_le_bytes());
    wait(&mut s, &mut p, IO);
    wait(&mut s, &mut p, LWLOCK);
    assert_eq!(s.lines.len(), 1, "{:?}", s.lines);
    assert_eq!(s.events_named("wait").len(), 1);
    // once the name is known (asked at a later safe stop), the next
    // ended wait lets all of them out, in order
    p.names.map.insert(IO, ("IO".into(), "DataFileRead".into()));
    wait(&mut s, &mut p, LWLOCK);
    let labels: Vec<&str> = s
        .lines
        .iter()
        .map(|l| l.split("  ").next().unwrap().trim_end())
        .collect();
    assert_eq!(
        labels,
        vec![
            "wait LWLock: LockManager",
            "wait IO: DataFileRead",
            "wait LWLock: LockManager",
            "wait LWLock: LockManager",
        ]
    );
    let ev = s.events_named("wait");
    assert_eq!(ev.len(), 4);
    assert_eq!(ev[1]["wait_event"], "DataFileRead");
    assert!(ev[1].get("unresolved").is_none());
    // the held-back wait keeps the time it ended
    assert!(ev[1]["ts"].as_f64() <= ev[3]["ts"].as_f64());
    assert_eq!(
        ev[0]["stack"],
        serde_json::json!(["LWLockAcquire+126", "LockAcquireExtended+298"])
    );
    assert_eq!(p.waits.len(), 4);
}

#[test]
fn trace_end_reports_what_stayed_unnamed_with_the_reason() {
    let mut s = backend();
    let mut p = TraceProbe::with_names(&mut s, names(), 0, false, true).unwrap();
    s.poke(CRIT, &1i32.to_le_bytes());
    wait(&mut s, &mut p, IO);
    write_word(&mut s, &mut p, LWLOCK); // still waiting at the end
    assert!(s.lines.is_empty());
    p.close(&mut s);
    assert_eq!(s.lines.len(), 2, "{:?}", s.lines);
    assert!(s.lines[0].starts_with("wait unresolved 0x0a000008"));
    assert!(s.lines[1].starts_with("wait LWLock: LockManager"));
    let ev = s.events_named("wait");
    assert_eq!(ev[0]["unresolved"], "the backend is in a critical section");
    assert_eq!(ev[0]["stack"], serde_json::json!([]));
    let sum = p.summary();
    assert!(
        sum.contains(
            "  1 waits could not be named (the backend is in a critical section): shown by their raw wait_event_info"
        ),
        "{sum}"
    );
    assert!(sum.contains("in 2 waits"), "{sum}");
}

#[test]
fn trace_abandon_reports_without_asking() {
    let mut s = backend();
    let mut p = TraceProbe::with_names(&mut s, names(), 0, true, true).unwrap();
    s.poke(CRIT, &1i32.to_le_bytes());
    wait(&mut s, &mut p, IO);
    // asking now would fail differently
    s.globals.remove("InterruptHoldoffCount");
    p.abandon(&mut s);
    assert_eq!(
        p.names.failed.as_deref(),
        Some("the backend is in a critical section")
    );
    // --quiet: events only
    assert!(s.lines.is_empty());
    assert_eq!(s.events_named("wait").len(), 1);
    assert_eq!(p.waits.len(), 1);
}

#[test]
fn trace_lets_held_back_waits_out_when_too_many() {
    let mut s = backend();
    let mut p = TraceProbe::with_names(&mut s, names(), 0, true, true).unwrap();
    s.poke(CRIT, &1i32.to_le_bytes());
    for _ in 0..MAX_UNREPORTED - 1 {
        wait(&mut s, &mut p, IO);
    }
    assert_eq!(s.events_named("wait").len(), 0);
    wait(&mut s, &mut p, IO);
    assert_eq!(s.events_named("wait").len(), MAX_UNREPORTED);
    assert!(p.unreported.is_empty());
}

#[test]
fn trace_times_statements_between_executor_start_and_end() {
    let mut s = backend();
    const QD: u64 = 0x9000;
    const TEXT: u64 = 0xa000;
    let l = layout(
        "QueryDesc",
        &[
            ("operation", 4, Signed),
            ("plannedstmt", 8, Pointer),
            ("sourceText", 8, Pointer),
        ],
    );
    let mut qd = vec![0u8; l.size as usize];
    let o = l.offset("sourceText").unwrap() as usize;
    qd[o..o + 8].copy_from_slice(&TEXT.to_le_bytes());
    s.layouts.insert("QueryDesc".into(), l);
    s.map(QD, qd);
    s.map_str(TEXT, "SELECT   count(*)\n FROM t");
    let mut p = TraceProbe::with_names(&mut s, names(), 0, false, true).unwrap();
    s.regs = Registers {
        rdi: QD,
        ..Default::default()
    };
    p.on_stop(&mut s, EXEC_START).unwrap();
    // a wait inside the statement carries it; one after its end does not
    p.names.map.insert(IO, ("IO".into(), "DataFileRead".into()));
    let now = std::time::Instant::now();
    p.store(&mut s, IO, now, 1.0, Vec::new());
    p.store(&mut s, 0, now, 1.1, Vec::new());
    p.on_stop(&mut s, EXEC_END).unwrap();
    p.store(&mut s, LWLOCK, now, 1.2, Vec::new());
    p.store(&mut s, 0, now, 1.3, Vec::new());
    let waits = s.events_named("wait");
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert_eq!(waits[0]["query"], "SELECT   count(*)\n FROM t");
    assert!(waits[1].get("query").is_none(), "{:?}", waits[1]);
    // an end without its start (tracing began mid-statement): nothing
    s.regs.rdi = QD + 0x100;
    p.on_stop(&mut s, EXEC_END).unwrap();
    let ev = s.events_named("statement");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["query"], "SELECT   count(*)\n FROM t");
    assert_eq!(p.statements.len(), 1);
    let sum = p.summary();
    let row = sum
        .lines()
        .skip_while(|l| *l != "Statements:")
        .nth(1)
        .expect("a statement row");
    assert!(row.trim_start().starts_with("1 x "), "{row}");
    assert!(row.ends_with("ms  SELECT count(*) FROM t"), "{row}");
}

#[test]
fn summary_sums_waits_per_event() {
    let mut s = backend();
    let mut p = TraceProbe::with_names(&mut s, names(), 0, true, true).unwrap();
    p.names.map.insert(IO, ("IO".into(), "DataFileRead".into()));
    for (info, ms) in [(LWLOCK, 1u128), (IO, 2), (LWLOCK, 3)] {
        p.waits.push(WaitRecord {
            info,
            duration_ns: ms * 1_000_000,
            stack: Vec::new(),
            query: None,
        });
    }
    let sum = p.summary();
    let rows: Vec<Vec<&str>> = sum
        .lines()
        .skip(2)
        .take(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    // largest total first: count, total ms, max ms
    assert_eq!(
        rows[0],
        vec!["LWLock:", "LockManager", "2", "4.000", "3.000"]
    );
    assert_eq!(rows[1], vec!["IO:", "DataFileRead", "1", "2.000", "2.000"]);
    assert!(sum.contains("total wait time 6.000 ms in 3 waits"), "{sum}");
    assert!(!sum.contains("could not be named"), "{sum}");
}

/// An int3 refused after the word's register and another int3 were
/// taken: the probe is not made, and nothing stays armed (the probe loop
/// that would give them back never runs).
#[test]
fn trace_refused_partway_leaves_nothing_armed() {
    let mut s = backend();
    s.refuse_arm = Some(EXEC_END);
    let r = TraceProbe::with_names(&mut s, names(), 0, true, true);
    let e = r.err().expect("refused");
    assert!(e.to_string().contains("refuses an int3"), "{e}");
    assert!(s.armed.is_empty(), "{:?}", s.armed);
    assert_eq!(s.watched, None);
}
