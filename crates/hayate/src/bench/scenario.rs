//! The named benchmark scenarios: which ports produce what traffic, and which flows the
//! switch runs. Each is one in-process topology on null ports and one pinned thread.

/// Frame sizes every size-sensitive scenario runs at (bytes on the wire, FCS included, as
/// RFC 2544 counts them: a 64-byte frame is a 60-byte buffer).
pub const FRAME_SIZES: &[usize] = &[64, 128, 256, 512, 1024, 1518];

/// How one source port varies its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// The same UDP frame 10.0.0.1:1024 → 10.0.0.2:1024, 02:..:01 → 02:..:02.
    OneFlow,
    /// `n` distinct 5-tuples (IPv4 source 10.0.0.0 + i, UDP source port 1024 + i % 4096).
    Flows(u32),
    /// `n` MAC pairs: source MACs 02:00:00:00:SS:ii, destination MACs of the peer side.
    Macs {
        /// Distinct MACs per side.
        n: u32,
        /// Which side (0 or 1): flips source and destination.
        side: u8,
    },
    /// Every packet a new 5-tuple (IPv4 source counts up through 2^32 addresses).
    NewFlows,
    /// [`Traffic::OneFlow`]'s frame (the frame size is the inner frame's) in VXLAN from
    /// [`TUN_REMOTE`] to [`TUN_LOCAL`] with tunnel id [`TUN_VNI`], as an underlay port
    /// receives it.
    Vxlan,
    /// [`Traffic::Vxlan`] from `n` remotes in turn: outer IPv4 sources
    /// [`TUN_REMOTES_BASE`] + i (the outer header checksum kept right).
    VxlanRemotes(u32),
}

/// Distinct flows of the `vxlan-encap-1k` scenario, and its name's suffix.
const ENCAP_FLOWS: u32 = 1000;
const ENCAP_FLOWS_LABEL: &str = "1k";

/// The first of the remotes [`Traffic::VxlanRemotes`] sends from: 10.1.0.0.
pub const TUN_REMOTES_BASE: u32 = 0x0a01_0000;

/// Tunnel ports in the `vxlan-decap-500` scenario: one per remote host, as a host of a
/// 500-node cloud has (Open vSwitch's Neutron agent makes a port per remote VTEP).
pub const TUN_REMOTES: u32 = 500;

/// The benchmark tunnels' local endpoint (the switch's underlay address).
pub const TUN_LOCAL: &str = "192.0.2.1";
/// The benchmark tunnels' remote endpoint.
pub const TUN_REMOTE: &str = "192.0.2.2";
/// The benchmark tunnels' MAC on the underlay.
pub const TUN_LOCAL_MAC: &str = "02:00:00:00:01:01";
/// The remote endpoint's MAC on the underlay.
pub const TUN_REMOTE_MAC: &str = "02:00:00:00:01:02";
/// The benchmark tunnels' VXLAN network identifier.
pub const TUN_VNI: u32 = 42;

/// The port spec of the benchmark's VXLAN port over bridge port `underlay`, its next hop
/// given in the spec (an in-memory underlay has no kernel tables to ask).
pub fn vxlan_spec(underlay: &str) -> String {
    format!(
        "vxlan:remote={TUN_REMOTE},local={TUN_LOCAL},vni={TUN_VNI},underlay={underlay},\
         nexthop_mac={TUN_REMOTE_MAC},local_mac={TUN_LOCAL_MAC}"
    )
}

/// One benchmark scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name on the command line and in reports.
    pub name: String,
    /// One line on what it measures.
    pub about: String,
    /// Traffic each port produces (ports are numbered 1..; `None` = a pure sink).
    pub sources: Vec<Option<Traffic>>,
    /// The flows the switch runs.
    pub rules: Rules,
    /// Whether the figure depends on frame size (then all [`FRAME_SIZES`] run by default).
    pub size_sensitive: bool,
    /// Report flow setups per second (upcalls that installed a megaflow) as the main figure.
    pub setups: bool,
    /// Whether the tables track address prefixes (`PipelineConfig::prefix_tracking`).
    pub prefix_tracking: bool,
    /// Flow changes a control thread makes during the measured window.
    pub churn: Option<Churn>,
    /// Tunnel port specs (`vxlan:…`), numbered after the null ports and named `tunN`.
    pub tunnels: Vec<String>,
    /// The scenario whose rate (at the same frame size, in the same run) this one's is
    /// reported as a share of.
    pub baseline: Option<&'static str>,
}

