//! Call-frame unwinding with CFI (.eh_frame via .eh_frame_hdr, or
//! .debug_frame), across the binary and the shared libraries mapped into
//! the target (a backend blocked in `epoll_wait` stops inside libc).

use super::R;
use super::elf::{ElfImage, ElfSymbol};
use crate::arch::regs::{DWARF_RA, DWARF_RSP, FrameRegs};
use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EhFrameHdr, ParsedEhFrameHdr, RegisterRule,
    UnwindContext, UnwindSection,
};
use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub struct UnwindTables {
    eh_frame: Option<EhFrame<R>>,
    hdr: Option<ParsedEhFrameHdr<R>>,
    debug_frame: Option<DebugFrame<R>>,
    bases: BaseAddresses,
    /// The rule found for each lookup address so far (None: no FDE covers
    /// it): a profile unwinds the same few hundred return addresses tens
    /// of thousands of times a second, and finding a row runs the FDE's
    /// CFI program from its start each time.
    rules: Mutex<HashMap<u64, Option<Arc<Rule>>>>,
}

/// What one row of CFI says, as much as [`apply_rule`] uses: how to get
/// the CFA, and the rule of each register the unwinder restores.
struct Rule {
    cfa: CfaRule<usize>,
    regs: Vec<(u16, RegisterRule<usize>)>,
    /// The row is from .debug_frame (its expressions are in that section).
    debug_frame: bool,
}

impl Rule {
    fn of(row: &gimli::UnwindTableRow<usize>, debug_frame: bool) -> Rule {
        Rule {
            cfa: row.cfa().clone(),
            regs: (0..=DWARF_RA)
                .filter(|n| *n != DWARF_RSP)
                .filter_map(|n| row.register(gimli::Register(n)).map(|r| (n, r)))
                .collect(),
            debug_frame,
        }
    }
}

/// Lookup addresses whose rules are kept at most, per file.
const RULES_KEPT: usize = 1 << 16;

/// Registers callee-saved in the System V ABI (value survives a call):
/// rbx, rbp, r12-r15.
const CALLEE_SAVED: [u16; 6] = [3, 6, 12, 13, 14, 15];

impl UnwindTables {
    pub fn from_image(img: &ElfImage) -> UnwindTables {
        let le = gimli::LittleEndian;
        let mut bases = BaseAddresses::default();
        if let Some(a) = img.section_addr(".eh_frame_hdr") {
            bases = bases.set_eh_frame_hdr(a);
        }
        if let Some(a) = img.section_addr(".eh_frame") {
            bases = bases.set_eh_frame(a);
        }
        if let Some(a) = img.section_addr(".text") {
            bases = bases.set_text(a);
        }
        if let Some(a) = img.section_addr(".got") {
            bases = bases.set_got(a);
        }
        let ehf = img.section(".eh_frame");
        let eh_frame = if ehf.is_empty() {
            None
        } else {
            let mut s = EhFrame::new(ehf, le);
            s.set_address_size(8);
            Some(s)
        };
        let hdr_data = img.section(".eh_frame_hdr");
        let hdr = if hdr_data.is_empty() {
            None
        } else {
            EhFrameHdr::new(hdr_data, le).parse(&bases, 8).ok()
        };
        let df = img.section(".debug_frame");
        let debug_frame = if df.is_empty() {
            None
        } else {
            let mut s = DebugFrame::new(df, le);
            s.set_address_size(8);
            Some(s)
        };
        UnwindTables {
            eh_frame,
            hdr,
            debug_frame,
            bases,
            rules: Mutex::new(HashMap::new()),
        }
    }

    /// Compute the caller's registers from `regs` (runtime values).
    /// `lookup` is the link-time address used to find the FDE (pc, or pc-1
    /// for frames above the innermost).  Returns (caller regs, CFA).
    pub fn step(
        &self,
        regs: &FrameRegs,
        lookup: u64,
        read_u64: &dyn Fn(u64) -> Option<u64>,
    ) -> Option<(FrameRegs, u64)> {
        let rule = {
            let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
            match rules.get(&lookup) {
                Some(r) => r.clone(),
                None => {
                    let r = self.find_rule(lookup).map(Arc::new);
                    if rules.len() >= RULES_KEPT {
                        rules.clear();
                    }
                    rules.insert(lookup, r.clone());
                    r
                }
            }
        }?;
        match (&self.eh_frame, &self.debug_frame) {
            (_, Some(df)) if rule.debug_frame => apply_rule(&rule, df, regs, read_u64),
            (Some(eh), _) => apply_rule(&rule, eh, regs, read_u64),
            _ => None,
        }
    }

