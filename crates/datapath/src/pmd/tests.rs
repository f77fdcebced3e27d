//! Tests of the per-batch packet path of [`super::Pmd`]: the batch hand-over (one port for
//! the whole batch, with in-place actions and drops taken out), the general per-packet path,
//! same-key trains and the thrashing-EMC bypass. Ring ports, a closure as translator.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use packet::builder::PacketSpec;
use packet::{Batch, Field, FlowKey, Pool, PoolCache};
use pipeline::{DpAction, Translation};
use port::ring;
use port::{Port, RxQueue, TxQueue};

use crate::{Counter, Datapath, DpConfig, Pmd, Policer, Snapshot, Upcall};

type Logic = Arc<Mutex<dyn FnMut(&FlowKey, &mut Translation) + Send>>;

struct Fake(Logic);

impl Upcall for Fake {
    fn generation(&self) -> u64 {
        1
    }
    fn translate(&mut self, key: &FlowKey, out: &mut Translation) {
        (self.0.lock().unwrap())(key, out)
    }
    fn meter(&self, _id: u32) -> Option<Arc<dyn Policer>> {
        None
    }
}

struct Rig {
    pmd: Pmd,
    peers: Vec<(Box<dyn RxQueue>, Box<dyn TxQueue>)>,
    cache: PoolCache,
    _dp: Datapath,
}

fn rig(nports: u32, cfg: DpConfig, logic: Logic) -> Rig {
    let pool = Pool::with_frames(4096);
    let mut b = Datapath::builder().pool(pool.clone()).config(cfg);
    let mut peers = Vec::new();
    for p in 1..=nports {
        let (sw, out) = ring::pair(&format!("sw{p}"), &format!("out{p}"), 512, &pool);
        peers.push((out.open_rx(0).unwrap(), out.open_tx(0).unwrap()));
        b = b.port(p, sw);
    }
    let dp = b
        .upcall_factory(move |_| Box::new(Fake(logic.clone())))
        .threads(vec![None])
        .build()
        .unwrap();
    let pmd = dp.build_pmds().unwrap().pop().unwrap();
    Rig {
        pmd,
        peers,
        cache: pool.cache(),
        _dp: dp,
    }
}

impl Rig {
    /// Sends `frames` (at most 32, so they arrive as one rx batch) into port `port`.
    fn batch_in(&mut self, port: u32, frames: &[Vec<u8>]) {
        assert!(frames.len() <= 32);
        let mut b = Batch::new();
        for f in frames {
            b.push(self.cache.alloc_from(f).unwrap()).unwrap();
        }
        assert_eq!(self.peers[port as usize - 1].1.send(&mut b), frames.len());
        while self.pmd.poll_once() != 0 {}
    }

    fn out(&mut self, port: u32) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut b = Batch::new();
        while self.peers[port as usize - 1].0.recv(&mut b) != 0 {
            for p in b.drain() {
                v.push(p.data().to_vec());
                self.cache.free(p);
            }
        }
        v
    }

    fn stats(&self) -> Snapshot {
        self.pmd.stats()
    }
}

fn udp(sport: u16, dst: u8) -> Vec<u8> {
    PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, dst),
        sport,
        80,
        64,
    )
    .build()
}

fn logic(f: impl FnMut(&FlowKey, &mut Translation) + Send + 'static) -> Logic {
    Arc::new(Mutex::new(f))
}

fn mask(fields: &[Field]) -> FlowKey {
    let mut m = FlowKey::ZERO;
    for f in fields {
        m.set_all(*f);
    }
    m
}

/// Exact match on the UDP source port; even ports to port 2, odd ports to `odd_to`.
fn by_sport(odd_to: u32) -> Logic {
    logic(move |k, out| {
        out.mask = mask(&[Field::InPort, Field::TpSrc]);
        let to = if k.get(Field::TpSrc) % 2 == 0 {
            2
        } else {
            odd_to
        };
        out.actions.push(DpAction::Output(to));
    })
}

