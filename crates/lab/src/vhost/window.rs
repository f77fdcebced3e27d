//! One measurement on a running setup: wait until packets flow, warm up, read every counter
//! source, wait the window, read again; rates per source over its own time stamps.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::counters::{rates, Reading};
use super::Ctx;
use crate::sys::guard::nap;

/// What one measurement gives.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Packets per second of every counter read (`switch.p3.tx`, `vms.p2.rx`, ...).
    pub rates: BTreeMap<String, f64>,
    /// The key of the delivered rate (the figure).
    pub delivered: String,
    /// The key of what entered the path (phy-in, or VM A's transmit), if known.
    pub offered: Option<String>,
    /// Share of the switch core's cycles spent on packets (OVS's PMD reports it).
    pub busy_share: Option<f64>,
    /// Seconds between the window's two readings of the delivered counter.
    pub window_s: f64,
}

/// How long packets may take to start flowing (Open vSwitch's DPDK start, vhost-user
/// connects).
const FLOW_WAIT: Duration = Duration::from_secs(60);

fn value(rs: &[Reading], key: &str) -> Option<(Instant, u64)> {
    rs.iter()
        .find_map(|r| r.values.get(key).map(|v| (r.at, *v)))
}

/// Waits until `delivered` grows by ≥ 1000 packets between two reads, warms up, calls
/// `at_start` (e.g. clear the PMD's statistics), and measures the window. `alive` fails when
/// a process of the setup has exited.
pub fn measure(
    ctx: &Ctx,
    read: &mut dyn FnMut() -> Result<Vec<Reading>>,
    delivered: &str,
    alive: &mut dyn FnMut() -> Result<()>,
    at_start: &mut dyn FnMut() -> Result<()>,
) -> Result<Measured> {
    let end = Instant::now() + FLOW_WAIT;
    let mut last: Option<u64> = None;
    loop {
        alive()?;
        let rs = read()?;
        let Some((_, v)) = value(&rs, delivered) else {
            bail!("no counter {delivered} in what was read");
        };
        if last.is_some_and(|l| v >= l + 1000) {
            break;
        }
        last = Some(v);
        if Instant::now() >= end {
            bail!("no packets reached {delivered} within {FLOW_WAIT:?}");
        }
        nap(Duration::from_millis(500))?;
    }
    nap(Duration::from_secs_f64(ctx.warmup))?;
    alive()?;
    at_start()?;
    let a = read()?;
    nap(Duration::from_secs_f64(ctx.seconds))?;
    let b = read()?;
    alive()?;
    let window_s = match (value(&a, delivered), value(&b, delivered)) {
        (Some((ta, _)), Some((tb, _))) => tb.saturating_duration_since(ta).as_secs_f64(),
        _ => 0.0,
    };
    Ok(Measured {
        rates: rates(&a, &b),
        delivered: delivered.into(),
        offered: None,
        busy_share: None,
        window_s,
    })
}