    /// The row of CFI for `lookup`: .eh_frame through its header's table,
    /// else .eh_frame searched, else .debug_frame.
    fn find_rule(&self, lookup: u64) -> Option<Rule> {
        let mut ctx = UnwindContext::new();
        if let (Some(eh), Some(hdr)) = (&self.eh_frame, &self.hdr)
            && let Some(table) = hdr.table()
            && let Ok(row) = table.unwind_info_for_address(
                eh,
                &self.bases,
                &mut ctx,
                lookup,
                EhFrame::cie_from_offset,
            )
        {
            return Some(Rule::of(row, false));
        }
        if let Some(eh) = &self.eh_frame
            && let Ok(row) =
                eh.unwind_info_for_address(&self.bases, &mut ctx, lookup, EhFrame::cie_from_offset)
        {
            return Some(Rule::of(row, false));
        }
        if let Some(df) = &self.debug_frame
            && let Ok(row) = df.unwind_info_for_address(
                &self.bases,
                &mut ctx,
                lookup,
                DebugFrame::cie_from_offset,
            )
        {
            return Some(Rule::of(row, true));
        }
        None
    }
}

fn apply_rule<S: UnwindSection<R>>(
    rule: &Rule,
    section: &S,
    regs: &FrameRegs,
    read_u64: &dyn Fn(u64) -> Option<u64>,
) -> Option<(FrameRegs, u64)> {
    let cfa = match &rule.cfa {
        CfaRule::RegisterAndOffset { register, offset } => {
            (regs.get(register.0)? as i64).wrapping_add(*offset) as u64
        }
        CfaRule::Expression(e) => {
            let expr = e.get(section).ok()?;
            eval_simple(expr, regs, read_u64)?
        }
    };
    let mut caller = FrameRegs::default();
    for r in CALLEE_SAVED {
        caller.set(r, regs.get(r));
    }
    let rule_value = |rule: &RegisterRule<usize>| -> Option<Option<u64>> {
        Some(match rule {
            RegisterRule::Undefined => None,
            RegisterRule::SameValue => return None,
            RegisterRule::Offset(o) => read_u64((cfa as i64).wrapping_add(*o) as u64),
            RegisterRule::ValOffset(o) => Some((cfa as i64).wrapping_add(*o) as u64),
            RegisterRule::Register(r) => regs.get(r.0),
            RegisterRule::Constant(c) => Some(*c),
            RegisterRule::Expression(e) => {
                let expr = e.get(section).ok()?;
                let addr = eval_with_cfa(expr, cfa, regs, read_u64)?;
                read_u64(addr)
            }
            RegisterRule::ValExpression(e) => {
                let expr = e.get(section).ok()?;
                eval_with_cfa(expr, cfa, regs, read_u64)
            }
            _ => None,
        })
    };
    // Return address: explicit rule, else undefined (end of stack).
    let mut ra = None;
    for (n, r) in &rule.regs {
        if *n == DWARF_RA {
            ra = rule_value(r).flatten();
        } else if let Some(v) = rule_value(r) {
            caller.set(*n, v);
        }
    }
    caller.set(DWARF_RA, ra);
    caller.set(DWARF_RSP, Some(cfa));
    Some((caller, cfa))
}

fn eval_simple(
    expr: gimli::Expression<R>,
    regs: &FrameRegs,
    read_u64: &dyn Fn(u64) -> Option<u64>,
) -> Option<u64> {
    eval_with_cfa_opt(expr, None, regs, read_u64)
}

fn eval_with_cfa(
    expr: gimli::Expression<R>,
    cfa: u64,
    regs: &FrameRegs,
    read_u64: &dyn Fn(u64) -> Option<u64>,
) -> Option<u64> {
    eval_with_cfa_opt(expr, Some(cfa), regs, read_u64)
}