/// The flows a scenario's switch runs, in ovs-ofctl syntax. The big sets are made only for a
/// scenario that runs ([`Rules::flows`]), not when the scenarios are listed or looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rules {
    /// These flows.
    Listed(Vec<String>),
    /// [`churn_flows`]: a rule per source of the `churn-*` traffic.
    PerChurnSource,
}

impl Rules {
    /// The flows.
    pub fn flows(&self) -> Vec<String> {
        match self {
            Rules::Listed(v) => v.clone(),
            Rules::PerChurnSource => churn_flows(),
        }
    }
}

/// Flow changes made while the traffic runs (the `churn-*` scenarios): a control thread
/// applies flow-mods at a steady rate, each followed by a publish (what an OpenFlow barrier
/// does), on the core beside the switch thread's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Churn {
    /// Flow-mods per second.
    pub per_sec: u32,
    /// Every `matching_every`-th flow-mod rewrites the rule of a source the traffic uses (its
    /// megaflow must go); 0: none does, every change is a rule no packet matches.
    pub matching_every: u32,
    /// The scenario without churn whose rate this one is compared with.
    pub baseline: &'static str,
}

/// Sources (and rules, one per source) of the `churn-*` scenarios.
pub const CHURN_FLOWS: u32 = 100_000;

/// The IPv4 source of flow `i` of [`Traffic::Flows`], dotted.
fn flow_src(i: u32) -> String {
    let a = 0x0a00_0000u32 + i;
    format!(
        "{}.{}.{}.{}",
        a >> 24,
        (a >> 16) & 255,
        (a >> 8) & 255,
        a & 255
    )
}

/// The `churn-*` rule set: one rule per source the traffic uses, so that every switch needs a
/// megaflow per flow, and a catch-all the traffic never reaches.
pub fn churn_flows() -> Vec<String> {
    let mut v: Vec<String> = (0..CHURN_FLOWS)
        .map(|i| {
            format!(
                "table=0,priority=100,udp,nw_src={},actions=output:2",
                flow_src(i)
            )
        })
        .collect();
    v.push("table=0,priority=0,actions=drop".into());
    v
}

/// The flow-mods a `churn-*` control thread cycles through: adds then deletes of 1,000 rules
/// no packet matches (`priority=50,udp,nw_dst=192.168.X.Y,actions=drop`), with every
/// `matching_every`-th one replaced by a rewrite of a used source's rule (same actions).
pub fn churn_mods(matching_every: u32) -> Result<Vec<pipeline::FlowMod>, String> {
    use pipeline::ofctl::parse_flow_match;
    use pipeline::FlowModCommand::{Add, DeleteStrict};
    const N: u32 = 1000;
    let dst = |j: u32| {
        format!(
            "table=0,priority=50,udp,nw_dst=192.168.{}.{}",
            j >> 8,
            j & 255
        )
    };
    (0..2 * N)
        .map(|i| {
            let (text, cmd) = if matching_every > 0 && i % matching_every == matching_every - 1 {
                let src = (i * 7919) % CHURN_FLOWS;
                (
                    format!(
                        "table=0,priority=100,udp,nw_src={},actions=output:2",
                        flow_src(src)
                    ),
                    Add,
                )
            } else if i < N {
                (format!("{},actions=drop", dst(i)), Add)
            } else {
                (dst(i - N), DeleteStrict)
            };
            parse_flow_match(&text, cmd).map_err(|e| e.to_string())
        })
        .collect()
}

fn sc(name: &str, about: &str, sources: Vec<Option<Traffic>>, flows: Vec<String>) -> Scenario {
    Scenario {
        name: name.to_string(),
        about: about.to_string(),
        sources,
        rules: Rules::Listed(flows),
        size_sensitive: false,
        setups: false,
        prefix_tracking: true,
        churn: None,
        tunnels: Vec::new(),
        baseline: None,
    }
}

