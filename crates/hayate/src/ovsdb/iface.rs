//! An Interface row's `type` and `options` as a Hayate port spec (`crates/port/src/spec.rs`),
//! or the text for its `error` column.
//!
//! | type | port |
//! |---|---|
//! | `""`, `system` | `afpacket:NAME` (or `afxdp:NAME` with `other_config:hayate-system-ports=afxdp`) |
//! | `afxdp` | `afxdp:NAME` |
//! | `internal`, `tap` | `tap:NAME` (a TAP device of that name) |
//! | `dpdkvhostuserclient` | `vhostuser:PATH,mode=client` (`options:vhost-server-path`) |
//! | `dpdkvhostuser` | `vhostuser:DIR/NAME,mode=server` (DIR: `other_config:vhost-sock-dir`) |
//! | `patch` | one end of an in-memory ring shared with `options:peer` |
//! | `vxlan`, `geneve` | a tunnel port `vxlan:OPTIONS` / `geneve:OPTIONS` (`crate::tunnels`): Open vSwitch's options `remote_ip` (an address or `flow`), `local_ip`, `key` (a VNI or `flow`; `in_key`/`out_key` alike), `dst_port`, `csum`, `df_default`, `tos`, `ttl`, and Hayate's `underlay` (the bridge port it leaves by) |

use std::collections::BTreeMap;
use std::path::Path;

/// The interface types this switch takes (written to `Open_vSwitch:iface_types`).
pub const IFACE_TYPES: &[&str] = &[
    "afxdp",
    "dpdkvhostuser",
    "dpdkvhostuserclient",
    "internal",
    "patch",
    "geneve",
    "system",
    "tap",
    "vxlan",
];

/// The options of a `vxlan` / `geneve` Interface a tunnel spec takes.
const TUNNEL_OPTIONS: &[&str] = &[
    "remote_ip",
    "local_ip",
    "key",
    "in_key",
    "out_key",
    "dst_port",
    "csum",
    "df_default",
    "tos",
    "ttl",
    "underlay",
];

/// Settings of the whole switch that decide a spec.
#[derive(Debug, Clone)]
pub struct Context {
    /// Backend of `system` interfaces: `afpacket` or `afxdp`.
    pub system: String,
    /// Folder of `dpdkvhostuser` sockets.
    pub sock_dir: String,
    /// Whether a kernel interface exists (the real check, or a stand-in in tests).
    pub exists: fn(&str) -> bool,
}

