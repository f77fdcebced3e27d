//! The MAC learning table behind output:NORMAL (a plain L2 learning switch).
//!
//! Maps `(MAC, VLAN id)` to the port it was last seen on. Translation learns from every
//! packet it handles with NORMAL and reads the table to pick the output; it runs only on a
//! cache miss, so the table sits behind a `Mutex`. Capacity is bounded: learning a new MAC
//! in a full table evicts the entry seen longest ago (a linear scan, paid only then).
//! Entries age out after `aging_ms` without being seen; [`MacTable::expire`] removes them.
//! Every change that can alter a forwarding decision (new MAC, moved MAC, expired MAC) is
//! reported to the caller, which bumps the pipeline generation so cached megaflows get
//! revalidated. Note that packets served from a megaflow do not refresh "last seen", so an
//! active MAC can age out; the next miss relearns it.
//!
//! Forwarding (in `translate.rs`): a learned unicast destination goes to its port (never back
//! to the ingress port); unknown, broadcast and multicast destinations flood like FLOOD. MACs
//! are learned per VLAN, but ports carry no VLAN membership yet, so a flood reaches every
//! flood port with the packet's tag unchanged.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// A learned MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacEntry {
    /// Port the MAC was last seen on.
    pub port: u32,
    /// When, in milliseconds.
    pub last_seen_ms: u64,
}

/// The MAC learning table.
#[derive(Debug)]
pub struct MacTable {
    map: Mutex<HashMap<(u64, u16), MacEntry>>,
    aging_ms: u64,
    capacity: usize,
}

/// Whether a 48-bit MAC is multicast or broadcast (the I/G bit of the first octet).
pub fn is_multicast(mac: u64) -> bool {
    mac & (1 << 40) != 0
}

impl MacTable {
    /// An empty table.
    pub fn new(aging_ms: u64, capacity: usize) -> Self {
        MacTable {
            map: Mutex::new(HashMap::new()),
            aging_ms,
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(u64, u16), MacEntry>> {
        // A panic while holding the lock cannot leave the map inconsistent: use it anyway.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `mac` on `vlan` was seen on `port`. Returns whether a forwarding
    /// decision may have changed (new or moved MAC, or an eviction). Multicast sources are
    /// not learned.
    pub fn learn(&self, mac: u64, vlan: u16, port: u32, now_ms: u64) -> bool {
        if is_multicast(mac) {
            return false;
        }
        let mut map = self.lock();
        if let Some(e) = map.get_mut(&(mac, vlan)) {
            let moved = e.port != port || now_ms.saturating_sub(e.last_seen_ms) >= self.aging_ms;
            *e = MacEntry {
                port,
                last_seen_ms: now_ms,
            };
            return moved;
        }
        if map.len() >= self.capacity {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, e)| e.last_seen_ms)
                .map(|(k, _)| *k)
            {
                map.remove(&oldest);
            }
        }
        map.insert(
            (mac, vlan),
            MacEntry {
                port,
                last_seen_ms: now_ms,
            },
        );
        true
    }

    /// The port `mac` on `vlan` was learned on, unless it aged out.
    pub fn lookup(&self, mac: u64, vlan: u16, now_ms: u64) -> Option<u32> {
        let map = self.lock();
        map.get(&(mac, vlan))
            .filter(|e| now_ms.saturating_sub(e.last_seen_ms) < self.aging_ms)
            .map(|e| e.port)
    }

    /// Removes entries not seen for the aging time; returns how many.
    pub fn expire(&self, now_ms: u64) -> usize {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, e| now_ms.saturating_sub(e.last_seen_ms) < self.aging_ms);
        before - map.len()
    }

    /// Forgets every MAC learned on `port` (the port went away); returns how many.
    pub fn flush_port(&self, port: u32) -> usize {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, e| e.port != port);
        before - map.len()
    }

    /// Number of learned MACs.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is learned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of every entry (for `ctl fdb/show`).
    pub fn entries(&self) -> Vec<((u64, u16), MacEntry)> {
        self.lock().iter().map(|(k, v)| (*k, *v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learn_move_age_and_evict() {
        let t = MacTable::new(1000, 2);
        assert!(t.learn(0x0200_0000_0001, 0, 1, 10));
        assert!(
            !t.learn(0x0200_0000_0001, 0, 1, 20),
            "refresh is not a change"
        );
        assert!(t.learn(0x0200_0000_0001, 0, 2, 30), "moved");
        assert_eq!(t.lookup(0x0200_0000_0001, 0, 40), Some(2));
        assert_eq!(t.lookup(0x0200_0000_0001, 5, 40), None, "other VLAN");
        assert!(!t.learn(0x0100_0000_0001, 0, 1, 40), "multicast source");
        assert!(t.learn(0x0200_0000_0002, 0, 3, 50));
        assert!(t.learn(0x0200_0000_0003, 0, 3, 60));
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup(0x0200_0000_0001, 0, 60), None, "oldest evicted");
        assert_eq!(t.lookup(0x0200_0000_0002, 0, 1049), Some(3));
        assert_eq!(t.lookup(0x0200_0000_0002, 0, 1050), None, "aged");
        assert_eq!(t.expire(1055), 1);
        assert_eq!(t.flush_port(3), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn multicast_bit() {
        assert!(is_multicast(0xffff_ffff_ffff));
        assert!(is_multicast(0x0100_5e00_0001));
        assert!(!is_multicast(0x0200_0000_0001));
    }
}
