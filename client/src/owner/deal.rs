//! Opening a deal (`dpor deal open`, and each shard's deal in dispersal): everything
//! the market and the node would refuse is refused here, before any transaction
//! (issue 21 #4); then the escrow is approved (minted first on a local chain if asked),
//! `openDeal` sent, and a fresh owner state written to the session's state file.

use crate::owner_state::{DealParams, OwnerState};
use crate::session::Session;
use alloy_primitives::{Address, B256, U256};
use anyhow::{bail, ensure, Context};
use dpor_chain::Market;
use dpor_core::block::{MAX_BLOCK_BYTES, MAX_EPOCH_PROOF_DATA_BYTES, MAX_LOG_BLOCKS};
use std::path::PathBuf;
use std::time::Duration;

/// What to open: the `deal open` command's arguments.
#[derive(Debug, Clone)]
pub struct OpenDeal {
    /// The provider.
    pub provider: Address,
    /// Size the deal for this file (N = blocks it needs, rounded up to a power of two).
    pub file: Option<PathBuf>,
    /// N, blocks (a power of two); used when `file` is not given.
    pub blocks: Option<u64>,
    /// β, bytes per block.
    pub block_bytes: u32,
    /// λ, audit samples per run.
    pub lambda: u16,
    /// K, whole coded blocks per epoch proof.
    pub samples: u8,
    /// Term in epochs.
    pub epochs: u32,
    /// Price per block per epoch, token base units (default: the provider's ask).
    pub price: Option<u128>,
    /// Least collateral per block the provider must lock (default: its own rate).
    pub min_collateral: Option<u128>,
    /// Local chain only: mint the escrow with the test token first.
    pub mint: bool,
    /// Levels of H whose σ the owner caches.
    pub cache_levels: u32,
    /// Levels of H whose coded blocks the owner keeps.
    pub block_cache_levels: u32,
    /// Overwrite an existing state file.
    pub force: bool,
}

/// A deal opened.
#[derive(Debug, Clone)]
pub struct Opened {
    /// Its id.
    pub deal: u64,
    /// Its provider.
    pub provider: Address,
    /// N, blocks.
    pub num_blocks: u64,
    /// β, bytes per block.
    pub block_bytes: u32,
    /// Term in epochs.
    pub epochs: u32,
    /// Escrow paid, price·N·epochs (token base units).
    pub escrow: u128,
}

/// Opens the deal `req` describes and writes its owner state to `session.state_path`.
///
/// # Errors
/// The state file exists (without `force`), no key, a size or terms the market or the
/// provider would refuse, too few tokens, or a failed transaction.
pub async fn open(session: &Session, req: &OpenDeal) -> anyhow::Result<Opened> {
    if session.state_path.exists() && !req.force {
        bail!("{} already exists (another deal's state); pass --force or --state NEW", session.state_path.display());
    }
    let key = session.key()?;
    let n = match (&req.file, req.blocks) {
        (Some(f), _) => {
            let meta = std::fs::metadata(f).with_context(|| format!("cannot read {}", f.display()))?;
            ensure!(meta.is_file(), "{} is not a regular file (a directory?): --file sizes the deal for one file", f.display());
            let len = meta.len();
            ensure!(len > 0, "{} is empty", f.display());
            len.div_ceil(req.block_bytes as u64).next_power_of_two()
        }
        (None, Some(b)) => b,
        (None, None) => bail!("give --file or --blocks"),
    };
    ensure!(n.is_power_of_two(), "N = {n} is not a power of two");
    check_deal_shape(n, req.block_bytes, req.samples, req.lambda, req.epochs)?;
    let provider = req.provider;
    let p = session.market.get_provider(provider).await?;
    ensure!(p.registered, "{provider} is not a registered provider");
    let price = req.price.unwrap_or(p.price_per_block_epoch);
    let escrow = check_deal_terms(session, provider, &p, n, req.epochs, price, req.min_collateral, req.mint).await?;
    if req.mint {
        session.market.mint(key.address(), U256::from(escrow)).await.context("minting test tokens")?;
    }
    session.market.approve_market(U256::from(escrow)).await.context("approving the escrow")?;
    let min_collateral = req.min_collateral.unwrap_or(p.collateral_per_block);
    let deal = session.market.open_deal(provider, n, req.block_bytes, req.lambda, req.samples, req.epochs, price, min_collateral).await?;
    let seed: [u8; 32] = rand::random();
    let params = DealParams {
        deal,
        chain_id: session.market.chain_id(),
        market: session.market.address(),
        provider,
        num_blocks: n,
        block_bytes: req.block_bytes,
        lambda: req.lambda as u32,
    };
    let mut state = OwnerState::new(params, B256::from(seed), req.cache_levels, req.block_cache_levels);
    state.save(&session.state_path)?;
    Ok(Opened { deal, provider, num_blocks: n, block_bytes: req.block_bytes, epochs: req.epochs, escrow })
}

