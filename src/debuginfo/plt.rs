//! gdb's names of PLT entries (`strlen@plt`): an entry's jump through a
//! GOT slot, the slot's dynamic relocation, the relocation's symbol.

use super::elf::ElfImage;
use iced_x86::{Decoder, DecoderOptions, Mnemonic};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget};

impl ElfImage {
    /// `name@plt` and the entry's start for a link-time address in a PLT
    /// entry (`.plt`, `.plt.sec`, `.plt.got`); None elsewhere, or for an
    /// entry that jumps through no relocated slot (the lazy binder's).
    pub fn plt_symbol_at(&self, addr: u64) -> Option<(String, u64)> {
        let sec = self.file.sections().find(|s| {
            matches!(s.name(), Ok(".plt" | ".plt.sec" | ".plt.got"))
                && s.address() <= addr
                && addr < s.address() + s.size()
        })?;
        // 16-byte entries (8 in a .plt.got built without IBT)
        let size = if sec.name() == Ok(".plt.got") && sec.size() % 16 != 0 {
            8
        } else {
            16
        };
        let start = sec.address() + (addr - sec.address()) / size * size;
        let code = sec.data_range(start, size).ok()??;
        let mut dec = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
        let slot = dec.iter().find_map(|i| {
            (i.mnemonic() == Mnemonic::Jmp && i.is_ip_rel_memory_operand())
                .then(|| i.ip_rel_memory_address())
        })?;
        let (_, rel) = self
            .file
            .dynamic_relocations()?
            .find(|(off, _)| *off == slot)?;
        let RelocationTarget::Symbol(index) = rel.target() else {
            return None;
        };
        let sym = self
            .file
            .dynamic_symbol_table()?
            .symbol_by_index(index)
            .ok()?;
        Some((format!("{}@plt", sym.name().ok()?), start))
    }
}
