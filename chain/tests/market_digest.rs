//! Digests against a real anvil: the contract's hash equals core's, a dual-signed
//! digest is accepted and read back from the logs (and with cast), stale versions and
//! wrong signers are rejected by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use dpor_chain::{sign_digest, ChainError, DealState, Market};

#[tokio::test]
async fn digest_hash_matches_core_and_post_round_trips() {
    let s = setup().await;
    let deal = s.owner.get_deal(s.deal).await.unwrap();
    assert_eq!(deal.state, DealState::Active);
    assert_eq!(deal.num_blocks, NUM_BLOCKS as u64);
    assert!(deal.accepted_at > 0);
    assert!(!deal.has_digest());

    let d = s.fixture.digest(s.deal, 1);
    assert_eq!(d.levelRoots.len(), 2, "3 writes fill levels 0 and 1");
    // core's EIP-712 hash == the contract's digestHash view (the conversion is exact).
    let core_hash = d.digest_hash(s.dev.chain_id(), s.dev.market());
    assert_eq!(s.owner.digest_hash(&d).await.unwrap(), core_hash);

    assert_eq!(s.owner.latest_digest(s.deal).await.unwrap(), None);
    let (d, h) = s.post(1).await;
    assert_eq!(h, core_hash);
    assert_eq!(s.owner.latest_digest(s.deal).await.unwrap(), Some((d.clone(), h)));
    // an independent reader (no signer) sees the same
    let reader = Market::connect(s.dev.rpc_url(), s.dev.market(), None).await.unwrap();
    assert_eq!(reader.digest_by_hash(s.deal, h, 0).await.unwrap(), Some(d.clone()));
    let deal = reader.get_deal(s.deal).await.unwrap();
    assert_eq!((deal.digest_version, deal.digest_hash, deal.write_count), (1, h, 3));
    // and a transaction from a reader without a key is refused locally
    assert!(matches!(reader.withdraw().await, Err(ChainError::NoSigner(_))));

    // a newer version replaces it
    let (d2, h2) = s.post(2).await;
    assert_eq!(s.owner.latest_digest(s.deal).await.unwrap(), Some((d2, h2)));
    assert_eq!(s.owner.digests(s.deal, 0).await.unwrap().len(), 2);
}

#[tokio::test]
async fn stale_and_badly_signed_digests_are_rejected_by_name() {
    let s = setup().await;
    s.post(2).await;

    // an old version
    let old = s.fixture.digest(s.deal, 1);
    let (o, p) = s.sign(&old);
    let err = s.owner.post_digest(&old, o, p).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("StaleVersion"), "{err}");
    assert_eq!(err.to_string(), "the contract rejected postDigest: StaleVersion");

    // provider signature by the wrong key (account 5)
    let d = s.fixture.digest(s.deal, 3);
    let h = d.digest_hash(s.dev.chain_id(), s.dev.market());
    let good_owner = sign_digest(&s.dev.key(2), h).unwrap();
    let good_provider = sign_digest(&s.dev.key(1), h).unwrap();
    let wrong = sign_digest(&s.dev.key(5), h).unwrap();
    let err = s.owner.post_digest(&d, good_owner.clone(), wrong.clone()).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("BadProviderSignature"), "{err}");
    let err = s.owner.post_digest(&d, wrong, good_provider.clone()).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("BadOwnerSignature"), "{err}");
    // signatures swapped between the parties
    let err = s.owner.post_digest(&d, good_provider.clone(), good_owner.clone()).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("BadOwnerSignature"), "{err}");
    // a digest signed for another chain id is not this chain's
    let other_chain = d.digest_hash(1, s.dev.market());
    let err = s
        .owner
        .post_digest(&d, sign_digest(&s.dev.key(2), other_chain).unwrap(), sign_digest(&s.dev.key(1), other_chain).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.revert_name(), Some("BadOwnerSignature"), "{err}");

    // the right pair still works
    s.owner.post_digest(&d, good_owner, good_provider).await.unwrap();
    assert_eq!(s.owner.get_deal(s.deal).await.unwrap().digest_version, 3);
}

#[tokio::test]
async fn cast_reads_back_what_the_client_wrote() {
    let s = setup().await;
    let (_, h) = s.post(1).await;
    // The real cast: its npm wrapper exits 0 whatever cast returns.
    let cast = dpor_chain::foundry_binary(&dpor_chain::devnet::repo_root(), "cast").unwrap();
    let sig = "getDeal(uint256)((address,uint32,uint32,uint16,uint8,uint8,address,uint64,uint16,uint16,uint64,uint64,uint64,uint64,bytes32,uint128,uint128,uint128,uint128,uint64,uint32,uint32))";
    let out = std::process::Command::new(&cast)
        .args(["call", "--rpc-url", s.dev.rpc_url(), &s.dev.market().to_string(), sig, &s.deal.to_string(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = if v[0].is_array() { &v[0] } else { &v };
    assert_eq!(t[5].as_u64().or_else(|| t[5].as_str().and_then(|x| x.parse().ok())), Some(2), "state Active: {t}");
    assert_eq!(t[6].as_str().unwrap().to_lowercase(), format!("{:?}", s.provider.account().unwrap()));
    assert_eq!(t[11].to_string().trim_matches('"'), "1", "digestVersion");
    assert_eq!(t[14].as_str().unwrap(), h.to_string(), "digestHash");
    assert_eq!(t[21].to_string().trim_matches('"'), "5", "termEpochs");

    let out = std::process::Command::new(&cast)
        .args(["call", "--rpc-url", s.dev.rpc_url(), &s.dev.token().to_string(), "balanceOf(address)(uint256)"])
        .arg(s.owner.account().unwrap().to_string())
        .output()
        .unwrap();
    let bal = s.owner.balance_of(s.owner.account().unwrap()).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.split_whitespace().next().unwrap(), bal.to_string());
}
