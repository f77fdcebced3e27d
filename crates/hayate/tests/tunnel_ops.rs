//! Tunnel ports operated like the rest of the switch (issue 18): added and removed with
//! `hayate ctl BR add-port vxlan:...` / `del-port` while `hayate run` runs, shown by `show`,
//! `dump-ports-desc` and `dump-ports`, down with the reason while their remote cannot be
//! reached, and their drops in `dump-drops` and the Prometheus metrics; what a tunnel port
//! carried in its own port counters, as `ovs-ofctl dump-ports` reads them.
//!
//! Host 1 is a namespace running `hayate run` with an AF_PACKET underlay port whose address
//! host 1's kernel owns; host 2 is the other end of the underlay veth (the tunnels' remote).
//! Offloads are off on the underlay so that frames carry complete checksums.

mod netns;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use netns::{must, ns_run, Net};

const UNDERLAY_1: &str = "192.168.78.1";
const UNDERLAY_2: &str = "192.168.78.2";
/// Where `hayate run --metrics` serves, inside host 1.
const METRICS: &str = "127.0.0.1:19466";

/// Two hosts joined by an underlay veth (host 1's end `u1`, host 2's `u2`); returns
/// `(h1, h2, u1, u2)`.
fn hosts(net: &mut Net) -> (String, String, String, String) {
    let h1 = net.switch_ns("h1");
    let h2 = net.switch_ns("h2");
    let (u1, u2) = net.trunk(&h1, &h2, "u");
    for (ns, ifname, addr) in [(&h1, &u1, UNDERLAY_1), (&h2, &u2, UNDERLAY_2)] {
        must(&[
            "ip",
            "-n",
            ns,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            ifname,
        ]);
        ns_run(ns, &["ethtool", "-K", ifname, "tx", "off", "gso", "off"]);
    }
    (h1, h2, u1, u2)
}

/// Waits (≤ 20 s) until `f` holds; false if it never did.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// The lines of `show` about port `name` (its `Port N "name"` line and the ones below it).
fn show_port(show: &str, name: &str) -> String {
    let head = format!("\"{name}\"");
    let mut out = String::new();
    let mut inside = false;
    for l in show.lines() {
        if l.trim_start().starts_with("Port ") {
            inside = l.ends_with(&head);
        }
        if inside {
            out += l;
            out += "\n";
        }
    }
    out
}

/// `reason`'s count in port `ofport`'s block of a `dump-drops` text.
fn drops_of(text: &str, ofport: u32, reason: &str) -> Option<u64> {
    let head = format!("port {ofport} (");
    let mut inside = false;
    for l in text.lines() {
        if !l.starts_with(' ') {
            inside = l.starts_with(&head);
            continue;
        }
        if inside {
            if let Some(v) = l.trim().strip_prefix(&format!("{reason}: ")) {
                return v.parse().ok();
            }
        }
    }
    None
}

