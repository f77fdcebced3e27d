//! The two-host topology of `hayate bench compare`, in network namespaces it creates and
//! always removes.
//!
//! ```text
//! netns <p>A: <p>a0 10.77.0.1/24 ──veth── <p>a1 ┐
//!                                              ├─ the switch under test, in netns <p>S
//! netns <p>B: <p>b0 10.77.0.2/24 ──veth── <p>b1 ┘
//! ```
//!
//! [`Topo::up_with`] adds more hosts the same way (`hayate bench noisy`: a noisy host and
//! the sink of its frames): host `i` (from 0 after A and B) is netns `<p>C`, `<p>D`, …, with
//! interfaces `<p>c0` / `<p>c1`, …, address 10.77.0.(3 + i) and MAC 02:00:00:77:00:(03 + i).
//!
//! The switch lives in its own namespace so that nothing it creates (bridge devices, OVS's
//! internal port) can meet the host's interfaces. Every name starts with a prefix unique to
//! this process; [`Topo`]'s `Drop` kills what still runs inside the namespaces and deletes them.

use std::process::{Command, Output, Stdio};

use anyhow::{bail, Context, Result};

/// MAC address of host A.
pub const MAC_A: &str = "02:00:00:77:00:01";
/// MAC address of host B.
pub const MAC_B: &str = "02:00:00:77:00:02";
/// IPv4 address of host A.
pub const IP_A: &str = "10.77.0.1";
/// IPv4 address of host B.
pub const IP_B: &str = "10.77.0.2";
/// A destination behind B's MAC that B does not own: the packet-rate test's frames go there,
/// so that B delivers them to no socket. How B gets rid of them is [`Sink`].
pub const IP_SINK: &str = "10.77.0.99";

/// How host B disposes of the packet-rate test's frames (those to [`IP_SINK`]). On veths B's
/// receive runs on the core that transmitted into B's veth — the switch's, for a userspace
/// switch — so what B does with each frame weighs on the figure of the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sink {
    /// An nftables rule at B's interface's ingress hook drops them: the first thing B's
    /// kernel does with a received frame, so the figure is the switch's work and the
    /// transmit into the veth, not B's stack.
    Ingress,
    /// B's IP stack drops them: it forwards nothing, so each frame fails the input route
    /// lookup, which allocates an error route entry per frame (`ip_route_input_slow`,
    /// `rt_dst_alloc`, freed by RCU). The default, as every run in docs/benchmarks.md
    /// before `--sink` existed.
    Stack,
}

impl Sink {
    /// The name `--sink` takes.
    pub fn name(self) -> &'static str {
        match self {
            Sink::Ingress => "ingress",
            Sink::Stack => "stack",
        }
    }

    /// The program this sink needs on the machine, with its Debian package.
    pub fn needs(self) -> Option<(&'static str, &'static str)> {
        match self {
            Sink::Ingress => Some(("nft", "nftables")),
            Sink::Stack => None,
        }
    }
}

/// The namespaces and veths of one comparison.
#[derive(Debug)]
pub struct Topo {
    /// Namespace of host A.
    pub ns_a: String,
    /// Namespace of host B.
    pub ns_b: String,
    /// Namespace of the switch.
    pub ns_s: String,
    /// Host A's interface.
    pub a0: String,
    /// The switch's interface towards A.
    pub a1: String,
    /// Host B's interface.
    pub b0: String,
    /// The switch's interface towards B.
    pub b1: String,
    /// More hosts beside A and B ([`Topo::up_with`]).
    pub extra: Vec<Host>,
}

/// A host beyond A and B.
#[derive(Debug, Clone)]
pub struct Host {
    /// Its namespace.
    pub ns: String,
    /// Its interface.
    pub dev: String,
    /// The switch's interface towards it.
    pub sw: String,
    /// Its MAC address.
    pub mac: String,
    /// Its IPv4 address.
    pub ip: String,
}

/// Runs a command, failing with its stderr when it fails.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// `ip netns exec NS ARGS...` as a command to run or spawn.
pub fn in_ns(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(args);
    c
}

impl Topo {
    /// Builds the topology with names starting with `prefix` (at most 8 characters).
    pub fn up(prefix: &str) -> Result<Topo> {
        Topo::up_with(prefix, 0)
    }

    /// Builds the topology with `extra` more hosts (at most 20; module docs).
    pub fn up_with(prefix: &str, extra: usize) -> Result<Topo> {
        if extra > 20 {
            bail!("at most 20 hosts beside A and B");
        }
        if prefix.len() > 8 {
            bail!("namespace prefix '{prefix}' is longer than 8 characters");
        }
        let t = Topo {
            ns_a: format!("{prefix}A"),
            ns_b: format!("{prefix}B"),
            ns_s: format!("{prefix}S"),
            a0: format!("{prefix}a0"),
            a1: format!("{prefix}a1"),
            b0: format!("{prefix}b0"),
            b1: format!("{prefix}b1"),
            extra: (0..extra)
                .map(|i| {
                    let l = (b'c' + i as u8) as char;
                    Host {
                        ns: format!("{prefix}{}", l.to_ascii_uppercase()),
                        dev: format!("{prefix}{l}0"),
                        sw: format!("{prefix}{l}1"),
                        mac: format!("02:00:00:77:00:{:02x}", 3 + i),
                        ip: format!("10.77.0.{}", 3 + i),
                    }
                })
                .collect(),
        };
        // From here on, Drop cleans up whatever part was made.
        t.build()?;
        Ok(t)
    }

