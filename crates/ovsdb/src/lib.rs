//! An OVSDB client (RFC 7047) for a switch that takes the place of `ovs-vswitchd`.
//!
//! The database server (`ovsdb-server` with Open vSwitch's `vswitch.ovsschema`) holds the
//! configuration; the switch monitors the tables it needs, keeps a local replica of them, applies
//! what they say and writes back its state (port numbers, link state, counters, `cur_cfg`).
//!
//! ```text
//!  socket (unix:PATH | tcp:HOST:PORT)
//!    │ bytes ─► Decoder (rpc.rs: one JSON value per message, no delimiters)
//!    │        ─► Message ─► Response  ─► the waiting request (client.rs)
//!    │                   ─► "echo"    ─► answered at once (the server's keepalive)
//!    │                   ─► "update"  ─► TableUpdates (update.rs) ─► Replica::apply (replica.rs)
//!    ◄── requests: get_schema, monitor, transact (ops.rs builds the operations)
//! ```
//!
//! | file | job |
//! |---|---|
//! | `datum.rs` | OVSDB atoms, sets and maps in JSON: reading and writing them |
//! | `rpc.rs` | JSON-RPC 1.0 messages and the stream decoder |
//! | `update.rs` | `<table-updates>` of a monitor reply or `update` notification |
//! | `replica.rs` | the local copy of the monitored tables |
//! | `ops.rs` | transact operations (`update`, `mutate`) and monitor requests |
//! | `client.rs` | the connection on tokio: requests, echo replies, update notifications |
//! | `fuzzing.rs` | the body of the update-parser fuzz target (also run by a stable test) |
//!
//! No schema is compiled in: rows are JSON maps and the caller reads the columns it knows with
//! [`datum`]'s helpers, so a newer schema with more columns works unchanged.

pub mod client;
pub mod datum;
pub mod fuzzing;
pub mod ops;
pub mod replica;
pub mod rpc;
pub mod update;

pub use client::{Client, ClientError, Target};
pub use replica::{Replica, Row};
pub use update::{RowUpdate, TableUpdates};
