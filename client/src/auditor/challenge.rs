//! Challenges of a provider's committed entry for a deal epoch (docs/COMMITMENTS.md §3),
//! locking the market's bond (`dpor challenge DEAL EPOCH`), and the fault of an
//! unanswered challenge after its deadline (`dpor challenge --fault ID`). Anyone may.
//! `dpor watch` does both by itself when a committed response is missing or wrong.

use super::deal_info;
use crate::session::Session;
use alloy_primitives::{B256, U256};
use anyhow::{bail, Context};
use dpor_chain::ChallengeState;

/// A challenge opened ([`open`]).
#[derive(Debug, Clone)]
pub struct Opened {
    /// Its id.
    pub id: u64,
    /// The deal.
    pub deal: u64,
    /// The deal epoch challenged.
    pub epoch: u64,
    /// The bond locked, token base units.
    pub bond: u128,
    /// The provider must answer before this timestamp.
    pub deadline: u64,
}

/// Opens a challenge of `deal`'s committed entry for deal epoch `epoch`.
///
/// # Errors
/// No such deal, no commitment for the epoch, or the chain refuses.
pub async fn open(ctx: &Session, deal: u64, epoch: u64) -> anyhow::Result<Opened> {
    let d = deal_info(ctx, deal).await?;
    if ctx.market.get_commitment(d.provider, d.start_epoch + epoch).await?.is_none() {
        bail!("provider {} posted no commitment for deal {deal}'s epoch {epoch} (global epoch {}): nothing to challenge (`dpor mark-missed` once its window is over)", d.provider, d.start_epoch + epoch);
    }
    let bond = ctx.market.dispute_bond().await?;
    ctx.market.ensure_allowance(U256::from(bond)).await?;
    let id = ctx.market.challenge_entry(deal, epoch).await.with_context(|| format!("challenging deal {deal} epoch {epoch}"))?;
    let c = ctx.market.get_challenge(id).await?;
    Ok(Opened { id, deal, epoch, bond, deadline: c.deadline })
}

/// A challenge faulted ([`fault`]).
#[derive(Debug, Clone)]
pub struct Faulted {
    /// Its id.
    pub id: u64,
    /// The deal.
    pub deal: u64,
    /// The deal epoch, now missed.
    pub epoch: u64,
    /// The transaction.
    pub tx: B256,
    /// The deal's faults after.
    pub failures: u16,
    /// The deal's collateral left, token base units.
    pub collateral_left: u128,
}

/// Faults challenge `id` after its deadline.
///
/// # Errors
/// No such challenge, not open, before its deadline, or the chain refuses.
pub async fn fault(ctx: &Session, id: u64) -> anyhow::Result<Faulted> {
    let c = ctx.market.get_challenge(id).await.with_context(|| format!("reading challenge {id}"))?;
    match c.state {
        ChallengeState::Open => {}
        ChallengeState::None => bail!("challenge {id} does not exist"),
        ChallengeState::Answered => bail!("challenge {id} was answered by the provider: there is nothing to fault"),
        ChallengeState::Faulted => bail!("challenge {id} was already faulted"),
    }
    let now = ctx.market.latest_timestamp().await?;
    if now <= c.deadline {
        bail!("challenge {id} can be faulted after timestamp {} (the provider may still answer); chain time now {now}", c.deadline);
    }
    let tx = ctx.market.fault_challenge(id).await.with_context(|| format!("faulting challenge {id}"))?;
    let after = deal_info(ctx, c.deal_id).await?;
    Ok(Faulted { id, deal: c.deal_id, epoch: c.epoch, tx, failures: after.failures, collateral_left: after.collateral })
}
