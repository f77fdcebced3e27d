//! `hayate bench churn-compare` end to end on a small table (issue 20): Hayate — and Open
//! vSwitch with DPDK when it is installed — takes the table from `ovs-ofctl add-flows`,
//! forwards the pcap's flows, keeps forwarding while the bench's own OpenFlow connection
//! churns flow-mods with barriers, and moves a flow to port 3 in the effect test. The figures
//! themselves are a quiet machine's business (`hayate bench churn-compare`); this holds that
//! every step works and its results are read back: every window ok, traffic in both, flow-mods
//! applied, every effect trial seen.

mod netns;

use std::path::Path;

fn ovs_dpdk_installed() -> bool {
    Path::new("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk").exists()
}

#[test]
fn churn_windows_and_effect_trials_complete() {
    if !netns::can_run("churn_compare", &["ovs-ofctl"]) {
        return;
    }
    let switches = if ovs_dpdk_installed() {
        "hayate,ovs-dpdk"
    } else {
        eprintln!("openvswitch-switch-dpdk not installed: Hayate alone");
        "hayate"
    };
    let dir = tempfile::tempdir().unwrap();
    let (v, text) = netns::bench_json(
        &[
            "churn-compare",
            "--switches",
            switches,
            "--tables",
            "per-flow,drop",
            "--flows",
            "200",
            "--rates",
            "200",
            "--matching-rate",
            "100",
            "--seconds",
            "0.5",
            "--warmup",
            "0",
            "--warmup-max",
            "3",
            "--trials",
            "2",
        ],
        dir.path(),
    );
    let runs = v["runs"].as_array().unwrap();
    let n_sw = switches.split(',').count();
    // per-flow: 200/s and 100/s+1 %; drop: 200/s.
    assert_eq!(runs.len(), 3 * n_sw, "{text}");
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}\n{text}");
        for k in ["base_mpps", "churn_mpps", "mods_per_s"] {
            assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}\n{text}");
        }
    }
    let effects = v["effect_runs"].as_array().unwrap();
    // Two tables × two redirect rules.
    assert_eq!(effects.len(), 4 * n_sw, "{text}");
    for e in effects {
        assert_eq!(e["status"], "ok", "{e}\n{text}");
        assert_eq!(e["effect_ms"].as_array().unwrap().len(), 2, "{e}");
    }
    assert!(text.contains("÷ovs-dpdk"), "{text}");
}
