//! The OpenFlow session on one controller connection.
//!
//! ```text
//!  send HELLO ─► await HELLO ──(1.3 common)──► ready ──► messages ◄─► bridge
//!                   │ other / incompatible         │ idle probe_interval: ECHO_REQUEST
//!                   └─► ERROR HELLO_FAILED, close   └ idle again: close
//! ```
//!
//! Once ready: ECHO_REQUEST is answered here, ROLE_REQUEST goes to the bridge's role table,
//! a message of another version gets OFPBRC_BAD_VERSION (the session lives on), a
//! state-changing message from a slave gets OFPBRC_IS_SLAVE, and everything else goes to
//! [`crate::Bridge::handle`]. A length below 8 cannot be framed: OFPBRC_BAD_LEN, then close.
//! Replies to one read are written together; asynchronous messages queued by the registry
//! are written as they come. A reply the bridge sends in pieces ([`crate::ReplyStream`]: a
//! dump of a big table) is written piece by piece as its producer makes them on another
//! thread, with queued asynchronous messages in between; this controller's later messages
//! wait for it (replies keep their order), while the runtime serves every other session.
//! When the bridge cannot take the next message yet
//! ([`crate::Bridge::can_take`]: its packet-out queue is full), the session stops reading that
//! controller and retries every [`BUSY_RETRY`], so TCP slows the controller down; after
//! [`BUSY_HOLD_MAX`] it hands the message over anyway (the bridge then answers with an error). A write that stalls longer than the probe interval ends the
//! session, so a controller that stops reading cannot hold a task forever.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use crate::admission::Activity;
use crate::framing::Framer;
use crate::registry::{Registration, Registry};
use crate::reply_stream::ReplyStream;
use crate::role::Role;
use crate::target::Target;
use crate::ConnId;
use openflow::header::HEADER_LEN;
use openflow::{
    encode_error_for, msg_type as mt, ControllerRole, ErrorCode, ErrorMsg, Header, Hello, Message,
    RoleRequest, OFP_VERSION,
};

/// Why a session ended.
#[derive(Debug, thiserror::Error)]
pub enum SessionEnd {
    /// The controller closed the connection.
    #[error("the controller closed the connection")]
    PeerClosed,
    /// Reading or writing failed.
    #[error("connection error: {0}")]
    Io(#[from] io::Error),
    /// No HELLO within the probe interval.
    #[error("no HELLO from the controller within the probe interval")]
    HelloTimeout,
    /// The controller's first message was not a usable HELLO.
    #[error("version negotiation failed: {0}")]
    HelloFailed(String),
    /// A header declared a length below 8.
    #[error("message length {0} is below the 8-byte header; the stream cannot be framed")]
    BadLength(u16),
    /// Nothing came back to an inactivity probe.
    #[error("no reply to the echo probe within the probe interval")]
    ProbeTimeout,
    /// The controller did not take our bytes within the probe interval.
    #[error("the controller stopped reading (write stalled for the probe interval)")]
    WriteStalled,
    /// A message begun was not whole within the probe interval.
    #[error("a message was not complete within the probe interval of its first byte")]
    MessageTimeout,
}

/// How a session went.
#[derive(Debug)]
pub struct Outcome {
    /// The connection's id.
    pub id: ConnId,
    /// Whether the HELLO exchange completed (resets the reconnection backoff).
    pub negotiated: bool,
    /// Why it ended.
    pub end: SessionEnd,
}

/// Messages a slave may not send (OpenFlow 1.3 §6.3.6).
fn changes_state(msg_type: u8) -> bool {
    matches!(
        msg_type,
        mt::PACKET_OUT
            | mt::FLOW_MOD
            | mt::GROUP_MOD
            | mt::PORT_MOD
            | mt::TABLE_MOD
            | mt::METER_MOD
    )
}

/// What to do after a message.
enum Next {
    Continue,
    /// The bridge cannot take the next message yet; it stays unread.
    Busy,
    /// The last message's reply comes in pieces: send them before the next message.
    Stream(ReplyStream),
    Close(SessionEnd),
}

/// How often a session whose bridge is busy asks again.
pub const BUSY_RETRY: Duration = Duration::from_millis(1);
/// Longest a message is held back for a busy bridge.
pub const BUSY_HOLD_MAX: Duration = Duration::from_secs(1);

struct Session<'a> {
    registry: &'a Arc<Registry>,
    id: ConnId,
    target: &'a Target,
    peer: &'a str,
    registration: Option<Registration>,
    queue: Option<mpsc::Receiver<Arc<[u8]>>>,
    out: Vec<u8>,
    next_xid: u32,
    /// Since when the next message has been held back for a busy bridge.
    busy_since: Option<Instant>,
    /// What the listener that accepted this connection sees of it (none for active targets).
    activity: Option<&'a Activity>,
    /// The reply in pieces the last message asked for, until `take_messages` hands it on.
    streaming: Option<ReplyStream>,
}

