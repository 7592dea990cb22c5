//! Parameters and locals visible at a pc: the scopes of a subprogram or
//! inlined call, their variables and location expressions.
use super::*;
use index::die_offset;

impl DebugInfo {
    // ------------------------------------------------------------ scopes

    /// Parameters and locals visible at link-time `pc` in the scope `die`
    /// (a subprogram or inlined_subroutine), innermost blocks included but
    /// not nested inlined calls.  Also returns the DW_AT_frame_base of the
    /// enclosing subprogram.
    pub fn scope_vars(&self, die: u64, pc: u64) -> Result<ScopeVars> {
        if let Some(v) = self.scope_cache.borrow().get(&(die, pc)) {
            return Ok(v.clone());
        }
        let v = self.scope_vars_uncached(die, pc)?;
        bounded_insert(&mut self.scope_cache.borrow_mut(), (die, pc), v.clone());
        Ok(v)
    }

    fn scope_vars_uncached(&self, die: u64, pc: u64) -> Result<ScopeVars> {
        let unit = self.unit_for_offset(die)?;
        let u = &*unit;
        let uoff = die_offset(&self.dwarf, u, gimli::UnitOffset(0));
        let uo = index::unit_offset(u, die).ok_or_else(|| anyhow!("bad scope DIE"))?;
        let mut out = Vec::new();
        let mut tree = u.entries_tree(Some(uo)).map_err(|e| anyhow!("{e}"))?;
        let root = tree.root().map_err(|e| anyhow!("{e}"))?;
        let frame_base = match root.entry().attr_value(dw::DW_AT_frame_base) {
            Some(AttributeValue::Exprloc(e)) => Some(e),
            _ => None,
        };
        self.collect_vars(u, uoff, root, pc, &mut out, 0)?;
        // A concrete out-of-line copy of an inline function may lack the
        // frame base on an abstract origin: look at the subprogram chain.
        Ok((out, frame_base))
    }

    fn collect_vars(
        &self,
        u: &gimli::Unit<R>,
        uoff: u64,
        node: gimli::EntriesTreeNode<R>,
        pc: u64,
        out: &mut Vec<VarInfo>,
        depth: u32,
    ) -> Result<()> {
        let mut children = node.children();
        while let Some(child) = children.next().map_err(|e| anyhow!("{e}"))? {
            let e = child.entry().clone();
            match e.tag() {
                dw::DW_TAG_formal_parameter | dw::DW_TAG_variable => {
                    let off = die_offset(&self.dwarf, u, e.offset());
                    let name = match e
                        .attr_value(dw::DW_AT_name)
                        .and_then(|v| self.attr_str(u, v))
                    {
                        Some(n) => n,
                        None => match self.die_name(off) {
                            Some(n) => n,
                            None => continue,
                        },
                    };
                    let loc = match e.attr_value(dw::DW_AT_location) {
                        Some(AttributeValue::Exprloc(x)) => LocDesc::Expr(x),
                        Some(AttributeValue::LocationListsRef(o)) => LocDesc::List(o),
                        Some(v @ AttributeValue::SecOffset(_))
                        | Some(v @ AttributeValue::DebugLocListsIndex(_)) => {
                            match self.dwarf.attr_locations_offset(u, v) {
                                Ok(Some(o)) => LocDesc::List(o),
                                _ => LocDesc::None,
                            }
                        }
                        _ => match e.attr_value(dw::DW_AT_const_value) {
                            Some(AttributeValue::Block(b)) => LocDesc::Const(b.slice().to_vec()),
                            Some(AttributeValue::Sdata(x)) => {
                                LocDesc::Const(x.to_le_bytes().to_vec())
                            }
                            Some(AttributeValue::Udata(x)) => {
                                LocDesc::Const(x.to_le_bytes().to_vec())
                            }
                            Some(AttributeValue::Data1(x)) => LocDesc::Const(vec![x]),
                            Some(AttributeValue::Data2(x)) => {
                                LocDesc::Const(x.to_le_bytes().to_vec())
                            }
                            Some(AttributeValue::Data4(x)) => {
                                LocDesc::Const(x.to_le_bytes().to_vec())
                            }
                            Some(AttributeValue::Data8(x)) => {
                                LocDesc::Const(x.to_le_bytes().to_vec())
                            }
                            _ => LocDesc::None,
                        },
                    };
                    // Static locals are globals; a declaration without a
                    // location is not interesting.
                    out.push(VarInfo {
                        name,
                        ty: self.die_type(off),
                        loc,
                        is_param: e.tag() == dw::DW_TAG_formal_parameter,
                        unit: uoff,
                    });
                }
                dw::DW_TAG_lexical_block if depth < 32 && self.die_contains(u, &e, pc) => {
                    self.collect_vars(u, uoff, child, pc, out, depth + 1)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn die_contains(
        &self,
        u: &gimli::Unit<R>,
        e: &gimli::DebuggingInformationEntry<R>,
        pc: u64,
    ) -> bool {
        match self.dwarf.die_ranges(u, e) {
            Ok(mut r) => {
                let mut any = false;
                while let Ok(Some(range)) = r.next() {
                    any = true;
                    if pc >= range.begin && pc < range.end {
                        return true;
                    }
                }
                !any
            }
            Err(_) => true,
        }
    }

    /// The location expression of a variable at link-time `pc`.
    pub fn var_expression(&self, v: &VarInfo, pc: u64) -> Result<Option<gimli::Expression<R>>> {
        match &v.loc {
            LocDesc::Expr(e) => Ok(Some(*e)),
            LocDesc::List(off) => {
                let unit = self.unit_for_offset(v.unit)?;
                let mut it = self
                    .dwarf
                    .locations(&unit, *off)
                    .map_err(|e| anyhow!("{e}"))?;
                while let Some(entry) = it.next().map_err(|e| anyhow!("{e}"))? {
                    if pc >= entry.range.begin && pc < entry.range.end {
                        return Ok(Some(entry.data));
                    }
                }
                Ok(None)
            }
            _ => Ok(None),
        }
    }
}
