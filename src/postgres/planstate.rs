//! The running plan state tree of a statement: the layouts it is read
//! with, its nodes walked in ExplainNode's order, and their
//! `Instrumentation` saved so that making the plan text (ExplainNode ends
//! each instrumented node's loop) can be undone.  Below `explain.rs`,
//! which saves and restores around the plan text, and `progress.rs`,
//! which walks the tree to count rows.

use super::backend::Backend;
use crate::debuginfo::layout::Layout;
use crate::debuginfo::types::{Type, strip};
use anyhow::{Result, bail};

/// One node of the running tree, in ExplainNode's order.
#[derive(Debug, Clone)]
pub struct Node {
    pub addr: u64,
    /// NodeTag name without `T_` (SeqScanState, HashJoinState, ...).
    pub tag: String,
    /// Its plan node's `plan_node_id`: the same node in a parallel
    /// worker's part of the plan has the same.
    pub plan_id: Option<i32>,
}

pub(super) struct Layouts {
    pub(super) ps: Layout,
    pub(super) list: Layout,
    pub(super) instr: Layout,
    /// `Plan` (for `plan_node_id`), if the debug info has it.
    pub(super) plan: Option<Layout>,
    pub(super) tags: Vec<(String, i64)>,
}

impl Layouts {
    pub(super) fn of(s: &dyn Backend) -> Result<Layouts> {
        let ps = s.layout("PlanState")?;
        let tags = match &*strip(s.di(), &ps.field("type")?.ty) {
            Type::Enum { values, .. } => values.clone(),
            _ => bail!("PlanState.type is not an enum in this build's debug info"),
        };
        Ok(Layouts {
            ps,
            list: s.layout("List")?,
            instr: s.layout("Instrumentation")?,
            plan: s.layout("Plan").ok(),
            tags,
        })
    }

    /// `planstate->plan->plan_node_id`.
    pub(super) fn plan_id(&self, s: &dyn Backend, ps: u64) -> Option<i32> {
        let pl = self.plan.as_ref()?;
        let plan = s.read_u64(ps + self.ps.offset("plan").ok()?).ok()?;
        if plan == 0 {
            return None;
        }
        s.read_i32(plan + pl.offset("plan_node_id").ok()?).ok()
    }
}

fn tag_name(l: &Layouts, v: i64) -> String {
    l.tags
        .iter()
        .find(|(_, x)| *x == v)
        .map(|(n, _)| n.trim_start_matches("T_").to_string())
        .unwrap_or_else(|| format!("node {v}"))
}

/// The pointers of a `List *` of pointers.
fn list_ptrs(s: &dyn Backend, l: &Layouts, list: u64) -> Result<Vec<u64>> {
    if list == 0 {
        return Ok(Vec::new());
    }
    let n = s
        .read_i32(list + l.list.offset("length")?)?
        .clamp(0, 100_000) as usize;
    let elems = s.read_u64(list + l.list.offset("elements")?)?;
    let b = s.read_bytes(elems, n * 8)?;
    Ok(b.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
        .collect())
}

