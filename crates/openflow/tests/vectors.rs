//! Hex vectors of real OpenFlow 1.3 messages, captured from `ovs-ofctl -O OpenFlow13` by
//! `tests/vectors/capture.py` into `tests/vectors/ovs_ofctl.txt`, with their expected decoded
//! form. Flow, group and meter messages are compared with what the pipeline's own parser of
//! the same `ovs-ofctl` text produces, so the two readings of one flow must agree; other
//! messages are compared with values written out here.

use openflow::multipart::{FlowStatsRequest, MultipartRequestBody as Req};
use openflow::{decode, encode, msg_type, FlowModMsg, Message, MeterModMsg, NO_BUFFER};
use pipeline::model::{
    ports, FlowModCommand, Group, GroupMod, GroupModCommand, GroupType, Meter, MeterMod,
    MeterModCommand, ALL_TABLES, GROUP_ALL, GROUP_ANY, METER_ALL,
};
use pipeline::ofctl::{parse_flow, parse_flow_match, parse_group, parse_meter};

struct Case {
    args: Vec<String>,
    msgs: Vec<Vec<u8>>,
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn cases() -> Vec<Case> {
    let text = include_str!("vectors/ovs_ofctl.txt");
    let mut out: Vec<Case> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("case ") {
            out.push(Case {
                args: rest.split(" | ").map(str::to_string).collect(),
                msgs: Vec::new(),
            });
        } else if let Some(h) = line.strip_prefix("msg ") {
            out.last_mut().expect("msg before case").msgs.push(hex(h));
        }
    }
    out
}

/// The one message of the case that is not connection set-up (hello, table features and
/// port-desc queries, barrier).
fn main_message(c: &Case) -> Message {
    let setup = |m: &Message| {
        matches!(m, Message::Hello(_) | Message::BarrierRequest)
            || (matches!(m, Message::GetConfigRequest) && c.args[0] != "get-frags")
            || matches!(m, Message::MultipartRequest(r)
                if matches!(r.body, Req::TableFeatures(_) | Req::PortDesc) && !is_query(c, &r.body))
    };
    let msgs: Vec<Message> = c
        .msgs
        .iter()
        .map(|b| decode(b).unwrap_or_else(|e| panic!("{:?}: {e}", c.args)).1)
        .filter(|m| !setup(m))
        .collect();
    assert_eq!(msgs.len(), 1, "{:?}: {msgs:#?}", c.args);
    msgs.into_iter().next().unwrap_or(Message::BarrierReply)
}

fn is_query(c: &Case, body: &Req) -> bool {
    match body {
        Req::TableFeatures(_) => c.args[0] == "dump-table-features",
        Req::PortDesc => c.args[0] == "dump-ports-desc",
        _ => false,
    }
}

