#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, formatting, lints, unit/property/integration
# tests. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TERM_COLOR=never

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
mkdir -p target
cargo test --workspace 2>&1 | tee target/test.log
echo "== compare script self-test (no root, no OVS needed)"
bash scripts/compare-ovs-dpdk.sh --self-test
echo "== bench smoke (every scenario, short)"
cargo run --release -q -p hayate -- bench --seconds 0.2 --warmup 0.1 --json > target/bench-smoke.json
python3 - <<'PY'
import json
rows = json.load(open("target/bench-smoke.json"))
names = {r["scenario"] for r in rows}
bad = [r for r in rows if not r["packets"] > 0]
assert not bad, f"scenarios that forwarded nothing: {bad}"
# The tunnel scenarios (issue 18) run beside p2p-1flow and report their share of its rate.
for t in ("vxlan-encap", "vxlan-encap-1k", "vxlan-decap", "vxlan-decap-500"):
    got = [r for r in rows if r["scenario"] == t]
    assert got and all(r["vs_baseline"] for r in got), f"{t}: missing or without its share of p2p-1flow: {got}"
print(f"bench smoke: {len(rows)} runs over {len(names)} scenarios forwarded packets")
PY
