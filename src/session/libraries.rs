//! Shared libraries as modules of their own: each mapped object
//! (`plpgsql.so`, an extension, libc) with its load bias and its own
//! `DebugInfo` (DWARF or ELF symbols), loaded on first use.  Library
//! functions resolve as break locations (`LIB:FUNC` to pick one), library
//! frames get their lines, locals and types, and a breakpoint on a
//! function no loaded object has waits ("pending") until the backend
//! loads a library that defines it: pgdbg then stops once per `dlopen` at
//! the dynamic linker's `_dl_debug_state` (gdb's `r_brk`), which costs
//! nothing while nothing is loaded.
//!
//! Types of a library's DWARF are told apart from the main binary's by a
//! tag in the high bits of their DIE offsets (`TypeRef::Die`).
use super::breakpoints::describe_loc;
use super::*;
use crate::debuginfo::library::{libraries_defining, library_matches, split_library_spec};
use crate::debuginfo::types::{Member, Type};
use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::Path;

/// DIE offsets of library `i` carry `i + 1` from this bit up.
const TAG_SHIFT: u32 = 44;
const TAG_MASK: u64 = (1u64 << TAG_SHIFT) - 1;
// a library's DIE of its dwz supplementary file keeps that file's bit
const _: () = assert!(crate::debuginfo::index::SUP_DIE & TAG_MASK != 0);

/// The dynamic linker's hook, called after each change of the list of
/// loaded objects (glibc's `r_debug.r_brk`).
const DL_HOOK: &str = "_dl_debug_state";

pub(crate) struct Library {
    pub key: FileKey,
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    /// Still mapped at the last look (an unmapped one keeps its number).
    pub mapped: bool,
    di: OnceCell<Option<Rc<DebugInfo>>>,
}

impl Library {
    pub fn path(&self) -> &Path {
        &self.key.path
    }

    pub fn short_name(&self) -> String {
        self.key
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Its debug info, loaded on first use (None: not a readable ELF file).
    pub fn di(&self) -> Option<Rc<DebugInfo>> {
        self.di
            .get_or_init(|| {
                // the mapped file itself, never another of the same name
                let k = &self.key;
                let img = crate::debuginfo::elf::verified_mapped_image(&k.path, &k.dev, k.inode)?;
                DebugInfo::load_library(img, &k.path).ok().map(Rc::new)
            })
            .clone()
    }

    fn di_loaded(&self) -> Option<&Rc<DebugInfo>> {
        self.di.get().and_then(|d| d.as_ref())
    }

    fn contains(&self, addr: u64) -> bool {
        self.mapped && addr >= self.start && addr < self.end
    }
}

/// Every shared object seen mapped in the target since attach.
#[derive(Default)]
pub(crate) struct Libraries {
    pub list: Vec<Library>,
    /// Types of library DWARF, by tagged DIE offset.
    types: RefCell<HashMap<u64, Rc<Type>>>,
}

impl Libraries {
    /// Bring the list in line with the target's mappings; true when a
    /// library appeared.
    pub fn sync(&mut self, mods: &[Module]) -> bool {
        let mut seen = vec![false; self.list.len()];
        let mut added = false;
        for m in mods {
            let name = m.short_name();
            if m.main || !name.contains(".so") {
                continue;
            }
            match self
                .list
                .iter()
                .position(|l| l.key == m.key && l.start == m.start)
            {
                Some(i) => {
                    seen[i] = true;
                    self.list[i].mapped = true;
                    self.list[i].end = m.end;
                }
                None => {
                    self.list.push(Library {
                        key: m.key.clone(),
                        start: m.start,
                        end: m.end,
                        bias: m.bias,
                        mapped: true,
                        di: OnceCell::new(),
                    });
                    seen.push(true);
                    added = true;
                }
            }
        }
        for (l, s) in self.list.iter_mut().zip(seen) {
            if !s {
                l.mapped = false;
            }
        }
        added
    }

    pub fn index_at(&self, addr: u64) -> Option<usize> {
        self.list.iter().position(|l| l.contains(addr))
    }

    fn mapped(&self) -> impl Iterator<Item = (usize, &Library)> {
        self.list.iter().enumerate().filter(|(_, l)| l.mapped)
    }

