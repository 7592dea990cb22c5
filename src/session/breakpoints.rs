//! User breakpoints: numbered, with conditions and `commands` blocks.
use super::*;
use crate::capture::events::BreakpointLocation;

impl Session {
    /// Write an int3 at `addr` (`Target::insert_breakpoint`); refused over
    /// an int3 that is not pgdbg's, the refusal names the function.
    pub(crate) fn insert_int3(&mut self, addr: u64) -> Result<()> {
        self.target
            .insert_breakpoint(addr)
            .map_err(|e| self.name_foreign(e))
    }

    /// Take the int3 at `addr` out (`Target::remove_breakpoint`) unless an
    /// enabled user breakpoint, a watched local's frame return, a probe or
    /// the dynamic linker's hook (library loads and unloads) still uses it.
    pub(crate) fn release_int3(&mut self, addr: u64) -> Result<()> {
        if self.bps.uses(addr)
            || self.bps.scope_uses(addr)
            || self.internal.contains_key(&addr)
            || self.dl_hook == Some(addr)
        {
            return Ok(());
        }
        self.target.remove_breakpoint(addr)
    }

    /// `e` with the function and offset of the int3 that is not pgdbg's,
    /// when that is what it is about.
    pub(crate) fn name_foreign(&self, e: anyhow::Error) -> anyhow::Error {
        match e.downcast::<crate::inferior::ForeignInt3>() {
            Ok(mut f) => {
                f.name = EvalEnv::symbol_for(self, f.addr);
                f.into()
            }
            Err(e) => e,
        }
    }

    /// What of pgdbg's own is written at `addr` (an int3, the recorder's
    /// jump), for a kernel uprobe that would be placed there.
    pub(crate) fn own_code_at(&self, addr: u64) -> Option<String> {
        if self.target.in_detour(addr) {
            return Some("the in-process recorder's jump".into());
        }
        if !self.target.breakpoint_inserted(addr) {
            return None;
        }
        let ids: Vec<String> = self
            .bps
            .list
            .iter()
            .filter(|b| b.locations.iter().any(|l| l.addr == addr))
            .map(|b| b.id.to_string())
            .collect();
        Some(match ids.len() {
            0 => "an int3 of pgdbg".into(),
            1 => format!("breakpoint {}", ids[0]),
            _ => format!("breakpoints {}", ids.join(", ")),
        })
    }

    /// Resolve a location spec to runtime addresses.
    /// The postgres binary first, then the libraries mapped now
    /// (`LIB:FUNCTION` picks one).
    pub fn resolve_location(&self, spec: &str) -> Result<Vec<BpLocation>> {
        self.resolve_anywhere(spec)
    }

    pub fn add_breakpoint(
        &mut self,
        spec: &str,
        temporary: bool,
        condition: Option<&str>,
    ) -> Result<String> {
        if let Some(c) = condition {
            let di = self.di.clone();
            parse::parse_in(c, &di)
                .map_err(|e| anyhow!("condition '{c}': {e:#}", c = crate::shown::shown(c)))?;
        }
        let locs = match self.resolve_location(spec) {
            Ok(l) => l,
            Err(e) => {
                // a library loaded since the last look
                if self.sync_libraries()
                    && let Ok(l) = self.resolve_location(spec)
                {
                    l
                } else {
                    return self.add_pending(spec, temporary, condition, e);
                }
            }
        };
        for l in &locs {
            self.follow_library_of(l.addr)?;
        }
        // rolled back on failure: only the int3s this breakpoint wrote (an
        // address another breakpoint or a probe already uses keeps its int3)
        let mut inserted = Vec::new();
        for l in &locs {
            let ours = !self.target.breakpoint_inserted(l.addr);
            if let Err(e) = self.insert_int3(l.addr) {
                for a in inserted {
                    let _ = self.target.remove_breakpoint(a);
                }
                return Err(e);
            }
            if ours {
                inserted.push(l.addr);
            }
        }
        let bp = self.bps.add(
            spec.to_string(),
            locs,
            temporary,
            condition.map(str::to_string),
        );
        let first = &bp.locations[0];
        let where_ = match &first.file_line {
            Some((f, l)) => format!(" ({}:{l})", basename(f)),
            None => String::new(),
        };
        let n = bp.locations.len();
        let inl = bp.locations.iter().filter(|l| l.inlined).count();
        let detail = if inl > 0 {
            format!(", {inl} inlined")
        } else {
            String::new()
        };
        let msg = format!(
            "{} {} at {}{where_}, {n} location{}{detail}{}",
            if temporary {
                "Temporary breakpoint"
            } else {
                "Breakpoint"
            },
            bp.id,
            first.function,
            if n == 1 { "" } else { "s" },
            bp.condition
                .as_deref()
                .map(|c| format!(", stops only if {c}"))
                .unwrap_or_default()
        );
        let id = bp.id;
        let locations = bp
            .locations
            .iter()
            .map(|l| BreakpointLocation {
                address: format!("{:#x}", l.addr),
                function: l.function.clone(),
                inlined: l.inlined,
            })
            .collect();
        self.emit(Event::Breakpoint {
            id,
            locations,
            spec: spec.to_string(),
        });
        Ok(msg)
    }

