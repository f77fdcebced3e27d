//! Tunnel fields through the real `ovs-ofctl -O OpenFlow13`: `tun_id`, `tun_src`, `tun_dst`
//! (NXM_NX_TUN_IPV4_*) and `tun_ipv6_src`/`tun_ipv6_dst` (NXM_NX_TUN_IPV6_*) in matches and
//! set-field actions, and `set_tunnel`, installed and dumped back in Open vSwitch's words
//! (the IPv4-underlay bit `tun_src`/`tun_dst` imply is neither sent nor printed).

mod ofctl_common;

use ofctl_common::{flows, have_ofctl, Hayate};

#[test]
fn tunnel_fields_install_and_dump_back() {
    if !have_ofctl("tunnel_fields_install_and_dump_back") {
        return;
    }
    let h = Hayate::secure_sinks();
    h.ofctl(
        "add-flow",
        &["priority=10,tun_id=0x2a,tun_src=192.168.1.1,tun_dst=192.168.1.0/24,actions=output:2"],
    );
    h.ofctl(
        "add-flow",
        &["priority=11,in_port=1,actions=set_field:192.168.1.9->tun_dst,set_tunnel:42,output:2"],
    );
    h.ofctl(
        "add-flow",
        &["priority=12,tun_ipv6_src=2001:db8::1,tun_ipv6_dst=2001:db8::/64,actions=drop"],
    );
    h.ofctl(
        "add-flow",
        &["priority=13,in_port=2,actions=set_field:2001:db8::7->tun_ipv6_dst,output:1"],
    );
    assert_eq!(
        flows(&h.ofctl("dump-flows", &[])),
        [
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=10,tun_id=0x2a,\
             tun_src=192.168.1.1,tun_dst=192.168.1.0/24 actions=output:2",
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=11,in_port=1 \
             actions=set_field:192.168.1.9->tun_dst,set_field:0x2a->tun_id,output:2",
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=12,\
             tun_ipv6_src=2001:db8::1,tun_ipv6_dst=2001:db8::/64 actions=drop",
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=13,in_port=2 \
             actions=set_field:2001:db8::7->tun_ipv6_dst,output:1",
        ]
    );
    // `tun_src=X` is stored as "IPv4 underlay and X" (so an IPv6 underlay address ending
    // in X does not match it) yet filters and prints as sent.
    assert_eq!(
        flows(&h.ofctl("dump-flows", &["tun_src=192.168.1.1"])),
        [
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=10,tun_id=0x2a,\
          tun_src=192.168.1.1,tun_dst=192.168.1.0/24 actions=output:2"
        ]
    );
    // A flow that names the tunnel source goes by it alone.
    h.ofctl(
        "del-flows",
        &[
            "--strict",
            "priority=10,tun_id=0x2a,tun_src=192.168.1.1,tun_dst=192.168.1.0/24",
        ],
    );
    assert_eq!(flows(&h.ofctl("dump-flows", &[])).len(), 3);
}
