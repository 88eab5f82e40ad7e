//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`): a deal that
//! grows past its N (App. A.3) and shrinks again. `dpor resize` has the node rebuild C
//! for N', verifies it, and `resizeDeal` moves price, escrow and collateral on chain
//! with both parties' signatures; the file then grows with `dpor sync`, and a public
//! audit of the new digest passes. See `e2e_harness/mod.rs` for the harness.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use harness::{within, World, AUDITOR, BETA, OWNER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deal_grows_past_n_and_shrinks_with_terms_adjusted_on_chain() {
    within(600, async {
        let w = World::start().await;
        // 32 KiB, β = 4096: N = 8.
        let small = w.make_file("file", 32 << 10, 11);
        let deal = w.open_and_upload("file", 16).await;
        let market = w.client(OWNER).await;
        let before = market.get_deal(deal).await.expect("deal");
        assert_eq!(before.num_blocks, 8);

        // A file 3.5× larger does not fit the deal: sync says so and changes nothing.
        let big = w.make_file("big", 112 << 10, 12);
        let refused = w.dpor(OWNER, &["sync", w.path("big").to_str().unwrap()]).await;
        assert!(!refused.ok, "a sync past N·β must fail: {}", refused.stdout);

        // Grow to the file's size: N' = 32 (28 blocks, rounded up).
        // balance + owed: the node may withdraw what it is owed at any time, so both are
        // read with no block mined between them (anvil mines one per transaction).
        let provider_total = || async {
            loop {
                let block = market.block_number().await.expect("block number");
                let total = market.balance_of(w.provider).await.expect("balance") + market.owed(w.provider).await.expect("owed");
                if market.block_number().await.expect("block number") == block {
                    break total;
                }
            }
        };
        let provider_tokens = provider_total().await;
        let r = w.dpor(OWNER, &["resize", "--file", w.path("big").to_str().unwrap(), "--mint"]).await.expect_ok("resize up");
        assert_eq!((r["from_blocks"].as_u64(), r["to_blocks"].as_u64()), (Some(8), Some(32)), "{r}");
        assert_eq!(r["version"], 2, "{r}");
        let grown = market.get_deal(deal).await.expect("deal");
        assert_eq!(grown.num_blocks, 32, "node log:\n{}", w.node_log());
        assert_eq!(grown.digest_version, 2);
        assert_eq!(grown.write_count, 0);
        // Same per-block terms: price and collateral ×4; the provider locked 3× more.
        assert_eq!(grown.price_per_epoch, before.price_per_epoch * 4);
        assert_eq!(grown.collateral, before.collateral * 4);
        let locked = provider_tokens - provider_total().await;
        assert_eq!(locked, alloy_primitives::U256::from(before.collateral * 3), "the provider pays the collateral increase");
        assert!(grown.escrow > before.escrow, "escrow {} → {}", before.escrow, grown.escrow);

        // The old content is intact (the new blocks are zero), then sync fills it.
        let down = w.path("down.bin");
        let j = w.dpor(OWNER, &["download", down.to_str().unwrap()]).await.expect_ok("download after growth");
        assert!(j["fallback"].is_null(), "download after growth: U must verify, no fallback to extraction: {j}");
        assert!(std::fs::read(&down).unwrap() == small, "the file before the sync");
        let s = w.dpor(OWNER, &["sync", w.path("big").to_str().unwrap()]).await.expect_ok("sync the larger file");
        assert_eq!(s["report"]["new_bytes"].as_u64(), Some((112 << 10) as u64), "{s}");
        let j = w.dpor(OWNER, &["download", down.to_str().unwrap()]).await.expect_ok("download after sync");
        assert!(j["fallback"].is_null(), "download after sync: U must verify, no fallback to extraction: {j}");
        assert!(std::fs::read(&down).unwrap() == big, "download differs from the larger file");
        let cp = w.dpor(OWNER, &["checkpoint"]).await.expect_ok("checkpoint after the sync");
        assert_eq!(cp["version"], 3, "{cp}");

        // A public audit of the new digest (N' = 32: C has 64 coded blocks) passes.
        let start = w.client(AUDITOR).await.epoch_window(deal, 0).await.expect("window").start;
        w.dev.warp_to(start).await.expect("warp");
        let a = w.dpor(AUDITOR, &["audit", &deal.to_string()]).await.expect_ok("audit");
        assert_eq!(a["passed"], true, "{a}");
        assert_eq!(a["version"], 3, "{a}");

        // Shrink back to 8 blocks: the first 32 KiB of the larger file remain, and the
        // surplus collateral is credited to the provider (proven epochs only add).
        let total_before = provider_total().await;
        let r = w.dpor(OWNER, &["resize", "--blocks", "8"]).await.expect_ok("resize down");
        assert_eq!(r["to_blocks"].as_u64(), Some(8), "{r}");
        let shrunk = market.get_deal(deal).await.expect("deal");
        assert_eq!((shrunk.num_blocks, shrunk.collateral), (8, before.collateral));
        assert_eq!(shrunk.price_per_epoch, before.price_per_epoch);
        assert!(provider_total().await - total_before >= alloy_primitives::U256::from(before.collateral * 3), "the surplus collateral is the provider's");
        let j = w.dpor(OWNER, &["download", down.to_str().unwrap()]).await.expect_ok("download after shrink");
        assert!(j["fallback"].is_null(), "download after shrink: U must verify, no fallback to extraction: {j}");
        assert!(std::fs::read(&down).unwrap() == big[..8 * BETA], "download after the shrink");
        let ext = w.path("extract.bin");
        w.dpor(OWNER, &["extract", ext.to_str().unwrap()]).await.expect_ok("extract after the shrink");
        assert!(std::fs::read(&ext).unwrap() == big[..8 * BETA], "extract after the shrink");
    })
    .await;
}
