//! The TOML configuration: bridges, their ports and their flows.
//!
//! ```toml
//! [[bridge]]
//! name = "br0"
//! cores = [1]                      # poll threads, one per listed core
//! lane_core = 0                    # optional: the priority lane's core (default: cores[0])
//! gro = true                       # optional: join TCP segments for VM ports (default true)
//! flows = [
//!   "table=0,priority=10,in_port=1,actions=output:2",
//!   "table=0,priority=10,in_port=2,actions=output:1",
//! ]
//!
//! [[bridge.port]]
//! name = "p1"
//! spec = "pcap:in=in.pcap"         # ring:NAME, null:, null:sink, pcap:in=F,out=G
//! ofport = 1                       # optional; default: the order of the ports
//! ingress_policing_rate = 10000    # optional: kbit/s this port may send into the switch
//! ingress_policing_burst = 1000    # optional: its bucket, kbit (default 8000)
//! ingress_policing_kpkts_rate = 100   # optional: thousands of packets a second
//! ingress_policing_kpkts_burst = 10   # optional: its bucket, thousands of packets
//! qos_max_rate = 100000            # optional: most kbit/s it sends, all egress queues together
//! qos_burst = 1000                 # optional: that bucket, kbit
//! qos_type = "linux-htb"           # optional: linux-htb shapes (holds), egress-policer (default) / trtcm-policer drop
//! qos_backlog = 1000               # optional, linux-htb: packets each queue holds per poll thread
//!
//! [[bridge.port.queue]]            # optional, repeated: an egress queue (set_queue / enqueue)
//! id = 1                           # 0 ..= 61439 (0xefff), at most 64 queues a port
//! min_rate = 10000                 # kbit/s guaranteed (optional)
//! max_rate = 50000                 # kbit/s at most (optional; one of the two is needed)
//! burst = 1000                     # optional: its buckets, kbit
//! ```
//!
//! The policing and queue keys may also be written as options of the port's spec
//! (`spec = "afxdp:veth0,ingress_policing_rate=10000,queue=1:min_rate=10000"`;
//! `port::policing`, `port::egress`).
//!
//! OpenFlow keys of a bridge (all optional): `datapath_id = "0xa1"` (default: derived from the
//! bridge name, stable across restarts), `controllers = ["tcp:10.0.0.1:6653", "ptcp:6653"]`
//! (default: listen on `ptcp:6653:127.0.0.1`), `fail_mode = "secure"` (default
//! `"standalone"`), `ssl_ca`, `ssl_cert`, `ssl_key` (PEM files for `ssl:`/`pssl:`).
//!
//! A bridge with no flows runs standalone: one flow `priority=0,actions=normal` (L2 learning).
//! Every error names the line of the file and what to change.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use pipeline::model::{ports, Action, FlowMod, Instruction};
use pipeline::{Control, PipelineConfig};
use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Bridges.
    #[serde(default)]
    pub bridge: Vec<BridgeConfig>,
}

