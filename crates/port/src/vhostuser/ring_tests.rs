//! Ring geometry checks and the interrupt rule, on a pretend guest.

use super::*;
use crate::vhostuser::guest::{FakeGuest, UA};

#[test]
fn a_ring_outside_memory_or_misaligned_or_of_a_bad_size_is_refused() {
    let g = FakeGuest::new(16, 4096);
    let mem = g.mem();
    let ok = g.addrs();
    assert!(SplitRing::new(&mem, &ok, false).is_ok());
    let bad = |a: RingAddrs| SplitRing::new(&mem, &a, false).unwrap_err();
    assert!(bad(RingAddrs { size: 12, ..ok }).contains("power of two"));
    assert!(bad(RingAddrs { size: 0, ..ok }).contains("power of two"));
    assert!(bad(RingAddrs { desc: UA + 8, ..ok }).contains("aligned"));
    assert!(bad(RingAddrs {
        used: UA + (1 << 40),
        ..ok
    })
    .contains("outside"));
    assert!(bad(RingAddrs { avail: 3, ..ok }).contains("aligned"));
    // A size whose tables run past the region's end.
    assert!(bad(RingAddrs { size: 32768, ..ok }).contains("outside"));
}

#[test]
fn pending_counts_what_the_guest_offered_and_flags_a_corrupt_index() {
    let mut g = FakeGuest::new(16, 4096);
    let ring = SplitRing::new(&g.mem(), &g.addrs(), false).unwrap();
    assert_eq!(ring.pending(0), Some(0));
    g.set_avail_idx(16);
    assert_eq!(ring.pending(0), Some(16));
    assert_eq!(ring.pending(10), Some(6));
    g.set_avail_idx(17);
    assert_eq!(ring.pending(0), None, "more than a queue ahead");
    // Wrapping around 65535 is fine.
    g.set_avail_idx(3);
    assert_eq!(ring.pending(65530), Some(9));
}

#[test]
fn with_event_idx_the_guest_is_interrupted_only_when_its_event_is_passed() {
    let mut g = FakeGuest::new(16, 4096);
    let ring = SplitRing::new(&g.mem(), &g.addrs(), true).unwrap();
    // used_event lives right after the available ring: offset 4 + 2 * 16 of it.
    let at = (g.addrs().avail - UA) as usize + 4 + 32;
    let set_event = |g: &mut FakeGuest, v: u16| {
        g.region_mut()[at..at + 2].copy_from_slice(&v.to_le_bytes());
    };
    set_event(&mut g, 5);
    assert!(!ring.wants_interrupt(0, 5), "5 not passed yet");
    assert!(ring.wants_interrupt(0, 6), "moving 0 -> 6 passes 5");
    assert!(!ring.wants_interrupt(6, 9), "already passed");
    set_event(&mut g, 65535);
    assert!(ring.wants_interrupt(65534, 1), "across the wrap");
}
