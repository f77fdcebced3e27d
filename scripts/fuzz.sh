#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets/) for a while each, coverage-guided by
# libFuzzer with AddressSanitizer. Usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# cargo-fuzz needs nightly compiler flags (-Zsanitizer, sanitizer coverage). This machine has
# only the stable toolchain, so the build runs the stable compiler with RUSTC_BOOTSTRAP=1,
# which lets it accept those flags; nothing else is built that way. Crashes land in
# fuzz/artifacts/TARGET/ (replay one: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O TARGET
# artifacts/TARGET/crash-...), the corpus grows in fuzz/corpus/TARGET/ (both ignored by git).
# The same bodies run on stable in `cargo test` (packet, openflow, pipeline, port, ovsdb `fuzzing`
# modules), on seeded mutations instead of coverage feedback.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
export PATH="$HOME/.cargo/bin:$PATH"
secs=${1:-60}
shift || true
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(RUSTC_BOOTSTRAP=1 cargo fuzz list)
fi
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O
for t in "${targets[@]}"; do
    echo "== fuzz $t for ${secs}s"
    cargo fuzz run -O "$t" -- -max_total_time="$secs" -rss_limit_mb=4096 2>&1 | tail -n 3
done
