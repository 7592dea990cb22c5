//! `profile --syscalls`' result: the calls gathered by `syscalls.rs`
//! named and ordered, as a `perf trace -s`-like table, its total line
//! and JSON.

use super::syscalls::{RawSyscalls, name};

/// One system call's line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyscallRow {
    pub syscall: String,
    pub nr: u64,
    pub calls: u64,
    pub errors: u64,
    pub total_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    /// Share of the time recorded spent in it.
    pub pct_elapsed: f64,
}

/// Time per system call of a backend over a window.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyscallProfile {
    pub pid: i32,
    pub duration_s: f64,
    /// Time in system calls, all of them.
    pub in_syscalls_s: f64,
    pub calls: u64,
    /// CPU time the backend used meanwhile (seconds), when known.
    pub cpu_s: Option<f64>,
    /// The call in progress when recording began (counted from then) and
    /// when it ended (counted to then).
    pub in_progress_at_start: Option<String>,
    pub in_progress_at_end: Option<String>,
    /// Enters or exits whose other half was lost (not counted).
    pub unpaired: u64,
    pub lost: u64,
    /// By total time, most first.
    pub syscalls: Vec<SyscallRow>,
}

impl SyscallProfile {
    pub fn build(raw: &RawSyscalls, pid: i32) -> SyscallProfile {
        let dur = raw.duration_s.max(1e-9);
        let mut rows: Vec<SyscallRow> = raw
            .by_nr
            .iter()
            .map(|(nr, s)| {
                let total_ms = s.total_ns as f64 / 1e6;
                SyscallRow {
                    syscall: name(*nr),
                    nr: *nr,
                    calls: s.calls,
                    errors: s.errors,
                    total_ms,
                    avg_ms: total_ms / s.calls.max(1) as f64,
                    max_ms: s.max_ns as f64 / 1e6,
                    pct_elapsed: total_ms / 1e3 / dur * 100.0,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total_ms
                .total_cmp(&a.total_ms)
                .then(b.calls.cmp(&a.calls))
                .then(a.nr.cmp(&b.nr))
        });
        SyscallProfile {
            pid,
            duration_s: raw.duration_s,
            in_syscalls_s: rows.iter().map(|r| r.total_ms).sum::<f64>() / 1e3,
            calls: rows.iter().map(|r| r.calls).sum(),
            cpu_s: raw.cpu_s,
            in_progress_at_start: raw.open_at_start.map(name),
            in_progress_at_end: raw.open_at_end.map(name),
            unpaired: raw.unpaired,
            lost: raw.lost,
            syscalls: rows,
        }
    }

    /// `perf trace -s`-like: a line per system call, most time first
    /// (`rows` of them), then the total line.
    pub fn table(&self, rows: usize) -> String {
        let mut out = format!(
            "{:<22} {:>9} {:>7} {:>12} {:>10} {:>10} {:>9}\n",
            "syscall", "calls", "errors", "total ms", "avg ms", "max ms", "% elapsed"
        );
        for r in self.syscalls.iter().take(rows) {
            out.push_str(&format!(
                "{:<22} {:>9} {:>7} {:>12.3} {:>10.3} {:>10.3} {:>8.2}%\n",
                r.syscall, r.calls, r.errors, r.total_ms, r.avg_ms, r.max_ms, r.pct_elapsed
            ));
        }
        if self.syscalls.len() > rows {
            out.push_str(&format!(
                "({} more system calls: --rows N)\n",
                self.syscalls.len() - rows
            ));
        }
        out.push_str(&self.summary_line());
        out
    }

    /// "in system calls X s of Y s (Z%) over N calls of K kinds ..."
    pub fn summary_line(&self) -> String {
        let mut s = format!(
            "profile: backend {} in system calls {:.3} s of {:.3} s ({:.1}%) over {} calls of {} kind{}",
            self.pid,
            self.in_syscalls_s,
            self.duration_s,
            self.in_syscalls_s / self.duration_s.max(1e-9) * 100.0,
            self.calls,
            self.syscalls.len(),
            if self.syscalls.len() == 1 { "" } else { "s" }
        );
        if let Some(c) = self.cpu_s {
            s.push_str(&format!("; on a CPU {c:.3} s"));
        }
        if let Some(n) = &self.in_progress_at_start {
            s.push_str(&format!(
                "; {n} was in progress at the start (counted from it)"
            ));
        }
        if let Some(n) = &self.in_progress_at_end {
            s.push_str(&format!("; {n} was in progress at the end (counted to it)"));
        }
        if self.lost > 0 || self.unpaired > 0 {
            s.push_str(&format!(
                "; {} records lost (ring full), {} halves of calls left out",
                self.lost, self.unpaired
            ));
        }
        s
    }
}

impl super::render::Rendered for SyscallProfile {
    fn table_text(&self, rows: usize) -> String {
        self.table(rows)
    }

