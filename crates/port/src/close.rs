//! Closing AF_PACKET sockets off the caller's thread, several at once.
//!
//! Releasing an AF_PACKET socket waits for an RCU grace period (`synchronize_net` in the
//! kernel's `packet_release`), about 14 ms on the project's machines, and an AF_PACKET port
//! has about four sockets: a switch with 300 ports took 17 s to stop, closing them one after
//! another, and taking one port away cost its caller some 50 ms. A socket held in a
//! [`ClosingFd`] is closed, when dropped, by one of a few threads of this module, whose waits
//! overlap (waiters that overlap share grace periods); [`drain`] waits until every close
//! handed over so far is done — `hayate run` calls it before exiting, since the kernel would
//! otherwise close what is left at exit one after another.
//!
//! Size and owner: one process-wide set of [`THREADS`] threads, started on first use with the
//! CPU affinity of the process's main thread (the housekeeping cores under `hayate run`, never
//! a poll thread's, even when a poll thread drops the first socket); nothing per packet. If
//! the threads cannot be started, sockets are closed where they are dropped, as before.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// Threads that close sockets (idle ones cost a small stack each).
pub const THREADS: usize = 32;

/// A socket closed by this module's threads when dropped.
#[derive(Debug)]
pub struct ClosingFd(Option<OwnedFd>);

impl ClosingFd {
    /// Takes `fd` over.
    pub fn new(fd: OwnedFd) -> ClosingFd {
        ClosingFd(Some(fd))
    }
}

impl AsRawFd for ClosingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_ref().map_or(-1, |f| f.as_raw_fd())
    }
}

impl Drop for ClosingFd {
    fn drop(&mut self) {
        if let Some(fd) = self.0.take() {
            close_later(fd);
        }
    }
}

/// The threads' queue and the count of closes not yet done.
struct Closer {
    queue: Mutex<Sender<OwnedFd>>,
    pending: Mutex<usize>,
    idle: Condvar,
}

impl Closer {
    /// One close done.
    fn done(&self) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        *p = p.saturating_sub(1);
        if *p == 0 {
            self.idle.notify_all();
        }
    }
}

static CLOSER: OnceLock<Option<Arc<Closer>>> = OnceLock::new();

/// The closer, started on first use (`None`: its threads could not be started).
fn closer() -> Option<&'static Arc<Closer>> {
    CLOSER.get_or_init(start).as_ref()
}

fn start() -> Option<Arc<Closer>> {
    let (tx, rx) = channel::<OwnedFd>();
    let c = Arc::new(Closer {
        queue: Mutex::new(tx),
        pending: Mutex::new(0),
        idle: Condvar::new(),
    });
    let rx = Arc::new(Mutex::new(rx));
    let cpus = main_thread_cpus();
    let mut started = 0;
    for i in 0..THREADS {
        let (rx, c, cpus) = (rx.clone(), c.clone(), cpus);
        let t = std::thread::Builder::new()
            .name(format!("close-{i}"))
            .stack_size(64 << 10)
            .spawn(move || run(&rx, &c, cpus));
        started += t.is_ok() as usize;
    }
    (started > 0).then_some(c)
}

/// One closing thread: on the main thread's cores, it closes what it is handed.
fn run(rx: &Mutex<Receiver<OwnedFd>>, c: &Closer, cpus: Option<libc::cpu_set_t>) {
    if let Some(set) = cpus {
        // SAFETY: `set` is a valid cpu_set_t; 0 names this thread. A failure leaves the
        // thread where it was started, which only matters for where it runs.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    }
    loop {
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match next {
            Ok(fd) => {
                drop(fd);
                c.done();
            }
            Err(_) => return,
        }
    }
}

/// The CPU affinity of the process's main thread (whose thread id is the process id).
fn main_thread_cpus() -> Option<libc::cpu_set_t> {
    // SAFETY: an all-zero cpu_set_t is valid; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let r = libc::sched_getaffinity(
            libc::getpid(),
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        );
        (r == 0).then_some(set)
    }
}

/// Closes `fd` on one of the closing threads (here, when they cannot be started).
pub fn close_later(fd: OwnedFd) {
    let Some(c) = closer() else {
        drop(fd);
        return;
    };
    *c.pending.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    let sent = c.queue.lock().unwrap_or_else(|e| e.into_inner()).send(fd);
    if let Err(e) = sent {
        drop(e.0);
        c.done();
    }
}

/// Waits until every close handed over so far is done.
pub fn drain() {
    let Some(Some(c)) = CLOSER.get() else {
        return;
    };
    let mut p = c.pending.lock().unwrap_or_else(|e| e.into_inner());
    while *p > 0 {
        p = c.idle.wait(p).unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::FromRawFd;

    /// A pipe: (read end as a file, write end).
    fn pipe() -> (std::fs::File, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fds[0] is open; O_NONBLOCK makes a read of an open pipe fail at once.
        assert_eq!(
            unsafe { libc::fcntl(fds[0], libc::F_SETFL, libc::O_NONBLOCK) },
            0
        );
        // SAFETY: pipe(2) just opened both; each is owned once.
        unsafe {
            (
                std::fs::File::from_raw_fd(fds[0]),
                OwnedFd::from_raw_fd(fds[1]),
            )
        }
    }

    #[test]
    fn a_dropped_descriptor_is_closed_once_drain_returns() {
        let ends: Vec<_> = (0..50).map(|_| pipe()).collect();
        let mut readers = Vec::new();
        for (r, w) in ends {
            let w = ClosingFd::new(w);
            assert!(w.as_raw_fd() >= 0);
            drop(w);
            readers.push(r);
        }
        drain();
        // Every write end is closed: each read end sees end-of-file, not "would block"
        // (an error).
        for mut r in readers {
            let mut b = [0u8; 1];
            assert_eq!(r.read(&mut b).expect("read"), 0);
        }
    }
}
