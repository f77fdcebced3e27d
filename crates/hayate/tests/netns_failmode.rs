//! Standalone fail mode under service connections: an operator's `ovs-ofctl dump-flows`, a
//! `monitor`, or a stray client that sends HELLO and nothing else connect to the switch's
//! OpenFlow listener while two hosts ping each other through it. None of them is a
//! controller taking charge (Open vSwitch's rule: connections accepted on a listener are
//! service connections until they change state or ask for a role), so the fail-open L2
//! learning goes on and not one ping is lost.

mod netns;

use std::process::{Command, Stdio};

use netns::{ns_run, Net, PortKind};

#[test]
fn a_dump_a_monitor_and_a_stray_hello_never_interrupt_standalone_forwarding() {
    if !netns::can_run("netns_failmode", &["ping", "ovs-ofctl", "bash"]) {
        return;
    }
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let a = net.link(PortKind::AfPacket, "a", &sw, &["10.93.0.1/24"]);
    let b = net.link(PortKind::AfPacket, "b", &sw, &["10.93.0.2/24"]);
    // The default listener, ptcp:6653 on the switch namespace's loopback.
    let hayate = net.hayate(&sw, &[a.spec(), b.spec()], &[], &[1]);
    net.configure(&a, &sw);
    net.configure(&b, &sw);
    assert!(a.ping("10.93.0.2", 3), "standalone forwarding before");

    // 30 pings over 3 s while the service connections come and go.
    let ping = Command::new("ip")
        .args(["netns", "exec", &a.host_ns, "ping", "-c", "30", "-i", "0.1"])
        .args(["-W", "1", "-w", "10", "-q", "10.93.0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start ping");
    let target = "tcp:127.0.0.1:6653";
    for _ in 0..3 {
        let o = ns_run(
            &sw,
            &["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", target],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("actions=NORMAL"));
    }
    ns_run(
        &sw,
        &[
            "timeout",
            "1",
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "monitor",
            target,
        ],
    );
    // A client that says HELLO (OpenFlow 1.3) and then nothing, for a second.
    let hello = "exec 3<>/dev/tcp/127.0.0.1/6653; \
                 printf '\\x04\\x00\\x00\\x08\\x00\\x00\\x00\\x01' >&3; sleep 1";
    ns_run(&sw, &["bash", "-c", hello]);
    let out = ping.wait_with_output().expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("30 packets transmitted, 30 received"),
        "pings lost while service connections came and went: {text}"
    );
    let stats = hayate.stop();
    assert_eq!(stats.len(), 2);
}
