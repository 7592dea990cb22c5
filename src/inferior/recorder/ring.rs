//! A recorder's ring read by pgdbg: the calls between `tail` and `head`
//! that the slots' sequence numbers vouch for, the target stopped
//! (`Recorder::drain`) or running (`RingReader`, from another thread).

use super::{HEADER, Record, RecordSpec, SLOT_FIXED, WRITING, text_at, text_start};
use anyhow::Result;

/// A recorder's ring as its reader knows it: where and what, and how far
/// it was read.
#[derive(Debug, Clone)]
pub(super) struct Ring {
    pub(super) spec: RecordSpec,
    pub(super) data: u64,
    pub(super) slot: u64,
    pub(super) tail: u64,
    pub(super) dropped: u64,
}

/// Reads ranges of the target's memory (address, where to).
type ReadRanges<'a> = dyn FnMut(&mut [(u64, &mut [u8])]) -> Result<()> + 'a;

impl Ring {
    /// The calls recorded since the last read, oldest first, and how many
    /// more found the ring full since then.  `read` reads ranges of the
    /// target's memory, `set_tail` writes the ring's `tail` word.  Safe
    /// while the target runs: the code moves `head` past a slot only once
    /// it is written (x86 keeps stores in order, and the header is read
    /// first), and never writes a slot between `tail` and `head`.
    pub(super) fn take(
        &mut self,
        read: &mut ReadRanges<'_>,
        set_tail: &mut dyn FnMut(u64, u64) -> Result<()>,
    ) -> Result<(Vec<Record>, u64)> {
        let mut hdr = [0u8; 24];
        read(&mut [(self.data, &mut hdr[..])])?;
        let word = |i: usize| u64::from_le_bytes(hdr[i * 8..i * 8 + 8].try_into().expect("8"));
        let (head, dropped) = (word(0), word(2));
        let new_dropped = dropped.saturating_sub(self.dropped);
        self.dropped = dropped;
        if head <= self.tail {
            return Ok((Vec::new(), new_dropped));
        }
        let cap = self.spec.capacity;
        let n = (head - self.tail).min(cap);
        let first = head - n;
        let at = |k: u64| self.data + HEADER + ((first + k) % cap) * self.slot;
        // The slots' sequence numbers before the copy and after it, each
        // read in a read of its own (so in that order): the code writes a
        // slot's number marked WRITING first and the number itself last,
        // so a number seen before the copy says that the slot was written
        // whole, the same number after it that no later call began to
        // write over it meanwhile.  (Each number, an aligned word, is read
        // whole: a half-old half-new one could pass a slot being written
        // only with `head` read torn as well.)
        let before = self.seqs(read, n, &at)?;
        let mut buf = vec![0u8; (n * self.slot) as usize];
        // one or two contiguous runs of slots
        let i0 = first % cap;
        let run1 = n.min(cap - i0);
        {
            let (a, b) = buf.split_at_mut((run1 * self.slot) as usize);
            let mut ranges: Vec<(u64, &mut [u8])> = vec![(at(0), a)];
            if n > run1 {
                ranges.push((self.data + HEADER, b));
            }
            read(&mut ranges)?;
        }
        let after = self.seqs(read, n, &at)?;
        let mut out = Vec::with_capacity(n as usize);
        // Calls whose slots were written over by later calls before they
        // were read, and those past the ring's size: counted as not
        // recorded.  Neither can happen while `tail` is seen whole (see
        // `RingReader::drain`).  A slot not written yet (an older call's
        // number in it, or its own marked WRITING: `head` read torn) ends
        // the read there.
        let mut overwritten = (head - self.tail).saturating_sub(cap);
        let mut upto = head;
        for (k, s) in buf.chunks_exact(self.slot as usize).enumerate() {
            let w = |o: usize| u64::from_le_bytes(s[o..o + 8].try_into().expect("8"));
            let want = first + k as u64;
            let seq = before[k];
            if seq & !WRITING > want {
                overwritten += 1;
                continue;
            }
            if seq != want {
                if k == 0 && first > self.tail {
                    // even the first slot taken is not written yet: the
                    // `head` read is past the ring's real head by more
                    // than the ring; nothing taken, `tail` left as it is
                    return Ok((Vec::new(), new_dropped));
                }
                upto = want;
                break;
            }
            if after[k] != want {
                // a later call began to write over it during the copy
                overwritten += 1;
                continue;
            }
            let mut fields = vec![0u8; self.spec.struct_size as usize];
            for (i, &(off, size)) in self.spec.fields.iter().enumerate() {
                let src = SLOT_FIXED as usize + 8 * i;
                fields[off as usize..(off + size) as usize]
                    .copy_from_slice(&s[src..src + size as usize]);
            }
            let text = self.spec.text.as_ref().and_then(|t| {
                let at = text_at(&self.spec) as usize;
                text_start(&s[at..at + t.max as usize], &fields, t)
            });
            out.push(Record {
                seq: want,
                tsc: w(8),
                rdi: w(16),
                rsi: w(24),
                global32: u32::from_le_bytes(s[32..36].try_into().expect("4")),
                fields,
                text,
            });
        }
        self.tail = upto;
        set_tail(self.data + 8, upto)?;
        Ok((out, new_dropped + overwritten))
    }

