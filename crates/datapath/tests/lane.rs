//! The priority lane: ports' priority receive queues are read by a thread of their own, which
//! keeps to its share of the core under a flood.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{mask_of, udp, Fake, Logic};
use datapath::{Counter, Datapath, DpConfig, IdleConfig};
use packet::{Batch, Field, Pool, PoolCache};
use pipeline::DpAction;
use port::ring::{self, RingPort};
use port::{Capabilities, Port, PortError, PortStats, RxQueue, TxQueue};

/// A ring port whose priority receive queue is a second ring (or an endless source).
struct PrioPort {
    bulk: Arc<RingPort>,
    prio: Arc<RingPort>,
    /// Instead of the second ring: a queue that always has a full batch.
    endless: Option<Pool>,
}

impl Port for PrioPort {
    fn name(&self) -> &str {
        self.bulk.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.bulk.capabilities()
    }
    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        self.bulk.open_rx(queue)
    }
    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        self.bulk.open_tx(queue)
    }
    fn priority_queues(&self) -> u16 {
        1
    }
    fn open_priority_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        match &self.endless {
            Some(pool) => Ok(Box::new(Endless {
                cache: pool.cache(),
                frame: udp(7, [10, 0, 0, 2]),
            })),
            None => self.prio.open_rx(queue),
        }
    }
    fn stats(&self) -> PortStats {
        self.bulk.stats()
    }
}

/// A priority queue under a flood: every read returns a full batch.
struct Endless {
    cache: PoolCache,
    frame: Vec<u8>,
}

impl RxQueue for Endless {
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let mut n = 0;
        while batch.room() > 0 {
            let Some(p) = self.cache.alloc_from(&self.frame) else {
                break;
            };
            let _ = batch.push(p);
            n += 1;
        }
        n
    }
}

struct Rig {
    dp: Datapath,
    /// Outside ends: port 1's bulk ring, port 1's priority ring, port 2.
    out1: Arc<RingPort>,
    out1_prio: Arc<RingPort>,
    out2: Arc<RingPort>,
    pool: Pool,
}

/// Port 1 keeps a priority queue; port 2 is a plain ring; everything goes to port 2.
fn rig(endless: bool, config: DpConfig) -> Rig {
    rig_with_lane_core(endless, config, None)
}

/// [`rig`], the lane pinned to `lane_core` when given.
fn rig_with_lane_core(endless: bool, config: DpConfig, lane_core: Option<usize>) -> Rig {
    let pool = Pool::with_frames(4096);
    let (sw1, out1) = ring::pair("lsw1", "lout1", 256, &pool);
    let (sw1p, out1_prio) = ring::pair("lsw1p", "lout1p", 256, &pool);
    let (sw2, out2) = ring::pair("lsw2", "lout2", 256, &pool);
    let port1 = PrioPort {
        bulk: sw1,
        prio: sw1p,
        endless: endless.then(|| pool.clone()),
    };
    let logic: Logic = Box::new(|_k, out| {
        out.mask = mask_of(&[Field::InPort]);
        out.actions.push(DpAction::Output(2));
    });
    let logic = Arc::new(Mutex::new(logic));
    let dp = Datapath::builder()
        .pool(pool.clone())
        .config(config)
        .port(1, Arc::new(port1))
        .port(2, sw2)
        .upcall_factory(move |_| {
            Box::new(Fake {
                gen: Arc::new(AtomicU64::new(1)),
                logic: logic.clone(),
                meter: None,
            })
        })
        .threads(vec![Some(0)])
        .lane_core(lane_core)
        .build()
        .unwrap();
    Rig {
        dp,
        out1,
        out1_prio,
        out2,
        pool,
    }
}

fn send(to: &RingPort, frames: &[Vec<u8>], cache: &mut PoolCache) {
    let mut tx = to.open_tx(0).unwrap();
    let mut b = Batch::new();
    for f in frames {
        b.push(cache.alloc_from(f).unwrap()).unwrap();
    }
    assert_eq!(tx.send(&mut b), frames.len());
}

