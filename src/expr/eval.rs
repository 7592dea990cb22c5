//! Evaluate parsed expressions over DWARF types and target memory.

use super::parse::{BinOp, Expr, SizeofArg, TypeSpec};
use crate::debuginfo::types::{Encoding, Type, TypeRef, TypeSource, size_of, strip, type_name};
use anyhow::{Result, anyhow, bail};
use std::rc::Rc;

/// An evaluation that failed on a value, not on a type: what the checks
/// made before attaching let pass (every read gives zeros there, and
/// there is no value history yet).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ValueError {
    #[error("division by zero")]
    DivisionByZero,
    /// `$`, `$N`: no such value in the history.
    #[error("history is empty or has no value ${}", .0.map(|x| x.to_string()).unwrap_or_default())]
    NoHistory(Option<usize>),
    /// `a@n` with `n` below 1.
    #[error("'@' needs a positive count, not {0}")]
    AtCount(i64),
}

/// The [`ValueError`] in `e`'s chain, if that is what `e` is about.
pub fn value_error(e: &anyhow::Error) -> Option<&ValueError> {
    e.chain().find_map(|c| c.downcast_ref::<ValueError>())
}

#[derive(Clone, Debug)]
pub enum ValLoc {
    Memory(u64),
    Bytes(Vec<u8>),
    /// "<optimized out>", "<not saved>"
    Unavailable(String),
}

#[derive(Clone, Debug)]
pub struct Value {
    pub ty: TypeRef,
    pub loc: ValLoc,
}

/// What evaluation needs from the debugger session.
pub trait EvalEnv: TypeSource {
    /// A variable visible at the current stop (locals/params of the selected
    /// frame first, then globals).  Ok(None) when unknown.
    fn variable(&self, name: &str) -> Result<Option<Value>>;
    /// A function's runtime address (for `print func`).
    fn function_address(&self, name: &str) -> Option<u64>;
    fn register(&self, name: &str) -> Option<u64>;
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<()>;
    fn history(&self, n: Option<usize>) -> Option<Value>;
    /// Symbol name for a runtime code address.
    fn symbol_for(&self, addr: u64) -> Option<String>;
    /// A function's type from its debug info (return and parameter
    /// types), for `print FUNC`, `whatis FUNC`, `ptype FUNC`.
    fn function_type(&self, _name: &str) -> Option<TypeRef> {
        None
    }
    /// Symbol name for a runtime address of static data.
    fn data_symbol_for(&self, _addr: u64) -> Option<String> {
        None
    }
    /// An enumerator's type and value (`RELOID`, `T_SeqScan`).
    fn enumerator(&self, _name: &str) -> Option<(TypeRef, i64)> {
        None
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    I(i64),
    U(u64),
    F(f64),
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::I(v) => v as f64,
            Scalar::U(v) => v as f64,
            Scalar::F(v) => v,
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::I(v) => v,
            Scalar::U(v) => v as i64,
            Scalar::F(v) => v as i64,
        }
    }
    pub fn truthy(self) -> bool {
        match self {
            Scalar::I(v) => v != 0,
            Scalar::U(v) => v != 0,
            Scalar::F(v) => v != 0.0,
        }
    }
}

pub fn bytes_of(env: &dyn EvalEnv, v: &Value) -> Result<Vec<u8>> {
    let size = size_of(env, &v.ty) as usize;
    match &v.loc {
        ValLoc::Memory(a) => {
            let mut b = vec![0u8; size];
            env.read_mem(*a, &mut b)?;
            Ok(b)
        }
        ValLoc::Bytes(b) => {
            let mut b = b.clone();
            b.resize(size.max(b.len()), 0);
            Ok(b)
        }
        ValLoc::Unavailable(why) => bail!("value is {why}"),
    }
}

