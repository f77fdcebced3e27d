//! The two rtnetlink requests the AF_XDP port needs beyond what `aya` offers: which XDP
//! program an interface has now (and how it is attached), and detaching a program that was
//! attached the old way (through netlink, not a bpf_link), which a killed switch can leave
//! behind.
//!
//! Control path only: each call opens a netlink socket, sends one request and reads one answer.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NLMSG_HDR: usize = 16;
const IFINFO: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const RTM_NEWLINK: u16 = 16;
const IFLA_XDP: u16 = 43;
const NLA_F_NESTED: u16 = 1 << 15;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;

/// `XDP_FLAGS_SKB_MODE`: generic XDP, run by the kernel's network stack for any driver.
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP, run by the driver.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// How an XDP program is attached to an interface (`IFLA_XDP_ATTACHED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attached {
    /// By the driver (native mode).
    Native,
    /// By the network stack (generic / skb mode).
    Skb,
    /// Offloaded to the NIC.
    Hardware,
    /// More than one mode at once.
    Multi,
}

/// The XDP program an interface has: its id and how it is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct XdpState {
    /// Program id (as `bpftool prog show id N` names it).
    pub(crate) prog_id: u32,
    /// Attach mode.
    pub(crate) mode: Attached,
}

impl XdpState {
    /// The attach flags that name this mode when detaching.
    pub(crate) fn flags(&self) -> u32 {
        match self.mode {
            Attached::Native => XDP_FLAGS_DRV_MODE,
            Attached::Skb => XDP_FLAGS_SKB_MODE,
            Attached::Hardware | Attached::Multi => 0,
        }
    }
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket call, checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A request: netlink header + ifinfomsg for `ifindex` + attributes.
fn request(kind: u16, flags: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDR + IFINFO + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(flags | NLM_F_REQUEST).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    m.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]); // family, pad, type
    m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // flags
    m.extend_from_slice(&0u32.to_ne_bytes()); // change mask
    m.extend_from_slice(attrs);
    m
}

/// One attribute (header + value + padding to 4 bytes).
fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = 4 + value.len();
    let mut a = Vec::with_capacity(len.next_multiple_of(4));
    a.extend_from_slice(&(len as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(value);
    a.resize(len.next_multiple_of(4), 0);
    a
}

/// Sends `msg` and returns the first answer message (type, payload after the header).
fn exchange(msg: &[u8]) -> io::Result<(u16, Vec<u8>)> {
    let sock = socket()?;
    // SAFETY: `msg` is a valid buffer of `msg.len()` bytes; the zeroed sockaddr_nl addresses
    // the kernel.
    let sent = unsafe {
        let mut to: libc::sockaddr_nl = std::mem::zeroed();
        to.nl_family = libc::AF_NETLINK as u16;
        libc::sendto(
            sock.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&to as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 32 * 1024];
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    if n < NLMSG_HDR {
        return Err(io::Error::other("short netlink answer"));
    }
    let len = (u32::from_ne_bytes(buf[0..4].try_into().expect("4 bytes")) as usize).min(n);
    let kind = u16::from_ne_bytes(buf[4..6].try_into().expect("2 bytes"));
    Ok((kind, buf[NLMSG_HDR..len.max(NLMSG_HDR)].to_vec()))
}

/// The errno of an NLMSG_ERROR payload (0 = success, an acknowledgement).
fn ack(payload: &[u8]) -> io::Result<()> {
    let code = payload
        .get(0..4)
        .map(|b| i32::from_ne_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| io::Error::other("short netlink error message"))?;
    if code == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(-code))
    }
}

/// Walks the attributes in `data`, calling `f(kind, value)` for each.
fn attrs(mut data: &[u8], mut f: impl FnMut(u16, &[u8])) {
    while data.len() >= 4 {
        let len = u16::from_ne_bytes([data[0], data[1]]) as usize;
        let kind = u16::from_ne_bytes([data[2], data[3]]) & !NLA_F_NESTED;
        if len < 4 || len > data.len() {
            return;
        }
        f(kind, &data[4..len]);
        data = &data[len.next_multiple_of(4).min(data.len())..];
    }
}

