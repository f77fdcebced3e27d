//! Ingress policing end to end: a port policed from the config file loses its excess before
//! lookup, counted as `drop_policed` against it in `hayate ctl BRIDGE dump-drops` and in the
//! Prometheus drops-by-reason series, while another port's frames all go through.

mod ofctl_common;

use std::time::{Duration, Instant};

use ofctl_common::{drop_counter, Hayate};

/// Port 1 sends 20,000 frames policed to 1,000 a second (a 1,000-frame bucket); port 2
/// sends 1,000 unpoliced; both to port 3.
const CONFIG: &str = r#"
[[bridge]]
name = "brp"
fail_mode = "secure"
flows = ["table=0,priority=1,actions=output:3"]

[[bridge.port]]
name = "noisy"
spec = "null:limit=20000"
ingress_policing_kpkts_rate = 1
ingress_policing_kpkts_burst = 1

[[bridge.port]]
name = "victim"
spec = "null:limit=1000,ingress_policing_rate=1000000"

[[bridge.port]]
name = "sink"
spec = "null:sink"
"#;

#[test]
fn policed_excess_is_counted_against_its_port_only() {
    let h = Hayate::with_config(CONFIG);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut out, mut ports);
    loop {
        out = h.ctl("brp", &["dump-drops"]);
        ports = h.ctl("brp", &["dump-ports"]);
        let done =
            ports.contains("port  1: rx pkts=20000,") && ports.contains("port  2: rx pkts=1000,");
        if done || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The bucket (1,000) and the rate over the seconds the source took passed; the rest
    // was policed.
    let policed = drop_counter(&out, "port 1 ", "drop_policed").unwrap_or(0);
    assert!((15_000..=19_000).contains(&policed), "{out}\n{ports}");
    // The port sent them all: policed frames count as received.
    assert!(ports.contains("port  1: rx pkts=20000,"), "{ports}");
    // Port 3 sent on all that passed: the victim's 1,000 and the noisy port's rest.
    let tx = format!("tx pkts={},", 1000 + 20_000 - policed);
    assert!(ports.contains(&tx), "{tx} in {ports}\n{out}");
    assert_eq!(
        drop_counter(&out, "port 2 ", "drop_policed"),
        Some(0),
        "{out}"
    );
    assert_eq!(
        drop_counter(&out, "port 3 ", "drop_policed"),
        Some(0),
        "{out}"
    );
}