/// The `acl-M` rule set: `masks` rules with distinct masks — IPv4 source prefixes of length
/// 32, 31, … crossed with an exact or a wildcarded UDP destination port — each around an
/// address inside the traffic's range, so packets are decided by rules of many different
/// masks. Longer prefixes get higher priorities (longest-prefix-match order), so a lookup
/// has to look past the specific rules before it reaches the broad ones.
pub fn acl_flows(masks: usize) -> Vec<String> {
    let mut flows = Vec::new();
    for r in 0..masks {
        let plen = 32 - (r % 32) as u32;
        let exact_port = r < 32;
        let prio = 1000 + plen * 2 + exact_port as u32;
        let host = (r as u64 * 2_654_435_761 % ACL_FLOWS as u64) as u32;
        let addr = (0x0a00_0000u32 + host) & (u32::MAX << (32 - plen));
        let port = if exact_port { ",udp_dst=1024" } else { "" };
        flows.push(format!(
            "table=0,priority={prio},udp,in_port=1,nw_src={}.{}.{}.{}/{plen}{port},actions=output:2",
            addr >> 24,
            (addr >> 16) & 255,
            (addr >> 8) & 255,
            addr & 255
        ));
    }
    // Packets no rule above allows still reach port 2 through a catch-all, so every packet
    // counts; the point is the lookup, not the verdict.
    flows.push("table=0,priority=1,in_port=1,actions=output:2".to_string());
    flows
}

/// Distinct 5-tuples the `acl-M` scenarios send.
pub const ACL_FLOWS: u32 = 10_000;

