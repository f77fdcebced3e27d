//! What the tunnel interop tests share (`tunnel_vxlan.rs`, `tunnel_ipv6.rs`, `tunnel_ovs.rs`):
//! two hosts joined by an underlay veth pair whose addresses the hosts' kernels own, Hayate on
//! host 1 with a VM behind it and a tunnel port, a VM namespace behind host 2's tunnel end
//! (a kernel VXLAN / Geneve device in a Linux bridge, or Open vSwitch), and the traffic checks
//! between the two VMs (ping both ways in each family, iperf3 TCP).
//!
//! Offloads are off on the VM and underlay veths: super-packets are not encapsulated whole
//! yet. IPv6 is on only where a test asks for it (an IPv6 underlay, inner IPv6), with `nodad`
//! addresses so no test waits for duplicate address detection.

use super::{iperf3, must, ns_run, Hayate, IperfServer, Link, Net, PortKind};

/// The underlay addresses of host 1 (Hayate) and host 2, and their prefix length.
#[derive(Debug, Clone, Copy)]
pub struct UnderlayAddrs {
    /// Host 1's address (on Hayate's underlay interface).
    pub one: &'static str,
    /// Host 2's address.
    pub two: &'static str,
    /// The prefix length of both.
    pub prefix: u8,
}

/// An IPv4 underlay.
pub const UNDERLAY_V4: UnderlayAddrs = UnderlayAddrs {
    one: "192.168.77.1",
    two: "192.168.77.2",
    prefix: 24,
};

/// An IPv6 underlay.
pub const UNDERLAY_V6: UnderlayAddrs = UnderlayAddrs {
    one: "2001:db8::1",
    two: "2001:db8::2",
    prefix: 64,
};

/// The VMs' IPv4 addresses: behind host 1, behind host 2.
pub const VM_V4: [&str; 2] = ["10.77.0.1", "10.77.0.2"];
/// The VMs' IPv6 addresses (with `inner6`).
pub const VM_V6: [&str; 2] = ["fd77::1", "fd77::2"];
/// The VMs' MTU: room for the outer headers of either underlay family and a few Geneve
/// options on a 1500-byte underlay (docs/tunnels.md gives the exact figures).
pub const VM_MTU: &str = "1400";
/// The tunnel id every test uses.
pub const VNI: u32 = 42;

/// Turns offloads off on `ifname` in `ns` (super-packets are not encapsulated whole yet).
pub fn no_offloads(ns: &str, ifname: &str) {
    ns_run(
        ns,
        &[
            "ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
        ],
    );
}

/// Turns the offloads [`no_offloads`] turns off back on (the veth's defaults), for tests
/// of super-packets crossing the underlay whole.
pub fn offloads_on(ns: &str, ifname: &str) {
    ns_run(
        ns,
        &[
            "ethtool", "-K", ifname, "tx", "on", "sg", "on", "tso", "on", "gso", "on",
        ],
    );
}

