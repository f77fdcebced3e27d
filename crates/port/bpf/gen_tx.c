// SPDX-License-Identifier: Apache-2.0 OR GPL-2.0
//
// Hayate's XDP transmitter for `hayate gen send --port xdplive:IFNAME`: never attached to an
// interface, only run by BPF_PROG_TEST_RUN in live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES,
// Linux 5.18+), where the kernel feeds it copies of one frame as if received on the interface,
// and XDP_TX sends each out of that interface through the driver's ndo_xdp_xmit, in bulk:
// no socket buffer per packet, no system call per batch.
//
// Built by crates/port/build.rs with `clang -target bpf`; loaded by crates/port/src/xdplive.rs.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int hayate_gen_tx(struct xdp_md *ctx)
{
    return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
