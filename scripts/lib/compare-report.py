#!/usr/bin/env python3
"""Results of scripts/compare-ovs-dpdk.sh: OVS rows, the side-by-side table and its JSON.

    compare-report.py ovs-row --scenario S --packets N --seconds T --flows F --perf-show FILE
        one OVS measurement as a JSON object on stdout (rate from the port counter over the
        window; TSC cycles per packet and cache hits from dpif-netdev/pmd-perf-show)
    compare-report.py report --ovs ROW.json... [--hayate HAYATE.json] [--json OUT] [meta...]
        the table on stdout; --json writes the same rows with details
    compare-report.py --self-test
Only the standard library is used.
"""
import argparse
import json
import re
import sys

# One line of `ovs-appctl dpif-netdev/pmd-perf-show` (OVS 3.x) per field we keep.
PERF_FIELDS = {
    'iterations': r'Iterations:\s+(\d+)',
    'used_tsc_cycles': r'Used TSC cycles:\s+(\d+)',
    'busy_pct': r'busy iterations:\s+\d+\s+\(\s*([\d.]+)\s*%',
    'rx_packets': r'Rx packets:\s+(\d+)',
    'cycles_per_packet': r'Rx packets:\s+\d+\s+\([\d.]+ Kpps,\s*([\d.]+) cycles/pkt\)',
    'emc_hits': r'EMC hits:\s+(\d+)',
    'smc_hits': r'SMC hits:\s+(\d+)',
    'megaflow_hits': r'Megaflow hits:\s+(\d+)',
    'upcalls': r'- Upcalls:\s+(\d+)',
    'tx_batch': r'Tx batches:\s+\d+\s+\(\s*([\d.]+) pkts/batch\)',
    'duration_s': r'Measurement duration:\s+([\d.]+) s',
}
FLOAT_FIELDS = {'busy_pct', 'cycles_per_packet', 'tx_batch', 'duration_s'}


def parse_perf_show(text):
    """The fields of PERF_FIELDS found in one PMD's pmd-perf-show text (None if absent)."""
    out = {}
    for key, rx in PERF_FIELDS.items():
        m = re.search(rx, text)
        if m is None:
            out[key] = None
        elif key in FLOAT_FIELDS:
            out[key] = float(m.group(1))
        else:
            out[key] = int(m.group(1))
    m = re.search(r'core_id (\d+)', text)
    out['core'] = int(m.group(1)) if m else None
    return out


def ovs_row(a):
    """One OVS measurement from the window's counter and the PMD's perf-show text."""
    try:
        with open(a.perf_show) as f:
            perf = parse_perf_show(f.read())
    except OSError as e:
        sys.exit(f'compare-report.py: cannot read {a.perf_show}: {e.strerror}')
    if a.seconds <= 0:
        sys.exit('compare-report.py: --seconds must be positive')
    row = {
        'scenario': a.scenario,
        'frame_len': 64,
        'mpps': a.packets / a.seconds / 1e6,
        'packets': a.packets,
        'seconds': a.seconds,
        'flows': a.flows,
        'cycles_per_packet': perf['cycles_per_packet'],
        'cpu_share': a.cpu_share,
    }
    if perf['used_tsc_cycles'] and perf['rx_packets']:
        # All cycles of the PMD's core (idle polls too) per packet, as Hayate counts them.
        row['all_cycles_per_packet'] = round(perf['used_tsc_cycles'] / perf['rx_packets'], 1)
        if perf['duration_s']:
            row['tsc_ghz'] = round(perf['used_tsc_cycles'] / perf['duration_s'] / 1e9, 3)
    row['pmd'] = perf
    print(json.dumps(row, indent=1))


def fmt(v, spec):
    return '-' if v is None else format(v, spec)


