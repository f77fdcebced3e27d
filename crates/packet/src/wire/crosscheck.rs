//! The views against the builder: every frame the builder makes parses with the views into
//! the fields its spec names, and every checksum verifies.

use super::*;
use crate::arb;
use crate::builder::{L3Spec, L4Spec, PacketSpec};
use proptest::prelude::*;

/// Pseudo-header sum for (protocol, upper-layer length).
type Pseudo = Box<dyn Fn(u8, usize) -> u64>;

fn check(s: &PacketSpec) -> Result<(), TestCaseError> {
    let b = s.build();
    let eth = Ethernet::new_checked(&b[..]).unwrap();
    prop_assert_eq!(eth.dst(), s.eth_dst);
    prop_assert_eq!(eth.src(), s.eth_src);
    if s.vlans.len() > 2 {
        return Ok(());
    }
    let (_, off) = eth.inner_ethertype().unwrap();
    let l3 = &b[off..];
    let (seg, pseudo): (&[u8], Pseudo) = match &s.l3 {
        L3Spec::Raw { .. } => return Ok(()),
        L3Spec::Arp(a) => {
            let arp = Arp::new_checked(l3).unwrap();
            prop_assert_eq!((arp.op(), arp.sha(), arp.spa()), (a.op, a.sha, a.spa));
            prop_assert_eq!((arp.tha(), arp.tpa()), (a.tha, a.tpa));
            return Ok(());
        }
        L3Spec::Ipv4(ip) => {
            let v = Ipv4::new_checked(l3).unwrap();
            prop_assert!(v.verify_checksum());
            prop_assert_eq!(
                (v.src(), v.dst(), v.ttl(), v.tos()),
                (ip.src, ip.dst, ip.ttl, ip.tos)
            );
            prop_assert_eq!((v.ident(), v.frag_word()), (ip.ident, ip.frag));
            let p = &l3[v.header_len()..v.total_len() as usize];
            let (src, dst) = (u32::from(v.src()), u32::from(v.dst()));
            (
                p,
                Box::new(move |proto, len| crate::checksum::pseudo_v4(src, dst, proto, len as u16)),
            )
        }
        L3Spec::Ipv6(ip) => {
            let v = Ipv6::new_checked(l3).unwrap();
            prop_assert_eq!((v.src(), v.dst(), v.hop_limit()), (ip.src, ip.dst, ip.hlim));
            prop_assert_eq!((v.traffic_class(), v.flow_label()), (ip.tclass, ip.label));
            prop_assert_eq!(
                v.ext_headers().count(),
                ip.ext.len().min(crate::extract::MAX_IPV6_EXT)
            );
            let walked: usize = v.ext_headers().map(|h| h.unwrap().bytes.len()).sum();
            let p = &l3[40 + walked..40 + v.payload_len() as usize];
            let (src, dst) = (u128::from(v.src()), u128::from(v.dst()));
            (
                p,
                Box::new(move |proto, len| crate::checksum::pseudo_v6(src, dst, proto, len as u32)),
            )
        }
    };
    match &s.l4 {
        L4Spec::None => {}
        L4Spec::Udp { sp, dp } => {
            let u = Udp::new_checked(seg).unwrap();
            prop_assert_eq!((u.src_port(), u.dst_port()), (*sp, *dp));
            prop_assert!(u.verify_checksum(pseudo(17, seg.len())));
        }
        L4Spec::Tcp { sp, dp, flags } => {
            let t = Tcp::new_checked(seg).unwrap();
            prop_assert_eq!((t.src_port(), t.dst_port(), t.flags()), (*sp, *dp, *flags));
            prop_assert!(t.verify_checksum(pseudo(6, seg.len())));
        }
        L4Spec::Sctp { sp, dp } => {
            let t = Sctp::new_checked(seg).unwrap();
            prop_assert_eq!((t.src_port(), t.dst_port()), (*sp, *dp));
            prop_assert!(t.verify_checksum());
        }
        L4Spec::Icmp { ty, code } => {
            let i = Icmpv4::new_checked(seg).unwrap();
            prop_assert_eq!((i.ty(), i.code()), (*ty, *code));
            prop_assert!(i.verify_checksum());
        }
        L4Spec::Icmpv6 { ty, code, nd } => {
            let i = Icmpv6::new_checked(seg).unwrap();
            prop_assert_eq!((i.ty(), i.code()), (*ty, *code));
            prop_assert!(i.verify_checksum(pseudo(58, seg.len())));
            if let Some(nd) = nd {
                prop_assert_eq!(i.nd_target(), Some(nd.target));
                prop_assert_eq!(i.nd_ll_addr(icmpv6::ND_OPT_SOURCE_LL), nd.sll);
                prop_assert_eq!(i.nd_ll_addr(icmpv6::ND_OPT_TARGET_LL), nd.tll);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn views_read_what_the_builder_wrote(s in arb::spec()) {
        check(&s)?;
    }
}
