//! Hayate fast path: poll-mode threads, exact-match cache, megaflow classifier, action execution.
#![deny(missing_docs)]

pub mod config;
pub mod datapath;
pub mod dpcls;
pub mod emc;
pub mod execute;
pub mod megaflow;
pub mod pmd;
pub mod stats;
pub mod upcall;

pub use config::DpConfig;
pub use datapath::{Datapath, DatapathBuilder, DpError, Running};
pub use execute::PacketIn;
pub use pmd::{now_ns, Pmd, PmdParts};
pub use stats::{Counter, PmdStats, Snapshot};
pub use upcall::{Police, Policer, Upcall, UpcallFactory};