/// Whether kernel interface `name` exists.
pub fn kernel_has(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// The ring name a patch port and its peer share (the same from either end).
pub fn patch_ring(name: &str, peer: &str) -> String {
    let (a, b) = if name < peer {
        (name, peer)
    } else {
        (peer, name)
    };
    format!("patch:{a}:{b}")
}

/// The port spec of interface `name` of `kind` with `options`, or the error to report.
pub fn spec(
    name: &str,
    kind: &str,
    options: &BTreeMap<String, String>,
    cx: &Context,
) -> Result<String, String> {
    let kernel = |backend: &str| {
        if (cx.exists)(name) {
            Ok(format!("{backend}:{name}"))
        } else {
            Err(format!(
                "could not open network device {name} (No such device)"
            ))
        }
    };
    let no_comma = |what: &str, v: &str| {
        if v.contains(',') {
            Err(format!(
                "{what} '{v}' contains a comma, which a port spec cannot hold"
            ))
        } else {
            Ok(())
        }
    };
    no_comma("interface name", name)?;
    match kind {
        "" | "system" => kernel(&cx.system),
        "afxdp" => kernel("afxdp"),
        "internal" | "tap" => Ok(format!("tap:{name}")),
        "dpdkvhostuserclient" => match options.get("vhost-server-path") {
            Some(p) if !p.is_empty() => {
                no_comma("vhost-server-path", p)?;
                Ok(format!("vhostuser:{p},mode=client,name={name}"))
            }
            _ => Err(format!(
                "dpdkvhostuserclient interface {name} needs options:vhost-server-path=PATH"
            )),
        },
        "dpdkvhostuser" => {
            no_comma("vhost-sock-dir", &cx.sock_dir)?;
            Ok(format!(
                "vhostuser:{}/{name},mode=server,name={name}",
                cx.sock_dir.trim_end_matches('/')
            ))
        }
        "patch" => match options.get("peer") {
            Some(peer) if !peer.is_empty() && peer != name => {
                Ok(format!("ring:{}", patch_ring(name, peer)))
            }
            _ => Err(format!(
                "patch interface {name} needs options:peer=NAME (another patch interface)"
            )),
        },
        "vxlan" | "geneve" => tunnel(name, kind, options),
        other => Err(format!(
            "interface {name}: type '{other}' is not supported by Hayate; supported: {}",
            IFACE_TYPES.join(", ")
        )),
    }
}

/// The spec of tunnel interface `name` (`vxlan` or `geneve`) with Open vSwitch's `options`.
fn tunnel(name: &str, kind: &str, options: &BTreeMap<String, String>) -> Result<String, String> {
    if !options.contains_key("remote_ip") {
        return Err(format!(
            "{kind} interface {name} needs options:remote_ip=ADDRESS (or remote_ip=flow)"
        ));
    }
    let mut parts = Vec::new();
    for (k, v) in options {
        if !TUNNEL_OPTIONS.contains(&k.as_str()) {
            return Err(format!(
                "{kind} interface {name}: option {k} is not supported by Hayate; supported: {}",
                TUNNEL_OPTIONS.join(", ")
            ));
        }
        if v.contains(',') || v.contains('=') {
            return Err(format!(
                "{kind} interface {name}: options:{k}='{v}' cannot hold ',' or '='"
            ));
        }
        parts.push(format!("{k}={v}"));
    }
    let spec = format!("{kind}:{}", parts.join(","));
    match crate::tunnels::parse(&spec) {
        Some(Ok(_)) => Ok(spec),
        Some(Err(e)) => Err(format!("{kind} interface {name}: {e}")),
        None => Err(format!("internal: {spec} is not a tunnel spec")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx() -> Context {
        Context {
            system: "afpacket".into(),
            sock_dir: "/run/hayate/".into(),
            exists: |n| n.starts_with("veth"),
        }
    }

    fn opts(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_type() {
        let none = opts(&[]);
        assert_eq!(spec("veth1", "", &none, &cx()).unwrap(), "afpacket:veth1");
        assert_eq!(
            spec("veth1", "system", &none, &cx()).unwrap(),
            "afpacket:veth1"
        );
        let xdp = Context {
            system: "afxdp".into(),
            ..cx()
        };
        assert_eq!(spec("veth1", "", &none, &xdp).unwrap(), "afxdp:veth1");
        assert_eq!(spec("veth1", "afxdp", &none, &cx()).unwrap(), "afxdp:veth1");
        assert!(spec("eth9", "", &none, &cx())
            .unwrap_err()
            .contains("No such device"));
        assert_eq!(spec("br0", "internal", &none, &cx()).unwrap(), "tap:br0");
        assert_eq!(spec("t1", "tap", &none, &cx()).unwrap(), "tap:t1");
        assert_eq!(
            spec(
                "vhu1",
                "dpdkvhostuserclient",
                &opts(&[("vhost-server-path", "/tmp/v1.sock")]),
                &cx()
            )
            .unwrap(),
            "vhostuser:/tmp/v1.sock,mode=client,name=vhu1"
        );
        assert!(spec("vhu1", "dpdkvhostuserclient", &none, &cx())
            .unwrap_err()
            .contains("vhost-server-path"));
        assert_eq!(
            spec("vhu2", "dpdkvhostuser", &none, &cx()).unwrap(),
            "vhostuser:/run/hayate/vhu2,mode=server,name=vhu2"
        );
        let a = spec("p0", "patch", &opts(&[("peer", "p1")]), &cx()).unwrap();
        let b = spec("p1", "patch", &opts(&[("peer", "p0")]), &cx()).unwrap();
        assert_eq!(a, b, "both ends name one ring");
        assert!(spec("p0", "patch", &none, &cx()).is_err());
        assert!(spec("v0", "vxlan", &none, &cx())
            .unwrap_err()
            .contains("options:remote_ip"));
        assert!(spec("v0", "stt", &none, &cx())
            .unwrap_err()
            .contains("not supported"));
        let vx = opts(&[("remote_ip", "192.0.2.2"), ("key", "42"), ("csum", "true")]);
        assert_eq!(
            spec("vx1", "vxlan", &vx, &cx()).unwrap(),
            "vxlan:csum=true,key=42,remote_ip=192.0.2.2"
        );
        let flow = opts(&[
            ("remote_ip", "flow"),
            ("key", "flow"),
            ("local_ip", "192.0.2.1"),
        ]);
        assert_eq!(
            spec("g1", "geneve", &flow, &cx()).unwrap(),
            "geneve:key=flow,local_ip=192.0.2.1,remote_ip=flow"
        );
        let bad = opts(&[("remote_ip", "192.0.2.2"), ("key", "99999999")]);
        assert!(spec("vx2", "vxlan", &bad, &cx())
            .unwrap_err()
            .contains("key"));
        let odd = opts(&[("remote_ip", "192.0.2.2"), ("egress_pkt_mark", "1")]);
        assert!(spec("vx3", "vxlan", &odd, &cx())
            .unwrap_err()
            .contains("egress_pkt_mark is not supported"));
        assert!(spec("a,b", "tap", &none, &cx()).is_err());
    }
}
