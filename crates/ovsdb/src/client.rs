//! The connection to an OVSDB server on tokio: one task reads (answering the server's
//! `echo` keepalives itself, handing replies to their requests and `update` notifications
//! to the caller's channel), one writes. When the connection ends, pending requests fail
//! with [`ClientError::Closed`] and the update channel closes: the caller connects again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::rpc::{Decoder, Message, RpcError};
use crate::update::{self, TableUpdates};

/// Where the server is: `unix:PATH` or `tcp:HOST:PORT`.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A unix socket.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(String),
}

impl Target {
    /// Reads `unix:PATH` or `tcp:HOST:PORT`.
    pub fn parse(s: &str) -> Result<Target, ClientError> {
        match s.split_once(':') {
            Some(("unix", p)) if !p.is_empty() => Ok(Target::Unix(p.into())),
            Some(("tcp", a)) if a.contains(':') => Ok(Target::Tcp(a.to_string())),
            _ => Err(ClientError::Connect(format!(
                "'{s}' is not an OVSDB target; give unix:PATH (e.g. unix:/run/openvswitch/db.sock) or tcp:HOST:PORT"
            ))),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// What went wrong talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Could not connect.
    #[error("{0}")]
    Connect(String),
    /// The connection ended.
    #[error("the OVSDB connection closed")]
    Closed,
    /// The server answered with an error.
    #[error("OVSDB error: {0}")]
    Server(Value),
    /// The server sent something that is not OVSDB.
    #[error("{0}")]
    Rpc(#[from] RpcError),
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, ClientError>>>>>;

/// A connection. Dropping it closes the connection.
pub struct Client {
    out: mpsc::UnboundedSender<Vec<u8>>,
    pending: Pending,
    next_id: AtomicU64,
    tasks: [JoinHandle<()>; 2],
}

/// The monitors' changes, in order: `(monitor-id, changes)`.
pub type Updates = mpsc::UnboundedReceiver<(Value, TableUpdates)>;

impl Client {
    /// Connects to `target`; must run on a tokio runtime.
    pub async fn connect(target: &Target) -> Result<(Client, Updates), ClientError> {
        let err =
            |e: std::io::Error| ClientError::Connect(format!("cannot connect to {target}: {e}"));
        match target {
            Target::Unix(p) => {
                let (r, w) = tokio::net::UnixStream::connect(p)
                    .await
                    .map_err(err)?
                    .into_split();
                Ok(Self::start(r, w))
            }
            Target::Tcp(a) => {
                let s = tokio::net::TcpStream::connect(a).await.map_err(err)?;
                s.set_nodelay(true).ok();
                let (r, w) = s.into_split();
                Ok(Self::start(r, w))
            }
        }
    }

    /// Runs the protocol over any byte stream (tests use an in-memory pipe).
    pub fn start<R, W>(r: R, w: W) -> (Client, Updates)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out, out_rx) = mpsc::unbounded_channel();
        let (upd, updates) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let reader = tokio::spawn(read_loop(r, out.clone(), upd, pending.clone()));
        let writer = tokio::spawn(write_loop(w, out_rx));
        let client = Client {
            out,
            pending,
            next_id: AtomicU64::new(1),
            tasks: [reader, writer],
        };
        (client, updates)
    }

    /// Sends a request and waits for its result.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let msg = Message::Request {
            id: json!(id),
            method: method.to_string(),
            params,
        };
        self.out
            .send(msg.encode())
            .map_err(|_| ClientError::Closed)?;
        rx.await.map_err(|_| ClientError::Closed)?
    }

    /// `get_schema` of `db`.
    pub async fn get_schema(&self, db: &str) -> Result<Value, ClientError> {
        self.request("get_schema", json!([db])).await
    }

    /// Starts a monitor (parameters from [`crate::ops::monitor`]); returns its initial rows.
    pub async fn monitor(&self, params: Value) -> Result<TableUpdates, ClientError> {
        let v = self.request("monitor", params).await?;
        update::parse(&v).map_err(|e| ClientError::Server(json!(e.to_string())))
    }

