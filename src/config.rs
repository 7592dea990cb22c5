//! pgdbg's settings from the environment (`PGDBG_*`), read once, at the
//! first use, by this room alone; the layers ask [`get`].  Every variable
//! is listed in [`VARS`] (the manual page's ENVIRONMENT section is made
//! from it); a test fails when a `PGDBG_` variable is read anywhere else.
//! Workers, the guardian and the fork server inherit the environment, so
//! each process reads the same values.  Imports nothing of pgdbg's.

use std::path::PathBuf;
use std::sync::OnceLock;

/// One variable: its name, what it does, and whether it exists for
/// pgdbg's own tests (never needed in use).
pub struct Var {
    pub name: &'static str,
    pub what: &'static str,
    pub for_tests: bool,
}

/// Every variable pgdbg reads.
pub const VARS: &[Var] = &[
    Var {
        name: "PGDBG_DEBUG",
        what: "set: write pgdbg's debug lines (pgdbg-debug: ...) to standard error",
        for_tests: false,
    },
    Var {
        name: "PGDBG_HISTORY",
        what: "the prompt's history file (default ~/.cache/pgdbg/history)",
        for_tests: false,
    },
    Var {
        name: "PGDBG_INDEX_CACHE",
        what: "the directory of the debug-info index cache (default $XDG_CACHE_HOME/pgdbg/index or ~/.cache/pgdbg/index)",
        for_tests: false,
    },
    Var {
        name: "PGDBG_DEBUG_ROOT",
        what: "the host's root of separate debug files (default /usr/lib/debug)",
        for_tests: false,
    },
    Var {
        name: "PGDBG_ALL_STOP",
        what: "set: the prompt keeps the backend stopped between commands even at a terminal",
        for_tests: false,
    },
    Var {
        name: "PGDBG_NO_PIN",
        what: "set: pgdbg does not move itself to the backend's CPU while probing",
        for_tests: false,
    },
    Var {
        name: "PGDBG_NO_PACKS",
        what: "set: never use the built-in layout packs (a server without debug info is refused)",
        for_tests: true,
    },
    Var {
        name: "PGDBG_NO_KEEPER",
        what: "set: kernel uprobes are opened without the process that closes them when pgdbg dies",
        for_tests: true,
    },
    Var {
        name: "PGDBG_NO_TRAP_HANDLER",
        what: "set: no SIGTRAP handler is installed in the backend",
        for_tests: true,
    },
    Var {
        name: "PGDBG_NO_GROUP_STOP",
        what: "set: the backend is never held in a group stop",
        for_tests: true,
    },
    Var {
        name: "PGDBG_NO_SELF_RELEASE",
        what: "set: the backend is not given the pipe that ends its hold when every pgdbg process dies",
        for_tests: true,
    },
    Var {
        name: "PGDBG_NO_SYSCALL_TRAILER",
        what: "set: system calls injected into the backend run in its group stop, not through a signal frame that puts the backend's state back by itself",
        for_tests: true,
    },
    Var {
        name: "PGDBG_GUARDIAN_QUIET",
        what: "set: the guardian does not say what it restored after pgdbg died",
        for_tests: true,
    },
    Var {
        name: "PGDBG_ENTRY_ONLY",
        what: "set: plancache --fast records at the function's entry, not at its register-only point",
        for_tests: true,
    },
    Var {
        name: "PGDBG_NO_PROC_EVENTS",
        what: "set: --cluster looks for new backends every 100 ms instead of hearing of each fork",
        for_tests: true,
    },
    Var {
        name: "PGDBG_NO_FORK_SERVER",
        what: "set: --cluster executes each worker started ahead instead of forking it",
        for_tests: true,
    },
    Var {
        name: "PGDBG_NO_INHERIT",
        what: "set: a --cluster script of one count line attaches to each backend instead of counting through uprobes inherited from the postmaster",
        for_tests: true,
    },
    Var {
        name: "PGDBG_SPARE_LATE",
        what: "set: --cluster's workers get to each new backend only after its startup; `stale`: and then take its fork for one heard too late to be new (as when every worker heard it late)",
        for_tests: true,
    },
    Var {
        name: "PGDBG_HOLD_NEW_MS",
        what: "milliseconds (at most 120 000) each new backend of --cluster is kept stopped after its fork",
        for_tests: true,
    },
    Var {
        name: "PGDBG_PAUSE_AT",
        what: "where pgdbg waits PGDBG_PAUSE_MS (several points separated by commas; NAME:MS for a length of its own), said on stderr: data-word-N (the N-th word a call series changes recorded, before the next), series (words changed, before the first call), call-setup (before a call's registers are written), call-restore (before the saved ones are put back), spare-seized (a worker started ahead, right after it seized a new backend and asked it to stop, back at the normal priority), signal-seen-SIG (a signal's delivery stop seen, e.g. signal-seen-SIGALRM, before the resume that delivers it), syscall-injected-N (the N-th system call pgdbg makes the backend run, its registers written, before the resume into it), syscall-exit-N (the same at its exit stop, before the registers are put back); syscall-injected-nrNR-K and syscall-exit-nrNR-K (the same at the K-th system call of number NR, e.g. syscall-exit-nr72-3: the third fcntl), seize (`attach PID`: its checks made and its debug info loaded, before the seize), exit-stop (the backend in its exit stop, after the probe's last reads, before it is let go), detach (pgdbg's own detach begins: the backend stopped, nothing taken out yet)",
        for_tests: true,
    },
    Var {
        name: "PGDBG_PAUSE_MS",
        what: "milliseconds (at most 120 000) of the wait at PGDBG_PAUSE_AT",
        for_tests: true,
    },
];

