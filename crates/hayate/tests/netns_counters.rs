//! What an operator sees of a running bridge's counters (issue 23, item 5): `hayate ctl
//! BRIDGE dump-pmd` prints every poll thread's counters and their total, and they move when
//! traffic flows; malformed frames a host sends are counted against its port (`dump-drops`,
//! and `rx_errors` in `dump-ports` as Open vSwitch fills it); an interface whose MTU exceeds a
//! pool frame is warned about at start and at add-port; controllers may not ask for the
//! dumps.

mod netns;

use std::time::{Duration, Instant};

use netns::{must, ns_run, Net, PortKind};

/// The value of `  NAME: VALUE` in the section of `text` that starts with `header`.
fn counter(text: &str, header: &str, name: &str) -> u64 {
    let mut lines = text.lines().skip_while(|l| *l != header);
    assert!(lines.next().is_some(), "no section {header:?} in:\n{text}");
    let prefix = format!("  {name}: ");
    lines
        .take_while(|l| l.starts_with("  "))
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} under {header:?} in:\n{text}"))
        .parse()
        .expect("a number")
}

/// Sends `n` 60-byte broadcast frames whose IPv4 header claims 8 bytes (IHL 2: malformed)
/// out of `ifname` in namespace `ns`.
fn send_malformed(ns: &str, ifname: &str, n: usize) {
    let py = format!(
        "import socket\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('{ifname}', 0))\n\
         f = bytes.fromhex('ffffffffffff020000000001' + '0800') + bytes([0x42]) + bytes(45)\n\
         for _ in range({n}):\n    s.send(f)\n"
    );
    let o = ns_run(ns, &["python3", "-c", &py]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn dumps_show_threads_and_drops_per_port() {
    if !netns::can_run("netns_counters", &["ping", "python3"]) {
        return;
    }
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let a = net.link(PortKind::AfPacket, "a", &sw, &["10.94.0.1/24"]);
    let b = net.link(PortKind::AfPacket, "b", &sw, &["10.94.0.2/24"]);
    // b's switch end takes jumbo frames that a 2 KiB pool frame cannot hold.
    must(&["ip", "-n", &sw, "link", "set", &b.switch_if, "mtu", "9000"]);
    let hayate = net.hayate(&sw, &[a.spec(), b.spec()], &[], &[1]);
    let log = hayate.log_text();
    assert!(
        log.contains(&format!("interface {} has MTU 9000", b.switch_if)),
        "no MTU warning at start: {log}"
    );
    assert!(
        !log.contains(&format!("interface {} has MTU", a.switch_if)),
        "{log}"
    );
    net.configure(&a, &sw);
    net.configure(&b, &sw);
    assert!(a.ping("10.94.0.2", 3));

    // dump-pmd: the poll thread (pinned to core 1, or the last core on a 1-core machine) and
    // the priority lane, which AF_PACKET ports feed, then the total.
    let core = 1.min(std::thread::available_parallelism().map_or(1, |n| n.get()) - 1);
    let before = net.ctl("br0", &["dump-pmd"]);
    let thread0 = format!("pmd thread 0 core {core}:");
    assert!(before.lines().any(|l| l == thread0), "{before}");
    assert!(
        before
            .lines()
            .any(|l| l == format!("pmd thread 1 core {core}:")),
        "{before}"
    );
    let per = datapath::Counter::ALL.len() + 1;
    assert_eq!(before.lines().count(), 3 * per, "{before}");
    for c in datapath::Counter::ALL {
        let sum = counter(&before, &thread0, c.name())
            + counter(&before, &format!("pmd thread 1 core {core}:"), c.name());
        assert_eq!(
            counter(&before, "total:", c.name()),
            sum,
            "{}: {before}",
            c.name()
        );
    }
    let rx0 = counter(&before, "total:", "rx_packets");
    let busy0 = counter(&before, "total:", "busy_cycles");
    assert!(
        rx0 >= 6,
        "3 pings and 3 replies crossed the switch: {before}"
    );
    assert!(a.ping("10.94.0.2", 3));
    let after = net.ctl("br0", &["dump-pmd"]);
    assert!(
        counter(&after, "total:", "rx_packets") >= rx0 + 6,
        "{after}"
    );
    assert!(counter(&after, "total:", "busy_cycles") > busy0, "{after}");
    assert!(counter(&after, "total:", "tx_packets") >= 12, "{after}");

    // Malformed frames from host a: counted against port 1, as rx_errors.
    send_malformed(&a.host_ns, &a.host_if, 7);
    let deadline = Instant::now() + Duration::from_secs(10);
    let drops = loop {
        let d = net.ctl("br0", &["dump-drops"]);
        if counter(&d, &format!("port 1 ({}):", a.spec()), "drop_malformed") >= 7 {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "malformed frames not counted: {d}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let p1 = format!("port 1 ({}):", a.spec());
    let p2 = format!("port 2 ({}):", b.spec());
    assert_eq!(counter(&drops, &p1, "drop_malformed"), 7, "{drops}");
    assert_eq!(counter(&drops, &p1, "rx_errors"), 7, "{drops}");
    assert_eq!(counter(&drops, &p1, "port_rx_errors"), 0, "{drops}");
    assert_eq!(counter(&drops, &p2, "drop_malformed"), 0, "{drops}");
    let ports = net.ctl("br0", &["dump-ports", "1"]);
    assert!(ports.contains("errs=7"), "dump-ports shows them: {ports}");
    let pmd = net.ctl("br0", &["dump-pmd"]);
    assert_eq!(counter(&pmd, "total:", "drop_malformed"), 7, "{pmd}");

    // add-port of an interface whose MTU is too large for a pool frame: the reply warns.
    let c = net.link(PortKind::AfPacket, "c", &sw, &[]);
    must(&["ip", "-n", &sw, "link", "set", &c.switch_if, "mtu", "9000"]);
    let added = net.ctl("br0", &["add-port", &c.spec()]);
    assert!(
        added.contains("as OpenFlow port 3")
            && added.contains(&format!("warning: interface {} has MTU 9000", c.switch_if)),
        "{added}"
    );

    // A controller connection may not read them.
    let o = ns_run(
        &sw,
        &[
            env!("CARGO_BIN_EXE_hayate"),
            "ctl",
            "tcp:127.0.0.1:6653",
            "dump-pmd",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("management socket"),
        "{err}"
    );

    let stats = hayate.stop();
    let p = netns::port(&stats, &a.spec());
    assert_eq!(p.rx_errors, 7, "--stats-json has them too");
}
