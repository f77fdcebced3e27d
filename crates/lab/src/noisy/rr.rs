//! The victim's request/response load: one TCP connection from host A to host B, each
//! transaction a 64-byte request answered by a 64-byte response (netperf's TCP_RR in
//! miniature), back to back for a window; transactions per second and the latency of each.
//!
//! Both ends are threads of this process moved into the hosts' namespaces
//! ([`crate::sys::host::enter_netns`]) and pinned to the hosts' core, so the load needs no
//! program installed and its figures are exact.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::sys::host::enter_netns;

/// Bytes of a request and of a response.
const MESSAGE: usize = 64;
/// The server's TCP port.
const PORT: u16 = 7777;

/// What a window of transactions gave.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Rr {
    /// Transactions per second.
    pub tps: f64,
    /// Median transaction time, microseconds.
    pub median_us: f64,
    /// 99th percentile transaction time, microseconds.
    pub p99_us: f64,
}

/// Runs transactions from namespace `ns_client` to `server_ip` in `ns_server` for `window`,
/// both ends on `core`.
pub fn run(
    ns_client: &str,
    ns_server: &str,
    server_ip: &str,
    core: usize,
    window: Duration,
) -> Result<Rr> {
    let addr: SocketAddr = format!("{server_ip}:{PORT}").parse()?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let ns = ns_server.to_string();
    let server = std::thread::spawn(move || -> Result<()> {
        enter_netns(&ns)?;
        let _ = cpu::pin_current(core);
        let l = TcpListener::bind(addr).with_context(|| format!("binding {addr}"))?;
        let _ = ready_tx.send(());
        let (mut s, _) = l.accept()?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; MESSAGE];
        // Echo until the client closes.
        while s.read_exact(&mut buf).is_ok() {
            s.write_all(&buf)?;
        }
        Ok(())
    });
    if ready_rx.recv_timeout(Duration::from_secs(5)).is_err() {
        return match server.join() {
            Ok(Err(e)) => Err(e),
            _ => bail!("the request/response server did not start"),
        };
    }
    let ns = ns_client.to_string();
    let client = std::thread::spawn(move || -> Result<Vec<f64>> {
        enter_netns(&ns)?;
        let _ = cpu::pin_current(core);
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
            .with_context(|| format!("connecting to {addr}"))?;
        s.set_nodelay(true)?;
        // A transaction that takes longer than this is lost to the load: stop there.
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        let mut buf = [0x5au8; MESSAGE];
        let mut times = Vec::with_capacity(1 << 20);
        let end = Instant::now() + window;
        loop {
            let t0 = Instant::now();
            if t0 >= end {
                break;
            }
            s.write_all(&buf)?;
            s.read_exact(&mut buf).context("waiting for a response")?;
            times.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        Ok(times)
    });
    let times = client
        .join()
        .map_err(|_| anyhow::anyhow!("the request/response client panicked"))??;
    let _ = server.join();
    Ok(summarize(times, window))
}

/// Transactions per second and percentiles of `times` (microseconds) over `window`.
pub fn summarize(mut times: Vec<f64>, window: Duration) -> Rr {
    if times.is_empty() {
        return Rr::default();
    }
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((p * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
    Rr {
        tps: times.len() as f64 / window.as_secs_f64(),
        median_us: pct(0.5),
        p99_us: pct(0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_are_summarized() {
        let times: Vec<f64> = (1..=100).map(f64::from).collect();
        let r = summarize(times, Duration::from_secs(2));
        assert_eq!(r.tps, 50.0);
        assert_eq!(r.median_us, 50.0);
        assert_eq!(r.p99_us, 99.0);
        assert_eq!(summarize(Vec::new(), Duration::from_secs(1)).tps, 0.0);
    }
}
