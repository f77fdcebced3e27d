//! A reply that comes in pieces: a bridge whose answer takes long to build (a dump of a big
//! table) hands the session a [`ReplyStream`] instead of the whole reply. A producer — a
//! closure that walks its data and passes encoded messages to a sink — runs on a thread of
//! its own (tokio's blocking pool when there is a runtime), so the runtime's threads go on
//! serving every other session; the session writes the pieces as they come.
//!
//! Memory is bounded: the channel between producer and session holds at most
//! [`IN_FLIGHT`] pieces, so a producer that is ahead of the controller waits (the controller
//! reading slowly slows the walk, as TCP slows the controller). When the session ends, the
//! next piece the producer passes is refused and it stops.
//!
//! CPU is bounded too: at most [`MAX_PRODUCERS`] producers work at once in the process
//! (whatever the number of bridges and controllers), each holding a slot while it works and
//! giving it back while it waits for its session to take a piece. So a crowd of clients
//! asking for dumps at once takes turns on two cores, and a client that reads slowly holds
//! no slot from anyone else.

use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, Semaphore};

/// Pieces a producer may be ahead of the session.
pub const IN_FLIGHT: usize = 4;

/// Producers that work at once in the process.
pub const MAX_PRODUCERS: usize = 2;

/// Where a producer passes its encoded messages; `false` back means nobody reads any more:
/// stop.
pub type Sink<'a> = dyn FnMut(Vec<u8>) -> bool + 'a;

/// A producer of a reply in pieces (see the module docs).
pub type Producer = Box<dyn FnOnce(&mut Sink<'_>) + Send + 'static>;

/// The pieces of one reply, in order; the stream ends when the producer is done.
#[derive(Debug)]
pub struct ReplyStream {
    rx: mpsc::Receiver<Vec<u8>>,
}

/// The process's producer slots.
fn slots() -> Arc<Semaphore> {
    static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    SLOTS
        .get_or_init(|| Arc::new(Semaphore::new(MAX_PRODUCERS)))
        .clone()
}

impl ReplyStream {
    /// Starts `produce` on a thread of its own: tokio's blocking pool, working only while it
    /// holds a producer slot, when called on a runtime; else a new thread, without slots.
    pub fn new(produce: Producer) -> ReplyStream {
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                let rt = h.clone();
                drop(h.spawn_blocking(move || {
                    // A blocking-pool thread may wait on the runtime (the semaphore is never
                    // closed, so a slot always comes).
                    let slot = || rt.block_on(slots().acquire_owned()).ok();
                    let mut held = slot();
                    produce(&mut |piece: Vec<u8>| {
                        held = None; // no slot while the session takes its time
                        let sent = tx.blocking_send(piece).is_ok();
                        if sent {
                            held = slot();
                        }
                        sent
                    });
                }));
            }
            Err(_) => {
                drop(std::thread::spawn(move || {
                    produce(&mut |piece: Vec<u8>| tx.blocking_send(piece).is_ok());
                }));
            }
        }
        ReplyStream { rx }
    }

    /// The next piece; `None` when the reply is complete. Cancel-safe (for `select!`).
    pub async fn next(&mut self) -> Option<Vec<u8>> {
        self.rx.recv().await
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

    /// A producer that waits for its session (nobody reads) holds no slot: with every other
    /// slot taken, another stream still gets one. (Were the slot kept while waiting, the
    /// second stream would never start and the bounded wait would fail.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_producer_waiting_for_its_session_holds_no_slot() {
        let wait = std::time::Duration::from_secs(30);
        let others = slots()
            .acquire_many_owned(MAX_PRODUCERS as u32 - 1)
            .await
            .unwrap();
        let unread = ReplyStream::new(counting(u8::MAX));
        // Bounded wait until its channel is full: it made all it may be ahead.
        for _ in 0..30_000 {
            if unread.rx.len() == IN_FLIGHT {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert_eq!(unread.rx.len(), IN_FLIGHT);
        let mut read = ReplyStream::new(counting(1));
        let piece = tokio::time::timeout(wait, read.next()).await;
        assert_eq!(piece.expect("a slot came"), Some(vec![0]));
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
