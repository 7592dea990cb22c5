//! scripts/examples/gin-pending-list.pgdbg on 15 and 18: a GIN index with
//! fastupdate = on and a 64 MB gin_pending_list_limit; inserts grow its
//! pending list (pageinspect's gin_metapage_info); an indexed query loop
//! spends time in scanPendingInsert (profiled by the example, never
//! stopped); gin_clean_pending_list's ginInsertCleanup costs time; after it
//! the list is empty and the same query spends (nearly) nothing there.

use common::*;
use pgdbg_testbed as common;
use std::io::{BufReader, Read};
use std::time::Duration;

/// (total% of `function`, seconds on a CPU) from the profile table.
fn share_and_cpu(out: &str, function: &str) -> (f64, f64) {
    let pct = out
        .lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 3 && w[2] == function).then(|| w[1].trim_end_matches('%').parse().unwrap())
        })
        .unwrap_or(0.0);
    let cpu = out
        .lines()
        .find_map(|l| {
            let r = l.split("; it ran ").nth(1)?;
            r.split('s').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no CPU time in:\n{out}"));
    (pct, cpu)
}

/// Run the example on `pid` for `secs`; `work` runs once it samples.
fn profile_example(pid: i32, secs: u32, work: impl FnOnce()) -> String {
    let script = repo().join("scripts/examples/gin-pending-list.pgdbg");
    let mut p = Pgdbg::spawn(&[
        "attach",
        &pid.to_string(),
        "--script",
        script.to_str().unwrap(),
        "-D",
        &format!("FOR={secs}s"),
    ]);
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    read_until(
        &mut out,
        "profile: sampling backend",
        Duration::from_secs(60),
    );
    work();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    rest
}

fn pending_pages(c: &mut Client) -> i64 {
    c.query_one_i64("select n_pending_pages from gin_metapage_info(get_raw_page('gi', 0))")
}

/// The share (%) of the query loop's samples in scanPendingInsert during a 2 s profile, and
/// the ms that share stands for. The share is compared, not the ms: how much CPU the loop gets
/// in 2 s depends on the machine's load, its share of the loop's own samples does not.
fn time_in_scan(cl: &Cluster, q: &mut Client) -> (f64, f64, String) {
    let pid = q.pid();
    q.exec("set enable_seqscan = off");
    let h = q.spawn_text(
        "do $$ declare t0 timestamptz := clock_timestamp(); begin \
         while clock_timestamp() < t0 + interval '30 s' loop \
         perform count(*) from g where a @> array[42]; end loop; end $$",
    );
    cl.wait_active(&[pid], "interval '30 s'");
    let out = profile_example(pid, 2, || {});
    cl.cancel(&[pid]);
    let r = q.rejoin(h);
    assert!(
        r.as_ref().err().is_some_and(|e| e.contains("cancel")),
        "{r:?}"
    );
    let (pct, cpu) = share_and_cpu(&out, "scanPendingInsert");
    assert!(cpu > 0.1, "the query loop ran {cpu} s on a CPU:\n{out}");
    (pct, pct / 100.0 * cpu * 1000.0, out)
}

fn gin_pending(major: u32) {
    let cl = Cluster::start(major);
    let mut b = cl.connect();
    b.exec(
        "create extension pageinspect; \
         create table g (id serial, a int[]) with (autovacuum_enabled = false); \
         create index gi on g using gin (a) with (fastupdate = on, gin_pending_list_limit = 65536)",
    );
    let insert = "insert into g (a) select array[(random() * 1000)::int, (random() * 1000)::int, \
                  (random() * 1000)::int, (random() * 1000)::int] from generate_series(1, 20000)";
    b.exec(insert);
    let p1 = pending_pages(&mut b);
    b.exec(insert);
    let p2 = pending_pages(&mut b);
    assert!(0 < p1 && p1 < p2, "pending pages {p1} then {p2}");

    let mut q = cl.connect();
    let (before_pct, before, out) = time_in_scan(&cl, &mut q);
    assert!(before_pct > 0.0, "no time in scanPendingInsert:\n{out}");

    // the cleanup, profiled in the backend that runs it
    let bpid = b.pid();
    let out = profile_example(bpid, 3, || {
        b.simple_text("select gin_clean_pending_list('gi')::text");
    });
    let (pct, cpu) = share_and_cpu(&out, "ginInsertCleanup");
    let cleanup_ms = pct / 100.0 * cpu * 1000.0;
    assert!(cleanup_ms > 0.0, "no time in ginInsertCleanup:\n{out}");
    assert_eq!(pending_pages(&mut b), 0);

    let (after_pct, after, out) = time_in_scan(&cl, &mut q);
    assert!(
        after_pct < before_pct / 4.0,
        "scanPendingInsert {before_pct:.1}% of the loop's samples before the cleanup, \
         {after_pct:.1}% after:\n{out}"
    );
    eprintln!(
        "{major}: pending pages {p1} -> {p2}; scanPendingInsert {before_pct:.1}% ({before:.1} ms) in 2 s of the query loop; \
         ginInsertCleanup {cleanup_ms:.1} ms; then 0 pages and {after_pct:.1}% ({after:.1} ms)"
    );
    assert_eq!(tracer_pid(q.pid()), 0);
    cl.assert_no_crash();
}

#[test]
fn gin_pending_list_15() {
    gin_pending(15);
}

#[test]
fn gin_pending_list_18() {
    gin_pending(18);
}