fn flow_text(c: &Case) -> String {
    c.args[1..]
        .iter()
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

fn strict(c: &Case) -> bool {
    c.args.iter().any(|a| a == "--strict")
}

/// Flows whose meaning `ovs-ofctl` spells out differently from the text it was given (the
/// pipeline's parser keeps the short form).
const OVS_EXPANSIONS: &[(&str, &str)] = &[
    // On a match without a VLAN tag, OpenFlow 1.3 ovs-ofctl turns mod_vlan_vid into
    // push_vlan + set_field.
    (
        "in_port=1,actions=mod_vlan_vid:10,mod_vlan_pcp:3,output:2",
        "in_port=1,actions=push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:3,output:2",
    ),
];

fn expected(c: &Case) -> Option<Message> {
    let text = flow_text(c);
    let text = OVS_EXPANSIONS
        .iter()
        .find(|(given, _)| *given == text)
        .map_or(text.clone(), |(_, meant)| meant.to_string());
    let mp = |body| {
        Some(Message::MultipartRequest(openflow::MultipartRequest {
            flags: 0,
            body,
        }))
    };
    Some(match c.args[0].as_str() {
        "add-flow" => Message::FlowMod(FlowModMsg {
            flow_mod: parse_flow(&text).expect("pipeline parses the flow"),
            buffer_id: NO_BUFFER,
        }),
        "mod-flows" => {
            let mut fm = parse_flow(&text).expect("pipeline parses the flow");
            fm.command = if strict(c) {
                FlowModCommand::ModifyStrict
            } else {
                FlowModCommand::Modify
            };
            Message::FlowMod(FlowModMsg {
                flow_mod: fm,
                buffer_id: NO_BUFFER,
            })
        }
        "del-flows" => {
            let cmd = if strict(c) {
                FlowModCommand::DeleteStrict
            } else {
                FlowModCommand::Delete
            };
            let mut fm = parse_flow_match(&text, cmd).expect("pipeline parses the match");
            if text.is_empty() {
                fm.table_id = ALL_TABLES;
            }
            Message::FlowMod(FlowModMsg {
                flow_mod: fm,
                buffer_id: NO_BUFFER,
            })
        }
        "add-group" => Message::GroupMod(GroupMod {
            command: GroupModCommand::Add,
            group: parse_group(&text).expect("pipeline parses the group"),
        }),
        "del-groups" => Message::GroupMod(GroupMod {
            command: GroupModCommand::Delete,
            group: Group {
                id: 5,
                kind: GroupType::All,
                buckets: vec![],
            },
        }),
        "add-meter" => Message::MeterMod(MeterModMsg {
            meter_mod: MeterMod {
                command: MeterModCommand::Add,
                meter: parse_meter(&text).expect("pipeline parses the meter"),
            },
        }),
        "del-meter" => Message::MeterMod(MeterModMsg {
            meter_mod: MeterMod {
                command: MeterModCommand::Delete,
                meter: Meter {
                    id: 2,
                    pktps: false,
                    burst: false,
                    stats: false,
                    bands: vec![],
                    kbps: false,
                },
            },
        }),
        "dump-flows" if text.is_empty() => mp(Req::Flow(FlowStatsRequest::default()))?,
        "dump-aggregate" => mp(Req::Aggregate(FlowStatsRequest::default()))?,
        "dump-tables" => mp(Req::Table)?,
        "dump-table-features" => mp(Req::TableFeatures(vec![]))?,
        "dump-ports" if text.is_empty() => mp(Req::PortStats {
            port_no: ports::ANY,
        })?,
        "dump-ports" => mp(Req::PortStats { port_no: 1 })?,
        "dump-ports-desc" => mp(Req::PortDesc)?,
        "queue-stats" => mp(Req::Queue {
            port_no: ports::ANY,
            queue_id: 0xffff_ffff,
        })?,
        "dump-groups" => mp(Req::GroupDesc)?,
        "dump-group-stats" => mp(Req::Group {
            group_id: GROUP_ALL,
        })?,
        "dump-group-features" => mp(Req::GroupFeatures)?,
        "meter-stats" => mp(Req::Meter {
            meter_id: METER_ALL,
        })?,
        "dump-meters" => mp(Req::MeterConfig {
            meter_id: METER_ALL,
        })?,
        "meter-features" => mp(Req::MeterFeatures)?,
        "queue-get-config" => Message::QueueGetConfigRequest { port: 1 },
        "probe" => Message::EchoRequest(vec![]),
        _ => return None,
    })
}

#[test]
fn every_captured_message_decodes_and_reencodes_to_the_same_bytes() {
    let cases = cases();
    assert!(cases.len() > 40, "{} cases", cases.len());
    let mut n = 0;
    for c in &cases {
        for b in &c.msgs {
            let (h, m) = decode(b).unwrap_or_else(|e| panic!("{:?}: {e}\n{b:02x?}", c.args));
            let mut again = Vec::new();
            encode(h.xid, &m, &mut again).unwrap_or_else(|e| panic!("{:?}: {e}", c.args));
            assert_eq!(&again, b, "{:?}: {m:#?}", c.args);
            n += 1;
        }
    }
    assert!(n > 200, "{n} messages");
}

#[test]
fn captured_messages_mean_what_ovs_ofctl_was_asked_for() {
    let mut checked = 0;
    for c in cases() {
        let got = main_message(&c);
        if let Some(want) = expected(&c) {
            assert_eq!(got, want, "{:?}", c.args);
            checked += 1;
        } else {
            check_other(&c, &got);
        }
    }
    assert!(checked > 35, "{checked} compared");
}

/// The cases whose expectation is not a whole message built above.
fn check_other(c: &Case, got: &Message) {
    let what = format!("{:?}: {got:#?}", c.args);
    match (c.args[0].as_str(), got) {
        ("dump-flows", Message::MultipartRequest(r)) => {
            let Req::Flow(f) = &r.body else {
                panic!("{what}")
            };
            let want = parse_flow_match("table=1,tcp,out_port=2", FlowModCommand::Delete).unwrap();
            assert_eq!(
                (f.table_id, f.out_port, f.out_group),
                (1, 2, GROUP_ANY),
                "{what}"
            );
            assert_eq!(f.matcher, want.matcher, "{what}");
        }
        ("get-frags", Message::GetConfigRequest) => {}
        ("set-frags", Message::SetConfig(cfg)) => assert_eq!(cfg.flags, 1, "{what}"),
        ("mod-port", Message::PortMod(p)) => {
            assert_eq!(
                (p.port_no, p.hw_addr, p.config, p.mask),
                (1, [2, 0, 0, 0, 0, 1], 1, 1),
                "{what}"
            );
        }
        ("packet-out", Message::PacketOut(p)) => {
            assert_eq!(p.buffer_id, NO_BUFFER, "{what}");
            if c.args[1].contains("output:table") {
                assert_eq!(p.in_port, 1);
                assert_eq!(
                    p.actions,
                    [pipeline::model::Action::Output {
                        port: ports::TABLE,
                        max_len: 0
                    }]
                );
                assert_eq!(p.data.len(), 34);
            } else {
                assert_eq!(p.in_port, ports::CONTROLLER);
                assert_eq!(
                    p.actions,
                    [pipeline::model::Action::Output {
                        port: 1,
                        max_len: 0
                    }]
                );
                assert_eq!(&p.data[..6], &[0xff; 6]);
            }
        }
        _ => panic!("no expectation for {what}"),
    }
}

#[test]
fn message_types_seen() {
    let mut kinds = std::collections::BTreeSet::new();
    for c in cases() {
        for b in &c.msgs {
            kinds.insert(b[1]);
        }
    }
    for k in [
        msg_type::HELLO,
        msg_type::FLOW_MOD,
        msg_type::GROUP_MOD,
        msg_type::METER_MOD,
        msg_type::MULTIPART_REQUEST,
        msg_type::PACKET_OUT,
        msg_type::PORT_MOD,
        msg_type::SET_CONFIG,
        msg_type::BARRIER_REQUEST,
    ] {
        assert!(kinds.contains(&k), "no vector of type {k}");
    }
}