/// Refuses deal parameters no deal can have: N above 2^[`MAX_LOG_BLOCKS`] (what the
/// code supports: 2N coded blocks within the field's two-adicity; the market's own
/// limit, 2^40, is higher), β outside 1..=[`MAX_BLOCK_BYTES`], β·K above
/// [`MAX_EPOCH_PROOF_DATA_BYTES`] (K = `samples`, 0 meaning 1: the epoch proofs would
/// not fit a transaction), λ or the term 0.
fn check_deal_shape(n: u64, block_bytes: u32, samples: u8, lambda: u16, epochs: u32) -> anyhow::Result<()> {
    ensure!(
        n <= 1u64 << MAX_LOG_BLOCKS,
        "N = {n} blocks is more than a deal can hold: at most 2^{MAX_LOG_BLOCKS} = {} blocks (the code needs 2N ≤ 2^32)",
        1u64 << MAX_LOG_BLOCKS
    );
    ensure!(block_bytes >= 1 && block_bytes as usize <= MAX_BLOCK_BYTES, "--block-bytes {block_bytes}: β must be in 1..={MAX_BLOCK_BYTES}");
    let k = u64::from(samples.max(1));
    ensure!(
        u64::from(block_bytes) * k <= MAX_EPOCH_PROOF_DATA_BYTES,
        "--block-bytes {block_bytes} with --samples {k}: β·K = {} bytes is more than the {MAX_EPOCH_PROOF_DATA_BYTES} an epoch proof may carry (its whole coded blocks must fit one transaction); use smaller blocks or fewer samples",
        u64::from(block_bytes) * k
    );
    ensure!(lambda >= 1, "--lambda 0: an audit needs at least one sample per run");
    ensure!(epochs >= 1, "--epochs 0: a deal lasts at least one epoch");
    Ok(())
}

/// Refuses a deal of `n` blocks for `epochs` epochs at `price` with `provider` (record
/// `p`) that the market's `openDeal` or `acceptDeal` would refuse, or whose escrow the
/// owner cannot pay (unless `mint`): N within the provider's free capacity, the price
/// at least its ask, its collateral rate at least `min_collateral`, escrow and
/// collateral below 2^128. Returns the escrow, price·N·epochs.
#[allow(clippy::too_many_arguments)]
async fn check_deal_terms(
    session: &Session,
    provider: Address,
    p: &dpor_chain::ProviderInfo,
    n: u64,
    epochs: u32,
    price: u128,
    min_collateral: Option<u128>,
    mint: bool,
) -> anyhow::Result<u128> {
    let free = p.capacity_blocks.saturating_sub(p.used_blocks);
    ensure!(
        n <= free,
        "provider {provider} has room for {free} more blocks (capacity {}, {} in use): it cannot accept a deal of N = {n} blocks",
        p.capacity_blocks,
        p.used_blocks
    );
    ensure!(
        price >= p.price_per_block_epoch,
        "a price of {price} per block per epoch is below provider {provider}'s ask of {}",
        p.price_per_block_epoch
    );
    if let Some(m) = min_collateral {
        ensure!(
            p.collateral_per_block >= m,
            "provider {provider} locks {} collateral per block, less than the --min-collateral {m} you ask",
            p.collateral_per_block
        );
    }
    ensure!(
        p.collateral_per_block.checked_mul(u128::from(n)).is_some(),
        "the collateral of N = {n} blocks at {} per block is over the market's limit of 2^128 − 1",
        p.collateral_per_block
    );
    let escrow = price
        .checked_mul(u128::from(n))
        .and_then(|x| x.checked_mul(u128::from(epochs)))
        .with_context(|| format!("the escrow of {price} × N = {n} × {epochs} epochs is over the market's limit of 2^128 − 1"))?;
    if !mint {
        let owner = session.key()?.address();
        let have = session.market.balance_of(owner).await.context("reading your token balance")?;
        ensure!(
            have >= U256::from(escrow),
            "the escrow is {escrow} (price {price} × N = {n} blocks × {epochs} epochs), but your account {owner} holds {have} tokens"
        );
    }
    Ok(escrow)
}

/// Waits up to a minute for the provider to accept `deal`, polling every 250 ms.
///
/// Gives up at once when the deal can no longer be accepted: the provider's free
/// capacity (`capacityBlocks − usedBlocks`) has fallen below the deal's N blocks, so
/// its `acceptDeal` would revert with `CapacityExceeded` (other owners' deals, opened
/// at the same time against the same free space, were accepted first: `openDeal`
/// reserves nothing). The caller cancels the deal (`cancelDeal`, the escrow comes
/// back) and picks another provider.
///
/// # Errors
/// The deal is neither open nor active, its provider has no room left for it, the
/// chain cannot be read, or a minute passed.
pub async fn wait_active(market: &Market, deal: u64) -> anyhow::Result<()> {
    for _ in 0..240 {
        let d = market.get_deal(deal).await?;
        match d.state {
            dpor_chain::DealState::Active => return Ok(()),
            dpor_chain::DealState::Open => {
                let p = market.get_provider(d.provider).await?;
                let free = p.capacity_blocks.saturating_sub(p.used_blocks);
                // Read again: the node may have accepted between the two reads.
                if free < d.num_blocks && market.get_deal(deal).await?.state == dpor_chain::DealState::Open {
                    bail!(
                        "provider {} has {free} free blocks left, deal {deal} needs {}: other deals took its capacity first",
                        d.provider,
                        d.num_blocks
                    );
                }
                tokio::time::sleep(Duration::from_millis(250)).await
            }
            other => bail!("deal {deal} is {other:?}, not active"),
        }
    }
    bail!("the provider has not accepted deal {deal} after a minute")
}
