//! `execute`: one parsed command run against the session.
use super::*;

impl Session {
    /// Run one command; returns the text to show and whether the session
    /// should end.
    pub fn execute(&mut self, cmd: &Command) -> Result<Outcome> {
        self.settle_uprobes(cmd);
        let runs = self.target.run_count();
        let res = self.execute_command(cmd);
        let res = self.after_ran(res, runs);
        self.say_dropped_watches();
        self.say_outside_stops(res)
    }

    /// A command that ran the backend and left it stopped (a step,
    /// `finish`, `until`, a call) may have left the frame of a watched
    /// local without passing its return's int3 (the command's own int3
    /// was there first, or an ERROR's longjmp): that watchpoint is
    /// deleted and gdb's words for it follow the command's text (which
    /// said where the backend stopped).
    fn after_ran(&mut self, res: Result<Outcome>, runs: u64) -> Result<Outcome> {
        let ran = self.target.run_count() != runs;
        if !ran || self.background || self.target.is_gone() || self.bps.scoped_watches().is_empty()
        {
            return res;
        }
        let mut out = match res {
            Ok(out) => out,
            Err(e) => {
                // the command failed after running the backend: the
                // watchpoints whose frame it left end all the same
                if let Ok(Some(text)) = self.end_left_scopes(true) {
                    self.say(text.trim_matches('\n'));
                }
                return Err(e);
            }
        };
        if let Some(text) = self.end_left_scopes(true)? {
            if !out.text.is_empty() && !out.text.ends_with('\n') {
                out.text.push('\n');
            }
            out.text
                .push_str(text.strip_prefix('\n').unwrap_or(&text).trim_end());
        }
        Ok(out)
    }

    fn execute_command(&mut self, cmd: &Command) -> Result<Outcome> {
        Ok(match cmd {
            Command::Nothing => Outcome::nothing(),
            Command::Commands { id, body, text } => {
                let id = match id {
                    Some(i) => *i,
                    None => self.bps.list.last().map(|b| b.id).ok_or_else(|| {
                        anyhow!("No breakpoints specified: set one before 'commands'")
                    })?,
                };
                let b = self
                    .bps
                    .get_mut(id)
                    .ok_or_else(|| anyhow!("No breakpoint number {id}."))?;
                b.commands = body.clone();
                b.commands_text = text.clone();
                Outcome::nothing()
            }
            Command::End | Command::Silent => {
                bail!("'end' and 'silent' only make sense in a commands block")
            }
            Command::Continue => self.continue_running()?,
            Command::Run(i) => i.run(self)?,
        })
    }
}
