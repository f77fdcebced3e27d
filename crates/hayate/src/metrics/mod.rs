//! `hayate run --metrics ADDR`: the switch's counters for Prometheus, over HTTP on
//! `ADDR/metrics` in the text exposition format.
//!
//! | file | job |
//! |---|---|
//! | `sample.rs` | one scrape's reading of a bridge, from the sources the `hayate ctl` dumps read |
//! | `encode.rs` | samples → exposition text (`prometheus-client`), the metric families |
//! | `http.rs` | the HTTP/1.1 GET handler on the agent's tokio runtime |
//!
//! A scrape reads what the switch already counts (the poll threads' per-thread counters, the
//! ports' and queues' counters, the tables, the agent's connections); nothing is added to the
//! fast path, and without `--metrics` nothing of this runs.

mod encode;
mod http;
mod sample;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

pub use encode::{render, CONTENT_TYPE};
pub use sample::{BridgeSource, Sources};

/// Parses `--metrics ADDR` and listens on it (before the bridges start, so a bad address or
/// one in use stops `hayate run` at once with a clear error).
pub fn bind(text: &str) -> Result<TcpListener> {
    let addr: SocketAddr = text.parse().map_err(|_| {
        anyhow!(
            "--metrics {text:?}: not an IP address and port (e.g. 127.0.0.1:9464, or [::1]:9464)"
        )
    })?;
    let listener =
        TcpListener::bind(addr).map_err(|e| anyhow!("--metrics {addr}: cannot listen: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| anyhow!("--metrics {addr}: {e}"))?;
    Ok(listener)
}

/// The metrics server, running. Dropping it stops it.
pub struct Server {
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `sources` on `listener` (from [`bind`]) on `rt`; each scrape reads the bridges the
/// list holds then.
pub fn serve(rt: &Runtime, listener: TcpListener, sources: Sources) -> Result<Server> {
    let addr = listener.local_addr()?;
    let _in_rt = rt.enter();
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| anyhow!("--metrics {addr}: {e}"))?;
    let scrape: http::Scraper = Arc::new(move || {
        let now = sources.lock().unwrap_or_else(|e| e.into_inner()).clone();
        render(now.iter().map(BridgeSource::read).collect())
    });
    eprintln!("hayate: metrics on http://{addr}{}", http::PATH);
    Ok(Server {
        task: rt.spawn(http::serve(listener, scrape)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_address_is_named_in_the_error() {
        let e = bind("localhost").unwrap_err().to_string();
        assert!(
            e.contains("--metrics \"localhost\": not an IP address and port"),
            "{e}"
        );
        let taken = bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let e = bind(&addr).unwrap_err().to_string();
        assert!(
            e.contains(&format!("--metrics {addr}: cannot listen")),
            "{e}"
        );
    }
}
