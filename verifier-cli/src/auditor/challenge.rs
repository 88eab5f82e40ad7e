//! `dpor challenge DEAL EPOCH`: challenges the provider's committed entry for a deal
//! epoch (docs/COMMITMENTS.md §3), locking the market's bond; `dpor challenge --fault ID`
//! faults an unanswered challenge after its deadline. Anyone may. `dpor watch` does both
//! by itself when a committed response is missing or wrong.

use super::tokens;
use crate::context::Ctx;
use crate::output::Output;
use alloy_primitives::U256;
use anyhow::{bail, Context};
use dpor_chain::ChallengeState;
use serde_json::json;

/// Opens a challenge of `deal`'s committed entry for deal epoch `epoch`.
pub async fn open(ctx: &Ctx, deal: u64, epoch: u64) -> anyhow::Result<Output> {
    let d = super::deal_info(ctx, deal).await?;
    if ctx.market.get_commitment(d.provider, d.start_epoch + epoch).await?.is_none() {
        bail!("provider {} posted no commitment for deal {deal}'s epoch {epoch} (global epoch {}): nothing to challenge (`dpor mark-missed` once its window is over)", d.provider, d.start_epoch + epoch);
    }
    let bond = ctx.market.dispute_bond().await?;
    ctx.market.ensure_allowance(U256::from(bond)).await?;
    let id = ctx.market.challenge_entry(deal, epoch).await.with_context(|| format!("challenging deal {deal} epoch {epoch}"))?;
    let c = ctx.market.get_challenge(id).await?;
    Ok(Output::new(
        format!(
            "challenge {id} opened on deal {deal} epoch {epoch} ({} tokens bonded); the provider must answer on chain before timestamp {}",
            tokens(U256::from(bond)),
            c.deadline
        ),
        json!({"challenge_id": id, "deal": deal, "epoch": epoch, "bond": bond.to_string(), "deadline": c.deadline}),
    ))
}

/// Faults challenge `id` after its deadline.
pub async fn fault(ctx: &Ctx, id: u64) -> anyhow::Result<Output> {
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
    let after = super::deal_info(ctx, c.deal_id).await?;
    Ok(Output::new(
        format!("challenge {id} faulted: deal {} epoch {} missed, {} fault(s), collateral left {} tokens", c.deal_id, c.epoch, after.failures, tokens(U256::from(after.collateral))),
        json!({"challenge_id": id, "deal": c.deal_id, "epoch": c.epoch, "tx": tx, "failures": after.failures, "collateral_left": after.collateral.to_string()}),
    ))
}
