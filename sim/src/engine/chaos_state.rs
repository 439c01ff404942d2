//! The faults of a run as the engine injects them ([`ChaosState`]): their
//! dice, what was injected, and the measured workload's faults held back
//! during a preload.

use crate::chaos::{Chaos, Dice};
use crate::spec::ChaosCounts;

/// The faults of a run as they are injected: the dice they are drawn from,
/// what was injected, and the measured workload's faults while a preload
/// holds them back.
pub(crate) struct ChaosState {
    /// The faults' dice.
    pub(crate) dice: Dice,
    /// The dice of the rare fates ([`Dice::rare_fate`](crate::chaos::Dice::rare_fate)) and of a
    /// duplicate's landing, a stream apart from `dice`.
    pub(crate) rare_dice: Dice,
    /// What was injected.
    pub(crate) counts: ChaosCounts,
    /// The faults of the measured workload, held back during a preload.
    pub(crate) held: Option<Chaos>,
}
