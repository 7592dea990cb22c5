//! `profile`'s folded stacks as a pprof profile: profile.proto
//! (github.com/google/pprof, proto/profile.proto) encoded here, gzipped.
//! One function and one location per distinct frame name (no addresses:
//! the stacks are named already); a sample lists its locations innermost
//! first, so the folded stacks' root (`[on-CPU]`, `[off-CPU: sleeping]`,
//! ...) stays the outermost frame.

use super::export::{Meta, Stacks, Weight};
use anyhow::Result;
use std::io::Write;

/// A protocol buffer message being written: varints and length-delimited
/// fields, zero scalars left out as proto3 does.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u64, wire_type: u64) {
        self.varint(field << 3 | wire_type);
    }

    /// An int64 or uint64 field (the values here are never negative).
    fn int(&mut self, field: u64, v: u64) -> &mut Self {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
        self
    }

    fn bytes(&mut self, field: u64, b: &[u8]) -> &mut Self {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn message(&mut self, field: u64, m: &Message) -> &mut Self {
        self.bytes(field, &m.0)
    }

    /// A packed repeated int64/uint64 field.
    fn packed(&mut self, field: u64, vs: &[u64]) -> &mut Self {
        let mut m = Message::default();
        for v in vs {
            m.varint(*v);
        }
        self.bytes(field, &m.0)
    }
}

/// The string table: each string once, "" first as profile.proto wants.
struct Strings(Vec<String>);

impl Strings {
    fn id(&mut self, s: &str) -> u64 {
        match self.0.iter().position(|t| t == s) {
            Some(i) => i as u64,
            None => {
                self.0.push(s.to_string());
                (self.0.len() - 1) as u64
            }
        }
    }
}

/// A ValueType message: the ids of its type and unit.
fn value_type(strings: &mut Strings, ty: &str, unit: &str) -> Message {
    let mut m = Message::default();
    m.int(1, strings.id(ty)).int(2, strings.id(unit));
    m
}

/// The Profile message of `folded`, not compressed.  On-CPU samples give
/// two values per stack, samples/count and cpu/nanoseconds (the samples
/// times their nominal period); off-CPU and wall-clock microseconds one,
/// off-cpu/nanoseconds or wall/nanoseconds.
pub fn encode(folded: &[(String, u64)], meta: &Meta, time_ns: u64) -> Vec<u8> {
    let s = Stacks::of(folded);
    let mut strings = Strings(vec![String::new()]);
    let mut p = Message::default();
    let (kind, period_ns) = match meta.weight {
        Weight::Samples { hz } => {
            p.message(1, &value_type(&mut strings, "samples", "count"));
            ("cpu", 1_000_000_000 / hz.max(1))
        }
        Weight::Micros(kind) => (kind, 0),
    };
    p.message(1, &value_type(&mut strings, kind, "nanoseconds"));
    for (ids, n) in &s.stacks {
        let locations: Vec<u64> = ids.iter().rev().map(|i| *i as u64 + 1).collect();
        let values = match meta.weight {
            Weight::Samples { .. } => vec![*n, n * period_ns],
            Weight::Micros(_) => vec![n * 1000],
        };
        let mut sample = Message::default();
        sample.packed(1, &locations).packed(2, &values);
        p.message(2, &sample);
    }
    // location i+1 is function i+1: one line, no address
    for i in 0..s.names.len() as u64 {
        let mut line = Message::default();
        line.int(1, i + 1);
        let mut loc = Message::default();
        loc.int(1, i + 1).message(4, &line);
        p.message(4, &loc);
    }
    for (i, name) in s.names.iter().enumerate() {
        let id = strings.id(name);
        let mut f = Message::default();
        f.int(1, i as u64 + 1).int(2, id).int(3, id);
        p.message(5, &f);
    }
    let period_type = value_type(&mut strings, kind, "nanoseconds");
    let kind_id = strings.id(kind);
    let comment = strings.id(&meta.name);
    for t in &strings.0 {
        p.bytes(6, t.as_bytes());
    }
    let duration_ns = (meta.duration_s * 1e9) as u64;
    p.int(9, time_ns.saturating_sub(duration_ns))
        .int(10, duration_ns)
        .message(11, &period_type)
        .int(12, period_ns)
        .packed(13, &[comment])
        .int(14, kind_id);
    p.0
}

/// [`encode`]d and gzipped, as `go tool pprof` and its kin read it.
pub fn gzipped(folded: &[(String, u64)], meta: &Meta) -> Result<Vec<u8>> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&encode(folded, meta, now))?;
    Ok(gz.finish()?)
}

#[cfg(test)]
#[allow(dead_code)]
#[path = "../../testbed/src/profile_files.rs"]
mod profile_files;

#[cfg(test)]
mod tests {
    use super::profile_files::Profile;
    use super::*;
    use crate::perf::export::tests::folded;
    use prost::Message as _;

    fn meta(weight: Weight) -> Meta {
        Meta {
            name: "a profile".into(),
            weight,
            duration_s: 2.0,
        }
    }

    #[test]
    fn varints() {
        let mut m = Message::default();
        m.varint(0);
        m.varint(1);
        m.varint(127);
        m.varint(128);
        m.varint(300);
        m.varint(u64::MAX);
        let mut want = vec![0, 1, 0x7f, 0x80, 0x01, 0xac, 0x02];
        want.extend([0xff; 9]);
        want.push(0x01);
        assert_eq!(m.0, want);
    }

    #[test]
    fn wall_clock_stacks_read_back() {
        let f = folded();
        let p =
            Profile::decode(&encode(&f, &meta(Weight::Micros("wall")), 5_000_000_000)[..]).unwrap();
        let st = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(st(0), "");
        assert_eq!(p.sample_types(), [("wall", "nanoseconds")]);
        assert_eq!(st(p.default_sample_type), "wall");
        assert_eq!(p.duration_nanos, 2_000_000_000);
        assert_eq!(p.time_nanos, 3_000_000_000);
        assert_eq!(st(p.comment[0]), "a profile");
        // every sample's stack, root first, and its nanoseconds: the
        // folded stacks back
        let back = p.folded();
        assert_eq!(
            back,
            [
                (
                    "[off-CPU: sleeping];main;f;pg_sleep".to_string(),
                    vec![700_000]
                ),
                ("[on-CPU];main;f;g;f".to_string(), vec![250_000]),
                ("[on-CPU];main;h".to_string(), vec![50_000]),
            ]
        );
        // each frame is one function and one location
        assert_eq!(p.function.len(), 7);
        assert_eq!(p.location.len(), 7);
    }

    #[test]
    fn on_cpu_samples_and_cpu_time() {
        let f = folded();
        let p = Profile::decode(&encode(&f, &meta(Weight::Samples { hz: 100 }), 0)[..]).unwrap();
        let st = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(
            p.sample_types(),
            [("samples", "count"), ("cpu", "nanoseconds")]
        );
        assert_eq!(p.period, 10_000_000);
        let pt = p.period_type.as_ref().unwrap();
        assert_eq!((st(pt.r#type), st(pt.unit)), ("cpu", "nanoseconds"));
        assert_eq!(p.folded()[2].1, [50, 500_000_000]);
        // gzip around the same bytes
        let gz = gzipped(&f, &meta(Weight::Samples { hz: 100 })).unwrap();
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        assert_eq!(Profile::decode(&raw[..]).unwrap().folded(), p.folded());
    }
}
