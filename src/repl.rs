//! The interactive prompt.  rustyline runs on a helper thread that only
//! reads lines when asked, so the terminal is in normal mode while a
//! command runs (Ctrl-C then reaches pgdbg as SIGINT and becomes a
//! PTRACE_INTERRUPT; `term.rs` makes sure of that mode even on a terminal
//! left raw).  All ptrace work stays on the main thread.
//!
//! On a terminal the prompt is non-stop (`session/nonstop.rs`): the backend
//! runs while the prompt waits.  A waiter thread blocks in
//! `waitid(WNOWAIT)` on the backend and wakes the main thread when it
//! stops by itself (a breakpoint hit, a signal to pass on, its exit); the
//! main thread then takes the stop with `waitpid` (a poll every 100 ms
//! backs it up), and a stop the user must see is printed above the prompt:
//! rustyline's external printer is registered with the session's sink
//! (`runtime/sink.rs`), which writes through it a stop's text and, while
//! the prompt is shown, its queued lines.

mod term;

use crate::command::{self, Command};
use crate::runtime;
use crate::session::{Flow, Outcome, Session};
use anyhow::Result;
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::Duration;

pub const PROMPT: &str = "(pgdbg) ";

/// Tab completion: command names first, then function, global and type
/// names for the arguments.
pub struct PgdbgHelper {
    pub symbols: Arc<RwLock<Vec<String>>>,
}

impl Completer for PgdbgHelper {
    type Candidate = Pair;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .map(|i| i + 1)
            .unwrap_or(0);
        let word = &before[start..];
        let first_word = before[..start].trim().is_empty();
        let mut out: Vec<Pair> = Vec::new();
        if first_word {
            for n in command::command_names() {
                if n.starts_with(word) {
                    out.push(Pair {
                        display: n.to_string(),
                        replacement: format!("{n} "),
                    });
                }
            }
        } else if !word.is_empty() {
            let syms = self.symbols.read().map(|s| s.clone()).unwrap_or_default();
            let lo = syms.partition_point(|s| s.as_str() < word);
            for s in syms[lo..]
                .iter()
                .take_while(|s| s.starts_with(word))
                .take(500)
            {
                out.push(Pair {
                    display: s.clone(),
                    replacement: s.clone(),
                });
            }
            // the second word of a command with subcommands (info, waits)
            let mut words = before[..start].split_whitespace();
            if let (Some(first), None) = (words.next(), words.next()) {
                let subs = command::lookup(first)
                    .map(command::subcommands)
                    .unwrap_or_default();
                if !subs.is_empty() {
                    out.clear();
                    for e in subs {
                        let n = e.name.split_once(' ').map_or(e.name, |(_, s)| s);
                        if n.starts_with(word) {
                            out.push(Pair {
                                display: n.into(),
                                replacement: n.into(),
                            });
                        }
                    }
                }
            }
        }
        Ok((start, out))
    }
}

impl Hinter for PgdbgHelper {
    type Hint = String;
}
impl Highlighter for PgdbgHelper {}
impl Validator for PgdbgHelper {}
impl Helper for PgdbgHelper {}

enum Input {
    Line(String),
    /// A line of a multi-line paste after its first: run as it is (an empty
    /// one is skipped, it does not repeat the last command).
    Pasted(String),
    Interrupted,
    Eof,
    /// The backend may have stopped (the waiter thread), or 100 ms passed
    /// (`woken`: false): time to look, the line being typed goes on.
    Target {
        woken: bool,
    },
}

/// The lines read from the reader thread, one at a time: a bracketed
/// paste comes as one "line" holding newlines; its lines are run one after
/// the other, in order, as gdb does.
struct Lines<'a> {
    /// Told while the prompt is shown (its lines go above it then).
    sink: &'a runtime::Sink,
    req_tx: &'a mpsc::Sender<&'static str>,
    in_rx: &'a mpsc::Receiver<Input>,
    pending: std::collections::VecDeque<String>,
    /// The reader thread is in readline for a prompt already asked.
    reading: bool,
    /// Return `Input::Target` every 100 ms (the backend runs).
    ticks: bool,
}

