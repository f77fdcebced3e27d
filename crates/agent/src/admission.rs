//! Who may stay connected to a listener, so that local clients cannot lock out the control
//! channels (issue 23, item 2).
//!
//! - Caps: at most [`ConnLimits::per_listener`] connections on one listener and
//!   [`ConnLimits::per_peer`] from one peer address (a TCP peer's IP; every client of a Unix
//!   socket is one peer). Listeners that draw on the shared budget (controller listeners,
//!   not the management socket) also stay, all together, below the process's descriptor
//!   limit minus a reserve ([`shared_budget`]), so the management socket, configured
//!   controllers (active targets) and ports always find descriptors.
//! - At a cap a new connection is not refused while an older one can make room. Among
//!   service connections (those that never took charge: a dump, a monitor, a stray HELLO)
//!   the one closed is, in this order: the oldest that has not finished its HELLO (or TLS
//!   handshake); the one holding a partial message whose last whole message is oldest (a
//!   client that trickles bytes); the one idle for longest; and only then one that is being
//!   sent a long reply (an operator's dump of a big table), idle for longest. Idleness alone
//!   cannot rank a dump against a flood from the same address: a flood's connections have
//!   just sent their HELLO, so they look fresher than a dump between two of its pieces.
//!   A connection that took charge (a controller that changed state or asked for a role)
//!   is never closed for a newcomer; when only such connections hold the cap, the newcomer
//!   is refused.
//! - Activity is a whole message, not a byte: a session records the time of each message it
//!   handles and of each piece of a long reply it sends ([`Activity::touch`]), so trickling
//!   bytes does not make a connection look busy (and the session itself closes a connection
//!   whose partial message does not complete within the probe interval), while an operator's
//!   dump of a big table, read piece by piece, is not taken for idle (a flood from the same
//!   address closed such dumps before).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Connection caps of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Most connections on one listener.
    pub per_listener: usize,
    /// Most connections from one peer address on one listener.
    pub per_peer: usize,
    /// Whether the listener's connections count against the process-wide budget (see
    /// [`shared_budget`]); the management socket's do not: they live on the reserve.
    pub shared: bool,
}

impl Default for ConnLimits {
    /// 256 per listener, 64 per peer address, on the shared budget.
    fn default() -> ConnLimits {
        ConnLimits {
            per_listener: 256,
            per_peer: 64,
            shared: true,
        }
    }
}

/// What one connection has done, written by its session and read by its listener.
#[derive(Debug)]
pub(crate) struct Activity {
    opened_ms: u64,
    last_ms: AtomicU64,
    negotiated: AtomicBool,
    in_charge: AtomicBool,
    partial: AtomicBool,
    replying: AtomicBool,
}

/// Milliseconds since the first use of this clock (shared by every connection).
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl Activity {
    pub(crate) fn new() -> Activity {
        let now = now_ms();
        Activity {
            opened_ms: now,
            last_ms: AtomicU64::new(now),
            negotiated: AtomicBool::new(false),
            in_charge: AtomicBool::new(false),
            partial: AtomicBool::new(false),
            replying: AtomicBool::new(false),
        }
    }

    /// Whether the session holds part of a message (its first bytes came, not all of them).
    pub(crate) fn partial(&self, yes: bool) {
        self.partial.store(yes, Relaxed);
    }

    /// Whether the session is sending a reply in pieces.
    pub(crate) fn replying(&self, yes: bool) {
        self.replying.store(yes, Relaxed);
    }

    /// The session handled a whole message, or sent a piece of a long reply.
    pub(crate) fn touch(&self) {
        self.last_ms.store(now_ms(), Relaxed);
    }

    /// A fresh record, as a listener makes one (for tests of sessions).
    #[cfg(test)]
    pub(crate) fn for_test() -> Activity {
        Activity::new()
    }

    /// When the session last touched it (ms on this module's clock).
    #[cfg(test)]
    pub(crate) fn last_ms(&self) -> u64 {
        self.last_ms.load(Relaxed)
    }

    /// (partial message held, being sent a long reply), as the session last set them.
    #[cfg(test)]
    pub(crate) fn flags(&self) -> (bool, bool) {
        (self.partial.load(Relaxed), self.replying.load(Relaxed))
    }

    /// Sets the time of the last touch (for tests of sessions).
    #[cfg(test)]
    pub(crate) fn set_last_ms(&self, ms: u64) {
        self.last_ms.store(ms, Relaxed);
    }

    /// The HELLO exchange completed.
    pub(crate) fn negotiated(&self) {
        self.negotiated.store(true, Relaxed);
    }

    /// The connection took charge of the bridge (a controller, not a service connection).
    pub(crate) fn took_charge(&self) {
        self.in_charge.store(true, Relaxed);
    }
}

