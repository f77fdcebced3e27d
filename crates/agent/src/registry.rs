//! The controller connections of one bridge: roles, outgoing queues, counters.
//!
//! Sessions register here once their HELLO exchange is done and are removed by a guard when
//! they end, however they end. Asynchronous messages are fanned out from here without
//! waiting: each connection has a bounded queue and a packet-in token bucket.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::bridge::{AsyncKind, Bridge};
use crate::rate_limit::{RateLimit, TokenBucket};
use crate::role::{Role, RoleError, RoleReply, RoleTable};
use crate::target::Target;
use crate::ConnId;

/// Counters of one controller connection.
#[derive(Debug, Default)]
pub struct ConnCounters {
    /// Messages received (after the HELLO).
    pub rx_messages: AtomicU64,
    /// Asynchronous messages queued for sending.
    pub async_queued: AtomicU64,
    /// Packet-ins dropped by the rate limit.
    pub rate_limited: AtomicU64,
    /// Asynchronous messages dropped because the queue was full (backpressure).
    pub queue_full: AtomicU64,
    /// ECHO_REQUESTs sent as inactivity probes.
    pub probes: AtomicU64,
}

/// A snapshot of one controller connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnInfo {
    /// Its id.
    pub id: ConnId,
    /// The target it came from (active) or through (passive).
    pub target: Target,
    /// The peer's address.
    pub peer: String,
    /// Its role.
    pub role: Role,
    /// Messages received.
    pub rx_messages: u64,
    /// Asynchronous messages queued.
    pub async_queued: u64,
    /// Packet-ins dropped by the rate limit.
    pub rate_limited: u64,
    /// Asynchronous messages dropped on a full queue.
    pub queue_full: u64,
    /// Inactivity probes sent.
    pub probes: u64,
    /// Asynchronous messages its queue can take now.
    pub queue_room: usize,
}

/// Where one asynchronous message went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Controllers it was queued for.
    pub queued: u32,
    /// Controllers whose role does not receive this kind.
    pub ineligible: u32,
    /// Controllers whose packet-in budget was spent.
    pub rate_limited: u32,
    /// Controllers whose queue was full.
    pub queue_full: u32,
}

struct Entry {
    target: Target,
    /// Counts as a controller for the fail mode (see [`Registry::take_charge`]).
    in_charge: bool,
    peer: String,
    tx: mpsc::Sender<Arc<[u8]>>,
    bucket: TokenBucket,
    counters: Arc<ConnCounters>,
}

#[derive(Default)]
struct State {
    roles: RoleTable,
    conns: BTreeMap<ConnId, Entry>,
}

impl State {
    /// Connections that count as controllers for the fail mode.
    fn in_charge(&self) -> usize {
        self.conns.values().filter(|e| e.in_charge).count()
    }
}

/// State shared by every task of one bridge's agent.
pub(crate) struct Registry {
    pub(crate) bridge: Arc<dyn Bridge>,
    state: Mutex<State>,
    connected: watch::Sender<usize>,
    next_id: AtomicU64,
    packet_in_limit: RateLimit,
    queue_len: usize,
}

