//! The few OpenFlow 1.3 messages `bench churn-compare` speaks itself, hand-encoded (the lab
//! links none of the switch's crates): HELLO, ECHO_REPLY, FLOW_MOD (add and delete-strict of
//! the [`Flow`]s of [`super::rules`]), BARRIER_REQUEST and a port-statistics request; and
//! [`Conn`], one persistent connection to a switch's management socket that sends them and
//! reads the replies. `ovs-ofctl ofp-parse` reads back what [`Flow::encode`] makes (tests).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::rules::{Field, Flow};

/// OpenFlow 1.3.
const VERSION: u8 = 4;
const HELLO: u8 = 0;
const ERROR: u8 = 1;
const ECHO_REQUEST: u8 = 2;
const ECHO_REPLY: u8 = 3;
const FLOW_MOD: u8 = 14;
const MULTIPART_REQUEST: u8 = 18;
const MULTIPART_REPLY: u8 = 19;
const BARRIER_REQUEST: u8 = 20;
const BARRIER_REPLY: u8 = 21;
/// OFPMP_PORT_STATS.
const PORT_STATS: u16 = 4;
const ANY: u32 = 0xffff_ffff;

/// What a flow-mod does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// OFPFC_ADD (replaces an entry with the same match and priority).
    Add,
    /// OFPFC_DELETE_STRICT.
    DeleteStrict,
}

fn header(buf: &mut Vec<u8>, kind: u8, xid: u32) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&[VERSION, kind, 0, 0]);
    buf.extend_from_slice(&xid.to_be_bytes());
    at
}

fn close(buf: &mut [u8], at: usize) {
    let len = (buf.len() - at) as u16;
    buf[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
}

fn oxm(buf: &mut Vec<u8>, field: u8, value: &[u8]) {
    buf.extend_from_slice(&0x8000u16.to_be_bytes());
    buf.push(field << 1);
    buf.push(value.len() as u8);
    buf.extend_from_slice(value);
}

fn oxm_masked(buf: &mut Vec<u8>, field: u8, value: &[u8], mask: &[u8]) {
    buf.extend_from_slice(&0x8000u16.to_be_bytes());
    buf.push(field << 1 | 1);
    buf.push((value.len() + mask.len()) as u8);
    buf.extend_from_slice(value);
    buf.extend_from_slice(mask);
}

impl Flow {
    /// Appends the FLOW_MOD that does `cmd` with this flow (table 0) to `buf`.
    pub fn encode(&self, cmd: Command, xid: u32, buf: &mut Vec<u8>) {
        let at = header(buf, FLOW_MOD, xid);
        buf.extend_from_slice(&[0; 16]); // cookie, cookie mask
        buf.push(0); // table
        buf.push(match cmd {
            Command::Add => 0,
            Command::DeleteStrict => 4,
        });
        buf.extend_from_slice(&[0; 4]); // idle and hard timeouts
        buf.extend_from_slice(&self.priority.to_be_bytes());
        buf.extend_from_slice(&ANY.to_be_bytes()); // buffer id: none
        buf.extend_from_slice(&ANY.to_be_bytes()); // out port
        buf.extend_from_slice(&ANY.to_be_bytes()); // out group
        buf.extend_from_slice(&[0; 4]); // flags, pad
        let m = buf.len();
        buf.extend_from_slice(&[0, 1, 0, 0]); // OFPMT_OXM, length
        for f in &self.fields {
            if let Field::InPort(p) = f {
                oxm(buf, 0, &p.to_be_bytes());
            }
        }
        if self.udp {
            oxm(buf, 5, &0x0800u16.to_be_bytes());
            oxm(buf, 10, &[17]);
        }
        for f in &self.fields {
            match f {
                Field::InPort(_) => {}
                Field::Ipv4Src(a) => oxm(buf, 11, a),
                Field::Ipv4Dst(a) => oxm(buf, 12, a),
                Field::Ipv4SrcMasked(a, m) => oxm_masked(buf, 11, a, m),
                Field::UdpSrc(p) => oxm(buf, 15, &p.to_be_bytes()),
            }
        }
        let mlen = (buf.len() - m) as u16;
        buf[m + 2..m + 4].copy_from_slice(&mlen.to_be_bytes());
        buf.resize(m + (mlen as usize).div_ceil(8) * 8, 0);
        if let (Command::Add, Some(port)) = (cmd, self.output) {
            buf.extend_from_slice(&4u16.to_be_bytes()); // OFPIT_APPLY_ACTIONS
            buf.extend_from_slice(&24u16.to_be_bytes());
            buf.extend_from_slice(&[0; 4]);
            buf.extend_from_slice(&0u16.to_be_bytes()); // OFPAT_OUTPUT
            buf.extend_from_slice(&16u16.to_be_bytes());
            buf.extend_from_slice(&port.to_be_bytes());
            buf.extend_from_slice(&0xffe5u16.to_be_bytes()); // max_len: OFPCML_NO_BUFFER
            buf.extend_from_slice(&[0; 6]);
        }
        close(buf, at);
    }
}

/// Appends a BARRIER_REQUEST.
pub fn barrier(xid: u32, buf: &mut Vec<u8>) {
    let at = header(buf, BARRIER_REQUEST, xid);
    close(buf, at);
}

/// Appends a port-statistics request for `port`.
pub fn port_stats_request(port: u32, xid: u32, buf: &mut Vec<u8>) {
    let at = header(buf, MULTIPART_REQUEST, xid);
    buf.extend_from_slice(&PORT_STATS.to_be_bytes());
    buf.extend_from_slice(&[0; 6]); // flags, pad
    buf.extend_from_slice(&port.to_be_bytes());
    buf.extend_from_slice(&[0; 4]);
    close(buf, at);
}

/// One port's counters from a port-statistics reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCount {
    /// Packets received.
    pub rx: u64,
    /// Packets sent.
    pub tx: u64,
}

