//! The underlay next hop of a remote tunnel endpoint, from the host's routing and neighbour
//! tables over rtnetlink — the questions `ip route get REMOTE` and `ip neigh show` answer.
//!
//! [`Resolver::resolve`] asks the kernel's route lookup for the remote (so policy routing,
//! on-link prefixes and gateways are the kernel's own decision), reads the output interface's
//! MAC address, and looks up the next hop's MAC in the neighbour table. A next hop the kernel
//! does not know yet is *being resolved*: the resolver sends one empty UDP datagram to it
//! through that interface, which makes the kernel send its ARP request or neighbour
//! solicitation, and says so; the caller asks again later (the switch's housekeeping does,
//! every second, and rebuilds a tunnel's template when the answer changes). This runs on the
//! control side, never per packet.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr as NlAddr};

use crate::endpoint::OuterAddrs;

/// Where packets to a remote endpoint leave, and the addresses their outer headers carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHop {
    /// The output interface's index.
    pub ifindex: u32,
    /// The output interface's name (the underlay port the switch must own).
    pub ifname: String,
    /// The local address the route picks (the tunnel's local endpoint unless configured).
    pub src: IpAddr,
    /// The gateway, or the remote itself when it is on-link.
    pub via: IpAddr,
    /// The output interface's MAC address.
    pub src_mac: [u8; 6],
    /// The next hop's MAC address.
    pub dst_mac: [u8; 6],
}

impl NextHop {
    /// The outer addresses of a tunnel towards `remote` through this next hop.
    pub fn outer(&self, remote: IpAddr) -> OuterAddrs {
        OuterAddrs {
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            src: self.src,
            dst: remote,
        }
    }
}

/// Why a remote cannot be reached now (what a tunnel port's status says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    /// The kernel has no route to the remote.
    NoRoute(String),
    /// The route gives no output interface or no source address.
    Incomplete(&'static str),
    /// The next hop's MAC address is being resolved (ARP / neighbour discovery sent).
    Resolving {
        /// The gateway or the remote.
        via: IpAddr,
        /// The output interface.
        ifname: String,
    },
    /// The kernel tried and failed to resolve the next hop.
    Failed {
        /// The gateway or the remote.
        via: IpAddr,
        /// The output interface.
        ifname: String,
    },
    /// Talking to the kernel failed.
    Netlink(String),
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreachable::NoRoute(e) => write!(f, "no route to the remote endpoint ({e})"),
            Unreachable::Incomplete(what) => write!(f, "the route to the remote has no {what}"),
            Unreachable::Resolving { via, ifname } => {
                write!(f, "resolving the MAC address of {via} on {ifname}")
            }
            Unreachable::Failed { via, ifname } => {
                write!(
                    f,
                    "{via} does not answer ARP / neighbour discovery on {ifname}"
                )
            }
            Unreachable::Netlink(e) => write!(f, "rtnetlink: {e}"),
        }
    }
}

impl std::error::Error for Unreachable {}

