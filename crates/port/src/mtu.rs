//! Whether a kernel interface's MTU fits what a port can receive: a frame of MTU bytes of
//! payload plus an Ethernet header and one VLAN tag must fit the port's largest frame
//! ([`crate::Capabilities::max_frame`], set by the pool's frame size). When it does not, the
//! switch warns at start and at add-port (frames longer than a pool frame cannot be received
//! whole).

/// Ethernet header and one 802.1Q tag: what a frame carries beyond its MTU.
pub const L2_OVERHEAD: u32 = 14 + 4;

/// The kernel interface a port spec opens (`afpacket:`, `afxdp:`, `tap:`), if any.
pub fn interface(spec: &str) -> Option<&str> {
    let (kind, rest) = spec.split_once(':')?;
    match kind {
        "afpacket" | "afxdp" | "tap" => {
            let name = rest.split(',').next()?;
            (!name.is_empty() && !name.contains('=')).then_some(name)
        }
        _ => None,
    }
}

/// The MTU of interface `ifname` in this network namespace (`None` when it cannot be read).
pub fn mtu(ifname: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The warning for a port opened from `spec` whose largest frame is `max_frame` bytes, when
/// its interface's MTU does not fit.
pub fn check(spec: &str, max_frame: u32) -> Option<String> {
    let ifname = interface(spec)?;
    warning(ifname, mtu(ifname)?, max_frame)
}

/// The warning for interface `ifname` with `mtu`, received into frames of `max_frame` bytes.
pub fn warning(ifname: &str, mtu: u32, max_frame: u32) -> Option<String> {
    let frame = mtu.saturating_add(L2_OVERHEAD);
    if frame <= max_frame {
        return None;
    }
    Some(format!(
        "interface {ifname} has MTU {mtu} (frames up to {frame} bytes with a VLAN tag) but a \
         pool frame holds {max_frame}: longer frames cannot be received whole and are dropped; \
         lower its MTU to {} (ip link set {ifname} mtu {}) or give hayate run a larger \
         --frame-size (4096, 8192 or 16384; AF_PACKET and TAP ports)",
        max_frame.saturating_sub(L2_OVERHEAD),
        max_frame.saturating_sub(L2_OVERHEAD),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_ports_name_their_interface() {
        assert_eq!(interface("afpacket:veth0,queues=2"), Some("veth0"));
        assert_eq!(interface("afxdp:eth1"), Some("eth1"));
        assert_eq!(interface("tap:tap3"), Some("tap3"));
        assert_eq!(interface("ring:x"), None);
        assert_eq!(interface("vhostuser:/tmp/vm.sock"), None);
        assert_eq!(interface("pcap:in=x.pcap"), None);
    }

    #[test]
    fn an_mtu_that_does_not_fit_a_frame_is_named_with_the_fix() {
        assert_eq!(warning("veth0", 1500, 1920), None);
        assert_eq!(warning("veth0", 1902, 1920), None, "1902 + 18 fits exactly");
        let w = warning("veth0", 9000, 1920).expect("9000 does not fit 1920");
        assert!(w.contains("interface veth0 has MTU 9000"), "{w}");
        assert!(w.contains("mtu 1902") && w.contains("--frame-size"), "{w}");
        assert_eq!(warning("veth0", 9000, 16256), None);
    }
}