#[test]
fn a_vxlan_port_is_added_shown_down_with_its_reason_and_removed_while_running() {
    if !netns::can_run("tunnel_ops_ports", &["ethtool", "ovs-ofctl"]) {
        return;
    }
    let mut net = Net::new();
    let (h1, _h2, u1, _u2) = hosts(&mut net);
    let hayate = net.hayate(&h1, &[format!("afpacket:{u1},vnet_hdr=off")], &[], &[1]);
    // A remote the kernel has no route to: added, and down with the reason.
    let out = net.ctl(
        "br0",
        &[
            "add-port",
            "vxlan:remote=10.250.0.2,vni=7",
            "name=vxdown",
            "ofport=6",
        ],
    );
    assert!(out.contains("as OpenFlow port 6"), "{out}");
    assert!(out.contains("its link is down"), "{out}");
    // A remote on the underlay: up once its MAC address is resolved.
    let remote = format!("vxlan:remote={UNDERLAY_2},vni=42");
    let out = net.ctl("br0", &["add-port", &remote, "name=vx1", "ofport=5"]);
    assert!(out.contains("added port vx1"), "{out}");
    assert!(
        eventually(|| {
            let p = show_port(&net.ctl("br0", &["show"]), "vx1");
            p.contains("LIVE") && !p.contains("LINK_DOWN")
        }),
        "vx1 up: {}\nlog: {}",
        net.ctl("br0", &["show"]),
        hayate.log_text()
    );
    let show = net.ctl("br0", &["show"]);
    let down = show_port(&show, "vxdown");
    assert!(down.contains("Port 6"), "{show}");
    assert!(down.contains("LINK_DOWN"), "{show}");
    assert!(
        down.contains("link down: no route to the remote endpoint"),
        "{show}"
    );
    assert!(show_port(&show, "vx1").contains("rx queues: 0"), "{show}");
    let json = net.ctl("br0", &["show", "--json"]);
    assert!(json.contains("\"link_status\": \"no route"), "{json}");
    let descs = net.ctl("br0", &["dump-ports-desc"]);
    assert!(descs.contains(" 5(vx1): addr:"), "{descs}");
    assert!(descs.contains(" 6(vxdown): addr:"), "{descs}");
    assert!(net.ctl("br0", &["dump-ports"]).contains("port  5:"));
    // A controller (ovs-ofctl monitor on the default listener) hears vxdown come up once a
    // route to its remote appears.
    let mut mon = Command::new("ip")
        .args([
            "netns",
            "exec",
            &h1,
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "monitor",
        ])
        .args(["tcp:127.0.0.1:6653", "65534"])
        .env("OVS_RUNDIR", net.dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ovs-ofctl monitor");
    let lines = mon.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(lines).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    assert!(
        eventually(|| net.ctl("br0", &["show"]).contains("is_connected: true")),
        "the monitor connects"
    );
    must(&[
        "ip",
        "-n",
        &h1,
        "route",
        "add",
        "10.250.0.0/24",
        "via",
        UNDERLAY_2,
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut seen, mut modified, mut live) = (Vec::new(), false, false);
    while !live && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            modified |= line.contains("MOD: 6(vxdown)");
            live |= modified && line.contains("state:") && line.contains("LIVE");
            seen.push(line);
        }
    }
    mon.kill().ok();
    mon.wait().ok();
    assert!(live, "PORT_STATUS MODIFY vxdown LIVE: {seen:#?}");
    let show = net.ctl("br0", &["show"]);
    assert!(!show_port(&show, "vxdown").contains("LINK_DOWN"), "{show}");
    // A flow to the tunnel port is taken, as to any port.
    net.ctl("br0", &["add-flow", "in_port=1,actions=output:5"]);
    // Removed: gone from every listing; its number is free again.
    let out = net.ctl("br0", &["del-port", "vx1"]);
    assert!(out.contains("removed port vx1"), "{out}");
    let show = net.ctl("br0", &["show"]);
    assert!(!show.contains("\"vx1\""), "{show}");
    assert!(!net.ctl("br0", &["dump-ports-desc"]).contains("(vx1)"));
    net.ctl("br0", &["del-port", "6"]);
    let out = net.ctl("br0", &["add-port", &remote, "ofport=5"]);
    assert!(out.contains("added port vxlan42"), "{out}");
    hayate.stop();
}

/// `(rx pkts, rx bytes, tx pkts, tx bytes, tx drop)` of the port in an `ovs-ofctl
/// dump-ports` reply for one port.
fn port_counts(text: &str) -> Option<(u64, u64, u64, u64, u64)> {
    let field = |side: &str, name: &str| -> Option<u64> {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("{side} pkts=")))?;
        let v = line.split(&format!("{name}=")).nth(1)?;
        v.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    };
    Some((
        field("rx", "pkts")?,
        field("rx", "bytes")?,
        field("tx", "pkts")?,
        field("tx", "bytes")?,
        field("tx", "drop")?,
    ))
}

