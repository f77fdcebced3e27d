//! The bridge driven message by message, without sockets: every request's reply or error.

use std::sync::Arc;

use openflow::messages::mods::FlowModMsg;
use openflow::multipart::{FlowStatsRequest, MORE};
use openflow::port::port_config;
use openflow::{
    AsyncConfig, ErrorCode, Message, MultipartReplyBody as B, MultipartRequest,
    MultipartRequestBody as R, PortMod, NO_BUFFER,
};
use packet::Pool;
use pipeline::model::{ports, Action, FlowMod, FlowModCommand, Instruction, Match};
use pipeline::{Control, PipelineConfig, PortInfo};

use super::*;
use crate::bridge::Bridge;

#[path = "echo_tests.rs"]
mod echo;
#[path = "qos_tests.rs"]
mod qos;
#[path = "requests_tests.rs"]
mod requests;

fn bridge(fail_mode: FailMode) -> Arc<OfBridge> {
    let pool = Pool::with_frames(256);
    let (mut control, _cell) = Control::new(PipelineConfig::default());
    let mut ports = Vec::new();
    let mut infos = Vec::new();
    for no in 1..=2u32 {
        let port = port::spec::open("null:sink", &pool).unwrap();
        infos.push(PortInfo {
            no,
            name: format!("p{no}"),
            live: true,
            ..PortInfo::default()
        });
        ports.push(OfPort {
            no,
            name: format!("p{no}"),
            hw_addr: mac_from_name(&format!("p{no}")),
            port,
        });
    }
    control.set_ports(infos);
    OfBridge::new(
        OfBridgeConfig {
            name: "t".into(),
            datapath_id: 0xabc,
            fail_mode,
            packet_in_limit: RateLimit::default(),
        },
        control,
        ports,
    )
}

/// Sends `msg` under `xid`; the decoded replies.
fn ask(b: &OfBridge, xid: u32, msg: &Message) -> Vec<(u32, Message)> {
    let mut bytes = Vec::new();
    openflow::encode(xid, msg, &mut bytes).unwrap();
    ask_raw(b, &bytes)
}

fn ask_raw(b: &OfBridge, bytes: &[u8]) -> Vec<(u32, Message)> {
    let mut out = Vec::new();
    b.handle(ConnId(1), Role::Equal, bytes, &mut out);
    let mut replies = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let len = openflow::frame_len(&out[at..]).unwrap().unwrap();
        let (h, m) = openflow::decode(&out[at..at + len]).unwrap();
        replies.push((h.xid, m));
        at += len;
    }
    replies
}

fn output(port: u32) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![Action::Output {
        port,
        max_len: 0,
    }])]
}

fn flow_mod(fm: FlowMod) -> Message {
    Message::FlowMod(FlowModMsg {
        flow_mod: fm,
        buffer_id: NO_BUFFER,
    })
}

fn in_port(p: u32) -> Match {
    let mut m = Match::ANY;
    m.set_exact(packet::Field::InPort, u128::from(p));
    m
}

fn error_code(replies: &[(u32, Message)]) -> Option<ErrorCode> {
    replies.iter().find_map(|(_, m)| match m {
        Message::Error(e) => Some(e.code),
        _ => None,
    })
}

fn flow_stats(b: &OfBridge) -> Vec<openflow::multipart::FlowStats> {
    let req = Message::MultipartRequest(MultipartRequest {
        flags: 0,
        body: R::Flow(FlowStatsRequest::default()),
    });
    ask(b, 9, &req)
        .into_iter()
        .flat_map(|(_, m)| match m {
            Message::MultipartReply(r) => match r.body {
                B::Flow(v) => v,
                other => panic!("not flow stats: {other:?}"),
            },
            other => panic!("not a multipart reply: {other:?}"),
        })
        .collect()
}

#[test]
fn features_and_config() {
    let b = bridge(FailMode::Secure);
    let r = ask(&b, 5, &Message::FeaturesRequest);
    match &r[..] {
        [(5, Message::FeaturesReply(f))] => {
            assert_eq!(f.datapath_id, 0xabc);
            assert_eq!(f.n_tables, 255);
            assert_eq!(f.capabilities, 0b1111);
        }
        other => panic!("{other:?}"),
    }
    ask(
        &b,
        6,
        &Message::SetConfig(openflow::SwitchConfig {
            flags: 0,
            miss_send_len: 200,
        }),
    );
    match &ask(&b, 7, &Message::GetConfigRequest)[..] {
        [(7, Message::GetConfigReply(c))] => assert_eq!(c.miss_send_len, 200),
        other => panic!("{other:?}"),
    }
}