/// The veth interfaces of namespace `ns`, by name.
pub fn veths(ns: &str) -> Vec<String> {
    let o = must(&["ip", "-n", ns, "-o", "link", "show", "type", "veth"]);
    o.lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Turns IPv6 on for `ifname` in `ns` (the harness turns it off on switch-side interfaces).
pub fn ipv6_on(ns: &str, ifname: &str) {
    let key = format!("net.ipv6.conf.{ifname}.disable_ipv6=0");
    must(&["ip", "netns", "exec", ns, "sysctl", "-q", "-w", &key]);
}

/// Adds address `addr/prefix` to `ifname` in `ns`, an IPv6 one without duplicate address
/// detection (IPv6 turned on first).
pub fn add_addr(ns: &str, ifname: &str, addr: &str, prefix: u8) {
    let cidr = format!("{addr}/{prefix}");
    if addr.contains(':') {
        ipv6_on(ns, ifname);
        must(&["ip", "-n", ns, "addr", "add", &cidr, "dev", ifname, "nodad"]);
    } else {
        must(&["ip", "-n", ns, "addr", "add", &cidr, "dev", ifname]);
    }
}

/// Whether `count` pings from namespace `ns` to `dst` are all answered.
pub fn ns_ping(ns: &str, dst: &str, count: u32) -> bool {
    let c = count.to_string();
    let deadline = (count + 3).to_string();
    ns_run(
        ns,
        &[
            "ping", "-c", &c, "-i", "0.2", "-W", "1", "-w", &deadline, "-q", dst,
        ],
    )
    .status
    .success()
}

/// Two hosts joined by an underlay veth pair: host 1 a switch namespace for Hayate, host 2 a
/// namespace for the other end of the tunnel.
pub struct TwoHosts {
    /// Host 1's namespace (Hayate's).
    pub h1: String,
    /// Host 2's namespace.
    pub h2: String,
    /// Host 1's underlay interface (Hayate's underlay port; host 1's kernel owns its address).
    pub u1: String,
    /// Host 2's underlay interface (its address is given by [`TwoHosts::new`] only when
    /// `address_two`).
    pub u2: String,
    /// The underlay addresses.
    pub under: UnderlayAddrs,
    /// Whether the VMs have IPv6 addresses too.
    pub inner6: bool,
}

impl TwoHosts {
    /// The two hosts and their underlay, offloads off on it. Host 2's underlay interface
    /// gets its address when `address_two` (a kernel tunnel device); Open vSwitch puts it on
    /// its bridge's internal port instead.
    pub fn new(net: &mut Net, under: UnderlayAddrs, inner6: bool, address_two: bool) -> TwoHosts {
        let h1 = net.switch_ns("h1");
        let h2 = net.switch_ns("h2");
        let (u1, u2) = net.trunk(&h1, &h2, "u");
        add_addr(&h1, &u1, under.one, under.prefix);
        if address_two {
            add_addr(&h2, &u2, under.two, under.prefix);
        }
        no_offloads(&h1, &u1);
        no_offloads(&h2, &u2);
        TwoHosts {
            h1,
            h2,
            u1,
            u2,
            under,
            inner6,
        }
    }

    /// The VM addresses of VM `i` (0 behind host 1, 1 behind host 2) as `addr/prefix`.
    fn vm_addrs(&self, i: usize) -> Vec<(&'static str, u8)> {
        let mut a = vec![(VM_V4[i], 24)];
        if self.inner6 {
            a.push((VM_V6[i], 64));
        }
        a
    }

    /// The VM behind host 2: a namespace joined to host 2 by a veth; returns (the VM's
    /// namespace, host 2's end of the veth, to put in its bridge). Addresses, MTU and no
    /// offloads are set on the VM's end.
    pub fn vm2(&self, net: &mut Net) -> (String, String) {
        let vm_ns = net.ns("v2");
        let (b2, vm_if) = net.trunk(&self.h2, &vm_ns, "w");
        for (a, p) in self.vm_addrs(1) {
            add_addr(&vm_ns, &vm_if, a, p);
        }
        must(&["ip", "-n", &vm_ns, "link", "set", &vm_if, "mtu", VM_MTU]);
        no_offloads(&vm_ns, &vm_if);
        no_offloads(&self.h2, &b2);
        (vm_ns, b2)
    }

    /// Host 2's end: a kernel `kind` device (`vxlan` or `geneve`, VNI [`VNI`]) in a Linux
    /// bridge with VM 2; VM 2's namespace, or `None` when this kernel has no such devices
    /// (said in a SKIPPED line).
    pub fn kernel_peer(&self, net: &mut Net, kind: &str) -> Option<String> {
        let dev = format!("{}vx", net.prefix);
        let br = format!("{}br", net.prefix);
        let vni = VNI.to_string();
        let mut args: Vec<&str> = vec![
            "ip",
            "-n",
            &self.h2,
            "link",
            "add",
            &dev,
            "type",
            kind,
            "id",
            &vni,
            "remote",
            self.under.one,
        ];
        if kind == "vxlan" {
            args.extend([
                "local",
                self.under.two,
                "dstport",
                "4789",
                "dev",
                self.u2.as_str(),
            ]);
        }
        let o = super::run(&args);
        if !o.status.success() {
            eprintln!(
                "SKIPPED {kind}: this kernel has no {kind} devices ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return None;
        }
        let (vm_ns, b2) = self.vm2(net);
        must(&["ip", "-n", &self.h2, "link", "add", &br, "type", "bridge"]);
        for i in [&dev, &b2] {
            must(&["ip", "-n", &self.h2, "link", "set", i, "master", &br]);
            must(&["ip", "-n", &self.h2, "link", "set", i, "up"]);
        }
        must(&["ip", "-n", &self.h2, "link", "set", &br, "up"]);
        Some(vm_ns)
    }

    /// The VM behind Hayate (port 1), not yet configured ([`TwoHosts::hayate`] does).
    pub fn vm1(&self, net: &mut Net) -> Link {
        let addrs: Vec<String> = self
            .vm_addrs(0)
            .iter()
            .map(|(a, p)| format!("{a}/{p}"))
            .collect();
        let addrs: Vec<&str> = addrs.iter().map(String::as_str).collect();
        net.link(PortKind::AfPacket, "v1", &self.h1, &addrs)
    }

    /// Starts Hayate on host 1 with VM 1's port (1), the underlay port (2) and the tunnel
    /// port `tunnel` (3), flows joining ports 1 and 3; configures VM 1 and resolves the
    /// underlay neighbour (a ping from host 1 to host 2, which must answer).
    pub fn hayate(&self, net: &Net, vm1: &Link, tunnel: &str) -> Hayate {
        let ports = [
            format!("{},vnet_hdr=off", vm1.spec()),
            format!("afpacket:{},vnet_hdr=off", self.u1),
            tunnel.to_string(),
        ];
        let hayate = net.hayate(
            &self.h1,
            &ports,
            &["in_port=1,actions=output:3", "in_port=3,actions=output:1"],
            &[1],
        );
        net.configure(vm1, &self.h1);
        must(&[
            "ip",
            "-n",
            &vm1.host_ns,
            "link",
            "set",
            &vm1.host_if,
            "mtu",
            VM_MTU,
        ]);
        no_offloads(&vm1.host_ns, &vm1.host_if);
        assert!(
            ns_ping(&self.h1, self.under.two, 2),
            "underlay ping {} -> {}",
            self.under.one,
            self.under.two
        );
        hayate
    }

    /// The checks every interop test makes: VM 1 reaches VM 2 (retried while next hops and
    /// neighbours settle, at most 10 tries), pings both ways in each of the VMs' families,
    /// and an iperf3 TCP stream from VM 1 to VM 2 in each family moves more than 1 MB in 2 s.
    /// `what` names the case in messages.
    pub fn check_traffic(&self, what: &str, vm1: &Link, vm2_ns: &str, hayate: &Hayate) {
        let first = (0..10).any(|_| vm1.reaches(VM_V4[1]));
        assert!(first, "{what}: VM 1 -> VM 2; log: {}", hayate.log_text());
        let mut families = vec![VM_V4];
        if self.inner6 {
            families.push(VM_V6);
        }
        for [a1, a2] in families {
            let reached = (0..10).any(|_| vm1.reaches(a2));
            assert!(reached, "{what}: VM 1 -> {a2}; log: {}", hayate.log_text());
            assert!(vm1.ping(a2, 3), "{what}: ping VM 1 -> {a2}");
            assert!(ns_ping(vm2_ns, a1, 3), "{what}: ping VM 2 -> {a1}");
            let no_ports = self.udp_no_ports();
            let server = IperfServer::start(vm2_ns);
            let v = iperf3(vm1, &["-c", a2, "-t", "2"]);
            server.reap();
            let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
            eprintln!("{what}: iperf3 TCP VM 1 -> {a2}: {bytes} bytes in 2 s");
            assert!(bytes > 1_000_000, "{what}: TCP to {a2}: {bytes} bytes");
            // Host 1's stack never saw the tunnel packets Hayate's AF_PACKET underlay took
            // (it would have counted each as UDP to a port with no socket, and answered).
            assert_eq!(
                self.udp_no_ports(),
                no_ports,
                "{what}: host 1's kernel received tunnel packets; log: {}",
                hayate.log_text()
            );
        }
    }

    /// Host 1's kernel's count of UDP datagrams to a port without a socket (IPv4 and IPv6).
    pub fn udp_no_ports(&self) -> u64 {
        udp_stat(&self.h1, "NoPorts") + udp_stat(&self.h1, "Udp6NoPorts")
    }
}

/// A UDP counter of the kernel of namespace `ns`: `name` from /proc/net/snmp's `Udp:` lines
/// (`NoPorts`, `InCsumErrors`), or from /proc/net/snmp6 when it starts with `Udp6`.
pub fn udp_stat(ns: &str, name: &str) -> u64 {
    let file = if name.starts_with("Udp6") {
        "/proc/net/snmp6"
    } else {
        "/proc/net/snmp"
    };
    let o = ns_run(ns, &["cat", file]);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    if file.ends_with('6') {
        return text
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(0);
    }
    // /proc/net/snmp: a header line of names, then a line of values, per protocol.
    let mut lines = text.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find_map(|(n, v)| (n == name).then(|| v.parse().ok())?)
        .unwrap_or(0)
}
