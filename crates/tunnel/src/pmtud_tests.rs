use super::*;

// Frames and replies made by scapy 2.8.0: the headers as hex, then the payload pattern.
const O4_HDR: &str =
    "0200000000020200000000010800452e05dc006340003f11217e0a0000010a00000203e807d005c88536";
const R4_HDR: &str =
    "0200000000010200000000020800452c0240000040004001248f0a0000020a00000103048bab000005aa";
const O6_HDR: &str = "02000000000202000000000186dd6000000005b4113ffd000000000000000000000000000001fd00000000000000000000000000000203e807d005b43eef";
const R6_HDR: &str = "02000000000102000000000286dd6000000004d83a40fd000000000000000000000000000002fd00000000000000000000000000000102009fd900000596";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A 1514-byte frame: the header, then `n` bytes of `(i * k) & 0xff`.
fn frame(hdr: &str, n: usize, k: usize) -> Vec<u8> {
    let mut f = hex(hdr);
    f.extend((0..n).map(|i| (i * k) as u8));
    f
}

fn reply(f: &[u8], mtu: u16) -> Option<Vec<u8>> {
    let mut out = vec![0u8; REPLY_MAX];
    too_big_reply(f, mtu, &mut out).map(|n| out[..n].to_vec())
}

#[test]
fn ipv4_fragmentation_needed_matches_scapy() {
    let o = frame(O4_HDR, 1472, 7);
    let mut want = hex(R4_HDR);
    want.extend(&o[14..14 + 548]);
    assert_eq!(reply(&o, 1450).unwrap(), want);
}

#[test]
fn ipv6_packet_too_big_matches_scapy() {
    let o = frame(O6_HDR, 1452, 5);
    let mut want = hex(R6_HDR);
    want.extend(&o[14..14 + 1232]);
    assert_eq!(reply(&o, 1430).unwrap(), want);
}

#[test]
fn what_is_never_answered() {
    let o = frame(O4_HDR, 1472, 7);
    let fix = |f: &mut Vec<u8>| {
        f[24..26].fill(0);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    };
    // No DF; a later fragment; to a multicast group; to the broadcast address; an ICMP error.
    let mut no_df = o.clone();
    no_df[20] = 0;
    fix(&mut no_df);
    let mut later = o.clone();
    later[21] = 0x10;
    fix(&mut later);
    let mut mcast = o.clone();
    mcast[30..34].copy_from_slice(&[239, 1, 1, 1]);
    fix(&mut mcast);
    let mut bcast = o.clone();
    bcast[30..34].copy_from_slice(&[255; 4]);
    fix(&mut bcast);
    let mut icmp_err = o.clone();
    icmp_err[23] = 1;
    icmp_err[34] = 3;
    fix(&mut icmp_err);
    for f in [no_df, later, mcast, bcast, icmp_err] {
        assert_eq!(reply(&f, 1450), None);
    }
    // An ICMP echo request is answered.
    let mut echo = o.clone();
    echo[23] = 1;
    echo[34] = 8;
    fix(&mut echo);
    assert!(reply(&echo, 1450).is_some());
    // IPv6: an ICMPv6 error, a multicast destination; ARP.
    let o6 = frame(O6_HDR, 1452, 5);
    let mut e6 = o6.clone();
    e6[20] = 58;
    e6[54] = 1;
    let mut m6 = o6.clone();
    m6[38] = 0xff;
    let mut arp = o6.clone();
    arp[12..14].copy_from_slice(&[8, 6]);
    for f in [e6, m6, arp] {
        assert_eq!(reply(&f, 1430), None);
    }
}

#[test]
fn short_frames_are_quoted_whole() {
    let o = frame(O4_HDR, 1472, 7);
    // The same frame cut to 100 bytes, its IP length fixed: the reply quotes all 86 bytes.
    let mut s = o[..100].to_vec();
    s[16..18].copy_from_slice(&86u16.to_be_bytes());
    s[24..26].fill(0);
    let c = checksum::checksum(&s[14..34]);
    s[24..26].copy_from_slice(&c.to_be_bytes());
    let r = reply(&s, 60).unwrap();
    assert_eq!(r.len(), 14 + 20 + 8 + 86);
    assert_eq!(&r[42..], &s[14..]);
    assert!(checksum::verify(&r[34..], 0));
}
