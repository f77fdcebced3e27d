//! What happens to one packet of a batch, and the same packed into one word so that the poll
//! loop finds runs of packets bound for the same place with one compare per packet.

use crate::megaflow::MegaflowId;

/// What happens to one packet of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Not decided yet.
    None,
    /// Run the actions of this megaflow.
    Flow(MegaflowId),
    /// Run the actions of uncached translation number `n` of this batch.
    Uncached(u8),
    /// Dropped by the upcall budget.
    Shed,
}

/// A [`Target`] in one word: a megaflow's [`MegaflowId::to_bits`] (slot indices stay below
/// 2^31, so the top bit is clear), or [`Packed::TAG`] with the kind and number in the low
/// bits. Two packed targets are equal exactly when the targets are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed(u64);

impl Packed {
    /// Set in every target that is not a megaflow.
    const TAG: u64 = 1 << 63;
    /// [`Target::None`].
    pub(crate) const NONE: Packed = Packed(Self::TAG);
    const SHED: Packed = Packed(Self::TAG | 1);
    const UNCACHED: u64 = Self::TAG | 0x100;

    /// The target this word holds.
    #[inline(always)]
    pub(crate) fn get(self) -> Target {
        if self.0 & Self::TAG == 0 {
            Target::Flow(MegaflowId::from_bits(self.0))
        } else if self == Self::NONE {
            Target::None
        } else if self == Self::SHED {
            Target::Shed
        } else {
            Target::Uncached(self.0 as u8)
        }
    }
}

impl From<Target> for Packed {
    #[inline(always)]
    fn from(t: Target) -> Packed {
        match t {
            Target::Flow(id) => {
                debug_assert!(id.index() < 1 << 31, "megaflow slot index {}", id.index());
                Packed(id.to_bits() & !Self::TAG)
            }
            Target::None => Self::NONE,
            Target::Shed => Self::SHED,
            Target::Uncached(u) => Packed(Self::UNCACHED | u as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_every_target_and_its_equality() {
        let targets = [
            Target::None,
            Target::Shed,
            Target::Uncached(0),
            Target::Uncached(1),
            Target::Uncached(255),
            Target::Flow(MegaflowId::new(0, 1)),
            Target::Flow(MegaflowId::new(0, 2)),
            Target::Flow(MegaflowId::new(1, 1)),
            Target::Flow(MegaflowId::new(0, 0)),
            Target::Flow(MegaflowId::new((1 << 31) - 1, u32::MAX)),
        ];
        for a in targets {
            assert_eq!(Packed::from(a).get(), a);
            for b in targets {
                assert_eq!(Packed::from(a) == Packed::from(b), a == b, "{a:?} vs {b:?}");
            }
        }
    }
}