#[test]
fn tunnel_drops_show_in_dump_drops_and_the_metrics() {
    if !netns::can_run(
        "tunnel_ops_drops",
        &["ethtool", "python3", "ping", "ovs-ofctl"],
    ) {
        return;
    }
    let mut net = Net::new();
    net.run_args = vec!["--metrics".into(), METRICS.into()];
    let (h1, h2, u1, u2) = hosts(&mut net);
    // Every frame is dropped after lookup: only what the test sends reaches the tunnel port.
    let hayate = net.hayate(
        &h1,
        &[format!("afpacket:{u1},vnet_hdr=off")],
        &["priority=0,actions=drop"],
        &[1],
    );
    let remote = format!("vxlan:remote={UNDERLAY_2},vni=42");
    net.ctl("br0", &["add-port", &remote, "name=vx1", "ofport=5"]);
    // The underlay terminates VXLAN once the tunnel is up.
    assert!(
        eventually(|| !show_port(&net.ctl("br0", &["show"]), "vx1").contains("LINK_DOWN")),
        "vx1 up: {}",
        hayate.log_text()
    );
    // Host 2 sends VXLAN for a VNI no port takes (43), and a UDP datagram to the VXLAN port
    // too short for a VXLAN header.
    let vx43 = format!("{}vx43", net.prefix);
    must(&[
        "ip", "-n", &h2, "link", "add", &vx43, "type", "vxlan", "id", "43", "remote", UNDERLAY_1,
        "local", UNDERLAY_2, "dstport", "4789", "dev", &u2,
    ]);
    must(&["ip", "-n", &h2, "addr", "add", "10.79.0.2/24", "dev", &vx43]);
    must(&["ip", "-n", &h2, "link", "set", &vx43, "up"]);
    let ping = ns_run(&h2, &["ping", "-c", "2", "-W", "1", "10.79.0.1"]);
    assert!(!ping.status.success(), "nobody answers on VNI 43");
    let short = format!(
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'abcd', ('{UNDERLAY_1}', 4789))"
    );
    must(&["ip", "netns", "exec", &h2, "python3", "-c", &short]);
    let mut text = String::new();
    assert!(
        eventually(|| {
            text = net.ctl("br0", &["dump-drops"]);
            drops_of(&text, 1, "tunnel_no_port").is_some_and(|n| n >= 1)
                && drops_of(&text, 1, "tunnel_header_malformed").is_some_and(|n| n >= 1)
        }),
        "underlay drops in dump-drops:\n{text}\nlog: {}",
        hayate.log_text()
    );
    // The tunnel port's own (send-side) reasons are listed on it, not termination's.
    assert_eq!(drops_of(&text, 5, "tunnel_too_big"), Some(0), "{text}");
    assert_eq!(drops_of(&text, 5, "tunnel_no_port"), None, "{text}");
    // The same counts in the metrics, as hayate_port_drops_total series.
    let scrape = || {
        let code = format!(
            "import urllib.request; print(urllib.request.urlopen('http://{METRICS}/metrics').read().decode())"
        );
        String::from_utf8_lossy(&ns_run(&h1, &["python3", "-c", &code]).stdout).into_owned()
    };
    let series = |text: &str, reason: &str| -> Option<f64> {
        text.lines()
            .find(|l| {
                l.starts_with("hayate_port_drops_total{")
                    && l.contains("ofport=\"1\"")
                    && l.contains(&format!("reason=\"{reason}\""))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    let mut m = String::new();
    assert!(
        eventually(|| {
            m = scrape();
            series(&m, "tunnel_no_port").is_some_and(|v| v >= 1.0)
                && series(&m, "tunnel_header_malformed").is_some_and(|v| v >= 1.0)
        }),
        "tunnel drops in the metrics:\n{m}"
    );
    tunnel_port_counts(&net, &h1, &h2, &u2);
    let m = scrape();
    assert!(
        m.lines()
            .any(|l| l.starts_with("hayate_port_rx_packets_total{")
                && l.contains("port=\"vx1\"")
                && l.ends_with(" 3")),
        "vx1's rx packets in the metrics:\n{m}"
    );
    hayate.stop();
}

/// The tunnel port vx1 (VNI 42, to host 2) counts what it carried, as `ovs-ofctl dump-ports`
/// reads it: 3 pings from host 2's kernel VXLAN device terminated into it, 2 packet-outs
/// encapsulated out of it (bytes of the inner frames), and a packet-out too big for the
/// tunnel in `tx_dropped`.
fn tunnel_port_counts(net: &Net, h1: &str, h2: &str, u2: &str) {
    let vx42 = format!("{}vx42", net.prefix);
    must(&[
        "ip", "-n", h2, "link", "add", &vx42, "type", "vxlan", "id", "42", "remote", UNDERLAY_1,
        "local", UNDERLAY_2, "dstport", "4789", "dev", u2,
    ]);
    let v6 = format!("net.ipv6.conf.{vx42}.disable_ipv6=1");
    must(&["ip", "netns", "exec", h2, "sysctl", "-qw", &v6]);
    must(&["ip", "-n", h2, "addr", "add", "10.79.2.2/24", "dev", &vx42]);
    must(&["ip", "-n", h2, "link", "set", &vx42, "up"]);
    // A known neighbour: the pings are the only frames the device sends (added once
    // the link is up: bringing it up flushes the neighbours).
    must(&[
        "ip",
        "-n",
        h2,
        "neigh",
        "add",
        "10.79.2.1",
        "lladdr",
        "02:00:00:00:00:99",
        "dev",
        &vx42,
    ]);
    let ping = ns_run(
        h2,
        &["ping", "-c", "3", "-i", "0.2", "-W", "1", "10.79.2.1"],
    );
    assert!(!ping.status.success(), "nobody answers the pings");
    // Packet-outs to vx1 from the controller: two ARP requests (42 bytes) for an address
    // host 2 does not own (it would answer into vx1), and a frame too big for the
    // underlay's 1500-byte MTU once encapsulated.
    let target = format!("unix:{}", net.run_dir().join("br0.mgmt").display());
    let arp = concat!(
        "ffffffffffff020000000099080600010800060400010200000000990a4f0901",
        "0000000000000a4f0909"
    );
    let big = format!("ffffffffffff0200000000990800{}", "00".repeat(1480 - 14));
    for frame in [arp, arp, &big] {
        must(&[
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "packet-out",
            &target,
            &format!("in_port=controller packet={frame} actions=output:5"),
        ]);
    }
    // Host 1's kernel does not read the pings: wait for the switch to count them.
    let want = (3, 3 * 98, 2, 2 * 42, 1);
    let mut text = String::new();
    let dump = || {
        let out = ns_run(
            h1,
            &["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", &target, "5"],
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        eventually(|| {
            text = dump();
            port_counts(&text) == Some(want)
        }),
        "vx1's counters (rx 3 pings of 98 bytes, tx 2 ARPs of 42, 1 too big):\n{text}"
    );
    let ctl = net.ctl("br0", &["dump-ports", "5"]);
    assert_eq!(
        port_counts(&ctl),
        Some(want),
        "hayate ctl dump-ports:\n{ctl}"
    );
}