/// Every scenario, in report order.
pub fn all() -> Vec<Scenario> {
    let mut v = Vec::new();
    let mut p2p = sc(
        "p2p-1flow",
        "one UDP flow, in_port=1 → output:2",
        vec![Some(Traffic::OneFlow), None],
        vec!["table=0,priority=10,in_port=1,actions=output:2".into()],
    );
    p2p.size_sensitive = true;
    v.push(p2p);
    // Issue 18: the same one flow into a VXLAN port (its underlay null port 2 the sink), and
    // VXLAN frames on the underlay (null port 1) out of a plain port.
    let mut encap = sc(
        "vxlan-encap",
        "p2p-1flow's frames out of a VXLAN port: in_port=1 → output:3 (vxlan over port 2)",
        vec![Some(Traffic::OneFlow), None],
        vec!["table=0,priority=10,in_port=1,actions=output:3".into()],
    );
    encap.tunnels = vec![vxlan_spec("null2")];
    encap.baseline = Some("p2p-1flow");
    v.push(encap);
    // Many flows into the VXLAN port: consecutive packets differ in flow, so no train
    // forms (each packet's outer headers are built from the template).
    let mut encap_flows = sc(
        &format!("vxlan-encap-{}", ENCAP_FLOWS_LABEL),
        &format!(
            "vxlan-encap with {ENCAP_FLOWS} distinct 5-tuples, each packet another: in_port=1 → output:3"
        ),
        vec![Some(Traffic::Flows(ENCAP_FLOWS)), None],
        vec!["table=0,priority=10,in_port=1,actions=output:3".into()],
    );
    encap_flows.tunnels = vec![vxlan_spec("null2")];
    encap_flows.baseline = Some("p2p-1flow");
    v.push(encap_flows);
    let mut decap = sc(
        "vxlan-decap",
        "VXLAN frames in on underlay port 1, terminated: in_port=3,tun_id=42 → output:2",
        vec![Some(Traffic::Vxlan), None],
        vec![format!(
            "table=0,priority=10,in_port=3,tun_id={TUN_VNI},actions=output:2"
        )],
    );
    decap.tunnels = vec![vxlan_spec("null1")];
    decap.baseline = Some("p2p-1flow");
    v.push(decap);
    let mut vteps = sc(
        &format!("vxlan-decap-{TUN_REMOTES}"),
        &format!(
            "vxlan-decap with a VXLAN port per remote host ({TUN_REMOTES}), frames from each \
             in turn: tun_id=42 → output:2"
        ),
        vec![Some(Traffic::VxlanRemotes(TUN_REMOTES)), None],
        vec![format!(
            "table=0,priority=10,tun_id={TUN_VNI},actions=output:2"
        )],
    );
    vteps.tunnels = (0..TUN_REMOTES)
        .map(|i| {
            let remote = std::net::Ipv4Addr::from(TUN_REMOTES_BASE + i);
            vxlan_spec("null1").replace(TUN_REMOTE, &remote.to_string())
        })
        .collect();
    vteps.baseline = Some("p2p-1flow");
    v.push(vteps);
    v.push(sc(
        "l2-learning",
        "NORMAL (L2 learning) between two ports, 1000 MACs per side",
        vec![
            Some(Traffic::Macs { n: 1000, side: 0 }),
            Some(Traffic::Macs { n: 1000, side: 1 }),
        ],
        vec!["table=0,priority=0,actions=normal".into()],
    ));
    for (label, n) in [
        ("1", 1u32),
        ("1k", 1000),
        ("100k", 100_000),
        ("1M", 1_000_000),
    ] {
        v.push(sc(
            &format!("flows-{label}"),
            &format!("{n} distinct 5-tuples through an L2 pipeline (dl_dst → port)"),
            vec![Some(Traffic::Flows(n)), None],
            vec![
                "table=0,priority=10,in_port=1,dl_dst=02:00:00:00:00:02,actions=output:2".into(),
                "table=0,priority=10,in_port=2,dl_dst=02:00:00:00:00:01,actions=output:1".into(),
                "table=0,priority=0,actions=drop".into(),
            ],
        ));
    }
    for m in [1usize, 16, 64] {
        v.push(sc(
            &format!("acl-{m}"),
            &format!("5-tuple ACL with {m} distinct masks, {ACL_FLOWS} flows"),
            vec![Some(Traffic::Flows(ACL_FLOWS)), None],
            acl_flows(m),
        ));
    }
    v.push(sc(
        "pipeline-4",
        "4 tables: metadata, goto, set-field dl_src, push VLAN, output",
        vec![Some(Traffic::OneFlow), None],
        vec![
            "table=0,priority=10,in_port=1,actions=write_metadata:0x1/0xff,goto_table:1".into(),
            "table=1,priority=10,ip,metadata=0x1/0xff,actions=set_field:02:00:00:00:00:aa->eth_src,goto_table:2".into(),
            "table=2,priority=10,udp,actions=push_vlan:0x8100,set_field:4196->vlan_vid,goto_table:3".into(),
            "table=3,priority=10,actions=output:2".into(),
        ],
    ));
    v.push(sc(
        "drop-100k",
        "100,000 UDP sources past a drop rule on one source (issue 20's table)",
        vec![Some(Traffic::Flows(100_000)), None],
        vec![
            "table=0,priority=100,udp,nw_src=11.1.1.1,actions=drop".into(),
            "table=0,priority=10,in_port=1,actions=output:2".into(),
        ],
    ));
    // Prefix tracking off: the drop rule then makes every source a megaflow of its own (with
    // it, the sweep through the address space would need about a thousand).
    let mut nf = sc(
        "new-flows",
        "every packet a new megaflow (exact IPv4 source, no prefix tracking): flow setups per second",
        vec![Some(Traffic::NewFlows), None],
        vec![
            "table=0,priority=10,ip,in_port=1,nw_src=10.0.0.1,actions=drop".into(),
            "table=0,priority=5,in_port=1,actions=output:2".into(),
        ],
    );
    nf.setups = true;
    nf.prefix_tracking = false;
    v.push(nf);
    for (label, per_sec, matching_every) in [
        ("0", 0, 0),
        ("100", 100, 0),
        ("1k", 1000, 0),
        ("10k", 10_000, 0),
        ("1k-1pct", 1000, 100),
    ] {
        let mut c = sc(
            &format!("churn-{label}"),
            &format!(
                "{CHURN_FLOWS} flows, a rule per source; {per_sec} flow-mods/s, each published{}",
                if matching_every > 0 {
                    " (1 % rewrite a used rule)"
                } else {
                    " (rules no packet matches)"
                }
            ),
            vec![Some(Traffic::Flows(CHURN_FLOWS)), None],
            Vec::new(),
        );
        c.rules = Rules::PerChurnSource;
        c.churn = (per_sec > 0).then_some(Churn {
            per_sec,
            matching_every,
            baseline: "churn-0",
        });
        v.push(c);
    }
    // The first table: one drop rule above a catch-all, so every flow's megaflow is
    // decided below the churned rules' priority and each change must be checked against it.
    for (label, per_sec) in [("0", 0), ("1k", 1000)] {
        let mut c = sc(
            &format!("churn-drop-{label}"),
            &format!(
                "{CHURN_FLOWS} flows through a drop rule and a catch-all; {per_sec} flow-mods/s"
            ),
            vec![Some(Traffic::Flows(CHURN_FLOWS)), None],
            vec![
                "table=0,priority=100,udp,nw_src=11.1.1.1,actions=drop".into(),
                "table=0,priority=10,in_port=1,actions=output:2".into(),
            ],
        );
        c.churn = (per_sec > 0).then_some(Churn {
            per_sec,
            matching_every: 0,
            baseline: "churn-drop-0",
        });
        v.push(c);
    }
    v
}

