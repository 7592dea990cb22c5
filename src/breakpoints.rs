//! Breakpoints as the user sees them: numbered, each with one or more code
//! locations (every out-of-line copy and inlined instance of a function),
//! hit counts.  Inserting bytes is the target layer's job.

#[derive(Debug, Clone)]
pub struct BpLocation {
    /// Runtime address.
    pub addr: u64,
    /// Function (or inlined function) at that address.
    pub function: String,
    pub inlined: bool,
    /// Function the location was inlined into, when inlined.
    pub inlined_into: Option<String>,
    pub file_line: Option<(String, u32)>,
}

pub use crate::command::WatchKind;

/// A watchpoint: the bytes of an lvalue in a debug register.
#[derive(Debug, Clone)]
pub struct Watch {
    pub kind: WatchKind,
    /// The lvalue's address and size (any: watched in aligned pieces of
    /// 1, 2, 4 or 8 bytes, one debug register each).
    pub addr: u64,
    pub len: u64,
    pub ty: crate::debuginfo::types::TypeRef,
    /// The bytes seen at the last hit (or when set).
    pub old: Vec<u8>,
    /// The debug-register slots of its pieces while armed (enabled);
    /// empty when not armed.
    pub slots: Vec<usize>,
    /// For a frame's local (its bytes on the stack): the frame it belongs
    /// to, whose return ends the watchpoint.
    pub scope: Option<Scope>,
}

/// The frame of a watched local: gdb's watchpoint scope.  The frame is
/// alive while the stack pointer is below `cfa` and its return address
/// (the word below `cfa`) is still `ret`; an int3 at `ret` (while `armed`)
/// stops the backend where the frame returns.
#[derive(Debug, Clone)]
pub struct Scope {
    pub cfa: u64,
    pub ret: u64,
    /// The frame's function, for messages.
    pub function: String,
    /// The int3 at `ret` is in.
    pub armed: bool,
}

/// What a hit of a watchpoint saw, as gdb decides it (x86 has no
/// read-only debug register: a read watchpoint is armed for reads and
/// writes, and a hit that changed the value is taken for a write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchSeen {
    /// not a stop for this watchpoint
    Nothing,
    /// "Old value = ..." / "New value = ..."
    Changed,
    /// "Value = ..."
    Read,
}

/// gdb's rule for a hit of `kind` whose bytes went from `old` to `new`.
pub fn watch_seen(kind: WatchKind, old: &[u8], new: &[u8]) -> WatchSeen {
    let changed = old != new;
    match (kind, changed) {
        (WatchKind::Write, true) | (WatchKind::Access, true) => WatchSeen::Changed,
        (WatchKind::Write, false) | (WatchKind::Read, true) => WatchSeen::Nothing,
        (WatchKind::Read, false) | (WatchKind::Access, false) => WatchSeen::Read,
    }
}

#[derive(Debug, Clone)]
pub struct Breakpoint {
    pub id: u32,
    /// What the user typed: `choose_custom_plan`, `plancache.c:1028`.
    pub spec: String,
    pub locations: Vec<BpLocation>,
    pub hits: u64,
    pub temporary: bool,
    /// `break LOC if EXPR`: the hit counts only when EXPR is non-zero.
    pub condition: Option<String>,
    /// `commands` block run at each hit.
    pub commands: Vec<crate::command::Command>,
    /// Their lines as written.
    pub commands_text: Vec<String>,
    /// `disable N`: kept, its int3s out of the backend until `enable N`.
    pub enabled: bool,
    /// `ignore N COUNT`: the next COUNT hits whose condition holds are
    /// counted and do not stop.
    pub ignore: u64,
    /// A watchpoint (no code locations) rather than a breakpoint.
    pub watch: Option<Watch>,
}

#[derive(Default)]
pub struct Breakpoints {
    pub list: Vec<Breakpoint>,
    next_id: u32,
}

impl Breakpoints {
    pub fn add(
        &mut self,
        spec: String,
        locations: Vec<BpLocation>,
        temporary: bool,
        condition: Option<String>,
    ) -> &Breakpoint {
        self.next_id += 1;
        self.list.push(Breakpoint {
            id: self.next_id,
            spec,
            locations,
            hits: 0,
            temporary,
            condition,
            commands: Vec::new(),
            commands_text: Vec::new(),
            enabled: true,
            ignore: 0,
            watch: None,
        });
        self.list.last().expect("just pushed")
    }

