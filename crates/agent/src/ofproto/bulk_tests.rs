//! Bulk flow-mods through the bridge, and their FLOW_REMOVED through a real agent: exactly
//! the matching flows go, a barrier after the delete is answered once it is applied, and the
//! pump hands each controller no more FLOW_REMOVED than its queue takes (none dropped).

use std::time::Duration;

use openflow::messages::mods::FlowModMsg;
use openflow::{Message, NO_BUFFER};
use packet::Field;
use pipeline::control::bulk::BULK_MIN;
use pipeline::model::{Action, FlowMod, FlowModCommand, Instruction, Match, ALL_TABLES};
use pipeline::{Control, FlowFilter, PipelineConfig};
use tokio::net::UnixStream;

use crate::connectivity::FailMode;
use crate::ofproto::{OfBridge, OfBridgeConfig};
use crate::rate_limit::RateLimit;
use crate::role::Role;
use crate::testing::FakeController;
use crate::{Agent, AgentConfig, Bridge, ConnId, Target};
use openflow::header::msg_type as mt;

/// Flows in the tests' tables: enough to take the bulk path.
const FLOWS: u32 = BULK_MIN as u32 + 1_000;

fn out(port: u32) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![Action::Output {
        port,
        max_len: 0,
    }])]
}

/// A bridge with [`FLOWS`] flows in table 0: every third one IPv4 and asking for
/// FLOW_REMOVED, the others ARP. Returns it and how many are IPv4.
fn bridge() -> (std::sync::Arc<OfBridge>, usize) {
    let (mut control, _cell) = Control::new(PipelineConfig::default());
    let mut ip = 0;
    for i in 0..FLOWS {
        let mut m = Match::ANY;
        m.set_exact(Field::InPort, u128::from(i % 4 + 1));
        m.set_exact(
            Field::EthType,
            if i.is_multiple_of(3) { 0x0800 } else { 0x0806 },
        );
        m.set_exact(Field::EthSrc, u128::from(i));
        let mut fm = FlowMod::add(0, 10, m, out(2));
        fm.flags.send_flow_rem = i.is_multiple_of(3);
        ip += usize::from(i.is_multiple_of(3));
        control.flow_mod(&fm).unwrap();
    }
    let b = OfBridge::new(
        OfBridgeConfig {
            name: "bulk".into(),
            datapath_id: 1,
            fail_mode: FailMode::Secure,
            packet_in_limit: RateLimit::default(),
        },
        control,
        Vec::new(),
    );
    (b, ip)
}

fn delete_ip() -> FlowMod {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    FlowMod {
        command: FlowModCommand::Delete,
        ..FlowMod::add(ALL_TABLES, 0, m, Vec::new())
    }
}

fn encode(xid: u32, msg: &Message) -> Vec<u8> {
    let mut bytes = Vec::new();
    openflow::encode(xid, msg, &mut bytes).unwrap();
    bytes
}

fn flow_mod(fm: FlowMod) -> Message {
    Message::FlowMod(FlowModMsg {
        flow_mod: fm,
        buffer_id: NO_BUFFER,
    })
}

fn flows(b: &OfBridge) -> Vec<pipeline::FlowView> {
    b.with_control(|c| c.flows(ALL_TABLES, &FlowFilter::ALL))
}

#[test]
fn a_bulk_delete_removes_exactly_the_matching_flows_and_notes_them() {
    let (b, ip) = bridge();
    assert!(b.with_control(|c| c.is_bulk(&delete_ip())));
    let mut replies = Vec::new();
    b.handle(
        ConnId(1),
        Role::Equal,
        &encode(3, &flow_mod(delete_ip())),
        &mut replies,
    );
    assert!(replies.is_empty(), "no error: {replies:02x?}");
    let left = flows(&b);
    assert_eq!(left.len(), FLOWS as usize - ip);
    assert!(left
        .iter()
        .all(|f| f.matcher.get(Field::EthType).0 == 0x0806));
    let removed = b.with_control(Control::take_removed);
    assert_eq!(removed.len(), ip);
    assert!(removed
        .iter()
        .all(|r| r.flow.matcher.get(Field::EthType).0 == 0x0800));
}

#[test]
fn a_bulk_modify_changes_exactly_the_matching_flows() {
    let (b, ip) = bridge();
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    let modify = FlowMod {
        command: FlowModCommand::Modify,
        ..FlowMod::add(0, 0, m, out(7))
    };
    assert!(b.with_control(|c| c.is_bulk(&modify)));
    let mut replies = Vec::new();
    b.handle(
        ConnId(1),
        Role::Equal,
        &encode(3, &flow_mod(modify)),
        &mut replies,
    );
    assert!(replies.is_empty(), "no error: {replies:02x?}");
    let all = flows(&b);
    assert_eq!(all.len(), FLOWS as usize);
    let changed = all.iter().filter(|f| f.instructions == out(7)).count();
    assert_eq!(changed, ip);
    assert!(all
        .iter()
        .all(|f| (f.instructions == out(7)) == (f.matcher.get(Field::EthType).0 == 0x0800)));
}

/// Over a real agent: the barrier after the delete comes once the delete is applied; each
/// pump queues no more FLOW_REMOVED than the controller's queue has room for, so every one
/// arrives (none dropped), however many the delete made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_removed_goes_out_as_fast_as_the_controller_takes_it() {
    let (b, ip) = bridge();
    let path = std::env::temp_dir().join(format!("hy{}bulk.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let queue_len = 50;
    let agent = Agent::start(
        AgentConfig {
            targets: vec![Target::PassiveUnix(path.clone())],
            queue_len,
            ..AgentConfig::default()
        },
        b.clone(),
    )
    .await
    .unwrap();
    let mut c = FakeController::handshake(UnixStream::connect(&path).await.unwrap()).await;
    let mut burst = encode(5, &flow_mod(delete_ip()));
    burst.extend(encode(6, &Message::BarrierRequest));
    c.send(&burst).await;
    c.expect(mt::BARRIER_REPLY).await;
    assert_eq!(
        flows(&b).len(),
        FLOWS as usize - ip,
        "applied before the barrier"
    );

    let mut received = 0;
    let mut pumps = 0;
    loop {
        let rep = b.pump(&[&agent], None);
        pumps += 1;
        assert!(rep.flow_removed <= queue_len, "{rep:?}");
        for _ in 0..rep.flow_removed {
            c.expect(mt::FLOW_REMOVED).await;
            received += 1;
        }
        if rep.backlog == 0 {
            break;
        }
        assert!(pumps < 10 * ip, "no progress: {rep:?}");
    }
    assert_eq!(received, ip);
    let conns = agent.connections();
    assert_eq!(conns[0].queue_full, 0, "nothing dropped on a full queue");
    // Nothing more comes.
    let more = tokio::time::timeout(Duration::from_millis(50), c.recv()).await;
    assert!(more.is_err(), "{more:?}");
    drop(agent);
    let _ = std::fs::remove_file(&path);
}