    /// The type behind a tagged DIE offset, its own references tagged.
    fn resolve_tagged(&self, off: u64) -> Option<Rc<Type>> {
        if let Some(t) = self.types.borrow().get(&off) {
            return Some(t.clone());
        }
        let tag = off >> TAG_SHIFT;
        let di = self.list.get(tag as usize - 1)?.di_loaded()?;
        let t = di.resolve(&TypeRef::Die(off & TAG_MASK));
        let t = Rc::new(retag(&t, tag));
        self.types.borrow_mut().insert(off, t.clone());
        Some(t)
    }
}

fn tag_ref(t: TypeRef, tag: u64) -> TypeRef {
    match t {
        TypeRef::Die(o) if tag != 0 => TypeRef::Die(o | (tag << TAG_SHIFT)),
        t => t,
    }
}

fn retag(t: &Type, tag: u64) -> Type {
    let opt = |t: &Option<TypeRef>| t.clone().map(|t| tag_ref(t, tag));
    match t {
        Type::Pointer { target } => Type::Pointer {
            target: opt(target),
        },
        Type::Struct {
            kw,
            name,
            size,
            members,
            declaration,
        } => Type::Struct {
            kw,
            name: name.clone(),
            size: *size,
            members: members
                .iter()
                .map(|m| Member {
                    name: m.name.clone(),
                    ty: tag_ref(m.ty.clone(), tag),
                    offset: m.offset,
                    bits: m.bits,
                })
                .collect(),
            declaration: *declaration,
        },
        Type::Typedef { name, target } => Type::Typedef {
            name: name.clone(),
            target: opt(target),
        },
        Type::Array { elem, count } => Type::Array {
            elem: tag_ref(elem.clone(), tag),
            count: *count,
        },
        Type::Function {
            ret,
            params,
            variadic,
        } => Type::Function {
            ret: opt(ret),
            params: params
                .as_ref()
                .map(|ps| ps.iter().map(|p| tag_ref(p.clone(), tag)).collect()),
            variadic: *variadic,
        },
        Type::Qualified { kw, target } => Type::Qualified {
            kw,
            target: opt(target),
        },
        other => other.clone(),
    }
}

impl Session {
    /// Take a new look at the target's mappings; true when a library
    /// appeared.
    pub(crate) fn sync_libraries(&mut self) -> bool {
        self.modules.refresh();
        self.libs.borrow_mut().sync(self.modules.list())
    }

    /// The debug info a frame's addresses belong to, its load bias and the
    /// tag of its DIE offsets (0: the main binary).
    pub(crate) fn frame_di(&self, f: &Frame) -> (Rc<DebugInfo>, u64, u64) {
        if let Some(i) = f.lib {
            let libs = self.libs.borrow();
            if let Some(l) = libs.list.get(i)
                && let Some(di) = l.di_loaded()
            {
                return (di.clone(), l.bias, i as u64 + 1);
            }
        }
        (self.di.clone(), self.bias, 0)
    }

    /// The library (number, debug info, bias) mapped at runtime `addr`.
    pub(crate) fn library_at(&self, addr: u64) -> Option<(usize, Rc<DebugInfo>, u64)> {
        let libs = self.libs.borrow();
        let i = libs.index_at(addr)?;
        let l = &libs.list[i];
        Some((i, l.di()?, l.bias))
    }

    /// A variable's type tagged as its library's.
    pub(crate) fn tagged_var(v: VarInfo, tag: u64) -> VarInfo {
        VarInfo {
            ty: v.ty.map(|t| tag_ref(t, tag)),
            ..v
        }
    }

    pub(crate) fn resolve_type(&self, t: &TypeRef) -> Rc<Type> {
        if let TypeRef::Die(off) = t
            && off >> TAG_SHIFT != 0
        {
            return self
                .libs
                .borrow()
                .resolve_tagged(*off)
                .unwrap_or_else(|| Rc::new(Type::Void));
        }
        self.di.resolve(t)
    }

    /// A type by name: the selected frame's library first, then the main
    /// binary, then any library whose debug info is loaded.
    pub(crate) fn type_named(&self, name: &str) -> Option<TypeRef> {
        let libs = self.libs.borrow();
        let lib_type = |i: usize| {
            let di = libs.list.get(i)?.di_loaded()?;
            di.type_by_name(name).map(|t| tag_ref(t, i as u64 + 1))
        };
        if let Some(i) = self.selected_frame().and_then(|f| f.lib)
            && let Some(t) = lib_type(i)
        {
            return Some(t);
        }
        if let Some(t) = self.di.type_by_name(name) {
            return Some(t);
        }
        (0..libs.list.len()).find_map(lib_type)
    }