/// The plan state tree under `root` in ExplainNode's order: initPlans,
/// outer, inner, the node's own children (Append, MergeAppend, BitmapAnd/
/// Or, SubqueryScan, CustomScan), subPlans.
pub(super) fn walk(
    s: &dyn Backend,
    l: &Layouts,
    ps: u64,
    out: &mut Vec<Node>,
    depth: usize,
) -> Result<()> {
    if ps == 0 || depth > 200 || out.len() > 10_000 {
        return Ok(());
    }
    let tag = tag_name(l, s.read_i32(ps + l.ps.offset("type")?)? as i64);
    out.push(Node {
        addr: ps,
        tag: tag.clone(),
        plan_id: l.plan_id(s, ps),
    });
    let sub_planstate = |sps: u64| -> Result<u64> {
        let spl = s.layout("SubPlanState")?;
        s.read_u64(sps + spl.offset("planstate")?)
    };
    for sps in list_ptrs(s, l, s.read_u64(ps + l.ps.offset("initPlan")?)?)? {
        walk(s, l, sub_planstate(sps)?, out, depth + 1)?;
    }
    walk(
        s,
        l,
        s.read_u64(ps + l.ps.offset("lefttree")?)?,
        out,
        depth + 1,
    )?;
    walk(
        s,
        l,
        s.read_u64(ps + l.ps.offset("righttree")?)?,
        out,
        depth + 1,
    )?;
    let array = |ty: &str, arr: &str, n: &str| -> Result<Vec<u64>> {
        let tl = s.layout(ty)?;
        let a = s.read_u64(ps + tl.offset(arr)?)?;
        let k = s.read_i32(ps + tl.offset(n)?)?.clamp(0, 100_000) as usize;
        if a == 0 || k == 0 {
            return Ok(Vec::new());
        }
        let b = s.read_bytes(a, k * 8)?;
        Ok(b.chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
            .collect())
    };
    let special = match tag.as_str() {
        "AppendState" => array("AppendState", "appendplans", "as_nplans")?,
        "MergeAppendState" => array("MergeAppendState", "mergeplans", "ms_nplans")?,
        "BitmapAndState" => array("BitmapAndState", "bitmapplans", "nplans")?,
        "BitmapOrState" => array("BitmapOrState", "bitmapplans", "nplans")?,
        "SubqueryScanState" => {
            let tl = s.layout("SubqueryScanState")?;
            vec![s.read_u64(ps + tl.offset("subplan")?)?]
        }
        "CustomScanState" => {
            let tl = s.layout("CustomScanState")?;
            list_ptrs(s, l, s.read_u64(ps + tl.offset("custom_ps")?)?)?
        }
        _ => Vec::new(),
    };
    for c in special {
        walk(s, l, c, out, depth + 1)?;
    }
    for sps in list_ptrs(s, l, s.read_u64(ps + l.ps.offset("subPlan")?)?)? {
        walk(s, l, sub_planstate(sps)?, out, depth + 1)?;
    }
    Ok(())
}

/// The `Instrumentation` of each instrumented node: (address, bytes).
fn save_instrumentation(
    s: &dyn Backend,
    l: &Layouts,
    nodes: &[Node],
) -> Result<Vec<(u64, Vec<u8>)>> {
    let instr_off = l.ps.offset("instrument")?;
    let mut out = Vec::new();
    for n in nodes {
        let ia = s.read_u64(n.addr + instr_off)?;
        if ia != 0 {
            out.push((ia, s.read_bytes(ia, l.instr.size as usize)?));
        }
    }
    Ok(out)
}

/// The `Instrumentation` of every instrumented node of `qd`'s running
/// plan state tree, (address, bytes), to be written back after the plan
/// text is made.  Without the layouts (a build known only by its layout
/// pack) the tree cannot be walked: refused when the statement is
/// instrumented (`instrument_options` set: its own EXPLAIN ANALYZE or
/// auto_explain), empty otherwise.
pub fn instrumentation_of(s: &dyn Backend, qd: u64) -> Result<Vec<(u64, Vec<u8>)>> {
    let qd_l = s.layout("QueryDesc")?;
    let root = s.read_u64(qd + qd_l.offset("planstate")?)?;
    if root == 0 {
        return Ok(Vec::new());
    }
    let l = match Layouts::of(s) {
        Ok(l) => l,
        Err(e) => {
            if s.read_i32(qd + qd_l.offset("instrument_options")?)? != 0 {
                bail!(
                    "the statement measures itself (EXPLAIN ANALYZE or auto_explain) and making its plan text would end its nodes' loops; putting them back needs the server's debug info ({e:#})"
                );
            }
            return Ok(Vec::new());
        }
    };
    let mut nodes = Vec::new();
    walk(s, &l, root, &mut nodes, 0)?;
    save_instrumentation(s, &l, &nodes)
}
