//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`, and Debian's
//! Chromium driven by playwright-core): the node's web dashboard loads in a real
//! headless browser against a live node and chain, shows a deal as the chain has it,
//! and updates, without a reload, when an epoch is proven. See
//! dashboard/test/browser.mjs for the browser's side and `e2e_harness/mod.rs` for the
//! harness.
//!
//! The node runs with `dashboard_listen = "127.0.0.1:0"` and `dashboard_dir` = the
//! built front end (dashboard/dist: `npm run build --workspace dashboard`, which
//! script/test runs first; a missing build fails the test, it never skips). A deal of
//! 8 blocks is opened, uploaded, written once and checkpointed (2 digests), epoch 0 is
//! proven by the node and audited by the auditor; the JSON API is compared with the
//! chain; then the browser opens the page and reports what it shows (compared with the
//! chain), the chain proves epoch 1, and the browser waits for the page to show it and
//! takes a screenshot (docs/dashboard.png is one such; set
//! `DPOR_DASHBOARD_SCREENSHOT=PATH` to keep a new one).
//!
//! Every process is killed at the end, Chromium included: the browser script closes it
//! on exit and on SIGTERM, and [`Browser`]'s drop kills whatever still carries its
//! environment marker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_chain::{EpochStatus, Market};
use harness::{within, World, AUDITOR, BETA, OWNER};
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The address after `marker` in the node's log, waiting up to 60 s.
async fn addr_in_log(w: &World, marker: &str) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = w.node_log();
        if let Some(rest) = text.lines().find_map(|l| l.split_once(marker).map(|(_, r)| r.to_string())) {
            return rest.trim().trim_end_matches('/').parse().unwrap_or_else(|e| panic!("bad address in {rest:?}: {e}"));
        }
        assert!(Instant::now() < deadline, "no {marker:?} line within 60 s:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GET `path` from the dashboard as JSON (200 expected).
async fn api(addr: SocketAddr, path: &str) -> serde_json::Value {
    let (code, body) = dpor_metrics::get(addr, path).await.expect("GET");
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: not JSON: {e}\n{body}"))
}

/// Waits until epoch `epoch` of `deal` is settled on chain; returns its status.
async fn settled(w: &World, market: &Market, deal: u64, epoch: u64) -> EpochStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = market.epoch_status(deal, epoch).await.unwrap();
        if s != EpochStatus::None {
            return s;
        }
        assert!(Instant::now() < deadline, "deal {deal} epoch {epoch} not settled within 120 s:\n{}", w.node_log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The epochs of `deal` as the chain has them, in the dashboard's words, for epochs
/// `0..upto` (the later ones have not started).
async fn chain_epochs(market: &Market, deal: u64, upto: u64) -> Vec<String> {
    let mut v = Vec::new();
    for e in 0..upto {
        v.push(
            match market.epoch_status(deal, e).await.unwrap() {
                EpochStatus::Proven => "proven",
                EpochStatus::Missed => "missed",
                EpochStatus::Challenged => "challenged",
                EpochStatus::None => "pending",
            }
            .to_string(),
        );
    }
    v
}

/// The browser script (`node dashboard/test/browser.mjs`), its stdout lines on a
/// channel. Drop: SIGTERM (the script closes Chromium), then SIGKILL of every process
/// that still carries this run's environment marker (the script and Chromium's).
struct Browser {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    marker: String,
    stderr: PathBuf,
}

impl Browser {
    fn start(url: &str, deal: u64, shot: &Path, stderr: &Path) -> Browser {
        let marker = format!("dpor-dashboard-test-{}-{}", std::process::id(), deal);
        let script = repo().join("dashboard/test/browser.mjs");
        let mut child = std::process::Command::new("node")
            .arg(&script)
            .arg(url)
            .arg(deal.to_string())
            .arg(shot)
            .current_dir(repo())
            .env("DPOR_DASHBOARD_BROWSER", &marker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr).unwrap())
            .spawn()
            .expect("start node dashboard/test/browser.mjs (is Node.js installed?)");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Browser { child, lines, marker, stderr: stderr.to_path_buf() }
    }

    /// The JSON after the next line starting with `tag`, waiting up to `secs`.
    fn expect(&mut self, tag: &str, secs: u64) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left.min(Duration::from_millis(500))) {
                Ok(line) => {
                    if let Some(json) = line.strip_prefix(tag).and_then(|r| r.strip_prefix(' ')) {
                        return serde_json::from_str(json).unwrap_or_else(|e| panic!("{tag}: not JSON: {e}: {json}"));
                    }
                    eprintln!("browser: {line}");
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().unwrap();
                    panic!(
                        "the browser script ended ({status}) before {tag}:\n{}",
                        std::fs::read_to_string(&self.stderr).unwrap_or_default()
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "no {tag} line from the browser script within {secs} s:\n{}",
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            );
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the script's exit (up to `secs`); its status.
    fn wait(&mut self, secs: u64) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "the browser script did not exit within {secs} s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Pids of the processes whose environment holds this run's marker.
    fn marked(&self) -> Vec<String> {
        let want = format!("DPOR_DASHBOARD_BROWSER={}", self.marker);
        let mut pids = Vec::new();
        for d in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let name = d.file_name().to_string_lossy().to_string();
            if !name.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            if let Ok(env) = std::fs::read(d.path().join("environ")) {
                if env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
                    pids.push(name);
                }
            }
        }
        pids
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = std::process::Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(15);
            while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let left = self.marked();
            if left.is_empty() {
                break;
            }
            let mut kill = std::process::Command::new("kill");
            kill.arg("-KILL").args(&left);
            let _ = kill.status();
            if Instant::now() > deadline {
                eprintln!("e2e_dashboard: processes still running after kill -9: {left:?}");
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_a_deal_in_a_real_browser_and_updates_when_an_epoch_is_proven() {
    within(900, async {
        let dist = repo().join("dashboard/dist");
        assert!(
            dist.join("index.html").is_file(),
            "the dashboard is not built ({} has no index.html): run `npm run build --workspace dashboard` (script/test does)",
            dist.display()
        );
        let cfg = tempfile::tempdir().unwrap();
        let cfg_file = cfg.path().join("node.toml");
        std::fs::write(&cfg_file, format!("dashboard_listen = \"127.0.0.1:0\"\ndashboard_dir = {:?}\n", dist.display().to_string()))
            .unwrap();
        let w = World::start_with(&["--config", cfg_file.to_str().unwrap()]).await;
        let addr = addr_in_log(&w, "dpor-node: dashboard on http://").await;
        assert!(addr.ip().is_loopback(), "{addr}");

        // A deal with two digests, epoch 0 proven by the node and audited.
        w.make_file("file", 8 * BETA, 5);
        let deal = w.open_and_upload("file", 16).await;
        std::fs::write(w.path("block"), harness::pseudo_random(BETA, 77)).unwrap();
        w.dpor(OWNER, &["write", "3", w.path("block").to_str().unwrap()]).await.expect_ok("write");
        w.dpor(OWNER, &["checkpoint"]).await.expect_ok("checkpoint v2");
        let market = w.client(AUDITOR).await;
        let start0 = market.epoch_window(deal, 0).await.unwrap().start;
        w.dev.warp_to(start0).await.unwrap();
        let a = w.dpor(AUDITOR, &["audit", &deal.to_string(), "--record"]).await.expect_ok("audit");
        assert_eq!(a["passed"], true, "{a}");
        assert_eq!(settled(&w, &market, deal, 0).await, EpochStatus::Proven, "{}", w.node_log());

        // The API, once it caught up, says what the chain says. (Its collector reads the
        // payment logs up to a block and the epochs' status at the latest one: a snapshot
        // taken while the proof was being mined shows epoch 0 proven with nothing earned
        // yet, so the wait is for the pay too.)
        let path = format!("/api/deals/{deal}");
        let price = market.get_deal(deal).await.unwrap().price_per_epoch.to_string();
        let deadline = Instant::now() + Duration::from_secs(120);
        let d = loop {
            let d = api(addr, &path).await;
            if d["epochs"][0] == "proven" && d["earned"] == price && d["audits"].as_array().is_some_and(|v| !v.is_empty()) {
                break d;
            }
            assert!(Instant::now() < deadline, "the API does not show epoch 0 proven and the audit within 120 s: {d}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let info = market.get_deal(deal).await.unwrap();
        assert_eq!(d["state"], "active");
        assert_eq!(d["owner"], format!("{:#x}", info.owner));
        assert_eq!((d["num_blocks"].as_u64(), d["block_size"].as_u64()), (Some(info.num_blocks), Some(u64::from(info.block_size))));
        assert_eq!(d["num_epochs"].as_u64(), Some(u64::from(info.num_epochs)));
        assert_eq!(d["digest_version"].as_u64(), Some(info.digest_version));
        assert_eq!(d["write_count"].as_u64(), Some(info.write_count));
        assert_eq!(d["price_per_epoch"], info.price_per_epoch.to_string());
        assert_eq!(d["earned"], info.price_per_epoch.to_string(), "one proven epoch's pay");
        let digests = market.digests(deal, 0).await.unwrap();
        let versions: Vec<u64> = digests.iter().map(|p| p.digest.version).collect();
        assert_eq!(versions, vec![1, 2]);
        let api_digests: Vec<(u64, String)> = d["digests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| (g["version"].as_u64().unwrap(), g["hash"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(api_digests, digests.iter().map(|p| (p.digest.version, format!("{:#x}", p.hash))).collect::<Vec<_>>());
        // The whole digest and the owner's signature (from the posting transaction), for
        // the page to hash and verify.
        for (g, p) in d["digests"].as_array().unwrap().iter().zip(&digests) {
            assert_eq!(g["root_u"], format!("{:#x}", p.digest.rootU), "{g}");
            assert_eq!(g["root_c"], format!("{:#x}", p.digest.rootC), "{g}");
            let levels: Vec<String> = p.digest.levelRoots.iter().map(|r| format!("{r:#x}")).collect();
            assert_eq!(g["level_roots"], serde_json::json!(levels), "{g}");
            assert!(g["owner_sig"].as_str().is_some_and(|s| s.len() == 2 + 130), "a 65-byte owner signature: {g}");
            assert!(g["resize"].is_null(), "{g}");
        }
        let audits = market.audits_for_deal(deal, 0).await.unwrap();
        assert_eq!(audits.len(), 1);
        assert_eq!(d["audits"][0]["id"].as_u64(), Some(audits[0].audit_id));
        assert_eq!(d["audits"][0]["passed"], true);
        let epochs: Vec<String> = d["epochs"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
        assert_eq!(epochs.len(), info.num_epochs as usize);
        assert_eq!(epochs[..1], chain_epochs(&market, deal, 1).await[..]);
        assert!(epochs[2..].iter().all(|s| s == "future"), "{epochs:?}");
        let series = api(addr, "/api/series").await;
        let last = series.as_array().and_then(|v| v.last()).cloned().unwrap_or_default();
        assert_eq!(last["earned"].as_f64(), Some(info.price_per_epoch as f64), "the series' last sample: {series}");
        let summary = api(addr, "/api/summary").await;
        assert_eq!(summary["provider"], format!("{:#x}", w.provider));
        assert_eq!(summary["space"]["stored_bytes"].as_u64(), Some(info.num_blocks * u64::from(info.block_size)));
        assert_eq!(summary["tokens"]["earned"], info.price_per_epoch.to_string());
        assert_eq!(summary["epochs"]["proven"], 1, "{summary}");

        // The browser: the page shows the deal as the chain has it.
        let shot = w.path("dashboard.png");
        let mut b = Browser::start(&format!("http://{addr}/"), deal, &shot, &w.path("browser.err"));
        let shown = b.expect("SHOWN", 180);
        eprintln!("e2e_dashboard: the page shows {shown}");
        assert_eq!(shown["state"], "active", "{shown}");
        assert_eq!(shown["size"], format!("{} × 4 KiB", info.num_blocks), "{shown}");
        assert_eq!(shown["digest"], format!("v{} (t = {})", info.digest_version, info.write_count), "{shown}");
        assert_eq!(shown["digest_rows"], 2, "{shown}");
        // Each digest's EIP-712 hash, computed in the page by @dpor/client, is the one
        // the contract stored (getDigestRecord) and computes (its digestHash view), and
        // the owner's signature recovered to the deal's owner.
        let checks = shown["digest_checks"].as_array().unwrap();
        assert_eq!(checks.len(), 2, "{shown}");
        for p in &digests {
            let c = checks
                .iter()
                .find(|c| c["version"].as_u64() == Some(p.digest.version))
                .unwrap_or_else(|| panic!("v{}: {shown}", p.digest.version));
            let stored = market.digest_record(deal, p.digest.version).await.unwrap().digest_hash;
            assert_eq!(market.digest_hash(&p.digest).await.unwrap(), stored);
            assert_eq!(c["computed_hash"], format!("{stored:#x}"), "v{}: {shown}", p.digest.version);
            assert_eq!(c["verified"], "true", "v{}: {shown}", p.digest.version);
            assert_eq!(c["shown"], "verified", "v{}: {shown}", p.digest.version);
        }
        let row: Vec<String> = shown["row_epochs"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
        assert_eq!(row.len(), info.num_epochs as usize, "{shown}");
        assert_eq!(row[0], "proven", "{shown}");
        assert_ne!(row[1], "proven", "{shown}");
        assert_eq!(shown["detail_epochs"], shown["row_epochs"], "{shown}");
        assert_eq!(shown["proven"], 1, "{shown}");

        // Epoch 1 proven on chain: the open page shows it, without a reload.
        let start1 = market.epoch_window(deal, 1).await.unwrap().start;
        w.dev.warp_to(start1).await.unwrap();
        assert_eq!(settled(&w, &market, deal, 1).await, EpochStatus::Proven, "{}", w.node_log());
        b.say("proven 1");
        let updated = b.expect("UPDATED", 180);
        eprintln!("e2e_dashboard: after epoch 1 the page shows {updated}");
        assert_eq!(updated["marker"], "first-load", "the page was reloaded: {updated}");
        assert_eq!(updated["proven"], 2, "{updated}");
        let row: Vec<String> = updated["row_epochs"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
        assert_eq!(row[..2], chain_epochs(&market, deal, 2).await[..], "{updated}");
        let status = b.wait(60);
        assert!(status.success(), "browser script: {status}\n{}", std::fs::read_to_string(w.path("browser.err")).unwrap_or_default());
        drop(b);

        let png = std::fs::read(&shot).expect("the screenshot");
        assert!(png.len() > 10_000 && png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG screenshot ({} bytes)", png.len());
        if let Some(keep) = std::env::var_os("DPOR_DASHBOARD_SCREENSHOT") {
            std::fs::copy(&shot, &keep).expect("copy the screenshot");
        }
    })
    .await;
}

/// A dashboard on an address that is not loopback without an access token: the node
/// refuses to start, naming the key.
#[test]
fn the_node_refuses_a_dashboard_off_loopback_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(harness::node_bin())
        .args(["run", "--data-dir"])
        .arg(dir.path().join("node"))
        .args(["--dashboard-listen", "0.0.0.0:0", "--rpc-url", "http://127.0.0.1:9"])
        .stdin(Stdio::null())
        .output()
        .expect("run dpor-node");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started: {err}");
    assert!(err.contains("dashboard_token") && err.contains("not a loopback"), "{err}");
}