/// Runs the session on `stream` until it ends.
pub(crate) async fn run<S: AsyncRead + AsyncWrite + Unpin>(
    registry: &Arc<Registry>,
    mut stream: S,
    target: &Target,
    peer: &str,
    probe_interval: Duration,
    activity: Option<&Activity>,
) -> Outcome {
    let mut s = Session {
        registry,
        id: registry.next_id(),
        target,
        peer,
        registration: None,
        queue: None,
        out: Vec::with_capacity(1024),
        next_xid: 1,
        busy_since: None,
        activity,
        streaming: None,
    };
    let end = s.drive(&mut stream, probe_interval).await;
    // Closing politely is best effort: the peer may be gone already.
    let _ = tokio::time::timeout(probe_interval, stream.shutdown()).await;
    Outcome {
        id: s.id,
        negotiated: s.registration.is_some(),
        end,
    }
}

/// Waits on the queue when there is one.
async fn recv(queue: &mut Option<mpsc::Receiver<Arc<[u8]>>>) -> Option<Arc<[u8]>> {
    match queue {
        Some(q) => q.recv().await,
        None => std::future::pending().await,
    }
}

/// Appends `msg` under `xid`. What the session itself says (HELLO, echo, errors, role
/// replies) always encodes.
fn put(out: &mut Vec<u8>, xid: u32, msg: &Message) {
    if let Err(e) = openflow::encode(xid, msg, out) {
        tracing::error!("cannot encode a {} message: {e}", msg.kind());
    }
}

/// Most queued asynchronous messages gathered into one write.
const ASYNC_BATCH: usize = 64;

