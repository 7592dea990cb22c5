//! x86-64's debug registers: DR0-3 hold addresses, DR6 says which slot
//! fired, DR7 enables each slot with its kind and length (Intel SDM vol.
//! 3, 18.2).  ptrace reaches them at `u_debugreg` in `struct user`.

/// Address slots (DR0-3).
pub const SLOTS: usize = 4;
/// The status register: bits 0-3 say which slot fired.
pub const DR6: usize = 6;
/// The control register.
pub const DR7: usize = 7;

/// What a slot stops on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// the instruction at the address is about to run (length 1)
    Execute,
    /// a write to the bytes
    Write,
    /// a read or a write
    ReadWrite,
}

/// DR7 with slot `slot` enabled (locally) for `kind` on `len` bytes at an
/// address aligned to `len`; the other slots' bits unchanged.  The error
/// says what the hardware does not allow.
pub fn dr7_with(dr7: u64, slot: usize, kind: Kind, len: u64) -> Result<u64, String> {
    if slot >= SLOTS {
        return Err(format!("only {SLOTS} hardware watchpoints exist"));
    }
    let rw = match kind {
        Kind::Execute if len != 1 => {
            return Err("an execute breakpoint has length 1".to_string());
        }
        Kind::Execute => 0b00,
        Kind::Write => 0b01,
        Kind::ReadWrite => 0b11,
    };
    let len_bits = match len {
        1 => 0b00,
        2 => 0b01,
        4 => 0b11,
        8 => 0b10,
        _ => return Err("watchpoint length must be 1, 2, 4 or 8".to_string()),
    };
    let shift = 16 + slot * 4;
    let mut v = dr7 & !(0b1111u64 << shift);
    v |= (rw | (len_bits << 2)) << shift;
    v |= 1 << (slot * 2); // local enable
    Ok(v)
}

/// DR7 with slot `slot` disabled (its enable, kind and length bits
/// clear); the other slots' bits unchanged.  0 when no slot is left
/// enabled.
pub fn dr7_without(dr7: u64, slot: usize) -> u64 {
    if slot >= SLOTS {
        return dr7;
    }
    let v = dr7 & !(0b1111u64 << (16 + slot * 4)) & !(0b11u64 << (slot * 2));
    if v & 0xff == 0 { 0 } else { v }
}

/// `len` bytes at `addr` as the aligned pieces debug registers take
/// (address, length 1, 2, 4 or 8), in address order, as gdb splits a
/// watched value: from the start, each the largest length that is
/// aligned there and does not run past the end.
pub fn pieces(addr: u64, len: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let (mut at, end) = (addr, addr.saturating_add(len));
    while at < end {
        let n = [8u64, 4, 2, 1]
            .into_iter()
            .find(|&n| at.is_multiple_of(n) && at + n <= end)
            .unwrap_or(1);
        out.push((at, n));
        at += n;
    }
    out
}

/// The slots DR6 says fired (bits 0-3).
pub fn fired(dr6: u64) -> u64 {
    dr6 & 0xf
}

/// Where debug register `n` is in `struct user`, for PTRACE_PEEKUSER and
/// PTRACE_POKEUSER.
pub fn user_offset(n: usize) -> usize {
    std::mem::offset_of!(libc::user, u_debugreg) + n * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dr7_bits_as_the_manual_gives_them() {
        // slot 0, execute: only L0
        assert_eq!(dr7_with(0, 0, Kind::Execute, 1), Ok(1));
        // slot 1, write 4 bytes: L1 (bit 2), RW1 = 01 at 20, LEN1 = 11 at 22
        assert_eq!(
            dr7_with(0, 1, Kind::Write, 4),
            Ok((1 << 2) | (0b01 << 20) | (0b11 << 22))
        );
        // slot 3, 8 bytes read/write, keeping slot 0's bits
        assert_eq!(
            dr7_with(1, 3, Kind::ReadWrite, 8),
            Ok(1 | (1 << 6) | (0b11 << 28) | (0b10 << 30))
        );
        assert!(dr7_with(0, 4, Kind::Write, 4).is_err());
        assert!(dr7_with(0, 0, Kind::Write, 3).is_err());
        assert!(dr7_with(0, 0, Kind::Execute, 4).is_err());
        assert_eq!(fired(0xffff_0ff2), 2);
        let two = dr7_with(
            dr7_with(0, 0, Kind::Write, 4).unwrap(),
            2,
            Kind::ReadWrite,
            8,
        )
        .unwrap();
        assert_eq!(
            dr7_without(two, 0),
            dr7_with(0, 2, Kind::ReadWrite, 8).unwrap()
        );
        assert_eq!(dr7_without(dr7_without(two, 0), 2), 0);
        // gdb's pieces: aligned ones whole, the rest split at alignments
        assert_eq!(pieces(0x1000, 8), vec![(0x1000, 8)]);
        assert_eq!(pieces(0x1000, 16), vec![(0x1000, 8), (0x1008, 8)]);
        assert_eq!(pieces(0x1002, 4), vec![(0x1002, 2), (0x1004, 2)]);
        assert_eq!(
            pieces(0x1001, 4),
            vec![(0x1001, 1), (0x1002, 2), (0x1004, 1)]
        );
        assert_eq!(pieces(0x1004, 12), vec![(0x1004, 4), (0x1008, 8)]);
        assert_eq!(pieces(0x1000, 3), vec![(0x1000, 2), (0x1002, 1)]);
        assert!(pieces(0x1000, 0).is_empty());
        // u_debugreg follows the 27 registers, the FP state and the rest of
        // struct user (sys/user.h): at 848 on x86-64
        assert_eq!(user_offset(7), 848 + 7 * 8);
    }
}
