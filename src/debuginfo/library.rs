//! Debug info of the shared objects mapped into a backend (`plpgsql.so`,
//! an extension, libc): the same `DebugInfo` as the main binary's, from
//! the library's own DWARF (embedded, build-id debug file,
//! `.gnu_debuglink`, debuginfod), its index cached per build-id; without
//! DWARF, its ELF symbols (`.symtab`, `.dynsym`) and CFI.  Also: which
//! library of the server's installation defines a function that no loaded
//! object has yet (a pending breakpoint).

use super::elf::{self, DebugSource, ElfImage};
use super::{DebugInfo, debuginfod};
use anyhow::Result;
use object::{Object, ObjectSection, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The server binary's path and the debuginfod mode of its attach, noted
/// by `DebugInfo::load`: libraries of the server's own installation may
/// be fetched from debuginfod like the binary; others (libc, libssl) only
/// from disk, so a backtrace through libc downloads nothing.
static SERVER: Mutex<Option<(PathBuf, debuginfod::Fetch)>> = Mutex::new(None);

pub(crate) fn note_server(real_path: &Path, fetch: debuginfod::Fetch) {
    *SERVER.lock().unwrap_or_else(|e| e.into_inner()) = Some((real_path.to_path_buf(), fetch));
}

fn server() -> Option<(PathBuf, debuginfod::Fetch)> {
    SERVER.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Directories that hold the server's loadable modules (`$libdir`):
/// `BIN/../lib/postgresql` (a source build) and `BIN/../lib` (Debian's
/// `/usr/lib/postgresql/N/lib`).
pub fn server_library_dirs() -> Vec<PathBuf> {
    let Some((exe, _)) = server() else {
        return Vec::new();
    };
    let Some(prefix) = exe.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    // paths as the server sees them; looked at inside its root
    [prefix.join("lib/postgresql"), prefix.join("lib")]
        .into_iter()
        .filter(|d| elf::target_path(d).is_dir())
        .collect()
}

/// The shared objects (`*.so`) of the server's installation.
pub fn installation_libraries() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = server_library_dirs()
        .iter()
        .flat_map(|d| so_files(d))
        .collect();
    out.sort();
    out
}

/// Library names for a message: "WHAT: a, b, c" when they are few
/// enough to read in one line, else `otherwise`.
pub fn some_names(names: &[String], what: &str, otherwise: &str) -> String {
    const FEW: usize = 16;
    if names.is_empty() || names.len() > FEW {
        return otherwise.to_string();
    }
    format!("{what}: {}", names.join(", "))
}

/// The `*.so` files of `dir` (a directory as the server sees it, read
/// inside its root), named as the server sees them, sorted.
fn so_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(elf::target_path(dir)) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| dir.join(e.file_name())))
        .filter(|p| p.extension().is_some_and(|x| x == "so"))
        .collect();
    v.sort();
    v
}

fn in_server_installation(path: &Path) -> bool {
    server_library_dirs()
        .iter()
        .any(|d| path.parent() == Some(d.as_path()))
}

impl DebugInfo {
    /// The debug info of the shared object mapped as `path` (its
    /// FileKey's path, as the target sees it), from `binary`, its image
    /// (read from the file verified against the mapping:
    /// `mappedfile::verified_mapped_file`).  Never fails for want of DWARF:
    /// then its ELF symbols and CFI are all there is.
    pub fn load_library(binary: ElfImage, path: &Path) -> Result<DebugInfo> {
        let build_id = binary.build_id().unwrap_or_default();
        let fetch = match server() {
            Some((_, f)) if in_server_installation(path) => f,
            Some((_, debuginfod::Fetch::Off)) | None => debuginfod::Fetch::Off,
            Some(_) => debuginfod::Fetch::CacheOnly,
        };
        let found = match elf::find_debug_file(&binary, path, None)? {
            Some(x) => Some(x),
            None => debuginfod::find(&build_id, path, fetch).map(|f| {
                let source = DebugSource::Debuginfod {
                    server: f.server,
                    path: f.path,
                };
                (Some(f.image), source)
            }),
        };
        match found {
            Some((debug_file, source)) => {
                Self::with_dwarf(binary, debug_file, source, build_id, fetch)
            }
            None => Self::symbols_only(
                binary,
                build_id,
                DebugSource::Pack("none: ELF symbols only (.dynsym, .symtab)".into()),
                None,
            ),
        }
    }

    /// This image has DWARF (locals, types, lines, inlined copies).
    pub fn has_dwarf(&self) -> bool {
        self.pack.is_none() && !matches!(self.source, DebugSource::Pack(_))
    }
}

