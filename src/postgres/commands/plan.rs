//! `plan`: EXPLAIN the running query (or, with `--next`, the next one),
//! and the safe stop it needs to call into the backend.

use super::one_line;
use crate::capture::Event;
use crate::inferior::Stop;
use crate::postgres::backend::{Backend, OneStop, Outcome, ProbeEnd, Ran};
use crate::postgres::explain::{self, ExplainOpts};
use crate::postgres::{call, parallel_leader_from_title};
use anyhow::{Result, bail};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `plan --next` said once that it waits (and how to end the wait).
static PLAN_NEXT_SAID: AtomicBool = AtomicBool::new(false);

/// `plan`: EXPLAIN the running query (or, with --next, the next one).
pub fn plan(s: &mut dyn Backend, next: bool, opts: &ExplainOpts) -> Result<Outcome> {
    // a parallel worker stopped at its executor's entry (a breakpoint)
    // can show its part of the plan; otherwise it names its leader
    let at_entry = !next && query_desc_at_executor_entry(s)?.is_some();
    plan_applies(s, at_entry)?;
    if next && !PLAN_NEXT_SAID.swap(true, Ordering::Relaxed) {
        crate::runtime::sink().warn(format_args!(
            "plan --next: waiting for the next statement of backend {} to start (Ctrl-C ends the wait)",
            s.pid()
        ));
    }
    let (qd, nested) = if next {
        let entries = s.function_addrs("standard_ExecutorRun");
        if entries.is_empty() {
            bail!("standard_ExecutorRun is not in this binary");
        }
        for &a in &entries {
            s.arm_internal(a)?;
        }
        let mut probe = OneStop::default();
        let Ran { end, text } = s.run_probes(&mut probe, None)?;
        match end {
            ProbeEnd::Done => {}
            ProbeEnd::TargetGone => return Ok(Outcome::gone(text)),
            ProbeEnd::Terminating => return Ok(Outcome::terminate()),
            _ => {
                return Ok(Outcome::shows(format!(
                    "plan --next: stopped before a statement started{text}"
                )));
            }
        }
        let qd = s.registers()?.rdi;
        let nested = explain::active_query_desc(s)?
            .map(|(_, a)| a != qd)
            .unwrap_or(true);
        (qd, nested)
    } else if let Some(qd) = query_desc_at_executor_entry(s)? {
        // stopped by a breakpoint at standard_ExecutorRun (e.g. a
        // `commands` block): explain the statement it is about to run
        let nested = explain::active_query_desc(s)?
            .map(|(_, a)| a != qd)
            .unwrap_or(true);
        (qd, nested)
    } else {
        let (portal_qd, qd) = safe_running_query(s)?;
        let nested = !portal_qd
            || s.frame_functions()?
                .iter()
                .filter(|f| *f == "standard_ExecutorRun")
                .count()
                > 1;
        (qd, nested)
    };
    let query = explain::source_text(s, qd);
    let timeout = s.call_timeout();
    let text = explain::explain(s, qd, opts, timeout)?;
    s.emit_event(
        Event::Plan {
            format: opts.format.clone(),
            nested,
            query: query.clone(),
            text: text.clone(),
        },
        None,
    );
    let head = if nested {
        format!("-- nested statement (SPI/plpgsql): {}\n", one_line(&query))
    } else {
        format!("-- {}\n", one_line(&query))
    };
    Ok(Outcome::shows(format!("{head}{text}")))
}

/// At the entry of standard_ExecutorRun/Finish/End (a breakpoint stop):
/// their first argument, the QueryDesc with its plan state built.
pub fn query_desc_at_executor_entry(s: &mut dyn Backend) -> Result<Option<u64>> {
    let Some(Stop::Breakpoint { addr }) = s.last_stop() else {
        return Ok(None);
    };
    let at_entry = [
        "standard_ExecutorRun",
        "standard_ExecutorFinish",
        "standard_ExecutorEnd",
    ]
    .iter()
    .flat_map(|f| s.function_addrs(f))
    .any(|a| a == addr);
    Ok(if at_entry {
        Some(s.registers()?.rdi)
    } else {
        None
    })
}