/// The XDP program attached to interface `ifindex` now, if any.
pub(crate) fn xdp_state(ifindex: u32) -> io::Result<Option<XdpState>> {
    let (kind, payload) = exchange(&request(RTM_GETLINK, 0, ifindex, &[]))?;
    if kind == NLMSG_ERROR {
        ack(&payload)?;
        return Err(io::Error::other(
            "netlink answered RTM_GETLINK with no link",
        ));
    }
    if kind != RTM_NEWLINK || payload.len() < IFINFO {
        return Err(io::Error::other(format!(
            "netlink answered RTM_GETLINK with message type {kind}"
        )));
    }
    let mut mode = 0u8;
    let mut prog_id = 0u32;
    attrs(&payload[IFINFO..], |kind, value| {
        if kind == IFLA_XDP {
            attrs(value, |kind, value| match kind {
                IFLA_XDP_ATTACHED if !value.is_empty() => mode = value[0],
                IFLA_XDP_PROG_ID if value.len() >= 4 => {
                    prog_id = u32::from_ne_bytes(value[..4].try_into().expect("4 bytes"))
                }
                _ => {}
            })
        }
    });
    let mode = match mode {
        0 => return Ok(None),
        1 => Attached::Native,
        2 => Attached::Skb,
        3 => Attached::Hardware,
        _ => Attached::Multi,
    };
    Ok(Some(XdpState { prog_id, mode }))
}

/// Sets the interface's XDP program the old way: `prog_fd` -1 detaches. `flags` names the
/// mode (`XDP_FLAGS_*`). Fails with EBUSY when the attached program is held by a bpf_link
/// (a link can only be detached by closing it).
pub(crate) fn set_xdp_fd(ifindex: u32, prog_fd: i32, flags: u32) -> io::Result<()> {
    let mut nested = attr(IFLA_XDP_FD, &prog_fd.to_ne_bytes());
    nested.extend_from_slice(&attr(IFLA_XDP_FLAGS, &flags.to_ne_bytes()));
    let xdp = attr(IFLA_XDP | NLA_F_NESTED, &nested);
    let (kind, payload) = exchange(&request(RTM_SETLINK, NLM_F_ACK, ifindex, &xdp))?;
    if kind != NLMSG_ERROR {
        return Err(io::Error::other(format!(
            "netlink answered RTM_SETLINK with message type {kind}"
        )));
    }
    ack(&payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bytes_are_a_well_formed_setlink() {
        let a = attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
        assert_eq!(a.len(), 8);
        assert_eq!(&a[..4], &[8, 0, 1, 0]);
        let m = request(RTM_SETLINK, NLM_F_ACK, 7, &a);
        assert_eq!(m.len(), 16 + 16 + 8);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 40);
        assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), RTM_SETLINK);
        assert_eq!(u16::from_ne_bytes(m[6..8].try_into().unwrap()), 5);
        assert_eq!(i32::from_ne_bytes(m[20..24].try_into().unwrap()), 7);
    }

    #[test]
    fn attribute_walk_handles_padding_and_stops_on_garbage() {
        let mut data = attr(IFLA_XDP_ATTACHED, &[2]);
        data.extend_from_slice(&attr(IFLA_XDP_PROG_ID, &42u32.to_ne_bytes()));
        data.extend_from_slice(&[0xff, 0xff, 1, 0]); // length past the end
        let mut seen = Vec::new();
        attrs(&data, |k, v| seen.push((k, v.to_vec())));
        assert_eq!(
            seen,
            vec![
                (IFLA_XDP_ATTACHED, vec![2]),
                (IFLA_XDP_PROG_ID, 42u32.to_ne_bytes().to_vec())
            ]
        );
    }

    #[test]
    fn loopback_has_no_xdp_program_or_says_why() {
        // Interface 1 is loopback in every namespace.
        match xdp_state(1) {
            Ok(state) => assert_eq!(state, None),
            Err(e) => panic!("RTM_GETLINK on lo failed: {e}"),
        }
    }
}
