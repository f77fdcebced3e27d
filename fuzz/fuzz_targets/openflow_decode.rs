//! OpenFlow decoding of arbitrary bytes, then encode and decode again: nothing may panic and
//! what decodes must survive the round trip. The body lives in the openflow crate
//! (`openflow::fuzzing`) so a stable-Rust test runs it too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    openflow::fuzzing::fuzz_decode(data);
});
