//! Threads that send and receive for a bounded time.
//!
//! [`run`] starts `threads` workers. Worker *i* owns transmit queue *i* of the tx port (with
//! its own [`Source`], pool cache and [`Pacer`], holding 1/`threads` of the rate) and the
//! receive queues *j* of the rx port with *j* mod `threads` = *i* (with its own
//! [`Analyzer`]). A worker interleaves the two: it sends what its pacer says is due, then
//! polls its receive queues; while nothing is due it keeps polling, and sleeps through gaps
//! longer than [`SLEEP_OVER`]. What a port does not take stays in
//! the batch and is offered again (counted as pushback): the rate falls instead of packets
//! vanishing before the wire.
//!
//! Sending stops at the duration or packet count; receiving goes on for `drain` seconds
//! more, or until every packet sent has arrived. The calling thread samples the workers'
//! counters every `sample` seconds (for progress lines and rate-over-time plots). Every
//! loop is bounded by time: a run always stops by itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use packet::{Batch, Pool};
use port::{Port, RxQueue, TxQueue};

use crate::analyzer::Analyzer;
use crate::rate::{Pacer, SLEEP_OVER};
use crate::report::{buckets, FlowCounts, Latency, RunReport, Sample};
use crate::source::{Source, PER_FLOW_MAX};
use crate::template::Traffic;
use cpu::{cycles, Tsc};

/// Flows listed one by one in reports.
const REPORT_FLOWS: usize = 1024;

/// How to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// What to send.
    pub traffic: Traffic,
    /// Total packets per second over all threads (`None`: as fast as possible).
    pub pps: Option<f64>,
    /// Stop sending after this many seconds.
    pub duration: f64,
    /// Stop sending after this many packets (over all threads).
    pub count: Option<u64>,
    /// Worker threads.
    pub threads: usize,
    /// Most packets per send call.
    pub burst: u32,
    /// Seconds to keep receiving after sending stopped (receive-only: stop after this long
    /// without a packet, once one arrived).
    pub drain: f64,
    /// Seconds between samples of the counters.
    pub sample: f64,
    /// Pin worker *i* to core `cores[i]` when given.
    pub cores: Vec<usize>,
    /// Label of the latency: `one-way` or `round-trip`.
    pub latency_kind: String,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            traffic: Traffic::default(),
            pps: None,
            duration: 5.0,
            count: None,
            threads: 1,
            burst: 32,
            drain: 0.5,
            sample: 0.1,
            cores: Vec::new(),
            latency_kind: "one-way".into(),
        }
    }
}

/// Ports of a run; either may be absent (send only, receive only).
pub struct Ports {
    /// Where to send, and its spec.
    pub tx: Option<(Arc<dyn Port>, String)>,
    /// Where to receive, and its spec.
    pub rx: Option<(Arc<dyn Port>, String)>,
}

/// Counters a worker publishes (relaxed stores once per loop).
#[derive(Debug, Default)]
struct Shared {
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    sending: AtomicBool,
    done: AtomicBool,
}

struct Worker {
    tx: Option<Box<dyn TxQueue>>,
    rx: Vec<Box<dyn RxQueue>>,
    source: Option<Source>,
    pool: Pool,
    pps: Option<f64>,
    count: Option<u64>,
    end_cycles: u64,
    drain_cycles: u64,
    burst: u32,
    analyzer: Analyzer,
    shared: Arc<Shared>,
    all: Arc<Vec<Arc<Shared>>>,
    stop: Arc<AtomicBool>,
    tsc: Tsc,
    core: Option<usize>,
    receive_only: bool,
}

/// What a worker hands back.
struct Outcome {
    analyzer: Analyzer,
    source: Option<Source>,
    tx_packets: u64,
    tx_bytes: u64,
    pushback: u64,
    first_tx: u64,
    last_tx: u64,
    cpu_secs: f64,
}

