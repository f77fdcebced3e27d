//! A batch of frames bound for a port that takes super-packets, joined where they are a TCP
//! stream's segments (`port::coalesce`): cut again, the super-packets must give back exactly
//! the frames given; nothing may panic and no pool frame may be lost. The body lives in the
//! port crate (`port::fuzzing`) so a stable-Rust test runs it too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    port::fuzzing::fuzz_coalesce(data);
});
