//! A [`Bridge`] wrapper that wakes the bridge's pump after every controller message, so the
//! pump can sleep long while nothing happens (a thousand idle bridges cost next to nothing)
//! and still publish a flow-mod that no barrier or packet-out published within milliseconds.

use std::sync::Arc;

use agent::{Bridge, ConnId, Connectivity, ReplyStream, Role};
use tokio::sync::Notify;

/// Forwards everything to `inner`; after each handled message, notifies `pump`.
pub struct Nudging<B> {
    /// The bridge that does the work.
    pub inner: Arc<B>,
    /// Woken after each message (a stored permit if the pump is not waiting yet).
    pub pump: Arc<Notify>,
}

impl<B: Bridge> Bridge for Nudging<B> {
    fn datapath_id(&self) -> u64 {
        self.inner.datapath_id()
    }

    fn handle(&self, conn: ConnId, role: Role, msg: &[u8], replies: &mut Vec<u8>) {
        self.inner.handle(conn, role, msg, replies);
        self.pump.notify_one();
    }

    fn handle_streamed(
        &self,
        conn: ConnId,
        role: Role,
        msg: &[u8],
        replies: &mut Vec<u8>,
    ) -> Option<ReplyStream> {
        let stream = self.inner.handle_streamed(conn, role, msg, replies);
        self.pump.notify_one();
        stream
    }

    fn can_take(&self, msg_type: u8) -> bool {
        self.inner.can_take(msg_type)
    }

    fn on_connectivity(&self, event: Connectivity) {
        self.inner.on_connectivity(event);
        self.pump.notify_one();
    }

    fn on_connect(&self, conn: ConnId) {
        self.inner.on_connect(conn);
        self.pump.notify_one();
    }

    fn on_disconnect(&self, conn: ConnId) {
        self.inner.on_disconnect(conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Bridge for Counting {
        fn datapath_id(&self) -> u64 {
            7
        }
        fn handle(&self, _: ConnId, _: Role, _: &[u8], replies: &mut Vec<u8>) {
            self.0.fetch_add(1, Ordering::Relaxed);
            replies.push(1);
        }
        fn on_connectivity(&self, _: Connectivity) {}
    }

    #[tokio::test]
    async fn each_message_is_forwarded_and_wakes_the_pump() {
        let pump = Arc::new(Notify::new());
        let b = Nudging {
            inner: Arc::new(Counting::default()),
            pump: pump.clone(),
        };
        assert_eq!(b.datapath_id(), 7);
        let mut out = Vec::new();
        b.handle(ConnId(1), Role::Equal, &[4, 0, 0, 8], &mut out);
        assert_eq!(out, [1]);
        assert_eq!(b.inner.0.load(Ordering::Relaxed), 1);
        // The permit was stored: a pump that waits now returns at once.
        tokio::time::timeout(std::time::Duration::from_secs(1), pump.notified())
            .await
            .expect("the pump was woken");
    }
}
