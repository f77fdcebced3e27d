//! `hayate bench soak` for half a minute (issue 23): flow churn with barriers, whole-table
//! dumps of 20,000 entries, connection floods and stray HELLOs, malformed frames and ports
//! plugged and unplugged, all at once, while a ping crosses the standalone switch. The soak
//! itself checks the end (no ping lost, every malformed frame counted, descriptors and memory
//! back, both control channels answering) and fails otherwise; the long run is a command
//! (`hayate bench soak --minutes 10`), not a test.

mod netns;

#[test]
fn half_a_minute_of_everything_loses_nothing() {
    if !netns::can_run("soak", &["ping", "ovs-ofctl"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (v, text) = netns::bench_json(
        &[
            "soak",
            "--minutes",
            "0.5",
            "--flows",
            "20000",
            "--flood",
            "200",
        ],
        dir.path(),
    );
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0), "{text}");
    let pings = &v["pings"];
    assert!(pings[0].as_u64().unwrap() >= 500, "{text}");
    assert_eq!(pings[0], pings[1], "{text}");
    for k in ["churn_rounds", "dumps", "port_cycles"] {
        assert!(v[k].as_u64().unwrap() > 0, "{k}: {text}");
    }
    assert!(v["malformed"][0].as_u64().unwrap() > 0, "{text}");
}
