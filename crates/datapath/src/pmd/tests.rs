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
