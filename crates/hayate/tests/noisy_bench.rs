//! `hayate bench noisy` end to end, briefly (issue 21): Hayate on AF_PACKET ports and the
//! Linux bridge, each without and with ingress policing on the noisy port, the victim alone
//! and under both floods. The figures themselves are a quiet machine's business (`hayate
//! bench noisy`, docs/benchmarks.md "Noisy neighbours"); this holds that every case runs and
//! reports every figure.

mod netns;

#[test]
fn every_case_reports_every_figure() {
    if !netns::can_run("noisy_bench", &["iperf3", "nft", "tc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (v, text) = netns::bench_json(
        &[
            "noisy",
            "--switches",
            "hayate-afpacket,linux-bridge",
            "--generator",
            "hayate-afpacket",
            "--seconds",
            "1",
            "--warmup",
            "0.3",
            "--pings",
            "50",
            "--new-flows",
            "500",
        ],
        dir.path(),
    );
    let runs = v["runs"].as_array().unwrap();
    // Two switches × policing off and on × alone, flood, flood-new-flows.
    assert_eq!(runs.len(), 12, "{text}");
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}\n{text}");
        let f = &r["figures"];
        for k in ["tcp_gbps", "ping_p99_us", "rr_tps", "rr_p99_us"] {
            assert!(f[k].as_f64().unwrap() > 0.0, "{k}: {r}\n{text}");
        }
        if r["case"] == "alone" {
            assert!(r["share"].is_null(), "{r}");
        } else {
            assert!(
                f["noise_offered_pps"].as_f64().unwrap() > 0.0,
                "{r}\n{text}"
            );
            for k in ["tcp", "ping_p99", "rr_tps", "rr_p99"] {
                assert!(r["share"][k].as_f64().unwrap() > 0.0, "{k}: {r}\n{text}");
            }
        }
    }
    assert!(text.contains("flood-new-flows"), "{text}");
}
