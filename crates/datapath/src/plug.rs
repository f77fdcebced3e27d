//! Ports plugged in and unplugged while the poll threads run ([`crate::Running::add_port`],
//! [`crate::Running::remove_port`]).
//!
//! Owner and size: one `Plugboard` per running datapath (control side, behind a mutex in
//! [`crate::Running`]: the ports, which thread polls which rx queues, one posting end per
//! thread), and one `Mailbox` per poll thread (a channel's receiving end, an eventfd and the
//! generation it last saw).
//!
//! The hand-over, designed so that the per-packet path pays nothing and each poll one relaxed
//! atomic load:
//!
//! 1. The control side opens what the port needs and deals it out by the builder's rules: rx
//!    queues to the poll threads with the fewest rx queues; priority receive queues to the
//!    priority lane (without a lane, to the poll threads like other rx queues); one tx table
//!    entry per thread (`tx_entries`, shared behind a mutex when the port has fewer tx
//!    queues than threads). A port that does not open is refused before any thread hears of
//!    it.
//! 2. It posts one `Letter` per thread (the thread's queues and tx entry, or "remove port
//!    N"), signals each thread's eventfd (a thread asleep in `poll(2)` wakes; one napping
//!    wakes within its nap, at most 1 ms by default) and then bumps the datapath's plug
//!    generation with a release store.
//! 3. Each thread compares that generation with the one it saw once per poll, before it
//!    receives (`Pmd::poll_once`): a relaxed load. On a change it reads the generation again
//!    with acquire ordering (so the letters posted before the bump are visible), clears its
//!    eventfd, and applies every letter between batches: buffered output for a removed port
//!    is sent first, then its rx queues and tx entry are taken out (a new port's are added).
//!    It then empties its caches exactly as on a pipeline generation change: compiled
//!    megaflows name outputs by dense tx-table index, which a removal shifts, and a new port
//!    makes outputs possible that were left out before — so no megaflow can send to a wrong
//!    or stale port. Last it rebuilds the descriptors it sleeps on and acknowledges,
//!    handing a removed port's queues back.
//! 4. The control side waits for every thread's acknowledgement ([`PLUG_TIMEOUT`] at most),
//!    then drops the removed queues and only then its handle on the port, so what the port
//!    holds (a vhost-user socket, an AF_XDP socket and its XDP program) is released once no
//!    thread can touch it. A thread that does not answer in time (stuck or descheduled) takes
//!    the change at its next poll; a helper thread waits for its acknowledgement and drops
//!    the queues and the port then, and a warning says so.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use port::{Port, PortError, RxQueue};

use crate::datapath::DpError;
use crate::egress::Shapers;
use crate::execute::{Executor, TxPort, TxSlot};
use crate::inject::Wake;
use crate::pmd::Pmd;
use crate::police::Policers;
use crate::rx_drops::{RxDrops, RxQueueStats, RxSlot};
use crate::stats::{LocalStats, Snapshot};

/// How long the control side waits for every thread to take a port change.
pub const PLUG_TIMEOUT: Duration = Duration::from_secs(5);

/// One change to one thread's ports.
enum Change {
    /// A new port: this thread's rx queues of it (maybe none) and its tx entry.
    Add {
        ofport: u32,
        rx: Vec<RxSlot>,
        tx: Box<TxPort>,
        /// Ports that must cut super-packets from now on (a port with virtio-net headers
        /// joined a datapath that had none).
        segment: Vec<u32>,
    },
    /// Take every queue of this port out.
    Remove { ofport: u32 },
}

/// A change posted to one thread, with where to acknowledge it.
pub(crate) struct Letter {
    change: Change,
    ack: Sender<Retired>,
}

/// What a thread hands back: the queues it took out of use.
#[derive(Default)]
struct Retired {
    rx: Vec<Box<dyn RxQueue>>,
    tx: Option<TxSlot>,
}

/// A change applied by a thread, to acknowledge once its caches are empty.
pub(crate) struct Ack {
    to: Sender<Retired>,
    retired: Retired,
}

impl Ack {
    /// Tells the control side the change is in effect (a control side that gave up waiting
    /// is not an error: the queues are then dropped here).
    pub(crate) fn send(self) {
        let _ = self.to.send(self.retired);
    }
}

