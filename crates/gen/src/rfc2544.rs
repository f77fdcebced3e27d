//! RFC 2544 benchmarks (section 26): throughput, latency, frame loss rate and back-to-back
//! frames, for each frame size.
//!
//! The device under test is whatever connects the transmit port to the receive port. The
//! searches talk to it through [`Dut`], so they are tested on a model (the unit tests) and run on
//! ports by [`PortDut`].
//!
//! - *Throughput*: a trial at the line rate; if it loses more than the tolerance, a binary
//!   search between 0 and the line rate until the bracket is narrower than the resolution
//!   (or the trial budget is spent). The result is the highest passing rate. A trial also
//!   fails when the generator could not offer the rate (below [`OFFER_SHORTFALL`]): the
//!   result is then marked `generator_limited`.
//! - *Latency*: one trial at the throughput rate, its latency histogram.
//! - *Frame loss rate*: trials at 100 %, 90 %, … of the line rate until two successive
//!   trials lose nothing.
//! - *Back-to-back*: the longest burst at the line rate that arrives whole, by binary search
//!   on the burst length up to `b2b_secs` of line-rate frames.

use std::sync::Arc;

use packet::Pool;
use port::Port;
use serde::Serialize;

use crate::engine::{self, Ports, RunConfig};
use crate::rate::wire_bits;
use crate::report::{Latency, RunReport};
use crate::template::{Sizes, Traffic};
use cpu::Tsc;

/// The frame sizes RFC 2544 names for Ethernet.
pub const STANDARD_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// A trial whose sender offered less than this share of the asked rate fails.
pub const OFFER_SHORTFALL: f64 = 0.98;

/// Options of a benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct Rfc2544Config {
    /// Frame sizes (FCS included).
    pub sizes: Vec<usize>,
    /// Seconds per trial.
    pub trial_secs: f64,
    /// Loss accepted in a passing trial, percent of sent.
    pub loss_tolerance_pct: f64,
    /// Line rate, bits per second.
    pub line_bps: f64,
    /// The search stops when its bracket is narrower than this, percent of line rate.
    pub resolution_pct: f64,
    /// Most trials per search.
    pub max_trials: u32,
    /// Run the latency test.
    pub latency: bool,
    /// Run the frame-loss-rate test.
    pub frame_loss: bool,
    /// Run the back-to-back test.
    pub back_to_back: bool,
    /// Longest burst tried in the back-to-back test, in seconds of line-rate frames.
    pub b2b_secs: f64,
}

impl Default for Rfc2544Config {
    fn default() -> Self {
        Rfc2544Config {
            sizes: STANDARD_SIZES.to_vec(),
            trial_secs: 1.0,
            loss_tolerance_pct: 0.0,
            line_bps: 10e9,
            resolution_pct: 0.5,
            max_trials: 16,
            latency: true,
            frame_loss: true,
            back_to_back: true,
            b2b_secs: 0.1,
        }
    }
}

/// What one trial saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Trial {
    /// Asked rate, packets per second.
    pub rate_pps: f64,
    /// Rate the sender achieved, packets per second.
    pub offered_pps: f64,
    /// Packets sent.
    pub sent: u64,
    /// Distinct packets received.
    pub received: u64,
    /// Loss, percent of sent.
    pub loss_pct: f64,
    /// Within the loss tolerance and offered at the asked rate.
    pub pass: bool,
    /// Latency, when probes arrived.
    pub latency: Option<Latency>,
    /// Latency histogram (upper bound ns, count).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latency_histogram: Vec<(u64, u64)>,
}

/// A device under test: runs one trial.
pub trait Dut {
    /// Sends frames of `size` bytes at `pps` for `secs` seconds, or `count` frames when
    /// given, and reports what came back.
    fn trial(
        &mut self,
        size: usize,
        pps: f64,
        secs: f64,
        count: Option<u64>,
    ) -> Result<Trial, String>;
}

/// A point of the frame-loss-rate curve.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LossPoint {
    /// Offered load, percent of line rate.
    pub load_pct: f64,
    /// Asked rate, packets per second.
    pub rate_pps: f64,
    /// Loss, percent of sent.
    pub loss_pct: f64,
}

/// Results for one frame size.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SizeResult {
    /// Frame size, FCS included.
    pub frame_size: usize,
    /// Line rate at this size, packets per second.
    pub line_pps: f64,
    /// Highest passing rate, packets per second (0 when none passed).
    pub throughput_pps: f64,
    /// The same in million packets per second.
    pub throughput_mpps: f64,
    /// The same in Gbit/s on the wire (frame + 20 bytes).
    pub throughput_gbps: f64,
    /// The same in percent of the line rate.
    pub throughput_pct: f64,
    /// Some trial failed because the sender could not offer the rate (the throughput is
    /// then the generator's, not the device's).
    pub generator_limited: bool,
    /// Throughput search trials, in order.
    pub trials: Vec<Trial>,
    /// The latency trial at the throughput rate.
    pub latency: Option<Trial>,
    /// Frame loss rate curve.
    pub frame_loss: Vec<LossPoint>,
    /// Longest burst that arrived whole, frames.
    pub back_to_back_frames: Option<u64>,
    /// Back-to-back trials: (burst frames, pass).
    pub back_to_back_trials: Vec<(u64, bool)>,
}