/// One bridge.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeConfig {
    /// Name.
    pub name: Spanned<String>,
    /// Cores for poll threads (default: one thread on the last core).
    #[serde(default)]
    pub cores: Vec<usize>,
    /// Core of the priority lane, the thread that serves ports' control frames (default: the
    /// first poll thread's core). A housekeeping core spares them the wait for a poll
    /// thread's system call.
    pub lane_core: Option<usize>,
    /// Receive offload for ports that take TCP super-packets (virtio-net headers: VMs'
    /// vhost-user and TAP ports, AF_PACKET with `vnet_hdr`): consecutive segments of one flow
    /// bound for such a port are joined first (default true; `datapath::DpConfig::gro`).
    pub gro: Option<bool>,
    /// Ports, in OpenFlow port number order unless `ofport` says otherwise.
    #[serde(default)]
    pub port: Vec<PortConfig>,
    /// Flows in ovs-ofctl syntax.
    #[serde(default)]
    pub flows: Vec<Spanned<String>>,
    /// Datapath id, hex (`"0x00000000000000a1"` or `"a1"`); default: derived from the name.
    pub datapath_id: Option<Spanned<String>>,
    /// Controller targets (`tcp:`, `ssl:`, `ptcp:`, `pssl:`, `unix:`, `punix:`); default:
    /// listen on `ptcp:6653:127.0.0.1`.
    #[serde(default)]
    pub controllers: Vec<Spanned<String>>,
    /// `standalone` (default: L2 learning while no controller is connected) or `secure`.
    pub fail_mode: Option<Spanned<String>>,
    /// TLS files for `ssl:`/`pssl:` targets: CA certificate, certificate, private key.
    pub ssl_ca: Option<String>,
    /// The switch's certificate (PEM).
    pub ssl_cert: Option<String>,
    /// The switch's private key (PEM).
    pub ssl_key: Option<String>,
    /// Packet-ins per second each controller may receive (default 1000; the rest are
    /// counted and dropped).
    pub packet_in_rate: Option<Spanned<u32>>,
    /// Packet-ins that may go at once after a quiet period (default 100).
    pub packet_in_burst: Option<Spanned<u32>>,
    /// Packet-ins per second each rx queue (a port, with one queue) may queue for the
    /// controllers (default: no bound of its own), so one port's flood of new flows does not
    /// take its neighbours' packet-ins.
    pub packet_in_port_rate: Option<Spanned<u32>>,
    /// Packet-ins an rx queue may queue at once (default 100).
    pub packet_in_port_burst: Option<Spanned<u32>>,
    /// Most flow entries per table (default 2,000,000; an add beyond it gets
    /// OFPFMFC_TABLE_FULL).
    pub flow_limit: Option<Spanned<usize>>,
    /// Most flow entries in all tables together (default 4,000,000; about 670 bytes each).
    pub flow_limit_total: Option<Spanned<usize>>,
    /// Seconds between the passes that resolve every tunnel port's next hops again
    /// (default 1; a per-flow destination the datapath asks for is resolved at once).
    pub tunnel_refresh_secs: Option<Spanned<u64>>,
}

/// One port of a bridge.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Name (defaults to the spec).
    pub name: Option<String>,
    /// Backend spec, e.g. `ring:a`, `null:`, `pcap:in=x.pcap`.
    pub spec: Spanned<String>,
    /// Requested OpenFlow port number.
    pub ofport: Option<Spanned<u32>>,
    /// Ingress policing: kbit/s ([`port::policing`]).
    pub ingress_policing_rate: Option<u32>,
    /// Ingress policing: bucket of the bit rate, kbit.
    pub ingress_policing_burst: Option<u32>,
    /// Ingress policing: thousands of packets a second.
    pub ingress_policing_kpkts_rate: Option<u32>,
    /// Ingress policing: bucket of the packet rate, thousands of packets.
    pub ingress_policing_kpkts_burst: Option<u32>,
    /// Egress: most kbit/s of the whole port ([`port::egress`]).
    pub qos_max_rate: Option<u32>,
    /// Egress: that bucket, kbit.
    pub qos_burst: Option<u32>,
    /// Egress: how the rates are kept, Open vSwitch's QoS type ([`port::QosType`]).
    pub qos_type: Option<String>,
    /// Egress, `linux-htb`: packets each queue holds per poll thread.
    pub qos_backlog: Option<u32>,
    /// Egress queues.
    #[serde(default)]
    pub queue: Vec<QueueConfig>,
}

/// One egress queue of a port ([`port::egress`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// Queue id, 0 ..= [`port::egress::MAX_QUEUE_ID`].
    pub id: u32,
    /// Guaranteed kbit/s.
    pub min_rate: Option<u32>,
    /// Most kbit/s.
    pub max_rate: Option<u32>,
    /// Its buckets, kbit.
    pub burst: Option<u32>,
}

