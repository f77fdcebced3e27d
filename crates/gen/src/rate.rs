//! Rates and pacing.
//!
//! [`RateSpec`] is what the user asks for (`max`, `100%`, `14.88Mpps`, `5G`); [`Pacer`] holds
//! a packet rate with the time-stamp counter: packets become due as time passes (credit =
//! elapsed cycles × packets per cycle − packets sent), the sender sends what is due in
//! batches of at most `burst`, and while nothing is due it busy-waits (polling its receive
//! queues) or, for gaps longer than [`SLEEP_OVER`], sleeps. No sleep or clock call per packet.

use std::time::Duration;

/// Bytes a frame occupies on the wire beside its own: preamble, start delimiter and the
/// inter-frame gap.
pub const WIRE_OVERHEAD: usize = 20;
/// Gaps longer than this are slept through instead of spun.
pub const SLEEP_OVER: Duration = Duration::from_micros(50);
/// Credit kept when the sender falls behind (it then catches up at full speed): 50 ms.
const MAX_BACKLOG_SECS: f64 = 0.050;

/// Wire bits of one frame of `size` bytes (FCS included).
pub fn wire_bits(size: f64) -> f64 {
    (size + WIRE_OVERHEAD as f64) * 8.0
}

/// Parses a bit rate such as `10G`, `10Gbps`, `2.5G`, `100M`, `1000000` (bits per second).
pub fn parse_bps(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches("bps").trim_end_matches("bit/s");
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'G' | 'g')) => (&t[..i], 1e9),
        Some((i, 'M' | 'm')) => (&t[..i], 1e6),
        Some((i, 'K' | 'k')) => (&t[..i], 1e3),
        _ => (t, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v * mult),
        _ => Err(format!("bit rate '{s}': give e.g. 10G, 25G, 100M")),
    }
}

/// A rate as asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateSpec {
    /// As fast as the sender goes.
    Max,
    /// Packets per second.
    Pps(f64),
    /// Bits per second on the wire (frame + 20 bytes).
    Bps(f64),
    /// Percent of the line rate.
    Percent(f64),
}

impl RateSpec {
    /// Parses `max`, `line` (= `100%`), `N%`, `Npps` / `Nkpps` / `NMpps`, or a bit rate
    /// (`10G`, `500M`).
    pub fn parse(s: &str) -> Result<RateSpec, String> {
        let t = s.trim();
        let bad = || {
            format!("rate '{s}': give max, line, a percentage of line rate (50%), packets per second (1Mpps, 500kpps, 1000pps) or bits per second (5G)")
        };
        if t == "max" {
            return Ok(RateSpec::Max);
        }
        if t == "line" {
            return Ok(RateSpec::Percent(100.0));
        }
        if let Some(p) = t.strip_suffix('%') {
            return match p.parse::<f64>() {
                Ok(v) if v > 0.0 && v <= 100.0 => Ok(RateSpec::Percent(v)),
                _ => Err(bad()),
            };
        }
        if let Some(p) = t.strip_suffix("pps") {
            let (num, mult) = if let Some(n) = p.strip_suffix('M') {
                (n, 1e6)
            } else if let Some(n) = p.strip_suffix('k') {
                (n, 1e3)
            } else {
                (p, 1.0)
            };
            return match num.parse::<f64>() {
                Ok(v) if v > 0.0 && v.is_finite() => Ok(RateSpec::Pps(v * mult)),
                _ => Err(bad()),
            };
        }
        parse_bps(t).map(RateSpec::Bps).map_err(|_| bad())
    }

    /// Packets per second for frames of `mean_size` bytes on a line of `line_bps`; `None`
    /// for [`RateSpec::Max`].
    pub fn pps(self, line_bps: f64, mean_size: f64) -> Option<f64> {
        match self {
            RateSpec::Max => None,
            RateSpec::Pps(p) => Some(p),
            RateSpec::Bps(b) => Some(b / wire_bits(mean_size)),
            RateSpec::Percent(p) => Some(line_bps * p / 100.0 / wire_bits(mean_size)),
        }
    }
}

/// Holds a packet rate; one per sending thread.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Packets per counter cycle; `None`: no limit.
    per_cycle: Option<f64>,
    start: u64,
    sent: u64,
    burst: u32,
    backlog: f64,
}

