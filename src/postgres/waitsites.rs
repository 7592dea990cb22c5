//! The stores of the wait-event word in the postgres binary (`info
//! wait-sites`): the inventory an in-process wait recorder would patch,
//! found from the code alone (works stripped) and compared with DWARF's
//! inlined instances of `pgstat_report_wait_start`/`_end`.  Read-only:
//! nothing is written into a backend.
//!
//! 14+: the word is `*my_wait_event_info` (in .dynsym); 13: it is
//! `MyProc->wait_event_info`, its offset from DWARF or the layout pack.

use crate::debuginfo::DebugInfo;
use crate::debuginfo::layout::Layout;
use crate::debuginfo::wordstores::{Code, Fit, Other, Scan, Site, Value, WordShape};
use anyhow::{Result, anyhow};
use std::collections::{BTreeMap, BTreeSet};

/// The static inline functions that write the word.
pub const INLINES: [&str; 2] = ["pgstat_report_wait_start", "pgstat_report_wait_end"];

/// The inventory of one binary.
pub struct Inventory {
    /// How the word is reached, as C.
    pub word: String,
    pub shape: WordShape,
    pub scan: Scan,
    /// From DWARF, when the binary has it.
    pub dwarf: Option<DwarfSites>,
}

/// The stores inside DWARF's instances of the inline functions.
#[derive(Default)]
pub struct DwarfSites {
    /// Instances per inline function (INLINES' order).
    pub instances: [usize; 2],
    /// Instances with no store of the word in their ranges.
    pub empty: usize,
    /// Store address -> the inline functions whose instances hold it.
    pub stores: BTreeMap<u64, BTreeSet<&'static str>>,
}

impl Inventory {
    pub fn store_set(&self) -> BTreeSet<u64> {
        self.scan.sites.iter().map(|s| s.store).collect()
    }

    /// Stores the code has and DWARF's instances do not, and the reverse.
    pub fn differences(&self) -> Option<(Vec<u64>, Vec<u64>)> {
        let d = self.dwarf.as_ref()?;
        let code = self.store_set();
        let dw: BTreeSet<u64> = d.stores.keys().copied().collect();
        Some((
            code.difference(&dw).copied().collect(),
            dw.difference(&code).copied().collect(),
        ))
    }
}

/// The word's shape in this build: `*my_wait_event_info` (14+) or
/// `MyProc->wait_event_info` (13).
pub fn word_shape(di: &DebugInfo) -> Result<(String, WordShape)> {
    if let Some((p, _)) = di.global("my_wait_event_info") {
        return Ok((
            "*my_wait_event_info".into(),
            WordShape {
                pointer: p,
                offset: 0,
            },
        ));
    }
    let (p, _) = di.global("MyProc").ok_or_else(|| {
        anyhow!("neither my_wait_event_info nor MyProc is a symbol of this binary: is it postgres?")
    })?;
    let off = Layout::of(di, "PGPROC")?.offset("wait_event_info")?;
    Ok((
        format!("MyProc->wait_event_info (+{off:#x})"),
        WordShape {
            pointer: p,
            offset: off as i64,
        },
    ))
}

/// The inventory: the code's sites, and DWARF's when there is DWARF.
pub fn inventory(di: &DebugInfo) -> Result<Inventory> {
    let (word, shape) = word_shape(di)?;
    let code = Code::decode(&di.binary);
    let scan = code.scan(shape);
    let dwarf = (!di.index.functions.is_empty()).then(|| dwarf_sites(di, &code, shape));
    Ok(Inventory {
        word,
        shape,
        scan,
        dwarf,
    })
}

fn dwarf_sites(di: &DebugInfo, code: &Code, shape: WordShape) -> DwarfSites {
    let mut d = DwarfSites::default();
    for inst in di.instances(&INLINES) {
        let k = if inst.name == INLINES[0] { 0 } else { 1 };
        d.instances[k] += 1;
        let stores = code.stores_in(&inst.ranges, shape.offset);
        if stores.is_empty() {
            d.empty += 1;
        }
        for s in stores {
            d.stores.entry(s).or_default().insert(INLINES[k]);
        }
    }
    d
}

/// The function around link-time `addr` (DWARF's, else an ELF symbol's).
fn function_of(di: &DebugInfo, addr: u64) -> Option<String> {
    di.function_ranges_at(addr).map(|(n, _)| n)
}

/// Where the store's code was written: the first source frame at `addr`
/// that is not one of the inline functions (the line calling
/// `pgstat_report_wait_start`, say), else the innermost.
fn call_site(di: &DebugInfo, addr: u64) -> Option<(String, u32)> {
    let frames = di.frames_at(addr);
    let f = frames
        .iter()
        .find(|f| !f.function.as_deref().is_some_and(|n| INLINES.contains(&n)))
        .or(frames.first())?;
    Some((f.file.clone()?, f.line?))
}

