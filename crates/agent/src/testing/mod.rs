//! Test doubles (feature `test-utils`): a bridge that records what it is given and a fake
//! controller that speaks just enough OpenFlow, for this crate's tests and for crates that
//! test against the agent. Helpers panic with a message on anything unexpected: they are for
//! tests only.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::connectivity::Connectivity;
use crate::framing::Framer;
use crate::role::Role;
use crate::{Bridge, ConnId, ReplyStream};
use openflow::header::HEADER_LEN;
use openflow::{msg_type as mt, ControllerRole, ErrorCode, Header, Hello, Message, RoleRequest};

#[cfg(test)]
mod agent_tests;
#[cfg(test)]
mod idle_cpu;
#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tls_tests;

/// OFPT_FEATURES_REQUEST, which the fake bridge answers.
pub const FEATURES_REQUEST: u8 = 5;
/// OFPT_FEATURES_REPLY, the fake bridge's header-only answer.
pub const FEATURES_REPLY: u8 = 6;
/// OFPT_MULTIPART_REQUEST, which the fake bridge answers in pieces when told to
/// ([`FakeBridge::pieces`]).
pub const MULTIPART_REQUEST: u8 = 18;
/// OFPT_MULTIPART_REPLY: each piece is one, header only.
pub const MULTIPART_REPLY: u8 = 19;

/// How the fake bridge answers the next MULTIPART_REQUEST: `count` header-only
/// MULTIPART_REPLYs under the request's xid, each made only when `gate` gives one `()` (so a
/// test decides when each piece exists).
pub struct Pieces {
    /// How many pieces.
    pub count: usize,
    /// One `()` per piece.
    pub gate: std::sync::mpsc::Receiver<()>,
}

/// Bound on every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(10);

/// Records everything; answers FEATURES_REQUEST with a header-only FEATURES_REPLY.
#[derive(Default)]
pub struct FakeBridge {
    /// Every message given to `handle`, with its connection and role.
    pub messages: Mutex<Vec<(ConnId, Role, Vec<u8>)>>,
    /// Every connectivity event.
    pub events: Mutex<Vec<Connectivity>>,
    /// Connections that finished their HELLO.
    pub connects: Mutex<Vec<ConnId>>,
    /// Connections that ended.
    pub disconnects: Mutex<Vec<ConnId>>,
    /// While set, the bridge cannot take PACKET_OUTs ([`Bridge::can_take`] says no).
    pub packet_out_busy: std::sync::atomic::AtomicBool,
    /// When set, the next MULTIPART_REQUEST is answered in pieces
    /// ([`Bridge::handle_streamed`]).
    pub pieces: Mutex<Option<Pieces>>,
}

impl Bridge for FakeBridge {
    fn datapath_id(&self) -> u64 {
        0x00aa_bbcc_ddee_ff00
    }

    fn handle(&self, conn: ConnId, role: Role, msg: &[u8], replies: &mut Vec<u8>) {
        self.messages
            .lock()
            .unwrap()
            .push((conn, role, msg.to_vec()));
        let h = Header::parse(msg).unwrap();
        if h.kind == FEATURES_REQUEST {
            Header {
                version: 4,
                kind: FEATURES_REPLY,
                length: 8,
                xid: h.xid,
            }
            .write(replies);
        }
    }

    fn handle_streamed(
        &self,
        conn: ConnId,
        role: Role,
        msg: &[u8],
        replies: &mut Vec<u8>,
    ) -> Option<ReplyStream> {
        self.handle(conn, role, msg, replies);
        let h = Header::parse(msg).unwrap();
        if h.kind != MULTIPART_REQUEST {
            return None;
        }
        let Pieces { count, gate } = self.pieces.lock().unwrap().take()?;
        Some(ReplyStream::new(Box::new(move |sink| {
            for _ in 0..count {
                if gate.recv_timeout(WAIT).is_err() || !sink(message(MULTIPART_REPLY, h.xid, &[])) {
                    return;
                }
            }
        })))
    }

