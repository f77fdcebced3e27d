#!/usr/bin/env python3
"""Records what `ovs-ofctl -O OpenFlow13` sends, as hex vectors for the codec's tests.

Usage: python3 capture.py > ovs_ofctl.txt   (needs ovs-ofctl from openvswitch-common)

For each command in CASES it starts a one-connection OpenFlow 1.3 listener on 127.0.0.1,
runs `ovs-ofctl -O OpenFlow13 <subcommand> tcp:127.0.0.1:PORT <args...>`, answers what the
tool waits for (hello, features, barrier, echo, get-config, multipart with minimal bodies,
queue-get-config), and prints every message it received:

    case <subcommand> <args joined by " | ">
    msg <hex>
    print <ovs-ofctl ofp-print of the message, first line>
"""
import socket
import struct
import subprocess
import sys
import threading

CASES = [
    ["add-flow", "priority=5,tcp,tp_dst=80,actions=output:2"],
    ["add-flow", "table=1,priority=100,cookie=0x1234,in_port=3,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:00/01:00:00:00:00:00,dl_vlan=10,dl_vlan_pcp=3,actions=pop_vlan,output:4"],
    ["add-flow", "ip,nw_src=10.0.0.0/8,nw_dst=192.168.1.1,nw_tos=32,nw_ecn=1,ip_proto=17,udp_src=53,actions=dec_ttl,set_field:10.1.1.1->ip_dst,mod_tp_dst:5353,output:in_port"],
    ["add-flow", "arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,arp_sha=02:00:00:00:00:01,arp_tha=00:00:00:00:00:00,actions=NORMAL"],
    ["add-flow", "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=fe80::1,ipv6_label=0x12345,actions=output:controller"],
    ["add-flow", "icmp6,icmpv6_type=135,nd_target=fe80::2,nd_sll=02:00:00:00:00:09,actions=drop"],
    ["add-flow", "icmp6,icmpv6_type=136,icmpv6_code=0,nd_tll=02:00:00:00:00:0a,actions=drop"],
    ["add-flow", "icmp,icmp_type=8,icmp_code=0,actions=set_field:0->icmp_type,output:1"],
    ["add-flow", "sctp,sctp_src=1000,sctp_dst=2000/0xfff0,actions=output:1"],
    ["add-flow", "tcp,tcp_flags=+syn-ack,actions=output:1"],
    ["add-flow", "ip,nw_ttl=3,ip_frag=first,actions=output:1"],
    ["add-flow", "metadata=0x10/0xff,tun_id=0x55,actions=write_metadata:0x1/0x1,goto_table:3"],
    ["add-flow", "priority=0,actions=CONTROLLER:128"],
    ["add-flow", "vlan_tci=0x0000/0x1fff,actions=push_vlan:0x8100,set_field:4106->vlan_vid,output:2"],
    ["add-flow", "idle_timeout=10,hard_timeout=60,send_flow_rem,check_overlap,reset_counts,no_packet_counts,no_byte_counts,tcp,actions=meter:1,clear_actions,write_actions(output:2)"],
    ["add-flow", "ip,in_port=1,actions=set_queue:3,mod_nw_ttl:9,group:5"],
    ["add-flow", "dl_type=0x0800,nw_proto=6,actions=mod_dl_src:02:00:00:00:00:11,mod_dl_dst:02:00:00:00:00:22,mod_nw_src:1.2.3.4,mod_tp_src:99"],
    ["mod-flows", "tcp,tp_dst=80,actions=output:3"],
    ["add-flow", "in_port=1,actions=mod_vlan_vid:10,mod_vlan_pcp:3,output:2"],
    ["add-flow", "ip,actions=mod_nw_tos:32,mod_nw_ecn:1,output:2"],
    ["add-flow", "in_port=1,actions=set_field:0x55->tun_id,output:2"],
    ["add-flow", "dl_vlan=5,actions=strip_vlan,output:2"],
    ["add-flow", "ipv6,actions=set_field:2001:db8::1->ipv6_src,set_field:0x1->ipv6_label,output:1"],
    ["add-flow", "arp,actions=set_field:10.0.0.1->arp_spa,set_field:02:00:00:00:00:01->arp_sha,set_field:2->arp_op,output:1"],
    ["add-flow", "tcp6,tp_src=1000,actions=set_field:80->tcp_dst,output:1"],
    ["add-flow", "udp,actions=mod_tp_src:53,output:1"],
    ["add-flow", "icmp6,icmp_type=135,actions=set_field:fe80::1->nd_target,output:1"],
    ["add-flow", "actions=output:local,output:flood,output:all,controller:65535"],
    ["add-flow", "vlan_tci=0x1000/0x1000,actions=output:1"],
    ["add-flow", "dl_vlan_pcp=5,actions=output:1"],
    ["add-flow", "ip,nw_frag=later,actions=drop"],
    ["add-flow", "tcp,tcp_flags=0x002/0x0ff,actions=drop"],
    ["add-flow", "tun_id=0x1234/0xffff,eth_type=0x88cc,actions=drop"],
    ["mod-flows", "--strict", "priority=5,tcp,tp_dst=80,actions=output:3"],
    ["del-flows", "cookie=0x1234/0xffff,table=1,out_port=2"],
    ["del-flows", "--strict", "priority=5,tcp,tp_dst=80"],
    ["del-flows"],
    ["add-group", "group_id=5,type=all,bucket=output:1,bucket=output:2"],
    ["add-group", "group_id=6,type=select,bucket=weight:10,actions=output:1,bucket=weight:20,actions=set_field:10.0.0.9->ip_dst,output:2"],
    ["add-group", "group_id=7,type=fast_failover,bucket=watch_port:1,actions=output:1,bucket=watch_port:2,actions=output:2"],
    ["add-group", "group_id=8,type=indirect,bucket=actions=output:3"],
    ["del-groups", "group_id=5"],
    ["add-meter", "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100"],
    ["add-meter", "meter=2,pktps,stats,band=type=dscp_remark,rate=500,prec_level=1"],
    ["del-meter", "meter=2"],
    ["dump-flows"],
    ["dump-flows", "table=1,tcp,out_port=2"],
    ["dump-aggregate"],
    ["dump-tables"],
    ["dump-table-features"],
    ["dump-ports"],
    ["dump-ports", "1"],
    ["dump-ports-desc"],
    ["queue-stats"],
    ["queue-get-config", "1"],
    ["dump-groups"],
    ["dump-group-stats"],
    ["dump-group-features"],
    ["meter-stats"],
    ["dump-meters"],
    ["meter-features"],
    ["get-frags"],
    ["set-frags", "drop"],
    ["mod-port", "1", "down"],
    ["packet-out", "in_port=controller packet=ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000002 actions=output:1"],
    ["packet-out", "in_port=1 packet=000000000001000000000002080045000014000100004011f9d40a0000010a000002 actions=output:table"],
    ["probe"],
]