fn eval_with_cfa_opt(
    expr: gimli::Expression<R>,
    cfa: Option<u64>,
    regs: &FrameRegs,
    read_u64: &dyn Fn(u64) -> Option<u64>,
) -> Option<u64> {
    let enc = gimli::Encoding {
        format: gimli::Format::Dwarf32,
        version: 4,
        address_size: 8,
    };
    let mut ev = expr.evaluation(enc);
    if let Some(c) = cfa {
        ev.set_initial_value(c);
    }
    let mut res = ev.evaluate().ok()?;
    loop {
        res = match res {
            gimli::EvaluationResult::Complete => break,
            gimli::EvaluationResult::RequiresRegister { register, .. } => ev
                .resume_with_register(gimli::Value::Generic(regs.get(register.0)?))
                .ok()?,
            gimli::EvaluationResult::RequiresMemory { address, .. } => ev
                .resume_with_memory(gimli::Value::Generic(read_u64(address)?))
                .ok()?,
            _ => return None,
        };
    }
    match ev.result().first()?.location {
        gimli::Location::Address { address } => Some(address),
        gimli::Location::Value { value } => value.to_u64(!0).ok(),
        _ => None,
    }
}

/// Identity of a file mapped into the target: its path and the device and
/// inode its mapping names in /proc/PID/maps.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub path: PathBuf,
    pub dev: String,
    pub inode: u64,
}

/// A shared object's unwind tables and symbols.
pub struct ModuleImage {
    tables: UnwindTables,
    symbols: Vec<ElfSymbol>,
    sections: Vec<(String, u64, u64)>,
}

/// The parsed image of a mapped file, from a process-wide cache: each file
/// is mapped and parsed once however often the module list is rebuilt
/// (images live until pgdbg exits; None when the file cannot be read).
fn image_of(key: &FileKey) -> Option<&'static ModuleImage> {
    static CACHE: Mutex<Option<HashMap<FileKey, Option<&'static ModuleImage>>>> = Mutex::new(None);
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(HashMap::new);
    if let Some(v) = cache.get(key) {
        return *v;
    }
    let img = super::elf::verified_mapped_image(&key.path, &key.dev, key.inode).map(|img| {
        let m: &'static ModuleImage = Box::leak(Box::new(ModuleImage {
            tables: UnwindTables::from_image(&img),
            symbols: img.symbols(),
            sections: img.sections(),
        }));
        m
    });
    cache.insert(key.clone(), img);
    img
}

/// A file mapped into the target, with its lazily loaded unwind tables and
/// symbols.
pub struct Module {
    pub key: FileKey,
    pub path: PathBuf,
    pub start: u64,
    pub end: u64,
    /// runtime = link-time + bias
    pub bias: u64,
    /// The target's executable (the postgres binary).
    pub main: bool,
    image: OnceCell<Option<&'static ModuleImage>>,
}

impl Module {
    pub fn new(key: FileKey, start: u64, end: u64, bias: u64, main: bool) -> Module {
        Module {
            path: key.path.clone(),
            key,
            start,
            end,
            bias,
            main,
            image: OnceCell::new(),
        }
    }

    fn loaded(&self) -> Option<&'static ModuleImage> {
        *self.image.get_or_init(|| image_of(&self.key))
    }

    pub fn tables(&self) -> Option<&'static UnwindTables> {
        self.loaded().map(|x| &x.tables)
    }

    pub fn symbol(&self, runtime: u64) -> Option<(String, u64)> {
        let img = self.loaded()?;
        super::symbol_at(&img.symbols, runtime - self.bias).map(|(s, off)| (s.name.clone(), off))
    }

    /// The name of the section holding runtime address `runtime`.
    pub fn section_at(&self, runtime: u64) -> Option<String> {
        let link = runtime.wrapping_sub(self.bias);
        section_named(&self.loaded()?.sections, link)
    }

    pub fn short_name(&self) -> String {
        self.path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The section of a list of (name, address, size) holding `addr`.
pub fn section_named(sections: &[(String, u64, u64)], addr: u64) -> Option<String> {
    sections
        .iter()
        .find(|(_, a, n)| addr >= *a && addr < a + n)
        .map(|(name, _, _)| name.clone())
}
