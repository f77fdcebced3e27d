//! Hayate's controller connections: transports, OpenFlow sessions, roles and fail mode.
//!
//! One [`Agent`] serves one bridge. It connects to or listens for controllers on the
//! [`Target`]s of its [`AgentConfig`] (TCP, TLS with mutual authentication, Unix sockets),
//! runs the OpenFlow 1.3 session on each connection (HELLO/version negotiation, echo and
//! inactivity probes, reconnection backoff, framing and its errors), arbitrates controller
//! roles ([`RoleTable`]), and reports whether any controller is connected so the bridge can
//! apply its [`FailMode`]. Everything else is the bridge's: the [`Bridge`] trait receives
//! the controllers' other messages as raw bytes, and [`AsyncSender`] carries packet-ins,
//! flow-removed and port-status messages back, rate-limited and bounded per controller.
//!
//! The agent runs on whatever tokio runtime calls [`Agent::start`]; it owns no threads (a
//! reply that comes in pieces, [`ReplyStream`], is made on the runtime's blocking pool) and
//! never sits on the per-packet path.
//!
//! [`ofproto::OfBridge`] is the OpenFlow bridge behind the seam: requests to the pipeline's
//! control side, multipart replies, packet-out into the datapath, and the pump that turns the
//! datapath's packet-ins and the pipeline's removed flows into asynchronous messages.
#![deny(missing_docs)]

mod admission;
mod agent;
pub mod bridge;
pub mod config;
pub mod connectivity;
pub mod framing;
pub mod ofproto;
pub mod rate_limit;
mod registry;
pub mod reply_stream;
pub mod role;
pub mod session;
pub mod target;
pub mod tls;
pub mod transport;

#[cfg(any(test, feature = "test-utils"))]
pub mod testing;

pub use admission::{shared_budget, ConnLimits};
pub use agent::{Agent, AsyncSender};
pub use bridge::{AsyncKind, Bridge};
pub use config::{AgentConfig, Backoff};
pub use connectivity::{Connectivity, FailMode};
pub use rate_limit::RateLimit;
pub use registry::{ConnCounters, ConnInfo, Delivery};
pub use reply_stream::ReplyStream;
pub use role::{Role, RoleError, RoleTable};
pub use target::{Target, TargetError};
pub use tls::{TlsConfig, TlsError, TlsFiles};

/// Identifies one controller connection of a bridge (unique for the agent's life).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);
