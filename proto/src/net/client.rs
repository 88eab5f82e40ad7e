//! The client side: a cheap [`Client`] handle over a channel to its own swarm task.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use libp2p::identity::Keypair;
use libp2p::multiaddr::Protocol;
use libp2p::request_response::{Event, Message, OutboundRequestId, ProtocolSupport};
use libp2p::swarm::dial_opts::DialOpts;
use libp2p::swarm::SwarmEvent;
use libp2p::{Multiaddr, PeerId, Swarm};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::{build_swarm, Behaviour, NetConfig, NetError};
use crate::codec::Codec;

/// A request on its way to the swarm task, with where to send the outcome.
struct Command<Req, Resp> {
    request: Req,
    reply: oneshot::Sender<Result<Resp, NetError>>,
}

/// A connection to one dpor node, speaking libp2p request-response on `/dpor/1`.
///
/// Cheap to clone: clones share one swarm task and one connection (re-dialled on the
/// next request if it closed), over which concurrent requests run on separate
/// streams. The task stops when the last clone is dropped.
pub struct Client<Req, Resp> {
    peer: PeerId,
    local_peer: PeerId,
    commands: mpsc::Sender<Command<Req, Resp>>,
    connections: Arc<AtomicU64>,
    _types: PhantomData<fn() -> (Req, Resp)>,
}

impl<Req, Resp> Clone for Client<Req, Resp> {
    fn clone(&self) -> Self {
        Self {
            peer: self.peer,
            local_peer: self.local_peer,
            commands: self.commands.clone(),
            connections: self.connections.clone(),
            _types: PhantomData,
        }
    }
}

impl<Req, Resp> std::fmt::Debug for Client<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("peer", &self.peer)
            .field("local_peer", &self.local_peer)
            .finish_non_exhaustive()
    }
}

impl<Req, Resp> Client<Req, Resp>
where
    Req: Serialize + DeserializeOwned + Send + Sync + 'static,
    Resp: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// Connects to the node at `addr` (a TCP multiaddr, with or without
    /// `/p2p/<peer id>`; with it, the node's identity is checked) under a fresh random
    /// ed25519 identity. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`NetError::Dial`] if the connection fails or takes longer than
    /// [`NetConfig::connect_timeout`] (refused, unreachable, handshake, wrong peer id);
    /// [`NetError::Transport`] if the transport cannot be built.
    pub async fn connect(addr: Multiaddr, config: NetConfig) -> Result<Self, NetError> {
        Self::connect_with_identity(Keypair::generate_ed25519(), addr, config).await
    }

    /// Like [`Client::connect`] with the identity `keypair` (e.g. the owner's key).
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub async fn connect_with_identity(
        keypair: Keypair,
        addr: Multiaddr,
        config: NetConfig,
    ) -> Result<Self, NetError> {
        let local_peer = keypair.public().to_peer_id();
        let codec = Codec::<Req, Resp>::new(config.limits);
        let mut swarm = build_swarm(keypair, codec, ProtocolSupport::Outbound, &config)?;

        let expected = addr.iter().find_map(|p| match p {
            Protocol::P2p(id) => Some(id),
            _ => None,
        });
        let transport_addr: Multiaddr = addr
            .iter()
            .filter(|p| !matches!(p, Protocol::P2p(_)))
            .collect();
        let dial_err = |reason: String| NetError::Dial {
            addr: addr.to_string(),
            reason,
        };
        let opts = match expected {
            Some(peer) => DialOpts::peer_id(peer)
                .addresses(vec![transport_addr.clone()])
                .build(),
            None => DialOpts::unknown_peer_id()
                .address(transport_addr.clone())
                .build(),
        };
        swarm.dial(opts).map_err(|e| dial_err(e.to_string()))?;

        let connections = Arc::new(AtomicU64::new(0));
        let established = async {
            loop {
                match swarm.select_next_some().await {
                    SwarmEvent::ConnectionEstablished { peer_id, .. } => return Ok(peer_id),
                    SwarmEvent::OutgoingConnectionError { error, .. } => {
                        return Err(dial_err(error.to_string()))
                    }
                    _ => {}
                }
            }
        };
        let peer = tokio::time::timeout(config.connect_timeout, established)
            .await
            .map_err(|_| {
                dial_err(format!("no connection within {:?}", config.connect_timeout))
            })??;
        connections.fetch_add(1, Ordering::Relaxed);
        // Remembered for re-dialling after the connection idles out or drops.
        swarm.add_peer_address(peer, transport_addr);
        tracing::debug!(%peer, %addr, "connected");

        let (commands, rx) = mpsc::channel(64);
        tokio::spawn(run(
            swarm,
            peer,
            rx,
            connections.clone(),
            config.request_timeout,
        ));
        Ok(Self {
            peer,
            local_peer,
            commands,
            connections,
            _types: PhantomData,
        })
    }

    /// Sends `request` and waits for its response. Any number of requests may run at
    /// once (each on its own stream), up to [`NetConfig::max_concurrent_streams`].
    ///
    /// # Errors
    /// [`NetError::Timeout`] after [`NetConfig::request_timeout`];
    /// [`NetError::ConnectionClosed`] / [`NetError::Dial`] if the connection is lost
    /// and cannot be re-established; [`NetError::Frame`] if the request is over
    /// [`crate::codec::Limits::max_request_bytes`] or the response is too large,
    /// truncated or malformed; [`NetError::UnsupportedProtocol`]; [`NetError::Io`].
    pub async fn request(&self, request: Req) -> Result<Resp, NetError> {
        let (reply, outcome) = oneshot::channel();
        self.commands
            .send(Command { request, reply })
            .await
            .map_err(|_| NetError::Stopped)?;
        outcome.await.map_err(|_| NetError::Stopped)?
    }
}