    /// A watchpoint, numbered as breakpoints are.
    pub fn add_watch(&mut self, spec: String, watch: Watch) -> &Breakpoint {
        self.next_id += 1;
        self.list.push(Breakpoint {
            id: self.next_id,
            spec,
            locations: Vec::new(),
            hits: 0,
            temporary: false,
            condition: None,
            commands: Vec::new(),
            commands_text: Vec::new(),
            enabled: true,
            ignore: 0,
            watch: Some(watch),
        });
        self.list.last().expect("just pushed")
    }

    /// The enabled watchpoints armed in a slot DR6 says fired.
    pub fn watches_fired(&self, dr6: u64) -> Vec<u32> {
        self.list
            .iter()
            .filter(|b| b.enabled)
            .filter(|b| {
                b.watch
                    .as_ref()
                    .is_some_and(|w| w.slots.iter().any(|s| dr6 & (1 << s) != 0))
            })
            .map(|b| b.id)
            .collect()
    }

    /// Remove breakpoint `id`; returns the addresses no other breakpoint uses.
    pub fn remove(&mut self, id: u32) -> Option<Vec<u64>> {
        let pos = self.list.iter().position(|b| b.id == id)?;
        let bp = self.list.remove(pos);
        let scope = bp
            .watch
            .as_ref()
            .and_then(|w| w.scope.as_ref())
            .filter(|s| s.armed)
            .map(|s| s.ret);
        Some(
            bp.locations
                .iter()
                .map(|l| l.addr)
                .chain(scope)
                .filter(|a| !self.uses(*a) && !self.scope_uses(*a))
                .collect(),
        )
    }

    /// A watched local's frame returns to `addr`: its int3 is in.
    pub fn scope_uses(&self, addr: u64) -> bool {
        self.list.iter().any(|b| {
            b.watch
                .as_ref()
                .and_then(|w| w.scope.as_ref())
                .is_some_and(|s| s.armed && s.ret == addr)
        })
    }

    /// The watchpoints on a frame's local whose scope int3 is in.
    pub fn scoped_watches(&self) -> Vec<(u32, Scope)> {
        self.list
            .iter()
            .filter_map(|b| {
                let s = b.watch.as_ref()?.scope.as_ref()?;
                s.armed.then(|| (b.id, s.clone()))
            })
            .collect()
    }

    /// An enabled breakpoint has a location at `addr` (its int3 is in).
    pub fn uses(&self, addr: u64) -> bool {
        self.list
            .iter()
            .any(|b| b.enabled && b.locations.iter().any(|l| l.addr == addr))
    }

    /// The enabled breakpoints with a location at `addr`.
    pub fn at(&mut self, addr: u64) -> Vec<&mut Breakpoint> {
        self.list
            .iter_mut()
            .filter(|b| b.enabled && b.locations.iter().any(|l| l.addr == addr))
            .collect()
    }