    /// The main binary's debug info and each mapped library's (read now
    /// if not yet), with the tag of their DIE offsets (0: the main
    /// binary's).
    pub(crate) fn all_debug_infos(&self) -> Vec<(Rc<DebugInfo>, u64)> {
        let libs = self.libs.borrow();
        std::iter::once((self.di.clone(), 0))
            .chain(
                libs.mapped()
                    .filter_map(|(i, l)| Some((l.di()?, i as u64 + 1))),
            )
            .collect()
    }

    /// A DIE's type of the debug info tagged `tag` (`all_debug_infos`),
    /// tagged as its library's.
    pub(crate) fn tagged_type(t: TypeRef, tag: u64) -> TypeRef {
        tag_ref(t, tag)
    }

    /// A global of the selected frame's library: runtime address and type.
    pub(crate) fn library_global(&self, name: &str) -> Option<(u64, Option<TypeRef>)> {
        let i = self.selected_frame()?.lib?;
        let libs = self.libs.borrow();
        let l = libs.list.get(i)?;
        let (addr, ty) = l.di_loaded()?.global(name)?;
        Some((addr + l.bias, ty.map(|t| tag_ref(t, i as u64 + 1))))
    }

    /// FUNCTION, FILE:LINE, *ADDRESS or LIB:FUNCTION resolved in the main
    /// binary, else in the libraries mapped now.
    pub(crate) fn resolve_anywhere(&self, spec: &str) -> Result<Vec<BpLocation>> {
        if let Some((lib, func)) = split_library_spec(spec) {
            let main = self.exe_path.file_name().and_then(|f| f.to_str()) == Some(lib)
                || lib == "postgres";
            if main {
                return resolve(&self.di, self.bias, func, true);
            }
            let libs = self.libs.borrow();
            let mut named = libs
                .mapped()
                .filter(|(_, l)| library_matches(lib, l.path()))
                .peekable();
            if named.peek().is_none() {
                let names: Vec<String> = libs.mapped().map(|(_, l)| l.short_name()).collect();
                bail!(
                    "no library \"{lib}\" is loaded in backend {} ({})",
                    self.pid,
                    crate::debuginfo::library::some_names(
                        &names,
                        "it has loaded",
                        "'info sharedlibrary' lists them"
                    ),
                    lib = crate::shown::shown(lib)
                );
            }
            let mut out = Vec::new();
            let mut err = None;
            for (_, l) in named {
                let Some(di) = l.di() else { continue };
                match resolve(&di, l.bias, func, true) {
                    Ok(v) => out.extend(v),
                    Err(e) => {
                        err = Some(anyhow!(
                            "{}",
                            format!("{e:#}").replace("this postgres binary", &l.short_name())
                        ))
                    }
                }
            }
            if out.is_empty() {
                return Err(err.unwrap_or_else(|| {
                    anyhow!(
                        "no function \"{func}\" in {lib}",
                        func = crate::shown::shown(func)
                    )
                }));
            }
            return Ok(out);
        }
        let main_err = match resolve(&self.di, self.bias, spec, true) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let libs = self.libs.borrow();
        let mut out = Vec::new();
        for (_, l) in libs.mapped() {
            // a function name is looked up in every library; an address
            // only in the one that maps it
            if let Some(a) = spec.trim().strip_prefix('*')
                && let Some(v) = parse_number(a)
                && !l.contains(v)
            {
                continue;
            }
            let Some(di) = l.di() else { continue };
            if let Ok(v) = resolve(&di, l.bias, spec, true) {
                out.extend(v);
            }
        }
        if out.is_empty() {
            drop(libs);
            let libs = self.pending_candidates(spec);
            if !libs.is_empty() {
                bail!(
                    "{} is in {}, which backend {} has not loaded yet: 'break {}' waits for it (pending); trace and count need it loaded (run a function of it once)",
                    spec.trim(),
                    libs.join(", "),
                    self.pid,
                    spec.trim()
                );
            }
            return Err(main_err);
        }
        Ok(out)
    }

