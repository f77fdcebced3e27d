//! The interpreter on programs `tcpdump -ddd FILTER` printed (tcpdump 4.99, libpcap 1.10),
//! run on frames from the packet builder.

use std::net::Ipv4Addr;

use crate::builder::{L4Spec, PacketSpec};

use super::*;

/// `tcpdump -ddd 'udp and dst port 53'`.
const UDP_DPORT_53: &str = "16\n40 0 0 12\n21 0 7 2048\n48 0 0 23\n21 0 11 17\n40 0 0 20\n69 9 0 8191\n177 0 0 14\n72 0 0 16\n21 5 6 53\n21 0 5 34525\n48 0 0 20\n21 0 3 17\n40 0 0 56\n21 0 1 53\n6 0 0 262144\n6 0 0 0\n";
/// `tcpdump -ddd 'src host 10.0.0.1'`.
const SRC_HOST: &str = "10\n40 0 0 12\n21 0 2 2048\n32 0 0 26\n21 4 5 167772161\n21 1 0 2054\n21 0 3 32821\n32 0 0 28\n21 0 1 167772161\n6 0 0 262144\n6 0 0 0\n";
/// `tcpdump -ddd 'vlan and tcp'`.
const VLAN_TCP: &str = "16\n40 0 0 12\n21 2 0 33024\n21 1 0 34984\n21 0 11 37120\n40 0 0 16\n21 0 2 2048\n48 0 0 27\n21 6 7 6\n21 0 6 34525\n48 0 0 24\n21 3 0 6\n21 0 3 44\n48 0 0 58\n21 0 1 6\n6 0 0 262144\n6 0 0 0\n";
/// `tcpdump -ddd 'greater 100'`.
const GREATER_100: &str = "4\n128 0 0 0\n53 0 1 100\n6 0 0 262144\n6 0 0 0\n";
/// `tcpdump -ddd 'tcp[tcpflags] & tcp-syn != 0'` (a load indexed by the IP header length).
const TCP_SYN: &str = "11\n40 0 0 12\n21 0 8 2048\n48 0 0 23\n21 0 6 6\n40 0 0 20\n69 4 0 8191\n177 0 0 14\n80 0 0 27\n69 0 1 2\n6 0 0 262144\n6 0 0 0\n";

fn udp(src: [u8; 4], dport: u16, len: usize) -> Vec<u8> {
    PacketSpec::udp4(
        [0, 0, 0, 0, 0, 2],
        [0, 0, 0, 0, 0, 1],
        Ipv4Addr::from(src),
        Ipv4Addr::new(10, 0, 0, 2),
        1000,
        dport,
        len,
    )
    .build()
}

fn tcp(flags: u16, vlan: bool) -> Vec<u8> {
    let mut s = PacketSpec::udp4(
        [0, 0, 0, 0, 0, 2],
        [0, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        0,
        0,
        64,
    );
    s.l4 = L4Spec::Tcp {
        sp: 1,
        dp: 80,
        flags,
    };
    if vlan {
        s.vlans.push((0x8100, 7));
    }
    s.build()
}

fn matches(prog: &str, frame: &[u8]) -> bool {
    Program::parse(prog).unwrap().run(frame, frame.len() as u32) != 0
}

#[test]
fn port_and_protocol_filters() {
    assert!(matches(UDP_DPORT_53, &udp([10, 0, 0, 1], 53, 64)));
    assert!(!matches(UDP_DPORT_53, &udp([10, 0, 0, 1], 54, 64)));
    assert!(!matches(UDP_DPORT_53, &tcp(0x002, false)));
}

#[test]
fn host_filters() {
    assert!(matches(SRC_HOST, &udp([10, 0, 0, 1], 1, 64)));
    assert!(!matches(SRC_HOST, &udp([10, 0, 0, 2], 1, 64)));
}

#[test]
fn vlan_filters_look_past_the_tag() {
    assert!(matches(VLAN_TCP, &tcp(0x010, true)));
    assert!(!matches(VLAN_TCP, &tcp(0x010, false)));
}

#[test]
fn length_and_indexed_loads() {
    assert!(matches(GREATER_100, &udp([10, 0, 0, 1], 1, 128)));
    assert!(!matches(GREATER_100, &udp([10, 0, 0, 1], 1, 64)));
    assert!(matches(TCP_SYN, &tcp(0x002, false)));
    assert!(!matches(TCP_SYN, &tcp(0x010, false)));
}

#[test]
fn a_load_past_the_frame_does_not_match() {
    // A 20-byte frame: the IPv4 protocol byte (offset 23) is not there.
    let mut f = udp([10, 0, 0, 1], 53, 64);
    f.truncate(20);
    assert!(!matches(UDP_DPORT_53, &f));
}

#[test]
fn bad_programs_are_refused() {
    let jump_out = "2\n21 5 0 1\n6 0 0 1\n";
    assert!(Program::parse(jump_out)
        .unwrap_err()
        .contains("past the end"));
    let no_ret = "1\n40 0 0 12\n";
    assert!(Program::parse(no_ret)
        .unwrap_err()
        .contains("end with a return"));
    let mem = "2\n2 0 0 16\n6 0 0 1\n";
    assert!(Program::parse(mem).unwrap_err().contains("scratch memory"));
    assert!(Program::parse("3\n6 0 0 1\n").is_err());
    let p = Program::parse(SRC_HOST).unwrap();
    assert_eq!(Program::parse(&p.to_text()).unwrap(), p);
}

#[test]
fn division_by_zero_does_not_match() {
    // A = 1; A /= 0; return A
    let p = "3\n0 0 0 1\n52 0 0 0\n22 0 0 0\n";
    assert_eq!(Program::parse(p).unwrap().run(&[], 0), 0);
}
