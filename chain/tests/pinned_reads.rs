//! [`dpor_chain::Market::at_block`]: every contract read of the pinned client is made at
//! that block, whatever was mined since (the dashboard's collector reads a deal's epochs
//! at the block its payment logs end at, so that it never shows an epoch proven before
//! its pay).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{setup, E18};
use dpor_chain::U256;

#[tokio::test]
async fn a_client_pinned_to_a_block_reads_the_state_of_that_block() {
    let s = setup().await;
    let me = s.owner.account().unwrap();
    let block = s.owner.block_number().await.unwrap();
    let (balance, deal) = (s.owner.balance_of(me).await.unwrap(), s.owner.get_deal(s.deal).await.unwrap());
    let pinned = s.owner.at_block(block);
    // Two changes after `block`: a mint (the token) and a posted digest (the market).
    s.owner.mint(me, U256::from(5 * E18)).await.unwrap();
    s.post(1).await;
    assert!(s.owner.block_number().await.unwrap() > block);
    assert_eq!(s.owner.balance_of(me).await.unwrap(), balance + U256::from(5 * E18), "the latest state has the mint");
    assert_eq!(s.owner.get_deal(s.deal).await.unwrap().digest_version, 1, "and the digest");
    assert_eq!(pinned.balance_of(me).await.unwrap(), balance, "the pinned client reads the balance at `block`");
    let then = pinned.get_deal(s.deal).await.unwrap();
    assert_eq!((then.digest_version, then.escrow), (deal.digest_version, deal.escrow), "and the deal at `block`");
    assert_eq!(deal.digest_version, 0);
    // A clone of the pinned client stays pinned; the original is not.
    assert_eq!(pinned.clone().balance_of(me).await.unwrap(), balance);
    assert_ne!(s.owner.balance_of(me).await.unwrap(), balance);
}
