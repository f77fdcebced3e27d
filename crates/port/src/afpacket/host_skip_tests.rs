//! The tunnel underlay's tc program asked by the kernel (`BPF_PROG_TEST_RUN`, root only):
//! UDP to a tunnel port at a tunnel address is dropped, over IPv4 and IPv6; everything else
//! — other ports, other addresses, TCP, ARP, fragments, IPv4 options, short frames — goes on
//! to the host; a port taken out of the set is no longer dropped; drops are counted.

use std::net::{IpAddr, Ipv4Addr};

use packet::builder::{ArpSpec, Ipv4Spec, Ipv6Spec, L3Spec, L4Spec, PacketSpec};

use super::*;
use crate::afpacket::tests::root_or_skip;

fn udp4(dst: [u8; 4], dp: u16) -> Vec<u8> {
    v4(
        Ipv4Spec::new([192, 0, 2, 9].into(), dst.into()),
        L4Spec::Udp { sp: 40000, dp },
    )
}

fn v4(ip: Ipv4Spec, l4: L4Spec) -> Vec<u8> {
    PacketSpec {
        l3: L3Spec::Ipv4(ip),
        l4,
        frame_len: 110,
        ..PacketSpec::default()
    }
    .build()
}

fn udp6(dst: &str, dp: u16) -> Vec<u8> {
    PacketSpec {
        l3: L3Spec::Ipv6(Ipv6Spec::new(
            "2001:db8::9".parse().unwrap(),
            dst.parse().unwrap(),
        )),
        l4: L4Spec::Udp { sp: 40000, dp },
        frame_len: 130,
        ..PacketSpec::default()
    }
    .build()
}

#[test]
fn tunnel_packets_are_dropped_and_nothing_else() {
    if !root_or_skip("tunnel_packets_are_dropped_and_nothing_else") {
        return;
    }
    let mut s = HostSkip::load("test").expect("the tc program loads");
    let local4 = [192, 0, 2, 1];
    let want = Skipped {
        ports: [4789, 6081].into(),
        locals: [
            IpAddr::from(Ipv4Addr::from(local4)),
            "2001:db8::1".parse().unwrap(),
        ]
        .into(),
    };
    s.set(&want).unwrap();
    let mut frag = Ipv4Spec::new([192, 0, 2, 9].into(), local4.into());
    frag.frag = 0x2000; // more fragments
    let mut opts = Ipv4Spec::new([192, 0, 2, 9].into(), local4.into());
    opts.options = vec![1, 1, 1, 0];
    let arp = PacketSpec {
        l3: L3Spec::Arp(ArpSpec {
            op: 1,
            sha: [2, 0, 0, 0, 0, 9],
            spa: [192, 0, 2, 9].into(),
            tha: [0; 6],
            tpa: local4.into(),
        }),
        ..PacketSpec::default()
    }
    .build();
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("VXLAN to the tunnel address", udp4(local4, 4789), true),
        (
            "Geneve to the tunnel address over IPv6",
            udp6("2001:db8::1", 6081),
            true,
        ),
        ("another UDP port", udp4(local4, 4790), false),
        ("another address", udp4([192, 0, 2, 2], 4789), false),
        ("another IPv6 address", udp6("2001:db8::2", 4789), false),
        (
            "TCP to the tunnel port",
            v4(
                Ipv4Spec::new([192, 0, 2, 9].into(), local4.into()),
                L4Spec::Tcp {
                    sp: 1,
                    dp: 4789,
                    flags: 0x10,
                },
            ),
            false,
        ),
        (
            "a fragment",
            v4(frag, L4Spec::Udp { sp: 1, dp: 4789 }),
            false,
        ),
        (
            "IPv4 options",
            v4(opts, L4Spec::Udp { sp: 1, dp: 4789 }),
            false,
        ),
        ("ARP for the tunnel address", arp, false),
        (
            "a frame cut short",
            udp4(local4, 4789)[..40].to_vec(),
            false,
        ),
    ];
    for (what, frame, dropped) in &cases {
        assert_eq!(s.verdict(frame).unwrap(), *dropped, "{what}");
    }
    assert_eq!(s.skipped(), 2, "the two drops counted");
    // Geneve's port taken out: its packets reach the host again.
    let fewer = Skipped {
        ports: [4789].into(),
        ..want
    };
    s.set(&fewer).unwrap();
    assert!(!s.verdict(&udp6("2001:db8::1", 6081)).unwrap());
    assert!(s.verdict(&udp4(local4, 4789)).unwrap());
}
