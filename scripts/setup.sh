#!/usr/bin/env bash
# Installs what Hayate's build and tests need on a fresh Debian 12 machine (idempotent).
# Run as root (or with sudo available). Safe to run again.
set -euo pipefail

need_apt=()
# iperf3, iputils-ping: the network-namespace suite (crates/hayate/tests/netns_*.rs).
# openvswitch-common: ovs-ofctl, which the OpenFlow tests drive and read; ovsdb-server,
# ovsdb-tool, ovsdb-client. openvswitch-switch: ovs-vsctl and vswitch.ovsschema, for the OVSDB
# tests (crates/hayate/tests/ovsdb_vsctl.rs, which run their own ovsdb-server).
# nftables: `hayate bench compare`'s sink on host B (and its test).
# clang, libbpf-dev: the AF_XDP port's XDP program (crates/port/bpf/, built by build.rs).
# dpdk-dev (dpdk-testpmd and the PMD libraries), librte-net-virtio23: DPDK's virtio-user, the
# VM side of the vhost-user tests (crates/hayate/tests/vhost_testpmd.rs).
# qemu-system-x86, busybox-static, cpio: the QEMU guests on vhost-user ports
# (crates/hayate/tests/vhost_qemu.rs; scripts/guest/build.sh makes their initramfs and
# fetches Debian's kernel package with apt-get download, never installing it).
# prometheus: the Prometheus server that scrapes `hayate run --metrics`
# (crates/hayate/tests/metrics_prometheus.rs).
# python3-venv, python3-dev: the controllers' venv below (Faucet's pytricia has no wheel for
# Debian 12's Python 3.11 and is compiled, which needs Python.h).
for pkg in build-essential pkg-config tcpdump iproute2 ethtool iperf3 iputils-ping python3 python3-venv python3-dev linux-perf clang libbpf-dev \
    openvswitch-common openvswitch-switch nftables qemu-system-x86 busybox-static cpio \
    dpdk-dev librte-net-virtio23 librte-mempool-ring23 prometheus; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "setup: installing ${need_apt[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # linux-perf is optional (profiles only); do not fail the set-up without it.
    $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null \
        || $SUDO apt-get install -y -qq --no-install-recommends \
            $(printf '%s\n' "${need_apt[@]}" | grep -v linux-perf) >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: no Rust toolchain; install rustup's stable toolchain (https://rustup.rs)" >&2
        exit 1
    fi
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

# Python controllers the tests drive (crates/hayate/tests/controller_*.rs): Faucet, which
# brings the os-ken it runs on (os-ken 3.1), in a venv outside the clone so CI's fresh
# clones reuse it; HAYATE_VENV overrides the folder.
VENV="${HAYATE_VENV:-/var/cache/hayate/venv}"
if ! { [ -x "$VENV/bin/faucet" ] && "$VENV/bin/python" -c 'import os_ken, faucet' >/dev/null 2>&1; }; then
    echo "setup: installing faucet (and os-ken) into $VENV" >&2
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check 'faucet==1.10.12'
fi
# ovsdbapp, the OVSDB library Neutron and os-vif use (crates/hayate/tests/ovsdb_vsctl.rs plugs
# a VM's port with it as os-vif does), in the same venv.
if ! "$VENV/bin/python" -c 'import ovsdbapp' >/dev/null 2>&1; then
    echo "setup: installing ovsdbapp into $VENV" >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check 'ovsdbapp==3.0.0'
fi
