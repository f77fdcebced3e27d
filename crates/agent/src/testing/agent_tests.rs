//! Whole agents over real loopback sockets against in-test controllers.

use std::time::Duration;

use tokio::net::{TcpListener, TcpStream, UnixStream};

use super::*;
use crate::{Agent, AgentConfig, AsyncKind, Backoff, Target};
use openflow::{ControllerRole, ErrorCode};

fn config(targets: &[&str]) -> AgentConfig {
    AgentConfig {
        targets: targets.iter().map(|t| Target::parse(t).unwrap()).collect(),
        backoff: Backoff {
            min: Duration::from_millis(20),
            max: Duration::from_millis(160),
        },
        fail_open_delay: Duration::from_millis(200),
        ..AgentConfig::default()
    }
}

async fn accept(l: &TcpListener) -> TcpStream {
    tokio::time::timeout(WAIT, l.accept())
        .await
        .expect("the agent did not connect")
        .unwrap()
        .0
}

#[tokio::test]
async fn active_target_connects_answers_and_reconnects() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let b = bridge();
    let agent = Agent::start(config(&[&format!("tcp:127.0.0.1:{port}")]), b.clone())
        .await
        .unwrap();

    let mut c = FakeController::handshake(accept(&l).await).await;
    c.send(&message(FEATURES_REQUEST, 3, &[])).await;
    assert_eq!(
        c.expect(FEATURES_REPLY).await,
        message(FEATURES_REPLY, 3, &[])
    );
    wait_for("Connected", || {
        b.events.lock().unwrap().contains(&Connectivity::Connected)
    })
    .await;
    let conns = agent.connections();
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0].target.to_string(), format!("tcp:127.0.0.1:{port}"));

    // The controller goes away; the agent comes back on its own.
    drop(c);
    let mut c = FakeController::handshake(accept(&l).await).await;
    c.send(&message(mt::ECHO_REQUEST, 4, &[])).await;
    c.expect(mt::ECHO_REPLY).await;
    assert_eq!(b.connects.lock().unwrap().len(), 2);
    assert_eq!(b.disconnects.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn unreachable_controller_backs_off_and_fails_open() {
    // A port with nobody listening: bind, note the port, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let b = bridge();
    let _agent = Agent::start(config(&[&format!("tcp:127.0.0.1:{port}")]), b.clone())
        .await
        .unwrap();
    wait_for("Lost", || {
        b.events.lock().unwrap().contains(&Connectivity::Lost)
    })
    .await;
    assert_eq!(*b.events.lock().unwrap(), [Connectivity::Lost]);
    // Now a controller appears on that port; with backoff capped at 160 ms it is found soon.
    let l = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let _c = FakeController::handshake(accept(&l).await).await;
    wait_for("Connected", || b.events.lock().unwrap().len() == 2).await;
    assert_eq!(b.events.lock().unwrap()[1], Connectivity::Connected);
}

#[tokio::test]
async fn passive_target_serves_two_controllers_with_roles() {
    let b = bridge();
    let agent = Agent::start(config(&["ptcp:0:127.0.0.1"]), b.clone())
        .await
        .unwrap();
    let Target::Passive { port, .. } = agent.listening()[0] else {
        panic!("not passive")
    };
    let mut a =
        FakeController::handshake(TcpStream::connect(("127.0.0.1", port)).await.unwrap()).await;
    let mut z =
        FakeController::handshake(TcpStream::connect(("127.0.0.1", port)).await.unwrap()).await;
    wait_for("two controllers", || agent.connections().len() == 2).await;

    // Both equal: both get packet-ins.
    let sender = agent.sender();
    let pin = message(mt::PACKET_IN, 0, b"frame");
    assert_eq!(sender.send(AsyncKind::PacketIn, &pin).queued, 2);
    assert_eq!(a.expect(mt::PACKET_IN).await, pin);
    assert_eq!(z.expect(mt::PACKET_IN).await, pin);

    // a becomes master, then z takes over: a is demoted to slave.
    a.send(&role_request(ControllerRole::Master, 1, 1)).await;
    assert_eq!(
        role_reply_of(&a.expect(mt::ROLE_REPLY).await).role,
        ControllerRole::Master
    );
    z.send(&role_request(ControllerRole::Master, 2, 1)).await;
    assert_eq!(
        role_reply_of(&z.expect(mt::ROLE_REPLY).await).role,
        ControllerRole::Master
    );
    a.send(&role_request(ControllerRole::NoChange, 0, 2)).await;
    assert_eq!(
        role_reply_of(&a.expect(mt::ROLE_REPLY).await).role,
        ControllerRole::Slave
    );
    let roles: Vec<Role> = agent.connections().iter().map(|c| c.role).collect();
    assert_eq!(roles, [Role::Slave, Role::Master]);

    // The slave may not change state, and gets port-status but not packet-in.
    a.send(&message(mt::FLOW_MOD, 3, &[0; 48])).await;
    assert_eq!(
        error_of(&a.expect(mt::ERROR).await),
        ErrorCode::BRC_IS_SLAVE
    );
    let d = sender.send(AsyncKind::PacketIn, &pin);
    assert_eq!((d.queued, d.ineligible), (1, 1));
    let ps = message(mt::PORT_STATUS, 0, &[0; 72]);
    assert_eq!(sender.send(AsyncKind::PortStatus, &ps).queued, 2);
    assert_eq!(z.expect(mt::PACKET_IN).await, pin);
    assert_eq!(z.expect(mt::PORT_STATUS).await, ps);
    assert_eq!(
        a.expect(mt::PORT_STATUS).await,
        ps,
        "no packet-in went to the slave first"
    );

    // A stale master request from the slave is refused.
    a.send(&role_request(ControllerRole::Master, 1, 4)).await;
    let err = a.expect(mt::ERROR).await;
    assert_eq!(error_of(&err), ErrorCode::RRFC_STALE);

    // The master leaves: the slave stays slave, nobody is master.
    drop(z);
    wait_for("one controller", || agent.connections().len() == 1).await;
    assert_eq!(agent.connections()[0].role, Role::Slave);
}

#[tokio::test]
async fn packet_ins_are_rate_limited_per_controller() {
    let b = bridge();
    let mut cfg = config(&["ptcp:0:127.0.0.1"]);
    cfg.packet_in_limit = crate::RateLimit { rate: 1, burst: 5 };
    let agent = Agent::start(cfg, b).await.unwrap();
    let Target::Passive { port, .. } = agent.listening()[0] else {
        panic!("not passive")
    };
    let mut c =
        FakeController::handshake(TcpStream::connect(("127.0.0.1", port)).await.unwrap()).await;
    wait_for("controller", || agent.connections().len() == 1).await;
    let pin = message(mt::PACKET_IN, 0, b"x");
    let sender = agent.sender();
    let sent: u32 = (0..20)
        .map(|_| sender.send(AsyncKind::PacketIn, &pin).queued)
        .sum();
    assert_eq!(sent, 5, "the burst goes, the rest is dropped");
    for _ in 0..5 {
        c.expect(mt::PACKET_IN).await;
    }
    assert_eq!(agent.connections()[0].rate_limited, 15);
    // Port-status is not rate-limited.
    let ps = message(mt::PORT_STATUS, 0, &[0; 72]);
    assert_eq!(sender.send(AsyncKind::PortStatus, &ps).queued, 1);
    c.expect(mt::PORT_STATUS).await;
}

#[tokio::test]
async fn unix_management_socket() {
    let path = std::env::temp_dir().join(format!("hy{}mgmt.sock", std::process::id()));
    let b = bridge();
    let mut agent = Agent::start(config(&[&format!("punix:{}", path.display())]), b.clone())
        .await
        .unwrap();
    let mut c = FakeController::handshake(UnixStream::connect(&path).await.unwrap()).await;
    c.send(&message(FEATURES_REQUEST, 8, &[])).await;
    c.expect(FEATURES_REPLY).await;
    agent.shutdown();
    drop(agent);
    c.expect_closed().await;
    assert!(!path.exists(), "the socket file is removed with the agent");
}

#[tokio::test]
async fn start_errors_name_the_target() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let err = Agent::start(config(&[&format!("ptcp:{port}:127.0.0.1")]), bridge())
        .await
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("ptcp:{port}:127.0.0.1")) && msg.contains("free port"),
        "{msg}"
    );
    let err = Agent::start(config(&["ssl:127.0.0.1:1"]), bridge())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("need TLS files"), "{err}");
}

