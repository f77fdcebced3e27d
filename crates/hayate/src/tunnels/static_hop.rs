//! A tunnel's next hop given in its spec instead of asked of the kernel:
//! `nexthop_mac=MAC[,local_mac=MAC]` (with `local=IP` and `underlay=PORT`). For underlays the
//! host's routing and neighbour tables do not know (an in-memory port in `hayate bench`, a
//! DPDK or vhost-user underlay), and for fixed point-to-point underlays where the peer's MAC is
//! known. Such a tunnel is never re-resolved.

use std::net::IpAddr;

use tunnel::NextHop;

/// The next hop of a tunnel port, as its spec gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticHop {
    /// The next hop's MAC (the remote's on a shared segment, else the gateway's).
    pub dst_mac: [u8; 6],
    /// The outer source MAC; `None`: the underlay interface's own (read from the kernel).
    pub src_mac: Option<[u8; 6]>,
}

fn mac(key: &str, v: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = v.split(':').collect();
    let bytes: Vec<u8> = parts
        .iter()
        .filter_map(|p| {
            (p.len() == 2)
                .then(|| u8::from_str_radix(p, 16).ok())
                .flatten()
        })
        .collect();
    <[u8; 6]>::try_from(bytes).map_err(|_| {
        format!("{key}={v} is not a MAC address; write six hex pairs, e.g. {key}=02:00:00:00:00:02")
    })
}

/// Takes `nexthop_mac=` and `local_mac=` out of a tunnel port's options (the text after
/// `vxlan:` / `geneve:`): the other options, and the static next hop if one was given.
pub fn split(opts: &str) -> Result<(String, Option<StaticHop>), String> {
    let (mut dst, mut src) = (None, None);
    let mut rest = Vec::new();
    for o in opts.split(',') {
        if let Some(v) = o.strip_prefix("nexthop_mac=") {
            dst = Some(mac("nexthop_mac", v)?);
        } else if let Some(v) = o.strip_prefix("local_mac=") {
            src = Some(mac("local_mac", v)?);
        } else {
            rest.push(o);
        }
    }
    let hop = match (dst, src) {
        (Some(dst_mac), src_mac) => Some(StaticHop { dst_mac, src_mac }),
        (None, Some(_)) => {
            return Err(
                "local_mac= is only used with a static next hop; add nexthop_mac=MAC (or drop local_mac= to let the kernel resolve it)"
                    .into(),
            )
        }
        (None, None) => None,
    };
    Ok((rest.join(","), hop))
}

/// The MAC address of kernel interface `ifname`, if it has one.
fn mac_of(ifname: &str) -> Option<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address")).ok()?;
    mac("address", text.trim()).ok()
}

impl StaticHop {
    /// The next hop towards `remote` from `local` through the underlay port named `port`,
    /// whose kernel interface is `ifname` (if it has one).
    pub fn next_hop(
        &self,
        remote: IpAddr,
        local: IpAddr,
        port: &str,
        ifname: Option<&str>,
    ) -> Result<NextHop, String> {
        let src_mac = match (self.src_mac, ifname.and_then(mac_of)) {
            (Some(m), _) | (None, Some(m)) => m,
            (None, None) => {
                return Err(format!(
                    "the underlay port {port} has no kernel interface to take a MAC address from; add local_mac=MAC"
                ))
            }
        };
        Ok(NextHop {
            ifindex: 0,
            ifname: ifname.unwrap_or(port).to_string(),
            src: local,
            via: remote,
            src_mac,
            dst_mac: self.dst_mac,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_static_options_come_out_and_the_rest_stays() {
        let (rest, hop) = split(
            "remote=192.0.2.2,nexthop_mac=02:00:00:00:01:02,vni=5,local_mac=02:00:00:00:01:01",
        )
        .unwrap();
        assert_eq!(rest, "remote=192.0.2.2,vni=5");
        let hop = hop.unwrap();
        assert_eq!(hop.dst_mac, [2, 0, 0, 0, 1, 2]);
        assert_eq!(hop.src_mac, Some([2, 0, 0, 0, 1, 1]));
        assert_eq!(split("remote=192.0.2.2").unwrap().1, None);
        let err = split("remote=192.0.2.2,nexthop_mac=02:00:00:00:01").unwrap_err();
        assert!(
            err.contains("nexthop_mac=02:00:00:00:01 is not a MAC"),
            "{err}"
        );
        let err = split("remote=192.0.2.2,local_mac=02:00:00:00:01:01").unwrap_err();
        assert!(err.contains("add nexthop_mac=MAC"), "{err}");
    }

    #[test]
    fn a_static_tunnel_gets_its_outer_headers_without_the_kernel() {
        use crate::tunnels::{conf, Housekeeping, Underlay};
        let spec = "vxlan:remote=192.0.2.2,local=192.0.2.1,vni=42,underlay=up,\
                    nexthop_mac=02:00:00:00:01:02,local_mac=02:00:00:00:01:01";
        let t = conf(3, "vx", spec).unwrap().unwrap();
        let mut hk = Housekeeping::new(vec![t], vec![Underlay::of(2, "up", "null:")]).unwrap();
        let dp = datapath::Tunnels::new();
        assert!(hk.refresh(&dp));
        let out = dp.output(3).expect("outer headers published");
        assert_eq!(out.underlay, 2);
        let h = out.template.header();
        assert_eq!(&h[..12], &[2, 0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 1]);
        assert_eq!(&h[26..34], &[192, 0, 2, 1, 192, 0, 2, 2]);
        // Nothing changed: the next pass publishes nothing.
        assert!(!hk.refresh(&dp));
        // Without local= or underlay= a static hop is refused, naming the fix.
        let err = conf(
            3,
            "vx",
            "vxlan:remote=192.0.2.2,nexthop_mac=02:00:00:00:01:02",
        )
        .unwrap()
        .unwrap_err();
        assert!(err.contains("add local=IP and underlay=PORTNAME"), "{err}");
    }

    #[test]
    fn a_port_without_an_interface_needs_local_mac() {
        let hop = StaticHop {
            dst_mac: [2, 0, 0, 0, 1, 2],
            src_mac: None,
        };
        let (r, l) = ("192.0.2.2".parse().unwrap(), "192.0.2.1".parse().unwrap());
        let err = hop.next_hop(r, l, "null2", None).unwrap_err();
        assert!(err.contains("add local_mac=MAC"), "{err}");
        let hop = StaticHop {
            src_mac: Some([2, 0, 0, 0, 1, 1]),
            ..hop
        };
        let nh = hop.next_hop(r, l, "null2", None).unwrap();
        assert_eq!((nh.src, nh.ifname.as_str()), (l, "null2"));
        assert_eq!(nh.outer(r).src_mac, [2, 0, 0, 0, 1, 1]);
        // The loopback interface has a MAC (all zero): taken when local_mac= is not given.
        let nh = StaticHop {
            src_mac: None,
            ..hop
        }
        .next_hop(r, l, "lo-port", Some("lo"))
        .unwrap();
        assert_eq!(nh.src_mac, [0; 6]);
    }
}
