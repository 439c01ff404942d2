//! [`SlotWatch`]: the request slots one server worker serves, and the
//! sequence number it last served in each. The worker's logic marks
//! requests served; its driver (the threaded one, or the simulator) looks
//! for new ones, which is how [`Effect::AwaitRequest`](crate::machine::Effect::AwaitRequest)
//! is resolved. A slot ends in a control word whose bits 0-31 carry the
//! request's sequence number (as a response slot's do for
//! [`Effect::AwaitResponse`](crate::machine::Effect::AwaitResponse)); where
//! the slots lie is the mailbox's business ([`crate::mailbox::MailboxLayout::watch`]).

use std::sync::atomic::{AtomicU32, Ordering};

/// The slots one worker watches (module documentation).
#[derive(Debug)]
pub struct SlotWatch {
    slots: Vec<u32>,
    ctrl: Vec<u64>,
    seen: Vec<AtomicU32>,
}

impl SlotWatch {
    /// A watch over `slots` (global client numbers, ascending, in scan
    /// order), each with the offset of its control word in the node's data
    /// region.
    pub fn new(slots: impl IntoIterator<Item = (u32, u64)>) -> SlotWatch {
        let (slots, ctrl): (Vec<u32>, Vec<u64>) = slots.into_iter().unzip();
        debug_assert!(slots.windows(2).all(|w| w[0] < w[1]), "ascending slots");
        SlotWatch {
            seen: slots.iter().map(|_| AtomicU32::new(0)).collect(),
            slots,
            ctrl,
        }
    }

    /// The slots (global client numbers), in scan order.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// Offset of the control word of the slot at position `i`.
    pub fn ctrl_offset(&self, i: usize) -> u64 {
        self.ctrl[i]
    }

    /// The position of global slot `g` in this watch, if the worker serves it.
    pub fn position(&self, g: u32) -> Option<usize> {
        self.slots.binary_search(&g).ok()
    }

    /// Whether control word `ctrl` of the slot at position `i` announces a
    /// request the worker has not served.
    pub fn is_new(&self, i: usize, ctrl: u64) -> bool {
        let seq = ctrl as u32;
        seq != 0 && seq != self.seen[i].load(Ordering::Relaxed)
    }

    /// Records that request `seq` of the slot at position `i` was served
    /// (or skipped for good).
    pub fn mark_seen(&self, i: usize, seq: u32) {
        self.seen[i].store(seq, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_new_until_its_sequence_number_is_marked_seen() {
        let w = SlotWatch::new([(1, 64), (3, 128)]);
        assert_eq!(w.slots(), &[1, 3]);
        assert_eq!((w.position(3), w.position(2)), (Some(1), None));
        assert_eq!(w.ctrl_offset(1), 128);
        assert!(!w.is_new(0, 0), "sequence 0: an empty slot");
        let ctrl = (7u64 << 32) | 5; // code 7, sequence 5
        assert!(w.is_new(0, ctrl));
        w.mark_seen(0, 5);
        assert!(!w.is_new(0, ctrl));
        assert!(
            w.is_new(0, 6) && w.is_new(1, ctrl),
            "per slot, per sequence"
        );
    }
}
