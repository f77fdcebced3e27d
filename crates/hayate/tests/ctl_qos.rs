//! Egress queues end to end, through real `ovs-ofctl`: a port's queues from the config file,
//! a flood into one queue (`enqueue:3:1`) held to its `max_rate` while another queue's
//! `min_rate` lets all of a neighbour's frames through; the counts in `ovs-ofctl
//! queue-stats` and `dump-drops`, the rates in `queue-get-config`, a flow-mod to a queue the
//! port lacks refused with OFPBAC_BAD_QUEUE; `hayate ctl set-queue` and `set-policing`
//! changing a running port; queue ids up to 61439 (0xefff) on a shaped port, its tail drops in
//! queue-stats and `hayate ctl dump-queues`, and the limit of 64 queues a port.

mod ofctl_common;

use std::process::Command;
use std::time::{Duration, Instant};

use ofctl_common::{drop_counter, have_ofctl, Hayate};

/// Port 1 floods 20,000 frames into queue 1 of port 3 (100 kbit/s, a 13-kbit bucket);
/// port 2 sends 1,000 into queue 2, guaranteed 1,000 kbit/s with a 2,000-kbit bucket
/// (enough for all of them at once); port 3's whole cap is 1,000 kbit/s.
const CONFIG: &str = r#"
[[bridge]]
name = "brq"
fail_mode = "secure"
flows = [
  "table=0,priority=1,in_port=1,actions=enqueue:3:1",
  "table=0,priority=1,in_port=2,actions=set_queue:2,output:3",
]

[[bridge.port]]
name = "noisy"
spec = "null:limit=20000"

[[bridge.port]]
name = "victim"
spec = "null:limit=1000"

[[bridge.port]]
name = "sink"
spec = "null:sink"
qos_max_rate = 1000

[[bridge.port.queue]]
id = 1
max_rate = 100
burst = 13

[[bridge.port.queue]]
id = 2
min_rate = 1000
burst = 2000
"#;

/// `(tx_packets, tx_bytes, tx_errors)` of `queue` in `ovs-ofctl queue-stats` text.
fn queue(text: &str, queue: u32) -> Option<(u64, u64, u64)> {
    let at = text.find(&format!("queue {queue}:"))?;
    let rest = &text[at..];
    let field = |name: &str| -> Option<u64> {
        let v = &rest[rest.find(&format!("{name}="))? + name.len() + 1..];
        v[..v.find([',', ' ', '\n']).unwrap_or(v.len())]
            .parse()
            .ok()
    };
    Some((field("pkts")?, field("bytes")?, field("errors")?))
}

/// `ovs-ofctl -O OpenFlow13 CMD TARGET ARGS…`: (success, stdout + stderr).
fn ofctl_try(h: &Hayate, cmd: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "--timeout=5", cmd, &h.target()])
        .args(args)
        .output()
        .expect("run ovs-ofctl");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `hayate ctl` on bridge `brq`: (success, stdout + stderr).
