//! Flows read back as the controller installed them, at little cost per flow.
//!
//! A flow entry keeps its instructions in execution order (meter, apply, clear, write,
//! metadata, goto), which is what translation walks; the order a controller gave them in is
//! kept beside them as [`GivenOrder`], a permutation packed in a `u32` (0 when it was
//! execution order already, as Open vSwitch and most controllers write it), and
//! [`FlowView`](crate::FlowView) gives the instructions back in that order.
//!
//! A match's OXM field order is a wire matter: the codec records it in a
//! [`WireForm`] only when it differs from the order the codec writes, and [`FormCache`]
//! interns those forms, so a million flows that a controller writes alike share one.

use std::collections::HashSet;

use crate::model::{Instruction, WireForm};

/// The order a flow's instructions were given in, packed: 3 bits per instruction, its
/// execution rank plus one, the first given in the lowest bits; 0 when they were given in
/// execution order.
pub type GivenOrder = u32;

/// The execution rank of an instruction (0 meter … 5 goto_table).
pub fn rank(i: &Instruction) -> u8 {
    match i {
        Instruction::Meter(_) => 0,
        Instruction::ApplyActions(_) => 1,
        Instruction::ClearActions => 2,
        Instruction::WriteActions(_) => 3,
        Instruction::WriteMetadata { .. } => 4,
        Instruction::GotoTable(_) => 5,
    }
}

/// The [`GivenOrder`] of `given` (at most one instruction of each kind, as validation
/// ensures; more than six give 0).
pub fn given_order(given: &[Instruction]) -> GivenOrder {
    if given.len() > 6 || given.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])) {
        return 0;
    }
    given
        .iter()
        .enumerate()
        .fold(0, |acc, (k, i)| acc | (u32::from(rank(i)) + 1) << (3 * k))
}

/// `sorted` (execution order) in the order `order` records.
pub fn in_given_order(sorted: &[Instruction], order: GivenOrder) -> Vec<Instruction> {
    if order == 0 {
        return sorted.to_vec();
    }
    let mut out = Vec::with_capacity(sorted.len());
    let mut o = order;
    while o != 0 {
        let r = (o & 7) as u8 - 1;
        out.extend(sorted.iter().filter(|i| rank(i) == r).cloned());
        o >>= 3;
    }
    out
}

/// Interned wire forms (see the module docs). Forms no flow holds any more are dropped when
/// the cache has doubled since it was last pruned.
#[derive(Debug, Default)]
pub struct FormCache {
    forms: HashSet<WireForm>,
    prune_at: usize,
}

impl FormCache {
    /// The shared copy of `form`.
    pub fn intern(&mut self, form: &Option<WireForm>) -> Option<WireForm> {
        let form = form.as_ref()?;
        if let Some(f) = self.forms.get(form) {
            return Some(f.clone());
        }
        if self.forms.len() >= self.prune_at {
            self.forms.retain(|f| std::sync::Arc::strong_count(f) > 1);
            self.prune_at = (2 * self.forms.len()).max(64);
        }
        self.forms.insert(form.clone());
        Some(form.clone())
    }

    /// Forms held.
    pub fn len(&self) -> usize {
        self.forms.len()
    }

    /// Whether no form is held.
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::Action;

    #[test]
    fn given_order_round_trips_and_is_free_in_execution_order() {
        let apply = Instruction::ApplyActions(vec![Action::DecNwTtl]);
        let given = vec![
            Instruction::GotoTable(3),
            apply.clone(),
            Instruction::Meter(1),
            Instruction::ClearActions,
        ];
        let order = given_order(&given);
        assert_ne!(order, 0);
        let mut sorted = given.clone();
        sorted.sort_by_key(rank);
        assert_eq!(in_given_order(&sorted, order), given);
        assert_eq!(given_order(&sorted), 0);
        assert_eq!(in_given_order(&sorted, 0), sorted);
        assert_eq!(given_order(&[]), 0);
    }

    /// What a flow holds for its wire forms and instruction order fits in the padding of its
    /// 64-byte-aligned entry: a million flows cost nothing more for it.
    #[test]
    fn an_entry_is_no_bigger_for_it() {
        // Two 192-byte keys (match value and mask) and 128 bytes for the rest.
        assert_eq!(std::mem::size_of::<crate::FlowEntry>(), 512);
    }

    /// Flows installed with equal forms (each decoded into an allocation of its own) hold
    /// one; a modify keeps the flow's match form and takes the new instructions' order.
    #[test]
    fn the_control_side_shares_forms_and_keeps_them_across_a_modify() {
        use crate::model::{FlowMod, FlowModCommand, Match};
        use crate::table::FlowFilter;
        use crate::{Control, PipelineConfig};
        use packet::Field;
        let (mut c, _cell) = Control::new(PipelineConfig::default());
        for port in 1..=2u32 {
            let mut m = Match::ANY;
            m.set_exact(Field::InPort, u128::from(port));
            let mut fm = FlowMod::add(0, 1, m, vec![Instruction::ClearActions]);
            fm.matcher_as_sent = Some(Arc::from(&[0u8, 0x80, 1][..]));
            c.flow_mod(&fm).unwrap();
        }
        let modify = FlowMod {
            command: FlowModCommand::Modify,
            ..FlowMod::add(
                0,
                0,
                Match::ANY,
                vec![Instruction::GotoTable(2), Instruction::ClearActions],
            )
        };
        c.flow_mod(&modify).unwrap();
        let views = c.flows(0, &FlowFilter::ALL);
        let forms: Vec<_> = views
            .iter()
            .map(|v| v.matcher_as_sent.clone().unwrap())
            .collect();
        assert_eq!(forms.len(), 2);
        assert!(Arc::ptr_eq(&forms[0], &forms[1]));
        for v in &views {
            assert_eq!(
                v.instructions,
                [Instruction::GotoTable(2), Instruction::ClearActions]
            );
        }
    }

    #[test]
    fn forms_are_shared_and_pruned() {
        let mut c = FormCache::default();
        let a: WireForm = Arc::from(&[1u8, 2, 3][..]);
        let held = c.intern(&Some(a.clone())).unwrap();
        let again = c.intern(&Some(Arc::from(&[1u8, 2, 3][..]))).unwrap();
        assert!(Arc::ptr_eq(&held, &again));
        assert_eq!(c.intern(&None), None);
        drop((a, held, again));
        for k in 0..200u8 {
            c.intern(&Some(Arc::from(&[0, k][..])));
        }
        assert!(c.len() < 200, "unheld forms pruned: {}", c.len());
    }
}