impl<Req, Resp> Client<Req, Resp> {
    /// The node's peer id (checked during the Noise handshake).
    pub fn peer(&self) -> PeerId {
        self.peer
    }

    /// This client's own peer id.
    pub fn local_peer_id(&self) -> PeerId {
        self.local_peer
    }

    /// How many connections this client has opened to the node: 1, plus one per
    /// re-dial after the connection closed (diagnostics).
    pub fn connections_opened(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

/// The client's event loop: the only code touching its swarm.
async fn run<Req, Resp>(
    mut swarm: Swarm<Behaviour<Req, Resp>>,
    peer: PeerId,
    mut commands: mpsc::Receiver<Command<Req, Resp>>,
    connections: Arc<AtomicU64>,
    timeout: Duration,
) where
    Req: Serialize + DeserializeOwned + Send + Sync + 'static,
    Resp: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    let mut pending: HashMap<OutboundRequestId, oneshot::Sender<Result<Resp, NetError>>> =
        HashMap::new();
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(Command { request, reply }) => {
                    let id = swarm.behaviour_mut().send_request(&peer, Ok(request));
                    pending.insert(id, reply);
                }
                // Every Client clone is gone.
                None => break,
            },
            event = swarm.select_next_some() => match event {
                SwarmEvent::Behaviour(Event::Message {
                    message: Message::Response { request_id, response },
                    ..
                }) => {
                    if let Some(reply) = pending.remove(&request_id) {
                        let _ = reply.send(Ok(response));
                    }
                }
                SwarmEvent::Behaviour(Event::OutboundFailure { request_id, error, .. }) => {
                    tracing::debug!(%request_id, %error, "request failed");
                    if let Some(reply) = pending.remove(&request_id) {
                        let _ = reply.send(Err(NetError::from_outbound(error, timeout)));
                    }
                }
                SwarmEvent::ConnectionEstablished { peer_id, .. } => {
                    // A re-dial (the first connection was seen by `connect`).
                    connections.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%peer_id, "connection re-opened");
                }
                SwarmEvent::ConnectionClosed { peer_id, cause, .. } => {
                    tracing::debug!(%peer_id, ?cause, "connection closed");
                }
                _ => {}
            },
        }
    }
}