/// The counters of `port` in a port-statistics reply's body (after the 8-byte multipart
/// header); `None` when it is not there.
pub fn parse_port_stats(body: &[u8], port: u32) -> Option<PortCount> {
    const ENTRY: usize = 112;
    let u64_at = |b: &[u8], i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap());
    body.chunks_exact(ENTRY)
        .find(|e| u32::from_be_bytes(e[0..4].try_into().unwrap()) == port)
        .map(|e| PortCount {
            rx: u64_at(e, 8),
            tx: u64_at(e, 16),
        })
}

/// One OpenFlow connection to a switch's management socket, HELLO exchanged.
pub struct Conn {
    s: UnixStream,
    xid: u32,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects to `path` and says HELLO (OpenFlow 1.3).
    pub fn connect(path: &Path) -> Result<Conn> {
        let s = UnixStream::connect(path)
            .with_context(|| format!("connecting to {}", path.display()))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut c = Conn {
            s,
            xid: 1,
            buf: Vec::with_capacity(512),
        };
        let mut b = Vec::new();
        let at = header(&mut b, HELLO, 0);
        close(&mut b, at);
        c.s.write_all(&b)?;
        let (v, kind, _, _) = c.read()?;
        if kind != HELLO || v < VERSION {
            bail!(
                "{} answered HELLO with type {kind}, version {v}",
                path.display()
            );
        }
        Ok(c)
    }

    fn next_xid(&mut self) -> u32 {
        self.xid = self.xid.wrapping_add(1).max(1);
        self.xid
    }

    /// Reads one message: (version, type, xid, body); answers echo requests on the way.
    fn read(&mut self) -> Result<(u8, u8, u32, Vec<u8>)> {
        loop {
            let mut h = [0u8; 8];
            self.s
                .read_exact(&mut h)
                .context("reading from the switch")?;
            let len = u16::from_be_bytes([h[2], h[3]]) as usize;
            if len < 8 {
                bail!("a message of length {len} from the switch");
            }
            let mut body = vec![0u8; len - 8];
            self.s.read_exact(&mut body)?;
            let xid = u32::from_be_bytes(h[4..8].try_into().unwrap());
            match h[1] {
                ECHO_REQUEST => {
                    let mut b = Vec::new();
                    let at = header(&mut b, ECHO_REPLY, xid);
                    b.extend_from_slice(&body);
                    close(&mut b, at);
                    self.s.write_all(&b)?;
                }
                ERROR => {
                    let code =
                        |i: usize| body.get(i..i + 2).map(|x| u16::from_be_bytes([x[0], x[1]]));
                    bail!(
                        "the switch answered xid {xid} with an error (type {:?}, code {:?})",
                        code(0),
                        code(2)
                    );
                }
                kind => return Ok((h[0], kind, xid, body)),
            }
        }
    }

    /// Reads until the message of type `kind` with `xid`.
    fn wait(&mut self, kind: u8, xid: u32) -> Result<Vec<u8>> {
        loop {
            let (_, k, x, body) = self.read()?;
            if k == kind && x == xid {
                return Ok(body);
            }
        }
    }

    /// Sends `flow` with `cmd` and a barrier, and waits for the barrier's reply.
    pub fn flow_mod(&mut self, flow: &Flow, cmd: Command) -> Result<()> {
        self.send_flow_mod(flow, cmd)?;
        self.wait_barrier()
    }

    /// Sends `flow` with `cmd` and a barrier request, without waiting; [`Conn::wait_barrier`]
    /// then waits for the reply.
    pub fn send_flow_mod(&mut self, flow: &Flow, cmd: Command) -> Result<()> {
        let mut b = std::mem::take(&mut self.buf);
        b.clear();
        let x = self.next_xid();
        flow.encode(cmd, x, &mut b);
        let x = self.next_xid();
        barrier(x, &mut b);
        let r = self.s.write_all(&b);
        self.buf = b;
        r.context("sending a flow-mod")
    }

    /// Waits for the reply to the barrier [`Conn::send_flow_mod`] sent.
    pub fn wait_barrier(&mut self) -> Result<()> {
        let x = self.xid;
        self.wait(BARRIER_REPLY, x).map(|_| ())
    }

    /// The counters of `port`.
    pub fn port(&mut self, port: u32) -> Result<PortCount> {
        let mut b = std::mem::take(&mut self.buf);
        b.clear();
        let x = self.next_xid();
        port_stats_request(port, x, &mut b);
        let r = self.s.write_all(&b);
        self.buf = b;
        r?;
        let body = self.wait(MULTIPART_REPLY, x)?;
        body.get(8..)
            .and_then(|b| parse_port_stats(b, port))
            .ok_or_else(|| anyhow!("no counters of port {port} in the switch's reply"))
    }
}

#[cfg(test)]
#[path = "openflow_tests.rs"]
mod tests;
