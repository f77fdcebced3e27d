//! The steering program run on frames by the shared classic-BPF interpreter
//! (`packet::cbpf`), with the kernel's rules: the frame starts at its network header, the
//! ancillary protocol load reads the EtherType, loads past the end return 0 from the program.

use super::*;
use packet::cbpf;

/// Runs `prog` on network-layer bytes `l3` with ancillary protocol `proto`.
pub(crate) fn run(prog: &[Insn], proto: u16, l3: &[u8]) -> u32 {
    let insns = prog
        .iter()
        .map(|i| cbpf::Insn {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let p = cbpf::Program::new(insns).expect("the steering program passes the checker");
    p.run_with(l3, l3.len() as u32, Some(proto))
}

fn ipv4(proto: u8, src: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let total = 20 + l4.len();
    let mut v = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        proto,
        0,
        0,
    ];
    v.extend_from_slice(&src);
    v.extend_from_slice(&[10, 0, 0, 2]);
    v.extend_from_slice(l4);
    v
}

fn ipv6(next: u8, l4: &[u8]) -> Vec<u8> {
    let len = l4.len();
    let mut v = vec![0x60, 0, 0, 0, (len >> 8) as u8, len as u8, next, 64];
    v.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    v.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    v.extend_from_slice(l4);
    v
}

/// A TCP header (20 bytes) with `flags` and `payload` bytes after it.
fn tcp(sport: u16, flags: u8, payload: usize) -> Vec<u8> {
    let mut v = vec![0u8; 20 + payload];
    v[..2].copy_from_slice(&sport.to_be_bytes());
    v[2..4].copy_from_slice(&5201u16.to_be_bytes());
    v[12] = 5 << 4;
    v[13] = flags;
    v
}

const ACK: u8 = 0x10;
const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;

/// Whether the frame goes to a priority socket, for a port with `n` queues (checking the
/// returned index is in range).
fn is_prio(n: u16, proto: u16, l3: &[u8]) -> bool {
    let q = run(&program(n), proto, l3);
    assert!(
        q < 2 * u32::from(n),
        "index {q} out of range for {n} queues"
    );
    q >= u32::from(n)
}

#[test]
fn control_frames_go_to_the_priority_socket() {
    for n in [1, 2, 4] {
        let src = [10, 0, 0, 1];
        assert!(is_prio(n, 0x0806, &[0, 1, 8, 0, 6, 4, 0, 1]), "ARP");
        assert!(
            is_prio(n, 0x0800, &ipv4(1, src, &[8, 0, 0, 0, 0, 1, 0, 1])),
            "ICMP"
        );
        assert!(
            is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, SYN, 0))),
            "SYN"
        );
        assert!(
            is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, SYN | ACK, 0))),
            "SYN-ACK"
        );
        assert!(
            is_prio(n, 0x86dd, &ipv6(58, &[128, 0, 0, 0, 0, 1, 0, 1])),
            "ICMPv6"
        );
        assert!(is_prio(n, 0x86dd, &ipv6(6, &tcp(40000, SYN, 0))), "v6 SYN");
    }
}

