//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`): requests that
//! must be refused cleanly: a replayed owner write, a digest for an old version, an
//! unknown deal and out-of-range indices. Each refusal is a clear error, nothing
//! changes, and the connection keeps working. See `e2e_harness/mod.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use alloy_primitives::B256;
use dpor_chain::sign_digest;
use dpor_client::node_client::{NodeClient, OwnerAuth};
use dpor_proto::messages::{DealStatus, ErrorCode, OwnerOp, Response, WireDigest, WireError, WireRun};
use harness::{within, World, AUDITOR, BETA, OWNER, PROVIDER};
use serde_bytes::ByteBuf;
use std::time::Duration;

/// The part of a node's deal status an owner write changes (the posted version moves
/// on its own, when the node's chain agent sees a `DigestPosted` log).
fn write_state(s: &DealStatus) -> impl PartialEq + std::fmt::Debug {
    (s.last_nonce, s.write_count, s.rebuild_count, s.root_u, s.c, s.levels.clone(), s.cosigned_version)
}

/// The node's error code inside a client error, if the node answered with one.
fn wire_code(e: &anyhow::Error) -> Option<ErrorCode> {
    e.chain().find_map(|c| c.downcast_ref::<WireError>()).map(|w| w.code)
}

async fn connect(w: &World) -> NodeClient {
    NodeClient::connect(&w.node_addr, Duration::from_secs(30)).await.expect("connect to the node")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_owner_write_is_refused_and_changes_nothing() {
    within(600, async {
        let w = World::start().await;
        w.make_file("file", 16 << 10, 11);
        let deal = w.open_and_upload("file", 16).await;
        let node = connect(&w).await;
        let before = node.status(deal).await.expect("status");

        let key = w.dev.key(OWNER);
        let auth = OwnerAuth { key: &key, chain_id: w.dev.chain_id(), market: w.dev.market(), deal };
        let nonce = before.last_nonce + 1;
        let op = OwnerOp::Write { index: 1, block: ByteBuf::from(vec![7u8; BETA]), sealed_u: B256::repeat_byte(9) };
        let request = auth.sign(nonce, &op).expect("sign");

        let first = node.call(request.clone()).await.expect("the first write is accepted");
        assert!(matches!(first, Response::Written { .. }), "{first:?}");
        let written = node.status(deal).await.expect("status");
        assert_eq!(written.last_nonce, nonce);
        assert_eq!(written.write_count, before.write_count + 1);

        // The very same signed bytes again: refused as a replay, nothing stored.
        let err = node.call(request).await.expect_err("a replayed write must be refused");
        assert_eq!(wire_code(&err), Some(ErrorCode::Replay), "{err:#}");
        assert_eq!(write_state(&node.status(deal).await.expect("status")), write_state(&written), "the replay changed the node's state");

        // A new op under an old nonce: also a replay.
        let other = OwnerOp::Write { index: 2, block: ByteBuf::from(vec![8u8; BETA]), sealed_u: B256::repeat_byte(1) };
        let err = node.call(auth.sign(nonce, &other).expect("sign")).await.expect_err("an old nonce must be refused");
        assert_eq!(wire_code(&err), Some(ErrorCode::Replay), "{err:#}");

        // A fresh nonce signed by someone else than the owner: unauthorized.
        let stranger = w.dev.key(AUDITOR);
        let forged = OwnerAuth { key: &stranger, chain_id: w.dev.chain_id(), market: w.dev.market(), deal };
        let err = node.call(forged.sign(nonce + 1, &other).expect("sign")).await.expect_err("a stranger's write must be refused");
        assert_eq!(wire_code(&err), Some(ErrorCode::Unauthorized), "{err:#}");

        // Nothing changed, and the same connection still serves.
        assert_eq!(write_state(&node.status(deal).await.expect("status after refusals")), write_state(&written));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_for_an_old_version_is_rejected() {
    within(600, async {
        let w = World::start().await;
        w.make_file("file", 16 << 10, 12);
        let deal = w.open_and_upload("file", 16).await;
        std::fs::write(w.path("block"), vec![5u8; BETA]).expect("block");
        w.dpor(OWNER, &["write", "3", w.path("block").to_str().expect("path")]).await.expect_ok("write");
        w.dpor(OWNER, &["checkpoint"]).await.expect_ok("checkpoint v2");

        let market = w.client(OWNER).await;
        let posted = market.digests(deal, 0).await.expect("DigestPosted logs");
        let v1 = posted.iter().find(|p| p.digest.version == 1).expect("v1 in the logs").clone();
        let v2 = posted.iter().find(|p| p.digest.version == 2).expect("v2 in the logs").clone();
        let hash = v1.digest.digest_hash(w.dev.chain_id(), w.dev.market());
        assert_eq!(hash, v1.hash);

        // Both parties' valid signatures over v1, posted again after v2: StaleVersion.
        let owner_sig = sign_digest(&w.dev.key(OWNER), hash).expect("sign");
        let provider_sig = sign_digest(&w.dev.key(PROVIDER), hash).expect("sign");
        let err = market.post_digest(&v1.digest, owner_sig, provider_sig).await.expect_err("an old digest must be rejected");
        assert_eq!(err.revert_name(), Some("StaleVersion"), "{err}");
        assert!(err.to_string().contains("StaleVersion"), "{err}");
        assert_eq!(market.get_deal(deal).await.expect("deal").digest_version, 2);

        // The node will not co-sign a digest of its current state under an old version.
        let node = connect(&w).await;
        let status = node.status(deal).await.expect("status");
        let key = w.dev.key(OWNER);
        let auth = OwnerAuth { key: &key, chain_id: w.dev.chain_id(), market: w.dev.market(), deal };
        let mut stale = v2.digest.clone();
        stale.version = 1;
        let err = node.cosign(&auth, status.last_nonce + 1, WireDigest::from(&stale)).await.expect_err("stale co-sign");
        assert_eq!(wire_code(&err), Some(ErrorCode::StaleVersion), "{err:#}");
        // The connection still works.
        node.status(deal).await.expect("status after the refusal");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_deal_and_out_of_range_requests_get_clear_errors() {
    within(600, async {
        let w = World::start().await;
        let file = w.make_file("file", 16 << 10, 13);
        let deal = w.open_and_upload("file", 16).await;
        let node = connect(&w).await;

        let err = node.status(deal + 100).await.expect_err("unknown deal");
        assert_eq!(wire_code(&err), Some(ErrorCode::UnknownDeal), "{err:#}");
        let err = node.read(deal + 100, 0).await.expect_err("unknown deal");
        assert_eq!(wire_code(&err), Some(ErrorCode::UnknownDeal), "{err:#}");
        let err = node.read(deal, 1 << 30).await.expect_err("index past N");
        assert_eq!(wire_code(&err), Some(ErrorCode::OutOfRange), "{err:#}");
        let err = node.download(deal, 2, 100).await.expect_err("range past N");
        assert_eq!(wire_code(&err), Some(ErrorCode::OutOfRange), "{err:#}");
        let status = node.status(deal).await.expect("status");
        let c = status.c.0;
        let err = node.samples(deal, c, vec![0, 1 << 40]).await.expect_err("position past the run");
        assert_eq!(wire_code(&err), Some(ErrorCode::OutOfRange), "{err:#}");
        let err = node.samples(deal, WireRun { tag: 9, built_at: 12345 }, vec![0]).await.expect_err("no such run");
        assert_eq!(wire_code(&err), Some(ErrorCode::UnknownRun), "{err:#}");

        // The same connection still works, and answers right.
        let (block, _, _) = node.read(deal, 0).await.expect("read after errors");
        assert_eq!(block, &file[..BETA]);

        // The CLI says so clearly too, and exits non-zero.
        let r = w.dpor(AUDITOR, &["audit", &(deal + 100).to_string()]).await;
        assert!(!r.ok && r.stderr.contains("does not exist"), "stderr: {}", r.stderr);
        let r = w.dpor(OWNER, &["read", "99999", "--out", w.path("x").to_str().expect("path")]).await;
        assert!(!r.ok, "reading past N must fail");
        assert!(r.stderr.contains("OutOfRange") || r.stderr.contains("out of range"), "stderr: {}", r.stderr);
    })
    .await;
}
