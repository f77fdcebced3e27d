#!/usr/bin/env bash
# compare-ovs-dpdk.sh -- Hayate and Open vSwitch with DPDK side by side, same frames, same core.
#
#   bash scripts/compare-ovs-dpdk.sh [--seconds N] [--json FILE]
#
# Runs as root on Debian 12. For each scenario of `hayate bench` that has an OVS twin
# (p2p-1flow, flows-1M, vxlan-encap, vxlan-decap; 64-byte frames) it:
#   1. installs what it needs (Debian packages, idempotent);
#   2. writes the scenario's traffic as a pcap (scripts/lib/udp-pcap.py);
#   3. starts a private Open vSwitch with DPDK (own database, sockets, logs and hugetlbfs under
#      /tmp/hayate-compare, DPDK file prefix hycmp, bridge-local tap in netns hycmp) with one
#      PMD thread on the last core; port 1 replays the pcap from memory (net_pcap
#      infinite_rx=1), port 2 is a sink (net_null no-rx=1); installs the scenario's flows;
#      warms up, then counts port 2's tx packets over the window (ovs-ofctl dump-ports) and
#      reads TSC cycles per packet from dpif-netdev/pmd-perf-show; stops OVS. A control run,
#      p2p-1flow-big-pcap, replays one flow from a pcap as large as flows-1M's, to show what
#      the replay's memory footprint (not the flows) costs OVS;
#      The tunnel twins use OVS's userspace tunnels as its documentation sets them up: a
#      vxlan port (remote 192.0.2.2, local 192.0.2.1, key 42) on the bridge, an underlay
#      bridge hyphy (its address 192.0.2.1/24 on its tap in netns hycmp) holding the underlay
#      port, the next hop set with ovs-appctl ovs/route/add and tnl/arp/set. vxlan-encap:
#      port 1 replays p2p-1flow's frame, in_port=1 -> output:3 (the vxlan port), the
#      underlay port (net_null) counts; vxlan-decap: the underlay port replays that frame in
#      VXLAN (scripts/lib/udp-pcap.py --vxlan, the bytes `hayate bench vxlan-decap` sends),
#      in_port=3,tun_id=42 -> output:2 counts. Both run on the one PMD thread;
#   4. runs `hayate bench p2p-1flow flows-1M vxlan-encap vxlan-decap --sizes 64 --json`
#      pinned to the same core;
#   5. prints scenario, OVS Mpps, OVS cycles/packet, Hayate Mpps, Hayate cycles/packet and the
#      ratio Hayate/OVS; --json FILE writes the same rows (and the details) as JSON.
# Everything it creates (netns, OVS processes, hugetlbfs mount, raised hugepage count) is
# removed on exit, failure or Ctrl-C. Logs stay in /tmp/hayate-compare/log.
#
# One difference cannot be removed: net_pcap keeps every replayed frame in an mbuf of OVS's
# shared mempool, which OVS 3.1 sizes at 262144 mbufs at most (MAX_NB_MBUF in
# lib/netdev-dpdk.c), so OVS's flows-1M twin replays --ovs-flows distinct flows (default
# 250000: like 1M, far more than OVS's 8192-entry exact-match cache holds, so nearly every
# packet goes to the megaflow classifier) instead of 1,000,000. The report says how many.
set -Eeuo pipefail