impl QueueConfig {
    /// As a spec option: `queue=ID:min_rate=…:max_rate=…:burst=…`.
    fn option(&self) -> String {
        let mut s = format!(",queue={}", self.id);
        for (k, v) in [
            ("min_rate", self.min_rate),
            ("max_rate", self.max_rate),
            ("burst", self.burst),
        ] {
            if let Some(v) = v {
                s.push_str(&format!(":{k}={v}"));
            }
        }
        s
    }
}

impl PortConfig {
    /// The port's spec with its policing and queue keys added as spec options, checked; the error
    /// names the line.
    fn full_spec(&self, src: &str) -> Result<String, ConfigError> {
        let mut spec = self.spec.get_ref().clone();
        for (key, v) in [
            ("ingress_policing_rate", self.ingress_policing_rate),
            ("ingress_policing_burst", self.ingress_policing_burst),
            (
                "ingress_policing_kpkts_rate",
                self.ingress_policing_kpkts_rate,
            ),
            (
                "ingress_policing_kpkts_burst",
                self.ingress_policing_kpkts_burst,
            ),
            ("qos_max_rate", self.qos_max_rate),
            ("qos_burst", self.qos_burst),
            ("qos_backlog", self.qos_backlog),
        ] {
            if let Some(v) = v {
                spec.push_str(&format!(",{key}={v}"));
            }
        }
        if let Some(t) = &self.qos_type {
            spec.push_str(&format!(",qos_type={t}"));
        }
        for q in &self.queue {
            spec.push_str(&q.option());
        }
        port::dp_options::split_spec(&spec).map_err(|e| {
            ConfigError(format!(
                "line {}: {e}",
                line_of(src, self.spec.span().start)
            ))
        })?;
        Ok(spec)
    }
}

/// A bridge after validation: ports numbered, flows parsed.
#[derive(Debug)]
pub struct Bridge {
    /// Name.
    pub name: String,
    /// Cores for poll threads.
    pub cores: Vec<usize>,
    /// Core of the priority lane (default: the first poll thread's).
    pub lane_core: Option<usize>,
    /// Join TCP segments into super-packets for ports that take them (default true).
    pub gro: bool,
    /// (OpenFlow port number, name, spec), ascending by number.
    pub ports: Vec<(u32, String, String)>,
    /// Parsed flows, in file order.
    pub flows: Vec<FlowMod>,
    /// Datapath id, when given.
    pub datapath_id: Option<u64>,
    /// Controller targets as given (checked).
    pub controllers: Vec<String>,
    /// Fail mode.
    pub fail_mode: agent::FailMode,
    /// TLS files (all three or none).
    pub tls: Option<agent::TlsFiles>,
    /// Packet-in rate limit per controller.
    pub packet_in_limit: agent::RateLimit,
    /// Pipeline settings (the flow limits).
    pub pipeline: PipelineConfig,
    /// Packet-ins per second and burst each rx queue may queue (`None`: no bound).
    pub packet_in_port: Option<(u32, u32)>,
    /// Between the tunnel housekeeping's passes ([`crate::tunnels::REFRESH_INTERVAL`] by
    /// default).
    pub tunnel_refresh: std::time::Duration,
}

/// Parses a datapath id in hex, with or without `0x`.
pub fn parse_datapath_id(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || digits.len() > 16 {
        return Err(format!(
            "datapath id {text:?} is not 1 to 16 hex digits; write e.g. 0x00000000000000a1"
        ));
    }
    u64::from_str_radix(digits, 16)
        .map_err(|_| format!("datapath id {text:?} is not hex; write e.g. 0x00000000000000a1"))
}

/// Parses a fail mode.
pub fn parse_fail_mode(text: &str) -> Result<agent::FailMode, String> {
    match text {
        "standalone" => Ok(agent::FailMode::Standalone),
        "secure" => Ok(agent::FailMode::Secure),
        other => Err(format!(
            "fail mode {other:?} is unknown; use \"standalone\" or \"secure\""
        )),
    }
}

