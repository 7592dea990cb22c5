//! `execute`: one parsed command run against the session.
use super::*;

impl Session {
    /// Run one command; returns the text to show and whether the session
    /// should end.
    pub fn execute(&mut self, cmd: &Command) -> Result<Outcome> {
        self.settle_uprobes(cmd);
        let res = self.execute_command(cmd);
        self.say_dropped_watches();
        self.say_outside_stops(res)
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