impl Session<'_> {
    fn xid(&mut self) -> u32 {
        self.next_xid = self.next_xid.wrapping_add(1);
        self.next_xid
    }

    async fn drive<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
        probe: Duration,
    ) -> SessionEnd {
        let xid = self.xid();
        put(&mut self.out, xid, &Message::Hello(Hello::default()));
        if let Err(end) = self.flush(stream, probe).await {
            return end;
        }
        let mut framer = Framer::new();
        let timer = sleep_until(Instant::now() + probe);
        tokio::pin!(timer);
        // Armed (reset) only when the bridge turns busy: an idle loop builds no timer.
        let retry = sleep_until(Instant::now());
        tokio::pin!(retry);
        // Armed while a message is partial: it must be whole within `probe` of its first byte.
        let partial = sleep_until(Instant::now());
        tokio::pin!(partial);
        let mut partial_since: Option<Instant> = None;
        let mut probing = false;
        let mut busy = false;
        loop {
            tokio::select! {
                read = stream.read_buf(framer.read_buffer()), if !busy => {
                    match read {
                        Ok(0) => return SessionEnd::PeerClosed,
                        Ok(_) => {}
                        Err(e) => return SessionEnd::Io(e),
                    }
                    let taken = framer.taken();
                    let (next, _) = self.process(&mut framer, stream, probe).await;
                    busy = matches!(next, Next::Busy);
                    if busy {
                        retry.as_mut().reset(Instant::now() + BUSY_RETRY);
                    }
                    // A partial message has `probe` from its first byte to be whole; one that
                    // begins after a whole message in the same read starts its own clock.
                    // (Before the HELLO the HELLO wait bounds everything.)
                    if !framer.partial() || self.registration.is_none() {
                        partial_since = None;
                    } else if partial_since.is_none() || framer.taken() != taken {
                        let now = Instant::now();
                        partial_since = Some(now);
                        partial.as_mut().reset(now + probe);
                    }
                    if let Some(a) = self.activity {
                        a.partial(partial_since.is_some());
                    }
                    // Before the HELLO the wait is absolute: trickling bytes buys no time.
                    // After it (from the read that completed it on), any byte is activity.
                    if self.registration.is_some() {
                        probing = false;
                        timer.as_mut().reset(Instant::now() + probe);
                    }
                    if let Err(end) = self.flush(stream, probe).await {
                        return end;
                    }
                    if let Next::Close(end) = next {
                        return end;
                    }
                }
                () = &mut partial, if partial_since.is_some() => {
                    return SessionEnd::MessageTimeout;
                }
                () = &mut retry, if busy => {
                    let (next, streamed) = self.process(&mut framer, stream, probe).await;
                    busy = matches!(next, Next::Busy);
                    if busy {
                        retry.as_mut().reset(Instant::now() + BUSY_RETRY);
                    }
                    if streamed {
                        // Sending a long reply was activity, and no byte was read meanwhile:
                        // the clocks start again.
                        probing = false;
                        timer.as_mut().reset(Instant::now() + probe);
                        if partial_since.is_some() {
                            let now = Instant::now();
                            partial_since = Some(now);
                            partial.as_mut().reset(now + probe);
                        }
                    }
                    if let Err(end) = self.flush(stream, probe).await {
                        return end;
                    }
                    if let Next::Close(end) = next {
                        return end;
                    }
                }
                Some(msg) = recv(&mut self.queue) => {
                    self.out.extend_from_slice(&msg);
                    if let Some(q) = &mut self.queue {
                        for _ in 1..ASYNC_BATCH {
                            let Ok(msg) = q.try_recv() else { break };
                            self.out.extend_from_slice(&msg);
                        }
                    }
                    if let Err(end) = self.flush(stream, probe).await {
                        return end;
                    }
                }
                () = &mut timer => {
                    if self.registration.is_none() {
                        return SessionEnd::HelloTimeout;
                    }
                    if probing {
                        return SessionEnd::ProbeTimeout;
                    }
                    probing = true;
                    if let Some(r) = &self.registration {
                        r.counters.probes.fetch_add(1, Relaxed);
                    }
                    let xid = self.xid();
                    put(&mut self.out, xid, &Message::EchoRequest(Vec::new()));
                    if let Err(end) = self.flush(stream, probe).await {
                        return end;
                    }
                    timer.as_mut().reset(Instant::now() + probe);
                }
            }
        }
    }

    /// Handles the whole messages in `framer` ([`Session::take_messages`]), sending a reply
    /// that comes in pieces before going on to the next message. Also says whether a reply
    /// was streamed (time passed without reading).
    async fn process<S: AsyncWrite + Unpin>(
        &mut self,
        framer: &mut Framer,
        stream: &mut S,
        probe: Duration,
    ) -> (Next, bool) {
        let mut streamed = false;
        loop {
            match self.take_messages(framer) {
                Next::Stream(pieces) => {
                    streamed = true;
                    if let Err(end) = self.send_pieces(stream, pieces, probe).await {
                        return (Next::Close(end), streamed);
                    }
                }
                next => return (next, streamed),
            }
        }
    }

    /// Writes what `out` holds, then every piece of `pieces` as it comes; asynchronous
    /// messages queued meanwhile go out between pieces. This controller's next messages wait
    /// (its replies keep their order); other sessions do not.
    async fn send_pieces<S: AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
        mut pieces: ReplyStream,
        probe: Duration,
    ) -> Result<(), SessionEnd> {
        self.flush(stream, probe).await?;
        /// Marks the connection as being sent a long reply while it lives.
        struct Replying<'a>(Option<&'a Activity>);
        impl Drop for Replying<'_> {
            fn drop(&mut self) {
                if let Some(a) = self.0 {
                    a.replying(false);
                }
            }
        }
        if let Some(a) = self.activity {
            a.replying(true);
        }
        let _replying = Replying(self.activity);
        loop {
            tokio::select! {
                piece = pieces.next() => match piece {
                    Some(piece) => {
                        // A reply on its way is activity: a dump of a big table must not
                        // look idle to its listener's caps while it is being read.
                        if let Some(a) = self.activity {
                            a.touch();
                        }
                        self.out.extend_from_slice(&piece);
                    }
                    None => return Ok(()),
                },
                Some(msg) = recv(&mut self.queue) => self.out.extend_from_slice(&msg),
            }
            self.flush(stream, probe).await?;
        }
    }

    async fn flush<S: AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
        limit: Duration,
    ) -> Result<(), SessionEnd> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = &self.out;
        let written = tokio::time::timeout(limit, async {
            stream.write_all(out).await?;
            stream.flush().await
        })
        .await;
        self.out.clear();
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(SessionEnd::Io(e)),
            Err(_) => Err(SessionEnd::WriteStalled),
        }
    }

    /// Handles every whole message in `framer`.
    fn take_messages(&mut self, framer: &mut Framer) -> Next {
        loop {
            if self.registration.is_some() {
                if let Some(ty) = framer.peek_type() {
                    if !self.registry.bridge.can_take(ty) {
                        let since = *self.busy_since.get_or_insert_with(Instant::now);
                        if since.elapsed() < BUSY_HOLD_MAX {
                            return Next::Busy;
                        }
                    }
                    self.busy_since = None;
                }
            }
            match framer.next_message() {
                Ok(Some(msg)) => {
                    if let Next::Close(end) = self.on_message(msg) {
                        return Next::Close(end);
                    }
                    if let Some(stream) = self.streaming.take() {
                        return Next::Stream(stream);
                    }
                }
                Ok(None) => return Next::Continue,
                Err(bad) => {
                    encode_error_for(&bad.header, ErrorCode::BRC_BAD_LEN, &mut self.out);
                    return Next::Close(SessionEnd::BadLength(bad.declared));
                }
            }
        }
    }

    fn take_charge(&self) {
        self.registry.take_charge(self.id);
        if let Some(a) = self.activity {
            a.took_charge();
        }
    }

    fn on_message(&mut self, msg: &[u8]) -> Next {
        if let Some(a) = self.activity {
            a.touch();
        }
        // The framer hands out only messages of at least 8 bytes.
        let Ok(h) = Header::parse(msg) else {
            return Next::Continue;
        };
        let Some(registration) = &self.registration else {
            return self.on_hello(h, msg);
        };
        registration.counters.rx_messages.fetch_add(1, Relaxed);
        if h.version != OFP_VERSION {
            encode_error_for(msg, ErrorCode::BRC_BAD_VERSION, &mut self.out);
            return Next::Continue;
        }
        match h.kind {
            mt::HELLO | mt::ECHO_REPLY => {}
            // The framer hands out whole messages: the body is what follows the header.
            mt::ECHO_REQUEST => put(
                &mut self.out,
                h.xid,
                &Message::EchoReply(msg[HEADER_LEN..].to_vec()),
            ),
            mt::ROLE_REQUEST => {
                self.take_charge();
                self.on_role_request(h, msg)
            }
            ty => {
                if changes_state(ty) || ty == mt::SET_ASYNC {
                    self.take_charge();
                }
                let role = self.registry.role(self.id);
                if role == Role::Slave && changes_state(ty) {
                    encode_error_for(msg, ErrorCode::BRC_IS_SLAVE, &mut self.out);
                } else {
                    self.streaming =
                        self.registry
                            .bridge
                            .handle_streamed(self.id, role, msg, &mut self.out);
                }
            }
        }
        Next::Continue
    }

    fn on_hello(&mut self, h: Header, msg: &[u8]) -> Next {
        let offer = match openflow::decode(msg) {
            Ok((_, Message::Hello(hello))) => Some(hello),
            // A HELLO whose element list is malformed: its header version still counts, as
            // OpenFlow asks.
            Err(_) if h.kind == mt::HELLO => Some(Hello {
                version: h.version,
                versions: None,
            }),
            _ => None,
        };
        let (code, why) = match offer {
            None => (
                ErrorCode::HFC_EPERM,
                format!("first message has type {}, not HELLO", h.kind),
            ),
            Some(hello) => match openflow::negotiate(&hello) {
                Err(e) => (
                    e.code,
                    format!(
                        "the controller offers version 0x{:02x} (bitmap {:?}); Hayate speaks only OpenFlow 1.3 (0x04)",
                        hello.version, hello.versions
                    ),
                ),
                Ok(_) => {
                    let (registration, queue) =
                        self.registry.register(self.id, self.target, self.peer);
                    self.registration = Some(registration);
                    self.queue = Some(queue);
                    if let Some(a) = self.activity {
                        a.negotiated();
                    }
                    tracing::info!(
                        dpid = format_args!("{:016x}", self.registry.bridge.datapath_id()),
                        conn = self.id.0,
                        target = %self.target,
                        peer = self.peer,
                        "controller connected (OpenFlow 1.3)"
                    );
                    return Next::Continue;
                }
            },
        };
        let start = self.out.len();
        let error = ErrorMsg {
            code,
            experimenter: 0,
            data: why.clone().into_bytes(),
        };
        put(&mut self.out, h.xid, &Message::Error(error));
        // Answer in a version the peer can read: its own when lower than ours.
        if let Some(v) = self.out.get_mut(start) {
            *v = h.version.min(OFP_VERSION);
        }
        Next::Close(SessionEnd::HelloFailed(why))
    }

    fn on_role_request(&mut self, h: Header, msg: &[u8]) {
        let req = match openflow::decode(msg) {
            Ok((_, Message::RoleRequest(req))) => req,
            Ok(_) => return,
            Err(e) => {
                // A wrong length (OFPBRC_BAD_LEN) or an unknown role (OFPRRFC_BAD_ROLE).
                encode_error_for(msg, e.code, &mut self.out);
                return;
            }
        };
        match self
            .registry
            .role_request(self.id, req.role.to_wire(), req.generation_id)
        {
            Ok(reply) => {
                if let Some(old) = reply.demoted {
                    tracing::info!(
                        conn = old.0,
                        new_master = self.id.0,
                        "master demoted to slave"
                    );
                }
                let m = RoleRequest {
                    role: ControllerRole::from(reply.role),
                    generation_id: reply.generation_id,
                };
                put(&mut self.out, h.xid, &Message::RoleReply(m));
            }
            Err(e) => {
                tracing::debug!(conn = self.id.0, "role request refused: {e}");
                encode_error_for(msg, e.error_code(), &mut self.out);
            }
        }
    }
}
