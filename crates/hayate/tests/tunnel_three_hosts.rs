//! Three hosts each running Hayate, one controller for all three (issue 18): namespaces as
//! hosts on an underlay Linux bridge, each host with a VM of tenant A (VNI 100) and one of
//! tenant B (VNI 200), and VXLAN tunnel ports to the two other hosts: one per (peer, VNI),
//! or one per peer with `vni=flow` (then only the flows' `tun_id` keeps the tenants apart).
//! One os-ken controller on the underlay (tests/controllers/overlay.py) programs the three
//! switches over OpenFlow: traffic from a VM gets `set_field:VNI->tun_id` and goes to its
//! tenant's tunnels, and only tunnel traffic with the tenant's `tun_id` reaches the VM. Any VM
//! reaches every other VM of its tenant, no VM reaches the other tenant's (all VMs share one
//! subnet, so it is the overlay alone that keeps them apart), and stopping one host's Hayate
//! costs only its own VMs' traffic.

mod controller_common;
mod netns;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use controller_common::Process;
use netns::tunnel::{add_addr, no_offloads, ns_ping, VM_MTU};
use netns::{iperf3, must, Hayate, IperfServer, Link, Net, PortKind};

/// The hosts, numbered from 1 (host `h`'s underlay address is 192.168.78.`h`).
const HOSTS: [u8; 3] = [1, 2, 3];
/// The tenants: tunnel id and the last byte of its VMs' addresses on host 1 (host `h` adds
/// `h - 1`).
const TENANTS: [(u32, u8); 2] = [(100, 10), (200, 20)];
/// The controller's address on the underlay bridge, and its port.
const CONTROLLER: &str = "192.168.78.254";
const CONTROLLER_PORT: u16 = 6653;

fn underlay_addr(h: u8) -> String {
    format!("192.168.78.{h}")
}

fn vm_addr(tenant: usize, h: u8) -> String {
    format!("10.90.0.{}", TENANTS[tenant].1 + h - 1)
}

fn vm_mac(tenant: usize, h: u8) -> String {
    format!("02:00:00:00:{:02x}:{h:02x}", TENANTS[tenant].0 / 100)
}

/// One host: its own [`Net`] (each Hayate has its own management folder), its namespace,
/// its VMs by tenant, its Hayate.
struct Host {
    _net: Net,
    ns: String,
    vms: Vec<Link>,
    hayate: Option<Hayate>,
}

/// How each host's tunnel ports are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One port per (peer host, tenant): `vxlan:remote=PEER,vni=VNI`.
    PerVni,
    /// One port per peer host: `vxlan:remote=PEER,vni=flow`, the flows setting and matching
    /// `tun_id`.
    VniFlow,
}

/// The tunnel ports of host `h`, in order from port 4: for each other host, one per tenant
/// (`Some(VNI)`) or one for all (`None`: `vni=flow`).
fn tunnel_ports(h: u8, layout: Layout) -> Vec<(u8, Option<u32>)> {
    let peers = HOSTS.iter().copied().filter(move |&p| p != h);
    match layout {
        Layout::PerVni => peers
            .flat_map(|p| TENANTS.iter().map(move |&(vni, _)| (p, Some(vni))))
            .collect(),
        Layout::VniFlow => peers.map(|p| (p, None)).collect(),
    }
}

/// The topology the controller reads (tests/controllers/overlay.py says its form).
fn topology(layout: Layout) -> serde_json::Value {
    let mut tenants = serde_json::Map::new();
    for (t, (vni, _)) in TENANTS.iter().enumerate() {
        let mut members = serde_json::Map::new();
        for h in HOSTS {
            members.insert(
                h.to_string(),
                serde_json::json!({"port": t + 1, "mac": vm_mac(t, h)}),
            );
        }
        tenants.insert(vni.to_string(), members.into());
    }
    let mut tunnels = serde_json::Map::new();
    for h in HOSTS {
        let mut peers = serde_json::Map::new();
        for (i, (p, vni)) in tunnel_ports(h, layout).into_iter().enumerate() {
            let e = peers
                .entry(p.to_string())
                .or_insert_with(|| serde_json::json!({}));
            for (v, _) in TENANTS.iter().filter(|(v, _)| vni.is_none_or(|n| n == *v)) {
                e[v.to_string()] = serde_json::json!(4 + i);
            }
        }
        tunnels.insert(h.to_string(), peers.into());
    }
    serde_json::json!({"tenants": tenants, "tunnels": tunnels})
}

