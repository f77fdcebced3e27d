//! The session state machine over an in-memory stream, with tokio's clock paused.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::DuplexStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::*;
use crate::rate_limit::RateLimit;
use crate::registry::Registry;
use crate::session::{self, Outcome, SessionEnd};
use crate::target::Target;
use openflow::{ControllerRole, ErrorCode, Message, RoleRequest};

const PROBE: Duration = Duration::from_secs(5);

struct Rig {
    bridge: Arc<FakeBridge>,
    registry: Arc<Registry>,
    session: JoinHandle<Outcome>,
}

fn start() -> (Rig, DuplexStream) {
    let bridge = bridge();
    let (registry, _connected) = Registry::new(bridge.clone(), RateLimit::default(), 8);
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let r = registry.clone();
    let session = tokio::spawn(async move {
        session::run(&r, ours, &Target::Unix("test".into()), "test", PROBE, None).await
    });
    (
        Rig {
            bridge,
            registry,
            session,
        },
        theirs,
    )
}

async fn ready() -> (Rig, FakeController<DuplexStream>) {
    let (rig, theirs) = start();
    let c = FakeController::handshake(theirs).await;
    (rig, c)
}

#[tokio::test(start_paused = true)]
async fn hello_echo_and_bridge_messages() {
    let (rig, mut c) = ready().await;
    c.send(&message(mt::ECHO_REQUEST, 77, b"ping")).await;
    assert_eq!(
        c.expect(mt::ECHO_REPLY).await,
        message(mt::ECHO_REPLY, 77, b"ping")
    );
    c.send(&message(FEATURES_REQUEST, 78, &[])).await;
    assert_eq!(
        c.expect(FEATURES_REPLY).await,
        message(FEATURES_REPLY, 78, &[])
    );
    let seen = rig.bridge.messages.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "echo is not the bridge's business");
    assert_eq!(seen[0].1, Role::Equal);
    assert_eq!(seen[0].2, message(FEATURES_REQUEST, 78, &[]));
    assert_eq!(rig.registry.connections().len(), 1);
    assert_eq!(rig.registry.connections()[0].rx_messages, 2);
    drop(c);
    let out = rig.session.await.unwrap();
    assert!(out.negotiated);
    assert!(matches!(out.end, SessionEnd::PeerClosed), "{:?}", out.end);
    assert!(
        rig.registry.connections().is_empty(),
        "the guard unregisters"
    );
    assert_eq!(*rig.bridge.disconnects.lock().unwrap(), [out.id]);
}