/// The number of descriptors the shared listeners may hold together: the soft
/// `RLIMIT_NOFILE` (read once, at the first accept: raise it before, as `hayate run` does)
/// minus a reserve of a quarter of it (at least 64, at most half).
pub fn shared_budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
            usize::try_from(r.rlim_cur)
                .unwrap_or(usize::MAX)
                .min(1 << 24)
        } else {
            1024
        };
        soft - (soft / 4).max(64).min(soft / 2)
    })
}

/// Connections of every shared listener of the process.
static SHARED_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// One connection's place in the shared budget, given back on drop.
#[derive(Debug)]
pub(crate) struct SharedSlot(());

impl Drop for SharedSlot {
    fn drop(&mut self) {
        SHARED_IN_USE.fetch_sub(1, Relaxed);
    }
}

/// A connection as its listener tracks it.
struct Entry {
    task: tokio::task::Id,
    peer: String,
    activity: Arc<Activity>,
    abort: tokio::task::AbortHandle,
}

/// One listener's connections (owned by its accept loop).
pub(crate) struct Admission {
    limits: ConnLimits,
    conns: Vec<Entry>,
}

/// Why a new connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(pub String);

/// What a session gets when admitted: its activity record and its shared slot.
pub(crate) struct Admitted {
    pub(crate) activity: Arc<Activity>,
    pub(crate) slot: Option<SharedSlot>,
}

impl Admission {
    pub(crate) fn new(limits: ConnLimits) -> Admission {
        Admission {
            limits,
            conns: Vec::new(),
        }
    }

    /// Connections tracked now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.conns.len()
    }

    /// Makes room for a connection from `peer` (closing others as the module docs say), or
    /// refuses it. Call [`Admission::track`] with the session's task next.
    pub(crate) fn admit(&mut self, peer: &str) -> Result<Admitted, Refused> {
        let peer = peer_key(peer);
        while self
            .conns
            .iter()
            .filter(|c| peer_key(&c.peer) == peer)
            .count()
            >= self.limits.per_peer
        {
            self.evict(Some(peer), "per-peer")?;
        }
        while self.conns.len() >= self.limits.per_listener {
            self.evict(None, "per-listener")?;
        }
        let slot = if self.limits.shared {
            loop {
                let used = SHARED_IN_USE.fetch_add(1, Relaxed);
                if used < shared_budget() {
                    break Some(SharedSlot(()));
                }
                SHARED_IN_USE.fetch_sub(1, Relaxed);
                self.evict(None, "descriptor budget")?;
            }
        } else {
            None
        };
        Ok(Admitted {
            activity: Arc::new(Activity::new()),
            slot,
        })
    }

    /// Tracks the session task `abort` of a connection admitted from `peer`.
    pub(crate) fn track(
        &mut self,
        peer: &str,
        activity: Arc<Activity>,
        abort: tokio::task::AbortHandle,
    ) {
        self.conns.push(Entry {
            task: abort.id(),
            peer: peer.to_string(),
            activity,
            abort,
        });
    }

    /// Forgets the session task `task` (it ended).
    pub(crate) fn ended(&mut self, task: tokio::task::Id) {
        self.conns.retain(|c| c.task != task);
    }

    /// Closes the connection [`victim`] picks among those from `peer` (all when `None`).
    fn evict(&mut self, peer: Option<&str>, cap: &str) -> Result<(), Refused> {
        let candidates: Vec<(usize, Candidate)> = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| peer.is_none_or(|p| peer_key(&c.peer) == p))
            .map(|(i, c)| (i, Candidate::of(&c.activity)))
            .collect();
        let Some(i) = victim(candidates.iter().map(|(_, c)| *c)).map(|k| candidates[k].0) else {
            return Err(Refused(format!(
                "{cap} connection cap reached and every connection there is a controller in \
                 charge"
            )));
        };
        let gone = self.conns.swap_remove(i);
        tracing::warn!(
            peer = gone.peer,
            "{cap} connection cap: closing the oldest idle or unauthenticated connection"
        );
        gone.abort.abort();
        Ok(())
    }
}

