//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`): a deal's life
//! on a small file, and a node that lost more than half of a level failing the public
//! audit, disputed and slashed. See `e2e_harness/mod.rs` for the harness.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_chain::DisputeState;
use harness::{pseudo_random, within, World, AUDITOR, BETA, OWNER};

/// Writes `count` pseudo-random blocks at pseudo-random indices below `blocks` with
/// `dpor write`, applying each to `expected`. Returns the last write's JSON.
async fn random_writes(w: &World, expected: &mut [u8], blocks: usize, count: usize, seed: u64) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    for k in 0..count {
        let i = (pseudo_random(8, seed + k as u64).iter().fold(0usize, |a, &b| a * 31 + b as usize)) % blocks;
        let block = pseudo_random(BETA, 1000 + seed + k as u64);
        std::fs::write(w.path("block"), &block).expect("block file");
        last = w.dpor(OWNER, &["write", &i.to_string(), w.path("block").to_str().expect("path")]).await.expect_ok(&format!("write {k} (block {i})"));
        expected[i * BETA..(i + 1) * BETA].copy_from_slice(&block);
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deal_life_upload_writes_c_rebuild_download_extract_audit() {
    within(600, async {
        let w = World::start().await;
        // 64 KiB, β = 4096: N = 16; λ = 16, so C (32 coded blocks) is sampled and the
        // levels are read whole.
        let mut expected = w.make_file("file", 64 << 10, 7);
        let deal = w.open_and_upload("file", 16).await;

        // N + 3 writes: every write an HAdd, one C-rebuild (the 16th), then t = 3.
        let last = random_writes(&w, &mut expected, 16, 19, 1).await;
        assert_eq!(last["rebuild_count"], 1, "one C-rebuild after 19 writes to N = 16: {last}");
        assert_eq!(last["write_count"], 3, "{last}");
        let cp = w.dpor(OWNER, &["checkpoint"]).await.expect_ok("checkpoint v2");
        assert_eq!(cp["version"], 2, "{cp}");
        let onchain = w.client(OWNER).await.get_deal(deal).await.expect("deal");
        assert_eq!(onchain.digest_version, 2);
        assert_eq!(onchain.write_count, 3);

        // Verified read of one block.
        let out = w.path("read.bin");
        w.dpor(OWNER, &["read", "5", "--out", out.to_str().expect("path")]).await.expect_ok("read 5");
        assert_eq!(std::fs::read(&out).expect("read.bin"), &expected[5 * BETA..6 * BETA]);

        // Download: byte-identical to the file as written.
        let down = w.path("down.bin");
        let j = w.dpor(OWNER, &["download", down.to_str().expect("path")]).await.expect_ok("download");
        assert!(j["fallback"].is_null(), "U itself must verify, no fallback to extraction: {j}");
        assert!(std::fs::read(&down).expect("down.bin") == expected, "download differs from the file as written");

        // Public audit by an account with no secret: passes, recorded on chain (time
        // warped to the start of the deal's first epoch, whose seed picks the samples).
        let start = w.client(AUDITOR).await.epoch_window(deal, 0).await.expect("window").start;
        w.dev.warp_to(start).await.expect("warp");
        let a = w.dpor(AUDITOR, &["audit", &deal.to_string(), "--record"]).await.expect_ok("audit");
        assert_eq!(a["passed"], true, "{a}");
        assert_eq!(a["version"], 2, "{a}");
        // C: 16 positions; level 0 (2 blocks) and level 1 (4 blocks) whole.
        assert_eq!(a["runs_checked"], 3, "{a}");
        assert_eq!(a["samples_checked"], 22, "{a}");
        assert_eq!(a["failures_total"], 0, "{a}");
        assert!(a["bytes_received"].as_u64().unwrap_or(0) > 22 * 4696, "{a}");
        assert!(a["record"]["audit_id"].as_u64().unwrap_or(0) >= 1, "{a}");
        // Same digest and seed: the same transcript.
        let epoch = a["epoch"].as_u64().expect("epoch").to_string();
        let again = w.dpor(AUDITOR, &["audit", &deal.to_string(), "--epoch", &epoch]).await.expect_ok("audit again");
        assert_eq!(again["transcript_hash"], a["transcript_hash"]);

        // Just under half of every run erased on the node's disk: extract still works.
        let report = w.erase(deal, &["--fraction", "0.45"]);
        assert!(report.contains("zeroed"), "{report}");
        let ext = w.path("extract.bin");
        w.dpor(OWNER, &["extract", ext.to_str().expect("path")]).await.expect_ok("extract after erasing 45%");
        assert!(std::fs::read(&ext).expect("extract.bin") == expected, "extract differs from the file as written");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_missing_most_of_a_level_fails_the_audit_and_is_slashed() {
    within(600, async {
        let w = World::start().await;
        // 32 KiB: N = 8; 7 writes fill levels 0, 1, 2 (2, 4, 8 coded blocks); λ = 16
        // reads every run whole, so the failures are exact.
        let mut expected = w.make_file("file", 32 << 10, 3);
        let deal = w.open_and_upload("file", 16).await;
        random_writes(&w, &mut expected, 8, 7, 5).await;
        w.dpor(OWNER, &["checkpoint"]).await.expect_ok("checkpoint v2");

        // The node loses 6 of the 8 coded blocks of level 2: unrecoverable.
        let report = w.erase(deal, &["--largest-level", "--fraction", "0.75"]);
        assert!(report.contains("zeroed 6 of 8"), "{report}");

        let start = w.client(AUDITOR).await.epoch_window(deal, 0).await.expect("window").start;
        w.dev.warp_to(start).await.expect("warp");
        let r = w.dpor(AUDITOR, &["audit", &deal.to_string(), "--dispute"]).await;
        assert!(!r.ok, "the audit of a node that lost 6/8 of a level must exit non-zero:\n{}", r.stdout);
        let j = &r.json;
        assert_eq!(j["passed"], false, "{j}");
        assert_eq!(j["failures_total"], 6, "{j}");
        let failures = j["failures"].as_array().expect("failures listed");
        assert!(failures.iter().all(|f| f["run"] == "H2" && f["run_tag"] == 3), "{j}");
        assert!(r.stderr.contains("failed"), "stderr: {}", r.stderr);

        // The dispute names the first failed sample, chunk 0 (the block came back zeroed).
        let id = j["dispute_id"].as_u64().unwrap_or_else(|| panic!("no dispute opened: {j}\n{}", r.stderr));
        let market = w.client(AUDITOR).await;
        let q = market.get_dispute(id).await.expect("dispute");
        assert_eq!(q.state, DisputeState::Open);
        assert_eq!(q.run_tag, 3);
        assert_eq!(Some(q.position), failures[0]["position"].as_u64());
        assert_eq!(q.chunk_index, 0);
        assert_eq!(q.version, 2);

        // Too early to slash: a clear refusal.
        let early = w.dpor(AUDITOR, &["slash", &id.to_string()]).await;
        assert!(!early.ok && early.stderr.contains("can be slashed after timestamp"), "{}", early.stderr);

        // The node cannot answer; past the window anyone slashes.
        w.dev.warp_to(q.deadline + 1).await.expect("warp");
        let s = w.dpor(AUDITOR, &["slash", &id.to_string()]).await.expect_ok("slash");
        assert_eq!(market.get_dispute(id).await.expect("dispute").state, DisputeState::Slashed, "node log:\n{}", w.node_log());
        let to_challenger: u128 = s["to_challenger"].as_str().and_then(|v| v.parse().ok()).expect("to_challenger");
        let to_owner: u128 = s["to_owner"].as_str().and_then(|v| v.parse().ok()).expect("to_owner");
        assert!(to_challenger > 0 && to_owner > 0, "{s}");
        assert_eq!(s["failures"], 1, "{s}");
        let wd = w.dpor(AUDITOR, &["withdraw"]).await.expect_ok("withdraw");
        assert_eq!(wd["amount"].as_str().and_then(|v| v.parse::<u128>().ok()), Some(to_challenger), "{wd}");
    })
    .await;
}
