//! `profile`'s options, shared by the prompt's command and `pgdbg
//! profile PID`: the mode, the output format, the files to write, and
//! which of them go together.

use super::render::Rendered;
use anyhow::Result;

/// How `profile` prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// functions by self and total share (perf report's table)
    #[default]
    Top,
    /// folded stacks, root first (flamegraph.pl / inferno input)
    Folded,
    /// one JSON document: the table and the folded stacks
    Json,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "top" => Some(Format::Top),
            "folded" => Some(Format::Folded),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// The options of `profile`, shared by the command line and the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileOpts {
    pub hz: u64,
    pub duration: Option<std::time::Duration>,
    pub format: Format,
    pub flamegraph: Option<std::path::PathBuf>,
    /// The speedscope file (JSON) to write.
    pub speedscope: Option<std::path::PathBuf>,
    /// The pprof file (gzipped profile.proto) to write.
    pub pprof: Option<std::path::PathBuf>,
    pub rows: usize,
    /// Off-CPU intervals (the scheduler's switches) instead of on-CPU samples.
    pub off_cpu: bool,
    /// On-CPU samples and off-CPU intervals together, weighed in time.
    pub wall: bool,
    /// Time per system call (the raw_syscalls tracepoints), no stacks.
    pub syscalls: bool,
    /// The samples and intervals split by the statement that ran.
    pub by_statement: bool,
}

impl Default for ProfileOpts {
    fn default() -> Self {
        ProfileOpts {
            hz: 99,
            duration: None,
            format: Format::Top,
            flamegraph: None,
            speedscope: None,
            pprof: None,
            rows: 25,
            off_cpu: false,
            wall: false,
            syscalls: false,
            by_statement: false,
        }
    }
}

/// A file `profile` writes besides its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutFile {
    Speedscope,
    Pprof,
    FlameGraph,
}

impl OutFile {
    pub fn option(self) -> &'static str {
        match self {
            OutFile::Speedscope => "--speedscope",
            OutFile::Pprof => "--pprof",
            OutFile::FlameGraph => "--flamegraph",
        }
    }

    /// Write `p`'s stacks into `out`; what was written.
    fn write(self, p: &impl Rendered, out: &std::path::Path) -> Result<&'static str> {
        match self {
            OutFile::Speedscope => p.write_speedscope(out).map(|_| "speedscope profile"),
            OutFile::Pprof => p.write_pprof(out).map(|_| "pprof profile"),
            OutFile::FlameGraph => p.write_svg(out).map(|_| "flame graph"),
        }
    }
}

impl ProfileOpts {
    /// The modes and outputs that go together, or one line saying which
    /// do not.
    pub fn check_modes(&self) -> Result<()> {
        if self.wall && self.off_cpu {
            anyhow::bail!(
                "profile: --wall (time on and off a CPU) and --off-cpu (time off a CPU only) \
                 exclude each other"
            );
        }
        if self.by_statement {
            if self.syscalls {
                anyhow::bail!(
                    "profile: --by-statement splits samples and off-CPU intervals, which \
                     --syscalls does not record: leave one out"
                );
            }
            if self.format == Format::Folded {
                anyhow::bail!(
                    "profile: --by-statement adds a table (and JSON rows), which --format folded \
                     has no place for: use --format top or json"
                );
            }
        }
        if self.syscalls {
            if self.wall || self.off_cpu {
                anyhow::bail!(
                    "profile: --syscalls (time per system call) is a mode of its own, not with {}",
                    if self.wall { "--wall" } else { "--off-cpu" }
                );
            }
            let stacks = if self.format == Format::Folded {
                Some("--format folded")
            } else {
                self.files()?.first().map(|(k, _)| k.option())
            };
            if let Some(o) = stacks {
                anyhow::bail!(
                    "profile: --syscalls records no stacks, so no {o}: use --format top or json"
                );
            }
        }
        self.files().map(|_| ())
    }

    /// The files to write, the flame graph last (there is none of no
    /// stacks; the other files are empty profiles then); refused when two
    /// options name the same file (the second would overwrite the first).
    pub fn files(&self) -> Result<Vec<(OutFile, &std::path::Path)>> {
        let mut files: Vec<(OutFile, &std::path::Path)> = Vec::new();
        for (kind, f) in [
            (OutFile::Speedscope, &self.speedscope),
            (OutFile::Pprof, &self.pprof),
            (OutFile::FlameGraph, &self.flamegraph),
        ] {
            let Some(f) = f else { continue };
            if let Some((other, _)) = files.iter().find(|(_, g)| *g == f.as_path()) {
                anyhow::bail!(
                    "profile: {} and {} both write {}: give each its own file",
                    other.option(),
                    kind.option(),
                    crate::shown::shown(&f.display().to_string())
                );
            }
            files.push((kind, f));
        }
        Ok(files)
    }

    /// The result as the format asks, and the files written.
    pub fn render(&self, p: &impl Rendered) -> Result<String> {
        let mut out = match self.format {
            Format::Top => p.table_text(self.rows),
            Format::Folded => p.folded_text().trim_end().to_string(),
            Format::Json => p.json(),
        };
        for (kind, f) in self.files()? {
            let what = kind.write(p, f)?;
            if self.format != Format::Json {
                out.push_str(&format!(
                    "\nprofile: wrote {}: {what} of {} distinct stacks",
                    f.display(),
                    p.folded().len()
                ));
            }
        }
        Ok(out)
    }
}
