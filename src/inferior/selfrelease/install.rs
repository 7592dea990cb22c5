//! Setting the pipe and the SIGCONT handler up in the backend with
//! injected system calls, and removing them again at detach.

use super::*;

impl Target {
    /// Set up the pipe and the SIGCONT handler (module comment) in a
    /// backend whose SIGTRAP handler was just installed at `base`.  A
    /// failure removes what was set up and is only logged: the backend is
    /// then as before (stopped until someone ends it if pgdbg and its
    /// guardian die together).
    pub(in crate::inferior) fn install_self_release(&mut self, base: u64, l: &Layout) {
        if crate::config::get().no_self_release {
            return;
        }
        if let Err(e) = self.try_install_self_release(base, l) {
            crate::inferior::log::debug(&format!("the backend cannot release itself: {e:#}"));
            let _ = self.remove_self_release();
        }
    }

    pub(super) fn try_install_self_release(&mut self, base: u64, l: &Layout) -> Result<()> {
        // before Linux 5.5 pipe_release signalled the readers at every
        // close: pgdbg's death alone would release the backend while its
        // guardian restores it
        if !kernel_at_least(5, 5) {
            bail!("Linux 5.5 or later is needed");
        }
        self.write(base + CODE, &emit(base, l)?)?;
        self.write(base + FD, &0u64.to_le_bytes())?;
        self.write(base + RES_RIP, &[0u8; 16])?;
        self.write(base + RELEASED, &[0u8; 24])?;
        // the SIGCONT action: only in place of the default one, asked
        // first (nothing else is injected where the backend has its own)
        let r = self.inject_syscall(
            libc::SYS_rt_sigaction,
            [libc::SIGCONT as u64, 0, base + OLD, 8, 0, 0],
        )?;
        if r < 0 {
            bail!("rt_sigaction in the backend failed (errno {})", -r);
        }
        let mut old = [0u8; 8];
        self.read(base + OLD, &mut old)?;
        if u64::from_le_bytes(old) != libc::SIG_DFL as u64 {
            bail!("the backend has a SIGCONT action of its own");
        }
        let r = self.inject_syscall(
            libc::SYS_pipe2,
            [base + PIPE, libc::O_CLOEXEC as u64, 0, 0, 0, 0],
        )?;
        if r < 0 {
            bail!("pipe2 in the backend failed (errno {})", -r);
        }
        let mut b = [0u8; 8];
        self.read(base + PIPE, &mut b)?;
        let rfd = i32::from_le_bytes(b[..4].try_into().expect("4"));
        let wfd = i32::from_le_bytes(b[4..].try_into().expect("4"));
        // recorded first: a rescue closes both
        self.set_release(|r| {
            r.rfd = Some(rfd);
            r.wfd = Some(wfd);
        });
        let mine = pidfd_getfd(self.pid(), wfd)
            .map_err(|e| anyhow!("cannot take the pipe's write end ({e})"))?;
        self.set_release(|r| r.mine = Some(Arc::new(mine)));
        let shared = match self.guardian()? {
            Some(g) => g.share_release_fd(wfd),
            None => false,
        };
        if !shared {
            bail!("the guardian did not take the pipe's write end");
        }
        let r = self.inject_syscall(libc::SYS_close, [wfd as u64, 0, 0, 0, 0, 0])?;
        if r < 0 {
            bail!("close in the backend failed (errno {})", -r);
        }
        self.set_release(|r| r.wfd = None);
        // the signals held back now, for the handler
        self.note_release_signals(self.held_signal_mask())?;
        self.write(base + FD, &(rfd as u64 + 1).to_le_bytes())?;
        const SA_SIGINFO: u64 = 4;
        const SA_RESTART: u64 = 0x1000_0000;
        const SA_RESTORER: u64 = 0x0400_0000;
        let new: [u64; 4] = [
            base + CODE,
            SA_SIGINFO | SA_RESTART | SA_RESTORER,
            base + l.restorer,
            // every signal but SIGTRAP blocked while it runs (a debug
            // register's trap in it comes to the SIGTRAP handler, which
            // returns, instead of killing the backend)
            crate::inferior::signals::BLOCKED_IN_HANDLERS,
        ];
        self.write(base + ACT, &sa_bytes(&new))?;
        self.set_release(|r| r.action = true);
        let r = self.inject_syscall(
            libc::SYS_rt_sigaction,
            [libc::SIGCONT as u64, base + ACT, 0, 8, 0, 0],
        )?;
        if r < 0 {
            bail!("rt_sigaction in the backend failed (errno {})", -r);
        }
        // the read end armed last
        let pid = self.pid() as u64;
        for (cmd, arg) in [
            (libc::F_SETOWN, pid),
            (F_SETSIG, libc::SIGCONT as u64),
            (libc::F_SETFL, (libc::O_ASYNC | libc::O_NONBLOCK) as u64),
        ] {
            let r = self.inject_syscall(libc::SYS_fcntl, [rfd as u64, cmd as u64, arg, 0, 0, 0])?;
            if r < 0 {
                bail!("fcntl in the backend failed (errno {})", -r);
            }
        }
        Ok(())
    }

    /// Remove the pipe's ends from the backend, then the SIGCONT action
    /// (the old one back).  In pgdbg's own detach, once the group stop has
    /// ended (nothing of pgdbg's left but the handlers); first in the
    /// guardian's and a rescue's, from when on the backend stays stopped
    /// if they die, as before it was set up (detach.rs).
    pub(in crate::inferior) fn remove_self_release(&mut self) -> Result<()> {
        let Some(r) = self.trap.as_ref().and_then(|h| h.release.clone()) else {
            return Ok(());
        };
        let Some(base) = self.release_base() else {
            return Ok(());
        };
        if self.state.is_gone() {
            return Ok(());
        }
        if !self.state.is_stopped() {
            self.ensure_stopped()?;
            if self.state.is_gone() {
                return Ok(());
            }
        }
        // a call's return int3 at AT_ENTRY (the guardian's or a rescue's
        // detach) would keep the system calls from running there: it goes
        // first, as the detach removes it anyway
        if let Some(at) = crate::inferior::procfs::auxv_entry(self.pid()) {
            for a in at..at + 3 {
                if !self.inserted.contains_key(&a) {
                    continue;
                }
                if self.byte_in_target(a) == Some(crate::inferior::INT3) {
                    self.remove_breakpoint(a)?;
                } else {
                    self.forget_breakpoint(a);
                }
            }
        }
        for fd in [r.rfd, r.wfd].into_iter().flatten() {
            // only a pipe: the backend never closes descriptors it did not
            // open, but a number is checked before it is closed
            let link = std::fs::read_link(format!("/proc/{}/fd/{fd}", self.pid()))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if link.starts_with("pipe:") {
                let r = self.inject_syscall(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0])?;
                if r < 0 && r != -(libc::EBADF as i64) {
                    bail!("cannot close descriptor {fd} in the backend (errno {})", -r);
                }
            }
        }
        self.write(base + FD, &0u64.to_le_bytes())?;
        self.set_release(|r| {
            r.rfd = None;
            r.wfd = None;
        });
        if r.action {
            let mut old = [0u8; 32];
            self.read(base + OLD, &mut old)?;
            self.restore_action(libc::SIGCONT, &old, base + CODE, base + ACT, base + OLD)?;
        }
        if let Some(h) = &mut self.trap {
            h.release = None;
        }
        self.note_release();
        Ok(())
    }
}

/// Whether the running kernel's release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = r
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

fn sa_bytes(sa: &[u64; 4]) -> Vec<u8> {
    sa.iter().flat_map(|w| w.to_le_bytes()).collect()
}
