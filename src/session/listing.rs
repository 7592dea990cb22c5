//! Source lines beside code: `disassemble /s` in gdb's mixed shape (a
//! file's name when it changes, the lines before an instruction's line
//! that have no code of their own, `N\ttext`, a blank line between
//! groups).
use super::*;
use std::collections::{HashMap, HashSet};

/// The text of source files, read once each (None: not found).
#[derive(Default)]
pub struct SourceFiles {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceFiles {
    /// Line `n` (from 1) of file `path`; None when the file or the line
    /// is not there.
    pub fn line(&mut self, path: &str, n: u32) -> Option<String> {
        let lines = self.files.entry(path.to_string()).or_insert_with(|| {
            let bytes = std::fs::read(path).ok()?;
            Some(
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(str::to_string)
                    .collect(),
            )
        });
        lines.as_ref()?.get((n as usize).checked_sub(1)?).cloned()
    }
}

/// What `disassemble /s` has printed so far of one range.
pub struct SourceLines {
    di: Rc<DebugInfo>,
    bias: u64,
    /// (file, line) of every instruction of the range: lines with code.
    with_code: HashSet<(String, u32)>,
    /// The line of the range's first line-table row (gdb prints the lines
    /// from there to the first instruction's, the function's head).
    first_row: Option<(String, u32)>,
    last: Option<(String, u32)>,
    started: bool,
    files: SourceFiles,
}

impl SourceLines {
    /// For the instructions at runtime `addrs` (the range, in order).
    pub fn new((di, bias): (Rc<DebugInfo>, u64), addrs: &[u64]) -> SourceLines {
        let with_code = addrs
            .iter()
            .filter_map(|&a| di.location_at(a.wrapping_sub(bias)))
            .collect();
        let first_row = match (addrs.first(), addrs.last()) {
            (Some(&lo), Some(&hi)) => di
                .line_rows(lo.wrapping_sub(bias), hi.wrapping_sub(bias) + 1)
                .into_iter()
                .next()
                .map(|(_, f, l)| (f, l)),
            _ => None,
        };
        SourceLines {
            di,
            bias,
            with_code,
            first_row,
            last: None,
            started: false,
            files: SourceFiles::default(),
        }
    }

    /// The lines to print before the instruction at runtime `addr`.
    pub fn before(&mut self, out: &mut Vec<String>, addr: u64) {
        let link = addr.wrapping_sub(self.bias);
        let here = self.di.location_at(link);
        if self.started && here == self.last {
            return;
        }
        if self.started {
            out.push(String::new());
        }
        self.started = true;
        let Some((file, line)) = here.clone() else {
            out.push("--- no source info for this pc ---".into());
            self.last = here;
            return;
        };
        let same_file = self.last.as_ref().is_some_and(|(f, _)| *f == file);
        if !same_file {
            out.push(format!("{}:", self.di.display_file_name(link, &file)));
        }
        let mut from = line;
        match &self.last {
            None => {
                if let Some((f, l)) = &self.first_row
                    && *f == file
                    && *l < line
                {
                    from = *l;
                }
            }
            Some((f, last)) if *f == file && line > last + 1 => {
                // the lines after the last one shown that have no code
                let mut l = line - 1;
                while l > *last && !self.with_code.contains(&(file.clone(), l)) {
                    l -= 1;
                }
                if l < line - 1 {
                    from = l + 1;
                }
            }
            _ => {}
        }
        for n in from..=line {
            out.push(match self.files.line(&file, n) {
                Some(t) => format!("{n}\t{t}"),
                None => format!("{n}\tin {file}"),
            });
        }
        self.last = here;
    }
}

/// What the last `list` showed: the file (its full name) and the lines.
#[derive(Clone, Debug)]
pub struct Listed {
    file: String,
    first: u32,
    last: u32,
}

/// Ten lines centred on `line`, as gdb's `list` shows a location.
fn centred(line: u32) -> (u32, u32) {
    let first = line.saturating_sub(5).max(1);
    (first, first + 9)
}

impl Session {
    /// `list [LINE | FUNCTION | FILE:LINE | FIRST,LAST | FIRST, | -]`.
    pub fn list(&mut self, spec: Option<&str>) -> Result<String> {
        let (file, first, last) = match spec.map(str::trim).unwrap_or("") {
            "" => match &self.listed {
                Some(l) => (l.file.clone(), l.last + 1, l.last + 10),
                None => {
                    let (f, l) = self.frame_source()?;
                    let (a, b) = centred(l);
                    (f, a, b)
                }
            },
            "-" => {
                let l = self.listed.clone().ok_or_else(|| {
                    anyhow!(
                        "no lines listed yet: give a function or FILE:LINE, e.g. list GetCachedPlan"
                    )
                })?;
                if l.first <= 1 {
                    bail!("Already at the start of {}.", l.file);
                }
                let end = l.first - 1;
                (l.file, end.saturating_sub(9).max(1), end)
            }
            s => match s.split_once(',') {
                Some((a, b)) => {
                    let (f, a) = self.line_spec(a.trim())?;
                    let b = match b.trim() {
                        "" => a + 9,
                        b => self.line_spec(b)?.1,
                    };
                    (f, a, b)
                }
                None => {
                    let (f, l) = self.line_spec(s)?;
                    let (a, b) = centred(l);
                    (f, a, b)
                }
            },
        };
        let text = self.source_text(&file)?;
        let lines: Vec<&str> = text.lines().collect();
        if first as usize > lines.len() {
            bail!(
                "Line number {first} out of range; \"{file}\" has {} lines.",
                lines.len()
            );
        }
        let last = last.min(lines.len() as u32).max(first);
        let out: Vec<String> = (first..=last)
            .map(|n| format!("{n}\t{}", lines[n as usize - 1]))
            .collect();
        self.listed = Some(Listed { file, first, last });
        Ok(out.join("\n"))
    }

