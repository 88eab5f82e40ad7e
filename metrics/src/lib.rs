//! # dpor-metrics
//!
//! The HTTP side of dpor's Prometheus metrics (docs/OPERATIONS.md, "Metrics"), shared
//! by `dpor-node` and `dpor watch`:
//!
//! - [`serve`]: a small HTTP/1 server (axum on hyper and tokio, which the node
//!   already runs) answering `GET /metrics` with the OpenMetrics text an [`Exporter`]
//!   encodes (prometheus-client's format) and `GET /health` with the exporter's health
//!   as a small JSON document (200 when healthy, 503 when not, 404 when the exporter
//!   has no health). It is a [`axum::Router`] so that a later web dashboard served by
//!   the node can add its routes to the same server.
//! - [`exposition`]: a strict parser of the exposition text (every line checked), for
//!   tests that compare scraped values with the chain's.
//! - [`get`]: a minimal HTTP/1.1 GET over loopback, for tests and probes, so that
//!   neither needs an HTTP client library.
//!
//! No TLS, no authentication: bind it to loopback (`127.0.0.1:9464`) or a private
//! network, as Prometheus exporters usually are.

pub mod exposition;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get as route_get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The content type of the OpenMetrics text format prometheus-client encodes.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a [`serve`]d endpoint exports. Both methods run on tokio's blocking pool (they
/// may read the disk, e.g. the node's store usage), once per request.
pub trait Exporter: Send + Sync + 'static {
    /// The metrics as OpenMetrics text (refreshing whatever is read at scrape time
    /// first). Errors: the encoder's, answered as 500.
    fn encode(&self) -> Result<String, std::fmt::Error>;

    /// The health report: `Some((healthy, json))` is answered 200 (healthy) or 503 with
    /// the JSON; `None` (the default) answers `/health` with 404.
    fn health(&self) -> Option<(bool, serde_json::Value)> {
        None
    }
}

/// Errors of [`serve`].
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound (in use, not local, no permission).
    #[error("cannot listen for {what} on {addr}: {source}")]
    Bind {
        /// What the server serves ("metrics", "dashboard").
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A running HTTP server (axum) on one address: the metrics server of [`serve`], or any
/// router [`serve_router`] serves (the node's dashboard); dropping it (or
/// [`HttpServer::shutdown`]) stops it.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The metrics server of [`serve`].
pub type MetricsServer = HttpServer;

impl HttpServer {
    /// The bound address (the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets requests in flight finish, and waits for the server task.
    pub async fn shutdown(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// The routes `/metrics` and `/health` over `exporter`, for [`serve`] or for a larger
/// server that adds its own routes.
pub fn router(exporter: Arc<dyn Exporter>) -> Router {
    Router::new()
        .route("/metrics", route_get(metrics))
        .route("/health", route_get(health))
        .with_state(exporter)
}

async fn metrics(State(exporter): State<Arc<dyn Exporter>>) -> Response {
    match tokio::task::spawn_blocking(move || exporter.encode()).await {
        Ok(Ok(text)) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], text).into_response(),
        Ok(Err(_)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the metrics\n",
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("metrics task failed: {e}\n"),
        )
            .into_response(),
    }
}

async fn health(State(exporter): State<Arc<dyn Exporter>>) -> Response {
    match tokio::task::spawn_blocking(move || exporter.health()).await {
        Ok(Some((ok, json))) => {
            let code = if ok {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (
                code,
                [(header::CONTENT_TYPE, "application/json")],
                format!("{json}\n"),
            )
                .into_response()
        }
        Ok(None) => (StatusCode::NOT_FOUND, "no health endpoint here\n").into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("health task failed: {e}\n"),
        )
            .into_response(),
    }
}

/// Listens on `addr` (e.g. `127.0.0.1:9464`; port 0 for any free port) and serves
/// [`router`] over `exporter` until the returned handle is shut down or dropped.
/// Needs a tokio runtime.
///
/// # Errors
/// [`ServeError::Bind`] when the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    exporter: Arc<dyn Exporter>,
) -> Result<MetricsServer, ServeError> {
    let server = serve_router(addr, router(exporter), "metrics").await?;
    tracing::info!(addr = %server.local_addr(), "metrics and health served over HTTP");
    Ok(server)
}

