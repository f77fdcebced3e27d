//! Opening a port from a text spec, as written in configs and on the command line.
//!
//! A spec is `KIND:OPTIONS`, options separated by commas:
//!
//! | spec | port |
//! |---|---|
//! | `ring:NAME[,capacity=N]` | an end of the named in-memory ring (first open end A, second end B; capacity a power of two, default 1024) |
//! | `null:` | endless source of the default 64-byte UDP frame (10.0.0.1 → 10.0.0.2, ports 1024 → 1024), counting sink |
//! | `null:size=128,flows=1000` | frames of 128 bytes over 1000 flows (IPv4 source 10.0.0.1 upwards) |
//! | `null:flows=1000,random` | the same flows in pseudo-random order |
//! | `null:macs=1000` | frames from 1000 source MACs (the template's, last four bytes counting up): new L2 flows |
//! | `null:limit=N` | stop after N packets |
//! | `null:sink` | produces nothing, counts and frees what is sent |
//! | `pcap:in=FILE` / `pcap:out=FILE` / `pcap:in=A,out=B,loops=3` | replay / record captures (loops 0 = forever, default 1) |
//! | `afpacket:IFNAME[,queues=N][,vnet_hdr=on\|off][,rx=mmsg\|ring][,prio=on\|off]` | a kernel interface through AF_PACKET (default 1 queue, vnet_hdr=on, rx=mmsg: `recvmmsg`; rx=ring: TPACKET_V3 ring; prio=on: control frames on the datapath's priority lane, the default with rx=mmsg) |
//! | `tap:NAME[,queues=N][,tunnel_gso=auto\|on\|off]` | a TAP device, created or attached to (default 1 queue); tunnel_gso: take TCP super-packets encapsulated whole in a UDP tunnel where the kernel can (auto, the default; Linux 6.17), or insist (on), or never (off) |
//! | `vhostuser:PATH[,mode=client\|server][,queues=N][,name=NAME]` | a VM's virtio-net device over vhost-user (default: client mode — the VM's QEMU owns the socket, the switch connects and reconnects; 1 queue pair; name: the socket file's stem) |
//! | `afxdp:IFNAME[,queues=N][,mode=auto\|native\|skb][,zerocopy=auto\|on\|off][,prio=on\|off]` | a Linux interface through AF_XDP sockets, queues `0..N` (default 1); prio=on (default): control frames through an AF_PACKET socket to the datapath's priority lane; needs root |
//!
//! File names cannot contain commas.
//!
//! Options that are the datapath's — ingress policing (`ingress_policing_rate=…`) and queue
//! pinning (`rxq_affinity=Q:CORE`) — are not a backend's: [`crate::dp_options::split_spec`]
//! takes them out of a spec before [`open`] sees it.

use std::sync::Arc;

use packet::Pool;

use crate::afpacket::{AfPacketConfig, AfPacketPort, RxMode};
use crate::afxdp::{AfXdpConfig, AfXdpPort, XdpMode, ZeroCopy};
use crate::null::{NullConfig, NullPort, Vary};
use crate::pcap::{PcapConfig, PcapPort};
use crate::ring;
use crate::tap::{TapConfig, TapPort, TunnelGso};
use crate::template::{UdpFrame, IPV4_SRC_OFFSET, MIN_UDP_FRAME};
use crate::vhostuser::{Mode, VhostUserConfig, VhostUserPort};

/// Offset of the source MAC's last four bytes in an Ethernet frame.
const ETH_SRC_TAIL_OFFSET: usize = 8;
use crate::{Port, PortError};

/// The kinds `open` knows.
const KINDS: &str = "ring, null, pcap, afxdp, afpacket, tap, vhostuser";