/// TLS files from three optional paths: all or none.
pub fn tls_files(
    ca: Option<&str>,
    cert: Option<&str>,
    key: Option<&str>,
) -> Result<Option<agent::TlsFiles>, String> {
    match (ca, cert, key) {
        (None, None, None) => Ok(None),
        (Some(ca), Some(cert), Some(key)) => Ok(Some(agent::TlsFiles {
            ca_cert: ca.into(),
            cert: cert.into(),
            key: key.into(),
        })),
        _ => Err(
            "TLS needs all three files: the CA certificate, the certificate and the private key"
                .into(),
        ),
    }
}

/// A configuration error, with the line it was found on.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn line_of(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())].matches('\n').count() + 1
}

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Vec<Bridge>, ConfigError> {
    let src = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
    parse(&src).map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))
}

/// Parses and validates config text.
pub fn parse(src: &str) -> Result<Vec<Bridge>, ConfigError> {
    let cfg: Config = toml::from_str(src).map_err(|e| ConfigError(e.to_string()))?;
    if cfg.bridge.is_empty() {
        return Err(ConfigError(
            "no [[bridge]] in the config; add one with a name and its [[bridge.port]]s".into(),
        ));
    }
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for b in cfg.bridge {
        let line = line_of(src, b.name.span().start);
        let name = b.name.get_ref().clone();
        if !names.insert(name.clone()) {
            return Err(ConfigError(format!(
                "line {line}: a second bridge named {name:?}; bridge names must be unique"
            )));
        }
        out.push(bridge(src, name, b)?);
    }
    Ok(out)
}

