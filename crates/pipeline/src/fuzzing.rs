//! The body of the `ofctl_text` fuzz target (`fuzz/fuzz_targets/ofctl_text.rs`), here so that
//! a normal test runs it on stable Rust: flow, group and meter text as users and config files
//! write it (`ovs-ofctl` syntax). Nothing may panic, and a flow that parses formats to text
//! that parses back to the same flow-mod.

use crate::ofctl::{format_flow_mod, parse_flow, parse_group, parse_meter};

/// Parses `data` (when it is UTF-8) as a flow, a group and a meter. Panics only if the code
/// under test does, or if a parsed flow does not survive formatting and parsing again.
pub fn fuzz_ofctl_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(fm) = parse_flow(text) {
        let again = format_flow_mod(&fm);
        match parse_flow(&again) {
            Ok(back) => assert_eq!(back, fm, "{text:?} formats as {again:?}"),
            Err(e) => panic!("{text:?} formats as {again:?}, which does not parse: {e}"),
        }
    }
    let _ = parse_group(text);
    let _ = parse_meter(text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Flows, groups and meters the mutations start from.
    const SEEDS: &[&str] = &[
        "table=0,priority=10,in_port=1,dl_dst=00:00:00:00:00:02,actions=output:2",
        "ip,nw_dst=10.0.0.0/8,actions=mod_vlan_vid:10,goto_table:1",
        "table=3,priority=7,tcp6,ipv6_src=fd00::/64,tp_dst=0x50/0xfff0,actions=set_field:fd00::9->ipv6_dst,dec_ttl,output:3",
        "cookie=0x5,idle_timeout=10,hard_timeout=20,arp,arp_op=1,arp_tpa=10.0.0.1,actions=CONTROLLER:128,NORMAL",
        "dl_vlan=5,dl_vlan_pcp=3,actions=strip_vlan,push_vlan:0x88a8,set_field:4101->vlan_vid,write_metadata:0x1/0xff,meter:2,group:4",
        "icmp6,icmp_type=135,nd_target=fd00::1,actions=write_actions(output:1),clear_actions,set_queue:3",
        "group_id=1,type=select,bucket=weight:10,output:1,bucket=weight:5,mod_vlan_vid:5,output:2",
        "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100",
    ];

    #[test]
    fn fuzz_body_survives_mutated_text() {
        let iters: usize = std::env::var("HAYATE_FUZZ_ITERS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20_000);
        // The seeds are valid, so the mutations start from text that reaches deep.
        for f in &SEEDS[..6] {
            assert!(parse_flow(f).is_ok(), "{f}: {:?}", parse_flow(f).err());
        }
        assert!(parse_group(SEEDS[6]).is_ok() && parse_meter(SEEDS[7]).is_ok());
        let alphabet = b",=:/.x0123456789abcdefipnt_()->";
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..iters {
            let mut t = SEEDS[i % SEEDS.len()].as_bytes().to_vec();
            for _ in 0..(i % 3 + 1) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x >> 8) as usize % t.len().max(1);
                let c = alphabet[(x >> 32) as usize % alphabet.len()];
                match x % 4 {
                    0 if !t.is_empty() => t[at] = c,
                    1 => t.insert(at.min(t.len()), c),
                    2 if !t.is_empty() => {
                        t.remove(at);
                    }
                    _ => t.truncate(at),
                }
            }
            fuzz_ofctl_text(&t);
        }
    }

    proptest! {
        #[test]
        fn fuzz_body_survives_random_text(s in "[a-z_0-9=,:/.()>-]{0,80}") {
            fuzz_ofctl_text(s.as_bytes());
        }
    }
}
