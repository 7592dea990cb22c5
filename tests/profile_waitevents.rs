//! `profile --off-cpu`'s wait events, on workloads whose answer is known
//! (real PostgreSQL 15 and 18):
//!
//! - a backend blocked on a relation-extension lock that another session
//!   holds (that session's backend is stopped with SIGSTOP by the test
//!   itself, at a moment pg_locks shows it holding the lock, and continued
//!   on every path by a guard): its time off a CPU is in
//!   `LockRelationForExtension`'s stack with the wait event `Lock:extend`;
//! - a backend sleeping in `pg_sleep`: `Timeout:PgSleep` under
//!   `pg_usleep`/`WaitLatch`;
//! - a backend fetching rows scattered over a cold table by an index scan
//!   (the page cache dropped; every fetch a random read that no readahead
//!   serves): `IO:DataFileRead` under `FileRead`, uninterruptible (D).
//!
//! The backend profiled is never traced nor stopped by pgdbg.

use common::*;
use pgdbg_testbed as common;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Continues a process the test stopped, whatever happens (test panic
/// included).
struct Continue(i32);

impl Drop for Continue {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// `pgdbg profile PID --off-cpu --for D --format json` started, its
/// standard output to a file, once it says it records (its line on
/// standard error): what happens after this is in the window.
struct Recorder {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Recorder {
    fn start(pid: i32, dur: &str, name: &str) -> Recorder {
        let f = |ext: &str| {
            std::env::temp_dir().join(format!("pgdbg-{name}-{}-{pid}.{ext}", std::process::id()))
        };
        let (out, err) = (f("out"), f("err"));
        let child = Command::new(pgdbg_bin())
            .args([
                "profile",
                &pid.to_string(),
                "--off-cpu",
                "--for",
                dur,
                "--format",
                "json",
            ])
            .env_remove("DEBUGINFOD_URLS")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("spawn pgdbg");
        let r = Recorder { child, out, err };
        wait_until("pgdbg records", Duration::from_secs(30), || {
            std::fs::read_to_string(&r.err).is_ok_and(|t| t.contains("profile: recording"))
        });
        r
    }

    /// Its JSON document, once it has ended (by its --for).
    fn finish(mut self) -> serde_json::Value {
        let st = self.child.wait().unwrap();
        let out = std::fs::read_to_string(&self.out).unwrap();
        let err = std::fs::read_to_string(&self.err).unwrap();
        let _ = std::fs::remove_file(&self.out);
        let _ = std::fs::remove_file(&self.err);
        assert!(st.success(), "{err}");
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        eprintln!(
            "off CPU {} s of {} s in {} intervals, by reason {}, by wait event {}, top stack {}",
            v["off_cpu_s"],
            v["duration_s"],
            v["intervals"],
            v["by_reason"],
            v["by_wait_event"],
            v["stacks"][0]
        );
        v
    }
}

/// Seconds off a CPU with the wait event `label`, and in how many
/// intervals.
fn wait_time(p: &serde_json::Value, label: &str) -> (f64, u64) {
    p["by_wait_event"]
        .as_array()
        .unwrap_or_else(|| panic!("by_wait_event: {p}"))
        .iter()
        .find(|r| r[0] == label)
        .map(|r| (r[1].as_f64().unwrap(), r[2].as_u64().unwrap()))
        .unwrap_or((0.0, 0))
}

fn frames(stack: &serde_json::Value) -> Vec<&str> {
    stack["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect()
}

/// A session answering queries on a thread of its own: a query on
/// pg_locks waits for the lock manager's LWLocks, which a stopped backend
/// may hold (it answers once that one goes on).
struct Asker {
    to: std::sync::mpsc::Sender<String>,
    from: std::sync::mpsc::Receiver<String>,
}

impl Asker {
    fn new(cl: &Cluster) -> Asker {
        let (to, rx) = std::sync::mpsc::channel::<String>();
        let (tx, from) = std::sync::mpsc::channel();
        let mut c = cl.connect();
        std::thread::spawn(move || {
            for q in rx {
                if tx.send(c.simple_text(&q)).is_err() {
                    break;
                }
            }
        });
        Asker { to, from }
    }

    /// The answer, or None when none came within `limit`; `late` runs
    /// then, and the answer is waited for.
    fn ask(&self, q: &str, limit: Duration, late: impl FnOnce()) -> Option<String> {
        self.to.send(q.to_string()).unwrap();
        match self.from.recv_timeout(limit) {
            Ok(a) => Some(a),
            Err(_) => {
                late();
                self.from.recv().unwrap();
                None
            }
        }
    }
}

/// What pg_stat_activity shows backend `pid` waiting for.
fn waiting_for(c: &mut Client, pid: i32) -> String {
    c.simple_text(&format!(
        "select coalesce(wait_event_type, '') || ':' || coalesce(wait_event, '') \
         from pg_stat_activity where pid = {pid}"
    ))
}

fn extension_lock(major: u32) {
    let cl = Cluster::start(major);
    let mut c = cl.connect();
    // rows of 7000 bytes stored as they are: a page each, every insert
    // extends the table (created and committed first: a table created in
    // the inserting transaction would be extended without the lock)
    c.exec("create table ext (x text); alter table ext alter column x set storage plain");
    let fill = "insert into ext select repeat('x', 7000) from generate_series(1, 100000000)";
    let (a, apid, ah) = cl.running(fill, "generate_series(1, 100000000)");
    let asker = Asker::new(&cl);
    let q = format!(
        "select count(*) from pg_locks where locktype = 'extend' and granted and pid = {apid}"
    );
    let mut b = cl.connect();
    let bpid = b.pid();
    // rounds: A stopped holding the extension lock may also hold what B
    // needs before it (a buffer being written: B waits IPC:BufferIO);
    // then A goes on, B's insert ends, and a new round stops A again
    let mut profiled = None;
    for round in 0..5 {
        let guard = Continue(apid);
        let mut held = false;
        // stop A at moments spread over its work until pg_locks shows it
        // holding the extension lock while stopped
        for attempt in 0..50_000u32 {
            unsafe { libc::kill(apid, libc::SIGSTOP) };
            let t0 = Instant::now();
            while !proc_state(apid).starts_with('T') {
                assert!(t0.elapsed() < Duration::from_secs(10), "A stops");
                std::thread::sleep(Duration::from_micros(100));
            }
            let cont = || unsafe {
                libc::kill(apid, libc::SIGCONT);
            };
            if asker.ask(&q, Duration::from_secs(2), cont).as_deref() == Some("1") {
                eprintln!("round {round}: A holds the extension lock, stopped (attempt {attempt})");
                held = true;
                break;
            }
            unsafe { libc::kill(apid, libc::SIGCONT) };
            std::thread::sleep(Duration::from_micros(100 + (attempt as u64 * 7919) % 1000));
        }
        assert!(held, "A was never stopped holding the extension lock");

        // B: one row, a new page: it waits for A's extension lock.  The
        // recording starts before B's insert, so the wait's switch-out is
        // in the window.
        let rec = Recorder::start(bpid, "4s", "extend");
        let t_insert = Instant::now();
        let bh = b.spawn_text("insert into ext values (repeat('y', 7000))");
        let t0 = Instant::now();
        let mut w = waiting_for(&mut c, bpid);
        while w != "Lock:extend" && t0.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(10));
            w = waiting_for(&mut c, bpid);
        }
        let waited_from = t_insert.elapsed().as_secs_f64();
        let p = rec.finish();
        let still = waiting_for(&mut c, bpid);
        drop(guard);
        // A goes on, then B gets what it waits for; B's insert ends
        let r = b.rejoin(bh);
        assert!(r.is_ok(), "B's insert ends once A goes on: {r:?}");
        if w != "Lock:extend" {
            eprintln!("round {round}: B waited for {w}, not the extension lock: again");
            continue;
        }
        assert_eq!(still, "Lock:extend", "B waited throughout");
        profiled = Some((p, waited_from));
        break;
    }
    let (p, waited_from) = profiled.expect("B waited for the extension lock in a round");
    assert_eq!(tracer_pid(bpid), 0);
    let dur = p["duration_s"].as_f64().unwrap();
    let (extend_s, n) = wait_time(&p, "Lock:extend");
    assert!(
        extend_s >= dur - waited_from - 0.3 && extend_s <= dur && n >= 1,
        "B waited Lock:extend from {waited_from:.3} s of the {dur} s recorded: \
         {extend_s} s in {n} intervals: {p}"
    );
    let top = &p["stacks"][0];
    assert_eq!(
        top["wait_event"], "Lock:extend",
        "the top stack waits: {top}"
    );
    let f = frames(top);
    assert!(
        f.contains(&"LockRelationForExtension") && f.contains(&"heap_insert"),
        "the top stack is the extension lock's: {top}"
    );
    assert!(top["reason"].as_str().unwrap().starts_with('S'), "{top}");
    cl.end_by_cancel(a, apid, ah);
}

#[test]
fn extension_lock_15() {
    extension_lock(15);
}

#[test]
fn extension_lock_18() {
    extension_lock(18);
}

/// The frames a read of a data file goes through, as far as the CPU's
/// stack shows them (15: FileRead -> pread; 18, io_method=sync:
/// FileReadV -> preadv).
const READ_FRAMES: &[&str] = &[
    "FileRead",
    "FileReadV",
    "pg_preadv",
    "pread64",
    "__libc_pread64",
    "__libc_pread",
    "preadv64",
    "__libc_preadv64",
    "__libc_preadv",
];

/// Rows of the cold table fetched by the profiled statement, one heap page
/// each.
const COLD_ROWS: i64 = 4000;

fn cold_read(major: u32, settings: &[&str]) {
    let cl = Cluster::start_with(major, settings);
    let mut c = cl.connect();
    // about 290 MB: rows of 512 bytes (below the TOAST threshold), 14 to a
    // page, laid out in the order of g * 7919 mod 500000 (a permutation:
    // 7919 is prime to 500000), so that rows g and g + 1 lie about 565
    // pages apart.  The statement fetches rows 1..COLD_ROWS by an index
    // scan: every fetch is a read of a page far from the last one, which
    // the kernel's readahead (sequential streams only) never serves and
    // which PostgreSQL does not prefetch (index scans have no prefetch in
    // 13-18), however fast the disk.  A sequential scan, by contrast,
    // can run entirely from readahead on a fast disk and never sleep.
    c.exec(
        "create table cold as select g, repeat(md5(g::text), 16) as pad \
         from generate_series(1, 500000) g order by (g::bigint * 7919) % 500000",
    );
    c.exec("create index cold_g on cold (g)");
    // hint bits set and written now: the scan dirties no page
    c.exec("vacuum freeze cold");
    c.exec("checkpoint");
    // this session's counts (the vacuum's reads) in pg_statio now
    c.exec("select pg_stat_force_next_flush()");
    let pages = c.query_one_i64("select pg_relation_size('cold') / 8192");
    assert!(pages * 8192 > 200 << 20, "{pages} pages");
    // the kernel's page cache dropped (the table's pages in it were
    // written back by the checkpoint); shared_buffers (128 MB) keeps at
    // most the 16 MB bulk-write ring of the table's creation
    let st = Command::new("sh")
        .args(["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
        .status()
        .unwrap();
    assert!(st.success(), "the page cache must be dropped (root)");
    let mut r = cl.connect();
    r.exec("set max_parallel_workers_per_gather = 0");
    r.exec("set enable_seqscan = off");
    r.exec("set enable_bitmapscan = off");
    let rpid = r.pid();
    let blks = |c: &mut Client| {
        c.query_one_i64(
            "select coalesce(sum(heap_blks_read), 0)::bigint from pg_statio_user_tables \
             where relname = 'cold'",
        )
    };
    let before = blks(&mut c);
    let rec = Recorder::start(rpid, "8s", "cold");
    let t0 = Instant::now();
    let h = r.spawn_text(&format!(
        "select count(*) from cold where g <= {COLD_ROWS} and pad = 'nothing'"
    ));
    let got = r.rejoin(h);
    let scan_s = t0.elapsed().as_secs_f64();
    assert_eq!(got.as_deref(), Ok("0"), "nothing matches");
    // the scan's counts in pg_statio once this statement ends
    r.exec("select pg_stat_force_next_flush()");
    let p = rec.finish();
    // the premise: the scan read its rows' pages from the kernel (not
    // from shared_buffers), within the window
    let read = blks(&mut c) - before;
    eprintln!("{read} pages of {COLD_ROWS} rows read from the kernel in {scan_s:.3} s");
    assert!(
        read >= COLD_ROWS * 8 / 10,
        "the scan read its rows' pages: {read} for {COLD_ROWS} rows"
    );
    assert!(scan_s < 7.0, "the scan ended within the window: {scan_s} s");
    let (io_s, n) = wait_time(&p, "IO:DataFileRead");
    assert!(
        io_s > 0.0 && n >= 10,
        "reads off a CPU: {io_s} s in {n}: {p}"
    );
    let disk = p["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["wait_event"] == "IO:DataFileRead"
                && s["reason"].as_str().unwrap().starts_with('D')
                && frames(s).iter().any(|f| READ_FRAMES.contains(f))
        })
        .map(|s| s["ms"].as_f64().unwrap())
        .sum::<f64>();
    assert!(
        disk > 0.0,
        "uninterruptible reads of the data file, IO:DataFileRead under a read: {p}"
    );
    assert_eq!(tracer_pid(rpid), 0);
    cl.assert_no_crash();
}

#[test]
fn cold_table_read_15() {
    cold_read(15, &[]);
}

#[test]
fn cold_table_read_18() {
    // reads by the backend itself (18's default has I/O workers read)
    cold_read(18, &["io_method=sync"]);
}