/// The values, as read.
#[derive(Debug, Default, Clone)]
pub struct Config {
    pub debug: bool,
    pub history: Option<PathBuf>,
    pub index_cache: Option<PathBuf>,
    pub debug_root: Option<PathBuf>,
    pub all_stop: bool,
    pub no_pin: bool,
    pub no_packs: bool,
    pub no_keeper: bool,
    pub no_trap_handler: bool,
    pub no_group_stop: bool,
    pub no_self_release: bool,
    pub no_syscall_trailer: bool,
    pub guardian_quiet: bool,
    pub entry_only: bool,
    pub no_proc_events: bool,
    pub no_fork_server: bool,
    pub no_inherit: bool,
    /// PGDBG_SPARE_LATE as given
    pub spare_late: Option<String>,
    /// PGDBG_HOLD_NEW_MS as given (its cap is the reader's)
    pub hold_new_ms: Option<u64>,
    /// PGDBG_PAUSE_AT and PGDBG_PAUSE_MS as given (the cap is the
    /// reader's)
    pub pause_at: Option<String>,
    pub pause_ms: Option<u64>,
}

impl Config {
    /// Read from `var` (the environment's, or a test's).
    pub fn from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Config {
        let set = |n: &str| var(n).is_some();
        let path = |n: &str| var(n).map(PathBuf::from);
        Config {
            debug: set("PGDBG_DEBUG"),
            history: path("PGDBG_HISTORY"),
            index_cache: path("PGDBG_INDEX_CACHE"),
            debug_root: path("PGDBG_DEBUG_ROOT"),
            all_stop: set("PGDBG_ALL_STOP"),
            no_pin: set("PGDBG_NO_PIN"),
            no_packs: set("PGDBG_NO_PACKS"),
            no_keeper: set("PGDBG_NO_KEEPER"),
            no_trap_handler: set("PGDBG_NO_TRAP_HANDLER"),
            no_group_stop: set("PGDBG_NO_GROUP_STOP"),
            no_self_release: set("PGDBG_NO_SELF_RELEASE"),
            no_syscall_trailer: set("PGDBG_NO_SYSCALL_TRAILER"),
            guardian_quiet: set("PGDBG_GUARDIAN_QUIET"),
            entry_only: set("PGDBG_ENTRY_ONLY"),
            no_proc_events: set("PGDBG_NO_PROC_EVENTS"),
            no_fork_server: set("PGDBG_NO_FORK_SERVER"),
            no_inherit: set("PGDBG_NO_INHERIT"),
            spare_late: var("PGDBG_SPARE_LATE").map(|v| v.to_string_lossy().into_owned()),
            hold_new_ms: var("PGDBG_HOLD_NEW_MS")
                .and_then(|v| v.to_str().and_then(|s| s.trim().parse().ok())),
            pause_at: var("PGDBG_PAUSE_AT").and_then(|v| v.into_string().ok()),
            pause_ms: var("PGDBG_PAUSE_MS")
                .and_then(|v| v.to_str().and_then(|s| s.trim().parse().ok())),
        }
    }
}

