//! What `dpor resize` settles before it asks the node anything (issue 21, item 4): a
//! resize the chain or the node would refuse is refused up front, so the node never
//! rebuilds C for a size whose on-chain step cannot land.
//!
//! - [`check`]: every condition `resizeDeal` (contracts/src/market/DealResize.sol) and
//!   the node's co-signing policy (its ask and collateral rate for N', its capacity)
//!   put on the new size and terms, read from the chain: the deal active with no exit
//!   pending and no dispute open, N' within the provider's free capacity, the price at
//!   least the provider's ask × N', the collateral at most its rate × N', the new
//!   escrow below 2^128, the owner's tokens for the escrow increase and the provider's
//!   for the collateral increase.
//! - [`save`] / [`load`] / [`clear`]: the terms asked for, kept in `<state>.resize-terms`
//!   from before the node resizes until `resizeDeal` lands, so that the on-chain step
//!   finished later (`dpor checkpoint`, or `dpor resize` again) posts those terms and
//!   not the defaults.

use alloy_primitives::{Address, U256};
use anyhow::{ensure, Context};
use dpor_chain::{DealState, Market};
use dpor_core::block::MAX_LOG_BLOCKS;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The terms of an on-chain resize: the new price per epoch and collateral, wei.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResizeTerms {
    /// Price per epoch for N' blocks, wei.
    pub price_per_epoch: u128,
    /// Collateral for N' blocks, wei.
    pub collateral: u128,
}

impl ResizeTerms {
    /// The deal's current per-block price and collateral, scaled from N to N' blocks
    /// (`price_per_epoch`·N'/N, `collateral`·N'/N, rounded down).
    pub fn scaled(price_per_epoch: u128, collateral: u128, from_blocks: u64, to_blocks: u64) -> Self {
        let scale = |v: u128| v.saturating_mul(u128::from(to_blocks)) / u128::from(from_blocks.max(1));
        Self { price_per_epoch: scale(price_per_epoch), collateral: scale(collateral) }
    }
}

/// Refuses, with the reason, a resize of `deal` to `num_blocks` blocks under `terms`
/// that the market's `resizeDeal` or the provider's node would refuse (see the module
/// docs). `owner` is the account that pays the escrow increase; with `mint` (local
/// chain) it is minted first, so its balance is not checked. Reads the chain only.
pub async fn check(market: &Market, deal: u64, owner: Address, num_blocks: u64, terms: ResizeTerms, mint: bool) -> anyhow::Result<()> {
    ensure!(
        num_blocks.is_power_of_two() && num_blocks <= 1u64 << MAX_LOG_BLOCKS,
        "N' = {num_blocks} blocks: a deal's size must be a power of two in 1..=2^{MAX_LOG_BLOCKS}"
    );
    let d = market.get_deal(deal).await.with_context(|| format!("reading deal {deal}"))?;
    ensure!(d.state == DealState::Active, "deal {deal} is {:?} on chain: only an active deal can be resized", d.state);
    ensure!(
        d.num_epochs == d.term_epochs,
        "deal {deal} has an exit pending (its term was cut from {} to {} epochs): the market refuses to resize it (ExitPending)",
        d.term_epochs,
        d.num_epochs
    );
    ensure!(
        d.open_disputes == 0,
        "deal {deal} has {} open dispute(s): the market refuses to resize it until they are settled (DisputesOpen)",
        d.open_disputes
    );
    let p = market.get_provider(d.provider).await.with_context(|| format!("reading provider {}", d.provider))?;
    if num_blocks > d.num_blocks {
        // usedBlocks counts this deal's current N.
        let free = p.capacity_blocks.saturating_sub(p.used_blocks).saturating_add(d.num_blocks);
        ensure!(
            num_blocks <= free,
            "provider {} has room for this deal to grow to {free} blocks (capacity {}, {} in use), not to N' = {num_blocks}",
            d.provider,
            p.capacity_blocks,
            p.used_blocks
        );
    }
    let n = u128::from(num_blocks);
    let ask = p.price_per_block_epoch.saturating_mul(n);
    ensure!(
        terms.price_per_epoch >= ask,
        "a price of {} wei per epoch is below provider {}'s ask for N' = {num_blocks} blocks: at least {ask} ({} per block per epoch × N'); its node would refuse to co-sign the resize",
        terms.price_per_epoch,
        d.provider,
        p.price_per_block_epoch
    );
    let most = p.collateral_per_block.saturating_mul(n);
    ensure!(
        terms.collateral <= most,
        "a collateral of {} wei is above provider {}'s rate for N' = {num_blocks} blocks: at most {most} ({} per block × N'); its node would refuse to co-sign the resize",
        terms.collateral,
        d.provider,
        p.collateral_per_block
    );
    // The market sets escrow := price × the term's unsettled epochs (escrow / old
    // price; at an old price of 0, at most the term).
    let unsettled = d.escrow.checked_div(d.price_per_epoch).unwrap_or(u128::from(d.num_epochs));
    let escrow = U256::from(terms.price_per_epoch) * U256::from(unsettled);
    ensure!(
        escrow <= U256::from(u128::MAX),
        "a price of {} wei per epoch over the {unsettled} unsettled epochs makes an escrow of {escrow} wei, over the market's limit of 2^128 − 1",
        terms.price_per_epoch
    );
    let more = escrow.saturating_sub(U256::from(d.escrow));
    if more > U256::ZERO && !mint {
        let have = market.balance_of(owner).await.context("reading your token balance")?;
        ensure!(
            have >= more,
            "the escrow grows by {more} wei ({} wei per epoch × {unsettled} epochs, less the {} held), but your account {owner} holds {have}",
            terms.price_per_epoch,
            d.escrow
        );
    }
    let locks = terms.collateral.saturating_sub(d.collateral);
    if locks > 0 {
        let have = market.balance_of(d.provider).await.context("reading the provider's token balance")?;
        ensure!(
            have >= U256::from(locks),
            "the collateral grows by {locks} wei, but provider {} holds {have}: its node would refuse to co-sign the resize",
            d.provider
        );
    }
    Ok(())
}

