//! FUNCTION, FILE:LINE and *ADDRESS resolved to code locations (also
//! used by the script checks before attaching).
use super::*;

pub fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Resolve FUNCTION, FILE:LINE or *ADDRESS to breakpoint locations
/// (runtime addresses).  Usable before attaching (bias 0) to validate
/// scripts.
pub fn resolve_location(di: &DebugInfo, bias: u64, spec: &str) -> Result<Vec<BpLocation>> {
    resolve(di, bias, spec, false)
}

/// `resolve_location`; `attached`: `bias` is the target's load bias (not
/// a check before attaching), so a numeric *ADDRESS can be checked too.
pub(crate) fn resolve(
    di: &DebugInfo,
    bias: u64,
    spec: &str,
    attached: bool,
) -> Result<Vec<BpLocation>> {
    let spec = spec.trim();
    if let Some(a) = spec.strip_prefix('*') {
        let (addr, by_name) = parse_address(di, bias, a.trim())?;
        // before attaching, a name's address is a link-time one: say the name
        let label = if by_name && !attached {
            format!("*{}", a.trim())
        } else {
            format!("{addr:#x}")
        };
        check_instruction_start(di, bias, addr, &label, attached || by_name)?;
        let link = addr.wrapping_sub(bias);
        let fr = di.frames_at(link);
        return Ok(vec![BpLocation {
            addr,
            function: fr
                .first()
                .and_then(|f| f.function.clone())
                .unwrap_or_else(|| format!("{addr:#x}")),
            inlined: false,
            inlined_into: None,
            file_line: di.location_at(link),
        }]);
    }
    if let Some((file, line)) = spec.rsplit_once(':')
        && let Ok(line) = line.parse::<u32>()
    {
        if line == 0 {
            bail!(
                "{file}:0: line numbers start at 1",
                file = crate::shown::shown(file)
            );
        }
        let hits = di.line_addresses(file, line)?;
        if hits.is_empty() {
            bail!(
                "no code at {file}:{line} (is the file name right? try the function name instead)",
                file = crate::shown::shown(file)
            );
        }
        return Ok(hits
            .into_iter()
            .map(|(a, f, l)| {
                let fr = di.frames_at(a);
                BpLocation {
                    addr: a + bias,
                    function: fr
                        .first()
                        .and_then(|x| x.function.clone())
                        .unwrap_or_else(|| "??".into()),
                    inlined: fr.len() > 1,
                    inlined_into: fr
                        .last()
                        .and_then(|x| x.function.clone())
                        .filter(|_| fr.len() > 1),
                    file_line: Some((f, l)),
                }
            })
            .collect());
    }
    if !spec
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        bail!(
            "bad location '{spec}': use FUNCTION, FILE:LINE or *ADDRESS",
            spec = crate::shown::shown(spec)
        );
    }
    let locs = di.function_locations(spec);
    if locs.is_empty() {
        let close = suggest(di, spec);
        bail!(
            "no function \"{spec}\" in this postgres binary{}",
            close
                .map(|c| format!(" (did you mean {c}?)"))
                .unwrap_or_default(),
            spec = crate::shown::shown(spec)
        );
    }
    Ok(locs
        .into_iter()
        .map(|l| {
            let fr = di.frames_at(l.addr);
            let into = if l.inlined {
                // the outermost frame at that address is the physical caller
                fr.last().and_then(|f| f.function.clone())
            } else {
                None
            };
            BpLocation {
                addr: l.addr + bias,
                function: spec.to_string(),
                inlined: l.inlined,
                inlined_into: into,
                file_line: di.location_at(l.addr),
            }
        })
        .collect())
}

/// The runtime address of `*ADDRESS`: a number (0x... or decimal) or
/// FUNCTION[+OFFSET]; and whether it was given by name.
pub(crate) fn parse_address(di: &DebugInfo, bias: u64, a: &str) -> Result<(u64, bool)> {
    let num = |t: &str| -> Option<u64> {
        let t = t.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => t.parse().ok(),
        }
    };
    if let Some(v) = num(a) {
        return Ok((v, false));
    }
    let bad = || {
        anyhow!(
            "bad address '{a}': use *0xADDRESS or *FUNCTION+OFFSET",
            a = crate::shown::shown(a)
        )
    };
    let (name, off) = match a.split_once('+') {
        Some((n, o)) => (n.trim(), num(o).ok_or_else(bad)?),
        None => (a, 0),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return Err(bad());
    }
    let base = di
        .symbols
        .iter()
        .find(|s| s.is_func && s.name == name)
        .map(|s| s.addr)
        .or_else(|| {
            di.function_locations(name)
                .iter()
                .find(|l| !l.inlined)
                .map(|l| l.addr)
        })
        .ok_or_else(|| {
            anyhow!(
                "no function \"{name}\" in this postgres binary",
                name = crate::shown::shown(name)
            )
        })?;
    Ok((base.wrapping_add(off).wrapping_add(bias), true))
}

/// An int3 must replace the first byte of an instruction: one written
/// inside an instruction changes what the backend executes (a crash at
/// the hit, or later).  Decodes the containing function from its start and
/// refuses an address that is not an instruction's first byte, naming the
/// nearest starts.  `must_know`: an address in no known function is
/// refused too (before attaching, a numeric address of a position
/// independent binary cannot be checked yet: it is checked at attach).
pub(crate) fn check_instruction_start(
    di: &DebugInfo,
    bias: u64,
    addr: u64,
    label: &str,
    must_know: bool,
) -> Result<()> {
    use iced_x86::{Decoder, DecoderOptions};
    let link = addr.wrapping_sub(bias);
    let Some((name, start, end)) = di.code_range_at(link) else {
        if must_know {
            bail!(
                "{label}: not in a function of the postgres binary that pgdbg knows: break *ADDRESS needs the first byte of an instruction there (or use break FUNCTION or FILE:LINE)"
            );
        }
        return Ok(());
    };
    let Some(code) = di.binary.bytes_at(start, end - start) else {
        bail!(
            "{label} ({name}): the code of {name} is not in the binary's file, so the address cannot be checked: use break {name} or FILE:LINE"
        );
    };
    let mut dec = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut before = start;
    while dec.can_decode() && dec.ip() < link {
        before = dec.ip();
        let _ = dec.decode();
    }
    let after = dec.ip();
    if after == link {
        return Ok(());
    }
    let after_text = if after >= end {
        format!("the end of {name} at +{}", end - start)
    } else {
        format!("+{}", after - start)
    };
    bail!(
        "{label}: not the start of an instruction in {name} ({name}+{}; instructions start at {name}+{} and {after_text})",
        link - start,
        before - start
    )
}

pub(crate) fn suggest(di: &DebugInfo, name: &str) -> Option<String> {
    let lname = name.to_lowercase();
    let mut best: Option<(usize, &String)> = None;
    for k in di.index.functions.keys() {
        let d = edit_distance(&lname, &k.to_lowercase());
        if d <= 3 && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k.clone())
}

pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > 3 {
        return 99;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let c = if a[i - 1] == b[j - 1] { 0 } else { 1 };
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + c);
        }
        prev = cur;
    }
    prev[b.len()]
}
