//! The body of the `tunnel_terminate` fuzz target (`fuzz/fuzz_targets/tunnel_terminate.rs`),
//! here so that a normal test runs it on stable Rust: termination of arbitrary bytes received
//! on an underlay port. Nothing may panic, and a terminated packet's inner frame and options
//! lie inside it; the same bytes also go through the view a super-packet encapsulated whole
//! is judged on (`rx_whole.rs`) and the path-MTU answer (`pmtud.rs`). Each input is tried twice: as it is, and with its outer IPv4 header
//! checksum made right and its UDP checksum zeroed, so that mutations reach the VXLAN and
//! Geneve headers instead of stopping at a checksum. The checksum-fixed variant and the frames
//! that would follow it in a train also go through a terminator's batch receive, which must
//! answer as its plain receive does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use packet::checksum;

use crate::decap::{terminate, Locals, Termination};
use crate::endpoint::TunnelKind;
use crate::rx_whole::View;

/// Terminates `data` (and its checksum-fixed variant). Panics only if the code under test does.
pub fn fuzz_terminate(data: &[u8]) {
    let locals = Locals {
        addrs: vec![
            IpAddr::V4(Ipv4Addr::new(192, 168, 0, 2)),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        ],
        ports: vec![(4789, TunnelKind::Vxlan), (6081, TunnelKind::Geneve)],
    };
    check(data, &locals);
    // The view a super-packet encapsulated whole is judged on (`rx_whole.rs`), for the usual
    // outer lengths and one the input picks.
    for outer in [50, 70, usize::from(data.first().copied().unwrap_or(0))] {
        if let Some(v) = View::of(data, outer) {
            assert_eq!(v.bytes().len(), outer + 14);
            check(v.bytes(), &locals);
        }
    }
    // The path-MTU answer to the same bytes taken as an oversize inner frame.
    let mut out = [0u8; crate::pmtud::REPLY_MAX];
    let mtu = 68 + (data.len() as u16 & 0x3ff);
    if let Some(n) = crate::pmtud::too_big_reply(data, mtu, &mut out) {
        assert!(n <= out.len() && n >= 14 + 28);
    }
    // Untagged IPv4 with a 20-byte header: fix the header checksum, drop the UDP one.
    if data.len() >= 42 && data[12..14] == [0x08, 0x00] && data[14] == 0x45 {
        let mut d = data.to_vec();
        d[24..26].fill(0);
        let c = checksum::checksum(&d[14..34]);
        d[24..26].copy_from_slice(&c.to_be_bytes());
        d[40..42].fill(0);
        check(&d, &locals);
        // The frames a train would see next: the next identification with the checksum made
        // right again, and left wrong.
        let mut next = d.clone();
        next[19] = next[19].wrapping_add(1);
        let mut wrong = next.clone();
        next[24..26].fill(0);
        let c = checksum::checksum(&next[14..34]);
        next[24..26].copy_from_slice(&c.to_be_bytes());
        wrong[24] ^= 0x10;
        trains(&[d, next, wrong, data.to_vec()]);
    }
}

/// Runs `frames` in order through a terminator's batch receive with a train
/// ([`crate::Terminator::receive_in`], `rx_train.rs`) and through its plain receive: the
/// same answer and the same packet for each.
fn trains(frames: &[Vec<u8>]) {
    use crate::rx::{RxKind, RxOutcome, Terminator, TunnelPort};
    use crate::spec::TunnelSpec;
    thread_local! {
        static POOL: std::cell::RefCell<packet::PoolCache> =
            std::cell::RefCell::new(packet::pool::Pool::with_frames(4).cache());
        static TERM: Terminator = Terminator::new(
            ["remote=192.168.0.1,vni=flow", "remote=flow,vni=42"]
                .iter()
                .enumerate()
                .filter_map(|(i, o)| {
                    let spec = TunnelSpec::parse(TunnelKind::Vxlan, o).ok()?;
                    Some(TunnelPort::from_spec(5 + i as u32, &spec))
                })
                .collect(),
            &[IpAddr::V4(Ipv4Addr::new(192, 168, 0, 2))],
        );
    }
    POOL.with_borrow_mut(|pool| {
        TERM.with(|t| {
            let mut train = crate::Train::new();
            for f in frames {
                let (Some(mut a), Some(mut b)) = (pool.alloc_from(f), pool.alloc_from(f)) else {
                    return;
                };
                let ra = match t.receive_in(&mut a, &mut train) {
                    RxKind::NotTunnel => RxOutcome::NotTunnel,
                    RxKind::Tunnel(v) => RxOutcome::Tunnel(*train.meta_of(v)),
                    RxKind::Drop(d) => RxOutcome::Drop(d),
                };
                let rb = t.receive(&mut b);
                assert_eq!(ra, rb);
                assert_eq!(a.data(), b.data());
                pool.free(a);
                pool.free(b);
            }
        })
    });
}

fn check(data: &[u8], locals: &Locals) {
    if let Termination::Decapped(d) = terminate(data, locals) {
        assert!(d.inner.end <= data.len() && d.inner.len() >= 14);
        assert!(d.options.end <= d.inner.start && d.options.len() % 4 == 0);
        assert!(d.vni <= 0x00ff_ffff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encap::EncapTemplate;
    use crate::endpoint::{Encap, OuterAddrs};
    use packet::pool::Pool;
    use proptest::prelude::*;

    /// Encapsulated frames of each kind and family, the seeds the mutations start from.
    fn seeds() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut pool = Pool::with_frames(4).cache();
        let v4: (IpAddr, IpAddr) = (
            Ipv4Addr::new(192, 168, 0, 1).into(),
            Ipv4Addr::new(192, 168, 0, 2).into(),
        );
        let v6: (IpAddr, IpAddr) = (
            Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).into(),
            Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).into(),
        );
        for kind in [TunnelKind::Vxlan, TunnelKind::Geneve] {
            for (src, dst) in [v4, v6] {
                let mut e = Encap::new(kind, 7, src.is_ipv6());
                if kind == TunnelKind::Geneve {
                    e.options = vec![0, 1, 0x81, 1, 9, 9, 9, 9];
                }
                let a = OuterAddrs {
                    src_mac: [2; 6],
                    dst_mac: [4; 6],
                    src,
                    dst,
                };
                let t = EncapTemplate::new(&e, &a).unwrap();
                let mut p = pool.alloc_from(&[0x11; 60]).unwrap();
                t.push(&mut p, 5, 5).unwrap();
                out.push(p.data().to_vec());
                pool.free(p);
            }
        }
        out
    }

    #[test]
    fn seeds_are_terminated() {
        for s in seeds() {
            let locals = Locals {
                addrs: vec![
                    Ipv4Addr::new(192, 168, 0, 2).into(),
                    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).into(),
                ],
                ports: vec![(4789, TunnelKind::Vxlan), (6081, TunnelKind::Geneve)],
            };
            assert!(matches!(terminate(&s, &locals), Termination::Decapped(_)));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Seeds with a few bytes flipped, set, cut or inserted.
        #[test]
        fn mutated_seeds_never_panic(which in 0usize..4, edits in proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..4), 1..6)) {
            let mut d = seeds()[which].clone();
            for (at, v, op) in edits {
                if d.is_empty() { break; }
                let at = at as usize % d.len();
                match op {
                    0 => d[at] ^= v,
                    1 => d[at] = v,
                    2 => d.truncate(at),
                    _ => d.insert(at, v),
                }
            }
            fuzz_terminate(&d);
        }

        #[test]
        fn random_bytes_never_panic(d in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_terminate(&d);
        }
    }
}
