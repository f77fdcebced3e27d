//! Flow, group and meter text in `ovs-ofctl` syntax: nothing may panic, and a flow that
//! parses formats to text that parses back to the same flow-mod. The body lives in the
//! pipeline crate (`pipeline::fuzzing`) so a stable-Rust test runs it too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pipeline::fuzzing::fuzz_ofctl_text(data);
});
