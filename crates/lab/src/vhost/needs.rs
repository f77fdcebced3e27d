//! What each switch and topology needs installed (Debian packages), and what is missing.

use std::path::Path;

use super::{Sw, Topology};

/// Open vSwitch's daemon built with DPDK, as Debian's openvswitch-switch-dpdk installs it.
pub const OVS_VSWITCHD_DPDK: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";
/// Open vSwitch's database schema.
pub const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// One thing a run needs, and the package that brings it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// A program on PATH.
    Bin(&'static str, &'static str),
    /// A file.
    File(&'static str, &'static str),
    /// A DPDK driver (`librte_*.so` in DPDK's driver folder).
    Pmd(&'static str, &'static str),
}

const TESTPMD: Need = Need::Bin("dpdk-testpmd", "dpdk-dev");
const VIRTIO: Need = Need::Pmd("librte_net_virtio", "librte-net-virtio23");
const RING: Need = Need::Pmd("librte_mempool_ring", "librte-mempool-ring23");
const PCAP: Need = Need::Pmd("librte_net_pcap", "librte-net-pcap23");
const NULL: Need = Need::Pmd("librte_net_null", "librte-net-null23");
const VHOST: Need = Need::Pmd("librte_net_vhost", "librte-net-vhost23");

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

fn pkg(n: Need) -> &'static str {
    match n {
        Need::Bin(_, p) | Need::File(_, p) | Need::Pmd(_, p) => p,
    }
}

/// The "VMs" (dpdk-testpmd on virtio-user) every switch needs.
fn common(topos: &[Topology]) -> Vec<Need> {
    let mut v = vec![TESTPMD, VIRTIO, RING];
    if topos.contains(&Topology::V2v) {
        v.extend([PCAP, NULL]);
    }
    v
}

fn of_switch(sw: Sw) -> Vec<Need> {
    match sw {
        Sw::Hayate => vec![],
        Sw::OvsDpdk => vec![
            Need::File(OVS_VSWITCHD_DPDK, "openvswitch-switch-dpdk"),
            Need::File(OVS_SCHEMA, "openvswitch-common"),
            Need::Bin("ovs-vsctl", "openvswitch-switch"),
            Need::Bin("ovsdb-server", "openvswitch-common"),
            Need::Bin("ovsdb-tool", "openvswitch-common"),
            Need::Bin("ovs-ofctl", "openvswitch-common"),
            Need::Bin("ovs-appctl", "openvswitch-common"),
            Need::Bin("ip", "iproute2"),
            Need::Bin("mount", "mount"),
            PCAP,
            NULL,
        ],
        Sw::DpdkVhost => vec![VHOST, PCAP, NULL, Need::Bin("mount", "mount")],
    }
}

fn missing_pkgs(needs: &[Need]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for &n in needs {
        if !present(n) && !out.contains(&pkg(n)) {
            out.push(pkg(n));
        }
    }
    out
}

/// Packages missing for the VMs' side, which every switch needs.
pub fn missing_common(topos: &[Topology]) -> Vec<&'static str> {
    missing_pkgs(&common(topos))
}

/// Why `sw` cannot run here, naming the packages to install.
pub fn unavailable(sw: Sw) -> Option<String> {
    let m = missing_pkgs(&of_switch(sw));
    (!m.is_empty()).then(|| format!("not installed (apt-get install -y {})", m.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hayate_needs_only_the_vms_and_ovs_names_its_package() {
        assert_eq!(unavailable(Sw::Hayate), None);
        assert!(of_switch(Sw::OvsDpdk)
            .iter()
            .any(|n| pkg(*n) == "openvswitch-switch-dpdk"));
        assert!(!missing_pkgs(&[Need::Bin("no-such-program-here", "nope")]).is_empty());
    }
}
