//! pgdbg: a debugger for live PostgreSQL backends.
//!
//! Layers, bottom up:
//! - `target`: the traced process (ptrace, wait loop, registers, memory);
//! - `debuginfo`: ELF, DWARF index, types, locations, lines, CFI unwinding;
//! - `breakpoints`, `expr`: breakpoints and C expressions over DWARF types;
//! - `postgres`: PostgreSQL knowledge (process kinds, versions);
//! - `session`, `command`: a debugging session and its command language;
//! - `repl`, `cli`, `guard`, `capture`: the user-facing parts.

pub mod attach;
pub mod breakpoints;
pub mod capture;
pub mod cli;
pub mod command;
pub mod debuginfo;
pub mod expr;
pub mod guard;
pub mod infcall;
pub mod multi;
pub mod postgres;
pub mod probes;
pub mod repl;
pub mod report;
pub mod script;
pub mod session;
pub mod target;