/// Opens the port `spec` describes (see the [module docs](self)), drawing packets from `pool`.
pub fn open(spec: &str, pool: &Pool) -> Result<Arc<dyn Port>, PortError> {
    let err = |what: String| PortError::new(spec, what);
    let Some((kind, rest)) = spec.split_once(':') else {
        return Err(err(format!(
            "a port spec is KIND:OPTIONS (kinds: {KINDS}), e.g. null: or ring:uplink"
        )));
    };
    match kind {
        "ring" => open_ring(spec, rest, pool),
        "null" => open_null(spec, rest, pool),
        "pcap" => open_pcap(spec, rest, pool),
        "afxdp" => open_afxdp(spec, rest, pool),
        "afpacket" => open_afpacket(spec, rest, pool),
        "tap" => open_tap(spec, rest, pool),
        "vhostuser" => open_vhostuser(spec, rest, pool),
        "vxlan" | "geneve" => Err(err(format!(
            "{kind} ports are tunnel ports of a bridge, given in `hayate run`'s port list \
             (they have no queues of their own and cannot be added at run time yet)"
        ))),
        _ => Err(err(format!(
            "unknown port kind '{kind}'; use one of: {KINDS}"
        ))),
    }
}

/// One `key` or `key=value` option.
struct Opt<'a> {
    key: &'a str,
    value: Option<&'a str>,
}

fn options(rest: &str) -> impl Iterator<Item = Opt<'_>> {
    rest.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once('=') {
            Some((key, value)) => Opt {
                key,
                value: Some(value),
            },
            None => Opt {
                key: s,
                value: None,
            },
        })
}

fn unknown(spec: &str, kind: &str, key: &str, valid: &str) -> PortError {
    PortError::new(
        spec,
        format!("unknown {kind} option '{key}'; valid options: {valid}"),
    )
}

fn value<'a>(spec: &str, opt: &Opt<'a>) -> Result<&'a str, PortError> {
    opt.value.filter(|v| !v.is_empty()).ok_or_else(|| {
        PortError::new(
            spec,
            format!("option '{}' needs a value: {}=VALUE", opt.key, opt.key),
        )
    })
}

fn number<T: std::str::FromStr>(spec: &str, opt: &Opt<'_>) -> Result<T, PortError> {
    let v = value(spec, opt)?;
    v.parse().map_err(|_| {
        PortError::new(
            spec,
            format!("option '{}': '{v}' is not a number in range", opt.key),
        )
    })
}

fn flag(spec: &str, opt: &Opt<'_>) -> Result<(), PortError> {
    match opt.value {
        None => Ok(()),
        Some(_) => Err(PortError::new(
            spec,
            format!(
                "option '{}' takes no value; write just '{}'",
                opt.key, opt.key
            ),
        )),
    }
}

fn open_ring(spec: &str, rest: &str, pool: &Pool) -> Result<Arc<dyn Port>, PortError> {
    let (name, rest) = rest.split_once(',').unwrap_or((rest, ""));
    if name.is_empty() || name.contains('=') {
        return Err(PortError::new(
            spec,
            "a ring spec starts with the ring's name: ring:NAME[,capacity=N]",
        ));
    }
    let mut capacity = ring::DEFAULT_CAPACITY;
    for opt in options(rest) {
        match opt.key {
            "capacity" => capacity = number(spec, &opt)?,
            key => return Err(unknown(spec, "ring", key, "capacity")),
        }
    }
    Ok(ring::open_named(name, capacity, pool)?)
}

fn open_vhostuser(spec: &str, rest: &str, pool: &Pool) -> Result<Arc<dyn Port>, PortError> {
    let (path, rest) = rest.split_once(',').unwrap_or((rest, ""));
    if path.is_empty() || path.contains('=') {
        return Err(PortError::new(
            spec,
            "a vhostuser spec starts with the socket's path: \
             vhostuser:PATH[,mode=client|server][,queues=N][,name=NAME]",
        ));
    }
    let mut cfg = VhostUserConfig::new(path);
    for opt in options(rest) {
        match opt.key {
            "mode" => {
                cfg.mode = match value(spec, &opt)? {
                    "client" => Mode::Client,
                    "server" => Mode::Server,
                    v => {
                        return Err(PortError::new(
                            spec,
                            format!(
                        "mode={v}: give mode=client (the VM's QEMU owns the socket) or mode=server"
                    ),
                        ))
                    }
                }
            }
            "queues" => cfg.queues = number(spec, &opt)?,
            "name" => cfg.name = Some(value(spec, &opt)?.to_string()),
            key => return Err(unknown(spec, "vhostuser", key, "mode, queues, name")),
        }
    }
    Ok(Arc::new(VhostUserPort::open(cfg, pool)?))
}

