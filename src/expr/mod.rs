//! C expressions for `print`: parsing, evaluation over DWARF types, and
//! gdb-style formatting.

pub mod ctype;
pub mod disasm;
pub mod eval;
pub mod examine;
pub mod format;
pub mod parse;
pub mod printf;

/// An evaluation environment for unit tests: synthesized types only, no
/// variables, memory that reads as a pseudo-random C string.
#[cfg(test)]
pub mod testenv {
    use super::eval::{EvalEnv, Value};
    use crate::debuginfo::types::{Type, TypeRef, TypeSource};
    use anyhow::{Result, bail};
    use std::rc::Rc;

    pub struct Env;

    impl TypeSource for Env {
        fn resolve(&self, t: &TypeRef) -> Rc<Type> {
            match t {
                TypeRef::Synth(t) => t.clone(),
                _ => Rc::new(Type::Void),
            }
        }
        fn type_by_name(&self, name: &str) -> Option<TypeRef> {
            match name {
                "int" => Some(Type::int()),
                "long" => Some(Type::long()),
                "unsigned long" => Some(Type::ulong()),
                "char" => Some(Type::char_()),
                "double" => Some(Type::double()),
                _ => None,
            }
        }
    }

    impl EvalEnv for Env {
        fn variable(&self, _name: &str) -> Result<Option<Value>> {
            Ok(None)
        }
        fn function_address(&self, _name: &str) -> Option<u64> {
            None
        }
        fn register(&self, _name: &str) -> Option<u64> {
            None
        }
        fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
            if addr < 4096 {
                bail!("Cannot access memory at address {addr:#x}");
            }
            // printable bytes with a NUL now and then (and some high bytes)
            for (i, b) in buf.iter_mut().enumerate() {
                let x = (addr.wrapping_add(i as u64)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 57;
                *b = if x == 0 { 0 } else { (x as u8).wrapping_mul(3) };
            }
            Ok(())
        }
        fn history(&self, _n: Option<usize>) -> Option<Value> {
            None
        }
        fn symbol_for(&self, _addr: u64) -> Option<String> {
            None
        }
    }
}
