//! The port's protocol thread: one connection at a time to the front end, made again when
//! it ends.
//!
//! - `mode=client` (the default, as Open vSwitch's `dpdkvhostuserclient`): the VM's QEMU (or
//!   virtio-user) owns the socket; the thread connects, and when the connection ends (the
//!   VM or the switch restarted) it connects again every 100 ms until it succeeds, so either
//!   side can restart under the other.
//! - `mode=server`: the switch creates the socket and accepts one front end at a time; the
//!   file goes when the port does.
//!
//! Each connection starts from a fresh device ([`DeviceState`]); when it ends every ring is
//! stopped and the guest's memory unmapped. A message the device refuses (a bad memory
//! table, an unknown vring) is answered with an error and the session goes on; a broken
//! socket or a message that cannot be framed ends it.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vhost::vhost_user::{BackendReqHandler, Error};

use super::backend::DeviceState;
use super::Shared;

/// How often a client tries to connect, and how often a server looks at its stop flag.
const RETRY: Duration = Duration::from_millis(100);

/// Where the thread finds its front end.
pub(super) enum Endpoint {
    /// Connect to this path.
    Client(PathBuf),
    /// Accept on this listener.
    Server(UnixListener),
}

/// What the port keeps to stop its thread.
#[derive(Default)]
pub(super) struct Control {
    /// Set to stop the thread.
    pub stop: AtomicBool,
    /// The current connection, shut down to end a session the thread is blocked in.
    pub stream: Mutex<Option<UnixStream>>,
}

impl Control {
    /// Stops the thread: sets the flag and shuts the current connection down.
    pub fn shut(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = self.stream.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Runs sessions until `ctl.stop` is set.
pub(super) fn run(endpoint: Endpoint, shared: Arc<Shared>, ctl: Arc<Control>) {
    let name = shared.name.clone();
    let mut said_waiting = false;
    while !ctl.stop.load(Ordering::SeqCst) {
        let stream = match &endpoint {
            Endpoint::Client(path) => match UnixStream::connect(path) {
                Ok(s) => s,
                Err(e) => {
                    if !said_waiting {
                        tracing::info!(
                            "vhost-user port {name}: waiting for the VM's socket {} ({e})",
                            path.display()
                        );
                        said_waiting = true;
                    }
                    std::thread::sleep(RETRY);
                    continue;
                }
            },
            Endpoint::Server(l) => match accept(l) {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!("vhost-user port {name}: accept failed: {e}");
                    std::thread::sleep(RETRY);
                    continue;
                }
            },
        };
        said_waiting = false;
        if let Ok(c) = stream.try_clone() {
            *ctl.stream.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
        }
        if ctl.stop.load(Ordering::SeqCst) {
            break;
        }
        tracing::info!("vhost-user port {name}: front end connected");
        let device = Arc::new(Mutex::new(DeviceState::new(shared.clone())));
        let peek_fd = stream.as_raw_fd();
        let mut handler = BackendReqHandler::from_stream(stream, device.clone());
        loop {
            // QEMU enables a queue pair's rings before it sends the features, which the
            // `vhost` crate refuses (rings may be enabled only once protocol features are
            // acked); the device takes note of such an enable itself.
            let early = match peek_vring_enable(peek_fd) {
                Some((index, on)) => device
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .early_enable(index, on),
                None => false,
            };
            match handler.handle_request() {
                Ok(()) => {}
                Err(Error::InactiveFeature(_)) if early => {}
                Err(e) if refused_request(&e) => {
                    shared.count_protocol_error();
                    tracing::warn!("vhost-user port {name}: request refused: {e}");
                }
                Err(e) => {
                    if !matches!(e, Error::Disconnected | Error::PartialMessage) {
                        shared.count_protocol_error();
                        tracing::warn!("vhost-user port {name}: session ended: {e}");
                    }
                    break;
                }
            }
        }
        device
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .disconnected();
        *ctl.stream.lock().unwrap_or_else(|e| e.into_inner()) = None;
        tracing::info!("vhost-user port {name}: front end disconnected");
        if matches!(endpoint, Endpoint::Client(_)) && !ctl.stop.load(Ordering::SeqCst) {
            std::thread::sleep(RETRY);
        }
    }
}

/// The request code of SET_VRING_ENABLE.
const SET_VRING_ENABLE: u32 = 18;

/// Looks at the next message on `fd` without taking it: `(vring, enable)` when it is
/// SET_VRING_ENABLE. Blocks until a header (12 bytes) is there; reads the 8-byte body only
/// for that request, whose body is sent with its header.
fn peek_vring_enable(fd: std::os::fd::RawFd) -> Option<(u32, bool)> {
    let mut b = [0u8; 20];
    let peek = |len: usize, b: &mut [u8; 20]| {
        // SAFETY: a peek of at most 20 bytes into a local buffer on our socket.
        let n = unsafe {
            libc::recv(
                fd,
                b.as_mut_ptr().cast(),
                len,
                libc::MSG_PEEK | libc::MSG_WAITALL,
            )
        };
        n == len as isize
    };
    if !peek(12, &mut b) {
        return None;
    }
    let code = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let size = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
    if code != SET_VRING_ENABLE || size != 8 || !peek(20, &mut b) {
        return None;
    }
    let index = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
    let num = u32::from_le_bytes([b[16], b[17], b[18], b[19]]);
    Some((index, num != 0))
}

/// Errors after which the session goes on: the device said no to one request, which was read
/// whole and answered.
fn refused_request(e: &Error) -> bool {
    matches!(
        e,
        Error::InvalidParam
            | Error::InvalidOperation(_)
            | Error::InactiveFeature(_)
            | Error::InactiveOperation(_)
            | Error::FeatureMismatch
            | Error::ReqHandlerError(_)
            | Error::BackendInternalError
    )
}

/// Waits up to [`RETRY`] for a connection on non-blocking listener `l`.
fn accept(l: &UnixListener) -> io::Result<Option<UnixStream>> {
    let mut pfd = libc::pollfd {
        fd: l.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call.
    let r = unsafe { libc::poll(&mut pfd, 1, RETRY.as_millis() as i32) };
    if r <= 0 {
        return Ok(None);
    }
    match l.accept() {
        Ok((s, _)) => {
            s.set_nonblocking(false)?;
            Ok(Some(s))
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}
