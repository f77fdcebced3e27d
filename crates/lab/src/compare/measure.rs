//! What `hayate bench compare` measures on a running switch: packet rate A→B by frame size,
//! iperf3 TCP throughput, and ping latency idle and under load.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::generator::Generator;
use super::topo::{in_ns, Topo, IP_B};

/// Packet rate at one frame size.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Rate {
    /// Frame size in bytes, FCS included.
    pub frame: usize,
    /// Packets per second host B received.
    pub pps: f64,
    /// Packets per second host A sent (what the generator offered).
    pub offered_pps: f64,
    /// CPU the switch's process used during the window, percent of one core (none for the
    /// Linux bridge, which runs in the kernel's softirq context).
    pub switch_cpu_pct: Option<f64>,
}

/// CPU time (user + system) process `pid` has used, in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// Percent of one core process `pid` uses over `window`.
pub fn cpu_share(pid: u32, window: Duration) -> Option<f64> {
    let (c0, w0) = (cpu_seconds(pid)?, Instant::now());
    std::thread::sleep(window);
    let c1 = cpu_seconds(pid)?;
    Some(100.0 * (c1 - c0) / w0.elapsed().as_secs_f64())
}

/// How packet rates are measured on one topology.
#[derive(Debug, Clone, Copy)]
pub struct RateTest<'a> {
    /// The topology.
    pub topo: &'a Topo,
    /// The generator.
    pub gen: Generator,
    /// Sending before the window, seconds.
    pub warmup: f64,
    /// Measured window, seconds.
    pub window: f64,
    /// The generator's core.
    pub core: usize,
    /// A core where a generator's idle helper thread may sleep (the switch's).
    pub other_core: usize,
    /// Folder for generator configs.
    pub dir: &'a Path,
    /// The switch's process, to report its CPU use.
    pub switch_pid: Option<u32>,
}

/// Sends `frame`-byte frames for `warmup` + `window` seconds and counts what B received
/// during the window.
pub fn rate(t: &RateTest<'_>, frame: usize) -> Result<Rate> {
    let RateTest {
        topo,
        gen,
        warmup,
        window,
        core,
        other_core,
        dir,
        switch_pid,
    } = *t;
    let secs = warmup + window + 2.0;
    // XDP live frames need a NAPI receiver: GRO on the switch's A-side veth for this test
    // only (GRO would also merge the TCP tests' segments).
    let napi = gen == Generator::HayateXdpLive;
    if napi {
        topo.switch_gro_a(true)?;
    }
    let mut child = gen.start(&topo.ns_a, &topo.a0, frame, core, other_core, secs, dir)?;
    let result = (|| {
        std::thread::sleep(Duration::from_secs_f64(warmup));
        if let Some(status) = child.try_wait()? {
            bail!("the generator {} exited early ({status})", gen.name());
        }
        let c0 = switch_pid.and_then(cpu_seconds);
        let (r0, t0, w0) = (topo.rx_b()?, topo.tx_a()?, Instant::now());
        std::thread::sleep(Duration::from_secs_f64(window));
        let (r1, t1, w) = (topo.rx_b()?, topo.tx_a()?, w0.elapsed().as_secs_f64());
        let c1 = switch_pid.and_then(cpu_seconds);
        Ok(Rate {
            frame,
            pps: (r1 - r0) as f64 / w,
            offered_pps: (t1 - t0) as f64 / w,
            switch_cpu_pct: c0.zip(c1).map(|(a, b)| 100.0 * (b - a) / w),
        })
    })();
    // SIGINT reaches the generator: `ip netns exec` exec-s it in place.
    crate::sys::proc::terminate(&mut child, libc::SIGINT);
    // trafgen forks a sender per CPU that outlives its parent: nothing else runs in host A
    // now, so stop whatever is left there before the next test.
    Topo::kill_all(&topo.ns_a);
    std::thread::sleep(Duration::from_millis(300));
    if napi {
        topo.switch_gro_a(false)?;
    }
    result
}

/// Round-trip times of a ping run, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    /// Fastest reply.
    pub min_us: f64,
    /// Median reply.
    pub median_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Share of pings without a reply, in percent.
    pub loss_pct: f64,
}

/// Sends `count` pings from A to B, one every millisecond, and summarizes the replies.
pub fn ping(topo: &Topo, count: usize, core: usize) -> Result<Latency> {
    let out = in_ns(
        &topo.ns_a,
        &[
            "taskset",
            "-c",
            &core.to_string(),
            "ping",
            "-n",
            "-c",
            &count.to_string(),
            "-i",
            "0.001",
            "-W",
            "1",
            "-w",
            &(count / 500 + 10).to_string(),
            IP_B,
        ],
    )
    .stdin(Stdio::null())
    .output()
    .context("running ping")?;
    Ok(summarize(&String::from_utf8_lossy(&out.stdout), count))
}

