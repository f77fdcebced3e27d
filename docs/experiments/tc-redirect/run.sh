#!/usr/bin/env bash
# The lower bound of a kernel fast path, on `hayate bench compare`'s topology: two hosts in
# namespaces joined, in a switch namespace, by a tc-bpf program that redirects every frame
# from one veth to the other (redirect.c: no lookup at all). Measures, like bench compare
# (generator, iperf3 and ping on core 0): 64 B rate with `hayate gen send` on AF_XDP to a sink
# behind B's MAC, iperf3 TCP with the hosts' offloads off and on, ping under each.
#   BRIDGE=1  a Linux bridge instead of the redirect (the reference)
#   RPS=1     receive packet steering of the switch-side veths to core 1 (the switch core)
# Usage (root, after cargo build --release): bash docs/experiments/tc-redirect/run.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
H=${HAYATE_BIN:-$here/../../../target/release/hayate}
P=tcx$$
work=$(mktemp -d)
trap 'for n in A B S; do ip netns del ${P}$n 2>/dev/null || true; done; rm -rf "$work"' EXIT
for n in A B S; do ip netns add ${P}$n; ip -n ${P}$n link set lo up; done
ip link add ${P}a0 netns ${P}A type veth peer name ${P}a1 netns ${P}S
ip link add ${P}b0 netns ${P}B type veth peer name ${P}b1 netns ${P}S
for n in A B S; do ip netns exec ${P}$n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; done
ip -n ${P}A link set ${P}a0 address 02:00:00:77:00:01
ip -n ${P}B link set ${P}b0 address 02:00:00:77:00:02
ip -n ${P}A addr add 10.77.0.1/24 dev ${P}a0
ip -n ${P}B addr add 10.77.0.2/24 dev ${P}b0
for x in "A a0" "B b0" "S a1" "S b1"; do set -- $x; ip -n ${P}$1 link set ${P}$2 up; done
ip -n ${P}A neigh replace 10.77.0.2 lladdr 02:00:00:77:00:02 dev ${P}a0 nud permanent
ip -n ${P}B neigh replace 10.77.0.1 lladdr 02:00:00:77:00:01 dev ${P}b0 nud permanent
A1=$(ip netns exec ${P}S cat /sys/class/net/${P}a1/ifindex)
B1=$(ip netns exec ${P}S cat /sys/class/net/${P}b1/ifindex)
clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -DOUT=$B1 -c "$here/redirect.c" -o "$work/to_b.o"
clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -DOUT=$A1 -c "$here/redirect.c" -o "$work/to_a.o"
if [ "${BRIDGE:-0}" = 1 ]; then
  ip -n ${P}S link add ${P}br type bridge; ip -n ${P}S link set ${P}br up
  ip -n ${P}S link set ${P}a1 master ${P}br; ip -n ${P}S link set ${P}b1 master ${P}br
  echo "Linux bridge"
else
ip netns exec ${P}S tc qdisc add dev ${P}a1 clsact
ip netns exec ${P}S tc qdisc add dev ${P}b1 clsact
ip netns exec ${P}S tc filter add dev ${P}a1 ingress bpf da obj "$work/to_b.o" sec tc
ip netns exec ${P}S tc filter add dev ${P}b1 ingress bpf da obj "$work/to_a.o" sec tc
echo "tc redirect"
fi
if [ "${RPS:-0}" = 1 ]; then for d in a1 b1; do ip netns exec ${P}S sh -c "echo 2 > /sys/class/net/${P}$d/queues/rx-0/rps_cpus"; done; echo "RPS to core 1"; fi
ip netns exec ${P}A ping -c 2 -W 1 10.77.0.2 >/dev/null && echo "reachable"
rate() {
  ip netns exec ${P}A taskset -c 0 $H gen send --port afxdp:${P}a0 --size 64 --src-mac 02:00:00:77:00:01 --dst-mac 02:00:00:77:00:02 --src-ip 10.77.0.1 --dst-ip 10.77.0.99 --dport 9 --rate max --duration 6 --cores 0 --quiet >/dev/null 2>&1 &
  sleep 2
  r0=$(ip netns exec ${P}B cat /sys/class/net/${P}b0/statistics/rx_packets)
  sleep 3
  r1=$(ip netns exec ${P}B cat /sys/class/net/${P}b0/statistics/rx_packets)
  wait
  echo "64 B: $(python3 -c "print(round(($r1-$r0)/3e6,3))") Mpps"
}
tcp() {
  ip netns exec ${P}B taskset -c 0 iperf3 -s -1 -B 10.77.0.2 >/dev/null 2>&1 &
  sleep 0.5
  ip netns exec ${P}A taskset -c 0 iperf3 -c 10.77.0.2 -t 8 -J > "$work/iperf.json" &
  sleep 2
  ip netns exec ${P}A taskset -c 0 ping -n -c 1000 -i 0.001 -W 1 10.77.0.2 > "$work/ping.txt"
  wait
  WORK="$work" python3 - <<'PY'
import json,os,re
w=os.environ["WORK"]
g=json.load(open(f"{w}/iperf.json"))["end"]["sum_received"]["bits_per_second"]/1e9
t=sorted(float(x)*1000 for x in re.findall(r"time=([0-9.]+)", open(f"{w}/ping.txt").read()))
p=lambda q: t[max(1,int(-(-q*len(t)//1)))-1]
print(f"TCP {g:.2f} Gbit/s, ping min/med/p99 {t[0]:.0f}/{p(0.5):.0f}/{p(0.99):.0f} us")
PY
}
rate
for v in off on; do
  for x in "A a0" "B b0"; do set -- $x; ip netns exec ${P}$1 ethtool -K ${P}$2 tx $v tso $v gso $v >/dev/null; done
  echo -n "offloads $v: "; tcp
done
