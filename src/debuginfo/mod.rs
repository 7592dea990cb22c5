//! Debug information of the target's binary: ELF, DWARF (types, locations,
//! lines, inlined frames), CFI unwinding.  Addresses here are link-time
//! addresses unless a name says `runtime`; the load bias converts.

mod code;
pub mod debuginfod;
mod dies;
mod dwarf_types;
pub mod elf;
pub mod index;
pub mod inlined;
pub mod layout;
pub mod library;
mod lines;
pub mod location;
pub mod pack;
mod plt;
mod scopes;
mod symbols;
mod typedecls;
pub mod types;
pub mod unwind;
pub mod wordstores;

use anyhow::{Result, anyhow, bail};
use elf::{DebugSource, ElfImage, ElfSymbol};
use gimli::{AttributeValue, constants as dw};
use index::{FuncLoc, Index, global_ref};
use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
pub use symbols::{is_clone_of, is_entry_clone_of, symbol_at};
pub use typedecls::{TypeDecl, TypeDeclKind};
use types::{Type, TypeRef, TypeSource};

pub type R = gimli::EndianSlice<'static, gimli::LittleEndian>;
pub type Dwarf = gimli::Dwarf<R>;

/// Variables of a scope at a pc, and the frame base of its subprogram.
pub type ScopeVars = (Vec<VarInfo>, Option<gimli::Expression<R>>);

/// Entries kept by the per-pc caches (`frames_at`, `scope_vars`): the pcs
/// of breakpoints and recent stacks; past this the cache starts over.
const PC_CACHE_MAX: usize = 4096;

fn bounded_insert<K: std::hash::Hash + Eq, V>(m: &mut HashMap<K, V>, k: K, v: V) {
    if m.len() >= PC_CACHE_MAX {
        m.clear();
    }
    m.insert(k, v);
}

/// How a variable's location is described.
#[derive(Clone, Debug)]
pub enum LocDesc {
    Expr(gimli::Expression<R>),
    List(gimli::LocationListsOffset),
    Const(Vec<u8>),
    None,
}

/// A parameter or local variable visible at a pc.
#[derive(Clone, Debug)]
pub struct VarInfo {
    pub name: String,
    pub ty: Option<TypeRef>,
    pub loc: LocDesc,
    pub is_param: bool,
    /// .debug_info offset of the unit (for evaluation).
    pub unit: u64,
}

/// One source-level frame at a pc: the innermost inlined function first.
#[derive(Clone, Debug)]
pub struct SourceFrame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// .debug_info offset of the subprogram / inlined_subroutine DIE.
    pub die: Option<u64>,
    pub inlined: bool,
}

/// One row of a line table (`DebugInfo::line_sequence`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineRow {
    pub addr: u64,
    /// The line table's file index (rows of inlined code name another file).
    pub file: u64,
    /// 0: no line.
    pub line: u32,
    pub is_stmt: bool,
}

/// The rows of one line-table sequence, in address order, and its end.
#[derive(Debug, Clone)]
pub struct LineSequence {
    pub rows: Vec<LineRow>,
    pub end: u64,
}

impl LineSequence {
    pub fn covers(&self, pc: u64) -> bool {
        self.rows.first().is_some_and(|r| r.addr <= pc) && pc < self.end
    }

    /// The line `pc` belongs to (the last row at or before it): gdb's
    /// `find_pc_line`; (file, line).
    pub fn line_of(&self, pc: u64) -> Option<(u64, u32)> {
        let i = self.rows.partition_point(|r| r.addr <= pc);
        let r = self.rows.get(i.checked_sub(1)?)?;
        Some((r.file, r.line))
    }

    /// A row (is_stmt or not) starts exactly at `pc`: gdb shows a stop
    /// there without its address.
    pub fn row_start(&self, pc: u64) -> bool {
        let lo = self.rows.partition_point(|r| r.addr < pc);
        self.rows.get(lo).is_some_and(|r| r.addr == pc)
    }

    /// When an is_stmt row starts exactly at `pc`: the (file, line) of the
    /// last such row there (several rows at one address: the last one,
    /// as gdb shows).
    pub fn stmt_start(&self, pc: u64) -> Option<(u64, u32)> {
        let lo = self.rows.partition_point(|r| r.addr < pc);
        self.rows[lo..]
            .iter()
            .take_while(|r| r.addr == pc)
            .filter(|r| r.is_stmt && r.line != 0)
            .last()
            .map(|r| (r.file, r.line))
    }
}

