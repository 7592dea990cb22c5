//! The files mapped into the target, and the main binary's load bias.
use super::*;

/// The files mapped into the target, as of the last look at its
/// /proc/PID/maps: taken at attach, and again when a pc is in none of them
/// (a library loaded since), not at every stop.  Parsed images are cached
/// per file (`unwind::Module`), so a new look maps nothing new.
pub(crate) struct Modules {
    pid: i32,
    bias: u64,
    list: Vec<Module>,
    /// When the list was taken, and the pages found in no module since
    /// (garbage pcs of a stack, code in anonymous memory): not looked up
    /// again before a second has passed.
    taken: std::time::Instant,
    unmapped: std::collections::HashSet<u64>,
}

impl Modules {
    pub(crate) fn new(pid: i32, bias: u64) -> Modules {
        Modules {
            pid,
            bias,
            list: Vec::new(),
            taken: std::time::Instant::now(),
            unmapped: std::collections::HashSet::new(),
        }
    }

    pub(crate) fn refresh(&mut self) {
        self.list = modules_of(self.pid, self.bias);
        self.taken = std::time::Instant::now();
    }

    pub(crate) fn list(&self) -> &[Module] {
        &self.list
    }

    pub(crate) fn find(&self, addr: u64) -> Option<&Module> {
        self.list.iter().find(|m| addr >= m.start && addr < m.end)
    }

    /// Make sure a module covering `addr` is known if the target has one
    /// (takes a new list when `addr` is in none).
    pub(crate) fn cover(&mut self, addr: u64) {
        if self.find(addr).is_some() {
            return;
        }
        let page = addr >> 12;
        if self.taken.elapsed() >= std::time::Duration::from_secs(1) {
            self.unmapped.clear();
        } else if self.unmapped.contains(&page) {
            return;
        }
        self.refresh();
        if self.find(addr).is_none() {
            self.unmapped.insert(page);
        }
    }
}

/// The files mapped into process `pid` (one module per file, from its
/// mapping at offset 0 to its last mapping); the executable gets
/// `main_bias`.
pub(crate) fn modules_of(pid: i32, main_bias: u64) -> Vec<Module> {
    let maps = procfs::maps(pid).unwrap_or_default();
    let exe = procfs::exe_path(pid).ok();
    let mut mods: Vec<Module> = Vec::new();
    for m in &maps {
        let Some(p) = &m.path else { continue };
        if let Some(existing) = mods.iter_mut().find(|x| &x.path == p) {
            existing.end = existing.end.max(m.end);
            continue;
        }
        if m.offset == 0 {
            let main = exe.as_deref() == Some(p.as_path());
            let bias = if main { main_bias } else { m.start };
            let key = FileKey {
                path: p.clone(),
                dev: m.dev.clone(),
                inode: m.inode,
            };
            mods.push(Module::new(key, m.start, m.end, bias, main));
        }
    }
    mods
}

/// Load bias of the main binary: AT_ENTRY minus the ELF entry point, cross
/// checked against /proc/PID/maps.
pub(crate) fn compute_bias(pid: i32, di: &DebugInfo) -> Result<u64> {
    let entry = di.binary.entry();
    if let Some(at) = procfs::auxv_entry(pid) {
        return Ok(at.wrapping_sub(entry));
    }
    let exe = procfs::exe_path(pid)?;
    for m in procfs::maps(pid)? {
        if m.path.as_deref() == Some(exe.as_path()) && m.offset == 0 {
            return Ok(m.start.wrapping_sub(di.binary.first_load_vaddr()));
        }
    }
    bail!(
        "cannot find where {} is loaded in process {pid}",
        exe.display()
    )
}
