//! What a bench needs installed (Debian packages), and what is missing: programs, files and
//! DPDK drivers, each named with the package that brings it.

use std::path::Path;

/// Open vSwitch's daemon built with DPDK, as Debian's openvswitch-switch-dpdk installs it.
pub const OVS_VSWITCHD_DPDK: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";
/// Open vSwitch's database schema.
pub const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// One thing a run needs, and the package that brings it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A program on PATH.
    Bin(&'static str, &'static str),
    /// A file.
    File(&'static str, &'static str),
    /// A DPDK driver (`librte_*.so` in DPDK's driver folder).
    Pmd(&'static str, &'static str),
}

/// dpdk-testpmd.
pub const TESTPMD: Need = Need::Bin("dpdk-testpmd", "dpdk-dev");
/// DPDK's virtio-user driver.
pub const VIRTIO: Need = Need::Pmd("librte_net_virtio", "librte-net-virtio23");
/// DPDK's ring mempool driver.
pub const RING: Need = Need::Pmd("librte_mempool_ring", "librte-mempool-ring23");
/// DPDK's pcap driver (net_pcap: a capture replayed without end).
pub const PCAP: Need = Need::Pmd("librte_net_pcap", "librte-net-pcap23");
/// DPDK's null driver (net_null: a sink).
pub const NULL: Need = Need::Pmd("librte_net_null", "librte-net-null23");
/// DPDK's vhost driver.
pub const VHOST: Need = Need::Pmd("librte_net_vhost", "librte-net-vhost23");
/// ovs-ofctl, which drives any OpenFlow switch.
pub const OVS_OFCTL: Need = Need::Bin("ovs-ofctl", "openvswitch-common");

/// A private Open vSwitch with DPDK ([`crate::ovs_dpdk`]) on net_pcap and net_null ports.
pub const OVS_DPDK: &[Need] = &[
    Need::File(OVS_VSWITCHD_DPDK, "openvswitch-switch-dpdk"),
    Need::File(OVS_SCHEMA, "openvswitch-common"),
    Need::Bin("ovs-vsctl", "openvswitch-switch"),
    Need::Bin("ovsdb-server", "openvswitch-common"),
    Need::Bin("ovsdb-tool", "openvswitch-common"),
    OVS_OFCTL,
    Need::Bin("ovs-appctl", "openvswitch-common"),
    Need::Bin("ip", "iproute2"),
    Need::Bin("mount", "mount"),
    PCAP,
    NULL,
];

fn present(n: Need) -> bool {
    match n {
        Need::Bin(b, _) => std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(b).exists()))
            .unwrap_or(false),
        Need::File(f, _) => Path::new(f).exists(),
        Need::Pmd(lib, _) => std::fs::read_dir("/usr/lib/x86_64-linux-gnu/dpdk")
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
            .any(|f| {
                let n = f.file_name().to_string_lossy().into_owned();
                n.starts_with(lib) && n.contains(".so")
            }),
    }
}

/// The package that brings `n`.
pub fn pkg(n: Need) -> &'static str {
    match n {
        Need::Bin(_, p) | Need::File(_, p) | Need::Pmd(_, p) => p,
    }
}

/// The packages of what is missing among `needs`, each once.
pub fn missing(needs: &[Need]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for &n in needs {
        if !present(n) && !out.contains(&pkg(n)) {
            out.push(pkg(n));
        }
    }
    out
}

/// Why `needs` are not met here, naming the packages to install; `None` when they are.
pub fn unmet(needs: &[Need]) -> Option<String> {
    let m = missing(needs);
    (!m.is_empty()).then(|| format!("not installed (apt-get install -y {})", m.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_missing_is_named_by_its_package_once() {
        assert!(OVS_DPDK
            .iter()
            .any(|n| pkg(*n) == "openvswitch-switch-dpdk"));
        let absent = [
            Need::Bin("no-such-program-here", "nope"),
            Need::File("/no/such/file/here", "nope"),
        ];
        assert_eq!(missing(&absent), vec!["nope"]);
        assert!(unmet(&absent).unwrap().contains("apt-get install -y nope"));
        assert_eq!(unmet(&[Need::Bin("sh", "dash")]), None);
    }
}
