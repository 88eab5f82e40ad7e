//! The dashboard's static files (the built front end, `npm run build` → dashboard/dist),
//! read into memory once when the node starts: a request can only name a file that was
//! in the folder then, so no path from a request ever reaches the file system.

use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::path::Path;

/// Files of the front end by URL path (`/index.html`, `/assets/…`).
#[derive(Debug, Default)]
pub struct Assets {
    files: HashMap<String, (&'static str, Vec<u8>)>,
}

/// The most the front end's folder may hold, bytes (it is kept in memory).
pub const MAX_ASSET_BYTES: u64 = 32 << 20;

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "json" | "map" => "application/json",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

impl Assets {
    /// Reads every file under `dir` (recursively; symbolic links are not followed).
    ///
    /// # Errors
    /// The folder cannot be read, has no `index.html` (not built: run `npm run build`
    /// in dashboard/), or holds more than [`MAX_ASSET_BYTES`].
    pub fn load(dir: &Path) -> anyhow::Result<Assets> {
        let mut a = Assets::default();
        let mut total = 0u64;
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let entries = std::fs::read_dir(&d).map_err(|e| anyhow::anyhow!("dashboard_dir: cannot read {}: {e}", d.display()))?;
            for entry in entries {
                let entry = entry?;
                let ty = entry.file_type()?;
                let p = entry.path();
                if ty.is_dir() {
                    stack.push(p);
                } else if ty.is_file() {
                    let bytes = std::fs::read(&p)?;
                    total += bytes.len() as u64;
                    anyhow::ensure!(total <= MAX_ASSET_BYTES, "dashboard_dir {} holds more than {MAX_ASSET_BYTES} bytes", dir.display());
                    let rel = p.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
                    let url = format!("/{rel}");
                    a.files.insert(url.clone(), (content_type(&url), bytes));
                }
            }
        }
        anyhow::ensure!(
            a.files.contains_key("/index.html"),
            "dashboard_dir {} has no index.html: build the front end first (`npm run build --workspace dashboard`, which writes dashboard/dist)",
            dir.display()
        );
        Ok(a)
    }

    /// The answer to `GET uri`: the file, `/` being `/index.html`; 404 otherwise.
    pub fn answer(&self, uri: &Uri) -> Response {
        let path = match uri.path() {
            "/" => "/index.html",
            p => p,
        };
        match self.files.get(path) {
            Some((ty, bytes)) => {
                let cache = if path == "/index.html" { "no-cache" } else { "max-age=3600" };
                ([(header::CONTENT_TYPE, *ty), (header::CACHE_CONTROL, cache)], bytes.clone()).into_response()
            }
            None => (StatusCode::NOT_FOUND, "not found\n").into_response(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_what_was_in_the_folder_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Assets::load(dir.path()).unwrap_err().to_string().contains("no index.html"));
        std::fs::write(dir.path().join("index.html"), "<p>hi</p>").unwrap();
        std::fs::create_dir(dir.path().join("assets")).unwrap();
        std::fs::write(dir.path().join("assets/app.js"), "1").unwrap();
        let a = Assets::load(dir.path()).unwrap();
        let code = |p: &str| a.answer(&p.parse().unwrap()).status().as_u16();
        assert_eq!((code("/"), code("/index.html"), code("/assets/app.js")), (200, 200, 200));
        assert_eq!(code("/../Cargo.toml"), 404);
        assert_eq!(code("/assets/../index.html"), 404);
        assert_eq!(a.answer(&"/assets/app.js".parse().unwrap()).headers()[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
    }
}