/// Listens on `addr` and serves `app` (HTTP/1, graceful shutdown) until the handle is
/// shut down or dropped; `what` names the server in its log lines.
///
/// # Errors
/// [`ServeError::Bind`] if the address cannot be bound.
pub async fn serve_router(addr: SocketAddr, app: axum::Router, what: &'static str) -> Result<HttpServer, ServeError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { what, addr, source })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Bind { what, addr, source })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stopped.await;
        });
        if let Err(e) = server.await {
            tracing::warn!(error = %e, server = what, "HTTP server stopped");
        }
    });
    Ok(HttpServer { addr: bound, stop: Some(stop), task: Some(task) })
}

/// Errors of [`get`].
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    /// Connecting, sending or reading failed.
    #[error("GET http://{addr}{path}: {source}")]
    Io {
        /// The server.
        addr: SocketAddr,
        /// The path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The answer is not an HTTP/1.x response with a status line.
    #[error("GET http://{addr}{path}: not an HTTP response: {head:?}")]
    Malformed {
        /// The server.
        addr: SocketAddr,
        /// The path.
        path: String,
        /// The first bytes of the answer.
        head: String,
    },
}

/// How long [`get`] waits for a whole answer.
pub const GET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `GET path` on `addr` with `Connection: close`: the status code and the body as text.
/// A minimal client for tests and probes (no redirects, no chunked bodies: the server
/// of this crate sends lengths).
///
/// # Errors
/// [`GetError::Io`] (connection refused, reset; `TimedOut` after [`GET_TIMEOUT`]),
/// [`GetError::Malformed`].
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), GetError> {
    match tokio::time::timeout(GET_TIMEOUT, get_inner(addr, path)).await {
        Ok(r) => r,
        Err(_) => Err(GetError::Io {
            addr,
            path: path.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no whole answer within {GET_TIMEOUT:?}"),
            ),
        }),
    }
}

async fn get_inner(addr: SocketAddr, path: &str) -> Result<(u16, String), GetError> {
    let io = |source| GetError::Io {
        addr,
        path: path.to_string(),
        source,
    };
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(io)?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .map_err(io)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.map_err(io)?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let malformed = || GetError::Malformed {
        addr,
        path: path.to_string(),
        head: text.chars().take(80).collect(),
    };
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(malformed)?;
    let status = head
        .lines()
        .next()
        .filter(|l| l.starts_with("HTTP/1."))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(malformed)?;
    Ok((status, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Fake(AtomicBool);

    impl Exporter for Fake {
        fn encode(&self) -> Result<String, std::fmt::Error> {
            Ok("# TYPE x counter\nx_total 3\n# EOF\n".into())
        }
        fn health(&self) -> Option<(bool, serde_json::Value)> {
            let ok = self.0.load(Ordering::SeqCst);
            Some((ok, serde_json::json!({"ok": ok})))
        }
    }

    /// The routes answer as documented, on loopback, and the server stops.
    #[tokio::test]
    async fn serves_metrics_and_health_on_loopback() {
        let fake = Arc::new(Fake(AtomicBool::new(true)));
        let srv = serve("127.0.0.1:0".parse().unwrap(), fake.clone())
            .await
            .unwrap();
        let addr = srv.local_addr();
        assert!(addr.ip().is_loopback() && addr.port() != 0);
        let (code, body) = get(addr, "/metrics").await.unwrap();
        assert_eq!(code, 200);
        assert!(body.contains("x_total 3"), "{body}");
        let (code, body) = get(addr, "/health").await.unwrap();
        assert_eq!((code, body.trim()), (200, r#"{"ok":true}"#));
        fake.0.store(false, Ordering::SeqCst);
        assert_eq!(get(addr, "/health").await.unwrap().0, 503);
        assert_eq!(get(addr, "/nothing").await.unwrap().0, 404);
        srv.shutdown().await;
        assert!(
            get(addr, "/metrics").await.is_err(),
            "still answering after shutdown"
        );
    }

    /// A port in use is a clear error.
    #[tokio::test]
    async fn a_port_in_use_is_refused() {
        let fake = Arc::new(Fake(AtomicBool::new(true)));
        let a = serve("127.0.0.1:0".parse().unwrap(), fake.clone())
            .await
            .unwrap();
        let e = serve(a.local_addr(), fake).await.unwrap_err().to_string();
        assert!(e.contains("cannot listen for metrics"), "{e}");
    }
}
