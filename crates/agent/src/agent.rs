//! One bridge's agent: a task per target plus the connectivity monitor.
//!
//! Active targets get a connector task that connects, runs the session, and after it ends
//! waits the backoff delay and tries again. Passive targets get a listener task that accepts
//! any number of controllers, each in its own task (owned by the listener, so stopping the
//! listener stops them). Nothing here runs a thread of its own: every task sleeps on its
//! socket, its queue or one timer, so thousands of idle bridges cost next to nothing.

use std::sync::Arc;

use tokio::task::{JoinHandle, JoinSet};

use crate::admission::Admission;
use crate::bridge::{AsyncKind, Bridge};
use crate::config::AgentConfig;
use crate::connectivity::{self, FailMode};
use crate::registry::{ConnInfo, Delivery, Registry};
use crate::session;
use crate::target::Target;
use crate::transport::{self, Listener, TransportError};
use crate::ConnId;

/// A running agent; dropping it stops every connection of the bridge.
pub struct Agent {
    registry: Arc<Registry>,
    tasks: Vec<JoinHandle<()>>,
    listening: Vec<Target>,
    fail_mode: FailMode,
}

/// Sends asynchronous messages to a bridge's controllers; cheap to clone, usable from any
/// thread, never waits.
#[derive(Clone)]
pub struct AsyncSender {
    registry: Arc<Registry>,
}

impl AsyncSender {
    /// Queues `msg` (a whole encoded message) for every controller whose role receives
    /// `kind`; packet-ins are subject to each controller's rate limit. What could not be
    /// queued is dropped and counted, never buffered without bound.
    pub fn send(&self, kind: AsyncKind, msg: &[u8]) -> Delivery {
        self.registry.send_async(kind, msg)
    }

    /// Queues `msg` for controller `conn` alone, e.g. a reply the bridge finished after
    /// [`Bridge::handle`] returned. All-zero [`Delivery`] when that controller is gone.
    pub fn send_to(&self, conn: ConnId, msg: &[u8]) -> Delivery {
        self.registry.send_to(conn, msg)
    }
}

impl Agent {
    /// Starts serving `config.targets` for `bridge` on the current tokio runtime. Passive
    /// targets are bound before this returns, so their errors (port in use, missing TLS
    /// set-up) come back here; active targets retry forever in the background.
    pub async fn start(
        config: AgentConfig,
        bridge: Arc<dyn Bridge>,
    ) -> Result<Agent, TransportError> {
        let (registry, connected) = Registry::new(bridge, config.packet_in_limit, config.queue_len);
        let config = Arc::new(config);
        // A TLS target without a TLS set-up could never work: say so before starting anything.
        if let Some(t) = config
            .targets
            .iter()
            .find(|t| t.is_tls() && config.tls.is_none())
        {
            return Err(TransportError {
                target: t.to_string(),
                problem: "no TLS set-up".into(),
                fix: "ssl: and pssl: targets need TLS files (CA certificate, certificate, key)",
            });
        }
        let mut listeners = Vec::new();
        for target in config.targets.iter().filter(|t| t.is_passive()) {
            listeners.push(Listener::bind(target, config.tls.as_ref()).await?);
        }
        let listening = listeners.iter().map(Listener::local_target).collect();
        let mut tasks = Vec::new();
        let bridge = registry.bridge.clone();
        tasks.push(tokio::spawn(connectivity::monitor(
            connected,
            config.fail_open_delay,
            move |event| bridge.on_connectivity(event),
        )));
        for listener in listeners {
            tasks.push(tokio::spawn(serve_listener(
                registry.clone(),
                config.clone(),
                listener,
            )));
        }
        for target in config.targets.iter().filter(|t| !t.is_passive()) {
            tasks.push(tokio::spawn(connect_loop(
                registry.clone(),
                config.clone(),
                target.clone(),
            )));
        }
        Ok(Agent {
            registry,
            tasks,
            listening,
            fail_mode: config.fail_mode,
        })
    }

    /// A sender of asynchronous messages.
    pub fn sender(&self) -> AsyncSender {
        AsyncSender {
            registry: self.registry.clone(),
        }
    }

    /// The connected controllers (HELLO done), by id.
    pub fn connections(&self) -> Vec<ConnInfo> {
        self.registry.connections()
    }

    /// The passive targets as bound (with the real port when 0 was asked for).
    pub fn listening(&self) -> &[Target] {
        &self.listening
    }

    /// The configured fail mode.
    pub fn fail_mode(&self) -> FailMode {
        self.fail_mode
    }

    /// Stops every task and connection of this agent.
    pub fn shutdown(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn connect_loop(registry: Arc<Registry>, config: Arc<AgentConfig>, target: Target) {
    let probe = config.probe_interval;
    let mut delay = config.backoff.min;
    loop {
        let connected = tokio::time::timeout(
            probe,
            transport::connect(&target, config.tls.as_ref(), probe),
        )
        .await;
        match connected {
            Ok(Ok((stream, peer))) => {
                let outcome = session::run(&registry, stream, &target, &peer, probe, None).await;
                tracing::info!(conn = outcome.id.0, %target, "controller session ended: {}", outcome.end);
                if outcome.negotiated {
                    delay = config.backoff.min;
                }
            }
            Ok(Err(e)) => tracing::warn!("{e}"),
            Err(_) => tracing::warn!(%target, "connect timed out after the probe interval"),
        }
        tokio::time::sleep(delay).await;
        delay = config.backoff.next(delay);
    }
}

async fn serve_listener(registry: Arc<Registry>, config: Arc<AgentConfig>, listener: Listener) {
    let target = listener.local_target();
    let probe = config.probe_interval;
    let mut sessions = JoinSet::new();
    let mut admission = Admission::new(config.limits);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => {
                    let admitted = match admission.admit(&accepted.peer) {
                        Ok(a) => a,
                        Err(e) => {
                            // Dropping the connection closes it.
                            tracing::warn!(%target, peer = accepted.peer, "connection refused: {e}");
                            continue;
                        }
                    };
                    let registry = registry.clone();
                    let target = target.clone();
                    let peer = accepted.peer.clone();
                    let activity = admitted.activity.clone();
                    let handle = sessions.spawn(async move {
                        let _slot = admitted.slot;
                        let peer = accepted.peer.clone();
                        match accepted.establish(probe).await {
                            Ok(stream) => {
                                let o = session::run(&registry, stream, &target, &peer, probe, Some(&admitted.activity)).await;
                                tracing::info!(conn = o.id.0, %target, peer, "controller session ended: {}", o.end);
                            }
                            Err(e) => tracing::warn!(%target, peer, "TLS handshake failed: {e}"),
                        }
                    });
                    admission.track(&peer, activity, handle);
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(%target, "accept failed: {e}");
                    tokio::time::sleep(config.backoff.min).await;
                }
            },
            Some(done) = sessions.join_next_with_id() => {
                let id = match &done {
                    Ok((id, ())) => *id,
                    Err(e) => e.id(),
                };
                admission.ended(id);
            }
        }
    }
}
