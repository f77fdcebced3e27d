//! Key extraction on arbitrary bytes, then every rewrite on the result: nothing may panic.
//! The body lives in the packet crate (`packet::fuzzing`) so a stable-Rust test runs it too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::fuzzing::fuzz_extract_and_rewrite(data);
});
