//! OVSDB bytes through the stream decoder, the update parser and a replica: nothing may
//! panic. The body lives in the ovsdb crate (`ovsdb::fuzzing`) so a stable-Rust test runs it.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ovsdb::fuzzing::fuzz_update(data);
});
