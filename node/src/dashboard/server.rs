//! The dashboard's HTTP server (axum, HTTP/1): the read-only JSON API under `/api/`
//! over the shared [`Snapshot`], behind [`super::auth::require_token`], and the front
//! end's static files ([`Assets`]) everywhere else. Only `GET` routes exist: nothing
//! served here changes the node.
//!
//! - `GET /api/summary`: [`super::model::Summary`].
//! - `GET /api/deals`: the deals without their history ([`super::model::DealRow`]).
//! - `GET /api/deals/{id}`: one deal with its digests, audits and disputes (404 if unknown).
//! - `GET /api/series`: the time series ([`super::model::Sample`]s, oldest first).

use super::assets::Assets;
use super::auth::require_token;
use super::collect::SharedSnapshot;
use super::model::Snapshot;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;

fn json<T: serde::Serialize>(v: &T) -> Response {
    match serde_json::to_string(v) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode: {e}\n")).into_response(),
    }
}

fn read(s: &SharedSnapshot) -> std::sync::RwLockReadGuard<'_, Snapshot> {
    s.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn summary(State(s): State<SharedSnapshot>) -> Response {
    json(&read(&s).summary)
}

async fn deals(State(s): State<SharedSnapshot>) -> Response {
    let list: Vec<_> = read(&s).deals.values().map(|d| d.brief()).collect();
    json(&list)
}

async fn deal(State(s): State<SharedSnapshot>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return (StatusCode::BAD_REQUEST, "the deal id is a number\n").into_response();
    };
    match read(&s).deals.get(&id) {
        Some(d) => json(d),
        None => (StatusCode::NOT_FOUND, format!("no deal {id} of this provider\n")).into_response(),
    }
}

async fn series(State(s): State<SharedSnapshot>) -> Response {
    let v: Vec<_> = read(&s).series.iter().copied().collect();
    json(&v)
}

/// The whole router: the API over `snapshot` (guarded by `token` if set) and `assets`
/// (none: `/` says the front end was not configured).
pub fn router(snapshot: SharedSnapshot, token: Option<Arc<str>>, assets: Option<Arc<Assets>>) -> Router {
    let api = Router::new()
        .route("/api/summary", get(summary))
        .route("/api/deals", get(deals))
        .route("/api/deals/{id}", get(deal))
        .route("/api/series", get(series))
        .with_state(snapshot)
        .layer(axum::middleware::from_fn_with_state(token, require_token));
    api.fallback(move |uri: Uri| {
        let assets = assets.clone();
        async move {
            match assets {
                Some(a) => a.answer(&uri),
                None => (
                    StatusCode::NOT_FOUND,
                    "no front end here: set dashboard_dir to the built dashboard (dashboard/dist); the JSON API is under /api/\n",
                )
                    .into_response(),
            }
        }
    })
}

/// A running dashboard server; dropping it (or its `shutdown`) stops it.
pub type DashboardServer = dpor_metrics::HttpServer;

/// Listens on `addr` and serves `app` until the handle is shut down or dropped.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve(addr: SocketAddr, app: Router) -> anyhow::Result<DashboardServer> {
    Ok(dpor_metrics::serve_router(addr, app, "the dashboard").await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// GET with optional extra header lines; (status, body).
    async fn get(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n").as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.unwrap();
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        (code, body.to_string())
    }

    fn snapshot() -> SharedSnapshot {
        let mut s = Snapshot::default();
        s.summary.provider = "0xabc".into();
        s.summary.tokens.earned = "340282366920938463463374607431768211455".into();
        Arc::new(std::sync::RwLock::new(s))
    }

    /// With a token, every API route answers 401 without it or with a wrong one, and
    /// 200 with it as a bearer token or a query parameter; the front end's files are
    /// served without it (they hold no data).
    #[tokio::test]
    async fn a_token_guards_the_api() {
        let token = "0123456789abcdef-token";
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.html"), "<title>dpor</title>").unwrap();
        let assets = Arc::new(Assets::load(dir.path()).unwrap());
        let app = router(snapshot(), Some(Arc::from(token)), Some(assets));
        let srv = serve("127.0.0.1:0".parse().unwrap(), app).await.unwrap();
        let a = srv.local_addr();
        for path in ["/api/summary", "/api/deals", "/api/deals/1", "/api/series"] {
            assert_eq!(get(a, path, "").await.0, 401, "{path}");
            assert_eq!(get(a, path, "Authorization: Bearer 0123456789abcdef-tokeN\r\n").await.0, 401, "{path}");
            assert_eq!(get(a, &format!("{path}?token=wrong"), "").await.0, 401, "{path}");
        }
        let (code, body) = get(a, "/api/summary", &format!("Authorization: Bearer {token}\r\n")).await;
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["provider"], "0xabc");
        assert_eq!(v["tokens"]["earned"], "340282366920938463463374607431768211455");
        assert_eq!(get(a, &format!("/api/deals?token={token}"), "").await, (200, "[]".into()));
        assert_eq!(get(a, &format!("/api/deals/1?token={token}"), "").await.0, 404);
        assert_eq!(get(a, &format!("/api/deals/x?token={token}"), "").await.0, 400);
        assert_eq!(get(a, "/", "").await, (200, "<title>dpor</title>".into()));
        srv.shutdown().await;
    }

    /// Without a token (loopback) the API is open; without a front end `/` says so.
    #[tokio::test]
    async fn without_a_token_the_api_is_open() {
        let srv = serve("127.0.0.1:0".parse().unwrap(), router(snapshot(), None, None)).await.unwrap();
        let a = srv.local_addr();
        assert_eq!(get(a, "/api/series", "").await, (200, "[]".into()));
        let (code, body) = get(a, "/", "").await;
        assert_eq!(code, 404);
        assert!(body.contains("dashboard_dir"), "{body}");
        srv.shutdown().await;
    }
}