impl Lines<'_> {
    /// The next line; None when pgdbg is terminating.
    fn read(&mut self, prompt: &'static str) -> Option<Input> {
        if let Some(l) = self.pending.pop_front() {
            return Some(Input::Pasted(l));
        }
        if !self.reading {
            if self.req_tx.send(prompt).is_err() {
                return Some(Input::Eof);
            }
            self.reading = true;
            self.sink.prompt_shown(true);
        }
        let input = loop {
            match self.in_rx.recv_timeout(Duration::from_millis(100)) {
                Ok(i @ Input::Target { .. }) => return Some(i),
                Ok(i) => break i,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if runtime::must_stop() {
                        return None;
                    }
                    if self.ticks {
                        return Some(Input::Target { woken: false });
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Some(Input::Eof),
            }
        };
        self.reading = false;
        self.sink.prompt_shown(false);
        match input {
            Input::Line(l) if l.contains(['\n', '\r']) => {
                let mut lines = split_paste(&l).into_iter();
                let first = lines.next().unwrap_or_default();
                self.pending.extend(lines);
                Some(Input::Line(first))
            }
            other => Some(other),
        }
    }
}

/// The lines of a pasted text (CR, LF or CRLF ends), without the empty
/// line after a final newline.
fn split_paste(text: &str) -> Vec<String> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let text = text.strip_suffix('\n').unwrap_or(&text);
    text.split('\n').map(str::to_string).collect()
}

fn history_path() -> Option<PathBuf> {
    if let Some(p) = &crate::config::get().history {
        return Some(p.clone());
    }
    let home = std::env::var_os("HOME")?;
    Some(
        PathBuf::from(home)
            .join(".cache")
            .join("pgdbg")
            .join("history"),
    )
}

/// Rustyline's external printer, for the sink: what it prints goes above
/// the prompt (rustyline redraws it and the line being typed).
fn prompt_printer(
    mut p: impl rustyline::ExternalPrinter + Send + 'static,
) -> runtime::PromptPrinter {
    Box::new(move |text| p.print(text).is_ok())
}

/// The thread that blocks in waitid(WNOWAIT) on the backend while it runs
/// in the background: one wake-up (`Input::Target`) per arming.  It only
/// looks; the main thread, the tracer, takes the stop.
fn spawn_waiter(pid: i32, wake: mpsc::Sender<Input>) -> mpsc::Sender<()> {
    let (arm_tx, arm_rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        runtime::block_in_this_thread();
        while arm_rx.recv().is_ok() {
            // SAFETY: waitid(2) writes only into `info`; WNOWAIT leaves the
            // status for the tracer's waitpid.
            let r = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WSTOPPED | libc::WNOWAIT | libc::__WALL,
                )
            };
            if r != 0 {
                // not waitable (detached, gone): the main thread's poll
                // tells; do not spin
                std::thread::sleep(Duration::from_millis(100));
            }
            if wake.send(Input::Target { woken: true }).is_err() {
                break;
            }
        }
    });
    arm_tx
}

