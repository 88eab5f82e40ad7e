//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`), issue 22
//! (second review): **an owner posts an older co-signed digest whose runs the node
//! garbage-collected, and disputes one of them.**
//!
//! The owner gets the node's signature on state v2 (t = 1: level 0 filled) without
//! posting it, writes once more (t = 2: level 0 is consumed into level 1, so v2's level-0
//! run is no longer in the current state), gets the node's signature on v3, again
//! without posting it, then posts v2 itself (it holds both signatures) and opens a
//! dispute on a sample of v2's level-0 run, which only v2 references.
//!
//! Before the fix the node deleted that run when it co-signed v3 (it pinned only its
//! latest co-signed digest) and could not answer: slashed. Now either the older version
//! can no longer be posted (the node's chain agent posted v3 itself, with the owner's
//! signature that the `Cosign` request carries: `StaleVersion`), or, if the owner's
//! transaction came first, the node still holds the run and answers. Both outcomes are
//! accepted (which one happens is a race between the test and the node's agent); in
//! neither may the node be slashed. A second round then waits for the node to post
//! the newer digest and checks, deterministically, that the older one is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use alloy::signers::SignerSync;
use alloy_primitives::{Bytes, B256};
use dpor_chain::DisputeState;
use dpor_client::node_client::{NodeClient, OwnerAuth};
use dpor_client::owner::flows::next_digest;
use dpor_client::owner_state::OwnerState;
use dpor_proto::messages::WireDigest;
use harness::{pseudo_random, within, World, AUDITOR, BETA, OWNER};
use std::time::{Duration, Instant};

/// Writes one pseudo-random block at `index` with `dpor write`.
async fn write(w: &World, index: u64, seed: u64) {
    std::fs::write(w.path("block"), pseudo_random(BETA, seed)).expect("block file");
    w.dpor(OWNER, &["write", &index.to_string(), w.path("block").to_str().expect("path")])
        .await
        .expect_ok(&format!("write block {index}"));
}

