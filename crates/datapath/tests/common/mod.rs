//! Test fixture: a datapath over ring ports with a fake translator.
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use datapath::{Datapath, DpConfig, Pmd, Policer, Upcall};
use packet::builder::PacketSpec;
use packet::{Batch, FlowKey, Pool, PoolCache};
use pipeline::Translation;
use port::ring::{self, RingPort};
use port::{RxQueue, TxQueue};

/// What the fake translator does with a key.
pub type Logic = Box<dyn FnMut(&FlowKey, &mut Translation) + Send>;

/// A translator driven by a closure the test can swap, with a generation the test bumps.
pub struct Fake {
    pub gen: Arc<AtomicU64>,
    pub logic: Arc<Mutex<Logic>>,
    pub meter: Option<Arc<dyn Policer>>,
}

impl Upcall for Fake {
    fn generation(&self) -> u64 {
        self.gen.load(Ordering::Relaxed)
    }
    fn translate(&mut self, key: &FlowKey, out: &mut Translation) {
        (self.logic.lock().unwrap())(key, out)
    }
    fn meter(&self, _id: u32) -> Option<Arc<dyn Policer>> {
        self.meter.clone()
    }
}

/// The outside end of one switch port.
pub struct Peer {
    pub rx: Box<dyn RxQueue>,
    pub tx: Box<dyn TxQueue>,
}

pub struct Fixture {
    pub pmds: Vec<Pmd>,
    pub dp: Datapath,
    pub peers: Vec<Peer>,
    pub gen: Arc<AtomicU64>,
    pub logic: Arc<Mutex<Logic>>,
    pub cache: PoolCache,
    pub pool: Pool,
    pub switch_ends: Vec<Arc<RingPort>>,
}

/// Ports are numbered 1..=nports (OpenFlow numbers) and peers are indexed by port - 1.
pub fn fixture(nports: u32, cfg: DpConfig, logic: Logic) -> Fixture {
    fixture_with(nports, cfg, logic, None, 1, 256)
}

pub fn fixture_with(
    nports: u32,
    cfg: DpConfig,
    logic: Logic,
    meter: Option<Arc<dyn Policer>>,
    threads: usize,
    ring_cap: usize,
) -> Fixture {
    fixture_ports(nports, cfg, logic, meter, threads, ring_cap, &|_, _| {})
}

/// [`fixture_with`], with `each(port, switch end)` called on every port's switch end before
/// the datapath opens it.
pub fn fixture_ports(
    nports: u32,
    cfg: DpConfig,
    logic: Logic,
    meter: Option<Arc<dyn Policer>>,
    threads: usize,
    ring_cap: usize,
    each: &dyn Fn(u32, &RingPort),
) -> Fixture {
    let pool = Pool::with_frames(8192);
    let gen = Arc::new(AtomicU64::new(1));
    let logic = Arc::new(Mutex::new(logic));
    let mut b = Datapath::builder().pool(pool.clone()).config(cfg);
    let mut peers = Vec::new();
    let mut switch_ends = Vec::new();
    for p in 1..=nports {
        let (sw, out) = ring::pair(&format!("sw{p}"), &format!("out{p}"), ring_cap, &pool);
        use port::Port;
        peers.push(Peer {
            rx: out.open_rx(0).unwrap(),
            tx: out.open_tx(0).unwrap(),
        });
        each(p, &sw);
        switch_ends.push(sw.clone());
        b = b.port(p, sw);
    }
    let (g, l) = (gen.clone(), logic.clone());
    let dp = b
        .upcall_factory(move |_| {
            Box::new(Fake {
                gen: g.clone(),
                logic: l.clone(),
                meter: meter.clone(),
            })
        })
        .threads(vec![None; threads])
        .build()
        .unwrap();
    let pmds = dp.build_pmds().unwrap();
    Fixture {
        pmds,
        dp,
        peers,
        gen,
        logic,
        cache: pool.cache(),
        pool,
        switch_ends,
    }
}

impl Fixture {
    /// Sends frames into the switch on OpenFlow port `port`.
    pub fn inject(&mut self, port: u32, frames: &[Vec<u8>]) {
        for chunk in frames.chunks(32) {
            let mut b = Batch::new();
            for f in chunk {
                b.push(self.cache.alloc_from(f).unwrap()).unwrap();
            }
            let n = self.peers[port as usize - 1].tx.send(&mut b);
            assert_eq!(n, chunk.len(), "ring full in test");
        }
    }

    /// Everything the switch sent out of OpenFlow port `port`.
    pub fn collect(&mut self, port: u32) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let mut b = Batch::new();
            if self.peers[port as usize - 1].rx.recv(&mut b) == 0 {
                return out;
            }
            for p in b.drain() {
                out.push(p.data().to_vec());
                self.cache.free(p);
            }
        }
    }

    /// Polls thread 0 until it finds nothing.
    pub fn poll(&mut self) -> usize {
        let mut total = 0;
        loop {
            let n = self.pmds[0].poll_once();
            if n == 0 {
                return total;
            }
            total += n;
        }
    }

    pub fn stats(&self) -> datapath::Snapshot {
        self.pmds.iter().map(|p| p.stats()).sum()
    }

    pub fn set_logic(&self, l: Logic) {
        *self.logic.lock().unwrap() = l;
    }

    pub fn bump(&self) {
        self.gen.fetch_add(1, Ordering::Relaxed);
    }
}

/// An Ethernet/IPv4/UDP frame from 10.0.0.1:`sport` to `dst`:80, 64 bytes.
pub fn udp(sport: u16, dst: [u8; 4]) -> Vec<u8> {
    PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::from(dst),
        sport,
        80,
        64,
    )
    .build()
}

/// A mask covering the given fields.
pub fn mask_of(fields: &[packet::Field]) -> FlowKey {
    let mut m = FlowKey::ZERO;
    for f in fields {
        m.set_all(*f);
    }
    m
}

/// `inner` in VXLAN with `vni`, from `src` to `dst` (outer MACs 02::1 → 02::2), as bytes.
#[allow(dead_code)]
pub fn vxlan_frame(src: Ipv4Addr, dst: Ipv4Addr, vni: u32, inner: &[u8]) -> Vec<u8> {
    use tunnel::{Encap, EncapTemplate, OuterAddrs, TunnelKind};
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src: src.into(),
        dst: dst.into(),
    };
    let t = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, vni, false), &a).unwrap();
    let pool = Pool::with_frames(2);
    let mut cache = pool.cache();
    let mut p = cache.alloc_from(inner).unwrap();
    t.push(&mut p, 3, 1).unwrap();
    let v = p.data().to_vec();
    cache.free(p);
    v
}