def report(a):
    """The side-by-side table (stdout) and, with --json, the same rows as JSON."""
    ovs = {}
    for path in a.ovs:
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f'compare-report.py: cannot read OVS result {path}: {e}')
        ovs[r['scenario']] = r
    hay = {}
    if a.hayate:
        try:
            with open(a.hayate) as f:
                rows = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f'compare-report.py: cannot read Hayate result {a.hayate}: {e}; '
                     'it should be the output of `hayate bench --json`')
        for r in rows:
            if r.get('frame_len') == 64:
                hay[r['scenario']] = r
    out_rows = []
    for sc in list(ovs) + [s for s in hay if s not in ovs]:
        o, h = ovs.get(sc, {}), hay.get(sc, {})
        om, hm = o.get('mpps'), h.get('mpps')
        out_rows.append({
            'scenario': sc,
            'frame_len': 64,
            'ovs_mpps': om,
            'ovs_cycles_per_packet': o.get('cycles_per_packet'),
            'hayate_mpps': hm,
            'hayate_cycles_per_packet': h.get('cycles_per_packet'),
            'ratio_hayate_ovs': (hm / om) if om and hm is not None else None,
            'ovs_flows': o.get('flows'),
            'ovs': o or None,
            'hayate': h or None,
        })
    head = (f"{'scenario':<20} {'OVS-DPDK Mpps':>13} {'OVS cyc/pkt':>11} "
            f"{'Hayate Mpps':>11} {'Hayate cyc/pkt':>14} {'Hayate/OVS':>10}")
    print(head)
    for r in out_rows:
        ratio = '-' if r['ratio_hayate_ovs'] is None else f"{r['ratio_hayate_ovs']:.2f}x"
        print(f"{r['scenario']:<20} {fmt(r['ovs_mpps'], '.2f'):>13} "
              f"{fmt(r['ovs_cycles_per_packet'], '.0f'):>11} {fmt(r['hayate_mpps'], '.2f'):>11} "
              f"{fmt(r['hayate_cycles_per_packet'], '.1f'):>14} {ratio:>10}")
    notes = [f"64-byte frames, one thread on core {a.core}, {a.seconds} s windows after "
             f"{a.warmup} s warm-up; Open vSwitch {a.ovs_version} with DPDK {a.dpdk_version} "
             "(net_pcap infinite_rx=1 -> net_null), cycles are TSC cycles."]
    for r in out_rows:
        f = r['ovs_flows']
        if r['scenario'] == 'flows-1M' and f and f != 1_000_000:
            notes.append(f"OVS's flows-1M replayed {f} distinct flows (its mempool cannot hold "
                         "1,000,000 frames); Hayate's generates 1,000,000.")
        if r['scenario'] == 'vxlan-encap':
            notes.append("vxlan-encap: 64-byte inner frames out of a VXLAN port (110 bytes on the "
                         "underlay); OVS's userspace tunnel (tnl_push to its underlay bridge, next "
                         "hop from ovs/route/add and tnl/arp/set), Hayate's vxlan port with a "
                         "static next hop.")
        if r['scenario'] == 'vxlan-decap':
            notes.append("vxlan-decap: the same frames arrive in VXLAN on the underlay and leave "
                         "plain; OVS terminates with tnl_pop and a second datapath pass "
                         "(recirculation), Hayate right after receive in one pass.")
        if r['scenario'] == 'p2p-1flow-big-pcap':
            notes.append("p2p-1flow-big-pcap (OVS only): one flow replayed from a pcap as large "
                         "as flows-1M's: what the replay's memory footprint costs OVS without "
                         "many flows; flows-1M minus this is what the many flows cost its "
                         "lookups. Hayate's null ports write a template and have no such "
                         "footprint.")
    shares = [f"OVS {r['scenario']} {r['ovs']['cpu_share'] * 100:.0f}%" for r in out_rows
              if r['ovs'] and r['ovs'].get('cpu_share') is not None]
    if a.hayate_cpu_share is not None and hay:
        shares.append(f"Hayate (whole run) {a.hayate_cpu_share * 100:.0f}%")
        for r in out_rows:
            if r['hayate']:
                r['hayate']['cpu_share'] = a.hayate_cpu_share
    if shares:
        notes.append("Share of the core each switch thread got (below 100% = other programs "
                     "ran there and the figures are low): " + ', '.join(shares)
                     + (f"; load average at start {a.loadavg}." if a.loadavg else "."))
        got = [r['ovs']['cpu_share'] for r in out_rows
               if r['ovs'] and r['ovs'].get('cpu_share') is not None]
        if a.hayate_cpu_share is not None and hay:
            got.append(a.hayate_cpu_share)
        if got and min(got) < 0.9:
            notes.append("WARNING: a switch had less than 90% of its core, so its figures "
                         "(and the ratios) are lower than the switch can do; rerun when "
                         f"nothing else runs on core {a.core}.")
    if not hay:
        notes.append('Hayate did not run: its columns are empty.')
    for n in notes:
        print('  ' + n)
    if a.json:
        doc = {
            'command': a.command,
            'core': a.core,
            'seconds': a.seconds,
            'warmup': a.warmup,
            'ovs_version': a.ovs_version,
            'dpdk_version': a.dpdk_version,
            'loadavg_at_start': a.loadavg,
            'notes': notes,
            'rows': out_rows,
        }
        try:
            with open(a.json, 'w') as f:
                json.dump(doc, f, indent=1)
                f.write('\n')
        except OSError as e:
            sys.exit(f'compare-report.py: cannot write {a.json}: {e.strerror}')


