//! The body of the `extract` fuzz target (`fuzz/fuzz_targets/extract.rs`), here so that a
//! normal test can run it on stable Rust: key extraction on arbitrary bytes, then every
//! rewrite on a packet holding those bytes. Nothing may panic; a rewrite that succeeds must
//! leave a packet whose key extraction still works.

use std::cell::RefCell;

use crate::extract::{extract, extract_packet};
use crate::key::{Field, FlowKey};
use crate::mpls::{copy_ttl_in, copy_ttl_out, dec_mpls_ttl, pop_mpls, push_mpls};
use crate::pool::{Pool, PoolCache, FRAME_SIZE, HEADROOM};
use crate::rewrite::{dec_ttl, pop_vlan, push_vlan, set_field, set_ttl};

thread_local! {
    static CACHE: RefCell<Option<PoolCache>> = const { RefCell::new(None) };
}

/// Runs extraction and every rewrite on `data`. Panics only if the code under test does.
pub fn fuzz_extract_and_rewrite(data: &[u8]) {
    let mut key = FlowKey::ZERO;
    let layers = extract(data, 7, &mut key);
    assert!(layers.l3_off as usize <= data.len());
    assert!(layers.l4_off as usize <= data.len());
    assert_eq!(layers.parsed, key.get(Field::Parsed) as u16);
    if data.len() > FRAME_SIZE - HEADROOM {
        return;
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let cache = c.get_or_insert_with(|| Pool::with_frames(8).cache());
        // A value for each field drawn from the input, so the fuzzer steers it too.
        let seed = data.iter().fold(0x9e37_79b9_7f4a_7c15u128, |a, &b| {
            a.rotate_left(5) ^ b as u128
        });
        for (i, &field) in Field::ALL.iter().enumerate() {
            for stale_offsets in [false, true] {
                let Some(mut pkt) = cache.alloc_from(data) else {
                    return;
                };
                if stale_offsets {
                    // Offsets that do not describe the bytes must not cause a panic either.
                    pkt.meta.l3_off = (seed as u16) % (data.len() as u16 + 8);
                    pkt.meta.l4_off = (seed >> 16) as u16 % (data.len() as u16 + 8);
                } else {
                    extract_packet(&mut pkt, &mut key);
                }
                let value = seed.rotate_left(i as u32 * 7) & field.max_value();
                if set_field(&mut pkt, field, value).is_ok() {
                    let mut k2 = FlowKey::ZERO;
                    extract_packet(&mut pkt, &mut k2);
                }
                let _ = set_field(&mut pkt, field, field.max_value().wrapping_add(1));
                cache.free(pkt);
            }
        }
        let Some(mut pkt) = cache.alloc_from(data) else {
            return;
        };
        extract_packet(&mut pkt, &mut key);
        let _ = push_vlan(&mut pkt, 0x8100, seed as u16);
        let _ = dec_ttl(&mut pkt);
        let _ = set_ttl(&mut pkt, seed as u8);
        let _ = pop_vlan(&mut pkt);
        let _ = pop_vlan(&mut pkt);
        let _ = dec_ttl(&mut pkt);
        extract_packet(&mut pkt, &mut key);
        // MPLS on the bytes as they are (an MPLS frame pops first), then on a pushed stack.
        let _ = copy_ttl_out(&mut pkt);
        let _ = copy_ttl_in(&mut pkt);
        let _ = dec_mpls_ttl(&mut pkt);
        let _ = pop_mpls(&mut pkt, seed as u16);
        let _ = push_mpls(&mut pkt, 0x8847, seed as u32);
        let _ = copy_ttl_out(&mut pkt);
        let _ = copy_ttl_in(&mut pkt);
        let _ = dec_mpls_ttl(&mut pkt);
        extract_packet(&mut pkt, &mut key);
        let _ = pop_mpls(&mut pkt, 0x0800);
        extract_packet(&mut pkt, &mut key);
        cache.free(pkt);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arb;
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};

    /// Cheap deterministic random numbers for the mutation loop.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Mutates well-formed packets from the builder (flip, truncate, splice) and runs the
    /// fuzz body on each: what CI runs instead of cargo-fuzz.
    #[test]
    fn fuzz_body_survives_mutated_packets() {
        let mut runner = TestRunner::new(Config::default());
        let strat = arb::spec();
        let mut seeds = Vec::new();
        for i in 0..64 {
            let s = strat.new_tree(&mut runner).expect("spec").current();
            seeds.push(s.build());
            // Some behind an MPLS label stack of one to three entries.
            if i % 4 == 0 {
                let stack = [0x0001_0040u32, 0x0002_0040, 0x0003_0140];
                seeds.push(s.build_mpls(0x8847, &stack[3 - (1 + i % 3)..]));
            }
        }
        let iters: usize = std::env::var("HAYATE_FUZZ_ITERS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(200_000);
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        // The full rewrite set costs ~100 allocations per input, so run it on a slice of the
        // inputs and extraction alone on all of them.
        for i in 0..iters {
            let mut p = seeds[rng.next() as usize % seeds.len()].clone();
            for _ in 0..(rng.next() % 4 + 1) {
                let r = rng.next();
                if p.is_empty() {
                    break;
                }
                let at = (r >> 8) as usize % p.len();
                match r % 5 {
                    0 => p[at] ^= 1 << ((r >> 40) % 8),
                    1 => p[at] = (r >> 32) as u8,
                    2 => p.truncate(at),
                    3 => p.insert(at, (r >> 24) as u8),
                    _ => p[at] = [0, 0xff, 0x81, 0x86, 0x08, 0x3a, 0x2c][(r >> 48) as usize % 7],
                }
            }
            if i % 16 == 0 {
                fuzz_extract_and_rewrite(&p);
            } else {
                let mut k = FlowKey::ZERO;
                let _ = extract(&p, 1, &mut k);
            }
        }
    }

    proptest! {
        #[test]
        fn fuzz_body_survives_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_extract_and_rewrite(&data);
        }
    }
}