    fn can_take(&self, msg_type: u8) -> bool {
        msg_type != mt::PACKET_OUT
            || !self
                .packet_out_busy
                .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn on_connectivity(&self, event: Connectivity) {
        self.events.lock().unwrap().push(event);
    }

    fn on_connect(&self, conn: ConnId) {
        self.connects.lock().unwrap().push(conn);
    }

    fn on_disconnect(&self, conn: ConnId) {
        self.disconnects.lock().unwrap().push(conn);
    }
}

/// A message of `msg_type` with `body`, version 1.3.
pub fn message(msg_type: u8, xid: u32, body: &[u8]) -> Vec<u8> {
    let mut m = vec![];
    let length = (8 + body.len()) as u16;
    Header {
        version: 4,
        kind: msg_type,
        length,
        xid,
    }
    .write(&mut m);
    m.extend_from_slice(body);
    m
}

/// `msg` under `xid`, encoded.
pub fn encoded(xid: u32, msg: &Message) -> Vec<u8> {
    let mut m = vec![];
    openflow::encode(xid, msg, &mut m).expect("encodable");
    m
}

/// A ROLE_REQUEST for `role` with `generation_id` under `xid`.
pub fn role_request(role: ControllerRole, generation_id: u64, xid: u32) -> Vec<u8> {
    encoded(
        xid,
        &Message::RoleRequest(RoleRequest {
            role,
            generation_id,
        }),
    )
}

/// The body of a ROLE_REPLY.
pub fn role_reply_of(msg: &[u8]) -> RoleRequest {
    match openflow::decode(msg) {
        Ok((_, Message::RoleReply(r))) => r,
        other => panic!("not a ROLE_REPLY: {other:?}"),
    }
}

/// The type and code of an ERROR message.
pub fn error_of(msg: &[u8]) -> ErrorCode {
    assert_eq!(msg[1], mt::ERROR, "not an ERROR: {msg:02x?}");
    ErrorCode {
        kind: u16::from_be_bytes([msg[8], msg[9]]),
        code: u16::from_be_bytes([msg[10], msg[11]]),
    }
}

/// The controller side of a connection, speaking just enough OpenFlow for the tests.
pub struct FakeController<S> {
    stream: S,
    framer: Framer,
    /// Whether to answer ECHO_REQUESTs by itself (and hide them from `recv`).
    pub auto_echo: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> FakeController<S> {
    /// Wraps a stream without saying anything yet.
    pub fn new(stream: S) -> Self {
        FakeController {
            stream,
            framer: Framer::new(),
            auto_echo: true,
        }
    }

    /// Sends HELLO (1.3) and waits for the switch's HELLO.
    pub async fn handshake(stream: S) -> Self {
        let mut c = FakeController::new(stream);
        c.send(&encoded(1, &Message::Hello(Hello::default()))).await;
        let m = c.recv().await.expect("switch closed before its HELLO");
        assert_eq!(m[1], mt::HELLO, "first message from the switch: {m:02x?}");
        c
    }

    /// Writes `bytes` (panics if the connection is gone).
    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
        self.stream.flush().await.unwrap();
    }

    /// The next message, `None` when the switch closed or broke the connection.
    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(m) = self.framer.next_message().unwrap() {
                let m = m.to_vec();
                if self.auto_echo && m[1] == mt::ECHO_REQUEST {
                    let xid = Header::parse(&m).unwrap().xid;
                    let reply = Message::EchoReply(m[HEADER_LEN..].to_vec());
                    self.send(&encoded(xid, &reply)).await;
                    continue;
                }
                return Some(m);
            }
            match self.stream.read_buf(self.framer.read_buffer()).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// The next message within [`WAIT`], which must have type `msg_type`.
    pub async fn expect(&mut self, msg_type: u8) -> Vec<u8> {
        let m = tokio::time::timeout(WAIT, self.recv())
            .await
            .expect("timed out waiting for a message")
            .expect("connection closed");
        assert_eq!(m[1], msg_type, "unexpected message {m:02x?}");
        m
    }

    /// Waits within [`WAIT`] for the switch to close the connection (answering echoes).
    pub async fn expect_closed(&mut self) {
        let end = tokio::time::timeout(WAIT, async {
            while let Some(m) = self.recv().await {
                assert!(m[1] != mt::ERROR || self.auto_echo, "unexpected {m:02x?}");
            }
        });
        end.await.expect("the switch did not close the connection");
    }
}

/// Polls `cond` every 5 ms until it holds, at most [`WAIT`].
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = tokio::time::Instant::now();
    while !cond() {
        assert!(t0.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A fresh bridge shared with the agent.
pub fn bridge() -> Arc<FakeBridge> {
    Arc::new(FakeBridge::default())
}
