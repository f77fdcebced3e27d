//! A port's egress queues as OpenFlow sees them, over a fake datapath: queue statistics and
//! queue configuration per port, a flow-mod's queue the port lacks refused with
//! OFPBAC_BAD_QUEUE, and `set-policing` / `set-queue` from the management socket only.

use std::collections::BTreeMap;
use std::sync::Mutex;

use datapath::{EgressQueue, QueueCounts};
use openflow::messages::queue::{PacketQueue, QueueProp};
use openflow::multipart::{QueueStats, QUEUE_ALL};
use port::{Egress, Policing, QueueRates};

use super::super::port_cmd::{exp_type, look_request};
use super::super::qos::PortRates;
use super::*;

#[derive(Default)]
struct Fake {
    egress: Mutex<BTreeMap<u32, Egress>>,
    policing: Mutex<BTreeMap<u32, Policing>>,
}

impl PortRates for Fake {
    fn policing(&self, ofport: u32) -> Policing {
        self.policing
            .lock()
            .unwrap()
            .get(&ofport)
            .copied()
            .unwrap_or_default()
    }
    fn set_policing(&self, ofport: u32, p: Policing) {
        self.policing.lock().unwrap().insert(ofport, p);
    }
    fn egress(&self, ofport: u32) -> Egress {
        self.egress
            .lock()
            .unwrap()
            .get(&ofport)
            .cloned()
            .unwrap_or_default()
    }
    fn set_egress(&self, ofport: u32, e: Egress) {
        self.egress.lock().unwrap().insert(ofport, e);
    }
    fn egress_queues(&self, ofport: u32) -> (Vec<EgressQueue>, u64) {
        let e = self.egress(ofport);
        let q = e
            .queues
            .iter()
            .map(|(&queue, &rates)| EgressQueue {
                queue,
                rates,
                counts: QueueCounts {
                    tx_packets: u64::from(queue) * 10,
                    tx_bytes: u64::from(queue) * 1000,
                    dropped: u64::from(queue),
                    backlog: 0,
                },
            })
            .collect();
        (q, 7)
    }
}

/// Bridge `t` with port 2 given queues 1 (min 1000, max 5000) and 3 (max 2000) under a
/// 10,000 kbit/s cap.
fn with_queues() -> (Arc<OfBridge>, Arc<Fake>) {
    let b = bridge(FailMode::Secure);
    let fake = Arc::new(Fake::default());
    let rates = |min_kbps, max_kbps| QueueRates {
        min_kbps,
        max_kbps,
        burst_kbit: 0,
    };
    fake.set_egress(
        2,
        Egress {
            max_kbps: 10_000,
            burst_kbit: 0,
            queues: BTreeMap::from([(1, rates(1000, 5000)), (3, rates(0, 2000))]),
            ..Egress::default()
        },
    );
    let weak: std::sync::Weak<dyn PortRates> =
        Arc::downgrade(&(fake.clone() as Arc<dyn PortRates>));
    b.attach_rates(weak);
    (b, fake)
}

#[test]
fn queue_statistics_list_each_ports_queues() {
    let (b, _fake) = with_queues();
    let q = |port_no, queue_id| {
        let r = ask(
            &b,
            1,
            &Message::MultipartRequest(MultipartRequest {
                flags: 0,
                body: R::Queue { port_no, queue_id },
            }),
        );
        match &r[..] {
            [(1, Message::MultipartReply(m))] => match &m.body {
                B::Queue(v) => Ok(v.clone()),
                other => panic!("{other:?}"),
            },
            _ => Err(error_code(&r)),
        }
    };
    let stats = |queue_id: u32| QueueStats {
        port_no: 2,
        queue_id,
        tx_bytes: u64::from(queue_id) * 1000,
        tx_packets: u64::from(queue_id) * 10,
        tx_errors: u64::from(queue_id),
        duration_sec: u32::MAX,
        duration_nsec: u32::MAX,
    };
    assert_eq!(q(ports::ANY, QUEUE_ALL), Ok(vec![stats(1), stats(3)]));
    assert_eq!(q(2, 3), Ok(vec![stats(3)]));
    assert_eq!(q(1, QUEUE_ALL), Ok(vec![]), "port 1 has no queues");
    assert_eq!(q(2, 2), Err(Some(ErrorCode::QOFC_BAD_QUEUE)));
    assert_eq!(q(9, QUEUE_ALL), Err(Some(ErrorCode::QOFC_BAD_PORT)));
}

