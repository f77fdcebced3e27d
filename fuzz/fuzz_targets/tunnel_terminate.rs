//! Tunnel termination on arbitrary frames from an underlay port: nothing may panic, and a
//! terminated packet's inner frame lies inside it. The body lives in the tunnel crate
//! (`tunnel::fuzzing`) so a stable-Rust test runs it too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tunnel::fuzzing::fuzz_terminate(data);
});