/// FEATURES_REPLY, table stats and table features count the same tables, and the last one
/// takes flows (docs/openflow.md: 255 tables).
#[test]
fn one_table_count_everywhere() {
    let b = bridge(FailMode::Secure);
    let n_tables = match &ask(&b, 1, &Message::FeaturesRequest)[..] {
        [(1, Message::FeaturesReply(f))] => usize::from(f.n_tables),
        other => panic!("{other:?}"),
    };
    let multipart = |body| {
        ask(
            &b,
            2,
            &Message::MultipartRequest(MultipartRequest { flags: 0, body }),
        )
    };
    let stats: usize = multipart(R::Table)
        .iter()
        .map(|(_, m)| match m {
            Message::MultipartReply(r) => match &r.body {
                B::Table(v) => v.len(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .sum();
    let features = table_features_reply(&multipart(R::TableFeatures(Vec::new())));
    assert_eq!((n_tables, stats, features.len()), (255, 255, 255));
    let last = u8::try_from(n_tables - 1).unwrap();
    assert_eq!(features.last().map(|t| t.table_id), Some(last));
    let r = ask(
        &b,
        3,
        &flow_mod(FlowMod::add(last, 1, Match::ANY, output(1))),
    );
    assert_eq!(error_code(&r), None, "{r:?}");
    let r = ask(
        &b,
        4,
        &flow_mod(FlowMod::add(
            0,
            1,
            Match::ANY,
            vec![Instruction::GotoTable(last)],
        )),
    );
    assert_eq!(error_code(&r), None, "{r:?}");
    assert_eq!(
        flow_stats(&b).iter().filter(|f| f.table_id == last).count(),
        1
    );
}

#[test]
fn flow_mods_errors_and_barrier() {
    let b = bridge(FailMode::Secure);
    assert!(ask(&b, 1, &flow_mod(FlowMod::add(0, 10, in_port(1), output(2)))).is_empty());
    // check-overlap refuses an overlapping entry of the same priority.
    let mut overlap = FlowMod::add(0, 10, Match::ANY, output(1));
    overlap.flags.check_overlap = true;
    let r = ask(&b, 2, &flow_mod(overlap));
    assert_eq!(error_code(&r), Some(ErrorCode::FMFC_OVERLAP));
    // The error carries the request's first 64 bytes under its xid.
    match &r[..] {
        [(2, Message::Error(e))] => {
            assert_eq!(e.data.len(), 64);
            assert_eq!(e.data[1], openflow::msg_type::FLOW_MOD);
        }
        other => panic!("{other:?}"),
    }
    // A bad table.
    let r = ask(
        &b,
        3,
        &flow_mod(FlowMod::add(255, 1, Match::ANY, output(1))),
    );
    assert_eq!(error_code(&r), Some(ErrorCode::FMFC_BAD_TABLE_ID));
    // Barrier publishes and replies.
    assert!(b.lock().dirty);
    match &ask(&b, 4, &Message::BarrierRequest)[..] {
        [(4, Message::BarrierReply)] => {}
        other => panic!("{other:?}"),
    }
    assert!(!b.lock().dirty);
    assert_eq!(flow_stats(&b).len(), 1);
    // Delete strict with send-flow-rem: the removed flow waits for the pump.
    let mut add = FlowMod::add(0, 20, in_port(2), output(1));
    add.flags.send_flow_rem = true;
    ask(&b, 5, &flow_mod(add.clone()));
    let mut del = add;
    del.command = FlowModCommand::DeleteStrict;
    ask(&b, 6, &flow_mod(del));
    assert_eq!(b.lock().control.take_removed().len(), 1);
    assert_eq!(flow_stats(&b).len(), 1);
}

#[test]
fn malformed_and_unknown_messages_get_errors() {
    let b = bridge(FailMode::Secure);
    // A flow-mod cut short: the decoder's error, the request's bytes, its xid.
    let mut bytes = Vec::new();
    openflow::encode(
        42,
        &flow_mod(FlowMod::add(0, 1, Match::ANY, output(1))),
        &mut bytes,
    )
    .unwrap();
    bytes.truncate(20);
    bytes[2..4].copy_from_slice(&20u16.to_be_bytes());
    let r = ask_raw(&b, &bytes);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].0, 42);
    assert!(matches!(r[0].1, Message::Error(_)));
    // Unknown type.
    let r = ask_raw(&b, &[4, 200, 0, 8, 0, 0, 0, 43]);
    assert_eq!(r[0].0, 43);
    assert_eq!(error_code(&r), Some(ErrorCode::BRC_BAD_TYPE));
    // Experimenter.
    let r = ask(
        &b,
        44,
        &Message::Experimenter(openflow::Experimenter {
            experimenter: 0x2320,
            exp_type: 1,
            data: vec![],
        }),
    );
    assert_eq!(error_code(&r), Some(ErrorCode::BRC_BAD_EXPERIMENTER));
}

/// A table-features set request as Faucet's `GenericTFM` hardware sends one: a few named
/// tables, each asking for some of what the table supports.
fn faucet_like_tables() -> Vec<openflow::multipart::TableFeatures> {
    use openflow::multipart::table_features::prop_type as pt;
    use openflow::multipart::{PropValue, TableFeatureProp};
    let eth_dst_masked = 0x8000_0700 | 0x100 | 12; // OXM ETH_DST, hasmask, 2 × 6 bytes
    let vlan_vid = 0x8000_0c02;
    ["vlan", "eth_src", "eth_dst", "flood"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let id = i as u8;
            let next = if id < 3 { vec![id + 1] } else { vec![] };
            openflow::multipart::TableFeatures {
                table_id: id,
                name: (*name).into(),
                metadata_match: 0,
                metadata_write: 0,
                config: 0,
                max_entries: 64,
                properties: [
                    TableFeatureProp::new(
                        pt::MATCH,
                        PropValue::Oxms(vec![eth_dst_masked, vlan_vid]),
                    ),
                    TableFeatureProp::new(pt::INSTRUCTIONS, PropValue::Instructions(vec![1, 4])),
                    TableFeatureProp::new(pt::NEXT_TABLES, PropValue::Tables(next)),
                    TableFeatureProp::new(pt::APPLY_ACTIONS, PropValue::Actions(vec![0, 17, 18])),
                ]
                .into_iter()
                .flatten()
                .collect(),
            }
        })
        .collect()
}

fn table_features_reply(replies: &[(u32, Message)]) -> Vec<openflow::multipart::TableFeatures> {
    replies
        .iter()
        .flat_map(|(_, m)| match m {
            Message::MultipartReply(r) => match &r.body {
                B::TableFeatures(v) => v.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Faucet (GenericTFM) sets the pipeline with a table-features request: accepted (once it
/// was refused with OFPTFFC_EPERM), the names kept; requests beyond what a table does are
/// refused with the precise code, and a slave may not set tables.
#[test]
fn table_features_set_request() {
    use openflow::multipart::table_features::prop_type as pt;
    use openflow::multipart::{PropValue, TableFeatureProp};
    let b = bridge(FailMode::Secure);
    let set = |tables| {
        Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: R::TableFeatures(tables),
        })
    };
    let r = ask(&b, 45, &set(faucet_like_tables()));
    assert_eq!(error_code(&r), None, "{r:?}");
    let tables = table_features_reply(&r);
    assert_eq!(tables.len(), usize::from(pipeline::model::MAX_TABLE) + 1);
    assert_eq!(tables[1].name, "eth_src");
    assert_eq!(tables[3].name, "flood");
    assert_eq!(tables[4].name, "table4");
    // The configured tables report what was asked, and their flow-mods are held to it:
    // table 1 matches eth_dst and vlan_vid only.
    assert_eq!(tables[1], faucet_like_tables()[1]);
    let mut m = Match::ANY;
    m.set_exact(packet::Field::EthType, 0x0800);
    let fm = |m| flow_mod(FlowMod::add(1, 5, m, vec![]));
    assert_eq!(
        error_code(&ask(&b, 50, &fm(m))),
        Some(ErrorCode::BMC_BAD_FIELD)
    );
    let mut m = Match::ANY;
    m.set_exact(packet::Field::VlanVid, 0x1005);
    assert_eq!(error_code(&ask(&b, 51, &fm(m))), None);
    // A later get reports the names too.
    let r = ask(&b, 46, &set(Vec::new()));
    assert_eq!(table_features_reply(&r)[0].name, "vlan");
    // Our own features are acceptable as a request.
    let r = ask(&b, 47, &set(vec![super::features::table_features(7, 10)]));
    assert_eq!(error_code(&r), None);

    let refused = |tables, code| {
        let r = ask(&b, 48, &set(tables));
        assert_eq!(error_code(&r), Some(code), "{r:?}");
    };
    let mut t = faucet_like_tables();
    t[2].properties
        .push(TableFeatureProp::new(pt::NEXT_TABLES, PropValue::Tables(vec![1])).unwrap());
    refused(t, ErrorCode::TFFC_BAD_ARGUMENT); // goto backwards
    let mut t = faucet_like_tables();
    t[0].properties
        .push(TableFeatureProp::new(pt::MATCH, PropValue::Oxms(vec![0x8000_ff04])).unwrap());
    refused(t, ErrorCode::TFFC_BAD_ARGUMENT); // no such field
    let mut t = faucet_like_tables();
    t[0].max_entries = u32::MAX;
    refused(t, ErrorCode::TFFC_BAD_ARGUMENT); // beyond the capacity
    let mut t = faucet_like_tables();
    t[1].table_id = 0;
    refused(t, ErrorCode::TFFC_BAD_TABLE); // twice
    let mut t = faucet_like_tables();
    t[0].table_id = 255;
    refused(t, ErrorCode::TFFC_BAD_TABLE);
    // Refusals leave the names as they were.
    let r = ask(&b, 49, &set(Vec::new()));
    assert_eq!(table_features_reply(&r)[7].name, "table7");

    let mut bytes = Vec::new();
    openflow::encode(50, &set(faucet_like_tables()), &mut bytes).unwrap();
    let mut out = Vec::new();
    b.handle(ConnId(2), Role::Slave, &bytes, &mut out);
    let (_, m) = openflow::decode(&out).unwrap();
    assert!(
        matches!(&m, Message::Error(e) if e.code == ErrorCode::BRC_IS_SLAVE),
        "{m:?}"
    );
}

#[test]
fn multipart_replies_split_and_describe() {
    let b = bridge(FailMode::Secure);
    let req = Message::MultipartRequest(MultipartRequest {
        flags: 0,
        body: R::TableFeatures(Vec::new()),
    });
    let r = ask(&b, 1, &req);
    assert!(r.len() > 1, "255 tables' features need several messages");
    let mut tables = 0;
    for (i, (_, m)) in r.iter().enumerate() {
        let Message::MultipartReply(rep) = m else {
            panic!("{m:?}")
        };
        assert_eq!(rep.flags & MORE != 0, i + 1 < r.len());
        if let B::TableFeatures(v) = &rep.body {
            tables += v.len();
        }
    }
    assert_eq!(tables, 255);
    for body in [
        R::Desc,
        R::Table,
        R::PortStats {
            port_no: ports::ANY,
        },
        R::PortDesc,
        R::Queue {
            port_no: ports::ANY,
            queue_id: u32::MAX,
        },
        R::GroupDesc,
        R::GroupFeatures,
        R::MeterFeatures,
        R::Aggregate(FlowStatsRequest::default()),
    ] {
        let r = ask(
            &b,
            2,
            &Message::MultipartRequest(MultipartRequest { flags: 0, body }),
        );
        assert!(matches!(r[..], [(2, Message::MultipartReply(_))]), "{r:?}");
    }
    let r = ask(
        &b,
        3,
        &Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: R::PortStats { port_no: 9 },
        }),
    );
    assert_eq!(error_code(&r), Some(ErrorCode::BRC_BAD_PORT));
}

#[test]
fn port_mod_changes_the_pipeline_and_reports() {
    let b = bridge(FailMode::Secure);
    let hw = mac_from_name("p2");
    let pm = |config| {
        Message::PortMod(PortMod {
            port_no: 2,
            hw_addr: hw,
            config,
            mask: port_config::NO_FWD | port_config::PORT_DOWN,
            advertise: 0,
        })
    };
    assert!(ask(&b, 1, &pm(port_config::NO_FWD)).is_empty());
    {
        let st = b.lock();
        let info = st
            .control
            .ports()
            .iter()
            .find(|p| p.no == 2)
            .unwrap()
            .clone();
        assert!(info.no_fwd && !info.down);
        assert_eq!(st.port_status.len(), 1);
    }
    let wrong_mac = Message::PortMod(PortMod {
        port_no: 2,
        hw_addr: [0; 6],
        config: 0,
        mask: port_config::NO_FWD,
        advertise: 0,
    });
    assert_eq!(
        error_code(&ask(&b, 2, &wrong_mac)),
        Some(ErrorCode::PMFC_BAD_HW_ADDR)
    );
    let unknown = Message::PortMod(PortMod {
        port_no: 7,
        hw_addr: hw,
        config: 0,
        mask: 0,
        advertise: 0,
    });
    assert_eq!(
        error_code(&ask(&b, 3, &unknown)),
        Some(ErrorCode::PMFC_BAD_PORT)
    );
}

#[test]
fn async_config_is_per_connection() {
    let b = bridge(FailMode::Secure);
    let mine = AsyncConfig {
        packet_in_mask: [0b1, 0],
        ..AsyncConfig::DEFAULT
    };
    ask(&b, 1, &Message::SetAsync(mine));
    match &ask(&b, 2, &Message::GetAsyncRequest)[..] {
        [(2, Message::GetAsyncReply(c))] => assert_eq!(*c, mine),
        other => panic!("{other:?}"),
    }
    assert!(b.filtered.load(Relaxed));
    assert!(async_out::wants(
        &mine,
        Role::Equal,
        crate::AsyncKind::PacketIn,
        0
    ));
    assert!(!async_out::wants(
        &mine,
        Role::Equal,
        crate::AsyncKind::PacketIn,
        1
    ));
    assert!(!async_out::wants(
        &AsyncConfig::DEFAULT,
        Role::Slave,
        crate::AsyncKind::FlowRemoved,
        0
    ));
    b.on_disconnect(ConnId(1));
    assert!(!b.filtered.load(Relaxed));
}

#[test]
fn standalone_hands_the_tables_to_a_controller() {
    let b = bridge(FailMode::Standalone);
    assert!(b.fail_open_active());
    b.on_connect(ConnId(1));
    assert!(!b.fail_open_active());
    assert!(
        flow_stats(&b).is_empty(),
        "the controller sees empty tables"
    );
    b.on_connectivity(Connectivity::Lost);
    assert!(b.fail_open_active());
    assert_eq!(flow_stats(&b)[0].cookie, FAIL_OPEN_COOKIE);
    // Secure keeps nothing of the sort.
    let s = bridge(FailMode::Secure);
    s.on_connectivity(Connectivity::Lost);
    assert!(!s.fail_open_active());
}

#[test]
fn the_fail_mode_changes_while_running() {
    let b = bridge(FailMode::Standalone);
    b.set_fail_mode(FailMode::Secure, false);
    assert_eq!(b.fail_mode(), FailMode::Secure);
    assert!(!b.fail_open_active());
    assert!(flow_stats(&b).is_empty(), "secure: the fail-open flow went");
    b.on_connectivity(Connectivity::Lost);
    assert!(!b.fail_open_active(), "secure ignores a lost controller");
    b.set_fail_mode(FailMode::Standalone, true);
    assert!(
        !b.fail_open_active(),
        "a connected controller keeps the tables"
    );
    b.set_fail_mode(FailMode::Standalone, false);
    assert!(b.fail_open_active());
    assert_eq!(flow_stats(&b)[0].cookie, FAIL_OPEN_COOKIE);
}

#[test]
fn packet_out_without_a_datapath_is_refused() {
    let b = bridge(FailMode::Secure);
    let po = Message::PacketOut(openflow::PacketOut {
        buffer_id: NO_BUFFER,
        in_port: ports::CONTROLLER,
        actions: vec![Action::Output {
            port: 1,
            max_len: 0,
        }],
        data: vec![0; 60],
    });
    assert_eq!(error_code(&ask(&b, 1, &po)), Some(ErrorCode::BRC_EPERM));
    let buffered = Message::PacketOut(openflow::PacketOut {
        buffer_id: 5,
        in_port: ports::CONTROLLER,
        actions: vec![],
        data: vec![],
    });
    assert_eq!(
        error_code(&ask(&b, 2, &buffered)),
        Some(ErrorCode::BRC_BUFFER_UNKNOWN)
    );
}

#[test]
fn datapath_ids_are_stable_and_local() {
    assert_eq!(datapath_id_from_name("br0"), datapath_id_from_name("br0"));
    assert_ne!(datapath_id_from_name("br0"), datapath_id_from_name("br1"));
    let mac = mac_from_name("br0");
    assert_eq!(mac[0] & 0x03, 0x02, "locally administered unicast");
    assert!(datapath_id_from_name("br0") < 1 << 48);
}

/// Decodes a byte run of whole messages.
fn decode_all(bytes: &[u8]) -> Vec<(u32, Message)> {
    let mut replies = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = openflow::frame_len(&bytes[at..]).unwrap().unwrap();
        let (h, m) = openflow::decode(&bytes[at..at + len]).unwrap();
        replies.push((h.xid, m));
        at += len;
    }
    replies
}

/// A big table's flow stats come in pieces built off the lock: every message but the last
/// flagged MORE, every flow once, in the order of a dump built at once; its aggregate comes
/// the same way. A small table's are answered at once.
#[tokio::test]
async fn a_big_dump_comes_in_pieces() {
    let b = bridge(FailMode::Secure);
    let n = 3 * super::dump::PIECE + 17;
    for i in 0..n {
        let mut m = in_port(1);
        m.set_exact(packet::Field::TpDst, i as u128);
        m.set_exact(packet::Field::EthType, 0x0800);
        m.set_exact(packet::Field::IpProto, 6);
        let prio = (i % 5) as u16;
        assert!(ask(
            &b,
            1,
            &flow_mod(FlowMod::add((i % 2) as u8, prio, m, output(2)))
        )
        .is_empty());
    }
    let all_at_once = flow_stats(&b);
    assert_eq!(all_at_once.len(), n);
    let request = |body| {
        let mut bytes = Vec::new();
        openflow::encode(
            7,
            &Message::MultipartRequest(MultipartRequest { flags: 0, body }),
            &mut bytes,
        )
        .unwrap();
        bytes
    };
    let mut out = Vec::new();
    let mut stream = b
        .handle_streamed(
            ConnId(1),
            Role::Equal,
            &request(R::Flow(FlowStatsRequest::default())),
            &mut out,
        )
        .expect("a big dump is streamed");
    assert!(out.is_empty(), "nothing is built at once");
    let mut pieces = 0;
    while let Some(piece) = stream.next().await {
        pieces += 1;
        out.extend(piece);
    }
    assert!(pieces > 1, "{pieces} pieces");
    let replies = decode_all(&out);
    let mut streamed = Vec::new();
    for (i, (xid, m)) in replies.iter().enumerate() {
        assert_eq!(*xid, 7);
        let Message::MultipartReply(r) = m else {
            panic!("{m:?}")
        };
        assert_eq!(r.flags & MORE != 0, i + 1 < replies.len(), "message {i}");
        let B::Flow(v) = &r.body else { panic!("{r:?}") };
        streamed.extend(v.iter().cloned());
    }
    let key = |f: &openflow::multipart::FlowStats| (f.table_id, f.priority, f.matcher);
    assert_eq!(
        streamed.iter().map(key).collect::<Vec<_>>(),
        all_at_once.iter().map(key).collect::<Vec<_>>()
    );
    // Aggregate.
    let mut out = Vec::new();
    let mut stream = b
        .handle_streamed(
            ConnId(1),
            Role::Equal,
            &request(R::Aggregate(FlowStatsRequest::default())),
            &mut out,
        )
        .expect("a big aggregate runs off the lock");
    while let Some(piece) = stream.next().await {
        out.extend(piece);
    }
    match &decode_all(&out)[..] {
        [(7, Message::MultipartReply(r))] => match &r.body {
            B::Aggregate(a) => assert_eq!(a.flow_count as usize, n),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // A small table: answered at once.
    let small = bridge(FailMode::Secure);
    ask(
        &small,
        1,
        &flow_mod(FlowMod::add(0, 1, in_port(1), output(2))),
    );
    let mut out = Vec::new();
    assert!(small
        .handle_streamed(
            ConnId(1),
            Role::Equal,
            &request(R::Flow(FlowStatsRequest::default())),
            &mut out
        )
        .is_none());
    assert_eq!(decode_all(&out).len(), 1);
}

/// Many groups' and meters' statistics and descriptions come in pieces built off the lock,
/// every id once and in ascending order, MORE on every message but the last; a request for
/// one id gets just it.
#[tokio::test]
async fn many_groups_and_meters_come_in_pieces() {
    use pipeline::model::{
        Bucket, Group, GroupMod, GroupModCommand, GroupType, Meter, MeterBand, MeterMod,
        MeterModCommand, GROUP_ALL, GROUP_ANY, METER_ALL,
    };
    let b = bridge(FailMode::Secure);
    let n = 2 * super::dump::PIECE + 9;
    b.with_control(|c| {
        // Added in descending order: the replies sort them.
        for id in (1..=n as u32).rev() {
            c.group_mod(&GroupMod {
                command: GroupModCommand::Add,
                group: Group {
                    id,
                    kind: GroupType::All,
                    buckets: vec![Bucket {
                        weight: 0,
                        watch_port: ports::ANY,
                        watch_group: GROUP_ANY,
                        actions: vec![Action::Output {
                            port: 1,
                            max_len: 0,
                        }],
                        actions_as_sent: None,
                    }],
                },
            })
            .unwrap();
            c.meter_mod(&MeterMod {
                command: MeterModCommand::Add,
                meter: Meter {
                    id,
                    pktps: true,
                    burst: false,
                    stats: true,
                    bands: vec![MeterBand::Drop {
                        rate: 100,
                        burst: 0,
                    }],
                    kbps: false,
                },
            })
            .unwrap();
        }
    });
    let ids_of = |body: &B| -> Vec<u32> {
        match body {
            B::Group(v) => v.iter().map(|g| g.group_id).collect(),
            B::GroupDesc(v) => v.iter().map(|g| g.id).collect(),
            B::Meter(v) => v.iter().map(|m| m.meter_id).collect(),
            B::MeterConfig(v) => v.iter().map(|m| m.meter.id).collect(),
            other => panic!("{other:?}"),
        }
    };
    for body in [
        R::Group {
            group_id: GROUP_ALL,
        },
        R::GroupDesc,
        R::Meter {
            meter_id: METER_ALL,
        },
        R::MeterConfig {
            meter_id: METER_ALL,
        },
    ] {
        let mut bytes = Vec::new();
        openflow::encode(
            4,
            &Message::MultipartRequest(MultipartRequest { flags: 0, body }),
            &mut bytes,
        )
        .unwrap();
        let mut out = Vec::new();
        let mut stream = b
            .handle_streamed(ConnId(1), Role::Equal, &bytes, &mut out)
            .expect("streamed");
        assert!(out.is_empty());
        let mut pieces = 0;
        while let Some(p) = stream.next().await {
            pieces += 1;
            out.extend(p);
        }
        assert!(pieces > 1);
        let replies = decode_all(&out);
        let mut ids = Vec::new();
        for (i, (_, m)) in replies.iter().enumerate() {
            let Message::MultipartReply(r) = m else {
                panic!("{m:?}")
            };
            assert_eq!(r.flags & MORE != 0, i + 1 < replies.len(), "message {i}");
            ids.extend(ids_of(&r.body));
        }
        assert_eq!(ids, (1..=n as u32).collect::<Vec<_>>());
    }
    // One group asked for by id.
    let r = ask(
        &b,
        5,
        &Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: R::Group { group_id: 7 },
        }),
    );
    match &r[..] {
        [(5, Message::MultipartReply(rep))] => assert_eq!(ids_of(&rep.body), [7]),
        other => panic!("{other:?}"),
    }
}