#[tokio::test]
async fn failed_sessions_back_off_exponentially_to_the_cap() {
    // A "controller" that accepts and hangs up at once: no HELLO, so the backoff never resets.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let _agent = Agent::start(config(&[&format!("tcp:127.0.0.1:{port}")]), bridge())
        .await
        .unwrap();
    let mut times = vec![];
    for _ in 0..7 {
        drop(accept(&l).await);
        times.push(tokio::time::Instant::now());
    }
    let gaps: Vec<u128> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    // Backoff 20, 40, 80, 160, 160, 160 ms (plus the session's own short life).
    for (gap, want) in gaps.iter().zip([20, 40, 80, 160, 160, 160]) {
        assert!(*gap >= want - 2 && *gap < want + 500, "gaps {gaps:?}");
    }
}

#[tokio::test]
async fn several_active_controllers_at_once() {
    let l1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let l2 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let t1 = format!("tcp:127.0.0.1:{}", l1.local_addr().unwrap().port());
    let t2 = format!("tcp:127.0.0.1:{}", l2.local_addr().unwrap().port());
    let agent = Agent::start(config(&[&t1, &t2, "ptcp:0:127.0.0.1"]), bridge())
        .await
        .unwrap();
    let Target::Passive { port, .. } = agent.listening()[0] else {
        panic!("not passive")
    };
    let mut c1 = FakeController::handshake(accept(&l1).await).await;
    let mut c2 = FakeController::handshake(accept(&l2).await).await;
    let mut c3 =
        FakeController::handshake(TcpStream::connect(("127.0.0.1", port)).await.unwrap()).await;
    wait_for("three controllers", || agent.connections().len() == 3).await;
    let pin = message(mt::PACKET_IN, 0, b"p");
    assert_eq!(agent.sender().send(AsyncKind::PacketIn, &pin).queued, 3);
    for c in [&mut c1, &mut c2, &mut c3] {
        assert_eq!(c.expect(mt::PACKET_IN).await, pin);
    }
    let id = agent.connections()[2].id;
    assert_eq!(agent.sender().send_to(id, &pin).queued, 1);
}
