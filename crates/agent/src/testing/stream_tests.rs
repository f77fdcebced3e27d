//! A reply in pieces ([`crate::ReplyStream`]) on real sessions: it holds up the messages its
//! own controller sent after the request (replies keep their order), and no other session.
//! Each piece is made only when the test says so, so nothing here depends on timing.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::DuplexStream;

use super::*;
use crate::rate_limit::RateLimit;
use crate::registry::Registry;
use crate::session;
use crate::target::Target;

/// Long enough never to matter here.
const PROBE: Duration = Duration::from_secs(60);

/// A session on `registry` over an in-memory stream, handshake done.
async fn connect(registry: &Arc<Registry>) -> FakeController<DuplexStream> {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let r = registry.clone();
    tokio::spawn(async move {
        session::run(&r, ours, &Target::Unix("test".into()), "test", PROBE, None).await
    });
    FakeController::handshake(theirs).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_reply_in_pieces_holds_up_only_its_own_session() {
    let bridge = bridge();
    let (gate, gate_rx) = std::sync::mpsc::channel();
    *bridge.pieces.lock().unwrap() = Some(Pieces {
        count: 3,
        gate: gate_rx,
    });
    let (registry, _connected) = Registry::new(bridge.clone(), RateLimit::default(), 8);
    let mut a = connect(&registry).await;
    let mut b = connect(&registry).await;

    // A asks for the long reply and, in the same write, for an echo and features.
    let mut burst = message(MULTIPART_REQUEST, 1, &[]);
    burst.extend(message(mt::ECHO_REQUEST, 2, b"a"));
    burst.extend(message(FEATURES_REQUEST, 3, &[]));
    a.send(&burst).await;
    gate.send(()).unwrap();
    assert_eq!(
        a.expect(MULTIPART_REPLY).await,
        message(MULTIPART_REPLY, 1, &[])
    );

    // The second piece does not exist yet; B is served meanwhile, as often as it asks.
    for xid in 10..13 {
        b.send(&message(mt::ECHO_REQUEST, xid, b"b")).await;
        assert_eq!(
            b.expect(mt::ECHO_REPLY).await,
            message(mt::ECHO_REPLY, xid, b"b")
        );
    }
    b.send(&message(FEATURES_REQUEST, 14, &[])).await;
    b.expect(FEATURES_REPLY).await;

    // A's echo and features come after the last piece, in order.
    gate.send(()).unwrap();
    gate.send(()).unwrap();
    for _ in 0..2 {
        assert_eq!(
            a.expect(MULTIPART_REPLY).await,
            message(MULTIPART_REPLY, 1, &[])
        );
    }
    assert_eq!(
        a.expect(mt::ECHO_REPLY).await,
        message(mt::ECHO_REPLY, 2, b"a")
    );
    assert_eq!(
        a.expect(FEATURES_REPLY).await,
        message(FEATURES_REPLY, 3, &[])
    );
    // The bridge saw A's features request only after the stream: replies keep their order.
    let seen: Vec<u8> = bridge
        .messages
        .lock()
        .unwrap()
        .iter()
        .map(|(_, _, m)| m[1])
        .collect();
    assert_eq!(
        seen,
        [MULTIPART_REQUEST, FEATURES_REQUEST, FEATURES_REQUEST],
        "A's request, B's features, then A's features"
    );
}

/// A connection taking a long reply is active for the connection caps: each piece sent
/// moves its activity on, so a cap does not close it as the idle one in the middle of a dump.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn each_piece_of_a_long_reply_is_activity() {
    let bridge = bridge();
    let (gate, gate_rx) = std::sync::mpsc::channel();
    *bridge.pieces.lock().unwrap() = Some(Pieces {
        count: 2,
        gate: gate_rx,
    });
    let (registry, _connected) = Registry::new(bridge.clone(), RateLimit::default(), 8);
    let activity = Arc::new(crate::admission::Activity::new());
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (r, a) = (registry.clone(), activity.clone());
    tokio::spawn(async move {
        session::run(&r, ours, &Target::Unix("t".into()), "t", PROBE, Some(&a)).await
    });
    let mut c = FakeController::handshake(theirs).await;
    c.send(&message(MULTIPART_REQUEST, 1, &[])).await;
    gate.send(()).unwrap();
    c.expect(MULTIPART_REPLY).await;
    let after_first = activity.last_ms();
    // Later than the first piece on the activity clock (milliseconds), whatever the load.
    std::thread::sleep(Duration::from_millis(5));
    gate.send(()).unwrap();
    c.expect(MULTIPART_REPLY).await;
    assert!(
        activity.last_ms() > after_first,
        "the second piece was activity: {} then {}",
        after_first,
        activity.last_ms()
    );
}
