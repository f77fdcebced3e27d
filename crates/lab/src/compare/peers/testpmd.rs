//! dpdk-testpmd forwarding between two AF_XDP ports (`--forward-mode=io`): no parsing, no
//! lookup, port 0 to port 1 and back. Not a switch: the floor of what any userspace switch on
//! these AF_XDP ports costs, to show how much of a figure is the kernel's.

use std::fs::File;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};

use super::child::ChildSwitch;
use super::{Peer, StartCtx, Started};
use crate::compare::generator::{self, Generator};

/// dpdk-testpmd io forwarding on AF_XDP ports.
pub struct TestpmdAfxdp;

impl Peer for TestpmdAfxdp {
    fn name(&self) -> &'static str {
        "testpmd-afxdp"
    }

    fn unavailable(&self) -> Option<String> {
        Generator::TestpmdAfxdp.unavailable()
    }

    fn multiport(&self) -> bool {
        false
    }

    fn start(&self, cx: &StartCtx<'_>) -> Result<Box<dyn Started>> {
        // Its main lcore (which only prints statistics) shares the core.
        let lcores = format!("0@{c},1@{c}", c = cx.core);
        let vdev =
            |i: usize, dev: &str| format!("net_af_xdp{i},iface={dev},start_queue=0,queue_count=1");
        let err = cx.dir.join(format!("{}.err", self.name()));
        let child = generator::testpmd(
            &cx.topo.ns_s,
            &["--lcores", &lcores, "--main-lcore", "0"],
            "sw",
            &[vdev(0, &cx.topo.a1), vdev(1, &cx.topo.b1)],
            &["--forward-mode=io", "--total-num-mbufs=16384"],
        )?
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&err)?)
        .spawn()
        .context("starting dpdk-testpmd")?;
        ChildSwitch { child, err }.settled(Duration::from_secs(2))
    }
}
