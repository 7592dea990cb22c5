//! ELF images: the mapped file, its build-id, debug links, symbols and the
//! sections the rest of debuginfo reads.  Images are mapped once and leaked,
//! so every slice handed out is `'static` (a debugger session maps a handful
//! of files and keeps them until it exits).  Never open the same file twice:
//! the shared objects of the target go through `unwind::Module`'s
//! per-file cache.

use anyhow::{Context, Result, anyhow};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use std::path::{Path, PathBuf};

pub struct ElfImage {
    pub path: PathBuf,
    pub data: &'static [u8],
    pub file: object::File<'static, &'static [u8]>,
}

/// A function or object symbol from .symtab/.dynsym.
#[derive(Debug, Clone)]
pub struct ElfSymbol {
    pub name: String,
    pub addr: u64,
    pub size: u64,
    pub is_func: bool,
}

impl ElfImage {
    pub fn open(path: &Path) -> Result<ElfImage> {
        let f =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Self::open_file(&f, path)
    }

    /// The image of a file already open (a file checked to be the one a
    /// process maps: `mappedfile::VerifiedFile`), known as `path`.
    pub fn open_file(f: &std::fs::File, path: &Path) -> Result<ElfImage> {
        // SAFETY: the file is mapped read-only; a concurrent truncation of a
        // binary in use is not something we defend against.
        let map = unsafe { memmap2::Mmap::map(f) }
            .with_context(|| format!("cannot map {}", path.display()))?;
        let data: &'static [u8] = Box::leak(Box::new(map));
        let file = object::File::parse(data)
            .map_err(|e| anyhow!("{} is not an ELF file ({e})", path.display()))?;
        Ok(ElfImage {
            path: path.to_path_buf(),
            data,
            file,
        })
    }

    pub fn build_id(&self) -> Option<String> {
        self.file.build_id().ok().flatten().map(hex)
    }

