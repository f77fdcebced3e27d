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
//! - [`negotiate`] picks the version from a peer's hello; [`multipart::encode_reply`] splits
//!   a long multipart reply with `REPLY_MORE`; `ErrorCode::from(&FlowModError)` (and group,
//!   meter) gives the error to answer a refused mod with.
//!
//! ```
//! use openflow::{decode, encode, frame_len, ErrorCode, ErrorMsg, FlowModMsg, Message, NO_BUFFER};
//! use pipeline::ofctl::parse_flow;
//!
//! // A controller's flow-mod, as bytes on the wire.
//! let fm = parse_flow("priority=5,tcp,tp_dst=80,actions=output:2").unwrap();
//! let mut wire = Vec::new();
//! encode(7, &Message::FlowMod(FlowModMsg { flow_mod: fm.clone(), buffer_id: NO_BUFFER }), &mut wire).unwrap();
//!
//! // The switch frames and decodes it.
//! let len = frame_len(&wire).unwrap().expect("a whole header");
//! let (header, msg) = decode(&wire[..len]).unwrap();
//! assert_eq!(header.xid, 7);
//! assert_eq!(msg, Message::FlowMod(FlowModMsg { flow_mod: fm, buffer_id: NO_BUFFER }));
//!
//! // A malformed request is answered with the error its DecodeError names.
//! let mut bad = wire.clone();
//! bad[25] = 9; // no such flow-mod command
//! let err = decode(&bad).unwrap_err();
//! assert_eq!(err.code, ErrorCode::FMFC_BAD_COMMAND);
//! let reply = Message::Error(ErrorMsg::for_request(err.code, &bad));
//! let mut out = Vec::new();
//! encode(header.xid, &reply, &mut out).unwrap();
//! assert_eq!(out.len(), 8 + 4 + 64);
//! ```
//!
//! | file | job |
//! |---|---|
//! | `header.rs` | `ofp_header`, message types, framing |
//! | `error.rs` | error types and codes, [`DecodeError`], [`EncodeError`] |
//! | `wire.rs` | bounds-checked reader, big-endian writers |
//! | `oxm.rs` | OXM match fields, prerequisites, `ofp_match` |
//! | `as_sent.rs` | matches and bucket actions given back as the controller wrote them |
//! | `pipeline_errors.rs` | the error code for each pipeline refusal |
//! | `action.rs`, `instruction.rs` | actions and instructions |
//! | `port.rs` | `ofp_port` (port descriptions) and its flag words |
//! | `messages/` | one file per group of messages (hello, errors, switch config, packets, mods, roles, queues) |
//! | `multipart/` | multipart requests and replies, one file per body family; `split.rs` cuts long replies |
//! | `message.rs` | the [`Message`] enum, [`decode`] and [`encode`] |
//! | `fuzzing.rs` | the body of the fuzz target (also run by a stable test) |

#![deny(missing_docs)]

pub mod action;
mod as_sent;
pub mod error;
pub mod fuzzing;
pub mod header;
pub mod instruction;
pub mod message;
pub mod messages;
pub mod multipart;
pub mod oxm;
mod pipeline_errors;
pub mod port;
mod wire;

pub use error::{error_type, DecodeError, EncodeError, ErrorCode};
pub use header::{frame_len, msg_type, Header, OFP_VERSION};
pub use message::{decode, encode, encode_error_for, Message};
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

#[cfg(test)]
mod arb;
#[cfg(test)]
mod arb_multipart;
#[cfg(test)]
mod message_tests;
#[cfg(test)]
mod ovs_readback_tests;
#[cfg(test)]
mod roundtrip_tests;