#[test]
fn one_flow_batch_is_handed_over_in_order() {
    // With the EMC in use whatever the number of masks, and (the default) without it while
    // the classifier has at most two masks.
    for (emc_min_subtables, tier) in [(0, Counter::EmcHits), (2, Counter::MegaflowHits)] {
        let cfg = DpConfig {
            emc_min_subtables,
            ..DpConfig::default()
        };
        let mut r = rig(2, cfg, by_sport(2));
        let frames = vec![udp(10, 2); 32];
        r.batch_in(1, &frames);
        r.batch_in(1, &frames);
        assert_eq!(r.out(2), [frames.clone(), frames].concat());
        let s = r.stats();
        assert_eq!(s[Counter::Upcalls], 1);
        // The second batch is one train: one lookup, and every packet counts as a hit of the
        // tier that answered it.
        assert_eq!(s[tier], 32, "{tier:?}");
        assert_eq!(s[Counter::EmcHits] + s[Counter::MegaflowHits], 32);
        assert_eq!(s[Counter::TxPackets], 64);
        assert_eq!(s.drops(), 0);
    }
}

#[test]
fn trains_after_a_run_of_distinct_flows_are_still_right() {
    let mut r = rig(2, DpConfig::default(), by_sport(2));
    for round in 0..40u16 {
        // 20 batches of distinct flows (no trains: the check backs off), then trains.
        let frames: Vec<_> = if round < 20 {
            (0..32).map(|i| udp(2 * (round * 32 + i), 2)).collect()
        } else {
            vec![udp(4, 2); 32]
        };
        r.batch_in(1, &frames);
        assert!(r.out(2) == frames, "round {round}");
    }
    assert_eq!(r.stats()[Counter::TxPackets], 40 * 32);
}

#[test]
fn many_flows_to_one_port_keep_their_order() {
    let mut r = rig(2, DpConfig::default(), by_sport(2));
    let frames: Vec<_> = (0..32).map(|i| udp(100 + i, 2)).collect();
    r.batch_in(1, &frames);
    r.batch_in(1, &frames);
    assert_eq!(r.out(2), [frames.clone(), frames].concat());
    assert_eq!(r.pmd.megaflows(), 32);
    assert_eq!(r.stats()[Counter::TxPackets], 64);
}

#[test]
fn flows_to_two_ports_take_the_general_path_in_order() {
    let mut r = rig(3, DpConfig::default(), by_sport(3));
    let frames: Vec<_> = (0..32).map(|i| udp(100 + i, 2)).collect();
    r.batch_in(1, &frames);
    r.batch_in(1, &frames);
    let even: Vec<_> = frames.iter().step_by(2).cloned().collect();
    let odd: Vec<_> = frames.iter().skip(1).step_by(2).cloned().collect();
    assert_eq!(r.out(2), [even.clone(), even].concat());
    assert_eq!(r.out(3), [odd.clone(), odd].concat());
}

#[test]
fn in_place_rewrites_and_drops_before_a_hand_over() {
    // Source port 7 is dropped (no action); the others get eth_src rewritten, then port 2.
    let mut r = rig(
        2,
        DpConfig::default(),
        logic(|k, out| {
            out.mask = mask(&[Field::InPort, Field::TpSrc]);
            if k.get(Field::TpSrc) != 7 {
                out.actions.push(DpAction::SetField {
                    field: Field::EthSrc,
                    value: 0x0200_0000_00aa,
                });
                out.actions.push(DpAction::Output(2));
            }
        }),
    );
    let frames: Vec<_> = (0..32).map(|i| udp(i % 10, 2)).collect();
    r.batch_in(1, &frames);
    r.batch_in(1, &frames);
    let want: Vec<_> = frames
        .iter()
        .filter(|f| f[34..36] != [0, 7])
        .map(|f| {
            let mut f = f.clone();
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xaa]);
            f
        })
        .collect();
    assert_eq!(r.out(2), [want.clone(), want].concat());
    let s = r.stats();
    assert_eq!(s[Counter::DropNoAction], 6);
    assert_eq!(s[Counter::TxPackets], 58);
}