pub struct DebugInfo {
    pub binary: ElfImage,
    pub debug_file: Option<ElfImage>,
    pub source: DebugSource,
    pub build_id: String,
    pub dwarf: Arc<Dwarf>,
    pub index: Index,
    pub index_from_cache: bool,
    /// Said once at attach: a cache file that did not verify and was rebuilt.
    pub index_note: Option<String>,
    /// ELF symbols (function and data), sorted by address.
    pub symbols: Vec<ElfSymbol>,
    pub main_unwind: unwind::UnwindTables,
    units: RefCell<HashMap<u64, Rc<gimli::Unit<R>>>>,
    type_cache: RefCell<HashMap<u64, Rc<Type>>>,
    a2l: OnceCell<addr2line::Context<R>>,
    /// `frames_at` and `scope_vars` by pc: a breakpoint hit at a known pc
    /// (a condition evaluated at every hit) reads no DWARF.
    frames_cache: RefCell<HashMap<u64, Vec<SourceFrame>>>,
    scope_cache: RefCell<HashMap<(u64, u64), ScopeVars>>,
    /// Every enumerator by name (`RELOID`, `T_SeqScan`): its enum's DIE (or
    /// the typedef's naming an anonymous one) and value, read at first use.
    enumerators: OnceCell<HashMap<String, (u64, i64)>>,
    /// Stripped binary: struct layouts and global types from a layout pack.
    pub pack: Option<pack::Pack>,
}

/// Error text for a binary without DWARF.
pub fn no_debug_info_message(bin_path: &Path, build_id: &str) -> String {
    let pkg = owning_package(bin_path)
        .map(|p| format!("install {p}-dbgsym (or -dbg)"))
        .unwrap_or_else(|| "install the debug symbols package of this build".into());
    let (todo, servers) = if debuginfod::urls().is_empty() {
        (
            ", pass --debug-file FILE, or set DEBUGINFOD_URLS to a debuginfod server",
            "",
        )
    } else {
        (
            ", or pass --debug-file FILE",
            ", the servers of DEBUGINFOD_URLS",
        )
    };
    format!(
        "no debug info for {} (build-id {}): {pkg}{todo} (looked in the binary, /usr/lib/debug/.build-id/{}/{}.debug{servers} and the .gnu_debuglink target)",
        bin_path.display(),
        if build_id.is_empty() {
            "none"
        } else {
            build_id
        },
        build_id.get(..2).unwrap_or("??"),
        build_id.get(2..).unwrap_or("??")
    )
}

fn owning_package(p: &Path) -> Option<String> {
    let mut dpkg = std::process::Command::new("dpkg");
    // a container's packages are in its own dpkg database
    let root = elf::target_path(Path::new("/"));
    if root != Path::new("/") {
        dpkg.arg(format!("--root={}", root.display()));
    }
    let out = dpkg
        .arg("-S")
        .arg(p)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&out.stdout);
    s.lines()
        .next()?
        .split(':')
        .next()
        .map(|x| x.trim().to_string())
}

impl DebugInfo {
    /// Load debug info for the binary at `exe` (usually /proc/PID/exe).
    /// `real_path` is the binary's path as the system knows it (for
    /// .gnu_debuglink lookups and messages).
    /// Without DWARF, `packs` names the layout pack to use (`pack_file`:
    /// `--symbols FILE`, which also skips the DWARF search).  When nothing
    /// on disk has DWARF, `fetch` says whether the debuginfod servers of
    /// `DEBUGINFOD_URLS` are asked (never with `explicit` or `pack_file`).
    pub fn load(
        exe: &Path,
        real_path: &Path,
        explicit: Option<&Path>,
        pack_file: Option<&Path>,
        packs: &dyn pack::PackSource,
        fetch: debuginfod::Fetch,
    ) -> Result<DebugInfo> {
        library::note_server(real_path, fetch);
        let binary = ElfImage::open(exe)?;
        let build_id = binary.build_id().unwrap_or_default();
        let found = if pack_file.is_some() {
            None
        } else {
            match elf::find_debug_file(&binary, real_path, explicit)? {
                Some(x) => Some(x),
                None if explicit.is_none() => {
                    debuginfod::find(&build_id, real_path, fetch).map(|f| {
                        let source = DebugSource::Debuginfod {
                            server: f.server,
                            path: f.path,
                        };
                        (Some(f.image), source)
                    })
                }
                None => None,
            }
        };
        let (debug_file, source) = match found {
            Some(x) => x,
            None => return Self::load_with_pack(binary, real_path, build_id, pack_file, packs),
        };
        Self::with_dwarf(binary, debug_file, source, build_id, fetch)
    }

