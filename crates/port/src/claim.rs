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
}
