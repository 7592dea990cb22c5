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
        });
        self.list.last().expect("just pushed")
    }

    /// Remove breakpoint `id`; returns the addresses no other breakpoint uses.
    pub fn remove(&mut self, id: u32) -> Option<Vec<u64>> {
        let pos = self.list.iter().position(|b| b.id == id)?;
        let bp = self.list.remove(pos);
        Some(
            bp.locations
                .iter()
                .map(|l| l.addr)
                .filter(|a| !self.uses(*a))
                .collect(),
        )
    }

    pub fn uses(&self, addr: u64) -> bool {
        self.list
            .iter()
            .any(|b| b.locations.iter().any(|l| l.addr == addr))
    }

    /// Breakpoints with a location at `addr`.
    pub fn at(&mut self, addr: u64) -> Vec<&mut Breakpoint> {
        self.list
            .iter_mut()
            .filter(|b| b.locations.iter().any(|l| l.addr == addr))
            .collect()
    }

    pub fn all_addresses(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .list
            .iter()
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
}
