//! Tunables of the fast path, with the defaults that make it usable.

use crate::idle::IdleConfig;

/// Datapath configuration (same for every poll-mode thread).
#[derive(Debug, Clone, PartialEq)]
pub struct DpConfig {
    /// Exact-match cache slots per thread (rounded up to a power of two).
    pub emc_entries: usize,
    /// While the exact-match cache thrashes, one insert in this many is done (1 = always).
    pub emc_insert_inv_prob: u32,
    /// The exact-match cache is probed and filled only while the classifier has more
    /// subtables (masks) than this and its lookups probe more than 3 of them per hit
    /// (`emc_gate.rs`; 0 = always). When a classifier lookup probes one or two subtables it
    /// costs about what an EMC probe does, so the EMC would only add a probe in front of it
    /// (measured: 10,000 flows over two masks, 146 → 117 cycles a packet without it).
    pub emc_min_subtables: usize,
    /// Most megaflows per thread; at the bound each new megaflow evicts the least recently
    /// used one (the arena reserves this many 384-byte slots up front).
    pub max_megaflows: usize,
    /// Most translations per rx batch.
    pub max_upcalls_per_batch: u32,
    /// Translations per rx batch that are always allowed, even while shedding.
    pub min_upcalls_per_batch: u32,
    /// Share of a thread's busy cycles that upcalls may take while cache hits are being
    /// served; above it, further misses are shed (dropped and counted).
    pub upcall_share: f64,
    /// A megaflow not hit for this long is removed (its counters flushed first).
    pub megaflow_idle_ms: u64,
    /// How often megaflow counters are added to the flow entries, subtables re-ranked and
    /// idle megaflows swept.
    pub maintenance_ms: u64,
    /// Capacity of the packet-in queue shared by all threads.
    pub packet_in_queue: usize,
    /// Packet-ins each rx queue may queue per second (0: no bound of its own; the packet-in
    /// queue and the controllers' rate limits still apply). With a bound, a port that
    /// floods the controller with new flows spends its own allowance, not its neighbours'
    /// share of the queue; what is over it is counted as `drop_packet_in_budget`.
    pub packet_in_port_rate: u32,
    /// Packet-ins an rx queue may queue at once after a quiet period (with
    /// `packet_in_port_rate`).
    pub packet_in_port_burst: u32,
    /// How threads idle when their queues are empty (busy-poll, then sleep).
    pub idle: IdleConfig,
    /// After a published flow change, keep the megaflows it cannot affect
    /// ([`crate::revalidate`]); false: every change empties every cache (for comparison).
    pub revalidate: bool,
    /// Receive offload for ports that take super-packets (virtio-net headers: AF_PACKET with
    /// `vnet_hdr`, TAP, vhost-user): consecutive TCP segments of one flow in a batch bound
    /// for such a port are joined into one super-packet ([`port::coalesce`]), as Linux's
    /// GRO joins them before a bridge hands them to a VM. False: they go one by one.
    pub gro: bool,
}

impl Default for DpConfig {
    fn default() -> Self {
        DpConfig {
            emc_entries: 8192,
            emc_insert_inv_prob: 100,
            emc_min_subtables: 2,
            max_megaflows: 200_000,
            max_upcalls_per_batch: 32,
            min_upcalls_per_batch: 1,
            upcall_share: 0.5,
            megaflow_idle_ms: 10_000,
            maintenance_ms: 100,
            packet_in_queue: 1024,
            packet_in_port_rate: 0,
            packet_in_port_burst: 100,
            idle: IdleConfig::default(),
            revalidate: true,
            gro: true,
        }
    }
}

impl DpConfig {
    /// Checks the values; the error names the field and the fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.emc_entries == 0 || self.emc_entries > 1 << 24 {
            return Err(format!(
                "emc_entries is {}; use 1 ..= 16777216 (default 8192)",
                self.emc_entries
            ));
        }
        if self.max_megaflows == 0 {
            return Err("max_megaflows is 0; use at least 1 (default 200000)".into());
        }
        if self.max_upcalls_per_batch == 0 {
            return Err("max_upcalls_per_batch is 0; use at least 1 (default 32)".into());
        }
        if self.min_upcalls_per_batch > self.max_upcalls_per_batch {
            return Err(format!(
                "min_upcalls_per_batch ({}) exceeds max_upcalls_per_batch ({}); lower it",
                self.min_upcalls_per_batch, self.max_upcalls_per_batch
            ));
        }
        if !(self.upcall_share > 0.0 && self.upcall_share <= 1.0) {
            return Err(format!(
                "upcall_share is {}; use a fraction in (0, 1] (default 0.5)",
                self.upcall_share
            ));
        }
        if self.packet_in_queue == 0 {
            return Err("packet_in_queue is 0; use at least 1 (default 1024)".into());
        }
        if self.packet_in_port_rate != 0 && self.packet_in_port_burst == 0 {
            return Err(
                "packet_in_port_burst is 0 with a packet_in_port_rate; use at least 1 (default 100)"
                    .into(),
            );
        }
        self.idle.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        assert_eq!(DpConfig::default().validate(), Ok(()));
        let bad = DpConfig {
            upcall_share: 0.0,
            ..DpConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("upcall_share"));
        let bad = DpConfig {
            min_upcalls_per_batch: 40,
            ..DpConfig::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .contains("min_upcalls_per_batch"));
    }
}
