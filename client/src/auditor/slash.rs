//! Slashing the provider of an unanswered dispute after its deadline (`dpor slash`;
//! anyone may; docs/CONTRACTS.md §6–7).

use super::deal_info;
use crate::session::Session;
use alloy_primitives::{Address, B256, U256};
use anyhow::{bail, Context};
use dpor_chain::{DealState, DisputeState};

/// A dispute slashed ([`run`]).
#[derive(Debug, Clone)]
pub struct Slashed {
    /// The deal.
    pub deal: u64,
    /// The transaction.
    pub tx: B256,
    /// Who opened the dispute.
    pub challenger: Address,
    /// What the challenger was credited (share + bond).
    pub to_challenger: U256,
    /// The deal's owner.
    pub owner: Address,
    /// What the owner was credited.
    pub to_owner: U256,
    /// The deal's collateral left, token base units.
    pub collateral_left: u128,
    /// The deal's faults after.
    pub failures: u16,
    /// The deal's state after.
    pub deal_state: DealState,
}

/// Slashes dispute `dispute`.
///
/// # Errors
/// No such dispute, not open, before its deadline, or the chain refuses.
pub async fn run(ctx: &Session, dispute: u64) -> anyhow::Result<Slashed> {
    let q = ctx.market.get_dispute(dispute).await.with_context(|| format!("reading dispute {dispute}"))?;
    match q.state {
        DisputeState::Open => {}
        DisputeState::None => bail!("dispute {dispute} does not exist"),
        DisputeState::Answered => bail!("dispute {dispute} was answered by the provider: there is nothing to slash"),
        DisputeState::Slashed => bail!("dispute {dispute} was already slashed"),
    }
    let now = ctx.market.latest_timestamp().await?;
    if now <= q.deadline {
        bail!("dispute {dispute} can be slashed after timestamp {} (the provider may still answer); chain time now {now}", q.deadline);
    }
    let d = deal_info(ctx, q.deal_id).await?;
    let challenger0 = ctx.market.owed(q.challenger).await?;
    let owner0 = ctx.market.owed(d.owner).await?;
    let tx = ctx.market.slash(dispute).await.with_context(|| format!("slashing dispute {dispute}"))?;
    let challenger1 = ctx.market.owed(q.challenger).await?;
    let owner1 = ctx.market.owed(d.owner).await?;
    let after = deal_info(ctx, q.deal_id).await?;
    Ok(Slashed {
        deal: q.deal_id,
        tx,
        challenger: q.challenger,
        to_challenger: challenger1.saturating_sub(challenger0),
        owner: d.owner,
        to_owner: owner1.saturating_sub(owner0),
        collateral_left: after.collateral,
        failures: after.failures,
        deal_state: after.state,
    })
}