impl Pacer {
    /// A pacer for `pps` packets per second (`None`: unlimited) on a counter of `hz`,
    /// starting at counter value `start`, releasing at most `burst` packets at once.
    pub fn new(pps: Option<f64>, hz: f64, start: u64, burst: u32) -> Pacer {
        let per_cycle = pps.map(|p| p / hz);
        Pacer {
            per_cycle,
            start,
            sent: 0,
            burst: burst.max(1),
            backlog: pps.map_or(0.0, |p| (p * MAX_BACKLOG_SECS).max(f64::from(burst))),
        }
    }

    /// Packets that may go now (at most the burst).
    #[inline]
    pub fn due(&mut self, now: u64) -> u32 {
        let Some(pc) = self.per_cycle else {
            return self.burst;
        };
        let mut credit = now.saturating_sub(self.start) as f64 * pc - self.sent as f64;
        if credit > self.backlog {
            // Fell far behind (descheduled): forget the excess instead of bursting it.
            let skip = ((credit - self.backlog) / pc) as u64;
            self.start += skip;
            credit -= skip as f64 * pc;
        }
        if credit < 1.0 {
            return 0;
        }
        (credit as u64).min(u64::from(self.burst)) as u32
    }

    /// Records that `n` packets went.
    #[inline]
    pub fn sent(&mut self, n: u32) {
        self.sent += u64::from(n);
    }

    /// Cycles until the next packet is due (0 when one is due or there is no limit).
    #[inline]
    pub fn wait_cycles(&self, now: u64) -> u64 {
        match self.per_cycle {
            None => 0,
            Some(pc) => {
                let at = self.start as f64 + (self.sent + 1) as f64 / pc;
                (at - now as f64).max(0.0) as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(RateSpec::parse("max"), Ok(RateSpec::Max));
        assert_eq!(RateSpec::parse("line"), Ok(RateSpec::Percent(100.0)));
        assert_eq!(RateSpec::parse("50%"), Ok(RateSpec::Percent(50.0)));
        assert_eq!(RateSpec::parse("1.5Mpps"), Ok(RateSpec::Pps(1.5e6)));
        assert_eq!(RateSpec::parse("500kpps"), Ok(RateSpec::Pps(5e5)));
        assert_eq!(RateSpec::parse("10pps"), Ok(RateSpec::Pps(10.0)));
        assert_eq!(RateSpec::parse("5G"), Ok(RateSpec::Bps(5e9)));
        assert_eq!(RateSpec::parse("100Mbps"), Ok(RateSpec::Bps(1e8)));
        for bad in ["", "fast", "0%", "150%", "-1pps", "xG"] {
            assert!(
                RateSpec::parse(bad).unwrap_err().contains("give max"),
                "{bad}"
            );
        }
    }

    #[test]
    fn line_rate_of_64_byte_frames_is_14_88_mpps() {
        let pps = RateSpec::Percent(100.0).pps(10e9, 64.0).unwrap();
        assert!((pps - 14_880_952.4).abs() < 1.0);
        assert_eq!(RateSpec::Max.pps(10e9, 64.0), None);
    }

    #[test]
    fn pacer_releases_the_rate_in_bursts() {
        // 1 Mpps on a 1 GHz counter: one packet per 1000 cycles.
        let mut p = Pacer::new(Some(1e6), 1e9, 1_000, 32);
        assert_eq!(p.due(1_000), 0);
        assert_eq!(p.wait_cycles(1_000), 1_000);
        assert_eq!(p.due(2_000), 1);
        assert_eq!(p.due(11_500), 10);
        p.sent(10);
        assert_eq!(p.due(11_500), 0);
        assert_eq!(p.due(1_000_000), 32);
        let mut total = 10;
        let mut now = 11_500;
        while now < 1_001_000 {
            let n = p.due(now);
            p.sent(n);
            total += n;
            now += 700;
        }
        // 1 ms at 1 Mpps: 1000 packets (±1 for the edges).
        assert!((999..=1001).contains(&total), "{total}");
    }

    #[test]
    fn unlimited_pacer_always_releases_a_burst() {
        let mut p = Pacer::new(None, 1e9, 0, 16);
        assert_eq!(p.due(0), 16);
        assert_eq!(p.wait_cycles(5), 0);
    }

    #[test]
    fn a_long_stall_does_not_turn_into_a_flood() {
        let mut p = Pacer::new(Some(1e6), 1e9, 0, 32);
        // One second late: the backlog is capped at 50 ms = 50 000 packets.
        let mut sent = 0;
        let now = 1_000_000_000;
        loop {
            let n = p.due(now);
            if n == 0 {
                break;
            }
            p.sent(n);
            sent += n;
        }
        assert!(sent <= 50_033, "{sent}");
    }
}
