//! Faucet (PyPI, in the venv scripts/setup.sh makes) drives a Hayate bridge with a two-VLAN
//! configuration (tests/controllers/faucet/two_vlans.yaml): four namespace hosts on veths,
//! ports 1–2 in VLAN 100 and 3–4 in VLAN 200, on AF_XDP and on AF_PACKET. Hosts in the same
//! VLAN reach each other; hosts in different VLANs do not.

mod controller_common;
mod netns;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use controller_common::Process;
use netns::{Net, PortKind};

/// The venv's bin folder when it has Faucet ([`controller_common::venv`]).
fn venv_bin() -> Option<PathBuf> {
    let bin = controller_common::venv().join("bin");
    bin.join("faucet").exists().then_some(bin)
}

/// Faucet in the switch's namespace, listening on its loopback.
struct Faucet {
    _process: Process,
    dir: PathBuf,
}

impl Faucet {
    /// Starts Faucet with `config` (a file under tests/controllers/faucet/) in namespace `ns`,
    /// its logs in `dir`.
    fn start(bin: &Path, ns: &str, port: u16, config: &str, dir: &Path) -> Faucet {
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "env"])
            .arg(format!("PATH={path}"))
            .arg(format!(
                "FAUCET_CONFIG={}",
                controller_common::repo_file(&format!("tests/controllers/faucet/{config}"))
                    .display()
            ))
            .arg(format!("FAUCET_LOG={}", dir.join("faucet.log").display()))
            .arg(format!(
                "FAUCET_EXCEPTION_LOG={}",
                dir.join("faucet.exception.log").display()
            ))
            .arg("FAUCET_PROMETHEUS_ADDR=127.0.0.1")
            .arg("FAUCET_PROMETHEUS_PORT=19302")
            .arg(bin.join("faucet"))
            .arg(format!("--ryu-ofp-tcp-listen-port={port}"))
            .arg("--ryu-ofp-listen-host=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("faucet.out")).expect("faucet output"))
            .spawn()
            .expect("start faucet");
        Faucet {
            _process: Process(child),
            dir: dir.to_path_buf(),
        }
    }

    fn logs(&self) -> String {
        ["faucet.out", "faucet.log", "faucet.exception.log"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The OpenFlow errors the switch sent Faucet (logged as `OFError`) and Faucet's
    /// exceptions.
    fn errors(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("faucet.log")).unwrap_or_default();
        let exc =
            std::fs::read_to_string(self.dir.join("faucet.exception.log")).unwrap_or_default();
        log.lines()
            .filter(|l| l.contains("OFError"))
            .chain(exc.lines())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A running set-up: Hayate's bridge `br0` (four veth ports, secure mode, datapath id
/// 0xb2) driven by Faucet, four hosts 10.21.0.1–4 on ports 1–4. Fields drop in order: the
/// switch, then Faucet, then the namespaces.
struct Setup {
    _hayate: netns::Hayate,
    faucet: Faucet,
    hosts: Vec<netns::Link>,
    net: Net,
}

impl Setup {
    /// Starts Faucet with `config` and a bridge on `kind` ports; `None` (after a SKIPPED
    /// line) when the machine cannot run it.
    fn start(test: &str, config: &str, kind: PortKind) -> Option<Setup> {
        if !netns::can_run(test, &["ping", "ss", "iperf3"]) {
            return None;
        }
        let Some(bin) = venv_bin() else {
            eprintln!("SKIPPED {test}: no venv with faucet; run scripts/setup.sh");
            return None;
        };
        let mut net = Net::new();
        let sw = net.switch_ns("sw");
        let hosts: Vec<_> = (1..=4)
            .map(|i| {
                let addr = format!("10.21.0.{i}/24");
                net.link(kind, &format!("h{i}"), &sw, &[addr.as_str()])
            })
            .collect();
        let port = 16654;
        let faucet = Faucet::start(&bin, &sw, port, config, net.dir.path());
        assert!(
            netns::wait_listening(&sw, port, Duration::from_secs(60)),
            "faucet did not listen:\n{}",
            faucet.logs()
        );
        let bridge = format!(
            "controllers = [\"tcp:127.0.0.1:{port}\"]\nfail_mode = \"secure\"\n\
             datapath_id = \"0xb2\""
        );
        let specs: Vec<String> = hosts.iter().map(|h| h.spec()).collect();
        let hayate = net.hayate_with(&sw, &specs, &[], &[1], &bridge);
        for h in &hosts {
            net.configure(h, &sw);
        }
        Some(Setup {
            _hayate: hayate,
            faucet,
            hosts,
            net,
        })
    }

    /// Pings from host `from` (1–4) to 10.21.0.`to` until one passes, at most `secs`.
    fn reaches_within(&self, from: usize, to: usize, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let dst = format!("10.21.0.{to}");
        while Instant::now() < deadline {
            if self.hosts[from - 1].ping(&dst, 1) {
                return true;
            }
        }
        false
    }

    /// `hayate ctl br0 COMMAND`'s output.
    fn ctl(&self, command: &str) -> String {
        self.net.ctl("br0", &[command])
    }

    /// Fails on any OpenFlow error the switch sent Faucet, or a Faucet exception.
    fn assert_no_errors(&self, what: &str) {
        let errors = self.faucet.errors();
        assert!(
            errors.is_empty(),
            "{what}: the switch sent Faucet errors (or Faucet raised):\n{errors}"
        );
    }
}

/// Faucet with `config` drives a bridge of four hosts on `kinds` of ports: same-VLAN hosts
/// reach each other, others do not, and the switch sends Faucet no OpenFlow error. Each
/// `(command, text)` of `expect` must find `text` in `hayate ctl br0 command`'s output (what
/// the configuration makes Faucet use).
fn two_vlans(test: &str, config: &str, kinds: &[PortKind], expect: &[(&str, &str)]) {
    for &kind in kinds {
        let Some(s) = Setup::start(test, config, kind) else {
            return;
        };
        // Same VLAN: reachable once Faucet has programmed the pipeline.
        assert!(
            s.reaches_within(1, 2, 40),
            "{kind:?}: VLAN 100 hosts never reached each other:\n{}",
            s.faucet.logs()
        );
        assert!(
            s.hosts[1].ping("10.21.0.1", 2),
            "{kind:?}: 2 -> 1 in VLAN 100"
        );
        assert!(
            s.reaches_within(3, 4, 20),
            "{kind:?}: VLAN 200 hosts never reached each other"
        );
        assert!(
            s.hosts[3].ping("10.21.0.3", 2),
            "{kind:?}: 4 -> 3 in VLAN 200"
        );
        // Different VLANs: never.
        for (from, to) in [
            (0, "10.21.0.3"),
            (0, "10.21.0.4"),
            (1, "10.21.0.3"),
            (3, "10.21.0.2"),
        ] {
            assert!(
                !s.hosts[from].ping(to, 2),
                "{kind:?}: host {} reached {to} across VLANs",
                from + 1
            );
        }
        assert!(
            s.faucet.logs().contains("L2 learned"),
            "{kind:?}: Faucet learned no host:\n{}",
            s.faucet.logs()
        );
        for (command, text) in expect {
            let out = s.ctl(command);
            assert!(
                out.contains(text),
                "{kind:?}: `{command}` shows no {text:?}:\n{out}"
            );
        }
        s.assert_no_errors(&format!("{kind:?}"));
    }
}

/// Faucet's default pipeline for Open vSwitch (fixed tables, no table-features set).
#[test]
fn faucet_two_vlans_isolate_hosts() {
    two_vlans(
        "controller_faucet",
        "two_vlans.yaml",
        &[PortKind::AfXdp, PortKind::AfPacket],
        &[("dump-flows", "table=3")],
    );
}

/// Faucet's `GenericTFM` hardware: it first sets the switch's tables with a table-features
/// request (names, matches, instructions, next tables it needs) and fences with barriers.
#[test]
fn faucet_table_features_pipeline() {
    two_vlans(
        "controller_faucet (GenericTFM)",
        "two_vlans_tfm.yaml",
        &[PortKind::AfPacket],
        &[("dump-flows", "table=3")],
    );
}

/// Faucet's `group_table` option: flooding goes through one ALL group per VLAN.
#[test]
fn faucet_group_flooding() {
    two_vlans(
        "controller_faucet (group_table)",
        "two_vlans_groups.yaml",
        &[PortKind::AfPacket],
        &[("dump-groups", "type=all"), ("dump-flows", "group:")],
    );
}

/// iperf3 from host `from` to host `to` (1–4) for one second; the bytes received.
fn iperf3_bytes(s: &Setup, from: usize, to: usize) -> u64 {
    let dst = format!("10.21.0.{to}");
    netns::tcp_bytes(&s.hosts[from - 1], &s.hosts[to - 1], &dst, 1)
}

/// Faucet ACLs and meters (tests/controllers/faucet/two_vlans_acl.yaml): port 1's ACL drops
/// IPv4 ICMP to host 2 while TCP between them passes; port 3's traffic goes through a
/// 10 Mb/s meter, so pings pass and a TCP stream is held near the band's rate.
#[test]
fn faucet_acl_and_meter() {
    let Some(s) = Setup::start(
        "controller_faucet (ACL, meter)",
        "two_vlans_acl.yaml",
        PortKind::AfPacket,
    ) else {
        return;
    };
    assert!(
        s.reaches_within(3, 4, 40),
        "VLAN 200 (metered) hosts never reached each other:\n{}",
        s.faucet.logs()
    );
    // TCP from host 1 to host 2 passes the ACL (host 1's echo replies to host 2 would not) ...
    let tcp = iperf3_bytes(&s, 1, 2);
    assert!(
        tcp > 1_000_000,
        "TCP 1 -> 2 through the ACL moved {tcp} bytes"
    );
    // ... ICMP to host 2 from port 1 does not.
    assert!(
        !s.hosts[0].ping("10.21.0.2", 2),
        "the ACL let ICMP 1 -> 2 through"
    );
    let flows = s.ctl("dump-flows");
    assert!(
        flows.contains("meter:1"),
        "no flow uses the meter:\n{flows}"
    );
    let meters = s.ctl("dump-meters");
    assert!(meters.contains("meter=1"), "no meter 1:\n{meters}");
    // The meter holds host 3's stream near 10 Mb/s (1.25 MB/s; TCP over 1 s, with slack),
    // far below the unmetered stream above.
    let metered = iperf3_bytes(&s, 3, 4);
    eprintln!("TCP 1 -> 2: {tcp} bytes in 1 s; metered 3 -> 4: {metered} bytes in 1 s");
    assert!(
        metered > 0 && metered < 4_000_000 && metered * 4 < tcp,
        "metered stream moved {metered} bytes in 1 s (unmetered: {tcp})"
    );
    s.assert_no_errors("ACL and meter");
}