usage() {
    cat <<'EOF'
usage: bash scripts/compare-ovs-dpdk.sh [options]   (as root, Debian 12)
  --seconds N     measured window per scenario, seconds (default 5)
  --warmup N      warm-up before each window, seconds (default 2)
  --json FILE     also write the results as JSON to FILE
  --core N        core for the switch thread / OVS PMD (default: the last core)
  --ovs-flows N   distinct flows OVS replays for flows-1M (default 250000; OVS's mempool
                  holds at most 262144 frames, so 1000000 cannot load)
  --hayate BIN    hayate binary to run (default: cargo build --release -p hayate)
  --ovs-only      measure Open vSwitch only
  --scenarios L   comma-separated subset to run, e.g. --scenarios p2p-1flow,vxlan-encap,vxlan-decap
                  (default: all: p2p-1flow, flows-1M, p2p-1flow-big-pcap, vxlan-encap,
                  vxlan-decap; flows-1M brings the Hayate half's flows-1M too)
  --self-test     check the pcap writer and the report parser (no root needed) and exit
  -h, --help      this text
EOF
}

WIN=5
WARM=2
JSON_OUT=""
CORE=""
OVS_FLOWS=250000
HAYATE_BIN=""
OVS_ONLY=0
ALL_SCENARIOS="p2p-1flow flows-1M p2p-1flow-big-pcap vxlan-encap vxlan-decap"
SCENARIOS=" $ALL_SCENARIOS "
die() { echo "compare-ovs-dpdk: $*" >&2; exit 2; }
is_num() { [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]]; }
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) [ $# -ge 2 ] && is_num "$2" || die "--seconds needs a number of seconds, e.g. --seconds 5"
                   WIN=$2; shift 2 ;;
        --warmup)  [ $# -ge 2 ] && is_num "$2" || die "--warmup needs a number of seconds, e.g. --warmup 2"
                   WARM=$2; shift 2 ;;
        --json)    [ $# -ge 2 ] || die "--json needs a file name"; JSON_OUT=$2; shift 2 ;;
        --core)    [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] || die "--core needs a core number, e.g. --core 1"
                   CORE=$2; shift 2 ;;
        --ovs-flows) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 2 ] \
                       || die "--ovs-flows needs a count of 2 or more, e.g. --ovs-flows 250000"
                   OVS_FLOWS=$2; shift 2 ;;
        --hayate)  [ $# -ge 2 ] && [ -x "$2" ] || die "--hayate needs an executable hayate binary"
                   HAYATE_BIN=$(realpath "$2"); shift 2 ;;
        --ovs-only) OVS_ONLY=1; shift ;;
        --scenarios) [ $# -ge 2 ] || die "--scenarios needs a list, e.g. --scenarios p2p-1flow,vxlan-encap"
                   for x in ${2//,/ }; do
                       [[ " $ALL_SCENARIOS " == *" $x "* ]] || die "unknown scenario '$x'; use some of: $ALL_SCENARIOS"
                   done
                   SCENARIOS=" ${2//,/ } "; shift 2 ;;
        --self-test)
            d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib
            python3 "$d/udp-pcap.py" --self-test && python3 "$d/compare-report.py" --self-test
            exit ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument '$1'" ;;
    esac
done
chosen() { [[ $SCENARIOS == *" $1 "* ]]; }
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, hugepages, DPDK); run it with sudo"
command -v apt-get >/dev/null && command -v dpkg >/dev/null \
    || die "needs a Debian-based system (apt-get, dpkg); Debian 12 is what it was written for"
if [ -n "$JSON_OUT" ]; then
    JSON_OUT=$(realpath -m "$JSON_OUT")
    [ -d "$(dirname "$JSON_OUT")" ] && [ -w "$(dirname "$JSON_OUT")" ] \
        || die "cannot write --json file $JSON_OUT; pick a path in a writable directory"
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
LIB=$HERE/lib
NCPU=$(nproc)
[ -n "$CORE" ] || CORE=$((NCPU - 1))
[ "$CORE" -lt "$NCPU" ] || die "--core $CORE does not exist; this machine has cores 0..$((NCPU - 1))"
MAIN_CORE=0                       # OVS's non-PMD threads (main, handlers, revalidators)
[ "$CORE" -ne 0 ] || MAIN_CORE=$((NCPU > 1 ? 1 : 0))

# Unique names: nothing here touches another OVS, netns or DPDK instance.
ROOT=/tmp/hayate-compare
RUN=$ROOT/run
DB=$ROOT/db
LOG=$ROOT/log
HUGE=$ROOT/huge
PCAPS=$ROOT/pcap
NS=hycmp
BR=hycmp
PREFIX=hycmp
OVS_BIN=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
SOCKET_MEM=1024                   # MB: the 262144-mbuf shared mempool needs about 700
HUGEPAGES_WANT=$((SOCKET_MEM / 2 + 128))
export OVS_RUNDIR=$RUN OVS_DBDIR=$DB OVS_LOGDIR=$LOG OVS_SYSCONFDIR=$ROOT/etc

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
vsctl() { ovs-vsctl --db=unix:$RUN/db.sock --timeout=30 "$@"; }
appctl() { ovs-appctl -t $RUN/ovs-vswitchd.ctl "$@"; }
ofctl() { local cmd=$1; shift; ovs-ofctl -O OpenFlow13 "$cmd" unix:$RUN/$BR.mgmt "$@"; }