/// Whether VM `from` reaches `dst`, tried up to 10 times while flows and neighbours settle.
fn eventually_reaches(from: &Link, dst: &str) -> bool {
    (0..10).any(|_| from.reaches(dst))
}

#[test]
fn one_controller_runs_tenant_overlays_across_three_hayates() {
    three_hosts("tunnel_three_hosts", Layout::PerVni);
}

#[test]
fn one_controller_runs_tenant_overlays_over_vni_flow_ports() {
    three_hosts("tunnel_three_hosts_vni_flow", Layout::VniFlow);
}

/// Three hosts with tunnel ports laid out as `layout`; `test` names the test in SKIPPED
/// lines.
fn three_hosts(test: &str, layout: Layout) {
    if !netns::can_run(test, &["ping", "iperf3", "ethtool", "ss"]) {
        return;
    }
    let Some(py) = controller_common::osken_python() else {
        eprintln!("SKIPPED {test}: no venv with os-ken; run scripts/setup.sh");
        return;
    };
    // The underlay: a Linux bridge in its own namespace, with the controller on it.
    let mut under = Net::new();
    let ul = under.ns("ul");
    let br = format!("{}br", under.prefix);
    must(&["ip", "-n", &ul, "link", "add", &br, "type", "bridge"]);
    must(&["ip", "-n", &ul, "link", "set", &br, "up"]);
    add_addr(&ul, &br, CONTROLLER, 24);
    let topo = under.dir.path().join("topology.json");
    std::fs::write(&topo, topology(layout).to_string()).expect("write topology");
    let log = under.dir.path().join("osken.log");
    let app = controller_common::repo_file("tests/controllers/overlay.py");
    let _controller = Process(
        Command::new("ip")
            .args(["netns", "exec", &ul])
            .arg(&py)
            .arg(&app)
            .arg(&topo)
            .arg(CONTROLLER_PORT.to_string())
            .arg(CONTROLLER)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("controller log"))
            .spawn()
            .expect("start os-ken"),
    );
    let controller_log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        netns::wait_listening(&ul, CONTROLLER_PORT, Duration::from_secs(30)),
        "os-ken did not listen: {}",
        controller_log()
    );

    let mut hosts: Vec<Host> = Vec::new();
    for h in HOSTS {
        let mut net = Net::new();
        let ns = net.switch_ns("h");
        let vms: Vec<Link> = (0..TENANTS.len())
            .map(|t| {
                let addr = format!("{}/24", vm_addr(t, h));
                let vm = net.link(PortKind::AfPacket, &format!("t{t}"), &ns, &[&addr]);
                let mac = vm_mac(t, h);
                must(&[
                    "ip",
                    "-n",
                    &vm.host_ns,
                    "link",
                    "set",
                    &vm.host_if,
                    "address",
                    &mac,
                ]);
                vm
            })
            .collect();
        let (ul_if, u) = net.trunk(&ul, &ns, "u");
        must(&["ip", "-n", &ul, "link", "set", &ul_if, "master", &br]);
        add_addr(&ns, &u, &underlay_addr(h), 24);
        no_offloads(&ns, &u);
        let mut ports: Vec<String> = vms
            .iter()
            .map(|vm| format!("{},vnet_hdr=off", vm.spec()))
            .collect();
        ports.push(format!("afpacket:{u},vnet_hdr=off"));
        for (p, vni) in tunnel_ports(h, layout) {
            let vni = vni.map_or("flow".to_string(), |v| v.to_string());
            ports.push(format!("vxlan:remote={},vni={vni}", underlay_addr(p)));
        }
        let bridge = format!(
            "controllers = [\"tcp:{CONTROLLER}:{CONTROLLER_PORT}\"]\nfail_mode = \"secure\"\n\
             datapath_id = \"0x{h:016x}\""
        );
        let hayate = net.hayate_with(&ns, &ports, &[], &[1], &bridge);
        for vm in &vms {
            net.configure(vm, &ns);
            must(&[
                "ip",
                "-n",
                &vm.host_ns,
                "link",
                "set",
                &vm.host_if,
                "mtu",
                VM_MTU,
            ]);
            no_offloads(&vm.host_ns, &vm.host_if);
        }
        hosts.push(Host {
            _net: net,
            ns,
            vms,
            hayate: Some(hayate),
        });
    }
    // The underlay neighbours, which Hayate's next hops come from.
    for (i, host) in hosts.iter().enumerate() {
        for p in HOSTS.iter().filter(|&&p| p != HOSTS[i]) {
            assert!(ns_ping(&host.ns, &underlay_addr(*p), 2), "underlay ping");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while HOSTS
        .iter()
        .any(|h| !controller_log().contains(&format!("switch {h:016x} connected")))
    {
        if Instant::now() >= deadline {
            // What the switches that did not connect said, so that a failure here explains
            // itself.
            let log = controller_log();
            let silent: Vec<String> = HOSTS
                .iter()
                .zip(&hosts)
                .filter(|(h, _)| !log.contains(&format!("switch {h:016x} connected")))
                .map(|(h, host)| {
                    let text = host
                        .hayate
                        .as_ref()
                        .map(Hayate::log_text)
                        .unwrap_or_default();
                    format!("host {h}'s Hayate:\n{text}")
                })
                .collect();
            panic!("not every switch connected: {log}\n{}", silent.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    // Any VM reaches every other VM of its tenant.
    for t in 0..TENANTS.len() {
        for (i, from) in hosts.iter().enumerate() {
            for h in HOSTS.iter().filter(|&&h| h != HOSTS[i]) {
                let dst = vm_addr(t, *h);
                assert!(
                    eventually_reaches(&from.vms[t], &dst),
                    "tenant {t}: host {} -> {dst}; host log: {}\ncontroller: {}",
                    HOSTS[i],
                    from.hayate.as_ref().unwrap().log_text(),
                    controller_log()
                );
                assert!(from.vms[t].ping(&dst, 3), "tenant {t}: ping -> {dst}");
            }
        }
    }
    // TCP across the overlay.
    let server = IperfServer::start(&hosts[1].vms[0].host_ns);
    let v = iperf3(&hosts[0].vms[0], &["-c", &vm_addr(0, 2), "-t", "2"]);
    server.reap();
    let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    eprintln!("iperf3 TCP tenant A host 1 -> host 2: {bytes} bytes in 2 s");
    assert!(bytes > 1_000_000, "TCP across the overlay: {bytes} bytes");

    // Tenants stay apart, on other hosts and on the same one.
    for (from_h, t, to_h) in [(0, 0, 2), (2, 1, 1), (0, 0, 1), (1, 1, 2)] {
        let dst = vm_addr(1 - t, to_h);
        assert!(
            !hosts[from_h].vms[t].reaches(&dst),
            "tenant {t} on host {} reached the other tenant's {dst}",
            HOSTS[from_h]
        );
    }

    // Host 3's switch goes away: only its VMs' traffic is lost.
    hosts[2].hayate.take().unwrap().stop();
    for t in 0..TENANTS.len() {
        assert!(
            hosts[0].vms[t].ping(&vm_addr(t, 2), 3),
            "tenant {t}: host 1 -> host 2 with host 3 down"
        );
        assert!(
            hosts[1].vms[t].ping(&vm_addr(t, 1), 3),
            "tenant {t}: host 2 -> host 1 with host 3 down"
        );
        assert!(
            !hosts[0].vms[t].reaches(&vm_addr(t, 3)),
            "tenant {t}: host 3's VM still reached with its switch stopped"
        );
    }
    let text = controller_log();
    assert!(
        !text.contains("OFP error"),
        "the switches sent errors:\n{text}"
    );
    for host in &mut hosts {
        if let Some(h) = host.hayate.take() {
            h.stop();
        }
    }
}
