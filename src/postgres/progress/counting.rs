//! Rows-only counting installed into a running plan state tree (the
//! leader's or a parallel worker's; see `progress.rs`'s module text), and
//! reading one node's counters.

use super::{Layouts, Node};
use crate::infcall::Arg;
use crate::postgres::backend::Backend;
use crate::postgres::call::{BackendCalls, Called};
use anyhow::{Result, anyhow, bail};

/// What installing rows-only counting into a running tree found.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Counting {
    /// Every node has instrumentation already (the statement's own): it is
    /// only read.
    Own,
    /// Every node has the rows counting an earlier `plan --progress` left
    /// in the tree (it stays until the statement ends): it is only read.
    Earlier,
    /// Some nodes have instrumentation, others not: nothing installed.
    Partial,
    /// The functions it needs are not in this binary: nothing installed.
    Missing(String),
    /// Installed: one zeroed `Instrumentation` per node, in `nodes`'
    /// order, from this address.
    Installed(u64),
}

/// Rows-only instrumentation into the running tree `nodes` of the
/// statement whose `EState` is `estate` (see the module text), at a safe
/// stop of `s`: the array allocated in the statement's `es_query_cxt`,
/// each node's `instrument` set before its `ExecProcNode` is switched.
pub(super) fn install_rows_counting(
    s: &mut dyn Backend,
    l: &Layouts,
    nodes: &[Node],
    estate: u64,
) -> Result<Counting> {
    let instr_off = l.ps.offset("instrument")?;
    let mut have = 0;
    for n in nodes {
        if s.read_u64(n.addr + instr_off)? != 0 {
            have += 1;
        }
    }
    if have == nodes.len() {
        return Ok(if left_by_earlier_progress(s, l, nodes)? {
            Counting::Earlier
        } else {
            Counting::Own
        });
    }
    if have != 0 {
        return Ok(Counting::Partial);
    }
    let first = s.function_addrs("ExecProcNodeFirst");
    let instr_fn = s.function_addrs("ExecProcNodeInstr");
    let alloc = s.function_addrs("MemoryContextAllocZero");
    let (Some(&first), Some(&instr_fn), Some(&alloc)) =
        (first.first(), instr_fn.first(), alloc.first())
    else {
        return Ok(Counting::Missing(
            "ExecProcNodeFirst/ExecProcNodeInstr/MemoryContextAllocZero not in this binary".into(),
        ));
    };
    let es_l = s.layout("EState")?;
    let cxt = s.read_u64(estate + es_l.offset("es_query_cxt")?)?;
    let epn = l.ps.offset("ExecProcNode")?;
    let epn_real = l.ps.offset("ExecProcNodeReal")?;
    let size = l.instr.size;
    let n = nodes.len() as u64;
    let timeout = s.call_timeout();
    let arr = {
        let mut calls = BackendCalls::open(s, timeout, false)?;
        let r = calls.call_addr(alloc, &[Arg::Int(cxt), Arg::Int(n * size)])?;
        calls.close()?;
        match r {
            Called::Value(r) if r.rax != 0 => r.rax,
            Called::Value(_) => bail!("MemoryContextAllocZero returned NULL"),
            Called::Error(e) => {
                return Err(anyhow!(
                    "MemoryContextAllocZero raised an ERROR inside the backend: {e}"
                ));
            }
        }
    };
    for (i, node) in nodes.iter().enumerate() {
        let a = arr + i as u64 * size;
        s.write_own_field(node.addr + instr_off, &a.to_le_bytes())?;
        // past its first call (ExecProcNodeFirst chose the real
        // function): the wrapper ExecProcNodeFirst would have chosen
        let f = s.read_u64(node.addr + epn)?;
        let real = s.read_u64(node.addr + epn_real)?;
        if f == real && f != first && f != instr_fn {
            s.write_own_field(node.addr + epn, &instr_fn.to_le_bytes())?;
        }
    }
    Ok(Counting::Installed(arr))
}

/// Whether the tree's instrumentation is the one an earlier `plan
/// --progress` installed: one array with the nodes' `Instrumentation`s
/// side by side in the nodes' order (below).  PostgreSQL allocates each
/// node's own (`InstrAlloc`, one palloc each, a chunk header between
/// them), so its are never exactly `size` bytes apart; a tree of one node
/// cannot tell, and is taken as the statement's own.
fn left_by_earlier_progress(s: &dyn Backend, l: &Layouts, nodes: &[Node]) -> Result<bool> {
    if nodes.len() < 2 {
        return Ok(false);
    }
    let instr_off = l.ps.offset("instrument")?;
    let first = s.read_u64(nodes[0].addr + instr_off)?;
    for (i, n) in nodes.iter().enumerate().skip(1) {
        if s.read_u64(n.addr + instr_off)? != first + i as u64 * l.instr.size {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Rows and loops from one node's `Instrumentation` bytes.
pub(super) fn rows_loops(l: &Layouts, b: &[u8]) -> (f64, f64) {
    let f = |n: &str| l.instr.offset(n).ok();
    let d = |o: Option<u64>| {
        o.and_then(|o| b.get(o as usize..o as usize + 8))
            .map(|x| f64::from_le_bytes(x.try_into().expect("8")))
            .unwrap_or(0.0)
    };
    let running = f("running")
        .and_then(|o| b.get(o as usize))
        .is_some_and(|x| *x != 0);
    (
        d(f("ntuples")) + d(f("tuplecount")),
        d(f("nloops")) + if running { 1.0 } else { 0.0 },
    )
}
