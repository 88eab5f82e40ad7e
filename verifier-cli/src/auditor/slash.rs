//! `dpor slash DISPUTE`: slashes the provider of an unanswered dispute after its
//! deadline (anyone may; docs/CONTRACTS.md §6–7).

use super::{deal_info, tokens};
use crate::context::Ctx;
use crate::output::Output;
use alloy_primitives::U256;
use anyhow::{bail, Context};
use dpor_chain::DisputeState;
use serde_json::json;

/// Runs `slash`.
pub async fn run(ctx: &Ctx, dispute: u64) -> anyhow::Result<Output> {
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
    let to_challenger = challenger1.saturating_sub(challenger0);
    let to_owner = owner1.saturating_sub(owner0);
    let after = deal_info(ctx, q.deal_id).await?;
    Ok(Output::new(
        format!(
            "dispute {dispute} slashed (deal {}): challenger {} credited {} tokens (share + bond), owner {} credited {}; collateral left {} tokens, {} fault(s), deal {:?}",
            q.deal_id,
            q.challenger,
            tokens(to_challenger),
            d.owner,
            tokens(to_owner),
            tokens(U256::from(after.collateral)),
            after.failures,
            after.state
        ),
        json!({
            "dispute_id": dispute, "deal": q.deal_id, "tx": tx, "challenger": q.challenger,
            "to_challenger": to_challenger.to_string(), "owner": d.owner, "to_owner": to_owner.to_string(),
            "collateral_left": after.collateral.to_string(), "failures": after.failures, "deal_state": format!("{:?}", after.state),
        }),
    ))
}
