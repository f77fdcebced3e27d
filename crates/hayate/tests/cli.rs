//! Black-box tests of the `hayate` binary: frames in through a pcap port, frames out through
//! another, with the standalone default and with a config file.

use std::path::{Path, PathBuf};
use std::process::Command;

const HAYATE: &str = env!("CARGO_BIN_EXE_hayate");

/// Runs `cmd`, which must succeed.
fn succeeds(cmd: &mut Command) {
    let st = cmd.output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

/// Runs `cmd`, which must fail; what it said on its standard error.
fn refused(cmd: &mut Command) -> String {
    let st = cmd.output().unwrap();
    assert!(!st.status.success());
    String::from_utf8_lossy(&st.stderr).into_owned()
}

/// `toml` written to the config file `name` in `dir`.
fn config(dir: &Path, name: &str, toml: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, toml).unwrap();
    path
}

/// A minimal pcap writer (the format is tiny; the test must not depend on the code it tests).
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

/// Frames of a pcap file (little-endian microsecond format only).
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    assert!(b.len() >= 24, "pcap {} is too short", path.display());
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16;
        frames.push(b[at..at + incl].to_vec());
        at += incl;
    }
    frames
}

fn udp_frame(dst_last: u8, src_last: u8, seq: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, dst_last]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src_last]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = [
        0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, src_last, 10, 0, 0, dst_last,
    ];
    f[14..34].copy_from_slice(&ip);
    let mut sum: u32 = 0;
    for c in f[14..34].chunks(2) {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[34..36].copy_from_slice(&1024u16.to_be_bytes());
    f[36..38].copy_from_slice(&1024u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f[42] = seq;
    f
}

#[test]
fn standalone_bridge_forwards_pcap_to_pcap() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let output = dir.path().join("out.pcap");
    let frames: Vec<Vec<u8>> = (0..10).map(|i| udp_frame(2, 1, i)).collect();
    write_pcap(&input, &frames);
    succeeds(
        Command::new(HAYATE)
            .args([
                "run",
                "--duration",
                "1",
                "--stats-interval",
                "0",
                "--core",
                "0",
            ])
            .arg("--port")
            .arg(format!("pcap:in={},loops=1", input.display()))
            .arg("--port")
            .arg(format!("pcap:out={}", output.display())),
    );
    // NORMAL floods the unknown destination to the only other port.
    let got = read_pcap(&output);
    assert_eq!(got, frames);
}

#[test]
fn config_flows_steer_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let out2 = dir.path().join("out2.pcap");
    let out3 = dir.path().join("out3.pcap");
    // Frames to .2 go to port 2, to .3 go to port 3, anything else is dropped.
    let frames = vec![
        udp_frame(2, 1, 0),
        udp_frame(3, 1, 1),
        udp_frame(9, 1, 2),
        udp_frame(2, 1, 3),
    ];
    write_pcap(&input, &frames);
    let cfg = format!(
        r#"
[[bridge]]
name = "br0"
cores = [0]
flows = [
  "table=0,priority=10,in_port=1,actions=goto_table:1",
  "table=1,priority=10,ip,nw_dst=10.0.0.2,actions=output:2",
  "table=1,priority=10,ip,nw_dst=10.0.0.3,actions=output:3",
]
[[bridge.port]]
spec = "pcap:in={},loops=1"
[[bridge.port]]
spec = "pcap:out={}"
[[bridge.port]]
spec = "pcap:out={}"
"#,
        input.display(),
        out2.display(),
        out3.display()
    );
    let cfg_path = config(dir.path(), "hayate.toml", &cfg);
    succeeds(
        Command::new(HAYATE)
            .args([
                "run",
                "--duration",
                "1",
                "--stats-interval",
                "0",
                "--config",
            ])
            .arg(&cfg_path),
    );
    assert_eq!(read_pcap(&out2), vec![frames[0].clone(), frames[3].clone()]);
    assert_eq!(read_pcap(&out3), vec![frames[1].clone()]);
}

/// `hayate check` of a bridge whose one flow is `flow` (on line 3) beside a null sink, which
/// must refuse it; what it said.
fn check_refuses(flow: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = config(
        dir.path(),
        "hayate.toml",
        &format!(
            "[[bridge]]\nname = \"br0\"\nflows = [\"{flow}\"]\n[[bridge.port]]\nspec = \"null:sink\"\n"
        ),
    );
    refused(Command::new(HAYATE).arg("check").arg(&cfg_path))
}

#[test]
fn bad_config_names_line_and_fix() {
    let err = check_refuses("in_port=1,actions=output:7");
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("output:7 is not a port"), "{err}");
}

#[test]
fn a_lane_core_the_machine_lacks_is_refused_with_its_range() {
    let err = refused(
        Command::new(HAYATE)
            .args([
                "run",
                "--port",
                "null:",
                "--port",
                "null:sink",
                "--lane-core",
                "4096",
            ])
            .args(["--duration", "1"]),
    );
    assert!(err.contains("lane core 4096 does not exist"), "{err}");
    assert!(err.contains("cores 0 ..="), "{err}");
}

#[test]
fn lane_core_beside_a_config_is_refused_with_where_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = config(
        dir.path(),
        "ok.toml",
        "[[bridge]]\nname = \"br0\"\n[[bridge.port]]\nspec = \"null:sink\"\n",
    );
    let err = refused(
        Command::new(HAYATE)
            .arg("run")
            .arg("--config")
            .arg(&cfg_path)
            .args(["--lane-core", "0", "--duration", "1"]),
    );
    assert!(err.contains("lane_core = N in the bridge of"), "{err}");
}

#[test]
fn goto_backwards_is_refused() {
    let err = check_refuses("table=1,actions=goto_table:0");
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("goto"), "{err}");
}

#[test]
fn bench_lists_scenarios_and_refuses_unknown() {
    let st = Command::new(HAYATE)
        .args(["bench", "--list"])
        .output()
        .unwrap();
    assert!(st.status.success());
    let out = String::from_utf8_lossy(&st.stdout);
    for s in [
        "p2p-1flow",
        "l2-learning",
        "flows-1M",
        "acl-64",
        "pipeline-4",
        "new-flows",
        "vxlan-encap",
        "vxlan-decap",
    ] {
        assert!(out.contains(s), "missing {s}: {out}");
    }
    let err = refused(Command::new(HAYATE).args(["bench", "nope"]));
    assert!(err.contains("unknown scenario"), "{err}");
}
