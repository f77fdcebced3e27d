//! A virtio-net header and a frame, as a host or VM hands them to an AF_PACKET or TAP port,
//! through the receive path (whole and segmented) and back out: nothing may panic and no
//! pool frame may be lost. The body lives in the port crate (`port::fuzzing`) so a
//! stable-Rust test runs it too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    port::fuzzing::fuzz_vnet(data);
});
