//! PostgreSQL knowledge: which process is what, which version a binary is,
//! and the PostgreSQL commands (call, plan, wait/waits, plancache).  No
//! ptrace here: this layer reads /proc and binary data, and reaches a
//! traced backend only through the `Backend` trait (`backend.rs`).

use crate::inferior::procfs;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessKind {
    /// A client backend; the title's words after "postgres: ".
    ClientBackend {
        title: String,
    },
    /// checkpointer, walwriter, autovacuum worker, ...
    Auxiliary {
        role: String,
    },
    Postmaster,
    NotPostgres {
        name: String,
    },
}

const AUX_ROLES: &[&str] = &[
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "autovacuum worker",
    "logical replication launcher",
    "logical replication worker",
    "logical replication parallel worker",
    "logical replication apply worker",
    "logical replication tablesync worker",
    "stats collector",
    "archiver",
    "startup",
    "walreceiver",
    "walsender",
    "walsummarizer",
    "io worker",
    "parallel worker",
    "slotsync worker",
    "bgworker",
    "dead-end",
];

/// Auxiliary processes that never run a query (they have no executor):
/// `plan` has nothing to show there and `plan --next` would wait forever.
const NEVER_RUN_QUERIES: &[&str] = &[
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "logical replication launcher",
    "stats collector",
    "archiver",
    "startup",
    "walreceiver",
    "walsummarizer",
    "io worker",
    "slotsync worker",
    "dead-end",
];

impl ProcessKind {
    /// The role of an auxiliary process that never runs a query.
    pub fn never_runs_queries(&self) -> Option<&str> {
        match self {
            ProcessKind::Auxiliary { role } if NEVER_RUN_QUERIES.contains(&role.as_str()) => {
                Some(role)
            }
            _ => None,
        }
    }

    pub fn is_parallel_worker(&self) -> bool {
        matches!(self, ProcessKind::Auxiliary { role } if role == "parallel worker")
    }
}

/// The leader of a parallel worker, from its title ("postgres: parallel
/// worker for PID 4711").
pub fn parallel_leader_from_title(pid: i32) -> Option<i32> {
    let title = procfs::cmdline(pid);
    let rest = &title[title.find("parallel worker for PID ")? + "parallel worker for PID ".len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok().filter(|p| *p > 0)
}

fn is_postgres_exe(pid: i32) -> bool {
    match procfs::exe_path(pid) {
        Ok(p) => {
            let n = p
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let n = n.trim_end_matches(" (deleted)");
            n == "postgres" || n == "postmaster"
        }
        Err(_) => false,
    }
}

/// Classify a live process.  Errors only when /proc cannot be read.
pub fn classify(pid: i32) -> anyhow::Result<ProcessKind> {
    let st = procfs::status(pid)?;
    if !is_postgres_exe(pid) {
        // /proc/PID/exe unreadable (another user's process) falls here too:
        // the comm name still tells a postgres process.
        if procfs::exe_path(pid).is_err() && st.name == "postgres" {
            // handled by the caller's permission error
        } else {
            return Ok(ProcessKind::NotPostgres { name: st.name });
        }
    }
    if !is_postgres_exe(st.ppid) {
        return Ok(ProcessKind::Postmaster);
    }
    let title = procfs::cmdline(pid);
    let rest = title
        .strip_prefix("postgres: ")
        .unwrap_or(&title)
        .to_string();
    for role in AUX_ROLES {
        if rest.starts_with(role)
            || rest
                .split_once(": ")
                .map(|(_, r)| r.starts_with(role))
                .unwrap_or(false)
        {
            return Ok(ProcessKind::Auxiliary {
                role: role.to_string(),
            });
        }
    }
    Ok(ProcessKind::ClientBackend { title: rest })
}

/// "PostgreSQL 15.18 on x86_64-pc-linux-gnu, compiled by ..." from the
/// binary's read-only data (PG_VERSION_STR).
pub fn version_string(bin: &[u8]) -> Option<String> {
    let pat = b"PostgreSQL ";
    for pos in memchr::memmem::find_iter(bin, pat) {
        let rest = &bin[pos + pat.len()..];
        if !rest.first().is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        let end = rest.iter().position(|&c| c == 0).unwrap_or(0).min(200);
        let s = String::from_utf8_lossy(&bin[pos..pos + pat.len() + end]).into_owned();
        if s.contains(" on ") {
            return Some(s);
        }
    }
    None
}

/// "15.18" -> 15
pub fn major_of(version: &str) -> Option<u32> {
    let v = version.strip_prefix("PostgreSQL ").unwrap_or(version);
    v.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}
pub mod analyze;
pub mod backend;
pub mod call;
pub mod cluster;
pub mod commands;
pub mod datum;
pub mod dynahash;
pub mod explain;
pub mod nodes;
pub mod outcome;
pub mod packs;
pub mod plancache;
mod planstate;
pub mod progress;
pub mod relcache;
pub mod statements;
pub mod waitnames;
pub mod waits;
pub mod waitsites;

pub use backend::{Backend, ProbeEnd, ProbeHandler};

/// Functions that delimit the phases of a statement, for `count
/// --by-phase`: a call counts in the phase of the innermost of these that
/// is running.  (Exported in every major, so stripped binaries have them.)
pub const PHASE_FUNCTIONS: &[(&str, &str)] = &[
    ("standard_planner", "planning"),
    ("standard_ExecutorStart", "execution"),
    ("standard_ExecutorRun", "execution"),
    ("standard_ExecutorFinish", "execution"),
    ("standard_ExecutorEnd", "execution"),
];

/// Where PostgreSQL cleans up after an ERROR (top level and plpgsql
/// exception blocks): frames below the caller's were left by longjmp.
pub const ERROR_CLEANUP_FUNCTIONS: &[&str] = &[
    "AbortCurrentTransaction",
    "RollbackAndReleaseCurrentSubTransaction",
];

/// The phase names `count --by-phase` reports, in order.
pub const PHASES: &[&str] = &["planning", "execution", "other"];
