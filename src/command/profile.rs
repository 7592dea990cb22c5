//! `profile`: on-CPU stacks of the backend sampled by perf events (the
//! backend is never stopped).

use super::args::parse_limits;
use super::check::no_check;
use super::{Entry, Invocation, Needs};
use crate::perf::profile_opts::{Format, ProfileOpts};
use anyhow::{Result, anyhow, bail};

pub static ENTRIES: &[&Entry] = &[&PROFILE];

pub static PROFILE: Entry = Entry {
    name: "profile",
    aliases: &[],
    usage: "profile [--off-cpu|--wall|--syscalls] [--hz N] [--for D] [--format FMT] [--rows N]\n        \
            [--by-statement] [--flamegraph OUT.svg] [--speedscope OUT.json] [--pprof OUT.pb.gz]",
    summary: "on-CPU profile of the backend (perf events): self and total share, stacks",
    help: "The backend runs, never stopped: the kernel samples its thread N times a second of CPU \
           time (--hz, 1 to 10000, default 99; perf's software cpu-clock) with its registers and \
           the top of its stack, which pgdbg unwinds with the binary's and libraries' CFI and names \
           with DWARF (inlined functions are frames of their own). Until Ctrl-C or --for D. \
           Prints a perf report-like table (self% and total% per function, --rows N of them), \
           or folded stacks (--format folded, flamegraph.pl's input), or JSON (--format json); \
           --flamegraph OUT.svg draws the flame graph; --speedscope OUT.json writes the stacks \
           for speedscope (a \"sampled\" profile, weights in samples, or microseconds with \
           --off-cpu and --wall), --pprof OUT.pb.gz for pprof (gzipped profile.proto: \
           samples/count and cpu/nanoseconds, or off-cpu/nanoseconds, wall/nanoseconds); any \
           of them with any --format, and with each other.\n\n\
           --off-cpu: where the backend waits instead: every interval its thread is off a CPU \
           (the scheduler's sched:sched_switch tracepoint, from the switch-out to the next \
           switch-in), attributed to the user stack at the switch-out, with the kernel's reason \
           (S sleeping, D uninterruptible, R preempted) and the wait event the backend had set \
           (its wait_event_info word, read while the backend is still off the CPU: exact; named \
           as pg_stat_activity names it, e.g. Lock:extend, IO:DataFileRead, \"no wait event\" \
           when none, \"not read\" when the backend ran again before pgdbg read it); the table \
           gives milliseconds off CPU per function, then per wait event, the folded stacks \
           microseconds with the wait event as the innermost frame ([wait: Lock:extend]). Needs \
           tracefs and root, CAP_PERFMON or perf_event_paranoid <= 1.\n\n\
           --wall: where the time goes, on a CPU and off it, over the same window: the on-CPU \
           samples weigh their period (1/N s of CPU time) and the off-CPU intervals their \
           duration, so the stacks add up to the time recorded; each stack's root says \
           [on-CPU] or [off-CPU: sleeping|I/O|preempted], an off-CPU one ends with its wait \
           event as --off-cpu gives it. The table gives milliseconds per \
           function, split on and off CPU, and a total line: elapsed = on CPU + off CPU + \
           what is not accounted for (at most about one sampling period, plus records lost). \
           Needs what --off-cpu needs; not with --off-cpu.\n\n\
           --syscalls: time per system call, as perf trace -s gives it: every system call of \
           the backend's thread (the raw_syscalls:sys_enter and sys_exit tracepoints on that \
           thread only), a line per call name with its calls, errors, total, average and \
           longest milliseconds and its share of the time recorded, most time first; a call in \
           progress at the start or the end is counted within the window. Names from the \
           x86_64 table of the kernel headers (syscall_N for a number it lacks). No stacks: \
           --format top or json only, no files. Needs tracefs (to read the tracepoints' ids) \
           and perf_event_open on the backend.\n\n\
           --by-statement (with the table or JSON, and any mode but --syscalls): each sample \
           and off-CPU interval is also given to the statement that ran at its time, read \
           without stopping the backend from its pg_stat_activity entry every millisecond \
           (state, state_change, query_id, query): a section per statement (its query id when \
           compute_query_id gives one, else its text; idle states apart) with its share, its \
           time on and off a CPU and where that went most. A stretch where the state changed \
           between two reads and more than that change happened is \"unknown\", never \
           guessed: statements much shorter than a millisecond fall there.\n\n\
           Needs perf_event_open on the backend: root, or the server's user with \
           perf_event_paranoid <= 2; in a container CAP_PERFMON and CAP_SYS_PTRACE.",
    examples: &[
        "profile --for 10s",
        "profile --hz 999 --for 5s --flamegraph cpu.svg",
        "profile --off-cpu --for 10s --flamegraph wait.svg",
        "profile --wall --for 10s --flamegraph wall.svg",
        "profile --syscalls --for 10s",
        "profile --wall --by-statement --for 30s",
        "profile --for 10s --speedscope cpu.json --pprof cpu.pb.gz",
    ],
    parse: |rest| parse_profile(rest).map(|_| Invocation::command(&PROFILE, rest)),
    needs: Needs::Runs,
    check: no_check,
    run: Some(|h, rest| h.profile(&parse_profile(rest)?)),
};

pub fn parse_profile(rest: &str) -> Result<ProfileOpts> {
    let mut o = ProfileOpts::default();
    let mut others = Vec::new();
    let mut it = rest.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "--hz" | "--freq" | "-F" => {
                let v = it.next().unwrap_or("");
                o.hz = v
                    .parse::<u64>()
                    .ok()
                    .filter(|h| (1..=10_000).contains(h))
                    .ok_or_else(|| {
                        anyhow!(
                            "profile: --hz takes a rate from 1 to 10000, not '{v}'",
                            v = crate::shown::shown(v)
                        )
                    })?;
            }
            "--format" => {
                let v = it.next().unwrap_or("");
                o.format = Format::parse(v).ok_or_else(|| {
                    anyhow!(
                        "profile: --format takes top, folded or json, not '{v}'",
                        v = crate::shown::shown(v)
                    )
                })?;
            }
            "--folded" => o.format = Format::Folded,
            "--off-cpu" => o.off_cpu = true,
            "--wall" => o.wall = true,
            "--syscalls" => o.syscalls = true,
            "--by-statement" => o.by_statement = true,
            "--json" => o.format = Format::Json,
            "--flamegraph" => {
                let v = it
                    .next()
                    .ok_or_else(|| anyhow!("profile: --flamegraph takes a file name (OUT.svg)"))?;
                o.flamegraph = Some(v.into());
            }
            "--speedscope" => {
                let v = it
                    .next()
                    .ok_or_else(|| anyhow!("profile: --speedscope takes a file name (OUT.json)"))?;
                o.speedscope = Some(v.into());
            }
            "--pprof" => {
                let v = it
                    .next()
                    .ok_or_else(|| anyhow!("profile: --pprof takes a file name (OUT.pb.gz)"))?;
                o.pprof = Some(v.into());
            }
            "--rows" => {
                let v = it.next().unwrap_or("");
                o.rows = v.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    anyhow!(
                        "profile: --rows takes a number of rows, not '{v}'",
                        v = crate::shown::shown(v)
                    )
                })?;
            }
            other => others.push(other),
        }
    }
    let (duration, count) = parse_limits(&others.join(" "), "profile")?;
    if count.is_some() {
        bail!("profile takes --for DURATION, not --count");
    }
    o.check_modes()?;
    o.duration = duration;
    Ok(o)
}
