//! `hayate bench soak` for half a minute (issue 23): flow churn with barriers, whole-table
//! dumps of 20,000 entries, connection floods and stray HELLOs, malformed frames and ports
//! plugged and unplugged, all at once, while a ping crosses the standalone switch. The soak
//! itself checks the end (no ping lost, every malformed frame counted, descriptors and memory
//! back, both control channels answering) and fails otherwise; the long run is a command
//! (`hayate bench soak --minutes 10`), not a test.

mod netns;

use std::process::Command;

#[test]
fn half_a_minute_of_everything_loses_nothing() {
    if !netns::can_run("soak", &["ping", "ovs-ofctl"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("soak.json");
    let out = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .args([
            "bench",
            "soak",
            "--minutes",
            "0.5",
            "--flows",
            "20000",
            "--flood",
            "200",
        ])
        .arg("--workdir")
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run hayate bench soak");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0), "{text}");
    let pings = &v["pings"];
    assert!(pings[0].as_u64().unwrap() >= 500, "{text}");
    assert_eq!(pings[0], pings[1], "{text}");
    for k in ["churn_rounds", "dumps", "port_cycles"] {
        assert!(v[k].as_u64().unwrap() > 0, "{k}: {text}");
    }
    assert!(v["malformed"][0].as_u64().unwrap() > 0, "{text}");
}