/// Run the prompt until quit/detach/EOF, the backend's exit, or a
/// terminating signal.  Returns the exit code.
pub fn run(session: &mut Session) -> Result<i32> {
    let sink = session.sink().clone();
    // the prompt's printer leaves the sink with the prompt
    struct Unregister<'a>(&'a runtime::Sink);
    impl Drop for Unregister<'_> {
        fn drop(&mut self) {
            self.0.set_prompt_printer(None);
        }
    }
    let _unregister = Unregister(&sink);
    let mut names = session.di.function_names();
    names.extend(session.library_function_names());
    names.extend(
        session
            .di
            .index
            .types
            .keys()
            .filter(|k| !k.contains(' '))
            .cloned(),
    );
    names.sort();
    names.dedup();
    let symbols = Arc::new(RwLock::new(names));
    // before the first readline: rustyline puts back the mode it finds
    let term = term::CommandMode::start();
    let (req_tx, req_rx) = mpsc::channel::<&'static str>();
    let (in_tx, in_rx) = mpsc::channel::<Input>();
    let helper_syms = symbols.clone();
    let (printer_tx, printer_rx) = mpsc::channel::<Option<runtime::PromptPrinter>>();
    // non-stop on a terminal; piped input keeps the stopped backend
    let nonstop = std::io::stdin().is_terminal() && !crate::config::get().all_stop;
    let waiter = nonstop.then(|| spawn_waiter(session.pid, in_tx.clone()));
    let _reader = std::thread::spawn(move || {
        runtime::block_in_this_thread();
        // history gets each line of a multi-line paste (below)
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .max_history_size(2000)
            .map(|b| b.completion_type(rustyline::CompletionType::List))
            .map(|b| b.build())
            .unwrap_or_default();
        let mut rl: rustyline::Editor<PgdbgHelper, rustyline::history::DefaultHistory> =
            match rustyline::Editor::with_config(config) {
                Ok(r) => r,
                Err(_) => {
                    let _ = in_tx.send(Input::Eof);
                    return;
                }
            };
        rl.set_helper(Some(PgdbgHelper {
            symbols: helper_syms,
        }));
        let printer = rl.create_external_printer().ok().map(prompt_printer);
        let _ = printer_tx.send(printer);
        // a history "file" that is not a regular file (PGDBG_HISTORY=/dev/null
        // to keep none) is neither read nor written: rustyline's save would
        // chmod it to 0600
        let hist = history_path().filter(|h| std::fs::metadata(h).map_or(true, |m| m.is_file()));
        if let Some(h) = &hist {
            let _ = rl.load_history(h);
        }
        while let Ok(prompt) = req_rx.recv() {
            let r = rl.readline(prompt);
            let msg = match r {
                Ok(l) => {
                    for h in split_paste(&l) {
                        if !h.trim().is_empty() {
                            let _ = rl.add_history_entry(h);
                        }
                    }
                    Input::Line(l)
                }
                Err(ReadlineError::Interrupted) => Input::Interrupted,
                Err(_) => Input::Eof,
            };
            if let Some(h) = &hist {
                if let Some(d) = h.parent() {
                    let _ = std::fs::create_dir_all(d);
                }
                let _ = rl.save_history(h);
            }
            if in_tx.send(msg).is_err() {
                break;
            }
        }
    });
    sink.set_prompt_printer(
        printer_rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or(None),
    );
    let mut last_line = String::new();
    let mut lines = Lines {
        sink: &sink,
        req_tx: &req_tx,
        in_rx: &in_rx,
        pending: Default::default(),
        reading: false,
        ticks: false,
    };
    let mut armed = false;
    if nonstop {
        match session.start_nonstop() {
            Ok(None) => {}
            Ok(Some(Outcome { text, flow })) => {
                sink.above_prompt(&text);
                if let Some(code) = ends(flow) {
                    return Ok(code);
                }
            }
            Err(e) => {
                let _ = sink.answer(&crate::runtime::one_line(&e));
            }
        }
    }
    loop {
        if runtime::must_stop() {
            return Ok(1);
        }
        if let Some(w) = &waiter
            && session.running_in_background()
            && !armed
        {
            armed = w.send(()).is_ok();
        }
        lines.ticks = session.running_in_background();
        let Some(input) = lines.read(PROMPT) else {
            return Ok(1);
        };
        let line = match input {
            Input::Target { woken } => {
                if woken {
                    armed = false;
                }
                if let Some(code) = background(session) {
                    return Ok(code);
                }
                continue;
            }
            Input::Interrupted if session.running_in_background() => {
                // Ctrl-C at the prompt stops the running backend, as in gdb
                let r = session.interrupt();
                if let Some(code) = show(session.sink(), r) {
                    return Ok(code);
                }
                continue;
            }
            Input::Line(l) => l,
            Input::Pasted(l) if l.trim().is_empty() => continue,
            Input::Pasted(l) => l,
            Input::Interrupted => {
                let _ = sink.answer("Quit");
                continue;
            }
            Input::Eof => {
                let _ = sink.answer("quit");
                let msg = session.detach()?;
                let _ = sink.answer(&msg);
                return Ok(0);
            }
        };
        // An empty line repeats the last command, as in gdb (continue, bt...).
        let line = if line.trim().is_empty() {
            last_line.clone()
        } else {
            line
        };
        if line.trim().is_empty() {
            continue;
        }
        last_line = line.clone();
        let mut cmd = match command::parse(&line) {
            Ok(c) => c,
            Err(e) => {
                let _ = sink.answer(&format!("{e:#}"));
                continue;
            }
        };
        if let Command::Commands { id, .. } = &cmd {
            // gdb's way: the block's lines follow at a ">" prompt
            let which = match id {
                Some(n) => n.to_string(),
                None => match session.bps.list.last() {
                    Some(b) => b.id.to_string(),
                    None => {
                        let _ = sink.answer("No breakpoints specified.");
                        continue;
                    }
                },
            };
            let _ = sink.answer(&format!(
                "Type commands for breakpoint(s) {which}, one per line.\nEnd with a line saying just \"end\"."
            ));
            let mut block = vec![format!("commands {which}")];
            let mut aborted = false;
            loop {
                match lines.read(">") {
                    None => return Ok(1),
                    Some(Input::Target { woken }) => {
                        if woken {
                            armed = false;
                        }
                        if let Some(code) = background(session) {
                            return Ok(code);
                        }
                        if let Some(w) = &waiter
                            && session.running_in_background()
                            && !armed
                        {
                            armed = w.send(()).is_ok();
                        }
                    }
                    Some(Input::Line(l) | Input::Pasted(l)) => {
                        let done = command::strip_comment(&l).trim() == "end";
                        block.push(l);
                        if done {
                            break;
                        }
                    }
                    Some(_) => {
                        aborted = true;
                        break;
                    }
                }
            }
            if aborted {
                let _ = sink.answer("Quit (commands not changed)");
                continue;
            }
            match crate::script::assemble("commands", &block.join("\n")) {
                Ok(mut v) if v.len() == 1 => cmd = v.remove(0).2,
                Ok(_) => continue,
                Err(e) => {
                    let _ = sink.answer(&format!("{e:#}"));
                    continue;
                }
            }
        }
        term.apply();
        runtime::clear_interrupt();
        let res = session.execute_at_prompt(&cmd);
        match res {
            Ok(Outcome { text, flow }) => {
                if let Err(e) = sink.answer(&text) {
                    runtime::output_failed(format!("writing standard output failed: {e}"));
                    return Ok(1);
                }
                match flow {
                    Flow::Continue => {}
                    Flow::Quit => return Ok(0),
                    Flow::TargetGone => return Ok(0),
                    Flow::Terminate => return Ok(1),
                }
            }
            Err(e) => {
                let _ = sink.answer(&crate::runtime::one_line(&e));
            }
        }
    }
}

