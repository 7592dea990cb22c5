//! DWARF location expressions and location lists, evaluated against one
//! frame of the target (its registers, CFA and memory).

use super::R;
use anyhow::{Result, anyhow};
use gimli::{EvaluationResult, Location, Value};

/// What a frame offers to location evaluation.
pub trait FrameContext {
    /// A DWARF-numbered register in this frame; None when not recoverable.
    fn reg(&self, n: u16) -> Option<u64>;
    fn cfa(&self) -> Option<u64>;
    fn frame_base(&self) -> Option<u64>;
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<()>;
    /// Load bias to add to link-time addresses.
    fn bias(&self) -> u64;
    /// Value of `DW_OP_entry_value(expr)`, when it can be resolved from the
    /// caller's call site.
    fn entry_value(&self, _expr: &gimli::Expression<R>) -> Option<u64> {
        None
    }
}

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Memory(u64),
    /// The object's bytes (from registers, DW_OP_stack_value, pieces...).
    Bytes(Vec<u8>),
    OptimizedOut,
    /// The register holding it is not saved in this (outer) frame.
    NotSaved(u16),
}

/// Evaluate a location expression for an object of `size` bytes.
pub fn eval_location(
    expr: gimli::Expression<R>,
    encoding: gimli::Encoding,
    size: u64,
    ctx: &dyn FrameContext,
    dwarf: &super::Dwarf,
    unit: &gimli::Unit<R>,
) -> Result<Place> {
    if expr.0.is_empty() {
        return Ok(Place::OptimizedOut);
    }
    let mut eval = expr.evaluation(encoding);
    let mut res = eval
        .evaluate()
        .map_err(|e| anyhow!("bad DWARF expression: {e}"))?;
    loop {
        res = match res {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresRegister { register, .. } => match ctx.reg(register.0) {
                Some(v) => eval.resume_with_register(Value::Generic(v)),
                None => return Ok(Place::NotSaved(register.0)),
            },
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let mut b = [0u8; 8];
                let n = (size as usize).min(8);
                ctx.read_mem(address, &mut b[..n])?;
                eval.resume_with_memory(Value::Generic(u64::from_le_bytes(b)))
            }
            EvaluationResult::RequiresFrameBase => match ctx.frame_base() {
                Some(fb) => eval.resume_with_frame_base(fb),
                None => return Ok(Place::OptimizedOut),
            },
            EvaluationResult::RequiresCallFrameCfa => match ctx.cfa() {
                Some(c) => eval.resume_with_call_frame_cfa(c),
                None => return Ok(Place::OptimizedOut),
            },
            EvaluationResult::RequiresRelocatedAddress(a) => {
                eval.resume_with_relocated_address(a + ctx.bias())
            }
            EvaluationResult::RequiresIndexedAddress { index, relocate } => {
                let a = dwarf.address(unit, index).map_err(|e| anyhow!("{e}"))?;
                eval.resume_with_indexed_address(if relocate { a + ctx.bias() } else { a })
            }
            EvaluationResult::RequiresEntryValue(e) => match ctx.entry_value(&e) {
                Some(v) => eval.resume_with_entry_value(Value::Generic(v)),
                None => return Ok(Place::OptimizedOut),
            },
            EvaluationResult::RequiresBaseType(_) => {
                eval.resume_with_base_type(gimli::ValueType::Generic)
            }
            _ => return Ok(Place::OptimizedOut),
        }
        .map_err(|e| anyhow!("bad DWARF expression: {e}"))?;
    }
    let pieces = eval.result();
    if pieces.len() == 1 && pieces[0].size_in_bits.is_none() {
        return single(&pieces[0].location, size, ctx);
    }
    // Composite location: assemble the bytes.
    let mut out = vec![0u8; size as usize];
    let mut bitpos = 0u64;
    for p in &pieces {
        let bits = p.size_in_bits.unwrap_or(size * 8);
        let bytes = match single(&p.location, bits.div_ceil(8), ctx)? {
            Place::Memory(a) => {
                let mut b = vec![0u8; bits.div_ceil(8) as usize];
                ctx.read_mem(a, &mut b)?;
                b
            }
            Place::Bytes(b) => b,
            other => return Ok(other),
        };
        // Only byte-aligned pieces are supported (what gcc emits on x86-64).
        let start = (bitpos / 8) as usize;
        for (i, b) in bytes.iter().enumerate().take((bits / 8) as usize) {
            if start + i < out.len() {
                out[start + i] = *b;
            }
        }
        bitpos += bits;
    }
    Ok(Place::Bytes(out))
}

fn single(loc: &Location<R>, size: u64, ctx: &dyn FrameContext) -> Result<Place> {
    Ok(match loc {
        Location::Empty => Place::OptimizedOut,
        Location::Address { address } => Place::Memory(*address),
        Location::Register { register } => match ctx.reg(register.0) {
            Some(v) => Place::Bytes(v.to_le_bytes()[..(size.min(8)) as usize].to_vec()),
            None if register.0 >= 17 => Place::OptimizedOut,
            None => Place::NotSaved(register.0),
        },
        Location::Value { value } => {
            let v = match *value {
                Value::Generic(v) => v,
                Value::I8(v) => v as u64,
                Value::U8(v) => v as u64,
                Value::I16(v) => v as u64,
                Value::U16(v) => v as u64,
                Value::I32(v) => v as u64,
                Value::U32(v) => v as u64,
                Value::I64(v) => v as u64,
                Value::U64(v) => v,
                Value::F32(v) => v.to_bits() as u64,
                Value::F64(v) => v.to_bits(),
            };
            Place::Bytes(v.to_le_bytes()[..(size.min(8)) as usize].to_vec())
        }
        Location::Bytes { value } => Place::Bytes(value.slice().to_vec()),
        Location::ImplicitPointer { .. } => Place::OptimizedOut,
    })
}