    /// A breakpoint on a function that no loaded object defines but a
    /// library of the server's installation does: armed when the backend
    /// loads it.  Anything else is `err`.
    fn add_pending(
        &mut self,
        spec: &str,
        temporary: bool,
        condition: Option<&str>,
        err: anyhow::Error,
    ) -> Result<String> {
        let libs = self.pending_candidates(spec);
        if libs.is_empty() {
            return Err(err);
        }
        self.arm_library_hook()?;
        let bp = self.bps.add(
            spec.to_string(),
            Vec::new(),
            temporary,
            condition.map(str::to_string),
        );
        let id = bp.id;
        self.pending.push(id);
        self.emit(Event::Breakpoint {
            id,
            locations: Vec::new(),
            spec: spec.to_string(),
        });
        Ok(format!(
            "{} {id} ({spec}) pending until a library defines it ({} {} it; not loaded in backend {} yet)",
            if temporary {
                "Temporary breakpoint"
            } else {
                "Breakpoint"
            },
            libs.join(", "),
            if libs.len() == 1 { "has" } else { "have" },
            self.pid
        ))
    }

    pub fn delete_breakpoints(&mut self, ids: &[u32]) -> Result<String> {
        let ids: Vec<u32> = if ids.is_empty() {
            self.bps.ids()
        } else {
            ids.to_vec()
        };
        let mut msgs = Vec::new();
        for id in ids {
            self.disarm_watch(id)?;
            match self.bps.remove(id) {
                Some(addrs) => {
                    for a in addrs {
                        self.release_int3(a)?;
                    }
                }
                None => msgs.push(format!("No breakpoint number {id}.")),
            }
        }
        Ok(msgs.join("\n"))
    }

