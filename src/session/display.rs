//! `display EXPR`: the expressions shown at each stop, as gdb shows them
//! ("1: expr = value").
use super::*;
use crate::displays::Display;

impl Session {
    /// EXPR in the selected frame as `print` shows it, not kept in the
    /// value history.
    pub fn value_text(&mut self, expr: &str, radix: Radix) -> Result<String> {
        let (expr, sql) = crate::postgres::datum::split_cast(expr)?;
        let v = self.eval_expr(expr)?;
        match sql {
            Some(ty) => self.datum_text(&v, ty),
            None => Ok(format_value(self, &v, radix)),
        }
    }

    /// One display's line: "N: EXPR = VALUE" (a memory display: "N: x/i
    /// $pc" and x's lines), or gdb's `<error: ...>` where it cannot be
    /// evaluated.
    pub(crate) fn display_line(&mut self, d: &Display) -> String {
        let radix = d
            .format
            .and_then(|f| Radix::from_letter(&f.to_string()))
            .unwrap_or(Radix::Natural);
        let shown = match (d.examine_head(), d.examine) {
            (Some((head, sep)), Some((n, u))) => self
                .examine(Some(n), d.format, Some(u), Some(&d.expr))
                .map(|t| format!("{head}{sep}{t}")),
            _ => self
                .value_text(&d.expr, radix)
                .map(|v| format!("{} = {v}", d.label())),
        };
        match shown {
            Ok(v) => format!("{}: {v}", d.id),
            Err(e) => format!(
                "{}: {} = <error: {}>",
                d.id,
                d.label(),
                crate::runtime::one_line(&e)
            ),
        }
    }

    /// The enabled displays at a stop, each on a line of its own after a
    /// line break ("" without any).
    pub(crate) fn display_lines(&mut self) -> String {
        let list: Vec<Display> = self
            .displays
            .list
            .iter()
            .filter(|d| d.enabled)
            .cloned()
            .collect();
        let mut s = String::new();
        for d in &list {
            s.push('\n');
            s.push_str(&self.display_line(d));
        }
        s
    }
}
