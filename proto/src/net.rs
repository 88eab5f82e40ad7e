//! The libp2p transport of dpor: TCP + Noise + Yamux carrying libp2p
//! request-response on protocol [`/dpor/1`](crate::codec::PROTOCOL), with the
//! length-prefixed CBOR frames of [`crate::codec`].
//!
//! As in rust-libp2p's `file-sharing` example, each [`libp2p::Swarm`] lives in one
//! event-loop task; the rest of the program holds a cheap handle:
//!
//! - [`serve`] starts a node: every inbound request is given to a [`Handler`] in its
//!   own task (a slow request never blocks others), and its answer goes back to the
//!   swarm task over a channel. [`ServerHandle`] reports the bound addresses and
//!   stops the loop on [`ServerHandle::shutdown`] or drop.
//! - [`Client::connect`] dials a node; [`Client::request`] sends one request and
//!   awaits its response. Clones share one swarm task and one connection, over which
//!   concurrent requests run on separate streams.
//! - [`load_or_create_keypair`] keeps a node's ed25519 identity in a file.
//!
//! Nothing a peer sends can make this module panic; every failure is a [`NetError`].

use std::time::Duration;

use libp2p::identity::Keypair;
use libp2p::request_response::{self, OutboundFailure, ProtocolSupport};
use libp2p::{noise, tcp, yamux, Swarm, SwarmBuilder};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{Codec, FrameError, Limits, PROTOCOL};

mod client;
mod keys;
mod server;

pub use client::Client;
pub use keys::load_or_create_keypair;
pub use server::{serve, Handler, ServerHandle};

pub use libp2p::{Multiaddr, PeerId};

/// Settings of a server or client. `Default` suits production; tests shorten the
/// timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetConfig {
    /// Frame body limits, in bytes (default 8 MiB each way). A client and the node it
    /// talks to should agree on them.
    pub limits: Limits,
    /// How long one request may take, from opening its stream to the end of the
    /// response, on both sides (default 300 s: the node may build a whole erasure
    /// code inside one request). On expiry the client gets [`NetError::Timeout`].
    pub request_timeout: Duration,
    /// How long a connection with no open stream stays up (default 120 s). A client
    /// whose connection closed re-dials on its next request.
    pub idle_connection_timeout: Duration,
    /// How long [`Client::connect`] waits for the connection (default 30 s).
    pub connect_timeout: Duration,
    /// Streams (in-flight requests, both directions) per connection (default 256).
    /// Inbound streams over this are refused by libp2p.
    pub max_concurrent_streams: usize,
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            request_timeout: Duration::from_secs(300),
            idle_connection_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(30),
            max_concurrent_streams: 256,
        }
    }
}

/// A network failure, worded for the people who will read it (CLI users, node logs).
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The address cannot be used (e.g. not a TCP multiaddr).
    #[error("invalid address {addr}: {reason}")]
    Address {
        /// The address given.
        addr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Listening on the address failed.
    #[error("could not listen on {addr}: {reason}")]
    Listen {
        /// The address given.
        addr: String,
        /// The underlying failure.
        reason: String,
    },
    /// Connecting to the peer failed (refused, unreachable, wrong peer id, handshake).
    #[error("could not connect to {addr}: {reason}")]
    Dial {
        /// The address dialled.
        addr: String,
        /// The underlying failure.
        reason: String,
    },
    /// No response within the configured request timeout (the peer may or may not
    /// have processed the request).
    #[error(
        "no response within {0:?}: the request timed out (the node may still be working on it)"
    )]
    Timeout(Duration),
    /// The connection closed before the response arrived (the peer may or may not
    /// have processed the request).
    #[error("the connection closed before a response arrived")]
    ConnectionClosed,
    /// The peer does not speak `/dpor/1`.
    #[error("the peer does not support the dpor protocol /dpor/1")]
    UnsupportedProtocol,
    /// A frame could not be sent or received (too large, truncated, malformed).
    #[error("{0}")]
    Frame(#[from] FrameError),
    /// An I/O failure on the stream or a file.
    #[error("network I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The node's key file cannot be read, parsed or written.
    #[error("key file {path}: {reason}")]
    Key {
        /// The key file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Building the libp2p transport failed.
    #[error("could not set up the libp2p transport: {0}")]
    Transport(String),
    /// The network task has stopped (shut down, or its runtime ended).
    #[error("the network task has stopped")]
    Stopped,
}

impl NetError {
    /// Maps libp2p's outbound failure, recovering a [`FrameError`] from I/O errors.
    fn from_outbound(error: OutboundFailure, timeout: Duration) -> Self {
        match error {
            OutboundFailure::DialFailure => NetError::Dial {
                addr: "the peer".into(),
                reason: "re-dialling the peer failed".into(),
            },
            OutboundFailure::Timeout => NetError::Timeout(timeout),
            OutboundFailure::ConnectionClosed => NetError::ConnectionClosed,
            OutboundFailure::UnsupportedProtocols => NetError::UnsupportedProtocol,
            OutboundFailure::Io(e) => match FrameError::from_io(&e) {
                Some(frame) => NetError::Frame(frame.clone()),
                None => NetError::Io(e),
            },
        }
    }
}

/// `error` and its chain of sources, joined by ": ". libp2p's transport errors print
/// nothing themselves (`TransportError::Other`) and keep the cause (e.g. the OS error)
/// as their source, so printing only the top error loses it.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() && parts.last() != Some(&text) {
            parts.push(text);
        }
        next = e.source();
    }
    if parts.is_empty() {
        "unknown error".to_string()
    } else {
        parts.join(": ")
    }
}

/// The swarm behaviour: request-response with the `/dpor/1` codec.
type Behaviour<Req, Resp> = request_response::Behaviour<Codec<Req, Resp>>;

/// Builds a tokio swarm (TCP + Noise + Yamux) with the request-response behaviour.
fn build_swarm<Req, Resp>(
    keypair: Keypair,
    codec: Codec<Req, Resp>,
    support: ProtocolSupport,
    config: &NetConfig,
) -> Result<Swarm<Behaviour<Req, Resp>>, NetError>
where
    Req: Serialize + DeserializeOwned + Send + 'static,
    Resp: Serialize + DeserializeOwned + Send + 'static,
{
    let rr_config = request_response::Config::default()
        .with_request_timeout(config.request_timeout)
        .with_max_concurrent_streams(config.max_concurrent_streams);
    let behaviour =
        request_response::Behaviour::with_codec(codec, [(PROTOCOL, support)], rr_config);
    let idle = config.idle_connection_timeout;
    let max_streams = config.max_concurrent_streams;
    let swarm = SwarmBuilder::with_existing_identity(keypair)
        .with_tokio()
        .with_tcp(
            tcp::Config::default().nodelay(true),
            noise::Config::new,
            move || {
                let mut yamux = yamux::Config::default();
                // Leave room above the request-response limit so that limit decides.
                yamux.set_max_num_streams(max_streams.saturating_add(16));
                yamux
            },
        )
        .map_err(|e| NetError::Transport(e.to_string()))?
        .with_behaviour(|_| behaviour)
        .map_err(|e| NetError::Transport(format!("{e:?}")))?
        .with_swarm_config(|c| c.with_idle_connection_timeout(idle))
        .build();
    Ok(swarm)
}