# ---------------------------------------------------------------- clean-up (always runs)
MOUNTED_HUGE=0
HUGEPAGES_BEFORE=""
HUGEPAGES_SET=""
stop_pid_file() {
    local f=$1 p
    [ -f "$f" ] || return 0
    p=$(cat "$f" 2>/dev/null || true)
    if [[ $p =~ ^[0-9]+$ ]] && kill -0 "$p" 2>/dev/null; then
        kill "$p" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    fi
    rm -f "$f"
}
ovs_down() {
    stop_pid_file $RUN/ovs-vswitchd.pid
    stop_pid_file $RUN/ovsdb-server.pid
    if ip netns list 2>/dev/null | grep -qw "^$NS"; then
        for p in $(ip netns pids $NS 2>/dev/null); do kill "$p" 2>/dev/null || true; done
        sleep 0.2
        for p in $(ip netns pids $NS 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        ip netns del $NS 2>/dev/null || true
    fi
    rm -rf "$RUN" "$DB" "$ROOT/etc"
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    ovs_down
    if [ "$MOUNTED_HUGE" = 1 ] && mountpoint -q $HUGE; then
        umount $HUGE 2>/dev/null || umount -l $HUGE 2>/dev/null || true
    fi
    rmdir $HUGE 2>/dev/null || true
    # Give back the hugepages we asked for, unless someone changed the count since.
    if [ -n "$HUGEPAGES_SET" ] && [ "$(cat /proc/sys/vm/nr_hugepages)" = "$HUGEPAGES_SET" ]; then
        echo "$HUGEPAGES_BEFORE" > /proc/sys/vm/nr_hugepages 2>/dev/null || true
    fi
    exit $rc
}
trap cleanup EXIT
trap 'echo "compare-ovs-dpdk: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- 1. packages
install_packages() {
    local pkgs="openvswitch-switch-dpdk librte-net-null23 librte-net-pcap23
        librte-mempool-ring23 dpdk iproute2 procps util-linux python3" missing="" p
    for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
    [ -z "$missing" ] && return 0
    log "installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed; check the network and /etc/apt/sources.list"
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >$ROOT/apt.log 2>&1 \
        || { tail -20 $ROOT/apt.log >&2; die "could not install$missing (log: $ROOT/apt.log)"; }
}

# ---------------------------------------------------------------- hugepages
hugepages_up() {
    local cur
    cur=$(cat /proc/sys/vm/nr_hugepages)
    if [ "$cur" -lt $HUGEPAGES_WANT ]; then          # only ever raise the count
        HUGEPAGES_BEFORE=$cur
        echo $HUGEPAGES_WANT > /proc/sys/vm/nr_hugepages
        HUGEPAGES_SET=$(cat /proc/sys/vm/nr_hugepages)
    fi
    local free
    free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
    [ "$free" -ge $((SOCKET_MEM / 2)) ] || die "only $free free 2 MB hugepages, OVS needs \
$((SOCKET_MEM / 2)); free memory or raise /proc/sys/vm/nr_hugepages"
    mkdir -p $HUGE
    # The path is this script's own: a mount left there by an interrupted run is ours too.
    mountpoint -q $HUGE || mount -t hugetlbfs -o pagesize=2M nodev $HUGE
    MOUNTED_HUGE=1
}

# ---------------------------------------------------------------- 3. Open vSwitch with DPDK
# ovs_up: a private ovsdb-server and ovs-vswitchd-dpdk (vswitchd in netns $NS, non-PMD
# threads on MAIN_CORE, the one PMD thread on CORE).
ovs_up() {
    ovs_down
    mkdir -p $RUN $DB $LOG $ROOT/etc
    ip netns add $NS
    ip netns exec $NS ip link set lo up
    ovsdb-tool create $DB/conf.db /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server $DB/conf.db --remote=punix:$RUN/db.sock --pidfile=$RUN/ovsdb-server.pid \
        --unixctl=$RUN/ovsdb-server.ctl --log-file=$LOG/ovsdb-server.log --detach --no-chdir \
        2>>$LOG/daemon.err || die "ovsdb-server did not start (log: $LOG/ovsdb-server.log)"
    vsctl --no-wait init
    vsctl --no-wait set Open_vSwitch . \
        other_config:pmd-cpu-mask="$(printf 0x%x $((1 << CORE)))" \
        other_config:dpdk-init=true \
        other_config:dpdk-socket-mem=$SOCKET_MEM other_config:dpdk-socket-limit=$SOCKET_MEM \
        "other_config:dpdk-extra=--no-pci --in-memory --huge-dir=$HUGE --file-prefix=$PREFIX"
    : > $LOG/ovs-vswitchd.log
    ip netns exec $NS taskset -c $MAIN_CORE $OVS_BIN unix:$RUN/db.sock \
        --pidfile=$RUN/ovs-vswitchd.pid --unixctl=$RUN/ovs-vswitchd.ctl \
        --log-file=$LOG/ovs-vswitchd.log --detach --no-chdir 2>>$LOG/daemon.err \
        || { tail -20 $LOG/ovs-vswitchd.log >&2; die "ovs-vswitchd-dpdk did not start (log: $LOG/ovs-vswitchd.log)"; }
    # fail-mode=secure: no NORMAL flow floods the first packets before ours are in.
    vsctl add-br $BR -- set bridge $BR datapath_type=netdev fail-mode=secure \
        other_config:hwaddr=02:00:00:00:00:fe
}

# Flows of `hayate bench` (crates/hayate/src/bench/scenario.rs), one per line.
flows_of() {
    case $1 in
        p2p-1flow) echo "table=0,priority=10,in_port=1,actions=output:2" ;;
        vxlan-encap) echo "table=0,priority=10,in_port=1,actions=output:3" ;;
        vxlan-decap) echo "table=0,priority=10,in_port=3,tun_id=42,actions=output:2" ;;
        flows-1M)
            echo "table=0,priority=10,in_port=1,dl_dst=02:00:00:00:00:02,actions=output:2"
            echo "table=0,priority=10,in_port=2,dl_dst=02:00:00:00:00:01,actions=output:1"
            echo "table=0,priority=0,actions=drop" ;;
    esac
}

