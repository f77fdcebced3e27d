//! Packet-out: packets the control side hands to the datapath together with the datapath
//! actions to run on them (OpenFlow PACKET_OUT, already resolved by the agent: output to
//! TABLE translated through the pipeline, FLOOD expanded, and so on).
//!
//! Owner and size: one bounded queue per datapath ([`INJECT_QUEUE`] entries); the
//! control side holds any number of [`Injector`]s, poll-mode thread 0 owns the receiving end
//! and drains at most [`INJECT_BURST`] packets per poll, before it receives. An empty queue
//! costs that thread one atomic load per poll; a full queue makes [`Injector::inject`] fail
//! (the agent answers the controller with an error) instead of waiting, so neither side ever
//! blocks the other. Packets are copied into frames of the datapath's pool on the control
//! side; the thread frees them into its own cache once sent.
//!
//! The actions are compiled by the thread (its tx table decides port indices); that is one
//! small allocation-free pass once the thread's scratch has grown, and the `Vec` of actions
//! is freed by the thread. Packet-outs are control traffic, not the per-packet path.

use std::fmt;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use packet::{extract_packet, FlowKey, Packet, PoolCache};
use pipeline::DpAction;

use crate::execute::Executor;
use crate::megaflow::{Actions, PortMap};
use crate::stats::LocalStats;
use crate::upcall::Upcall;

/// Packets the packet-out queue holds.
pub const INJECT_QUEUE: usize = 1024;

/// Most injected packets a thread runs per poll.
pub const INJECT_BURST: usize = 32;

/// A packet and the actions to run on it.
#[derive(Debug)]
pub struct Injected {
    /// The packet (a frame of the datapath's pool), `meta.in_port` set.
    pub packet: Packet,
    /// What to do with it.
    pub actions: Vec<DpAction>,
}

/// Why a packet could not be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectError {
    /// The queue is full: the poll thread is behind. Retry later.
    QueueFull,
    /// The datapath is stopped (or was never started).
    Stopped,
    /// No free frame in the pool, or the packet is larger than a frame.
    NoFrame,
}

impl fmt::Display for InjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InjectError::QueueFull => {
                "the packet-out queue is full (the poll thread is behind); retry later"
            }
            InjectError::Stopped => "the datapath is not running; start it before packet-outs",
            InjectError::NoFrame => {
                "no pool frame for the packet (pool exhausted or packet larger than a frame)"
            }
        })
    }
}

impl std::error::Error for InjectError {}

/// The control side's handle on the packet-out queue; cheap to clone.
#[derive(Clone)]
pub struct Injector {
    tx: SyncSender<Injected>,
    cache: Arc<Mutex<PoolCache>>,
}

impl fmt::Debug for Injector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injector").finish_non_exhaustive()
    }
}

impl Injector {
    pub(crate) fn new(tx: SyncSender<Injected>, cache: PoolCache) -> Injector {
        Injector {
            tx,
            cache: Arc::new(Mutex::new(cache)),
        }
    }

    /// Copies `data` into a pool frame and queues it with `actions`, as if received on
    /// `in_port`. Never waits.
    pub fn inject(
        &self,
        data: &[u8],
        in_port: u32,
        actions: Vec<DpAction>,
    ) -> Result<(), InjectError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut packet = cache.alloc_from(data).ok_or(InjectError::NoFrame)?;
        packet.meta.in_port = in_port;
        match self.tx.try_send(Injected { packet, actions }) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(i)) => {
                cache.free(i.packet);
                Err(InjectError::QueueFull)
            }
            Err(TrySendError::Disconnected(i)) => {
                cache.free(i.packet);
                Err(InjectError::Stopped)
            }
        }
    }
}

/// The receiving end, owned by one poll-mode thread.
pub(crate) struct InjectQueue {
    rx: Receiver<Injected>,
    actions: Actions,
    key: FlowKey,
}

impl InjectQueue {
    pub(crate) fn new(rx: Receiver<Injected>) -> InjectQueue {
        InjectQueue {
            rx,
            actions: Actions::default(),
            key: FlowKey::ZERO,
        }
    }

    /// Runs up to [`INJECT_BURST`] queued packets through `exec` (outputs are buffered; the
    /// caller flushes). Returns how many ran.
    pub(crate) fn drain(
        &mut self,
        exec: &mut Executor,
        ports: &PortMap,
        upcall: &dyn Upcall,
        now_ns: &dyn Fn() -> u64,
        st: &mut LocalStats,
    ) -> usize {
        let mut n = 0;
        while n < INJECT_BURST {
            let Ok(Injected {
                mut packet,
                actions,
            }) = self.rx.try_recv()
            else {
                break;
            };
            if n == 0 {
                exec.now_ns = now_ns();
            }
            // Rewrites need the header offsets extraction records.
            extract_packet(&mut packet, &mut self.key);
            self.actions
                .compile(&actions, ports, &|id| upcall.meter(id));
            exec.run(packet, &self.actions, st);
            n += 1;
        }
        n
    }

    /// Frees every queued packet (shutdown).
    pub(crate) fn discard(&mut self, cache: &mut PoolCache) {
        while let Ok(i) = self.rx.try_recv() {
            cache.free(i.packet);
        }
    }
}
