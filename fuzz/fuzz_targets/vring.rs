//! A guest that writes anything into its vhost-user rings: descriptors, indexes, headers
//! and frames from arbitrary bytes, through a vhost-user port's receive and transmit
//! queues. Nothing may panic, touch memory outside the guest's region, or lose a pool
//! frame. The body lives in the port crate (`port::fuzzing`) so a stable-Rust test runs it
//! too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    port::fuzzing::fuzz_vring(data);
});