/// PGDBG_PAUSE_AT (tests): where it names `at`, wait PGDBG_PAUSE_MS
/// (at most 120 s, 60 s if not given), said on stderr first, so that a
/// test can kill pgdbg and its guardian right there
/// (tests/killed_together.rs).
pub fn pause_for_tests(at: &str) {
    let c = get();
    // `NAME` or `NAME:MS` (this point's own length), comma-separated
    let Some(own) = c.pause_at.as_deref().and_then(|p| {
        p.split(',').find_map(|x| match x.split_once(':') {
            Some((n, ms)) if n == at => Some(ms.parse::<u64>().ok()),
            None if x == at => Some(None),
            _ => None,
        })
    }) else {
        return;
    };
    let ms = own.or(c.pause_ms).unwrap_or(60_000).min(120_000);
    crate::runtime::sink().warn(format_args!(
        "pgdbg: paused at {at} for {ms} ms (PGDBG_PAUSE_AT)"
    ));
    let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    while std::time::Instant::now() < until && !crate::runtime::must_stop() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// [`pause_for_tests`] at the `n`-th of a point met several times
/// (`{at}-{n}`; nothing formatted unless PGDBG_PAUSE_AT is set).
pub fn pause_for_tests_nth(at: &str, n: usize) {
    if get().pause_at.is_some() {
        pause_for_tests(&format!("{at}-{n}"));
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The settings of this process, read from its environment once.
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| Config::from(|n| std::env::var_os(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_listed_is_read_and_nothing_else() {
        let given: Vec<&str> = VARS.iter().map(|v| v.name).collect();
        // each listed variable changes what is read
        for name in &given {
            let c = Config::from(|n| (n == *name).then(|| "1".into()));
            assert_ne!(
                format!("{c:?}"),
                format!("{:?}", Config::default()),
                "{name} is listed but not read"
            );
        }
        // what Config::from asks for is listed
        let asked = std::cell::RefCell::new(Vec::new());
        Config::from(|n| {
            asked.borrow_mut().push(n.to_string());
            None
        });
        for n in asked.into_inner() {
            assert!(given.contains(&n.as_str()), "{n} is read but not listed");
        }
    }

    #[test]
    fn hold_new_ms_parsed() {
        let c = Config::from(|n| (n == "PGDBG_HOLD_NEW_MS").then(|| " 2500 ".into()));
        assert_eq!(c.hold_new_ms, Some(2500));
        let c = Config::from(|n| (n == "PGDBG_HOLD_NEW_MS").then(|| "soon".into()));
        assert_eq!(c.hold_new_ms, None);
    }

    /// No `PGDBG_` variable is read outside this file.
    #[test]
    fn no_variable_read_elsewhere() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut bad = Vec::new();
        let mut dirs = vec![src];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("src/config.rs")
                {
                    let text = std::fs::read_to_string(&p).unwrap();
                    for (i, l) in text.lines().enumerate() {
                        if (l.contains("env::var(\"PGDBG_") || l.contains("env::var_os(\"PGDBG_"))
                            || (l.contains("var_os(\"PGDBG_") || l.contains("var(\"PGDBG_"))
                        {
                            bad.push(format!("{}:{}: {}", p.display(), i + 1, l.trim()));
                        }
                    }
                }
            }
        }
        assert!(
            bad.is_empty(),
            "PGDBG_ variables read outside src/config.rs (add them to VARS and Config):\n{}",
            bad.join("\n")
        );
    }
}