fn source_ports(rx: &mut dyn RxQueue, cache: &mut PoolCache) -> Vec<u16> {
    let mut b = Batch::new();
    let mut got = Vec::new();
    while rx.recv(&mut b) != 0 {
        for p in b.drain() {
            got.push(u16::from_be_bytes([p.data()[34], p.data()[35]]));
            cache.free(p);
        }
    }
    got
}

#[test]
fn priority_queues_get_a_thread_of_their_own() {
    let r = rig(false, DpConfig::default());
    let mut pmds = r.dp.build_pmds().unwrap();
    assert_eq!(pmds.len(), 2, "one poll thread and the lane");
    assert!(!pmds[0].is_lane());
    assert!(pmds[1].is_lane());
    assert_eq!(pmds[0].rx_ports().collect::<Vec<_>>(), [1, 2]);
    assert_eq!(pmds[1].rx_ports().collect::<Vec<_>>(), [1]);
    assert_eq!(pmds[1].core(), Some(0), "the lane shares thread 0's core");
    let mut cache = r.pool.cache();
    // A control frame is the lane's; a bulk frame the poll thread's.
    send(&r.out1_prio, &[udp(9999, [10, 0, 0, 2])], &mut cache);
    send(&r.out1, &[udp(100, [10, 0, 0, 2])], &mut cache);
    assert_eq!(pmds[1].poll_once(), 1);
    let mut out2 = r.out2.open_rx(0).unwrap();
    assert_eq!(source_ports(out2.as_mut(), &mut cache), [9999]);
    assert_eq!(pmds[0].poll_once(), 1);
    assert_eq!(source_ports(out2.as_mut(), &mut cache), [100]);
    assert_eq!(pmds[1].stats()[Counter::RxPackets], 1);
    assert_eq!(pmds[0].stats()[Counter::RxPackets], 1);
}

#[test]
fn the_lane_takes_the_core_it_is_given() {
    let r = rig_with_lane_core(false, DpConfig::default(), Some(1));
    let pmds = r.dp.build_pmds().unwrap();
    assert_eq!(pmds[0].core(), Some(0), "the poll thread stays on its core");
    assert!(pmds[1].is_lane());
    assert_eq!(pmds[1].core(), Some(1), "the lane on a core of its own");
}

#[test]
fn no_priority_queue_no_lane() {
    let mut f = common::fixture(2, DpConfig::default(), Box::new(|_, _| {}));
    assert_eq!(f.pmds.len(), 1);
    assert!(!f.pmds.pop().unwrap().is_lane());
}

/// Runs the lane of `r` on a thread of its own until `counter` reaches 3 (or 10 s pass);
/// returns its counters.
fn run_lane_until(r: &Rig, counter: Counter) -> datapath::Snapshot {
    let mut lane = r.dp.build_pmds().unwrap().pop().unwrap();
    assert!(lane.is_lane());
    let stats = lane.stats_handle().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let t = std::thread::spawn(move || lane.run(&stop2));
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats.snapshot()[counter] < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    stats.snapshot()
}

#[test]
fn a_flood_keeps_the_lane_to_its_share_of_the_core() {
    // Frames come without end: past a quarter of each millisecond the lane sleeps.
    let s = run_lane_until(&rig(true, DpConfig::default()), Counter::LaneYields);
    assert!(s[Counter::LaneYields] >= 3, "the lane never yielded: {s:?}");
    assert!(s[Counter::RxPackets] > 0);
}

#[test]
fn the_lane_sleeps_even_when_poll_threads_busy_poll() {
    let busy = DpConfig {
        idle: IdleConfig {
            sleep: false,
            ..IdleConfig::default()
        },
        ..DpConfig::default()
    };
    // A real-time thread that spun on empty queues would take the poll threads' core.
    let s = run_lane_until(&rig(false, busy), Counter::IdleSleeps);
    assert!(s[Counter::IdleSleeps] >= 3, "the lane spun");
}