/// The owner's side of a co-signature, outside `dpor checkpoint` (which would post
/// it): the digest of the owner's current state at `version`, the owner's EIP-712
/// signature, and the node's, which the node returns without posting anything.
async fn cosign_without_posting(w: &World, version: u64) -> (dpor_core::digest::Digest, Vec<u8>, Vec<u8>) {
    let path = w.path("owner.json");
    let mut state = OwnerState::load(&path).expect("owner state");
    let key = w.dev.key(OWNER);
    let digest = next_digest(&state, version);
    let hash = digest.digest_hash(state.chain_id, state.market);
    let owner_sig = key.sign_hash_sync(&hash).expect("owner signature").as_bytes().to_vec();
    let node = NodeClient::connect(&w.node_addr, Duration::from_secs(60)).await.expect("connect to the node");
    let auth = OwnerAuth { key: &key, chain_id: state.chain_id, market: state.market, deal: state.deal };
    let nonce = state.next_nonce();
    state.save(&path).expect("save the owner state");
    let (provider_sig, _) = node
        .cosign(&auth, nonce, WireDigest::from(&digest))
        .await
        .unwrap_or_else(|e| panic!("co-signing v{version}: {e:#}"));
    (digest, owner_sig, provider_sig)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_cosigned_digest_posted_by_the_owner_cannot_get_the_node_slashed() {
    within(600, async {
        let w = World::start().await;
        // 32 KiB, β = 4096: N = 8. v1 (t = 0: C only) is posted by the normal path.
        w.make_file("file", 32 << 10, 41);
        let deal = w.open_and_upload("file", 16).await;
        let owner = w.client(OWNER).await;
        assert_eq!(owner.get_deal(deal).await.expect("deal").digest_version, 1);

        // v2: t = 1, level 0 (2 coded blocks) filled; co-signed, not posted.
        write(&w, 3, 1).await;
        let (v2, v2_owner, v2_provider) = cosign_without_posting(&w, 2).await;
        assert_eq!(v2.levelRoots.len(), 1, "v2 has level 0 only");
        // v3: t = 2, level 0 consumed into level 1; co-signed, not posted. The node's
        // state and its latest co-signed digest no longer reference v2's level 0.
        write(&w, 5, 2).await;
        let (v3, v3_owner, v3_provider) = cosign_without_posting(&w, 3).await;
        assert_eq!(v3.writeCount, 2);
        assert_ne!(v3.levelRoots.first(), v2.levelRoots.first(), "v3's level 1 is not v2's level 0");

        // The attack: post v2 with both signatures, dispute a sample of its level 0.
        // The node's agent may post v3 (v2 and v3 wait on it) at any moment around
        // these steps, so what happened is read from the chain, not from one answer.
        let posted = owner.post_digest(&v2, Bytes::from(v2_owner), Bytes::from(v2_provider)).await;
        let latest = owner.get_deal(deal).await.expect("deal").digest_version;
        if let Err(e) = &posted {
            // Refused (StaleVersion), or mined and reverted when the node's v3 landed
            // between this transaction's gas estimate and its inclusion.
            assert!(latest >= 3, "posting v2 failed while the latest version is {latest}: {e}");
        }
        let auditor = w.client(AUDITOR).await;
        let dispute = if latest >= 3 {
            None
        } else {
            eprintln!("e2e: v2 posted by the owner ({:?}); disputing its level 0", posted.as_ref().ok());
            let start = auditor.epoch_window(deal, 0).await.expect("window").start;
            w.dev.warp_to(start).await.expect("warp");
            // Level 0 is run tag 1; position 1 of its 2 coded blocks, chunk 0.
            match auditor.open_dispute(deal, 0, 2, B256::repeat_byte(0x22), 1, 1, 0).await {
                Ok(id) => Some(id),
                Err(e) => {
                    // Only if the node posted v3 in the meantime: v2 can no longer be
                    // disputed (StaleVersion, or reverted after the estimate).
                    let latest = owner.get_deal(deal).await.expect("deal").digest_version;
                    assert!(latest >= 3, "open the dispute on v2's level 0 (latest version {latest}): {e}");
                    None
                }
            }
        };
        match dispute {
            None => {
                // The node posted v3 itself (with the owner's signature of the Cosign).
                let record = owner.digest_record(deal, 3).await.expect("record of v3");
                assert_eq!(record.digest_hash, v3.digest_hash(w.dev.chain_id(), w.dev.market()), "v3 on chain is the co-signed v3");
                eprintln!("e2e: v2 cannot be posted or disputed any more: the node posted v3 itself");
            }
            Some(id) => {
                // The node answers (polled, no fixed wait), or it logs why it cannot.
                let t0 = Instant::now();
                loop {
                    let q = auditor.get_dispute(id).await.expect("dispute");
                    if q.state == DisputeState::Answered {
                        break;
                    }
                    let log = w.node_log();
                    // (This test opens one dispute only: any such line is about it.)
                    let failed = log.lines().find(|l| l.contains("cannot read the disputed block") || l.contains("cannot answer"));
                    if let Some(line) = failed {
                        // Let the deadline pass: the node is slashed.
                        w.dev.warp_to(q.deadline + 1).await.expect("warp");
                        auditor.slash(id).await.expect("slash");
                        panic!(
                            "ATTACK REPRODUCED: the node cannot answer a dispute on v2, an older co-signed digest the owner \
                             posted, and was slashed ({:?}). Node log line:\n{line}",
                            auditor.get_dispute(id).await.expect("dispute").state
                        );
                    }
                    assert!(t0.elapsed() < Duration::from_secs(120), "the node neither answered nor failed:\n{log}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let failures = owner.get_deal(deal).await.expect("deal").failures;
                assert_eq!(failures, 0, "the node answered and has no fault");
            }
        }

        // Between the rounds: v3 goes on chain (the owner posts it unless the node did)
        // and the test waits until the node has seen it, so that no co-signed digest
        // waits when round 2 starts. Otherwise v3 would still wait beside va, the node
        // could post va before vb is co-signed, and vb, alone, would be the owner's to
        // post (CI saw that race: `Store::cosigned_to_post` posts only the newest of
        // two or more waiting digests).
        if let Err(e) = owner.post_digest(&v3, Bytes::from(v3_owner), Bytes::from(v3_provider)).await {
            // The node posted it first (refused, or reverted after the estimate).
            let latest = owner.get_deal(deal).await.expect("deal").digest_version;
            assert_eq!(latest, 3, "posting v3: {e}");
        }
        let node = NodeClient::connect(&w.node_addr, Duration::from_secs(60)).await.expect("connect to the node");
        let t0 = Instant::now();
        loop {
            let st = node.status(deal).await.expect("status");
            assert_eq!(st.cosigned_version, Some(3));
            if st.posted_version == Some(3) {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "the node did not see v3 posted:\n{}", w.node_log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(owner.get_deal(deal).await.expect("deal").digest_version, 3);

        // Round 2, deterministic: two more co-signatures not posted (va, vb); the test
        // waits (polling the chain, no fixed delay) until the node has posted vb
        // itself, with the owner's signature its Cosign carried; then va, whose
        // level-0 run the node may now drop, can no longer be posted. Until vb is
        // co-signed va waits alone, which the node leaves to the owner.
        let cosigned = 3;
        let (va, vb) = (cosigned + 1, cosigned + 2);
        write(&w, 6, 3).await;
        let (da, da_owner, da_provider) = cosign_without_posting(&w, va).await;
        write(&w, 7, 4).await;
        let (db, _, _) = cosign_without_posting(&w, vb).await;
        let t0 = Instant::now();
        while owner.get_deal(deal).await.expect("deal").digest_version < vb {
            assert!(t0.elapsed() < Duration::from_secs(120), "the node did not post v{vb}:\n{}", w.node_log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let record = owner.digest_record(deal, vb).await.expect("record");
        assert_eq!(record.digest_hash, db.digest_hash(w.dev.chain_id(), w.dev.market()), "the node posted the co-signed v{vb}");
        let err = owner
            .post_digest(&da, Bytes::from(da_owner), Bytes::from(da_provider))
            .await
            .expect_err("an older co-signed digest must not be postable once the node posted a newer one");
        assert_eq!(err.revert_name(), Some("StaleVersion"), "{err}");
        assert_eq!(owner.get_deal(deal).await.expect("deal").failures, 0);
        // The owner's own checkpoint still works afterwards (a new version above vb).
        write(&w, 2, 5).await;
        let cp = w.dpor(OWNER, &["checkpoint"]).await.expect_ok("checkpoint after the node posted");
        assert_eq!(cp["version"], vb + 1, "{cp}");
    })
    .await;
}
