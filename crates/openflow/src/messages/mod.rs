//! The bodies of the non-multipart messages, one file per family.

pub mod controller;
pub mod error_msg;
pub mod hello;
pub mod mods;
pub mod packet;
pub mod queue;
pub mod switch;
