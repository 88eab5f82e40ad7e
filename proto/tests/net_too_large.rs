//! An oversized request over real libp2p (loopback TCP + Noise + Yamux), sent by a
//! client that behaves like js-libp2p: it writes its whole request, closes its write
//! side, and only then reads the answer; a failed write is a failed request (no
//! attempt to read an answer that may be buffered). The server must answer `TooLarge`
//! and let the client finish sending, so the answer always arrives.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dpor_proto::codec::{
    decode_body, encode_frame, read_frame, FrameError, Limits, MAX_FRAME_BYTES, PROTOCOL,
};
use dpor_proto::net::{serve, Handler, NetConfig, PeerId};
use futures::{AsyncRead, AsyncWrite, AsyncWriteExt, StreamExt};
use libp2p::identity::Keypair;
use libp2p::request_response::{self, Event, Message, ProtocolSupport};
use libp2p::swarm::SwarmEvent;
use libp2p::{noise, tcp, yamux, StreamProtocol, Swarm, SwarmBuilder};
use serde::{Deserialize, Serialize};

/// The server's request limit in these tests, in bytes: small, so that an oversized
/// body is still several times the Yamux stream window (256 KiB) a server that stops
/// reading would leave the client blocked in.
const SERVER_LIMIT: u64 = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Req {
    Echo(u64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Resp {
    Echo(u64),
    TooLarge { got: u64, max: u64 },
    Error(String),
}

/// Answers `Echo`, and every frame error as the node does (an error response).
#[derive(Default)]
struct EchoHandler {
    too_large: Mutex<u64>,
}

#[async_trait::async_trait]
impl Handler<Req, Resp> for EchoHandler {
    async fn handle(&self, _peer: PeerId, request: Result<Req, FrameError>) -> Resp {
        match request {
            Ok(Req::Echo(n)) => Resp::Echo(n),
            Err(FrameError::TooLarge { got, max }) => {
                *self.too_large.lock().unwrap() += 1;
                Resp::TooLarge { got, max }
            }
            Err(e) => Resp::Error(e.to_string()),
        }
    }
}

/// A request-response codec that sends raw frame bytes and, like js-libp2p's stream
/// API, fails the request when the write fails.
#[derive(Clone, Default)]
struct StrictCodec;

impl request_response::Codec for StrictCodec {
    type Protocol = StreamProtocol;
    /// The whole frame (prefix and body), as the client means to send it.
    type Request = Vec<u8>;
    type Response = Resp;

    async fn read_request<T>(&mut self, _: &StreamProtocol, _: &mut T) -> io::Result<Vec<u8>>
    where
        T: AsyncRead + Unpin + Send,
    {
        Err(io::Error::other("a client only"))
    }

    async fn read_response<T>(&mut self, _: &StreamProtocol, io: &mut T) -> io::Result<Resp>
    where
        T: AsyncRead + Unpin + Send,
    {
        read_frame(io, MAX_FRAME_BYTES)
            .await?
            .and_then(|body| decode_body(&body))
            .map_err(FrameError::into_io)
    }

    async fn write_request<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        frame: Vec<u8>,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        io.write_all(&frame).await?;
        io.flush().await
    }

    async fn write_response<T>(&mut self, _: &StreamProtocol, _: &mut T, _: Resp) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        Err(io::Error::other("a client only"))
    }
}

/// A frame whose prefix declares `len` body bytes, followed by all of them.
fn raw_frame(len: usize, fill: u8) -> Vec<u8> {
    let mut v = u32::try_from(len).unwrap().to_be_bytes().to_vec();
    v.resize(4 + len, fill);
    v
}

/// The outcome of the one request in flight on `swarm`: its answer, or why it failed.
async fn next_answer(
    swarm: &mut Swarm<request_response::Behaviour<StrictCodec>>,
) -> Result<Resp, String> {
    loop {
        match swarm.select_next_some().await {
            SwarmEvent::Behaviour(Event::Message {
                message: Message::Response { response, .. },
                ..
            }) => return Ok(response),
            SwarmEvent::Behaviour(Event::OutboundFailure { error, .. }) => {
                return Err(error.to_string())
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_is_answered_too_large_every_time_to_a_client_that_sends_it_all() {
    let handler = Arc::new(EchoHandler::default());
    let config = NetConfig {
        limits: Limits {
            max_request_bytes: SERVER_LIMIT,
            max_response_bytes: MAX_FRAME_BYTES,
        },
        ..NetConfig::default()
    };
    let server = serve(
        Keypair::generate_ed25519(),
        "/ip4/127.0.0.1/tcp/0".parse().unwrap(),
        handler.clone(),
        config,
    )
    .await
    .unwrap();
    let addr = server.dial_addr().unwrap();

    let behaviour = request_response::Behaviour::with_codec(
        StrictCodec,
        [(PROTOCOL, ProtocolSupport::Outbound)],
        request_response::Config::default().with_request_timeout(Duration::from_secs(120)),
    );
    let mut swarm = SwarmBuilder::with_new_identity()
        .with_tokio()
        .with_tcp(
            tcp::Config::default(),
            noise::Config::new,
            yamux::Config::default,
        )
        .unwrap()
        .with_behaviour(|_| behaviour)
        .unwrap()
        .with_swarm_config(|c| c.with_idle_connection_timeout(Duration::from_secs(120)))
        .build();
    swarm.dial(addr).unwrap();
    let peer = server.peer_id();
    loop {
        match swarm.select_next_some().await {
            SwarmEvent::ConnectionEstablished { peer_id, .. } if peer_id == peer => break,
            SwarmEvent::OutgoingConnectionError { error, .. } => panic!("dial: {error}"),
            _ => {}
        }
    }

    // 1 MiB bodies (16 times the limit, 4 times the stream window), one at a time.
    const ROUNDS: u64 = 50;
    let body = 1 << 20;
    let mut answers = Vec::new();
    for round in 0..ROUNDS {
        swarm
            .behaviour_mut()
            .send_request(&peer, raw_frame(body, round as u8));
        answers.push(next_answer(&mut swarm).await);
    }
    let want = Ok(Resp::TooLarge {
        got: body as u64,
        max: SERVER_LIMIT,
    });
    let lost: Vec<_> = answers
        .iter()
        .enumerate()
        .filter(|(_, a)| **a != want)
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {ROUNDS} oversized requests did not get the TooLarge answer: {lost:?}",
        lost.len()
    );
    assert_eq!(*handler.too_large.lock().unwrap(), ROUNDS);

    // The connection is still usable: a request within the limit is answered.
    let echo = encode_frame(&Req::Echo(7), SERVER_LIMIT).unwrap();
    swarm.behaviour_mut().send_request(&peer, echo);
    assert_eq!(next_answer(&mut swarm).await, Ok(Resp::Echo(7)));
    assert_eq!(*handler.too_large.lock().unwrap(), ROUNDS);
    server.shutdown().await;
}
