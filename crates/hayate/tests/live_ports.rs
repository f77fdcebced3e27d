//! Ports plugged into and out of a running `hayate run` with `hayate ctl BRIDGE add-port` /
//! `del-port`: the port descriptions follow, a controller hears PORT_STATUS ADD and DELETE,
//! what a removed port held (a TAP device, a vhost-user socket) is released, and every
//! refusal says what was wrong while the switch goes on.

mod ofctl_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ofctl_common::{Hayate, Session};
use openflow::port::port_state;
use openflow::{Message, PortReason};

/// A switch running one bridge `name` (secure fail mode) with ports `a` (null:sink) and `b`
/// (a ring of its own).
fn switch(name: &str) -> Hayate {
    Hayate::with_config(&format!(
        r#"
[[bridge]]
name = "{name}"
fail_mode = "secure"

[[bridge.port]]
name = "a"
spec = "null:sink"

[[bridge.port]]
name = "b"
spec = "ring:{name}-b"
"#
    ))
}

/// `hayate ctl --run-dir DIR BRIDGE ARGS…`: (success, stdout, stderr).
fn ctl(h: &Hayate, bridge: &str, args: &[&str]) -> (bool, String, String) {
    ctl_to(h, bridge, args)
}

fn ctl_to(h: &Hayate, target: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .arg("ctl")
        .arg("--run-dir")
        .arg(h.dir.path())
        .arg(target)
        .args(args)
        .output()
        .expect("run hayate ctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A command that must succeed: its stdout.
fn ok(h: &Hayate, bridge: &str, args: &[&str]) -> String {
    let (good, out, err) = ctl(h, bridge, args);
    assert!(
        good,
        "hayate ctl {args:?} failed: {err}\nswitch log:\n{}",
        h.log()
    );
    out
}

/// A command that must fail: its stderr.
fn refused(h: &Hayate, target: &str, args: &[&str]) -> String {
    let (good, out, err) = ctl_to(h, target, args);
    assert!(!good, "hayate ctl {args:?} should fail, printed {out}");
    err
}

/// The `N(name)` entries of dump-ports-desc.
fn descs(h: &Hayate, bridge: &str) -> Vec<String> {
    ok(h, bridge, &["dump-ports-desc"])
        .lines()
        .filter_map(|l| l.strip_prefix(' ')?.split_once(": addr:").map(|x| x.0))
        .map(str::to_string)
        .collect()
}

/// A raw OpenFlow controller connection, known to the switch (a barrier answered).
fn controller(h: &Hayate) -> Session {
    let mut c = h.session(Duration::from_secs(10));
    c.barrier(2);
    c
}

/// The next PORT_STATUS on `c`: reason, port number, name, state.
fn port_status(c: &mut Session) -> (PortReason, u32, String, u32) {
    loop {
        if let (_, Message::PortStatus(s)) = c.next() {
            return (s.reason, s.desc.port_no, s.desc.name, s.desc.state);
        }
    }
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn ports_come_and_go_on_a_running_bridge() {
    let h = switch("lpa");
    let mut c = controller(&h);
    assert_eq!(descs(&h, "lpa"), ["1(a)", "2(b)"]);

    let out = ok(&h, "lpa", &["add-port", "ring:lpa-x"]);
    assert_eq!(
        out.trim(),
        "added port lpa-x.a (ring:lpa-x) to bridge lpa as OpenFlow port 3"
    );
    assert_eq!(
        port_status(&mut c),
        (PortReason::Add, 3, "lpa-x.a".into(), port_state::LIVE)
    );
    let out = ok(
        &h,
        "lpa",
        &["add-port", "null:sink", "ofport=9", "name=lpa-sink"],
    );
    assert!(out.contains("as OpenFlow port 9"), "{out}");
    assert_eq!(port_status(&mut c).0, PortReason::Add);
    let tap = is_root();
    if tap {
        ok(&h, "lpa", &["add-port", "tap:lpa-tap0", "name=lpa-tap0"]);
        assert_eq!(port_status(&mut c).1, 4, "the lowest free number");
        assert!(
            link_exists("lpa-tap0"),
            "the TAP device exists while the port does"
        );
    } else {
        eprintln!("*** live_ports: not root, the TAP part is skipped ***");
    }
    let mut want = vec!["1(a)", "2(b)", "3(lpa-x.a)", "9(lpa-sink)"];
    if tap {
        want.insert(3, "4(lpa-tap0)");
    }
    assert_eq!(descs(&h, "lpa"), want);
    let stats = ok(&h, "lpa", &["dump-ports"]);
    assert!(
        stats.starts_with(&format!("OFPST_PORT reply (OF1.3): {} ports", want.len())),
        "{stats}"
    );

    // By name, by number; the freed numbers are not given to other ports meanwhile.
    let out = ok(&h, "lpa", &["del-port", "lpa-x.a"]);
    assert_eq!(
        out.trim(),
        "removed port lpa-x.a (OpenFlow port 3) from bridge lpa"
    );
    assert_eq!(port_status(&mut c).0, PortReason::Delete);
    ok(&h, "lpa", &["del-port", "9"]);
    let (reason, no, name, _) = port_status(&mut c);
    assert_eq!(
        (reason, no, name.as_str()),
        (PortReason::Delete, 9, "lpa-sink")
    );
    if tap {
        ok(&h, "lpa", &["del-port", "lpa-tap0"]);
        assert_eq!(port_status(&mut c).1, 4);
        assert!(
            !link_exists("lpa-tap0"),
            "the TAP device went with its port"
        );
    }
    assert_eq!(descs(&h, "lpa"), ["1(a)", "2(b)"]);
    // A port configured at start goes the same way.
    ok(&h, "lpa", &["del-port", "b"]);
    assert_eq!(port_status(&mut c).1, 2);
    assert_eq!(descs(&h, "lpa"), ["1(a)"]);
}

#[test]
fn a_vhost_user_port_is_down_until_its_vm_comes_and_its_socket_goes_with_it() {
    let h = switch("lpv");
    let mut c = controller(&h);
    let sock = h.file("vm1.sock");
    let spec = format!("vhostuser:{},mode=server", sock.display());
    let out = ok(&h, "lpv", &["add-port", &spec, "ofport=7"]);
    assert!(
        out.contains("as OpenFlow port 7; its link is down"),
        "{out}"
    );
    assert_eq!(
        port_status(&mut c),
        (PortReason::Add, 7, "vm1".into(), port_state::LINK_DOWN)
    );
    assert!(sock.exists(), "the switch listens on the socket");
    let desc = ok(&h, "lpv", &["dump-ports-desc"]);
    assert!(desc.contains(" 7(vm1): addr:"), "{desc}");
    assert!(desc.contains("LINK_DOWN"), "{desc}");
    ok(&h, "lpv", &["del-port", "vm1"]);
    assert_eq!(port_status(&mut c).0, PortReason::Delete);
    assert!(!sock.exists(), "the socket went with the port");
    // The same spec opens again.
    ok(&h, "lpv", &["add-port", &spec]);
    assert!(sock.exists());
}

#[test]
fn refusals_name_the_problem_and_the_switch_goes_on() {
    let h = switch("lpr");
    let err = refused(&h, "lpr", &["add-port", "bogus:x"]);
    assert!(err.contains("unknown port kind 'bogus'"), "{err}");
    let err = refused(&h, "lpr", &["add-port", "null:colour=red"]);
    assert!(err.contains("unknown null option 'colour'"), "{err}");
    let err = refused(&h, "lpr", &["add-port", "null:sink", "speed=10"]);
    assert!(
        err.contains("unknown option \"speed=10\"") && err.contains("ofport=N"),
        "{err}"
    );
    let err = refused(&h, "lpr", &["add-port", "null:sink", "name=a"]);
    assert!(
        err.contains("a port named a is already on bridge lpr (OpenFlow port 1)"),
        "{err}"
    );
    let err = refused(&h, "lpr", &["add-port", "null:sink", "ofport=2"]);
    assert!(
        err.contains("OpenFlow port 2 is in use by port b on bridge lpr"),
        "{err}"
    );
    let err = refused(&h, "lpr", &["add-port", "null:sink", "ofport=0"]);
    assert!(err.contains("ofport=0 is not a port number"), "{err}");
    let err = refused(&h, "lpr", &["del-port", "nosuch"]);
    assert!(
        err.contains("bridge lpr has no port \"nosuch\"; its ports are 1(a), 2(b)"),
        "{err}"
    );
    // A controller (here over TCP) may not change ports.
    let err = refused(&h, &h.target(), &["add-port", "null:sink"]);
    assert!(
        err.contains("through bridge lpr's management socket"),
        "{err}"
    );
    // Nothing changed, and the switch still takes a good request.
    assert_eq!(descs(&h, "lpr"), ["1(a)", "2(b)"]);
    let out = ok(&h, "lpr", &["add-port", "null:sink", "name=c"]);
    assert!(out.contains("as OpenFlow port 3"), "{out}");
    assert_eq!(descs(&h, "lpr"), ["1(a)", "2(b)", "3(c)"]);
}
