//! Property tests: random flow-mods, groups and meters in the supported subset format to text
//! that parses back to the same value.

use packet::Field;
use proptest::prelude::*;

use super::*;
use crate::model::{
    ports, Action, Bucket, FlowFlags, FlowMod, FlowModCommand, Group, GroupType, Instruction,
    Match, Meter, MeterBand, GROUP_ANY,
};

/// A stream of random words that the generators below draw from (proptest supplies and
/// shrinks the words).
struct Src {
    words: Vec<u64>,
    at: usize,
}

impl Src {
    fn next(&mut self) -> u64 {
        let w = self.words[self.at % self.words.len()];
        self.at += 1;
        // Mix in the position so a short (shrunk) stream still varies.
        w ^ (self.at as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn wide(&mut self) -> u128 {
        ((self.next() as u128) << 64) | self.next() as u128
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    /// A mask for a field: exact half of the time, random bits otherwise (never zero).
    fn mask(&mut self, f: Field) -> u128 {
        if self.coin() {
            f.max_value()
        } else {
            (self.wide() & f.max_value()).max(1)
        }
    }
    fn port(&mut self) -> u32 {
        if self.below(4) == 0 {
            self.pick(&[ports::LOCAL, ports::CONTROLLER, ports::IN_PORT])
        } else {
            1 + self.below(ports::MAX as u64) as u32
        }
    }
}

fn maybe_masked(r: &mut Src, m: &mut Match, f: Field) {
    if r.coin() {
        let mask = r.mask(f);
        m.set_masked(f, r.wide(), mask);
    }
}

fn maybe_exact(r: &mut Src, m: &mut Match, f: Field, max: u128) {
    if r.coin() {
        m.set_exact(f, r.wide() % (max + 1));
    }
}

fn gen_match(r: &mut Src) -> Match {
    let mut m = Match::ANY;
    // (eth_type, ip_proto) of: none, ip, ipv6, arp, tcp, udp, sctp, icmp, and the v6 ones.
    let protos: &[(u16, u8)] = &[
        (0, 0),
        (0x0800, 0),
        (0x86dd, 0),
        (0x0806, 0),
        (0x0800, 6),
        (0x0800, 17),
        (0x0800, 132),
        (0x0800, 1),
        (0x86dd, 6),
        (0x86dd, 17),
        (0x86dd, 132),
        (0x86dd, 58),
    ];
    let (eth, proto) = r.pick(protos);
    if eth != 0 {
        m.set_exact(Field::EthType, eth as u128);
    } else if r.below(4) == 0 {
        m.set_exact(Field::EthType, 0x88cc);
    }
    if proto != 0 {
        m.set_exact(Field::IpProto, proto as u128);
    } else if (eth == 0x0800 || eth == 0x86dd) && r.coin() {
        m.set_exact(Field::IpProto, r.pick(&[47u128, 89, 6]));
    }
    if r.coin() {
        m.set_exact(Field::InPort, r.port() as u128);
    }
    match r.below(6) {
        0 => m.set_masked(Field::VlanVid, 0x1000 | r.below(4096) as u128, 0x1fff),
        1 => m.set_masked(Field::VlanVid, 0, 0x1fff),
        2 => m.set_exact(Field::VlanTci, 0x1000 | r.below(0x10000) as u128),
        3 => m.set_masked(Field::VlanTci, 0x1000 | (r.below(8) << 13) as u128, 0xf000),
        4 => {
            let mask = r.mask(Field::VlanTci);
            m.set_masked(Field::VlanTci, r.wide(), mask)
        }
        _ => {}
    }
    for f in [
        Field::EthSrc,
        Field::EthDst,
        Field::Metadata,
        Field::TunnelId,
    ] {
        maybe_masked(r, &mut m, f);
    }
    // A tunnel endpoint over IPv4 or over IPv6 (one name per slot).
    for (v4, v6) in [
        (Field::TunSrc, Field::TunIpv6Src),
        (Field::TunDst, Field::TunIpv6Dst),
    ] {
        match r.below(3) {
            0 => maybe_masked(r, &mut m, v4),
            1 => m.set_masked(v6, r.wide(), u128::MAX << r.below(64)),
            _ => {}
        }
    }
    let (tci, tci_mask) = m.get(Field::VlanTci);
    if tci & tci_mask & 0x1000 != 0 {
        // An inner tag needs an outer one.
        maybe_masked(r, &mut m, Field::CvlanTci);
    }
    let ip = eth == 0x0800 || eth == 0x86dd;
    if eth == 0x0800 || eth == 0x0806 {
        maybe_masked(r, &mut m, Field::Ipv4Src);
        maybe_masked(r, &mut m, Field::Ipv4Dst);
    }
    if eth == 0x0806 {
        maybe_exact(r, &mut m, Field::ArpOp, 0xffff);
        maybe_masked(r, &mut m, Field::ArpSha);
        maybe_masked(r, &mut m, Field::ArpTha);
    }
    if eth == 0x86dd {
        for f in [Field::Ipv6Src, Field::Ipv6Dst, Field::Ipv6Label] {
            maybe_masked(r, &mut m, f);
        }
    }
    if ip {
        maybe_exact(r, &mut m, Field::IpDscp, 0x3f);
        maybe_exact(r, &mut m, Field::IpEcn, 3);
        maybe_exact(r, &mut m, Field::IpTtl, 0xff);
        if r.coin() {
            let (v, mask) = r.pick(&[(0, 1), (1, 1), (1, 3), (3, 3), (0, 2)]);
            m.set_masked(Field::IpFrag, v, mask);
        }
    }
    match proto {
        6 | 17 | 132 => {
            maybe_masked(r, &mut m, Field::TpSrc);
            maybe_masked(r, &mut m, Field::TpDst);
            if proto == 6 {
                maybe_masked(r, &mut m, Field::TcpFlags);
            }
        }
        1 | 58 => {
            let t = if proto == 58 {
                r.pick(&[135u128, 136, 128])
            } else {
                r.below(256) as u128
            };
            if r.coin() || proto == 58 {
                m.set_exact(Field::IcmpType, t);
            }
            maybe_exact(r, &mut m, Field::IcmpCode, 0xff);
            if proto == 58 && (t == 135 || t == 136) {
                maybe_masked(r, &mut m, Field::NdTarget);
                let ll = if t == 135 {
                    Field::ArpSha
                } else {
                    Field::ArpTha
                };
                maybe_masked(r, &mut m, ll);
            }
        }
        _ => {}
    }
    m
}

fn gen_action(r: &mut Src) -> Action {
    let writable = [
        Field::EthSrc,
        Field::EthDst,
        Field::VlanVid,
        Field::VlanPcp,
        Field::Ipv4Src,
        Field::Ipv4Dst,
        Field::IpDscp,
        Field::IpEcn,
        Field::TpSrc,
        Field::TpDst,
        Field::IcmpType,
        Field::IcmpCode,
        Field::ArpOp,
        Field::ArpSha,
        Field::ArpTha,
        Field::Ipv6Src,
        Field::Ipv6Dst,
        Field::Ipv6Label,
        Field::NdTarget,
        Field::TunnelId,
        Field::TunSrc,
        Field::TunDst,
        Field::TunIpv6Src,
        Field::TunIpv6Dst,
    ];
    match r.below(9) {
        0 => {
            let number = 1 + r.below(ports::MAX as u64) as u32;
            let port = r.pick(&[
                number,
                ports::IN_PORT,
                ports::TABLE,
                ports::NORMAL,
                ports::FLOOD,
                ports::ALL,
                ports::LOCAL,
            ]);
            Action::Output { port, max_len: 0 }
        }
        1 => Action::Output {
            port: ports::CONTROLLER,
            max_len: r.next() as u16,
        },
        2 => Action::Group(r.below(0xffff_ff01) as u32),
        3 => Action::SetQueue(r.next() as u32),
        4 => {
            let field = r.pick(&writable);
            let mut value = r.wide() & field.max_value();
            if field == Field::VlanVid {
                value |= 0x1000;
            }
            Action::SetField { field, value }
        }
        5 => Action::PushVlan(r.pick(&[0x8100, 0x88a8])),
        6 => Action::PopVlan,
        7 => Action::DecNwTtl,
        _ => Action::SetNwTtl(r.next() as u8),
    }
}

fn gen_actions(r: &mut Src, min: u64) -> Vec<Action> {
    let n = min + r.below(4);
    (0..n).map(|_| gen_action(r)).collect()
}

fn gen_instructions(r: &mut Src, table: u8) -> Vec<Instruction> {
    let mut out = Vec::new();
    if r.coin() {
        out.push(Instruction::Meter(1 + r.below(0xffff_0000) as u32));
    }
    if r.coin() {
        out.push(Instruction::ApplyActions(gen_actions(r, 1)));
    }
    if r.below(4) == 0 {
        out.push(Instruction::ClearActions);
    }
    if r.below(3) == 0 {
        out.push(Instruction::WriteActions(gen_actions(r, 0)));
    }
    if r.below(3) == 0 {
        let mask = if r.coin() { u64::MAX } else { r.next() };
        out.push(Instruction::WriteMetadata {
            value: r.next() & mask,
            mask,
        });
    }
    if table < 254 && r.coin() {
        out.push(Instruction::GotoTable(
            table + 1 + r.below(254 - table as u64) as u8,
        ));
    }
    out
}

fn gen_flow_mod(r: &mut Src) -> FlowMod {
    use FlowModCommand::*;
    let command = r.pick(&[Add, Modify, ModifyStrict, Delete, DeleteStrict]);
    let delete = matches!(command, Delete | DeleteStrict);
    let table = r.below(if delete { 256 } else { 255 }) as u8;
    let mut fm = FlowMod::add(table, r.next() as u16, gen_match(r), Vec::new());
    fm.command = command;
    if !delete {
        fm.instructions = gen_instructions(r, table);
    }
    fm.idle_timeout = if r.coin() { r.next() as u16 } else { 0 };
    fm.hard_timeout = if r.coin() { r.next() as u16 } else { 0 };
    fm.flags = FlowFlags {
        send_flow_rem: r.coin(),
        check_overlap: r.coin(),
        reset_counts: r.coin(),
        no_pkt_counts: r.coin(),
        no_byte_counts: r.coin(),
    };
    match command {
        Add => fm.cookie = r.next(),
        _ => {
            if delete || r.coin() {
                fm.cookie_mask = if r.coin() { u64::MAX } else { r.next() | 1 };
                fm.cookie = r.next() & fm.cookie_mask;
            } else {
                fm.cookie = r.next();
            }
            if r.coin() {
                fm.out_port = r.port();
            }
            if r.coin() {
                fm.out_group = r.below(0xffff_ff01) as u32;
            }
        }
    }
    fm
}

fn gen_group(r: &mut Src) -> Group {
    let kind = r.pick(&[
        GroupType::All,
        GroupType::Select,
        GroupType::Indirect,
        GroupType::FastFailover,
    ]);
    let n = if kind == GroupType::Indirect {
        1
    } else {
        r.below(4)
    };
    let buckets = (0..n)
        .map(|_| {
            let (watch_port, watch_group) = match (kind, r.below(3)) {
                (GroupType::FastFailover, 0) => (r.port(), GROUP_ANY),
                (GroupType::FastFailover, 1) => (ports::ANY, r.below(0xffff_ffff) as u32),
                (GroupType::FastFailover, _) => (r.port(), r.below(0xffff_ffff) as u32),
                _ => (ports::ANY, GROUP_ANY),
            };
            Bucket {
                weight: if kind == GroupType::Select {
                    r.next() as u16
                } else {
                    0
                },
                watch_port,
                watch_group,
                actions: gen_actions(r, 0),
                actions_as_sent: None,
            }
        })
        .collect();
    Group {
        id: r.below(0xffff_ff01) as u32,
        kind,
        buckets,
    }
}

fn gen_meter(r: &mut Src) -> Meter {
    let n = 1 + r.below(3);
    let bands = (0..n)
        .map(|_| {
            let rate = 1 + r.below(u32::MAX as u64) as u32;
            let burst = if r.coin() { r.next() as u32 } else { 0 };
            if r.coin() {
                MeterBand::Drop { rate, burst }
            } else {
                MeterBand::DscpRemark {
                    rate,
                    burst,
                    prec_level: r.next() as u8,
                }
            }
        })
        .collect();
    let pktps = r.coin();
    Meter {
        stats: false,
        id: 1 + r.below(0xffff_0000) as u32,
        pktps,
        kbps: !pktps,
        burst: r.coin(),
        bands,
    }
}

fn words() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(any::<u64>(), 1..48)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn flow_mod_format_then_parse_is_identity(w in words()) {
        let fm = gen_flow_mod(&mut Src { words: w, at: 0 });
        let text = format_flow_mod(&fm);
        prop_assert_eq!(parse_flow_match(&text, fm.command), Ok(fm), "{}", text);
    }

    #[test]
    fn group_format_then_parse_is_identity(w in words()) {
        let g = gen_group(&mut Src { words: w, at: 0 });
        let text = format_group(&g);
        prop_assert_eq!(parse_group(&text), Ok(g), "{}", text);
    }

    #[test]
    fn meter_format_then_parse_is_identity(w in words()) {
        let m = gen_meter(&mut Src { words: w, at: 0 });
        let text = format_meter(&m);
        prop_assert_eq!(parse_meter(&text), Ok(m), "{}", text);
    }

    #[test]
    fn parsers_never_panic(s in "[a-z_0-9=:,/.()>\\- x]{0,80}") {
        let _ = parse_flow(&s);
        let _ = parse_flow_match(&s, FlowModCommand::Delete);
        let _ = parse_group(&s);
        let _ = parse_meter(&s);
    }

    #[test]
    fn parsers_never_panic_on_any_text(s in "\\PC{0,60}") {
        let _ = parse_flow(&s);
        let _ = parse_group(&s);
        let _ = parse_meter(&s);
    }
}

#[test]
fn formatted_flows_parse_back() {
    for text in [
        "priority=5,tcp,tp_dst=80,actions=mod_vlan_vid:10,goto_table:1",
        "table=1,arp,arp_spa=10.0.0.0/8,arp_op=2,actions=output:TABLE,set_field:3->arp_op",
        "icmp6,icmp_type=136,nd_target=fe80::/10,nd_tll=00:00:00:00:00:01/ff:00:00:00:00:00 \
         actions=write_actions(output:1,set_field:fe80::1->nd_target)",
    ] {
        let fm = parse_flow(text).unwrap();
        assert_eq!(parse_flow(&format_flow_mod(&fm)).unwrap(), fm, "{text}");
    }
}
