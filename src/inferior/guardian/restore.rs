//! Restoring a backend from a guardian's table, as the guardian does
//! when pgdbg died and `pgdbg rescue` does when both died: int3s, debug
//! registers, detours and the SIGTRAP handler removed, a call or system
//! call in flight finished or abandoned, the group stop ended; and the
//! table's records forgotten as each is put back.

use super::{
    BP_DETOUR_WORDS, BP_SLOTS, DETOUR_SLOTS, DETOUR_WORDS, HDR, Shared, SignalWord, W_DEBUGREGS,
    W_FLUSH, W_HOLD, W_RELEASE, W_RESUME_RIP, W_RESUME_RSP, W_RET_SLOT, W_SIGNALS, W_TRAP_BASE,
    W_TRAP_OLD, W_TRAP_OLD_VALID, inflight,
};
use crate::inferior::{Target, detour::Detour, hold::Hold, procfs, selfrelease, traphandler};
use anyhow::{Result, bail};
use nix::sys::signal::Signal;

/// The records of a call or injected system call in flight and the data
/// words around it, once they are put back.
fn forget_in_flight(shared: &Shared) {
    let r = inflight::Records {
        shared,
        at: inflight::base(BP_DETOUR_WORDS),
    };
    r.forget_call();
    shared.set(W_FLUSH, 0);
    shared.set(W_RET_SLOT, 0);
    r.forget_syscall();
    r.forget_data();
}

/// After a restore that failed half-way: the table keeps only what a later
/// restore may do again safely, the int3 bytes (written back only where
/// the byte is still an int3).
fn forget_all_but_breakpoints(shared: &Shared) {
    forget_in_flight(shared);
    for slot in 0..DETOUR_SLOTS {
        shared.set(HDR + 2 * BP_SLOTS + slot * DETOUR_WORDS, 0);
    }
    shared.set(W_DEBUGREGS, 0);
    shared.set(W_TRAP_OLD_VALID, 0);
    shared.set(W_TRAP_BASE, 0);
    shared.set(W_RELEASE, 0);
    shared.set(W_SIGNALS, 0);
    shared.set(W_HOLD, 0);
    shared.set(W_RESUME_RIP, 0);
}

/// What a restore did, and when (after pgdbg's end).
pub(super) struct Restored {
    pub(super) what: String,
    pub(super) times: String,
}