    /// The libraries of the server's installation that define the function
    /// `spec` names, when no loaded object does (a pending breakpoint).
    pub(crate) fn pending_candidates(&self, spec: &str) -> Vec<String> {
        let func = match split_library_spec(spec) {
            Some((_, f)) => f,
            None => spec.trim(),
        };
        if crate::command::check::plain_function(func).is_none() {
            return Vec::new();
        }
        libraries_defining(func)
            .iter()
            .filter(|p| match split_library_spec(spec) {
                Some((lib, _)) => library_matches(lib, p),
                None => true,
            })
            .filter_map(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
            .collect()
    }

    /// Stop at the dynamic linker's hook from now on (once per load or
    /// unload of a library), to arm pending breakpoints.
    pub(crate) fn arm_library_hook(&mut self) -> Result<()> {
        if self.dl_hook.is_some() {
            return Ok(());
        }
        let addr = {
            let libs = self.libs.borrow();
            libs.mapped()
                .filter(|(_, l)| l.short_name().starts_with("ld-"))
                .find_map(|(_, l)| {
                    let di = l.di()?;
                    let s = di.symbols.iter().find(|s| s.is_func && s.name == DL_HOOK)?;
                    Some(s.addr + l.bias)
                })
        };
        let Some(addr) = addr else {
            bail!(
                "the dynamic linker's {DL_HOOK} was not found in backend {}: a breakpoint in a library not loaded yet cannot be armed when it loads",
                self.pid
            );
        };
        self.insert_int3(addr)?;
        self.dl_hook = Some(addr);
        Ok(())
    }

    /// Before an int3 goes into a library at `addr`: follow loads and
    /// unloads at the dynamic linker's hook, so that a `dlclose` of the
    /// library is seen and the int3's record dropped (else detach, or the
    /// guardian, would write the old byte over whatever is mapped there
    /// next).  Nothing for the postgres binary.
    pub(crate) fn follow_library_of(&mut self, addr: u64) -> Result<()> {
        if self.dl_hook.is_some() || self.libs.borrow().index_at(addr).is_none() {
            return Ok(());
        }
        self.arm_library_hook().map_err(|e| {
            anyhow!("{e:#}; without it an unload of the library could not be followed, so no breakpoint is written into it")
        })
    }

    /// Is `addr` the dynamic linker's hook, and only that?
    pub(crate) fn is_library_hook(&self, addr: u64) -> bool {
        self.dl_hook == Some(addr) && !self.bps.uses(addr) && !self.internal.contains_key(&addr)
    }

    /// The backend stopped at the dynamic linker's hook: a library was
    /// loaded or unloaded.  Breakpoint locations in an object that is gone
    /// are forgotten (their bytes went with it; the breakpoint waits again),
    /// and pending breakpoints a new library defines are armed.
    pub(crate) fn on_library_event(&mut self) -> Result<()> {
        let added = self.sync_libraries();
        self.drop_unmapped_locations()?;
        if added {
            self.arm_pending()?;
        }
        Ok(())
    }

    /// Whether `addr` lies in a library mapped now or in a file the
    /// backend maps (the binary).
    pub(crate) fn in_mapped_code(&self, addr: u64) -> bool {
        self.libs.borrow().index_at(addr).is_some() || self.modules.find(addr).is_some()
    }

    fn drop_unmapped_locations(&mut self) -> Result<()> {
        // the int3s in place, and the locations of disabled breakpoints
        // (no int3 of theirs: an `enable` must not write one where the
        // library was, whatever is mapped there now)
        let stale: Vec<u64> = {
            let mut candidates = self.target.inserted_addresses();
            candidates.extend(
                self.bps
                    .list
                    .iter()
                    .flat_map(|b| b.locations.iter().map(|l| l.addr)),
            );
            candidates.sort_unstable();
            candidates.dedup();
            candidates
                .into_iter()
                .filter(|a| {
                    self.libs
                        .borrow()
                        .list
                        .iter()
                        .any(|l| !l.mapped && *a >= l.start && *a < l.end)
                        && !self.in_mapped_code(*a)
                })
                .collect()
        };
        for a in &stale {
            // (a no-op where no int3 is: a disabled breakpoint's location)
            self.target.forget_breakpoint(*a);
            self.internal.remove(a);
        }
        if stale.is_empty() {
            return Ok(());
        }
        let mut emptied = Vec::new();
        for b in &mut self.bps.list {
            let before = b.locations.len();
            b.locations.retain(|l| !stale.contains(&l.addr));
            if before > 0 && b.locations.is_empty() {
                emptied.push(b.id);
            }
        }
        for id in emptied {
            self.say(&format!(
                "Breakpoint {id}: its library was unloaded; pending until a library defines it again"
            ));
            if !self.pending.contains(&id) {
                self.pending.push(id);
            }
        }
        Ok(())
    }

    /// Arm the pending breakpoints that the libraries mapped now define.
    pub(crate) fn arm_pending(&mut self) -> Result<()> {
        let ids = std::mem::take(&mut self.pending);
        for id in ids {
            let Some((spec, enabled)) = self.bps.get_mut(id).map(|b| (b.spec.clone(), b.enabled))
            else {
                continue; // deleted meanwhile
            };
            let Ok(locs) = self.resolve_anywhere(&spec) else {
                self.pending.push(id);
                continue;
            };
            let mut inserted = Vec::new();
            let mut failed = None;
            // a disabled breakpoint gets its locations, its int3s at `enable`
            for l in locs.iter().filter(|_| enabled) {
                // an address already armed (another breakpoint, a probe)
                // keeps its int3 if this one is rolled back
                let ours = !self.target.breakpoint_inserted(l.addr);
                match self.insert_int3(l.addr) {
                    Ok(()) if !ours => {}
                    Ok(()) => inserted.push(l.addr),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                for a in inserted {
                    self.target.remove_breakpoint(a)?;
                }
                self.say(&format!(
                    "Breakpoint {id} ({spec}) could not be armed: {e:#}"
                ));
                self.pending.push(id);
                continue;
            }
            let lib = self
                .libs
                .borrow()
                .index_at(locs[0].addr)
                .map(|i| self.libs.borrow().list[i].short_name())
                .unwrap_or_default();
            let n = locs.len();
            let first = describe_loc(&locs[0]);
            let locations = locs
                .iter()
                .map(|l| crate::capture::events::BreakpointLocation {
                    address: format!("{:#x}", l.addr),
                    function: l.function.clone(),
                    inlined: l.inlined,
                })
                .collect();
            if let Some(b) = self.bps.get_mut(id) {
                b.locations = locs;
            }
            self.emit(Event::Breakpoint {
                id,
                locations,
                spec: spec.clone(),
            });
            self.say(&format!(
                "Breakpoint {id} ({spec}) armed: {lib} was loaded; {n} location{} ({first})",
                if n == 1 { "" } else { "s" }
            ));
        }
        Ok(())
    }

    /// `info sharedlibrary`: every object mapped now, its range, where its
    /// debug info came from (looked up for each).
    pub fn info_sharedlibrary(&mut self) -> String {
        self.sync_libraries();
        let libs = self.libs.borrow();
        let mut s = String::from("From               To                 Debug info\n");
        s.push_str(&format!(
            "{:#018x} {:#018x} {}\n    {}\n",
            self.modules
                .list()
                .iter()
                .find(|m| m.main)
                .map(|m| m.start)
                .unwrap_or(0),
            self.modules
                .list()
                .iter()
                .filter(|m| m.main)
                .map(|m| m.end)
                .max()
                .unwrap_or(0),
            self.di.source,
            self.exe_path.display()
        ));
        for (_, l) in libs.mapped() {
            let what = match l.di() {
                Some(di) if di.has_dwarf() => {
                    format!("{} ({} functions)", di.source, di.index.functions.len())
                }
                Some(di) => format!("{} ({} symbols)", di.source, di.symbols.len()),
                None => "not readable".to_string(),
            };
            s.push_str(&format!(
                "{:#018x} {:#018x} {what}\n    {}\n",
                l.start,
                l.end,
                l.path().display()
            ));
        }
        if self.dl_hook.is_some() {
            s.push_str("(libraries loaded from now on are followed at _dl_debug_state)");
        }
        s.trim_end().to_string()
    }

    /// Function names of the libraries whose debug info is loaded (Tab
    /// completion).
    pub fn library_function_names(&self) -> Vec<String> {
        let dirs = crate::debuginfo::library::server_library_dirs();
        let libs = self.libs.borrow();
        let mut v = Vec::new();
        for (_, l) in libs.mapped() {
            // the server's own libraries are read for this; others only
            // if something read them already
            let ours = dirs.iter().any(|d| l.path().parent() == Some(d.as_path()));
            let di = if ours { l.di() } else { l.di_loaded().cloned() };
            if let Some(di) = di {
                v.extend(di.index.functions.keys().cloned());
                v.extend(
                    di.symbols
                        .iter()
                        .filter(|s| s.is_func && !s.name.contains('.'))
                        .map(|s| s.name.clone()),
                );
            }
        }
        v.sort();
        v.dedup();
        v
    }
}

fn parse_number(t: &str) -> Option<u64> {
    let t = t.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    }
}
