//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`): a node that
//! keeps only the first half of every coded block (zeroed on its disk with
//! `dpor-node erase --keep-half`) is caught by the epoch proofs (its agent cannot build
//! a whole-block proof, so the epoch is missed and marked so, a fault) and by
//! `dpor watch` (audit served wrong → dispute → slashed after the deadline), and watch
//! restarted at any point (including right after a transaction whose progress was not
//! saved) neither repeats nor skips an action.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_chain::{DisputeState, EpochStatus};
use harness::{actions, within, World, AUDITOR};


fn count(acts: &[serde_json::Value], what: &str) -> usize {
    acts.iter().filter(|a| a["action"] == what).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_kept_blocks_are_caught_by_epoch_proofs_and_by_watch() {
    within(600, async {
        let w = World::start().await;
        w.make_file("file", 32 << 10, 11);
        let deal = w.open_and_upload("file", 16).await;
        let ds = deal.to_string();
        let market = w.client(AUDITOR).await;

        // The node keeps only the first half of every coded block of every run.
        let report = w.erase(deal, &["--fraction", "1.0", "--keep-half"]);
        assert!(report.contains("zeroed"), "{report}");

        let state = w.path("watch.json");
        let st = state.to_str().unwrap();
        let args = ["watch", "--deal", ds.as_str(), "--once", "--watch-state", st, "--retries", "1"];
        let watch = || w.dpor(AUDITOR, &args);

        // Epoch 0 starts: watch audits, the node serves half-zeroed blocks → a dispute.
        let w0 = market.epoch_window(deal, 0).await.unwrap();
        w.dev.warp_to(w0.start).await.unwrap();
        let before = std::fs::read(&state).ok();
        let r = watch().await;
        assert!(r.ok, "watch pass 1: {}\n{}", r.stdout, r.stderr);
        let a = actions(&r.stdout);
        assert_eq!(count(&a, "dispute"), 1, "{a:?}");
        let q = a.iter().find(|x| x["action"] == "dispute").unwrap()["dispute_id"].as_u64().unwrap();
        assert_eq!(market.get_dispute(q).await.unwrap().state, DisputeState::Open);

        // Restart: nothing repeated.
        let r = watch().await;
        assert!(r.ok, "{}", r.stderr);
        assert!(actions(&r.stdout).is_empty(), "a restarted watch repeated: {}", r.stdout);
        // Crash right after the dispute's transaction, before its progress was saved:
        // the restarted watch finds its own audit record on chain and repeats nothing.
        match before {
            Some(b) => std::fs::write(&state, b).unwrap(),
            None => std::fs::remove_file(&state).unwrap(),
        }
        let r = watch().await;
        assert!(r.ok, "{}", r.stderr);
        assert_eq!(count(&actions(&r.stdout), "dispute"), 0, "second dispute after a lost state: {}", r.stdout);
        assert_eq!(market.disputes_for_deal(deal, 0).await.unwrap().len(), 1);

        // The node's agent tries epoch 0 and refuses to send a proof that cannot verify.
        let t0 = std::time::Instant::now();
        while !w.node_log().contains("does not match the digest in force") {
            assert!(t0.elapsed().as_secs() < 120, "the agent did not try epoch 0:\n{}", w.node_log());
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        // Epoch 0 ends and the dispute deadline passes; the node could not prove epoch 0
        // (whole blocks) nor answer the dispute.
        let qd = market.get_dispute(q).await.unwrap().deadline;
        let w1 = market.epoch_window(deal, 1).await.unwrap();
        w.dev.warp_to(qd.max(w1.start) + 1).await.unwrap();
        assert_eq!(market.epoch_status(deal, 0).await.unwrap(), EpochStatus::None, "the node proved epoch 0?\n{}", w.node_log());
        let r = watch().await;
        assert!(r.ok, "watch pass 2: {}\n{}", r.stdout, r.stderr);
        let a = actions(&r.stdout);
        assert_eq!(count(&a, "mark-missed"), 1, "{a:?}");
        assert_eq!(count(&a, "slash"), 1, "{a:?}");
        assert_eq!(count(&a, "withdraw"), 1, "{a:?}");
        assert_eq!(market.epoch_status(deal, 0).await.unwrap(), EpochStatus::Missed);
        assert_eq!(market.get_dispute(q).await.unwrap().state, DisputeState::Slashed);
        assert!(market.get_deal(deal).await.unwrap().failures >= 2, "a missed epoch and a lost dispute");
        // And again: nothing repeated.
        let r = watch().await;
        let a = actions(&r.stdout);
        assert_eq!(count(&a, "mark-missed") + count(&a, "slash") + count(&a, "withdraw"), 0, "{a:?}");
    })
    .await;
}
