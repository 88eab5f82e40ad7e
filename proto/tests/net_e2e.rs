//! End-to-end tests of the libp2p transport over loopback TCP.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dpor_proto::codec::{FrameError, Limits, MAX_FRAME_BYTES};
use dpor_proto::net::{
    load_or_create_keypair, serve, Client, Handler, NetConfig, NetError, PeerId, ServerHandle,
};
use libp2p::identity::Keypair;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Req {
    Echo(u64),
    /// Asks for a response blob of this many bytes.
    Big(u64),
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Sleeps this many milliseconds, then answers `Done(tag)`.
    Sleep(u64, u64),
    /// Never answers.
    Never,
}

/// What a misbehaving client sends: `Echo` encodes like `Req::Echo`, `Garbage` is not
/// a `Req` at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum OtherReq {
    Echo(u64),
    Garbage(String, i32),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Resp {
    Echo(u64),
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
    Done(u64),
    Error(String),
}

#[derive(Default)]
struct TestHandler {
    bad_requests: Mutex<Vec<FrameError>>,
    /// Order in which tagged requests were started/finished.
    log: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl Handler<Req, Resp> for TestHandler {
    async fn handle(&self, _peer: PeerId, request: Result<Req, FrameError>) -> Resp {
        match request {
            Err(e) => {
                let msg = e.to_string();
                self.bad_requests.lock().unwrap().push(e);
                Resp::Error(msg)
            }
            Ok(Req::Echo(n)) => Resp::Echo(n),
            Ok(Req::Big(n)) => Resp::Blob(vec![0xab; n as usize]),
            Ok(Req::Blob(b)) => Resp::Echo(b.len() as u64),
            Ok(Req::Sleep(ms, tag)) => {
                self.log.lock().unwrap().push(format!("start {tag}"));
                tokio::time::sleep(Duration::from_millis(ms)).await;
                self.log.lock().unwrap().push(format!("end {tag}"));
                Resp::Done(tag)
            }
            Ok(Req::Never) => futures::future::pending().await,
        }
    }

    fn response_too_large(&self, len: u64, max: u64) -> Option<Resp> {
        Some(Resp::Error(format!(
            "response of {len} bytes over the limit of {max}"
        )))
    }
}

async fn start(handler: Arc<TestHandler>) -> ServerHandle {
    let addr = "/ip4/127.0.0.1/tcp/0".parse().unwrap();
    serve(
        Keypair::generate_ed25519(),
        addr,
        handler,
        NetConfig::default(),
    )
    .await
    .unwrap()
}

async fn client<Q>(server: &ServerHandle, config: NetConfig) -> Client<Q, Resp>
where
    Q: Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    Client::connect(server.dial_addr().unwrap(), config)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_concurrency_and_a_7_mib_response() {
    let handler = Arc::new(TestHandler::default());
    let server = start(handler.clone()).await;
    let addrs = server.listen_addrs();
    assert!(!addrs.is_empty());
    assert!(
        addrs[0].to_string().starts_with("/ip4/127.0.0.1/tcp/"),
        "{addrs:?}"
    );
    assert!(
        !addrs[0].to_string().ends_with("/tcp/0"),
        "the real port: {addrs:?}"
    );

    // With the peer id, and without it (learnt from the handshake).
    let a: Client<Req, Resp> = client(&server, NetConfig::default()).await;
    let b: Client<Req, Resp> = Client::connect(addrs[0].clone(), NetConfig::default())
        .await
        .unwrap();
    assert_eq!(a.peer(), server.peer_id());
    assert_eq!(b.peer(), server.peer_id());
    assert_eq!(a.request(Req::Echo(7)).await.unwrap(), Resp::Echo(7));

    // 100 concurrent requests from each of two clients, over one connection each.
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let c = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(
            async move { (i, c.request(Req::Echo(i)).await) },
        ));
    }
    for t in tasks {
        let (i, r) = t.await.unwrap();
        assert_eq!(r.unwrap(), Resp::Echo(i));
    }
    assert_eq!((a.connections_opened(), b.connections_opened()), (1, 1));

    let n = 7 * 1024 * 1024;
    match a.request(Req::Big(n)).await.unwrap() {
        Resp::Blob(blob) => assert!(blob.len() == n as usize && blob.iter().all(|&x| x == 0xab)),
        other => panic!("{other:?}"),
    }
    assert!(handler.bad_requests.lock().unwrap().is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_request_gets_an_error_response_and_the_connection_is_kept() {
    let handler = Arc::new(TestHandler::default());
    let server = start(handler.clone()).await;
    // This client would send up to 16 MiB; the server accepts 8 MiB.
    let loose = NetConfig {
        limits: Limits {
            max_request_bytes: 16 << 20,
            max_response_bytes: MAX_FRAME_BYTES,
        },
        ..NetConfig::default()
    };
    let c: Client<Req, Resp> = client(&server, loose).await;
    let outcome = c.request(Req::Blob(vec![1; 9 << 20])).await;
    match &outcome {
        Ok(Resp::Error(msg)) => assert!(msg.contains("too large"), "{msg}"),
        other => panic!("expected the server's error response, got {other:?}"),
    }
    let bad = handler.bad_requests.lock().unwrap().clone();
    assert!(
        matches!(bad.as_slice(), [FrameError::TooLarge { got, max }] if *got > 9 << 20 && *max == MAX_FRAME_BYTES),
        "{bad:?}"
    );
    // The same connection still works.
    assert_eq!(c.request(Req::Echo(3)).await.unwrap(), Resp::Echo(3));
    assert_eq!(
        c.request(Req::Blob(vec![1; 1 << 20])).await.unwrap(),
        Resp::Echo(1 << 20)
    );
    assert_eq!(c.connections_opened(), 1);

    // A client with the default limits refuses to send it at all.
    let strict: Client<Req, Resp> = client(&server, NetConfig::default()).await;
    let err = strict
        .request(Req::Blob(vec![1; 9 << 20]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            NetError::Frame(FrameError::TooLarge {
                max: MAX_FRAME_BYTES,
                ..
            })
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("the limit is 8388608 bytes"),
        "{err}"
    );
    assert_eq!(strict.request(Req::Echo(4)).await.unwrap(), Resp::Echo(4));

    // A response over the limit is replaced by the handler's fallback.
    let r = strict.request(Req::Big(9 << 20)).await.unwrap();
    assert!(
        matches!(r, Resp::Error(ref m) if m.contains("over the limit")),
        "{r:?}"
    );
    assert_eq!(strict.request(Req::Echo(5)).await.unwrap(), Resp::Echo(5));
    assert_eq!(strict.connections_opened(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_request_gets_an_error_response_and_the_connection_is_kept() {
    let handler = Arc::new(TestHandler::default());
    let server = start(handler.clone()).await;
    let c: Client<OtherReq, Resp> = client(&server, NetConfig::default()).await;
    let r = c.request(OtherReq::Garbage("x".into(), -1)).await.unwrap();
    assert!(
        matches!(r, Resp::Error(ref m) if m.starts_with("malformed message")),
        "{r:?}"
    );
    assert!(matches!(
        handler.bad_requests.lock().unwrap().as_slice(),
        [FrameError::Malformed(_)]
    ));
    assert_eq!(c.request(OtherReq::Echo(9)).await.unwrap(), Resp::Echo(9));
    assert_eq!(c.connections_opened(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_does_not_delay_another() {
    let handler = Arc::new(TestHandler::default());
    let server = start(handler.clone()).await;
    let c: Client<Req, Resp> = client(&server, NetConfig::default()).await;
    let done = Arc::new(Mutex::new(Vec::new()));
    let slow = {
        let (c, done) = (c.clone(), done.clone());
        tokio::spawn(async move {
            let r = c.request(Req::Sleep(2000, 1)).await.unwrap();
            done.lock().unwrap().push(r);
        })
    };
    // Wait until the slow one is inside the handler.
    while handler.log.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = c.request(Req::Sleep(0, 2)).await.unwrap();
    done.lock().unwrap().push(r);
    assert_eq!(
        *handler.log.lock().unwrap(),
        ["start 1", "start 2", "end 2"]
    );
    slow.await.unwrap();
    assert_eq!(*done.lock().unwrap(), [Resp::Done(2), Resp::Done(1)]);
    assert_eq!(
        *handler.log.lock().unwrap(),
        ["start 1", "start 2", "end 2", "end 1"]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_is_never_answered_times_out() {
    let server = start(Arc::new(TestHandler::default())).await;
    let config = NetConfig {
        request_timeout: Duration::from_millis(800),
        ..NetConfig::default()
    };
    let c: Client<Req, Resp> = client(&server, config).await;
    let err = c.request(Req::Never).await.unwrap_err();
    assert!(matches!(err, NetError::Timeout(_)), "{err}");
    assert!(err.to_string().contains("timed out"), "{err}");
    // Other requests still work.
    assert_eq!(c.request(Req::Echo(1)).await.unwrap(), Resp::Echo(1));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dial_failures_are_clear() {
    // Nothing listens there (bind, read the port, close).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();
    let err = Client::<Req, Resp>::connect(addr, NetConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, NetError::Dial { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("could not connect to /ip4/127.0.0.1/tcp/"),
        "{err}"
    );

    // The right address with the wrong peer id.
    let server = start(Arc::new(TestHandler::default())).await;
    let wrong = PeerId::random();
    let addr = server.listen_addrs()[0]
        .clone()
        .with(libp2p::multiaddr::Protocol::P2p(wrong));
    let err = Client::<Req, Resp>::connect(addr, NetConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, NetError::Dial { .. }), "{err}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_drop_stop_the_server() {
    let server = start(Arc::new(TestHandler::default())).await;
    let addr = server.dial_addr().unwrap();
    let c: Client<Req, Resp> = Client::connect(addr.clone(), NetConfig::default())
        .await
        .unwrap();
    server.shutdown().await;
    let err = c.request(Req::Echo(1)).await.unwrap_err();
    assert!(
        matches!(
            err,
            NetError::ConnectionClosed | NetError::Dial { .. } | NetError::Io(_)
        ),
        "{err}"
    );

    let server = start(Arc::new(TestHandler::default())).await;
    let addr = server.dial_addr().unwrap();
    drop(server);
    // The swarm's task ends, and its listener closes, when the runtime next runs it:
    // connect until a connection is refused (a loaded machine may take a while).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let refused = Client::<Req, Resp>::connect(addr.clone(), NetConfig::default())
            .await
            .is_err();
        if refused {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a dropped server still accepts connections after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn keypair_file_is_created_private_and_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/node.key");
    let k1 = load_or_create_keypair(&path).unwrap();
    let k2 = load_or_create_keypair(&path).unwrap();
    assert_eq!(k1.public().to_peer_id(), k2.public().to_peer_id());
    assert!(k1.clone().try_into_ed25519().is_ok());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    std::fs::write(&path, b"not a key").unwrap();
    let err = load_or_create_keypair(&path).unwrap_err();
    assert!(matches!(err, NetError::Key { .. }), "{err}");
    assert!(err.to_string().contains("node.key"), "{err}");
}

/// The port of a bound `/ip4/…/tcp/PORT` address.
fn tcp_port(addr: &libp2p::Multiaddr) -> u16 {
    addr.iter()
        .find_map(|p| match p {
            libp2p::multiaddr::Protocol::Tcp(port) => Some(port),
            _ => None,
        })
        .unwrap()
}

/// A second server on the port a server already listens on is refused with "address
/// in use" (libp2p-tcp sets SO_REUSEPORT, under which both would listen and split the
/// connections), and the first server keeps answering every connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_a_used_port_is_refused() {
    let first = start(Arc::new(TestHandler::default())).await;
    let port = tcp_port(&first.listen_addrs()[0]);
    let addr: libp2p::Multiaddr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();
    let err = serve(Keypair::generate_ed25519(), addr.clone(), Arc::new(TestHandler::default()), NetConfig::default())
        .await
        .expect_err("a second server on a used port must fail");
    assert!(matches!(err, NetError::Listen { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with(&format!("could not listen on {addr}: address in use")), "{text}");
    // Every new connection reaches the first server.
    for i in 0..10 {
        let c: Client<Req, Resp> = Client::connect(addr.clone(), NetConfig::default()).await.unwrap();
        assert_eq!(c.peer(), first.peer_id());
        assert_eq!(c.request(Req::Echo(i)).await.unwrap(), Resp::Echo(i));
    }
}

/// A port another program holds (a plain listener, no SO_REUSEPORT): the error says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_held_by_another_program_is_refused_with_its_cause() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let addr: libp2p::Multiaddr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();
    let err = serve(Keypair::generate_ed25519(), addr.clone(), Arc::new(TestHandler::default()), NetConfig::default())
        .await
        .expect_err("listening on a held port must fail");
    let text = err.to_string();
    assert!(text.starts_with(&format!("could not listen on {addr}: address in use")), "{text}");
    assert!(text.contains("os error"), "the OS error is kept: {text}");
    drop(holder);
}
