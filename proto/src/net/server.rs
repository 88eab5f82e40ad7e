//! The server side: a swarm task that hands each inbound request to a [`Handler`] in
//! its own task and sends the answers back.

use std::sync::Arc;

use futures::StreamExt;
use libp2p::identity::Keypair;
use libp2p::request_response::{Event, Message, ProtocolSupport, ResponseChannel};
use libp2p::swarm::SwarmEvent;
use libp2p::{Multiaddr, PeerId, Swarm};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::{build_swarm, Behaviour, NetConfig, NetError};
use crate::codec::{Codec, FrameError};

/// Answers requests. Implemented by the storage node; called once per inbound request,
/// each call in its own task, possibly many at once.
#[async_trait::async_trait]
pub trait Handler<Req, Resp>: Send + Sync + 'static {
    /// Answers one request from `peer`. `request` is `Err` when the frame could not be
    /// read (too large, truncated, malformed CBOR: see [`FrameError`]); answer it with
    /// an error response, the connection stays up. Must not panic; if the call runs
    /// past [`NetConfig::request_timeout`] the answer is dropped and the client gets a
    /// timeout.
    async fn handle(&self, peer: PeerId, request: Result<Req, FrameError>) -> Resp;

    /// The response to send instead of one whose encoding is `len` bytes, over the
    /// limit `max` ([`crate::codec::Limits::max_response_bytes`]). The default,
    /// `None`, sends nothing (the client sees the stream end without a response);
    /// override it to return an error response.
    fn response_too_large(&self, len: u64, max: u64) -> Option<Resp> {
        let _ = (len, max);
        None
    }
}

/// A running server. Cheap to query; [`ServerHandle::shutdown`] or dropping it stops
/// the swarm task (open connections close; handler tasks still running finish, but
/// their answers are discarded).
#[derive(Debug)]
pub struct ServerHandle {
    peer_id: PeerId,
    addrs: watch::Receiver<Vec<Multiaddr>>,
    /// Peers with at least one open connection, kept by the swarm task.
    peers: Arc<std::sync::atomic::AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The server's peer id (from its keypair).
    pub fn peer_id(&self) -> PeerId {
        self.peer_id
    }

    /// The addresses the server listens on, as bound (e.g. the real port after
    /// `/tcp/0`). At least one once [`serve`] has returned.
    pub fn listen_addrs(&self) -> Vec<Multiaddr> {
        self.addrs.borrow().clone()
    }

    /// How many distinct peers have at least one open connection to the server now
    /// (updated by the swarm task on every connection opened or closed).
    pub fn connected_peers(&self) -> usize {
        self.peers.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The shared count behind [`ServerHandle::connected_peers`], for an exporter that
    /// reads it after the handle is moved (it stays 0 once the server stopped updating it).
    pub fn connected_peers_counter(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        self.peers.clone()
    }

    /// The first listen address with `/p2p/<peer id>` appended: what a client dials.
    pub fn dial_addr(&self) -> Option<Multiaddr> {
        self.listen_addrs()
            .into_iter()
            .next()
            .map(|a| a.with(libp2p::multiaddr::Protocol::P2p(self.peer_id)))
    }

    /// Stops the swarm task and waits for it to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "server task ended abnormally");
            }
        }
    }
}

