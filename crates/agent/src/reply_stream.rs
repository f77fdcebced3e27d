//! A reply that comes in pieces: a bridge whose answer takes long to build (a dump of a big
//! table) hands the session a [`ReplyStream`] instead of the whole reply. A producer — a
//! closure that walks its data and passes encoded messages to a sink — runs on a thread of
//! its own (tokio's blocking pool when there is a runtime), so the runtime's threads go on
//! serving every other session; the session writes the pieces as they come.
//!
//! Memory is bounded: the channel between producer and session holds at most
//! [`IN_FLIGHT`] pieces, so a producer that is ahead of the controller waits (the controller
//! reading slowly slows the walk, as TCP slows the controller). When the session ends, the
//! next piece the producer passes is refused and it stops. At most [`MAX_PRODUCERS`]
//! producers run at once in the process (whatever the number of bridges and controllers):
//! a stream starts when its first piece is awaited and a producer is free, so a crowd of
//! clients asking for dumps at once waits its turn instead of taking every core and a walk's
//! memory each.

use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// Pieces a producer may be ahead of the session.
pub const IN_FLIGHT: usize = 4;

/// Producers that run at once in the process.
pub const MAX_PRODUCERS: usize = 2;

/// Where a producer passes its encoded messages; `false` back means nobody reads any more:
/// stop.
pub type Sink<'a> = dyn FnMut(Vec<u8>) -> bool + 'a;

/// A producer of a reply in pieces (see the module docs).
pub type Producer = Box<dyn FnOnce(&mut Sink<'_>) + Send + 'static>;

/// The pieces of one reply, in order; the stream ends when the producer is done.
pub struct ReplyStream {
    state: State,
}

enum State {
    /// Not started: waiting for a producer slot.
    Waiting(Producer),
    Running(mpsc::Receiver<Vec<u8>>),
}

impl std::fmt::Debug for ReplyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Waiting(_) => "waiting",
            State::Running(_) => "running",
        };
        f.debug_struct("ReplyStream")
            .field("state", &state)
            .finish()
    }
}

/// The process's producer slots.
fn slots() -> Arc<Semaphore> {
    static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    SLOTS
        .get_or_init(|| Arc::new(Semaphore::new(MAX_PRODUCERS)))
        .clone()
}

impl ReplyStream {
    /// A stream whose pieces `produce` makes; it starts when its first piece is awaited
    /// ([`ReplyStream::next`]).
    pub fn new(produce: Producer) -> ReplyStream {
        ReplyStream {
            state: State::Waiting(produce),
        }
    }

    /// Runs `produce` on a thread of its own, holding `slot` until it is done: tokio's
    /// blocking pool when called on a runtime, else a new thread.
    fn start(produce: Producer, slot: OwnedSemaphorePermit) -> mpsc::Receiver<Vec<u8>> {
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let run = move || {
            let _slot = slot;
            produce(&mut |piece: Vec<u8>| tx.blocking_send(piece).is_ok());
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(run)),
            Err(_) => drop(std::thread::spawn(run)),
        }
        rx
    }

    /// The next piece; `None` when the reply is complete. The first call waits for a
    /// producer slot and starts the producer. Cancel-safe (for `select!`): a call dropped
    /// while it waits loses nothing.
    pub async fn next(&mut self) -> Option<Vec<u8>> {
        if matches!(self.state, State::Waiting(_)) {
            // The semaphore is never closed.
            let slot = slots().acquire_owned().await.ok()?;
            // No await from here until the state holds the receiver.
            let placeholder = State::Running(mpsc::channel(1).1);
            let State::Waiting(produce) = std::mem::replace(&mut self.state, placeholder) else {
                unreachable!("checked above, and nothing else runs in between");
            };
            self.state = State::Running(Self::start(produce, slot));
        }
        match &mut self.state {
            State::Running(rx) => rx.recv().await,
            State::Waiting(_) => None,
        }
    }

    /// Runs `produce` here and now, appending every piece to `out` (for callers that want
    /// the whole reply at once).
    pub fn collect(produce: Producer, out: &mut Vec<u8>) {
        produce(&mut |piece: Vec<u8>| {
            out.extend_from_slice(&piece);
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting(n: u8) -> Producer {
        Box::new(move |sink: &mut Sink<'_>| {
            for i in 0..n {
                if !sink(vec![i]) {
                    return;
                }
            }
        })
    }

    #[tokio::test]
    async fn pieces_arrive_in_order_then_the_end() {
        let mut s = ReplyStream::new(counting(10));
        let mut got = Vec::new();
        while let Some(p) = s.next().await {
            got.extend(p);
        }
        assert_eq!(got, (0..10).collect::<Vec<u8>>());
    }

    /// With every slot taken, a stream waits; it starts when one is given back.
    #[tokio::test]
    async fn streams_wait_for_a_producer_slot() {
        let (gate, gate_rx) = std::sync::mpsc::channel::<()>();
        let gated: Producer = Box::new(move |sink: &mut Sink<'_>| {
            let _ = gate_rx.recv_timeout(std::time::Duration::from_secs(30));
            sink(vec![1]);
        });
        let mut first = ReplyStream::new(gated);
        // Take every other slot, as other streams would.
        let others = slots()
            .acquire_many_owned(MAX_PRODUCERS as u32 - 1)
            .await
            .unwrap();
        let first_piece = tokio::spawn(async move { first.next().await });
        // Wait (bounded) until the first stream holds the last slot.
        for _ in 0..10_000 {
            if slots().available_permits() == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        let mut second = ReplyStream::new(counting(1));
        let waiting = tokio::spawn(async move { second.next().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no slot: the second stream waits");
        gate.send(()).unwrap();
        assert_eq!(first_piece.await.unwrap(), Some(vec![1]));
        assert_eq!(
            waiting.await.unwrap(),
            Some(vec![0]),
            "started once a slot was free"
        );
        drop(others);
    }

    #[test]
    fn collect_runs_in_place() {
        let mut out = vec![9];
        ReplyStream::collect(counting(3), &mut out);
        assert_eq!(out, [9, 0, 1, 2]);
    }

    #[tokio::test]
    async fn a_dropped_stream_stops_its_producer() {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let produce: Producer = Box::new(move |sink: &mut Sink<'_>| {
            let mut sent = 0usize;
            // Bounded: a producer that never stopped would end the test here anyway.
            while sent < 1_000_000 && sink(vec![0]) {
                sent += 1;
            }
            done_tx.send(sent).unwrap();
        });
        let mut s = ReplyStream::new(produce);
        assert_eq!(s.next().await, Some(vec![0]));
        drop(s);
        let sent = tokio::task::spawn_blocking(move || {
            done_rx.recv_timeout(std::time::Duration::from_secs(30))
        })
        .await
        .unwrap()
        .expect("the producer stopped");
        assert!(sent <= 1 + IN_FLIGHT + 1, "{sent} pieces passed");
    }
}