    /// The debug info of `binary` whose DWARF is in `debug_file` (None: in
    /// the binary itself); its index from the cache of `build_id` or built.
    pub(crate) fn with_dwarf(
        binary: ElfImage,
        debug_file: Option<ElfImage>,
        source: DebugSource,
        build_id: String,
        fetch: debuginfod::Fetch,
    ) -> Result<DebugInfo> {
        let dimg: &ElfImage = debug_file.as_ref().unwrap_or(&binary);
        let mut dwarf: Dwarf = gimli::Dwarf::load(|id| -> Result<R> {
            Ok(gimli::EndianSlice::new(
                dimg.section(id.name()),
                gimli::LittleEndian,
            ))
        })?;
        // the supplementary file read: its build-id and .debug_info size
        let mut sup_loaded: Option<String> = None;
        if let Some((alt, alt_id)) = dimg.debugaltlink() {
            // dwz supplementary file: an absolute path in the target's root
            // first (a container's), then pgdbg's, as the debug roots are
            // searched; a relative one beside the debug file
            let cands: Vec<std::path::PathBuf> = if Path::new(&alt).is_absolute() {
                let inside = elf::target_path(Path::new(&alt));
                let host = std::path::PathBuf::from(&alt);
                if inside == host {
                    vec![host]
                } else {
                    vec![inside, host]
                }
            } else {
                vec![dimg.path.parent().unwrap_or(Path::new("/")).join(&alt)]
            };
            // not on disk: the supplementary file by its build-id, from
            // debuginfod like the debug file (dwz-compressed packages)
            let sup = cands
                .iter()
                .find_map(|p| {
                    ElfImage::open(p)
                        .ok()
                        .filter(|s| s.build_id().is_none_or(|b| b == alt_id))
                })
                .or_else(|| {
                    debuginfod::find(&alt_id, &cands[cands.len() - 1], fetch).map(|f| f.image)
                });
            sup_loaded = sup
                .as_ref()
                .map(|s| format!("{alt_id}-{:x}", s.section(".debug_info").len()));
            if sup.is_none() {
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: the DWARF of {} refers to a dwz supplementary file, {alt}, found \
                     nowhere (not in the process's root, not on this machine, not from \
                     debuginfod): what it holds (shared types, inlined functions' parameters) \
                     is missing",
                    dimg.path.display()
                ));
            }
            if let Some(sup) = sup {
                let sup: &'static ElfImage = Box::leak(Box::new(sup));
                dwarf.load_sup(|id| -> Result<R> {
                    Ok(gimli::EndianSlice::new(
                        sup.section(id.name()),
                        gimli::LittleEndian,
                    ))
                })?;
            }
        }
        let symbols = binary.symbols();
        let main_unwind = unwind::UnwindTables::from_image(&binary);
        let key = index_key(&build_id, dimg, sup_loaded.as_deref());
        let (index, from_cache, index_note) = match Index::load_cached(&key) {
            Ok(i) => (i, true, None),
            Err(miss) => {
                let syms = &symbols;
                let entry_of = |starts: &[u64]| -> u64 {
                    // Prefer a range start that an ELF symbol names, not a .cold part.
                    for s in starts {
                        if let Ok(i) = syms.binary_search_by(|x| x.addr.cmp(s))
                            && !syms[i].name.contains(".cold")
                        {
                            return *s;
                        }
                    }
                    starts[0]
                };
                let idx = Index::build(&dwarf, &key, &entry_of)?;
                idx.store_cached();
                (idx, false, miss.note())
            }
        };
        Ok(DebugInfo {
            binary,
            debug_file,
            source,
            build_id,
            dwarf: Arc::new(dwarf),
            index,
            index_from_cache: from_cache,
            index_note,
            symbols,
            main_unwind,
            units: RefCell::new(HashMap::new()),
            type_cache: RefCell::new(HashMap::new()),
            a2l: OnceCell::new(),
            frames_cache: RefCell::new(HashMap::new()),
            scope_cache: RefCell::new(HashMap::new()),
            enumerators: OnceCell::new(),
            pack: None,
        })
    }

    /// No DWARF anywhere: ELF symbols (.dynsym) plus the layout pack of the
    /// binary's major (or `--symbols FILE`).
    fn load_with_pack(
        binary: ElfImage,
        real_path: &Path,
        build_id: String,
        pack_file: Option<&Path>,
        packs: &dyn pack::PackSource,
    ) -> Result<DebugInfo> {
        let pack = packs.pack_for(&binary, real_path, &build_id, pack_file)?;
        let source = DebugSource::Pack(format!(
            "none: exported symbols + layout pack for PostgreSQL {} (from {})",
            pack.major,
            pack.version.split(" on ").next().unwrap_or(&pack.version)
        ));
        Self::symbols_only(binary, build_id, source, Some(pack))
    }

    /// No DWARF: ELF symbols and CFI only (and a layout pack, if any).
    pub(crate) fn symbols_only(
        binary: ElfImage,
        build_id: String,
        source: DebugSource,
        pack: Option<pack::Pack>,
    ) -> Result<DebugInfo> {
        let symbols = binary.symbols();
        let main_unwind = unwind::UnwindTables::from_image(&binary);
        let dwarf: Dwarf = gimli::Dwarf::load(|_| -> Result<R> {
            Ok(gimli::EndianSlice::new(&[], gimli::LittleEndian))
        })?;
        Ok(DebugInfo {
            binary,
            debug_file: None,
            source,
            build_id,
            dwarf: Arc::new(dwarf),
            index: Index::default(),
            index_from_cache: false,
            index_note: None,
            symbols,
            main_unwind,
            units: RefCell::new(HashMap::new()),
            type_cache: RefCell::new(HashMap::new()),
            a2l: OnceCell::new(),
            frames_cache: RefCell::new(HashMap::new()),
            scope_cache: RefCell::new(HashMap::new()),
            enumerators: OnceCell::new(),
            pack,
        })
    }

    /// An enumerator named in an expression, as gdb takes one
    /// (`p SysCache[RELOID]`, `p node->type == T_SeqScan`): its type and
    /// value. Where two enums of the binary have one name, the first
    /// definition in .debug_info wins.
    pub fn enumerator(&self, name: &str) -> Option<(TypeRef, i64)> {
        let all = self.enumerators.get_or_init(|| {
            let mut types: Vec<(&String, u64)> =
                self.index.types.iter().map(|(n, o)| (n, *o)).collect();
            types.sort_by_key(|(_, o)| *o);
            let mut all = HashMap::new();
            for (tname, off) in types {
                let ty = self.resolve(&TypeRef::Die(off));
                let values = match &*ty {
                    Type::Enum { values, .. } if tname.starts_with("enum ") => values.clone(),
                    Type::Typedef {
                        target: Some(t @ TypeRef::Die(_)),
                        ..
                    } => match &*self.resolve(t) {
                        Type::Enum {
                            name: None, values, ..
                        } => values.clone(),
                        _ => continue,
                    },
                    _ => continue,
                };
                for (n, v) in values {
                    all.entry(n).or_insert((off, v));
                }
            }
            all
        });
        all.get(name).map(|&(off, v)| (TypeRef::Die(off), v))
    }

    /// Options of a GUC enum (plan_cache_mode...) recorded in the pack.
    pub fn pack_guc_enum(&self, guc: &str) -> Option<Vec<(String, i64)>> {
        self.pack.as_ref()?.guc_enums.get(guc).cloned()
    }
}

/// The key of a DWARF index in the cache: the build-id, and the sizes of
/// the DWARF read (dwz and other rewriters change the debug sections and
/// keep the build-id: an index of another layout would name wrong DIEs),
/// and the dwz supplementary file loaded with it, if any (its build-id
/// and .debug_info size: the index holds its DIEs' offsets too).  Empty
/// (not cached) without a build-id.
fn index_key(build_id: &str, dimg: &ElfImage, sup: Option<&str>) -> String {
    if build_id.is_empty() {
        return String::new();
    }
    format!(
        "{build_id}-{:x}-{:x}-{}",
        dimg.section(".debug_info").len(),
        dimg.section(".debug_abbrev").len(),
        sup.unwrap_or("0")
    )
}
