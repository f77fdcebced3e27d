//! Settings of one bridge's controller connections.

use std::time::Duration;

use crate::admission::ConnLimits;
use crate::connectivity::FailMode;
use crate::rate_limit::RateLimit;
use crate::target::Target;
use crate::tls::TlsConfig;

/// Reconnection delays of active targets: `min`, doubling after each failure, up to `max`;
/// back to `min` after a session that completed its HELLO exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// First delay.
    pub min: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    /// 1 s doubling to 8 s, like Open vSwitch.
    fn default() -> Backoff {
        Backoff {
            min: Duration::from_secs(1),
            max: Duration::from_secs(8),
        }
    }
}

impl Backoff {
    /// The delay after `current`.
    pub fn next(&self, current: Duration) -> Duration {
        (current * 2).clamp(self.min, self.max.max(self.min))
    }
}

/// Everything the agent of one bridge needs to know.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Controllers to connect to and addresses to listen on.
    pub targets: Vec<Target>,
    /// TLS identity for `ssl:` and `pssl:` targets.
    pub tls: Option<TlsConfig>,
    /// After this long without a message from a controller, send it an ECHO_REQUEST; after as
    /// long again with nothing, disconnect. Also bounds the HELLO wait, TLS handshakes,
    /// writes to a controller that does not read, and a message once its first byte came
    /// (a partial message trickled byte by byte does not keep a session alive).
    pub probe_interval: Duration,
    /// Reconnection delays of active targets.
    pub backoff: Backoff,
    /// Packet-in budget per controller.
    pub packet_in_limit: RateLimit,
    /// Asynchronous messages waiting for one controller at most; more are dropped and counted.
    pub queue_len: usize,
    /// What the bridge does without a controller (reported to it, see `Connectivity`).
    pub fail_mode: FailMode,
    /// How long without any controller before [`crate::Connectivity::Lost`] is reported.
    pub fail_open_delay: Duration,
    /// Connection caps of each passive target ([`crate::admission`]).
    pub limits: ConnLimits,
}

impl Default for AgentConfig {
    /// No targets, probe every 5 s, backoff 1–8 s, 1000 packet-ins/s burst 100, queue 100,
    /// standalone, fail-open after 15 s, 256 connections per listener and 64 per peer.
    fn default() -> AgentConfig {
        AgentConfig {
            targets: Vec::new(),
            tls: None,
            probe_interval: Duration::from_secs(5),
            backoff: Backoff::default(),
            packet_in_limit: RateLimit::default(),
            queue_len: 100,
            fail_mode: FailMode::default(),
            fail_open_delay: Duration::from_secs(15),
            limits: ConnLimits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_max() {
        let b = Backoff::default();
        let mut d = b.min;
        let mut seen = vec![d];
        for _ in 0..5 {
            d = b.next(d);
            seen.push(d);
        }
        let secs: Vec<u64> = seen.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 8, 8]);
    }
}
