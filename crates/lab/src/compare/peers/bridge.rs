//! The Linux bridge, the reference every ratio is taken to. With veths its work runs on the
//! sender's core (the generator's, iperf3's and ping's); with `rps`, receive packet steering
//! on the switch-side veths hands each frame to the switch core's backlog, where the bridge
//! forwards it and host B's stack receives it: what crossing cores costs a switch that pays
//! no userspace cost. Policing: a tc `police` action (matchall) on the policed interface's
//! ingress qdisc, which drops the excess before the bridge sees it; on a kernel without tc's
//! police action (`act_police`), an nftables `limit` rule at the interface's ingress hook,
//! which does the same a step later.

use anyhow::Result;

use super::{Peer, StartCtx, Started};
use crate::compare::topo::in_ns;

/// The Linux bridge, with or without RPS to the switch core.
pub struct Bridge {
    /// Steer the veths' receive work to the switch core.
    pub rps: bool,
}

/// A bridge device; dropping it deletes it.
struct Device {
    ns: String,
    br: String,
}

impl Started for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = in_ns(&self.ns, &["ip", "link", "del", &self.br]).output();
    }
}

impl Peer for Bridge {
    fn name(&self) -> &'static str {
        if self.rps {
            "linux-bridge-rps"
        } else {
            "linux-bridge"
        }
    }

    fn start(&self, cx: &StartCtx<'_>) -> Result<Box<dyn Started>> {
        let topo = cx.topo;
        let br = format!("{}br", &topo.ns_s[..topo.ns_s.len() - 1]);
        topo.sh(
            &topo.ns_s,
            &format!("ip link add {br} type bridge stp_state 0 forward_delay 0"),
        )?;
        let device = Device {
            ns: topo.ns_s.clone(),
            br: br.clone(),
        };
        for dev in topo.switch_ports() {
            topo.sh(&topo.ns_s, &format!("ip link set {dev} master {br}"))?;
            if self.rps {
                topo.sh(
                    &topo.ns_s,
                    &format!(
                        "echo {m:x} > /sys/class/net/{dev}/queues/rx-0/rps_cpus",
                        m = 1u64 << cx.core
                    ),
                )?;
            }
        }
        topo.sh(&topo.ns_s, &format!("ip link set {br} up"))?;
        if let Some(p) = cx.police {
            let tc = topo.sh(
                &topo.ns_s,
                &format!(
                    "tc qdisc add dev {d} handle ffff: ingress && \
                     tc filter add dev {d} parent ffff: matchall action police \
                     rate {r}kbit burst {b}kb conform-exceed drop",
                    d = p.dev,
                    r = p.kbps,
                    b = p.burst_kbit.div_ceil(8)
                ),
            );
            if tc.is_err() {
                topo.sh(
                    &topo.ns_s,
                    &format!(
                        "nft add table netdev police && \
                         nft add chain netdev police in '{{ type filter hook ingress device {d} priority 0; }}' && \
                         nft add rule netdev police in limit rate over {r} bytes/second burst {b} bytes drop",
                        d = p.dev,
                        r = p.kbps * 1000 / 8,
                        b = p.burst_kbit * 1000 / 8
                    ),
                )?;
            }
        }
        Ok(Box::new(device))
    }
}
