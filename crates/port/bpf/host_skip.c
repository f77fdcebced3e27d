// SPDX-License-Identifier: Apache-2.0 OR GPL-2.0
//
// Hayate's tc ingress program for an AF_PACKET port that is a tunnel underlay. An AF_PACKET
// socket only taps what arrives: the host's stack receives every frame too. For the VXLAN and
// Geneve packets the switch terminates, the host has no socket on the tunnel's UDP port, so
// it answers each with an ICMP port unreachable, after a route lookup — on a busy tunnel,
// a third of the core the switch polls on. Packet taps run before tc ingress, so by the time
// this program sees a frame the switch's socket has its copy: UDP to one of the switch's
// tunnel ports (`hayate_udp_ports`) at one of its tunnel addresses (`hayate_v4_locals`,
// `hayate_v6_locals`) is dropped here and goes no further. Everything else (ARP, ICMP, the
// host's own traffic) goes on up the stack. Counted per CPU in `hayate_skipped`.
//
// Attached with a TCX link (Linux 6.6+), owned by the switch's process: when the switch
// exits, the link goes and the host receives everything again. Built by crates/port/build.rs
// with `clang -target bpf`; loaded by crates/port/src/afpacket/host_skip.rs.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16);
    __type(key, __u16);
    __type(value, __u8);
} hayate_udp_ports SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u8);
} hayate_v4_locals SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, struct in6_addr);
    __type(value, __u8);
} hayate_v6_locals SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} hayate_skipped SEC(".maps");

// Ethernet, the longest IP header looked at (IPv6's) and UDP's.
#define HEADERS (14 + 40 + 8)

SEC("classifier")
int hayate_host_skip(struct __sk_buff *skb)
{
    if (skb->len >= HEADERS)
        bpf_skb_pull_data(skb, HEADERS);
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        return TC_ACT_OK;
    struct udphdr *udp;
    if (eth->h_proto == bpf_htons(ETH_P_IP)) {
        struct iphdr *ip = (void *)(eth + 1);
        if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl != 5 ||
            (ip->frag_off & bpf_htons(0x3fff)))
            return TC_ACT_OK;
        __u32 dst = ip->daddr;
        if (!bpf_map_lookup_elem(&hayate_v4_locals, &dst))
            return TC_ACT_OK;
        udp = (void *)(ip + 1);
    } else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
        struct ipv6hdr *ip6 = (void *)(eth + 1);
        if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
            return TC_ACT_OK;
        struct in6_addr dst = ip6->daddr;
        if (!bpf_map_lookup_elem(&hayate_v6_locals, &dst))
            return TC_ACT_OK;
        udp = (void *)(ip6 + 1);
    } else {
        return TC_ACT_OK;
    }
    if ((void *)(udp + 1) > end)
        return TC_ACT_OK;
    __u16 port = bpf_ntohs(udp->dest);
    if (!bpf_map_lookup_elem(&hayate_udp_ports, &port))
        return TC_ACT_OK;
    __u32 zero = 0;
    __u64 *n = bpf_map_lookup_elem(&hayate_skipped, &zero);
    if (n)
        *n += 1;
    return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