    /// `directory [DIR]`: DIR is searched first for source files.
    pub fn directory(&mut self, dir: Option<&str>) -> Result<String> {
        if let Some(d) = dir {
            let p = std::path::PathBuf::from(d);
            if !p.is_dir() {
                bail!("{d} is not a directory: give one that holds the sources");
            }
            self.source_dirs.retain(|x| *x != p);
            self.source_dirs.insert(0, p);
        }
        let mut dirs: Vec<String> = self
            .source_dirs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        dirs.extend(["$cdir".to_string(), "$cwd".to_string()]);
        Ok(format!("Source directories searched: {}", dirs.join(":")))
    }

    /// The file and line of the selected frame (the backend stopped).
    fn frame_source(&mut self) -> Result<(String, u32)> {
        let none = || {
            anyhow!("no default source line: give a function or FILE:LINE, e.g. list GetCachedPlan")
        };
        if self.background {
            return Err(none());
        }
        let sel = self.selected();
        let f = self.frames()?.get(sel).cloned().ok_or_else(none)?;
        match (f.file, f.line) {
            (Some(file), Some(line)) => Ok((file, line)),
            _ => Err(none()),
        }
    }

    /// A file's full name and a line: `N` (in the file listed last, or
    /// the selected frame's), `FILE:N`, or a function's declaration.
    fn line_spec(&mut self, s: &str) -> Result<(String, u32)> {
        if let Ok(n) = s.parse::<u32>() {
            let file = match &self.listed {
                Some(l) => l.file.clone(),
                None => self.frame_source()?.0,
            };
            return Ok((file, n));
        }
        if let Some((_, n)) = s.rsplit_once(':')
            && let Ok(n) = n.parse::<u32>()
        {
            let locs = resolve(&self.di, self.bias, s, true)?;
            let full = locs
                .iter()
                .find_map(|l| self.di.location_at(l.addr.wrapping_sub(self.bias)))
                .ok_or_else(|| anyhow!("no line information for {}", short(s)))?;
            return Ok((full.0, n));
        }
        // a function: its first line after the prologue, as `info line`
        let locs = resolve(&self.di, self.bias, s, true)?;
        let loc = locs
            .iter()
            .min_by_key(|l| (l.inlined, l.addr))
            .ok_or_else(|| anyhow!("no code for {}", short(s)))?;
        let full = self.di.location_at(loc.addr.wrapping_sub(self.bias));
        match (&loc.file_line, full) {
            (Some((f, l)), Some((ff, _))) if ff.ends_with(f.as_str()) => Ok((ff, *l)),
            (_, Some(x)) => Ok(x),
            _ => bail!("no line information for {}", short(s)),
        }
    }

    /// A source file's text: its full name from the debug info, else each
    /// `directory` with the file's name.
    fn source_text(&self, full: &str) -> Result<String> {
        let base = basename(full);
        let tries = std::iter::once(std::path::PathBuf::from(full))
            .chain(self.source_dirs.iter().map(|d| d.join(base)));
        for p in tries {
            if let Ok(b) = std::fs::read(&p) {
                return Ok(String::from_utf8_lossy(&b).into_owned());
            }
        }
        bail!("{full}: No such file or directory ('directory DIR' adds a place to look for it)")
    }
}

fn short(s: &str) -> String {
    crate::command::check::short(s)
}