    /// Every namespace: A, B, the switch's, then the extra hosts'.
    fn namespaces(&self) -> Vec<&String> {
        let mut v = vec![&self.ns_a, &self.ns_b, &self.ns_s];
        v.extend(self.extra.iter().map(|h| &h.ns));
        v
    }

    /// The switch's interfaces, towards A, B, then the extra hosts: OpenFlow ports 1, 2, …
    /// in that order.
    pub fn switch_ports(&self) -> Vec<&str> {
        let mut v = vec![self.a1.as_str(), self.b1.as_str()];
        v.extend(self.extra.iter().map(|h| h.sw.as_str()));
        v
    }

    fn build(&self) -> Result<()> {
        for ns in self.namespaces() {
            run(Command::new("ip").args(["netns", "add", ns]))?;
            self.sh(ns, "ip link set lo up")?;
        }
        let mut links = vec![
            (&self.a0, &self.a1, &self.ns_a),
            (&self.b0, &self.b1, &self.ns_b),
        ];
        links.extend(self.extra.iter().map(|h| (&h.dev, &h.sw, &h.ns)));
        for (h, s, hns) in links {
            run(Command::new("ip").args([
                "link", "add", h, "netns", hns, "type", "veth", "peer", "name", s, "netns",
                &self.ns_s,
            ]))?;
        }
        for ns in self.namespaces() {
            // IPv4 only: IPv6 router solicitations and ND would add packets to the counts.
            self.sh(
                ns,
                "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1",
            )?;
        }
        let (a0, b0) = (&self.a0, &self.b0);
        self.sh(&self.ns_a, &format!("ip link set {a0} address {MAC_A}"))?;
        self.sh(&self.ns_b, &format!("ip link set {b0} address {MAC_B}"))?;
        self.sh(&self.ns_a, &format!("ip addr add {IP_A}/24 dev {a0}"))?;
        self.sh(&self.ns_b, &format!("ip addr add {IP_B}/24 dev {b0}"))?;
        self.sh(&self.ns_b, "sysctl -qw net.ipv4.ip_forward=0")?;
        self.sh(&self.ns_a, &format!("ip link set {a0} up"))?;
        self.sh(&self.ns_b, &format!("ip link set {b0} up"))?;
        self.sh(&self.ns_s, &format!("ip link set {} up", self.a1))?;
        self.sh(&self.ns_s, &format!("ip link set {} up", self.b1))?;
        // Static neighbours: generators and pings do not depend on ARP.
        self.sh(
            &self.ns_a,
            &format!("ip neigh replace {IP_B} lladdr {MAC_B} dev {a0} nud permanent"),
        )?;
        self.sh(
            &self.ns_b,
            &format!("ip neigh replace {IP_A} lladdr {MAC_A} dev {b0} nud permanent"),
        )?;
        for h in &self.extra {
            let (ns, dev) = (&h.ns, &h.dev);
            self.sh(
                ns,
                &format!(
                    "ip link set {dev} address {} && ip addr add {}/24 dev {dev} && \
                     sysctl -qw net.ipv4.ip_forward=0 && ip link set {dev} up",
                    h.mac, h.ip
                ),
            )?;
            self.sh(&self.ns_s, &format!("ip link set {} up", h.sw))?;
        }
        Ok(())
    }

    /// Runs a shell command line inside namespace `ns`.
    pub fn sh(&self, ns: &str, line: &str) -> Result<Output> {
        run(&mut in_ns(ns, &["sh", "-c", line]))
    }

    /// Sets up how host B disposes of frames to [`IP_SINK`].
    pub fn sink(&self, sink: Sink) -> Result<()> {
        match sink {
            Sink::Stack => Ok(()),
            Sink::Ingress => {
                let b0 = &self.b0;
                self.sh(
                    &self.ns_b,
                    &format!(
                        "nft add table netdev sink && \
                         nft add chain netdev sink in '{{ type filter hook ingress device {b0} priority 0; }}' && \
                         nft add rule netdev sink in ip daddr {IP_SINK} counter drop"
                    ),
                )
                .map(|_| ())
            }
        }
    }

    /// Turns the hosts' transmit offloads (checksum, TSO, GSO) on or off.
    pub fn host_offloads(&self, on: bool) -> Result<()> {
        let v = if on { "on" } else { "off" };
        for (ns, dev) in [(&self.ns_a, &self.a0), (&self.ns_b, &self.b0)] {
            self.sh(
                ns,
                &format!("ethtool -K {dev} tx {v} tso {v} gso {v} >/dev/null"),
            )?;
        }
        Ok(())
    }