/// Refuses a listen address whose TCP port something else already listens on.
///
/// libp2p-tcp sets `SO_REUSEADDR` and `SO_REUSEPORT` on every listening socket (it is
/// not configurable in libp2p-tcp 0.45), so on Linux a second process of the same
/// user could bind a port a running node holds, and the kernel would then split the
/// connections between the two. Before handing the address to libp2p this binds a
/// plain socket (no `SO_REUSEPORT`) to the same IP and port and drops it at once: that
/// bind fails with "address in use" whenever any listener already holds the port,
/// including another dpor-node. Port 0 (any free port) and non-TCP addresses are left
/// to libp2p. Two nodes started within the same few microseconds on one port could
/// both pass the probe; starting a node on a port already served is what this rules out.
///
/// # Errors
/// The reason, worded for the operator: `address in use (…)` with the OS error, or
/// the OS error of the bind.
fn ensure_port_free(listen: &Multiaddr) -> Result<(), String> {
    use libp2p::multiaddr::Protocol;
    use std::net::{IpAddr, SocketAddr};
    let mut ip: Option<IpAddr> = None;
    let mut port: Option<u16> = None;
    for p in listen.iter() {
        match p {
            Protocol::Ip4(a) => ip = Some(a.into()),
            Protocol::Ip6(a) => ip = Some(a.into()),
            Protocol::Tcp(p) => port = Some(p),
            _ => {}
        }
    }
    let (Some(ip), Some(port)) = (ip, port) else { return Ok(()) };
    if port == 0 {
        return Ok(());
    }
    match std::net::TcpListener::bind(SocketAddr::new(ip, port)) {
        Ok(probe) => {
            drop(probe);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(format!(
            "address in use: another program (or another dpor-node) already listens on port {port} ({e})"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Starts a server on `listen` (e.g. `/ip4/0.0.0.0/tcp/4001`, or `/tcp/0` for any
/// free port) with identity `keypair`, answering libp2p request-response requests on
/// `/dpor/1` with `handler`. Returns once at least one listen address is bound.
/// Needs a tokio runtime.
///
/// # Errors
/// [`NetError::Transport`] if the transport cannot be built, [`NetError::Listen`] if
/// the address cannot be bound (the port is in use, by another dpor-node too: the
/// reason starts `address in use`) or is not a TCP address.
pub async fn serve<Req, Resp, H>(
    keypair: Keypair,
    listen: Multiaddr,
    handler: Arc<H>,
    config: NetConfig,
) -> Result<ServerHandle, NetError>
where
    Req: Serialize + DeserializeOwned + Send + Sync + 'static,
    Resp: Serialize + DeserializeOwned + Send + Sync + 'static,
    H: Handler<Req, Resp>,
{
    let peer_id = keypair.public().to_peer_id();
    let fallback_handler = handler.clone();
    let codec =
        Codec::<Req, Resp>::new(config.limits).with_oversize_response(Arc::new(move |len, max| {
            fallback_handler.response_too_large(len, max)
        }));
    let mut swarm = build_swarm(keypair, codec, ProtocolSupport::Inbound, &config)?;
    let listen_err = |reason: String| NetError::Listen {
        addr: listen.to_string(),
        reason,
    };
    ensure_port_free(&listen).map_err(listen_err)?;
    swarm
        .listen_on(listen.clone())
        .map_err(|e| listen_err(super::error_chain(&e)))?;

    // Wait for the first bound address (or the listener's failure).
    let mut addrs = Vec::new();
    while addrs.is_empty() {
        match swarm.select_next_some().await {
            SwarmEvent::NewListenAddr { address, .. } => addrs.push(address),
            SwarmEvent::ListenerError { error, .. } => return Err(listen_err(super::error_chain(&error))),
            SwarmEvent::ListenerClosed { reason, .. } => {
                let reason = match reason {
                    Ok(()) => "the listener closed".to_string(),
                    Err(e) => super::error_chain(&e),
                };
                return Err(listen_err(reason));
            }
            _ => {}
        }
    }
    tracing::info!(%peer_id, ?addrs, "dpor server listening");

    let (addrs_tx, addrs_rx) = watch::channel(addrs);
    let (stop_tx, stop_rx) = oneshot::channel();
    let peers = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let task = tokio::spawn(run(swarm, handler, addrs_tx, peers.clone(), stop_rx));
    Ok(ServerHandle {
        peer_id,
        addrs: addrs_rx,
        peers,
        stop: Some(stop_tx),
        task: Some(task),
    })
}

/// An answer on its way back from a handler task to the swarm task.
type Answer<Resp> = (ResponseChannel<Resp>, Resp);

/// The server's event loop: the only code touching the swarm.
async fn run<Req, Resp, H>(
    mut swarm: Swarm<Behaviour<Req, Resp>>,
    handler: Arc<H>,
    addrs: watch::Sender<Vec<Multiaddr>>,
    peers: Arc<std::sync::atomic::AtomicUsize>,
    mut stop: oneshot::Receiver<()>,
) where
    Req: Serialize + DeserializeOwned + Send + Sync + 'static,
    Resp: Serialize + DeserializeOwned + Send + Sync + 'static,
    H: Handler<Req, Resp>,
{
    let (answer_tx, mut answer_rx) = mpsc::unbounded_channel::<Answer<Resp>>();
    loop {
        tokio::select! {
            // Stop on shutdown() or when the handle is dropped.
            _ = &mut stop => break,
            Some((channel, response)) = answer_rx.recv() => {
                if swarm.behaviour_mut().send_response(channel, response).is_err() {
                    tracing::debug!("response dropped: the request timed out or its connection closed");
                }
            }
            event = swarm.select_next_some() => match event {
                SwarmEvent::Behaviour(Event::Message {
                    peer,
                    message: Message::Request { request_id, request, channel },
                    ..
                }) => {
                    if let Err(e) = &request {
                        tracing::debug!(%peer, %request_id, error = %e, "bad inbound request");
                    }
                    let handler = handler.clone();
                    let answer_tx = answer_tx.clone();
                    tokio::spawn(async move {
                        let response = handler.handle(peer, request).await;
                        // Fails only if the server has stopped.
                        let _ = answer_tx.send((channel, response));
                    });
                }
                SwarmEvent::Behaviour(Event::InboundFailure { peer, request_id, error, .. }) => {
                    tracing::info!(%peer, %request_id, %error, "inbound request failed");
                }
                SwarmEvent::Behaviour(Event::ResponseSent { .. }) => {}
                SwarmEvent::Behaviour(Event::Message { message: Message::Response { .. }, .. })
                | SwarmEvent::Behaviour(Event::OutboundFailure { .. }) => {
                    tracing::debug!("unexpected outbound event on a server");
                }
                SwarmEvent::NewListenAddr { address, .. } => {
                    tracing::info!(%address, "listening");
                    addrs.send_modify(|a| a.push(address));
                }
                SwarmEvent::ExpiredListenAddr { address, .. } => {
                    addrs.send_modify(|a| a.retain(|x| x != &address));
                }
                SwarmEvent::ConnectionEstablished { peer_id, endpoint, .. } => {
                    tracing::debug!(%peer_id, addr = %endpoint.get_remote_address(), "connection opened");
                    peers.store(swarm.connected_peers().count(), std::sync::atomic::Ordering::Relaxed);
                }
                SwarmEvent::ConnectionClosed { peer_id, cause, .. } => {
                    tracing::debug!(%peer_id, ?cause, "connection closed");
                    peers.store(swarm.connected_peers().count(), std::sync::atomic::Ordering::Relaxed);
                }
                SwarmEvent::IncomingConnectionError { send_back_addr, error, .. } => {
                    tracing::debug!(%send_back_addr, %error, "incoming connection failed");
                }
                SwarmEvent::ListenerError { error, .. } => tracing::warn!(%error, "listener error"),
                _ => {}
            },
        }
    }
    tracing::info!(peer_id = %swarm.local_peer_id(), "dpor server stopped");
}