    /// The sequence numbers of the `n` slots at `at(0..n)`, read in reads
    /// of at most 512 ranges (the kernel takes 1024 at once).
    fn seqs(&self, read: &mut ReadRanges<'_>, n: u64, at: &dyn Fn(u64) -> u64) -> Result<Vec<u64>> {
        let mut raw = vec![[0u8; 8]; n as usize];
        for (c, chunk) in raw.chunks_mut(512).enumerate() {
            let mut ranges: Vec<(u64, &mut [u8])> = chunk
                .iter_mut()
                .enumerate()
                .map(|(i, b)| (at((c * 512 + i) as u64), &mut b[..]))
                .collect();
            read(&mut ranges)?;
        }
        Ok(raw.into_iter().map(u64::from_le_bytes).collect())
    }
}

/// Reads a recorder's ring while the target runs, from any thread of
/// pgdbg's (`process_vm_readv`, and `tail` written through
/// /proc/PID/mem): no stop.  The records' `tsc` are the target's time
/// stamp counter (`TscClock` maps them to CLOCK_MONOTONIC).
pub struct RingReader {
    pub(super) pid: i32,
    pub(super) mem: std::fs::File,
    pub(super) ring: Ring,
}

impl RingReader {
    /// As `Recorder::drain`, the target running.  `tail` is one aligned
    /// word, written by the kernel's copy into the target; should that
    /// copy write it a byte at a time, the recorder's code could see it
    /// torn for a moment: smaller (a call finds the ring full and is
    /// counted as dropped) or, were the bytes written out of order and
    /// the ring nearly full, larger, and a call then writes over the
    /// oldest unread slot, which is counted as not recorded when read (its
    /// sequence number is not its own).  Either way only the ring, in the
    /// recorder's own page, is touched.
    pub fn drain(&mut self) -> Result<(Vec<Record>, u64)> {
        let pid = self.pid;
        let mem = &self.mem;
        self.ring.take(
            &mut |ranges| crate::inferior::memory::read_untraced_many(pid, ranges),
            &mut |at, v| {
                use std::os::unix::fs::FileExt;
                mem.write_all_at(&v.to_le_bytes(), at).map_err(|e| {
                    anyhow::anyhow!("cannot write the ring's tail in process {pid}: {e}")
                })
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::slot_size;
    use super::*;

    /// What a read of the ring takes: the calls between `tail` and `head`
    /// in order; a slot written over by a later call, and the calls past
    /// the ring's size, counted as not recorded; a slot not written yet
    /// (`head` seen torn) ends the read there, and `tail` stays at it.
    #[test]
    fn ring_reads_what_its_sequence_numbers_vouch_for() {
        const CAP: u64 = 16;
        let spec = RecordSpec {
            capacity: CAP,
            global32: None,
            fields: vec![],
            struct_size: 0,
            text: None,
        };
        let slot = slot_size(&spec);
        let data = 0x10_000u64;
        // the ring's memory: header, then the slots (seq, tsc = seq * 10)
        let mem = std::cell::RefCell::new(vec![0u8; (HEADER + CAP * slot) as usize]);
        let put = |at: u64, v: u64| {
            let o = (at - data) as usize;
            mem.borrow_mut()[o..o + 8].copy_from_slice(&v.to_le_bytes());
        };
        let call = |seq: u64| {
            let at = data + HEADER + (seq % CAP) * slot;
            put(at, seq);
            put(at + 8, seq * 10);
        };
        let mut ring = Ring {
            spec,
            data,
            slot,
            tail: 0,
            dropped: 0,
        };
        // run before the take's nth read of memory (0: the header, 1: the
        // numbers, 2: the slots, 3: the numbers again)
        let before_read: std::cell::RefCell<Option<(usize, u64, u64)>> = Default::default();
        let take = |ring: &mut Ring| {
            let mut reads = 0;
            let (recs, lost) = ring
                .take(
                    &mut |ranges| {
                        if let Some((n, at, v)) = *before_read.borrow()
                            && n == reads
                        {
                            put(at, v);
                        }
                        reads += 1;
                        for (a, b) in ranges.iter_mut() {
                            let o = (*a - data) as usize;
                            b.copy_from_slice(&mem.borrow()[o..o + b.len()]);
                        }
                        Ok(())
                    },
                    &mut |at, v| {
                        put(at, v);
                        Ok(())
                    },
                )
                .unwrap();
            (recs.iter().map(|r| r.seq).collect::<Vec<u64>>(), lost)
        };
        // five calls
        (0..5).for_each(call);
        put(data, 5);
        assert_eq!(take(&mut ring), (vec![0, 1, 2, 3, 4], 0));
        assert_eq!(ring.tail, 5);
        // slot 6 written over by call 22 (a torn tail let it through)
        (5..10).for_each(call);
        call(22);
        put(data, 10);
        assert_eq!(take(&mut ring), (vec![5, 7, 8, 9], 1));
        // `head` seen past the calls written: the read ends at the first
        // slot not written yet, `tail` there
        call(10);
        put(data, 13);
        assert_eq!(take(&mut ring), (vec![10], 0));
        assert_eq!(ring.tail, 11);
        // `head` seen far past the ring's real head (torn): nothing
        // taken, nothing counted, `tail` where it was
        put(data, 11 + 10 * CAP);
        assert_eq!(take(&mut ring), (vec![], 0));
        assert_eq!(ring.tail, 11);
        // more calls than the ring holds since the last read
        (11..40).for_each(call);
        put(data, 40);
        let (seqs, lost) = take(&mut ring);
        assert_eq!(seqs, (24..40).collect::<Vec<u64>>());
        assert_eq!(lost, 13);
        assert_eq!(ring.tail, 40);
        // a slot still being written (its number marked WRITING) under a
        // `head` read torn: the read ends there, nothing of it taken
        let slot_of = |seq: u64| data + HEADER + (seq % CAP) * slot;
        (40..42).for_each(call);
        put(slot_of(42), 42 | WRITING);
        put(data, 43);
        assert_eq!(take(&mut ring), (vec![40, 41], 0));
        assert_eq!(ring.tail, 42);
        // written whole now; the next one being written over by call 59
        // (a torn tail let it through): counted as not recorded
        call(42);
        call(43);
        put(slot_of(43), 59 | WRITING);
        put(data, 44);
        assert_eq!(take(&mut ring), (vec![42], 1));
        // a slot written over during the copy (its number changed
        // between the reads before and after it): not taken, counted
        (44..47).for_each(call);
        put(data, 47);
        *before_read.borrow_mut() = Some((2, slot_of(45), 61 | WRITING));
        assert_eq!(take(&mut ring), (vec![44, 46], 1));
        // and the ring reads on as before
        *before_read.borrow_mut() = None;
        call(47);
        put(data, 48);
        assert_eq!(take(&mut ring), (vec![47], 0));
        assert_eq!(ring.tail, 48);
    }
}
