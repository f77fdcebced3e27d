#!/usr/bin/env python3
"""Compare `hayate bench` scenarios across builds on a noisy machine.

Runs every build's `hayate bench` in turn, round after round (so that the machine's slow
spells fall on all of them alike), one-second windows, and prints per build and scenario
the minimum and the median cycles per packet, and each scenario's rate as a share of the
first scenario's (from the minima: noise only ever adds cycles).

    python3 scripts/bench-ab.py --builds before=/tmp/hayate-before,after=target/release/hayate \
        --scenarios p2p-1flow,vxlan-encap,vxlan-decap --rounds 8
"""
import argparse
import json
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--builds", required=True,
                    help="NAME=PATH[,NAME=PATH...]: the hayate binaries to compare")
    ap.add_argument("--scenarios", required=True,
                    help="comma-separated; the first is the baseline of the shares")
    ap.add_argument("--rounds", type=int, default=6, help="runs per build and scenario")
    ap.add_argument("--size", default="64", help="frame size (bytes)")
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.builds.split(",")]
    scen = args.scenarios.split(",")
    cycles = {(name, s): [] for name, _ in builds for s in scen}
    for _ in range(args.rounds):
        for name, path in builds:
            out = subprocess.run(
                ["nice", "-n", "-5", path, "bench", *scen, "--sizes", args.size,
                 "--seconds", "1", "--warmup", "1", "--repeat", "1", "--json"],
                capture_output=True, text=True, check=True).stdout
            for row in json.loads(out):
                cycles[(name, row["scenario"])].append(row["cycles_per_packet"])
    for name, _ in builds:
        cols = []
        for s in scen:
            v = cycles[(name, s)]
            cols.append(f"{s} min {min(v):.1f} med {statistics.median(v):.1f}")
        base = min(cycles[(name, scen[0])])
        shares = " ".join(f"{s} {100 * base / min(cycles[(name, s)]):.1f}%" for s in scen[1:])
        print(f"{name}: " + "; ".join(cols) + (f" | share of {scen[0]}: {shares}" if shares else ""))


if __name__ == "__main__":
    main()
