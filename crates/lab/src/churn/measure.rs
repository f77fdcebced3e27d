//! The measurement on a running switch, all over OpenFlow connections to its management
//! socket: the out-port's transmit counter read at each end of a window (port statistics),
//! warm-up until that rate is steady, windows without and with churn (a paced thread that
//! sends each flow-mod with a barrier and waits for the reply before the next, on a
//! connection of its own), and the effect test (a flow-mod that moves running traffic to
//! port 3: time to its barrier reply, and to the first port-statistics reply that shows
//! packets on port 3, polled as fast as the switch answers on a third connection).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::openflow::{Command, Conn};
use super::rules::{churn_mod, Flow};
use crate::report::median;
use crate::sys::guard::nap;

/// The out-port whose transmit rate is the figure.
pub const OUT: u32 = 2;
/// The second out-port the effect test moves traffic to.
pub const ALT: u32 = 3;

/// A reading of the out-port's transmit counter, stamped at the middle of the request.
fn read(c: &mut Conn, port: u32) -> Result<(Instant, u64)> {
    let t0 = Instant::now();
    let n = c.port(port)?.tx;
    Ok((t0 + t0.elapsed() / 2, n))
}

fn rate(a: (Instant, u64), b: (Instant, u64)) -> f64 {
    let dt = b.0.saturating_duration_since(a.0).as_secs_f64();
    if dt > 0.0 {
        b.1.saturating_sub(a.1) as f64 / dt
    } else {
        0.0
    }
}

/// Whether the last three one-second rates agree within 3 %.
pub fn steady(rates: &[f64]) -> bool {
    let Some(last) = rates.len().checked_sub(3).map(|i| &rates[i..]) else {
        return false;
    };
    let (lo, hi) = last
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    hi > 0.0 && (hi - lo) / hi < 0.03
}

/// Waits until packets leave the out-port (at most a minute), then warms up for at least
/// `min` and until the rate is [`steady`] and `settled` says so, at most `max`; returns the
/// seconds it took. `alive` fails when the switch has exited.
pub fn warm(
    c: &mut Conn,
    min: Duration,
    max: Duration,
    alive: &mut dyn FnMut() -> Result<()>,
    settled: &mut dyn FnMut() -> Result<bool>,
) -> Result<f64> {
    let start = Instant::now();
    let first = read(c, OUT)?;
    loop {
        alive()?;
        nap(Duration::from_millis(500))?;
        if read(c, OUT)?.1 > first.1 + 1000 {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            bail!("no packets left port {OUT} within a minute");
        }
    }
    let mut rates = Vec::new();
    let mut last = read(c, OUT)?;
    loop {
        nap(Duration::from_secs(1))?;
        alive()?;
        let now = read(c, OUT)?;
        rates.push(rate(last, now));
        last = now;
        let el = start.elapsed();
        if el >= max || (el >= min && steady(&rates) && settled()?) {
            return Ok(el.as_secs_f64());
        }
    }
}

/// The out-port's rate over `secs`, packets per second.
pub fn window(c: &mut Conn, secs: f64) -> Result<f64> {
    let a = read(c, OUT)?;
    nap(Duration::from_secs_f64(secs))?;
    Ok(rate(a, read(c, OUT)?))
}

/// What a churning thread shares with the measurement.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    done: AtomicU64,
}

/// A thread that applies flow-mods at a set rate, each followed by a barrier whose reply it
/// waits for before the next; stopped and joined by [`Churner::stop`].
pub struct Churner {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl Churner {
    /// Starts churning on a connection of its own to `mgmt`: `per_sec` flow-mods per second
    /// from [`churn_mod`] (with `matching_every`, over `flows` sources). When the switch
    /// answers slower than that, the rate is what it allows (no catching up on more than
    /// 100 ms of the schedule).
    pub fn start(mgmt: &Path, per_sec: u32, matching_every: u32, flows: u32) -> Result<Churner> {
        let mut conn = Conn::connect(mgmt)?;
        let shared = Arc::new(Shared::default());
        let sh = shared.clone();
        let thread =
            std::thread::Builder::new()
                .name("churn".into())
                .spawn(move || -> Result<()> {
                    let period = Duration::from_secs_f64(1.0 / per_sec.max(1) as f64);
                    let mut due = Instant::now();
                    let mut i = 0u64;
                    while !sh.stop.load(Ordering::Relaxed) {
                        let (flow, cmd) = churn_mod(i, matching_every, flows);
                        conn.flow_mod(&flow, cmd)?;
                        i += 1;
                        sh.done.store(i, Ordering::Relaxed);
                        due += period;
                        let now = Instant::now();
                        if due > now {
                            std::thread::sleep(due - now);
                        } else if now - due > Duration::from_millis(100) {
                            due = now;
                        }
                    }
                    Ok(())
                })?;
        Ok(Churner {
            shared,
            thread: Some(thread),
        })
    }

    /// Flow-mods applied (barrier answered) so far.
    pub fn done(&self) -> u64 {
        self.shared.done.load(Ordering::Relaxed)
    }

