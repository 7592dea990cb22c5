//! `call FUNC(ARGS)`: run a function inside the backend, gdb style.

use crate::capture::Event;
use crate::debuginfo::types::{Encoding, Type, TypeSource, size_of, strip};
use crate::expr::eval::{Scalar, ValLoc, Value};
use crate::expr::parse::{self, Expr};
use crate::infcall::Arg;
use crate::postgres::Backend;
use crate::postgres::call::{
    BackendCalls, Called, Given, HARMLESS_IN_ANY_TRANSACTION, Prepared, check_outside_transaction,
    function_address, prepare_args,
};
use anyhow::{Result, anyhow, bail};

/// `call FUNC(ARGS)`: the value as `$N = TEXT`, kept in the value history.
pub fn call(s: &mut dyn Backend, text: &str) -> Result<String> {
    let open = text
        .find('(')
        .ok_or_else(|| anyhow!("call needs FUNC(ARGS)"))?;
    let name = text[..open].trim();
    let inner = text[open + 1..text.len() - 1].trim();
    let addr = function_address(s, name)?;
    let _ = s.frame_functions()?;
    // Values now; string literals are copied into the backend once the
    // call frame exists.
    let mut given = Vec::new();
    for a in parse::split_args(inner) {
        let e = {
            let di = s.di();
            let is_type = |n: &str| di.type_by_name(n).is_some();
            parse::parse(&a, &is_type)?
        };
        if let Expr::Str(text) = e {
            given.push(Given::Str(text));
            continue;
        }
        let (sc, ty) = s.eval_scalar(&e)?;
        let is_ptr = matches!(
            &*strip(s.di(), &ty),
            Type::Pointer { .. } | Type::Array { .. } | Type::Function { .. }
        );
        given.push(match sc {
            Scalar::F(f) => Given::Float(f),
            Scalar::I(i) if is_ptr => Given::Ptr(i as u64),
            Scalar::U(u) if is_ptr => Given::Ptr(u),
            Scalar::I(i) => Given::Int(i as u64),
            Scalar::U(u) => Given::Int(u),
        });
    }
    // count and types against the DWARF prototype, before anything is
    // changed in the backend
    let specs = prepare_args(s, name, given)?;
    check_outside_transaction(s, name)?;
    let ret_ty = s
        .di()
        .function_locations(name)
        .iter()
        .find(|l| !l.inlined && l.die != 0)
        .and_then(|l| s.di().die_type(l.die));
    let timeout = s.call_timeout();
    // Functions harmless in any transaction state skip that check (an
    // aborted transaction refuses every other call).
    let mut calls = if HARMLESS_IN_ANY_TRANSACTION.contains(&name) {
        BackendCalls::open_harmless(s, timeout)?
    } else {
        BackendCalls::open(s, timeout, false)?
    };
    let mut args = Vec::new();
    for sp in specs {
        args.push(match sp {
            Prepared::Arg(a) => a,
            Prepared::Str(text) => Arg::Int(calls.push_cstr(&text)?),
        });
    }
    let res = calls.call_addr(addr, &args);
    let close = calls.close();
    let res = res?;
    close?;
    let r = match res {
        Called::Value(r) => r,
        Called::Error(e) => {
            s.emit_event(
                Event::Call {
                    error: Some(e.clone()),
                    function: name.to_string(),
                    text: None,
                    value: None,
                },
                None,
            );
            bail!(
                "ERROR inside the backend: {e} (the call was unwound; the backend's state is restored)"
            )
        }
    };
    let Some(ty) = ret_ty else {
        // No DWARF prototype (a binary without debug info, e.g. a release
        // build with a layout pack): the return type is unknown, so the
        // register is shown as it is rather than nothing.
        let known = s
            .di()
            .function_locations(name)
            .iter()
            .any(|l| !l.inlined && l.die != 0);
        if !known {
            return Ok(format!(
                "{name} returned rax = {:#x} ({}): its return type is unknown without debug info",
                r.rax, r.rax as i64
            ));
        }
        return Ok(String::new()); // void
    };
    let is_float = matches!(
        &*strip(s.di(), &ty),
        Type::Base {
            enc: Encoding::Float,
            ..
        }
    );
    let bytes = if is_float {
        r.xmm0.to_le_bytes()
    } else {
        r.rax.to_le_bytes()
    };
    let size = size_of(s.di(), &ty).clamp(1, 8) as usize;
    let v = Value {
        ty,
        loc: ValLoc::Bytes(bytes[..size].to_vec()),
    };
    let (n, text, json) = s.keep_value(v);
    s.emit_event(
        Event::Call {
            error: None,
            function: name.to_string(),
            text: Some(text.clone()),
            value: Some(json),
        },
        None,
    );
    Ok(format!("${n} = {text}"))
}
