//! A raw OpenFlow 1.3 session with the switch over TCP, as a controller holds one: messages
//! encoded and decoded by the `openflow` crate, echo requests answered while waiting.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use openflow::messages::mods::FlowModMsg;
use openflow::multipart::FlowStats;
use openflow::{Hello, Message, MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use pipeline::model::FlowMod;

/// One controller connection.
pub struct Session(pub TcpStream);

impl Session {
    /// Connects to the switch's listener on `port`, HELLOs exchanged; a read waits at most
    /// `timeout`.
    pub fn open(port: u16, timeout: Duration) -> Session {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the switch");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(timeout)).unwrap();
        let mut c = Session(s);
        c.send(1, &Message::Hello(Hello::default()));
        match c.recv() {
            (_, Message::Hello(_)) => c,
            other => panic!("expected HELLO, got {other:?}"),
        }
    }

    /// A second handle on the same connection (for another thread).
    pub fn try_clone(&self) -> Session {
        Session(self.0.try_clone().expect("clone the socket"))
    }

    /// Sends bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).expect("write to the switch");
    }

    /// Sends `m` with transaction id `xid`.
    pub fn send(&mut self, xid: u32, m: &Message) {
        let mut b = Vec::new();
        openflow::encode(xid, m, &mut b).unwrap();
        self.send_raw(&b);
    }

    /// Sends a flow-mod (no buffered packet) with transaction id `xid`.
    pub fn flow_mod(&mut self, xid: u32, flow_mod: FlowMod) {
        let m = Message::FlowMod(FlowModMsg {
            flow_mod,
            buffer_id: openflow::NO_BUFFER,
        });
        self.send(xid, &m);
    }

    /// The next message's bytes.
    pub fn read_raw(&mut self) -> Vec<u8> {
        let mut h = [0u8; 8];
        self.0
            .read_exact(&mut h)
            .expect("a message from the switch");
        let len = u16::from_be_bytes([h[2], h[3]]) as usize;
        let mut m = h.to_vec();
        m.resize(len, 0);
        self.0.read_exact(&mut m[8..]).unwrap();
        m
    }

    /// The next message, decoded: (xid, message).
    pub fn recv(&mut self) -> (u32, Message) {
        let (hdr, m) = openflow::decode(&self.read_raw()).unwrap();
        (hdr.xid, m)
    }

    /// The next message that is not an echo request (answering those).
    pub fn next(&mut self) -> (u32, Message) {
        loop {
            match self.recv() {
                (xid, Message::EchoRequest(d)) => self.send(xid, &Message::EchoReply(d)),
                other => return other,
            }
        }
    }

    /// Reads until the reply to `xid`, answering echo requests and passing over other
    /// messages; panics on an error.
    pub fn wait_for(&mut self, xid: u32) -> Message {
        loop {
            match self.next() {
                (x, Message::Error(e)) => panic!("the switch refused request {x}: {e:?}"),
                (x, m) if x == xid => return m,
                _ => {}
            }
        }
    }

    /// Sends a barrier and waits for its reply (panics on an error before it).
    pub fn barrier(&mut self, xid: u32) {
        self.send(xid, &Message::BarrierRequest);
        assert_eq!(self.wait_for(xid), Message::BarrierReply);
    }

    /// The reply to a multipart request for `body` (one message).
    pub fn multipart(&mut self, xid: u32, body: MultipartRequestBody) -> MultipartReplyBody {
        let req = MultipartRequest { flags: 0, body };
        self.send(xid, &Message::MultipartRequest(req));
        match self.wait_for(xid) {
            Message::MultipartReply(r) => r.body,
            other => panic!("expected the reply to multipart request {xid}, got {other:?}"),
        }
    }

    /// Every flow's statistics (a table small enough for one reply).
    pub fn flow_stats(&mut self, xid: u32) -> Vec<FlowStats> {
        let body = MultipartRequestBody::Flow(openflow::multipart::FlowStatsRequest::default());
        match self.multipart(xid, body) {
            MultipartReplyBody::Flow(v) => v,
            other => panic!("{other:?}"),
        }
    }
}
