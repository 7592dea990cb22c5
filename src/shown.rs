//! User input quoted in a message: its control characters are shown
//! escaped, never written raw to the terminal (an ESC starts a sequence
//! that recolours or clears it, a carriage return hides what came before,
//! a bidirectional override reorders the line).  Every error that quotes
//! what the user typed (a command, a name, an expression, a value) goes
//! through [`shown`].

use std::borrow::Cow;

/// `s` with `\n`, `\r`, `\t` as those two characters, any other control
/// character as `\xHH` (ESC as `\x1b`), and the bidirectional controls as
/// `\u{202e}`; unchanged (and not copied) when it has none.
pub fn shown(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(shown("plain é"), "plain é");
        assert_eq!(shown("a\x1b[31mb"), "a\\x1b[31mb");
        assert_eq!(
            shown("x\ty\r\n\x07\x7f\u{85}"),
            "x\\ty\\r\\n\\x07\\x7f\\x85"
        );
        assert_eq!(shown("ab\u{202e}c"), "ab\\u{202e}c");
    }
}
