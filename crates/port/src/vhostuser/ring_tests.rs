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

/// virtio-queue (rust-vmm) walks the same rings as the oracle: for every head of a random
/// descriptor table, whenever `walk` accepts a chain, it yields exactly the buffers
/// virtio-queue's `DescriptorChain` yields (zero-length ones aside); well-formed chains are
/// always accepted.
mod oracle {
    use super::*;
    use crate::vhostuser::guest::{FakeGuest, GPA};
    use proptest::prelude::*;
    use virtio_queue::{Queue, QueueOwnedT, QueueT};
    use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

    const N: u16 = 16;
    const DATA: usize = 4096;

    /// Walks every available head both ways; returns (ours, theirs) per head.
    #[allow(clippy::type_complexity)]
    fn both(
        g: &mut FakeGuest,
        heads: usize,
    ) -> Vec<(Result<Vec<(u64, u32)>, ChainError>, Vec<(u64, u32)>)> {
        let mem = g.mem();
        let base = mem.translate(GPA, 1).unwrap() as u64;
        let ring = SplitRing::new(&mem, &g.addrs(), false).unwrap();
        let bytes = g.region_mut().to_vec();
        let gm = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(GPA), bytes.len())]).unwrap();
        gm.write_slice(&bytes, GuestAddress(GPA)).unwrap();
        let a = g.addrs();
        let mut q = Queue::new(N).unwrap();
        q.set_size(N);
        let lo_hi = |x: u64| (Some(x as u32), Some((x >> 32) as u32));
        let (l, h) = lo_hi(a.desc - crate::vhostuser::guest::UA + GPA);
        q.set_desc_table_address(l, h);
        let (l, h) = lo_hi(a.avail - crate::vhostuser::guest::UA + GPA);
        q.set_avail_ring_address(l, h);
        let (l, h) = lo_hi(a.used - crate::vhostuser::guest::UA + GPA);
        q.set_used_ring_address(l, h);
        q.set_ready(true);
        let mut out = Vec::new();
        for pos in 0..heads as u16 {
            let head = ring.avail_head(pos);
            let mut ours = Vec::new();
            let r = walk(&ring, &mem, head, Dir::Read, |s| {
                ours.push((s.host as u64 - base + GPA, s.len));
                true
            })
            .map(|_| ours);
            let theirs: Vec<(u64, u32)> = match q.iter(&gm).unwrap().next() {
                Some(chain) => chain
                    .filter(|d| d.len() > 0)
                    .map(|d| (d.addr().0, d.len()))
                    .collect(),
                None => Vec::new(),
            };
            out.push((r, theirs));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn random_tables_walk_as_virtio_queue_walks_them(
            descs in proptest::collection::vec((0u64..DATA as u64, 0u32..600, 0u16..8, 0u16..20), N as usize),
            heads in proptest::collection::vec(0u16..N, 1..8),
        ) {
            let mut g = FakeGuest::new(N, DATA);
            let data = g.data_start();
            for (i, (off, len, flags, next)) in descs.iter().enumerate() {
                // Mostly chains (NEXT), sometimes indirect tables or device-writable buffers.
                let flags = match flags {
                    0..=3 => DESC_F_NEXT,
                    4 => DESC_F_INDIRECT,
                    5 => DESC_F_WRITE,
                    _ => 0,
                };
                let len = if flags == DESC_F_INDIRECT { len & !15 } else { *len };
                g.set_desc(i as u16, data + off, len, flags, *next);
            }
            for h in &heads {
                g.offer(*h);
            }
            for (ours, theirs) in both(&mut g, heads.len()) {
                if let Ok(ours) = ours {
                    prop_assert_eq!(ours, theirs);
                }
            }
        }

        #[test]
        fn well_formed_chains_are_accepted_and_walk_alike(
            parts in proptest::collection::vec(proptest::collection::vec(1u8..=255, 1..200), 1..5),
            indirect in any::<bool>(),
        ) {
            let mut g = FakeGuest::new(N, 1 << 14);
            let refs: Vec<&[u8]> = parts.iter().map(|p| p.as_slice()).collect();
            if indirect {
                g.send_indirect(&refs);
            } else {
                g.send(&refs);
            }
            let r = both(&mut g, 1);
            let (ours, theirs) = &r[0];
            prop_assert_eq!(ours.as_ref().unwrap(), theirs);
            prop_assert_eq!(theirs.len(), parts.len());
        }
    }
}

#[test]
fn a_descriptor_reads_the_same_at_any_alignment() {
    let d: [u8; 16] = [
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xaa, 0xbb, 0xcc, 0xdd, 0x03, 0x00, 0x07,
        0x01,
    ];
    let want = (0x8877_6655_4433_2211u64, 0xddcc_bbaa, 3, 0x0107);
    // An 8-aligned buffer, the descriptor at every offset of the first eight.
    let mut buf = [0u64; 4];
    for off in 0..8 {
        // SAFETY: the buffer holds 32 bytes; off + 16 <= 24.
        let got = unsafe {
            let p = (buf.as_mut_ptr() as *mut u8).add(off);
            std::ptr::copy_nonoverlapping(d.as_ptr(), p, 16);
            read_desc(p)
        };
        assert_eq!(got, want, "offset {off}");
    }
}