#[test]
fn a_thrashing_emc_is_bypassed_and_forwarding_stays_right() {
    let cfg = DpConfig {
        emc_entries: 2,
        ..DpConfig::default()
    };
    // Two megaflows (by destination address), a new exact key in every packet.
    let mut r = rig(
        3,
        cfg,
        logic(|k, out| {
            out.mask = mask(&[Field::InPort, Field::Ipv4Dst]);
            let to = (k.get(Field::Ipv4Dst) & 0xff) as u32;
            out.actions.push(DpAction::Output(to));
        }),
    );
    for round in 0..300u16 {
        let frames: Vec<_> = (0..32)
            .map(|i| udp(round * 32 + i, 2 + (i % 2) as u8))
            .collect();
        r.batch_in(1, &frames);
        let even: Vec<_> = frames.iter().step_by(2).cloned().collect();
        let odd: Vec<_> = frames.iter().skip(1).step_by(2).cloned().collect();
        assert_eq!(r.out(2), even, "round {round}");
        assert_eq!(r.out(3), odd, "round {round}");
    }
    assert_eq!(r.stats()[Counter::Upcalls], 2);
    // Every packet after the first batch (whose misses share the two upcalls) hits a megaflow.
    assert_eq!(r.stats()[Counter::MegaflowHits], 299 * 32);
    assert_eq!(r.stats()[Counter::EmcHits], 0);
    let s = r.stats();
    assert_eq!(s[Counter::TxPackets], 300 * 32);
    assert_eq!(s.drops(), 0);
}

/// A thread with a noisy port 1 (`noisy`, a port spec: an endless source) whose traffic goes
/// to port 3 (a sink), and a victim port 2 (a ring) whose traffic goes to port 4 (a ring).
/// Returns the thread, the victim's sending end and receiving end, and the datapath.
struct Noisy {
    pmd: Pmd,
    victim_in: Box<dyn TxQueue>,
    victim_out: Box<dyn RxQueue>,
    cache: PoolCache,
    dp: Datapath,
}

fn noisy(noisy: &str, policing: port::Policing, cfg: DpConfig, logic: Logic) -> Noisy {
    let pool = Pool::with_frames(8192);
    let (v_sw, v_host) = ring::pair("victim-sw", "victim-host", 512, &pool);
    let (o_sw, o_host) = ring::pair("out-sw", "out-host", 512, &pool);
    let dp = Datapath::builder()
        .pool(pool.clone())
        .config(cfg)
        .port(1, port::spec::open(noisy, &pool).unwrap())
        .port(2, v_sw)
        .port(3, port::spec::open("null:sink", &pool).unwrap())
        .port(4, o_sw)
        .policing(1, policing)
        .upcall_factory(move |_| Box::new(Fake(logic.clone())))
        .threads(vec![None])
        .build()
        .unwrap();
    let pmd = dp.build_pmds().unwrap().pop().unwrap();
    Noisy {
        pmd,
        victim_in: v_host.open_tx(0).unwrap(),
        victim_out: o_host.open_rx(0).unwrap(),
        cache: pool.cache(),
        dp,
    }
}

impl Noisy {
    fn send_victim(&mut self, frames: &[Vec<u8>]) {
        for chunk in frames.chunks(32) {
            let mut b = Batch::new();
            for f in chunk {
                b.push(self.cache.alloc_from(f).unwrap()).unwrap();
            }
            assert_eq!(self.victim_in.send(&mut b), chunk.len());
        }
    }

    fn victim_received(&mut self) -> usize {
        let mut b = Batch::new();
        let mut n = 0;
        while self.victim_out.recv(&mut b) != 0 {
            n += b.len();
            b.free_into(&mut self.cache);
        }
        n
    }
}

/// Port 1 to port 3, port 2 to port 4; megaflows per in_port and source address (each of
/// `null:flows=N`'s packets can be a new flow).
fn one_to_three_two_to_four() -> Logic {
    logic(|k, out| {
        out.mask = mask(&[Field::InPort, Field::Ipv4Src]);
        let to = if k.get(Field::InPort) == 1 { 3 } else { 4 };
        out.actions.push(DpAction::Output(to));
    })
}

#[test]
fn a_full_queue_does_not_starve_its_neighbour() {
    // Port 1 always has a full batch (an endless source); port 2 has 96 frames waiting.
    let mut r = noisy(
        "null:",
        port::Policing::default(),
        DpConfig::default(),
        one_to_three_two_to_four(),
    );
    let frames: Vec<_> = (0..96).map(|i| udp(i, 2)).collect();
    r.send_victim(&frames);
    // Each round takes one batch of at most 32 from each queue, in turn: the victim's 96
    // frames are through in three rounds, however much the noisy queue holds.
    for round in 1..=3 {
        assert_eq!(r.pmd.poll_once(), 64, "round {round}: 32 from each queue");
        assert_eq!(r.victim_received(), 32, "round {round}");
    }
    let s = r.pmd.stats();
    assert_eq!(s[Counter::TxPackets], 192);
    assert_eq!(s.drops(), 0);
}

