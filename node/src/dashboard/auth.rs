//! The dashboard's access rule: loopback needs nothing, any other address needs the
//! access token ([`check_listen`], enforced when the node starts), and when a token is
//! set every `/api/` request must carry it ([`require_token`]) as
//! `Authorization: Bearer TOKEN` or as the query parameter `token=TOKEN` (what a
//! browser opening `http://HOST:PORT/?token=TOKEN` sends; the page passes it on to its
//! API calls). The comparison is constant-time in the token's content.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The shortest access token accepted, in characters.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Checks a dashboard listen address against the token: a non-loopback address needs a
/// token of at least [`MIN_TOKEN_CHARS`] characters; a token given at all must be that
/// long and contain no whitespace.
///
/// # Errors
/// What is wrong, naming the config keys.
pub fn check_listen(addr: SocketAddr, token: Option<&str>) -> anyhow::Result<()> {
    if let Some(t) = token {
        if t.chars().count() < MIN_TOKEN_CHARS || t.chars().any(char::is_whitespace) {
            anyhow::bail!("dashboard_token must be at least {MIN_TOKEN_CHARS} characters, without spaces (e.g. `openssl rand -hex 16`)");
        }
    } else if !addr.ip().is_loopback() {
        anyhow::bail!(
            "dashboard_listen = {addr} is not a loopback address: set dashboard_token (at least {MIN_TOKEN_CHARS} characters) so that only holders of the token can read the dashboard, or listen on 127.0.0.1"
        );
    }
    Ok(())
}

/// The token a request carries: the bearer token, else the `token` query parameter.
fn presented(req: &Request) -> Option<String> {
    if let Some(v) = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        if let Some(t) = v.strip_prefix("Bearer ") {
            return Some(t.trim().to_string());
        }
    }
    req.uri().query()?.split('&').find_map(|kv| kv.strip_prefix("token=").map(percent_decode))
}

/// `%XX` escapes and `+` of a query value decoded (invalid escapes kept as they are).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `given` is `expected` (constant-time over the bytes when the lengths match).
pub fn token_matches(given: &str, expected: &str) -> bool {
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// Middleware: with a token set, answers 401 to a request without the right token.
pub async fn require_token(State(token): State<Option<Arc<str>>>, req: Request, next: Next) -> Response {
    if let Some(expected) = token {
        let ok = presented(&req).is_some_and(|t| token_matches(&t, &expected));
        if !ok {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer realm=\"dpor-node dashboard\"")],
                "a dashboard access token is required: open the page as /?token=TOKEN or send Authorization: Bearer TOKEN\n",
            )
                .into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_loopback_needs_a_long_enough_token() {
        let lo: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        let v6lo: SocketAddr = "[::1]:9000".parse().unwrap();
        check_listen(lo, None).unwrap();
        check_listen(v6lo, None).unwrap();
        let e = check_listen(any, None).unwrap_err().to_string();
        assert!(e.contains("dashboard_token") && e.contains("not a loopback"), "{e}");
        assert!(check_listen(any, Some("short")).is_err());
        assert!(check_listen(lo, Some("has a space in it ok")).is_err());
        check_listen(any, Some("0123456789abcdef")).unwrap();
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches("0123456789abcdef", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcdeg", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcde", "0123456789abcdef"));
        assert!(!token_matches("", "0123456789abcdef"));
    }

    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(percent_decode("a%2Bb+c"), "a+b c");
        assert_eq!(percent_decode("abc%"), "abc%");
        assert_eq!(percent_decode("abc%zz"), "abc%zz");
        assert_eq!(percent_decode("%41"), "A");
    }
}
