//! The `ovs-ofctl` flow syntax (OpenFlow 1.3 subset), both ways: what Hayate's TOML config
//! and `hayate ctl` accept for flows, groups and meters, and how `dump-flows` prints them.
//!
//! ```
//! use pipeline::ofctl::{format_flow_mod, parse_flow};
//!
//! let fm = parse_flow("priority=5,tcp,tp_dst=80,actions=mod_vlan_vid:10,goto_table:1").unwrap();
//! assert_eq!(fm.priority, 5);
//! assert_eq!(
//!     format_flow_mod(&fm),
//!     "cookie=0x0, table=0, priority=5,tcp,tp_dst=80 actions=mod_vlan_vid:10,goto_table:1"
//! );
//! assert_eq!(
//!     parse_flow("in_port=1,actions=outptu:2").unwrap_err().to_string().split(';').next(),
//!     Some("flow \"in_port=1,actions=outptu:2\": unknown action \"outptu\"")
//! );
//! ```
//!
//! | file | job |
//! |---|---|
//! | `lexer.rs` | splitting text into words |
//! | `values.rs` | numbers, MACs, IP addresses, masks, ports (parse and print) |
//! | `fields.rs` | the match field table: names, syntax, masks, prerequisites |
//! | `matcher.rs` | match words into a [`Match`](crate::model::Match), conflicts, prerequisites |
//! | `actions.rs` | `actions=` into instructions |
//! | `flow.rs` | whole flow lines ([`parse_flow`], [`parse_flow_match`]) |
//! | `group.rs`, `meter.rs` | `add-group` and `add-meter` lines, both ways |
//! | `format.rs` | matches, actions and flows back to text |
//! | `error.rs` | [`FlowParseError`] |

mod actions;
mod error;
mod fields;
mod flow;
mod format;
mod group;
mod lexer;
mod matcher;
mod meter;
mod values;

pub use error::{ErrorKind, FlowParseError, TextKind};
pub use flow::{parse_flow, parse_flow_match, parse_flows, DEFAULT_PRIORITY};
pub use format::{
    format_action, format_action_list, format_actions, format_flow, format_flow_mod,
    format_flow_stats, format_match,
};
pub use group::{format_group, parse_group};
pub use meter::{format_meter, parse_meter};

#[cfg(test)]
mod roundtrip_tests;
