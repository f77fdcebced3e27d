#!/usr/bin/env bash
# The main job on an embedded default: build Hayate and run its benchmark scenarios on
# in-memory null ports (no config, no controller, no NIC). Usage: bash scripts/demo.sh [ARGS]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo run --release -q -p hayate -- bench "$@"