HWADDR = bytes([2, 0, 0, 0, 0, 1])


def msg(kind, xid, body=b""):
    return struct.pack("!BBHI", 4, kind, 8 + len(body), xid) + body


def port_desc():
    return (struct.pack("!I4x", 1) + HWADDR + b"\0\0" + b"p1".ljust(16, b"\0")
            + struct.pack("!8I", 0, 4, 0, 0, 0, 0, 10000000, 10000000))


OXM_LENS = {0: 4, 2: 8, 3: 6, 4: 6, 5: 2, 6: 2, 7: 1, 8: 1, 9: 1, 10: 1, 11: 4, 12: 4,
            13: 2, 14: 2, 15: 2, 16: 2, 17: 2, 18: 2, 19: 1, 20: 1, 21: 2, 22: 4, 23: 4,
            24: 6, 25: 6, 26: 16, 27: 16, 28: 4, 29: 1, 30: 1, 31: 16, 32: 6, 33: 6, 38: 8}


def prop(kind, payload):
    p = struct.pack("!HH", kind, 4 + len(payload)) + payload
    return p + b"\0" * ((8 - len(p) % 8) % 8)


def table_features(table_id):
    """Every table can do everything the codec knows (what OVS needs before a flow-mod)."""
    insts = b"".join(struct.pack("!HH", i, 4) for i in range(1, 7))
    acts = b"".join(struct.pack("!HH", a, 4) for a in (0, 17, 18, 21, 22, 23, 24, 25))
    oxms = b"".join(struct.pack("!I", 0x8000 << 16 | f << 9 | n) for f, n in OXM_LENS.items())
    nexts = bytes(range(table_id + 1, 4))
    props = (prop(0, insts) + prop(2, nexts) + prop(4, acts) + prop(6, acts) + prop(8, oxms)
             + prop(10, oxms) + prop(12, oxms) + prop(14, oxms))
    name = f"table{table_id}".encode().ljust(32, b"\0")
    return (struct.pack("!HB5x", 64 + len(props), table_id) + name
            + struct.pack("!QQII", 2**64 - 1, 2**64 - 1, 0, 1000) + props)