impl Letter {
    /// Applies the change to a thread's rx queues and tx table (between batches).
    pub(crate) fn apply(
        self,
        rx: &mut Vec<RxSlot>,
        exec: &mut Executor,
        st: &mut LocalStats,
    ) -> Ack {
        let mut retired = Retired::default();
        match self.change {
            Change::Add {
                ofport,
                rx: queues,
                tx,
                segment,
            } => {
                for o in segment {
                    exec.set_segmenting(o);
                }
                exec.add_port(*tx);
                debug_assert!(queues.iter().all(|q| q.ofport == ofport));
                rx.extend(queues);
            }
            Change::Remove { ofport } => {
                retired.tx = exec.remove_port(ofport, st);
                let mut i = 0;
                while i < rx.len() {
                    if rx[i].ofport == ofport {
                        retired.rx.push(rx.remove(i).queue);
                    } else {
                        i += 1;
                    }
                }
            }
        }
        Ack {
            to: self.ack,
            retired,
        }
    }
}

/// A poll thread's end: letters, its eventfd, and the plug generation it last saw.
pub(crate) struct Mailbox {
    gen: Arc<AtomicU64>,
    seen: u64,
    letters: Receiver<Letter>,
    wake: Arc<Wake>,
}

impl Mailbox {
    /// Whether changes were posted since the last [`Mailbox::take`]: one relaxed load.
    #[inline(always)]
    pub(crate) fn changed(&self) -> bool {
        self.gen.load(Ordering::Relaxed) != self.seen
    }

    /// The eventfd the thread sleeps on.
    pub(crate) fn wake_fd(&self) -> Option<RawFd> {
        self.wake.raw_fd()
    }

    /// The letters posted so far.
    pub(crate) fn take(&mut self) -> Vec<Letter> {
        // Acquire: every letter posted before the bump is in the channel.
        self.seen = self.gen.load(Ordering::Acquire);
        self.wake.clear();
        self.letters.try_iter().collect()
    }
}

/// The control side's handle on one thread.
struct Post {
    letters: Sender<Letter>,
    wake: Arc<Wake>,
    /// The OpenFlow port of each rx queue the thread polls, with the queue's drop counters.
    rx: Vec<(u32, Arc<RxDrops>)>,
}

/// The ports of a running datapath and the threads' mailboxes (see the module docs).
pub(crate) struct Plugboard {
    gen: Arc<AtomicU64>,
    threads: Vec<Post>,
    /// The last thread is the priority lane.
    lane: bool,
    ports: Vec<(u32, Arc<dyn Port>)>,
    /// Some port has virtio-net headers (so others cut super-packets).
    supers: bool,
    /// Ports with virtio-net headers get TCP segments joined ([`crate::DpConfig::gro`]).
    gro: bool,
    /// Each port's ingress policer, also for ports plugged in later.
    policers: Arc<Policers>,
    /// Each port's egress queues, also for ports plugged in later.
    shapers: Arc<Shapers>,
}

impl Plugboard {
    /// A plugboard over `ports` and the threads `pmds` (about to start); gives each its
    /// mailbox.
    pub(crate) fn wire(
        pmds: &mut [Pmd],
        ports: &[(u32, Arc<dyn Port>)],
        policers: Arc<Policers>,
        shapers: Arc<Shapers>,
        gro: bool,
    ) -> Plugboard {
        for (ofport, port) in ports {
            policers.port(*ofport).attach(port);
        }
        let gen = Arc::new(AtomicU64::new(0));
        let threads = pmds
            .iter_mut()
            .map(|p| {
                let (letters, inbox) = channel();
                let wake = Arc::new(Wake::new());
                let rx = p.rx_drops().map(|(o, d)| (o, d.clone())).collect();
                p.attach_mailbox(Mailbox {
                    gen: gen.clone(),
                    seen: 0,
                    letters: inbox,
                    wake: wake.clone(),
                });
                Post { letters, wake, rx }
            })
            .collect();
        Plugboard {
            gen,
            threads,
            lane: pmds.last().is_some_and(Pmd::is_lane),
            ports: ports.to_vec(),
            supers: ports.iter().any(|(_, p)| p.capabilities().vnet_hdr),
            gro,
            policers,
            shapers,
        }
    }

    /// The OpenFlow numbers of the ports, in the order they joined.
    pub(crate) fn ports(&self) -> Vec<u32> {
        self.ports.iter().map(|p| p.0).collect()
    }

