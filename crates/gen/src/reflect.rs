//! A reflector: every frame received goes back out of the same port with its Ethernet
//! addresses swapped, probe untouched. With `hayate gen run --round-trip` on the far side,
//! the latency measured is the round trip (the sender's clock stamps both ends).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use packet::{Batch, Pool};
use port::Port;

use cpu::{cycles, Tsc};

/// What a reflector did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReflectStats {
    /// Frames sent back.
    pub reflected: u64,
    /// Times the port took fewer frames than offered (the rest were offered again).
    pub pushback: u64,
    /// Frames still waiting to go back when the reflector stopped (freed).
    pub dropped: u64,
    /// Frames too short to carry an Ethernet header (freed).
    pub runts: u64,
}

/// Swaps the Ethernet source and destination of `frame` (at least 12 bytes).
#[inline(always)]
pub fn swap_macs(frame: &mut [u8]) {
    if frame.len() >= 12 {
        let (dst, rest) = frame.split_at_mut(6);
        dst.swap_with_slice(&mut rest[..6]);
    }
}

/// Reflects on queue 0 of `port` for `secs` seconds, or until `stop`, or (when `idle` > 0)
/// until `idle` seconds pass without a frame once one arrived.
pub fn reflect(
    port: &Arc<dyn Port>,
    pool: &Pool,
    tsc: Tsc,
    secs: f64,
    idle: f64,
    stop: &AtomicBool,
) -> Result<ReflectStats, String> {
    let name = port.name().to_string();
    let mut rx = port.open_rx(0).map_err(|e| format!("{name}: {e}"))?;
    let mut tx = port.open_tx(0).map_err(|e| format!("{name}: {e}"))?;
    let mut cache = pool.cache();
    let mut batch = Batch::new();
    let mut st = ReflectStats::default();
    let start = cycles();
    let end = start + tsc.cycles_in(secs);
    let idle_cycles = tsc.cycles_in(idle);
    let mut last = start;
    loop {
        let now = cycles();
        if now >= end || stop.load(Ordering::Relaxed) {
            break;
        }
        let before = batch.len();
        if rx.recv(&mut batch) == 0 && before == 0 {
            if idle > 0.0 && st.reflected > 0 && now - last > idle_cycles {
                break;
            }
            std::hint::spin_loop();
            continue;
        }
        last = now;
        // Frames left from a pushed-back send are already swapped: only the new ones.
        for p in &mut batch.as_mut_slice()[before..] {
            swap_macs(p.data_mut());
        }
        batch.retain_or(
            |p| p.len() >= 14,
            |p| {
                st.runts += 1;
                cache.free(p);
            },
        );
        let offered = batch.len();
        let took = tx.send(&mut batch);
        st.reflected += took as u64;
        // What the port did not take waits in the batch (and fills it, so receiving slows
        // and the sender feels the push back) instead of being dropped.
        st.pushback += u64::from(took < offered);
    }
    st.dropped = batch.free_into(&mut cache) as u64;
    tx.flush();
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{self, Ports, RunConfig};

    #[test]
    fn swaps_addresses() {
        let mut f: Vec<u8> = (0..20).collect();
        swap_macs(&mut f);
        assert_eq!(&f[..12], &[6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn round_trip_through_a_reflector() {
        let _serial = crate::test_serial::serial();
        let pool = Pool::with_frames(8192);
        let name = format!("ring:reflect-{},capacity=8192", std::process::id());
        let near = port::open(&name, &pool).unwrap();
        let far = port::open(&name, &pool).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let tsc = Tsc::calibrate(std::time::Duration::from_millis(20));
        let (p2, s2) = (pool.clone(), stop.clone());
        let refl = std::thread::spawn(move || reflect(&far, &p2, tsc, 30.0, 0.0, &s2));
        let ports = Ports {
            tx: Some((near.clone(), name.clone())),
            rx: Some((near, name.clone())),
        };
        let cfg = RunConfig {
            count: Some(20_000),
            pps: Some(1e6),
            latency_kind: "round-trip".into(),
            drain: 5.0,
            ..RunConfig::default()
        };
        let r = engine::run(&cfg, &ports, &pool, tsc, &mut |_| {}).unwrap();
        stop.store(true, Ordering::Relaxed);
        let st = refl.join().unwrap().unwrap();
        assert_eq!(r.rx_unique, 20_000);
        assert_eq!(st.reflected, 20_000);
        assert_eq!(r.latency_kind, "round-trip");
        assert!(r.latency.is_some());
    }
}