def reply(kind, xid, body):
    if kind == 5:  # features request
        return msg(6, xid, struct.pack("!QIBB2xII", 1, 0, 254, 0, 0x4f, 0))
    if kind == 7:  # get config
        return msg(8, xid, struct.pack("!HH", 0, 128))
    if kind == 20:  # barrier
        return msg(21, xid)
    if kind == 2:  # echo
        return msg(3, xid, body)
    if kind == 22:  # queue get config
        return msg(23, xid, body[:4] + b"\0" * 4)
    if kind == 18:  # multipart
        mp_type = struct.unpack("!H", body[:2])[0]
        extra = {
            0: b"\0" * 1056,
            2: b"\0" * 24,
            8: b"\0" * 40,
            11: b"\0" * 16,
            12: b"".join(table_features(t) for t in range(4)),
            13: port_desc(),
        }.get(mp_type, b"")
        return msg(19, xid, struct.pack("!HH4x", mp_type, 0) + extra)
    return None


def serve(sock, out, done):
    """Serves connections one after the other until `done` is set (ovs-ofctl may connect
    twice: once for table features, once for the command)."""
    sock.settimeout(0.2)
    while not done.is_set():
        try:
            conn, _ = sock.accept()
        except socket.timeout:
            continue
        serve_one(conn, out)


def serve_one(conn, out):
    conn.settimeout(1)
    conn.sendall(msg(0, 1, struct.pack("!HHI", 1, 8, 1 << 4)))
    buf = b""
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            buf += data
            while len(buf) >= 8:
                length = struct.unpack("!H", buf[2:4])[0]
                if length < 8 or len(buf) < length:
                    break
                m, buf = buf[:length], buf[length:]
                out.append(m)
                r = reply(m[1], struct.unpack("!I", m[4:8])[0], m[8:])
                if r:
                    conn.sendall(r)
    except (socket.timeout, ConnectionResetError):
        pass
    conn.close()


def ofp_print(m):
    p = subprocess.run(["ovs-ofctl", "ofp-print", m.hex()], capture_output=True, text=True)
    return (p.stdout or p.stderr).strip().splitlines()[0]


def main():
    print("# Produced by crates/openflow/tests/vectors/capture.py: messages that")
    print("# `ovs-ofctl -O OpenFlow13 <case> tcp:127.0.0.1:PORT` sent (Open vSwitch 3.1).")
    print("# Each `print` line is `ovs-ofctl ofp-print` of the `msg` above it.")
    for case in CASES:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        got = []
        done = threading.Event()
        t = threading.Thread(target=serve, args=(sock, got, done))
        t.start()
        args = [a for a in case[1:] if a.startswith("--")]
        rest = [a for a in case[1:] if not a.startswith("--")]
        cmd = ["ovs-ofctl", "-O", "OpenFlow13", *args, case[0], f"tcp:127.0.0.1:{port}", *rest]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            p = subprocess.CompletedProcess(cmd, 124, "", "timed out")
        done.set()
        t.join()
        sock.close()
        print(f"case {' | '.join(case)}")
        if p.returncode != 0:
            print(f"# exit {p.returncode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}")
        for m in got:
            print(f"msg {m.hex()}")
            print(f"print {ofp_print(m)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