#[tokio::test(start_paused = true)]
async fn wrong_version_after_hello_is_refused_and_the_session_lives() {
    let (rig, mut c) = ready().await;
    let mut m = message(18, 5, &[0xa5; 80]);
    m[0] = 0x05;
    c.send(&m).await;
    let err = c.expect(mt::ERROR).await;
    assert_eq!(error_of(&err), ErrorCode::BRC_BAD_VERSION);
    assert_eq!(
        &err[4..8],
        &5u32.to_be_bytes(),
        "the error carries the request's xid"
    );
    assert_eq!(&err[12..], &m[..64], "and quotes its first 64 bytes");
    c.send(&message(mt::ECHO_REQUEST, 6, &[])).await;
    c.expect(mt::ECHO_REPLY).await;
    assert!(rig.bridge.messages.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn short_length_gets_bad_len_and_closes() {
    let (rig, mut c) = ready().await;
    c.send(&[4, 14, 0, 4, 0, 0, 0, 9]).await;
    let err = c.expect(mt::ERROR).await;
    assert_eq!(error_of(&err), ErrorCode::BRC_BAD_LEN);
    assert_eq!(&err[12..], &[4, 14, 0, 4, 0, 0, 0, 9]);
    c.expect_closed().await;
    assert!(matches!(
        rig.session.await.unwrap().end,
        SessionEnd::BadLength(4)
    ));
}

#[tokio::test(start_paused = true)]
async fn incompatible_hello_fails_and_closes() {
    let (rig, theirs) = start();
    let mut c = FakeController::new(theirs);
    c.send(&[0x01, mt::HELLO, 0, 8, 0, 0, 0, 42]).await; // OpenFlow 1.0 HELLO
    c.expect(mt::HELLO).await;
    let err = c.expect(mt::ERROR).await;
    assert_eq!(err[0], 0x01, "answered in the peer's version");
    assert_eq!(&err[4..8], &42u32.to_be_bytes());
    assert_eq!(error_of(&err), ErrorCode::HFC_INCOMPATIBLE);
    assert!(String::from_utf8_lossy(&err[12..]).contains("only OpenFlow 1.3"));
    c.expect_closed().await;
    let out = rig.session.await.unwrap();
    assert!(!out.negotiated && matches!(out.end, SessionEnd::HelloFailed(_)));
    assert!(rig.bridge.connects.lock().unwrap().is_empty());
}

/// HELLOs as OpenFlow 1.3 §6.3.1 reads them: a 1.5 header without a bitmap implies 1.3; an
/// unknown element before the bitmap is skipped; a broken element list leaves the header
/// version; a bitmap without 1.3 is incompatible whatever the header says.
#[tokio::test(start_paused = true)]
async fn hello_offers_are_read_as_openflow_asks() {
    let mut skipped = vec![0x06, mt::HELLO, 0x00, 0x18, 0, 0, 0, 1];
    skipped.extend_from_slice(&[0, 9, 0, 5, 0xff, 0, 0, 0]);
    skipped.extend_from_slice(&[0, 1, 0, 8, 0, 0, 0, 0x10]);
    let mut no_1_3 = vec![0x06, mt::HELLO, 0x00, 0x10, 0, 0, 0, 1, 0, 1, 0, 8];
    no_1_3.extend_from_slice(&((1u32 << 1) | (1 << 6)).to_be_bytes());
    for (hello, ok) in [
        (vec![0x06, mt::HELLO, 0, 8, 0, 0, 0, 1], true),
        (skipped, true),
        (vec![0x04, mt::HELLO, 0, 12, 0, 0, 0, 1, 0, 1, 0, 0], true),
        (no_1_3, false),
    ] {
        let (rig, theirs) = start();
        let mut c = FakeController::new(theirs);
        c.send(&hello).await;
        c.expect(mt::HELLO).await;
        if ok {
            c.send(&message(mt::ECHO_REQUEST, 5, b"x")).await;
            c.expect(mt::ECHO_REPLY).await;
            assert!(!rig.session.is_finished());
        } else {
            let err = c.expect(mt::ERROR).await;
            assert_eq!(error_of(&err), ErrorCode::HFC_INCOMPATIBLE, "{hello:02x?}");
            assert_eq!(err[0], 0x04, "answered in 1.3, below the peer's 1.5");
            c.expect_closed().await;
            assert!(!rig.session.await.unwrap().negotiated);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn first_message_must_be_hello() {
    let (rig, theirs) = start();
    let mut c = FakeController::new(theirs);
    c.send(&message(FEATURES_REQUEST, 1, &[])).await;
    c.expect(mt::HELLO).await;
    let err = c.expect(mt::ERROR).await;
    assert_eq!(error_of(&err), ErrorCode::HFC_EPERM);
    c.expect_closed().await;
    assert!(!rig.session.await.unwrap().negotiated);
}

#[tokio::test(start_paused = true)]
async fn silent_peer_times_out_before_hello() {
    let (rig, theirs) = start();
    let t0 = Instant::now();
    let out = rig.session.await.unwrap();
    assert!(matches!(out.end, SessionEnd::HelloTimeout), "{:?}", out.end);
    assert_eq!(t0.elapsed(), PROBE);
    drop(theirs);
}

#[tokio::test(start_paused = true)]
async fn trickling_bytes_do_not_extend_the_hello_wait() {
    let (rig, theirs) = start();
    let mut c = FakeController::new(theirs);
    let t0 = Instant::now();
    let hello = encoded(1, &Message::Hello(openflow::Hello::default()));
    // One byte a second for 4 s: a wait reset by reads would end at 8 s, not 5.
    for b in &hello[..4] {
        c.send(&[*b]).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let out = rig.session.await.unwrap();
    assert!(matches!(out.end, SessionEnd::HelloTimeout), "{:?}", out.end);
    assert_eq!(t0.elapsed(), PROBE);
}

#[tokio::test(start_paused = true)]
async fn a_trickled_partial_message_ends_the_session_one_probe_after_its_first_byte() {
    let (rig, mut c) = ready().await;
    let mut echo = encoded(7, &Message::EchoRequest(Vec::new()));
    echo.extend_from_slice(&[0xa5; 92]);
    echo[2..4].copy_from_slice(&100u16.to_be_bytes());
    let t0 = Instant::now();
    // One byte a second: each read is activity to the inactivity probe, but the message
    // never completes.
    for b in &echo[..20] {
        if rig.session.is_finished() {
            break;
        }
        c.send(&[*b]).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let out = rig.session.await.unwrap();
    assert!(
        matches!(out.end, SessionEnd::MessageTimeout),
        "{:?}",
        out.end
    );
    assert!(
        t0.elapsed() <= PROBE + Duration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn messages_split_across_reads_keep_a_busy_session_alive() {
    let (rig, mut c) = ready().await;
    let echo = encoded(9, &Message::EchoRequest(Vec::new()));
    // For 3 probe intervals, every read ends inside a message: the rest of the last one and
    // the first half of the next. Each message is whole within a second of its first byte.
    c.send(&echo[..4]).await;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut chunk = echo[4..].to_vec();
        chunk.extend_from_slice(&echo[..4]);
        c.send(&chunk).await;
        c.expect(mt::ECHO_REPLY).await;
    }
    assert!(!rig.session.is_finished());
}

#[tokio::test(start_paused = true)]
async fn inactivity_probe_then_disconnect() {
    let (rig, mut c) = ready().await;
    c.auto_echo = false;
    let t0 = Instant::now();
    let probe = c.expect(mt::ECHO_REQUEST).await;
    assert_eq!(t0.elapsed(), PROBE, "probe after one idle interval");
    assert_eq!(probe.len(), 8);
    assert_eq!(rig.registry.connections()[0].probes, 1);
    c.expect_closed().await;
    assert_eq!(
        t0.elapsed(),
        PROBE * 2,
        "disconnect after a second silent interval"
    );
    assert!(matches!(
        rig.session.await.unwrap().end,
        SessionEnd::ProbeTimeout
    ));
}

#[tokio::test(start_paused = true)]
async fn answered_probes_keep_the_session() {
    let (rig, mut c) = ready().await;
    // The controller answers echoes while waiting for a message that never comes.
    let waited = tokio::time::timeout(PROBE * 10, c.recv()).await;
    assert!(waited.is_err(), "the session must stay up: {waited:?}");
    assert!(!rig.session.is_finished());
    assert!(rig.registry.connections()[0].probes >= 9);
}

#[tokio::test(start_paused = true)]
async fn role_requests_and_slave_refusal() {
    let (rig, mut c) = ready().await;
    c.send(&role_request(ControllerRole::Slave, 3, 9)).await;
    let reply = c.expect(mt::ROLE_REPLY).await;
    assert_eq!(
        role_reply_of(&reply),
        RoleRequest {
            role: ControllerRole::Slave,
            generation_id: 3
        }
    );
    assert_eq!(&reply[4..8], &9u32.to_be_bytes());
    // A slave may read but not change state.
    c.send(&message(mt::FLOW_MOD, 10, &[0; 48])).await;
    assert_eq!(
        error_of(&c.expect(mt::ERROR).await),
        ErrorCode::BRC_IS_SLAVE
    );
    c.send(&message(FEATURES_REQUEST, 11, &[])).await;
    c.expect(FEATURES_REPLY).await;
    assert_eq!(rig.bridge.messages.lock().unwrap()[0].1, Role::Slave);
    // Stale generation.
    c.send(&role_request(ControllerRole::Master, 2, 12)).await;
    let err = c.expect(mt::ERROR).await;
    assert_eq!(error_of(&err), ErrorCode::RRFC_STALE);
    // A truncated role request is a length error; the session lives on.
    c.send(&message(mt::ROLE_REQUEST, 13, &[0; 8])).await;
    assert_eq!(error_of(&c.expect(mt::ERROR).await), ErrorCode::BRC_BAD_LEN);
    c.send(&message(mt::ECHO_REQUEST, 14, &[])).await;
    c.expect(mt::ECHO_REPLY).await;
}

#[tokio::test(start_paused = true)]
async fn queued_async_messages_are_written() {
    let (rig, mut c) = ready().await;
    let pin = message(mt::PACKET_IN, 0, &[1, 2, 3]);
    let d = rig.registry.send_async(crate::AsyncKind::PacketIn, &pin);
    assert_eq!(d.queued, 1);
    assert_eq!(c.expect(mt::PACKET_IN).await, pin);
}

mod robustness {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any bytes after (or instead of) the HELLO end the session cleanly, never a panic.
        #[test]
        fn any_bytes_never_panic(
            hello_first in any::<bool>(),
            msgs in prop::collection::vec(
                (0u8..8, 0u8..32, 0u16..64, prop::collection::vec(any::<u8>(), 0..48)),
                0..12,
            ),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async {
                let (rig, theirs) = start();
                let mut c = if hello_first {
                    FakeController::handshake(theirs).await
                } else {
                    FakeController::new(theirs)
                };
                for (version, ty, len, body) in &msgs {
                    let mut m = vec![];
                    Header { version: *version, kind: *ty, length: *len, xid: 1 }.write(&mut m);
                    m.extend_from_slice(body);
                    c.send(&m).await;
                }
                drop(c);
                // Ends by itself: peer closed, bad length, hello failure or a timeout.
                rig.session.await.unwrap();
                assert!(rig.registry.connections().is_empty());
            });
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_busy_bridge_holds_messages_back_in_order_then_takes_them() {
    use std::sync::atomic::Ordering::Relaxed;
    let (rig, mut c) = ready().await;
    rig.bridge.packet_out_busy.store(true, Relaxed);
    c.send(&message(mt::PACKET_OUT, 10, b"first")).await;
    c.send(&message(FEATURES_REQUEST, 11, &[])).await;
    // Held: neither the packet-out nor what follows it reaches the bridge, no error either.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rig.bridge.messages.lock().unwrap().is_empty());
    rig.bridge.packet_out_busy.store(false, Relaxed);
    assert_eq!(
        c.expect(FEATURES_REPLY).await,
        message(FEATURES_REPLY, 11, &[])
    );
    let seen: Vec<Vec<u8>> = rig
        .bridge
        .messages
        .lock()
        .unwrap()
        .iter()
        .map(|m| m.2.clone())
        .collect();
    assert_eq!(
        seen,
        [
            message(mt::PACKET_OUT, 10, b"first"),
            message(FEATURES_REQUEST, 11, &[])
        ]
    );

    // A bridge that stays busy gets the message after BUSY_HOLD_MAX all the same (it then
    // answers with an error itself): the connection never stalls for good.
    rig.bridge.packet_out_busy.store(true, Relaxed);
    let t0 = Instant::now();
    c.send(&message(mt::PACKET_OUT, 12, b"second")).await;
    c.send(&message(FEATURES_REQUEST, 13, &[])).await;
    c.expect(FEATURES_REPLY).await;
    assert!(t0.elapsed() >= session::BUSY_HOLD_MAX, "{:?}", t0.elapsed());
    assert_eq!(rig.bridge.messages.lock().unwrap().len(), 4);
}
