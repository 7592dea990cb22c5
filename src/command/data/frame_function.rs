//! `frame function NAME`: gdb's selection of the innermost frame of a
//! function, over the session's frames (`Host`).

use super::super::Host;
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};

/// The function's name: one word.
pub fn function_arg(rest: &str) -> Result<&str> {
    let mut words = rest.split_whitespace();
    match (words.next(), words.next()) {
        (Some(f), None) => Ok(f),
        (None, _) => {
            bail!("frame function needs a function name, e.g. frame function PostgresMain")
        }
        (Some(_), Some(_)) => bail!(
            "frame function takes one function name, not '{}'",
            crate::shown::shown(rest)
        ),
    }
}

/// Select the innermost frame (inlined ones counted, as `backtrace`
/// numbers them) whose function is NAME; its line as `frame N` shows it.
pub fn frame_function(h: &mut dyn Host, rest: &str) -> Result<Outcome> {
    let name = function_arg(rest)?;
    let level = h
        .frame_functions()?
        .iter()
        .position(|f| f == name)
        .ok_or_else(|| {
            anyhow!(
                "No frame for function \"{}\": 'backtrace' shows the functions on the stack",
                crate::shown::shown(name)
            )
        })?;
    Ok(Outcome::shows(h.select_frame(level)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_function_name() {
        assert_eq!(
            function_arg(" exec_simple_query ").unwrap(),
            "exec_simple_query"
        );
        let e = function_arg("").unwrap_err().to_string();
        assert!(e.starts_with("frame function needs a function name"), "{e}");
        let e = function_arg("a b").unwrap_err().to_string();
        assert_eq!(e, "frame function takes one function name, not 'a b'");
    }
}
