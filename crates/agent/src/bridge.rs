//! The seam between the agent and the bridge it serves.
//!
//! The agent owns connections, HELLO, echo, roles and the fail-mode timer; everything else a
//! controller sends goes to [`Bridge::handle`] as raw OpenFlow bytes (version already checked
//! to be 1.3, state-changing messages from slaves already refused). Messages the switch sends
//! on its own (packet-in, flow-removed, port-status) go the other way through
//! [`crate::AsyncSender::send`], which picks the eligible controllers by role and rate-limits
//! packet-ins. Bridge methods run on the agent's tokio tasks: they must not block; a reply
//! that takes long to build comes as a [`ReplyStream`] ([`Bridge::handle_streamed`]).

use crate::connectivity::Connectivity;
use crate::reply_stream::ReplyStream;
use crate::role::Role;
use crate::ConnId;

/// What the agent needs from a bridge.
pub trait Bridge: Send + Sync + 'static {
    /// The bridge's datapath id (used in logs here; FEATURES_REPLY is the bridge's to build).
    fn datapath_id(&self) -> u64;

    /// Handles one message from controller `conn` (a whole message, header included) and
    /// appends the encoded replies, if any, to `replies` (they are sent in order, right after).
    fn handle(&self, conn: ConnId, role: Role, msg: &[u8], replies: &mut Vec<u8>);

    /// As [`Bridge::handle`], except that a reply that takes long to build (a dump of a big
    /// table) may come as a [`ReplyStream`], whose pieces the session sends after `replies`
    /// and before it handles the controller's next message, while the runtime serves other
    /// sessions. The session calls this one. By default: [`Bridge::handle`], no stream.
    fn handle_streamed(
        &self,
        conn: ConnId,
        role: Role,
        msg: &[u8],
        replies: &mut Vec<u8>,
    ) -> Option<ReplyStream> {
        self.handle(conn, role, msg, replies);
        None
    }

    /// Whether the bridge can take a message of OpenFlow type `msg_type` now. When it cannot
    /// (e.g. the datapath's packet-out queue is full), the session leaves the message unread,
    /// reads nothing more from that controller, and asks again shortly: the controller is
    /// slowed down by TCP instead of getting an error. Always `true` by default.
    fn can_take(&self, msg_type: u8) -> bool {
        let _ = msg_type;
        true
    }

    /// The bridge got its first controller, or has had none for the fail-open delay.
    fn on_connectivity(&self, event: Connectivity);

    /// Controller `conn` finished the HELLO exchange. Does nothing by default.
    fn on_connect(&self, conn: ConnId) {
        let _ = conn;
    }

    /// Controller `conn` is gone (per-connection state such as async config can be dropped).
    /// Does nothing by default.
    fn on_disconnect(&self, conn: ConnId) {
        let _ = conn;
    }
}

/// Kinds of asynchronous messages, for choosing which controllers get them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncKind {
    /// OFPT_PACKET_IN: to master and equal controllers, rate-limited per controller.
    PacketIn,
    /// OFPT_FLOW_REMOVED: to master and equal controllers.
    FlowRemoved,
    /// OFPT_PORT_STATUS: to every controller, slaves included.
    PortStatus,
}

impl AsyncKind {
    /// Whether a controller in `role` receives this kind under the default asynchronous
    /// configuration of OpenFlow 1.3 (§7.3.10; SET_ASYNC filtering comes with the codec).
    pub fn goes_to(self, role: Role) -> bool {
        match self {
            AsyncKind::PortStatus => true,
            AsyncKind::PacketIn | AsyncKind::FlowRemoved => role != Role::Slave,
        }
    }
}
