//! add-port, del-port and link state on a bridge driven message by message, with a plug that
//! records what the datapath was asked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use openflow::port::port_state;
use openflow::{Message, PortReason};
use packet::Pool;
use pipeline::{Control, PipelineConfig, PortInfo};
use port::{Capabilities, Port, PortError, PortStats, RxQueue, TxQueue};

use super::super::port_cmd::{exp_error, exp_type, refusal_text, PortCmd};
use super::super::*;
use crate::bridge::Bridge;
use crate::role::Role;

/// A port whose link the test sets.
struct Flappy {
    up: AtomicBool,
    /// Says its link may change while up (as a tunnel port does), and why it is down.
    tunnel: AtomicBool,
}

impl Port for Flappy {
    fn name(&self) -> &str {
        "flappy"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    fn open_rx(&self, q: u16) -> Result<Box<dyn RxQueue>, PortError> {
        Err(PortError::new("flappy", format!("no rx queue {q}")))
    }
    fn open_tx(&self, q: u16) -> Result<Box<dyn TxQueue>, PortError> {
        Err(PortError::new("flappy", format!("no tx queue {q}")))
    }
    fn link_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }
    fn link_may_change(&self) -> bool {
        self.tunnel.load(Ordering::Relaxed)
    }
    fn link_status(&self) -> Option<String> {
        let down = !self.up.load(Ordering::Relaxed) && self.tunnel.load(Ordering::Relaxed);
        down.then(|| "no route to the remote endpoint".to_string())
    }
    fn stats(&self) -> PortStats {
        PortStats::default()
    }
}

/// Opens specs with the port crate (`flappy:` gives the test's [`Flappy`]); records plugs.
struct Recorder {
    pool: Pool,
    flappy: Arc<Flappy>,
    log: Mutex<Vec<String>>,
}

impl PortPlug for Recorder {
    fn open(&self, spec: &str) -> Result<Arc<dyn Port>, String> {
        if spec == "flappy:" {
            return Ok(self.flappy.clone());
        }
        port::spec::open(spec, &self.pool).map_err(|e| e.to_string())
    }
    fn plug(&self, ofport: u32, port: Arc<dyn Port>) -> Result<(), String> {
        self.log
            .lock()
            .unwrap()
            .push(format!("plug {ofport} {}", port.name()));
        Ok(())
    }
    fn unplug(&self, ofport: u32) -> Result<(), String> {
        self.log.lock().unwrap().push(format!("unplug {ofport}"));
        Ok(())
    }
}

fn bridge() -> (Arc<OfBridge>, Arc<Recorder>) {
    let pool = Pool::with_frames(256);
    let (mut control, _cell) = Control::new(PipelineConfig::default());
    let mut ports = Vec::new();
    let mut infos = Vec::new();
    for no in [1u32, 2, 4] {
        infos.push(PortInfo {
            no,
            name: format!("p{no}"),
            live: true,
            ..PortInfo::default()
        });
        ports.push(OfPort {
            no,
            name: format!("p{no}"),
            hw_addr: mac_from_name(&format!("p{no}")),
            port: port::spec::open("null:sink", &pool).unwrap(),
        });
    }
    control.set_ports(infos);
    let b = OfBridge::new(
        OfBridgeConfig {
            name: "lp".into(),
            datapath_id: 1,
            fail_mode: FailMode::Secure,
            packet_in_limit: RateLimit::default(),
        },
        control,
        ports,
    );
    let rec = Arc::new(Recorder {
        pool,
        flappy: Arc::new(Flappy {
            tunnel: AtomicBool::new(false),
            up: AtomicBool::new(false),
        }),
        log: Mutex::default(),
    });
    b.attach_plug(rec.clone());
    (b, rec)
}

/// The management socket's connections carry the secondary bit.
const MGMT: ConnId = ConnId(SECONDARY_BIT | 1);