    /// The addresses of the enabled breakpoints' locations.
    pub fn all_addresses(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .list
            .iter()
            .filter(|b| b.enabled)
            .flat_map(|b| b.locations.iter().map(|l| l.addr))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut Breakpoint> {
        self.list.iter_mut().find(|b| b.id == id)
    }

    pub fn ids(&self) -> Vec<u32> {
        self.list.iter().map(|b| b.id).collect()
    }

    /// The number of the last breakpoint set (gdb's `$bpnum`), deleted
    /// since or not; None before the first.
    pub fn last_id(&self) -> Option<u32> {
        (self.next_id > 0).then_some(self.next_id)
    }

    /// Enable or disable breakpoint `id`: the addresses whose int3 must be
    /// written (enabled) or taken out (disabled: those no other enabled
    /// breakpoint uses); None when there is no breakpoint `id`.
    pub fn set_enabled(&mut self, id: u32, on: bool) -> Option<Vec<u64>> {
        let b = self.get_mut(id)?;
        b.enabled = on;
        let addrs: Vec<u64> = b.locations.iter().map(|l| l.addr).collect();
        Some(if on {
            addrs
        } else {
            addrs.into_iter().filter(|a| !self.uses(*a)).collect()
        })
    }

    /// The hit of breakpoint `id`, whose condition held, is one of those
    /// `ignore` skips: counted, and the count left goes down by one.
    pub fn ignored(&mut self, id: u32) -> bool {
        match self.get_mut(id) {
            Some(b) if b.ignore > 0 => {
                b.ignore -= 1;
                b.hits += 1;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(addr: u64) -> BpLocation {
        BpLocation {
            addr,
            function: "f".into(),
            inlined: false,
            inlined_into: None,
            file_line: None,
        }
    }

    #[test]
    fn disabled_breakpoints_keep_no_address() {
        let mut b = Breakpoints::default();
        assert_eq!(b.last_id(), None);
        b.add("f".into(), vec![loc(1), loc(2)], false, None);
        b.add("g".into(), vec![loc(2)], false, None);
        assert_eq!(b.last_id(), Some(2));
        // 2 stays in: breakpoint 2 uses it
        assert_eq!(b.set_enabled(1, false), Some(vec![1]));
        assert!(!b.uses(1) && b.uses(2));
        assert_eq!(b.at(2).len(), 1);
        assert_eq!(b.all_addresses(), vec![2]);
        assert_eq!(b.set_enabled(2, false), Some(vec![2]));
        assert!(b.all_addresses().is_empty());
        assert_eq!(b.set_enabled(1, true), Some(vec![1, 2]));
        assert_eq!(b.set_enabled(9, true), None);
    }

    #[test]
    fn watch_hits_as_gdb_judges_them() {
        use WatchKind::*;
        assert_eq!(watch_seen(Write, &[1], &[2]), WatchSeen::Changed);
        assert_eq!(watch_seen(Write, &[1], &[1]), WatchSeen::Nothing);
        assert_eq!(watch_seen(Read, &[1], &[1]), WatchSeen::Read);
        assert_eq!(watch_seen(Read, &[1], &[2]), WatchSeen::Nothing);
        assert_eq!(watch_seen(Access, &[1], &[2]), WatchSeen::Changed);
        assert_eq!(watch_seen(Access, &[1], &[1]), WatchSeen::Read);
        let mut b = Breakpoints::default();
        b.add("f".into(), vec![loc(1)], false, None);
        let w = |slots| Watch {
            kind: Write,
            addr: 8,
            len: 4,
            ty: crate::debuginfo::types::Type::int(),
            old: vec![0; 4],
            slots,
            scope: None,
        };
        b.add_watch("x".into(), w(vec![2]));
        b.add_watch("y".into(), w(vec![]));
        b.add_watch("z".into(), w(vec![0, 3]));
        assert_eq!(b.watches_fired(0b100), vec![2]);
        assert!(b.watches_fired(0b10).is_empty());
        assert_eq!(b.watches_fired(0b1000), vec![4]);
        assert_eq!(b.watches_fired(0b1001), vec![4]);
        assert_eq!(b.watches_fired(0b1101), vec![2, 4]);
        assert!(!b.uses(8));
    }

    #[test]
    fn ignore_counts_the_hits_it_skips() {
        let mut b = Breakpoints::default();
        b.add("f".into(), vec![loc(1)], false, None);
        b.get_mut(1).unwrap().ignore = 2;
        assert!(b.ignored(1) && b.ignored(1) && !b.ignored(1));
        assert_eq!(b.get_mut(1).unwrap().hits, 2);
    }

    #[test]
    fn a_watched_locals_return_keeps_its_int3_until_removed() {
        let mut b = Breakpoints::default();
        b.add("f".into(), vec![loc(0x40)], false, None);
        let w = |armed| Watch {
            kind: WatchKind::Write,
            addr: 8,
            len: 4,
            ty: crate::debuginfo::types::Type::int(),
            old: vec![0; 4],
            slots: vec![0],
            scope: Some(Scope {
                cfa: 0x1000,
                ret: 0x40,
                function: "f".into(),
                armed,
            }),
        };
        let id = b.add_watch("x".into(), w(true)).id;
        b.add_watch("y".into(), w(false));
        assert!(b.scope_uses(0x40) && !b.scope_uses(0x41));
        assert_eq!(b.scoped_watches().len(), 1);
        assert_eq!(b.scoped_watches()[0].0, id);
        // the user's breakpoint 1 still uses 0x40: not given back
        assert_eq!(b.remove(id), Some(vec![]));
        assert!(!b.scope_uses(0x40));
        assert_eq!(b.remove(1), Some(vec![0x40]));
        let id = b.add_watch("z".into(), w(true)).id;
        assert_eq!(b.remove(id), Some(vec![0x40]));
    }
}
