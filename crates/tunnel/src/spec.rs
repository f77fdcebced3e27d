//! A tunnel port's configuration from its text spec:
//! `vxlan:remote=IP|flow[,local=IP][,vni=N|flow][,dst_port=N][,ttl=N][,tos=N][,df=on|off][,csum=on|off]`
//! and `geneve:` with the same options plus `options=HEX` (TLV-encoded Geneve options sent on
//! every packet). Open vSwitch's option names are accepted too (`remote_ip`, `local_ip`,
//! `key`, `df_default`), so an OVSDB Interface's `options` map reads the same way.

use std::fmt;
use std::net::IpAddr;

use crate::encap::EncapTemplate;
use crate::endpoint::{Encap, OuterAddrs, TunnelKind};

/// A value fixed by the port, or set per flow (`set_field:…->tun_dst`, `set_tunnel:…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerFlow<T> {
    /// The same for every packet.
    Fixed(T),
    /// Taken from the packet's tunnel metadata, as the flow set it.
    Flow,
}

/// A tunnel port as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelSpec {
    /// VXLAN or Geneve.
    pub kind: TunnelKind,
    /// The remote endpoint.
    pub remote: PerFlow<IpAddr>,
    /// The local endpoint (default: the source address the route to the remote picks).
    pub local: Option<IpAddr>,
    /// The tunnel id (default 0).
    pub vni: PerFlow<u32>,
    /// UDP destination port.
    pub dst_port: u16,
    /// Outer TTL / hop limit.
    pub ttl: u8,
    /// Outer TOS / traffic class.
    pub tos: u8,
    /// DF on the outer IPv4 header.
    pub df: bool,
    /// Outer UDP checksum: `None` is the default of the family (off over IPv4, on over IPv6).
    pub csum: Option<bool>,
    /// Geneve options sent with every packet, TLV-encoded.
    pub options: Vec<u8>,
}

/// A spec that cannot be used, with what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

fn err<T>(msg: String) -> Result<T, SpecError> {
    Err(SpecError(msg))
}

