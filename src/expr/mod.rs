//! C expressions for `print`: parsing, evaluation over DWARF types, and
//! gdb-style formatting.

pub mod eval;
pub mod format;
pub mod parse;
pub mod printf;
