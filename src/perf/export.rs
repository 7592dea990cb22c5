//! The folded stacks of `profile` (each mode's, root first, `;`-separated,
//! with their weights) as the files other tools load: speedscope's JSON
//! (here) and pprof's profile.proto (`pprof.rs`).  Both are built from the
//! same [`Stacks`]: every frame name once, each stack as indices into them.

use std::collections::HashMap;

/// What a mode's weights are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// On-CPU samples, each standing for 1/hz s of CPU time.
    Samples { hz: u64 },
    /// Microseconds of time of a kind: `off-cpu` (off a CPU), `wall` (on
    /// a CPU and off it).
    Micros(&'static str),
}

/// What the files say about the profile besides its stacks.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// The profile's name (the flame graph's title).
    pub name: String,
    pub weight: Weight,
    /// The time recorded, seconds.
    pub duration_s: f64,
}

/// The folded stacks with their frames shared: `names` holds each frame
/// name once, in the order first met; a stack is indices into it, root
/// first, with its weight.
#[derive(Debug, PartialEq)]
pub struct Stacks<'a> {
    pub names: Vec<&'a str>,
    pub stacks: Vec<(Vec<usize>, u64)>,
}

impl<'a> Stacks<'a> {
    pub fn of(folded: &'a [(String, u64)]) -> Stacks<'a> {
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut names = Vec::new();
        let mut stacks = Vec::with_capacity(folded.len());
        for (line, n) in folded {
            let ids = line
                .split(';')
                .map(|f| {
                    *index.entry(f).or_insert_with(|| {
                        names.push(f);
                        names.len() - 1
                    })
                })
                .collect();
            stacks.push((ids, *n));
        }
        Stacks { names, stacks }
    }

    pub fn total(&self) -> u64 {
        self.stacks.iter().map(|(_, n)| n).sum()
    }
}

/// A speedscope file (https://www.speedscope.app/file-format-schema.json):
/// one "sampled" profile over shared frames, each stack root first with
/// its weight (samples, unit "none", or microseconds).
pub fn speedscope(folded: &[(String, u64)], meta: &Meta) -> String {
    let s = Stacks::of(folded);
    let unit = match meta.weight {
        Weight::Samples { .. } => "none",
        Weight::Micros(_) => "microseconds",
    };
    let frames: Vec<serde_json::Value> = s
        .names
        .iter()
        .map(|n| serde_json::json!({ "name": n }))
        .collect();
    let (samples, weights): (Vec<&Vec<usize>>, Vec<u64>) =
        s.stacks.iter().map(|(ids, n)| (ids, *n)).unzip();
    let doc = serde_json::json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": format!("pgdbg {}", env!("CARGO_PKG_VERSION")),
        "name": meta.name,
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": [{
            "type": "sampled",
            "name": meta.name,
            "unit": unit,
            "startValue": 0,
            "endValue": s.total(),
            "samples": samples,
            "weights": weights,
        }],
    });
    serde_json::to_string(&doc).unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A wall-clock profile's folded stacks: roots are states, `f` is on
    /// two stacks, one of them twice (recursion).
    pub(crate) fn folded() -> Vec<(String, u64)> {
        vec![
            ("[off-CPU: sleeping];main;f;pg_sleep".into(), 700),
            ("[on-CPU];main;f;g;f".into(), 250),
            ("[on-CPU];main;h".into(), 50),
        ]
    }

    #[test]
    fn frames_are_shared_root_first() {
        let f = folded();
        let s = Stacks::of(&f);
        assert_eq!(
            s.names,
            [
                "[off-CPU: sleeping]",
                "main",
                "f",
                "pg_sleep",
                "[on-CPU]",
                "g",
                "h"
            ]
        );
        assert_eq!(
            s.stacks,
            [
                (vec![0, 1, 2, 3], 700),
                (vec![4, 1, 2, 5, 2], 250),
                (vec![4, 1, 6], 50)
            ]
        );
        assert_eq!(s.total(), 1000);
    }

    #[test]
    fn speedscope_sampled_profile() {
        let meta = Meta {
            name: "Wall-clock time of backend 7".into(),
            weight: Weight::Micros("wall"),
            duration_s: 0.001,
        };
        let v: serde_json::Value = serde_json::from_str(&speedscope(&folded(), &meta)).unwrap();
        assert_eq!(
            v["$schema"],
            "https://www.speedscope.app/file-format-schema.json"
        );
        let frames: Vec<&str> = v["shared"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(frames.len(), 7);
        let p = &v["profiles"][0];
        assert_eq!(p["type"], "sampled");
        assert_eq!(p["unit"], "microseconds");
        assert_eq!(p["name"], "Wall-clock time of backend 7");
        assert_eq!(p["startValue"], 0);
        assert_eq!(p["endValue"], 1000);
        assert_eq!(p["weights"], serde_json::json!([700, 250, 50]));
        let second: Vec<&str> = p["samples"][1]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| frames[i.as_u64().unwrap() as usize])
            .collect();
        assert_eq!(second, ["[on-CPU]", "main", "f", "g", "f"]);
        // on-CPU samples have no unit of time
        let meta = Meta {
            weight: Weight::Samples { hz: 99 },
            ..meta
        };
        let v: serde_json::Value = serde_json::from_str(&speedscope(&folded(), &meta)).unwrap();
        assert_eq!(v["profiles"][0]["unit"], "none");
    }
}
