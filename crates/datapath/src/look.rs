//! Looking inside a running thread: its megaflows (`hayate ctl BRIDGE dump-megaflows`).
//!
//! Size and owner: one [`Look`] per poll thread, made with it; the thread owns its arena and
//! nobody else reads it. A dump is asked for, not taken: the control side bumps
//! [`Look`]'s request number and writes its eventfd (a sleeping thread wakes), and the thread
//! answers from its maintenance check — one relaxed load and compare per batch while no dump
//! is wanted — by copying its megaflows into a list (allocating then, once per dump, never
//! per packet) and leaving it under a mutex that only the dump's reader and this one write
//! take. The reader waits for the answer with the request's number, or gives up after a
//! deadline (a thread stuck in a long batch), reporting which threads did not answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use packet::FlowKey;
use pipeline::trace::format_dp_action;
use pipeline::DpAction;

use crate::inject::Wake;
use crate::megaflow::Op;

/// One megaflow as a dump shows it.
#[derive(Debug, Clone)]
pub struct MegaflowRecord {
    /// The poll thread that holds it.
    pub thread: usize,
    /// Its key (masked).
    pub key: FlowKey,
    /// Its mask.
    pub mask: FlowKey,
    /// Its actions as text (`2,set_field:...`; `drop` for none).
    pub actions: String,
    /// Packets that hit it since it was installed.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// When it was installed (ms of `pipeline::dpaction::now_ms`).
    pub installed_ms: u64,
    /// When a packet last hit it, as of its last counter flush (same clock).
    pub used_ms: u64,
}

/// A thread's dump mailbox (module docs).
#[derive(Debug)]
pub struct Look {
    /// Number of the latest dump asked for.
    wanted: AtomicU64,
    /// The latest answer: the request number it answers and the megaflows.
    answer: Mutex<(u64, Vec<MegaflowRecord>)>,
    /// Wakes the thread when it sleeps.
    pub(crate) wake: Wake,
    /// Megaflows alive at the thread's last maintenance pass.
    live: AtomicU64,
}

impl Look {
    /// A mailbox with nothing asked.
    pub(crate) fn new() -> Look {
        Look {
            wanted: AtomicU64::new(0),
            answer: Mutex::new((0, Vec::new())),
            wake: Wake::new(),
            live: AtomicU64::new(0),
        }
    }

    /// The request number the thread must answer when it differs from what it answered
    /// last.
    #[inline(always)]
    pub(crate) fn wanted(&self) -> u64 {
        self.wanted.load(Ordering::Acquire)
    }

    /// Megaflows alive at the thread's last maintenance pass.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }

    /// Notes the megaflows alive now (owning thread, each maintenance pass).
    pub(crate) fn set_live(&self, n: usize) {
        self.live.store(n as u64, Ordering::Relaxed);
    }

    /// Leaves the answer to request `n`.
    pub(crate) fn answer(&self, n: u64, records: Vec<MegaflowRecord>) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = (n, records);
    }

    /// Asks for a dump; its request number.
    fn ask(&self) -> u64 {
        let n = self.wanted.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake.signal();
        n
    }

    /// The answer to request `n`, when it has come.
    fn take(&self, n: u64) -> Option<Vec<MegaflowRecord>> {
        let mut a = self.answer.lock().unwrap_or_else(|e| e.into_inner());
        (a.0 >= n).then(|| std::mem::take(&mut a.1))
    }
}

/// Asks every thread of `looks` for its megaflows and waits up to `deadline` for the
/// answers; the megaflows of those that answered, and the indexes of those that did not.
pub fn dump(looks: &[Arc<Look>], deadline: Duration) -> (Vec<MegaflowRecord>, Vec<usize>) {
    let asked: Vec<u64> = looks.iter().map(|l| l.ask()).collect();
    let end = Instant::now() + deadline;
    let mut got: Vec<Option<Vec<MegaflowRecord>>> = vec![None; looks.len()];
    loop {
        for (i, l) in looks.iter().enumerate() {
            if got[i].is_none() {
                got[i] = l.take(asked[i]);
            }
        }
        if got.iter().all(Option::is_some) || Instant::now() >= end {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let silent = got
        .iter()
        .enumerate()
        .filter(|(_, g)| g.is_none())
        .map(|(i, _)| i)
        .collect();
    (got.into_iter().flatten().flatten().collect(), silent)
}

/// A compiled action as text, `ofport` naming the port of a tx table index.
pub(crate) fn op_text(op: &Op, ofport: impl Fn(u16) -> Option<u32>) -> String {
    let a = match *op {
        Op::Output(i) => match ofport(i) {
            Some(p) => DpAction::Output(p),
            None => return format!("tx#{i}"),
        },
        Op::SetField { field, value } => DpAction::SetField { field, value },
        Op::PushVlan { tpid, tci } => DpAction::PushVlan { tpid, tci },
        Op::PopVlan => DpAction::PopVlan,
        Op::DecTtl => DpAction::DecTtl,
        Op::PushMpls { ethertype, lse } => DpAction::PushMpls { ethertype, lse },
        Op::PopMpls(t) => DpAction::PopMpls(t),
        Op::DecMplsTtl => DpAction::DecMplsTtl,
        Op::CopyTtlOut => DpAction::CopyTtlOut,
        Op::CopyTtlIn => DpAction::CopyTtlIn,
        Op::SetQueue(q) => DpAction::SetQueue(q),
        Op::Meter(_) => return "meter".into(),
        Op::Tunnel { port, .. } => {
            return match ofport(port) {
                Some(p) => format!("tunnel_push,output:{p}"),
                None => format!("tunnel_push,tx#{port}"),
            }
        }
        Op::TunnelDrop(_) => return "tunnel_drop".into(),
        Op::Controller {
            reason,
            max_len,
            table_id,
            cookie,
        } => DpAction::Controller {
            reason,
            max_len,
            table_id,
            cookie,
        },
    };
    format_dp_action(&a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_waits_for_the_answer_to_its_own_request() {
        let look = Arc::new(Look::new());
        let l = look.clone();
        let answerer = std::thread::spawn(move || loop {
            let n = l.wanted();
            if n != 0 {
                let r = MegaflowRecord {
                    thread: 3,
                    key: FlowKey::ZERO,
                    mask: FlowKey::ZERO,
                    actions: "2".into(),
                    packets: 5,
                    bytes: 300,
                    installed_ms: 0,
                    used_ms: 0,
                };
                l.answer(n, vec![r]);
                return;
            }
            std::thread::yield_now();
        });
        let (got, silent) = dump(&[look], Duration::from_secs(60));
        answerer.join().unwrap();
        assert!(silent.is_empty());
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].thread, got[0].packets), (3, 5));
    }

    #[test]
    fn a_thread_that_does_not_answer_is_named() {
        let look = Arc::new(Look::new());
        let (got, silent) = dump(&[look], Duration::from_millis(5));
        assert!(got.is_empty());
        assert_eq!(silent, vec![0]);
    }
}