fn open_null(spec: &str, rest: &str, pool: &Pool) -> Result<Arc<dyn Port>, PortError> {
    let mut frame = UdpFrame::default();
    let mut flows = 1u32;
    let mut macs = 1u32;
    let mut random = false;
    let mut limit = None;
    for opt in options(rest) {
        match opt.key {
            "size" => frame.size = number(spec, &opt)?,
            "flows" => flows = number(spec, &opt)?,
            "macs" => macs = number(spec, &opt)?,
            "limit" => limit = Some(number(spec, &opt)?),
            "random" => {
                flag(spec, &opt)?;
                random = true;
            }
            "sink" => {
                flag(spec, &opt)?;
                limit = Some(0);
            }
            key => {
                return Err(unknown(
                    spec,
                    "null",
                    key,
                    "size, flows, macs, limit, random, sink",
                ))
            }
        }
    }
    let max = pool.max_data();
    if frame.size < MIN_UDP_FRAME || frame.size > max {
        return Err(PortError::new(
            spec,
            format!("size={}: give {MIN_UDP_FRAME} to {max} bytes", frame.size),
        ));
    }
    if flows == 0 {
        return Err(PortError::new(spec, "flows=0: give at least 1 flow"));
    }
    let base = u32::from_be_bytes(frame.src_ip);
    if u64::from(base) + u64::from(flows) - 1 > u64::from(u32::MAX) {
        return Err(PortError::new(
            spec,
            format!("flows={flows}: at most {} flows", u32::MAX - base + 1),
        ));
    }
    if macs == 0 {
        return Err(PortError::new(spec, "macs=0: give at least 1 source MAC"));
    }
    let mut vary = Vec::new();
    if flows > 1 {
        vary.push(Vary {
            offset: IPV4_SRC_OFFSET,
            width: 4,
            base,
            count: flows,
            random,
        });
    }
    if macs > 1 {
        // The source MAC's last four bytes count up from the template's.
        let tail = &frame.src_mac[2..6];
        let mac_base = u32::from_be_bytes([tail[0], tail[1], tail[2], tail[3]]);
        if u64::from(mac_base) + u64::from(macs) - 1 > u64::from(u32::MAX) {
            return Err(PortError::new(spec, format!("macs={macs}: too many")));
        }
        vary.push(Vary {
            offset: ETH_SRC_TAIL_OFFSET,
            width: 4,
            base: mac_base,
            count: macs,
            random,
        });
    }
    let cfg = NullConfig {
        template: frame.build(),
        vary,
        limit,
    };
    Ok(Arc::new(NullPort::new(spec, cfg, pool)?))
}

fn open_pcap(spec: &str, rest: &str, pool: &Pool) -> Result<Arc<dyn Port>, PortError> {
    let mut cfg = PcapConfig {
        loops: 1,
        ..PcapConfig::default()
    };
    for opt in options(rest) {
        match opt.key {
            "in" => cfg.input = Some(value(spec, &opt)?.into()),
            "out" => cfg.output = Some(value(spec, &opt)?.into()),
            "loops" => cfg.loops = number(spec, &opt)?,
            key => return Err(unknown(spec, "pcap", key, "in, out, loops")),
        }
    }
    Ok(Arc::new(PcapPort::new(spec, cfg, pool)?))
}

/// The interface name first, then options: `KIND:NAME[,opt=v...]`.
fn name_first<'a>(spec: &str, rest: &'a str, usage: &str) -> Result<(&'a str, &'a str), PortError> {
    let (name, rest) = rest.split_once(',').unwrap_or((rest, ""));
    if name.is_empty() || name.contains('=') {
        return Err(PortError::new(
            spec,
            format!("the spec starts with the interface name: {usage}"),
        ));
    }
    Ok((name, rest))
}