    /// Opens `port`'s queues, hands them to the threads and waits until every thread polls
    /// them (see the module docs).
    pub(crate) fn add(&mut self, ofport: u32, port: Arc<dyn Port>) -> Result<(), DpError> {
        if let Some((_, p)) = self.ports.iter().find(|(o, _)| *o == ofport) {
            return Err(DpError(format!(
                "OpenFlow port {ofport} is in use by {}; give the new port another number",
                p.name()
            )));
        }
        let n = self.threads.len();
        // Poll threads are 0..poll; the lane, when there is one, is the last thread.
        let poll = n - usize::from(self.lane);
        let caps = port.capabilities();
        let police = self.policers.port(ofport);
        police.attach(&port);
        let open_err = |e: PortError| DpError(e.to_string());
        let mut rx: Vec<Vec<RxSlot>> = (0..n).map(|_| Vec::new()).collect();
        let mut load: Vec<usize> = self.threads.iter().map(|t| t.rx.len()).collect();
        for q in 0..caps.rx_queues {
            let t = fewest(&load[..poll]);
            rx[t].push(RxSlot::new(
                ofport,
                port.open_rx(q).map_err(open_err)?,
                police.clone(),
            ));
            load[t] += 1;
        }
        for q in 0..port.priority_queues() {
            let t = if self.lane {
                n - 1
            } else {
                fewest(&load[..poll])
            };
            rx[t].push(RxSlot::new(
                ofport,
                port.open_priority_rx(q).map_err(open_err)?,
                police.clone(),
            ));
            load[t] += 1;
        }
        // The control side keeps a handle on each queue's drop counters.
        let counters: Vec<Vec<(u32, Arc<RxDrops>)>> = rx
            .iter()
            .map(|slots| slots.iter().map(|s| (ofport, s.drops.clone())).collect())
            .collect();
        let supers = self.supers || caps.vnet_hdr;
        let segment: Vec<u32> = if caps.vnet_hdr && !self.supers {
            self.ports.iter().map(|p| p.0).collect()
        } else {
            Vec::new()
        };
        let gro = self.gro && caps.vnet_hdr;
        let tx = tx_entries(&*port, ofport, n, self.lane, supers && !caps.vnet_hdr, gro)?;
        let (ack, acks) = channel();
        let mut posted = 0;
        for ((t, queues), tx) in self.threads.iter().zip(rx).zip(tx) {
            let letter = Letter {
                change: Change::Add {
                    ofport,
                    rx: queues,
                    tx: Box::new(tx.shaped(self.shapers.port(ofport))),
                    segment: segment.clone(),
                },
                ack: ack.clone(),
            };
            posted += usize::from(t.letters.send(letter).is_ok());
        }
        drop(ack);
        for (t, c) in self.threads.iter_mut().zip(counters) {
            t.rx.extend(c);
        }
        self.ports.push((ofport, port));
        self.supers = supers;
        self.ring();
        settle(acks, posted, format!("adding port {ofport}"), None);
        Ok(())
    }

    /// Takes port `ofport` out of every thread; once they all let go of its queues, the
    /// queues and then the datapath's handle on the port are dropped.
    pub(crate) fn remove(&mut self, ofport: u32) -> Result<(), DpError> {
        let Some(i) = self.ports.iter().position(|(o, _)| *o == ofport) else {
            let have: Vec<String> = self.ports.iter().map(|(o, _)| o.to_string()).collect();
            return Err(DpError(format!(
                "no port {ofport} in the datapath (its ports: {})",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            )));
        };
        let (_, port) = self.ports.remove(i);
        let (ack, acks) = channel();
        let mut posted = 0;
        for t in &mut self.threads {
            t.rx.retain(|(o, _)| *o != ofport);
            let letter = Letter {
                change: Change::Remove { ofport },
                ack: ack.clone(),
            };
            posted += usize::from(t.letters.send(letter).is_ok());
        }
        drop(ack);
        self.ring();
        settle(acks, posted, format!("removing port {ofport}"), Some(port));
        Ok(())
    }

    /// Drops by reason of the packets port `ofport` delivered, summed over its rx queues
    /// (each counted by the thread that reads it; see [`crate::rx_drops`]).
    pub(crate) fn port_drops(&self, ofport: u32) -> Snapshot {
        let mut s: Snapshot = self
            .threads
            .iter()
            .flat_map(|t| t.rx.iter())
            .filter(|(o, _)| *o == ofport)
            .map(|(_, d)| d.snapshot())
            .sum();
        // What the port dropped before receive (crate::police) is policing too.
        s.drop_policed += self.policers.port(ofport).early_drops();
        s
    }

    /// Every rx queue with the thread that polls it, thread by thread in the order each
    /// thread polls them; a port's queues numbered in that order.
    pub(crate) fn rx_queues(&self) -> Vec<RxQueueStats> {
        let mut out: Vec<RxQueueStats> = Vec::new();
        for (thread, post) in self.threads.iter().enumerate() {
            for (ofport, d) in &post.rx {
                let queue = out.iter().filter(|q| q.ofport == *ofport).count();
                out.push(RxQueueStats {
                    thread,
                    ofport: *ofport,
                    queue,
                    stats: d.snapshot(),
                });
            }
        }
        out
    }