/// `plan` on a process that never runs a query of its own: one line
/// saying what it is and where to look instead.
pub fn plan_applies(s: &mut dyn Backend, at_executor_entry: bool) -> Result<()> {
    let pid = s.pid();
    if let Some(role) = s.process_kind().never_runs_queries() {
        bail!(
            "process {pid} is the {role}, which never runs queries: plan has nothing to show there; attach to a client backend (select pid, query from pg_stat_activity)"
        );
    }
    if s.process_kind().is_parallel_worker() && !at_executor_entry {
        let leader = parallel_leader_from_title(pid).or_else(|| {
            let a = s.global_addr("ParallelLeaderPid")?;
            s.read_i32(a).ok().filter(|p| *p > 0)
        });
        // both name the leader's PID in the server's PID namespace (what
        // pg_stat_activity.leader_pid shows there); the host's PID is the
        // one to attach to when the server runs in a container
        use crate::inferior::procfs;
        let ns = procfs::ns_pid(pid);
        match leader {
            Some(l) if ns != pid => {
                let host = procfs::host_pid_in_namespace_of(pid, l).unwrap_or(l);
                bail!(
                    "process {pid} (PID {ns} in its namespace) is a parallel worker of leader PID {host} (PID {l} in its namespace, pg_stat_activity.leader_pid): it runs part of the leader's plan; attach to the leader for the whole plan (pgdbg attach {host} --ex plan)"
                )
            }
            Some(l) => bail!(
                "process {pid} is a parallel worker of leader PID {l}: it runs part of the leader's plan; attach to the leader for the whole plan (pgdbg attach {l} --ex plan)"
            ),
            None => bail!(
                "process {pid} is a parallel worker: it runs part of its leader's plan; attach to the leader for the whole plan (pg_stat_activity.leader_pid)"
            ),
        }
    }
    Ok(())
}

/// The statement the backend runs: (whether it is the active portal's,
/// its QueryDesc), or why there is none (and whether waiting a little
/// may find one: a utility statement such as DO or CALL between its
/// nested statements).
pub fn running_query_desc(
    s: &mut dyn Backend,
) -> Result<std::result::Result<(bool, u64), (String, bool)>> {
    if let Some((_, qd)) = explain::active_query_desc(s)? {
        return Ok(Ok((true, qd)));
    }
    // no QueryDesc in the portal: a utility statement (DO, CALL, ...)
    // may be running a nested statement through SPI; its QueryDesc is
    // the executor's argument on the stack
    let params = s.frame_params(
        &["standard_ExecutorRun", "ExecutorRun", "_SPI_pquery"],
        "queryDesc",
    )?;
    let mut unreadable = None;
    for (level, func, val) in params {
        match val {
            Ok(qd) if qd != 0 => return Ok(Ok((false, qd))),
            Ok(_) => {}
            Err(_) => {
                unreadable.get_or_insert((level, func));
            }
        }
    }
    let pid = s.pid();
    if let Some((level, func)) = unreadable {
        return Ok(Err((
            format!(
                "backend {pid} runs a nested statement (frame #{level}, {func}) whose queryDesc the debug info cannot locate at this point (optimized out): use plan --next to catch the next nested statement"
            ),
            true,
        )));
    }
    let portal = s
        .global_addr("ActivePortal")
        .and_then(|a| s.read_u64(a).ok())
        .unwrap_or(0);
    if portal != 0 {
        let text = s
            .global_addr("debug_query_string")
            .and_then(|a| {
                let p = s.read_u64(a).ok()?;
                if p == 0 {
                    return None;
                }
                let t = s.read_cstr(p, 200).ok()?;
                Some(String::from_utf8_lossy(&t).into_owned())
            })
            .map(|t| format!(" ({})", one_line(&t)))
            .unwrap_or_default();
        return Ok(Err((
            format!(
                "backend {pid} runs a utility statement{text}, which has no plan of its own, and no nested statement is executing at this moment (a DO block or procedure between statements): use plan --next to catch its next nested statement"
            ),
            true,
        )));
    }
    Ok(Err((
        format!(
            "backend {pid} is not running a query (no active portal): use plan --next to catch the next one"
        ),
        false,
    )))
}

/// Interrupt the running query at a point where calling into the
/// backend is safe (retrying a few times); returns (whether the
/// statement is the active portal's, its queryDesc).
pub fn safe_running_query(s: &mut dyn Backend) -> Result<(bool, u64)> {
    for attempt in 0..200 {
        match running_query_desc(s)? {
            Err((why, retry)) if !retry || attempt == 199 => bail!("{why}"),
            Err(_) => {}
            Ok(found) => match call::unsafe_reason(s)? {
                None => return Ok(found),
                Some(why) if attempt == 199 => {
                    bail!("no safe point found in the running query: {why}")
                }
                Some(_) => {}
            },
        }
        // let it run a little, then look again
        if let Some(text) = s.run_briefly(Duration::from_millis(2 + attempt % 7))? {
            bail!("the backend stopped while looking for a safe point:{text}");
        }
    }
    unreachable!()
}

#[cfg(test)]
mod tests {
    //! Which statement `plan` explains, and where it refuses, on a fake
    //! backend.
    use super::*;
    use crate::debuginfo::layout::FieldKind::Pointer;
    use crate::inferior::Registers;
    use crate::postgres::ProcessKind;
    use crate::postgres::backend::fake::{FakeBackend, layout};

