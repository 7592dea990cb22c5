//! Reading back the files of `profile --speedscope` and `--pprof` as
//! folded stacks: speedscope's JSON with serde_json, pprof's profile.proto
//! with prost over the messages below (field numbers and types as in
//! github.com/google/pprof, proto/profile.proto).  Used by the unit tests
//! of `src/perf/pprof.rs` and by `tests/profile.rs`, `tests/profile_wall.rs`.

#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

impl Profile {
    /// A sample's frame names, innermost first: its locations followed to
    /// their functions' names by id, as pprof does.
    pub fn frames(&self, s: &Sample) -> Vec<String> {
        let name_of_location = |id: u64| -> String {
            let loc = self
                .location
                .iter()
                .find(|l| l.id == id)
                .unwrap_or_else(|| panic!("no location {id}"));
            assert_eq!(loc.line.len(), 1, "one function per location: {loc:?}");
            let f = self
                .function
                .iter()
                .find(|f| f.id == loc.line[0].function_id)
                .unwrap_or_else(|| panic!("no function of {loc:?}"));
            self.string_table[f.name as usize].clone()
        };
        s.location_id
            .iter()
            .map(|id| name_of_location(*id))
            .collect()
    }

    /// Each sample value's (type, unit), named from the string table.
    pub fn sample_types(&self) -> Vec<(&str, &str)> {
        let st = |i: i64| self.string_table[i as usize].as_str();
        self.sample_type
            .iter()
            .map(|t| (st(t.r#type), st(t.unit)))
            .collect()
    }

    /// Each sample as a folded line, root first, and its values.
    pub fn folded(&self) -> Vec<(String, Vec<i64>)> {
        self.sample
            .iter()
            .map(|s| {
                let mut names = self.frames(s);
                names.reverse();
                (names.join(";"), s.value.clone())
            })
            .collect()
    }
}

/// A pprof file (gzipped) decoded.
pub fn read_pprof(path: &std::path::Path) -> Profile {
    use prost::Message as _;
    let gz = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw)
        .unwrap_or_else(|e| panic!("{} is not gzipped: {e}", path.display()));
    Profile::decode(&raw[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A speedscope file's first profile as folded lines (root first) and
/// weights, checked against the file format's schema on the way: a
/// "sampled" profile over the shared frames, as many weights as samples,
/// its end value their sum.  Also its unit.
pub fn speedscope_folded(path: &std::path::Path) -> (Vec<(String, u64)>, String) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["$schema"], "https://www.speedscope.app/file-format-schema.json",
        "{text}"
    );
    let frames: Vec<&str> = v["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let p = &v["profiles"][0];
    assert_eq!(p["type"], "sampled", "{p}");
    let samples = p["samples"].as_array().unwrap();
    let weights = p["weights"].as_array().unwrap();
    assert_eq!(samples.len(), weights.len(), "a weight per sample: {p}");
    let folded: Vec<(String, u64)> = samples
        .iter()
        .zip(weights)
        .map(|(s, w)| {
            let names: Vec<&str> = s
                .as_array()
                .unwrap()
                .iter()
                .map(|i| frames[i.as_u64().unwrap() as usize])
                .collect();
            (names.join(";"), w.as_u64().unwrap())
        })
        .collect();
    let total: u64 = folded.iter().map(|(_, n)| n).sum();
    assert_eq!(p["startValue"], 0);
    assert_eq!(p["endValue"], total, "the end value is the weights' sum");
    (folded, p["unit"].as_str().unwrap().to_string())
}
