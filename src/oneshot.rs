//! `pgdbg bt|plan|wait PID... | --cluster DIR [--json]`: one answer from
//! each backend, for scripts and runbooks.  Each is `pgdbg attach PID -q
//! --ex COMMAND`: one backend is attached, asked and detached by
//! `attach::run_attach`, several (or a cluster's) by `multi.rs`'s workers
//! in [`Mode::Once`]; with `--json` the workers write their events into a
//! capture file of pgdbg's own and each backend's answer event is printed
//! as one JSON object, with the backend's `pid` and `backend_type`.

use crate::attach::{AttachOpts, BackendOpts, Targets};
use crate::capture::{Event, Line};
use crate::multi::Mode;
use crate::postgres::{ProcessKind, classify};
use anyhow::{Result, anyhow, bail};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// The targets and options of `pgdbg bt`, `plan` and `wait`: `pgdbg
/// attach`'s, with a JSON output of their own.
#[derive(clap::Args, Debug, Clone)]
#[command(
    mut_arg("pids", |a| a.help(
        "PID of a backend (pg_stat_activity.pid); several are answered at once, their lines \
         prefixed [PID]"
    )),
    mut_arg("cluster", |a| a.help(
        "Every client backend of the cluster whose data directory or socket directory is DIR \
         (those pgdbg ps --cluster DIR lists)"
    ))
)]
pub struct OneShotArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// One JSON object per backend, one per line: pid, backend_type and the answer's
    /// fields
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub backend: BackendOpts,
}

/// `pgdbg NAME ...`: run the session command `command` (its registered
/// entry, as `--ex` runs it) once on each backend.
pub fn run(name: &str, command: &str, a: OneShotArgs) -> Result<i32> {
    let pids = a.targets.host_pids()?;
    let cluster = a.targets.cluster;
    if pids.is_empty() && cluster.is_none() {
        bail!(
            "pgdbg {name} needs the PID of a backend or --cluster DIR: pgdbg {name} PID (find it with: pgdbg ps)"
        );
    }
    if !pids.is_empty() && cluster.is_some() {
        bail!("give either PIDs or --cluster DIR, not both");
    }
    let answers = a.json.then(AnswerFile::create).transpose()?;
    let opts = AttachOpts {
        ex: vec![command.to_string()],
        capture: answers.as_ref().map(|f| f.0.clone()),
        backend: a.backend,
        quiet: true,
        ..AttachOpts::default()
    };
    if pids.len() == 1 && cluster.is_none() && answers.is_none() {
        return crate::attach::run_attach(pids.into_iter().next(), &opts);
    }
    let mode = Mode::Once {
        quiet_stdout: answers.is_some(),
        running_only: command == "plan",
    };
    let code = crate::multi::supervise(&pids, cluster.as_deref(), &opts, mode)?;
    if let Some(f) = &answers {
        let text = std::fs::read_to_string(&f.0)
            .map_err(|e| anyhow!("cannot read {}: {e}", f.0.display()))?;
        for v in answer_objects(&text, backend_type) {
            crate::runtime::sink().line(&v.to_string());
        }
    }
    Ok(code)
}

/// pg_stat_activity's `backend_type` of a live process.
fn backend_type(pid: i32) -> Option<String> {
    match classify(pid).ok()? {
        ProcessKind::ClientBackend { .. } => Some("client backend".into()),
        ProcessKind::Auxiliary { role } => Some(role),
        _ => None,
    }
}

/// The answers in a capture's text: for each backend's answer event
/// (`backtrace`, `plan`, `wait_now`), one object with its `pid`, its
/// `backend_type` and the event's fields as PostgreSQL names them
/// (`wait_event_info`, `plan`), in the order the backends answered.
fn answer_objects(text: &str, kind: impl Fn(i32) -> Option<String>) -> Vec<Value> {
    let mut out = Vec::new();
    for l in text.lines() {
        let Ok(line) = serde_json::from_str::<Line>(l) else {
            continue;
        };
        if !matches!(
            line.event,
            Event::Backtrace { .. } | Event::Plan { .. } | Event::WaitNow { .. }
        ) {
            continue;
        }
        let Ok(Value::Object(fields)) = serde_json::to_value(&line.event) else {
            continue;
        };
        let mut o = Map::new();
        o.insert("pid".into(), line.pid.into());
        if let Some(n) = line.ns_pid {
            o.insert("ns_pid".into(), n.into());
        }
        o.insert("backend_type".into(), kind(line.pid as i32).into());
        for (k, v) in fields {
            let k = match k.as_str() {
                "event" => continue,
                "info" => "wait_event_info".to_string(),
                "text" => "plan".to_string(),
                _ => k,
            };
            o.insert(k, v);
        }
        out.push(Value::Object(o));
    }
    out
}

/// The capture file the workers write their events into (mode 0600:
/// plans hold query texts), removed when done.
struct AnswerFile(PathBuf);

impl AnswerFile {
    fn create() -> Result<AnswerFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir();
        let path = dir.join(format!(
            "pgdbg-answers-{}-{nanos}.jsonl",
            std::process::id()
        ));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| {
                anyhow!(
                    "cannot create {}: {e} (set TMPDIR to a writable directory)",
                    path.display()
                )
            })?;
        Ok(AnswerFile(path))
    }
}

impl Drop for AnswerFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_named_as_postgresql_names_them() {
        let text = concat!(
            r#"{"event":"attach","ts":1.0,"pid":7,"binary":"b","build_id":"x","format":1,"version":null}"#,
            "\n",
            r#"{"event":"wait_now","ts":1.1,"pid":7,"info":150994946,"wait_event":"PgSleep","wait_event_type":"Timeout"}"#,
            "\n",
            r#"{"event":"plan","ts":1.2,"pid":8,"format":"text","nested":false,"query":"select 1","text":"Result"}"#,
            "\n",
            r#"{"event":"detach","ts":1.3,"pid":7}"#,
            "\n"
        );
        let kind = |pid: i32| (pid == 7).then(|| "client backend".to_string());
        let v = answer_objects(text, kind);
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0]["pid"], 7);
        assert_eq!(v[0]["backend_type"], "client backend");
        assert_eq!(v[0]["wait_event_type"], "Timeout");
        assert_eq!(v[0]["wait_event"], "PgSleep");
        assert_eq!(v[0]["wait_event_info"], 150994946);
        assert!(v[0].get("event").is_none() && v[0].get("info").is_none());
        assert_eq!(v[1]["query"], "select 1");
        assert_eq!(v[1]["plan"], "Result");
        assert!(v[1]["backend_type"].is_null());
    }
}
