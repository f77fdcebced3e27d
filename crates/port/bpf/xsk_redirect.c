// SPDX-License-Identifier: Apache-2.0 OR GPL-2.0
//
// Hayate's XDP program for AF_XDP ports: every frame that arrives on receive queue q of the
// interface goes to the AF_XDP socket in slot q of `hayate_xsks`; when no socket sits in that
// slot the frame goes on up the kernel stack (XDP_PASS), so queues the switch does not own keep
// working as before.
//
// Built by crates/port/build.rs with `clang -target bpf`; loaded, attached and detached by the
// switch (crates/port/src/afxdp/program.rs). Nothing prebuilt is committed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// One slot per receive queue; 64 is more queues than the switch opens on one interface.
struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} hayate_xsks SEC(".maps");

SEC("xdp")
int hayate_xsk(struct xdp_md *ctx)
{
    // The low bits of the flags are the action when the slot is empty (kernel 5.3 and later).
    return bpf_redirect_map(&hayate_xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
