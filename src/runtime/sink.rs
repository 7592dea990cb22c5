//! The one way pgdbg's output reaches a person or a file: lines of output
//! (standard output, through the queue a timer thread writes, so that a
//! reader that stalls never holds the backend), warnings, notes and errors
//! (standard error, written at once, never panicking on a closed pipe),
//! and the capture's events (the capture file, one `write(2)` per line:
//! `capture.rs` here; what a line says is the capture room's).  `errln!`,
//! `errp!`, `out_line` and the capture file are its implementation and are
//! used nowhere else (tested).
//!
//! The session owns its sink: it is made with the capture file (opened
//! through it before attaching, so a bad path fails first) and installed
//! by `Session::new` for the session's life.  Events go through the
//! session's own sink (`Session::emit_event`, the `Backend` trait), so a
//! second session inside a command (`session/sibling.rs`, with no
//! capture) never writes into the first one's capture.  Lines and
//! warnings are reached from every room through [`sink`], the installed
//! one: they go to the process's standard output and error whichever
//! session is current, and passing a sink down through `perf/`,
//! `postgres/`, `probes/` and the recorder threads only to reach the same
//! queue would add a parameter to ~90 call sites and change nothing.
//!
//! The prompt (`repl.rs`) registers rustyline's external printer with the
//! sink and says while its prompt is shown: queued lines written then, and
//! the text of a stop that came while the prompt waits
//! ([`Sink::above_prompt`]), go through it, above the prompt, which it
//! redraws with the line being typed.

use super::capture::CaptureFile;
use super::output::{flush_out_through, out_line};
use anyhow::Result;
use std::fmt::Display;
use std::sync::{Arc, Mutex, OnceLock};

/// Prints a text above the prompt (rustyline's external printer, wrapped
/// by the REPL); false: it could not (the text goes to standard output).
pub type PromptPrinter = Box<dyn FnMut(String) -> bool + Send>;

/// Where pgdbg's lines, warnings and capture events go (see the module's
/// text).  A handle: clones are the same sink.
#[derive(Clone, Default)]
pub struct Sink(Arc<State>);

#[derive(Default)]
struct State {
    /// The capture file, when the session has one.
    capture: Mutex<Option<CaptureFile>>,
    prompt: Mutex<Prompt>,
}

#[derive(Default)]
struct Prompt {
    printer: Option<PromptPrinter>,
    /// The prompt is on the screen (its reader waits for a line).
    shown: bool,
}

/// The installed sink (the current session's).
static CURRENT: Mutex<Option<Sink>> = Mutex::new(None);

/// The sink of the current session; before there is one (or after it),
/// a sink with no capture and no prompt.
pub fn sink() -> Sink {
    static NONE: OnceLock<Sink> = OnceLock::new();
    CURRENT
        .lock()
        .ok()
        .and_then(|c| c.clone())
        .unwrap_or_else(|| NONE.get_or_init(Sink::default).clone())
}

/// A sink installed by [`Sink::install`]: the one installed before it is
/// the current one again when this is dropped.
#[must_use]
pub struct Installed {
    sink: Sink,
    previous: Option<Sink>,
}

impl Drop for Installed {
    fn drop(&mut self) {
        if let Ok(mut c) = CURRENT.lock()
            && c.as_ref().is_some_and(|s| Arc::ptr_eq(&s.0, &self.sink.0))
        {
            *c = self.previous.take();
        }
    }
}

impl Sink {
    /// A sink with no capture and no prompt.
    pub fn new() -> Sink {
        Sink::default()
    }

    /// Make this the sink [`sink`] gives, until the guard is dropped.
    pub fn install(&self) -> Installed {
        let previous = CURRENT
            .lock()
            .ok()
            .and_then(|mut c| c.replace(self.clone()));
        Installed {
            sink: self.clone(),
            previous,
        }
    }

    /// A line of output (standard output, queued; `line` without its
    /// newline).
    pub fn line(&self, line: &str) {
        out_line(line);
    }

    /// A line for the person at the terminal (standard error, now): a
    /// warning, a note, an error (`sink().warn(format_args!(...))`).
    pub fn warn(&self, text: impl Display) {
        crate::errln!("{text}");
    }

    /// Text on standard error without a newline (a status line the next
    /// write replaces, `\r\x1b[K`).
    pub fn part(&self, text: impl Display) {
        crate::errp!("{text}");
    }

    /// Write the queued lines now (above the prompt while it is shown).
    pub fn flush(&self) {
        match self.0.prompt.lock() {
            Ok(mut p) if p.shown => match p.printer.as_mut() {
                Some(print) => flush_out_through(Some(&mut **print)),
                None => flush_out_through(None),
            },
            _ => flush_out_through(None),
        }
    }

