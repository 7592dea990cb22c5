//! The one way pgdbg's text reaches a person: lines of output (standard
//! output, through the queue a timer thread writes, so that a reader that
//! stalls never holds the backend) and warnings, notes and errors
//! (standard error, written at once, never panicking on a closed pipe).
//! Every room writes through [`sink`]; `errln!`, `errp!` and `out_line`
//! are its implementation and are used nowhere else (tested).

use super::output::{flush_out, out_line};
use std::fmt::Display;

/// Where pgdbg's lines and warnings go (see the module's text).
#[derive(Debug, Clone, Copy)]
pub struct Sink(());

/// The process's sink.
pub fn sink() -> Sink {
    Sink(())
}

impl Sink {
    /// A line of output (standard output, queued; `line` without its
    /// newline).
    pub fn line(self, line: &str) {
        out_line(line);
    }

    /// A line for the person at the terminal (standard error, now): a
    /// warning, a note, an error (`sink().warn(format_args!(...))`).
    pub fn warn(self, text: impl Display) {
        crate::errln!("{text}");
    }

    /// Text on standard error without a newline (a status line the next
    /// write replaces, `\r\x1b[K`).
    pub fn part(self, text: impl Display) {
        crate::errp!("{text}");
    }

    /// Write the queued lines now.
    pub fn flush(self) {
        flush_out();
    }
}

#[cfg(test)]
mod tests {
    /// `errln!`, `errp!` and `out_line` are the sink's implementation:
    /// no file outside `runtime/` uses them.
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
                        if ["errln!", "errp!", "out_line("]
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
            "use runtime::sink() instead:\n{}",
            found.join("\n")
        );
    }
}
