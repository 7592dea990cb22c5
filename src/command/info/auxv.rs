//! `info auxv`: the auxiliary vector the kernel gave the backend at exec,
//! in gdb's table (type, name, description, value).

use crate::inferior::procfs;
use crate::postgres::Backend;
use crate::postgres::backend::Outcome;
use anyhow::{Result, anyhow, bail};

/// How a value is shown.
#[derive(Clone, Copy)]
enum Shown {
    Dec,
    Hex,
    /// An address of a string in the backend: the address, then the text.
    Str,
}

/// gdb's names and descriptions of the types a Linux x86-64 kernel gives
/// (include/uapi/linux/auxvec.h, arch/x86's AT_SYSINFO_EHDR and
/// AT_MINSIGSTKSZ); any other type is `???`, shown in hex.
const TYPES: &[(u64, &str, &str, Shown)] = &[
    (0, "AT_NULL", "End of vector", Shown::Hex),
    (1, "AT_IGNORE", "Entry should be ignored", Shown::Hex),
    (2, "AT_EXECFD", "File descriptor of program", Shown::Dec),
    (3, "AT_PHDR", "Program headers for program", Shown::Hex),
    (4, "AT_PHENT", "Size of program header entry", Shown::Dec),
    (5, "AT_PHNUM", "Number of program headers", Shown::Dec),
    (6, "AT_PAGESZ", "System page size", Shown::Dec),
    (7, "AT_BASE", "Base address of interpreter", Shown::Hex),
    (8, "AT_FLAGS", "Flags", Shown::Hex),
    (9, "AT_ENTRY", "Entry point of program", Shown::Hex),
    (10, "AT_NOTELF", "Program is not ELF", Shown::Dec),
    (11, "AT_UID", "Real user ID", Shown::Dec),
    (12, "AT_EUID", "Effective user ID", Shown::Dec),
    (13, "AT_GID", "Real group ID", Shown::Dec),
    (14, "AT_EGID", "Effective group ID", Shown::Dec),
    (15, "AT_PLATFORM", "String identifying platform", Shown::Str),
    (
        16,
        "AT_HWCAP",
        "Machine-dependent CPU capability hints",
        Shown::Hex,
    ),
    (17, "AT_CLKTCK", "Frequency of times()", Shown::Dec),
    (
        23,
        "AT_SECURE",
        "Boolean, was exec setuid-like?",
        Shown::Dec,
    ),
    (
        24,
        "AT_BASE_PLATFORM",
        "String identifying base platform",
        Shown::Str,
    ),
    (25, "AT_RANDOM", "Address of 16 random bytes", Shown::Hex),
    (26, "AT_HWCAP2", "Extension of AT_HWCAP", Shown::Hex),
    (
        27,
        "AT_RSEQ_FEATURE_SIZE",
        "rseq supported feature size",
        Shown::Dec,
    ),
    (28, "AT_RSEQ_ALIGN", "rseq allocation alignment", Shown::Dec),
    (29, "AT_HWCAP3", "Extension of AT_HWCAP", Shown::Hex),
    (30, "AT_HWCAP4", "Extension of AT_HWCAP", Shown::Hex),
    (31, "AT_EXECFN", "File name of executable", Shown::Str),
    (
        32,
        "AT_SYSINFO",
        "Special system info/entry points",
        Shown::Hex,
    ),
    (
        33,
        "AT_SYSINFO_EHDR",
        "System-supplied DSO's ELF header",
        Shown::Hex,
    ),
    (
        51,
        "AT_MINSIGSTKSZ",
        "Minimum stack size for signal delivery",
        Shown::Hex,
    ),
];

/// The longest string shown (gdb's default print limit).
const MAX_STRING: usize = 200;

/// `info auxv`: read from /proc/PID/auxv; the strings it points to are
/// read from the backend's memory (no stop needed).
pub fn info_auxv(b: &mut dyn Backend, rest: &str) -> Result<Outcome> {
    no_argument(rest)?;
    let pid = b.pid();
    let pairs = procfs::auxv(pid)
        .map_err(|e| anyhow!("cannot read /proc/{pid}/auxv: {e}; is the backend still there?"))?;
    let rows: Vec<String> = pairs.iter().map(|&(k, v)| row(&*b, k, v)).collect();
    Ok(Outcome::shows(rows.join("\n")))
}

/// `info auxv` takes no argument.
pub fn no_argument(rest: &str) -> Result<()> {
    if !rest.trim().is_empty() {
        bail!("info auxv takes no argument: type 'info auxv'");
    }
    Ok(())
}

/// One line of gdb's table: `33   AT_SYSINFO_EHDR      System-supplied DSO's ELF header 0x7ffd...`.
fn row(b: &dyn Backend, kind: u64, v: u64) -> String {
    let (name, desc, shown) = TYPES
        .iter()
        .find(|t| t.0 == kind)
        .map_or(("???", "", Shown::Hex), |t| (t.1, t.2, t.3));
    let value = match shown {
        Shown::Dec => v.to_string(),
        Shown::Hex => format!("{v:#x}"),
        Shown::Str => match b.read_cstr(v, MAX_STRING) {
            Ok(s) => format!("{v:#x} {}", quoted(&s)),
            Err(_) => format!("{v:#x} <error: Cannot access memory at address {v:#x}>"),
        },
    };
    format!("{kind:<4} {name:<20} {desc:<30} {value}")
}

/// A C string as gdb prints it: in double quotes, `"` and `\` escaped,
/// other bytes outside printable ASCII in octal, `...` when cut.
fn quoted(s: &[u8]) -> String {
    let mut out = String::from("\"");
    for &c in s {
        match c {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\{c:03o}")),
        }
    }
    out.push('"');
    if s.len() >= MAX_STRING {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_as_gdb_does() {
        assert_eq!(quoted(b"/usr/bin/postgres"), "\"/usr/bin/postgres\"");
        assert_eq!(quoted(b"a\"b\\c\n"), "\"a\\\"b\\\\c\\012\"");
    }

    #[test]
    fn every_type_is_named_once() {
        for (i, t) in TYPES.iter().enumerate() {
            assert!(TYPES[..i].iter().all(|u| u.0 != t.0), "{} twice", t.1);
            assert!(t.1.len() <= 20 && t.1.starts_with("AT_"), "{}", t.1);
        }
    }
}