fn on_off(spec: &str, opt: &Opt<'_>) -> Result<bool, PortError> {
    match value(spec, opt)? {
        "on" => Ok(true),
        "off" => Ok(false),
        v => Err(PortError::new(
            spec,
            format!("option '{}': '{v}' is neither on nor off", opt.key),
        )),
    }
}

fn open_afpacket(spec: &str, rest: &str, pool: &Pool) -> Result<Arc<dyn Port>, PortError> {
    let usage = "afpacket:IFNAME[,queues=N][,vnet_hdr=on|off][,rx=mmsg|ring][,prio=on|off]";
    let (ifname, rest) = name_first(spec, rest, usage)?;
    let mut cfg = AfPacketConfig::new(ifname);
    let mut prio = None;
    for opt in options(rest) {
        match opt.key {
            "queues" => cfg.queues = number(spec, &opt)?,
            "vnet_hdr" => cfg.vnet_hdr = on_off(spec, &opt)?,
            "prio" => prio = Some(on_off(spec, &opt)?),
            "rx" => {
                cfg.rx = match opt.value.unwrap_or("") {
                    "mmsg" => RxMode::Mmsg,
                    "ring" => RxMode::Ring,
                    v => {
                        return Err(PortError::new(
                            spec,
                            format!("option 'rx': '{v}' is neither mmsg nor ring"),
                        ))
                    }
                }
            }
            key => return Err(unknown(spec, "afpacket", key, "queues, vnet_hdr, rx, prio")),
        }
    }
    // Control frames get the priority lane unless asked otherwise; the ring cannot have it.
    cfg.prio = prio.unwrap_or(cfg.rx == RxMode::Mmsg);
    Ok(Arc::new(AfPacketPort::new(spec, cfg, pool)?))
}

fn open_tap(spec: &str, rest: &str, pool: &Pool) -> Result<Arc<dyn Port>, PortError> {
    let usage = "tap:NAME[,queues=N][,tunnel_gso=auto|on|off]";
    let (name, rest) = name_first(spec, rest, usage)?;
    let mut cfg = TapConfig::new(name);
    for opt in options(rest) {
        match opt.key {
            "queues" => cfg.queues = number(spec, &opt)?,
            "tunnel_gso" => {
                cfg.tunnel_gso = match opt.value.unwrap_or("") {
                    "auto" => TunnelGso::Auto,
                    "on" => TunnelGso::On,
                    "off" => TunnelGso::Off,
                    v => {
                        return Err(PortError::new(
                            spec,
                            format!("option 'tunnel_gso': '{v}' is none of auto, on, off"),
                        ))
                    }
                }
            }
            key => return Err(unknown(spec, "tap", key, "queues, tunnel_gso")),
        }
    }
    Ok(Arc::new(TapPort::new(spec, cfg, pool)?))
}

/// Parses `IFNAME[,queues=N][,mode=…][,zerocopy=…][,prio=…]`.
fn afxdp_config(spec: &str, rest: &str) -> Result<AfXdpConfig, PortError> {
    let (name, rest) = rest.split_once(',').unwrap_or((rest, ""));
    if name.is_empty() || name.contains('=') {
        return Err(PortError::new(
            spec,
            "an afxdp spec starts with the interface name: \
             afxdp:IFNAME[,queues=N][,mode=auto|native|skb][,zerocopy=auto|on|off][,prio=on|off]",
        ));
    }
    let mut cfg = AfXdpConfig::new(name);
    for opt in options(rest) {
        match opt.key {
            "queues" => cfg.queues = number(spec, &opt)?,
            "mode" => {
                cfg.mode = match value(spec, &opt)? {
                    "auto" => XdpMode::Auto,
                    "native" | "drv" => XdpMode::Native,
                    "skb" | "generic" => XdpMode::Skb,
                    v => {
                        return Err(PortError::new(
                            spec,
                            format!("mode={v}: give auto, native or skb"),
                        ))
                    }
                }
            }
            "zerocopy" => {
                cfg.zero_copy = match value(spec, &opt)? {
                    "auto" => ZeroCopy::Auto,
                    "on" => ZeroCopy::On,
                    "off" => ZeroCopy::Off,
                    v => {
                        return Err(PortError::new(
                            spec,
                            format!("zerocopy={v}: give auto, on or off"),
                        ))
                    }
                }
            }
            "prio" => cfg.prio = on_off(spec, &opt)?,
            key => return Err(unknown(spec, "afxdp", key, "queues, mode, zerocopy, prio")),
        }
    }
    Ok(cfg)
}

