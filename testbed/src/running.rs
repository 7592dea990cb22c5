//! A statement kept running in a backend while a test looks at it (a
//! profile records it, `--ex` commands read it), and its end by cancel.

use super::{Client, Cluster, Pgdbg, proc_state, sql_literal, tracer_pid};
use std::path::Path;
use std::time::{Duration, Instant};

/// The thread running a client's statement (`Client::spawn_text`).
pub type Running = std::thread::JoinHandle<(postgres::Client, Result<String, String>)>;

/// A PL/pgSQL loop on a CPU that runs until cancelled (`end_by_cancel`).
pub const LOOP: &str =
    "do $$ declare i bigint = 0; begin while i < 100000000000 loop i := i + 1; end loop; end $$";

/// What pg_stat_activity shows of `LOOP` while it runs.
pub const LOOP_SHOWS: &str = "while i <";

impl Cluster {
    /// A new client running `sql`, once pg_stat_activity shows its backend
    /// active in a query containing `shows`: the client, its backend's PID
    /// and the statement's thread.
    pub fn running(&self, sql: &str, shows: &str) -> (Client, i32, Running) {
        let mut a = self.connect();
        let pid = a.pid();
        let h = a.spawn_text(sql);
        self.wait_active(&[pid], shows);
        (a, pid, h)
    }

    /// Backend `pid` is still active in a query containing `shows`.
    pub fn still_active(&self, pid: i32, shows: &str) {
        let mut c = self.connect();
        let n = c.query_one_i64(&format!(
            "select count(*) from pg_stat_activity where pid = {pid} and state = 'active' \
             and position({} in query) > 0",
            sql_literal(shows)
        ));
        assert_eq!(n, 1, "the workload ran through the whole recording");
    }

    /// Cancel the statement `a` runs in backend `pid`: it ends by the
    /// cancel only, the backend still serves its client, nothing crashed.
    pub fn end_by_cancel(&self, mut a: Client, pid: i32, h: Running) {
        self.cancel(&[pid]);
        let r = a.rejoin(h);
        assert!(
            r.as_ref().is_err_and(|e| e.contains("canceling statement")),
            "the statement ends by the cancel only: {r:?}"
        );
        assert_eq!(a.query_one_i64("select 41 + 1"), 42);
        self.assert_no_crash();
    }
}

/// For `watch`, backend `pid` is neither traced nor stopped.
pub fn assert_never_stopped(pid: i32, watch: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < watch {
        assert_eq!(tracer_pid(pid), 0, "pgdbg must not ptrace the backend");
        let st = proc_state(pid);
        assert!(
            !st.starts_with('t') && !st.starts_with('T'),
            "backend stopped: {st}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `pgdbg ARGS` (a recording of backend `pid` that must not stop it),
/// watched for `watch` with `assert_never_stopped`; its standard output,
/// through a file named after `name` (a long document: not a pipe).
pub fn output_never_stopped(args: &[&str], pid: i32, watch: Duration, name: &str) -> String {
    let file = std::env::temp_dir().join(format!("pgdbg-{name}-{}-{pid}.out", std::process::id()));
    let p = Pgdbg::spawn_to_file(args, &file);
    assert_never_stopped(pid, watch);
    let (code, _, err) = p.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let out = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(Path::new(&file));
    out
}
