//! Beacon mode against a real anvil: the market deployed with a `DrandBeacon` keyed by
//! a local beacon (dpor-beacon `LocalBeacon`, the same BLS-on-BN254 verification path
//! as drand evmnet). An epoch's seed is unavailable (`SeedUnavailable`) until the
//! round `roundAt(start)` is recorded; a wrongly signed round is refused; once the
//! right one is recorded the seed is S = keccak(sha256(sig), dealId, e) and the proof
//! passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use dpor_chain::{epoch_block_samples, sample_seed, Devnet, DevnetOptions, EpochStatus, StateFixture};
use dpor_beacon::LocalBeacon;

#[tokio::test]
async fn beacon_seeds_need_the_recorded_round() {
    let local = LocalBeacon::from_seed(b"dpor chain test beacon key 0001").unwrap();
    let (dev, beacon) = Devnet::start_with_beacon(DevnetOptions::default(), local.public_key_words(), 3).await.unwrap();
    let provider = dev.client(1).await.unwrap();
    let owner = dev.client(2).await.unwrap();
    let relay = dev.client(4).await.unwrap();
    let params = owner.params().await.unwrap();
    assert_eq!(params.beacon, beacon);
    assert!(!params.dev_seeds());
    register_provider(&provider).await;
    let deal = open_deal(&owner, provider.account().unwrap()).await;
    provider.accept_deal(deal).await.unwrap();
    let fx = StateFixture::new(BLOCK_BYTES, NUM_BLOCKS, 3, 1).unwrap();
    let d = fx.digest(deal, 1);
    let h = d.digest_hash(dev.chain_id(), dev.market());
    let (o, p) = (dpor_chain::sign_digest(&dev.key(2), h).unwrap(), dpor_chain::sign_digest(&dev.key(1), h).unwrap());
    owner.post_digest(&d, o, p).await.unwrap();

    let w = owner.epoch_window(deal, 0).await.unwrap();
    dev.warp_to(w.start).await.unwrap();
    assert_eq!(provider.epoch_seed(deal, 0).await.unwrap(), None, "round not recorded: no seed");
    let err = provider.touch_seed(deal, 0).await.unwrap_err();
    assert!(err.revert_name().unwrap_or("").starts_with("SeedUnavailable"), "{err}");
    let round = relay.beacon_round_at(beacon, w.start).await.unwrap();
    let t = relay.beacon_round_time(beacon, round).await.unwrap();
    assert!(t >= w.start);
    dev.warp_to(t).await.unwrap();
    // a signature of another round, and one by another key, are refused
    let err = relay.beacon_record(beacon, round, local.sign(round + 1)).await.unwrap_err();
    assert!(err.revert_name().unwrap_or("").starts_with("InvalidSignature"), "{err}");
    let other = LocalBeacon::from_seed(b"another beacon key, not the one").unwrap();
    assert!(relay.beacon_record(beacon, round, other.sign(round)).await.is_err());
    relay.beacon_record(beacon, round, local.sign(round)).await.unwrap();
    let r = relay.beacon_randomness(beacon, round).await.unwrap().unwrap();
    assert_eq!(r.0, dpor_beacon::randomness(&local.sign(round)), "randomness = sha256(sig)");

    let seed = provider.epoch_seed(deal, 0).await.unwrap().unwrap();
    assert_eq!(seed, sample_seed(r, deal, 0));
    assert_eq!(provider.stable_epoch_seed(deal, 0).await.unwrap(), Some(seed), "beacon seeds are final once recorded");
    let proofs = fx.block_proofs(&epoch_block_samples(seed, h, d.numBlocks, d.writeCount, u32::from(SAMPLES))).unwrap();
    provider.submit_epoch_proof(deal, 0, &d, proofs).await.unwrap();
    assert_eq!(provider.epoch_status(deal, 0).await.unwrap(), EpochStatus::Proven);
    assert_eq!(provider.global_seed(params.global_epoch_at(w.start).unwrap()).await.unwrap(), Some(r));
}