/// The shared objects of the server's installation that define `name` (a
/// function symbol, or a name in their DWARF strings: a static function
/// gcc inlined everywhere has no symbol): where a breakpoint on a function
/// no loaded object has will be armed when the backend loads it.
pub fn libraries_defining(name: &str) -> Vec<PathBuf> {
    library_lookup(name).0
}

/// `libraries_defining`, and whether a library of the installation has no
/// DWARF on disk while debuginfod servers are set (its functions cannot be
/// known before pgdbg fetches its debug file).
pub fn library_lookup(name: &str) -> (Vec<PathBuf>, bool) {
    let ask_servers = !debuginfod::urls().is_empty();
    let mut unknown = false;
    let mut out = Vec::new();
    for dir in server_library_dirs() {
        for p in so_files(&dir) {
            match file_defines(&elf::target_path(&p), name) {
                Some(true) => out.push(p),
                Some(false) => {}
                None => unknown |= ask_servers,
            }
        }
    }
    (out, unknown)
}

/// `name` in `path`'s symbols or DWARF strings, or in its debug file by
/// build-id on disk (a stripped library with a -dbgsym package); None: no
/// DWARF on disk to tell.
fn file_defines(path: &Path, name: &str) -> Option<bool> {
    file_defines_in(path, name, true)
}

fn file_defines_in(path: &Path, name: &str, follow: bool) -> Option<bool> {
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: mapped read-only for the duration of this look.
    let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    let file = object::File::parse(&*map).ok()?;
    let is_it = |s: &str| s == name || super::is_clone_of(s, name);
    if file
        .symbols()
        .chain(file.dynamic_symbols())
        .any(|s| s.kind() == object::SymbolKind::Text && s.name().is_ok_and(is_it))
    {
        return Some(true);
    }
    let Some(sec) = file.section_by_name(".debug_str") else {
        let id = file.build_id().ok().flatten().map(hex)?;
        if !follow || id.len() <= 2 {
            return None;
        }
        return elf::debug_roots().iter().find_map(|r| {
            let p = r
                .join(".build-id")
                .join(&id[..2])
                .join(format!("{}.debug", &id[2..]));
            if p.exists() {
                file_defines_in(&p, name, false)
            } else {
                None
            }
        });
    };
    let data = sec.uncompressed_data().ok()?;
    let mut needle = Vec::with_capacity(name.len() + 2);
    needle.push(0);
    needle.extend_from_slice(name.as_bytes());
    needle.push(0);
    Some(data.windows(needle.len()).any(|w| w == needle.as_slice()))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `LIB:FUNCTION` (`plpgsql:exec_stmt_execsql`, `plpgsql.so:...`): the
/// library part and the function, or None for anything else (`FILE:LINE`
/// has a number after the colon).
pub fn split_library_spec(spec: &str) -> Option<(&str, &str)> {
    let (lib, f) = spec.trim().split_once(':')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
    };
    (ok(lib) && ok(f) && !f.chars().all(|c| c.is_ascii_digit()) && !lib.ends_with(".c"))
        .then_some((lib, f))
}

/// Does LIB (as written in `LIB:FUNCTION`) name the object at `path`?
/// `plpgsql`, `plpgsql.so` and the full path all name plpgsql.so;
/// `libc` names libc.so.6.
pub fn library_matches(lib: &str, path: &Path) -> bool {
    if Path::new(lib).is_absolute() {
        return path == Path::new(lib);
    }
    let Some(file) = path.file_name().map(|f| f.to_string_lossy().into_owned()) else {
        return false;
    };
    file == lib
        || file.strip_prefix(lib).is_some_and(|rest| {
            rest.starts_with(".so") || (lib.ends_with(".so") && rest.starts_with('.'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_specs() {
        assert_eq!(
            split_library_spec("plpgsql:exec_stmt_execsql"),
            Some(("plpgsql", "exec_stmt_execsql"))
        );
        assert_eq!(
            split_library_spec("plpgsql.so:exec_eval_expr"),
            Some(("plpgsql.so", "exec_eval_expr"))
        );
        assert_eq!(split_library_spec("pl_exec.c:123"), None);
        assert_eq!(split_library_spec("pl_exec.c:foo"), None);
        assert_eq!(split_library_spec("exec_eval_expr"), None);
        let p = Path::new("/usr/lib/postgresql/15/lib/plpgsql.so");
        assert!(library_matches("plpgsql", p));
        assert!(library_matches("plpgsql.so", p));
        assert!(library_matches("/usr/lib/postgresql/15/lib/plpgsql.so", p));
        assert!(!library_matches("plpg", p));
        assert!(library_matches(
            "libc",
            Path::new("/lib/x86_64-linux-gnu/libc.so.6")
        ));
        assert!(library_matches(
            "libc.so",
            Path::new("/lib/x86_64-linux-gnu/libc.so.6")
        ));
    }
}