fn bridge(src: &str, name: String, b: BridgeConfig) -> Result<Bridge, ConfigError> {
    if b.port.is_empty() {
        return Err(ConfigError(format!(
            "line {}: bridge {name:?} has no ports; add [[bridge.port]] entries with a spec",
            line_of(src, b.name.span().start)
        )));
    }
    // Requested numbers first, then the rest in order, skipping taken numbers.
    let mut by_no: BTreeMap<u32, (String, String)> = BTreeMap::new();
    for p in &b.port {
        if let Some(no) = &p.ofport {
            let n = *no.get_ref();
            let line = line_of(src, no.span().start);
            if n == 0 || n > ports::MAX {
                return Err(ConfigError(format!(
                    "line {line}: ofport {n} is out of range; use 1..={}",
                    ports::MAX
                )));
            }
            let pname = p.name.clone().unwrap_or_else(|| p.spec.get_ref().clone());
            if by_no.insert(n, (pname, p.full_spec(src)?)).is_some() {
                return Err(ConfigError(format!(
                    "line {line}: ofport {n} is requested twice in bridge {name:?}; give each port its own number"
                )));
            }
        }
    }
    let mut next = 1u32;
    for p in b.port.iter().filter(|p| p.ofport.is_none()) {
        while by_no.contains_key(&next) {
            next += 1;
        }
        let pname = p.name.clone().unwrap_or_else(|| p.spec.get_ref().clone());
        by_no.insert(next, (pname, p.full_spec(src)?));
    }
    let mut seen_names = HashSet::new();
    for (pname, _) in by_no.values() {
        if !seen_names.insert(pname.clone()) {
            return Err(ConfigError(format!(
                "bridge {name:?}: two ports are named {pname:?}; give each a unique name"
            )));
        }
    }
    let port_nos: Vec<u32> = by_no.keys().copied().collect();
    let mut flows = Vec::new();
    let mut lines = Vec::new();
    let mut seen_flows = HashSet::new();
    for f in &b.flows {
        let line = line_of(src, f.span().start);
        let fm = pipeline::ofctl::parse_flow(f.get_ref())
            .map_err(|e| ConfigError(format!("line {line}: {e}")))?;
        check_ports(&fm, &port_nos)
            .map_err(|e| ConfigError(format!("line {line}: flow {:?}: {e}", f.get_ref())))?;
        let identity = (fm.table_id, fm.priority, fm.matcher);
        if !seen_flows.insert(identity) {
            return Err(ConfigError(format!(
                "line {line}: flow {:?} has the same table, priority and match as an earlier flow; remove one or change its priority",
                f.get_ref()
            )));
        }
        flows.push(fm);
        lines.push(line);
    }
    // The pipeline's own checks (goto direction, groups, meters, prerequisites).
    let (mut control, _cell) = Control::new(PipelineConfig::default());
    if let Err((i, e)) = control.apply(&flows) {
        return Err(ConfigError(format!(
            "line {}: flow {:?}: {e}",
            lines[i],
            b.flows[i].get_ref()
        )));
    }
    let at = |sp: &Spanned<String>| line_of(src, sp.span().start);
    let datapath_id = match &b.datapath_id {
        Some(d) => Some(
            parse_datapath_id(d.get_ref())
                .map_err(|e| ConfigError(format!("line {}: {e}", at(d))))?,
        ),
        None => None,
    };
    let mut controllers = Vec::new();
    for c in &b.controllers {
        agent::Target::parse(c.get_ref())
            .map_err(|e| ConfigError(format!("line {}: {e}", at(c))))?;
        controllers.push(c.get_ref().clone());
    }
    let fail_mode = match &b.fail_mode {
        Some(f) => {
            parse_fail_mode(f.get_ref()).map_err(|e| ConfigError(format!("line {}: {e}", at(f))))?
        }
        None => agent::FailMode::default(),
    };
    let tls = tls_files(
        b.ssl_ca.as_deref(),
        b.ssl_cert.as_deref(),
        b.ssl_key.as_deref(),
    )
    .map_err(|e| ConfigError(format!("bridge {name:?}: {e}")))?;
    let mut packet_in_limit = agent::RateLimit::default();
    for (key, value, slot) in [
        (
            "packet_in_rate",
            &b.packet_in_rate,
            &mut packet_in_limit.rate,
        ),
        (
            "packet_in_burst",
            &b.packet_in_burst,
            &mut packet_in_limit.burst,
        ),
    ] {
        if let Some(v) = value {
            *slot = check_packet_in(key, *v.get_ref())
                .map_err(|e| ConfigError(format!("line {}: {e}", line_of(src, v.span().start))))?;
        }
    }
    let mut packet_in_port = None;
    if let Some(r) = &b.packet_in_port_rate {
        let at = |v: &Spanned<u32>| line_of(src, v.span().start);
        let rate = check_packet_in("packet_in_port_rate", *r.get_ref())
            .map_err(|e| ConfigError(format!("line {}: {e}", at(r))))?;
        let burst = match &b.packet_in_port_burst {
            Some(v) => check_packet_in("packet_in_port_burst", *v.get_ref())
                .map_err(|e| ConfigError(format!("line {}: {e}", at(v))))?,
            None => 100,
        };
        packet_in_port = Some((rate, burst));
    } else if let Some(v) = &b.packet_in_port_burst {
        return Err(ConfigError(format!(
            "line {}: packet_in_port_burst without packet_in_port_rate; add the rate",
            line_of(src, v.span().start)
        )));
    }
    let mut pipeline = PipelineConfig::default();
    for (key, value, slot) in [
        ("flow_limit", &b.flow_limit, &mut pipeline.table_capacity),
        (
            "flow_limit_total",
            &b.flow_limit_total,
            &mut pipeline.total_capacity,
        ),
    ] {
        if let Some(v) = value {
            *slot = check_flow_limit(key, *v.get_ref())
                .map_err(|e| ConfigError(format!("line {}: {e}", line_of(src, v.span().start))))?;
        }
    }
    let tunnel_refresh = match &b.tunnel_refresh_secs {
        Some(v) => check_tunnel_refresh(*v.get_ref())
            .map_err(|e| ConfigError(format!("line {}: {e}", line_of(src, v.span().start))))?,
        None => crate::tunnels::REFRESH_INTERVAL,
    };
    Ok(Bridge {
        name,
        cores: b.cores,
        lane_core: b.lane_core,
        gro: b.gro.unwrap_or(true),
        ports: by_no.into_iter().map(|(n, (a, s))| (n, a, s)).collect(),
        flows,
        datapath_id,
        controllers,
        fail_mode,
        tls,
        packet_in_limit,
        pipeline,
        packet_in_port,
        tunnel_refresh,
    })
}