fn ctl_try(h: &Hayate, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .arg("ctl")
        .arg(h.file("brq.mgmt"))
        .args(args)
        .output()
        .expect("run hayate ctl");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn a_flooded_queue_is_held_to_its_rate_and_its_neighbours_minimum_holds() {
    if !have_ofctl("a_flooded_queue_is_held_to_its_rate_and_its_neighbours_minimum_holds") {
        return;
    }
    let start = Instant::now();
    let h = Hayate::with_config(CONFIG);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut stats;
    loop {
        stats = h.ofctl("queue-stats", &["3"]);
        let done = match (queue(&stats, 1), queue(&stats, 2)) {
            (Some((p1, _, e1)), Some((p2, _, _))) => p1 + e1 == 20_000 && p2 == 1000,
            _ => false,
        };
        if done || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let secs = start.elapsed().as_secs_f64();
    let (p1, b1, e1) = queue(&stats, 1).expect(&stats);
    let (p2, _, e2) = queue(&stats, 2).expect(&stats);
    // The neighbour's queue: every frame, none refused — its minimum holds under the flood.
    assert_eq!((p2, e2), (1000, 0), "{stats}");
    // The flooded queue: its 13-kbit bucket and 100 kbit/s over the seconds it took.
    assert_eq!(p1 + e1, 20_000, "{stats}");
    let bits = 8 * b1 / p1.max(1);
    let most = (13_000 + (100_000.0 * secs) as u64) / bits + 1;
    assert!(
        p1 <= most,
        "queue 1 passed {p1} > {most} in {secs:.1} s: {stats}"
    );
    assert!(e1 >= 20_000 - most, "{stats}");
    // The same counts in dump-drops and dump-ports.
    let drops = h.ctl("brq", &["dump-drops"]);
    assert_eq!(
        drop_counter(&drops, "port 3 ", "drop_queue"),
        Some(e1),
        "{drops}"
    );
    assert_eq!(
        drop_counter(&drops, "port 3 ", "drop_queue_unknown"),
        Some(0),
        "{drops}"
    );
    let ports = h.ctl("brq", &["dump-ports", "3"]);
    assert!(ports.contains(&format!("tx pkts={},", p1 + p2)), "{ports}");

    // Rates in tenths of a percent of the port's 1,000 kbit/s.
    let cfg = h.ofctl("queue-get-config", &["3"]);
    assert!(
        cfg.contains("queue 1:") && cfg.contains("max_rate:10.0%"),
        "{cfg}"
    );
    assert!(
        cfg.contains("queue 2:") && cfg.contains("min_rate:100.0%"),
        "{cfg}"
    );

    // ovs-ofctl's enqueue to a queue port 3 has: accepted; to one it lacks: BAD_QUEUE.
    h.ofctl("add-flow", &["priority=5,in_port=9,actions=enqueue:3:2"]);
    let flows = h.ofctl("dump-flows", &[]);
    assert!(flows.contains("set_queue:2,output:3"), "{flows}");
    let (ok, text) = ofctl_try(
        &h,
        "add-flow",
        &["priority=6,in_port=9,actions=enqueue:3:5"],
    );
    assert!(!ok && text.contains("OFPBAC_BAD_QUEUE"), "{text}");

    // set-queue changes the running port's queue.
    let out = h.ctl("brq", &["set-queue", "sink", "1", "max=50,burst=13"]);
    assert!(out.contains("queue 1"), "{out}");
    let cfg = h.ofctl("queue-get-config", &["3"]);
    assert!(cfg.contains("max_rate:5.0%"), "{cfg}");
    let (ok, text) = ctl_try(&h, &["set-queue", "sink", "1", "min=90,max=50"]);
    assert!(!ok && text.contains("lower min_rate"), "{text}");
    h.ctl("brq", &["set-queue", "sink", "1", "off"]);
    let stats = h.ofctl("queue-stats", &["3"]);
    assert!(
        queue(&stats, 1).is_none() && queue(&stats, 2).is_some(),
        "{stats}"
    );
}

#[test]
fn set_policing_changes_a_running_ports_ingress_policing() {
    let h = Hayate::with_config(CONFIG);
    let out = h.ctl("brq", &["set-policing", "noisy", "rate=1000,burst=100"]);
    assert!(out.contains("ingress_policing_rate=1000"), "{out}");
    let show = h.ctl("brq", &["show"]);
    assert!(
        show.contains("ingress policing: ingress_policing_rate=1000,ingress_policing_burst=100"),
        "{show}"
    );
    assert!(
        show.contains("egress: qos_max_rate=1000; queue 1: max_rate=100,burst=13"),
        "{show}"
    );
    h.ctl("brq", &["set-policing", "1", "kpkts_rate=5"]);
    let show = h.ctl("brq", &["show"]);
    assert!(show.contains("ingress_policing_kpkts_rate=5"), "{show}");
    h.ctl("brq", &["set-policing", "noisy", "off"]);
    assert!(!h.ctl("brq", &["show"]).contains("ingress policing"));
    let (ok, text) = ctl_try(&h, &["set-policing", "noisy", "rate=0"]);
    assert!(!ok && text.contains("leave the option out"), "{text}");
    let (ok, text) = ctl_try(&h, &["set-policing", "nosuch", "rate=10"]);
    assert!(!ok && text.contains("no port nosuch"), "{text}");
}

/// Port 1 floods 2,000 frames into queue 61439 (Open vSwitch's highest linux-htb queue id)
/// of port 2, which shapes: 100 kbit/s, 100 frames held a queue.
const HTB_CONFIG: &str = r#"
[[bridge]]
name = "brq"
fail_mode = "secure"
flows = ["table=0,priority=1,in_port=1,actions=enqueue:2:61439"]

[[bridge.port]]
name = "noisy"
spec = "null:limit=2000"

[[bridge.port]]
name = "sink"
spec = "null:sink"
qos_type = "linux-htb"
qos_backlog = 100

[[bridge.port.queue]]
id = 61439
max_rate = 100
burst = 13
"#;

#[test]
fn queue_ids_up_to_0xefff_and_at_most_64_queues_a_port() {
    if !have_ofctl("queue_ids_up_to_0xefff_and_at_most_64_queues_a_port") {
        return;
    }
    let h = Hayate::with_config(HTB_CONFIG);
    // Every frame sent or tail-dropped: queue-stats' errors are the shaper's tail drops.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stats;
    loop {
        stats = h.ofctl("queue-stats", &["2"]);
        if queue(&stats, 61439).is_some_and(|(p, _, e)| p + e == 2000) || Instant::now() > deadline
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (p, b, e) = queue(&stats, 61439).expect(&stats);
    assert_eq!(p + e, 2000, "{stats}");
    assert!(
        p >= 100 && e > 0,
        "the queue held 100 and dropped the rest: {stats}"
    );
    let dump = h.ctl("brq", &["dump-queues"]);
    assert!(
        dump.contains("port 2 (sink): linux-htb, no port cap, 100 packets a queue per thread"),
        "{dump}"
    );
    assert!(
        dump.contains(&format!(
            "queue 61439: min_rate=- max_rate=100 burst=13 tx_packets={p} tx_bytes={b} \
             dropped={e} held=0"
        )),
        "{dump}"
    );
    // Queue 0 has no row but is the port's default queue: dump-queues shows it, marked;
    // OpenFlow's queue-stats lists the configured queues only, as Open vSwitch does.
    assert!(
        dump.contains(
            "  queue 0 (no row: the port's default queue): min_rate=- max_rate=- burst=- \
             tx_packets=0 tx_bytes=0 dropped=0 held=0"
        ),
        "{dump}"
    );
    assert!(queue(&stats, 0).is_none(), "{stats}");

    // set-queue takes ids to 0xefff (in hex too), refuses one above naming the range.
    let out = h.ctl("brq", &["set-queue", "sink", "0x1000", "max=50"]);
    assert!(out.contains("queue 4096 max=50"), "{out}");
    let cfg = h.ofctl("queue-get-config", &["2"]);
    assert!(
        cfg.contains("queue 4096:") && cfg.contains("queue 61439:"),
        "{cfg}"
    );
    let (ok, text) = ctl_try(&h, &["set-queue", "sink", "61440", "max=50"]);
    assert!(!ok && text.contains("0 ..= 61439"), "{text}");
    // enqueue to a queue the port has: accepted; one it lacks: OFPBAC_BAD_QUEUE.
    h.ofctl("add-flow", &["priority=5,in_port=9,actions=enqueue:2:4096"]);
    let (ok, text) = ofctl_try(
        &h,
        "add-flow",
        &["priority=6,in_port=9,actions=enqueue:2:4095"],
    );
    assert!(!ok && text.contains("OFPBAC_BAD_QUEUE"), "{text}");

    // 64 queues a port, queue 0 counted: 61 more make 63 besides queue 0; one more is refused.
    for id in 1..=61 {
        h.ctl("brq", &["set-queue", "sink", &id.to_string(), "max=10"]);
    }
    let (ok, text) = ctl_try(&h, &["set-queue", "sink", "62", "max=10"]);
    assert!(
        !ok && text.contains("65 queues: a port has at most 64"),
        "{text}"
    );
    let stats = h.ofctl("queue-stats", &["2"]);
    assert_eq!(stats.matches(" queue ").count(), 63, "{stats}");
}