/// The part of a peer's address a cap counts by: the IP of `IP:PORT` (`[v6]:PORT` too); any
/// other text as it is (a Unix socket's path: one peer).
fn peer_key(peer: &str) -> &str {
    match peer.rsplit_once(':') {
        Some((ip, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !ip.is_empty() => ip,
        _ => peer,
    }
}

/// What eviction looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    opened_ms: u64,
    last_ms: u64,
    negotiated: bool,
    in_charge: bool,
    partial: bool,
    replying: bool,
}

impl Candidate {
    fn of(a: &Activity) -> Candidate {
        Candidate {
            opened_ms: a.opened_ms,
            last_ms: a.last_ms.load(Relaxed),
            negotiated: a.negotiated.load(Relaxed),
            in_charge: a.in_charge.load(Relaxed),
            partial: a.partial.load(Relaxed),
            replying: a.replying.load(Relaxed),
        }
    }
}

/// The index of the connection to close for a newcomer (the order of the module docs):
/// the oldest that has not finished its HELLO, else the one with a partial message, else the
/// one idle, else the one being sent a long reply — each time the one whose last whole
/// message is oldest; never one in charge.
fn victim(candidates: impl Iterator<Item = Candidate>) -> Option<usize> {
    candidates
        .enumerate()
        .filter(|(_, c)| !c.in_charge)
        .min_by_key(|(_, c)| {
            if !c.negotiated {
                (0, c.opened_ms)
            } else if c.partial {
                (1, c.last_ms)
            } else if !c.replying {
                (2, c.last_ms)
            } else {
                (3, c.last_ms)
            }
        })
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(opened_ms: u64, last_ms: u64, negotiated: bool, in_charge: bool) -> Candidate {
        Candidate {
            opened_ms,
            last_ms,
            negotiated,
            in_charge,
            partial: false,
            replying: false,
        }
    }

    #[test]
    fn a_dump_being_read_outlasts_a_flood_that_looks_fresher() {
        let dump = Candidate {
            replying: true,
            ..c(0, 10, true, false)
        };
        let trickler = Candidate {
            partial: true,
            ..c(50, 90, true, false)
        };
        let echoer = c(60, 95, true, false);
        // The flood's connections sent their last whole message after the dump's last piece,
        // yet they go first: the trickler, then the idle one, and the dump last of all.
        assert_eq!(victim([dump, echoer, trickler].into_iter()), Some(2));
        assert_eq!(victim([dump, echoer].into_iter()), Some(1));
        assert_eq!(victim([dump].into_iter()), Some(0));
        // Before its HELLO, anyone goes first.
        assert_eq!(
            victim([dump, trickler, c(99, 99, false, false)].into_iter()),
            Some(2)
        );
    }

    #[test]
    fn unauthenticated_go_first_then_the_longest_idle_never_a_controller() {
        let all = [
            c(0, 0, true, true),     // a controller in charge, oldest of all
            c(5, 90, true, false),   // a service connection, active lately
            c(9, 10, true, false),   // a service connection idle since 10
            c(30, 30, false, false), // no HELLO yet
            c(20, 20, false, false), // no HELLO yet, older
        ];
        assert_eq!(victim(all.iter().copied()), Some(4));
        assert_eq!(victim(all[..3].iter().copied()), Some(2));
        assert_eq!(victim(all[..1].iter().copied()), None);
    }

    #[test]
    fn peers_are_counted_by_address() {
        assert_eq!(peer_key("127.0.0.1:40000"), "127.0.0.1");
        assert_eq!(peer_key("[::1]:6653"), "[::1]");
        assert_eq!(peer_key("/run/hayate/br0.mgmt"), "/run/hayate/br0.mgmt");
    }

    #[tokio::test]
    async fn a_full_listener_closes_its_oldest_unauthenticated_connection() {
        let mut adm = Admission::new(ConnLimits {
            per_listener: 3,
            per_peer: 2,
            shared: false,
        });
        let mut tasks = tokio::task::JoinSet::new();
        let mut admit = |adm: &mut Admission, peer: &str| {
            let a = adm.admit(peer).unwrap();
            let act = a.activity.clone();
            let h = tasks.spawn(std::future::pending::<()>());
            adm.track(peer, a.activity, h.clone());
            (act, h)
        };
        let (a1, h1) = admit(&mut adm, "10.0.0.1:1");
        a1.negotiated();
        a1.took_charge();
        let (_, h2) = admit(&mut adm, "10.0.0.1:2");
        // Peer 10.0.0.1 is at its cap: its unauthenticated connection makes room, never the
        // controller.
        let (_, h3) = admit(&mut adm, "10.0.0.1:3");
        tokio::task::yield_now().await;
        assert!(h2.is_finished());
        assert_eq!(adm.len(), 2);
        assert!(!h1.is_finished());
        let (_, _h4) = admit(&mut adm, "10.0.0.2:1");
        // The listener is full (3): a newcomer closes the unauthenticated 10.0.0.1:3 first.
        let (_, _h5) = admit(&mut adm, "10.0.0.3:1");
        tokio::task::yield_now().await;
        assert!(h3.is_finished());
        assert!(!h1.is_finished());
        assert_eq!(adm.len(), 3);
    }
}
