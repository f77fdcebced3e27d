//! Interface facts the AF_XDP port checks before it opens anything (index, queue count), the
//! socket options xdpilone leaves out (`XDP_OPTIONS`, `XDP_STATISTICS`), and errno → advice.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SOL_XDP` (not in every libc).
const SOL_XDP: libc::c_int = 283;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// What the fix is when the kernel refuses for lack of privilege.
pub(crate) const NEED_CAPS: &str = "AF_XDP needs CAP_NET_ADMIN and CAP_BPF; run as root";

/// The interface's index in the calling thread's network namespace, or an error naming it.
pub(crate) fn ifindex(name: &str) -> Result<u32, String> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
        return Err(format!(
            "'{name}' is not an interface name (1 to {} characters, no '/', space or NUL)",
            libc::IFNAMSIZ - 1
        ));
    }
    let c = CString::new(name).map_err(|_| format!("'{name}' contains NUL"))?;
    // SAFETY: `c` is a valid C string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(format!(
            "no interface named '{name}' in this network namespace (see `ip link show`)"
        ));
    }
    Ok(index)
}

#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Receive queues usable by AF_XDP (`ethtool -l`: combined + rx channels), or `None` when the
/// driver does not report channels (then the bind itself is the check).
pub(crate) fn rx_channels(name: &str) -> Option<u32> {
    // SAFETY: plain socket call, checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: (&mut ch as *mut EthtoolChannels).cast(),
        _pad: [0; 16],
    };
    for (d, s) in req
        .name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq whose data points at a live ethtool_channels.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    if r != 0 {
        return None;
    }
    let n = ch.combined_count + ch.rx_count;
    (n > 0).then_some(n)
}

/// Whether the bound socket `fd` runs in zero-copy mode (`XDP_OPTIONS`).
pub(crate) fn is_zero_copy(fd: libc::c_int) -> bool {
    let mut flags = 0u32;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: `flags` is writable for `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            SOL_XDP,
            XDP_OPTIONS,
            (&mut flags as *mut u32).cast(),
            &mut len,
        )
    };
    r == 0 && flags & XDP_OPTIONS_ZEROCOPY != 0
}

/// The kernel's counters of one AF_XDP socket (`struct xdp_statistics`, v2 layout).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct XskStats {
    /// Frames dropped for reasons other than a full ring or no buffer.
    pub(crate) rx_dropped: u64,
    /// Invalid descriptors on receive.
    pub(crate) rx_invalid_descs: u64,
    /// Invalid descriptors on transmit.
    pub(crate) tx_invalid_descs: u64,
    /// Frames dropped because the rx ring was full.
    pub(crate) rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub(crate) rx_fill_ring_empty_descs: u64,
    /// Times the tx ring was empty when the kernel looked.
    pub(crate) tx_ring_empty_descs: u64,
}

/// The kernel's counters for socket `fd` (zeros when it cannot tell).
pub(crate) fn xsk_stats(fd: libc::c_int) -> XskStats {
    let mut s = XskStats::default();
    let mut len = std::mem::size_of::<XskStats>() as libc::socklen_t;
    // SAFETY: `s` is writable for `len` bytes; older kernels fill a prefix and say so in len.
    let r = unsafe {
        libc::getsockopt(
            fd,
            SOL_XDP,
            XDP_STATISTICS,
            (&mut s as *mut XskStats).cast(),
            &mut len,
        )
    };
    if r == 0 {
        s
    } else {
        XskStats::default()
    }
}

/// Advice for an errno from setting up the socket or the program: the cause and the fix.
pub(crate) fn advice(what: &str, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!("{what}: {err}; {NEED_CAPS}"),
        Some(libc::EAFNOSUPPORT) => format!(
            "{what}: {err}; this kernel has no AF_XDP sockets (needs Linux 5.x with \
             CONFIG_XDP_SOCKETS)"
        ),
        Some(libc::ENOMEM) | Some(libc::ENOBUFS) => format!(
            "{what}: {err}; the packet pool could not be pinned as UMEM: raise the locked-memory \
             limit (ulimit -l unlimited) or run as root"
        ),
        Some(libc::EBUSY) => format!(
            "{what}: {err}; another AF_XDP socket already uses this queue (another switch or \
             program on the interface): stop it first"
        ),
        _ => format!("{what}: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_with_the_rule() {
        assert!(ifindex("").unwrap_err().contains("not an interface name"));
        assert!(ifindex("a/b")
            .unwrap_err()
            .contains("not an interface name"));
        assert!(ifindex("abcdefghijklmnopq")
            .unwrap_err()
            .contains("1 to 15 characters"));
        assert!(ifindex("hyNoSuchIf0")
            .unwrap_err()
            .contains("no interface named 'hyNoSuchIf0'"));
        assert_eq!(ifindex("lo"), Ok(1));
    }

    #[test]
    fn permission_errors_name_the_capabilities() {
        let e = io::Error::from_raw_os_error(libc::EPERM);
        assert!(advice("loading the XDP program", &e).contains(NEED_CAPS));
    }

    #[test]
    fn stats_layout_is_the_kernels() {
        assert_eq!(std::mem::size_of::<XskStats>(), 48);
        assert_eq!(std::mem::size_of::<EthtoolChannels>(), 36);
    }
}
