//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`): the node's
//! Prometheus metrics during the demo's workload match what the chain and the CLI
//! report, `dpor watch --metrics-listen` exports its own, and `/health` goes 503 when
//! the chain dies. See `e2e_harness/mod.rs` for the harness.
//!
//! The node runs with `metrics_listen = "127.0.0.1:0"` and `auto_withdraw = false` (a
//! config file, so the tokens owed accumulate), and `--defer-from-blocks 4` (a batch's
//! runs of four coded blocks and more are built by the background builder, which the
//! rebuild metrics count). A deal of 8 blocks is opened, uploaded and checkpointed,
//! written 4 times and by one batch of 4 (a deferred C-rebuild), downloaded, and two
//! epochs are proven by the node; `/metrics` is then scraped
//! and parsed strictly (`dpor_metrics::exposition`), and each value compared with the
//! chain's (epochs proven, tokens owed, gas of the proofs from their receipts) or the
//! CLI's (blocks and bytes stored, writes).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use alloy::providers::{Provider, ProviderBuilder};
use alloy::rpc::types::Filter;
use alloy::sol_types::SolEvent;
use dpor_chain::bindings::DporMarket;
use dpor_chain::{EpochStatus, Market};
use dpor_metrics::exposition::{parse, Exposition};
use harness::{within, Proc, World, AUDITOR, BETA, OWNER};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The address after `marker` in the file `path` (a "… on http://ADDR/metrics" line),
/// waiting for it up to 60 s while `alive` holds.
async fn addr_in(
    path: &std::path::Path,
    marker: &str,
    mut alive: impl FnMut() -> bool,
) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(rest) = text
            .lines()
            .find_map(|l| l.split_once(marker).map(|(_, r)| r.to_string()))
        {
            let addr = rest.split('/').next().unwrap_or_default();
            return addr
                .parse()
                .unwrap_or_else(|e| panic!("bad address {addr:?} in {marker:?} line: {e}"));
        }
        assert!(
            alive(),
            "the process exited before announcing its metrics:\n{text}"
        );
        assert!(
            Instant::now() < deadline,
            "no {marker:?} line within 60 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GET /metrics, parsed strictly.
async fn scrape(addr: SocketAddr) -> Exposition {
    let (code, body) = dpor_metrics::get(addr, "/metrics")
        .await
        .expect("GET /metrics");
    assert_eq!(code, 200, "{body}");
    parse(&body).unwrap_or_else(|e| panic!("the exposition does not parse: {e}\n{body}"))
}

/// Scrapes until `ready` holds for the parsed metrics (at most `secs` seconds).
async fn scrape_until(
    addr: SocketAddr,
    secs: u64,
    what: &str,
    ready: impl Fn(&Exposition) -> bool,
) -> Exposition {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let e = scrape(addr).await;
        if ready(&e) {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not reached within {secs} s; last scrape: {e:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until epoch `epoch` of `deal` is settled on chain; returns its status.
async fn settled(w: &World, market: &Market, deal: u64, epoch: u64) -> EpochStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = market.epoch_status(deal, epoch).await.unwrap();
        if s != EpochStatus::None {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "deal {deal} epoch {epoch} not settled within 120 s:\n{}",
            w.node_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Gas used by the transactions that emitted the `EpochProven` logs of `deal`, from
/// their receipts.
async fn proof_gas(rpc_url: &str, market: alloy_primitives::Address, deal: u64) -> (u64, u64) {
    let p = ProviderBuilder::new().connect_http(rpc_url.parse().unwrap());
    let f = Filter::new()
        .address(market)
        .event_signature(DporMarket::EpochProven::SIGNATURE_HASH)
        .topic1(alloy_primitives::B256::from(alloy_primitives::U256::from(
            deal,
        )))
        .from_block(0);
    let logs = p.get_logs(&f).await.unwrap();
    let mut gas = 0;
    for l in &logs {
        let r = p
            .get_transaction_receipt(l.transaction_hash.unwrap())
            .await
            .unwrap()
            .unwrap();
        gas += r.gas_used;
    }
    (logs.len() as u64, gas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_metrics_match_the_chain_and_the_cli_and_health_follows_the_chain() {
    within(600, async {
        let cfg = tempfile::tempdir().unwrap();
        let cfg_file = cfg.path().join("node.toml");
        std::fs::write(
            &cfg_file,
            "metrics_listen = \"127.0.0.1:0\"\nauto_withdraw = false\n",
        )
        .unwrap();
        let w = World::start_with(&[
            "--config",
            cfg_file.to_str().unwrap(),
            "--defer-from-blocks",
            "4",
        ])
        .await;
        let node_log = w.path("node.log");
        let metrics = addr_in(&node_log, "dpor-node: metrics on http://", || true).await;
        assert!(metrics.ip().is_loopback(), "{metrics}");

        // Health: ok once the agent's first poll after registering read the chain.
        let deadline = Instant::now() + Duration::from_secs(60);
        let body = loop {
            let (code, body) = dpor_metrics::get(metrics, "/health").await.unwrap();
            if code == 200 {
                break body;
            }
            assert_eq!(code, 503, "{body}");
            assert!(
                Instant::now() < deadline,
                "/health not ok within 60 s of registering: {body}\n{}",
                w.node_log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let h: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (
                h["status"].as_str(),
                h["store"]["open"].as_bool(),
                h["chain"]["reachable"].as_bool()
            ),
            (Some("ok"), Some(true), Some(true)),
            "{h}"
        );

        eprintln!("e2e_metrics: node up, metrics on {metrics}, health ok");
        // The demo's workload on a small file: deal, upload, digest v1, 4 writes, download.
        w.make_file("file", 8 * BETA, 3);
        let deal = w.open_and_upload("file", 16).await;
        // 4 single writes, then one batch of 4 (t reaches N = 8: a C-rebuild, which a
        // batch defers to the background builder; single writes never defer).
        let singles = 4u64;
        for k in 0..singles {
            std::fs::write(w.path("block"), harness::pseudo_random(BETA, 100 + k)).unwrap();
            let index = (k * 2).to_string();
            w.dpor(OWNER, &["write", &index, w.path("block").to_str().unwrap()])
                .await
                .expect_ok("write");
        }
        let mut batch: Vec<String> = vec!["write".into()];
        for k in 0..4u64 {
            let f = w.path(&format!("batch{k}"));
            std::fs::write(&f, harness::pseudo_random(BETA, 200 + k)).unwrap();
            batch.push((k * 2 + 1).to_string());
            batch.push(f.to_str().unwrap().to_string());
        }
        let args: Vec<&str> = batch.iter().map(String::as_str).collect();
        w.dpor(OWNER, &args).await.expect_ok("write batch");
        let writes = singles + 4;
        w.dpor(OWNER, &["checkpoint"])
            .await
            .expect_ok("checkpoint v2");
        let down = w.path("down.bin");
        w.dpor(OWNER, &["download", down.to_str().unwrap()])
            .await
            .expect_ok("download");
        let status = w.dpor(OWNER, &["status"]).await.expect_ok("status");

        eprintln!("e2e_metrics: uploaded, written, downloaded");
        // Two epochs proven by the node's agent.
        let market = w.client(AUDITOR).await;
        for epoch in 0..2 {
            let start = market.epoch_window(deal, epoch).await.unwrap().start;
            w.dev.warp_to(start).await.unwrap();
            assert_eq!(
                settled(&w, &market, deal, epoch).await,
                EpochStatus::Proven,
                "epoch {epoch}:\n{}",
                w.node_log()
            );
        }

        eprintln!("e2e_metrics: two epochs proven on chain");
        // Scrape once the node's counters caught up with the chain (they move on its
        // next poll); then compare everything.
        let e = scrape_until(metrics, 120, "2 epochs proven in the metrics", |e| {
            e.value("dpor_node_epochs_proven_total", &[]) == Some(2.0)
                && e.value(
                    "dpor_node_chain_transactions_total",
                    &[("method", "submitEpochProof"), ("outcome", "mined")],
                ) == Some(2.0)
        })
        .await;
        let info = market.get_deal(deal).await.unwrap();
        let provider = w.provider;

        // Epochs: the chain's statuses.
        let mut proven_on_chain = 0;
        for epoch in 0..2 {
            if market.epoch_status(deal, epoch).await.unwrap() == EpochStatus::Proven {
                proven_on_chain += 1;
            }
        }
        assert_eq!(
            e.value("dpor_node_epochs_proven_total", &[]),
            Some(f64::from(proven_on_chain))
        );
        assert_eq!(e.value("dpor_node_epochs_missed_total", &[]), Some(0.0));

        // Tokens: owed on chain (no withdrawal) = 2 epochs' pay = what the node earned.
        let owed = e2e_owed(&market, provider).await;
        let owed_metric = scrape_until(metrics, 60, "owed gauge = owed on chain", |e| {
            e.value("dpor_node_tokens_owed_base_units", &[]) == Some(owed as f64)
        })
        .await;
        assert_eq!(owed, 2 * info.price_per_epoch, "owed = 2 epochs of pay");
        assert_eq!(
            owed_metric.value(
                "dpor_node_tokens_earned_base_units_total",
                &[("source", "epochs")]
            ),
            Some(owed as f64)
        );
        assert_eq!(
            e.value("dpor_node_tokens_slashed_base_units_total", &[]),
            Some(0.0)
        );
        assert_eq!(
            e.value("dpor_node_tokens_withdrawn_base_units_total", &[]),
            Some(0.0)
        );

        // Proofs and their gas: the receipts of the EpochProven transactions.
        let (proofs, gas) = proof_gas(w.dev.rpc_url(), w.dev.market(), deal).await;
        assert_eq!(proofs, 2);
        assert_eq!(
            e.value(
                "dpor_node_chain_gas_used_total",
                &[("method", "submitEpochProof")]
            ),
            Some(gas as f64)
        );
        assert!(gas > 100_000, "{gas}");
        assert_eq!(e.value("dpor_node_chain_rpc_errors_total", &[]), Some(0.0));

        // Storage: the CLI's and the chain's N and β.
        let n = status["num_blocks"].as_u64().unwrap();
        let beta = status["block_bytes"].as_u64().unwrap();
        assert_eq!((n, beta), (info.num_blocks, u64::from(info.block_size)));
        assert_eq!(
            (
                status["write_count"].as_u64(),
                status["rebuild_count"].as_u64()
            ),
            (Some(0), Some(1)),
            "8 writes to N = 8: {status}"
        );
        assert_eq!(e.value("dpor_node_stored_blocks", &[]), Some(n as f64));
        assert_eq!(
            e.value("dpor_node_stored_bytes", &[]),
            Some((n * beta) as f64)
        );
        assert_eq!(
            e.value("dpor_node_store_deals", &[("phase", "live")]),
            Some(1.0)
        );
        assert_eq!(
            e.value("dpor_node_deals", &[("state", "active")]),
            Some(1.0)
        );
        let used = e.value("dpor_node_disk_used_bytes", &[]).unwrap();
        assert!(used >= (n * beta) as f64, "disk used {used}");
        assert!(e.value("dpor_node_free_capacity_bytes", &[]).unwrap() > 0.0);

        // Requests and bytes: every block uploaded and written, the download served.
        let req = |kind| {
            e.value(
                "dpor_node_requests_total",
                &[("kind", kind), ("outcome", "ok")],
            )
        };
        assert_eq!(
            (req("write"), req("write-batch")),
            (Some(singles as f64), Some(1.0))
        );
        assert_eq!(
            e.value(
                "dpor_node_request_duration_seconds_count",
                &[("kind", "write")]
            ),
            Some(singles as f64)
        );
        assert_eq!(
            e.value("dpor_node_written_bytes_total", &[]),
            Some(((n + writes) * beta) as f64)
        );
        let read = e.value("dpor_node_read_bytes_total", &[]).unwrap();
        assert!(read >= (n * beta) as f64, "read {read}");
        // The batch's C-rebuild (16 coded blocks, at least 4) was deferred and built once.
        assert_eq!(
            e.value(
                "dpor_node_background_rebuild_duration_seconds_count",
                &[("run", "c")]
            ),
            Some(1.0),
            "{:#?}",
            e.all("dpor_node_background_rebuild_duration_seconds_count")
        );

        eprintln!("e2e_metrics: node metrics match; starting dpor watch");
        // `dpor watch --metrics-listen`: its checks as its log says.
        let watch_out = w.path("watch.out");
        let watch_err = w.path("watch.err");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_dpor"))
            .args([
                "--json",
                "watch",
                "--deal",
                &deal.to_string(),
                "--interval",
                "1",
                "--metrics-listen",
                "127.0.0.1:0",
                "--watch-state",
            ])
            .arg(w.path("watch.json"))
            .env("DPOR_RPC_URL", w.dev.rpc_url())
            .env("DPOR_MARKET", format!("{:?}", w.dev.market()))
            .env("DPOR_KEY_FILE", w.path(&format!("key{AUDITOR}")))
            .env_remove("DPOR_NODE")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&watch_out).unwrap())
            .stderr(std::fs::File::create(&watch_err).unwrap())
            .spawn()
            .expect("start dpor watch");
        let mut watch = Proc::new(child, "dpor watch");
        let waddr = addr_in(&watch_err, "watch: metrics on http://", || watch.alive()).await;
        let recorded = || {
            harness::actions(&std::fs::read_to_string(&watch_out).unwrap_or_default())
                .iter()
                .filter(|a| a["action"] == "record")
                .count()
        };
        let we = scrape_until(waddr, 120, "watch: one audit passed and recorded", |e| {
            let passed = e
                .value(
                    "dpor_watch_checks_total",
                    &[("kind", "audit"), ("result", "passed")],
                )
                .unwrap_or(0.0);
            passed >= 1.0 && passed == recorded() as f64
        })
        .await;
        assert_eq!(we.value("dpor_watch_deals_watched", &[]), Some(1.0));
        assert_eq!(we.sum("dpor_watch_disputes_opened_total"), 0.0);
        assert_eq!(
            we.value("dpor_watch_errors_total", &[]),
            Some(0.0),
            "{}",
            std::fs::read_to_string(&watch_out).unwrap_or_default()
        );
        let records: Vec<serde_json::Value> =
            harness::actions(&std::fs::read_to_string(&watch_out).unwrap())
                .into_iter()
                .filter(|a| a["action"] == "record")
                .collect();
        for r in &records {
            let epoch = r["epoch"].as_u64().unwrap();
            let audits = market
                .audits_by(deal, epoch, w.dev.key(AUDITOR).address(), 0)
                .await
                .unwrap();
            assert_eq!(
                audits.len(),
                1,
                "the recorded audit of epoch {epoch} is on chain"
            );
        }
        watch.kill9();

        eprintln!("e2e_metrics: watch metrics match; killing anvil");
        // The chain dies: /health goes 503 within a few polls, the RPC errors count.
        let pid = w.dev.pid().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (code, body) = dpor_metrics::get(metrics, "/health").await.unwrap();
            if code == 503 {
                let h: serde_json::Value = serde_json::from_str(&body).unwrap();
                assert_eq!(h["chain"]["reachable"], false, "{h}");
                assert_eq!(h["store"]["open"], true, "{h}");
                break;
            }
            assert_eq!(code, 200, "{body}");
            assert!(
                Instant::now() < deadline,
                "/health still 200 60 s after the chain died: {body}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let e = scrape(metrics).await;
        assert!(e.value("dpor_node_chain_rpc_errors_total", &[]).unwrap() >= 1.0);
    })
    .await;
}

/// What the market owes `who`, as u128.
async fn e2e_owed(market: &Market, who: alloy_primitives::Address) -> u128 {
    u128::try_from(market.owed(who).await.unwrap()).unwrap()
}