# Captured from Open vSwitch 3.1.0 (Debian 12) by this script.
SAMPLE_PERF_SHOW = """\
Time: 00:11:28.209
Measurement duration: 5.042 s

pmd thread numa_id 0 core_id 1:

  Iterations:              2822473  (1.78 us/it)
  - Used TSC cycles:   13091270023  ( 99.9 % of total cycles)
  - idle iterations:             0  (  0.0 % of used cycles)
  - busy iterations:       2822473  (100.0 % of used cycles)
  - sleep iterations:            0  (  0.0 % of iterations)
  Sleep time (us):               0  (  0 us/iteration avg.)
  Rx packets:             90319136  (17913 Kpps, 145 cycles/pkt)
  Datapath passes:        90319136  (1.00 passes/pkt)
  - PHWOL hits:                  0  (  0.0 %)
  - MFEX Opt hits:               0  (  0.0 %)
  - Simple Match hits:           0  (  0.0 %)
  - EMC hits:             90319136  (100.0 %)
  - SMC hits:                    0  (  0.0 %)
  - Megaflow hits:               0  (  0.0 %, 0.00 subtbl lookups/hit)
  - Upcalls:                     0  (  0.0 %, 0.0 us/upcall)
  - Lost upcalls:                0  (  0.0 %)
  Tx packets:             90319136  (17913 Kpps)
  Tx batches:              2822473  (32.00 pkts/batch)
"""


def self_test():
    p = parse_perf_show(SAMPLE_PERF_SHOW)
    assert p['rx_packets'] == 90319136 and p['cycles_per_packet'] == 145.0, p
    assert p['used_tsc_cycles'] == 13091270023 and p['busy_pct'] == 100.0, p
    assert p['emc_hits'] == 90319136 and p['megaflow_hits'] == 0 and p['upcalls'] == 0, p
    assert p['tx_batch'] == 32.0 and p['duration_s'] == 5.042 and p['core'] == 1, p
    assert p['iterations'] == 2822473 and p['smc_hits'] == 0, p
    assert parse_perf_show('')['rx_packets'] is None
    print('compare-report.py: self-test passed')


def main():
    if sys.argv[1:] == ['--self-test']:
        self_test()
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    o = sub.add_parser('ovs-row', help='one OVS measurement as JSON')
    o.add_argument('--scenario', required=True)
    o.add_argument('--packets', type=int, required=True)
    o.add_argument('--seconds', type=float, required=True)
    o.add_argument('--flows', type=int, required=True)
    o.add_argument('--perf-show', required=True)
    o.add_argument('--cpu-share', type=float,
                   help="share of the core the PMD thread had during the window (0..1)")
    r = sub.add_parser('report', help='the side-by-side table (and JSON)')
    r.add_argument('--ovs', nargs='+', required=True)
    r.add_argument('--hayate')
    r.add_argument('--json')
    r.add_argument('--core', type=int, required=True)
    r.add_argument('--seconds', type=float, required=True)
    r.add_argument('--warmup', type=float, required=True)
    r.add_argument('--ovs-version', default='unknown')
    r.add_argument('--dpdk-version', default='unknown')
    r.add_argument('--command', default='')
    r.add_argument('--loadavg', default='')
    r.add_argument('--hayate-cpu-share', type=float)
    a = ap.parse_args()
    ovs_row(a) if a.cmd == 'ovs-row' else report(a)


if __name__ == '__main__':
    main()
