//! The "each queue is opened once" rule, shared by every backend.
//!
//! A [`QueueClaim`] is taken when a queue is opened and held by the queue object; a second
//! open while it is held fails. Dropping the queue releases the claim, so a queue can be
//! opened again later (e.g. when the datapath moves it to another thread).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::PortError;

/// The open/closed flag of one queue. Cloned into the port; claimed by the queue object.
#[derive(Debug, Default, Clone)]
pub(crate) struct QueueSlot(Arc<AtomicBool>);

impl QueueSlot {
    /// Claims the queue, or explains why it cannot be opened. `what` names it in the error,
    /// e.g. "rx queue 0".
    pub(crate) fn claim(&self, port: &str, what: &str) -> Result<QueueClaim, PortError> {
        // Acquire pairs with the Release in `QueueClaim::drop`: everything the previous owner
        // did with the queue happens before the new owner starts.
        if self.0.swap(true, Ordering::Acquire) {
            return Err(PortError::new(
                port,
                format!(
                    "{what} is already open; a queue has one owner at a time \
                     (drop the open queue first)"
                ),
            ));
        }
        Ok(QueueClaim(self.0.clone()))
    }
}

/// Claims queue `queue` among `slots` (one per queue of that kind the port has); `kind`
/// ("rx", "tx", "priority rx") names it in errors, which say when there is no such queue.
pub(crate) fn claim_queue(
    slots: &[QueueSlot],
    port: &str,
    kind: &str,
    queue: u16,
) -> Result<QueueClaim, PortError> {
    let slot = slots.get(usize::from(queue)).ok_or_else(|| {
        PortError::new(
            port,
            format!(
                "{kind} queue {queue} does not exist: the port has {} (queues=N for more)",
                slots.len()
            ),
        )
    })?;
    slot.claim(port, &format!("{kind} queue {queue}"))
}

/// Proof that the holder owns a queue. Dropping it releases the queue.
#[derive(Debug)]
pub(crate) struct QueueClaim(Arc<AtomicBool>);

impl Drop for QueueClaim {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_claim_fails_until_first_is_dropped() {
        let slot = QueueSlot::default();
        let first = slot.claim("p", "rx queue 0").unwrap();
        let err = slot.claim("p", "rx queue 0").unwrap_err();
        assert!(
            err.to_string().contains("rx queue 0 is already open"),
            "{err}"
        );
        drop(first);
        assert!(slot.claim("p", "rx queue 0").is_ok());
    }

    #[test]
    fn a_queue_past_the_slots_does_not_exist() {
        let slots = vec![QueueSlot::default(); 2];
        let _q1 = claim_queue(&slots, "p", "tx", 1).unwrap();
        let err = claim_queue(&slots, "p", "tx", 1).unwrap_err().to_string();
        assert!(err.contains("tx queue 1 is already open"), "{err}");
        let err = claim_queue(&slots, "p", "tx", 2).unwrap_err().to_string();
        assert!(
            err.contains("tx queue 2 does not exist: the port has 2"),
            "{err}"
        );
    }
}
