//! A receive queue of two sockets (`prio=on`): control frames are read before bulk frames.
//!
//! Why: a TCP stream through the switch keeps a queue in the switch's receive socket (the
//! switch core is its bottleneck, and TCP fills the bottleneck's queue), and every frame
//! behind it waits: a ping waited 0.5–0.9 ms at p99 behind super-packets. The port's fanout
//! program ([`super::steer`]) puts ARP, ICMP and TCP segments without payload in a socket of
//! their own, which this queue reads first, and a bulk read that met a TCP super-packet is
//! followed by a short one, so the time a control frame can wait for the switch to finish
//! with bulk work stays about one super-packet's worth.
//!
//! Both sockets sit behind one epoll descriptor, so an idle poll thread sleeps on both. The
//! queue also offers its priority socket alone ([`RxQueue::recv_priority`]): the poll thread
//! reads it after every batch it processes, from any port, so a control frame waits for at
//! most one batch's work. The bulk socket is still read at least every other loop over the
//! ports, so a flood of control frames slows bulk traffic but cannot stop it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use packet::Batch;

use super::mmsg::AfPacketMmsgRx;
use crate::{PortError, RxQueue};

/// A receive queue reading its priority socket before its bulk socket.
pub(super) struct PrioRx {
    prio: AfPacketMmsgRx,
    bulk: AfPacketMmsgRx,
    epoll: OwnedFd,
    /// The last call returned priority frames: this one reads bulk first, so a flood of
    /// control frames (a ping flood, a SYN flood) takes at most every other read.
    prio_last: bool,
}

impl PrioRx {
    /// Joins the two queues behind one epoll descriptor.
    pub(super) fn new(
        port: &str,
        prio: AfPacketMmsgRx,
        bulk: AfPacketMmsgRx,
    ) -> Result<PrioRx, PortError> {
        let err = |what: &str| {
            PortError::new(
                port,
                format!(
                    "{what}: {} (prio=off avoids it)",
                    std::io::Error::last_os_error()
                ),
            )
        };
        // SAFETY: epoll_create1 has no memory preconditions; a descriptor it returns is ours.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(err("cannot create an epoll descriptor"));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let epoll = unsafe { OwnedFd::from_raw_fd(raw) };
        for fd in [prio.socket_fd(), bulk.socket_fd()] {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: both descriptors are open sockets; `ev` lives for the call.
            if unsafe { libc::epoll_ctl(raw, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
                return Err(err("cannot watch the receive sockets"));
            }
        }
        Ok(PrioRx {
            prio,
            bulk,
            epoll,
            prio_last: false,
        })
    }
}

impl RxQueue for PrioRx {
    fn recv(&mut self, batch: &mut Batch) -> usize {
        // Priority frames are returned on their own: bulk frames read with them would leave
        // in the same transmit call, ahead of or beside them.
        if !self.prio_last {
            let n = self.prio.recv(batch);
            if n > 0 {
                self.prio_last = true;
                return n;
            }
        }
        self.prio_last = false;
        let n = self.bulk.recv(batch);
        if n > 0 {
            return n;
        }
        let n = self.prio.recv(batch);
        self.prio_last = n > 0;
        n
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }

    fn has_priority(&self) -> bool {
        true
    }

    fn recv_priority(&mut self, batch: &mut Batch) -> usize {
        self.prio.recv(batch)
    }
}