/// Sends a port command from `conn`: the reply's text, or the refusal's code and text.
fn run(b: &OfBridge, conn: ConnId, command: &str, words: &[&str]) -> Result<String, (u16, String)> {
    let cmd = PortCmd::parse(command, words).map_err(|e| (0, e))?;
    let mut bytes = Vec::new();
    openflow::encode(7, &cmd.to_message(), &mut bytes).unwrap();
    let mut out = Vec::new();
    b.handle(conn, Role::Equal, &bytes, &mut out);
    match openflow::decode(&out).unwrap() {
        (h, Message::Experimenter(e)) if h.xid == 7 && e.exp_type == exp_type::DONE => {
            Ok(String::from_utf8(e.data).unwrap())
        }
        (h, Message::Error(e)) if h.xid == 7 => Err((e.code.code, refusal_text(&e).unwrap())),
        other => panic!("unexpected reply {other:?}"),
    }
}

fn statuses(b: &OfBridge) -> Vec<(PortReason, u32, u32)> {
    std::mem::take(&mut b.lock().port_status)
        .into_iter()
        .map(|s| (s.reason, s.desc.port_no, s.desc.state))
        .collect()
}

fn numbers(b: &OfBridge) -> Vec<u32> {
    b.ports().iter().map(|p| p.no).collect()
}

#[test]
fn add_port_takes_the_lowest_free_number_or_the_one_asked() {
    let (b, rec) = bridge();
    let text = run(&b, MGMT, "add-port", &["ring:lp-a"]).unwrap();
    assert_eq!(
        text,
        "added port lp-a.a (ring:lp-a) to bridge lp as OpenFlow port 3"
    );
    let text = run(
        &b,
        MGMT,
        "add-port",
        &["null:sink", "ofport=9", "name=sink9"],
    )
    .unwrap();
    assert!(text.ends_with("as OpenFlow port 9"), "{text}");
    assert_eq!(numbers(&b), [1, 2, 3, 4, 9], "no other port renumbered");
    assert_eq!(
        *rec.log.lock().unwrap(),
        ["plug 3 lp-a.a", "plug 9 null:sink"]
    );
    let infos: Vec<u32> = b.lock().control.ports().iter().map(|p| p.no).collect();
    assert_eq!(infos, [1, 2, 3, 4, 9], "the pipeline knows the new ports");
    assert_eq!(
        statuses(&b),
        [
            (PortReason::Add, 3, port_state::LIVE),
            (PortReason::Add, 9, port_state::LIVE)
        ]
    );
}

#[test]
fn del_port_by_name_or_number_lets_the_datapath_go_first() {
    let (b, rec) = bridge();
    assert_eq!(
        run(&b, MGMT, "del-port", &["p2"]).unwrap(),
        "removed port p2 (OpenFlow port 2) from bridge lp"
    );
    run(&b, MGMT, "del-port", &["4"]).unwrap();
    assert_eq!(numbers(&b), [1]);
    assert_eq!(*rec.log.lock().unwrap(), ["unplug 2", "unplug 4"]);
    let infos: Vec<u32> = b.lock().control.ports().iter().map(|p| p.no).collect();
    assert_eq!(infos, [1]);
    let st = statuses(&b);
    assert_eq!(st.len(), 2);
    assert!(st.iter().all(|s| s.0 == PortReason::Delete));
    // The freed number is the next one given.
    assert!(run(&b, MGMT, "add-port", &["ring:lp-b"])
        .unwrap()
        .ends_with("OpenFlow port 2"));
}