#[test]
fn data_acks_and_connection_ends_stay_in_bulk() {
    for n in [1, 2, 4] {
        let src = [10, 0, 0, 1];
        assert!(
            !is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, ACK, 0))),
            "pure ACK"
        );
        assert!(
            !is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, SYN, 1))),
            "SYN with data"
        );
        assert!(
            !is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, SYN | FIN, 0))),
            "SYN-FIN"
        );
        assert!(!is_prio(n, 0x86dd, &ipv6(6, &tcp(40000, ACK, 0))), "v6 ACK");
        assert!(
            !is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, ACK, 1))),
            "1 byte"
        );
        assert!(
            !is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, ACK, 1448))),
            "MSS"
        );
        assert!(
            !is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, ACK | FIN, 0))),
            "FIN"
        );
        assert!(
            !is_prio(n, 0x0800, &ipv4(6, src, &tcp(40000, RST, 0))),
            "RST"
        );
        assert!(!is_prio(n, 0x0800, &ipv4(17, src, &[0u8; 26])), "UDP");
        assert!(
            !is_prio(n, 0x86dd, &ipv6(6, &tcp(40000, ACK, 100))),
            "v6 data"
        );
        assert!(!is_prio(n, 0x86dd, &ipv6(17, &[0u8; 18])), "v6 UDP");
        assert!(!is_prio(n, 0x86dd, &ipv6(0, &[0u8; 48])), "v6 hop-by-hop");
        assert!(!is_prio(n, 0x8100, &[0u8; 40]), "VLAN tag left in");
        assert!(!is_prio(n, 0x88cc, &[0u8; 40]), "LLDP");
        // A later fragment of a TCP packet: its bytes are not a TCP header.
        let mut frag = ipv4(6, src, &tcp(40000, SYN, 0));
        frag[6] = 0x00;
        frag[7] = 0x10;
        assert!(!is_prio(n, 0x0800, &frag), "fragment");
        // Options in the IPv4 header move the TCP header.
        let mut opts = ipv4(
            6,
            src,
            &[[1u8, 1, 1, 1].as_slice(), &tcp(40000, SYN, 0)].concat(),
        );
        opts[0] = 0x46;
        assert!(is_prio(n, 0x0800, &opts), "IPv4 options, SYN");
    }
}

#[test]
fn truncated_frames_go_to_the_first_bulk_socket() {
    assert_eq!(run(&program(4), 0x0800, &[0x45, 0, 0]), 0);
    assert_eq!(run(&program(1), 0x86dd, &[0x60]), 0);
}

#[test]
fn flows_spread_over_queues_and_stay_on_one() {
    let n = 4;
    let mut seen = [0usize; 8];
    for i in 0..64u16 {
        let src = [10, 0, (i >> 8) as u8, i as u8];
        let data = run(
            &program(n),
            0x0800,
            &ipv4(6, src, &tcp(40000 + i, ACK, 100)),
        );
        let syn = run(&program(n), 0x0800, &ipv4(6, src, &tcp(40000 + i, SYN, 0)));
        // A flow's data and its handshake use the same queue's two sockets.
        assert_eq!(data + u32::from(n), syn);
        seen[data as usize] += 1;
        let udp = ipv4(
            17,
            src,
            &[[0x9c, 0x40 + i as u8].as_slice(), &[0u8; 24]].concat(),
        );
        assert!(run(&program(n), 0x0800, &udp) < u32::from(n));
    }
    for (q, &c) in seen[..usize::from(n)].iter().enumerate() {
        assert!(c >= 4, "queue {q} got {c} of 64 flows: {seen:?}");
    }
}

#[test]
fn one_queue_needs_no_hash() {
    let one = program(1);
    let four = program(4);
    assert!(one.len() < 40, "{} instructions", one.len());
    assert!(four.len() < 255, "{} instructions", four.len());
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn any_l3() -> impl Strategy<Value = (u16, Vec<u8>)> {
        let proto = prop_oneof![
            Just(0x0800u16),
            Just(0x86dd),
            Just(0x0806),
            Just(0x8100),
            any::<u16>()
        ];
        (proto, proptest::collection::vec(any::<u8>(), 0..120)).prop_map(|(p, mut b)| {
            // Mostly well-formed version nibbles, so the deep paths run.
            if let Some(v) = b.first_mut() {
                *v = match p {
                    0x0800 => 0x40 | (*v & 0x0f).max(5),
                    0x86dd => 0x60 | (*v & 0x0f),
                    _ => *v,
                };
            }
            (p, b)
        })
    }

    proptest! {
        #[test]
        fn every_frame_gets_a_socket_of_its_class((proto, l3) in any_l3(), n in 1u16..=8) {
            let one = run(&program(1), proto, &l3);
            prop_assert!(one < 2);
            let q = run(&program(n), proto, &l3);
            prop_assert!(q < 2 * u32::from(n));
            // The class does not depend on the number of queues when the frame holds every
            // header word the program may read (a shorter one may stop in the hash, and
            // then goes to bulk queue 0).
            if l3.len() >= 64 {
                prop_assert_eq!(q >= u32::from(n), one == 1);
            }
        }
    }
}
