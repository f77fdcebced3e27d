//! A blocking OpenFlow 1.3 client for `hayate ctl`: one connection to a switch's management
//! socket (or a TCP target), HELLO, then request/reply with a barrier where a command must
//! know its changes are in effect.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use agent::ofproto::port_cmd::{
    dump_request, exp_type, look_request, refusal_text, PortCmd, HAYATE_EXPERIMENTER,
};
use anyhow::{anyhow, bail, Context, Result};
use openflow::multipart::MORE;
use openflow::{Hello, Message, MultipartReplyBody, MultipartRequest, MultipartRequestBody};

/// How long a reply may take.
const TIMEOUT: Duration = Duration::from_secs(10);

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// One session with a switch.
pub struct Client {
    stream: Box<dyn Stream>,
    next_xid: u32,
    what: String,
}

impl Client {
    /// Connects to a Unix socket path, or `tcp:HOST:PORT`, and exchanges HELLOs.
    pub fn connect(target: &str) -> Result<Client> {
        let stream: Box<dyn Stream> = if let Some(addr) = target.strip_prefix("tcp:") {
            let s =
                TcpStream::connect(addr).with_context(|| format!("cannot connect to {target}"))?;
            s.set_read_timeout(Some(TIMEOUT))?;
            s.set_nodelay(true)?;
            Box::new(s)
        } else {
            let s = UnixStream::connect(Path::new(target)).with_context(|| {
                format!("cannot connect to {target}: is `hayate run` running with that bridge (and the same --run-dir)?")
            })?;
            s.set_read_timeout(Some(TIMEOUT))?;
            Box::new(s)
        };
        let mut c = Client {
            stream,
            next_xid: 1,
            what: target.to_string(),
        };
        c.send(&Message::Hello(Hello::default()))?;
        match c.recv()? {
            (_, Message::Hello(h)) if h.supports(openflow::OFP_VERSION) => Ok(c),
            (_, other) => bail!("{target}: expected HELLO with OpenFlow 1.3, got {other:?}"),
        }
    }

    /// Sends one message; its xid.
    pub fn send(&mut self, m: &Message) -> Result<u32> {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1);
        let mut b = Vec::new();
        openflow::encode(xid, m, &mut b).map_err(|e| anyhow!("cannot encode the request: {e}"))?;
        self.stream
            .write_all(&b)
            .with_context(|| format!("{}: write failed", self.what))?;
        Ok(xid)
    }

    /// Receives one message (answering echo requests on the way).
    pub fn recv(&mut self) -> Result<(u32, Message)> {
        loop {
            let mut h = [0u8; 8];
            self.stream
                .read_exact(&mut h)
                .with_context(|| format!("{}: no reply", self.what))?;
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            if len < 8 {
                bail!("{}: a message of length {len} cannot be framed", self.what);
            }
            let mut msg = h.to_vec();
            msg.resize(len, 0);
            self.stream.read_exact(&mut msg[8..])?;
            let (hdr, m) = openflow::decode(&msg)
                .map_err(|e| anyhow!("{}: undecodable reply: {}", self.what, e.reason))?;
            if let Message::EchoRequest(d) = m {
                let mut b = Vec::new();
                openflow::encode(hdr.xid, &Message::EchoReply(d), &mut b)
                    .map_err(|e| anyhow!("{e}"))?;
                self.stream.write_all(&b)?;
                continue;
            }
            return Ok((hdr.xid, m));
        }
    }

    /// Sends `msgs`, then a barrier; fails with the first error the switch returned.
    pub fn transact(&mut self, msgs: &[Message]) -> Result<()> {
        for m in msgs {
            self.send(m)?;
        }
        let barrier = self.send(&Message::BarrierRequest)?;
        let mut first_error = None;
        loop {
            match self.recv()? {
                (xid, Message::BarrierReply) if xid == barrier => break,
                (xid, Message::Error(e)) => {
                    first_error.get_or_insert(anyhow!(
                        "the switch refused request {xid}: {}",
                        error_name(e.code)
                    ));
                }
                _ => {}
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Sends a multipart request and gathers every reply body.
    pub fn multipart(&mut self, body: MultipartRequestBody) -> Result<Vec<MultipartReplyBody>> {
        let xid = self.send(&Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body,
        }))?;
        let mut out = Vec::new();
        loop {
            match self.recv()? {
                (x, Message::MultipartReply(r)) if x == xid => {
                    out.push(r.body);
                    if r.flags & MORE == 0 {
                        return Ok(out);
                    }
                }
                (x, Message::Error(e)) if x == xid => {
                    bail!("the switch refused the request: {}", error_name(e.code))
                }
                _ => {}
            }
        }
    }
}

impl Client {
    /// Sends a port command (add-port, del-port) and returns what the switch did; a refusal
    /// is an error carrying the switch's explanation.
    pub fn port_command(&mut self, cmd: &PortCmd) -> Result<String> {
        self.hayate_request(&cmd.to_message())
    }

    /// Sends a dump request (`exp_type` of [`exp_type::DUMP_PMD`], [`exp_type::DUMP_DROPS`])
    /// and returns the switch's text.
    pub fn dump(&mut self, exp_type: u32) -> Result<String> {
        self.hayate_request(&dump_request(exp_type))
    }

    /// Sends a look request (`exp_type` of [`exp_type::PMD_STATS`] … [`exp_type::TRACE`])
    /// with its arguments; the switch's text or JSON.
    pub fn look(&mut self, exp_type: u32, json: bool, args: &[String]) -> Result<String> {
        self.hayate_request(&look_request(exp_type, json, args))
    }

    /// [`Client::look`] for a reply that is not text (captured frames): its bytes.
    pub fn look_bytes(&mut self, exp_type: u32, args: &[String]) -> Result<Vec<u8>> {
        self.hayate_bytes(&look_request(exp_type, false, args))
    }

    /// Sends a Hayate experimenter request and returns the text of its reply (joined from
    /// its pieces); a refusal is an error carrying the switch's explanation.
    fn hayate_request(&mut self, request: &Message) -> Result<String> {
        let bytes = self.hayate_bytes(request)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// [`Client::hayate_request`]'s reply as bytes.
    fn hayate_bytes(&mut self, request: &Message) -> Result<Vec<u8>> {
        let xid = self.send(request)?;
        let mut text = Vec::new();
        loop {
            match self.recv()? {
                (x, Message::Experimenter(e))
                    if x == xid
                        && e.experimenter == HAYATE_EXPERIMENTER
                        && e.exp_type == exp_type::DONE_MORE =>
                {
                    text.extend(e.data);
                }
                (x, Message::Experimenter(e))
                    if x == xid
                        && e.experimenter == HAYATE_EXPERIMENTER
                        && e.exp_type == exp_type::DONE =>
                {
                    text.extend(e.data);
                    return Ok(text);
                }
                (x, Message::Error(e)) if x == xid => match refusal_text(&e) {
                    Some(text) => bail!("{text}"),
                    None => bail!(
                        "the switch refused the request: {} (is {} a Hayate switch?)",
                        error_name(e.code),
                        self.what
                    ),
                },
                _ => {}
            }
        }
    }
}

/// The specification's name of an error code.
pub fn error_name(code: openflow::ErrorCode) -> String {
    openflow::error::ALL_CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(
            || format!("type {} code {}", code.kind, code.code),
            |(_, n)| (*n).to_string(),
        )
}
