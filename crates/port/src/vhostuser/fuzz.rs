//! The body of the `vring` fuzz target: a guest that writes anything into its rings.
//!
//! The input becomes a pretend guest's ring of 16 entries: one byte of choices (features),
//! then 16 descriptors of 8 bytes (an address offset into the guest's region — so chains
//! often land in memory — a length, flags and `next`, all as given), the available index,
//! 16 available heads, and the rest as buffer contents. The receive queue takes what the
//! "guest" offers, the transmit queue writes two frames (one a super-packet) into it, then
//! the receive side runs again. Nothing may panic, nothing may be read or written outside
//! the region (the pretend guest's memory is an ordinary heap buffer: AddressSanitizer in
//! cargo-fuzz sees any stray access), and every pool frame must come back.

use std::sync::Arc;

use packet::{Batch, Gso, Pool};

use super::guest::{FakeGuest, GPA};
use super::live::NetFeatures;
use super::rx::VhostRx;
use super::tx::VhostTx;
use super::Shared;
use crate::claim::QueueSlot;
use crate::{RxQueue, TxQueue};

/// Queue size of the pretend guest.
const N: u16 = 16;
/// Bytes of buffer space.
const DATA: usize = 8192;

fn u16_at(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([
        d.get(at).copied().unwrap_or(0),
        d.get(at + 1).copied().unwrap_or(0),
    ])
}

/// Runs `data` through a port's queues as described in the [module docs](self); returns
/// the frames received from the "guest".
pub fn run(data: &[u8]) -> usize {
    let Some((&choice, rest)) = data.split_first() else {
        return 0;
    };
    let mut g = FakeGuest::new(N, DATA);
    let region = g.region_mut().len() as u64;
    for i in 0..N {
        let at = 8 * usize::from(i);
        let off = u64::from(u16_at(rest, at)) % region;
        g.set_desc(
            i,
            GPA + off,
            u32::from(u16_at(rest, at + 2)),
            u16_at(rest, at + 4),
            u16_at(rest, at + 6),
        );
    }
    let heads_at = 8 * usize::from(N) + 2;
    for i in 0..N {
        // Offer raw head values (any index, in range or not).
        g.offer(u16_at(rest, heads_at + 2 * usize::from(i)));
    }
    g.set_avail_idx(u16_at(rest, 8 * usize::from(N)));
    let contents = rest.get(heads_at + 2 * usize::from(N)..).unwrap_or(&[]);
    let start = (g.data_start() - GPA) as usize;
    let r = g.region_mut();
    let n = contents.len().min(r.len() - start);
    r[start..start + n].copy_from_slice(&contents[..n]);

    let net = NetFeatures {
        hdr_len: if choice & 1 != 0 { 12 } else { 10 },
        mrg_rxbuf: choice & 2 != 0,
        guest_tso4: choice & 4 != 0,
        guest_tso6: choice & 4 != 0,
        guest_ecn: choice & 8 != 0,
    };
    let event_idx = choice & 16 != 0;
    let pool = Pool::with_frames(128);
    let mut cache = pool.cache();
    let before = pool.shared_free();
    let shared = Arc::new(Shared::new("fuzz", 1).expect("descriptors"));
    let (rs, ts) = (QueueSlot::default(), QueueSlot::default());
    let mut rx = VhostRx::new(
        shared.clone(),
        0,
        pool.cache(),
        rs.claim("fuzz", "rx").expect("fresh slot"),
    );
    let mut tx = VhostTx::new(
        shared.clone(),
        0,
        pool.cache(),
        ts.claim("fuzz", "tx").expect("fresh slot"),
    );
    // The same ring serves both directions: the guest lies about which way its buffers go.
    shared.vrings[1].start(g.live(0, net, event_idx));
    shared.vrings[0].start(g.live(0, net, event_idx));
    let mut received = 0;
    let mut drain = |rx: &mut VhostRx, cache: &mut packet::PoolCache| {
        for _ in 0..4 {
            let mut b = Batch::new();
            rx.recv(&mut b);
            received += b.len();
            b.free_into(cache);
        }
    };
    drain(&mut rx, &mut cache);
    let mut b = Batch::new();
    if let Some(p) = cache.alloc_from(&contents[..contents.len().min(1500)]) {
        let _ = b.push(p);
    }
    if let Some(mut p) = cache.alloc_gso() {
        let len = contents.len().min(4000);
        if p.set_data(&contents[..len]) {
            p.set_gso(Some(Gso {
                v6: choice & 32 != 0,
                ecn: choice & 64 != 0,
                mss: u16_at(contents, 0).max(1),
                outer: 0,
            }));
            let _ = b.push(p);
        } else {
            cache.free(p);
        }
    }
    tx.send(&mut b);
    b.free_into(&mut cache);
    drain(&mut rx, &mut cache);
    shared.vrings[0].stop();
    shared.vrings[1].stop();
    drop(rx);
    drop(tx);
    drop(cache);
    assert_eq!(pool.shared_free(), before, "frames lost or made up");
    received
}