impl Worker {
    fn run(mut self) -> Outcome {
        if let Some(core) = self.core {
            // Checked against the machine by [`run`]; a refusal leaves the thread unpinned,
            // which costs speed, not correctness.
            let _ = cpu::pin_current(core);
        }
        let mut cache = self.pool.cache();
        let mut txb = Batch::new();
        let mut rxb = Batch::new();
        self.discard_stale(&mut rxb, &mut cache);
        let cpu0 = thread_cpu_secs();
        let start = cycles();
        let mut pacer = Pacer::new(self.pps, self.tsc.hz, start, self.burst);
        let end = start + self.end_cycles;
        let left_max = self.count.unwrap_or(u64::MAX);
        let (mut sent, mut bytes, mut pushback) = (0u64, 0u64, 0u64);
        let mut sending = self.tx.is_some() && left_max > 0;
        self.shared.sending.store(sending, Ordering::Relaxed);
        let mut drain_end = if sending { u64::MAX } else { end };
        let mut last_rx = start;
        let (mut first_tx, mut last_tx) = (0u64, 0u64);
        let sleep_cycles = self.tsc.cycles_in(SLEEP_OVER.as_secs_f64());
        loop {
            let now = cycles();
            let mut busy = false;
            if sending {
                if now >= end || sent >= left_max || self.stop.load(Ordering::Relaxed) {
                    sending = false;
                    self.shared.sending.store(false, Ordering::Relaxed);
                    drain_end = now + self.drain_cycles;
                } else if let (Some(tx), Some(src)) = (self.tx.as_mut(), self.source.as_mut()) {
                    let due = pacer.due(now) as usize;
                    let room = due
                        .saturating_sub(txb.len())
                        .min((left_max - sent) as usize);
                    if room > 0 {
                        let (n, b) = src.fill(&mut cache, &mut txb, room, now);
                        pacer.sent(n as u32);
                        sent += n as u64;
                        bytes += b;
                        if first_tx == 0 {
                            first_tx = now;
                        }
                    }
                    if !txb.is_empty() {
                        let offered = txb.len();
                        let took = tx.send(&mut txb);
                        if took < offered {
                            pushback += 1;
                        }
                        last_tx = now;
                        busy = true;
                    }
                }
            }
            if !sending && !txb.is_empty() {
                // Offer what the port pushed back once more while draining.
                if let Some(tx) = self.tx.as_mut() {
                    tx.send(&mut txb);
                }
            }
            for q in self.rx.iter_mut() {
                if q.recv(&mut rxb) > 0 {
                    let t = cycles();
                    self.analyzer.batch(&rxb, t);
                    rxb.free_into(&mut cache);
                    last_rx = t;
                    busy = true;
                }
            }
            self.shared.tx_packets.store(sent, Ordering::Relaxed);
            self.shared.tx_bytes.store(bytes, Ordering::Relaxed);
            self.shared
                .rx_packets
                .store(self.analyzer.packets, Ordering::Relaxed);
            self.shared
                .rx_bytes
                .store(self.analyzer.bytes, Ordering::Relaxed);
            if !sending {
                if self.receive_only {
                    let idle = self.analyzer.packets > 0
                        && now.saturating_sub(last_rx) > self.drain_cycles;
                    if now >= end || idle || self.stop.load(Ordering::Relaxed) {
                        break;
                    }
                } else if self.rx.is_empty() || now >= drain_end || self.everything_arrived() {
                    break;
                }
            }
            if !busy {
                let wait = if sending { pacer.wait_cycles(now) } else { 0 };
                if wait > sleep_cycles {
                    std::thread::sleep(Duration::from_secs_f64(
                        self.tsc
                            .secs(wait.saturating_sub(sleep_cycles / 2))
                            .min(0.001),
                    ));
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        // Whatever the port never took goes back to the pool (counted as not sent).
        let unsent_bytes: u64 = txb
            .as_slice()
            .iter()
            .map(|p| (p.len() + crate::template::FCS) as u64)
            .sum();
        let unsent = txb.free_into(&mut cache) as u64;
        if let Some(tx) = self.tx.as_mut() {
            tx.flush();
        }
        self.shared
            .tx_packets
            .store(sent - unsent, Ordering::Relaxed);
        self.shared.done.store(true, Ordering::Relaxed);
        Outcome {
            analyzer: self.analyzer,
            source: self.source,
            tx_packets: sent - unsent,
            tx_bytes: bytes - unsent_bytes,
            pushback,
            first_tx,
            last_tx,
            cpu_secs: thread_cpu_secs() - cpu0,
        }
    }

    /// Drops what waits in the receive queues from an earlier run (late packets of a
    /// previous trial would confuse the sequence numbers): until they are empty, at most
    /// 50 ms.
    fn discard_stale(&mut self, rxb: &mut Batch, cache: &mut packet::PoolCache) {
        if self.receive_only {
            return;
        }
        let until = cycles() + self.tsc.cycles_in(0.05);
        for q in self.rx.iter_mut() {
            while q.recv(rxb) > 0 && cycles() < until {
                rxb.free_into(cache);
            }
            rxb.free_into(cache);
        }
    }

    /// Whether every worker stopped sending and everything sent was received (in-process
    /// loops end their drain at once).
    fn everything_arrived(&self) -> bool {
        let mut tx = 0;
        let mut rx = 0;
        for s in self.all.iter() {
            if s.sending.load(Ordering::Relaxed) {
                return false;
            }
            tx += s.tx_packets.load(Ordering::Relaxed);
            rx += s.rx_packets.load(Ordering::Relaxed);
        }
        rx >= tx
    }
}

/// CPU time of the calling thread, seconds (one system call; per run, not per packet).
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Runs traffic on `ports` as `cfg` says; `progress` sees every sample. Errors name the fix.
pub fn run(
    cfg: &RunConfig,
    ports: &Ports,
    pool: &Pool,
    tsc: Tsc,
    progress: &mut dyn FnMut(&Sample),
) -> Result<RunReport, String> {
    if cfg.threads == 0 || cfg.threads > 255 {
        return Err(format!("--threads {}: give 1 to 255", cfg.threads));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(&c) = cfg.cores.iter().find(|&&c| c >= cpus) {
        return Err(format!(
            "--cores {c}: this machine has {cpus} CPUs (0 to {}); see `nproc`",
            cpus - 1
        ));
    }
    if !(cfg.duration > 0.0 && cfg.duration <= 86_400.0) {
        return Err(format!(
            "--duration {}: give more than 0 and at most 86400 seconds",
            cfg.duration
        ));
    }
    if !(1..=packet::BATCH_SIZE as u32).contains(&cfg.burst) {
        return Err(format!(
            "--burst {}: give 1 to {}",
            cfg.burst,
            packet::BATCH_SIZE
        ));
    }
    if let Some(p) = cfg.pps {
        if !(p > 0.0 && p.is_finite()) {
            return Err("the rate must be above 0 packets per second".into());
        }
    }
    let templates = cfg.traffic.compile_for(pool.max_data())?;
    if let Some((tx, spec)) = &ports.tx {
        let caps = tx.capabilities();
        if usize::from(caps.tx_queues) < cfg.threads {
            return Err(format!(
                "{spec} has {} transmit queue(s); use --threads {} or fewer",
                caps.tx_queues, caps.tx_queues
            ));
        }
        let biggest = templates.frames.iter().map(|f| f.len()).max().unwrap_or(0);
        if biggest > caps.max_frame as usize {
            return Err(format!(
                "{spec} takes frames of at most {} bytes; use a smaller --size",
                caps.max_frame
            ));
        }
    }
    if let (None, Some((rx, spec))) = (&ports.tx, &ports.rx) {
        let queues = rx.capabilities().rx_queues.max(1);
        if usize::from(queues) < cfg.threads {
            return Err(format!(
                "{spec} has {queues} receive queue(s); use --threads {queues} or fewer"
            ));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let shared: Arc<Vec<Arc<Shared>>> =
        Arc::new((0..cfg.threads).map(|_| Arc::default()).collect());
    let flows_tracked = cfg.traffic.flows.min(PER_FLOW_MAX);
    let mut workers = Vec::new();
    for i in 0..cfg.threads {
        let tx = match &ports.tx {
            Some((p, spec)) => Some(p.open_tx(i as u16).map_err(|e| format!("{spec}: {e}"))?),
            None => None,
        };
        let mut rx = Vec::new();
        if let Some((p, spec)) = &ports.rx {
            let queues = p.capabilities().rx_queues.max(1);
            for q in (i..usize::from(queues)).step_by(cfg.threads) {
                rx.push(p.open_rx(q as u16).map_err(|e| format!("{spec}: {e}"))?);
            }
        }
        let per_thread = |total: u64| {
            total / cfg.threads as u64 + u64::from((i as u64) < total % cfg.threads as u64)
        };
        workers.push(Worker {
            source: tx
                .as_ref()
                .map(|_| Source::new(&cfg.traffic, &templates, i as u8)),
            tx,
            rx,
            pool: pool.clone(),
            pps: cfg.pps.map(|p| p / cfg.threads as f64),
            count: cfg.count.map(per_thread),
            end_cycles: tsc.cycles_in(cfg.duration),
            drain_cycles: tsc.cycles_in(cfg.drain),
            burst: cfg.burst,
            analyzer: Analyzer::new(flows_tracked, tsc),
            shared: shared[i].clone(),
            all: shared.clone(),
            stop: stop.clone(),
            tsc,
            core: cfg.cores.get(i).copied(),
            receive_only: ports.tx.is_none(),
        });
    }
    let mean = cfg.traffic.sizes.mean();
    let started = Instant::now();
    let handles: Vec<_> = workers
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            std::thread::Builder::new()
                .name(format!("gen{i}"))
                .spawn(move || w.run())
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot start a worker thread: {e}"))?;
    let mut samples = Vec::new();
    let (mut ptx, mut prx, mut ptxb, mut prxb, mut pt) = (0u64, 0u64, 0u64, 0u64, 0.0f64);
    let tick = Duration::from_secs_f64(cfg.sample.clamp(0.01, 10.0));
    // The workers bound themselves; this bound only guards against a wedged port.
    let deadline = cfg.duration + cfg.drain + 30.0;
    while !shared.iter().all(|s| s.done.load(Ordering::Relaxed)) {
        std::thread::sleep(tick);
        let t = started.elapsed().as_secs_f64();
        if t > deadline {
            stop.store(true, Ordering::Relaxed);
        }
        let sum = |f: fn(&Shared) -> &AtomicU64| {
            shared
                .iter()
                .map(|s| f(s).load(Ordering::Relaxed))
                .sum::<u64>()
        };
        let (tx, rx) = (sum(|s| &s.tx_packets), sum(|s| &s.rx_packets));
        let (txb, rxb) = (sum(|s| &s.tx_bytes), sum(|s| &s.rx_bytes));
        let dt = (t - pt).max(1e-9);
        let s = Sample {
            t,
            tx_pps: (tx - ptx.min(tx)) as f64 / dt,
            rx_pps: (rx - prx.min(rx)) as f64 / dt,
            tx_gbps: ((txb - ptxb.min(txb)) as f64 * 8.0 + (tx - ptx.min(tx)) as f64 * 160.0)
                / dt
                / 1e9,
            rx_gbps: ((rxb - prxb.min(rxb)) as f64 * 8.0 + (rx - prx.min(rx)) as f64 * 160.0)
                / dt
                / 1e9,
        };
        (ptx, prx, ptxb, prxb, pt) = (tx, rx, txb, rxb, t);
        progress(&s);
        samples.push(s);
    }
    let mut outcomes = Vec::new();
    for h in handles {
        outcomes.push(
            h.join()
                .map_err(|_| "a worker thread panicked".to_string())?,
        );
    }
    Ok(summarize(
        cfg,
        ports,
        tsc,
        mean,
        outcomes,
        samples,
        started.elapsed().as_secs_f64(),
    ))
}

fn summarize(
    cfg: &RunConfig,
    ports: &Ports,
    tsc: Tsc,
    mean: f64,
    outcomes: Vec<Outcome>,
    samples: Vec<Sample>,
    wall: f64,
) -> RunReport {
    let mut an: Option<Analyzer> = None;
    let (mut txp, mut txb, mut push, mut unprobed) = (0, 0, 0, 0);
    let mut cpu = 0.0;
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut flow_tx: Vec<u64> = Vec::new();
    for o in &outcomes {
        txp += o.tx_packets;
        txb += o.tx_bytes;
        push += o.pushback;
        cpu += o.cpu_secs;
        if o.first_tx != 0 {
            first = first.min(o.first_tx);
            last = last.max(o.last_tx);
        }
        if let Some(src) = &o.source {
            unprobed += src.unprobed;
            if flow_tx.len() < src.flow_tx.len() {
                flow_tx.resize(src.flow_tx.len(), 0);
            }
            for (a, b) in flow_tx.iter_mut().zip(&src.flow_tx) {
                *a += b;
            }
        }
        match an.as_mut() {
            None => an = Some(o.analyzer.clone()),
            Some(a) => a.merge(&o.analyzer),
        }
    }
    let an = an.unwrap_or_else(|| Analyzer::new(0, tsc));
    let streams = an.streams();
    let unique: u64 = streams.iter().map(|s| s.unique).sum();
    let sending = ports.tx.is_some();
    // Frames without a probe are counted by number: they arrive as frames without one.
    let expected = if sending {
        txp.saturating_sub(unprobed)
    } else {
        streams.iter().map(|s| s.highest).sum()
    };
    let lost = expected.saturating_sub(unique) + unprobed.saturating_sub(an.foreign);
    let expected = expected + unprobed;
    let tx_secs = if first < last {
        tsc.secs(last - first)
    } else {
        0.0
    };
    let secs = if sending && tx_secs > 0.0 {
        tx_secs
    } else {
        wall
    };
    let nflows = flow_tx.len().max(an.flow_rx.len()).min(REPORT_FLOWS);
    let flows = (0..nflows)
        .map(|i| FlowCounts {
            flow: i as u32,
            tx: flow_tx.get(i).copied().unwrap_or(0),
            rx: an.flow_rx.get(i).copied().unwrap_or(0),
        })
        .collect();
    let jitter = streams.iter().map(|s| s.jitter_ns).max().unwrap_or(0);
    let gbps = |p: u64, b: u64| (b as f64 * 8.0 + p as f64 * 160.0) / secs.max(1e-9) / 1e9;
    RunReport {
        tx_port: ports.tx.as_ref().map(|p| p.1.clone()).unwrap_or_default(),
        rx_port: ports.rx.as_ref().map(|p| p.1.clone()).unwrap_or_default(),
        traffic: describe(&cfg.traffic, mean),
        target_pps: cfg.pps,
        seconds: secs,
        tx_packets: txp,
        tx_bytes: txb,
        tx_pushback: push,
        tx_without_probe: unprobed,
        rx_packets: an.packets,
        rx_bytes: an.bytes,
        rx_foreign: an.foreign,
        rx_unique: unique,
        duplicates: streams.iter().map(|s| s.duplicates).sum(),
        reordered: streams.iter().map(|s| s.reordered).sum(),
        lost,
        loss_pct: if expected > 0 {
            lost as f64 * 100.0 / expected as f64
        } else {
            0.0
        },
        tx_mpps: txp as f64 / secs.max(1e-9) / 1e6,
        tx_gbps: gbps(txp, txb),
        rx_mpps: an.packets as f64 / secs.max(1e-9) / 1e6,
        rx_gbps: gbps(an.packets, an.bytes),
        latency_kind: cfg.latency_kind.clone(),
        latency: Latency::from_histogram(&an.latency, jitter),
        latency_histogram: buckets(&an.latency),
        streams,
        flows,
        samples,
        tsc_ghz: tsc.hz / 1e9,
        worker_cpu_secs: cpu,
    }
}

/// One line describing the traffic.
pub fn describe(t: &Traffic, mean: f64) -> String {
    let sizes = match t.sizes {
        crate::template::Sizes::Fixed(n) => format!("{n} B"),
        crate::template::Sizes::Imix => format!("IMIX (mean {mean:.1} B)"),
    };
    let vlan = t.vlan.map(|v| format!(", VLAN {v}")).unwrap_or_default();
    let order = if t.random { "random" } else { "sequential" };
    let proto = serde_json::to_value(t.proto)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    let vary = serde_json::to_value(t.vary)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    format!(
        "{proto} {sizes}{vlan}, {} flow(s) by {vary} ({order})",
        t.flows
    )
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