    const ACTIVE_PORTAL: u64 = 0x1000;
    const PORTAL: u64 = 0x2000;
    const DEBUG_QUERY_STRING: u64 = 0x3000;
    const QUERY: u64 = 0x4000;
    const RUN: u64 = 0x40_0000;
    const QUERY_DESC: u64 = 0x7f00_1000;

    /// A backend whose ActivePortal is `portal` (0: none), the portal's
    /// queryDesc `qd`, and `debug_query_string` pointing at `text`.
    fn backend(portal: u64, qd: u64, text: &str) -> FakeBackend {
        let mut s = FakeBackend::new();
        s.globals.insert("ActivePortal".into(), ACTIVE_PORTAL);
        s.map(ACTIVE_PORTAL, portal.to_le_bytes().to_vec());
        let l = layout(
            "PortalData",
            &[("name", 8, Pointer), ("queryDesc", 8, Pointer)],
        );
        let mut p = vec![0u8; l.size as usize];
        let o = l.offset("queryDesc").unwrap() as usize;
        p[o..o + 8].copy_from_slice(&qd.to_le_bytes());
        s.map(PORTAL, p);
        s.layouts.insert(l.name.clone(), l);
        s.globals
            .insert("debug_query_string".into(), DEBUG_QUERY_STRING);
        s.map(DEBUG_QUERY_STRING, QUERY.to_le_bytes().to_vec());
        s.map_str(QUERY, text);
        s.functions.insert("standard_ExecutorRun".into(), vec![RUN]);
        s
    }

    #[test]
    fn the_active_portals_statement_is_the_one_explained() {
        let mut s = backend(PORTAL, QUERY_DESC, "select 1");
        assert_eq!(running_query_desc(&mut s).unwrap(), Ok((true, QUERY_DESC)));
    }

    #[test]
    fn no_statement_says_why_and_whether_waiting_helps() {
        let mut s = backend(0, 0, "");
        let (why, retry) = running_query_desc(&mut s).unwrap().unwrap_err();
        assert_eq!(
            why,
            "backend 4711 is not running a query (no active portal): use plan --next to catch the next one"
        );
        assert!(!retry);
        // a DO block between its nested statements: the portal has no
        // QueryDesc, the text names the utility statement, and a little
        // later a nested statement may be running
        let mut s = backend(PORTAL, 0, "do $$ begin perform pg_sleep(1);\n end $$");
        let (why, retry) = running_query_desc(&mut s).unwrap().unwrap_err();
        assert!(
            why.starts_with(
                "backend 4711 runs a utility statement (do $$ begin perform pg_sleep(1); end $$), which has no plan of its own"
            ),
            "{why}"
        );
        assert!(retry);
    }

    #[test]
    fn at_the_executors_entry_its_argument_is_the_statement() {
        let mut s = backend(0, 0, "");
        s.regs = Registers {
            rdi: QUERY_DESC,
            ..Default::default()
        };
        assert_eq!(query_desc_at_executor_entry(&mut s).unwrap(), None);
        s.stop = Some(Stop::Breakpoint { addr: RUN + 1 });
        assert_eq!(query_desc_at_executor_entry(&mut s).unwrap(), None);
        s.stop = Some(Stop::Breakpoint { addr: RUN });
        assert_eq!(
            query_desc_at_executor_entry(&mut s).unwrap(),
            Some(QUERY_DESC)
        );
    }

    #[test]
    fn processes_without_queries_are_refused_in_one_line() {
        let mut s = backend(0, 0, "");
        s.kind = Some(ProcessKind::Auxiliary {
            role: "checkpointer".into(),
        });
        let e = plan_applies(&mut s, false).unwrap_err().to_string();
        assert_eq!(
            e,
            "process 4711 is the checkpointer, which never runs queries: plan has nothing to show there; attach to a client backend (select pid, query from pg_stat_activity)"
        );
        // a parallel worker names its leader (ParallelLeaderPid) unless it
        // is stopped at its executor's entry
        s.kind = Some(ProcessKind::Auxiliary {
            role: "parallel worker".into(),
        });
        s.globals.insert("ParallelLeaderPid".into(), 0x5000);
        s.map(0x5000, 4242i32.to_le_bytes().to_vec());
        assert!(plan_applies(&mut s, true).is_ok());
        let e = plan_applies(&mut s, false).unwrap_err().to_string();
        assert!(
            e.contains("is a parallel worker of leader PID")
                && e.contains("attach to the leader for the whole plan"),
            "{e}"
        );
        s.kind = None;
        assert!(plan_applies(&mut s, false).is_ok());
    }
}
