// SPDX-License-Identifier: Apache-2.0 OR GPL-2.0
//
// Hayate's XDP program for AF_XDP ports: every frame that arrives on receive queue q of the
// interface goes to the AF_XDP socket in slot q of `hayate_xsks`; when no socket sits in that
// slot the frame goes on up the kernel stack (XDP_PASS), so queues the switch does not own keep
// working as before.
//
// With `prio=on` (bit 0 of `hayate_cfg`), control frames go up the kernel stack too, where the
// port's AF_PACKET priority socket reads them for the switch's priority lane: ARP, ICMP,
// ICMPv6, and TCP SYNs without payload, FIN or RST — the same class as the AF_PACKET port's
// fanout program (crates/port/src/afpacket/steer.rs). Frames with a VLAN tag in the data are
// bulk.
//
// With ingress policing set (`hayate_police`, written by the switch), frames beyond the port's
// rate are dropped here, before they are copied to the switch or cost it a receive: a token
// bucket of bytes and one of packets under a spin lock, refilled from the time of the last
// frame (at most a second's worth), as the datapath's own policer (crates/datapath/src/
// police.rs) does after receive. Control frames are policed too. Drops are counted per CPU in
// `hayate_police_drops`.
//
// Built by crates/port/build.rs with `clang -target bpf`; loaded, attached and detached by the
// switch (crates/port/src/afxdp/program.rs). Nothing prebuilt is committed.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// One slot per receive queue; 64 is more queues than the switch opens on one interface.
struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} hayate_xsks SEC(".maps");

// Word 0: bit 0 set = control frames go to the kernel stack (the priority socket).
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} hayate_cfg SEC(".maps");

// Ingress policing: rates 0 = not by that measure; `on` 0 = not at all. Tokens are kept in
// billionths (bytes x 1e9, packets x 1e9) so a refill is elapsed ns x rate per second.
struct police {
    struct bpf_spin_lock lock;
    __u32 on;
    __u64 byte_rate;   // bytes a second
    __u64 byte_burst;  // bytes
    __u64 pkt_rate;    // packets a second
    __u64 pkt_burst;   // packets
    __u64 byte_tokens; // bytes x 1e9
    __u64 pkt_tokens;  // packets x 1e9
    __u64 last_ns;
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct police);
} hayate_police SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} hayate_police_drops SEC(".maps");

#define NS_PER_S 1000000000ULL

// Takes `cost` (x 1e9) from a bucket refilled by `elapsed` ns at `rate` a second up to
// `burst`; 0 when it does not hold the cost (the bucket keeps its refill).
static __always_inline int take(__u64 *tokens, __u64 rate, __u64 burst, __u64 elapsed,
                                __u64 cost)
{
    __u64 t = *tokens + elapsed * rate;
    __u64 cap = burst * NS_PER_S;
    if (t > cap)
        t = cap;
    if (t < cost) {
        *tokens = t;
        return 0;
    }
    *tokens = t - cost;
    return 1;
}

// Whether the frame is beyond the port's rate (and so dropped).
static __always_inline int policed(struct xdp_md *ctx)
{
    __u32 zero = 0;
    struct police *p = bpf_map_lookup_elem(&hayate_police, &zero);
    if (!p || !p->on)
        return 0;
    __u64 now = bpf_ktime_get_ns();
    __u64 len = (__u64)(ctx->data_end - ctx->data);
    int pass = 1;
    bpf_spin_lock(&p->lock);
    __u64 elapsed = now > p->last_ns ? now - p->last_ns : 0;
    if (elapsed > NS_PER_S)
        elapsed = NS_PER_S;
    p->last_ns = now;
    if (p->pkt_rate)
        pass = take(&p->pkt_tokens, p->pkt_rate, p->pkt_burst, elapsed, NS_PER_S);
    if (pass && p->byte_rate)
        pass = take(&p->byte_tokens, p->byte_rate, p->byte_burst, elapsed, len * NS_PER_S);
    else if (p->byte_rate)
        take(&p->byte_tokens, p->byte_rate, p->byte_burst, elapsed, 0);
    bpf_spin_unlock(&p->lock);
    if (pass)
        return 0;
    __u64 *drops = bpf_map_lookup_elem(&hayate_police_drops, &zero);
    if (drops)
        *drops += 1;
    return 1;
}

// A TCP segment that opens a connection: SYN, no FIN or RST, no payload.
static __always_inline int is_syn(struct tcphdr *tcp, __u32 payload_and_header)
{
    return tcp->syn && !tcp->fin && !tcp->rst && payload_and_header == (__u32)tcp->doff * 4;
}

static __always_inline int is_control(void *data, void *end)
{
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        return 0;
    void *l3 = eth + 1;
    if (eth->h_proto == bpf_htons(ETH_P_ARP))
        return 1;
    if (eth->h_proto == bpf_htons(ETH_P_IP)) {
        struct iphdr *ip = l3;
        if ((void *)(ip + 1) > end)
            return 0;
        if (ip->protocol == IPPROTO_ICMP)
            return 1;
        if (ip->protocol != IPPROTO_TCP || (ip->frag_off & bpf_htons(0x1fff)))
            return 0;
        __u32 ihl = ip->ihl * 4;
        if (ihl < sizeof(*ip))
            return 0;
        struct tcphdr *tcp = l3 + ihl;
        if ((void *)(tcp + 1) > end)
            return 0;
        return is_syn(tcp, bpf_ntohs(ip->tot_len) - ihl);
    }
    if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
        struct ipv6hdr *ip6 = l3;
        if ((void *)(ip6 + 1) > end)
            return 0;
        if (ip6->nexthdr == IPPROTO_ICMPV6)
            return 1;
        if (ip6->nexthdr != IPPROTO_TCP)
            return 0;
        struct tcphdr *tcp = (void *)(ip6 + 1);
        if ((void *)(tcp + 1) > end)
            return 0;
        return is_syn(tcp, bpf_ntohs(ip6->payload_len));
    }
    return 0;
}

SEC("xdp")
int hayate_xsk(struct xdp_md *ctx)
{
    __u32 zero = 0;
    if (policed(ctx))
        return XDP_DROP;
    __u32 *cfg = bpf_map_lookup_elem(&hayate_cfg, &zero);
    if (cfg && (*cfg & 1) &&
        is_control((void *)(long)ctx->data, (void *)(long)ctx->data_end))
        return XDP_PASS;
    // The low bits of the flags are the action when the slot is empty (kernel 5.3 and later).
    return bpf_redirect_map(&hayate_xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