    /// Stops the thread; fails with its error when it failed.
    pub fn stop(mut self) -> Result<()> {
        self.shared.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(anyhow!("the churn thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for Churner {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One window with churn.
#[derive(Debug, Clone, Copy)]
pub struct Churned {
    /// The out-port's rate, packets per second.
    pub pps: f64,
    /// Flow-mods applied per second over the window.
    pub mods_per_s: f64,
}

/// The out-port's rate over `secs` while a [`Churner`] works (started half a second before
/// the window, so the window holds only steady churn).
pub fn churn_window(
    c: &mut Conn,
    mgmt: &Path,
    per_sec: u32,
    matching_every: u32,
    flows: u32,
    secs: f64,
) -> Result<Churned> {
    let ch = Churner::start(mgmt, per_sec, matching_every, flows)?;
    nap(Duration::from_millis(500))?;
    let (m0, a) = (ch.done(), read(c, OUT)?);
    nap(Duration::from_secs_f64(secs))?;
    let (m1, b) = (ch.done(), read(c, OUT)?);
    ch.stop()?;
    let dt = b.0.saturating_duration_since(a.0).as_secs_f64();
    Ok(Churned {
        pps: rate(a, b),
        mods_per_s: if dt > 0.0 { (m1 - m0) as f64 / dt } else { 0.0 },
    })
}

/// The effect test's figures over its trials, milliseconds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Effect {
    /// From sending the flow-mod to its barrier's reply, per trial.
    pub barrier_ms: Vec<f64>,
    /// From sending the flow-mod to the first reply that showed packets on port 3, per trial.
    pub effect_ms: Vec<f64>,
    /// Median round trip of one port-statistics poll; with the 100 µs between polls, the
    /// effect's resolution.
    pub poll_ms: Option<f64>,
}

/// The pause between two polls of the effect test.
const POLL_GAP: Duration = Duration::from_micros(100);

/// How long a trial waits for the change to show before it counts as failed.
const EFFECT_WAIT: Duration = Duration::from_secs(10);

/// `trials` times: add `rule` (one of [`super::rules::redirects`]: traffic to port 3) with a
/// barrier and time its reply and its first packets on port 3; then delete it and wait until
/// port 3 is quiet again.
pub fn effect(
    mgmt: &Path,
    rule: &Flow,
    trials: usize,
    alive: &mut dyn FnMut() -> Result<()>,
) -> Result<Effect> {
    let mut ctl = Conn::connect(mgmt)?;
    let mut out = Effect::default();
    let mut polls = Vec::new();
    let path: PathBuf = mgmt.to_path_buf();
    for _ in 0..trials {
        alive()?;
        let mut poll = Conn::connect(&path)?;
        let base = poll.port(ALT)?.tx;
        let t0 = Instant::now();
        let poller = std::thread::spawn(move || -> Result<(Duration, Vec<Duration>)> {
            let mut rtts = Vec::new();
            loop {
                let p0 = Instant::now();
                let tx = poll.port(ALT)?.tx;
                rtts.push(p0.elapsed());
                if tx > base {
                    return Ok((t0.elapsed(), rtts));
                }
                if t0.elapsed() > EFFECT_WAIT {
                    bail!("no packet reached port {ALT} within {EFFECT_WAIT:?} of the flow-mod");
                }
                // A breath between polls: the switch's control thread shares this core.
                std::thread::sleep(POLL_GAP);
            }
        });
        ctl.send_flow_mod(rule, Command::Add)?;
        ctl.wait_barrier()?;
        let barrier = t0.elapsed();
        let (seen, rtts) = poller
            .join()
            .map_err(|_| anyhow!("the poll thread panicked"))??;
        out.barrier_ms.push(barrier.as_secs_f64() * 1e3);
        out.effect_ms.push(seen.as_secs_f64() * 1e3);
        polls.extend(rtts.iter().map(|d| d.as_secs_f64() * 1e3));
        ctl.flow_mod(rule, Command::DeleteStrict)?;
        quiet(&mut ctl)?;
    }
    out.poll_ms = median(polls);
    Ok(out)
}

/// Waits until port 3's counter stands still over 200 ms (the redirect is gone everywhere).
fn quiet(c: &mut Conn) -> Result<()> {
    let end = Instant::now() + EFFECT_WAIT;
    let mut last = c.port(ALT)?.tx;
    loop {
        nap(Duration::from_millis(200))?;
        let now = c.port(ALT)?.tx;
        if now == last {
            return Ok(());
        }
        if Instant::now() > end {
            bail!("port {ALT} still sends {EFFECT_WAIT:?} after the redirect was deleted");
        }
        last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_wants_three_rates_within_three_percent() {
        assert!(!steady(&[10.0, 10.0]));
        assert!(steady(&[1.0, 10.0, 10.1, 10.2]));
        assert!(!steady(&[10.0, 10.0, 9.0]));
        assert!(!steady(&[0.0, 0.0, 0.0]));
        let t = Instant::now();
        assert_eq!(rate((t, 100), (t + Duration::from_secs(2), 300)), 100.0);
        assert_eq!(rate((t, 100), (t, 300)), 0.0);
    }
}
