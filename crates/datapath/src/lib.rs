//! Hayate fast path: poll-mode threads, exact-match cache, megaflow classifier, action execution.
#![deny(missing_docs)]

pub mod dpcls;
pub mod emc;
pub mod megaflow;
pub mod stats;
pub mod upcall;