    pub fn debuglink(&self) -> Option<(String, u32)> {
        self.file
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(n, crc)| (String::from_utf8_lossy(n).into_owned(), crc))
    }

    pub fn debugaltlink(&self) -> Option<(String, String)> {
        self.file
            .gnu_debugaltlink()
            .ok()
            .flatten()
            .map(|(n, id)| (String::from_utf8_lossy(n).into_owned(), hex(id)))
    }

    pub fn entry(&self) -> u64 {
        self.file.entry()
    }

    pub fn has_dwarf(&self) -> bool {
        self.file
            .section_by_name(".debug_info")
            .map(|s| s.size() > 0)
            .unwrap_or(false)
    }

    /// Section contents, decompressed when needed (leaked when owned).
    pub fn section(&self, name: &str) -> &'static [u8] {
        match self.file.section_by_name(name) {
            Some(s) => match s.uncompressed_data() {
                Ok(std::borrow::Cow::Borrowed(b)) => b,
                Ok(std::borrow::Cow::Owned(v)) => Box::leak(v.into_boxed_slice()),
                Err(_) => &[],
            },
            None => &[],
        }
    }

    pub fn section_addr(&self, name: &str) -> Option<u64> {
        self.file.section_by_name(name).map(|s| s.address())
    }

    /// The file's bytes at link-time address `addr` (code as built, before
    /// any breakpoint or patch in a running process).
    pub fn bytes_at(&self, addr: u64, len: u64) -> Option<&'static [u8]> {
        self.file.sections().find_map(|s| {
            if addr < s.address() || addr + len > s.address() + s.size() {
                return None;
            }
            s.data_range(addr, len).ok().flatten()
        })
    }

    /// The allocated sections (name, address, size), for `info symbol`.
    pub fn sections(&self) -> Vec<(String, u64, u64)> {
        self.file
            .sections()
            .filter(|s| s.address() != 0 && s.size() > 0)
            .filter_map(|s| Some((s.name().ok()?.to_string(), s.address(), s.size())))
            .collect()
    }

    /// Lowest virtual address of a PT_LOAD segment (0 for PIE/shared objects).
    pub fn first_load_vaddr(&self) -> u64 {
        self.file.segments().map(|s| s.address()).min().unwrap_or(0)
    }

    /// Function and object symbols, .symtab first then .dynsym, sorted by
    /// address, duplicates dropped.
    pub fn symbols(&self) -> Vec<ElfSymbol> {
        let mut out = Vec::new();
        for sym in self.file.symbols().chain(self.file.dynamic_symbols()) {
            let is_func = sym.kind() == SymbolKind::Text;
            if !(is_func || sym.kind() == SymbolKind::Data)
                || sym.address() == 0
                || !sym.is_definition()
            {
                continue;
            }
            if let Ok(name) = sym.name() {
                if name.is_empty() {
                    continue;
                }
                out.push(ElfSymbol {
                    name: name.to_string(),
                    addr: sym.address(),
                    size: sym.size(),
                    is_func,
                });
            }
        }
        out.sort_by(|a, b| a.addr.cmp(&b.addr).then(a.name.cmp(&b.name)));
        out.dedup_by(|a, b| a.addr == b.addr && a.name == b.name);
        out
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Where the DWARF came from, for `info` and error messages.
#[derive(Debug, Clone)]
pub enum DebugSource {
    Embedded,
    BuildId(PathBuf),
    Debuglink(PathBuf),
    Explicit(PathBuf),
    /// From a debuginfod server (`server`: downloaded now from it; None:
    /// found in the debuginfod cache), kept at `path` in the cache.
    Debuginfod {
        server: Option<String>,
        path: PathBuf,
    },
    /// No DWARF: a layout pack (description).
    Pack(String),
}

impl std::fmt::Display for DebugSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DebugSource::Embedded => write!(f, "embedded in the binary"),
            DebugSource::BuildId(p) => write!(f, "{} (by build-id)", p.display()),
            DebugSource::Debuglink(p) => write!(f, "{} (by .gnu_debuglink)", p.display()),
            DebugSource::Explicit(p) => write!(f, "{} (--debug-file)", p.display()),
            DebugSource::Debuginfod {
                server: Some(s),
                path,
            } => write!(f, "debuginfod {s} (cached in {})", path.display()),
            DebugSource::Debuginfod { server: None, path } => {
                write!(f, "{} (debuginfod cache)", path.display())
            }
            DebugSource::Pack(d) => write!(f, "{d}"),
        }
    }
}

/// Find the file holding DWARF for `bin`: the binary itself, `explicit`, a
/// file under /usr/lib/debug/.build-id, or the .gnu_debuglink target.  A
/// separate file must carry the same build-id.
pub fn find_debug_file(
    bin: &ElfImage,
    bin_path_for_links: &Path,
    explicit: Option<&Path>,
) -> Result<Option<(Option<ElfImage>, DebugSource)>> {
    let want = bin.build_id();
    if let Some(p) = explicit {
        let img = ElfImage::open(p)?;
        if !img.has_dwarf() {
            return Err(anyhow!(
                "--debug-file {} has no DWARF (.debug_info)",
                p.display()
            ));
        }
        if let (Some(w), Some(got)) = (&want, img.build_id())
            && *w != got
        {
            return Err(anyhow!(
                "--debug-file {} is for build-id {got}, but the target binary has build-id {w}: give the debug file of this exact build",
                p.display()
            ));
        }
        return Ok(Some((Some(img), DebugSource::Explicit(p.to_path_buf()))));
    }
    if bin.has_dwarf() {
        return Ok(Some((None, DebugSource::Embedded)));
    }
    let roots = debug_roots();
    if let Some(id) = &want
        && id.len() > 2
    {
        for root in &roots {
            let p = root
                .join(".build-id")
                .join(&id[..2])
                .join(format!("{}.debug", &id[2..]));
            if p.exists()
                && let Ok(img) = ElfImage::open(&p)
                && img.has_dwarf()
                && img.build_id().as_deref() == Some(id.as_str())
            {
                return Ok(Some((Some(img), DebugSource::BuildId(p))));
            }
        }
    }
    if let Some((name, _crc)) = bin.debuglink() {
        let dir = bin_path_for_links.parent().unwrap_or(Path::new("/"));
        // next to the binary as the target sees it (inside its root)
        let mut cands = vec![
            target_path(&dir.join(&name)),
            target_path(&dir.join(".debug").join(&name)),
        ];
        for root in &roots {
            let rel = dir.strip_prefix("/").unwrap_or(dir);
            cands.push(root.join(rel).join(&name));
        }
        for p in cands {
            if p.exists()
                && p != bin_path_for_links
                && let Ok(img) = ElfImage::open(&p)
            {
                let same = match (&want, img.build_id()) {
                    (Some(w), Some(g)) => *w == g,
                    _ => true,
                };
                if img.has_dwarf() && same {
                    return Ok(Some((Some(img), DebugSource::Debuglink(p))));
                }
            }
        }
    }
    Ok(None)
}