/// An rtnetlink socket that answers next-hop questions.
pub struct Resolver {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Resolver {
    /// Opens a route netlink socket in the calling thread's network namespace.
    pub fn new() -> io::Result<Resolver> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.connect(&NlAddr::new(0, 0))?;
        Ok(Resolver {
            sock,
            seq: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    /// The next hop towards `remote`, from `local` if given (as `ip route get REMOTE from
    /// LOCAL`).
    pub fn resolve(
        &mut self,
        remote: IpAddr,
        local: Option<IpAddr>,
    ) -> Result<NextHop, Unreachable> {
        let (oif, src, gateway) = self.route(remote, local)?;
        let src = local
            .or(src)
            .ok_or(Unreachable::Incomplete("source address"))?;
        let (ifname, src_mac) = self.link(oif)?;
        let via = gateway.unwrap_or(remote);
        match self.neighbour(oif, via)? {
            Some(Ok(dst_mac)) => Ok(NextHop {
                ifindex: oif,
                ifname,
                src,
                via,
                src_mac,
                dst_mac,
            }),
            Some(Err(())) => Err(Unreachable::Failed { via, ifname }),
            None => {
                poke(&ifname, via);
                Err(Unreachable::Resolving { via, ifname })
            }
        }
    }

    fn route(
        &mut self,
        remote: IpAddr,
        local: Option<IpAddr>,
    ) -> Result<(u32, Option<IpAddr>, Option<IpAddr>), Unreachable> {
        let mut m = RouteMessage::default();
        m.header.address_family = family(remote);
        m.header.destination_prefix_length = if remote.is_ipv4() { 32 } else { 128 };
        m.attributes
            .push(RouteAttribute::Destination(remote.into()));
        if let Some(l) = local {
            m.header.source_prefix_length = if l.is_ipv4() { 32 } else { 128 };
            m.attributes.push(RouteAttribute::Source(l.into()));
        }
        let replies = self
            .request(RouteNetlinkMessage::GetRoute(m), false)
            .map_err(|e| match e {
                Asked::Kernel(code) => {
                    Unreachable::NoRoute(io::Error::from_raw_os_error(code).to_string())
                }
                Asked::Io(e) => Unreachable::Netlink(e),
            })?;
        let route = replies
            .into_iter()
            .find_map(|r| match r {
                RouteNetlinkMessage::NewRoute(r) => Some(r),
                _ => None,
            })
            .ok_or(Unreachable::NoRoute("no answer".into()))?;
        let (mut oif, mut src, mut gw) = (None, None, None);
        for a in route.attributes {
            match a {
                RouteAttribute::Oif(i) => oif = Some(i),
                RouteAttribute::PrefSource(a) => src = ip(&a),
                RouteAttribute::Gateway(a) => gw = ip(&a),
                _ => {}
            }
        }
        let oif = oif.ok_or(Unreachable::Incomplete("output interface"))?;
        Ok((oif, src, gw))
    }

    fn link(&mut self, index: u32) -> Result<(String, [u8; 6]), Unreachable> {
        let mut m = LinkMessage::default();
        m.header.index = index;
        let replies = self
            .request(RouteNetlinkMessage::GetLink(m), false)
            .map_err(Asked::into_unreachable)?;
        let (mut name, mut mac) = (None, None);
        for r in replies {
            if let RouteNetlinkMessage::NewLink(l) = r {
                for a in l.attributes {
                    match a {
                        LinkAttribute::IfName(n) => name = Some(n),
                        LinkAttribute::Address(a) if a.len() == 6 => {
                            mac = Some(<[u8; 6]>::try_from(&a[..]).unwrap())
                        }
                        _ => {}
                    }
                }
            }
        }
        match (name, mac) {
            (Some(n), Some(m)) => Ok((n, m)),
            _ => Err(Unreachable::Incomplete("Ethernet output interface")),
        }
    }

    /// The neighbour entry for `via` on `ifindex`: a usable MAC, a failed resolution, or none.
    fn neighbour(
        &mut self,
        ifindex: u32,
        via: IpAddr,
    ) -> Result<Option<Result<[u8; 6], ()>>, Unreachable> {
        let mut m = NeighbourMessage::default();
        m.header.family = family(via);
        m.header.ifindex = ifindex;
        let replies = self
            .request(RouteNetlinkMessage::GetNeighbour(m), true)
            .map_err(Asked::into_unreachable)?;
        for r in replies {
            let RouteNetlinkMessage::NewNeighbour(n) = r else {
                continue;
            };
            if n.header.ifindex != ifindex {
                continue;
            }
            let (mut dst, mut mac) = (None, None);
            for a in &n.attributes {
                match a {
                    NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => {
                        dst = Some(IpAddr::V4(*a))
                    }
                    NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                        dst = Some(IpAddr::V6(*a))
                    }
                    NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => {
                        mac = Some(<[u8; 6]>::try_from(&l[..]).unwrap())
                    }
                    _ => {}
                }
            }
            if dst != Some(via) {
                continue;
            }
            return Ok(match (n.header.state, mac) {
                (NeighbourState::Failed, _) => Some(Err(())),
                (NeighbourState::Incomplete | NeighbourState::None, _) | (_, None) => None,
                (_, Some(mac)) => Some(Ok(mac)),
            });
        }
        Ok(None)
    }

    /// Sends one request and collects its answers (a dump's parts, or one reply).
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        dump: bool,
    ) -> Result<Vec<RouteNetlinkMessage>, Asked> {
        self.seq = self.seq.wrapping_add(1);
        let mut hdr = NetlinkHeader::default();
        hdr.flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { 0 };
        hdr.sequence_number = self.seq;
        let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
        req.finalize();
        let mut out = vec![0; req.header.length as usize];
        req.serialize(&mut out[..]);
        self.sock
            .send(&out, 0)
            .map_err(|e| Asked::Io(e.to_string()))?;
        let mut answers = Vec::new();
        loop {
            let n = self
                .sock
                .recv(&mut &mut self.buf[..], 0)
                .map_err(|e| Asked::Io(e.to_string()))?;
            let mut off = 0;
            while off < n {
                let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[off..n])
                    .map_err(|e| Asked::Io(e.to_string()))?;
                let len = m.header.length as usize;
                if m.header.sequence_number == self.seq {
                    match m.payload {
                        NetlinkPayload::Done(_) => return Ok(answers),
                        NetlinkPayload::Error(e) => match e.code {
                            Some(c) => return Err(Asked::Kernel(-c.get())),
                            None => return Ok(answers),
                        },
                        NetlinkPayload::InnerMessage(inner) => {
                            answers.push(inner);
                            if !dump {
                                return Ok(answers);
                            }
                        }
                        _ => {}
                    }
                }
                if len == 0 {
                    break;
                }
                off += len;
            }
        }
    }
}

/// How a request failed: the kernel's errno, or the socket.
enum Asked {
    Kernel(i32),
    Io(String),
}

impl Asked {
    fn into_unreachable(self) -> Unreachable {
        match self {
            Asked::Kernel(c) => Unreachable::Netlink(io::Error::from_raw_os_error(c).to_string()),
            Asked::Io(e) => Unreachable::Netlink(e),
        }
    }
}

fn family(a: IpAddr) -> AddressFamily {
    if a.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

fn ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

/// Makes the kernel resolve `via` on `ifname`: one empty datagram to the discard port through
/// that interface (it stays queued until the neighbour answers, then goes; the discard
/// service, if any, ignores it). Best effort: a failure shows as the entry staying
/// unresolved.
fn poke(ifname: &str, via: IpAddr) {
    let bind: SocketAddr = if via.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    if let Ok(s) = UdpSocket::bind(bind) {
        bind_to_device(&s, ifname);
        let _ = s.send_to(&[], SocketAddr::new(via, 9));
    }
}

fn bind_to_device(s: &UdpSocket, ifname: &str) {
    use std::os::fd::AsRawFd;
    let name = ifname.as_bytes();
    // SAFETY: the pointer and length describe `name`, which outlives the call.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        );
    }
}
