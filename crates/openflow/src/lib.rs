//! Hayate's OpenFlow 1.3 wire codec: every message a switch sends or receives, OXM matches,
//! actions, instructions and multipart bodies, decoded into the pipeline's model types
//! ([`pipeline::model`]) where they exist. No I/O: bytes in, values out, and back.
//!
//! - [`decode`] turns one framed message into a [`Header`] and a [`Message`]; a failure is a
//!   [`DecodeError`] naming the OpenFlow error (type, code) the switch must answer with
//!   ([`ErrorMsg::for_request`] builds that reply).
//! - [`encode`] appends a message; decode ∘ encode is the identity on every value a message
//!   can carry.
//! - [`frame_len`] cuts a byte stream into messages.
//!
//! | file | job |
//! |---|---|
//! | `header.rs` | `ofp_header`, message types, framing |
//! | `error.rs` | error types and codes, [`DecodeError`], [`EncodeError`] |
//! | `wire.rs` | bounds-checked reader, big-endian writers |
//! | `oxm.rs` | OXM match fields, prerequisites, `ofp_match` |
//! | `action.rs`, `instruction.rs` | actions and instructions |
//! | `port.rs` | `ofp_port` (port descriptions) and its flag words |
//! | `messages/` | one file per group of messages (hello, errors, switch config, packets, mods, roles, queues) |
//! | `multipart/` | multipart requests and replies, one file per body family |
//! | `message.rs` | the [`Message`] enum, [`decode`] and [`encode`] |
//! | `fuzzing.rs` | the body of the fuzz target (also run by a stable test) |

#![deny(missing_docs)]

pub mod action;
pub mod error;
pub mod header;
pub mod instruction;
pub mod oxm;
mod wire;

pub use error::{error_type, DecodeError, EncodeError, ErrorCode};
pub use header::{frame_len, msg_type, Header, OFP_VERSION};
pub mod message;
pub mod messages;
pub mod multipart;
pub mod port;

pub use message::{decode, encode, Message};
pub use messages::controller::{AsyncConfig, ControllerRole, Experimenter, RoleRequest};
pub use messages::error_msg::ErrorMsg;
pub use messages::hello::{negotiate, Hello};
pub use messages::mods::{FlowModMsg, MeterModMsg};
pub use messages::packet::{
    FlowRemoved, FlowRemovedReason, PacketIn, PacketOut, PortReason, PortStatus, NO_BUFFER,
};
pub use messages::queue::{PacketQueue, QueueGetConfigReply, QueueProp};
pub use messages::switch::{FeaturesReply, PortMod, SwitchConfig, TableMod};
pub use multipart::{MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody};
pub use port::PortDesc;
