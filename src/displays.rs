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
    /// `display/i $pc`, `display/2xw &x`: shown as `x` shows memory, N
    /// units of this size letter (gdb's rule: format i or s, or a unit
    /// given); None: as `print` shows it.
    pub examine: Option<(usize, char)>,
    pub enabled: bool,
}

impl Display {
    /// How gdb names it in `info display`: `x`, `/x x`, `/1bi $pc`.
    pub fn label(&self) -> String {
        match (self.examine, self.format) {
            (Some((n, u)), Some(f)) => format!("/{n}{u}{f} {}", self.expr),
            (_, Some(f)) => format!("/{f} {}", self.expr),
            (_, None) => self.expr.clone(),
        }
    }

    /// A memory display's first words and what separates them from `x`'s
    /// lines, as gdb shows it at a stop: `x/i $pc` and a line break,
    /// `x/s DataDir` and two spaces; None for a `print`-like display.
    pub fn examine_head(&self) -> Option<(String, &'static str)> {
        let (n, u) = self.examine?;
        let f = self.format.unwrap_or('x');
        let count = if n == 1 { String::new() } else { n.to_string() };
        let unit = if f == 'i' || f == 's' {
            String::new()
        } else {
            u.to_string()
        };
        let sep = if n != 1 || f == 'i' { "\n" } else { "  " };
        Some((format!("x/{count}{f}{unit} {}", self.expr), sep))
    }
}

#[derive(Default, Debug)]
pub struct Displays {
    pub list: Vec<Display>,
    next_id: u32,
}

impl Displays {
    /// A new display; its number.
    pub fn add(&mut self, expr: &str, format: Option<char>, examine: Option<(usize, char)>) -> u32 {
        self.next_id += 1;
        self.list.push(Display {
            id: self.next_id,
            expr: expr.to_string(),
            format,
            examine,
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
        assert_eq!(d.add("x", None, None), 1);
        assert_eq!(d.add("x+10", Some('x'), None), 2);
        assert_eq!(
            d.info(),
            "Auto-display expressions now in effect:\nNum Enb Expression\n1:   y  x\n2:   y  /x x+10"
        );
        assert_eq!(d.remove(&[1, 7]), vec!["No display number 7.".to_string()]);
        assert_eq!(d.list.len(), 1);
        assert_eq!(d.add("y", None, None), 3);
        assert_eq!(d.add("$pc", Some('i'), Some((1, 'b'))), 4);
        assert_eq!(d.add("&v", Some('x'), Some((2, 'w'))), 5);
        let l = &d.list[2..];
        assert_eq!(l[0].label(), "/1bi $pc");
        assert_eq!(l[0].examine_head(), Some(("x/i $pc".into(), "\n")));
        assert_eq!(l[1].label(), "/2wx &v");
        assert_eq!(l[1].examine_head(), Some(("x/2xw &v".into(), "\n")));
        assert_eq!(d.list[1].examine_head(), None);
        assert!(d.remove(&[]).is_empty());
        assert!(d.list.is_empty());
    }
}
