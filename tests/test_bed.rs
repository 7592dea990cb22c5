//! The test bed itself under a plain `cargo test` (tests of one binary on
//! parallel threads): two tests that use the same seeded cluster at once
//! take turns (the test bed's lock on it), so neither sees the other
//! start, seed or stop the server under it.

use common::*;
use pgdbg_testbed as common;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn a_seeded_cluster_serves_one_test_at_a_time() {
    let spans: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
    let users: Vec<_> = (0..2)
        .map(|_| {
            let spans = spans.clone();
            std::thread::spawn(move || {
                let cl = Cluster::start_seeded(15);
                let from = Instant::now();
                let mut c = cl.connect();
                // the server stays up and the tables seeded for the
                // cluster's whole life
                for _ in 0..10 {
                    assert!(c.query_one_i64("select count(*) from mediumtab") > 0);
                    std::thread::sleep(Duration::from_millis(100));
                }
                let to = Instant::now();
                drop(c);
                drop(cl);
                spans.lock().unwrap().push((from, to));
            })
        })
        .collect();
    for u in users {
        u.join().expect("a test's cluster failed under it");
    }
    let s = spans.lock().unwrap();
    let (a, b) = (s[0], s[1]);
    assert!(
        a.1 <= b.0 || b.1 <= a.0,
        "the two tests used the cluster at the same time: {a:?} {b:?}"
    );
}
