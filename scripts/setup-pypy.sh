#!/usr/bin/env bash
# os-ken on PyPy, for the controller benchmarks (docs/benchmarks.md, "New flows per second
# through a controller"): Debian's pypy3 and a venv outside the clone with os-ken and the
# libraries a learning switch uses. Not needed by scripts/test.sh.
#
# os-ken is installed without its ncclient dependency: ncclient (NETCONF, os_ken.lib.of_config)
# pulls in paramiko and cryptography, which has no PyPy 3.9 wheel and needs a Rust build; no
# OpenFlow app loads it. os-ken's version matches the CPython venv of scripts/setup.sh; pip
# picks the newest of the other libraries that still run on PyPy's Python 3.9.
set -euo pipefail

VENV="${HAYATE_PYPY_VENV:-/var/cache/hayate/venv-pypy}"
if [ "$(id -u)" = 0 ] && ! command -v pypy3 >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q pypy3 pypy3-venv >/dev/null
fi
command -v pypy3 >/dev/null || { echo "setup-pypy: install pypy3 and pypy3-venv (apt) as root" >&2; exit 1; }
if ! "$VENV/bin/python" -c 'import os_ken' >/dev/null 2>&1; then
    echo "setup-pypy: installing os-ken into $VENV" >&2
    rm -rf "$VENV"
    pypy3 -m venv "$VENV"
    # The libraries first, os-ken last without its dependencies (pip then has no missing
    # ncclient to complain about).
    "$VENV/bin/pip" install -q --disable-pip-version-check eventlet msgpack netaddr oslo.config \
        ovs packaging pbr Routes WebOb
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps 'os-ken==3.1.0'
fi
"$VENV/bin/python" -c 'import os_ken.base.app_manager' || {
    echo "setup-pypy: os-ken does not import in $VENV (see the error above); remove $VENV and run again" >&2
    exit 1
}
echo "setup-pypy: os-ken on $("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0], sys.implementation.name)') in $VENV"
