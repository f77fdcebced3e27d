//! The CPU as every crate of Hayate sees it, in one place: the cycle counter that poll
//! threads, the generator and the benchmarks time with ([`tsc`]), and pinning a thread to a
//! core or keeping it off the poll threads' cores ([`pin`]).

pub mod pin;
pub mod tsc;

pub use pin::{available_cores, keep_off, pin_current};
pub use tsc::{cycles, Tsc};