port_error() {   # prints why a port did not come up, if it did not (nothing if absent)
    local e
    [ -n "$(vsctl --if-exists get interface "$1" name 2>/dev/null)" ] || return 0
    e=$(vsctl get interface "$1" error 2>/dev/null || true)
    [ -n "$e" ] && [ "$e" != "[]" ] && echo "$e"
    return 0
}

# The port whose tx counter is the scenario's rate: bridge and OpenFlow port.
COUNT_BR=$BR
COUNT_PORT=2
tx_pkts() {
    ovs-ofctl -O OpenFlow13 dump-ports unix:$RUN/$COUNT_BR.mgmt $COUNT_PORT \
        | grep -oE 'tx pkts=[0-9]+' | head -1 | cut -d= -f2
}

# The tunnel twins (issue 18): the addresses of `hayate bench`'s tunnel scenarios
# (crates/hayate/src/bench/scenario.rs, TUN_*).
PHY=hyphy
TUN_LOCAL=192.0.2.1
TUN_REMOTE=192.0.2.2
TUN_LOCAL_MAC=02:00:00:00:01:01
TUN_REMOTE_MAC=02:00:00:00:01:02
TUN_VNI=42
phy_ofctl() { local cmd=$1; shift; ovs-ofctl -O OpenFlow13 "$cmd" unix:$RUN/$PHY.mgmt "$@"; }

