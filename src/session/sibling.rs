//! A second process of the same server attached from a session for a
//! while (`Backend::attach_sibling`): `plan --progress` installs row
//! counting into its leader's parallel workers this way.  It is a session
//! of its own (its own `Target`, guardian, group stop and detach, the
//! same debug info), made and let go inside one command; its waits leave
//! Ctrl-C and deadlines to the command's loop on the first backend
//! (`runtime::PeekHooks`).

use crate::inferior::{Target, procfs};
use crate::postgres::backend::Sibling;
use crate::session::{Session, SessionOptions};
use anyhow::{Result, bail};

impl Session {
    /// Seize and stop `pid`, a process of this session's server binary.
    pub(crate) fn attach_sibling(&self, pid: i32) -> Result<Session> {
        if pid == self.pid {
            bail!("process {pid} is the backend attached already");
        }
        let st = procfs::status(pid)?;
        if st.tracer_pid != 0 {
            bail!("process {pid} is traced by PID {} already", st.tracer_pid);
        }
        let exe = procfs::exe_path(pid)?;
        let clean = |p: &std::path::Path| {
            p.to_string_lossy()
                .trim_end_matches(" (deleted)")
                .to_string()
        };
        if clean(&exe) != clean(&self.exe_path) {
            bail!(
                "process {pid} runs {}, not this backend's {}",
                exe.display(),
                self.exe_path.display()
            );
        }
        let kind = crate::postgres::classify(pid)?;
        let target = Target::attach(pid)?;
        // a failure from here on drops the target, which detaches it
        let mut s = Session::new(
            pid,
            target,
            self.di.clone(),
            self.exe_path.clone(),
            kind,
            crate::runtime::Sink::new(),
            SessionOptions {
                call_timeout: self.call_timeout,
                hit_limit: None,
                capture_hits: false,
            },
        )?;
        s.sibling = true;
        Ok(s)
    }
}

impl Sibling for Session {
    fn detach(mut self: Box<Self>) -> Result<()> {
        Session::detach(&mut self).map(|_| ())
    }
}