impl TunnelSpec {
    /// Parses the options after `vxlan:` or `geneve:` (comma-separated `key=value`).
    pub fn parse(kind: TunnelKind, opts: &str) -> Result<TunnelSpec, SpecError> {
        let pairs = opts
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|kv| {
                kv.split_once('=').ok_or_else(|| {
                    SpecError(format!(
                        "{}: option `{kv}` has no value; write key=value, e.g. remote=192.0.2.1",
                        kind.name()
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_pairs(kind, pairs)
    }

    /// Builds a spec from option pairs (a port spec's, or an OVSDB Interface's `options`).
    pub fn from_pairs<'a>(
        kind: TunnelKind,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<TunnelSpec, SpecError> {
        let k = kind.name();
        let mut s = TunnelSpec {
            kind,
            remote: PerFlow::Flow,
            local: None,
            vni: PerFlow::Fixed(0),
            dst_port: kind.default_port(),
            ttl: 64,
            tos: 0,
            df: true,
            csum: None,
            options: Vec::new(),
        };
        let mut has_remote = false;
        for (key, v) in pairs {
            match key {
                "remote" | "remote_ip" => {
                    has_remote = true;
                    s.remote = if v == "flow" {
                        PerFlow::Flow
                    } else {
                        PerFlow::Fixed(addr(k, key, v)?)
                    };
                }
                "local" | "local_ip" => s.local = Some(addr(k, key, v)?),
                "vni" | "key" | "in_key" | "out_key" => {
                    s.vni = if v == "flow" {
                        PerFlow::Flow
                    } else {
                        match num(v).filter(|n| *n <= 0x00ff_ffff) {
                            Some(n) => PerFlow::Fixed(n as u32),
                            None => {
                                return err(format!(
                                    "{k}: {key}={v} is not a tunnel id; use 0 to 16777215 (24 bits) or `flow`"
                                ))
                            }
                        }
                    };
                }
                "dst_port" => match num(v).filter(|n| (1..=65535).contains(n)) {
                    Some(n) => s.dst_port = n as u16,
                    None => return err(format!("{k}: dst_port={v} is not a UDP port (1 to 65535)")),
                },
                "ttl" => match num(v).filter(|n| (1..=255).contains(n)) {
                    Some(n) => s.ttl = n as u8,
                    None => return err(format!("{k}: ttl={v}: use 1 to 255")),
                },
                "tos" => match num(v).filter(|n| *n <= 255) {
                    Some(n) => s.tos = n as u8,
                    None => return err(format!("{k}: tos={v}: use 0 to 255")),
                },
                "df" | "df_default" => s.df = flag(k, key, v)?,
                "csum" => s.csum = Some(flag(k, key, v)?),
                "options" if kind == TunnelKind::Geneve => s.options = hex(v)?,
                _ => {
                    return err(format!(
                        "{k}: unknown option `{key}`; known: remote, local, vni, dst_port, ttl, tos, df, csum{}",
                        if kind == TunnelKind::Geneve { ", options" } else { "" }
                    ))
                }
            }
        }
        if !has_remote {
            return err(format!(
                "{k}: no remote endpoint; add remote=IP (or remote=flow to set it per flow with set_field:IP->tun_dst)"
            ));
        }
        if let (PerFlow::Fixed(r), Some(l)) = (s.remote, s.local) {
            if r.is_ipv4() != l.is_ipv4() {
                return err(format!(
                    "{k}: remote {r} and local {l} are of different families; use two IPv4 or two IPv6 addresses"
                ));
            }
        }
        // The options must make a valid template; check with placeholder addresses.
        if !s.options.is_empty() {
            let probe = OuterAddrs {
                src_mac: [0; 6],
                dst_mac: [0; 6],
                src: "::".parse().unwrap(),
                dst: "::".parse().unwrap(),
            };
            EncapTemplate::new(&s.encap(0, true), &probe)
                .map_err(|e| SpecError(format!("{k}: options={}: {e}", hexs(&s.options))))?;
        }
        Ok(s)
    }

    /// The encapsulation for tunnel id `vni` over an IPv4 or IPv6 underlay.
    pub fn encap(&self, vni: u32, ipv6: bool) -> Encap {
        Encap {
            kind: self.kind,
            vni,
            dst_port: self.dst_port,
            ttl: self.ttl,
            tos: self.tos,
            df: self.df,
            udp_csum: self.csum.unwrap_or(ipv6),
            options: self.options.clone(),
        }
    }
}

fn addr(kind: &str, key: &str, v: &str) -> Result<IpAddr, SpecError> {
    v.parse().map_err(|_| {
        SpecError(format!(
            "{kind}: {key}={v} is not an IP address; write e.g. {key}=192.0.2.1 or {key}=2001:db8::1"
        ))
    })
}

fn num(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn flag(kind: &str, key: &str, v: &str) -> Result<bool, SpecError> {
    match v {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => err(format!("{kind}: {key}={v}: use on or off")),
    }
}

fn hex(v: &str) -> Result<Vec<u8>, SpecError> {
    let v = v.strip_prefix("0x").unwrap_or(v);
    if !v.len().is_multiple_of(2) || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return err(format!(
            "geneve: options={v} is not hex; write the TLVs as hex digits, e.g. options=0102800100000001"
        ));
    }
    Ok((0..v.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&v[i..i + 2], 16).unwrap())
        .collect())
}

fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(kind: TunnelKind, s: &str) -> Result<TunnelSpec, String> {
        TunnelSpec::parse(kind, s).map_err(|e| e.0)
    }

    #[test]
    fn fixed_and_per_flow() {
        let s = parse(TunnelKind::Vxlan, "remote=192.0.2.2,local=192.0.2.1,vni=42").unwrap();
        assert_eq!(s.remote, PerFlow::Fixed("192.0.2.2".parse().unwrap()));
        assert_eq!(s.local, Some("192.0.2.1".parse().unwrap()));
        assert_eq!(
            (s.vni, s.dst_port, s.ttl, s.df),
            (PerFlow::Fixed(42), 4789, 64, true)
        );
        let e = s.encap(42, false);
        assert!(!e.udp_csum);
        assert!(s.encap(42, true).udp_csum);
        let f = parse(
            TunnelKind::Geneve,
            "remote=flow,vni=flow,dst_port=7000,csum=on",
        )
        .unwrap();
        assert_eq!(
            (f.remote, f.vni, f.dst_port),
            (PerFlow::Flow, PerFlow::Flow, 7000)
        );
        assert!(f.encap(1, false).udp_csum);
    }

    #[test]
    fn open_vswitch_names() {
        let s = parse(
            TunnelKind::Vxlan,
            "remote_ip=2001:db8::2,local_ip=2001:db8::1,key=0x10,df_default=false",
        )
        .unwrap();
        assert_eq!(s.vni, PerFlow::Fixed(16));
        assert!(!s.df);
    }

    #[test]
    fn geneve_options() {
        let s = parse(
            TunnelKind::Geneve,
            "remote=192.0.2.2,options=0102800100000001",
        )
        .unwrap();
        assert_eq!(s.options, vec![1, 2, 0x80, 1, 0, 0, 0, 1]);
    }

    #[test]
    fn errors_name_the_option_and_the_fix() {
        for (kind, spec, says) in [
            (TunnelKind::Vxlan, "vni=1", "add remote=IP"),
            (TunnelKind::Vxlan, "remote=1.2.3", "not an IP address"),
            (
                TunnelKind::Vxlan,
                "remote=flow,vni=16777216",
                "0 to 16777215",
            ),
            (
                TunnelKind::Vxlan,
                "remote=flow,dst_port=0",
                "not a UDP port",
            ),
            (TunnelKind::Vxlan, "remote=flow,ttl=0", "1 to 255"),
            (TunnelKind::Vxlan, "remote=flow,df=maybe", "use on or off"),
            (
                TunnelKind::Vxlan,
                "remote=flow,options=00",
                "unknown option `options`",
            ),
            (
                TunnelKind::Vxlan,
                "remote=flow,colour=red",
                "unknown option `colour`",
            ),
            (TunnelKind::Vxlan, "remote", "has no value"),
            (
                TunnelKind::Vxlan,
                "remote=192.0.2.2,local=2001:db8::1",
                "different families",
            ),
            (TunnelKind::Geneve, "remote=flow,options=xyz", "not hex"),
            (
                TunnelKind::Geneve,
                "remote=flow,options=01028002",
                "Geneve options must be",
            ),
        ] {
            let e = parse(kind, spec).unwrap_err();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }
}