    /// No stacks: the command refuses the outputs made of them.
    fn folded(&self) -> &[(String, u64)] {
        &[]
    }

    fn svg_labels(&self) -> (String, &'static str) {
        (format!("System calls of backend {}", self.pid), "us")
    }

    fn nothing_to_draw(&self) -> &'static str {
        "profile --syscalls records no stacks"
    }

    fn weight(&self) -> super::export::Weight {
        super::export::Weight::Micros("syscalls")
    }

    fn recorded_s(&self) -> f64 {
        self.duration_s
    }
}

#[cfg(test)]
mod tests {
    use super::super::syscall_table::SYSCALLS;
    use super::super::syscalls::{Layout, Pairing};
    use super::super::tracefs::Field;
    use super::*;

    /// A raw record as the kernel writes it: common_type, then id at 8 and
    /// ret at 16.
    fn rec(kind: u16, nr: u64, ret: i64) -> Vec<u8> {
        let mut r = vec![0u8; 24];
        r[0..2].copy_from_slice(&kind.to_le_bytes());
        r[8..16].copy_from_slice(&nr.to_le_bytes());
        r[16..24].copy_from_slice(&ret.to_le_bytes());
        r
    }

    const L: Layout = Layout {
        enter_type: 443,
        exit_type: 442,
        common_type: Field { offset: 0, size: 2 },
        id: Field { offset: 8, size: 8 },
        ret: Field {
            offset: 16,
            size: 8,
        },
    };

    #[test]
    fn enters_and_exits_paired_within_the_window() {
        let mut p = Pairing::new(1000, L);
        // epoll_wait (232) entered before the window, returns at 1500
        p.take(1500, &rec(442, 232, 0));
        // read (0) 2000..2300, an error
        p.take(2000, &rec(443, 0, 0));
        p.take(2300, &rec(442, 0, -11));
        // read again 2400..2500
        p.take(2400, &rec(443, 0, 0));
        p.take(2500, &rec(442, 0, 10));
        // an exit whose enter was lost
        p.take(2600, &rec(442, 1, 0));
        // epoll_wait still in progress at the end (3000)
        p.take(2700, &rec(443, 232, 0));
        let raw = p.end(3000);
        let s = SyscallProfile::build(&raw, 7);
        let row = |n: &str| s.syscalls.iter().find(|r| r.syscall == n).unwrap();
        assert_eq!(row("epoll_wait").calls, 2);
        assert!((row("epoll_wait").total_ms - 800e-6).abs() < 1e-12);
        assert_eq!((row("read").calls, row("read").errors), (2, 1));
        assert!((row("read").max_ms - 300e-6).abs() < 1e-12);
        assert_eq!(s.unpaired, 1);
        assert_eq!(s.in_progress_at_start.as_deref(), Some("epoll_wait"));
        assert_eq!(s.in_progress_at_end.as_deref(), Some("epoll_wait"));
        assert_eq!(s.syscalls[0].syscall, "epoll_wait");
        assert!((s.in_syscalls_s - 1200e-9).abs() < 1e-15);
        let t = s.table(1);
        assert!(t.contains("(1 more system calls"), "{t}");
        assert!(t.contains("of 2 kinds"), "{t}");
        assert!(t.contains("over 4 calls"), "{t}");
    }

    #[test]
    fn names_agree_with_the_libc_crate() {
        assert!(SYSCALLS.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
        for (nr, n) in [
            (libc::SYS_read, "read"),
            (libc::SYS_write, "write"),
            (libc::SYS_epoll_wait, "epoll_wait"),
            (libc::SYS_epoll_pwait, "epoll_pwait"),
            (libc::SYS_fsync, "fsync"),
            (libc::SYS_fdatasync, "fdatasync"),
            (libc::SYS_pread64, "pread64"),
            (libc::SYS_pwrite64, "pwrite64"),
            (libc::SYS_sendto, "sendto"),
            (libc::SYS_recvfrom, "recvfrom"),
            (libc::SYS_select, "select"),
            (libc::SYS_pselect6, "pselect6"),
            (libc::SYS_io_uring_enter, "io_uring_enter"),
            (libc::SYS_mseal, "mseal"),
        ] {
            assert_eq!(name(nr as u64), n);
        }
        assert_eq!(name(100_000), "syscall_100000");
    }
}