#[test]
fn queue_config_gives_rates_in_tenths_of_a_percent_of_the_ports_cap() {
    let (b, _fake) = with_queues();
    let r = ask(&b, 4, &Message::QueueGetConfigRequest { port: 2 });
    let [(4, Message::QueueGetConfigReply(c))] = &r[..] else {
        panic!("{r:?}")
    };
    assert_eq!(
        c.queues,
        vec![
            PacketQueue {
                queue_id: 1,
                port: 2,
                properties: vec![QueueProp::MinRate(100), QueueProp::MaxRate(500)],
            },
            PacketQueue {
                queue_id: 3,
                port: 2,
                properties: vec![QueueProp::MinRate(0xffff), QueueProp::MaxRate(200)],
            },
        ]
    );
    let r = ask(&b, 5, &Message::QueueGetConfigRequest { port: 9 });
    assert_eq!(error_code(&r), Some(ErrorCode::QOFC_BAD_PORT));
}

#[test]
fn a_flow_mod_to_a_queue_the_port_lacks_is_refused_with_bad_queue() {
    let (b, _fake) = with_queues();
    let queued = |q: u32, port: u32| {
        flow_mod(FlowMod::add(
            0,
            1,
            Match::ANY,
            vec![Instruction::ApplyActions(vec![
                Action::SetQueue(q),
                Action::Output { port, max_len: 0 },
            ])],
        ))
    };
    assert_eq!(
        error_code(&ask(&b, 1, &queued(2, 2))),
        Some(ErrorCode::BAC_BAD_QUEUE)
    );
    assert_eq!(
        error_code(&ask(&b, 2, &queued(3, 2))),
        None,
        "port 2 has queue 3"
    );
    assert_eq!(
        error_code(&ask(&b, 3, &queued(0, 2))),
        None,
        "queue 0 always exists"
    );
    assert_eq!(
        error_code(&ask(&b, 4, &queued(5, 1))),
        None,
        "port 1 has no queues"
    );
    // In an action set, set_queue after the output still names the output's queue.
    let set = flow_mod(FlowMod::add(
        0,
        2,
        Match::ANY,
        vec![Instruction::WriteActions(vec![
            Action::Output {
                port: 2,
                max_len: 0,
            },
            Action::SetQueue(6),
        ])],
    ));
    assert_eq!(
        error_code(&ask(&b, 5, &set)),
        Some(ErrorCode::BAC_BAD_QUEUE)
    );
}

