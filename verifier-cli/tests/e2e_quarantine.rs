//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`): one damaged
//! deal does not stop the node. Two deals are uploaded; the node is stopped, one
//! deal's `u.blocks` deleted, the node started again on the same data dir and port.
//! It starts, quarantines the damaged deal (logged, and shown by `dpor status`),
//! proves the next epoch of both deals (the damaged one's from its intact coded runs),
//! takes the healthy deal's writes and refuses the damaged one's; `dpor extract` of
//! the damaged deal gives the file, and `dpor download` gives it too by falling back
//! to extraction. See `e2e_harness/mod.rs` for the harness.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_chain::EpochStatus;
use harness::{node_bin, within, Proc, World, AUDITOR, OWNER, PROVIDER};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Kills the world's node and starts it again on the same data dir and port (the
/// address registered on chain); returns once it listens. Its log goes on in
/// `node.log`.
async fn restart_node(w: &mut World) {
    w.node.kill9();
    // /ip4/127.0.0.1/tcp/PORT/p2p/…
    let port: u16 = w.node_addr.split('/').nth(4).and_then(|p| p.parse().ok()).expect("a port in the node's address");
    let addr_file = w.path("node.addr");
    std::fs::remove_file(&addr_file).unwrap();
    let log = std::fs::OpenOptions::new().append(true).open(w.path("node.log")).unwrap();
    let child = std::process::Command::new(node_bin())
        .args(["run", "--data-dir"])
        .arg(w.path("node"))
        .args(["--listen", &format!("/ip4/127.0.0.1/tcp/{port}"), "--rpc-url", w.dev.rpc_url(), "--market"])
        .arg(format!("{:?}", w.dev.market()))
        .arg("--provider-key-file")
        .arg(w.path(&format!("key{PROVIDER}")))
        .arg("--addr-file")
        .arg(&addr_file)
        .args(["--poll-interval-ms", "200"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("restart dpor-node");
    w.node = Proc::new(child, "dpor-node");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&addr_file).is_ok_and(|s| s.ends_with('\n')) {
        assert!(w.node.alive(), "the node exited on restart:\n{}", w.node_log());
        assert!(Instant::now() < deadline, "the node did not listen again within 60 s:\n{}", w.node_log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until epoch `epoch` of `deal` is settled on chain and returns its status.
async fn settled(w: &World, deal: u64, epoch: u64) -> EpochStatus {
    let market = w.client(AUDITOR).await;
    let t0 = Instant::now();
    loop {
        let s = market.epoch_status(deal, epoch).await.unwrap();
        if s != EpochStatus::None {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "deal {deal} epoch {epoch} not settled within 120 s:\n{}", w.node_log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deal_whose_u_file_is_deleted_is_quarantined_and_the_node_serves_the_rest() {
    within(600, async {
        let mut w = World::start().await;
        // Deal A (owner.json) will be damaged; deal B (owner-b.json) stays healthy.
        let file_a = w.make_file("file-a", 32 << 10, 21);
        let deal_a = w.open_and_upload("file-a", 16).await;
        let file_b = w.make_file("file-b", 32 << 10, 22);
        let (path_b, state_b) = (w.path("file-b"), w.path("owner-b.json"));
        let (path_b, state_b) = (path_b.to_str().unwrap(), state_b.to_str().unwrap());
        let provider = format!("{:?}", w.provider);
        let open = ["--state", state_b, "deal", "open", "--provider", &provider, "--file", path_b, "--lambda", "16", "--samples", "2", "--epochs", "100", "--mint"];
        let deal_b = w.dpor(OWNER, &open).await.expect_ok("deal open B")["deal"].as_u64().unwrap();
        w.dpor(OWNER, &["--state", state_b, "upload", path_b]).await.expect_ok("upload B");
        w.dpor(OWNER, &["--state", state_b, "checkpoint"]).await.expect_ok("checkpoint B");

        // The node stopped, deal A's U blocks deleted, the node started again.
        w.node.kill9();
        let u = w.path("node").join("store").join("deals").join(deal_a.to_string()).join("u.blocks");
        std::fs::remove_file(&u).unwrap();
        restart_node(&mut w).await;
        assert!(w.node_log().contains("QUARANTINED"), "no quarantine logged:\n{}", w.node_log());

        // Status: A quarantined (naming the file), B not.
        let s = w.dpor(OWNER, &["status"]).await;
        assert!(s.ok, "{}\n{}", s.stdout, s.stderr);
        let why = s.json["node"]["damaged"].as_str().unwrap_or_else(|| panic!("deal A not reported damaged: {}", s.json));
        assert!(why.contains("u.blocks"), "{why}");
        let s = w.dpor(OWNER, &["--state", state_b, "status"]).await.expect_ok("status B");
        assert!(s["node"]["damaged"].is_null(), "{s}");

        // The next epoch of both deals: proven by the node's agent (A's from its intact
        // coded runs, which are all an epoch proof needs).
        let market = w.client(AUDITOR).await;
        let (wa, wb) = (market.epoch_window(deal_a, 0).await.unwrap(), market.epoch_window(deal_b, 0).await.unwrap());
        w.dev.warp_to(wa.start.max(wb.start)).await.unwrap();
        let epoch_of = |start: u64, at: u64| (at - start) / (wb.deadline - wb.start);
        let at = wa.start.max(wb.start);
        assert_eq!(settled(&w, deal_b, epoch_of(wb.start, at)).await, EpochStatus::Proven, "the healthy deal's epoch:\n{}", w.node_log());
        assert_eq!(settled(&w, deal_a, epoch_of(wa.start, at)).await, EpochStatus::Proven, "the damaged deal's epoch:\n{}", w.node_log());

        // The healthy deal takes writes; the damaged one refuses them, clearly.
        std::fs::write(w.path("block"), vec![5u8; harness::BETA]).unwrap();
        let block = w.path("block");
        let block = block.to_str().unwrap();
        w.dpor(OWNER, &["--state", state_b, "write", "1", block]).await.expect_ok("write to the healthy deal");
        let r = w.dpor(OWNER, &["write", "1", block]).await;
        assert!(!r.ok && r.stderr.contains("quarantined"), "a write to the damaged deal:\n{}\n{}", r.stdout, r.stderr);

        // The damaged deal's file: extracted from the coded runs, and downloaded by
        // falling back to the same extraction.
        let ext = w.path("extract-a.bin");
        w.dpor(OWNER, &["extract", ext.to_str().unwrap()]).await.expect_ok("extract A");
        assert!(std::fs::read(&ext).unwrap() == file_a, "extract of the damaged deal differs from the file");
        let down = w.path("download-a.bin");
        let r = w.dpor(OWNER, &["download", down.to_str().unwrap()]).await;
        assert!(r.ok, "download A:\n{}\n{}", r.stdout, r.stderr);
        assert_eq!(r.json["fallback"], "extract", "{}", r.json);
        assert!(r.stderr.contains("falling back to extraction"), "{}", r.stderr);
        assert!(std::fs::read(&down).unwrap() == file_a, "download of the damaged deal differs from the file");

        // The healthy deal downloads U directly, with the write.
        let mut want_b = file_b.clone();
        want_b[harness::BETA..2 * harness::BETA].fill(5);
        let down = w.path("download-b.bin");
        let j = w.dpor(OWNER, &["--state", state_b, "download", down.to_str().unwrap()]).await.expect_ok("download B");
        assert!(j["fallback"].is_null(), "{j}");
        assert!(std::fs::read(&down).unwrap() == want_b, "download of the healthy deal differs from the file");
    })
    .await;
}