# ovs_ports <scenario> <pcap>: the scenario's ports; sets COUNT_BR/COUNT_PORT.
ovs_ports() {
    local sc=$1 pcap=$2
    COUNT_BR=$BR; COUNT_PORT=2
    case $sc in
        vxlan-encap|vxlan-decap) ;;
        *)
            vsctl add-port $BR p1 -- set interface p1 type=dpdk ofport_request=1 \
                    "options:dpdk-devargs=net_pcap0,rx_pcap=$pcap,infinite_rx=1" \
                -- add-port $BR p2 -- set interface p2 type=dpdk ofport_request=2 \
                    "options:dpdk-devargs=net_null1,no-rx=1"
            return 0 ;;
    esac
    # The underlay bridge: its local port (a tap in netns $NS) owns the tunnel's address;
    # IPv4 only, so that the tap sends nothing of its own into the measured path.
    ip netns exec $NS sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    vsctl add-br $PHY -- set bridge $PHY datapath_type=netdev fail-mode=secure \
        other_config:hwaddr=$TUN_LOCAL_MAC
    ip netns exec $NS ip addr add $TUN_LOCAL/24 dev $PHY
    ip netns exec $NS ip link set $PHY up
    vsctl add-port $BR vx -- set interface vx type=vxlan ofport_request=3 \
        options:remote_ip=$TUN_REMOTE options:local_ip=$TUN_LOCAL options:key=$TUN_VNI
    if [ "$sc" = vxlan-encap ]; then
        phy_ofctl add-flow "table=0,priority=10,in_port=LOCAL,actions=output:1"
        vsctl add-port $BR p1 -- set interface p1 type=dpdk ofport_request=1 \
                "options:dpdk-devargs=net_pcap0,rx_pcap=$pcap,infinite_rx=1" \
            -- add-port $PHY u1 -- set interface u1 type=dpdk ofport_request=1 \
                "options:dpdk-devargs=net_null1,no-rx=1"
        COUNT_BR=$PHY; COUNT_PORT=1
    else
        phy_ofctl add-flow "table=0,priority=10,in_port=1,actions=LOCAL"
        vsctl add-port $PHY u1 -- set interface u1 type=dpdk ofport_request=1 \
                "options:dpdk-devargs=net_pcap0,rx_pcap=$pcap,infinite_rx=1" \
            -- add-port $BR p2 -- set interface p2 type=dpdk ofport_request=2 \
                "options:dpdk-devargs=net_null1,no-rx=1"
    fi
    # The next hop as OVS's userspace tunnels keep it: a route and a neighbour entry.
    appctl ovs/route/add $TUN_REMOTE/32 $PHY >/dev/null
    appctl tnl/arp/set $PHY $TUN_REMOTE $TUN_REMOTE_MAC >/dev/null
    appctl ovs/route/show > $LOG/ovs-$sc.route-show.txt 2>&1 || true
    appctl tnl/ports/show > $LOG/ovs-$sc.tnl-ports.txt 2>&1 || true
}

