//! Another party's transaction mined between our gas estimate and our transaction must
//! not make ours run out of gas ([`dpor_chain::gas_with_margin`]).
//!
//! The case CI met: the owner shrinks a deal, which credits the surplus collateral to the
//! provider (`owed[provider] += …`). The estimate ran while the provider was owed
//! something (a 2,900-gas `SSTORE`); the provider's node withdrew before the resize was
//! mined, and the credit became a 20,000-gas `SSTORE` from zero (EIP-2200). Sent at the
//! bare estimate, `resizeDeal` was mined and reverted. Here the same order is forced:
//! automine off, the resize in the pool, then the provider's `withdraw` with a higher
//! tip (anvil orders a block by fees), then one block.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use alloy::providers::{Provider, ProviderBuilder};
use common::{setup, E18};
use dpor_chain::{sign_digest, StateFixture, U256};
use dpor_core::digest::Resize;
use std::time::Duration;

#[tokio::test]
async fn a_withdraw_mined_between_estimate_and_resize_does_not_starve_the_resize_of_gas() {
    let s = setup().await;
    s.post(1).await;
    let resize = |num_blocks: usize, version: u64, seed: u8| {
        let fx = StateFixture::new(common::BLOCK_BYTES, num_blocks, 1, seed).unwrap();
        let d = fx.digest(s.deal, version);
        let n = num_blocks as u128;
        let (price, collateral) = (n * E18 / 8, n * 6 * E18 / 8);
        let h = Resize { digest: d.clone(), pricePerEpoch: price, collateral }.signing_hash(s.dev.chain_id(), s.dev.market());
        (d, price, collateral, sign_digest(&s.dev.key(2), h).unwrap(), sign_digest(&s.dev.key(1), h).unwrap())
    };
    // A first shrink (8 → 4) leaves the provider owed the surplus collateral.
    let (d, price, collateral, o, p) = resize(4, 2, 5);
    s.owner.resize_deal(&d, price, collateral, o, p).await.unwrap();
    let provider = s.provider.account().unwrap();
    assert!(s.owner.owed(provider).await.unwrap() > U256::ZERO, "the shrink credits the surplus collateral");
    let before = s.owner.get_deal(s.deal).await.unwrap().collateral;

    let raw = ProviderBuilder::new().connect_http(s.dev.rpc_url().parse().unwrap());
    let _: serde_json::Value = raw.raw_request("evm_setAutomine".into(), (false,)).await.unwrap();
    // The second shrink (4 → 2) is estimated while the provider is still owed 3 tokens.
    let (d, price, collateral, o, p) = resize(2, 3, 6);
    let owner = s.owner.clone();
    let shrink = tokio::spawn(async move { owner.resize_deal(&d, price, collateral, o, p).await });
    let me = s.owner.account().unwrap();
    let latest = raw.get_transaction_count(me).await.unwrap();
    while raw.get_transaction_count(me).pending().await.unwrap() == latest {
        assert!(!shrink.is_finished(), "the resize ended before reaching the pool: {:?}", shrink.await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The provider's withdraw goes first in the block: a 100 gwei tip against the
    // owner's default.
    let withdraw = serde_json::json!({
        "from": provider, "to": s.dev.market(), "data": "0x3ccfd60b", "gas": "0x30000",
        "maxPriorityFeePerGas": "0x174876e800", "maxFeePerGas": "0xe8d4a51000",
    });
    let wtx: dpor_chain::B256 = raw.raw_request("eth_sendTransaction".into(), (withdraw,)).await.unwrap();
    let _: serde_json::Value = raw.raw_request("evm_mine".into(), ()).await.unwrap();
    let _: serde_json::Value = raw.raw_request("evm_setAutomine".into(), (true,)).await.unwrap();

    let result = shrink.await.unwrap();
    let w = raw.get_transaction_receipt(wtx).await.unwrap().expect("the withdraw was mined");
    assert!(w.status(), "the withdraw succeeded");
    assert_eq!(w.transaction_index, Some(0), "the withdraw came first in the block");
    result.expect("the resize has gas for the credit from zero");
    let deal = s.owner.get_deal(s.deal).await.unwrap();
    assert_eq!((deal.num_blocks, deal.digest_version), (2, 3));
    assert_eq!(deal.collateral, 2 * 6 * E18 / 8);
    assert_eq!(s.owner.owed(provider).await.unwrap(), U256::from(before - deal.collateral), "only the second shrink's surplus is owed");
}

#[test]
fn the_margin_is_thirty_percent_and_at_least_forty_thousand_gas_below_the_cap() {
    use dpor_chain::{gas_with_margin, MAX_GAS_LIMIT};
    assert_eq!(gas_with_margin(21_000, MAX_GAS_LIMIT), 61_000);
    assert_eq!(gas_with_margin(200_000, MAX_GAS_LIMIT), 260_000);
    assert_eq!(gas_with_margin(1_000_000, MAX_GAS_LIMIT), 1_300_000);
    assert_eq!(gas_with_margin(29_000_000, MAX_GAS_LIMIT), MAX_GAS_LIMIT);
    assert_eq!(gas_with_margin(1_000_000, 1_100_000), 1_100_000, "a chain's lower block gas limit caps it");
    assert_eq!(gas_with_margin(MAX_GAS_LIMIT + 5, MAX_GAS_LIMIT), MAX_GAS_LIMIT + 5, "an estimate over the cap is sent as it is");
}