    /// Wakes every thread, then publishes the new generation.
    fn ring(&self) {
        for t in &self.threads {
            t.wake.signal();
        }
        self.gen.fetch_add(1, Ordering::Release);
    }
}

/// The index of the smallest count (the first on ties).
fn fewest(counts: &[usize]) -> usize {
    let mut best = 0;
    for (i, &c) in counts.iter().enumerate() {
        if c < counts[best] {
            best = i;
        }
    }
    best
}

/// Waits for `n` acknowledgements, then drops what the threads handed back and then `port`.
/// Past [`PLUG_TIMEOUT`] a helper thread finishes the wait (see the module docs).
fn settle(acks: Receiver<Retired>, n: usize, what: String, port: Option<Arc<dyn Port>>) {
    let deadline = Instant::now() + PLUG_TIMEOUT;
    let retired: Arc<Mutex<Vec<Retired>>> = Arc::default();
    let mut got = 0;
    while got < n {
        match acks.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(r) => {
                retired.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                got += 1;
            }
            // Threads that stopped took their queues with them.
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                eprintln!(
                    "datapath: {what}: {} of {n} poll thread(s) have not taken the change \
                     within {PLUG_TIMEOUT:?} (busy or stuck); it takes effect at their next poll",
                    n - got
                );
                let late = std::thread::Builder::new()
                    .name("hayate-unplug".into())
                    .spawn(move || {
                        let rest: Vec<Retired> = acks.iter().collect();
                        drop(rest);
                        drop(retired);
                        drop(port);
                    });
                if let Err(e) = late {
                    eprintln!("datapath: {what}: cannot start a thread to finish it: {e}");
                }
                return;
            }
        }
    }
    drop(retired);
    drop(port);
}

/// A tx queue several threads send on.
type SharedTx = Arc<Mutex<Box<dyn port::TxQueue>>>;

/// One tx table entry per thread for `p` (OpenFlow port `ofport`), by the datapath's rule:
/// thread `t` sends on queue `t % tx_queues`, threads that land on the same queue share it
/// behind a mutex, and with a priority lane (`lane`: the last of `nthreads`) a port with
/// priority queues and more than one tx queue keeps its last one for the lane. `segment`:
/// super-packets are cut before they reach this port; `gro`: TCP segments bound for it are
/// joined into super-packets (a port with virtio-net headers, [`crate::DpConfig::gro`]).
pub(crate) fn tx_entries(
    p: &dyn Port,
    ofport: u32,
    nthreads: usize,
    lane: bool,
    segment: bool,
    gro: bool,
) -> Result<Vec<TxPort>, DpError> {
    let open_err = |e: PortError| DpError(e.to_string());
    let nq = p.capabilities().tx_queues as usize;
    if nq == 0 {
        return Ok((0..nthreads)
            .map(|_| {
                TxPort::new(ofport, TxSlot::Closed)
                    .segmenting(segment)
                    .joining(gro)
                    .cutting_tunnelled(p.udp_tunnel_gso())
            })
            .collect());
    }
    let lane_q = (lane && p.priority_queues() > 0 && nq > 1).then_some(nq - 1);
    let queue_of = |t: usize| match lane_q {
        Some(q) if t == nthreads - 1 => q,
        Some(q) => t % q,
        None => t % nq,
    };
    let mut shared: Vec<(usize, SharedTx)> = Vec::new();
    let mut out = Vec::with_capacity(nthreads);
    for t in 0..nthreads {
        let q = queue_of(t);
        let users = (0..nthreads).filter(|&u| queue_of(u) == q).count();
        let slot = if users == 1 {
            TxSlot::Own(p.open_tx(q as u16).map_err(open_err)?)
        } else {
            let s = match shared.iter().find(|(sq, _)| *sq == q) {
                Some((_, s)) => s.clone(),
                None => {
                    let s = Arc::new(Mutex::new(p.open_tx(q as u16).map_err(open_err)?));
                    shared.push((q, s.clone()));
                    s
                }
            };
            TxSlot::Shared(s)
        };
        out.push(
            TxPort::new(ofport, slot)
                .segmenting(segment)
                .joining(gro)
                .cutting_tunnelled(p.udp_tunnel_gso()),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::fewest;

    #[test]
    fn fewest_takes_the_first_of_the_least_loaded() {
        assert_eq!(fewest(&[2, 1, 1]), 1);
        assert_eq!(fewest(&[0, 0]), 0);
        assert_eq!(fewest(&[3, 2, 4, 0]), 3);
    }
}
