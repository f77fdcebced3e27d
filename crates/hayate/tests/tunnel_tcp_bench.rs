//! `hayate bench tunnel-tcp` end to end, briefly (issue 18): two Hayates on AF_PACKET
//! underlays and two kernel VXLAN devices in Linux bridges, one short stream each; and with
//! the VMs' offloads on, two Hayates over TAP underlays (super-packets encapsulated whole).
//! The figures themselves are a quiet machine's business (docs/benchmarks.md "Tunnels"); this
//! holds that every overlay runs and reports every figure, and Hayate's its share of the
//! kernel's.

mod netns;

#[test]
fn every_overlay_reports_every_figure() {
    if !netns::can_run("tunnel_tcp_bench", &["iperf3", "ethtool", "ping"]) {
        return;
    }
    check("hayate-afpacket", "off");
    check("hayate-tap", "on");
}

/// One short stream through Hayate's overlay `overlay` and through the kernel's, the VMs'
/// offloads `offloads`.
fn check(overlay: &str, offloads: &str) {
    let dir = tempfile::tempdir().unwrap();
    let switches = format!("{overlay},linux-vxlan");
    let (v, text) = netns::bench_json(
        &[
            "tunnel-tcp",
            "--switches",
            &switches,
            "--offloads",
            offloads,
            "--seconds",
            "1",
            "--pings",
            "50",
        ],
        dir.path(),
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{text}");
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}\n{text}");
        for k in ["tcp_gbps", "ping_median_us", "ping_p99_us"] {
            assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}\n{text}");
        }
    }
    let summary = v["summary"].as_array().unwrap();
    assert_eq!(summary[0]["overlay"], overlay, "{text}");
    assert_eq!(v["offloads"], offloads, "{text}");
    assert!(
        summary[0]["tcp_vs_kernel"].as_f64().unwrap() > 0.0,
        "{text}"
    );
    assert!(summary[1]["tcp_vs_kernel"].is_null(), "{text}");
    assert!(text.contains("vs linux-vxlan"), "{text}");
}
