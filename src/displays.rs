//! `display EXPR`: expressions shown at each stop, numbered as gdb numbers
//! them.  Evaluating them is the session's job (at its stops); this is the
//! list.

/// One auto-display expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Display {
    pub id: u32,
    /// The expression as typed.
    pub expr: String,
    /// `display/x EXPR`: the format letter (None: natural).
    pub format: Option<char>,
    pub enabled: bool,
}

impl Display {
    /// How gdb names it in `N: ...` lines and `info display`: `x`, `/x x`.
    pub fn label(&self) -> String {
        match self.format {
            Some(f) => format!("/{f} {}", self.expr),
            None => self.expr.clone(),
        }
    }
}

#[derive(Default, Debug)]
pub struct Displays {
    pub list: Vec<Display>,
    next_id: u32,
}

impl Displays {
    /// A new display; its number.
    pub fn add(&mut self, expr: &str, format: Option<char>) -> u32 {
        self.next_id += 1;
        self.list.push(Display {
            id: self.next_id,
            expr: expr.to_string(),
            format,
            enabled: true,
        });
        self.next_id
    }

    /// Remove displays `ids` (none: all); gdb's line for each number that
    /// names none.
    pub fn remove(&mut self, ids: &[u32]) -> Vec<String> {
        if ids.is_empty() {
            self.list.clear();
            return Vec::new();
        }
        let mut missing = Vec::new();
        for id in ids {
            match self.list.iter().position(|d| d.id == *id) {
                Some(i) => {
                    self.list.remove(i);
                }
                None => missing.push(format!("No display number {id}.")),
            }
        }
        missing
    }

    /// `info display`, as gdb prints it.
    pub fn info(&self) -> String {
        if self.list.is_empty() {
            return "There are no auto-display expressions now.".into();
        }
        let mut s = String::from("Auto-display expressions now in effect:\nNum Enb Expression");
        for d in &self.list {
            let enb = if d.enabled { 'y' } else { 'n' };
            s.push_str(&format!("\n{}:   {enb}  {}", d.id, d.label()));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_listed_removed_as_gdb_does() {
        let mut d = Displays::default();
        assert_eq!(d.info(), "There are no auto-display expressions now.");
        assert_eq!(d.add("x", None), 1);
        assert_eq!(d.add("x+10", Some('x')), 2);
        assert_eq!(
            d.info(),
            "Auto-display expressions now in effect:\nNum Enb Expression\n1:   y  x\n2:   y  /x x+10"
        );
        assert_eq!(d.remove(&[1, 7]), vec!["No display number 7.".to_string()]);
        assert_eq!(d.list.len(), 1);
        assert_eq!(d.add("y", None), 3);
        assert!(d.remove(&[]).is_empty());
        assert!(d.list.is_empty());
    }
}