/// Checks `tunnel_refresh_secs` (1 ..= 86400); the error names the key and the fix.
pub fn check_tunnel_refresh(secs: u64) -> Result<std::time::Duration, String> {
    if (1..=86_400).contains(&secs) {
        Ok(std::time::Duration::from_secs(secs))
    } else {
        Err(format!(
            "tunnel_refresh_secs = {secs}: use 1 to 86400 seconds between the passes that \
             resolve tunnel next hops again"
        ))
    }
}

/// Checks a flow limit (1 ..= 100,000,000); the error names the key and the fix.
pub fn check_flow_limit(key: &str, v: usize) -> Result<usize, String> {
    if (1..=100_000_000).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{key} = {v}: use 1 to 100000000 flow entries (about 670 bytes each)"
        ))
    }
}

/// Checks a packet-in rate or burst (1 ..= 10,000,000); the error names the key and the fix.
pub fn check_packet_in(key: &str, v: u32) -> Result<u32, String> {
    if (1..=10_000_000).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{key} = {v}: give 1 to 10000000 packet-ins (per second for the rate)"
        ))
    }
}

/// Refuses flows that match on or output to a port the bridge does not have.
pub fn check_ports(fm: &FlowMod, port_nos: &[u32]) -> Result<(), String> {
    let known = |p: u32| p > ports::MAX || port_nos.contains(&p);
    let list = || {
        port_nos
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (in_port, mask) = fm.matcher.get(packet::Field::InPort);
    if mask != 0 && !known(in_port as u32) {
        return Err(format!(
            "in_port={in_port} is not a port of this bridge (ports: {}); fix the number or add the port",
            list()
        ));
    }
    for ins in &fm.instructions {
        let actions: &[Action] = match ins {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a,
            _ => continue,
        };
        for a in actions {
            if let Action::Output { port, .. } = a {
                if !known(*port) {
                    return Err(format!(
                        "output:{port} is not a port of this bridge (ports: {}); fix the number or add the port",
                        list()
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[bridge]]
name = "br0"
flows = [
  "table=0,priority=10,in_port=1,actions=output:2",
]

[[bridge.port]]
spec = "null:"

[[bridge.port]]
name = "sink"
spec = "null:sink"
"#;

    #[test]
    fn the_lane_core_is_read_and_defaults_to_none() {
        assert_eq!(parse(GOOD).unwrap()[0].lane_core, None);
        let src = GOOD.replacen("[[bridge]]\n", "[[bridge]]\nlane_core = 0\n", 1);
        assert_eq!(parse(&src).unwrap()[0].lane_core, Some(0), "{src}");
    }

    #[test]
    fn packet_in_port_keys_are_read_and_checked() {
        assert_eq!(parse(GOOD).unwrap()[0].packet_in_port, None);
        let src = GOOD.replacen("[[bridge]]\n", "[[bridge]]\npacket_in_port_rate = 200\n", 1);
        assert_eq!(parse(&src).unwrap()[0].packet_in_port, Some((200, 100)));
        let src = GOOD.replacen("[[bridge]]\n", "[[bridge]]\npacket_in_port_burst = 5\n", 1);
        assert!(parse(&src).unwrap_err().0.contains("add the rate"));
    }

    #[test]
    fn policing_keys_join_the_spec_and_bad_ones_name_the_line() {
        let src = GOOD.replacen(
            "spec = \"null:\"\n",
            "spec = \"null:\"\ningress_policing_rate = 1000\ningress_policing_burst = 100\n",
            1,
        );
        let b = parse(&src).unwrap();
        let (_, o) = port::dp_options::split_spec(&b[0].ports[0].2).unwrap();
        let p = o.policing;
        assert_eq!(
            (p.rate_kbps, p.burst_kbit),
            (1000, 100),
            "{}",
            b[0].ports[0].2
        );
        let bad = src.replace("ingress_policing_burst = 100", "ingress_policing_burst = 1");
        let e = parse(&bad).unwrap_err().0;
        assert!(e.starts_with("line 9:"), "{e}");
        assert!(e.contains("less than one 1518-byte frame"), "{e}");
        let zero = GOOD.replace(
            "spec = \"null:sink\"",
            "spec = \"null:sink,ingress_policing_kpkts_rate=0\"",
        );
        assert!(parse(&zero).unwrap_err().0.contains("leave the option out"));
    }

    #[test]
    fn queue_keys_join_the_spec_and_bad_ones_name_the_fix() {
        let src = GOOD.replacen(
            "spec = \"null:\"\n",
            "spec = \"null:\"\nqos_max_rate = 10000\n[[bridge.port.queue]]\nid = 1\nmin_rate = 1000\nmax_rate = 5000\n",
            1,
        );
        let b = parse(&src).unwrap();
        let (_, o) = port::dp_options::split_spec(&b[0].ports[0].2).unwrap();
        assert_eq!(o.egress.max_kbps, 10000);
        assert_eq!(
            (o.egress.queues[&1].min_kbps, o.egress.queues[&1].max_kbps),
            (1000, 5000)
        );
        let bad = src.replace("min_rate = 1000", "min_rate = 6000");
        let e = parse(&bad).unwrap_err().0;
        assert!(e.contains("lower min_rate"), "{e}");
        let zero = src.replace("max_rate = 5000", "max_rate = 0");
        assert!(parse(&zero).unwrap_err().0.contains("leave the option out"));
        let htb = src.replace(
            "qos_max_rate = 10000\n",
            "qos_max_rate = 10000\nqos_type = \"linux-htb\"\nqos_backlog = 64\n",
        );
        let b = parse(&htb).unwrap();
        let (_, o) = port::dp_options::split_spec(&b[0].ports[0].2).unwrap();
        assert_eq!(
            (o.egress.qos_type, o.egress.backlog_limit()),
            (port::QosType::LinuxHtb, 64)
        );
        let bad = htb.replace("linux-htb", "linux-hfsc");
        assert!(parse(&bad).unwrap_err().0.contains("give linux-htb"));
    }

    #[test]
    fn numbers_ports_in_order() {
        let b = parse(GOOD).unwrap();
        assert_eq!(b[0].ports[0].0, 1);
        assert_eq!(b[0].ports[1], (2, "sink".into(), "null:sink".into()));
        assert_eq!(b[0].flows.len(), 1);
    }

    #[test]
    fn requested_numbers_are_kept_and_others_fill_gaps() {
        let src = r#"
[[bridge]]
name = "br0"
[[bridge.port]]
spec = "null:"
[[bridge.port]]
spec = "null:sink"
ofport = 1
"#;
        let b = parse(src).unwrap();
        assert_eq!(b[0].ports[0], (1, "null:sink".into(), "null:sink".into()));
        assert_eq!(b[0].ports[1].0, 2);
    }

    #[test]
    fn unknown_output_port_names_the_line() {
        let src = GOOD.replace("output:2", "output:3");
        let e = parse(&src).unwrap_err().0;
        assert!(e.starts_with("line 5:"), "{e}");
        assert!(e.contains("output:3 is not a port"), "{e}");
    }

    #[test]
    fn bad_flow_names_the_line_and_word() {
        let src = GOOD.replace("actions=output:2", "actions=outptu:2");
        let e = parse(&src).unwrap_err().0;
        assert!(e.starts_with("line 5:"), "{e}");
        assert!(e.contains("outptu"), "{e}");
    }

    #[test]
    fn duplicate_flow_is_refused() {
        let src = GOOD.replace(
            "  \"table=0,priority=10,in_port=1,actions=output:2\",\n",
            "  \"table=0,priority=10,in_port=1,actions=output:2\",\n  \"table=0,priority=10,in_port=1,actions=drop\",\n",
        );
        let e = parse(&src).unwrap_err().0;
        assert!(e.starts_with("line 6:"), "{e}");
        assert!(e.contains("same table, priority and match"), "{e}");
    }

    #[test]
    fn unknown_key_is_refused_by_toml_with_its_line() {
        let src = GOOD.replace("name = \"br0\"", "name = \"br0\"\ncolour = \"red\"");
        let e = parse(&src).unwrap_err().0;
        assert!(e.contains("colour"), "{e}");
        assert!(e.contains("line 4"), "{e}");
    }

    #[test]
    fn duplicate_ofport_is_refused() {
        let src = r#"
[[bridge]]
name = "br0"
[[bridge.port]]
spec = "null:"
ofport = 2
[[bridge.port]]
spec = "null:sink"
ofport = 2
"#;
        let e = parse(src).unwrap_err().0;
        assert!(e.contains("line 9") && e.contains("requested twice"), "{e}");
    }

    #[test]
    fn empty_config_says_what_to_add() {
        let e = parse("").unwrap_err().0;
        assert!(e.contains("[[bridge]]"));
    }

    #[test]
    fn openflow_keys_are_read_and_checked() {
        let src = r#"
[[bridge]]
name = "br0"
datapath_id = "0x00000000000000a1"
controllers = ["tcp:127.0.0.1:6653", "punix:/tmp/x.sock"]
fail_mode = "secure"
packet_in_rate = 20000
packet_in_burst = 2000
flow_limit = 1000
flow_limit_total = 5000
tunnel_refresh_secs = 30

[[bridge.port]]
spec = "null:sink"
"#;
        let b = &parse(src).unwrap()[0];
        assert_eq!(b.packet_in_limit.rate, 20_000);
        assert_eq!(b.packet_in_limit.burst, 2_000);
        assert_eq!(b.pipeline.table_capacity, 1_000);
        assert_eq!(b.pipeline.total_capacity, 5_000);
        assert_eq!(b.tunnel_refresh, std::time::Duration::from_secs(30));
        assert!(check_tunnel_refresh(0).unwrap_err().contains("1 to 86400"));
        assert_eq!(b.datapath_id, Some(0xa1));
        assert_eq!(b.controllers.len(), 2);
        assert_eq!(b.fail_mode, agent::FailMode::Secure);
        assert!(b.tls.is_none());
        let defaults = &parse(GOOD).unwrap()[0];
        assert_eq!(defaults.datapath_id, None);
        assert!(defaults.controllers.is_empty());
        assert_eq!(defaults.fail_mode, agent::FailMode::Standalone);
        assert_eq!(defaults.packet_in_limit, agent::RateLimit::default());
        assert_eq!(defaults.pipeline, PipelineConfig::default());
    }

    #[test]
    fn bad_openflow_keys_name_the_line_and_fix() {
        let bad = |key: &str| {
            let src =
                format!("[[bridge]]\nname = \"b\"\n{key}\n[[bridge.port]]\nspec = \"null:\"\n");
            parse(&src).unwrap_err().0
        };
        let e = bad("datapath_id = \"xyz\"");
        assert!(e.contains("line 3") && e.contains("hex"), "{e}");
        let e = bad("controllers = [\"carrier-pigeon:1\"]");
        assert!(e.contains("line 3"), "{e}");
        let e = bad("packet_in_rate = 0");
        assert!(e.contains("line 3") && e.contains("1 to 10000000"), "{e}");
        let e = bad("flow_limit = 0");
        assert!(e.contains("line 3") && e.contains("flow_limit = 0"), "{e}");
        let e = bad("fail_mode = \"open\"");
        assert!(e.contains("line 3") && e.contains("secure"), "{e}");
        let e = bad("ssl_ca = \"ca.pem\"");
        assert!(e.contains("all three"), "{e}");
    }

    #[test]
    fn datapath_ids_parse_with_or_without_prefix() {
        assert_eq!(parse_datapath_id("0xA1"), Ok(0xa1));
        assert_eq!(parse_datapath_id("ffffffffffffffff"), Ok(u64::MAX));
        assert!(parse_datapath_id("").is_err());
        assert!(parse_datapath_id("0x1ffffffffffffffff").is_err());
    }
}
