//! The body of the `openflow_decode` fuzz target (`fuzz/fuzz_targets/openflow_decode.rs`),
//! here so that a stable test runs it too: decoding arbitrary bytes never panics, and
//! whatever decodes encodes again to a message that decodes to the same value.

use crate::{action, decode, encode, frame_len, instruction, oxm, Header, Message};

/// Runs every decoder on `data` (as a whole message, as the same bytes with a consistent
/// OpenFlow 1.3 header, and as a bare match, action list and instruction list). Panics only
/// if the code under test misbehaves.
pub fn fuzz_decode(data: &[u8]) {
    let _ = frame_len(data);
    let _ = Header::parse(data);
    check_message(data);
    if data.len() >= 8 && data.len() <= 0xffff {
        // Random bytes rarely carry a consistent header; give them one so the body parsers run.
        let mut fixed = data.to_vec();
        fixed[0] = crate::OFP_VERSION;
        fixed[2..4].copy_from_slice(&(data.len() as u16).to_be_bytes());
        check_message(&fixed);
    }
    if let Ok(m) = oxm::decode_oxm_fields(data) {
        let mut buf = Vec::new();
        oxm::encode_oxm_fields(&m, &mut buf).expect("a decoded match encodes");
        assert_eq!(oxm::decode_oxm_fields(&buf).expect("re-decodes"), m);
    }
    if let Ok(a) = action::decode_actions(data) {
        let mut buf = Vec::new();
        action::encode_actions(&a, &pipeline::model::Match::ANY, &mut buf).expect("encodes");
        assert_eq!(action::decode_actions(&buf).expect("re-decodes"), a);
    }
    if let Ok(i) = instruction::decode_instructions(data) {
        let mut buf = Vec::new();
        instruction::encode_instructions(&i, &pipeline::model::Match::ANY, &mut buf)
            .expect("encodes");
        assert_eq!(
            instruction::decode_instructions(&buf).expect("re-decodes"),
            i
        );
    }
}

fn check_message(data: &[u8]) {
    let Ok((h, m1)) = decode(data) else {
        return;
    };
    let mut b1 = Vec::new();
    encode(h.xid, &m1, &mut b1).expect("a decoded message encodes");
    let (h2, m2) = decode(&b1).expect("an encoded message decodes");
    assert_eq!(h2.xid, h.xid);
    if !has_lossy_text(&m1) {
        assert_eq!(m2, m1, "decode ∘ encode changed a decoded message");
    }
    let mut b2 = Vec::new();
    encode(h.xid, &m2, &mut b2).expect("encodes again");
    assert_eq!(b2, b1, "a second round changed the bytes");
}

/// Whether a decoded string replaced invalid UTF-8 (then it is not byte-exact).
fn has_lossy_text(m: &Message) -> bool {
    format!("{m:?}").contains('\u{fffd}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    use std::time::{Duration, Instant};

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn seeds() -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = include_str!("../tests/vectors/ovs_ofctl.txt")
            .lines()
            .filter_map(|l| l.strip_prefix("msg "))
            .map(|h| {
                (0..h.len() / 2)
                    .filter_map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok())
                    .collect()
            })
            .collect();
        let mut runner = TestRunner::deterministic();
        let strategy = crate::arb::arb_message();
        for xid in 0..400 {
            let m = strategy.new_tree(&mut runner).expect("tree").current();
            let mut b = Vec::new();
            if encode(xid, &m, &mut b).is_ok() {
                out.push(b);
            }
        }
        out
    }

    fn mutate(rng: &mut Rng, b: &mut Vec<u8>) {
        for _ in 0..1 + rng.below(4) {
            let len = b.len();
            match rng.below(7) {
                0 if len > 0 => {
                    let i = rng.below(len);
                    b[i] ^= 1 << rng.below(8);
                }
                1 if len > 0 => {
                    let i = rng.below(len);
                    b[i] = rng.next() as u8;
                }
                2 => b.truncate(rng.below(len + 1)),
                3 => {
                    let i = rng.below(len + 1);
                    b.insert(i, rng.next() as u8);
                }
                4 if len > 0 => {
                    b.remove(rng.below(len));
                }
                5 if len >= 2 => {
                    // A length-like 16-bit word set to something small or odd.
                    let i = rng.below(len - 1);
                    let v = [0u16, 1, 4, 7, 8, 12, 16, 0xffff][rng.below(8)];
                    b[i..i + 2].copy_from_slice(&v.to_be_bytes());
                }
                _ if len >= 4 => {
                    // Keep the header's length consistent so the body is parsed.
                    let l = (len as u16).to_be_bytes();
                    b[2..4].copy_from_slice(&l);
                }
                _ => {}
            }
        }
    }

    /// What CI runs in place of cargo-fuzz: 100k inputs, half mutated real and generated
    /// messages, half random bytes behind a plausible header, within 60 s. For a longer run:
    /// `OPENFLOW_FUZZ_ITERS=5000000 OPENFLOW_FUZZ_SEED=7 cargo test -p openflow --release fuzz_body`.
    #[test]
    fn fuzz_body_on_random_and_mutated_messages() {
        let env = |k: &str, d: u64| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d)
        };
        let iters = env("OPENFLOW_FUZZ_ITERS", 100_000);
        let limit = Duration::from_secs(if iters > 100_000 { 3600 } else { 60 });
        let seeds = seeds();
        assert!(seeds.len() > 500);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ env("OPENFLOW_FUZZ_SEED", 0));
        let start = Instant::now();
        let mut n = 0;
        while n < iters && start.elapsed() < limit {
            let mut b = if n % 2 == 0 {
                seeds[rng.below(seeds.len())].clone()
            } else {
                let len = rng.below(200);
                let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                if b.len() >= 8 {
                    b[0] = 4;
                    b[1] = rng.below(32) as u8;
                }
                b
            };
            mutate(&mut rng, &mut b);
            fuzz_decode(&b);
            n += 1;
        }
        assert!(n >= iters.min(20_000), "only {n} inputs in {limit:?}");
    }

    #[test]
    fn seeds_pass_unmutated() {
        for s in seeds() {
            fuzz_decode(&s);
        }
    }
}
