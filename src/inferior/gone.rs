//! The traced process is gone, or is not the one that was given: it
//! exited, is a zombie, runs another program, or its PID now names another
//! process.  A typed error, so that callers decide on what happened (the
//! session ends, nothing is left to restore) and not on its text.

/// What to do about a process that is gone before the attach.
const LIVE: &str = "give the PID of a live backend (select pid from pg_stat_activity)";

/// The traced (or about to be traced) process is gone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Gone {
    /// No process has the PID given.
    #[error("no process with PID {0}: check the PID (select pid from pg_stat_activity)")]
    NoProcess(i32),
    /// No process has the PID given, found by `PTRACE_SEIZE`.
    #[error("no process with PID {0}: check the PID (pg_stat_activity.pid)")]
    NoProcessToSeize(i32),
    /// It exited between the check and the attach.
    #[error("process {pid} ({name}) exited while pgdbg was attaching: {LIVE}")]
    ExitedAttaching { pid: i32, name: String },
    /// It exited and its PID was given to another process (`new`).
    #[error(
        "process {pid} ({name}) exited while pgdbg was attaching and its PID now belongs to another process ({new}): {LIVE}"
    )]
    PidReused { pid: i32, name: String, new: String },
    /// A zombie its parent has not reaped yet.
    #[error(
        "process {pid} ({name}) has exited (a zombie its parent has not reaped yet): nothing to attach to; {LIVE}"
    )]
    Zombie { pid: i32, name: String },
    /// It executed another program (`program`).
    #[error(
        "process {pid} ({name}) started another program ({program}) while pgdbg was attaching: {LIVE}"
    )]
    Exec {
        pid: i32,
        name: String,
        program: String,
    },
    /// Its exit was the stop the attach waited for.
    #[error("process {pid} exited (status {status}) while attaching")]
    ExitedWhileAttaching { pid: i32, status: i32 },
    /// A signal killed it while it was being attached.
    #[error("process {pid} was killed by {signal} while attaching")]
    KilledWhileAttaching { pid: i32, signal: String },
    /// `waitpid` knows no such child any more.
    #[error("process {0} is gone")]
    Lost(i32),
    /// The attached backend ended before this command.
    #[error("the backend is gone")]
    Backend,
    /// The attached backend ended: nothing to resume or step.
    #[error("the backend is gone; nothing to {0}")]
    NothingTo(String),
}

/// The [`Gone`] in `e`'s chain, if that is what `e` is about.
pub fn gone(e: &anyhow::Error) -> Option<&Gone> {
    e.chain().find_map(|c| c.downcast_ref::<Gone>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_is_found_under_a_context_and_says_what_happened() {
        let e = anyhow::Error::new(Gone::PidReused {
            pid: 42,
            name: "postgres".into(),
            new: "bash".into(),
        })
        .context("attach 42");
        assert!(matches!(gone(&e), Some(Gone::PidReused { pid: 42, .. })));
        assert_eq!(
            format!("{e:#}"),
            "attach 42: process 42 (postgres) exited while pgdbg was attaching and its PID now \
             belongs to another process (bash): give the PID of a live backend (select pid from \
             pg_stat_activity)"
        );
        assert_eq!(
            Gone::NothingTo("continue".into()).to_string(),
            "the backend is gone; nothing to continue"
        );
        assert_eq!(gone(&anyhow::anyhow!("the backend is gone")), None);
    }
}