/// Decode a scalar (integer, float, bool, enum, pointer) from bytes.
pub fn scalar_from(env: &dyn TypeSource, ty: &TypeRef, b: &[u8]) -> Option<Scalar> {
    let t = strip(env, ty);
    let le = |n: usize| -> u64 {
        let mut x = [0u8; 8];
        let n = n.min(8).min(b.len());
        x[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(x)
    };
    let sext = |v: u64, size: u64| -> i64 {
        if size >= 8 {
            v as i64
        } else {
            let sh = 64 - size * 8;
            ((v << sh) as i64) >> sh
        }
    };
    Some(match &*t {
        Type::Base { size, enc, .. } => match enc {
            Encoding::Float => match size {
                4 => Scalar::F(f32::from_bits(le(4) as u32) as f64),
                8 => Scalar::F(f64::from_bits(le(8))),
                _ => return None,
            },
            Encoding::Signed | Encoding::SignedChar => Scalar::I(sext(le(*size as usize), *size)),
            _ => Scalar::U(le(*size as usize)),
        },
        Type::Enum { size, signed, .. } => {
            if *signed {
                Scalar::I(sext(le(*size as usize), *size))
            } else {
                Scalar::U(le(*size as usize))
            }
        }
        Type::Pointer { .. } => Scalar::U(le(8)),
        _ => return None,
    })
}

pub fn scalar(env: &dyn EvalEnv, v: &Value) -> Result<Scalar> {
    let t = strip(env, &v.ty);
    if let Type::Array { .. } = &*t {
        // arrays decay to pointers
        if let ValLoc::Memory(a) = v.loc {
            return Ok(Scalar::U(a));
        }
    }
    if let Type::Function { .. } = &*t
        && let ValLoc::Memory(a) = v.loc
    {
        return Ok(Scalar::U(a));
    }
    let b = bytes_of(env, v)?;
    scalar_from(env, &v.ty, &b)
        .ok_or_else(|| anyhow!("a value of type {} is not a number", type_name(env, &v.ty)))
}

fn synth_scalar(s: Scalar) -> Value {
    match s {
        Scalar::I(v) => Value {
            ty: Type::long(),
            loc: ValLoc::Bytes(v.to_le_bytes().to_vec()),
        },
        Scalar::U(v) => Value {
            ty: Type::ulong(),
            loc: ValLoc::Bytes(v.to_le_bytes().to_vec()),
        },
        Scalar::F(v) => Value {
            ty: Type::double(),
            loc: ValLoc::Bytes(v.to_le_bytes().to_vec()),
        },
    }
}

pub fn resolve_type_spec(env: &dyn EvalEnv, t: &TypeSpec) -> Result<TypeRef> {
    let mut ty = if t.base == "void" {
        Type::void()
    } else {
        env.type_by_name(&t.base).ok_or_else(|| {
            anyhow!(
                "no type named '{}' in the debug info",
                crate::shown::shown(&t.base)
            )
        })?
    };
    for _ in 0..t.pointers {
        ty = Type::pointer_to(Some(ty));
    }
    Ok(ty)
}

fn pointee(env: &dyn EvalEnv, v: &Value) -> Result<(Option<TypeRef>, u64)> {
    let t = strip(env, &v.ty);
    match &*t {
        Type::Pointer { target } => Ok((target.clone(), scalar(env, v)?.as_i64() as u64)),
        Type::Array { elem, .. } => match v.loc {
            ValLoc::Memory(a) => Ok((Some(elem.clone()), a)),
            _ => bail!("array is not in memory"),
        },
        _ => bail!(
            "cannot dereference a value of type {} (not a pointer)",
            type_name(env, &v.ty)
        ),
    }
}

fn member(env: &dyn EvalEnv, v: &Value, name: &str) -> Result<Value> {
    member_at(env, v, name, 0)
}

/// `member`, `depth` anonymous members down (bounded: a malformed
/// self-containing type must not recurse without end).
fn member_at(env: &dyn EvalEnv, v: &Value, name: &str, depth: usize) -> Result<Value> {
    let t = strip(env, &v.ty);
    let (members, sname) = match &*t {
        Type::Struct {
            members,
            name: n,
            declaration,
            kw,
            ..
        } => {
            if *declaration {
                bail!(
                    "{kw} {} is incomplete in the debug info",
                    n.clone().unwrap_or_default()
                );
            }
            (members.clone(), type_name(env, &v.ty))
        }
        _ => bail!(
            "'{name}' is asked of a value of type {}, which is not a struct or union",
            type_name(env, &v.ty)
        ),
    };
    for m in &members {
        match &m.name {
            Some(n) if n == name => return member_value(env, v, m),
            None => {
                // anonymous struct/union member: search inside
                let inner = member_value(env, v, m)?;
                if depth < 16
                    && let Ok(x) = member_at(env, &inner, name, depth + 1)
                {
                    return Ok(x);
                }
            }
            _ => {}
        }
    }
    bail!(
        "there is no member named '{name}' in {sname}",
        name = crate::shown::shown(name)
    )
}

pub fn member_value(
    env: &dyn EvalEnv,
    v: &Value,
    m: &crate::debuginfo::types::Member,
) -> Result<Value> {
    if let Some((bitoff, bits)) = m.bits {
        let b = bytes_of(env, v)?;
        let mut raw: u128 = 0;
        let start = (bitoff / 8) as usize;
        for i in 0..16usize {
            if start + i < b.len() {
                raw |= (b[start + i] as u128) << (8 * i);
            }
        }
        let val = (raw >> (bitoff % 8)) & ((1u128 << bits) - 1);
        let size = size_of(env, &m.ty).max(1) as usize;
        return Ok(Value {
            ty: m.ty.clone(),
            loc: ValLoc::Bytes(val.to_le_bytes()[..size.min(16)].to_vec()),
        });
    }
    Ok(match &v.loc {
        ValLoc::Memory(a) => Value {
            ty: m.ty.clone(),
            loc: ValLoc::Memory(a + m.offset),
        },
        ValLoc::Bytes(b) => {
            let size = size_of(env, &m.ty) as usize;
            let s = (m.offset as usize).min(b.len());
            let e = (s + size).min(b.len());
            Value {
                ty: m.ty.clone(),
                loc: ValLoc::Bytes(b[s..e].to_vec()),
            }
        }
        ValLoc::Unavailable(w) => Value {
            ty: m.ty.clone(),
            loc: ValLoc::Unavailable(w.clone()),
        },
    })
}

pub fn eval(env: &dyn EvalEnv, e: &Expr) -> Result<Value> {
    Ok(match e {
        Expr::Int(v) => {
            if *v <= i32::MAX as u64 {
                Value {
                    ty: Type::int(),
                    loc: ValLoc::Bytes((*v as i32).to_le_bytes().to_vec()),
                }
            } else {
                synth_scalar(Scalar::I(*v as i64))
            }
        }
        Expr::Float(v) => synth_scalar(Scalar::F(*v)),
        Expr::Str(_) => bail!("string literals are not supported in expressions"),
        Expr::Ident(n) => {
            if let Some(v) = env.variable(n)? {
                v
            } else if let Some(a) = env.function_address(n) {
                Value {
                    ty: env.function_type(n).unwrap_or_else(|| {
                        TypeRef::Synth(Rc::new(Type::Function {
                            ret: None,
                            params: None,
                            variadic: false,
                        }))
                    }),
                    loc: ValLoc::Memory(a),
                }
            } else if let Some((ty, v)) = env.enumerator(n) {
                let size = size_of(env, &ty).clamp(1, 8) as usize;
                Value {
                    ty,
                    loc: ValLoc::Bytes(v.to_le_bytes()[..size].to_vec()),
                }
            } else {
                bail!(
                    "no symbol \"{n}\" in the current context",
                    n = crate::shown::shown(n)
                )
            }
        }
        Expr::Reg(r) => match env.register(r) {
            Some(v) => Value {
                ty: if r == "pc" || r == "rip" {
                    Type::pointer_to(Some(TypeRef::Synth(Rc::new(Type::Function {
                        ret: None,
                        params: None,
                        variadic: false,
                    }))))
                } else if r == "sp" || r == "rsp" || r == "fp" || r == "rbp" {
                    Type::pointer_to(None)
                } else {
                    Type::long()
                },
                loc: ValLoc::Bytes(v.to_le_bytes().to_vec()),
            },
            None => bail!("no register ${r} (registers: $rip $rsp $rax ... $r15, $pc, $sp)"),
        },
        Expr::History(n) => env.history(*n).ok_or(ValueError::NoHistory(*n))?,
        Expr::Member(a, name) => {
            let v = eval(env, a)?;
            member(env, &v, name)?
        }
        Expr::Arrow(a, name) => {
            let v = eval(env, a)?;
            let (t, addr) = pointee(env, &v)?;
            let t = t.ok_or_else(|| anyhow!("cannot use -> on a void pointer"))?;
            let target = Value {
                ty: t,
                loc: ValLoc::Memory(addr),
            };
            member(env, &target, name)?
        }
        Expr::Index(a, i) => {
            let v = eval(env, a)?;
            let idx = scalar(env, &eval(env, i)?)?.as_i64();
            let (t, addr) = pointee(env, &v)?;
            let t = t.ok_or_else(|| anyhow!("cannot index a void pointer"))?;
            let sz = size_of(env, &t) as i64;
            Value {
                ty: t,
                loc: ValLoc::Memory((addr as i64).wrapping_add(idx.wrapping_mul(sz)) as u64),
            }
        }
        Expr::Deref(a) => {
            let v = eval(env, a)?;
            let (t, addr) = pointee(env, &v)?;
            match t {
                Some(t) => Value {
                    ty: t,
                    loc: ValLoc::Memory(addr),
                },
                None => bail!("attempt to take contents of a non-pointer value (void *)"),
            }
        }
        Expr::AddrOf(a) => {
            let v = eval(env, a)?;
            match v.loc {
                ValLoc::Memory(addr) => Value {
                    ty: Type::pointer_to(Some(v.ty.clone())),
                    loc: ValLoc::Bytes(addr.to_le_bytes().to_vec()),
                },
                _ => bail!("attempt to take address of a value not located in memory"),
            }
        }
        Expr::Neg(a) => {
            let s = scalar(env, &eval(env, a)?)?;
            synth_scalar(match s {
                Scalar::F(f) => Scalar::F(-f),
                other => Scalar::I(other.as_i64().wrapping_neg()),
            })
        }
        Expr::Not(a) => {
            let s = scalar(env, &eval(env, a)?)?;
            synth_scalar(Scalar::I(!s.truthy() as i64))
        }
        Expr::BitNot(a) => {
            let s = scalar(env, &eval(env, a)?)?;
            synth_scalar(Scalar::I(!s.as_i64()))
        }
        Expr::Sizeof(a) => {
            let n = match &**a {
                SizeofArg::Type(t) => size_of(env, &resolve_type_spec(env, t)?),
                SizeofArg::Expr(e) => size_of(env, &eval(env, e)?.ty),
            };
            synth_scalar(Scalar::U(n))
        }
        Expr::Cast(t, a) => {
            let ty = resolve_type_spec(env, t)?;
            let v = eval(env, a)?;
            cast(env, v, ty)?
        }
        Expr::Binary(op, a, b) => binary(env, *op, a, b)?,
    })
}

fn cast(env: &dyn EvalEnv, v: Value, ty: TypeRef) -> Result<Value> {
    let target = strip(env, &ty);
    match &*target {
        Type::Struct { .. } | Type::Array { .. } => Ok(Value { ty, loc: v.loc }),
        Type::Base { size, enc, .. } => {
            let s = scalar(env, &v)?;
            let bytes = match enc {
                Encoding::Float if *size == 4 => (s.as_f64() as f32).to_le_bytes().to_vec(),
                Encoding::Float => s.as_f64().to_le_bytes().to_vec(),
                _ => (s.as_i64()).to_le_bytes()[..(*size as usize).min(8)].to_vec(),
            };
            Ok(Value {
                ty,
                loc: ValLoc::Bytes(bytes),
            })
        }
        _ => {
            let s = scalar(env, &v)?;
            let sz = size_of(env, &ty).clamp(1, 8) as usize;
            Ok(Value {
                ty,
                loc: ValLoc::Bytes(s.as_i64().to_le_bytes()[..sz].to_vec()),
            })
        }
    }
}

/// The largest value `a@n` makes (gdb's default max-value-size).
const MAX_ARTIFICIAL: u64 = 65536;

/// `a@n`: n objects of a's type from a's address, as an array (gdb's
/// artificial arrays: `p arr[0]@4`, `p *list->elements@list->length`).
fn artificial_array(env: &dyn EvalEnv, a: &Expr, b: &Expr) -> Result<Value> {
    let va = eval(env, a)?;
    let n = scalar(env, &eval(env, b)?)?.as_i64();
    let ValLoc::Memory(addr) = va.loc else {
        bail!("only values in memory can be extended with '@'");
    };
    if n <= 0 {
        return Err(ValueError::AtCount(n).into());
    }
    let size = size_of(env, &va.ty).saturating_mul(n as u64);
    if size > MAX_ARTIFICIAL {
        bail!("{n} elements make {size} bytes, more than the {MAX_ARTIFICIAL} '@' may show");
    }
    Ok(Value {
        ty: TypeRef::Synth(Rc::new(Type::Array {
            elem: va.ty,
            count: Some(n as u64),
        })),
        loc: ValLoc::Memory(addr),
    })
}

fn binary(env: &dyn EvalEnv, op: BinOp, a: &Expr, b: &Expr) -> Result<Value> {
    if op == BinOp::And || op == BinOp::Or {
        let l = scalar(env, &eval(env, a)?)?.truthy();
        let r = match (op, l) {
            (BinOp::And, false) => false,
            (BinOp::Or, true) => true,
            _ => scalar(env, &eval(env, b)?)?.truthy(),
        };
        return Ok(synth_scalar(Scalar::I(r as i64)));
    }
    if op == BinOp::At {
        return artificial_array(env, a, b);
    }
    let va = eval(env, a)?;
    let vb = eval(env, b)?;
    // pointer arithmetic
    let ta = strip(env, &va.ty);
    if let (Type::Pointer { target: Some(t) }, BinOp::Add | BinOp::Sub) = (&*ta, op) {
        let tb = strip(env, &vb.ty);
        if !matches!(&*tb, Type::Pointer { .. }) {
            let base = scalar(env, &va)?.as_i64();
            let n = scalar(env, &vb)?.as_i64();
            let sz = size_of(env, t).max(1) as i64;
            let r = if op == BinOp::Add {
                base.wrapping_add(n.wrapping_mul(sz))
            } else {
                base.wrapping_sub(n.wrapping_mul(sz))
            };
            return Ok(Value {
                ty: va.ty.clone(),
                loc: ValLoc::Bytes(r.to_le_bytes().to_vec()),
            });
        }
    }
    let x = scalar(env, &va)?;
    let y = scalar(env, &vb)?;
    let float = matches!(x, Scalar::F(_)) || matches!(y, Scalar::F(_));
    let cmp = |r: bool| Ok(synth_scalar(Scalar::I(r as i64)));
    if float {
        let (p, q) = (x.as_f64(), y.as_f64());
        return match op {
            BinOp::Add => Ok(synth_scalar(Scalar::F(p + q))),
            BinOp::Sub => Ok(synth_scalar(Scalar::F(p - q))),
            BinOp::Mul => Ok(synth_scalar(Scalar::F(p * q))),
            BinOp::Div => Ok(synth_scalar(Scalar::F(p / q))),
            BinOp::Lt => cmp(p < q),
            BinOp::Gt => cmp(p > q),
            BinOp::Le => cmp(p <= q),
            BinOp::Ge => cmp(p >= q),
            BinOp::Eq => cmp(p == q),
            BinOp::Ne => cmp(p != q),
            _ => bail!("integer operator used on a floating-point value"),
        };
    }
    let unsigned = matches!(x, Scalar::U(_)) || matches!(y, Scalar::U(_));
    let (p, q) = (x.as_i64(), y.as_i64());
    let wrap = |v: i64| {
        if unsigned {
            Ok(synth_scalar(Scalar::U(v as u64)))
        } else {
            Ok(synth_scalar(Scalar::I(v)))
        }
    };
    match op {
        BinOp::Add => wrap(p.wrapping_add(q)),
        BinOp::Sub => wrap(p.wrapping_sub(q)),
        BinOp::Mul => wrap(p.wrapping_mul(q)),
        BinOp::Div | BinOp::Rem => {
            if q == 0 {
                return Err(ValueError::DivisionByZero.into());
            }
            let r = if unsigned {
                let (a, b) = (p as u64, q as u64);
                (if op == BinOp::Div { a / b } else { a % b }) as i64
            } else if op == BinOp::Div {
                p.wrapping_div(q)
            } else {
                p.wrapping_rem(q)
            };
            wrap(r)
        }
        BinOp::Shl => wrap(p.wrapping_shl(q as u32)),
        BinOp::Shr => wrap(if unsigned {
            (p as u64).wrapping_shr(q as u32) as i64
        } else {
            p.wrapping_shr(q as u32)
        }),
        BinOp::BitAnd => wrap(p & q),
        BinOp::BitOr => wrap(p | q),
        BinOp::BitXor => wrap(p ^ q),
        BinOp::Lt => cmp(if unsigned {
            (p as u64) < (q as u64)
        } else {
            p < q
        }),
        BinOp::Gt => cmp(if unsigned {
            (p as u64) > (q as u64)
        } else {
            p > q
        }),
        BinOp::Le => cmp(if unsigned {
            (p as u64) <= (q as u64)
        } else {
            p <= q
        }),
        BinOp::Ge => cmp(if unsigned {
            (p as u64) >= (q as u64)
        } else {
            p >= q
        }),
        BinOp::Eq => cmp(p == q),
        BinOp::Ne => cmp(p != q),
        BinOp::And | BinOp::Or | BinOp::At => unreachable!(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::testenv::Env;

    fn fails(s: &str) -> anyhow::Error {
        let e = crate::expr::parse::parse(s, &|_| false).unwrap();
        eval(&Env, &e).unwrap_err()
    }

    /// What the checks before attaching let pass is told by its type, the
    /// text shown is gdb's.
    #[test]
    fn value_errors_are_typed() {
        let e = fails("1 / 0");
        assert_eq!(value_error(&e), Some(&ValueError::DivisionByZero));
        assert_eq!(format!("{e:#}"), "division by zero");
        let e = fails("$3");
        assert_eq!(value_error(&e), Some(&ValueError::NoHistory(Some(3))));
        assert_eq!(e.to_string(), "history is empty or has no value $3");
        assert_eq!(fails("$").to_string(), "history is empty or has no value $");
        let e = fails("*(int *)4096@0");
        assert_eq!(value_error(&e), Some(&ValueError::AtCount(0)));
        assert_eq!(e.to_string(), "'@' needs a positive count, not 0");
        // a wrapped one is still found; another error is none of them
        assert!(value_error(&fails("1 % 0").context("in x")).is_some());
        assert_eq!(value_error(&fails("x")), None);
    }
}
