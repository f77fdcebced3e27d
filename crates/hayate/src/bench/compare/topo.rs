//! The two-host topology of `hayate bench compare`, in network namespaces it creates and
//! always removes.
//!
//! ```text
//! netns <p>A: <p>a0 10.77.0.1/24 ──veth── <p>a1 ┐
//!                                              ├─ the switch under test, in netns <p>S
//! netns <p>B: <p>b0 10.77.0.2/24 ──veth── <p>b1 ┘
//! ```
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
/// A destination behind B's MAC that B does not own: B's stack drops such packets at once,
/// so a packet-rate test measures the switch, not B's UDP stack.
pub const IP_SINK: &str = "10.77.0.99";

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
        };
        // From here on, Drop cleans up whatever part was made.
        t.build()?;
        Ok(t)
    }

    fn build(&self) -> Result<()> {
        for ns in [&self.ns_a, &self.ns_b, &self.ns_s] {
            run(Command::new("ip").args(["netns", "add", ns]))?;
            self.sh(ns, "ip link set lo up")?;
        }
        for (h, s, hns) in [
            (&self.a0, &self.a1, &self.ns_a),
            (&self.b0, &self.b1, &self.ns_b),
        ] {
            run(Command::new("ip").args([
                "link", "add", h, "netns", hns, "type", "veth", "peer", "name", s, "netns",
                &self.ns_s,
            ]))?;
        }
        for ns in [&self.ns_a, &self.ns_b, &self.ns_s] {
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
        Ok(())
    }

    /// Runs a shell command line inside namespace `ns`.
    pub fn sh(&self, ns: &str, line: &str) -> Result<Output> {
        run(&mut in_ns(ns, &["sh", "-c", line]))
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
        for ns in [&self.ns_a, &self.ns_b, &self.ns_s] {
            Topo::kill_all(ns);
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .output();
        }
    }
}