/// Restore backend `pid` (started at `start`) from a guardian's table:
/// pgdbg's int3s, debug registers, detours and SIGTRAP handler removed, a
/// call or system call in flight finished or abandoned, the signals pgdbg
/// held back sent again, the group stop ended.  `pgdbg`: the PID of the
/// pgdbg that wrote the table, waited for while it still traces the
/// backend (the guardian); None when that must not happen (a rescue).
/// Some(what was restored), or None when there was nothing to do.
pub(super) fn restore(
    shared: &Shared,
    pid: i32,
    start: u64,
    pgdbg: Option<i32>,
    t0: std::time::Instant,
) -> Result<Option<Restored>> {
    let bps: Vec<(u64, u8)> = (0..BP_SLOTS)
        .filter_map(|s| {
            let a = shared.get(HDR + 2 * s);
            (a != 0).then(|| (a - 1, shared.get(HDR + 2 * s + 1) as u8))
        })
        .collect();
    let detours: Vec<Detour> = (0..DETOUR_SLOTS)
        .filter_map(|s| {
            let i = HDR + 2 * BP_SLOTS + s * DETOUR_WORDS;
            let site = shared.get(i);
            if site == 0 {
                return None;
            }
            let len = (shared.get(i + 1) as usize).min(16);
            let mut orig = shared.get(i + 2).to_le_bytes().to_vec();
            orig.extend_from_slice(&shared.get(i + 3).to_le_bytes());
            orig.truncate(len);
            let code = (shared.get(i + 4), shared.get(i + 5));
            // pgdbg mapped them before it noted the detour here, and
            // forgets the detour here before it unmaps them: they are
            // its pages still
            let landings = match shared.get(i + 8) {
                0 => Vec::new(),
                entry => crate::inferior::jumpover::landing_pages(site - 1, entry, &orig, code.0),
            };
            Some(Detour {
                site: site - 1,
                orig,
                code,
                data: (shared.get(i + 6), shared.get(i + 7)),
                entry: None,
                traps_inside: false,
                landings,
                taken_over: None,
            })
        })
        .collect();
    let debugregs = shared.get(W_DEBUGREGS) != 0;
    let trap = match shared.get(W_TRAP_BASE) {
        0 => None,
        base => {
            let old = (shared.get(W_TRAP_OLD_VALID) != 0).then(|| {
                let mut o = [0u64; traphandler::SA_WORDS];
                for (i, w) in o.iter_mut().enumerate() {
                    *w = shared.get(W_TRAP_OLD + i);
                }
                o
            });
            let mut h = traphandler::TrapHandler::adopted(base, old);
            h.release = selfrelease::Release::from_word(shared.get(W_RELEASE));
            Some(h)
        }
    };
    let held = shared.get(W_HOLD) != 0;
    let resumed = (shared.get(W_RESUME_RIP), shared.get(W_RESUME_RSP));
    let inflight = inflight::Records {
        shared,
        at: inflight::base(BP_DETOUR_WORDS),
    }
    .adopt();
    let signals = shared.get(W_SIGNALS);
    let flush = (shared.get(W_FLUSH), shared.get(W_RET_SLOT));
    let nothing_else =
        bps.is_empty() && detours.is_empty() && !debugregs && trap.is_none() && inflight.is_empty();
    if nothing_else && !held && signals == 0 {
        return Ok(None);
    }
    // the kernel lets go of the backend just after closing pgdbg's files
    let same = || procfs::exists(pid) && procfs::start_time(pid).unwrap_or(0) == start;
    let mut other_tracer_since: Option<std::time::Instant> = None;
    let mut said_other = false;
    loop {
        if !same() {
            return Ok(None); // the backend is gone: nothing to restore
        }
        let tracer = procfs::status(pid).map(|s| s.tracer_pid).unwrap_or(0);
        if tracer == 0 {
            break;
        }
        let Some(pgdbg) = pgdbg else {
            bail!(
                "process {tracer} ({}) traces backend {pid}: end it (or let it detach) first",
                procfs::status(tracer).map(|s| s.name).unwrap_or_default()
            );
        };
        if tracer == pgdbg {
            // still pgdbg's: alive (a restore of its own failed and it
            // goes on) or dying
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        // someone else traces it now (a second pgdbg, gdb, strace): wait
        // for them to let go, however long, then restore; giving up would
        // leave a held backend stopped for good once they detach
        let since = *other_tracer_since.get_or_insert_with(std::time::Instant::now);
        if !said_other && since.elapsed() > std::time::Duration::from_secs(60) {
            said_other = true;
            crate::runtime::sink().warn(format_args!(
                "pgdbg guardian: pgdbg (PID {pgdbg}) ended without restoring backend {pid}, which another tracer (PID {tracer}) holds; waiting for it to let go ({} breakpoint bytes{} still to restore)",
                bps.len(),
                if debugregs {
                    " and debug registers"
                } else {
                    ""
                }
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // a perf breakpoint of pgdbg's (a watched local, perfwatch.rs) goes
    // with its last file, which a thread of pgdbg may still hold after the
    // tracer's (its leader's) end: its trap goes to the SIGTRAP handler,
    // which stays until that thread is gone too (`EXIT_WAIT` at most;
    // none for a pgdbg that lives on after a failed detach)
    if let Some(p) = pgdbg {
        crate::inferior::perfwatch::wait_exit(p);
    }
    let t_free = t0.elapsed();
    // the backend ended its stop itself and ran on since (selfrelease.rs):
    // nothing recorded of its registers, data words or signals is true
    // any more, only its int3 bytes, handlers and pages are left
    let released = std::cell::Cell::new(false);
    // the backend's SIGCONT handler sent the held-back signals itself
    let handler_sent = std::cell::Cell::new(false);
    let sigcont = || {
        if same() {
            // the signals pgdbg held back, queued while still stopped
            for n in 1..=64 {
                if signals & (1 << (n - 1)) != 0 && !released.get() && !handler_sent.get() {
                    // SAFETY: kill(2) of the backend, checked by its start time.
                    unsafe { libc::kill(pid, n) };
                }
            }
            if held {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
            }
        }
    };
    // the held-back signals, named, for the message
    let mut sent = if signals == 0 {
        None
    } else {
        let names: Vec<String> = (1..=64)
            .filter(|n| signals & (1 << (n - 1)) != 0)
            .map(|n| {
                Signal::try_from(n)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|_| format!("signal {n}"))
            })
            .collect();
        Some(format!("held-back {} sent again", names.join(" ")))
    };
    if nothing_else && !held {
        // only held-back signals to send
        sigcont();
        return Ok(Some(Restored {
            what: sent.clone().unwrap_or_default(),
            times: format!("{} µs after pgdbg's end", t0.elapsed().as_micros()),
        }));
    }
    let adopt = |t: &mut Target| {
        for &(a, b) in &bps {
            t.inserted.insert(a, b);
        }
        // a resume point on an int3 of pgdbg's: there with its SIGTRAP
        // left queued (pending.rs `flag_queued_trap`), to be taken there
        // by the attach's wait and the detach, never rewound by rip-1
        // (each use checks rip, the int3 and the queued SIGTRAP first)
        if bps.iter().any(|&(a, _)| a == resumed.0) {
            t.trap_queued_on_int3 = Some(resumed.0);
            t.trap_queued_since = t.sigtrap_stops;
        }
        t.debugregs_dirty = debugregs;
        for d in &detours {
            t.adopt_detour(d.clone());
        }
        t.trap = trap.clone();
        // the signals this Target holds back go into the table too
        t.signal_word = Some(SignalWord {
            word: shared.w(W_SIGNALS),
            before: signals,
        });
    };
    let mut t = match Target::attach_prepared(pid, adopt) {
        Ok(t) => t,
        Err(e) => {
            sigcont();
            return Err(e);
        }
    };
    if !same() {
        // the PID was reused between the check and the attach: not ours
        return t.detach_untouched().map(|_| None);
    }
    if held {
        t.hold = Hold::Ours;
    }
    // a call still running after the backend let itself go (or at its
    // return trap) is finished as without the release: its record is
    // still true (the backend has run only inside the call), and leaving
    // it would take the return trap away under it
    if t.released_by_handler() {
        // the handler sent the held-back signals as it let the backend go
        // (selfrelease.rs): not again
        handler_sent.set(true);
        sent = None;
        if let Some(w) = &mut t.signal_word {
            w.before = 0;
        }
        shared.set(W_SIGNALS, 0);
        if !t.call_running_by_page() {
            released.set(true);
        }
    }
    let t_seized = t0.elapsed();
    let mut how = String::new();
    // (held with nothing else recorded: pgdbg died between its detach and
    // its SIGCONT, or single-stepping, the trap flag set: the detach
    // below clears it)
    let res = if released.get() {
        // the borrowed code back where nothing runs it any more
        let code = inflight.put_code_back_after_release(&mut t);
        forget_in_flight(shared);
        match code {
            Ok(c) => {
                how = format!("the backend had ended its stop itself: not replayed{c}");
                t.detach()
            }
            Err(e) => {
                how = "the backend had ended its stop itself: not replayed".into();
                t.detach().and(Err(e))
            }
        }
    } else {
        inflight
            .finish(&mut t, flush)
            .map(|h| how = h)
            // the call or system call is over and its registers and data
            // words are the backend's again: its records go at once, so that
            // a rescue after a death of the guardian from here on (a stderr
            // it blocks on, a kill) never replays them on a backend that has
            // run since
            .map(|_| forget_in_flight(shared))
            .and_then(|_| rewind_if_trapped(&mut t, resumed))
            .and_then(|_| t.detach())
    };
    // whatever happened above: the backend never stays stopped
    if res.is_err() {
        let _ = t.detach();
        // the backend runs on from here, restored in part: what is not
        // safe to do twice on a backend that has run since (registers,
        // data words, pages, signals) must never be replayed from this
        // table by a later rescue; int3 bytes are (each is checked)
        forget_all_but_breakpoints(shared);
    }
    sigcont();
    if res.is_err() {
        // only now that it runs with its signals sent: nor is it stopped
        // again by the SIGCONT handler, where its pipe could not be
        // removed, for words of pgdbg's once this process is gone
        t.release_words_cleared();
    }
    drop(t);
    let t_done = t0.elapsed();
    let mut parts: Vec<String> = Vec::new();
    if !bps.is_empty() {
        parts.push(format!("{} breakpoint byte(s)", bps.len()));
    }
    if debugregs {
        parts.push("debug registers".into());
    }
    if trap.is_some() {
        parts.push("the SIGTRAP handler".into());
    }
    if trap.as_ref().is_some_and(|h| h.release.is_some()) {
        parts.push(if released.get() {
            "the SIGCONT handler and its pipe (the backend had ended its stop itself)".into()
        } else {
            "the SIGCONT handler and its pipe".into()
        });
    }
    if !detours.is_empty() {
        parts.push(format!("{} jump(s)", detours.len()));
    }
    if !inflight.is_empty() {
        parts.push(format!("{} ({how})", inflight.describe()));
    }
    if parts.is_empty() {
        parts.push("the stop".into());
    }
    parts.extend(sent);
    let what = parts.join(", ");
    res.map(|_| {
        Some(Restored {
            what,
            times: format!(
                "{} µs after pgdbg's end: backend free after {} µs, seized after {} µs",
                t_done.as_micros(),
                t_free.as_micros(),
                t_seized.as_micros()
            ),
        })
    })
}

/// The backend stopped one past an int3 of ours whose trap pgdbg had not
/// handled when it died (the kernel dropped that stop's SIGTRAP): the
/// instruction there has not run, so `rip` goes back onto it.  Not when
/// pgdbg resumed it there on purpose with these very registers (an
/// emulated one-byte instruction or a step over it; at one address `rsp`
/// differs by 8 between before and after a one-byte push, so a new trap
/// cannot match an old resume).
fn rewind_if_trapped(t: &mut Target, resumed: (u64, u64)) -> Result<()> {
    if t.is_gone() {
        return Ok(());
    }
    let r = t.regs()?;
    if (r.rip, r.rsp) == resumed
        && t.inserted.contains_key(&r.rip)
        && t.byte_in_target(r.rip) == Some(crate::inferior::INT3)
    {
        // on an int3 of ours, where pgdbg put rip back with that int3's
        // SIGTRAP still queued (pending.rs `flag_queued_trap`): that
        // instruction has not run, the one before it has; the SIGTRAP,
        // if still queued, is taken there by the detach (the flag set in
        // `adopt`), never rewound onto an int3 before
        return Ok(());
    }
    let bp = crate::arch::abi::int3_address(r.rip);
    if t.inserted.contains_key(&bp)
        && t.byte_in_target(bp) == Some(crate::inferior::INT3)
        && (r.rip, r.rsp) != resumed
    {
        t.rewind_to(bp)?;
    }
    Ok(())
}
