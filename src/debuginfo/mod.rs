//! Debug information of the target's binary: ELF, DWARF (types, locations,
//! lines, inlined frames), CFI unwinding.  Addresses here are link-time
//! addresses unless a name says `runtime`; the load bias converts.

mod code;
pub mod debuginfod;
mod dwarf_types;
pub mod elf;
pub mod index;
pub mod inlined;
pub mod layout;
pub mod library;
pub mod location;
pub mod pack;
mod plt;
mod scopes;
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
        if let Some((alt, alt_id)) = dimg.debugaltlink() {
            // dwz supplementary file
            let altp = if Path::new(&alt).is_absolute() {
                std::path::PathBuf::from(&alt)
            } else {
                dimg.path.parent().unwrap_or(Path::new("/")).join(&alt)
            };
            // not on disk: the supplementary file by its build-id, from
            // debuginfod like the debug file (dwz-compressed packages)
            let sup = ElfImage::open(&altp)
                .ok()
                .filter(|s| s.build_id().is_none_or(|b| b == alt_id))
                .or_else(|| debuginfod::find(&alt_id, &altp, fetch).map(|f| f.image));
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
        let (index, from_cache, index_note) = match Index::load_cached(&build_id) {
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
                let idx = Index::build(&dwarf, &build_id, &entry_of)?;
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
            pack,
        })
    }

    /// Options of a GUC enum (plan_cache_mode...) recorded in the pack.
    pub fn pack_guc_enum(&self, guc: &str) -> Option<Vec<(String, i64)>> {
        self.pack.as_ref()?.guc_enums.get(guc).cloned()
    }

    // ------------------------------------------------------------ symbols

    /// All code locations of a function (link-time): DWARF out-of-line
    /// copies and inlined instances, or ELF symbols (`name`, `name.isra.0`,
    /// ...) when DWARF does not know it.
    pub fn function_locations(&self, name: &str) -> Vec<FuncLoc> {
        if let Some(v) = self.index.functions.get(name) {
            return v.clone();
        }
        let mut out = Vec::new();
        for s in &self.symbols {
            if s.is_func && (s.name == name || is_entry_clone_of(&s.name, name)) {
                out.push(FuncLoc {
                    addr: s.addr,
                    inlined: false,
                    die: 0,
                });
            }
        }
        out
    }

    /// The ELF symbol covering `addr` (link-time), with the offset into it.
    pub fn symbol_at(&self, addr: u64) -> Option<(&ElfSymbol, u64)> {
        symbol_at(&self.symbols, addr)
    }

    /// The function code containing link-time `addr`: (name, start, end)
    /// of the ELF function symbol covering it (a `.cold` part has its own),
    /// else of the DWARF range of the subprogram around it.
    pub fn code_range_at(&self, addr: u64) -> Option<(String, u64, u64)> {
        let i = match self.symbols.binary_search_by(|s| s.addr.cmp(&addr)) {
            Ok(i) => {
                // the last of the symbols at exactly addr
                let mut i = i;
                while i + 1 < self.symbols.len() && self.symbols[i + 1].addr == addr {
                    i += 1;
                }
                Some(i)
            }
            Err(0) => None,
            Err(i) => Some(i - 1),
        };
        if let Some(i) = i {
            // functions do not overlap: the nearest sized function symbol
            // at or below addr covers it, or none does
            for s in self.symbols[..=i].iter().rev() {
                if !s.is_func || s.size == 0 {
                    continue;
                }
                if addr < s.addr + s.size {
                    return Some((s.name.clone(), s.addr, s.addr + s.size));
                }
                break;
            }
        }
        let outer = self.frames_at(addr).pop()?;
        let (start, end) = self
            .with_die(outer.die?, |u, e| {
                let mut r = self.dwarf.die_ranges(u, e).ok()?;
                while let Ok(Some(range)) = r.next() {
                    if addr >= range.begin && addr < range.end {
                        return Some((range.begin, range.end));
                    }
                }
                None
            })
            .ok()??;
        Some((outer.function?, start, end))
    }

    /// A data symbol covering link-time `addr` (`saved_plan_list`, `ActivePortal+8`).
    pub fn data_symbol_at(&self, addr: u64) -> Option<String> {
        let i = match self.symbols.binary_search_by(|s| s.addr.cmp(&addr)) {
            Ok(i) => i,
            Err(0) => return None,
            Err(i) => i - 1,
        };
        let s = &self.symbols[i];
        if s.is_func || addr >= s.addr + s.size.max(1) {
            return None;
        }
        let off = addr - s.addr;
        Some(if off == 0 {
            s.name.clone()
        } else {
            format!("{}+{off}", s.name)
        })
    }

    pub fn function_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.index.functions.keys().cloned().collect();
        v.extend(self.index.globals.keys().cloned());
        v.sort();
        v.dedup();
        v
    }

    // ---------------------------------------------------------------- DIEs

    pub fn unit_for_offset(&self, off: u64) -> Result<Rc<gimli::Unit<R>>> {
        let i = match self.index.units.binary_search(&off) {
            Ok(i) => i,
            Err(0) => bail!("DIE offset {off:#x} before the first unit"),
            Err(i) => i - 1,
        };
        let uoff = self.index.units[i];
        if let Some(u) = self.units.borrow().get(&uoff) {
            return Ok(u.clone());
        }
        let header = self
            .dwarf
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset(uoff as usize))
            .map_err(|e| anyhow!("{e}"))?;
        let unit = Rc::new(self.dwarf.unit(header).map_err(|e| anyhow!("{e}"))?);
        self.units.borrow_mut().insert(uoff, unit.clone());
        Ok(unit)
    }

    /// Run `f` on the DIE at a .debug_info offset.
    pub fn with_die<T>(
        &self,
        off: u64,
        f: impl FnOnce(&gimli::Unit<R>, &gimli::DebuggingInformationEntry<R>) -> T,
    ) -> Result<T> {
        let unit = self.unit_for_offset(off)?;
        let uo = gimli::DebugInfoOffset(off as usize)
            .to_unit_offset(&unit.header)
            .ok_or_else(|| anyhow!("bad DIE offset {off:#x}"))?;
        let die = unit.entry(uo).map_err(|e| anyhow!("{e}"))?;
        Ok(f(&unit, &die))
    }

    fn attr_str(&self, unit: &gimli::Unit<R>, v: AttributeValue<R>) -> Option<String> {
        self.dwarf
            .attr_string(unit, v)
            .ok()
            .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
    }

    /// Name of a DIE, following abstract_origin/specification.
    pub fn die_name(&self, off: u64) -> Option<String> {
        self.follow_origin(off, |u, e| {
            e.attr_value(dw::DW_AT_name)
                .and_then(|v| self.attr_str(u, v))
        })
    }

    /// Type of a variable/parameter/member DIE, following abstract_origin.
    pub fn die_type(&self, off: u64) -> Option<TypeRef> {
        self.follow_origin(off, |u, e| {
            e.attr_value(dw::DW_AT_type)
                .and_then(|v| global_ref(u, v))
                .map(TypeRef::Die)
        })
    }

    /// The first answer of `get` on the DIE at `off` or on the DIEs its
    /// DW_AT_abstract_origin / DW_AT_specification chain leads to.
    fn follow_origin<T>(
        &self,
        off: u64,
        get: impl Fn(&gimli::Unit<R>, &gimli::DebuggingInformationEntry<R>) -> Option<T>,
    ) -> Option<T> {
        let mut cur = off;
        for _ in 0..4 {
            let (found, next) = self
                .with_die(cur, |u, e| {
                    let next = e
                        .attr_value(dw::DW_AT_abstract_origin)
                        .or_else(|| e.attr_value(dw::DW_AT_specification))
                        .and_then(|v| global_ref(u, v));
                    (get(u, e), next)
                })
                .ok()?;
            if found.is_some() {
                return found;
            }
            cur = next?;
        }
        None
    }

    /// A global variable: runtime-independent (link-time address, type).
    pub fn global(&self, name: &str) -> Option<(u64, Option<TypeRef>)> {
        if let Some(g) = self.index.globals.get(name) {
            return Some((g.addr, self.die_type(g.die)));
        }
        if let Some(p) = &self.pack {
            let addr = self
                .symbols
                .iter()
                .find(|s| !s.is_func && s.name == name)?
                .addr;
            return Some((addr, p.type_of_global(name)));
        }
        self.symbols
            .iter()
            .find(|s| !s.is_func && s.name == name)
            .map(|s| (s.addr, None))
    }

    // ---------------------------------------------------------- addr2line

    fn a2l(&self) -> &addr2line::Context<R> {
        self.a2l.get_or_init(|| {
            addr2line::Context::from_arc_dwarf(self.dwarf.clone()).unwrap_or_else(|_| {
                addr2line::Context::from_dwarf(self.empty_dwarf()).expect("empty dwarf")
            })
        })
    }

    fn empty_dwarf(&self) -> Dwarf {
        gimli::Dwarf::load(|_| -> Result<R> {
            Ok(gimli::EndianSlice::new(&[], gimli::LittleEndian))
        })
        .unwrap()
    }

    /// Source frames at a link-time pc, innermost (inlined) first.
    pub fn frames_at(&self, pc: u64) -> Vec<SourceFrame> {
        if let Some(v) = self.frames_cache.borrow().get(&pc) {
            return v.clone();
        }
        let v = self.frames_at_uncached(pc);
        bounded_insert(&mut self.frames_cache.borrow_mut(), pc, v.clone());
        v
    }

    fn frames_at_uncached(&self, pc: u64) -> Vec<SourceFrame> {
        let mut out = Vec::new();
        let ctx = self.a2l();
        let unit_off = match ctx.find_dwarf_and_unit(pc).skip_all_loads() {
            Some(u) => u.header.debug_info_offset().map(|o| o.0 as u64),
            None => None,
        };
        if let Ok(mut it) = ctx.find_frames(pc).skip_all_loads() {
            while let Ok(Some(f)) = it.next() {
                let function = f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok().map(|s| s.into_owned()));
                let (file, line) = match &f.location {
                    Some(l) => (l.file.map(|s| s.to_string()), l.line),
                    None => (None, None),
                };
                let die = match (f.dw_die_offset, unit_off) {
                    (Some(d), Some(u)) => Some(u + d.0 as u64),
                    _ => None,
                };
                out.push(SourceFrame {
                    function,
                    file,
                    line,
                    die,
                    inlined: false,
                });
            }
        }
        let n = out.len();
        for (i, f) in out.iter_mut().enumerate() {
            f.inlined = i + 1 < n;
        }
        // Several line rows can start at one address (the `{` of a function
        // and its first statement); like gdb, report the last one.
        if let Some(first) = out.first_mut()
            && let Some((file, line)) = self.last_row_at(pc)
        {
            first.file = Some(file);
            first.line = Some(line);
        }
        out
    }

    /// The last is_stmt line-table row at exactly `pc`, if any.
    fn last_row_at(&self, pc: u64) -> Option<(String, u32)> {
        let ctx = self.a2l();
        let unit = ctx.find_dwarf_and_unit(pc).skip_all_loads()?;
        let prog = unit.line_program.clone()?;
        let mut rows = prog.rows();
        let mut found: Option<(u64, u32)> = None;
        let mut seen_exact = 0;
        while let Ok(Some((header, row))) = rows.next_row() {
            if row.end_sequence() || row.address() != pc || !row.is_stmt() {
                continue;
            }
            let _ = header;
            seen_exact += 1;
            if let Some(l) = row.line() {
                found = Some((row.file_index(), l.get() as u32));
            }
        }
        if seen_exact < 2 {
            return None;
        }
        let (fidx, line) = found?;
        let header = rows.header();
        let fe = header.file(fidx)?;
        Some((self.file_path(unit, header, fe)?, line))
    }

    /// The full name of a line table's file: its directory (the unit's
    /// compilation directory before a relative one) and its name.
    fn file_path(
        &self,
        unit: gimli::UnitRef<'_, R>,
        header: &gimli::LineProgramHeader<R>,
        fe: &gimli::FileEntry<R>,
    ) -> Option<String> {
        let name = unit.attr_string(fe.path_name()).ok()?;
        let name = String::from_utf8_lossy(name.slice()).into_owned();
        let path = if name.starts_with('/') {
            name
        } else {
            let dir = fe
                .directory(header)
                .and_then(|d| unit.attr_string(d).ok())
                .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
                .unwrap_or_default();
            let dir = if dir.starts_with('/') {
                dir
            } else {
                let comp = unit
                    .comp_dir
                    .map(|c| String::from_utf8_lossy(c.slice()).into_owned())
                    .unwrap_or_default();
                format!("{comp}/{dir}")
            };
            format!("{dir}/{name}")
        };
        Some(path)
    }

    /// The line-table range around link-time `pc`: from the last row at
    /// or before it to the next row at a higher address in the same
    /// sequence (gdb's `info line` range).
    pub fn line_range_at(&self, pc: u64) -> Option<(u64, u64)> {
        let ctx = self.a2l();
        let unit = ctx.find_dwarf_and_unit(pc).skip_all_loads()?;
        let prog = unit.line_program.clone()?;
        let mut rows = prog.rows();
        let mut prev: Option<u64> = None;
        while let Ok(Some((_, row))) = rows.next_row() {
            let a = row.address();
            if let Some(p) = prev
                && p <= pc
                && pc < a
            {
                return Some((p, a));
            }
            prev = if row.end_sequence() { None } else { Some(a) };
        }
        None
    }

    /// The line-table sequence holding link-time `pc`, for source-line
    /// stepping (`next`, `step`): its rows in address order and the
    /// sequence's end address.  None where no sequence covers `pc`.
    pub fn line_sequence(&self, pc: u64) -> Option<LineSequence> {
        let ctx = self.a2l();
        let unit = ctx.find_dwarf_and_unit(pc).skip_all_loads()?;
        let prog = unit.line_program.clone()?;
        let mut rows = prog.rows();
        let mut cur: Vec<LineRow> = Vec::new();
        while let Ok(Some((_, row))) = rows.next_row() {
            let a = row.address();
            if row.end_sequence() {
                if cur.first().is_some_and(|f| f.addr <= pc) && pc < a {
                    return Some(LineSequence { rows: cur, end: a });
                }
                cur.clear();
                continue;
            }
            cur.push(LineRow {
                addr: a,
                file: row.file_index(),
                line: row.line().map_or(0, |l| l.get() as u32),
                is_stmt: row.is_stmt(),
            });
        }
        None
    }

    /// file:line of a link-time address.
    pub fn location_at(&self, pc: u64) -> Option<(String, u32)> {
        if let Some(x) = self.last_row_at(pc) {
            return Some(x);
        }
        let l = self.a2l().find_location(pc).ok()??;
        Some((l.file?.to_string(), l.line?))
    }

    /// Addresses of the statements at FILE:LINE (file matched by suffix).
    /// When no row has exactly that line, the next line with code is used.
    pub fn line_addresses(&self, file: &str, line: u32) -> Result<Vec<(u64, String, u32)>> {
        let mut best: Option<u32> = None;
        // the last line with code in a matching file (None: no such file)
        let mut last_line: Option<(String, u32)> = None;
        let mut hits: Vec<(u64, String, u32)> = Vec::new();
        let mut it = self.dwarf.units();
        while let Ok(Some(h)) = it.next() {
            let unit = match self.dwarf.unit(h) {
                Ok(u) => u,
                Err(_) => continue,
            };
            let prog = match &unit.line_program {
                Some(p) => p.clone(),
                None => continue,
            };
            // Which file indices match?
            let header = prog.header().clone();
            let mut matching = Vec::new();
            for (i, fe) in header.file_names().iter().enumerate() {
                let name = self
                    .dwarf
                    .attr_string(&unit, fe.path_name())
                    .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
                    .unwrap_or_default();
                let dir = fe
                    .directory(&header)
                    .and_then(|d| self.dwarf.attr_string(&unit, d).ok())
                    .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
                    .unwrap_or_default();
                let full = format!("{dir}/{name}");
                if full.ends_with(&format!("/{file}")) || name == file {
                    let idx = if header.version() >= 5 {
                        i as u64
                    } else {
                        i as u64 + 1
                    };
                    matching.push((idx, name));
                }
            }
            if matching.is_empty() {
                continue;
            }
            let mut rows = prog.rows();
            while let Ok(Some((_, row))) = rows.next_row() {
                if !row.is_stmt() || row.end_sequence() {
                    continue;
                }
                let Some(l) = row.line() else { continue };
                let l = l.get() as u32;
                let Some((_, fname)) = matching.iter().find(|(i, _)| *i == row.file_index()) else {
                    continue;
                };
                if last_line.as_ref().is_none_or(|(_, m)| l > *m) {
                    last_line = Some((fname.clone(), l));
                }
                if l < line {
                    continue;
                }
                match best {
                    Some(b) if l > b => continue,
                    Some(b) if l < b => hits.clear(),
                    _ => {}
                }
                best = Some(l);
                if !hits.iter().any(|(a, _, _)| *a == row.address()) {
                    hits.push((row.address(), fname.clone(), l));
                }
            }
        }
        if hits.is_empty()
            && let Some((fname, last)) = last_line
        {
            bail!("{file}:{line} is past the last line with code in {fname} (line {last})");
        }
        // Keep one address per function (the lowest), like gdb's locations.
        hits.sort();
        let mut out: Vec<(u64, String, u32)> = Vec::new();
        for h in hits {
            let f = self.frames_at(h.0).first().and_then(|f| f.die);
            if out
                .iter()
                .any(|o| self.frames_at(o.0).first().and_then(|f| f.die) == f && f.is_some())
            {
                continue;
            }
            out.push(h);
        }
        Ok(out)
    }
}
pub fn symbol_at(symbols: &[ElfSymbol], addr: u64) -> Option<(&ElfSymbol, u64)> {
    let i = match symbols.binary_search_by(|s| s.addr.cmp(&addr)) {
        Ok(i) => i,
        Err(0) => return None,
        Err(i) => i - 1,
    };
    // Prefer a function symbol at that address whose size covers addr.
    let mut j = i;
    loop {
        let s = &symbols[j];
        if s.is_func && (addr < s.addr + s.size.max(1) || s.size == 0) {
            return Some((s, addr - s.addr));
        }
        if j == 0 || symbols[j - 1].addr != s.addr {
            break;
        }
        j -= 1;
    }
    let s = &symbols[i];
    if addr < s.addr + s.size.max(1) {
        Some((s, addr - s.addr))
    } else {
        None
    }
}