    /// Runs a transaction (parameters from [`crate::ops::transact`]); an operation's error
    /// fails the whole call (the server has then applied none of them).
    pub async fn transact(&self, params: Value) -> Result<Vec<Value>, ClientError> {
        let v = self.request("transact", params).await?;
        let results = v.as_array().cloned().unwrap_or_default();
        if let Some(e) = results
            .iter()
            .find(|r| r.get("error").is_some_and(|e| !e.is_null()))
        {
            return Err(ClientError::Server(e.clone()));
        }
        Ok(results)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(mut w: W, mut rx: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(bytes) = rx.recv().await {
        if w.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut r: R,
    out: mpsc::UnboundedSender<Vec<u8>>,
    updates: mpsc::UnboundedSender<(Value, TableUpdates)>,
    pending: Pending,
) {
    let mut dec = Decoder::default();
    let mut buf = vec![0u8; 64 << 10];
    'read: loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        dec.push(&buf[..n]);
        loop {
            let msg = match dec.next_message() {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("OVSDB connection: {e}; closing it");
                    break 'read;
                }
            };
            if !handle(msg, &out, &updates, &pending) {
                break 'read;
            }
        }
    }
    // Dropping the pending senders fails their requests with Closed.
    pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Handles one message; false when the connection should close.
fn handle(
    msg: Message,
    out: &mpsc::UnboundedSender<Vec<u8>>,
    updates: &mpsc::UnboundedSender<(Value, TableUpdates)>,
    pending: &Pending,
) -> bool {
    match msg {
        Message::Request { id, method, params } => {
            let reply = if method == "echo" {
                Message::Response {
                    id,
                    result: params,
                    error: Value::Null,
                }
            } else {
                Message::Response {
                    id,
                    result: Value::Null,
                    error: json!("unknown method"),
                }
            };
            out.send(reply.encode()).is_ok()
        }
        Message::Notification { method, params } if method == "update" => {
            match update::parse_notification(&params) {
                Ok(u) => updates.send(u).is_ok(),
                Err(e) => {
                    tracing::warn!("OVSDB: {e}");
                    false
                }
            }
        }
        Message::Notification { .. } => true,
        Message::Response { id, result, error } => {
            let Some(id) = id.as_u64() else {
                return true;
            };
            let tx = pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            if let Some(tx) = tx {
                let r = if error.is_null() {
                    Ok(result)
                } else {
                    Err(ClientError::Server(error))
                };
                let _ = tx.send(r);
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};

    #[test]
    fn targets() {
        assert_eq!(
            Target::parse("unix:/run/openvswitch/db.sock").unwrap(),
            Target::Unix("/run/openvswitch/db.sock".into())
        );
        assert_eq!(
            Target::parse("tcp:127.0.0.1:6640").unwrap(),
            Target::Tcp("127.0.0.1:6640".into())
        );
        assert!(Target::parse("ptcp:6640").is_err());
        assert!(Target::parse("unix:").is_err());
    }

    /// A fake server on a pipe: answers the server's side of a golden exchange.
    #[tokio::test]
    async fn echo_requests_and_updates() {
        let (client_end, server_end) = tokio::io::duplex(1 << 16);
        let (cr, cw) = tokio::io::split(client_end);
        let (client, mut updates) = Client::start(cr, cw);
        let (sr, mut sw) = tokio::io::split(server_end);
        let server = tokio::spawn(async move {
            // The server's keepalive first; the client must answer it.
            sw.write_all(br#"{"id":"echo","method":"echo","params":[]}"#)
                .await
                .unwrap();
            let mut lines = BufReader::new(sr);
            let mut got = Vec::new();
            let mut dec = Decoder::default();
            let mut buf = [0u8; 4096];
            while got.len() < 2 {
                let n = lines.read(&mut buf).await.unwrap();
                dec.push(&buf[..n]);
                while let Some(m) = dec.next_message().unwrap() {
                    got.push(m);
                }
            }
            // The echo's reply and the transact request, in either order.
            let echo = Message::Response {
                id: json!("echo"),
                result: json!([]),
                error: Value::Null,
            };
            assert!(got.contains(&echo), "{got:?}");
            let Some(Message::Request { id, method, .. }) =
                got.iter().find(|m| matches!(m, Message::Request { .. }))
            else {
                panic!("{got:?}");
            };
            assert_eq!(method, "transact");
            let reply = format!(
                r#"{{"id":{id},"result":[{{}},{{"error":"constraint violation"}}],"error":null}}"#
            );
            sw.write_all(br#"{"id":null,"method":"update","params":["m",{"Bridge":{"u":{"new":{"name":"br0"}}}}]}"#)
                .await
                .unwrap();
            sw.write_all(reply.as_bytes()).await.unwrap();
            let _ = lines.fill_buf().await;
        });
        let r = client.transact(json!(["Open_vSwitch"])).await;
        assert!(matches!(r, Err(ClientError::Server(e)) if e["error"] == "constraint violation"));
        let (id, u) = updates.recv().await.unwrap();
        assert_eq!(id, json!("m"));
        assert_eq!(u["Bridge"]["u"].new.as_ref().unwrap()["name"], "br0");
        drop(client);
        server.await.unwrap();
    }
}