/// Sends a set-policing or set-queue request on connection `conn`; the reply's text or the
/// refusal's.
fn set(b: &OfBridge, conn: ConnId, exp: u32, args: &[&str]) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut bytes = Vec::new();
    openflow::encode(7, &look_request(exp, false, &args), &mut bytes).unwrap();
    let mut out = Vec::new();
    b.handle(conn, Role::Equal, &bytes, &mut out);
    let (_, m) = openflow::decode(&out).unwrap();
    match m {
        Message::Experimenter(e) => Ok(String::from_utf8(e.data).unwrap()),
        Message::Error(e) => Err(String::from_utf8(e.data).unwrap()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn set_policing_and_set_queue_change_a_ports_rates_from_the_management_socket_only() {
    let (b, fake) = with_queues();
    let mgmt = ConnId(5 | SECONDARY_BIT);
    let ok = set(
        &b,
        mgmt,
        exp_type::SET_POLICING,
        &["p1", "rate=2000,burst=100"],
    )
    .unwrap();
    assert!(ok.contains("port p1 (OpenFlow port 1)"), "{ok}");
    let p = fake.policing(1);
    assert_eq!((p.rate_kbps, p.burst_kbit), (2000, 100));
    set(&b, mgmt, exp_type::SET_POLICING, &["1", "off"]).unwrap();
    assert!(!fake.policing(1).is_on());
    let e = set(&b, mgmt, exp_type::SET_POLICING, &["p1", "rate=0"]).unwrap_err();
    assert!(e.contains("leave the option out"), "{e}");
    let e = set(&b, mgmt, exp_type::SET_POLICING, &["p9", "rate=10"]).unwrap_err();
    assert!(e.contains("no port p9"), "{e}");

    set(
        &b,
        mgmt,
        exp_type::SET_QUEUE,
        &["p2", "2", "min=300,max=600"],
    )
    .unwrap();
    assert_eq!(fake.egress(2).queues[&2].max_kbps, 600);
    set(&b, mgmt, exp_type::SET_QUEUE, &["p2", "3", "off"]).unwrap();
    assert!(!fake.egress(2).queues.contains_key(&3));
    let e = set(
        &b,
        mgmt,
        exp_type::SET_QUEUE,
        &["p2", "2", "min=900,max=600"],
    )
    .unwrap_err();
    assert!(e.contains("lower min_rate"), "{e}");
    let e = set(&b, mgmt, exp_type::SET_QUEUE, &["p2", "port", "max=500"]).unwrap_err();
    assert!(
        e.contains("raise qos_max_rate"),
        "min 1000 of queue 1 is above it: {e}"
    );
    set(&b, mgmt, exp_type::SET_QUEUE, &["p2", "port", "max=20000"]).unwrap();
    assert_eq!(fake.egress(2).max_kbps, 20_000);
    let ok = set(
        &b,
        mgmt,
        exp_type::SET_QUEUE,
        &["p2", "port", "type=linux-htb,backlog=64"],
    )
    .unwrap();
    assert!(ok.contains("linux-htb"), "{ok}");
    let e = fake.egress(2);
    assert_eq!(
        (e.max_kbps, e.backlog_limit()),
        (20_000, 64),
        "the cap kept"
    );
    let e = set(&b, mgmt, exp_type::SET_QUEUE, &["p2", "port", "min=5"]).unwrap_err();
    assert!(e.contains("a cap only"), "{e}");
    set(&b, mgmt, exp_type::SET_QUEUE, &["p2", "port", "off"]).unwrap();
    assert!(!fake.egress(2).qos_type.shapes());

    let e = set(&b, ConnId(5), exp_type::SET_QUEUE, &["p2", "2", "off"]).unwrap_err();
    assert!(e.contains("management socket"), "{e}");
    assert!(
        fake.egress(2).queues.contains_key(&2),
        "a controller changed nothing"
    );
}

#[test]
fn dump_queues_shows_each_ports_queues_counters_and_held_packets() {
    let (b, fake) = with_queues();
    let mgmt = ConnId(5 | SECONDARY_BIT);
    let mut e = fake.egress(2);
    e.qos_type = port::QosType::LinuxHtb;
    e.queues.insert(
        0xefff,
        QueueRates {
            min_kbps: 0,
            max_kbps: 300,
            burst_kbit: 0,
        },
    );
    fake.set_egress(2, e);
    let text = set(&b, mgmt, exp_type::DUMP_QUEUES, &[]).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "port 2 (p2): linux-htb, port cap 10000 kbit/s, 1000 packets a queue per thread, unknown-queue drops 7",
            "  queue 1: min_rate=1000 max_rate=5000 burst=- tx_packets=10 tx_bytes=1000 dropped=1 held=0",
            "  queue 3: min_rate=- max_rate=2000 burst=- tx_packets=30 tx_bytes=3000 dropped=3 held=0",
            "  queue 61439: min_rate=- max_rate=300 burst=- tx_packets=614390 tx_bytes=61439000 dropped=61439 held=0",
        ],
        "port 1 has no queues: left out"
    );
    let one = set(&b, mgmt, exp_type::DUMP_QUEUES, &["p1"]).unwrap();
    assert!(
        one.starts_with("port 1 (p1): egress-policer, no port cap, unknown-queue drops 7\n"),
        "{one}"
    );
    let e = set(&b, mgmt, exp_type::DUMP_QUEUES, &["p9"]).unwrap_err();
    assert!(e.contains("no port p9"), "{e}");
    let e = set(&b, ConnId(5), exp_type::DUMP_QUEUES, &[]).unwrap_err();
    assert!(e.contains("management socket"), "{e}");
}