#[test]
fn a_policed_port_loses_its_excess_before_lookup_and_its_neighbour_nothing() {
    // Port 1 floods 20,000 frames of new flows, policed to 1 kpps with a 1-kpkt bucket;
    // port 2 sends 320 frames meanwhile.
    let policing =
        port::Policing::parse("ingress_policing_kpkts_rate=1,ingress_policing_kpkts_burst=1")
            .unwrap();
    let mut r = noisy(
        "null:flows=1000000,limit=20000",
        policing,
        DpConfig::default(),
        one_to_three_two_to_four(),
    );
    let started = std::time::Instant::now();
    let victim: Vec<_> = (0..320).map(|i| udp(i, 2)).collect();
    r.send_victim(&victim);
    while r.pmd.poll_once() != 0 {}
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(r.victim_received(), 320, "the victim loses nothing");
    let s = r.pmd.stats();
    assert_eq!(
        s[Counter::RxPackets],
        20_320,
        "policed frames count as received"
    );
    let policed = s[Counter::DropPoliced];
    // At most the bucket plus what the rate refilled while the test ran passed.
    let most = 1000.0 + 1000.0 * secs + 32.0;
    assert!(
        (20_000 - policed) as f64 <= most,
        "{} of port 1's frames passed in {secs:.3} s",
        20_000 - policed
    );
    assert!(policed >= 20_000 - most as u64);
    // Policed frames never reached a lookup: every upcall is a frame that passed (each of
    // port 1's is a new flow) or one of the victim's 320 flows.
    let passed = 20_000 - policed;
    assert!(
        s[Counter::Upcalls] + s[Counter::UpcallShed] <= passed + 320,
        "upcalls {} shed {} for {passed} passed",
        s[Counter::Upcalls],
        s[Counter::UpcallShed]
    );
    // The drops are port 1's, not port 2's.
    let drops: Vec<_> = r.pmd.rx_drops().map(|(p, d)| (p, d.snapshot())).collect();
    let of = |port| drops.iter().find(|(p, _)| *p == port).unwrap().1;
    assert_eq!(of(1)[Counter::DropPoliced], policed);
    assert_eq!(of(2).drops(), 0);
    assert_eq!(of(2)[Counter::RxPackets], 320);
}

#[test]
fn the_upcall_budget_is_each_queues_own() {
    let mut r = noisy(
        "null:",
        port::Policing::default(),
        DpConfig {
            min_upcalls_per_batch: 0,
            ..DpConfig::default()
        },
        one_to_three_two_to_four(),
    );
    let (noisy_q, victim_q) = (0, 1);
    assert_eq!(r.pmd.rx[noisy_q].ofport, 1);
    assert_eq!(r.pmd.rx[victim_q].ofport, 2);
    // The window: 1000 busy cycles, hits seen, the noisy queue's upcalls took 900 of them.
    r.pmd.budget.busy = 1000;
    r.pmd.roll_budget(0, 1);
    r.pmd.rx[noisy_q].upcall_cycles = 900;
    // The noisy queue is over its share and is shed; the victim's new flows still go up.
    assert!(!r.pmd.upcall_allowed(noisy_q, 0, 0, 0));
    assert!(r.pmd.upcall_allowed(victim_q, 0, 0, 0));
    // Until the victim's own upcalls pass the share.
    r.pmd.rx[victim_q].upcall_cycles = 600;
    assert!(!r.pmd.upcall_allowed(victim_q, 0, 0, 0));
}

#[test]
fn policing_set_while_polling_takes_effect_at_the_next_batch() {
    let mut r = noisy(
        "null:",
        port::Policing::default(),
        DpConfig::default(),
        one_to_three_two_to_four(),
    );
    assert_eq!(r.pmd.poll_once(), 32);
    assert_eq!(r.pmd.stats()[Counter::DropPoliced], 0);
    // A 1-kpkt bucket, emptied: the next 1000 pass, then the rest is policed.
    r.dp.set_policing(
        1,
        port::Policing::parse("ingress_policing_kpkts_rate=1,ingress_policing_kpkts_burst=1")
            .unwrap(),
    );
    for _ in 0..100 {
        r.pmd.poll_once();
    }
    let s = r.pmd.stats();
    assert!(
        s[Counter::DropPoliced] >= 3200 - 1032,
        "{}",
        s[Counter::DropPoliced]
    );
    assert!(s[Counter::TxPackets] <= 32 + 1100);
}

