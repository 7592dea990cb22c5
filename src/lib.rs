//! pgdbg: a debugger for live PostgreSQL backends.
//!
//! Layers, bottom up (ARCHITECTURE.md follows one command through them):
//! - `runtime`: pgdbg's own signals, deadlines, poll ticker and output
//!   queue; imports nothing of pgdbg's;
//! - `arch`: x86-64 (the assembler for code written into a backend,
//!   register numbering, debug registers, the ABI); imports nothing of
//!   pgdbg's;
//! - `inferior`: the traced process (ptrace, wait loop, registers, memory,
//!   code written into it, the guardian); no DWARF, no PostgreSQL;
//! - `debuginfo`: ELF, DWARF index, types, locations, lines, CFI unwinding,
//!   layout packs (the format), debuginfod; no PostgreSQL;
//! - `infcall`: calls of functions inside the inferior (no PostgreSQL);
//! - `breakpoints`, `displays`, `expr`: breakpoints, auto-display
//!   expressions and C expressions over DWARF types;
//! - `postgres`: PostgreSQL knowledge (process kinds, versions, layout
//!   packs, plan cache, EXPLAIN, waits, guarded calls), reaching the backend
//!   only through the `postgres::Backend` trait; no ptrace;
//! - `perf`: perf events on a backend thread (sampling, write breakpoints)
//!   read from kernel ring buffers; nothing written into the backend;
//! - `probes`: `trace` and `count` over the same trait;
//! - `session`: one debugging session (implements `Backend`), `command`:
//!   the command registry, `script`: scripts checked before attaching;
//! - `attach`, `multi`, `oneshot`, `repl`, `cli`, `capture`, `report`: the
//!   user-facing parts.

pub mod arch;
pub mod attach;
pub mod breakpoints;
pub mod capture;
pub mod cli;
pub mod cluster_count;
pub mod cluster_marks;
pub mod command;
pub mod config;
pub mod debuginfo;
pub mod displays;
pub mod doctor;
pub mod expr;
pub mod forks;
pub mod forkserver;
pub mod infcall;
pub mod inferior;
pub mod multi;
pub mod oneshot;
pub mod perf;
pub mod postgres;
pub mod probes;
pub mod repl;
pub mod report;
pub mod runtime;
pub mod script;
pub mod session;
pub mod shellgen;
pub mod shown;
pub mod version;
