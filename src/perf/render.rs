//! What each mode of `profile` prints, from its own table and its folded
//! stacks: the same folded text, flame graph, speedscope and pprof files
//! and JSON document for every mode.

use super::export::{Meta, Weight};
use anyhow::{Result, anyhow};

/// What each mode of `profile` (on-CPU, off-CPU, wall-clock) prints:
/// its own table, and from its folded stacks the same folded text, flame
/// graph, speedscope and pprof files and (from its fields) JSON document.
pub trait Rendered: serde::Serialize {
    /// The table and the total line.
    fn table_text(&self, rows: usize) -> String;
    /// Folded stacks, root first, `;`-separated, with their weights.
    fn folded(&self) -> &[(String, u64)];
    /// The flame graph's title and the name of its weights.
    fn svg_labels(&self) -> (String, &'static str);
    /// Why there is no flame graph when there are no stacks.
    fn nothing_to_draw(&self) -> &'static str;
    /// What the folded stacks' weights are.
    fn weight(&self) -> Weight;
    /// The time recorded, seconds.
    fn recorded_s(&self) -> f64;

    /// `stack WEIGHT` lines, root first (flamegraph.pl's and inferno's input).
    fn folded_text(&self) -> String {
        let mut s = String::new();
        for (stack, n) in self.folded() {
            s.push_str(&format!("{stack} {n}\n"));
        }
        s
    }

    fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Draw the flame graph (inferno) into `out`.
    fn write_svg(&self, out: &std::path::Path) -> Result<()> {
        if self.folded().is_empty() {
            anyhow::bail!("{}", self.nothing_to_draw());
        }
        let mut opt = inferno::flamegraph::Options::default();
        let (title, count) = self.svg_labels();
        opt.title = title;
        opt.count_name = count.into();
        let text = self.folded_text();
        let mut svg = Vec::new();
        inferno::flamegraph::from_lines(&mut opt, text.lines(), &mut svg)
            .map_err(|e| anyhow!("cannot draw the flame graph: {e}"))?;
        write_file(out, &svg)
    }

    /// The name, weights and time recorded that the files carry.
    fn meta(&self) -> Meta {
        Meta {
            name: self.svg_labels().0,
            weight: self.weight(),
            duration_s: self.recorded_s(),
        }
    }

    /// Write the speedscope file (JSON) into `out`.
    fn write_speedscope(&self, out: &std::path::Path) -> Result<()> {
        write_file(
            out,
            super::export::speedscope(self.folded(), &self.meta()).as_bytes(),
        )
    }

    /// Write the pprof file (gzipped profile.proto) into `out`.
    fn write_pprof(&self, out: &std::path::Path) -> Result<()> {
        write_file(out, &super::pprof::gzipped(self.folded(), &self.meta())?)
    }
}

fn write_file(out: &std::path::Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(out, bytes).map_err(|e| anyhow!("cannot write {}: {e}", out.display()))
}
