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

use tokio::sync::mpsc;

/// Pieces a producer may be ahead of the session.
pub const IN_FLIGHT: usize = 4;

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

impl ReplyStream {
    /// Starts `produce` on a thread of its own: tokio's blocking pool when called on a
    /// runtime, else a new thread.
    pub fn spawn(produce: Producer) -> ReplyStream {
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let run = move || produce(&mut |piece: Vec<u8>| tx.blocking_send(piece).is_ok());
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(run)),
            Err(_) => drop(std::thread::spawn(run)),
        }
        ReplyStream { rx }
    }

    /// The next piece; `None` when the reply is complete.
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
        let mut s = ReplyStream::spawn(counting(10));
        let mut got = Vec::new();
        while let Some(p) = s.next().await {
            got.extend(p);
        }
        assert_eq!(got, (0..10).collect::<Vec<u8>>());
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
        let mut s = ReplyStream::spawn(produce);
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
