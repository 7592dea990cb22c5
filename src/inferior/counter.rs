//! An in-process call counter: a detour at a function's entry (`detour.rs`)
//! whose code adds one to a 64-bit word in a page of ours in the target,
//! then runs the displaced instructions and jumps back.  Four instructions
//! per call and no stop; pgdbg reads the word with `process_vm_readv`
//! whenever it likes, the target running or not.  If pgdbg dies without
//! cleaning up, the target goes on counting into its own page, harmlessly,
//! until a later pgdbg takes the detour out (`Recorder::remove_orphan`
//! knows this code too).
//!
//! The code runs at a function's entry, where the System V ABI makes the
//! flags dead (`inc` sets them) and the 8 bytes below the return address
//! free (`push rax`).  The add is `lock inc`: a thread of the target's
//! other than the one that called does not lose a count.

use super::Target;
use crate::arch::asm::*;
use anyhow::{Result, anyhow};

/// The counter's data: one page (its first 8 bytes the count).
pub const DATA_LEN: u64 = 4096;

/// A counter in place.
pub struct Counter {
    pub site: u64,
    /// The count's address in the target.
    pub word: u64,
}

/// The counter's code: `push rax; movabs rax, word; lock inc qword [rax];
/// pop rax` (the movabs first: `orphan_word` reads it there).
fn emit(word: u64) -> Result<Vec<u8>, AsmError> {
    let mut a = Asm::new();
    a.push(rax)?;
    a.mov(rax, word)?;
    a.lock().inc(qword_ptr(rax))?;
    a.pop(rax)?;
    Ok(a.assemble(0)?.bytes)
}

/// The count's address, when `code` (a detour's code from its entry on)
/// starts as a counter's does.
pub fn orphan_word(code: &[u8]) -> Option<u64> {
    let start = emit(0).ok()?;
    // push rax; movabs rax, imm64: the first 3 bytes, then the address;
    // the rest as emitted
    let rest = &start[11..];
    (code.len() >= start.len() && code[..3] == start[..3] && code[11..start.len()] == *rest)
        .then(|| u64::from_le_bytes(code[3..11].try_into().expect("8")))
}

impl Counter {
    /// Put a counter at `site`, a function's entry (`bodies`: the
    /// function's code, `Target::place_detour`).  The target must be
    /// stopped.
    pub fn install(t: &mut Target, site: u64, bodies: &[(u64, Vec<u8>)]) -> Result<Counter> {
        let word = t.place_detour(site, bodies, DATA_LEN, |data| {
            emit(data).map_err(|e| anyhow!("internal: the counter's code: {e}"))
        })?;
        Ok(Counter { site, word })
    }

    /// The calls counted so far, read without stopping the target.
    pub fn read(&self, pid: i32) -> Result<u64> {
        let mut b = [0u8; 8];
        super::read_untraced(pid, self.word, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Take the counter out (its pages too when nothing can return into
    /// them: false when they had to stay).  Read it first.
    pub fn remove(self, t: &mut Target) -> Result<bool> {
        t.remove_detour(self.site)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Formatter, NasmFormatter};

    /// The code decodes to the four instructions named, falls through at
    /// its end, and `orphan_word` finds the count's address in it (and in
    /// nothing else: a recorder's code is not a counter's).
    #[test]
    fn counter_code_decodes_as_written() {
        let word = 0x7f12_3456_7000;
        let code = emit(word).unwrap();
        let mut f = NasmFormatter::new();
        let text: Vec<String> = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE)
            .into_iter()
            .map(|i| {
                let mut s = String::new();
                f.format(&i, &mut s);
                s
            })
            .collect();
        assert_eq!(
            text,
            [
                "push rax",
                "mov rax,7F1234567000h",
                "lock inc qword [rax]",
                "pop rax"
            ]
        );
        let mut page = code.clone();
        page.extend_from_slice(&[0x55, 0x48, 0x89, 0xe5]);
        assert_eq!(orphan_word(&page), Some(word));
        assert_eq!(orphan_word(&code[..code.len() - 1]), None);
        let mut other = code.clone();
        other[0] = 0x51; // push rcx
        assert_eq!(orphan_word(&other), None);
        // a recorder starts push rax; push rcx; push rdx; movabs rdx
        let recorder = [
            0x50, 0x51, 0x52, 0x48, 0xba, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(orphan_word(&recorder), None);
        // the movabs whatever the address (`orphan_word`'s template is 0)
        assert_eq!(emit(0).unwrap().len(), code.len());
        assert_eq!(emit(0x1000).unwrap()[..3], code[..3]);
    }
}