#[test]
fn refusals_name_the_problem() {
    let (b, rec) = bridge();
    let (code, text) = run(&b, MGMT, "add-port", &["null:sink", "ofport=2"]).unwrap_err();
    assert_eq!(code, exp_error::REFUSED);
    assert!(
        text.contains("OpenFlow port 2 is in use by port p2"),
        "{text}"
    );
    let (_, text) = run(&b, MGMT, "add-port", &["null:sink", "name=p1"]).unwrap_err();
    assert!(
        text.contains("a port named p1 is already on bridge lp"),
        "{text}"
    );
    let (_, text) = run(&b, MGMT, "add-port", &["bogus:x"]).unwrap_err();
    assert!(text.contains("unknown port kind 'bogus'"), "{text}");
    let (_, text) = run(&b, MGMT, "add-port", &["null:colour=red"]).unwrap_err();
    assert!(text.contains("colour"), "the port crate's text: {text}");
    let (_, text) = run(&b, MGMT, "del-port", &["nosuch"]).unwrap_err();
    assert!(
        text.contains("bridge lp has no port \"nosuch\"") && text.contains("1(p1), 2(p2), 4(p4)"),
        "{text}"
    );
    // A controller may not change ports.
    let (code, text) = run(&b, ConnId(5), "del-port", &["p1"]).unwrap_err();
    assert_eq!(code, exp_error::NOT_PERMITTED);
    assert!(text.contains("management socket"), "{text}");
    // A body the switch does not understand.
    let mut bytes = Vec::new();
    let bad = Message::Experimenter(openflow::Experimenter {
        experimenter: port_cmd::HAYATE_EXPERIMENTER,
        exp_type: exp_type::ADD_PORT,
        data: b"ring:x\nspeed=9".to_vec(),
    });
    openflow::encode(7, &bad, &mut bytes).unwrap();
    let mut out = Vec::new();
    b.handle(MGMT, Role::Equal, &bytes, &mut out);
    let Message::Error(e) = openflow::decode(&out).unwrap().1 else {
        panic!("not an error")
    };
    assert_eq!(e.code.code, exp_error::BAD_REQUEST);
    assert!(refusal_text(&e)
        .unwrap()
        .contains("unknown option \"speed=9\""));
    assert!(
        rec.log.lock().unwrap().is_empty(),
        "nothing reached the datapath"
    );
    assert_eq!(numbers(&b), [1, 2, 4]);
    assert!(statuses(&b).is_empty());
}

#[test]
fn link_changes_reach_the_pipeline_and_the_controllers() {
    let (b, rec) = bridge();
    assert!(!b.watches_links(), "every link was up");
    let text = run(&b, MGMT, "add-port", &["flappy:"]).unwrap();
    assert!(text.ends_with("its link is down"), "{text}");
    assert_eq!(statuses(&b), [(PortReason::Add, 3, port_state::LINK_DOWN)]);
    let live = |b: &OfBridge| {
        b.lock()
            .control
            .ports()
            .iter()
            .find(|p| p.no == 3)
            .unwrap()
            .live
    };
    assert!(!live(&b));
    assert!(
        b.watches_links(),
        "a port was seen down: the pump looks every LINK_POLL"
    );
    assert!(b.lock().poll_links(), "a link is down");
    assert!(statuses(&b).is_empty(), "no change, no message");
    rec.flappy.up.store(true, Ordering::Relaxed);
    assert!(!b.lock().poll_links(), "every link is up");
    assert_eq!(statuses(&b), [(PortReason::Modify, 3, port_state::LIVE)]);
    assert!(live(&b));
    rec.flappy.up.store(false, Ordering::Relaxed);
    assert!(b.lock().poll_links());
    assert_eq!(
        statuses(&b),
        [(PortReason::Modify, 3, port_state::LINK_DOWN)]
    );
    assert!(!live(&b));
}

#[test]
fn a_port_whose_link_may_change_is_watched_and_show_says_why_it_is_down() {
    let (b, rec) = bridge();
    rec.flappy.up.store(true, Ordering::Relaxed);
    rec.flappy.tunnel.store(true, Ordering::Relaxed);
    let text = run(&b, MGMT, "add-port", &["flappy:"]).unwrap();
    assert!(!text.contains("its link is down"), "{text}");
    assert!(
        b.watches_links(),
        "a tunnel port's link is looked at every LINK_POLL"
    );
    assert_eq!(statuses(&b), [(PortReason::Add, 3, port_state::LIVE)]);
    rec.flappy.up.store(false, Ordering::Relaxed);
    assert!(b.lock().poll_links());
    assert_eq!(
        statuses(&b),
        [(PortReason::Modify, 3, port_state::LINK_DOWN)]
    );
    let show = super::super::look::show(&b, false);
    assert!(
        show.contains("link down: no route to the remote endpoint"),
        "{show}"
    );
}

#[test]
fn without_a_datapath_ports_cannot_change() {
    let pool = Pool::with_frames(16);
    let (control, _cell) = Control::new(PipelineConfig::default());
    let _ = pool;
    let b = OfBridge::new(
        OfBridgeConfig {
            name: "bare".into(),
            datapath_id: 2,
            fail_mode: FailMode::Secure,
            packet_in_limit: RateLimit::default(),
        },
        control,
        Vec::new(),
    );
    let (_, text) = run(&b, MGMT, "add-port", &["null:sink"]).unwrap_err();
    assert!(text.contains("no running datapath"), "{text}");
}