/// `info wait-sites`' summary.
pub fn summary(di: &DebugInfo, inv: &Inventory) -> String {
    let s = &inv.scan;
    let alone = s.sites.iter().filter(|x| x.fit == Fit::Alone).count();
    let near = s
        .sites
        .iter()
        .filter(|x| matches!(x.fit, Fit::Neighbours { .. }))
        .count();
    let reloc = s.sites.iter().filter(|x| x.fit == Fit::Relocate).count();
    let funcs: BTreeSet<String> = s
        .sites
        .iter()
        .filter_map(|x| function_of(di, x.store))
        .collect();
    let inside = s.sites.iter().filter(|x| x.target_inside).count();
    let branchy = s.sites.iter().filter(|x| x.branch_between).count();
    let functions = if inv.dwarf.is_some() {
        format!(" in {} functions", funcs.len())
    } else {
        String::new()
    };
    let mut out = format!(
        "{} stores of the wait-event word ({}){functions}: {alone} fit a 5-byte jump alone, \
         {near} with neighbouring instructions, {reloc} need the load..store span relocated",
        s.sites.len(),
        inv.word,
    );
    out.push_str(&format!(
        "\n{branchy} with a branch between load and store; {inside} with a branch target in \
         (load, store] ({} targets known, {} jump tables read)",
        s.targets, s.jump_tables
    ));
    let unclassified: Vec<&(u64, Other)> = s
        .others
        .iter()
        .filter(|(_, o)| matches!(o, Other::Unclassified(_)))
        .collect();
    let harmless = s.others.len() - unclassified.len();
    if s.classified() && inv.shape.offset != 0 {
        out.push_str(&format!(
            "\nevery reference classified: each 32-bit store at the word's offset is reached \
             from one of {} loads of the pointer",
            s.sites
                .iter()
                .map(|x| x.load)
                .collect::<BTreeSet<_>>()
                .len()
        ));
    } else if s.classified() {
        out.push_str(&format!(
            "\nevery reference classified: {} loads lead to stores, {harmless} other references \
             are harmless (set the pointer or read the word)",
            s.sites
                .iter()
                .map(|x| x.load)
                .collect::<BTreeSet<_>>()
                .len()
        ));
    } else {
        out.push_str(&format!(
            "\nunclassified: {} references, {} stray stores (an in-process recorder must refuse \
             this binary)",
            unclassified.len(),
            s.stray.len()
        ));
        for (a, o) in unclassified.iter().take(5) {
            if let Other::Unclassified(why) = o {
                out.push_str(&format!("\n  {a:#x}: {why}"));
            }
        }
        for a in s.stray.iter().take(5) {
            out.push_str(&format!(
                "\n  {a:#x}: a store at the word's offset no load of the pointer reaches ({})",
                function_of(di, *a).unwrap_or_else(|| "?".into())
            ));
        }
    }
    match (&inv.dwarf, inv.differences()) {
        (Some(d), Some((only_code, only_dwarf))) => {
            out.push_str(&format!(
                "\nDWARF: {} + {} inlined instances of {} / {} ({} without a store) hold {} \
                 stores",
                d.instances[0],
                d.instances[1],
                INLINES[0],
                INLINES[1],
                d.empty,
                d.stores.len()
            ));
            if only_code.is_empty() && only_dwarf.is_empty() {
                out.push_str(": the same set as the code's");
            }
            for a in &only_code {
                out.push_str(&format!(
                    "\n  {a:#x} ({}): in the code, outside the inlined instances",
                    function_of(di, *a).unwrap_or_else(|| "?".into())
                ));
            }
            for a in &only_dwarf {
                out.push_str(&format!(
                    "\n  {a:#x} ({}): in an inlined instance, not found in the code",
                    function_of(di, *a).unwrap_or_else(|| "?".into())
                ));
            }
        }
        _ => out.push_str(&format!(
            "\nno DWARF: the sites come from the code alone ({} functions named, by .dynsym)",
            funcs.len()
        )),
    }
    out
}

/// One site as a line of `info wait-sites -v` (`bias` added to addresses).
pub fn site_line(di: &DebugInfo, bias: u64, s: &Site, name: Option<&str>) -> String {
    let at = di
        .symbolic(s.store, true)
        .map(|(f, o)| format!(" <{f}+{o}>"))
        .unwrap_or_default();
    let line = call_site(di, s.store)
        .map(|(f, l)| {
            let base = f.rsplit('/').next().unwrap_or(&f).to_string();
            format!(" {base}:{l}")
        })
        .unwrap_or_default();
    let value = match s.value {
        Value::Imm(v) => match name {
            Some(n) => format!("{v:#010x} {n}"),
            None => format!("{v:#010x}"),
        },
        Value::Reg(r) => format!("{r:?}").to_lowercase(),
    };
    let fit = match s.fit {
        Fit::Alone => "alone".to_string(),
        Fit::Neighbours { start, end } => {
            format!("with neighbours {:#x}..{:#x}", start + bias, end + bias)
        }
        Fit::Relocate => "relocate".to_string(),
    };
    let mut flags = String::new();
    if s.target_inside {
        flags.push_str(", branch target inside");
    }
    if s.branch_between {
        flags.push_str(", branch between");
    }
    format!(
        "{:#x}{at}{line}: {} bytes, {value}; load {:#x} ({} between); jump fits {fit}{flags}",
        s.store + bias,
        s.len,
        s.load + bias,
        s.between
    )
}

/// One site as JSON.
pub fn site_json(di: &DebugInfo, bias: u64, s: &Site, name: Option<&str>) -> serde_json::Value {
    let (fit, around) = match s.fit {
        Fit::Alone => ("alone", None),
        Fit::Neighbours { start, end } => ("neighbours", Some((start + bias, end + bias))),
        Fit::Relocate => ("relocate", None),
    };
    let loc = call_site(di, s.store);
    serde_json::json!({
        "store": format!("{:#x}", s.store + bias),
        "length": s.len,
        "load": format!("{:#x}", s.load + bias),
        "between": s.between,
        "immediate": match s.value { Value::Imm(v) => Some(v), Value::Reg(_) => None },
        "register": match s.value {
            Value::Reg(r) => Some(format!("{r:?}").to_lowercase()),
            Value::Imm(_) => None,
        },
        "wait_event": name,
        "fit": fit,
        "window": around.map(|(a, b)| [format!("{a:#x}"), format!("{b:#x}")]),
        "branch_target_inside": s.target_inside,
        "branch_between": s.branch_between,
        "function": function_of(di, s.store),
        "file": loc.as_ref().map(|(f, _)| f.clone()),
        "line": loc.map(|(_, l)| l),
    })
}