#[test]
fn a_ports_packet_in_flood_spends_its_own_allowance_not_its_neighbours() {
    // Every packet goes to the controller; port 1 floods, port 2 sends 5 frames.
    let to_controller = || {
        logic(|_, out| {
            out.mask = mask(&[Field::InPort]);
            out.actions.push(DpAction::Controller {
                reason: pipeline::PacketInReason::Action,
                max_len: 128,
                table_id: 0,
                cookie: 0,
            });
        })
    };
    let run = |cfg: DpConfig| {
        let mut r = noisy("null:", port::Policing::default(), cfg, to_controller());
        // The flood first, then the neighbour's frames.
        for _ in 0..40 {
            r.pmd.poll_once();
        }
        r.send_victim(&(0..5).map(|i| udp(i, 2)).collect::<Vec<_>>());
        for _ in 0..60 {
            r.pmd.poll_once();
        }
        let mut from = [0u64; 3];
        r.dp.packet_ins(usize::MAX, |pi| from[pi.in_port as usize] += 1);
        let drops: Vec<_> = r.pmd.rx_drops().map(|(p, d)| (p, d.snapshot())).collect();
        (from, drops)
    };
    // Without a per-port allowance the flood fills the shared queue first.
    let (from, _) = run(DpConfig::default());
    assert_eq!(from[1], 1024, "the whole packet-in queue");
    assert_eq!(from[2], 0, "the neighbour's packet-ins found it full");
    // With 1 a second and a bucket of 10: the flood gets its 10, the neighbour its 5.
    let (from, drops) = run(DpConfig {
        packet_in_port_rate: 1,
        packet_in_port_burst: 10,
        ..DpConfig::default()
    });
    assert!((10..=11).contains(&from[1]), "{from:?}");
    assert_eq!(from[2], 5, "{from:?}");
    let of = |port| drops.iter().find(|(p, _)| *p == port).unwrap().1;
    assert_eq!(
        of(1)[Counter::DropPacketInBudget],
        3200 - from[1],
        "the rest of the flood's are counted against it"
    );
    assert_eq!(of(2)[Counter::DropPacketInBudget], 0);
    assert_eq!(of(2)[Counter::DropPacketInFull], 0);
}

#[test]
fn a_shaped_port_holds_its_excess_and_a_poll_without_packets_sends_it() {
    let mut r = rig(2, DpConfig::default(), by_sport(2));
    // Port 2 shapes queue 0 to 1 kbit/s with a 13-kbit bucket: one 1514-byte frame (12.1
    // kbit) now, the next after 12 s — far beyond this test.
    let shaped = |text: &str| {
        let (_, o) =
            port::dp_options::split_spec(&format!("null:qos_type=linux-htb,{text}")).unwrap();
        o.egress
    };
    r._dp.set_egress(2, shaped("queue=0:max_rate=1:burst=13"));
    let big = PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        10,
        80,
        1514,
    )
    .build();
    r.batch_in(1, &vec![big.clone(); 5]);
    assert_eq!(r.out(2).len(), 1, "one frame's worth of bucket");
    assert!(r.pmd.exec.holds_packets(), "four held, none dropped");
    let (q, _) = r._dp.egress_queues(2);
    assert_eq!((q[0].counts.dropped, q[0].counts.backlog), (0, 4));
    // A faster rate (its buckets full at once); a poll that receives nothing sends them.
    r._dp
        .set_egress(2, shaped("queue=0:max_rate=1000000:burst=100000"));
    assert_eq!(r.pmd.poll_once(), 0);
    let out = r.out(2);
    assert_eq!(out.len(), 4, "the four held frames");
    assert!(out.iter().all(|f| *f == big));
    assert!(!r.pmd.exec.holds_packets());
    let (q, _) = r._dp.egress_queues(2);
    assert_eq!((q[0].counts.tx_packets, q[0].counts.backlog), (5, 0));
}