/// The target's root directory when it is not pgdbg's (a container's:
/// `/proc/PID/root`), set once at attach: every file pgdbg opens on the
/// target's behalf by a path the target names is looked up there.
/// With the target's PID (to verify a mapped file against its mapping).
static TARGET: std::sync::Mutex<Option<(i32, Option<PathBuf>)>> = std::sync::Mutex::new(None);

/// Note the target process: its files are looked up in its root.
pub fn set_target(pid: i32) {
    let root = crate::inferior::procfs::root_differs(pid)
        .then(|| PathBuf::from(format!("/proc/{pid}/root")));
    *TARGET.lock().unwrap_or_else(|e| e.into_inner()) = Some((pid, root));
}

fn target() -> Option<(i32, Option<PathBuf>)> {
    TARGET.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn target_root() -> Option<PathBuf> {
    target().and_then(|(_, r)| r)
}

/// The file mapped into the target as `path` (device `dev`, inode
/// `inode`), opened and checked (`mappedfile::verified_mapped_file`);
/// None when it cannot be verified, said once per file: another file of
/// the same name (a container's path on the host) is never read.
pub fn verified_mapped(
    path: &Path,
    dev: &str,
    inode: u64,
) -> Option<crate::inferior::mappedfile::VerifiedFile> {
    let Some((pid, _)) = target() else {
        // no process named yet (a library user): the file as named
        return crate::inferior::mappedfile::VerifiedFile::open_unchecked(path);
    };
    match crate::inferior::mappedfile::verified_mapped_file(pid, path, dev, inode) {
        Ok(v) => Some(v),
        Err(why) => {
            static SAID: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
            let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
            if !said.iter().any(|p| p == path) {
                said.push(path.to_path_buf());
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: not reading {} (mapped by process {pid}): {why}; its functions are unnamed",
                    path.display()
                ));
            }
            None
        }
    }
}

/// The image of the file mapped into the target as `path`, read from
/// the verified open file (None: not verified, or not ELF).
pub fn verified_mapped_image(path: &Path, dev: &str, inode: u64) -> Option<ElfImage> {
    let v = verified_mapped(path, dev, inode)?;
    ElfImage::open_file(v.file(), v.origin()).ok()
}

/// `p`, a path as the target sees it, as pgdbg reaches it (inside the
/// target's root).
pub fn target_path(p: &Path) -> PathBuf {
    match target_root() {
        Some(r) => r.join(p.strip_prefix("/").unwrap_or(p)),
        None => p.to_path_buf(),
    }
}

/// The directories of separate debug files: the target's own first (a
/// container's `/usr/lib/debug`), then the host's.
pub(crate) fn debug_roots() -> Vec<PathBuf> {
    let host = match crate::config::get().debug_root.clone() {
        Some(r) => r,
        None => PathBuf::from("/usr/lib/debug"),
    };
    match target_root() {
        Some(_) => vec![target_path(Path::new("/usr/lib/debug")), host],
        None => vec![host],
    }
}