/// Looks scenarios up by name; `all` or an empty list means every scenario. Unknown names
/// are an error listing the known ones.
pub fn select(names: &[String]) -> Result<Vec<Scenario>, String> {
    let every = all();
    if names.is_empty() || names.iter().any(|n| n == "all") {
        return Ok(every);
    }
    let mut out = Vec::new();
    for n in names {
        match every.iter().find(|s| &s.name == n) {
            Some(s) => out.push(s.clone()),
            None => {
                let known: Vec<&str> = every.iter().map(|s| s.name.as_str()).collect();
                return Err(format!(
                    "unknown scenario {n:?}; known: {}",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_rules_have_the_asked_number_of_masks() {
        for m in [1, 16, 64] {
            let flows = acl_flows(m);
            assert_eq!(flows.len(), m + 1);
            let mut shapes: Vec<String> = flows[..m]
                .iter()
                .map(|f| {
                    let plen = f.split('/').nth(1).unwrap().split(',').next().unwrap();
                    format!("{plen}{}", f.contains("udp_dst"))
                })
                .collect();
            shapes.sort();
            shapes.dedup();
            assert_eq!(shapes.len(), m);
        }
    }

    #[test]
    fn churn_rules_and_mods_parse() {
        assert_eq!(churn_flows().len(), CHURN_FLOWS as usize + 1);
        assert_eq!(flow_src(CHURN_FLOWS - 1), "10.1.134.159");
        let mods = churn_mods(100).unwrap();
        assert_eq!(mods.len(), 2000);
        let rewrites = mods.iter().filter(|m| m.priority == 100).count();
        assert_eq!(rewrites, 20);
    }

    #[test]
    fn listing_builds_no_big_rule_set() {
        let every = all();
        let churn: Vec<&Scenario> = every
            .iter()
            .filter(|s| s.rules == Rules::PerChurnSource)
            .collect();
        assert_eq!(churn.len(), 5, "churn-0, -100, -1k, -10k, -1k-1pct");
        assert!(every.iter().all(|s| match &s.rules {
            Rules::Listed(v) => v.len() <= 65,
            Rules::PerChurnSource => s.name.starts_with("churn-"),
        }));
        assert_eq!(churn[0].rules.flows().len(), CHURN_FLOWS as usize + 1);
    }

    #[test]
    fn tunnel_scenarios_make_valid_tunnel_ports() {
        for name in [
            "vxlan-encap",
            "vxlan-encap-1k",
            "vxlan-decap",
            "vxlan-decap-500",
        ] {
            let s = &select(&[name.into()]).unwrap()[0];
            assert_eq!(s.baseline, Some("p2p-1flow"));
            let t = crate::tunnels::conf(3, "tun1", &s.tunnels[0])
                .unwrap()
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(t.next_hop.is_some());
            assert!(t.underlay.is_some());
        }
    }

    #[test]
    fn select_rejects_unknown_names() {
        let err = select(&["nope".into()]).unwrap_err();
        assert!(err.contains("p2p-1flow"));
        assert_eq!(select(&["acl-16".into()]).unwrap().len(), 1);
    }
}