    pub fn info_breakpoints(&self) -> String {
        if self.bps.list.is_empty() {
            // gdb's words
            return "No breakpoints or watchpoints.".into();
        }
        // gdb widens the Type column to its longest name ("read watchpoint")
        let tw = self
            .bps
            .list
            .iter()
            .map(|b| b.watch.as_ref().map_or(10, |w| w.kind.table_type().len()))
            .max()
            .unwrap_or(0)
            .max(14);
        let mut s = format!("Num     {:<tw$} Disp Enb Address            What\n", "Type");
        for b in &self.bps.list {
            let disp = if b.temporary { "del " } else { "keep" };
            let enb = if b.enabled { "y" } else { "n" };
            // gdb 13's "y-": a location enabled, its breakpoint not
            let loc_enb = if b.enabled { "y " } else { "y-" };
            let ty = "breakpoint";
            if let Some(w) = &b.watch {
                s.push_str(&format!(
                    "{:<7} {:<tw$} {disp} {enb}   {:<18} {}\n",
                    b.id,
                    w.kind.table_type(),
                    "",
                    b.spec
                ));
            } else if b.locations.is_empty() {
                s.push_str(&format!(
                    "{:<7} {ty:<tw$} {disp} {enb}   <PENDING>          {}\n",
                    b.id, b.spec
                ));
            } else if b.locations.len() == 1 {
                let l = &b.locations[0];
                s.push_str(&format!(
                    "{:<7} {ty:<tw$} {disp} {enb}   {:#018x} {}\n",
                    b.id,
                    l.addr,
                    describe_loc(l)
                ));
            } else {
                s.push_str(&format!(
                    "{:<7} {ty:<tw$} {disp} {enb}   <MULTIPLE>         {}\n",
                    b.id, b.spec
                ));
                for (i, l) in b.locations.iter().enumerate() {
                    s.push_str(&format!(
                        "{:<7} {:<w2$}  {loc_enb}  {:#018x} {}\n",
                        format!("{}.{}", b.id, i + 1),
                        "",
                        l.addr,
                        describe_loc(l),
                        w2 = tw + 8
                    ));
                }
            }
            if let Some(c) = &b.condition {
                s.push_str(&format!("\tstop only if {c}\n"));
            }
            if b.hits > 0 {
                s.push_str(&format!(
                    "\tbreakpoint already hit {} time{}\n",
                    b.hits,
                    if b.hits == 1 { "" } else { "s" }
                ));
            }
            if b.ignore > 0 {
                s.push_str(&format!("\tignore next {} hits\n", b.ignore));
            }
            for c in &b.commands_text {
                s.push_str(&format!("\t  {c}\n"));
            }
        }
        s.trim_end().to_string()
    }

    /// Record the breakpoints hit at this stop and their commands.
    pub(crate) fn set_passing(&mut self, passing: Vec<u32>) {
        self.hit = Some(
            self.bps
                .list
                .iter()
                .filter(|b| passing.contains(&b.id))
                .map(|b| (b.id, b.commands.clone()))
                .collect(),
        );
    }

    /// The breakpoints at `addr` whose condition holds (or that have none);
    /// a condition that cannot be evaluated counts as held, with a note
    /// (as gdb does).
    pub(crate) fn conditions_at(&mut self, addr: u64) -> (Vec<u32>, String) {
        let bps: Vec<(u32, Option<String>)> = self
            .bps
            .at(addr)
            .iter()
            .map(|b| (b.id, b.condition.clone()))
            .collect();
        self.conditions_of(bps)
    }

    /// Those of `bps` (numbers and conditions) whose condition holds, and
    /// whose ignore count is spent; `conditions_at`'s rules.
    pub(crate) fn conditions_of(&mut self, bps: Vec<(u32, Option<String>)>) -> (Vec<u32>, String) {
        let mut passing = Vec::new();
        let mut note = String::new();
        if bps.iter().any(|(_, c)| c.is_some()) {
            // a condition is evaluated in frame 0: unwinding the innermost
            // function is enough (not a whole backtrace at every hit)
            let top = self.top_frames().ok();
            let st = self.stop_state();
            st.selected = 0;
            st.frames = top;
        }
        for (id, cond) in bps {
            let Some(c) = cond else {
                passing.push(id);
                continue;
            };
            match self
                .eval_expr(&c)
                .and_then(|v| Ok(scalar(self, &v)?.truthy()))
            {
                Ok(true) => passing.push(id),
                Ok(false) => {}
                Err(e) => {
                    note.push_str(&format!(
                        "\nError in testing condition for breakpoint {id}: {e:#}"
                    ));
                    passing.push(id);
                }
            }
        }
        // the partial unwind above is not the stop's frames
        self.stop.forget();
        // `ignore N COUNT`: a hit whose condition held, counted, no stop
        passing.retain(|id| !self.bps.ignored(*id));
        (passing, note)
    }
}

pub(crate) fn describe_loc(l: &BpLocation) -> String {
    let mut s = format!("in {}", l.function);
    if let Some((f, line)) = &l.file_line {
        s.push_str(&format!(" at {}:{line}", basename(f)));
    }
    if l.inlined {
        if let Some(into) = &l.inlined_into {
            s.push_str(&format!(" (inlined into {into})"));
        } else {
            s.push_str(" (inlined)");
        }
    }
    s
}