# CPU time (clock ticks) of OVS's PMD thread: over the window it tells what share of the core
# the PMD really had (other programs on this core make every switch look slower).
pmd_tid() {
    local pid t
    pid=$(cat $RUN/ovs-vswitchd.pid)
    for t in /proc/$pid/task/*; do
        [[ $(cat $t/comm 2>/dev/null) == pmd* ]] && { basename $t; return 0; }
    done
    return 0
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$(cat $RUN/ovs-vswitchd.pid)/task/$1/stat" 2>/dev/null || echo 0; }

# ovs_measure <scenario> <pcap> <flows> [flow set]: one run; writes $LOG/ovs-<scenario>.json
ovs_measure() {
    local sc=$1 pcap=$2 nflows=$3 flowset=${4:-$1} out=$LOG/ovs-$1
    log "OVS-DPDK $sc: starting ($nflows flow(s) from $pcap)"
    ovs_up
    # The flows go in before the ports, so every packet meets them (ofport_request fixes 1, 2).
    flows_of "$flowset" > $out.flows
    ofctl del-flows
    ofctl add-flows $out.flows
    ovs_ports "$sc" "$pcap"
    local e="" p pe
    for p in p1 p2 u1 vx; do
        pe=$(port_error $p)
        [ -n "$pe" ] && e="$e$p: $pe "
    done
    if [ -n "$e" ]; then
        grep -iE 'pcap|mbuf|mempool|error' $LOG/ovs-vswitchd.log | tail -8 >&2 || true
        die "OVS ports did not come up: ${e}(log: $LOG/ovs-vswitchd.log)"
    fi
    ofctl dump-flows > $out.dump-flows.txt
    [ "$COUNT_BR" = "$BR" ] || phy_ofctl dump-flows >> $out.dump-flows.txt
    appctl dpif-netdev/pmd-rxq-show > $out.rxq-show.txt 2>&1 || true
    grep -q "core_id $CORE" $out.rxq-show.txt \
        || die "OVS's PMD thread is not on core $CORE (see $out.rxq-show.txt)"
    sleep "$WARM"
    appctl dpif-netdev/pmd-stats-clear >/dev/null
    local a b t0 t1 tid c0 c1
    tid=$(pmd_tid)
    c0=0; c1=0
    [ -n "$tid" ] && c0=$(cpu_ticks "$tid")
    t0=$(date +%s.%N); a=$(tx_pkts)
    sleep "$WIN"
    b=$(tx_pkts); t1=$(date +%s.%N)
    [ -n "$tid" ] && c1=$(cpu_ticks "$tid")
    appctl dpif-netdev/pmd-perf-show > $out.perf-show.txt 2>&1
    appctl dpif-netdev/pmd-stats-show > $out.stats-show.txt 2>&1
    appctl dpctl/dump-flows > $out.megaflows.txt 2>&1 || true
    [[ $a =~ ^[0-9]+$ && $b =~ ^[0-9]+$ ]] || die "could not read port 2's tx counter from ovs-ofctl dump-ports"
    [ $((b - a)) -gt 0 ] || die "OVS forwarded no packets in $sc (flows: $out.dump-flows.txt, megaflows: $out.megaflows.txt, log: $LOG/ovs-vswitchd.log)"
    local share=()
    [ -n "$tid" ] && share=(--cpu-share "$(python3 -c "print(($c1 - $c0) / $(getconf CLK_TCK) / ($t1 - $t0))")")
    python3 $LIB/compare-report.py ovs-row --scenario "$sc" --packets $((b - a)) \
        --seconds "$(python3 -c "print($t1 - $t0)")" --flows "$nflows" "${share[@]}" \
        --perf-show $out.perf-show.txt > $out.json
    ovs_down
    log "OVS-DPDK $sc: $(python3 -c "import json; r = json.load(open('$out.json')); \
print(f\"{r['mpps']:.2f} Mpps, {r['cycles_per_packet']} cycles/pkt\")")"
}

# ---------------------------------------------------------------- 4. Hayate
hayate_build() {
    [ -n "$HAYATE_BIN" ] && return 0
    command -v cargo >/dev/null || export PATH="$HOME/.cargo/bin:$PATH"
    command -v cargo >/dev/null || { log "no cargo: install Rust (scripts/setup.sh) or pass --hayate BIN"; return 1; }
    log "building hayate (cargo build --release -p hayate)"
    (cd "$REPO" && cargo build --release -q -p hayate) >$LOG/hayate-build.log 2>&1 \
        || { tail -15 $LOG/hayate-build.log >&2; log "hayate does not build (log: $LOG/hayate-build.log)"; return 1; }
    local tgt
    tgt=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps \
          | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    HAYATE_BIN=$tgt/release/hayate
    [ -x "$HAYATE_BIN" ] || { log "no binary at $HAYATE_BIN after the build"; return 1; }
}

hayate_measure() {
    log "Hayate: $HAYATE_BIN bench $HAYATE_SCENARIOS --sizes 64 --core $CORE --seconds $WIN"
    local t0 t1 c0 c1 rc=0
    # CPU time of the whole run over its wall time: the share of the core Hayate really had.
    c0=$(awk '{print $16 + $17}' /proc/$$/stat)
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$HAYATE_BIN" bench $HAYATE_SCENARIOS --sizes 64 --json --core "$CORE" \
        --seconds "$WIN" --warmup "$WARM" > $LOG/hayate.json 2>$LOG/hayate.err || rc=$?
    t1=$(date +%s.%N)
    if [ $rc -ne 0 ]; then
        tail -5 $LOG/hayate.err >&2; log "hayate bench failed (log: $LOG/hayate.err)"; return 1
    fi
    c1=$(awk '{print $16 + $17}' /proc/$$/stat)
    HAYATE_CPU_SHARE=$(python3 -c "print(($c1 - $c0) / $(getconf CLK_TCK) / ($t1 - $t0))")
}

# ---------------------------------------------------------------- main
mkdir -p $ROOT $LOG $PCAPS
install_packages
[ -x $OVS_BIN ] || die "$OVS_BIN is missing; reinstall openvswitch-switch-dpdk"

# 2. traffic (the pcaps are kept between runs; they are cheap to check)
PCAP_1=$PCAPS/p2p-1flow.pcap
PCAP_N=$PCAPS/flows-$OVS_FLOWS.pcap
python3 $LIB/udp-pcap.py $PCAP_1
! chosen flows-1M || { [ -s $PCAP_N ] && [ "$(stat -c %s $PCAP_N)" -eq $((24 + 76 * OVS_FLOWS)) ]; } \
    || { log "writing $OVS_FLOWS frames to $PCAP_N"; python3 $LIB/udp-pcap.py $PCAP_N --count $OVS_FLOWS; }
PCAP_VXLAN=$PCAPS/vxlan-decap.pcap
python3 $LIB/udp-pcap.py $PCAP_VXLAN --vxlan
PCAP_SAME=$PCAPS/p2p-1flow-x$OVS_FLOWS.pcap
! chosen p2p-1flow-big-pcap \
    || { [ -s $PCAP_SAME ] && [ "$(stat -c %s $PCAP_SAME)" -eq $((24 + 76 * OVS_FLOWS)) ]; } \
    || python3 $LIB/udp-pcap.py $PCAP_SAME --count $OVS_FLOWS --same

HAYATE_OK=0
HAYATE_CPU_SHARE=""
HAYATE_SCENARIOS=""
for x in p2p-1flow flows-1M vxlan-encap vxlan-decap; do
    chosen $x && HAYATE_SCENARIOS="$HAYATE_SCENARIOS $x"
done
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
if [ $OVS_ONLY = 0 ]; then
    hayate_build && HAYATE_OK=1
fi

hugepages_up
OVS_ROWS=()
chosen p2p-1flow && { ovs_measure p2p-1flow $PCAP_1 1; OVS_ROWS+=($LOG/ovs-p2p-1flow.json); }
chosen flows-1M && { ovs_measure flows-1M $PCAP_N $OVS_FLOWS; OVS_ROWS+=($LOG/ovs-flows-1M.json); }
# Control (OVS only): one flow replayed from a pcap as large as flows-1M's. It costs what the
# replay of that many frames costs (each one a cache miss in net_pcap) without the lookups.
if chosen p2p-1flow-big-pcap; then
    ovs_measure p2p-1flow-big-pcap $PCAP_SAME 1 p2p-1flow
    OVS_ROWS+=($LOG/ovs-p2p-1flow-big-pcap.json)
fi
chosen vxlan-encap && { ovs_measure vxlan-encap $PCAP_1 1; OVS_ROWS+=($LOG/ovs-vxlan-encap.json); }
chosen vxlan-decap && { ovs_measure vxlan-decap $PCAP_VXLAN 1; OVS_ROWS+=($LOG/ovs-vxlan-decap.json); }

if [ $HAYATE_OK = 1 ]; then
    hayate_measure || HAYATE_OK=0
fi

REPORT_ARGS=(report --ovs "${OVS_ROWS[@]}"
    --core "$CORE" --seconds "$WIN" --warmup "$WARM" --loadavg "$LOADAVG"
    --ovs-version "$(ovs-vswitchd --version | head -1 | awk '{print $NF}')"
    --dpdk-version "$(dpkg-query -W -f '${Version}' dpdk 2>/dev/null || echo unknown)"
    --command "bash scripts/compare-ovs-dpdk.sh --seconds $WIN --warmup $WARM --core $CORE --ovs-flows $OVS_FLOWS --scenarios $(echo $SCENARIOS | tr ' ' ,)")
[ $HAYATE_OK = 1 ] && REPORT_ARGS+=(--hayate $LOG/hayate.json --hayate-cpu-share "$HAYATE_CPU_SHARE")
[ -n "$JSON_OUT" ] && REPORT_ARGS+=(--json "$JSON_OUT")
python3 $LIB/compare-report.py "${REPORT_ARGS[@]}"
if [ $OVS_ONLY = 0 ] && [ $HAYATE_OK = 0 ]; then
    log "the Hayate half did not run (see above); the OVS figures stand on their own"
    exit 1
fi