/// How the prompt ends after a flow (None: it goes on).
fn ends(flow: Flow) -> Option<i32> {
    match flow {
        Flow::Continue => None,
        Flow::Quit | Flow::TargetGone => Some(0),
        Flow::Terminate => Some(1),
    }
}

/// Show a stop that came while the prompt waited (or an error).
fn show(sink: &runtime::Sink, r: Result<Outcome>) -> Option<i32> {
    match r {
        Ok(Outcome { text, flow }) => {
            sink.flush();
            sink.above_prompt(&text);
            ends(flow)
        }
        Err(e) => {
            sink.above_prompt(&crate::runtime::one_line(&e));
            None
        }
    }
}

/// The backend may have stopped while the prompt waits: take its stop.
fn background(session: &mut Session) -> Option<i32> {
    match session.poll_background() {
        Ok(None) => None,
        r => show(session.sink(), r.map(|o| o.expect("matched above"))),
    }
}

#[cfg(test)]
mod tests {
    use super::split_paste;

    #[test]
    fn a_paste_splits_into_its_lines() {
        assert_eq!(
            split_paste("print 1\nprint 2\r\nprint 3\rbt\n"),
            ["print 1", "print 2", "print 3", "bt"]
        );
        assert_eq!(
            split_paste("print 1\n\nprint 2"),
            ["print 1", "", "print 2"]
        );
        assert_eq!(split_paste("one"), ["one"]);
    }

    /// Tab completes command names from the registry, and the second
    /// word of a command with subcommands from its subcommands.
    #[test]
    fn completion_reads_the_registry() {
        use super::PgdbgHelper;
        use rustyline::completion::Completer;
        let h = PgdbgHelper {
            symbols: Default::default(),
        };
        let hist = rustyline::history::DefaultHistory::new();
        let ctx = rustyline::Context::new(&hist);
        let complete = |line: &str| -> Vec<String> {
            let (_, v) = h.complete(line, line.len(), &ctx).unwrap();
            v.into_iter().map(|p| p.replacement).collect()
        };
        assert_eq!(complete("inf"), ["info "]);
        assert_eq!(complete("plan"), ["plan ", "plancache "]);
        assert_eq!(complete("info lo"), ["locals"]);
        assert_eq!(complete("i reg"), ["registers"]);
        assert_eq!(complete("waits t"), ["trace"]);
        assert!(complete("print lo").is_empty());
    }
}