/// A whole benchmark.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Rfc2544Report {
    /// Transmit port spec.
    pub tx_port: String,
    /// Receive port spec.
    pub rx_port: String,
    /// Line rate, bits per second.
    pub line_bps: f64,
    /// Seconds per trial.
    pub trial_secs: f64,
    /// Loss tolerance, percent.
    pub loss_tolerance_pct: f64,
    /// One entry per frame size.
    pub results: Vec<SizeResult>,
    /// Measured time-stamp-counter rate, GHz.
    pub tsc_ghz: f64,
}

/// Line rate in packets per second for frames of `size` bytes.
pub fn line_pps(line_bps: f64, size: usize) -> f64 {
    line_bps / wire_bits(size as f64)
}

fn judge(mut t: Trial, tolerance: f64) -> Trial {
    t.loss_pct = if t.sent > 0 {
        t.sent.saturating_sub(t.received) as f64 * 100.0 / t.sent as f64
    } else {
        100.0
    };
    t.pass = t.sent > 0 && t.loss_pct <= tolerance && t.offered_pps >= t.rate_pps * OFFER_SHORTFALL;
    t
}

/// Runs the benchmark for every size; `progress` gets a line per trial.
pub fn run(
    cfg: &Rfc2544Config,
    dut: &mut dyn Dut,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<SizeResult>, String> {
    if !(cfg.trial_secs > 0.0 && cfg.trial_secs <= 600.0) {
        return Err(format!(
            "--trial {}: give more than 0 and at most 600 seconds",
            cfg.trial_secs
        ));
    }
    if !(0.0..100.0).contains(&cfg.loss_tolerance_pct) {
        return Err(format!(
            "--loss-tolerance {}: give 0 to below 100 percent",
            cfg.loss_tolerance_pct
        ));
    }
    if cfg.back_to_back && !(cfg.b2b_secs > 0.0 && cfg.b2b_secs <= 10.0) {
        return Err(format!(
            "--b2b-secs {}: give more than 0 and at most 10 seconds of line-rate frames",
            cfg.b2b_secs
        ));
    }
    if !(cfg.line_bps > 0.0 && cfg.line_bps.is_finite()) {
        return Err("--line-rate: give a positive bit rate, e.g. 10G".into());
    }
    if cfg.sizes.is_empty() {
        return Err("--sizes: give at least one frame size".into());
    }
    let mut out = Vec::new();
    for &size in &cfg.sizes {
        out.push(one_size(cfg, dut, size, progress)?);
    }
    Ok(out)
}

fn one_size(
    cfg: &Rfc2544Config,
    dut: &mut dyn Dut,
    size: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<SizeResult, String> {
    let line = line_pps(cfg.line_bps, size);
    let mut r = SizeResult {
        frame_size: size,
        line_pps: line,
        ..SizeResult::default()
    };
    let trial = |dut: &mut dyn Dut,
                 pps: f64,
                 count: Option<u64>,
                 what: &str,
                 progress: &mut dyn FnMut(&str)|
     -> Result<Trial, String> {
        progress(&format!(
            "{size:>5} B  {what:<12} {:>7.3} Mpps ({:>6.2} %) …",
            pps / 1e6,
            pps * 100.0 / line
        ));
        let t = judge(
            dut.trial(size, pps, cfg.trial_secs, count)?,
            cfg.loss_tolerance_pct,
        );
        progress(&format!(
            "{size:>5} B  {what:<12} {:>7.3} Mpps ({:>6.2} %): sent {} lost {:.4} % offered {:.3} Mpps {}",
            pps / 1e6,
            pps * 100.0 / line,
            t.sent,
            t.loss_pct,
            t.offered_pps / 1e6,
            if t.pass { "pass" } else { "fail" }
        ));
        Ok(t)
    };
    // Throughput.
    let (mut lo, mut hi) = (0.0f64, line);
    let step = line * cfg.resolution_pct / 100.0;
    let mut best: Option<f64> = None;
    let mut rate = line;
    for _ in 0..cfg.max_trials.max(1) {
        let t = trial(dut, rate, None, "throughput", progress)?;
        let short =
            t.offered_pps < t.rate_pps * OFFER_SHORTFALL && t.loss_pct <= cfg.loss_tolerance_pct;
        r.generator_limited |= short;
        let pass = t.pass;
        // Only the latency trial keeps its histogram (the JSON stays small).
        r.trials.push(Trial {
            latency_histogram: Vec::new(),
            ..t
        });
        if pass {
            lo = rate;
            best = Some(rate);
            if rate >= line {
                break;
            }
        } else {
            hi = rate;
        }
        if hi - lo <= step {
            break;
        }
        rate = (lo + hi) / 2.0;
    }
    let tput = best.unwrap_or(0.0);
    r.throughput_pps = tput;
    r.throughput_mpps = tput / 1e6;
    r.throughput_gbps = tput * wire_bits(size as f64) / 1e9;
    r.throughput_pct = tput * 100.0 / line;
    // Latency at the throughput rate.
    if cfg.latency && tput > 0.0 {
        r.latency = Some(trial(dut, tput, None, "latency", progress)?);
    }
    // Frame loss rate: 100 %, 90 %, … until two successive trials lose nothing.
    if cfg.frame_loss {
        let mut clean = 0;
        for step in (1..=10).rev() {
            let pct = f64::from(step) * 10.0;
            let t = trial(dut, line * pct / 100.0, None, "frame loss", progress)?;
            r.frame_loss.push(LossPoint {
                load_pct: pct,
                rate_pps: t.rate_pps,
                loss_pct: t.loss_pct,
            });
            clean = if t.sent > 0 && t.received >= t.sent {
                clean + 1
            } else {
                0
            };
            if clean == 2 {
                break;
            }
        }
    }
    // Back-to-back: the longest whole burst at line rate.
    if cfg.back_to_back {
        let max = ((line * cfg.b2b_secs) as u64).max(1);
        let (mut lo, mut hi) = (0u64, max);
        let mut burst = max;
        for _ in 0..cfg.max_trials.max(1) {
            let t = trial(dut, line, Some(burst), &format!("b2b {burst}"), progress)?;
            let whole =
                t.sent == burst && t.received >= t.sent && t.offered_pps >= line * OFFER_SHORTFALL;
            r.back_to_back_trials.push((burst, whole));
            if whole {
                lo = burst;
                if burst == max {
                    break;
                }
            } else {
                hi = burst;
            }
            if hi - lo <= (max / 100).max(1) {
                break;
            }
            burst = (lo + hi) / 2;
        }
        r.back_to_back_frames = Some(lo);
    }
    Ok(r)
}

/// The device between two ports: trials are [`engine::run`]s.
pub struct PortDut {
    /// The ports.
    pub ports: Ports,
    /// Pool for the sent frames.
    pub pool: Pool,
    /// Clock.
    pub tsc: Tsc,
    /// Base settings (traffic, threads, drain); size, rate and length are set per trial.
    pub base: RunConfig,
    /// The last trial's full report (rate over time, for plots).
    pub last: Option<RunReport>,
}

impl PortDut {
    /// A device between `tx` and `rx`.
    pub fn new(
        tx: (Arc<dyn Port>, String),
        rx: (Arc<dyn Port>, String),
        pool: Pool,
        tsc: Tsc,
        base: RunConfig,
    ) -> PortDut {
        PortDut {
            ports: Ports {
                tx: Some(tx),
                rx: Some(rx),
            },
            pool,
            tsc,
            base,
            last: None,
        }
    }
}

impl Dut for PortDut {
    fn trial(
        &mut self,
        size: usize,
        pps: f64,
        secs: f64,
        count: Option<u64>,
    ) -> Result<Trial, String> {
        let cfg = RunConfig {
            traffic: Traffic {
                sizes: Sizes::Fixed(size),
                ..self.base.traffic.clone()
            },
            pps: Some(pps),
            duration: if count.is_some() { 60.0 } else { secs },
            count,
            ..self.base.clone()
        };
        let rep = engine::run(&cfg, &self.ports, &self.pool, self.tsc, &mut |_| {})?;
        let t = Trial {
            rate_pps: pps,
            offered_pps: rep.tx_mpps * 1e6,
            sent: rep.tx_packets,
            received: rep.tx_packets - rep.lost.min(rep.tx_packets),
            loss_pct: 0.0,
            pass: false,
            latency: rep.latency,
            latency_histogram: rep.latency_histogram.clone(),
        };
        self.last = Some(rep);
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that forwards everything up to `cap` pps and drops the excess, with a
    /// sender that offers at most `gen_max` pps.
    struct Model {
        cap: f64,
        gen_max: f64,
        queue: u64,
        trials: u32,
    }

    impl Dut for Model {
        fn trial(
            &mut self,
            _size: usize,
            pps: f64,
            secs: f64,
            count: Option<u64>,
        ) -> Result<Trial, String> {
            self.trials += 1;
            let offered = pps.min(self.gen_max);
            let sent = count.unwrap_or((offered * secs) as u64);
            let received = if offered <= self.cap {
                sent
            } else if count.is_some() {
                // A burst: the queue absorbs `queue` frames beyond what the device drains.
                let drained = (sent as f64 * self.cap / offered) as u64;
                sent.min(drained + self.queue)
            } else {
                (sent as f64 * self.cap / offered) as u64
            };
            Ok(Trial {
                rate_pps: pps,
                offered_pps: offered,
                sent,
                received,
                ..Trial::default()
            })
        }
    }

    fn cfg() -> Rfc2544Config {
        Rfc2544Config {
            sizes: vec![64],
            ..Rfc2544Config::default()
        }
    }

    #[test]
    fn throughput_search_converges_below_the_device_limit() {
        let line = line_pps(10e9, 64);
        let mut dut = Model {
            cap: 6.0e6,
            gen_max: f64::MAX,
            queue: 1000,
            trials: 0,
        };
        let r = &run(&cfg(), &mut dut, &mut |_| {}).unwrap()[0];
        assert!(r.throughput_pps <= 6.0e6, "{}", r.throughput_pps);
        assert!(
            r.throughput_pps >= 6.0e6 - line * 0.005,
            "{}",
            r.throughput_pps
        );
        assert!(!r.generator_limited);
        assert!(r.trials.len() <= 16);
        assert!(r.latency.as_ref().unwrap().pass);
        // Frame loss: 100 % loses (1 - 6/14.88), … 40 % (5.95 Mpps) and 30 % are clean.
        let fl: Vec<f64> = r.frame_loss.iter().map(|p| p.load_pct).collect();
        assert_eq!(fl, vec![100.0, 90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0]);
        assert!((r.frame_loss[0].loss_pct - (1.0 - 6.0e6 / line) * 100.0).abs() < 0.01);
        // Back-to-back: bursts of N frames lose N(1 - cap/line) - queue; whole while that
        // is ≤ 0: N ≤ queue / (1 - cap/line) ≈ 1673.
        let b2b = r.back_to_back_frames.unwrap();
        let want = 1000.0 / (1.0 - 6.0e6 / line);
        assert!(
            (b2b as f64) <= want && b2b as f64 >= want - line * 0.1 / 100.0 - 1.0,
            "{b2b} vs {want}"
        );
    }

    #[test]
    fn a_device_at_line_rate_passes_the_first_trial() {
        let mut dut = Model {
            cap: f64::MAX,
            gen_max: f64::MAX,
            queue: 0,
            trials: 0,
        };
        let r = &run(
            &Rfc2544Config {
                latency: false,
                frame_loss: false,
                back_to_back: false,
                ..cfg()
            },
            &mut dut,
            &mut |_| {},
        )
        .unwrap()[0];
        assert_eq!(r.trials.len(), 1);
        assert_eq!(r.throughput_pct, 100.0);
        assert!((r.throughput_gbps - 10.0).abs() < 1e-9);
    }

    #[test]
    fn a_slow_sender_is_named() {
        let mut dut = Model {
            cap: f64::MAX,
            gen_max: 3e6,
            queue: 0,
            trials: 0,
        };
        let r = &run(
            &Rfc2544Config {
                latency: false,
                frame_loss: false,
                back_to_back: false,
                ..cfg()
            },
            &mut dut,
            &mut |_| {},
        )
        .unwrap()[0];
        assert!(r.generator_limited);
        assert!(r.throughput_pps <= 3e6 / OFFER_SHORTFALL && r.throughput_pps > 2.8e6);
    }

    #[test]
    fn loss_tolerance_lets_small_loss_pass() {
        let line = line_pps(10e9, 64);
        let mut dut = Model {
            cap: line * 0.995,
            gen_max: f64::MAX,
            queue: 0,
            trials: 0,
        };
        let c = Rfc2544Config {
            loss_tolerance_pct: 1.0,
            latency: false,
            frame_loss: false,
            back_to_back: false,
            ..cfg()
        };
        let r = &run(&c, &mut dut, &mut |_| {}).unwrap()[0];
        assert_eq!(r.throughput_pct, 100.0);
    }

    #[test]
    fn bad_options_name_the_fix() {
        let mut dut = Model {
            cap: 1.0,
            gen_max: 1.0,
            queue: 0,
            trials: 0,
        };
        let e = run(
            &Rfc2544Config {
                trial_secs: 0.0,
                ..cfg()
            },
            &mut dut,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.contains("--trial"));
        let e = run(
            &Rfc2544Config {
                loss_tolerance_pct: 100.0,
                ..cfg()
            },
            &mut dut,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.contains("--loss-tolerance"));
        let e = run(
            &Rfc2544Config {
                b2b_secs: -1.0,
                ..cfg()
            },
            &mut dut,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.contains("--b2b-secs"));
        assert_eq!(dut.trials, 0);
    }
}