    /// Open the capture file FILE (appending; see `capture.rs`): the
    /// events given to [`Sink::event`] go there from now on.
    pub fn open_capture(&self, path: &std::path::Path) -> Result<()> {
        let f = CaptureFile::open(path)?;
        if let Ok(mut c) = self.0.capture.lock() {
            *c = Some(f);
        }
        Ok(())
    }

    /// Whether a capture file is open.
    pub fn capturing(&self) -> bool {
        self.0.capture.lock().is_ok_and(|c| c.is_some())
    }

    /// Append a capture event: `line` (called only while the capture is
    /// written) gives it as one line of the capture, newline included.
    pub fn event(&self, line: impl FnOnce() -> Vec<u8>) {
        if let Ok(mut c) = self.0.capture.lock()
            && let Some(f) = c.as_mut()
            && f.writable()
        {
            f.append(&line());
        }
    }

    /// Write what the capture file holds back (nothing is buffered today:
    /// a failed flush is a failed write).
    pub fn flush_capture(&self) {
        if let Ok(mut c) = self.0.capture.lock()
            && let Some(f) = c.as_mut()
        {
            f.flush();
        }
    }

    /// Flush and close the capture file: later events are not written.
    pub fn close_capture(&self) {
        if let Ok(mut c) = self.0.capture.lock()
            && let Some(mut f) = c.take()
        {
            f.flush();
        }
    }

    /// The prompt's printer (None: the prompt is gone).
    pub fn set_prompt_printer(&self, printer: Option<PromptPrinter>) {
        if let Ok(mut p) = self.0.prompt.lock() {
            p.shown &= printer.is_some();
            p.printer = printer;
        }
    }

    /// The prompt is shown (its reader waits for a line) or not.
    pub fn prompt_shown(&self, shown: bool) {
        if let Ok(mut p) = self.0.prompt.lock() {
            p.shown = shown;
        }
    }

    /// What the prompt shows as a command's answer, and its own lines
    /// ("Quit", a line that does not parse): after the lines queued before
    /// it, on standard output, flushed (a leading newline dropped; an empty
    /// text writes nothing).  Err: standard output failed.
    pub fn answer(&self, text: &str) -> std::io::Result<()> {
        use std::io::Write;
        self.flush();
        let mut out = std::io::stdout();
        let t = text.strip_prefix('\n').unwrap_or(text);
        if !t.is_empty() {
            writeln!(out, "{t}")?;
        }
        out.flush()
    }

    /// Text for the person that came while the prompt waits (a stop's
    /// report): above the prompt through its printer, or on standard
    /// output when there is none (a leading newline dropped; nothing for
    /// an empty text).
    pub fn above_prompt(&self, text: &str) {
        use std::io::Write;
        let t = text.strip_prefix('\n').unwrap_or(text);
        if t.is_empty() {
            return;
        }
        if let Ok(mut p) = self.0.prompt.lock()
            && let Some(print) = p.printer.as_mut()
            && print(format!("{t}\n"))
        {
            return;
        }
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{t}").and_then(|_| out.flush());
    }
}

#[cfg(test)]
mod tests {
    /// `errln!`, `errp!`, `out_line` and the capture file are the sink's
    /// implementation: no file outside `runtime/` uses them, and the
    /// prompt (`repl.rs`) writes nothing to standard output but through
    /// `Sink::answer` and `Sink::above_prompt`.  The capture
    /// file is opened and written only here (`CaptureFile`, private to
    /// `runtime/`, so the compiler keeps it here too): elsewhere a capture
    /// is opened with `Sink::open_capture` and its events given to
    /// `Sink::event`; the capture room (`capture.rs`, `capture/`) turns
    /// events into lines and touches no file (the old `Capture::open`
    /// writer is gone).
    #[test]
    fn only_the_runtime_writes_without_the_sink() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        let mut dirs = vec![src.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("src/").flatten() {
                let p = e.path();
                if p.is_dir() {
                    if p != src.join("runtime") {
                        dirs.push(p);
                    }
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).expect("a source file");
                    for (n, l) in text.lines().enumerate() {
                        // the capture room makes lines, never files
                        let capture_room =
                            p == src.join("capture.rs") || p.starts_with(src.join("capture"));
                        // the prompt's answers go through `Sink::answer`
                        let prompt = p.starts_with(src.join("repl")) || p == src.join("repl.rs");
                        if [
                            "errln!",
                            "errp!",
                            "out_line(",
                            "CaptureFile",
                            "Capture::open",
                        ]
                        .iter()
                        .any(|m| l.contains(m))
                            || capture_room
                                && ["std::fs", "File", "io::Write"]
                                    .iter()
                                    .any(|m| l.contains(m))
                            || prompt
                                && ["stdout()", "writeln!", "println!"]
                                    .iter()
                                    .any(|m| l.contains(m))
                        {
                            found.push(format!("{}:{}: {}", p.display(), n + 1, l.trim()));
                        }
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "use runtime::sink() (lines, warnings, Sink::event for the capture) instead:\n{}",
            found.join("\n")
        );
    }
}
