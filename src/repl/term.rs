//! The terminal's mode while a command runs.
//!
//! rustyline puts the terminal in raw mode while it reads a line and puts
//! back the mode it found when the line is read.  On a terminal that
//! another program left raw (`stty` says `-isig -icanon`), the mode it
//! puts back is raw too, so a command would run with signals off: Ctrl-C
//! would be a byte waiting in the input queue instead of SIGINT, the
//! command would run on, and the next prompt would read that byte as a
//! Ctrl-C at the prompt (`interrupt`: the backend stopped until
//! `continue`).  So the terminal is put in its normal line mode (signals,
//! whole lines, echo) at the start and before each command, and the mode
//! pgdbg found is put back when the prompt ends.
//!
//! With ISIG on and NOFLSH off, the kernel also discards what was typed
//! ahead when Ctrl-C comes: lines typed during a command that Ctrl-C ends
//! are not run afterwards (lines typed during a command that ends by
//! itself run at the next prompt, as in gdb).

use nix::sys::termios::{self, InputFlags, LocalFlags, OutputFlags, SetArg, Termios};

/// The terminal on standard input, if it is one: the mode pgdbg found,
/// put back on drop.
pub struct CommandMode {
    found: Option<Termios>,
}

impl CommandMode {
    /// Take note of the terminal's mode and put it in line mode.
    pub fn start() -> CommandMode {
        let found = termios::tcgetattr(std::io::stdin()).ok();
        let m = CommandMode { found };
        m.apply();
        m
    }

    /// Before a command runs: the line mode, if the terminal is not in it
    /// (the reader thread is not reading then, so nothing else sets the
    /// mode meanwhile).
    pub fn apply(&self) {
        if self.found.is_none() {
            return;
        }
        let Ok(now) = termios::tcgetattr(std::io::stdin()) else {
            return;
        };
        let want = line_mode(&now);
        if !same_flags(&want, &now) {
            // TCSANOW: what was typed ahead stays in the queue
            let _ = termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, &want);
        }
    }
}

impl Drop for CommandMode {
    fn drop(&mut self) {
        if let Some(t) = &self.found {
            let _ = termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, t);
        }
    }
}

/// `t` with the settings a command needs: Ctrl-C is SIGINT and flushes
/// the input queue, input comes in whole lines with echo, Enter ends a
/// line, and a newline written starts the next line at its left.
fn line_mode(t: &Termios) -> Termios {
    let mut m = t.clone();
    m.local_flags |= LocalFlags::ISIG | LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::IEXTEN;
    m.local_flags &= !LocalFlags::NOFLSH;
    m.input_flags |= InputFlags::ICRNL;
    m.output_flags |= OutputFlags::OPOST | OutputFlags::ONLCR;
    m
}

/// Whether two modes have the same flags (`Termios`'s own `==` also
/// compares a cached copy of the C struct, stale after a change).
fn same_flags(a: &Termios, b: &Termios) -> bool {
    a.local_flags == b.local_flags
        && a.input_flags == b.input_flags
        && a.output_flags == b.output_flags
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw mode (as `cfmakeraw` or a crashed full-screen program leaves
    /// it) becomes line mode; the other settings stay as they were.
    #[test]
    fn raw_becomes_line_mode() {
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        t.c_cflag = libc::CS8 | libc::CREAD;
        t.c_lflag = libc::ECHOE | libc::NOFLSH;
        t.c_cc[libc::VINTR] = 3;
        let raw = Termios::from(t);
        let m = line_mode(&raw);
        let l = m.local_flags;
        assert!(l.contains(LocalFlags::ISIG | LocalFlags::ICANON | LocalFlags::ECHO));
        assert!(l.contains(LocalFlags::ECHOE));
        assert!(!l.contains(LocalFlags::NOFLSH));
        assert!(m.input_flags.contains(InputFlags::ICRNL));
        assert!(
            m.output_flags
                .contains(OutputFlags::OPOST | OutputFlags::ONLCR)
        );
        assert_eq!(m.control_flags, raw.control_flags);
        assert_eq!(m.control_chars, raw.control_chars);
        // line mode is left as it is
        assert!(same_flags(&line_mode(&m), &m));
        assert!(!same_flags(&m, &raw));
    }
}