/// gcc clone names: foo.isra.0, foo.part.0, foo.constprop.0, foo.lto_priv.0,
/// foo.cold.
pub fn is_clone_of(sym: &str, name: &str) -> bool {
    sym.len() > name.len() + 1 && sym.starts_with(name) && sym.as_bytes()[name.len()] == b'.'
}

/// A clone of `name` that is a function entry: not gcc's `name.cold` (or
/// `name.part.0.cold`), the split-off cold code a function jumps into in
/// its middle, where no argument is in its register.
pub fn is_entry_clone_of(sym: &str, name: &str) -> bool {
    is_clone_of(sym, name) && !sym[name.len() + 1..].split('.').any(|p| p == "cold")
}

#[cfg(test)]
mod clone_tests {
    use super::{is_clone_of, is_entry_clone_of};

    #[test]
    fn cold_parts_are_clones_but_not_entries() {
        assert!(is_entry_clone_of(
            "exec_simple_query.isra.0",
            "exec_simple_query"
        ));
        assert!(is_entry_clone_of("ExecInitNode.part.0", "ExecInitNode"));
        assert!(is_entry_clone_of("foo.constprop.0", "foo"));
        assert!(is_clone_of(
            "standard_ExecutorStart.cold",
            "standard_ExecutorStart"
        ));
        assert!(!is_entry_clone_of(
            "standard_ExecutorStart.cold",
            "standard_ExecutorStart"
        ));
        assert!(!is_entry_clone_of("foo.part.0.cold", "foo"));
        assert!(!is_entry_clone_of("foobar", "foo"));
        assert!(!is_entry_clone_of("foo", "foo"));
    }
}
