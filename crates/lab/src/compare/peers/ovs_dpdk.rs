//! Open vSwitch with DPDK on the topology's veths: the private instance of
//! [`crate::ovs_dpdk`] started in the switch namespace, each switch-side veth a `dpdk` port
//! through DPDK's `net_af_packet` driver, the PMD thread on the switch core. Its ingress
//! policing (`ingress_policing_rate`/`_burst`) is DPDK's own meter in the PMD thread — the
//! one Open vSwitch that polices where the kernel lacks tc's police action (as on the
//! development machine), and the policing a cloud running Open vSwitch with DPDK uses.
//! Flows: `ovs-ofctl add-flow` above the bridge's NORMAL flow (standalone).

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::{Peer, StartCtx, Started};
use crate::needs::OVS_VSWITCHD_DPDK;
use crate::ovs_dpdk::{Ovs, Setup};
use crate::sys::host::Huge;

/// 2 MiB pages for DPDK's memory (`dpdk-socket-mem=1024`, and some to spare).
const PAGES: u64 = 560;

/// Open vSwitch with DPDK on `net_af_packet` ports.
pub struct OvsDpdk;

/// The running instance and the huge pages under it (dropped in this order).
struct Running {
    ovs: Ovs,
    _huge: Huge,
}

impl Started for Running {
    fn check_alive(&mut self) -> Result<()> {
        self.ovs.alive()
    }
}

impl Peer for OvsDpdk {
    fn name(&self) -> &'static str {
        "ovs-dpdk"
    }

    fn unavailable(&self) -> Option<String> {
        (!Path::new(OVS_VSWITCHD_DPDK).exists()).then(|| {
            "Open vSwitch with DPDK is not installed (apt-get install openvswitch-switch-dpdk)"
                .into()
        })
    }

    fn start(&self, cx: &StartCtx<'_>) -> Result<Box<dyn Started>> {
        // A folder per start (a bench starts each switch with policing off, then on).
        let dir = cx.dir.join(match cx.police {
            Some(_) => "ovs-dpdk-policed",
            None => "ovs-dpdk",
        });
        let _ = std::fs::remove_dir_all(dir.join("ovs"));
        std::fs::create_dir_all(&dir)?;
        let huge = Huge::add(PAGES, &dir)?;
        let setup = Setup {
            tag: format!("hn{}", std::process::id() % 100_000),
            pmd_core: cx.core,
            main_core: cx.host_core,
            lifetime: Duration::from_secs(3600),
            netns: Some(cx.topo.ns_s.clone()),
        };
        let ovs = Ovs::start(&setup, &dir.join("ovs"), huge.path())?;
        let devs = cx.topo.switch_ports();
        let ports: Vec<(String, u32, Vec<String>)> = devs
            .iter()
            .enumerate()
            .map(|(i, dev)| {
                let mut opts = vec![format!(
                    "options:dpdk-devargs=net_af_packet{i},iface={dev},qpairs=1"
                )];
                if let Some(p) = cx.police.filter(|p| p.dev == *dev) {
                    opts.push(format!("ingress_policing_rate={}", p.kbps));
                    opts.push(format!("ingress_policing_burst={}", p.burst_kbit));
                }
                (format!("p{}", i + 1), i as u32 + 1, opts)
            })
            .collect();
        let ports: Vec<(&str, u32, &str, Vec<String>)> = ports
            .iter()
            .map(|(n, no, o)| (n.as_str(), *no, "dpdk", o.clone()))
            .collect();
        ovs.add_ports(&ports)?;
        for f in cx.flows {
            ovs.ofctl("add-flow", &[f])?;
        }
        Ok(Box::new(Running { ovs, _huge: huge }))
    }
}
