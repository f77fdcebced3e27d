//! A short measurement (ignored by default; needs root): frames from a generator in another
//! network namespace enter veth pair A, are received by an AF_XDP port on A, sent by an AF_XDP
//! port on veth pair B (same pool, so no copy in the switch), and counted. One thread forwards;
//! the generator (an AF_PACKET socket with `sendmmsg`) runs on the other core.
//!
//! ```text
//! cargo test --release -p port --test afxdp_bench -- --ignored --nocapture
//! ```
//! `HY_BENCH_SECS` sets the measured seconds (default 5, at most 20).

mod afxdp_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use afxdp_support::*;
use packet::{Batch, Pool, PoolConfig};
use port::afxdp::{AfXdpConfig, AfXdpPort};
use port::{Port, RxQueue, TxQueue};

fn pin(core: usize) {
    let _ = cpu::pin_current(core);
}

#[test]
#[ignore = "measurement: run with --ignored --nocapture (root, ≤ 20 s)"]
fn forward_veth_to_veth_pps() {
    if !root_or_say_why("forward_veth_to_veth_pps") {
        return;
    }
    let secs: u64 = std::env::var("HY_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .clamp(1, 20);
    in_netns(move || {
        let a = Veth::new("ba");
        let b = Veth::new("bb");
        let pool = Pool::new(&PoolConfig {
            frames: 16384,
            hugepages: true,
            populate: true,
            ..PoolConfig::default()
        })
        .unwrap();
        let pa = AfXdpPort::open(&AfXdpConfig::new(&a.port), &pool).unwrap();
        let pb = AfXdpPort::open(&AfXdpConfig::new(&b.port), &pool).unwrap();
        let mut rx = pa.open_rx_queue(0).unwrap();
        let mut tx = pb.open_tx_queue(0).unwrap();

        // The generator: its own thread in its own namespace, holding A's peer end.
        let stop = Arc::new(AtomicBool::new(false));
        let generated = Arc::new(AtomicU64::new(0));
        let (tid_tx, tid_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<String>();
        let gen = {
            let stop = stop.clone();
            let generated = generated.clone();
            std::thread::spawn(move || {
                pin(1);
                // SAFETY: affects only this thread.
                assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
                // SAFETY: gettid has no preconditions.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                let peer: String = go_rx.recv().unwrap();
                ip(&["link", "set", &peer, "up"]);
                let raw = Raw::new(&peer);
                raw.bypass_qdisc();
                let frames: Vec<Vec<u8>> = (0..64).map(|i| test_frame(i, 60)).collect();
                let limit = Instant::now() + Duration::from_secs(25);
                while !stop.load(Ordering::Relaxed) && Instant::now() < limit {
                    let n = raw.send_many(&frames);
                    generated.fetch_add(n as u64, Ordering::Relaxed);
                }
            })
        };
        let tid = tid_rx.recv().unwrap();
        ip(&["link", "set", &a.peer, "netns", &tid.to_string()]);
        go_tx.send(a.peer.clone()).unwrap();

        pin(0);
        let mut cache = pool.cache();
        let mut batch = Batch::new();
        let mut run = |d: Duration| {
            let (mut fwd, mut dropped) = (0u64, 0u64);
            let start = Instant::now();
            while start.elapsed() < d {
                for _ in 0..256 {
                    if rx.recv(&mut batch) > 0 {
                        fwd += tx.send(&mut batch) as u64;
                        dropped += batch.free_into(&mut cache) as u64;
                    }
                }
            }
            (fwd, dropped)
        };
        run(Duration::from_secs(1)); // warm-up
        let g0 = generated.load(Ordering::Relaxed);
        let s0 = pa.stats();
        let t = Instant::now();
        let (fwd, dropped) = run(Duration::from_secs(secs));
        let el = t.elapsed().as_secs_f64();
        let g1 = generated.load(Ordering::Relaxed);
        let s1 = pa.stats();
        stop.store(true, Ordering::Relaxed);
        gen.join().unwrap();
        tx.flush();
        let mpps = |n: u64| n as f64 / el / 1e6;
        println!(
            "afxdp veth→veth, 60-byte frames, {el:.1} s, native={} zero_copy={}:\n  \
             generated {:.3} Mpps, received by port A {:.3} Mpps (kernel rx drops {:.3} Mpps), \
             forwarded by port B {:.3} Mpps, not taken by tx {dropped}",
            pa.native(),
            pa.zero_copy(),
            mpps(g1 - g0),
            mpps(s1.rx_packets - s0.rx_packets),
            mpps(s1.rx_dropped - s0.rx_dropped),
            mpps(fwd),
        );
        assert!(fwd > 0, "nothing was forwarded");
    });
}