/// Latency summary of ping's output for `count` requests.
pub fn summarize(text: &str, count: usize) -> Latency {
    let mut t: Vec<f64> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("time="))
        .filter_map(|v| v.parse::<f64>().ok())
        .map(|ms| ms * 1000.0)
        .collect();
    if t.is_empty() {
        return Latency {
            loss_pct: 100.0,
            ..Latency::default()
        };
    }
    t.sort_by(f64::total_cmp);
    let pct = |p: f64| t[((p * t.len() as f64).ceil() as usize).clamp(1, t.len()) - 1];
    Latency {
        min_us: t[0],
        median_us: pct(0.5),
        p99_us: pct(0.99),
        loss_pct: 100.0 * count.saturating_sub(t.len()) as f64 / count.max(1) as f64,
    }
}

/// Whether A reaches B (a few pings, for up to `wait`).
pub fn reachable(topo: &Topo, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        let ok = in_ns(&topo.ns_a, &["ping", "-n", "-c", "1", "-W", "1", IP_B])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// One iperf3 TCP stream A→B for `seconds`, with pings under that load.
#[derive(Debug, Clone, Serialize)]
pub struct Tcp {
    /// Received throughput, Gbit/s.
    pub gbps: f64,
    /// Ping while the stream runs.
    pub ping_load: Latency,
    /// Why the stream did not complete, if it did not (iperf3's own words, or a stall).
    pub error: Option<String>,
}

/// Runs one iperf3 TCP stream A→B for `seconds` and pings `pings` times under that load.
pub fn tcp(topo: &Topo, seconds: u64, pings: usize, core: usize, dir: &Path) -> Result<Tcp> {
    let core_s = core.to_string();
    let mut server = in_ns(
        &topo.ns_b,
        &["taskset", "-c", &core_s, "iperf3", "-s", "-1", "-B", IP_B],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .context("starting iperf3 (apt-get install iperf3)")?;
    std::thread::sleep(Duration::from_millis(500));
    let json = dir.join("iperf3.json");
    let client = in_ns(
        &topo.ns_a,
        &[
            "taskset",
            "-c",
            &core_s,
            "iperf3",
            "-c",
            IP_B,
            "-t",
            &seconds.to_string(),
            "--connect-timeout",
            "3000",
            "-J",
        ],
    )
    .stdin(Stdio::null())
    .stdout(std::fs::File::create(&json)?)
    .stderr(Stdio::null())
    .spawn()
    .context("starting iperf3")?;
    let mut client = KillOnDrop(client);
    std::thread::sleep(Duration::from_secs(2.min(seconds)));
    let ping_load = ping(topo, pings, core)?;
    let deadline = Instant::now() + Duration::from_secs(seconds + 10);
    let mut stalled = false;
    while client.0.try_wait()?.is_none() {
        if Instant::now() > deadline {
            // A switch that mangles the stream (e.g. drops large segments) stalls TCP:
            // that is a result, not a reason to stop the comparison.
            stalled = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(client);
    let _ = server.kill();
    let _ = server.wait();
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let error = if stalled {
        Some(format!(
            "the stream stalled: iperf3 did not end within {} s",
            seconds + 10
        ))
    } else {
        v["error"].as_str().map(|e| format!("iperf3: {e}"))
    };
    Ok(Tcp {
        gbps: bps / 1e9,
        ping_load,
        error,
    })
}

/// Kills a child process when dropped (so an error path leaves nothing running).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_of_this_process_is_read() {
        let me = std::process::id();
        let t0 = cpu_seconds(me).expect("/proc/self/stat");
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(100) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(cpu_seconds(me).unwrap() >= t0);
    }

    #[test]
    fn ping_output_is_summarized() {
        let text = "64 bytes from 10.77.0.2: icmp_seq=1 ttl=64 time=0.050 ms\n\
                    64 bytes from 10.77.0.2: icmp_seq=2 ttl=64 time=0.030 ms\n\
                    64 bytes from 10.77.0.2: icmp_seq=3 ttl=64 time=1.20 ms\n";
        let l = summarize(text, 4);
        assert_eq!(l.min_us, 30.0);
        assert_eq!(l.median_us, 50.0);
        assert_eq!(l.p99_us, 1200.0);
        assert_eq!(l.loss_pct, 25.0);
        assert_eq!(summarize("", 10).loss_pct, 100.0);
    }
}