impl Registry {
    pub(crate) fn new(
        bridge: Arc<dyn Bridge>,
        packet_in_limit: RateLimit,
        queue_len: usize,
    ) -> (Arc<Registry>, watch::Receiver<usize>) {
        let (connected, rx) = watch::channel(0);
        let registry = Registry {
            bridge,
            state: Mutex::default(),
            connected,
            next_id: AtomicU64::new(1),
            packet_in_limit,
            queue_len: queue_len.max(1),
        };
        (Arc::new(registry), rx)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not take every controller down with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh connection id.
    pub(crate) fn next_id(&self) -> ConnId {
        ConnId(self.next_id.fetch_add(1, Relaxed))
    }

    /// Registers a negotiated connection; the guard removes it when dropped.
    pub(crate) fn register(
        self: &Arc<Self>,
        id: ConnId,
        target: &Target,
        peer: &str,
    ) -> (Registration, mpsc::Receiver<Arc<[u8]>>) {
        let (tx, rx) = mpsc::channel(self.queue_len);
        let counters = Arc::new(ConnCounters::default());
        // An active target is a controller the operator configured; a connection accepted
        // on a listener is a service connection (a dump, a monitor, a stray HELLO) until it
        // takes charge.
        let in_charge = !target.is_passive();
        let entry = Entry {
            target: target.clone(),
            in_charge,
            peer: peer.to_string(),
            tx,
            bucket: TokenBucket::new(self.packet_in_limit, Instant::now()),
            counters: counters.clone(),
        };
        let count = {
            let mut st = self.lock();
            st.roles.add(id);
            st.conns.insert(id, entry);
            st.in_charge()
        };
        if in_charge {
            self.connected.send_replace(count);
            self.bridge.on_connect(id);
        }
        (
            Registration {
                registry: self.clone(),
                id,
                counters,
            },
            rx,
        )
    }

    /// Connection `id` (accepted on a listener) acts as a controller: it changes the
    /// switch's state or asks for a role. From now on it counts for the fail mode — in
    /// standalone the fail-open flow goes before its message is handled, and comes back when
    /// no controller in charge is left (after the fail-open delay). Does nothing for a
    /// connection already in charge. The rule is Open vSwitch's: connections to a listener
    /// are service connections that never end fail-open unless they take charge.
    pub(crate) fn take_charge(&self, id: ConnId) {
        let count = {
            let mut st = self.lock();
            match st.conns.get_mut(&id) {
                Some(e) if !e.in_charge => e.in_charge = true,
                _ => return,
            }
            st.in_charge()
        };
        self.connected.send_replace(count);
        self.bridge.on_connect(id);
    }

    /// The role of `id` (EQUAL if it is not registered yet).
    pub(crate) fn role(&self, id: ConnId) -> Role {
        self.lock().roles.role(id).unwrap_or(Role::Equal)
    }

    /// Applies a role request from `id`.
    pub(crate) fn role_request(
        &self,
        id: ConnId,
        role: u32,
        generation_id: u64,
    ) -> Result<RoleReply, RoleError> {
        self.lock().roles.request(id, role, generation_id)
    }

    /// Queues `msg` for every eligible controller; never waits.
    pub(crate) fn send_async(&self, kind: AsyncKind, msg: &[u8]) -> Delivery {
        let mut d = Delivery::default();
        let mut shared: Option<Arc<[u8]>> = None;
        let now = Instant::now();
        let mut st = self.lock();
        let State { roles, conns } = &mut *st;
        for (id, e) in conns.iter_mut() {
            if !kind.goes_to(roles.role(*id).unwrap_or(Role::Equal)) {
                d.ineligible += 1;
                continue;
            }
            if kind == AsyncKind::PacketIn && !e.bucket.try_take(now) {
                d.rate_limited += 1;
                e.counters.rate_limited.fetch_add(1, Relaxed);
                continue;
            }
            let bytes = shared.get_or_insert_with(|| Arc::from(msg)).clone();
            match e.tx.try_send(bytes) {
                Ok(()) => {
                    d.queued += 1;
                    e.counters.async_queued.fetch_add(1, Relaxed);
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    d.queue_full += 1;
                    e.counters.queue_full.fetch_add(1, Relaxed);
                }
                // The session is ending; its guard removes the entry.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        d
    }

    /// Queues `msg` for connection `id` alone (no role check, no rate limit): for replies the
    /// bridge produces after [`crate::Bridge::handle`] returned. All zero when `id` is gone.
    pub(crate) fn send_to(&self, id: ConnId, msg: &[u8]) -> Delivery {
        let mut d = Delivery::default();
        if let Some(e) = self.lock().conns.get(&id) {
            match e.tx.try_send(Arc::from(msg)) {
                Ok(()) => {
                    d.queued = 1;
                    e.counters.async_queued.fetch_add(1, Relaxed);
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    d.queue_full = 1;
                    e.counters.queue_full.fetch_add(1, Relaxed);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        d
    }

    /// A snapshot of every registered connection, by id.
    pub(crate) fn connections(&self) -> Vec<ConnInfo> {
        let st = self.lock();
        st.conns
            .iter()
            .map(|(id, e)| ConnInfo {
                id: *id,
                target: e.target.clone(),
                peer: e.peer.clone(),
                role: st.roles.role(*id).unwrap_or(Role::Equal),
                rx_messages: e.counters.rx_messages.load(Relaxed),
                async_queued: e.counters.async_queued.load(Relaxed),
                rate_limited: e.counters.rate_limited.load(Relaxed),
                queue_full: e.counters.queue_full.load(Relaxed),
                probes: e.counters.probes.load(Relaxed),
                queue_room: e.tx.capacity(),
            })
            .collect()
    }
}

/// Keeps a connection registered while alive.
pub(crate) struct Registration {
    registry: Arc<Registry>,
    id: ConnId,
    pub(crate) counters: Arc<ConnCounters>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let (count, was) = {
            let mut st = self.registry.lock();
            st.roles.remove(self.id);
            let was = st.conns.remove(&self.id).is_some_and(|e| e.in_charge);
            (st.in_charge(), was)
        };
        if was {
            self.registry.connected.send_replace(count);
        }
        self.registry.bridge.on_disconnect(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{bridge, message};
    use openflow::msg_type as mt;

    #[tokio::test]
    async fn a_listener_s_connection_counts_for_the_fail_mode_only_once_it_takes_charge() {
        let (reg, connected) = Registry::new(bridge(), RateLimit::default(), 2);
        let passive = Target::PassiveUnix("p".into());
        let active = Target::Unix("a".into());
        // A dump or a monitor on the listener: a service connection.
        let (dump, _rx1) = reg.register(ConnId(1), &passive, "dump");
        assert_eq!(*connected.borrow(), 0);
        // A configured (active) controller counts at once.
        let (ctl, _rx2) = reg.register(ConnId(2), &active, "ctl");
        assert_eq!(*connected.borrow(), 1);
        // The listener's connection installs a flow: now it counts, once.
        reg.take_charge(ConnId(1));
        reg.take_charge(ConnId(1));
        assert_eq!(*connected.borrow(), 2);
        drop(ctl);
        assert_eq!(*connected.borrow(), 1);
        drop(dump);
        assert_eq!(*connected.borrow(), 0);
        // A service connection that ends changes nothing.
        let (ctl, _rx3) = reg.register(ConnId(3), &active, "ctl");
        let (stray, _rx4) = reg.register(ConnId(4), &passive, "stray");
        drop(stray);
        assert_eq!(*connected.borrow(), 1);
        drop(ctl);
    }

    #[tokio::test]
    async fn full_queue_drops_and_counts() {
        let (reg, connected) = Registry::new(bridge(), RateLimit::default(), 2);
        let target = Target::Unix("t".into());
        let (guard, mut rx) = reg.register(ConnId(1), &target, "peer");
        assert_eq!(*connected.borrow(), 1);
        let ps = message(mt::PORT_STATUS, 0, &[0; 72]);
        let d: Vec<Delivery> = (0..3)
            .map(|_| reg.send_async(AsyncKind::PortStatus, &ps))
            .collect();
        assert_eq!(
            d[1],
            Delivery {
                queued: 1,
                ..Delivery::default()
            }
        );
        assert_eq!(
            d[2],
            Delivery {
                queue_full: 1,
                ..Delivery::default()
            }
        );
        let info = &reg.connections()[0];
        assert_eq!((info.async_queued, info.queue_full), (2, 1));
        assert_eq!(&*rx.recv().await.unwrap(), &ps[..]);
        // Room again after the session took one.
        assert_eq!(reg.send_async(AsyncKind::PortStatus, &ps).queued, 1);
        assert_eq!(
            reg.send_to(ConnId(1), &ps).queue_full,
            1,
            "send_to shares the bound"
        );
        assert_eq!(
            reg.send_to(ConnId(9), &ps),
            Delivery::default(),
            "unknown connection"
        );
        drop(guard);
        assert_eq!(*connected.borrow(), 0);
        assert!(reg.connections().is_empty());
        assert_eq!(
            reg.send_async(AsyncKind::PortStatus, &ps),
            Delivery::default()
        );
    }
}