/// The terms of a resize to `num_blocks` blocks, as kept in `<state>.resize-terms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Saved {
    /// N' the terms are for.
    num_blocks: u64,
    /// Price per epoch, wei (a decimal string: JSON numbers lose precision past 2^53).
    price_per_epoch: String,
    /// Collateral, wei (a decimal string).
    collateral: String,
}

/// `<state>.resize-terms`.
fn path(state_path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.resize-terms", state_path.display()))
}

/// Keeps `terms` for a resize to `num_blocks` beside the state file `state_path`
/// (temporary file, fsync, rename), before the node is asked to resize.
pub fn save(state_path: &Path, num_blocks: u64, terms: ResizeTerms) -> anyhow::Result<()> {
    use std::io::Write;
    let saved = Saved { num_blocks, price_per_epoch: terms.price_per_epoch.to_string(), collateral: terms.collateral.to_string() };
    let p = path(state_path);
    let tmp = PathBuf::from(format!("{}.tmp", p.display()));
    {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(serde_json::to_string_pretty(&saved)?.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &p).with_context(|| format!("cannot write {}", p.display()))?;
    Ok(())
}

/// The terms kept for a resize to `num_blocks` (`None` if none are kept, or they are
/// for another size). Errors: an unreadable or malformed file.
pub fn load(state_path: &Path, num_blocks: u64) -> anyhow::Result<Option<ResizeTerms>> {
    let p = path(state_path);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
    };
    let s: Saved = serde_json::from_str(&text).with_context(|| format!("{} is not a resize's terms", p.display()))?;
    if s.num_blocks != num_blocks {
        return Ok(None);
    }
    let num = |v: &str| v.parse::<u128>().with_context(|| format!("{}: {v:?} is not an amount", p.display()));
    Ok(Some(ResizeTerms { price_per_epoch: num(&s.price_per_epoch)?, collateral: num(&s.collateral)? }))
}

/// Forgets the kept terms (the resize landed on chain).
pub fn clear(state_path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path(state_path)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).with_context(|| format!("cannot remove {}", path(state_path).display())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_terms_come_back_only_for_their_size_and_go_when_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("owner.json");
        assert_eq!(load(&state, 8).ok(), Some(None), "nothing kept yet");
        let terms = ResizeTerms { price_per_epoch: u128::MAX - 1, collateral: 12_345 };
        save(&state, 8, terms).unwrap();
        assert_eq!(load(&state, 8).ok(), Some(Some(terms)), "the terms, every digit of a u128 kept");
        assert_eq!(load(&state, 16).ok(), Some(None), "terms of another N' are not these");
        clear(&state).unwrap();
        assert_eq!(load(&state, 8).ok(), Some(None));
        clear(&state).unwrap(); // clearing twice is fine
    }
}
