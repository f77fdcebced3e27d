//! What each switch and topology of `hayate bench vhost` needs installed.

use crate::needs::{self, Need, NULL, OVS_DPDK, PCAP, RING, TESTPMD, VHOST, VIRTIO};

use super::{Sw, Topology};

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
        Sw::OvsDpdk => OVS_DPDK.to_vec(),
        Sw::DpdkVhost => vec![VHOST, PCAP, NULL, Need::Bin("mount", "mount")],
    }
}

/// Packages missing for the VMs' side, which every switch needs.
pub fn missing_common(topos: &[Topology]) -> Vec<&'static str> {
    needs::missing(&common(topos))
}

/// Why `sw` cannot run here, naming the packages to install.
pub fn unavailable(sw: Sw) -> Option<String> {
    needs::unmet(&of_switch(sw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hayate_needs_only_the_vms_and_ovs_names_its_package() {
        assert_eq!(unavailable(Sw::Hayate), None);
        assert!(of_switch(Sw::OvsDpdk)
            .iter()
            .any(|n| needs::pkg(*n) == "openvswitch-switch-dpdk"));
    }
}
