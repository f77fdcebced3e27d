//! Byte streams to and from controllers: TCP, TLS over TCP, and Unix sockets.
//!
//! [`connect`] opens an active target; [`Listener`] binds a passive one and accepts raw
//! connections, whose TLS handshake ([`Accepted::establish`]) runs in the connection's own
//! task so a slow client never holds up the accept loop.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::target::Target;
use crate::tls::TlsConfig;

/// A bidirectional byte stream to a controller.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// A boxed [`Stream`] of any transport.
pub type BoxStream = Box<dyn Stream>;

/// A transport that could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("controller target {target}: {problem}; {fix}")]
pub struct TransportError {
    /// The target, as text.
    pub target: String,
    /// What went wrong.
    pub problem: String,
    /// What to check.
    pub fix: &'static str,
}

impl TransportError {
    fn new(target: &Target, problem: impl Into<String>, fix: &'static str) -> TransportError {
        TransportError {
            target: target.to_string(),
            problem: problem.into(),
            fix,
        }
    }
}

const NEED_TLS: &str = "ssl: and pssl: targets need TLS files (CA certificate, certificate, key)";

/// Connects to an active target (`tcp:`, `ssl:` or `unix:`); returns the stream and the peer's
/// address as text. TLS handshakes are bounded by `timeout`.
pub async fn connect(
    target: &Target,
    tls: Option<&TlsConfig>,
    timeout: Duration,
) -> Result<(BoxStream, String), TransportError> {
    match target {
        Target::Active {
            host,
            port,
            tls: use_tls,
        } => {
            let tcp = TcpStream::connect((host.as_str(), *port))
                .await
                .map_err(|e| {
                    TransportError::new(
                        target,
                        format!("connect failed ({e})"),
                        "check that the controller runs and listens there",
                    )
                })?;
            // Small control messages must not wait for Nagle.
            tcp.set_nodelay(true).ok();
            let peer = tcp
                .peer_addr()
                .map_or_else(|_| target.to_string(), |a| a.to_string());
            if !use_tls {
                return Ok((Box::new(tcp), peer));
            }
            let tls = tls.ok_or_else(|| TransportError::new(target, "no TLS set-up", NEED_TLS))?;
            let name = ServerName::try_from(host.clone()).map_err(|e| {
                TransportError::new(
                    target,
                    format!("bad server name ({e})"),
                    "use a DNS name or IP",
                )
            })?;
            let connector = TlsConnector::from(tls.client.clone());
            let stream = tokio::time::timeout(timeout, connector.connect(name, tcp))
                .await
                .map_err(|_| TransportError::new(target, "TLS handshake timed out", TLS_FIX))?
                .map_err(|e| {
                    TransportError::new(target, format!("TLS handshake ({e})"), TLS_FIX)
                })?;
            Ok((Box::new(stream), peer))
        }
        Target::Unix(path) => {
            let s = UnixStream::connect(path).await.map_err(|e| {
                TransportError::new(
                    target,
                    format!("connect failed ({e})"),
                    "check the socket path",
                )
            })?;
            Ok((Box::new(s), path.display().to_string()))
        }
        Target::Passive { .. } | Target::PassiveUnix(_) => Err(TransportError::new(
            target,
            "a passive target cannot connect",
            "use tcp:, ssl: or unix: to connect out",
        )),
    }
}

const TLS_FIX: &str =
    "check that both sides' certificates are signed by the configured CA and that the controller's certificate names the host";

enum Pending {
    Ready(BoxStream),
    Tls(TcpStream, TlsAcceptor),
}

enum Inner {
    Tcp(TcpListener, Option<TlsAcceptor>),
    Unix(UnixListener, PathBuf),
}

/// A bound passive target.
pub struct Listener {
    inner: Inner,
    target: Target,
}

/// A connection accepted by a [`Listener`], before its TLS handshake.
pub struct Accepted {
    conn: Pending,
    /// The peer's address as text.
    pub peer: String,
}

impl Accepted {
    /// Finishes the connection (the TLS handshake for `pssl:`, bounded by `timeout`).
    pub async fn establish(self, timeout: Duration) -> io::Result<BoxStream> {
        let (tcp, acceptor) = match self.conn {
            Pending::Ready(s) => return Ok(s),
            Pending::Tls(tcp, acceptor) => (tcp, acceptor),
        };
        match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
            Ok(Ok(s)) => Ok(Box::new(s)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }
}

impl Listener {
    /// Binds a passive target (`ptcp:`, `pssl:` or `punix:`). A stale Unix socket file that
    /// nobody listens on is replaced.
    pub async fn bind(
        target: &Target,
        tls: Option<&TlsConfig>,
    ) -> Result<Listener, TransportError> {
        let inner = match target {
            Target::Passive {
                ip,
                port,
                tls: use_tls,
            } => {
                let acceptor = match (use_tls, tls) {
                    (false, _) => None,
                    (true, Some(t)) => Some(TlsAcceptor::from(t.server.clone())),
                    (true, None) => {
                        return Err(TransportError::new(target, "no TLS set-up", NEED_TLS))
                    }
                };
                let l = TcpListener::bind((ip.as_str(), *port)).await.map_err(|e| {
                    TransportError::new(
                        target,
                        format!("cannot listen ({e})"),
                        "pick a free port or stop whatever holds it",
                    )
                })?;
                Inner::Tcp(l, acceptor)
            }
            Target::PassiveUnix(path) => {
                if path.exists() && UnixStream::connect(path).await.is_err() {
                    std::fs::remove_file(path).ok();
                }
                let l = UnixListener::bind(path).map_err(|e| {
                    TransportError::new(
                        target,
                        format!("cannot listen ({e})"),
                        "check that the directory exists and no other switch uses the socket",
                    )
                })?;
                Inner::Unix(l, path.clone())
            }
            _ => {
                return Err(TransportError::new(
                    target,
                    "an active target cannot listen",
                    "use ptcp:, pssl: or punix: to listen",
                ))
            }
        };
        Ok(Listener {
            inner,
            target: target.clone(),
        })
    }

    /// The target this listener serves, with the actual port when it was bound to port 0.
    pub fn local_target(&self) -> Target {
        match (&self.inner, &self.target) {
            (Inner::Tcp(l, _), Target::Passive { ip, tls, .. }) => Target::Passive {
                ip: ip.clone(),
                port: l.local_addr().map_or(0, |a| a.port()),
                tls: *tls,
            },
            _ => self.target.clone(),
        }
    }

    /// Waits for the next connection.
    pub async fn accept(&self) -> io::Result<Accepted> {
        match &self.inner {
            Inner::Tcp(l, acceptor) => {
                let (tcp, addr) = l.accept().await?;
                tcp.set_nodelay(true).ok();
                let peer = addr.to_string();
                let conn = match acceptor {
                    Some(a) => Pending::Tls(tcp, a.clone()),
                    None => Pending::Ready(Box::new(tcp)),
                };
                Ok(Accepted { conn, peer })
            }
            Inner::Unix(l, path) => {
                let (s, _) = l.accept().await?;
                Ok(Accepted {
                    conn: Pending::Ready(Box::new(s)),
                    peer: path.display().to_string(),
                })
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Inner::Unix(_, path) = &self.inner {
            std::fs::remove_file(path).ok();
        }
    }
}