    /// Steers the receive processing of hosts A's and B's interfaces to `core` (RPS), the
    /// core their programs run on. Without it, a frame a userspace switch writes into a host's
    /// veth has the host's whole receive stack (IP, TCP, the ACK it sends back) run on the
    /// writing CPU, inside the switch's system call: the switch's core would pay for its
    /// hosts' kernels, which for VMs run on the VMs' own vCPUs. (A kernel switch already
    /// does its work in the sender's softirq, on the sender's core.)
    pub fn host_rps(&self, core: usize) -> Result<()> {
        for (ns, dev) in [(&self.ns_a, &self.a0), (&self.ns_b, &self.b0)] {
            self.sh(
                ns,
                &format!(
                    "echo {:x} > /sys/class/net/{dev}/queues/rx-0/rps_cpus",
                    1u64 << core
                ),
            )?;
        }
        Ok(())
    }

    /// Turns GRO on or off on the switch's interface towards A. A veth receives through NAPI
    /// only with GRO on (or an XDP program attached), and XDP live frames reach only a peer
    /// that receives through NAPI.
    pub fn switch_gro_a(&self, on: bool) -> Result<()> {
        let v = if on { "on" } else { "off" };
        self.sh(
            &self.ns_s,
            &format!("ethtool -K {} gro {v} >/dev/null", self.a1),
        )
        .map(|_| ())
    }

    /// A counter of `dev` in `ns` (`rx_packets`, `tx_packets`, ...).
    pub fn counter(&self, ns: &str, dev: &str, name: &str) -> Result<u64> {
        let out = self.sh(ns, &format!("cat /sys/class/net/{dev}/statistics/{name}"))?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .with_context(|| format!("reading {name} of {dev}"))
    }

    /// Packets host B's interface received.
    pub fn rx_b(&self) -> Result<u64> {
        self.counter(&self.ns_b, &self.b0, "rx_packets")
    }

    /// Packets host A's interface sent.
    pub fn tx_a(&self) -> Result<u64> {
        self.counter(&self.ns_a, &self.a0, "tx_packets")
    }

    /// Kills every process still running in namespace `ns`.
    pub fn kill_all(ns: &str) {
        for sig in ["TERM", "KILL"] {
            let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() else {
                return;
            };
            let pids = String::from_utf8_lossy(&out.stdout).to_string();
            if pids.trim().is_empty() {
                return;
            }
            for pid in pids.split_whitespace() {
                let _ = Command::new("kill").args(["-s", sig, pid]).output();
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        for ns in self.namespaces() {
            Topo::kill_all(ns);
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .output();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames host B's IP stack could not route (`Ip: InAddrErrors` of its namespace).
    fn in_addr_errors(t: &Topo) -> u64 {
        let out = t.sh(&t.ns_b, "cat /proc/net/snmp").unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut ip = text.lines().filter(|l| l.starts_with("Ip:"));
        let (names, values) = (ip.next().unwrap(), ip.next().unwrap());
        let i = names
            .split_whitespace()
            .position(|n| n == "InAddrErrors")
            .unwrap();
        values.split_whitespace().nth(i).unwrap().parse().unwrap()
    }

    /// Packets the ingress sink's rule has dropped.
    fn sink_drops(t: &Topo) -> u64 {
        let out = t.sh(&t.ns_b, "nft list chain netdev sink in").unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let w: Vec<&str> = text.split_whitespace().collect();
        let i = w.iter().position(|&x| x == "packets").expect(&text);
        w[i + 1].parse().unwrap()
    }

    #[test]
    fn the_ingress_sink_drops_frames_before_host_b_routes_them() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if !root || run(Command::new("nft").arg("--version")).is_err() {
            eprintln!("SKIPPED: needs root and nft (scripts/setup.sh installs nftables)");
            return;
        }
        let prefix = format!("ht{}", std::process::id() % 100_000);
        for sink in [Sink::Stack, Sink::Ingress] {
            let t = Topo::up(&prefix).unwrap();
            t.sink(sink).unwrap();
            // A Linux bridge joins the hosts; A sends five pings to the sink behind B's MAC.
            t.sh(
                &t.ns_s,
                &format!(
                    "ip link add {p}br type bridge && ip link set {p}br up && \
                     ip link set {} master {p}br && ip link set {} master {p}br",
                    t.a1,
                    t.b1,
                    p = prefix
                ),
            )
            .unwrap();
            t.sh(
                &t.ns_a,
                &format!(
                    "ip neigh replace {IP_SINK} lladdr {MAC_B} dev {} nud permanent",
                    t.a0
                ),
            )
            .unwrap();
            let before = in_addr_errors(&t);
            t.sh(
                &t.ns_a,
                &format!("ping -n -q -c 5 -i 0.01 -W 1 {IP_SINK} >/dev/null || true"),
            )
            .unwrap();
            let stack_drops = in_addr_errors(&t) - before;
            match sink {
                Sink::Stack => assert_eq!(stack_drops, 5, "B's stack drops each frame"),
                Sink::Ingress => {
                    assert_eq!(stack_drops, 0, "no frame reaches B's IP stack");
                    assert_eq!(sink_drops(&t), 5, "the ingress rule drops each frame");
                }
            }
        }
    }
}
