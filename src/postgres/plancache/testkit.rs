//! Fixtures of the plan-cache unit tests: plansources in a fake backend's
//! memory map, laid out by test layouts (offsets invented here, as a DWARF
//! layout would give them), counters moved as GetCachedPlan moves them.

pub(super) use super::ring::RECORDED_FIELDS;
pub use super::*;
pub use crate::debuginfo::layout::FieldKind::{Bool, Float, Pointer, Signed};
pub use crate::inferior::recorder::Record;
pub use crate::postgres::backend::fake::{FakeBackend, layout};

/// Two CachedPlanSources.
pub const P: u64 = 0x1000;
pub const P2: u64 = 0x2000;
/// Their query strings.
pub const QUERY: u64 = 0x8000;
pub const QUERY2: u64 = 0x8800;
/// plan_cache_mode
pub const MODE: u64 = 0x9000;
/// A ParamListInfo (boundParams)
pub const PARAMS: u64 = 0x7f00_0000;
/// GetCachedPlan's entry, a return address in its caller, a stack.
pub const ENTRY: u64 = 0x40_0000;
pub const RET: u64 = 0x40_1234;
pub const STACK: u64 = 0x7ffd_0000;
/// A generic CachedPlan.
pub const GPLAN: u64 = 0x5000;

pub const S1: &str = "PREPARE s1 (int) AS SELECT * FROM t WHERE a = $1";

pub fn cps_layout(num_generic_plans: bool) -> Layout {
    let mut f = vec![
        ("magic", 4, Signed),
        ("query_string", 8, Pointer),
        ("gplan", 8, Pointer),
        ("num_custom_plans", 8, Signed),
    ];
    if num_generic_plans {
        f.push(("num_generic_plans", 8, Signed));
    }
    f.extend([
        ("total_custom_cost", 8, Float),
        ("generic_cost", 8, Float),
        ("is_oneshot", 1, Bool),
    ]);
    layout("CachedPlanSource", &f)
}

pub fn layouts(cps: Layout) -> PlanCacheLayouts {
    PlanCacheLayouts {
        cps,
        cplan: layout("CachedPlan", &[("stmt_list", 8, Pointer)]),
        list: None,
        pstmt: layout("PlannedStmt", &[("rtable", 8, Pointer)]),
        entries: vec![ENTRY],
        prepared_queries: None,
        hash: None,
        prep: None,
        plan_cache_mode: Some((
            MODE,
            vec![
                ("auto".into(), 0),
                ("force_generic_plan".into(), 1),
                ("force_custom_plan".into(), 2),
            ],
        )),
        cpu_operator_cost: None,
    }
}

/// A CachedPlanSource's state.
#[derive(Clone, Copy)]
pub struct Ps {
    pub magic: i64,
    pub query: u64,
    pub gplan: u64,
    pub custom: i64,
    pub generic: i64,
    pub total: f64,
    pub generic_cost: f64,
    pub oneshot: bool,
}

impl Ps {
    pub fn new() -> Ps {
        Ps {
            magic: CACHEDPLANSOURCE_MAGIC,
            query: QUERY,
            gplan: 0,
            custom: 0,
            generic: 0,
            total: 0.0,
            // PostgreSQL's value until the generic plan is built
            generic_cost: -1.0,
            oneshot: false,
        }
    }

    pub fn bytes(&self, l: &Layout) -> Vec<u8> {
        let mut b = vec![0u8; l.size as usize];
        let fields: [(&str, [u8; 8]); 8] = [
            ("magic", self.magic.to_le_bytes()),
            ("query_string", self.query.to_le_bytes()),
            ("gplan", self.gplan.to_le_bytes()),
            ("num_custom_plans", self.custom.to_le_bytes()),
            ("num_generic_plans", self.generic.to_le_bytes()),
            ("total_custom_cost", self.total.to_le_bytes()),
            ("generic_cost", self.generic_cost.to_le_bytes()),
            ("is_oneshot", (self.oneshot as u64).to_le_bytes()),
        ];
        for (f, v) in fields {
            if let Ok(fl) = l.field(f) {
                let (o, n) = (fl.offset as usize, fl.size as usize);
                b[o..o + n].copy_from_slice(&v[..n]);
            }
        }
        b
    }

    /// What the in-process recorder copies of it: the recorded fields
    /// in place, zeros elsewhere.
    pub fn recorded(&self, l: &Layout) -> Vec<u8> {
        let full = self.bytes(l);
        let mut b = vec![0u8; full.len()];
        for f in RECORDED_FIELDS {
            if let Ok(fl) = l.field(f) {
                let (o, n) = (fl.offset as usize, fl.size as usize);
                b[o..o + n].copy_from_slice(&full[o..o + n]);
            }
        }
        b
    }

    /// GetCachedPlan chose a custom plan costing `cost`.
    pub fn custom(mut self, cost: f64) -> Ps {
        self.custom += 1;
        self.total += cost;
        self
    }

    /// GetCachedPlan chose the generic plan (built at `cost`).
    pub fn generic(mut self, cost: f64) -> Ps {
        self.generic += 1;
        self.generic_cost = cost;
        self.gplan = GPLAN;
        self
    }
}

pub fn record(ps: u64, st: &Ps, l: &Layout, mode: u32, ts: f64) -> (Record, f64) {
    (
        Record {
            seq: 0,
            tsc: 0,
            rdi: ps,
            rsi: PARAMS,
            global32: mode,
            fields: st.recorded(l),
            text: None,
        },
        ts,
    )
}

/// `record` with the start of its text as the recorder copies it (the
/// first `TEXT_START` bytes, whole if shorter).
pub fn record_text(ps: u64, st: &Ps, l: &Layout, text: &str, ts: f64) -> (Record, f64) {
    let mut r = record(ps, st, l, 0, ts);
    let b = text.as_bytes();
    let n = b.len().min(super::ring::TEXT_START as usize);
    r.0.text = Some(crate::inferior::recorder::TextStart {
        bytes: b[..n].to_vec(),
        complete: b.len() < super::ring::TEXT_START as usize,
    });
    r
}

pub fn backend() -> FakeBackend {
    let mut s = FakeBackend::new();
    s.map_str(QUERY, S1);
    s.map_str(QUERY2, "SELECT count(*) FROM t WHERE b = $1");
    s.map(MODE, 0i32.to_le_bytes().to_vec());
    s
}

/// `plancache --fast` recording in-process (the ring's records are
/// given by the test).
pub fn ring_probe(count: Option<u64>) -> PlanCacheProbe {
    PlanCacheProbe::new(layouts(cps_layout(true)), count, true, true).unwrap()
}

pub fn choices(s: &FakeBackend) -> Vec<serde_json::Value> {
    s.events_named("plan_choice").into_iter().cloned().collect()
}
