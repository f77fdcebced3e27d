//! `hayate gen send --port xdplive:IFNAME`: the fastest way to put frames on an interface from
//! one core — XDP live frames (`port::xdplive`): the kernel transmits copies of one template
//! frame in bulk through the driver's `ndo_xdp_xmit`, with no socket buffer per packet.
//!
//! One frame is repeated as it is: one flow, one size, no probe, as fast as the driver takes
//! it (`--rate max`). On a veth the peer must receive through NAPI (an XDP program on the
//! peer, or `ethtool -K PEER gro on`), or the kernel drops the frames: count what arrives.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use super::args::{OutputArgs, RateArgs, TrafficArgs};

/// Frames in the first call into the kernel; later calls are sized from the rate seen.
const FIRST_CHUNK: u64 = 65_536;
/// Time one call should take: each call sets up and tears down the kernel's page pool (tens
/// of milliseconds here), so calls must be long to amortize it, and short enough to stop
/// close to the asked duration.
const CALL_SECS: f64 = 0.25;

/// What an `xdplive` send did.
#[derive(Debug, Serialize)]
pub struct XdpLiveReport {
    /// The port spec.
    pub port: String,
    /// Frame size in bytes, FCS included.
    pub frame: usize,
    /// Frames handed to the driver (a veth whose peer does not receive through NAPI drops
    /// them uncounted: what arrives is counted at the receiver).
    pub tx_packets: u64,
    /// Seconds of sending.
    pub seconds: f64,
    /// Frames per second handed to the driver.
    pub pps: f64,
}

/// Runs `hayate gen send` on an `xdplive:` port.
pub fn send(ifname: &str, traffic: &TrafficArgs, rate: &RateArgs, out: &OutputArgs) -> Result<()> {
    if rate.rate != "max" {
        bail!("xdplive sends as fast as the driver takes frames: use --rate max (or another port kind to pace)");
    }
    if rate.threads != 1 {
        bail!("xdplive runs on one thread: drop --threads");
    }
    if !(rate.duration > 0.0 && rate.duration <= 3600.0) {
        bail!(
            "--duration {}: give more than 0 and at most 3600 seconds",
            rate.duration
        );
    }
    let t = traffic.traffic()?;
    if t.flows != 1 {
        bail!("xdplive repeats one frame: use --flows 1");
    }
    let templates = t.compile().map_err(|e| anyhow!(e))?;
    let [frame] = templates.frames.as_slice() else {
        bail!("xdplive repeats one frame: give one --size, not a mix");
    };
    if let Some(&core) = rate.cores.first() {
        cpu::pin_current(core).map_err(|e| anyhow!(e))?;
    }
    let live = port::xdplive::XdpLive::open(ifname, &frame.bytes()).map_err(|e| anyhow!(e))?;
    let limit = rate.count.unwrap_or(u64::MAX);
    let deadline = Duration::from_secs_f64(rate.duration);
    let start = Instant::now();
    let mut sent = 0u64;
    let mut chunk = FIRST_CHUNK;
    while sent < limit {
        let left = deadline.saturating_sub(start.elapsed()).as_secs_f64();
        if left <= 0.0 {
            break;
        }
        let n = (limit - sent).min(chunk).clamp(1, u64::from(u32::MAX >> 1)) as u32;
        let t0 = Instant::now();
        live.send(n)
            .map_err(|e| anyhow!("xdplive on {ifname}: {e}"))?;
        sent += u64::from(n);
        let pps = f64::from(n) / t0.elapsed().as_secs_f64().max(1e-6);
        let left = deadline.saturating_sub(start.elapsed()).as_secs_f64();
        chunk = (pps * CALL_SECS.min(left)).max(1024.0) as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    let rep = XdpLiveReport {
        port: format!("xdplive:{ifname}"),
        frame: frame.size(),
        tx_packets: sent,
        seconds: secs,
        pps: sent as f64 / secs.max(1e-9),
    };
    let line = format!(
        "sent      {:>12} pkts   {:>7.2} Mpps   {} B frames in {:.3} s on {} (handed to the driver: count at the receiver)\n",
        rep.tx_packets,
        rep.pps / 1e6,
        rep.frame,
        rep.seconds,
        rep.port
    );
    match out.json.as_deref() {
        Some("-") => println!("{}", serde_json::to_string_pretty(&rep)?),
        Some(path) => {
            std::fs::write(path, serde_json::to_string_pretty(&rep)? + "\n")?;
            print!("{line}");
        }
        None => print!("{line}"),
    }
    Ok(())
}