fn open_afxdp(spec: &str, rest: &str, pool: &Pool) -> Result<Arc<dyn Port>, PortError> {
    let cfg = afxdp_config(spec, rest)?;
    Ok(Arc::new(AfXdpPort::open(&cfg, pool)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::Batch;

    fn error(spec: &str) -> String {
        let pool = Pool::with_frames(4);
        match open(spec, &pool) {
            Ok(_) => panic!("{spec} opened"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn default_null_produces_the_default_frame() {
        let pool = Pool::with_frames(64);
        let port = open("null:", &pool).unwrap();
        let mut rx = port.open_rx(0).unwrap();
        let mut batch = Batch::new();
        assert_eq!(rx.recv(&mut batch), 32);
        assert_eq!(batch[7].data(), &UdpFrame::default().build()[..]);
        batch.free_into(&mut pool.cache());
    }

    #[test]
    fn null_macs_vary_the_source_mac_only() {
        let pool = Pool::with_frames(64);
        let port = open("null:macs=3", &pool).unwrap();
        let mut rx = port.open_rx(0).unwrap();
        let mut b = Batch::new();
        assert!(rx.recv(&mut b) >= 4);
        let p = b.as_slice();
        let tail = |i: usize| u32::from_be_bytes(p[i].data()[8..12].try_into().unwrap());
        assert_eq!(tail(1), tail(0) + 1);
        assert_eq!(tail(2), tail(0) + 2);
        assert_eq!(tail(3), tail(0), "three MACs, then again");
        assert_eq!(
            p[0].data()[12..],
            p[1].data()[12..],
            "the rest is the template"
        );
        assert_eq!(p[0].data()[..8], p[1].data()[..8]);
        let mut cache = pool.cache();
        b.free_into(&mut cache);
    }

    #[test]
    fn null_size_and_flows() {
        let pool = Pool::with_frames(64);
        let port = open("null:size=128,flows=3", &pool).unwrap();
        let mut rx = port.open_rx(0).unwrap();
        let mut batch = Batch::new();
        rx.recv(&mut batch);
        assert_eq!(batch[0].len(), 128);
        let src: Vec<[u8; 4]> = batch.as_slice()[..4]
            .iter()
            .map(|p| p.data()[26..30].try_into().unwrap())
            .collect();
        assert_eq!(
            src,
            [[10, 0, 0, 1], [10, 0, 0, 2], [10, 0, 0, 3], [10, 0, 0, 1]]
        );
        batch.free_into(&mut pool.cache());
    }

    #[test]
    fn null_sink_and_limit() {
        let pool = Pool::with_frames(64);
        let mut batch = Batch::new();
        let sink = open("null:sink", &pool).unwrap();
        assert_eq!(sink.open_rx(0).unwrap().recv(&mut batch), 0);
        let limited = open("null:limit=5,flows=10,random", &pool).unwrap();
        assert_eq!(limited.open_rx(0).unwrap().recv(&mut batch), 5);
        batch.free_into(&mut pool.cache());
    }

    #[test]
    fn ring_specs_open_both_ends() {
        let pool = Pool::with_frames(8);
        let a = open("ring:spec-test,capacity=64", &pool).unwrap();
        let b = open("ring:spec-test,capacity=64", &pool).unwrap();
        assert_eq!((a.name(), b.name()), ("spec-test.a", "spec-test.b"));
        assert!(error("ring:spec-test,capacity=64").contains("both ends"));
    }

    #[test]
    fn pcap_spec_writes_and_replays() {
        let dir = std::env::temp_dir().join(format!("hayate-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x.pcap");
        let pool = Pool::with_frames(64);
        {
            let out = open(&format!("pcap:out={}", file.display()), &pool).unwrap();
            let mut tx = out.open_tx(0).unwrap();
            let mut cache = pool.cache();
            let mut batch = Batch::new();
            batch.push(cache.alloc_from(&[7; 60]).unwrap()).unwrap();
            tx.send(&mut batch);
        }
        let replay = open(&format!("pcap:in={},loops=3", file.display()), &pool).unwrap();
        let mut batch = Batch::new();
        assert_eq!(replay.open_rx(0).unwrap().recv(&mut batch), 3);
        batch.free_into(&mut pool.cache());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn afxdp_specs_parse() {
        let cfg = afxdp_config("s", "eth1,queues=4,mode=skb,zerocopy=off").unwrap();
        assert_eq!(
            cfg,
            AfXdpConfig {
                ifname: "eth1".into(),
                queues: 4,
                mode: XdpMode::Skb,
                zero_copy: ZeroCopy::Off,
                prio: true,
            }
        );
        assert_eq!(afxdp_config("s", "eth1").unwrap(), AfXdpConfig::new("eth1"));
    }

    #[test]
    fn bad_specs_name_the_problem() {
        let cases = [
            ("nothing", "KIND:OPTIONS"),
            (
                "bogus:x",
                "unknown port kind 'bogus'; use one of: ring, null, pcap, afxdp, afpacket, tap, vhostuser",
            ),
            ("vxlan:x", "vxlan ports are tunnel ports of a bridge"),
            ("vhostuser:/x.sock,queues=0", "queues=0: give 1 to 64 queue pairs"),
            ("afxdp:", "starts with the interface name"),
            ("afxdp:queues=2", "starts with the interface name"),
            ("afxdp:hyNoSuchIf0", "no interface named 'hyNoSuchIf0'"),
            ("afxdp:lo,mode=fast", "mode=fast: give auto, native or skb"),
            (
                "afxdp:lo,zerocopy=yes",
                "zerocopy=yes: give auto, on or off",
            ),
            (
                "afxdp:lo,ring=5",
                "valid options: queues, mode, zerocopy, prio",
            ),
            ("afxdp:lo,queues=0", "queues=0: give 1 to 64"),
            (
                "afxdp:lo,zerocopy=on,mode=skb",
                "zerocopy=on needs the XDP program in native",
            ),
            (
                "null:sise=64",
                "unknown null option 'sise'; valid options: size, flows, macs, limit, random, sink",
            ),
            ("null:size=10", "size=10: give 42 to 1920 bytes"),
            ("null:size=big", "'big' is not a number"),
            ("null:flows=0", "at least 1 flow"),
            ("null:sink=1", "takes no value"),
            ("pcap:in=", "needs a value"),
            ("pcap:file=x", "valid options: in, out, loops"),
            ("pcap:", "needs an input or an output"),
            (
                "pcap:in=/no/such.pcap",
                "cannot open /no/such.pcap: No such file or directory",
            ),
            ("ring:", "starts with the ring's name"),
            ("ring:r,capacity=3", "not a power of two"),
            ("ring:r,size=3", "valid options: capacity"),
            ("afpacket:", "starts with the interface name"),
            ("afpacket:lo,vnet_hdr=yes", "'yes' is neither on nor off"),
            (
                "afpacket:lo,ring=4",
                "valid options: queues, vnet_hdr, rx, prio",
            ),
            ("afpacket:lo,prio=yes", "'yes' is neither on nor off"),
            ("afpacket:lo,rx=mmap", "'mmap' is neither mmsg nor ring"),
            ("afpacket:lo,queues=0", "queues=0: give 1 to 64"),
            ("afpacket:nosuchif0", "no interface named nosuchif0"),
            ("tap:", "starts with the interface name"),
            ("tap:t0,vnet_hdr=on", "valid options: queues, tunnel_gso"),
            ("tap:t0,tunnel_gso=yes", "'yes' is none of auto, on, off"),
        ];
        for (spec, want) in cases {
            let got = error(spec);
            assert!(got.contains(want), "{spec}: {got}");
        }
    }
}
